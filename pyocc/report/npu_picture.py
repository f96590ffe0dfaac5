"""The NPU scratchpad schedule as a picture: both memories and the DMA between them.

Time (simulated cycles) runs to the right. The top panel is the SRAM: each
buffer a rectangle from its allocation to its release (x) over its bytes
(y), coloured by what it holds (a weight, a graph input or output, an
activation). Below it, the DRAM spill area: each activation written back,
from its first store to its last load, at its planned DRAM offset. The
two lanes at the bottom are the DRAM port, loads (DRAM -> SRAM) above and
write-backs (SRAM -> DRAM) below, and the compute unit: a bar per op or
tile. Where the compute lane has gaps, the NPU waits for a transfer.
Two dashed lines cross the lanes: the bound (the MACs or the DRAM lower
bound alone) and the floor (the cycles no schedule beats,
`NpuResult.floor_cycles`); what lies between the floor and the end is
what a better schedule could still win.

`render_npu_svg` returns a standalone SVG document built from a
`pyocc.planning.scratchpad.NpuResult`; pure string building, every text
escaped.
"""

from __future__ import annotations

from html import escape

from pyocc.planning.npu_simulator import Alloc, Free, Load, Store
from pyocc.planning.scratchpad import NpuResult

WIDTH, HEIGHT = 1280, 760
LEFT, RIGHT, TOP = 90, 170, 70
SRAM_HEIGHT, DRAM_HEIGHT, LANE = 360, 120, 34
"""Canvas, margins and panel heights in pixels."""

KIND_COLOURS = {"weight": "#4e79a7", "input": "#59a14f", "output": "#59a14f", "activation": "#f28e2b"}
LOAD_COLOUR, STORE_COLOUR, COMPUTE_COLOUR = "#4e79a7", "#e15759", "#76b7b2"


def _tensor(label: str) -> str:
    """The tensor of a `tensor:part` label."""
    return label.rsplit(":", 1)[0]


def render_npu_svg(result: NpuResult, title: str = "") -> str:
    """The picture of `result`'s schedule (see the module docstring)."""
    if result.schedule is None:
        raise ValueError("the result carries no schedule to draw")
    sim = result.simulation
    end = max(1, sim.cycles)
    plot = WIDTH - LEFT - RIGHT

    def x(cycle: int) -> float:
        return LEFT + plot * cycle / end

    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="24" font-size="16">{escape(title or "npu scratchpad schedule")}</text>',
        f'<text x="{LEFT}" y="44">{result.sram_size:,d} B SRAM, {sim.cycles:,d} cycles '
        f'(bound {result.bound_cycles:,d}, floor {result.floor_cycles:,d}), {sim.dram_bytes:,d} B over the DRAM port '
        f'(bound {result.dram_lower_bound_bytes:,d}), {len(sim.transfers):,d} transfers</text>',
    ]
    # SRAM: buffers over time
    sram_top, sram = TOP, max(1, result.sram_size)
    out.append(f'<rect x="{LEFT}" y="{sram_top}" width="{plot}" height="{SRAM_HEIGHT}" fill="none" stroke="#888"/>')
    out.append(f'<text x="{LEFT - 8}" y="{sram_top + 12}" text-anchor="end">SRAM</text>')
    out.append(f'<text x="{LEFT - 8}" y="{sram_top + SRAM_HEIGHT}" text-anchor="end">0</text>')
    opened: dict[str, tuple[int, str]] = {}
    boxes: list[tuple[int, int, int, int, str]] = []
    holds: dict[str, str] = {}
    for index, ins in enumerate(result.schedule.instructions):
        if isinstance(ins, Load | Store):
            holds.setdefault(ins.buffer.name, ins.piece.tensor)
        elif isinstance(ins, Alloc):
            opened[ins.buffer.name] = (sim.issued[index], ins.buffer.name)
        elif isinstance(ins, Free) and ins.buffer.name in opened:
            start, _ = opened.pop(ins.buffer.name)
            boxes.append((start, sim.issued[index], ins.buffer.offset, ins.buffer.size, ins.buffer.name))
    for name, (start, _) in opened.items():  # never freed: live to the end
        buffer = next(i.buffer for i in result.schedule.instructions if isinstance(i, Alloc) and i.buffer.name == name)
        boxes.append((start, end, buffer.offset, buffer.size, name))
    for start, stop, offset, size, name in boxes:
        # a buffer's label is b<n>:<tensor>:<part>: its tensor names its kind
        tensor = holds.get(name) or name.split(":", 1)[-1].rsplit(":", 1)[0]
        colour = KIND_COLOURS.get(result.kinds.get(tensor, "activation"), "#bab0ac")
        y = sram_top + SRAM_HEIGHT * (1 - (offset + size) / sram)
        out.append(f'<rect x="{x(start):.1f}" y="{y:.1f}" width="{max(0.5, x(stop) - x(start)):.1f}" '
                   f'height="{max(0.5, SRAM_HEIGHT * size / sram):.1f}" fill="{colour}" fill-opacity="0.75" '
                   f'stroke="white" stroke-width="0.3"><title>{escape(name)}: {size:,d} B at {offset:,d}, '
                   f'cycles {start:,d}-{stop:,d}</title></rect>')
    # DRAM spill area: each written-back activation from its first store to its last load
    dram_top = sram_top + SRAM_HEIGHT + 30
    offsets = result.schedule.dram_offsets
    spans: dict[str, list[int]] = {}
    for _, label, _, start, stop in sim.transfers:
        tensor = _tensor(label)
        if tensor in offsets:
            spans.setdefault(tensor, [start, stop])[1] = stop
    sizes = result.sizes
    spill = max((offsets[t] + sizes[t] for t in spans), default=0)
    out.append(f'<rect x="{LEFT}" y="{dram_top}" width="{plot}" height="{DRAM_HEIGHT}" fill="none" stroke="#888"/>')
    out.append(f'<text x="{LEFT - 8}" y="{dram_top + 12}" text-anchor="end">DRAM</text>')
    out.append(f'<text x="{LEFT - 8}" y="{dram_top + 26}" text-anchor="end">spills</text>')
    for tensor, (start, stop) in spans.items():
        y = dram_top + DRAM_HEIGHT * (1 - (offsets[tensor] + sizes[tensor]) / max(1, spill))
        out.append(f'<rect x="{x(start):.1f}" y="{y:.1f}" width="{max(0.5, x(stop) - x(start)):.1f}" '
                   f'height="{max(0.5, DRAM_HEIGHT * sizes[tensor] / max(1, spill)):.1f}" '
                   f'fill="{KIND_COLOURS["activation"]}" fill-opacity="0.6" stroke="white" stroke-width="0.3">'
                   f'<title>{escape(tensor)} at DRAM offset {offsets[tensor]:,d}</title></rect>')
    # lanes: loads, write-backs, compute
    lanes_top = dram_top + DRAM_HEIGHT + 30
    for row, name in enumerate(("loads", "write-backs", "compute")):
        y = lanes_top + row * LANE
        out.append(f'<text x="{LEFT - 8}" y="{y + LANE / 2 + 4}" text-anchor="end">{name}</text>')
        out.append(f'<line x1="{LEFT}" y1="{y + LANE}" x2="{LEFT + plot}" y2="{y + LANE}" stroke="#ddd"/>')
    for direction, label, nbytes, start, stop in sim.transfers:
        row, colour = (0, LOAD_COLOUR) if direction == "load" else (1, STORE_COLOUR)
        out.append(f'<rect x="{x(start):.1f}" y="{lanes_top + row * LANE + 4}" '
                   f'width="{max(0.5, x(stop) - x(start)):.1f}" height="{LANE - 8}" fill="{colour}" stroke="white" '
                   f'stroke-width="0.3"><title>{direction} {escape(label)}: {nbytes:,d} B, cycles {start:,d}-{stop:,d}'
                   f'</title></rect>')
    for op, start, stop in sim.computes:
        out.append(f'<rect x="{x(start):.1f}" y="{lanes_top + 2 * LANE + 4}" '
                   f'width="{max(0.5, x(stop) - x(start)):.1f}" height="{LANE - 8}" fill="{COMPUTE_COLOUR}" '
                   f'stroke="white" stroke-width="0.3"><title>{escape(op)}: cycles {start:,d}-{stop:,d}</title></rect>')
    for name, cycle in (("bound", result.bound_cycles), ("floor", result.floor_cycles)):
        if 0 < cycle <= end:
            out.append(f'<line x1="{x(cycle):.1f}" y1="{lanes_top - 6}" x2="{x(cycle):.1f}" '
                       f'y2="{lanes_top + 3 * LANE}" stroke="#333" stroke-dasharray="4 3">'
                       f'<title>{name}: {cycle:,d} cycles</title></line>')
            out.append(f'<text x="{x(cycle):.1f}" y="{lanes_top - 10 - 12 * (name == "floor")}" '
                       f'text-anchor="middle">{name}</text>')
    axis = lanes_top + 3 * LANE + 18
    for k in range(5):
        cycle = end * k // 4
        out.append(f'<text x="{x(cycle):.1f}" y="{axis}" text-anchor="middle">{cycle:,d}</text>')
    out.append(f'<text x="{LEFT + plot / 2}" y="{axis + 18}" text-anchor="middle">cycles</text>')
    legend = [("weight", KIND_COLOURS["weight"]), ("graph input/output", KIND_COLOURS["input"]),
              ("activation", KIND_COLOURS["activation"]), ("load", LOAD_COLOUR), ("write-back", STORE_COLOUR),
              ("compute", COMPUTE_COLOUR)]
    for k, (name, colour) in enumerate(legend):
        y = TOP + 10 + k * 20
        out.append(f'<rect x="{WIDTH - RIGHT + 16}" y="{y}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 34}" y="{y + 10}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"

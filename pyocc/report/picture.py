"""A memory plan as a picture: time to the right, addresses upwards.

Each intermediate buffer is a rectangle: it spans the ops from its producer
to its last consumer (x) and its bytes in the pool (y). Two rectangles never
overlap in a valid plan; empty space under the top of the pool is memory the
plan wastes at that moment. Two horizontal lines frame the result: the
max-live lower bound (no plan of this op order can be lower) and the pool
size (what the plan uses). The dotted vertical line marks the peak, the op
where most bytes are live (`pyocc plan --explain` lists them).

`render_svg` returns a standalone SVG document; `render_html` wraps it in a
self-contained page (no external scripts or styles) that shows a buffer's
name, size, offset, live range, shape, dtype, producer and consumers on
hover and highlights its producer in the op list beside the picture.

Pure string building from a `Timeline`; every text is escaped.
"""

from __future__ import annotations

import json
import math
from html import escape

from pyocc.report.timeline import BufferBox, Timeline
from pyocc.units import format_bytes, plural, unit_for

MIB = 2**20

WIDTH, HEIGHT = 1280, 720
LEFT, RIGHT, TOP, BOTTOM = 80, 210, 100, 96
"""Canvas size and margins in pixels; the plot is what is left inside."""

PALETTE = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
]
"""Fill colours by producer kind (Tableau 10), most bytes first."""

BOUND_COLOUR, POOL_COLOUR, PEAK_COLOUR = "#c0392b", "#1f3a93", "#555555"


def _e(text: object) -> str:
    """Escape text for XML/HTML content and attribute values."""
    return escape(str(text), quote=True)




def nice_step(span: float, ticks: int) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about
    `ticks` ticks over `span`."""
    if span <= 0:
        return 1.0
    raw = span / max(ticks, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * power >= raw:
            return factor * power
    return 10 * power


def kind_of(timeline: Timeline, b: BufferBox) -> str:
    """The colour key of a buffer: the stage of the network that produced it,
    told by its feature-map size (`56x56`; `flat` for vectors and matrices).
    Unlike the producer's op kind it still varies after fusion, when almost
    every buffer is written by a fused convolution."""
    spatial = b.shape[2:]
    return "x".join(map(str, spatial)) if len(b.shape) >= 3 and spatial else "flat"


def colours(timeline: Timeline) -> dict[str, str]:
    """Stage -> colour, largest feature maps first (the order the network
    runs them); past the palette, stages share grey."""
    def area(kind: str) -> int:
        return -1 if kind == "flat" else math.prod(int(n) for n in kind.split("x"))

    kinds = sorted({kind_of(timeline, b) for b in timeline.buffers}, key=lambda k: (-area(k), k))
    return {k: PALETTE[i] if i < len(PALETTE) - 1 else PALETTE[-1] for i, k in enumerate(kinds)}


class _Scale:
    """Data -> pixel coordinates of the plot area (y grows upwards)."""

    def __init__(self, steps: int, top_bytes: int) -> None:
        self.steps = max(steps, 1)
        self.top = max(top_bytes, 1)
        self.width = WIDTH - LEFT - RIGHT
        self.height = HEIGHT - TOP - BOTTOM

    def x(self, step: float) -> float:
        """Pixel x of the left edge of op `step`."""
        return LEFT + self.width * step / self.steps

    def y(self, address: float) -> float:
        """Pixel y of a byte address."""
        return TOP + self.height * (1 - address / self.top)


def _title_lines(t: Timeline) -> list[str]:
    """Title, numbers and (outside pool mode) how addresses were drawn."""
    planner = f", planner {t.planner}" if t.planner else ""
    lines = [f"{t.model}: memory over time ({t.memory} mode{planner})"]
    tensors = ("" if t.tensor_lower_bound_bytes is None or t.tensor_lower_bound_bytes == t.lower_bound_bytes
               else f"; before coalescing the tensors' bound was {format_bytes(t.tensor_lower_bound_bytes)}")
    counts = f"; naive {format_bytes(t.naive_bytes)}; {plural(len(t.buffers), 'buffer')}, {plural(len(t.ops), 'op')}"
    if t.memory == "pool":
        gap = t.pool_bytes - t.lower_bound_bytes
        verdict = "= the lower bound" if gap <= 0 else f"= lower bound {format_bytes(t.lower_bound_bytes)} + {format_bytes(gap)}"
        lines.append(f"pool {format_bytes(t.pool_bytes)} {verdict}{tensors}{counts}")
    else:
        lines.append(f"peak {format_bytes(t.pool_bytes)}; lower bound {format_bytes(t.lower_bound_bytes)}{tensors}{counts}")
    lines.append("each box is one buffer: from the op that writes it to the last op that reads it (x), "
                 "at its bytes in the pool (y)")
    if t.transforms:
        lines.append("changed to go below the bound of the program as given: " + "; ".join(t.transforms))
    if t.pools:
        lines.append("pools stacked bottom to top: " + ", ".join(f"{name} ({format_bytes(size)})" for name, _, size in t.pools))
    if t.placement == "first-fit":
        lines.append("lazy mode: malloc picks addresses at run time; drawn as a first-fit allocator would place them")
    elif t.placement == "stacked":
        lines.append("eager mode: every buffer owns its bytes for the whole run; boxes show when each holds live data")
    return lines


def _axes(s: _Scale, t: Timeline) -> list[str]:
    """Frame, ticks, grid lines and axis titles."""
    out = [f'<rect class="plot" x="{LEFT}" y="{TOP}" width="{s.width}" height="{s.height}" '
           f'fill="#fafafa" stroke="#999"/>']
    unit, unit_bytes = unit_for(s.top)
    step = nice_step(s.top / unit_bytes, 8)
    if unit_bytes == 1:
        step = max(step, 1.0)  # whole bytes
    value = 0.0
    while value * unit_bytes <= s.top:
        y = s.y(value * unit_bytes)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + s.width}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{value:g}</text>')
        value += step
    op_step = max(1, int(nice_step(s.steps, 10)))
    for index in range(0, s.steps + 1, op_step):
        x = s.x(index)
        out.append(f'<line x1="{x:.1f}" y1="{TOP + s.height}" x2="{x:.1f}" y2="{TOP + s.height + 5}" stroke="#666"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + s.height + 18}" text-anchor="middle" class="tick">{index}</text>')
    out.append(f'<text x="{LEFT + s.width / 2:.0f}" y="{TOP + s.height + 38}" text-anchor="middle" class="axis">'
               "op index (time: ops run left to right)</text>")
    what = "address in the pool" if t.placement == "planned" else "address, as drawn"
    out.append(f'<text transform="translate(22,{TOP + s.height / 2:.0f}) rotate(-90)" text-anchor="middle" '
               f'class="axis">{what} ({unit})</text>')
    return out


def _buffer_rect(s: _Scale, t: Timeline, b: BufferBox, fill: str, interactive: bool) -> list[str]:
    """One buffer: a rectangle with a tooltip, and its name when it fits."""
    x0, x1 = s.x(b.first), s.x(b.last + 1)
    y0, y1 = s.y(b.offset + b.bytes), s.y(b.offset)
    w, h = max(x1 - x0, 0.5), max(y1 - y0, 0.5)
    producer = f"#{b.producer} {t.ops[b.producer].name}" if b.producer is not None else "none"
    shape = "x".join(map(str, b.shape)) or "scalar"
    shared = (f"; coalesced: {len(b.writers)} tensors share it, written by "
              + ", ".join(f"#{i} {t.ops[i].name}" for i in b.writers) if len(b.writers) > 1 else "")
    tip = (f"{b.name}: {b.bytes:,d} B ({format_bytes(b.bytes)}) at offset {b.offset:,d}, live ops {b.first}..{b.last}, "
           f"{shape} {b.dtype}, produced by {producer}{shared}")
    data = ""
    if interactive:
        info = {"name": b.name, "bytes": b.bytes, "offset": b.offset, "first": b.first, "last": b.last,
                "shape": shape, "dtype": b.dtype, "producer": b.producer, "consumers": b.consumers}
        data = f' data-buffer="{_e(json.dumps(info))}"'
    out = [f'<rect class="buffer" id="b{b.id}" x="{x0:.2f}" y="{y0:.2f}" width="{w:.2f}" height="{h:.2f}" '
           f'fill="{fill}"{data}><title>{_e(tip)}</title></rect>']
    size = min(10.0, h - 1.0, (w - 2.0) / (0.62 * max(len(b.name), 1)))  # the largest font that fits
    if size >= 6.5:
        out.append(f'<text class="label" x="{x0 + w / 2:.1f}" y="{y0 + h / 2 + size * 0.35:.1f}" '
                   f'font-size="{size:.1f}" text-anchor="middle">{_e(b.name)}</text>')
    return out


def _hline(s: _Scale, value: int, colour: str, text: str, dashed: bool, nudge: float) -> list[str]:
    """A labelled horizontal line across the plot at byte `value`."""
    y = s.y(value)
    dash = ' stroke-dasharray="8 4"' if dashed else ""
    return [
        f'<line class="mark" x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + s.width + 6}" y2="{y:.1f}" '
        f'stroke="{colour}" stroke-width="2"{dash}/>',
        f'<text x="{LEFT + s.width + 10}" y="{y + 4 + nudge:.1f}" fill="{colour}" class="mark-label">{_e(text)}</text>',
    ]


def _visible(s: _Scale, b: BufferBox) -> bool:
    """Whether a buffer's box is at least a pixel wide and high."""
    return s.x(b.last + 1) - s.x(b.first) >= 1 and s.y(b.offset) - s.y(b.offset + b.bytes) >= 1


def _legend(s: _Scale, t: Timeline, palette: dict[str, str]) -> list[str]:
    """Colour key under the axis title: the stages with a visible box, in
    the order the network runs them."""
    out = [f'<text x="{LEFT}" y="{HEIGHT - 22}" class="tick">colour = feature-map size (stage):</text>']
    x = LEFT + 190
    seen = {kind_of(t, b) for b in t.buffers if _visible(s, b)}
    shown = [k for k, c in palette.items() if c != PALETTE[-1] and k in seen]
    if any(palette[k] == PALETTE[-1] for k in seen):
        shown.append("other")
    for kind in shown:
        colour = palette.get(kind, PALETTE[-1]) if kind != "other" else PALETTE[-1]
        out.append(f'<rect x="{x}" y="{HEIGHT - 32}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{x + 16}" y="{HEIGHT - 22}" class="tick">{_e(kind)}</text>')
        x += 22 + 7 * len(kind)
        if x > WIDTH - 120:
            break
    return out


def _io_lines(s: _Scale, t: Timeline) -> list[str]:
    """The graph's inputs (left, before op 0) and outputs (right, after the
    last op), drawn as arrows under the time axis: the caller's memory,
    outside the pool."""
    out = []
    for kind, x, anchor, arrow in (("input", LEFT, "start", "\u2192 "), ("output", LEFT + s.width, "end", " \u2192")):
        values = [(name, size) for name, k, size in t.io if k == kind]
        if not values:
            continue
        text = ", ".join(f"{name} ({format_bytes(size)})" for name, size in values)
        text = f"{arrow.strip()} graph {kind}: {text}" if kind == "input" else f"graph {kind}: {text} {arrow.strip()}"
        out.append(f'<text class="io tick" x="{x}" y="{TOP + s.height + 54}" text-anchor="{anchor}">{_e(text)}</text>')
    return out


def render_svg(timeline: Timeline, interactive: bool = False) -> str:
    """The plan as a standalone SVG document (see the module docstring).
    `interactive` adds each buffer's facts as a JSON `data-buffer` attribute
    (for `render_html`)."""
    t = timeline
    drawn_top = max((b.offset + b.bytes for b in t.buffers), default=0)
    s = _Scale(len(t.ops), int(max(drawn_top, t.pool_bytes, t.lower_bound_bytes, 1) * 1.06))
    palette = colours(t)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif">',
        "<style>.tick{font-size:11px;fill:#333}.axis{font-size:13px;fill:#222}"
        ".label{font-size:10px;fill:#fff;pointer-events:none}.mark-label{font-size:12px;font-weight:bold}"
        ".title{font-size:16px;font-weight:bold}.subtitle{font-size:12px;fill:#333}"
        ".buffer{stroke:#fff;stroke-width:0.4}.buffer:hover,.buffer.hl{stroke:#000;stroke-width:1.5}</style>",
        f'<rect class="background" width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
    ]
    for i, line in enumerate(_title_lines(t)):
        cls = "title" if i == 0 else "subtitle"
        out.append(f'<text x="{LEFT}" y="{24 + 18 * i}" class="{cls}">{_e(line)}</text>')
    out += _axes(s, t)
    for b in t.buffers:
        out += _buffer_rect(s, t, b, palette[kind_of(t, b)], interactive)
    for name, base, size in t.pools:
        y0, y1 = s.y(base + size), s.y(base)
        out.append(f'<line class="pool-edge" x1="{LEFT}" y1="{y0:.1f}" x2="{LEFT + s.width}" y2="{y0:.1f}" '
                   'stroke="#888" stroke-dasharray="1 2"/>')
        out.append(f'<text x="{LEFT + 4}" y="{y1 - 4:.1f}" class="tick">{_e(name)}</text>')
    peak_step, peak_bytes = t.peak()
    if t.ops:
        x = s.x(peak_step + 0.5)
        out.append(f'<line class="peak" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + s.height}" '
                   f'stroke="{PEAK_COLOUR}" stroke-dasharray="2 3"/>')
        out.append(f'<text x="{x + 4:.1f}" y="{TOP + 12}" fill="{PEAK_COLOUR}" class="tick">'
                   f'peak: op #{peak_step}, {_e(format_bytes(peak_bytes))} live</text>')
    pool_name = {"planned": "pool size", "first-fit": "lazy peak", "stacked": "eager total"}[t.placement]
    close = abs(s.y(t.pool_bytes) - s.y(t.lower_bound_bytes)) < 14
    out += _hline(s, t.lower_bound_bytes, BOUND_COLOUR, f"lower bound {format_bytes(t.lower_bound_bytes)}", True,
                  14 if close else 0)
    out += _hline(s, t.pool_bytes, POOL_COLOUR, f"{pool_name} {format_bytes(t.pool_bytes)}", False, 0)
    if t.placement == "first-fit" and drawn_top > t.pool_bytes:
        out += _hline(s, drawn_top, PEAK_COLOUR, f"first-fit top {format_bytes(drawn_top)}", True, -14 if close else 0)
    out += _legend(s, t, palette)
    out += _io_lines(s, t)
    out.append("</svg>")
    return "\n".join(out) + "\n"


_SCRIPT = """
const ops = document.querySelectorAll('#ops li');
const info = document.getElementById('info');
function mib(n) { return (n / 1048576).toFixed(2) + ' MiB'; }
function opName(i) { return i === null ? 'none' : '#' + i + ' ' + ops[i].dataset.name; }
function clear() {
  document.querySelectorAll('.hl').forEach(e => e.classList.remove('hl'));
  document.querySelectorAll('.producer,.consumer').forEach(e => e.classList.remove('producer', 'consumer'));
}
function showBuffer(rect) {
  clear();
  const b = JSON.parse(rect.dataset.buffer);
  rect.classList.add('hl');
  info.innerHTML = '';
  const rows = [['buffer', b.name], ['bytes', b.bytes.toLocaleString() + ' (' + mib(b.bytes) + ')'],
    ['offset', b.offset.toLocaleString()], ['live', 'ops ' + b.first + '..' + b.last],
    ['shape', b.shape + ' ' + b.dtype], ['producer', opName(b.producer)],
    ['consumers', b.consumers.map(opName).join(', ') || 'none']];
  for (const [k, v] of rows) {
    const tr = info.insertRow(); tr.insertCell().textContent = k; tr.insertCell().textContent = v;
  }
  if (b.producer !== null) { ops[b.producer].classList.add('producer'); ops[b.producer].scrollIntoView({block: 'nearest'}); }
  b.consumers.forEach(i => ops[i].classList.add('consumer'));
}
function showOp(li) {
  clear();
  li.classList.add('producer');
  JSON.parse(li.dataset.produces).forEach(id => document.getElementById('b' + id).classList.add('hl'));
}
document.querySelectorAll('rect.buffer').forEach(r => r.addEventListener('mouseenter', () => showBuffer(r)));
ops.forEach(li => li.addEventListener('mouseenter', () => showOp(li)));
"""

_STYLE = """
body{font-family:sans-serif;margin:12px;color:#222}
#layout{display:flex;gap:12px;align-items:flex-start}
#picture svg{max-width:100%;height:auto}
#side{width:330px;flex:none}
#info{border-collapse:collapse;font-size:13px;width:100%;margin-bottom:8px}
#info td{border-bottom:1px solid #ddd;padding:2px 4px;vertical-align:top}
#info td:first-child{color:#666;width:80px}
#ops{list-style:none;padding:0;margin:0;height:560px;overflow-y:scroll;font:12px monospace;border:1px solid #ccc}
#ops li{padding:1px 4px;cursor:default}
#ops li.producer{background:#ffe08a;font-weight:bold}
#ops li.consumer{background:#d6e9ff}
p.help{font-size:13px;color:#444;max-width:1100px}
"""


def render_html(timeline: Timeline) -> str:
    """A self-contained page: the SVG with hover details per buffer, and the
    op list (hover a buffer: its producer is highlighted in yellow, its
    consumers in blue; hover an op: the buffers it writes are outlined)."""
    t = timeline
    items = []
    for op in t.ops:
        outputs = ", ".join(t.buffers[i].name for i in op.produces) or "-"
        items.append(f'<li id="op{op.index}" data-name="{_e(op.name)}" data-produces="{_e(json.dumps(op.produces))}">'
                     f"#{op.index} {_e(op.name)} &#8594; {_e(outputs)}</li>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{_e(t.model)}: memory plan</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        '<p class="help">Hover a box for its details; its producer '
        "is highlighted in the op list on the right (consumers in blue). Hover an op to outline what it writes.</p>\n"
        '<div id="layout">\n<div id="picture">\n' + render_svg(t, interactive=True) + "</div>\n"
        '<div id="side">\n<table id="info"><tr><td>buffer</td><td>hover a box</td></tr></table>\n'
        '<ol id="ops">\n' + "\n".join(items) + "\n</ol>\n</div>\n</div>\n"
        f"<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )

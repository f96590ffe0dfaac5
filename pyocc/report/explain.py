"""`pyocc plan --explain`: what is in memory at the peak, and why.

The peak is the op where the most intermediate bytes are live. Every buffer
alive there is listed, largest first, with the op that wrote it and the ops
that still read it: the last of those keeps it alive. To lower the peak,
end one of those lifetimes earlier (run its last reader sooner, or the
peak op later), or make a large buffer smaller or share bytes (fusion,
in-place reuse).
"""

from __future__ import annotations

from pyocc.report.timeline import Timeline
from pyocc.units import plural, unit_for


def _op(timeline: Timeline, index: int | None) -> str:
    """`#12 dnn.conv`, or `-` for no op."""
    return "-" if index is None else f"#{index} {timeline.ops[index].name}"


def _readers(timeline: Timeline, readers: list[int]) -> str:
    """The readers still to come, shortened to the first two and the last."""
    names = [_op(timeline, i) for i in readers]
    if len(names) > 3:
        names = [names[0], names[1], f"... ({len(names) - 3} more)", names[-1]]
    return ", ".join(names)


def explain_peak(timeline: Timeline) -> str:
    """The peak moment as text: a header and one row per live buffer,
    sorted by bytes (largest first)."""
    t = timeline
    if not t.buffers:
        return f"{t.model} ({t.memory} mode): no intermediate buffers, nothing to explain."
    step, peak = t.peak()
    alive = sorted((b for b in t.buffers if b.first <= step <= b.last), key=lambda b: (-b.bytes, b.id))
    unit, unit_bytes = unit_for(peak)
    decimals = 0 if unit_bytes == 1 else 2
    lines = [
        f"{t.model} ({t.memory} mode): the peak is at op {_op(t, step)}, with {peak:,d} bytes "
        f"({peak / unit_bytes:.{decimals}f} {unit}) live in {plural(len(alive), 'buffer')}.",
        f"No plan of this op order needs less than the lower bound, {t.lower_bound_bytes / unit_bytes:.{decimals}f} {unit}. "
        "To lower the peak, free one of the buffers listed here earlier (run the op in its last column "
        "sooner) or make a large one smaller (fusion, in-place reuse).",
        *([f"Transformed below the bound of the program as given ({'; '.join(t.transforms)}): "
           "the bound above is this program's own."] if t.transforms else []),
        "",
    ]
    rows = [("bytes", unit, "buffer", "shape", "written by", "read at/after the peak by", "kept alive until")]
    for b in alive:
        readers = [i for i in b.consumers if i >= step]
        keeper = max(readers) if readers else None
        rows.append((
            f"{b.bytes:,d}", f"{b.bytes / unit_bytes:.{decimals}f}", b.name,
            f"{'x'.join(map(str, b.shape)) or 'scalar'} {b.dtype}",
            _op(t, b.producer),
            _readers(t, readers) if readers else "(nobody: written by the peak op)" if b.producer == step else "-",
            _op(t, keeper) if keeper is not None else _op(t, b.producer),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [c.rjust(w) if i < 2 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)

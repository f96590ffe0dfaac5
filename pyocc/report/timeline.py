"""A lowered function as plain data for pictures and explanations.

The time axis is the index of *compute* ops (dnn ops that call a kernel):
mallocs, views, deallocs and weights are bookkeeping, not time. A buffer is
live from its producer to its last consumer (the lazy lifetime, whatever the
memory mode). Its address is the planned offset in pool mode; in eager and
lazy mode the allocator picks addresses at run time, so the timeline says
how it drew them instead (see `Timeline.placement`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.dialects import func

from pyocc.analysis.liveness import analyze_function
from pyocc.dialects.dnn import ops as d
from pyocc.planning import Buffer, Problem, plan_memory

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Operation

    from pyocc.api import MemoryReport


@dataclass
class OpBox:
    """One compute op: its position on the time axis and what it touches."""

    index: int
    name: str
    """The op name, with its `fn` when it has one: `dnn.unary(relu)`."""
    produces: list[int] = field(default_factory=list)
    """Ids of the intermediate buffers it writes."""
    reads: list[int] = field(default_factory=list)
    """Ids of the intermediate buffers it reads."""


@dataclass
class BufferBox:
    """One intermediate buffer: a rectangle from `first` to `last` (op
    indices, inclusive) and from `offset` to `offset + bytes`."""

    id: int
    name: str
    bytes: int
    offset: int
    first: int
    last: int
    shape: list[int]
    dtype: str
    producer: int | None
    """Index of the op that writes it (None if none does)."""
    consumers: list[int]
    """Indices of the ops that read it, in order."""
    writers: list[int] = field(default_factory=list)
    """Indices of every op that writes it: more than one when coalescing
    let several tensors share it (a result written over a dying input,
    bands of a concat)."""
    scratch: bool = False
    """A kernel's scratch (an op's `workspace`): sized by the plan to the
    bytes free at its op, so it fills the pool's slack there."""


@dataclass
class Timeline:
    """Everything a picture or an explanation needs, without IR."""

    model: str
    memory: str
    planner: str | None
    ops: list[OpBox]
    buffers: list[BufferBox]
    pool_bytes: int
    """Activation bytes of the mode (pool size, lazy or eager peak)."""
    lower_bound_bytes: int
    """The buffers' max-live bound after coalescing (what the pool is measured against)."""
    naive_bytes: int
    placement: str
    """How `offset` was found: "planned" (pool mode: the real offsets),
    "first-fit" (lazy: a first-fit allocator replayed, as malloc might do)
    or "stacked" (eager: every buffer its own bytes, in allocation order)."""
    io: list[tuple[str, str, int]] = field(default_factory=list)
    """The graph's inputs and outputs as (name, "input" or "output", bytes):
    the caller's memory, outside the pool."""
    tensor_lower_bound_bytes: int | None = None
    """The tensors' max-live bound before coalescing (None: not known)."""
    pools: list[tuple[str, int, int]] = field(default_factory=list)
    """With several named pools (`--memory-pools`): (name, base, size) of
    each, stacked bottom to top in the order they are created; a buffer's
    `offset` is then its pool's base plus its offset in the pool."""
    transforms: list[str] = field(default_factory=list)
    """How the program was changed to go below the bound of the program as
    given (`--memory-limit`): the tiled region, the recomputed values."""

    def live_bytes(self) -> list[int]:
        """Bytes of live buffers at each op index."""
        delta = [0] * (len(self.ops) + 1)
        for b in self.buffers:
            delta[b.first] += b.bytes
            delta[b.last + 1] -= b.bytes
        live, running = [], 0
        for change in delta[:-1]:
            running += change
            live.append(running)
        return live

    def peak(self) -> tuple[int, int]:
        """(op index, bytes) of the first moment live bytes are highest."""
        live = self.live_bytes()
        if not live:
            return 0, 0
        top = max(live)
        # scratch fills the slack at its op, so a step can reach the top only
        # by it: prefer the first top step with the least scratch live
        scratch = [0] * len(live)
        for b in self.buffers:
            if b.scratch:
                for step in range(b.first, b.last + 1):
                    scratch[step] += b.bytes
        step = min((i for i, v in enumerate(live) if v == top), key=lambda i: (scratch[i], i))
        return step, top


def _op_label(op: Operation) -> str:
    """`dnn.conv`, `dnn.unary(relu)` for ops with a function name, and what
    fusion folded in: `dnn.conv+relu+add` (a fused activation, a residual add)."""
    fn = op.properties.get("fn")
    data = getattr(fn, "data", None)
    label = f"{op.name}({data})" if isinstance(data, str) else op.name
    activation = getattr(op.properties.get("activation"), "data", None)
    if isinstance(activation, str) and activation not in ("", "none"):
        label += f"+{activation}"
    if getattr(op, "residual", None) is not None:
        label += "+add"
    return label


def build_timeline(module: ModuleOp, report: MemoryReport) -> Timeline:
    """The timeline of the (first) function of a lowered module, in the
    memory mode of `report`, which also gives the numbers shown."""
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    liveness = analyze_function(function)
    intermediates = liveness.intermediates
    buffer_id = {b.value: i for i, b in enumerate(intermediates)}
    scratch = {liveness.root_of(o.workspace) for o in function.body.block.ops
               if isinstance(o, d.DnnComputeOp) and getattr(o, "workspace", None) is not None}
    ops: list[OpBox] = []
    for op in function.body.block.ops:
        if not isinstance(op, d.DnnComputeOp):
            continue
        box = OpBox(len(ops), _op_label(op))
        for value in [*op.destinations(), *([op.workspace] if getattr(op, "workspace", None) is not None else [])]:
            i = buffer_id.get(liveness.root_of(value))
            if i is not None and i not in box.produces:
                box.produces.append(i)
        workspace = getattr(op, "workspace", None)  # kernel scratch: written and read by its op alone
        for value in [*op.read_values(), *([workspace] if workspace is not None else [])]:
            i = buffer_id.get(liveness.root_of(value))
            if i is not None and i not in box.reads:
                box.reads.append(i)
        ops.append(box)
    producer: dict[int, int] = {}
    writers: dict[int, list[int]] = {i: [] for i in range(len(intermediates))}
    consumers: dict[int, list[int]] = {i: [] for i in range(len(intermediates))}
    for box in ops:
        for i in box.produces:
            producer.setdefault(i, box.index)
            writers[i].append(box.index)
        for i in box.reads:
            consumers[i].append(box.index)
    # Several named pools are drawn one above the other.
    pool_base: dict[object, int] = {}
    pools: list[tuple[str, int, int]] = []
    for op in function.body.block.ops:
        if isinstance(op, d.PoolInitOp):
            base = sum(size for _, _, size in pools)
            pool_base[op.pool] = base
            name = op.pool_name.data if op.pool_name is not None else "pool"
            pools.append((name, base, op.size.value.data))
    buffers = []
    for i, b in enumerate(intermediates):
        steps = [s for s in (producer.get(i), *consumers[i]) if s is not None] or [0]
        owner = b.value.owner
        buffers.append(BufferBox(
            id=i, name=b.name, bytes=b.bytes,
            offset=owner.offset.value.data + pool_base.get(owner.pool, 0) if isinstance(owner, d.MemOffsetOp) else 0,
            first=min(steps), last=max(steps), shape=list(b.shape), dtype=b.dtype,
            producer=producer.get(i), consumers=consumers[i], writers=writers[i], scratch=b.value in scratch,
        ))
    io = [(b.name, b.kind, b.bytes) for b in liveness.buffers if b.kind in ("input", "output")]
    placement = {"pool": "planned", "lazy": "first-fit"}.get(report.memory, "stacked")
    if placement == "first-fit":
        _first_fit(buffers)
    elif placement == "stacked":
        _stack(buffers)
    # a tiled program is not the one `lower_bound_bytes` bounds (the untiled
    # one's): draw and explain against the bound of the buffers drawn
    bound = report.lower_bound_bytes
    if report.tiled_lower_bound_bytes is not None:
        bound = report.tiled_lower_bound_bytes
    return Timeline(
        model=report.model, memory=report.memory, planner=report.planner, ops=ops, buffers=buffers,
        pool_bytes=report.activation_bytes, lower_bound_bytes=bound,
        naive_bytes=report.naive_bytes, placement=placement, pools=pools if len(pools) > 1 else [],
        tensor_lower_bound_bytes=report.tensor_lower_bound_bytes, io=io,
        transforms=[*([f"tiled: {report.tiling}"] if report.tiling else []),
                    *([f"recomputed at late readers: {', '.join(report.recomputed)}"] if report.recomputed else [])],
    )


def _first_fit(buffers: list[BufferBox]) -> None:
    """Addresses a first-fit allocator would give (malloc at the producer,
    free after the last consumer): Occamy's planner replays exactly that."""
    problem = Problem([Buffer(f"b{b.id}", b.bytes, b.first, b.last) for b in buffers])
    offsets = plan_memory(problem, "occamy-first-fit").offsets
    for b in buffers:
        b.offset = offsets[f"b{b.id}"]


def _stack(buffers: list[BufferBox]) -> None:
    """Eager: every buffer has its own bytes for the whole run, in order of
    allocation (here: of production)."""
    top = 0
    for b in sorted(buffers, key=lambda b: (b.first, b.id)):
        b.offset = top
        top += b.bytes

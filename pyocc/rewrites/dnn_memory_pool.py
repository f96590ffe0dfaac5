"""`dnn-memory-pool{planner=auto, alignment=64}`: Occamy's memory-pool code
generation. Every malloc/dealloc pair becomes a view into one pool whose
size and offsets the planner chose at compile time:

    %b = dnn.malloc {size = N}          =>  %b = dnn.mem_offset %pool {offset = plan[b], size = N}
    dnn.dealloc %b                      =>  (nothing)

with one `dnn.pool_init` of the planned size at entry and one
`dnn.pool_release` before the return. Lifetimes come from the liveness
analysis of the lazy form (malloc to last use), so the plan may reuse the
bytes of any buffer that is dead. Every plan passes the plan verifier before
the IR is rewritten. A kernel's scratch (a malloc with `min_size`) is
sized to the pool's slack at its op (`fit_scratch`, pyocc.planning.fit):
the fixed buffers are planned first, then each scratch takes the free bytes
at its op, from `min_size` up to `size`. The planner decides (a `Placement`: pool and offset per
buffer); two patterns rewrite, the same for one pool and for named pools:
`MallocToMemOffset` and `DeallocErased` (`apply_placement`).

`pools="sram:size=1MiB,dram"` plans across named pools instead
(pyocc.planning.pools: the fast pool keeps the buffers that carry the most
traffic, the rest spill to the next; `candidates="concat=dram"` restricts
the buffers a kind of op writes to some pools): one `dnn.pool_init {pool_name = "sram"}`
per pool that holds a buffer, each `dnn.mem_offset` on its pool's value. A
buffer's traffic is its bytes times the compute ops that touch it (its
writer and every reader). A malloc without a static size stays a
malloc/dealloc (the runtime allocator's). Weights are planned, for the
report and the size check, in the read-only pools of the spec (in order,
spilling like activations), or in an unbounded read-only `constants` pool
when there is none; the host lowering still packs them into one block. A buffer that
fits no pool fails the pass with the planner's one-line overflow message.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, StringAttr, i8, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import LiveBuffer, Liveness, analyze_function, function_bodies
from pyocc.dialects.dnn import ops as d
from pyocc.planning import (
    ALGORITHMS,
    Buffer,
    MemoryPool,
    Plan,
    PlanningError,
    PoolsPlan,
    Problem,
    parse_memory_pools,
    parse_pool_candidates,
    fit_flexible,
    fitted_alignment,
    plan_memory,
    widen_flexible,
    plan_pools,
)


def planning_problem(liveness: Liveness, alignment: int, with_traffic: bool = False,
                     candidates: dict[str, tuple[str, ...]] | None = None,
                     kinds: dict[SSAValue, str] | None = None, fit: bool = True) -> Problem:
    """The planner's input: one Buffer per malloc, live from its malloc to
    its last use (views included), aligned to its malloc's alignment, at
    most `alignment` (the pool's), and to less for a buffer of fewer bytes
    (`fitted_alignment`; with `fit` False, not: a symbolic compile's
    probes, whose planner fits it at every value). `with_traffic` adds each buffer's traffic
    (see `buffer_traffic`) and marks mallocs without a static size dynamic;
    `candidates` (kind -> pools) gives a buffer whose writer's kind is in
    `kinds` (buffer value -> kind, see `writer_kinds`) its candidate pools."""
    mallocs = [b for b in liveness.intermediates if isinstance(b.value.owner, d.MallocOp)]
    counts = Counter(b.name for b in mallocs)
    buffers = []
    for index, b in enumerate(mallocs):
        aligned = min(b.value.owner.alignment.value.data, alignment)  # type: ignore[union-attr]
        if fit and _is_static(b.value.type):
            aligned = fitted_alignment(aligned, b.bytes)
        if not with_traffic:
            if not _is_static(b.value.type):
                raise PassFailedException(
                    f"dnn-memory-pool: buffer %{b.name} ({b.value.type}) has no static size; fix the "
                    "input shape, or give pools=... to leave it to the runtime allocator")
            buffers.append(Buffer(f"{b.name}#{index}", b.bytes, b.first, b.last, aligned))
            continue
        # with pools, names show in overflow errors: keep the IR's name when unique
        name = b.name if counts[b.name] == 1 else f"{b.name}#{index}"
        pools = (candidates or {}).get((kinds or {}).get(b.value, ""), ())
        if _is_static(b.value.type):
            buffers.append(Buffer(name, b.bytes, b.first, b.last, aligned, pools, buffer_traffic(b)))
        else:
            buffers.append(Buffer(name, None, b.first, b.last, aligned, pools, 0))
    return Problem(tuple(buffers))


def writer_kinds(function: func.FuncOp) -> dict[SSAValue, str]:
    """Buffer value -> the kind of the first compute op that writes it
    (`conv` for dnn.conv), through views and subviews (a band written into
    a concat output counts for the concat's buffer)."""
    kinds: dict[SSAValue, str] = {}
    for op in function.body.block.ops:
        if isinstance(op, d.DnnComputeOp):
            for value in op.destinations():
                while isinstance(value.owner, d.ALIAS_OPS):
                    value = value.owner.operands[0]
                kinds.setdefault(value, op.name.removeprefix("dnn."))
    return kinds


COMPUTE_KINDS = frozenset(op.name.removeprefix("dnn.") for op in d.COMPUTE_OPS)
"""The kinds `candidates=` may name: compute op names without `dnn.`."""


def buffer_traffic(buffer: LiveBuffer) -> int:
    """Bytes read plus written over a buffer's life: its size times the
    compute ops that touch it (the writer and every reader)."""
    return buffer.bytes * max(len(buffer.consumers), 1)


def _is_static(t: Attribute) -> bool:
    """True for a memref whose every dimension is known."""
    return isinstance(t, MemRefType) and all(dim >= 0 for dim in t.get_shape())


WEIGHT_POOL = "constants"
"""The read-only pool weights go to when the spec names none."""


def memory_pools(spec: str, alignment: int) -> tuple[MemoryPool, ...]:
    """The pools of a `pools=` spec (`PassFailedException` if malformed)."""
    try:
        return parse_memory_pools(spec, default_alignment=alignment)
    except PlanningError as e:
        raise PassFailedException(f"dnn-memory-pool: {e}") from None


def plan_weights(function: func.FuncOp, pools: Sequence[MemoryPool], alignment: int = 64) -> dict[str, int]:
    """Planned weight bytes per read-only pool. Weights live for the whole
    run, so a pool's plan is a stack (each weight at the next aligned
    offset); they fill the read-only pools of `pools` in order, spilling to
    the next when one is full, or one unbounded `constants` pool when there
    is none. `PassFailedException` names a weight no pool can hold."""
    read_only = [p for p in pools if p.read_only] or [MemoryPool(WEIGHT_POOL, None, alignment, read_only=True)]
    used = {p.name: 0 for p in read_only}
    for op in function.body.block.ops:
        if not isinstance(op, d.WeightOp):
            continue
        size = d.type_bytes(op.result.type)
        for pool in read_only:
            step = math.lcm(alignment, pool.alignment)
            offset = -(-used[pool.name] // step) * step
            if pool.size is None or offset + size <= pool.size:
                used[pool.name] = offset + size
                break
        else:
            last = read_only[-1]
            raise PassFailedException(
                f"dnn-memory-pool: weights: weight %{op.result.name_hint or '?'} ({size:,d} bytes) fits in no "
                f"read-only pool: the last, pool '{last.name}' ({last.size:,d} bytes), lacks "
                f"{offset + size - last.size:,d} bytes; make '{last.name}' larger or add a read-only pool after it")
    return used


@dataclass(frozen=True)
class DnnMemoryPoolPass(ModulePass):
    """Replace malloc/dealloc by offsets into one planned pool."""

    name = "dnn-memory-pool"

    planner: str = "auto"
    """Planning algorithm: auto, greedy-by-size, best-fit-decreasing,
    greedy-by-conflicts, hill-climb, occamy-first-fit or exact."""

    alignment: int = 64
    """Byte alignment of the pool and the most any buffer's offset gets:
    each buffer takes its malloc's alignment up to this (an integer or
    boolean buffer asks for its element's size, see `d.buffer_alignment`)."""

    time_budget_ms: int = 200
    """How long `auto` may spend improving on the fast heuristics."""

    pools: str = ""
    """Named pools, e.g. "sram:size=1MiB,dram" (see pyocc.planning.pools);
    empty: one anonymous unbounded pool."""

    policy: str = "traffic"
    """How a bounded pool picks its buffers: traffic (most traffic served)
    or first-fit (program order, the baseline)."""

    candidates: str = ""
    """Per op kind candidate pools, e.g. "concat=dram,conv=sram+dram": a
    buffer written by that kind of op tries only those pools, in order."""

    fit_scratch: bool = True
    """One pool: size each kernel scratch buffer (a malloc with `min_size`)
    to the free bytes of the pool at its op, between `min_size` and `size`
    (pyocc.planning.fit); named pools: `min_size` (one output row's columns
    for a convolution); false: plan it at `size` like any buffer."""

    threads: int = 1
    """The threads the host model is compiled for: with one pool and
    `fit_scratch`, a scratch whose op runs blocks on the threads apart
    (`scratch_copies`: a convolution whose blocks are too small to split)
    gets that many copies of the size fitted for one thread, placed again
    (`widen_flexible`); the op's `scratch_copies` attribute says how many.
    1: no copies, the plan of a one-thread build."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "buffers")
        if self.planner != "auto" and self.planner not in ALGORITHMS:
            raise PassFailedException(
                f"dnn-memory-pool: unknown planner '{self.planner}' (choose from auto, {', '.join(sorted(ALGORITHMS))})"
            )
        if self.pools:
            self._apply_pools(op)
            return
        if self.alignment < 1:
            raise PassFailedException("dnn-memory-pool: alignment must be positive")
        if self.threads < 1:
            raise PassFailedException("dnn-memory-pool: threads must be at least 1")
        for function in [f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks]:
            liveness = analyze_function(function)
            problem = planning_problem(liveness, self.alignment)
            if not problem.buffers:
                continue
            names = [b.name for b in problem.buffers]
            flexible = scratch_minimums(function, names) if self.fit_scratch else {}
            try:
                if flexible:
                    fitted = fit_flexible(problem, flexible, self.planner, time_budget_ms=self.time_budget_ms,
                                          planner=plan_memory)
                    copies = scratch_copies(function, names, fitted.sizes, self.threads)
                    if copies:
                        fitted = widen_flexible(fitted, {name: fitted.sizes[name] * count
                                                         for name, count in copies.items()})
                    resize_scratch(function, names, fitted.sizes)
                    plan = fitted.plan
                else:
                    plan = plan_memory(problem, self.planner, time_budget_ms=self.time_budget_ms)
            except PlanningError as e:
                raise PassFailedException(f"dnn-memory-pool: {e}") from None
            apply_placement(function, names, Placement.of_plan(plan, self.alignment))

    def _apply_pools(self, op: ModuleOp) -> None:
        """Plan every function across the named pools and rewrite it."""
        if self.alignment < 1:
            raise PassFailedException("dnn-memory-pool: alignment must be positive")
        pools = memory_pools(self.pools, self.alignment)
        writable = [p for p in pools if not p.read_only and p.accessible_from("host")]
        if not writable:
            raise PassFailedException("dnn-memory-pool: no read-write pool the host can reach")
        try:
            candidates = parse_pool_candidates(self.candidates, writable)
        except PlanningError as e:
            raise PassFailedException(f"dnn-memory-pool: {e}") from None
        unknown = sorted(set(candidates) - COMPUTE_KINDS)
        if unknown:
            raise PassFailedException(
                f"dnn-memory-pool: pool candidates: unknown op kind {unknown[0]!r} (e.g. conv, concat, gemm, softmax)")
        for function in function_bodies(op):
            plan_weights(function, pools, self.alignment)
            if not any(isinstance(o, d.MallocOp) for o in function.body.block.ops):
                continue
            if self.fit_scratch:
                # no slack fitting across pools yet: each kernel scratch takes its least block
                mallocs = [o for o in function.body.block.ops if isinstance(o, d.MallocOp)]
                names = [str(i) for i in range(len(mallocs))]
                resize_scratch(function, names, scratch_minimums(function, names))
            problem = planning_problem(analyze_function(function), self.alignment, with_traffic=True,
                                       candidates=candidates, kinds=writer_kinds(function))
            try:
                result = plan_pools(problem, writable, policy=self.policy, algorithm=self.planner,
                                    time_budget_ms=self.time_budget_ms)
            except PlanningError as e:
                raise PassFailedException(f"dnn-memory-pool: {e}") from None
            apply_placement(function, [b.name for b in problem.buffers], Placement.of_pools(result))


def scratch_minimums(function: func.FuncOp, names: list[str]) -> dict[str, int]:
    """Planner name -> `min_size` of each malloc that has one (a kernel
    scratch the pool may shrink); `names` lists the mallocs' planner names
    in block order."""
    mallocs = [o for o in function.body.block.ops if isinstance(o, d.MallocOp)]
    return {name: o.min_size.value.data for o, name in zip(mallocs, names, strict=True) if o.min_size is not None}


def scratch_copies(function: func.FuncOp, names: list[str], sizes: dict[str, int], threads: int) -> dict[str, int]:
    """Planner name -> copies, for each fitted scratch malloc (`sizes`:
    planner name -> the bytes fitted for one thread) whose op runs more
    than one copy on `threads` threads (`DnnComputeOp.scratch_copies`);
    each such op gets a `scratch_copies` attribute with the count, which
    the host lowering reads (its workspace then holds that many copies)."""
    if threads < 2:
        return {}
    mallocs = [o for o in function.body.block.ops if isinstance(o, d.MallocOp)]
    copies: dict[str, int] = {}
    for malloc, name in zip(mallocs, names, strict=True):
        if name not in sizes:
            continue
        for use in malloc.result.uses:
            user = use.operation
            if isinstance(user, d.DnnComputeOp) and getattr(user, "workspace", None) is malloc.result:
                count = user.scratch_copies(sizes[name], threads)
                if count > 1:
                    copies[name] = count
                    user.attributes[d.SCRATCH_COPIES] = IntegerAttr(count, i64)
    return copies


def resize_scratch(function: func.FuncOp, names: list[str], sizes: dict[str, int]) -> None:
    """Give each scratch malloc named in `sizes` (planner name -> bytes) its
    fitted size: a new `memref<N x i8>` malloc whose uses (the op's
    workspace, its dealloc) take its result."""
    mallocs = [o for o in function.body.block.ops if isinstance(o, d.MallocOp)]
    for op, name in zip(mallocs, names, strict=True):
        size = sizes.get(name)
        if size is None or size == op.size.value.data:
            continue
        smaller = d.MallocOp(MemRefType(i8, [size]), op.alignment.value.data)
        if op.min_size is not None and op.min_size.value.data <= size:
            smaller.properties["min_size"] = op.min_size
        smaller.result.name_hint = op.result.name_hint
        Rewriter.replace_op(op, smaller)


# ---------------------------------------------------------------------------
# Applying a verified plan: one code path for one pool and for named pools
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedPool:
    """One pool a plan fills: its `dnn.pool_init`."""

    name: str | None
    """The named memory (`pool_name`); None for the one anonymous pool."""
    size: int
    alignment: int
    algorithm: str


@dataclass(frozen=True)
class Placement:
    """Where a verified plan put every buffer: the pools that hold one (in
    pool order) and, per planner buffer name, its pool's index and offset.
    A buffer in neither `offsets` nor planned is dynamic: the runtime
    allocator's (its malloc and dealloc stay)."""

    pools: tuple[PlannedPool, ...]
    offsets: dict[str, tuple[int, int]]
    planner: str
    """The `dnn.planner` attribute of the function."""

    @classmethod
    def of_plan(cls, plan: Plan, alignment: int) -> Placement:
        """One anonymous pool (`plan_memory`'s result)."""
        pool = PlannedPool(None, max(plan.pool_size, 1), alignment, plan.algorithm)
        return cls((pool,), {name: (0, offset) for name, offset in plan.offsets.items()}, plan.algorithm)

    @classmethod
    def of_pools(cls, result: PoolsPlan) -> Placement:
        """Named pools (`plan_pools`'s result): those that hold a buffer."""
        used = set(result.assignment.values())
        pools = [PlannedPool(p.name, max(result.plans[p.name].pool_size, 1), p.alignment,
                             result.plans[p.name].algorithm) for p in result.pools if p.name in used]
        index = {pool.name: i for i, pool in enumerate(pools)}
        offsets = {name: (index[pool], result.plans[pool].offsets[name]) for name, pool in result.assignment.items()}
        planner = ",".join(f"{p.name}={p.algorithm}" for p in pools) or "none"
        return cls(tuple(pools), offsets, planner)


class MallocToMemOffset(RewritePattern):
    """malloc(n)  =>  mem_offset(pool, plan[buffer], n)   (a planned buffer)"""

    def __init__(self, buffers: dict[d.MallocOp, str], placement: Placement, pools: list[SSAValue]):
        self.buffers, self.placement, self.pools = buffers, placement, pools
        self.offset_attrs: dict[int, IntegerAttr] = {}  # equal offsets share one attribute: big models

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: d.MallocOp, rewriter: PatternRewriter) -> None:
        where = self.placement.offsets.get(self.buffers[op])
        if where is None:
            return  # dynamic: the runtime allocator's
        pool, offset = where
        attr = self.offset_attrs.get(offset)
        if attr is None:
            attr = self.offset_attrs[offset] = IntegerAttr(offset, i64)
        view = d.MemOffsetOp.create(operands=[self.pools[pool]], result_types=[op.result.type],
                                    properties={"offset": attr, "size": op.properties["size"]},
                                    location=op.location)
        view.result.name_hint = op.result.name_hint
        rewriter.replace(op, view)


class DeallocErased(RewritePattern):
    """dealloc(mem_offset(...))  =>  (nothing)   (the pool outlives the buffer)"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: d.DeallocOp, rewriter: PatternRewriter) -> None:
        if isinstance(op.buffer.owner, d.MemOffsetOp):
            rewriter.erase(op)


def apply_placement(function: func.FuncOp, names: list[str], placement: Placement) -> None:
    """Rewrite `function` to a verified placement: one pool_init per pool at
    entry, each planned malloc a mem_offset on its pool, its dealloc gone,
    every pool released before the return (last created, first released).
    `names` lists the planner's buffer names in malloc order."""
    block = function.body.block
    mallocs = [o for o in block.ops if isinstance(o, d.MallocOp)]
    buffers = dict(zip(mallocs, names, strict=True))
    entry, exit_ = InsertPoint.before(block.first_op), InsertPoint.before(block.last_op)  # type: ignore[arg-type]
    inits = []
    for pool in placement.pools:
        properties: dict[str, Attribute] = {"size": IntegerAttr(pool.size, i64),
                                            "alignment": IntegerAttr(pool.alignment, i64)}
        if pool.name is not None:
            properties["pool_name"] = StringAttr(pool.name)
        init = d.PoolInitOp.create(result_types=[MemRefType(i8, [pool.size])], properties=properties)
        # "mempool", not "pool": a MaxPool layer is often named so
        init.pool.name_hint = "mempool" if pool.name is None else "mempool_" + "".join(
            c if c.isalnum() or c == "_" else "_" for c in pool.name)
        Rewriter.insert_op(init, entry)
        inits.append(init.pool)
    patterns = GreedyRewritePatternApplier([MallocToMemOffset(buffers, placement, inits), DeallocErased()],
                                           dce_enabled=False)
    PatternRewriteWalker(patterns, apply_recursively=False).rewrite_region(function.body)
    for pool in reversed(inits):
        Rewriter.insert_op(d.PoolReleaseOp.create(operands=[pool]), exit_)
    function.attributes["dnn.planner"] = StringAttr(placement.planner)

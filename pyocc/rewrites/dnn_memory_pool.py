"""`dnn-memory-pool{planner=auto, alignment=64}`: Occamy's memory-pool code
generation. Every malloc/dealloc pair becomes a view into one pool whose
size and offsets the planner chose at compile time:

    %b = dnn.malloc {size = N}          =>  %b = dnn.mem_offset %pool {offset = plan[b], size = N}
    dnn.dealloc %b                      =>  (nothing)

with one `dnn.pool_init` of the planned size at entry and one
`dnn.pool_release` before the return. Lifetimes come from the liveness
analysis of the lazy form (malloc to last use), so the plan may reuse the
bytes of any buffer that is dead. Every plan passes the plan verifier before
the IR is rewritten.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, StringAttr, i8, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import LiveBuffer, Liveness, analyze_function, function_bodies
from pyocc.dialects.dnn import ops as d

if TYPE_CHECKING:
    from collections.abc import Sequence

    from xdsl.ir import Attribute, SSAValue

    from pyocc.planning import MemoryPool, PoolsPlan, Problem


def planning_problem(liveness: Liveness, alignment: int, with_traffic: bool = False,
                     candidates: dict[str, tuple[str, ...]] | None = None,
                     kinds: dict[SSAValue, str] | None = None) -> Problem:
    """The planner's input: one Buffer per malloc, live from its malloc to
    its last use (views included). `with_traffic` adds each buffer's traffic
    (see `buffer_traffic`) and marks mallocs without a static size dynamic;
    `candidates` (kind -> pools) gives a buffer whose writer's kind is in
    `kinds` (buffer value -> kind, see `writer_kinds`) its candidate pools."""
    from collections import Counter

    from pyocc.planning import Buffer, Problem

    mallocs = [b for b in liveness.intermediates if isinstance(b.value.owner, d.MallocOp)]
    counts = Counter(b.name for b in mallocs)
    buffers = []
    for index, b in enumerate(mallocs):
        if not with_traffic:
            if not _is_static(b.value.type):
                raise PassFailedException(
                    f"dnn-memory-pool: buffer %{b.name} ({b.value.type}) has no static size; fix the "
                    "input shape, or give pools=... to leave it to the runtime allocator")
            buffers.append(Buffer(f"{b.name}#{index}", b.bytes, b.first, b.last, alignment))
            continue
        # with pools, names show in overflow errors: keep the IR's name when unique
        name = b.name if counts[b.name] == 1 else f"{b.name}#{index}"
        pools = (candidates or {}).get((kinds or {}).get(b.value, ""), ())
        if _is_static(b.value.type):
            buffers.append(Buffer(name, b.bytes, b.first, b.last, alignment, pools, buffer_traffic(b)))
        else:
            buffers.append(Buffer(name, None, b.first, b.last, alignment, pools, 0))
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
    from pyocc.planning import PlanningError, parse_memory_pools

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
    from pyocc.planning import MemoryPool

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
    """Byte alignment of every buffer's offset."""

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

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "buffers")
        from pyocc.planning import ALGORITHMS, PlanningError, plan_memory

        if self.planner != "auto" and self.planner not in ALGORITHMS:
            raise PassFailedException(
                f"dnn-memory-pool: unknown planner '{self.planner}' (choose from auto, {', '.join(sorted(ALGORITHMS))})"
            )
        if self.pools:
            self._apply_pools(op)
            return
        if self.alignment < 1:
            raise PassFailedException("dnn-memory-pool: alignment must be positive")
        for function in [f for f in op.ops if isinstance(f, func.FuncOp) and f.body.blocks]:
            liveness = analyze_function(function)
            problem = planning_problem(liveness, self.alignment)
            if not problem.buffers:
                continue
            try:
                plan = plan_memory(problem, self.planner, time_budget_ms=self.time_budget_ms)
            except PlanningError as e:
                raise PassFailedException(f"dnn-memory-pool: {e}") from None
            rewrite_to_pool(function, [b.name for b in problem.buffers], plan, self.alignment)

    def _apply_pools(self, op: ModuleOp) -> None:
        """Plan every function across the named pools and rewrite it."""
        from pyocc.planning import PlanningError, parse_pool_candidates, plan_pools

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
            problem = planning_problem(analyze_function(function), self.alignment, with_traffic=True,
                                       candidates=candidates, kinds=writer_kinds(function))
            try:
                result = plan_pools(problem, writable, policy=self.policy, algorithm=self.planner,
                                    time_budget_ms=self.time_budget_ms)
            except PlanningError as e:
                raise PassFailedException(f"dnn-memory-pool: {e}") from None
            rewrite_to_pools(function, [b.name for b in problem.buffers], result)


def rewrite_to_pool(function: func.FuncOp, names: list[str], plan, alignment: int) -> None:
    """Apply a verified plan: pool_init at entry, mem_offset per malloc, no
    dealloc, pool_release before the return. `names` lists the planner's
    buffer names in malloc order."""
    block = function.body.block
    size = max(plan.pool_size, 1)
    pool = d.PoolInitOp.create(
        result_types=[MemRefType(i8, [size])],
        properties={"size": IntegerAttr(size, i64), "alignment": IntegerAttr(alignment, i64)},
    )
    pool.pool.name_hint = "mempool"  # not "pool": a MaxPool layer is often named so
    block.insert_op_before(pool, block.first_op)
    # Deallocs go first, so the mallocs' uses to move are fewer. Then each
    # malloc becomes a mem_offset. This is the hot loop of the pass on big
    # models, hence the shortcuts: equal offsets share one IntegerAttr, the
    # malloc's location is reused (no lookup of the unknown location), and a
    # replaced malloc is only detached: it has no operands to drop and no
    # uses left to erase.
    ops = list(block.ops)
    for op in ops:
        if isinstance(op, d.DeallocOp):
            block.detach_op(op)
            op.erase()
    offset_attrs: dict[int, IntegerAttr] = {}
    names_left = iter(names)
    for op in ops:
        if isinstance(op, d.MallocOp):
            name = next(names_left, None)
            if name is None:
                raise ValueError("rewrite_to_pool: more mallocs than planned buffers")
            offset = plan.offsets[name]
            attr = offset_attrs.get(offset)
            if attr is None:
                attr = offset_attrs[offset] = IntegerAttr(offset, i64)
            view = d.MemOffsetOp.create(
                operands=[pool.pool],
                result_types=[op.result.type],
                properties={"offset": attr, "size": op.properties["size"]},
                location=op.location,
            )
            view.result.name_hint = op.result.name_hint
            block.insert_op_before(view, op)
            op.result.replace_all_uses_with(view.result)
            block.detach_op(op)
    if next(names_left, None) is not None:
        raise ValueError("rewrite_to_pool: fewer mallocs than planned buffers")
    release = d.PoolReleaseOp.create(operands=[pool.pool])
    block.insert_op_before(release, block.last_op)
    function.attributes["dnn.planner"] = StringAttr(plan.algorithm)


def rewrite_to_pools(function: func.FuncOp, names: list[str], result: PoolsPlan) -> None:
    """Apply a verified multi-pool plan: one named pool_init per pool that
    holds a buffer (in pool order), each malloc a mem_offset on its pool,
    deallocs gone except those of dynamic buffers, every pool released
    before the return. `names` lists the planner's names in malloc order."""
    block = function.body.block
    inits: dict[str, d.PoolInitOp] = {}
    used = set(result.assignment.values())
    anchor = block.first_op
    for pool in result.pools:
        if pool.name not in used:
            continue
        size = max(result.plans[pool.name].pool_size, 1)
        init = d.PoolInitOp.create(
            result_types=[MemRefType(i8, [size])],
            properties={"size": IntegerAttr(size, i64), "alignment": IntegerAttr(pool.alignment, i64),
                        "pool_name": StringAttr(pool.name)},
        )
        init.pool.name_hint = "mempool_" + "".join(c if c.isalnum() or c == "_" else "_" for c in pool.name)
        block.insert_op_before(init, anchor)
        inits[pool.name] = init
    mallocs = [o for o in block.ops if isinstance(o, d.MallocOp)]
    dynamic = set(result.dynamic)
    kept: set = set()
    for malloc, name in zip(mallocs, names, strict=True):
        if name in dynamic:
            kept.add(malloc.result)
            continue
        pool = result.assignment[name]
        view = d.MemOffsetOp.create(
            operands=[inits[pool].pool],
            result_types=[malloc.result.type],
            properties={"offset": IntegerAttr(result.plans[pool].offsets[name], i64), "size": malloc.properties["size"]},
        )
        view.result.name_hint = malloc.result.name_hint
        block.insert_op_before(view, malloc)
        malloc.result.replace_all_uses_with(view.result)
        malloc.detach()
        malloc.erase()
    for dealloc in [o for o in block.ops if isinstance(o, d.DeallocOp)]:
        if dealloc.buffer not in kept:
            dealloc.detach()
            dealloc.erase()
    for init in reversed(list(inits.values())):
        block.insert_op_before(d.PoolReleaseOp.create(operands=[init.pool]), block.last_op)
    function.attributes["dnn.planner"] = StringAttr(
        ",".join(f"{p}={result.plans[p].algorithm}" for p in inits) or "none")

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
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, StringAttr, i8, i64
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.liveness import Liveness, analyze_function
from pyocc.dialects.dnn import ops as d


def planning_problem(liveness: Liveness, alignment: int):
    """The planner's input: one Buffer per malloc, live from its malloc to
    its last use (views included)."""
    from pyocc.planning import Buffer, Problem

    buffers = []
    for b in liveness.intermediates:
        if isinstance(b.value.owner, d.MallocOp):
            buffers.append(Buffer(f"{b.name}#{len(buffers)}", b.bytes, b.first, b.last, alignment))
    return Problem(tuple(buffers))


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

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from pyocc.planning import ALGORITHMS, PlanningError, plan_memory

        if self.planner != "auto" and self.planner not in ALGORITHMS:
            raise PassFailedException(
                f"dnn-memory-pool: unknown planner '{self.planner}' (choose from auto, {', '.join(sorted(ALGORITHMS))})"
            )
        if self.alignment < 1:
            raise PassFailedException("dnn-memory-pool: alignment must be positive")
        for function in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            liveness = analyze_function(function)
            problem = planning_problem(liveness, self.alignment)
            if not problem.buffers:
                continue
            try:
                plan = plan_memory(problem, self.planner, time_budget_ms=self.time_budget_ms)
            except PlanningError as e:
                raise PassFailedException(f"dnn-memory-pool: {e}") from None
            rewrite_to_pool(function, [b.name for b in problem.buffers], plan, self.alignment)


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
    pool.pool.name_hint = "pool"
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

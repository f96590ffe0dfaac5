"""`dnn-reorder{strategy=auto|exact|greedy|given, budget_ms=500}`: run the
ops of a tensor-form function in the order with the smallest peak of live
bytes (the max-live lower bound the pool planner then reaches).

Any topological order computes the same values; which tensors are alive
together depends on the order. The pass turns the function body into a
plain DAG (pyocc.planning.schedule), lets a scheduling strategy pick an
order, and moves the ops:

- nodes are the compute ops; their tensor results are the DAG's tensors,
  counted exactly as the liveness analysis counts them: graph inputs,
  returned values and weights own no activation bytes, and a `dnn.view`
  is transparent (its users read its root, keeping the root alive);
- `dnn.weight` and `dnn.view` are not scheduled: each moves to just before
  its first user in the new order (unused ones go before the return);
- any other op (one with possible side effects) stays fixed relative to
  every other node, and `func.return` stays last.

The body is left untouched unless the new order's peak is strictly lower.

`in_place=true` also models dnn-coalesce's in-place writes: an op in
with a `WritesInPlace` trait (pyocc.dialects.dnn.ops) whose result has an input's type writes over that input
when the input dies there, so its step needs no new bytes; the order then
decides which reader of a tensor runs last and may reuse it.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import function_bodies
from pyocc.dialects.dnn import ops as d
from pyocc.planning import fitted_alignment
from pyocc.planning.schedule import (
    STRATEGIES,
    Schedule,
    ScheduleGraph,
    ScheduleTimeout,
    Tensor,
    is_topological,
    least_worst,
    peak_of,
    schedule,
)


def _floats(op: Operation) -> bool:
    """Weights and views are placed with their users, not scheduled."""
    return isinstance(op, d.WeightOp | d.ViewOp)


def _readers(value: SSAValue) -> list[Operation]:
    """The ops that read `value`, looking through views."""
    readers: list[Operation] = []
    for use in value.uses:
        if isinstance(use.operation, d.ViewOp):
            readers.extend(_readers(use.operation.result))
        else:
            readers.append(use.operation)
    return readers


def _enclosing(op: Operation, block: Block) -> Operation | None:
    """The op of `block` that is or contains `op` (None if none does)."""
    current: Operation | None = op
    while current is not None and current.parent is not block:
        current = current.parent_op()
    return current


def _in_place_inputs(op: Operation) -> list[SSAValue]:
    """The operands `op` may write its result over (same type, not a view)."""
    if not isinstance(op, d.DnnComputeOp) or len(op.results) != 1:
        return []
    return [v for v in op.in_place_inputs() if v.type == op.results[0].type
            and isinstance(v.owner, d.DnnComputeOp)]


def schedule_graph(block: Block, in_place: bool = False,
                   type_bytes: Callable[[Attribute], int] = d.type_bytes) -> tuple[ScheduleGraph, list[Operation]]:
    """The block as a DAG: one node per op that is not a weight or a view
    (the return is the last node), in block order; also the node ops.
    `in_place` adds the inputs each node may write over (their `WritesInPlace` trait)."""
    ret = block.last_op
    returned = set(ret.operands) if isinstance(ret, func.ReturnOp) else set()
    nodes = schedule_nodes(block)
    index = {op: i for i, op in enumerate(nodes)}
    tensors: list[Tensor] = []
    tensor_of: dict[SSAValue, int] = {}
    after: list[frozenset[int]] = []
    fixed: list[int] = []
    for i, op in enumerate(nodes):
        compute = isinstance(op, d.DnnComputeOp)
        for result in op.results:
            size = type_bytes(result.type) if compute and result not in returned else 0
            readers = (_enclosing(r, block) for r in _readers(result))
            consumers = frozenset(index[r] for r in readers if r in index and r is not op)
            tensor_of[result] = len(tensors)
            tensors.append(Tensor(size, i, consumers))
        if compute:
            after.append(frozenset(fixed))
        else:
            # Unknown ops and the return keep their place among all nodes.
            after.append(frozenset(range(i)))
            fixed.append(i)
    names = tuple(op.results[0].name_hint or op.name if op.results else op.name for op in nodes)
    writes_over: list[frozenset[int]] = []
    for i, op in enumerate(nodes):
        own = tensors[tensor_of[op.results[0]]] if len(op.results) == 1 else None
        writes_over.append(frozenset(
            tensor_of[v] for v in (_in_place_inputs(op) if in_place else [])
            if own is not None and own.bytes and tensors[tensor_of[v]].bytes == own.bytes
        ))
    return ScheduleGraph(names, tuple(tensors), tuple(after), tuple(writes_over) if in_place else ()), nodes


def schedule_nodes(block: Block) -> list[Operation]:
    """The ops of `block` that `schedule_graph` makes nodes of (all but
    weights and views), in block order: an order is a permutation of their
    positions."""
    return [op for op in block.ops if not _floats(op)]


def order_taken(nodes: list[Operation], block: Block) -> tuple[int, ...]:
    """The order `block` runs `nodes` in (the `schedule_nodes` of the block
    before a reorder), as their positions there: the identity when the
    reorder kept the given order."""
    position = {op: i for i, op in enumerate(nodes)}
    return tuple(position[op] for op in block.ops if op in position)


def take_order(function: func.FuncOp, order: tuple[int, ...], in_place: bool = False) -> bool:
    """Run `function`'s nodes in `order` (positions of its `schedule_nodes`,
    as `order_taken` gives them) instead of searching for one: the program
    a reorder that found `order` makes, weights and views before their
    first users (nothing moves for the identity). False, and nothing
    moved, when `order` is no topological order of the function's nodes
    (another program's)."""
    block = function.body.block
    graph, nodes = schedule_graph(block, in_place)
    if not is_topological(graph, order):
        return False
    if list(order) != list(range(len(nodes))):
        reorder_block(block, list(order), nodes)
    return True


def reorder_block(block: Block, order: list[int], nodes: list[Operation]) -> None:
    """Move the ops of `block` so that `nodes` run in `order`; weights and
    views go right before their first user, unused ones before the return."""
    placed: set[Operation] = set()
    new_ops: list[Operation] = []

    def place(op: Operation) -> None:
        if op in placed:
            return
        for operand in op.operands:
            owner = operand.owner
            if isinstance(owner, Operation) and owner.parent is block and _floats(owner):
                place(owner)
        placed.add(op)
        new_ops.append(op)

    floating = [op for op in block.ops if _floats(op)]
    ret = nodes[order[-1]] if isinstance(nodes[order[-1]], func.ReturnOp) else None
    for v in order:
        if nodes[v] is not ret:
            place(nodes[v])
    for op in floating:
        place(op)
    if ret is not None:
        place(ret)
    for op in new_ops:
        op.detach()
    block.add_ops(new_ops)


MULTIPLES_FROM = 17
"""The smallest probe value whose multiples count as multiples of the size
(`dimension_at`): a smaller one divides too many of a model's own
dimensions (7 divides 224)."""


def small_values(symbol_dim: int) -> tuple[int, ...]:
    """The smaller values of a symbolic dimension an order is compared at:
    1 and the square root of its value (1 and 22 for a probe at 509)."""
    return tuple(sorted({1, max(math.isqrt(symbol_dim), 1)}))


def dimension_at(symbol_dim: int, value: int, n: int) -> int:
    """Dimension `n` of a program lowered at the probe `symbol_dim`, at the
    size `value`: the probe itself is the size, and from ``MULTIPLES_FROM``
    on, ``k * symbol_dim**e`` is ``k * value**e`` (a batch of 2 flattened
    with the sequence is ``2 * S`` rows, scores flattened ``S * S``: the
    probes are primes, so such a multiple is rarely a dimension of the
    model's own); any other dimension is the model's own."""
    if n == symbol_dim:
        return value
    if symbol_dim < MULTIPLES_FROM or n == 0:
        return n
    power = 0
    while n % symbol_dim == 0:
        n //= symbol_dim
        power += 1
    return n * value ** power


def bytes_at(symbol_dim: int, value: int, t: Attribute, alignment: int = 1) -> int:
    """A type's bytes with its dimensions at the size `value` (`dimension_at`),
    rounded up to its buffer's alignment in a pool aligned to `alignment`
    (`d.buffer_alignment`, less for a buffer of fewer bytes:
    `fitted_alignment`; what it takes in the pool)."""
    assert isinstance(t, TensorType | MemRefType), t
    size = math.prod(dimension_at(symbol_dim, value, n) for n in t.get_shape()) * d.element_bytes(t.get_element_type())
    step = fitted_alignment(d.buffer_alignment(t, alignment), size)
    return -(-size // step) * step


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector. The search allocates many
    small acyclic objects; with a large module in memory, the collector's
    full passes over it would take longer than the search itself."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def reorder_function(function: func.FuncOp, strategy: str, budget_ms: float, in_place: bool = False,
                     keep_given: bool = False, symbol_dim: int = 0) -> Schedule:
    """Reorder one function in place; returns the schedule it used. With a
    `symbol_dim`, of the order found and that order kept toward the given
    one, the one whose peak is closer to the other's at small values of
    that dimension (`small_values`)."""
    block = function.body.block
    with _collector_paused():
        graph, nodes = schedule_graph(block, in_place)
        result = schedule(graph, strategy, budget_ms, keep_given=keep_given or symbol_dim > 0)
        if symbol_dim > 0 and not keep_given and result.searched != result.order:
            smaller = [schedule_graph(block, in_place, partial(bytes_at, symbol_dim, value))[0]
                       for value in small_values(symbol_dim)]
            if least_worst([result.order, result.searched], smaller) == 1:
                result.order, result.peak = result.searched, peak_of(graph, result.searched)
    if result.peak < result.given_peak:
        reorder_block(block, result.order, nodes)
    return result


@dataclass(frozen=True)
class DnnReorderPass(ModulePass):
    """Reorder ops to lower the peak of live bytes (module docstring)."""

    name = "dnn-reorder"

    strategy: str = "auto"
    """auto (exact per region within the budget, else the beam; never worse
    than the given order), exact (optimal or fail), greedy (beam search) or
    given (keep the order)."""

    budget_ms: int = 500
    """Time the exact search may spend per function."""

    in_place: bool = False
    """Model in-place writes over dying inputs (as dnn-coalesce makes them)."""

    keep_given: bool = False
    """Keep the given order wherever the peak allows: the order found is
    moved back toward the given one, op by op, without raising the peak
    (pyocc.planning.schedule, `keep_given`)."""

    order: tuple[int, ...] = ()
    """Take this order (positions of the ops as `schedule_nodes` lists them,
    see `order_taken`) instead of searching one, where it is an order of
    the function's ops (else search as `strategy` says); the module must
    hold one function. A symbolic compile's later probes take the order its
    first probe's search found (pyocc.api._probe): their programs are the
    first's but for the sizes, and the search is a sixth of a probe."""

    symbol_dim: int = 0
    """A symbolic compile's probe value (0: none): dimensions equal to it
    (and, from ``MULTIPLES_FROM`` on, its multiples: `dimension_at`) are
    the symbolic size. The order found and that order kept toward the
    given one (`keep_given`) have the same peak here; the one taken is the
    one closer to the other's peak at small values of the size (1 and the
    square root of the probe), where what was free at this size is not."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "tensors")
        if self.strategy not in STRATEGIES:
            raise PassFailedException(
                f"dnn-reorder: unknown strategy '{self.strategy}' (choose from {', '.join(STRATEGIES)})"
            )
        if self.budget_ms < 0:
            raise PassFailedException("dnn-reorder: budget_ms must not be negative")
        functions = list(function_bodies(op))
        if self.order and len(functions) != 1:
            raise PassFailedException(f"dnn-reorder: an order is given for one function, the module has "
                                      f"{len(functions)}")
        for function in functions:
            for o in function.body.block.ops:
                if isinstance(o, d.DnnComputeOp) and o.on_buffers:
                    raise PassFailedException(
                        f"dnn-reorder: @{function.sym_name.data} is in buffer form; reorder before dnn-insert-memory-ops"
                    )
            if self.order and take_order(function, self.order, self.in_place):
                continue
            try:
                reorder_function(function, self.strategy, self.budget_ms, self.in_place, self.keep_given,
                                 self.symbol_dim)
            except ScheduleTimeout:
                raise PassFailedException(
                    f"dnn-reorder: exact search on @{function.sym_name.data} did not finish in "
                    f"{self.budget_ms} ms; raise budget_ms or use strategy=auto"
                ) from None

"""A symbolic pool plan as IR: the offsets and the pool size as arith ops on
the symbols' values.

``pool_function(plan)`` writes `pyocc.planning.symbolic.SymbolicPlan` as one
``func.func`` that takes every symbol's value (``index``, in sorted symbol
order) and returns the pool's byte size, then every buffer's byte offset (in
the planning problem's buffer order). The body is the plan's own recipe,
evaluated once per run:

    size(b)   = the buffer's polynomial            (arith.muli / arith.addi)
    offset(b) = align(max(end(c) for c in below(b)), alignment(b))
                                                   (arith.cmpi + arith.select,
                                                    arith.floordivsi)
    end(b)    = offset(b) + size(b)
    pool      = max(end(b) for every b no buffer sits on)

Only arith ops that xDSL's interpreter runs are used, so tests evaluate the
function at any value and compare it with ``SymbolicPlan.offsets``.

Given the buffers' types (dimensions as polynomials), the function also
holds the symbolic pool form's memory ops: ``dnn.symbolic_pool`` of the
pool size (a ``memref<?xi8>``) and one ``dnn.symbolic_view`` per buffer at
its offset, a memref whose symbolic dimensions are ``?`` with their values
as SSA operands (``memref<1x?x8xf32>`` and ``%sequence``). The compute ops
that would use those views are not written yet.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith, func
from collections.abc import Sequence

from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, IntegerAttr, IntegerType, MemRefType, ModuleOp, i64
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from pyocc.dialects.dnn import ops as d
from pyocc.planning.symbolic import Poly, SymbolicPlan

BufferType = tuple[tuple[Poly, ...], Attribute]
"""A buffer's dimensions as polynomials in the symbols, and its element type."""


class _Emitter:
    """Builds arith ops at the end of one block, sharing constants and powers."""

    def __init__(self, builder: Builder, symbols: dict[str, SSAValue]) -> None:
        self.builder = builder
        self.symbols = symbols
        self.constants: dict[int, SSAValue] = {}
        self.powers: dict[tuple[str, int], SSAValue] = {}
        self.polys: dict[Poly, SSAValue] = {}
        self.last_constant: arith.ConstantOp | None = None

    def constant(self, value: int) -> SSAValue:
        """An index constant (one op per distinct value, all at the top of the block)."""
        if value not in self.constants:
            op = arith.ConstantOp(IntegerAttr(value, IndexType()))
            op.result.name_hint = f"c{value}" if value >= 0 else f"cm{-value}"
            block = self.builder.insertion_point.block
            if self.constants:
                block.insert_op_after(op, self.last_constant)
            elif block.first_op is not None:
                block.insert_op_before(op, block.first_op)
            else:
                block.add_op(op)
            self.last_constant = op
            self.constants[value] = op.result
        return self.constants[value]

    def power(self, name: str, power: int) -> SSAValue:
        """symbol^power by repeated products (shared)."""
        if power == 1:
            return self.symbols[name]
        if (name, power) not in self.powers:
            self.powers[(name, power)] = self.builder.insert(
                arith.MuliOp(self.power(name, power - 1), self.symbols[name])).result
        return self.powers[(name, power)]

    def poly(self, poly: Poly) -> SSAValue:
        """The polynomial's value: a sum of coefficient * powers (shared)."""
        if poly not in self.polys:
            self.polys[poly] = self._sum(poly)
        return self.polys[poly]

    def _sum(self, poly: Poly) -> SSAValue:
        total: SSAValue | None = None
        for monomial, coefficient in poly.terms:
            term: SSAValue | None = None
            for name, power in monomial:
                factor = self.power(name, power)
                term = factor if term is None else self.builder.insert(arith.MuliOp(term, factor)).result
            if term is None:
                term = self.constant(coefficient)
            elif coefficient != 1:
                term = self.builder.insert(arith.MuliOp(self.constant(coefficient), term)).result
            total = term if total is None else self.builder.insert(arith.AddiOp(total, term)).result
        return self.constant(0) if total is None else total

    def maximum(self, values: list[SSAValue]) -> SSAValue:
        """max(values) by compare-and-select (0 when empty)."""
        if not values:
            return self.constant(0)
        top = values[0]
        for value in values[1:]:
            larger = self.builder.insert(arith.CmpiOp(top, value, "sge")).result
            top = self.builder.insert(arith.SelectOp(larger, top, value)).result
        return top

    def align(self, value: SSAValue, alignment: int) -> SSAValue:
        """value rounded up to a multiple of `alignment`: ((v + a - 1) floordiv a) * a."""
        if alignment == 1:
            return value
        bumped = self.builder.insert(arith.AddiOp(value, self.constant(alignment - 1))).result
        blocks = self.builder.insert(arith.FloorDivSIOp(bumped, self.constant(alignment))).result
        return self.builder.insert(arith.MuliOp(blocks, self.constant(alignment))).result


def pool_function(plan: SymbolicPlan, name: str = "pool_plan",
                  buffers: Sequence[BufferType] | None = None) -> func.FuncOp:
    """`plan` as ``func.func @name(%symbol: index, ...) -> (index, ...)``
    returning the pool size, then every buffer's offset (problem order);
    with `buffers` (one type per buffer of the plan's problem), also the
    symbolic pool and a view per buffer (see the module docstring)."""
    problem = plan.problem
    symbols = list(problem.symbols)
    block = Block(arg_types=[IndexType()] * len(symbols))
    for arg, symbol in zip(block.args, symbols, strict=True):
        arg.name_hint = symbol
    builder = Builder(InsertPoint.at_end(block))
    emit = _Emitter(builder, dict(zip(symbols, block.args, strict=True)))
    ends: dict[int, SSAValue] = {}
    offsets: dict[int, SSAValue] = {}
    for i in plan.order:
        buffer = problem.buffers[i]
        hint = buffer.name.replace("#", "_")
        if plan.below[i]:
            offset = emit.align(emit.maximum([ends[c] for c in plan.below[i]]), buffer.alignment)
            if offset not in ends.values():  # an unaligned offset can be another buffer's end
                offset.name_hint = f"offset_{hint}"
        else:
            offset = emit.constant(0)  # the bottom of the pool
        size = emit.poly(buffer.size)
        end = builder.insert(arith.AddiOp(offset, size)).result
        end.name_hint = f"end_{hint}"
        offsets[i], ends[i] = offset, end
    under = {c for cs in plan.below for c in cs}
    pool = emit.maximum([ends[i] for i in range(len(problem.buffers)) if i not in under])
    if buffers is not None:
        _views(builder, emit, plan, buffers, pool, offsets)
    builder.insert(func.ReturnOp(pool, *(offsets[i] for i in range(len(problem.buffers)))))
    results = [IndexType()] * (1 + len(problem.buffers))
    return func.FuncOp(name, ([IndexType()] * len(symbols), results), Region(block))


def _views(builder: Builder, emit: _Emitter, plan: SymbolicPlan, buffers: Sequence[BufferType], size: SSAValue,
           offsets: dict[int, SSAValue]) -> None:
    """dnn.symbolic_pool of `size`, then one dnn.symbolic_view per buffer at
    its offset (problem order), then the pool's release."""
    problem = plan.problem
    if len(buffers) != len(problem.buffers):
        raise ValueError(f"{len(buffers)} buffer types for a plan of {len(problem.buffers)} buffers")
    pool_op = builder.insert(d.SymbolicPoolOp.build(
        operands=[size], result_types=[MemRefType(IntegerType(8), [DYNAMIC_INDEX])],
        properties={"alignment": IntegerAttr(max((b.alignment for b in problem.buffers), default=1), i64)}))
    pool_op.pool.name_hint = "pool"
    for i, (dims, element) in enumerate(buffers):
        shape = [dim.evaluate({}) if dim.is_constant() else DYNAMIC_INDEX for dim in dims]
        dynamic = [emit.poly(dim) for dim in dims if not dim.is_constant()]
        view = builder.insert(d.SymbolicViewOp.build(
            operands=[pool_op.pool, offsets[i], dynamic], result_types=[MemRefType(element, shape)]))
        view.result.name_hint = problem.buffers[i].name.split("#")[0]
    builder.insert(d.PoolReleaseOp.build(operands=[pool_op.pool]))


def pool_module(plan: SymbolicPlan, name: str = "pool_plan",
                buffers: Sequence[BufferType] | None = None) -> ModuleOp:
    """A module holding `pool_function(plan, name, buffers)`."""
    return ModuleOp([pool_function(plan, name, buffers)])

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

``alignment(b)`` is a number where the buffer's size never falls below its
alignment in the piece, else computed from the size
(`pyocc.planning.fitted_alignment`: a compare-and-select per power of two).
    end(b)    = offset(b) + size(b)
    pool      = max(end(b) for every b no buffer sits on)

A plan in pieces (one layout per sub-range of a symbol) computes each
piece's values so and selects them with ``arith.cmpi sle`` on the symbol and
``arith.select``: the first piece whose upper bound holds.

Only arith ops that xDSL's interpreter runs are used, so tests evaluate the
function at any value and compare it with ``SymbolicPlan.offsets``.

Given the buffers' types (dimensions as polynomials), the function also
holds the symbolic pool form's memory ops: ``dnn.symbolic_pool`` of the
pool size (a ``memref<?xi8>``) and one ``dnn.symbolic_view`` per buffer at
its offset, a memref whose symbolic dimensions are ``?`` with their values
as SSA operands (``memref<1x?x8xf32>`` and ``%sequence``).

``symbolic_pool_form`` writes the whole pool-form program that way: the
buffer-form function lowered at two probes, its memrefs made dynamic where
they differ, the plan's arithmetic first, each malloc a view. An op whose
properties differ between the probes (a constant folded to the length, a
Slice end) has no symbolic form yet: one PyoccError.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith, func
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from pyocc.dialects.dnn import ops as d
from pyocc.errors import PyoccError
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

    def fitted_alignment(self, alignment: int, size: SSAValue, least: int = 1) -> SSAValue:
        """`fitted_alignment(alignment, size)` at run time: `alignment`,
        replaced by each smaller power of two down to `least` (the least it
        can be, `SymbolicBuffer.least_alignment`), largest first, that
        `size` is at most (a compare-and-select per power)."""
        fitted = self.constant(alignment)
        power = 1 << (alignment - 1).bit_length() - 1  # the largest power of two below `alignment`
        while power >= least:
            fits = self.builder.insert(arith.CmpiOp(size, self.constant(power), "sle")).result
            fitted = self.builder.insert(arith.SelectOp(fits, self.constant(power), fitted)).result
            power //= 2
        return fitted

    def align(self, value: SSAValue, alignment: int | SSAValue) -> SSAValue:
        """value rounded up to a multiple of `alignment` (a number, or one
        computed at run time): ((v + a - 1) floordiv a) * a."""
        if alignment == 1:
            return value
        if isinstance(alignment, int):
            step, bump = self.constant(alignment), self.constant(alignment - 1)
        else:
            step = alignment
            bump = self.builder.insert(arith.AddiOp(alignment, self.constant(-1))).result
        bumped = self.builder.insert(arith.AddiOp(value, bump)).result
        blocks = self.builder.insert(arith.FloorDivSIOp(bumped, step)).result
        return self.builder.insert(arith.MuliOp(blocks, step)).result


def _offsets(builder: Builder, emit: _Emitter, plan: SymbolicPlan) -> tuple[SSAValue, dict[int, SSAValue]]:
    """(pool size, buffer index -> offset) as arith ops. A plan in pieces
    computes every piece's layout and picks each value with the pieces'
    bounds on the cut symbol (``arith.cmpi sle`` + ``arith.select``, the
    first piece whose bound holds): straight-line arith that the
    interpreter runs (generated code branches instead,
    pyocc.lowering.symbolic_native)."""
    layouts = [_piece_offsets(builder, emit, plan, k) for k in range(len(plan.pieces))]
    if plan.split is None:
        return layouts[0]
    value = emit.symbols[plan.split]
    inside = [builder.insert(arith.CmpiOp(value, emit.constant(piece.ranges[plan.split][1]), "sle")).result
              for piece in plan.pieces[:-1]]

    def choose(values: list[SSAValue], hint: str) -> SSAValue:
        chosen = values[-1]
        for condition, candidate in reversed(list(zip(inside, values[:-1], strict=True))):
            if candidate is not chosen:
                chosen = builder.insert(arith.SelectOp(condition, candidate, chosen)).result
                chosen.name_hint = hint
        return chosen

    offsets = {i: choose([layout[1][i] for layout in layouts], f"offset_{b.name.replace('#', '_')}")
               for i, b in enumerate(plan.problem.buffers)}
    return choose([layout[0] for layout in layouts], "pool_size"), offsets


def _piece_offsets(builder: Builder, emit: _Emitter, plan: SymbolicPlan,
                   index: int) -> tuple[SSAValue, dict[int, SSAValue]]:
    """(pool size, buffer index -> offset) of piece `index`'s layout as
    arith ops, buffers in placement order."""
    problem, piece = plan.problem, plan.pieces[index]
    suffix = f"_piece{index}" if len(plan.pieces) > 1 else ""
    ends: dict[int, SSAValue] = {}
    offsets: dict[int, SSAValue] = {}
    for i in piece.order:
        buffer = problem.buffers[i]
        hint = buffer.name.replace("#", "_")
        if piece.below[i]:
            top = emit.maximum([ends[c] for c in piece.below[i]])
            # one number where it cannot vary over the piece; else from the size, as the planner did
            alignment = buffer.fixed_alignment(piece.ranges)
            offset = emit.align(top, alignment if alignment is not None
                                else emit.fitted_alignment(buffer.alignment, emit.poly(buffer.size),
                                                           buffer.least_alignment(piece.ranges)))
            if offset not in ends.values():  # an unaligned offset can be another buffer's end
                offset.name_hint = f"offset_{hint}{suffix}"
        else:
            offset = emit.constant(0)  # the bottom of the pool
        size = emit.poly(buffer.size)
        end = builder.insert(arith.AddiOp(offset, size)).result
        end.name_hint = f"end_{hint}{suffix}"
        offsets[i], ends[i] = offset, end
    under = {c for cs in piece.below for c in cs}
    return emit.maximum([ends[i] for i in range(len(problem.buffers)) if i not in under]), offsets


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
    pool, offsets = _offsets(builder, emit, plan)
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


def _dynamic(first: Attribute, second: Attribute) -> Attribute:
    """The memref type whose dimensions that differ between two probes' types are `?`."""
    if not isinstance(first, MemRefType) or first == second:
        return first
    assert isinstance(second, MemRefType)
    shape = [a if a == b else DYNAMIC_INDEX for a, b in zip(first.get_shape(), second.get_shape(), strict=True)]
    return MemRefType(first.element_type, shape)


def symbolic_pool_form(probes: Sequence[func.FuncOp], plan: SymbolicPlan, buffers: Sequence[BufferType],
                       what: str = "the model") -> ModuleOp:
    """The pool-form program for every value of the symbols, from the lazy
    buffer-form function lowered at two probe values (same ops, see
    pyocc.symbolic): the symbols become leading ``index`` arguments, every
    memref whose dimensions differ between the probes gets a ``?`` there,
    the pool plan's arithmetic comes first, each ``dnn.malloc`` becomes a
    ``dnn.symbolic_view`` of one ``dnn.symbolic_pool`` and deallocs go.
    PyoccError (one line) for an op whose properties differ between the
    probes (a size written into the op, e.g. a Slice end): such an op has no
    symbolic form yet."""
    first, second = probes
    for a, b in zip(first.body.block.ops, second.body.block.ops, strict=True):
        if isinstance(a, d.MallocOp | d.DeallocOp):
            continue
        if a.properties != b.properties or a.attributes != b.attributes:
            name = a.results[0].name_hint if a.results else None
            raise PyoccError(f"{what}: {a.name}{f' %{name}' if name else ''} holds a number that depends on the "
                             "symbolic size; the symbolic pool form cannot write it yet (the plan and the "
                             "probed program still run)")
    function = first.clone()
    block = function.body.block
    pairs = [*zip(block.args, second.body.block.args, strict=True),
             *((r, s) for op_a, op_b in zip(block.ops, second.body.block.ops, strict=True)
               for r, s in zip(op_a.results, op_b.results, strict=True))]
    mallocs = [op for op in block.ops if isinstance(op, d.MallocOp)]
    for value, other in pairs:
        dynamic = _dynamic(value.type, other.type)
        if dynamic != value.type:
            Rewriter.replace_value_with_new_type(value, dynamic)
    symbols = list(plan.problem.symbols)
    for k, symbol in enumerate(symbols):
        block.insert_arg(IndexType(), k).name_hint = symbol
    first_op = block.first_op
    assert first_op is not None
    builder = Builder(InsertPoint.before(first_op))
    emit = _Emitter(builder, dict(zip(symbols, block.args[:len(symbols)], strict=True)))
    size, offsets = _offsets(builder, emit, plan)
    pool = builder.insert(d.SymbolicPoolOp.build(
        operands=[size], result_types=[MemRefType(IntegerType(8), [DYNAMIC_INDEX])])).pool
    pool.name_hint = "pool"
    # planning_problem numbers the buffers by their mallocs, in order
    if len(mallocs) != len(buffers):
        raise PyoccError(f"{what}: {len(mallocs)} buffers in the program but {len(buffers)} in the plan")
    for i, malloc in enumerate(mallocs):
        dims, _ = buffers[i]
        if [size_ == DYNAMIC_INDEX for size_ in malloc.result.type.get_shape()] != [
                not dim.is_constant() for dim in dims]:
            raise PyoccError(f"{what}: buffer %{malloc.result.name_hint} has the type {malloc.result.type} at the "
                             f"probes but the dimensions {', '.join(map(str, dims))} when fitted")
        view_builder = Builder(InsertPoint.before(malloc))
        emit.builder = view_builder
        dynamic = [emit.poly(dim) for dim, size_ in zip(dims, malloc.result.type.get_shape(), strict=True)
                   if size_ == DYNAMIC_INDEX]
        view = view_builder.insert(d.SymbolicViewOp.build(
            operands=[pool, offsets[i], dynamic], result_types=[malloc.result.type]))
        view.result.name_hint = malloc.result.name_hint
        malloc.result.replace_all_uses_with(view.result)
        block.erase_op(malloc)
    for op in [op for op in block.ops if isinstance(op, d.DeallocOp)]:
        block.erase_op(op)
    last = block.last_op
    assert last is not None
    block.insert_op_before(d.PoolReleaseOp.build(operands=[pool]), last)
    function.function_type = FunctionType.from_lists([a.type for a in block.args],
                                                     list(function.function_type.outputs))
    if function.arg_attrs is not None:
        function.arg_attrs = ArrayAttr([*(DictionaryAttr({}) for _ in symbols), *function.arg_attrs.data])
    return ModuleOp([function])

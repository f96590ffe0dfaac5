"""Building blocks of native kernels: typed operands, counted loops, loop
nests over broadcast operands, index arithmetic, reductions, and the scalar
math of pyocc.lowering.llvm_math.

An emitter starts with `KernelBuilder(module, symbol, site)`, which defines
the site's function, loads its buffer pointers into `inputs` / `outputs`
(`Operand`s: pointer, static shape, dtype) and leaves the builder in the
entry block; it emits its loops with `loop`, `loop_nest`, `reduce` and
`strided_loop_nest`, then calls `finish()`.

Loops count with i64 induction variables from 0 to a compile-time count,
tested at the bottom (every count is >= 1; empty loops are not emitted), so
LLVM's loop vectoriser sees their trip counts. Values are never reassociated
(no fast-math flags): a native kernel rounds like its numpy kernel wherever
both compute in the same order.

Threads: an emitter marks a loop whose iterations write disjoint elements
and read nothing another iteration writes with `parallel=True`. When the
model is compiled for several threads (the site carries "parallel_for", the
symbol of its model's parallel-for, pyocc.lowering.native.threads), the
kernel's code goes into an outlined body `void symbol.body(i8 **buffers,
i64 begin, i64 end)` and the first such loop at the top level of the kernel
(not inside another loop) with at least PARALLEL_MIN_WORK innermost
iterations runs from `begin` to `end`; `symbol(buffers)` hands the range
[0, count) to the parallel-for, which runs the body once per thread on a
slice of it. That is correct only if the body's code outside that loop has
no effect, so `ParallelOutline.finish` checks it (no store but to the
stack, no call but LLVM's pure intrinsics) and otherwise calls the body
once, serially, on the whole range. Each element is computed by the same
instructions whatever the thread count, so results do not change with it.
Compiled for one thread (no "parallel_for"), a kernel is exactly what it
was before threads existed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import llvmlite.ir as ir

from pyocc.lowering.llvm_math import ScalarMath, broadcast_strides, row_major_strides, unary_expression
from pyocc.lowering.native.sizes import Size, at_least_one, has_sizes, i64_of

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
#: every native kernel's signature: void kernel(i8 **buffers)
KERNEL_TYPE = ir.FunctionType(ir.VoidType(), [PTR])
#: a kernel's outlined body when it runs on threads: void body(i8 **buffers, i64 begin, i64 end)
BODY_TYPE = ir.FunctionType(ir.VoidType(), [PTR, I64, I64])
#: a model's parallel-for: void parallel_for(body, i8 **buffers, i64 count, i64 chunks_per_thread)
PARALLEL_FOR_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64])
#: how many chunks per thread a parallel-for cuts a loop into (the threads
#: claim them one at a time, pyocc.lowering.native.threads): several for
#: loops of element operations, one for split BLAS calls, each of which
#: packs a whole operand again (4 parts of a 256x196x2304 sgemm took 1.9x
#: the CPU time of 1)
CHUNKS_PER_THREAD = 4
BLAS_CHUNKS_PER_THREAD = 1
#: a loop runs on threads only with at least this many innermost iterations
#: (waking the workers costs about as much as this many element operations)
PARALLEL_MIN_WORK = 1 << 16

#: numpy dtype name -> the llvm type of one element (bool is one byte, 0 or 1)
ELEMENT_TYPES: dict[str, ir.Type] = {
    "float32": F32, "float64": F64,
    "int8": I8, "int16": I16, "int32": I32, "int64": I64,
    "uint8": I8, "uint16": I16, "uint32": I32, "uint64": I64,
    "bool": I8,
}
#: numpy dtype name -> bytes per element
ITEMSIZE: dict[str, int] = {"float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
                            "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1}
FLOATS = frozenset({"float32", "float64"})
SIGNED = frozenset({"int8", "int16", "int32", "int64"})
UNSIGNED = frozenset({"uint8", "uint16", "uint32", "uint64", "bool"})


def element_type(dtype: str) -> ir.Type:
    """The llvm type of one element of numpy dtype `dtype`."""
    try:
        return ELEMENT_TYPES[dtype]
    except KeyError:
        raise ValueError(f"native kernels do not handle dtype {dtype}") from None


def site_dtypes(site: dict[str, Any]) -> list[str | None]:
    """The dtype of every operand of `site` (inputs flattened, then outputs;
    None for an absent optional input)."""
    dtypes: list[str | None] = []
    for spec in site["inputs"]:
        if spec is None:
            dtypes.append(None)
        elif isinstance(spec, list):
            dtypes.extend(s["dtype"] for s in spec)
        else:
            dtypes.append(spec["dtype"])
    return dtypes + [s["dtype"] for s in site["outputs"]]


def all_dtypes_in(site: dict[str, Any], allowed: Sequence[str] | frozenset[str]) -> bool:
    """Whether every present operand of `site` has a dtype in `allowed`."""
    return all(d is None or d in allowed for d in site_dtypes(site))


def kernel_function(module: ir.Module, symbol: str) -> ir.Function:
    """`void symbol(i8 **buffers)` in `module`, internal, with no body yet
    (the declaration the exported module already holds, if any). Never
    inlined into the run function: each site is optimised once, on its
    own, and shows under its name in a profiler."""
    function = module.globals.get(symbol)
    if function is None:
        function = ir.Function(module, KERNEL_TYPE, symbol)
    elif not isinstance(function, ir.Function) or not function.is_declaration:
        raise ValueError(f"@{symbol} is already defined in the module")
    function.linkage = "internal"
    function.attributes.add("noinline")
    return function


def emit_size_wrapper(module: ir.Module, symbol: str, shared: str, slots: int, sizes: Sequence[int]) -> None:
    """`void symbol(i8 **buffers)`: the site's `slots` buffer pointers and
    then its `sizes` (i64s cast to pointers) in an array on the stack,
    passed to `void shared(i8 **buffers)`, the function its kernel shares
    with sites that differ only in those sizes (it reads them with
    `run_time_size`)."""
    function = kernel_function(module, symbol)
    target = module.globals.get(shared)
    if target is None:
        target = ir.Function(module, KERNEL_TYPE, shared)
    b = ir.IRBuilder(function.append_basic_block("entry"))
    buffers = function.args[0]
    array = b.alloca(PTR, size=ir.Constant(I64, slots + len(sizes)))
    for slot in range(slots):
        pointer = b.load(b.gep(buffers, [ir.Constant(I64, slot)], inbounds=True, source_etype=PTR), typ=PTR)
        b.store(pointer, b.gep(array, [ir.Constant(I64, slot)], inbounds=True, source_etype=PTR))
    for index, size in enumerate(sizes):
        b.store(ir.Constant(I64, int(size)).inttoptr(PTR),
                b.gep(array, [ir.Constant(I64, slots + index)], inbounds=True, source_etype=PTR))
    b.call(target, [array])
    b.ret_void()


def run_time_size(builder: ir.IRBuilder, buffers: ir.Value, slot: int) -> ir.Value:
    """The size a wrapper (`emit_size_wrapper`) put in `buffers[slot]`, as an i64."""
    pointer = builder.load(builder.gep(buffers, [ir.Constant(I64, slot)], inbounds=True, source_etype=PTR), typ=PTR)
    return builder.ptrtoint(pointer, I64)


class ParallelOutline:
    """The functions of one kernel `symbol`: with `parallel_for` (the model's
    parallel-for symbol) an outlined body the emitter writes into and the
    kernel that calls it (see the module docstring); without, just the
    kernel. Emitters write into `function` and say which loop runs in
    parallel with `claim`; `finish` writes the kernel."""

    def __init__(self, module: ir.Module, symbol: str, parallel_for: str | None):
        """Define `symbol` (and its body when `parallel_for` is given)."""
        self.kernel = kernel_function(module, symbol)
        self.parallel_for = parallel_for
        self.function = self.kernel
        #: loops being emitted around the current position
        self.depth = 0
        #: the trip count of the claimed loop, once one is
        self.count: int | None = None
        self._before: set[ir.Block] = set()
        self._loop_blocks: set[ir.Block] = set()
        if parallel_for is not None:
            self.function = ir.Function(module, BODY_TYPE, module.get_unique_name(f"{symbol}.body"))
            self.function.linkage = "internal"

    def claim(self, count: int, work: int) -> tuple[ir.Value, ir.Value] | None:
        """For a loop of `count` independent iterations and `work` innermost
        iterations about to be emitted here: (begin, end) to run it over,
        when it runs in parallel; None when it runs serially over [0, count)."""
        if self.parallel_for is None or self.depth or self.count is not None or count < 2 \
                or work < PARALLEL_MIN_WORK:
            return None
        self.count = count
        self._before = set(self.function.blocks)
        return self.function.args[1], self.function.args[2]

    def claimed(self, after: ir.Block) -> None:
        """The claimed loop is emitted; `after` is the block that follows it."""
        self._loop_blocks = set(self.function.blocks) - self._before - {after}

    def _outside_has_no_effect(self) -> bool:
        for block in self.function.blocks:
            if block in self._loop_blocks:
                continue
            for instruction in block.instructions:
                if isinstance(instruction, ir.StoreInstr) and not isinstance(instruction.operands[1], ir.AllocaInstr):
                    return False
                if isinstance(instruction, ir.CallInstr):
                    callee = instruction.callee
                    if not (isinstance(callee, ir.Function) and callee.name.startswith("llvm.")
                            and not callee.name.startswith("llvm.mem")):
                        return False
        return True

    @property
    def parallel(self) -> bool:
        """Whether the kernel hands its claimed loop to the parallel-for
        (known once the body is complete)."""
        return self.count is not None and self._outside_has_no_effect()

    def finish(self) -> None:
        """Write the kernel: the parallel-for over the body, or one call of it
        over the whole range (which LLVM inlines)."""
        if self.parallel_for is None:
            return
        module = self.kernel.module
        b = ir.IRBuilder(self.kernel.append_basic_block("entry"))
        buffers = self.kernel.args[0]
        if self.parallel:
            parallel_for = module.globals.get(self.parallel_for)
            if parallel_for is None:
                parallel_for = ir.Function(module, PARALLEL_FOR_TYPE, self.parallel_for)
            b.call(parallel_for, [self.function, buffers, ir.Constant(I64, self.count), I64(CHUNKS_PER_THREAD)])
        else:
            b.call(self.function, [buffers, ir.Constant(I64, 0), ir.Constant(I64, self.count or 0)])
        b.ret_void()


@dataclass(frozen=True)
class Operand:
    """One buffer of a site: its data pointer and static type."""

    pointer: ir.Value
    shape: tuple[int, ...]
    dtype: str

    @property
    def element(self) -> ir.Type:
        """The llvm type of one element."""
        return element_type(self.dtype)

    @property
    def size(self) -> int:
        """Elements in the buffer."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes in the buffer."""
        return self.size * ITEMSIZE[self.dtype]

    @property
    def strides(self) -> list[int]:
        """Row-major element strides."""
        return row_major_strides(self.shape)


def merge_dims(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbouring dims that every operand
    walks contiguously (stride[d] == stride[d+1] * shape[d+1]), so loop nests
    are as shallow, and inner loops as long, as the layout allows."""
    kept = [d for d in range(len(shape)) if shape[d] != 1]
    merged_shape: list[int] = []
    merged: list[list[int]] = [[] for _ in strides]
    for d in kept:
        if merged_shape and all(s[-1] == stride[d] * shape[d] for s, stride in zip(merged, strides, strict=True)):
            merged_shape[-1] *= shape[d]
            for s, stride in zip(merged, strides, strict=True):
                s[-1] = stride[d]
        else:
            merged_shape.append(shape[d])
            for s, stride in zip(merged, strides, strict=True):
                s.append(stride[d])
    return merged_shape, merged


class KernelBuilder:
    """Writes one site's native function (see the module docstring)."""

    def __init__(self, module: ir.Module, symbol: str, site: dict[str, Any]):
        """Define `symbol` in `module` for `site` and load its operands."""
        self.module = module
        self.site = site
        self.kwargs: dict[str, Any] = site["kwargs"]
        self.outline = ParallelOutline(module, symbol, site.get("parallel_for"))
        self.function = self.outline.function
        entry = self.function.append_basic_block("entry")
        if has_sizes(site):
            # the entry block holds the run-time sizes' values (pyocc.lowering.native.sizes), the code follows
            start = self.function.append_basic_block("start")
            ir.IRBuilder(entry).branch(start)
            entry = start
        self.b = ir.IRBuilder(entry)
        self.math = ScalarMath(self.b, module, "host")
        buffers = self.function.args[0]
        slot = 0
        self.inputs: list[Operand | None | list[Operand]] = []
        for spec in site["inputs"]:
            if spec is None:
                self.inputs.append(None)
                slot += 1
            elif isinstance(spec, list):
                self.inputs.append([self._operand(buffers, slot + i, s) for i, s in enumerate(spec)])
                slot += len(spec)
            else:
                self.inputs.append(self._operand(buffers, slot, spec))
                slot += 1
        self.outputs = [self._operand(buffers, slot + i, s) for i, s in enumerate(site["outputs"])]

    def _operand(self, buffers: ir.Value, slot: int, spec: dict[str, Any]) -> Operand:
        b = self.b
        pointer = b.load(b.gep(buffers, [self.i64(slot)], inbounds=True, source_etype=PTR), typ=PTR)
        return Operand(pointer, tuple(spec["shape"]), spec["dtype"])

    def input(self, index: int) -> Operand:
        """Input `index`, which must be a present, single buffer."""
        operand = self.inputs[index]
        assert isinstance(operand, Operand), f"input {index} of {self.site['kernel']} is {operand!r}"
        return operand

    def finish(self) -> None:
        """Return from the kernel (and write the kernel that runs its body on
        threads, see ParallelOutline)."""
        self.b.ret_void()
        self.outline.finish()

    # -- values --------------------------------------------------------------

    @staticmethod
    def i64(value: int | Size) -> ir.Value:
        """An i64 constant (a run-time Size: its value, pyocc.lowering.native.sizes)."""
        return i64_of(value)

    @staticmethod
    def constant(value: float | int, dtype: str) -> ir.Constant:
        """A constant of numpy dtype `dtype` (bools as 0/1 bytes)."""
        if dtype in FLOATS:
            return ir.Constant(element_type(dtype), float(value))
        return ir.Constant(element_type(dtype), int(value))

    def address(self, operand: Operand, offset: ir.Value) -> ir.Value:
        """&operand[offset] (offset in elements)."""
        return self.b.gep(operand.pointer, [offset], inbounds=True, source_etype=operand.element)

    def load(self, operand: Operand, offset: ir.Value) -> ir.Value:
        """operand[offset]."""
        return self.b.load(self.address(operand, offset), typ=operand.element)

    def store(self, value: ir.Value, operand: Operand, offset: ir.Value) -> None:
        """operand[offset] = value."""
        self.b.store(value, self.address(operand, offset))

    def offset(self, indices: Sequence[ir.Value], strides: Sequence[int], base: int | ir.Value = 0) -> ir.Value:
        """base + sum(index * stride) in elements; zero strides cost nothing."""
        b = self.b
        total: ir.Value = self.i64(base) if isinstance(base, int | Size) else base
        for index, stride in zip(indices, strides, strict=True):
            if stride == 1:
                total = b.add(total, index)
            elif stride:
                total = b.add(total, b.mul(index, self.i64(stride)))
        return total

    def to_float(self, value: ir.Value, dtype: str, target: ir.Type = F32) -> ir.Value:
        """A value of numpy dtype `dtype` as a float of type `target`."""
        b = self.b
        if dtype in FLOATS:
            if value.type == target:
                return value
            return b.fpext(value, target) if target == F64 else b.fptrunc(value, target)
        return b.uitofp(value, target) if dtype in UNSIGNED else b.sitofp(value, target)

    def clamp_index(self, index: ir.Value, size: int) -> tuple[ir.Value, ir.Value]:
        """(index clamped into [0, size), whether it was in range): a load at
        the clamped index is always safe; the caller selects on the flag."""
        b = self.b
        inside = b.and_(b.icmp_signed(">=", index, self.i64(0)), b.icmp_signed("<", index, self.i64(size)))
        low = b.select(b.icmp_signed("<", index, self.i64(0)), self.i64(0), index)
        clamped = b.select(b.icmp_signed(">=", low, self.i64(size)), self.i64(size - 1), low)
        return clamped, inside

    # -- loops ---------------------------------------------------------------

    def loop(self, count: int, body: Callable[[ir.Value], None], parallel: bool = False,
             work: int | None = None) -> None:
        """for i in range(count): body(i), with i an i64 (nothing for count 0,
        no loop for count 1). `parallel`: the iterations are independent (see
        the module docstring), `work` innermost iterations in all (default
        `count`), so the loop may run on threads."""
        span = self.outline.claim(count, count if work is None else work) if parallel else None
        if span is None:
            self.reduce(count, None, lambda i, acc: body(i))
            return
        b = self.b
        begin, end = span
        header = b.append_basic_block("parallel.loop")
        after = b.append_basic_block("parallel.end")
        before = b.block
        b.cbranch(b.icmp_unsigned("<", begin, end), header, after)
        b.position_at_end(header)
        index = b.phi(I64)
        index.add_incoming(begin, before)
        self.outline.depth += 1
        body(index)
        self.outline.depth -= 1
        following = b.add(index, self.i64(1))
        index.add_incoming(following, b.block)
        b.cbranch(b.icmp_unsigned("<", following, end), header, after)
        b.position_at_end(after)
        self.outline.claimed(after)

    def reduce(self, count: int, initial: ir.Value | None,
               step: Callable[[ir.Value, ir.Value | None], ir.Value | None]) -> ir.Value | None:
        """acc = initial; for i in range(count): acc = step(i, acc); returns acc
        (without `initial`, step's result is ignored and None returned)."""
        b = self.b
        if count <= 0:
            return initial
        at_least_one(count)
        if count == 1:
            result = step(self.i64(0), initial)
            return result if initial is not None else None
        before = b.block
        header = b.append_basic_block("loop")
        after = b.append_basic_block("loop.end")
        b.branch(header)
        b.position_at_end(header)
        index = b.phi(I64)
        index.add_incoming(self.i64(0), before)
        acc = None
        if initial is not None:
            acc = b.phi(initial.type)
            acc.add_incoming(initial, before)
        self.outline.depth += 1
        result = step(index, acc)
        self.outline.depth -= 1
        following = b.add(index, self.i64(1))
        index.add_incoming(following, b.block)
        if acc is not None:
            acc.add_incoming(result, b.block)
        b.cbranch(b.icmp_unsigned("<", following, self.i64(count)), header, after)
        b.position_at_end(after)
        # the latch (where `result` is defined or dominated) is the only way here
        return result if initial is not None else None

    def loop_nest(self, shape: Sequence[int], body: Callable[[list[ir.Value]], None], parallel: bool = False) -> None:
        """for every index of `shape` in row-major order: body(indices);
        `parallel`: the outermost loop's iterations are independent (`loop`)."""
        def level(depth: int, indices: list[ir.Value]) -> None:
            if depth == len(shape):
                body(indices)
                return
            self.loop(shape[depth], lambda i: level(depth + 1, [*indices, i]), parallel=parallel and depth == 0,
                      work=math.prod(shape[depth:]))

        if not math.prod(shape) <= 0:  # a run-time Size is <= 0 only when it is everywhere in range
            level(0, [])

    def strided_loop_nest(self, shape: Sequence[int], strides: Sequence[Sequence[int]],
                          body: Callable[[list[ir.Value]], None], bases: Sequence[int] | None = None,
                          parallel: bool = False) -> None:
        """for every index of `shape`: body(offsets), one element offset per
        operand, operand k walking `shape` with `strides[k]` (0 along a
        broadcast dim) from element `bases[k]` (default 0). Dims are merged
        first (merge_dims). `parallel`: as for loop_nest."""
        if math.prod(shape) == 0:
            return
        merged_shape, merged = merge_dims(shape, strides)
        starts = list(bases) if bases is not None else [0] * len(strides)

        def offsets(indices: list[ir.Value]) -> None:
            body([self.offset(indices, s, base) for s, base in zip(merged, starts, strict=True)])

        self.loop_nest(merged_shape, offsets, parallel=parallel)

    def constant_table(self, values: Sequence[int], name: str = "table") -> ir.GlobalVariable:
        """An internal constant i64 array holding `values` (index tables)."""
        array = ir.ArrayType(I64, len(values))
        table = ir.GlobalVariable(self.module, array, self.module.get_unique_name(f"{self.function.name}.{name}"))
        table.linkage = "internal"
        table.global_constant = True
        table.initializer = ir.Constant(array, [int(v) for v in values])
        return table

    def load_table(self, table: ir.GlobalVariable, index: ir.Value) -> ir.Value:
        """table[index] of a constant_table."""
        address = self.b.gep(table, [self.i64(0), index], inbounds=True, source_etype=table.value_type)
        return self.b.load(address, typ=I64)

    def broadcast_loop(self, operands: Sequence[Operand], out: Operand,
                       body: Callable[[list[ir.Value], ir.Value], None]) -> None:
        """For every element of `out`: body(input offsets, out offset), the
        `operands` broadcast to out's shape (numpy rules). `body` computes
        the one element of `out` at its offset, so the loop may run on threads."""
        strides = [list(broadcast_strides(o.shape, out.shape)) for o in operands] + [out.strides]
        self.strided_loop_nest(out.shape, strides, lambda offs: body(offs[:-1], offs[-1]), parallel=True)

    # -- arithmetic ----------------------------------------------------------

    def activation(self, value: ir.Value, activation: str | None, alpha: float | None = None,
                   beta: float | None = None) -> ir.Value:
        """A fused activation (host_kernels.ACTIVATIONS) applied to a float32 value."""
        if activation is None:
            return value
        return unary_expression(self.math, activation, value, alpha, beta, "none")

    def memmove(self, target: ir.Value, source: ir.Value, nbytes: int) -> None:
        """llvm.memmove of `nbytes` bytes (the operands may overlap)."""
        if nbytes <= 0:
            return
        intrinsic = self.module.declare_intrinsic("llvm.memmove", [PTR, PTR, I64])
        self.b.call(intrinsic, [target, source, self.i64(nbytes), ir.Constant(I1, 0)])

"""What the native matrix-product and convolution kernels share: a kernel
function `void symbol(i8 **buffers)` in an llvmlite module, counted loops,
float32 element access, the fused activations, and calls of the BLAS.

Shapes are static (a kernel is specialised to its site), so loop bounds and
most index arithmetic are Python ints; LLVM gets constant trip counts to
vectorise. A kernel shared by sites that differ only in a few sizes
(pyocc.lowering.native.registry) reads those at run time: `Kernel.mul`,
`loop` and `sgemm` take i64 values where they take ints. The BLAS is OpenBLAS's CBLAS sgemm (pyocc.runtime.blas binds it).

In a model compiled for several threads (its parallel-for,
pyocc.lowering.native.threads, is declared in the module before the
kernels are written), a large sgemm is split by columns of C into blocks,
and the model's worker threads each call the single-threaded sgemm on a
contiguous run of blocks (the last block takes the leftover columns):
OpenBLAS's own threads spin while they wait, which on a loaded machine made
ResNet-50 5 to 23 times slower (docs/performance.md), while the workers sleep.
Every element of C is still one sgemm's dot product over the whole depth,
in the same order, as long as every call takes OpenBLAS's path for large
products: its small-matrix kernels (up to 100^3 multiply-adds) round
differently, so a block holds a multiple of SGEMM_COLUMN_BLOCK columns and
at least SGEMM_PARALLEL_MACS multiply-adds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import llvmlite.ir as ir

from pyocc.lowering.llvm_math import ScalarMath, unary_expression
from pyocc.lowering.native.loops import BODY_TYPE, kernel_function
from pyocc.lowering.native.threads import parallel_for_symbol

F32 = ir.FloatType()
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()

#: float32 lanes of the explicit vectors of `Kernel.copy` (an AVX-512 register)
LANES = 16
VECTOR = ir.VectorType(F32, LANES)

#: CBLAS's enums
CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS = 101, 111, 112
#: the sgemm generated code calls (scipy-openblas32: 32-bit integers)
SGEMM = "scipy_cblas_sgemm"
SGEMM_TYPE = ir.FunctionType(ir.VoidType(), [I32, I32, I32, I32, I32, I32, F32, PTR, I32, PTR, I32, F32, PTR, I32])
#: a block of an sgemm split between threads has a multiple of this many columns of C
SGEMM_COLUMN_BLOCK = 64
#: ... and at least this many multiply-adds (above OpenBLAS's small-matrix
#: sizes); an sgemm is split when it has two blocks (a run-time column
#: count, a convolution's im2col block, counts as the columns a 1 MiB
#: block of depth k holds)
SGEMM_PARALLEL_MACS = 1 << 20
#: the split sgemm's arguments, i64s on the caller's stack: A, B, C (as integers), column count
SGEMM_CONTEXT_SLOTS = 4
#: ... and, for a depth known at run time only, the block's columns, the depth, lda and ldb
SGEMM_RUN_TIME_CONTEXT_SLOTS = 8
#: the sgemv a product with one row or one column calls instead: sgemm would
#: pack the whole matrix first (VGG-19's fc6: 411 MB, every run)
SGEMV = "scipy_cblas_sgemv"
SGEMV_TYPE = ir.FunctionType(ir.VoidType(), [I32, I32, I32, I32, F32, PTR, I32, PTR, I32, F32, PTR, I32])


class NotNative(Exception):
    """A site these kernels do not compute natively (another dtype, ...):
    it stays on the numpy kernel."""


def all_float32(site: dict[str, Any]) -> bool:
    """Whether every buffer of the site is float32 (what these kernels compute)."""
    try:
        require_float32(site)
    except NotNative:
        return False
    return True


def require_float32(site: dict[str, Any]) -> None:
    """Raise NotNative unless every buffer of the site is float32."""
    specs = [*site["inputs"], *site["outputs"]]
    for spec in specs:
        for one in spec if isinstance(spec, list) else [spec]:
            if one is not None and one["dtype"] != "float32":
                raise NotNative(f"{site['kernel']}: {one['dtype']} buffers run on the numpy kernel")


class Kernel:
    """One kernel function `void symbol(i8 **buffers)` being emitted."""

    def __init__(self, module: ir.Module, symbol: str):
        self.module = module
        self.symbol = symbol
        self.function = kernel_function(module, symbol)
        self.function.args[0].name = "buffers"
        # the entry block holds only the variables (allocas) and a branch to the code
        self.entry = self.function.append_basic_block("entry")
        start = self.function.append_basic_block("start")
        ir.IRBuilder(self.entry).branch(start)
        self.builder = ir.IRBuilder(start)
        self.math = ScalarMath(self.builder, module, "host")

    def variable(self, type: ir.Type) -> ir.Value:
        """A variable of `type`: an alloca at the top of the entry block,
        which LLVM keeps in a register."""
        at_entry = ir.IRBuilder(self.entry)
        at_entry.position_before(self.entry.terminator)
        return at_entry.alloca(type)

    def scalar(self, initial: float) -> ir.Value:
        """A float32 variable, set to `initial` here."""
        variable = self.variable(F32)
        self.builder.store(F32(initial), variable)
        return variable

    def buffer(self, slot: int) -> ir.Value:
        """The data pointer in `buffers[slot]`."""
        b = self.builder
        return b.load(b.gep(self.function.args[0], [I64(slot)], source_etype=PTR), typ=PTR)

    def finish(self) -> None:
        """Return from the kernel."""
        self.builder.ret_void()

    # -- integers and addresses ------------------------------------------------

    @staticmethod
    def const(value: int) -> ir.Constant:
        return I64(value)

    def index(self, value: ir.Value | int) -> ir.Value:
        return I64(value) if isinstance(value, int) else value

    def add(self, a: ir.Value | int, b: ir.Value | int) -> ir.Value | int:
        """a + b, folded when both are Python ints (and when one is 0)."""
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if isinstance(b, int) and b == 0:
            return a
        if isinstance(a, int) and a == 0:
            return b
        return self.builder.add(self.index(a), self.index(b))

    def mul(self, a: ir.Value | int, b: ir.Value | int) -> ir.Value | int:
        """a * b, folded when both are Python ints (and when one is 0 or 1)."""
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if isinstance(a, int):
            a, b = b, a
        assert isinstance(a, ir.Value)
        if isinstance(b, int):
            if b == 1:
                return a
            if b == 0:
                return 0
        return self.builder.mul(a, self.index(b))

    def element(self, base: ir.Value, index: ir.Value | int) -> ir.Value:
        """&base[index] for a float32 array."""
        if isinstance(index, int) and index == 0:
            return base
        return self.builder.gep(base, [self.index(index)], inbounds=True, source_etype=F32)

    def load(self, base: ir.Value, index: ir.Value | int) -> ir.Value:
        return self.builder.load(self.element(base, index), typ=F32)

    def store(self, value: ir.Value, base: ir.Value, index: ir.Value | int) -> None:
        self.builder.store(value, self.element(base, index))

    def splat(self, value: ir.Value) -> ir.Value:
        """A VECTOR with `value` (a float32) in every lane."""
        b = self.builder
        one = b.insert_element(ir.Constant(VECTOR, ir.Undefined), value, I32(0))
        return b.shuffle_vector(one, ir.Constant(VECTOR, ir.Undefined), ir.Constant(ir.VectorType(I32, LANES),
                                                                                     [0] * LANES))

    def copy(self, target: ir.Value, source: ir.Value | None, count: int | ir.Value,
             transform: Callable[[ir.Value], ir.Value] | None = None) -> None:
        """target[:count] = transform(source[:count]), or zeros without a
        source, LANES elements a time in explicit vectors, then the tail one
        by one. LLVM leaves such a loop scalar when it cannot prove target
        and source apart; here they are disjoint or the same (a residual
        written in place), never partly overlapping. `transform` maps a
        float32 or a VECTOR alike."""
        b = self.builder
        if isinstance(count, int) and count <= 0:
            return
        full = count - count % LANES if isinstance(count, int) else b.and_(count, I64(-LANES))
        zero = ir.Constant(VECTOR, [0.0] * LANES)
        with self.loop(0, full, LANES) as i:
            value = b.load(self.element(source, i), typ=VECTOR, align=4) if source is not None else zero
            b.store(transform(value) if transform is not None and source is not None else value,
                    self.element(target, i), align=4)
        with self.loop(full, count) as i:
            value = self.load(source, i) if source is not None else F32(0.0)
            self.store(transform(value) if transform is not None and source is not None else value, target, i)

    def fill(self, target: ir.Value, value: ir.Value, count: int | ir.Value) -> None:
        """target[:count] = value (a float32), in explicit vectors like `copy`."""
        b = self.builder
        full = count - count % LANES if isinstance(count, int) else b.and_(count, I64(-LANES))
        lanes = self.splat(value)
        with self.loop(0, full, LANES) as i:
            b.store(lanes, self.element(target, i), align=4)
        with self.loop(full, count) as i:
            self.store(value, target, i)

    # -- control flow ------------------------------------------------------------

    @contextmanager
    def loop(self, start: ir.Value | int, stop: ir.Value | int, step: ir.Value | int = 1) -> Iterator[ir.Value]:
        """`for (i = start; i < stop; i += step)`: the body is what the caller
        emits inside the `with`; yields i (i64). Nothing runs when start >= stop."""
        b = self.builder
        preheader = b.block
        header = b.append_basic_block("loop")
        body = b.append_basic_block("body")
        after = b.append_basic_block("after")
        start_value, stop_value = self.index(start), self.index(stop)
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64, "i")
        i.add_incoming(start_value, preheader)
        b.cbranch(b.icmp_signed("<", i, stop_value), body, after)
        b.position_at_end(body)
        yield i
        following = b.add(i, self.index(step))
        i.add_incoming(following, b.block)
        b.branch(header)
        b.position_at_end(after)

    @contextmanager
    def when(self, condition: ir.Value) -> Iterator[None]:
        """Emit the body only where `condition` (i1) holds."""
        with self.builder.if_then(condition):
            yield

    def in_range(self, value: ir.Value, low: int, high: int) -> ir.Value:
        """low <= value < high, as one unsigned compare."""
        b = self.builder
        return b.icmp_unsigned("<", b.sub(value, I64(low)), I64(high - low))

    # -- float math ----------------------------------------------------------------

    def activation(self, value: ir.Value, activation: str | None, alpha: float | None,
                   beta: float | None) -> ir.Value:
        """A fused activation of a float32 value (numpy's apply_activation)."""
        if activation is None:
            return value
        return unary_expression(self.math, activation, value, alpha, beta, "none")

    # -- BLAS ------------------------------------------------------------------------

    def sgemm(self, m: int, n: int | ir.Value, k: int | ir.Value, a: ir.Value, lda: int | ir.Value, b: ir.Value,
              ldb: int | ir.Value, c: ir.Value, ldc: int, alpha: float = 1.0, beta: float | ir.Value = 0.0,
              trans_a: bool = False, trans_b: bool = False) -> None:
        """C = alpha * op(A) @ op(B) + beta * C, row-major (C is m x n; n, k,
        lda, ldb and beta may be run-time values). A product with one row or one
        column (static) is a matrix-vector product: sgemv, which reads the
        matrix once. One whose beta is known at compile time may be split
        between the model's threads (with a run-time depth, into blocks
        sized at run time)."""
        if m == 0 or (isinstance(n, int) and n == 0):
            return
        if isinstance(k, int) and not (isinstance(lda, int) and isinstance(ldb, int)):
            # run-time leading dimensions come with a run-time depth (a shared kernel's), not alone
            _call_sgemm(self.module, self.builder, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta, trans_a, trans_b)
            return
        if isinstance(k, int) and not isinstance(beta, ir.Value) and k > 0 and m == 1 and isinstance(n, int):
            # c (1 x n) = op(B)^T op(A)^T: the row of A is a vector (stride lda when A is transposed)
            rows, columns = (n, k) if trans_b else (k, n)
            self.sgemv(not trans_b, rows, columns, b, ldb, a, lda if trans_a else 1, c, 1, alpha, beta)
            return
        if isinstance(k, int) and not isinstance(beta, ir.Value) and k > 0 and isinstance(n, int) and n == 1:
            # c (m x 1, stride ldc) = op(A) op(B): the column of B is a vector
            self.sgemv(trans_a, k if trans_a else m, m if trans_a else k, a, lda, b, 1 if trans_b else ldb,
                       c, ldc, alpha, beta)
            return
        parallel_for = self.module.globals.get(parallel_for_symbol(self.symbol.rsplit("_site_", 1)[0]))
        if parallel_for is None or isinstance(beta, ir.Value):
            # one thread, or a run-time beta (the split needs it at compile time)
            _call_sgemm(self.module, self.builder, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta, trans_a, trans_b)
            return
        caller = self.builder
        block: ir.Value
        if isinstance(k, int):
            columns = n if isinstance(n, int) else (1 << 18) // max(k, 1)
            per_column = max(m * k, 1)
            size = -(-SGEMM_PARALLEL_MACS // per_column)
            size = max(SGEMM_COLUMN_BLOCK, -(-size // SGEMM_COLUMN_BLOCK) * SGEMM_COLUMN_BLOCK)
            if columns < 2 * size:
                _call_sgemm(self.module, caller, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta, trans_a, trans_b)
                return
            block = I64(size)
        else:
            # a run-time depth (a kernel shared by sites that differ in it): the same block
            # size as for a compile-time one, computed here; fewer than two blocks: one call
            per_column = caller.mul(I64(max(m, 1)), k)
            size_value = caller.udiv(caller.add(per_column, I64(SGEMM_PARALLEL_MACS - 1)), per_column)
            size_value = caller.and_(caller.add(size_value, I64(SGEMM_COLUMN_BLOCK - 1)), I64(-SGEMM_COLUMN_BLOCK))
            block = caller.select(caller.icmp_unsigned("<", size_value, I64(SGEMM_COLUMN_BLOCK)),
                                  I64(SGEMM_COLUMN_BLOCK), size_value)
        static = isinstance(k, int)
        # the blocks of columns [begin, end) of C: C[:, cols] = op(A) @ op(B)[:, cols]
        part = ir.Function(self.module, BODY_TYPE, self.module.get_unique_name(f"{self.symbol}.sgemm"))
        part.linkage = "internal"
        builder = ir.IRBuilder(part.append_basic_block("entry"))
        context, begin, end = part.args
        slots = SGEMM_CONTEXT_SLOTS if static else SGEMM_RUN_TIME_CONTEXT_SLOTS
        fields = [builder.load(builder.gep(context, [I64(i)], inbounds=True, source_etype=I64), typ=I64)
                  for i in range(slots)]
        part_a, part_b, part_c = (builder.inttoptr(field, PTR) for field in fields[:3])
        count = fields[3]
        # a run-time depth brings its block size and leading dimensions along
        part_block, part_k, part_lda, part_ldb = (block, k, lda, ldb) if static else fields[4:8]
        first = builder.mul(begin, part_block)
        last = builder.mul(end, part_block)
        # the last block (fewer than `block` columns after it) takes them; a
        # run-time count below one block is one short block (count - last < 0)
        last = builder.select(builder.icmp_signed("<", builder.sub(count, last), part_block), count, last)
        width = builder.sub(last, first)
        b_first = builder.mul(first, part_ldb if isinstance(part_ldb, ir.Value) else I64(part_ldb)) \
            if trans_b else first
        with builder.if_then(builder.icmp_signed(">", width, I64(0))):
            _call_sgemm(self.module, builder, m, width, part_k, part_a, part_lda,
                        builder.gep(part_b, [b_first], inbounds=True, source_etype=F32), part_ldb,
                        builder.gep(part_c, [first], inbounds=True, source_etype=F32), ldc,
                        alpha, beta, trans_a, trans_b)
        builder.ret_void()
        # the caller: the arguments on the stack, the blocks to the workers
        at_entry = ir.IRBuilder(self.entry)
        at_entry.position_before(self.entry.terminator)
        slot = at_entry.alloca(I64, size=I64(slots))
        values = [caller.ptrtoint(pointer, I64) for pointer in (a, b, c)] + [self.index(n)]
        if not static:
            values += [block, self.index(k), self.index(lda), self.index(ldb)]
        for i, value in enumerate(values):
            caller.store(value, caller.gep(slot, [I64(i)], inbounds=True, source_etype=I64))
        blocks = caller.udiv(self.index(n), block)
        if static:
            # whole blocks, at least one (a run-time count may be short)
            blocks = caller.select(caller.icmp_unsigned("<", blocks, I64(1)), I64(1), blocks)
            caller.call(parallel_for, [part, slot, blocks])
            return
        with caller.if_else(caller.icmp_unsigned("<", blocks, I64(2))) as (one, many):
            with one:
                _call_sgemm(self.module, caller, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta, trans_a, trans_b)
            with many:
                caller.call(parallel_for, [part, slot, blocks])

    def sgemv(self, trans: bool, rows: int, columns: int, a: ir.Value, lda: int, x: ir.Value, incx: int,
              y: ir.Value, incy: int, alpha: float = 1.0, beta: float = 0.0) -> None:
        """y = alpha * op(A) @ x + beta * y for a row-major rows x columns A
        (op(A) = A^T when `trans`); x and y with element strides incx, incy."""
        function = self.module.globals.get(SGEMV)
        if function is None:
            function = ir.Function(self.module, SGEMV_TYPE, SGEMV)
        self.builder.call(function, [
            I32(CBLAS_ROW_MAJOR), I32(CBLAS_TRANS if trans else CBLAS_NO_TRANS), I32(rows), I32(columns),
            F32(alpha), a, I32(max(lda, 1)), x, I32(max(incx, 1)), F32(beta), y, I32(max(incy, 1)),
        ])


def _call_sgemm(module: ir.Module, builder: ir.IRBuilder, m: int, n: int | ir.Value, k: int | ir.Value, a: ir.Value,
                lda: int | ir.Value, b: ir.Value, ldb: int | ir.Value, c: ir.Value, ldc: int, alpha: float,
                beta: float | ir.Value, trans_a: bool, trans_b: bool) -> None:
    """One call of the CBLAS sgemm, row-major (see Kernel.sgemm)."""
    function = module.globals.get(SGEMM)
    if function is None:
        function = ir.Function(module, SGEMM_TYPE, SGEMM)

    def i32(value: int | ir.Value) -> ir.Value:
        return I32(int(value)) if isinstance(value, int) else builder.trunc(value, I32)

    def leading(value: int | ir.Value) -> ir.Value:
        """A leading dimension: at least 1 (a run-time one always is: a product's depth or row)."""
        return i32(max(value, 1) if isinstance(value, int) else value)

    builder.call(function, [
        i32(CBLAS_ROW_MAJOR), i32(CBLAS_TRANS if trans_a else CBLAS_NO_TRANS),
        i32(CBLAS_TRANS if trans_b else CBLAS_NO_TRANS), i32(m), i32(n), i32(k), F32(alpha),
        a, leading(lda), b, leading(ldb), beta if isinstance(beta, ir.Value) else F32(beta), c,
        i32(max(ldc, 1)),
    ])


def row_major_strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a contiguous row-major array of `shape`."""
    return [math.prod(shape[axis + 1:]) for axis in range(len(shape))]


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Element strides of an array of `shape` read at each index of
    `out_shape` under numpy broadcasting (0 along broadcast dims)."""
    shape = [1] * (len(out_shape) - len(shape)) + list(shape)
    strides = row_major_strides(shape)
    return [0 if size == 1 and want != 1 else stride for size, want, stride in zip(shape, out_shape, strides,
                                                                                   strict=True)]


def flat_offset(kernel: Kernel, flat: ir.Value, shape: Sequence[int], strides: Sequence[int]) -> ir.Value | int:
    """Σ index_d * strides[d] for the row-major multi-index of `flat` in `shape`."""
    b = kernel.builder
    offset: ir.Value | int = 0
    inner = row_major_strides(shape)
    for size, stride, step in zip(shape, strides, inner, strict=True):
        if stride == 0 or size == 1:
            continue
        index = b.udiv(flat, I64(step)) if step != 1 else flat
        if step * size != math.prod(shape):
            index = b.urem(index, I64(size))
        offset = kernel.add(offset, kernel.mul(index, stride))
    return offset

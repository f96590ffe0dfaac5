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
kernels are written):
- a large sgemm is split into one part per thread, by columns of C, or by
  rows of C when C has fewer columns than rows (each part packs the operand
  that is not cut again, so the smaller one is packed again) or too few
  columns for two blocks (a convolution on a 7x7 or 14x14 image); the parts
  are even (they differ by at most one block unit) and each of the model's
  threads calls the single-threaded sgemm on its own part.
  Sizes known only at run time (a convolution's block of rows, its channel
  slice's depth) get their blocks computed at run time. OpenBLAS's own
  threads spin while they wait, which on a loaded machine made ResNet-50 5
  to 23 times slower (docs/performance.md), while the workers sleep. Every
  element of C is still one sgemm's dot product over the whole depth, in
  the same order, as long as every call takes OpenBLAS's path for large
  products: its small-matrix kernels (up to 100^3 multiply-adds) round
  differently, so a block holds a multiple of SGEMM_COLUMN_BLOCK columns
  (SGEMM_ROW_BLOCK rows) and at least SGEMM_PARALLEL_MACS multiply-adds;
- a split sgemm given `Passes` (a convolution block's first and last
  pass over its outputs) runs them inside each part, on that part's own
  columns or rows, so the outputs stay in one core's cache
  (docs/performance.md, "What two threads do to each other");
- a large sgemv with one dot product per element of y is split by
  elements of y (Kernel.sgemv);
- `Kernel.parallel_loop` runs a loop of independent iterations (a
  convolution's im2col channels, its output channels' first and last
  passes, a direct convolution's output channels) as an outlined part on
  the parallel-for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import llvmlite.ir as ir

from pyocc.dialects.dnn.scratch import SGEMM_COLUMN_BLOCK, SGEMM_PARALLEL_MACS, SGEMM_ROW_BLOCK
from pyocc.dialects.dnn.scratch import sgemm_split_block as _split_block
from pyocc.lowering.llvm_math import ScalarMath, unary_expression
from pyocc.lowering.native.loops import (
    BLAS_CHUNKS_PER_THREAD,
    BODY_TYPE,
    CHUNKS_PER_THREAD,
    KERNEL_TYPE,
    PARALLEL_MIN_WORK,
    kernel_function,
)
from pyocc.lowering.native.sizes import Size, i64_of
from pyocc.lowering.native.threads import TEAM_TYPE, parallel_for_symbol, team_symbol

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
#: the split sgemm's arguments, i64s on the caller's stack: A, B, C (as
#: integers), column count, parts, depth, lda, ldb (the column count, depth
#: and leading dimensions may be run-time values: a kernel shared by sites
#: that differ in them)
SGEMM_CONTEXT_SLOTS = 8
#: the sgemv a product with one row or one column calls instead: sgemm would
#: pack the whole matrix first (VGG-19's fc6: 411 MB, every run)
SGEMV = "scipy_cblas_sgemv"
#: a large sgemv is split between threads by elements of y, in parts of a
#: multiple of this many elements (so each part's kernel meets its elements
#: at the same alignment, and only the last part has the tail)...
SGEMV_OUTPUT_BLOCK = 64
#: ... holding at least this many multiply-adds (a quarter of a MiB of the
#: matrix: waking the workers costs about as much as reading that)
SGEMV_PARALLEL_MACS = 1 << 16
SGEMV_TYPE = ir.FunctionType(ir.VoidType(), [I32, I32, I32, I32, F32, PTR, I32, PTR, I32, F32, PTR, I32])


#: pass(row, first column, columns, values): emits code for one row of C over those columns
RowPass = Callable[[ir.Value, "ir.Value | int", "ir.Value | int", dict[str, Any]], None]


@dataclass(frozen=True)
class Passes:
    """Element passes over a product's C that go with it: a convolution's
    first pass (`before`: C's starting values, its bias or residual) and its
    last (`after`: bias after a residual, activation). Each is called as
    pass(row, first, columns, values) and emits code for row `row` of C
    over columns [first, first + columns); `values` is `captures` as the
    function being emitted sees them (as in Kernel.parallel_loop), `work`
    the elements of C (an estimate for run-time sizes). Kernel.sgemm runs
    them inside each part of a split product, on that part's own rows or
    columns, so the thread that multiplies into an element also writes it
    first and finishes it, from its own cache, in one parallel-for;
    otherwise around the call, each a parallel loop over C's rows. Either
    way every element gets the same instructions."""
    before: RowPass | None
    after: RowPass | None
    captures: dict[str, Any] = field(default_factory=dict)
    work: int = 0


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
        #: id(value of the kernel function) -> the same value inside the part
        #: being emitted (parallel_loop); element/load/store read through it
        self._captured: dict[int, ir.Value] = {}

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
        """The data pointer in `buffers[slot]` (in the kernel function, not in a part)."""
        assert self.function.function_type == KERNEL_TYPE, "load the buffers before parallel_loop"
        b = self.builder
        return b.load(b.gep(self.function.args[0], [I64(slot)], source_etype=PTR), typ=PTR)

    def finish(self) -> None:
        """Return from the kernel."""
        self.builder.ret_void()

    # -- integers and addresses ------------------------------------------------

    @staticmethod
    def const(value: int) -> ir.Constant:
        return I64(value)

    def index(self, value: ir.Value | int | Size) -> ir.Value:
        """An i64: a constant, a run-time Size's value (pyocc.lowering.native.sizes) or the value itself."""
        return i64_of(value)

    def add(self, a: ir.Value | int | Size, b: ir.Value | int | Size) -> ir.Value | int | Size:
        """a + b, folded when both are Python ints or Sizes (and when one is 0)."""
        if isinstance(a, int | Size) and isinstance(b, int | Size):
            return a + b
        if isinstance(b, int) and b == 0:
            return a
        if isinstance(a, int) and a == 0:
            return b
        return self.builder.add(self.index(a), self.index(b))

    def mul(self, a: ir.Value | int | Size, b: ir.Value | int | Size) -> ir.Value | int | Size:
        """a * b, folded when both are Python ints or Sizes (and when one is 0 or 1)."""
        if isinstance(a, int | Size) and isinstance(b, int | Size):
            return a * b
        if isinstance(a, Size):
            a = a.value()
        if isinstance(b, Size):
            b = b.value()
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
        """&base[index] for a float32 array (inside a parallel_loop part, a
        captured `base` is its reloaded value)."""
        base = self._captured.get(id(base), base)
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
        count = count.value() if isinstance(count, Size) else count
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
        count = count.value() if isinstance(count, Size) else count
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

    def parallel_loop(self, count: int | ir.Value, work: int, captures: dict[str, Any],
                      body: Callable[[ir.Value, dict[str, Any]], None]) -> None:
        """for i in range(count): body(i, values), for iterations that write
        disjoint elements and read nothing another iteration writes.
        `values` is `captures` (name -> an i64 or pointer value of this
        function, or a Python value). In a model compiled for several
        threads, a loop of at least PARALLEL_MIN_WORK innermost iterations
        (`work`, an estimate for a run-time count) is outlined as
        `SYMBOL.part(context, begin, end)` and run on the parallel-for: the
        captured values travel on the stack and the body gets them reloaded
        (element/load/store also map a captured pointer to its reloaded
        value), so the body must reach this function's values only through
        `values`. Otherwise it is the plain loop, exactly as without
        threads. Every iteration runs the same instructions either way."""
        parallel_for = self._parallel_for()
        if parallel_for is None or work < PARALLEL_MIN_WORK or (isinstance(count, int) and count < 2):
            with self.loop(0, count) as i:
                body(i, dict(captures))
            return
        names = [name for name, value in captures.items() if isinstance(value, ir.Value)]
        for name in names:
            assert captures[name].type in (I64, PTR), f"{name}: parallel_loop captures i64s and pointers"
        part = ir.Function(self.module, BODY_TYPE, self.module.get_unique_name(f"{self.symbol}.part"))
        part.linkage = "internal"
        saved = (self.function, self.entry, self.builder, self.math, self._captured)
        self.function = part
        self.entry = part.append_basic_block("entry")
        start = part.append_basic_block("start")
        ir.IRBuilder(self.entry).branch(start)
        self.builder = ir.IRBuilder(start)
        self.math = ScalarMath(self.builder, self.module, "host")
        context, begin, end = part.args
        values = dict(captures)
        for i, name in enumerate(names):
            field = self.builder.load(self.builder.gep(context, [I64(i)], inbounds=True, source_etype=I64), typ=I64)
            values[name] = self.builder.inttoptr(field, PTR) if captures[name].type == PTR else field
        self._captured = {**saved[4], **{id(captures[name]): values[name] for name in names}}
        with self.loop(begin, end) as i:
            body(i, values)
        self.builder.ret_void()
        self.function, self.entry, self.builder, self.math, self._captured = saved
        caller = self.builder
        at_entry = ir.IRBuilder(self.entry)
        at_entry.position_before(self.entry.terminator)
        slot = at_entry.alloca(I64, size=I64(max(len(names), 1)))
        for i, name in enumerate(names):
            value = captures[name]
            field = caller.ptrtoint(value, I64) if value.type == PTR else value
            caller.store(field, caller.gep(slot, [I64(i)], inbounds=True, source_etype=I64))
        caller.call(parallel_for, [part, slot, self.index(count), I64(CHUNKS_PER_THREAD)])

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
              ldb: int | ir.Value, c: ir.Value, ldc: int | ir.Value, alpha: float = 1.0,
              beta: float | ir.Value = 0.0,
              trans_a: bool = False, trans_b: bool = False, passes: Passes | None = None) -> None:
        """C = alpha * op(A) @ op(B) + beta * C, row-major (C is m x n; n, k,
        lda, ldb and beta may be run-time values). A product with one row or one
        column (static) is a matrix-vector product: sgemv, which reads the
        matrix once. One whose beta is known at compile time may be split
        between the model's threads (with a run-time depth, into blocks
        sized at run time). `passes` (Passes) run on C before and after the
        product: inside each part of a split product on its own elements,
        else around the call."""
        if m == 0 or (isinstance(n, int) and n == 0):
            return

        def whole(call: Callable[[], None]) -> None:
            """`call` (the product in one BLAS call), between the passes."""
            self._row_passes(passes, "before", m, n)
            call()
            self._row_passes(passes, "after", m, n)

        if any(isinstance(v, Size) for v in (m, n, k, lda, ldb, ldc)):
            # run-time shapes (a symbolic program's kernel): one call, on one thread
            whole(lambda: _call_sgemm(self.module, self.builder, *(i64_of(v) if isinstance(v, Size) else v
                                                                   for v in (m, n, k, a, lda, b, ldb, c, ldc)),
                                      alpha, beta, trans_a, trans_b))
            return
        if (isinstance(k, int) and not (isinstance(lda, int) and isinstance(ldb, int))) or not isinstance(ldc, int):
            # run-time leading dimensions come with a run-time depth (a shared kernel's), not
            # alone; a run-time ldc (the output rows of a tiled op's patch) is one call, not split
            whole(lambda: _call_sgemm(self.module, self.builder, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta,
                                      trans_a, trans_b))
            return
        if isinstance(k, int) and not isinstance(beta, ir.Value) and k > 0 and m == 1 and isinstance(n, int):
            # c (1 x n) = op(B)^T op(A)^T: the row of A is a vector (stride lda when A is transposed)
            rows, columns = (n, k) if trans_b else (k, n)
            whole(lambda: self.sgemv(not trans_b, rows, columns, b, ldb, a, lda if trans_a else 1, c, 1, alpha,
                                     beta))
            return
        if isinstance(k, int) and not isinstance(beta, ir.Value) and k > 0 and isinstance(n, int) and n == 1:
            # c (m x 1, stride ldc) = op(A) op(B): the column of B is a vector
            whole(lambda: self.sgemv(trans_a, k if trans_a else m, m if trans_a else k, a, lda, b,
                                     1 if trans_b else ldb, c, ldc, alpha, beta))
            return
        parallel_for = self._parallel_for()
        if parallel_for is None or isinstance(beta, ir.Value):
            # one thread, or a run-time beta (not split)
            whole(lambda: _call_sgemm(self.module, self.builder, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta,
                                      trans_a, trans_b))
            return
        call = (m, n, k, a, lda, b, ldb, c, ldc, alpha, beta, trans_a, trans_b)
        rows_possible = m >= 2 * SGEMM_ROW_BLOCK
        if isinstance(n, int) and isinstance(k, int):
            # everything known: split the way that packs less again (see _split_sgemm), else not at all
            by_columns = n >= 2 * _split_block(m * k, SGEMM_COLUMN_BLOCK)
            by_rows = rows_possible and m >= 2 * _split_block(n * k, SGEMM_ROW_BLOCK)
            if by_rows and (n < m or not by_columns):
                self._split_sgemm(parallel_for, "rows", call, passes)
            elif by_columns:
                self._split_sgemm(parallel_for, "columns", call, passes)
            else:
                whole(lambda: _call_sgemm(self.module, self.builder, *call))
            return
        if isinstance(k, int) and not rows_possible \
                and (1 << 18) // max(k, 1) < 2 * _split_block(m * k, SGEMM_COLUMN_BLOCK):
            # a convolution's block of at most 1 MiB of columns never holds two blocks
            whole(lambda: _call_sgemm(self.module, self.builder, *call))
            return
        if not rows_possible:
            self._split_sgemm(parallel_for, "columns", call, passes)
            return
        # run-time sizes: by rows when C has fewer columns than rows and two row blocks (each part
        # then packs only B again, the smaller operand), or fewer than two column blocks; else by columns
        caller = self.builder
        columns = self.index(n)
        column_blocks = caller.udiv(columns, self._block_at_run_time(caller.mul(I64(m), self.index(k)),
                                                                    SGEMM_COLUMN_BLOCK))
        row_blocks = caller.udiv(I64(m), self._block_at_run_time(caller.mul(columns, self.index(k)),
                                                                 SGEMM_ROW_BLOCK))
        narrow = caller.and_(caller.icmp_unsigned("<", columns, I64(m)), caller.icmp_unsigned(">=", row_blocks, I64(2)))
        rows_first = caller.or_(narrow, caller.icmp_unsigned("<", column_blocks, I64(2)))
        with caller.if_else(caller.not_(rows_first)) as (by_columns, by_rows):
            with by_columns:
                self._split_sgemm(parallel_for, "columns", call, passes)
            with by_rows:
                self._split_sgemm(parallel_for, "rows", call, passes)

    def _row_passes(self, passes: Passes | None, which: str, m: int, n: int | ir.Value) -> None:
        """passes.before or .after (`which`) over all of C (m x n): a
        parallel loop over its rows (a plain loop on one thread)."""
        row_pass = getattr(passes, which) if passes is not None else None
        if passes is None or row_pass is None:
            return
        captures = {**passes.captures, "c_columns": n}
        self.parallel_loop(m, passes.work, captures, lambda row, v: row_pass(row, 0, v["c_columns"], v))

    def _block_at_run_time(self, per_unit: ir.Value, unit: int) -> ir.Value:
        """_split_block for a run-time `per_unit` (i64), emitted here."""
        caller = self.builder
        per_unit = caller.select(caller.icmp_signed("<", per_unit, I64(1)), I64(1), per_unit)
        least = caller.udiv(caller.add(I64(SGEMM_PARALLEL_MACS - 1), per_unit), per_unit)
        rounded = caller.mul(caller.udiv(caller.add(least, I64(unit - 1)), I64(unit)), I64(unit))
        return caller.select(caller.icmp_unsigned("<", rounded, I64(unit)), I64(unit), rounded)

    def _split_sgemm(self, parallel_for: ir.Function, by: str,
                     call: tuple[int, int | ir.Value, int | ir.Value, ir.Value, int | ir.Value, ir.Value,
                                 int | ir.Value, ir.Value, int, float, float, bool, bool],
                     passes: Passes | None = None) -> None:
        """Emit `call` (Kernel.sgemm's arguments) as parts on the
        parallel-for: `by` "columns" of C (B's columns) or "rows" (A's rows).
        It runs one part per thread running now (NAME_threads_team), at most
        as many as C holds blocks (a multiple of SGEMM_COLUMN_BLOCK /
        SGEMM_ROW_BLOCK holding at least SGEMM_PARALLEL_MACS multiply-adds,
        computed at run time for run-time sizes), and cuts C evenly between
        them at multiples of that unit, so every part holds at least one
        block and the parts differ by at most one unit (the last takes the
        tail). A size too short for two blocks runs as one part. Each part
        packs the operand that is not cut again, so Kernel.sgemm cuts the
        columns of C when A (m x k) is the smaller operand and its rows when
        B (k x n) is. With `passes`, each part runs them on its own rows or
        columns of C, before and after its product."""
        m, n, k, a, lda, b, ldb, c, ldc, alpha, beta, trans_a, trans_b = call
        caller = self.builder
        unit = SGEMM_COLUMN_BLOCK if by == "columns" else SGEMM_ROW_BLOCK
        other = (m * k if isinstance(k, int) else caller.mul(I64(m), k)) if by == "columns" else \
            (n * k if isinstance(n, int) and isinstance(k, int) else caller.mul(self.index(n), self.index(k)))
        block = _split_block(other, unit) if isinstance(other, int) else self._block_at_run_time(other, unit)
        extent = n if by == "columns" else m
        # the parts [begin, end) of blocks: C[:, cols] = op(A) @ op(B)[:, cols], or C[rows, :] = op(A)[rows, :] @ op(B)
        part = ir.Function(self.module, BODY_TYPE, self.module.get_unique_name(f"{self.symbol}.sgemm"))
        part.linkage = "internal"
        context, begin, end = part.args
        # the passes' captured values travel after the product's fields (as in parallel_loop)
        captures = passes.captures if passes is not None else {}
        names = [name for name, value in captures.items() if isinstance(value, ir.Value)]
        saved = None
        if passes is None:
            builder = ir.IRBuilder(part.append_basic_block("entry"))
        else:  # the passes are emitted through this Kernel: make the part its function for now
            saved = (self.function, self.entry, self.builder, self.math, self._captured)
            self.function, self.entry = part, part.append_basic_block("entry")
            start_block = part.append_basic_block("start")
            ir.IRBuilder(self.entry).branch(start_block)
            builder = self.builder = ir.IRBuilder(start_block)
            self.math = ScalarMath(builder, self.module, "host")
        part_values = dict(captures)
        for i, name in enumerate(names):
            assert captures[name].type in (I64, PTR), f"{name}: passes capture i64s and pointers"
            field = builder.load(builder.gep(context, [I64(SGEMM_CONTEXT_SLOTS + i)], inbounds=True,
                                             source_etype=I64), typ=I64)
            part_values[name] = builder.inttoptr(field, PTR) if captures[name].type == PTR else field
        if saved is not None:
            self._captured = {**saved[4], **{id(captures[name]): part_values[name] for name in names}}
        fields = [builder.load(builder.gep(context, [I64(i)], inbounds=True, source_etype=I64), typ=I64)
                  for i in range(SGEMM_CONTEXT_SLOTS)]
        part_a, part_b, part_c = (builder.inttoptr(field, PTR) for field in fields[:3])
        part_n, parts, part_k, part_lda, part_ldb = fields[3:8]
        count = part_n if by == "columns" else I64(m)
        # part i of p starts at unit * floor(units * i / p); the last ends at the count
        units = builder.udiv(count, I64(unit))
        first = builder.mul(builder.udiv(builder.mul(units, begin), parts), I64(unit))
        last = builder.select(builder.icmp_unsigned(">=", end, parts), count,
                              builder.mul(builder.udiv(builder.mul(units, end), parts), I64(unit)))
        width = builder.sub(last, first)
        depth = k if isinstance(k, int) else part_k
        # run-time leading dimensions (a shared kernel's) come through the context
        lda_here = lda if isinstance(lda, int) else part_lda
        ldb_here = ldb if isinstance(ldb, int) else part_ldb
        n_here = part_n if not isinstance(n, int) else n

        def run_passes(which: str) -> None:
            """The part's pass: over its columns of every row, or over all columns of its rows."""
            row_pass = getattr(passes, which) if passes is not None else None
            if row_pass is None:
                return
            if by == "columns":
                with self.loop(0, m) as row:
                    row_pass(row, first, width, part_values)
            else:
                with self.loop(first, last) as row:
                    row_pass(row, 0, n_here, part_values)

        with builder.if_then(builder.icmp_signed(">", width, I64(0))):
            run_passes("before")
            if by == "columns":
                b_first = builder.mul(first, _i64(ldb_here)) if trans_b else first
                _call_sgemm(self.module, builder, m, width, depth, part_a, lda_here,
                            builder.gep(part_b, [b_first], inbounds=True, source_etype=F32), ldb_here,
                            builder.gep(part_c, [first], inbounds=True, source_etype=F32), ldc,
                            alpha, beta, trans_a, trans_b)
            else:
                a_first = first if trans_a else builder.mul(first, _i64(lda_here))
                _call_sgemm(self.module, builder, width, part_n if not isinstance(n, int) else n, depth,
                            builder.gep(part_a, [a_first], inbounds=True, source_etype=F32), lda_here, part_b, ldb_here,
                            builder.gep(part_c, [builder.mul(first, I64(ldc))], inbounds=True, source_etype=F32),
                            ldc, alpha, beta, trans_a, trans_b)
            run_passes("after")
        builder.ret_void()
        if saved is not None:
            self.function, self.entry, self.builder, self.math, self._captured = saved
        # the caller: the arguments on the stack, the blocks to the workers
        at_entry = ir.IRBuilder(self.entry)
        at_entry.position_before(self.entry.terminator)
        slot = at_entry.alloca(I64, size=I64(SGEMM_CONTEXT_SLOTS + len(names)))
        # one part per thread, at most one per whole block and at least one (a run-time
        # count may be short of a block: then one thread runs it whole)
        blocks = caller.udiv(self.index(extent), self.index(block))
        team = caller.call(self._team(), [])
        count_parts = caller.select(caller.icmp_unsigned("<", blocks, team), blocks, team)
        count_parts = caller.select(caller.icmp_unsigned("<", count_parts, I64(1)), I64(1), count_parts)
        values = [caller.ptrtoint(pointer, I64) for pointer in (a, b, c)] + [self.index(n), count_parts,
                                                                             self.index(k), self.index(lda),
                                                                             self.index(ldb)]
        fields_out = values + [caller.ptrtoint(captures[name], I64) if captures[name].type == PTR
                               else captures[name] for name in names]
        for i, value in enumerate(fields_out):
            caller.store(value, caller.gep(slot, [I64(i)], inbounds=True, source_etype=I64))
        caller.call(parallel_for, [part, slot, count_parts, I64(BLAS_CHUNKS_PER_THREAD)])

    def sgemv(self, trans: bool, rows: int, columns: int, a: ir.Value, lda: int, x: ir.Value, incx: int,
              y: ir.Value, incy: int, alpha: float = 1.0, beta: float = 0.0) -> None:
        """y = alpha * op(A) @ x + beta * y for a row-major rows x columns A
        (op(A) = A^T when `trans`); x and y with element strides incx, incy.
        In a model compiled for several threads, a large one without
        `trans` (one dot product per element of y: ONNX Gemm with transB,
        every classifier) is split by rows of A (SGEMV_OUTPUT_BLOCK), one
        sgemv per part. With `trans` it is not: OpenBLAS's kernel for it
        works on blocks of y whose bounds, and so whose rounding, move with
        where a part starts (measured: 6 of 4100 elements differed)."""
        outputs, inner = (columns, rows) if trans else (rows, columns)
        parallel_for = self._parallel_for()
        block = max(SGEMV_OUTPUT_BLOCK, -(-SGEMV_PARALLEL_MACS // max(inner, 1) // SGEMV_OUTPUT_BLOCK)
                    * SGEMV_OUTPUT_BLOCK)
        if parallel_for is None or trans or outputs < 2 * block:
            _call_sgemv(self.module, self.builder, trans, rows, columns, a, lda, x, incx, y, incy, alpha, beta)
            return
        blocks = outputs // block
        # blocks [begin, end) of y: y[part] = op(A)[part, :] @ x (rows of A, or columns when transposed)
        part = ir.Function(self.module, BODY_TYPE, self.module.get_unique_name(f"{self.symbol}.sgemv"))
        part.linkage = "internal"
        builder = ir.IRBuilder(part.append_basic_block("entry"))
        context, begin, end = part.args
        part_a, part_x, part_y = (builder.inttoptr(builder.load(builder.gep(context, [I64(i)], inbounds=True,
                                                                            source_etype=I64), typ=I64), PTR)
                                  for i in range(3))
        first = builder.mul(begin, I64(block))
        # the last block takes the outputs after it
        last = builder.select(builder.icmp_unsigned("==", end, I64(blocks)), I64(outputs),
                              builder.mul(end, I64(block)))
        width = builder.sub(last, first)
        a_first = builder.gep(part_a, [first if trans else builder.mul(first, I64(lda))], inbounds=True,
                              source_etype=F32)
        y_first = builder.gep(part_y, [builder.mul(first, I64(max(incy, 1)))], inbounds=True, source_etype=F32)
        _call_sgemv(self.module, builder, trans, rows if trans else width, width if trans else columns, a_first,
                    lda, part_x, incx, y_first, incy, alpha, beta)
        builder.ret_void()
        at_entry = ir.IRBuilder(self.entry)
        at_entry.position_before(self.entry.terminator)
        slot = at_entry.alloca(I64, size=I64(3))
        caller = self.builder
        for i, pointer in enumerate((a, x, y)):
            caller.store(caller.ptrtoint(pointer, I64), caller.gep(slot, [I64(i)], inbounds=True, source_etype=I64))
        caller.call(parallel_for, [part, slot, I64(blocks), I64(BLAS_CHUNKS_PER_THREAD)])

    def parallel_for_available(self) -> bool:
        """Whether a parallel_loop emitted here would run on the model's
        threads (a model compiled for several, outside any part)."""
        return self._parallel_for() is not None

    def _team(self) -> ir.Function:
        """The model's NAME_threads_team (declared here, defined with the pool)."""
        symbol = team_symbol(self.symbol.rsplit("_site_", 1)[0])
        function = self.module.globals.get(symbol)
        if function is None:
            function = ir.Function(self.module, TEAM_TYPE, symbol)
        return function

    def _parallel_for(self) -> ir.Function | None:
        """The model's parallel-for (declared before the kernels are
        written), or None in a model compiled for one thread and inside a
        part already on it (parallel_loop: nested loops run serially)."""
        if self.function.function_type != KERNEL_TYPE:
            return None
        return self.module.globals.get(parallel_for_symbol(self.symbol.rsplit("_site_", 1)[0]))


def _call_sgemv(module: ir.Module, builder: ir.IRBuilder, trans: bool, rows: int | ir.Value,
                columns: int | ir.Value, a: ir.Value, lda: int, x: ir.Value, incx: int, y: ir.Value, incy: int,
                alpha: float, beta: float) -> None:
    """One call of the CBLAS sgemv, row-major (see Kernel.sgemv)."""
    function = module.globals.get(SGEMV)
    if function is None:
        function = ir.Function(module, SGEMV_TYPE, SGEMV)

    def i32(value: int | ir.Value) -> ir.Value:
        return I32(int(value)) if isinstance(value, int) else builder.trunc(value, I32)

    builder.call(function, [
        I32(CBLAS_ROW_MAJOR), I32(CBLAS_TRANS if trans else CBLAS_NO_TRANS), i32(rows), i32(columns),
        F32(alpha), a, I32(max(lda, 1)), x, I32(max(incx, 1)), F32(beta), y, I32(max(incy, 1)),
    ])


def keep_loops_around_blas(module: ir.Module, functions: Sequence[ir.Function]) -> None:
    """Mark every loop of each of `functions` that calls a BLAS product
    (SGEMM, SGEMV) `llvm.loop.unroll.disable`: such a kernel's time is spent
    in the BLAS call, and its own loops (filling the bias, im2col, the
    activation after it) are vectorised either way. Unrolled by O3, they
    made the largest modules of all: Inception v1's slowest kernel to
    compile, 136 lines of IR, came out as 2,797 and took 0.65 CPU s to
    compile, 0.06 without unrolling. Other kernels keep LLVM's unrolling:
    turned off everywhere, it cost ShuffleNet's register-tiled and direct
    convolutions and transposes 9%, and a symbolic T5 44% at S = 512. A
    loop is a branch back to a block emitted before its own (every emitter
    appends a loop's header before its body)."""
    blas = (SGEMM, SGEMV)
    disable: ir.MDValue | None = None
    for function in functions:
        if not any(isinstance(instruction, ir.CallInstr) and getattr(instruction.callee, "name", None) in blas
                   for block in function.blocks for instruction in block.instructions):
            continue
        order = {id(block): n for n, block in enumerate(function.blocks)}
        for n, block in enumerate(function.blocks):
            branch = block.terminator
            if branch is None or "llvm.loop" in branch.metadata:
                continue
            if any(isinstance(t, ir.Block) and order.get(id(t), n + 1) <= n for t in branch.operands):
                if disable is None:
                    disable = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
                # a loop ID is a node whose first operand is itself (made unique by a name, then tied)
                loop_id = module.add_metadata([ir.MetaDataString(module, f"{function.name}.loop.{n}"), disable])
                loop_id.operands = (loop_id, disable)
                branch.set_metadata("llvm.loop", loop_id)


def _i64(value: int | ir.Value) -> ir.Value:
    """An i64 constant for an int, the value itself otherwise."""
    return I64(value) if isinstance(value, int) else value


def _call_sgemm(module: ir.Module, builder: ir.IRBuilder, m: int | ir.Value, n: int | ir.Value, k: int | ir.Value,
                a: ir.Value, lda: int | ir.Value, b: ir.Value, ldb: int | ir.Value, c: ir.Value,
                ldc: int | ir.Value, alpha: float, beta: float | ir.Value, trans_a: bool, trans_b: bool) -> None:
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
        leading(ldc),
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
        index = b.udiv(flat, kernel.index(step)) if step != 1 else flat
        if step * size != math.prod(shape):
            index = b.urem(index, kernel.index(size))
        offset = kernel.add(offset, kernel.mul(index, stride))
    return offset

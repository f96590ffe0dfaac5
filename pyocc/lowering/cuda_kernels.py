"""CUDA kernels that pyocc writes itself, for what cuDNN and cuBLAS lack.

cuDNN has no erf, GELU, division, exp, where, gather, cast or layer
normalisation, nor a convolution of a pre-activated input. For those ops
`convert-dnn-to-llvm{target=cuda}` describes one kernel per op —
`PointwiseKernel` (an expression over broadcast inputs), `GatherKernel`,
`CastKernel`, `LayerNormKernel` (one thread per row), `ChannelAffineKernel`
(dnn.preact_conv's pre-activation, into a scratch buffer) — and
this module turns the descriptions of a function into

- PTX, through LLVM's NVPTX back end in llvmlite: no CUDA toolkit and no GPU
  are needed to compile; the driver loads the PTX at init
  (cuModuleLoadData) and the run launches each kernel (cuLaunchKernel);
- a host twin of every kernel from the same expression code, so the CPU
  stand-in (pyocc.testing.fake_cuda) can run the kernels too and the tests
  check their arithmetic against onnxruntime without a GPU.

Kernel `k` takes (out, in0, in1, ...) device pointers; thread i computes
element (or row) i. Shapes and strides are compile-time constants of the
kernel. Transcendentals use the PTX
approximations ex2.approx / lg2.approx (about 2 ulp), and erf the
Abramowitz-Stegun 7.1.26 polynomial (|error| < 1.5e-7).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm
import llvmlite.ir as ir

from pyocc.lowering.llvm_math import (
    BINARY_FUNCTIONS,
    COMPARISONS,
    LOGICAL,
    ScalarMath,
    binary_expression,
    integer_expression,
    row_major_strides,
    unary_expression,
)

#: threads per block of every launch
BLOCK = 256
#: the PTX the kernels are compiled to: any GPU from Volta on can JIT it
PTX_ARCH, PTX_FEATURES = "sm_70", "+ptx64"


@dataclass(frozen=True)
class PointwiseKernel:
    """out[i] = act(fn(inputs at i)) over `shape`, each input broadcast by
    its `strides` (in elements, 0 along a broadcast dimension).

    fn: a unary or binary function name, a comparison (bytes out), or
    "where" (cond as bytes, a, b)."""

    name: str
    fn: str
    shape: tuple[int, ...]
    input_strides: tuple[tuple[int, ...], ...]
    alpha: float | None = None
    beta: float | None = None
    approximate: str = "none"
    activation: str | None = None
    activation_alpha: float | None = None
    activation_beta: float | None = None
    input_dtype: str = "float32"
    """The inputs' element type: float32, int32 / int64 or bool."""
    input_offsets: tuple[int, ...] = ()
    """Where each input's element 0 is read (elements; none: all 0): a slice's start."""

    @property
    def count(self) -> int:
        """Elements of the output (threads of the launch)."""
        return math.prod(self.shape)

    @property
    def output_dtype(self) -> str:
        """bool for comparisons and logic, else the inputs' type."""
        return "bool" if self.fn in COMPARISONS or self.fn in LOGICAL else self.input_dtype

    @property
    def output_bytes(self) -> int:
        return self.count * DTYPES[self.output_dtype][0]

    def input_bytes(self, index: int) -> int:
        """Bytes of input `index` the kernel may read (its broadcast extent
        from its base pointer; strides may be negative, offsets are not)."""
        strides = self.input_strides[index]
        last = self.offset(index) + sum((dim - 1) * max(stride, 0) for dim, stride in zip(self.shape, strides))
        return (last + 1) * DTYPES[self.operand_dtype(index)][0]

    def offset(self, index: int) -> int:
        """Input `index`'s offset in elements."""
        return self.input_offsets[index] if self.input_offsets else 0

    def operand_dtype(self, index: int) -> str:
        """The element type of input `index`."""
        return "bool" if self.fn == "where" and index == 0 else self.input_dtype


# ---------------------------------------------------------------------------
# One kernel body: index -> load, compute, store
# ---------------------------------------------------------------------------


def _body(m: ScalarMath, kernel: PointwiseKernel, index: object, out: object, inputs: Sequence[object]) -> None:
    """Element `index` of `kernel` (an i64), with typed pointers."""
    ir, b = m.ir, m.b
    coordinates = _coordinates(m, index, kernel.shape)
    values = [b.load(b.gep(pointer, [_offset(m, coordinates, strides, kernel.offset(position))]))
              for position, (pointer, strides) in enumerate(zip(inputs, kernel.input_strides))]
    if kernel.fn == "where":
        condition = b.icmp_unsigned("!=", values[0], ir.Constant(ir.IntType(8), 0))
        result = b.select(condition, values[1], values[2])
    elif kernel.fn in COMPARISONS:
        if kernel.input_dtype == "float32":
            truth = b.fcmp_ordered(COMPARISONS[kernel.fn], values[0], values[1])
        else:
            truth = b.icmp_signed(COMPARISONS[kernel.fn], values[0], values[1])
        b.store(b.zext(truth, ir.IntType(8)), b.gep(out, [index]))
        return
    elif kernel.fn in LOGICAL:
        byte = ir.IntType(8)
        truths = [b.icmp_unsigned("!=", v, ir.Constant(byte, 0)) for v in values]
        if kernel.fn == "not":
            truth = b.not_(truths[0])
        else:
            truth = {"and": b.and_, "or": b.or_, "xor": b.xor}[kernel.fn](truths[0], truths[1])
        b.store(b.zext(truth, byte), b.gep(out, [index]))
        return
    elif kernel.input_dtype != "float32":
        result = integer_expression(m, kernel.fn, values)
    elif kernel.fn in BINARY_FUNCTIONS:
        result = binary_expression(m, kernel.fn, values[0], values[1])
    else:
        result = unary_expression(m, kernel.fn, values[0], kernel.alpha, kernel.beta, kernel.approximate)
    if kernel.activation is not None:
        result = unary_expression(m, kernel.activation, result, kernel.activation_alpha, kernel.activation_beta, "none")
    b.store(result, b.gep(out, [index]))


def _pointwise_types(kernel: PointwiseKernel) -> list[object]:
    types = [_llvm_type(kernel.output_dtype).as_pointer()]
    for index in range(len(kernel.input_strides)):
        types.append(_llvm_type(kernel.operand_dtype(index)).as_pointer())
    return types


# ---------------------------------------------------------------------------
# Kernels that are not pointwise expressions
# ---------------------------------------------------------------------------

#: element types the kernels move: numpy name -> (bytes, llvm kind)
DTYPES: dict[str, tuple[int, str]] = {"float32": (4, "f"), "int32": (4, "i"), "int64": (8, "i"), "bool": (1, "i")}


def _llvm_type(dtype: str) -> object:
    size, kind = DTYPES[dtype]
    return ir.FloatType() if kind == "f" else ir.IntType(8 * size)


@dataclass(frozen=True)
class GatherKernel:
    """ONNX Gather along `axis`: out[outer, j, inner] = x[outer, indices[j], inner],
    negative indices counting from the end. Thread i computes out element i."""

    name: str
    x_shape: tuple[int, ...]
    axis: int
    index_count: int
    index_dtype: str  # int32 or int64

    @property
    def count(self) -> int:
        outer = math.prod(self.x_shape[:self.axis])
        return outer * self.index_count * math.prod(self.x_shape[self.axis + 1:])

    def pointer_types(self) -> list[object]:
        return [_llvm_type("float32").as_pointer(), _llvm_type("float32").as_pointer(),
                _llvm_type(self.index_dtype).as_pointer()]

    def pointer_bytes(self) -> list[int]:
        return [self.count * 4, math.prod(self.x_shape) * 4, self.index_count * DTYPES[self.index_dtype][0]]

    def body(self, m: ScalarMath, index: object, pointers: Sequence[object]) -> None:
        ir, b = m.ir, m.b
        i64 = ir.IntType(64)
        out, x, indices = pointers
        inner = math.prod(self.x_shape[self.axis + 1:])
        dim = self.x_shape[self.axis]
        position = b.urem(b.udiv(index, ir.Constant(i64, inner)), ir.Constant(i64, self.index_count))
        outer = b.udiv(index, ir.Constant(i64, inner * self.index_count))
        within = b.urem(index, ir.Constant(i64, inner))
        chosen = b.load(b.gep(indices, [position]))
        if self.index_dtype != "int64":
            chosen = b.sext(chosen, i64)
        wrapped = b.select(b.icmp_signed("<", chosen, ir.Constant(i64, 0)), b.add(chosen, ir.Constant(i64, dim)),
                           chosen)
        source = b.add(b.mul(b.add(b.mul(outer, ir.Constant(i64, dim)), wrapped), ir.Constant(i64, inner)), within)
        b.store(b.load(b.gep(x, [source])), b.gep(out, [index]))


@dataclass(frozen=True)
class CastKernel:
    """ONNX Cast between float32, int32, int64 and bool (floats truncate
    toward zero; anything nonzero is true). Thread i casts element i."""

    name: str
    count: int
    source: str
    target: str

    def pointer_types(self) -> list[object]:
        return [_llvm_type(self.target).as_pointer(), _llvm_type(self.source).as_pointer()]

    def pointer_bytes(self) -> list[int]:
        return [self.count * DTYPES[self.target][0], self.count * DTYPES[self.source][0]]

    def body(self, m: ScalarMath, index: object, pointers: Sequence[object]) -> None:
        ir, b = m.ir, m.b
        out, x = pointers
        value = b.load(b.gep(x, [index]))
        source_kind, target_kind = DTYPES[self.source][1], DTYPES[self.target][1]
        target = _llvm_type(self.target)
        if self.target == "bool":
            zero = m.const(0.0) if source_kind == "f" else ir.Constant(value.type, 0)
            truth = (b.fcmp_unordered("!=", value, zero) if source_kind == "f"
                     else b.icmp_unsigned("!=", value, zero))
            result = b.zext(truth, target)
        elif source_kind == "f" and target_kind == "f":
            result = value
        elif source_kind == "f":
            result = b.fptosi(value, target)
        elif target_kind == "f":
            result = b.uitofp(value, target) if self.source == "bool" else b.sitofp(value, target)
        elif value.type.width < target.width:
            result = b.zext(value, target) if self.source == "bool" else b.sext(value, target)
        elif value.type.width > target.width:
            result = b.trunc(value, target)
        else:
            result = value
        b.store(result, b.gep(out, [index]))


@dataclass(frozen=True)
class LayerNormKernel:
    """ONNX LayerNormalization over the last `width` elements of each of
    `rows` rows: (x - mean) / sqrt(var + epsilon) * scale + bias. Thread i
    normalises row i (two passes over it, then the write; safe in place)."""

    name: str
    rows: int
    width: int
    epsilon: float
    has_bias: bool

    @property
    def count(self) -> int:
        return self.rows

    def pointer_types(self) -> list[object]:
        f32p = _llvm_type("float32").as_pointer()
        return [f32p] * (4 if self.has_bias else 3)

    def pointer_bytes(self) -> list[int]:
        return [self.rows * self.width * 4] * 2 + [self.width * 4] * (2 if self.has_bias else 1)

    def body(self, m: ScalarMath, index: object, pointers: Sequence[object]) -> None:
        ir, b = m.ir, m.b
        i64 = ir.IntType(64)
        out, x, scale = pointers[:3]
        bias = pointers[3] if self.has_bias else None
        start = b.mul(index, ir.Constant(i64, self.width))

        def row_loop(step: Callable[[object, object], object | None], initial: object | None = None) -> object:
            return _loop(m, self.width, step, initial)

        def element(j: object) -> object:
            return b.load(b.gep(x, [b.add(start, j)]))

        total = row_loop(lambda j, acc: b.fadd(acc, element(j)), m.const(0.0))
        mean = b.fdiv(total, m.const(float(self.width)))

        def add_square(j: object, acc: object) -> object:
            centred = b.fsub(element(j), mean)
            return b.fadd(acc, b.fmul(centred, centred))

        variance = b.fdiv(row_loop(add_square, m.const(0.0)), m.const(float(self.width)))
        inverse = b.fdiv(m.const(1.0), m.sqrt(b.fadd(variance, m.const(self.epsilon))))

        def write(j: object, acc: object) -> None:
            y = b.fmul(b.fmul(b.fsub(element(j), mean), inverse), b.load(b.gep(scale, [j])))
            if bias is not None:
                y = b.fadd(y, b.load(b.gep(bias, [j])))
            b.store(y, b.gep(out, [b.add(start, j)]))

        row_loop(write)


def _loop(m: ScalarMath, count: int, step: Callable[[object, object], object | None],
          initial: object | None = None) -> object:
    """Emit `for j in range(count): acc = step(j, acc)` at the builder's
    position (count >= 1); returns the last acc (None without `initial`)."""
    ir, b = m.ir, m.b
    i64 = ir.IntType(64)
    before = b.block
    loop = b.append_basic_block("loop")
    after = b.append_basic_block("loop.end")
    b.branch(loop)
    b.position_at_end(loop)
    j = b.phi(i64)
    j.add_incoming(ir.Constant(i64, 0), before)
    acc = None
    if initial is not None:
        acc = b.phi(initial.type)
        acc.add_incoming(initial, before)
    result = step(j, acc)
    following = b.add(j, ir.Constant(i64, 1))
    j.add_incoming(following, b.block)
    if acc is not None:
        acc.add_incoming(result, b.block)
    b.cbranch(b.icmp_unsigned("<", following, ir.Constant(i64, count)), loop, after)
    b.position_at_end(after)
    return result


def _offset(m: ScalarMath, coordinates: Sequence[object], strides: Sequence[int], base: int = 0) -> object:
    """base + sum(coordinate * stride), in elements (strides may be negative)."""
    ir, b = m.ir, m.b
    i64 = ir.IntType(64)
    offset = ir.Constant(i64, base)
    for coordinate, stride in zip(coordinates, strides):
        if stride:
            offset = b.add(offset, b.mul(coordinate, ir.Constant(i64, stride)))
    return offset


def _coordinates(m: ScalarMath, index: object, shape: Sequence[int]) -> list[object]:
    """The row-major coordinates of flat `index` in `shape`."""
    ir, b = m.ir, m.b
    i64 = ir.IntType(64)
    coordinates = []
    rest = index
    for dim in reversed(shape):
        coordinates.append(b.urem(rest, ir.Constant(i64, dim)))
        rest = b.udiv(rest, ir.Constant(i64, dim))
    return coordinates[::-1]


#: reductions the kernels compute (ONNX Reduce<fn>), and arg_max / arg_min
REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "l1", "l2", "sum_square", "log_sum", "log_sum_exp",
                        "arg_max", "arg_min"})


@dataclass(frozen=True)
class ReduceKernel:
    """ONNX Reduce<fn> over `axes` of a float32 tensor of `shape` (or ArgMax /
    ArgMin over one axis, int64 out). Thread i computes output element i,
    looping over the reduced elements in order."""

    name: str
    fn: str
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    select_last_index: bool = False

    @property
    def kept(self) -> tuple[int, ...]:
        return tuple(d for axis, d in enumerate(self.shape) if axis not in self.axes)

    @property
    def count(self) -> int:
        return math.prod(self.kept)

    def pointer_types(self) -> list[object]:
        out = _llvm_type("int64" if self.fn.startswith("arg_") else "float32")
        return [out.as_pointer(), _llvm_type("float32").as_pointer()]

    def pointer_bytes(self) -> list[int]:
        return [self.count * (8 if self.fn.startswith("arg_") else 4), math.prod(self.shape) * 4]

    def body(self, m: ScalarMath, index: object, pointers: Sequence[object]) -> None:
        ir, b = m.ir, m.b
        i64 = ir.IntType(64)
        out, x = pointers
        strides = row_major_strides(self.shape)
        kept_axes = [axis for axis in range(len(self.shape)) if axis not in self.axes]
        base = _offset(m, _coordinates(m, index, self.kept), [strides[a] for a in kept_axes])
        reduced = [self.shape[a] for a in self.axes]
        count = math.prod(reduced)

        def element(j: object) -> object:
            at = b.add(base, _offset(m, _coordinates(m, j, reduced), [strides[a] for a in self.axes]))
            return b.load(b.gep(x, [at]))

        if self.fn.startswith("arg_"):
            better = ">" if self.fn == "arg_max" else "<"
            if self.select_last_index:
                better += "="

            def keep_best(j: object, best: object) -> object:
                return b.select(b.fcmp_ordered(better, element(j), element(best)), j, best)

            b.store(_loop(m, count, keep_best, ir.Constant(i64, 0)), b.gep(out, [index]))
            return
        if self.fn in ("max", "min"):
            first = element(ir.Constant(i64, 0))
            pick_larger = self.fn == "max"
            result = _loop(m, count, lambda j, acc: (m.max if pick_larger else m.min)(acc, element(j)), first)
        elif self.fn == "log_sum_exp":
            peak = _loop(m, count, lambda j, acc: m.max(acc, element(j)), element(ir.Constant(i64, 0)))
            total = _loop(m, count, lambda j, acc: b.fadd(acc, m.exp(b.fsub(element(j), peak))), m.const(0.0))
            result = b.fadd(m.log(total), peak)
        else:
            terms: dict[str, Callable[[object], object]] = {
                "sum": lambda v: v, "mean": lambda v: v, "log_sum": lambda v: v, "prod": lambda v: v,
                "l1": m.fabs, "l2": lambda v: b.fmul(v, v), "sum_square": lambda v: b.fmul(v, v)}
            combine = b.fmul if self.fn == "prod" else b.fadd
            result = _loop(m, count, lambda j, acc: combine(acc, terms[self.fn](element(j))),
                           m.const(1.0 if self.fn == "prod" else 0.0))
            if self.fn == "mean":
                result = b.fdiv(result, m.const(float(count)))
            elif self.fn == "l2":
                result = m.sqrt(result)
            elif self.fn == "log_sum":
                result = m.log(result)
        b.store(result, b.gep(out, [index]))


@dataclass(frozen=True)
class ChannelAffineKernel:
    """dnn.preact_conv's pre-activation: out = act(x * scale[c] + shift[c])
    over `shape` (N, C, *spatial), c the channel (axis 1), act none or relu;
    out is packed, x has `batch_stride` elements between its batches (more
    than C * spatial when x is a block of channels of a wider tensor; 0:
    packed). Thread i computes element i."""

    name: str
    shape: tuple[int, ...]
    activation: str | None = None
    batch_stride: int = 0

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    @property
    def x_batch_stride(self) -> int:
        """Elements between x's batches."""
        return self.batch_stride or math.prod(self.shape[1:])

    def pointer_types(self) -> list[object]:
        return [_llvm_type("float32").as_pointer()] * 4

    def pointer_bytes(self) -> list[int]:
        x_elements = (self.shape[0] - 1) * self.x_batch_stride + math.prod(self.shape[1:])
        return [self.count * 4, x_elements * 4, self.shape[1] * 4, self.shape[1] * 4]

    def body(self, m: ScalarMath, index: object, pointers: Sequence[object]) -> None:
        ir, b = m.ir, m.b
        i64 = ir.IntType(64)
        out, x, scale, shift = pointers
        inner = math.prod(self.shape[2:])
        per_batch = self.shape[1] * inner
        channel = b.urem(b.udiv(index, ir.Constant(i64, inner)), ir.Constant(i64, self.shape[1]))
        source = index
        if self.x_batch_stride != per_batch:
            batch = b.udiv(index, ir.Constant(i64, per_batch))
            source = b.add(b.mul(batch, ir.Constant(i64, self.x_batch_stride)),
                           b.urem(index, ir.Constant(i64, per_batch)))
        value = b.fadd(b.fmul(b.load(b.gep(x, [source])), b.load(b.gep(scale, [channel]))),
                       b.load(b.gep(shift, [channel])))
        if self.activation is not None:
            value = unary_expression(m, self.activation, value, None, None, "none")
        b.store(value, b.gep(out, [index]))


#: every kind of kernel pyocc writes
Kernel = PointwiseKernel | GatherKernel | CastKernel | LayerNormKernel | ReduceKernel | ChannelAffineKernel


def _kernel_types(kernel: Kernel) -> list[object]:
    return _pointwise_types(kernel) if isinstance(kernel, PointwiseKernel) else kernel.pointer_types()  # type: ignore[attr-defined]


def _kernel_body(m: ScalarMath, kernel: Kernel, index: object, pointers: Sequence[object]) -> None:
    if isinstance(kernel, PointwiseKernel):
        _body(m, kernel, index, pointers[0], pointers[1:])
    else:
        kernel.body(m, index, pointers)  # type: ignore[attr-defined]


def pointer_bytes(kernel: Kernel) -> list[int]:
    """The bytes each pointer argument of `kernel` spans (out first)."""
    if isinstance(kernel, PointwiseKernel):
        return [kernel.output_bytes] + [kernel.input_bytes(i) for i in range(len(kernel.input_strides))]
    return kernel.pointer_bytes()  # type: ignore[attr-defined]


def grid(kernel: Kernel) -> int:
    """Blocks of `kernel`'s launch: one thread per element (or row)."""
    return max(1, -(-kernel.count // BLOCK))  # type: ignore[attr-defined]


def ptx_module(kernels: Sequence[Kernel]) -> str:
    """The PTX of `kernels`: one `.entry` per kernel, named as the kernel."""
    module = ir.Module(name="pyocc_kernels")
    module.triple = "nvptx64-nvidia-cuda"
    i32, i64 = ir.IntType(32), ir.IntType(64)
    annotations = module.add_named_metadata("nvvm.annotations")
    for kernel in kernels:
        function = ir.Function(module, ir.FunctionType(ir.VoidType(), _kernel_types(kernel)), kernel.name)
        entry = function.append_basic_block("entry")
        body = function.append_basic_block("body")
        done = function.append_basic_block("done")
        b = ir.IRBuilder(entry)
        m = ScalarMath(b, module, "ptx")

        def register(name: str) -> object:
            special = module.globals.get(name) or ir.Function(module, ir.FunctionType(i32, []), name)
            return b.zext(b.call(special, []), i64)

        block_id = register("llvm.nvvm.read.ptx.sreg.ctaid.x")
        block_size = register("llvm.nvvm.read.ptx.sreg.ntid.x")
        thread = register("llvm.nvvm.read.ptx.sreg.tid.x")
        index = b.add(b.mul(block_id, block_size), thread)
        b.cbranch(b.icmp_unsigned("<", index, ir.Constant(i64, kernel.count)), body, done)
        b.position_at_end(body)
        _kernel_body(m, kernel, index, list(function.args))
        b.branch(done)
        b.position_at_end(done)
        b.ret_void()
        annotations.add(module.add_metadata([function, "kernel", ir.Constant(i32, 1)]))
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(module.triple)
    machine = target.create_target_machine(cpu=PTX_ARCH, features=PTX_FEATURES, opt=2)
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    return machine.emit_assembly(parsed)


def host_twins(kernels: Sequence[Kernel]) -> str:
    """LLVM IR for the host: `void NAME_host(void **params, int64_t first,
    int64_t last)` runs elements [first, last) of kernel NAME, reading its
    arguments as cuLaunchKernel passes them (an array of pointers to each)."""
    module = ir.Module(name="pyocc_kernel_twins")
    i8p, i64 = ir.IntType(8).as_pointer(), ir.IntType(64)
    for kernel in kernels:
        twin = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]),
                           f"{kernel.name}_host")
        params, first, last = twin.args
        entry, loop, body, done = (twin.append_basic_block(n) for n in ("entry", "loop", "body", "done"))
        b = ir.IRBuilder(entry)
        pointers = []
        for position, kind in enumerate(_kernel_types(kernel)):
            slot = b.load(b.gep(params, [ir.Constant(i64, position)]))
            pointers.append(b.load(b.bitcast(slot, kind.as_pointer())))
        b.branch(loop)
        b.position_at_end(loop)
        index = b.phi(i64)
        index.add_incoming(first, entry)
        b.cbranch(b.icmp_unsigned("<", index, last), body, done)
        b.position_at_end(body)
        # elements past the output are not computed, as in the PTX
        in_range = b.icmp_unsigned("<", index, ir.Constant(i64, kernel.count))
        with b.if_then(in_range):
            _kernel_body(ScalarMath(b, module, "host"), kernel, index, pointers)
        following = b.add(index, ir.Constant(i64, 1))
        index.add_incoming(following, b.block)
        b.branch(loop)
        b.position_at_end(done)
        b.ret_void()
    return str(module)

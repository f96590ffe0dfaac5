"""Native normalisation kernels: channel_affine, batch_norm, softmax,
log_softmax, layer_norm and lrn (float32).

Each views its input as (outer, axis, inner) around the normalised axis
and loops with `inner` innermost, the contiguous direction. channel_affine
and batch_norm multiply then add in float32 without contraction, as numpy
does, so they round identically; the sums of softmax, log_softmax and
layer_norm accumulate in float64 (numpy sums float32 pairwise: both are
within a few ulp of the exact sum).
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from pyocc.lowering.llvm_math import broadcast_strides, row_major_strides
from pyocc.lowering.native.loops import F32, F64, KernelBuilder, Operand, all_dtypes_in
from pyocc.lowering.native.registry import native_kernel


def _float32(site: dict[str, Any]) -> bool:
    return all_dtypes_in(site, ("float32",))


def _around(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """(outer, length, inner) of `shape` around `axis`."""
    axis %= len(shape)
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def _per_channel(k: KernelBuilder, x: Operand, out: Operand, axis: int,
                 channel: Any, element: Any) -> None:
    """for o, c: params = channel(c); for i: out = element(x, params) over
    (outer, C, inner) around `axis`."""
    outer, channels, inner = _around(x.shape, axis)

    def per_outer(o: ir.Value) -> None:
        def per_channel(c: ir.Value) -> None:
            params = channel(c)
            base = k.b.mul(k.b.add(k.b.mul(o, k.i64(channels)), c), k.i64(inner))

            def per_element(i: ir.Value) -> None:
                at = k.b.add(base, i)
                k.store(element(k.load(x, at), params), out, at)

            k.loop(inner, per_element)

        # every element is written from itself and its channel's parameters:
        # the first loop with more than one iteration may run on threads
        k.loop(channels, per_channel, parallel=True, work=channels * inner)

    k.loop(outer, per_outer, parallel=True, work=x.size)


def _supports_affine(site: dict[str, Any]) -> bool:
    x, scale, shift = site["inputs"][:3]
    axis = site["kwargs"].get("axis", 1) % len(x["shape"])
    length = x["shape"][axis]
    return _float32(site) and math.prod(scale["shape"]) == length and math.prod(shift["shape"]) == length


@native_kernel("channel_affine", supports=_supports_affine, run_time_shapes=True)
def emit_channel_affine(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """out = act(x * scale[c] + shift[c]) along `axis` (host_kernels.channel_affine)."""
    k = KernelBuilder(module, symbol, site)
    x, scale, shift, out = k.input(0), k.input(1), k.input(2), k.outputs[0]
    kw = k.kwargs

    def channel(c: ir.Value) -> tuple[ir.Value, ir.Value]:
        return k.load(scale, c), k.load(shift, c)

    def element(value: ir.Value, params: tuple[ir.Value, ir.Value]) -> ir.Value:
        y = k.b.fadd(k.b.fmul(value, params[0]), params[1])
        return k.activation(y, kw.get("activation"), kw.get("alpha"), kw.get("beta"))

    _per_channel(k, x, out, kw.get("axis", 1), channel, element)
    k.finish()


def _supports_batch_norm(site: dict[str, Any]) -> bool:
    x = site["inputs"][0]
    return _float32(site) and len(x["shape"]) >= 2 and all(
        math.prod(spec["shape"]) == x["shape"][1] for spec in site["inputs"][1:5])


@native_kernel("batch_norm", supports=_supports_batch_norm, run_time_shapes=True)
def emit_batch_norm(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX BatchNormalization (inference, host_kernels.batch_norm): the
    statistics folded into a per-channel scale and shift in float64,
    rounded to float32, then x * scale + shift."""
    k = KernelBuilder(module, symbol, site)
    x, scale, bias, mean, var = (k.input(i) for i in range(5))
    out = k.outputs[0]
    b = k.b
    epsilon = ir.Constant(F64, float(k.kwargs.get("epsilon", 1e-5)))

    def channel(c: ir.Value) -> tuple[ir.Value, ir.Value]:
        def wide(operand: Operand) -> ir.Value:
            return b.fpext(k.load(operand, c), F64)

        root = b.call(module.declare_intrinsic("llvm.sqrt", [F64]), [b.fadd(wide(var), epsilon)])
        factor = b.fdiv(wide(scale), root)
        shift = b.fsub(wide(bias), b.fmul(wide(mean), factor))
        return b.fptrunc(factor, F32), b.fptrunc(shift, F32)

    _per_channel(k, x, out, 1, channel, lambda value, p: b.fadd(b.fmul(value, p[0]), p[1]))
    k.finish()


def _rows(k: KernelBuilder, x: Operand, axis: int, body: Any) -> None:
    """for each (outer, inner): body(offset of element j along the axis)."""
    outer, length, inner = _around(x.shape, axis)

    def per_outer(o: ir.Value) -> None:
        def per_inner(i: ir.Value) -> None:
            base = k.b.add(k.b.mul(o, k.i64(length * inner)), i)
            body(lambda j: k.b.add(base, k.b.mul(j, k.i64(inner))), length)

        # each (outer, inner) row is read and written by its own iteration only
        k.loop(inner, per_inner, parallel=True, work=inner * length)

    k.loop(outer, per_outer, parallel=True, work=x.size)


def _row_max(k: KernelBuilder, x: Operand, at: Any, length: int) -> ir.Value:
    b = k.b
    return k.reduce(length, ir.Constant(F32, float("-inf")),
                    lambda j, acc: (lambda v: b.select(b.fcmp_unordered(">", v, acc), v, acc))(k.load(x, at(j))))


@native_kernel("softmax", supports=_float32, run_time_shapes=True)
def emit_softmax(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Softmax along `axis`, shifted by the max (host_kernels.softmax); out may be x."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    b, m = k.b, k.math

    def row(at: Any, length: int) -> None:
        peak = _row_max(k, x, at, length)

        def exponentiate(j: ir.Value, acc: ir.Value) -> ir.Value:
            e = m.exp(b.fsub(k.load(x, at(j)), peak))
            k.store(e, out, at(j))
            return b.fadd(acc, b.fpext(e, F64))

        total = b.fptrunc(k.reduce(length, ir.Constant(F64, 0.0), exponentiate), F32)
        k.loop(length, lambda j: k.store(b.fdiv(k.load(out, at(j)), total), out, at(j)))

    _rows(k, x, k.kwargs.get("axis", -1), row)
    k.finish()


@native_kernel("log_softmax", supports=_float32, run_time_shapes=True)
def emit_log_softmax(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX LogSoftmax: x - max - log(sum(exp(x - max))) (host_kernels.log_softmax)."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    b, m = k.b, k.math

    def row(at: Any, length: int) -> None:
        peak = _row_max(k, x, at, length)

        def shift(j: ir.Value, acc: ir.Value) -> ir.Value:
            shifted = b.fsub(k.load(x, at(j)), peak)
            k.store(shifted, out, at(j))
            return b.fadd(acc, b.fpext(m.exp(shifted), F64))

        log_total = m.log(b.fptrunc(k.reduce(length, ir.Constant(F64, 0.0), shift), F32))
        k.loop(length, lambda j: k.store(b.fsub(k.load(out, at(j)), log_total), out, at(j)))

    _rows(k, x, k.kwargs.get("axis", -1), row)
    k.finish()


def _trailing_strides(spec: dict[str, Any] | None, trailing: tuple[int, ...]) -> list[int] | None:
    """How a scale / bias of `spec` broadcasts over the normalised dims, or
    None if it does not (numpy's rules, leading 1s dropped)."""
    if spec is None:
        return [0] * len(trailing)
    shape = list(spec["shape"])
    while len(shape) > len(trailing) and shape[0] == 1:
        shape.pop(0)
    if len(shape) > len(trailing):
        return None
    padded = [1] * (len(trailing) - len(shape)) + shape
    if any(s not in (1, t) for s, t in zip(padded, trailing, strict=True)):
        return None
    return list(broadcast_strides(shape, trailing))


def _supports_layer_norm(site: dict[str, Any]) -> bool:
    x = site["inputs"][0]
    axis = site["kwargs"].get("axis", -1) % len(x["shape"])
    trailing = tuple(x["shape"][axis:])
    bias = site["inputs"][2] if len(site["inputs"]) > 2 else None
    return (_float32(site) and _trailing_strides(site["inputs"][1], trailing) is not None
            and _trailing_strides(bias, trailing) is not None)


@native_kernel("layer_norm", supports=_supports_layer_norm, run_time_shapes=True)
def emit_layer_norm(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX LayerNormalization over dims axis.. (host_kernels.layer_norm):
    (x - mean) * (1 / sqrt(var + epsilon)) * scale + bias; out may be x."""
    k = KernelBuilder(module, symbol, site)
    x, scale, out = k.input(0), k.input(1), k.outputs[0]
    bias = k.inputs[2] if len(k.inputs) > 2 else None
    assert bias is None or isinstance(bias, Operand)
    b = k.b
    axis = k.kwargs.get("axis", -1) % len(x.shape)
    trailing = x.shape[axis:]
    width = math.prod(trailing)
    scale_strides = _trailing_strides({"shape": list(scale.shape)}, trailing)
    bias_strides = _trailing_strides(None if bias is None else {"shape": list(bias.shape)}, trailing)
    assert scale_strides is not None and bias_strides is not None
    epsilon = ir.Constant(F32, float(k.kwargs.get("epsilon", 1e-5)))

    def mean_of(values: Any) -> ir.Value:
        total = k.reduce(width, ir.Constant(F64, 0.0), lambda j, acc: b.fadd(acc, b.fpext(values(j), F64)))
        return b.fptrunc(b.fdiv(total, ir.Constant(F64, float(width))), F32)

    def row(r: ir.Value) -> None:
        base = b.mul(r, k.i64(width))
        mean = mean_of(lambda j: k.load(x, b.add(base, j)))

        def centre(j: ir.Value) -> None:
            k.store(b.fsub(k.load(x, b.add(base, j)), mean), out, b.add(base, j))

        k.loop(width, centre)
        variance = mean_of(lambda j: (lambda v: b.fmul(v, v))(k.load(out, b.add(base, j))))
        inverse = b.fdiv(ir.Constant(F32, 1.0), k.math.sqrt(b.fadd(variance, epsilon)))
        row_strides = row_major_strides(trailing)

        def write(offsets: list[ir.Value]) -> None:
            at = b.add(base, offsets[0])
            y = b.fmul(b.fmul(k.load(out, at), inverse), k.load(scale, offsets[1]))
            if bias is not None:
                y = b.fadd(y, k.load(bias, offsets[2]))
            k.store(y, out, at)

        k.strided_loop_nest(trailing, [row_strides, scale_strides, bias_strides], write)

    k.loop(math.prod(x.shape[:axis]), row, parallel=True, work=x.size)
    k.finish()


def _supports_lrn(site: dict[str, Any]) -> bool:
    return _float32(site) and len(site["inputs"][0]["shape"]) >= 2


@native_kernel("lrn", supports=_supports_lrn)
def emit_lrn(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX LRN across channels (host_kernels.lrn): x / (bias + alpha/size *
    window sum of x^2)^beta, summed in the numpy kernel's order."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    b, m = k.b, k.math
    kw = k.kwargs
    size = int(kw["size"])
    before = (size - 1) // 2
    batch, channels = x.shape[0], x.shape[1]
    inner = math.prod(x.shape[2:])
    scale = ir.Constant(F32, float(kw.get("alpha", 1e-4)) / size)
    bias = ir.Constant(F32, float(kw.get("bias", 1.0)))
    zero = ir.Constant(F32, 0.0)

    def per_image(n: ir.Value) -> None:
        def per_channel(c: ir.Value) -> None:
            def per_element(i: ir.Value) -> None:
                acc: ir.Value | None = None
                for offset in range(size):
                    source = b.add(c, k.i64(offset - before))
                    clamped, inside = k.clamp_index(source, channels)
                    at = b.add(b.mul(b.add(b.mul(n, k.i64(channels)), clamped), k.i64(inner)), i)
                    v = k.load(x, at)
                    square = b.select(inside, b.fmul(v, v), zero)
                    acc = square if acc is None else b.fadd(acc, square)
                assert acc is not None
                here = b.add(b.mul(b.add(b.mul(n, k.i64(channels)), c), k.i64(inner)), i)
                denominator = _power(k, b.fadd(b.fmul(acc, scale), bias), -float(kw.get("beta", 0.75)))
                k.store(b.fmul(denominator, k.load(x, here)), out, here)

            k.loop(inner, per_element)

        # each channel's outputs read only x: the channels (of a single
        # image) or the images may run on threads
        k.loop(channels, per_channel, parallel=True, work=channels * inner)

    k.loop(batch, per_image, parallel=True, work=batch * channels * inner)
    k.finish()


def _power(k: KernelBuilder, base: ir.Value, exponent: float) -> ir.Value:
    """base ** exponent in float32: libm's powf, except for the exponents
    LRN uses (-0.75, -0.5, -1), built from sqrt and a division, which
    vectorise (within 2 ulp of powf)."""
    b, m = k.b, k.math
    one = ir.Constant(F32, 1.0)
    if exponent == -0.75:
        root = m.sqrt(base)
        return b.fdiv(one, b.fmul(root, m.sqrt(root)))
    if exponent == -0.5:
        return b.fdiv(one, m.sqrt(base))
    if exponent == -1.0:
        return b.fdiv(one, base)
    return m.pow(base, ir.Constant(F32, exponent))

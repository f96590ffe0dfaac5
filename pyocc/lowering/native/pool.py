"""Native pooling kernels: max_pool, average_pool, global_average_pool,
global_max_pool (float32, NC + spatial dims).

Windows are unrolled at compile time (their taps are static) inside a loop
over the last output dim, so that loop is the one LLVM vectorises. A tap
outside the data reads a clamped, in-bounds address and is replaced by the
padding value (the lowest finite float for max, 0 for sums), so no branch
sits in the loop. average_pool sums the window axis by axis, first axis
innermost, and divides by the product of per-axis counts, exactly as the
numpy kernel does, so both round the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import llvmlite.ir as ir
import numpy as np

from pyocc.lowering.native.loops import F32, F64, KernelBuilder, Operand, all_dtypes_in
from pyocc.lowering.native.registry import native_kernel

#: windows with more taps than this are not unrolled (they stay numpy)
MAX_UNROLLED_TAPS = 256
LOWEST_FLOAT32 = float(np.finfo(np.float32).min)


def _float32(site: dict[str, Any]) -> bool:
    return all_dtypes_in(site, ("float32",)) and len(site["inputs"][0]["shape"]) >= 3


def _window(site: dict[str, Any]) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """(kernel, strides, dilations, pads at the start, pads at the end) per spatial axis."""
    kw = site["kwargs"]
    kernel = [int(k) for k in kw["kernel_shape"]]
    rank = len(kernel)
    strides = [int(s) for s in kw.get("strides") or [1] * rank]
    dilations = [int(d) for d in kw.get("dilations") or [1] * rank]
    pads = [int(p) for p in kw.get("pads") or [0] * (2 * rank)]
    return kernel, strides, dilations, pads[:rank], pads[rank:]


def _supports_window(site: dict[str, Any]) -> bool:
    if not _float32(site):
        return False
    kernel, *_ = _window(site)
    return len(kernel) == len(site["inputs"][0]["shape"]) - 2 and math.prod(kernel) <= MAX_UNROLLED_TAPS


def _pool(k: KernelBuilder, tap_value: Callable[[Operand, list[ir.Value], list[ir.Value]], ir.Value],
          ) -> None:
    """For each output element: store tap_value(x, out spatial indices, base
    offset) at it; loops over N*C, then the spatial dims."""
    x, out = k.input(0), k.outputs[0]
    channels = x.shape[0] * x.shape[1]
    in_plane, out_plane = math.prod(x.shape[2:]), math.prod(out.shape[2:])

    def plane(nc: ir.Value) -> None:
        in_base = k.b.mul(nc, k.i64(in_plane))
        out_base = k.b.mul(nc, k.i64(out_plane))

        def element(indices: list[ir.Value]) -> None:
            value = tap_value(x, indices, [in_base])
            k.store(value, out, k.offset(indices, list(out.strides[2:]), out_base))

        k.loop_nest(list(out.shape[2:]), element)

    k.loop(channels, plane)
    k.finish()


def _tap_index(k: KernelBuilder, o: ir.Value, tap: int, stride: int, dilation: int, pad: int) -> ir.Value:
    """o * stride - pad + tap * dilation: the input index a tap reads."""
    return k.b.add(k.b.mul(o, k.i64(stride)), k.i64(tap * dilation - pad))


@native_kernel("max_pool", supports=_supports_window)
def emit_max_pool(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX MaxPool (host_kernels.max_pool): padding is the lowest finite float."""
    k = KernelBuilder(module, symbol, site)
    kernel, strides, dilations, pads_begin, _ = _window(site)
    spatial = k.input(0).shape[2:]
    lowest = ir.Constant(F32, LOWEST_FLOAT32)

    def window_max(x: Operand, indices: list[ir.Value], base: list[ir.Value]) -> ir.Value:
        b = k.b
        positions = []
        for axis, o in enumerate(indices):
            positions.append([k.clamp_index(_tap_index(k, o, t, strides[axis], dilations[axis], pads_begin[axis]),
                                            spatial[axis]) for t in range(kernel[axis])])
        acc: ir.Value = lowest
        for tap in np.ndindex(*kernel):
            chosen = [positions[axis][t] for axis, t in enumerate(tap)]
            inside = chosen[0][1]
            for _, flag in chosen[1:]:
                inside = b.and_(inside, flag)
            value = k.load(x, k.offset([c for c, _ in chosen], list(x.strides[2:]), base[0]))
            value = b.select(inside, value, lowest)
            acc = b.select(b.fcmp_unordered(">", value, acc), value, acc) if acc is not lowest else value
        return acc

    _pool(k, window_max)


def _supports_average(site: dict[str, Any]) -> bool:
    return _supports_window(site) and not any(d != 1 for d in site["kwargs"].get("dilations") or [])


@native_kernel("average_pool", supports=_supports_average)
def emit_average_pool(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX AveragePool (host_kernels.average_pool): zero-padded window sums
    over the window's count (count_include_pad: clipped to the padded extent)."""
    k = KernelBuilder(module, symbol, site)
    kernel, strides, _, pads_begin, pads_end = _window(site)
    include_pad = bool(site["kwargs"].get("count_include_pad", 0))
    spatial = k.input(0).shape[2:]
    zero = ir.Constant(F32, 0.0)

    def count(o: ir.Value, axis: int) -> ir.Value:
        b = k.b
        start = b.sub(b.mul(o, k.i64(strides[axis])), k.i64(pads_begin[axis]))
        end = b.add(start, k.i64(kernel[axis]))
        limit = k.i64(spatial[axis] + pads_end[axis])
        end = b.select(b.icmp_signed("<", end, limit), end, limit)
        if include_pad:
            return b.sub(end, start)
        size = k.i64(spatial[axis])
        end = b.select(b.icmp_signed("<", end, size), end, size)
        start = b.select(b.icmp_signed(">", start, k.i64(0)), start, k.i64(0))
        return b.sub(end, start)

    def window_mean(x: Operand, indices: list[ir.Value], base: list[ir.Value]) -> ir.Value:
        b = k.b
        positions = [[k.clamp_index(_tap_index(k, o, t, strides[axis], 1, pads_begin[axis]), spatial[axis])
                      for t in range(kernel[axis])] for axis, o in enumerate(indices)]

        def axis_sum(axis: int, fixed: dict[int, int]) -> ir.Value:
            # the numpy kernel sums along the first spatial axis first, then
            # combines those sums along the next: the same order here
            if axis < 0:
                chosen = [positions[a][fixed[a]] for a in range(len(kernel))]
                inside = chosen[0][1]
                for _, flag in chosen[1:]:
                    inside = b.and_(inside, flag)
                value = k.load(x, k.offset([c for c, _ in chosen], list(x.strides[2:]), base[0]))
                return b.select(inside, value, zero)
            acc = None
            for t in range(kernel[axis]):
                term = axis_sum(axis - 1, {**fixed, axis: t})
                acc = term if acc is None else b.fadd(acc, term)
            assert acc is not None
            return acc

        total = axis_sum(len(kernel) - 1, {})
        divisor = count(indices[0], 0)
        for axis in range(1, len(kernel)):
            divisor = b.mul(divisor, count(indices[axis], axis))
        return b.fdiv(total, b.sitofp(divisor, F32))

    _pool(k, window_mean)


def _global(k: KernelBuilder, combine: Callable[[ir.Value, ir.Value], ir.Value], initial: ir.Value,
            finish: Callable[[ir.Value, int], ir.Value]) -> None:
    x, out = k.input(0), k.outputs[0]
    plane = math.prod(x.shape[2:])

    def channel(nc: ir.Value) -> None:
        base = k.b.mul(nc, k.i64(plane))
        total = k.reduce(plane, initial, lambda i, acc: combine(acc, k.load(x, k.b.add(base, i))))
        k.store(finish(total, plane), out, nc)

    k.loop(x.shape[0] * x.shape[1], channel)
    k.finish()


@native_kernel("global_average_pool", supports=_float32)
def emit_global_average_pool(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX GlobalAveragePool: the mean of each channel's plane, summed in float64."""
    k = KernelBuilder(module, symbol, site)
    b = k.b
    _global(k, lambda acc, v: b.fadd(acc, b.fpext(v, F64)), ir.Constant(F64, 0.0),
            lambda total, n: b.fptrunc(b.fdiv(total, ir.Constant(F64, float(n))), F32))


@native_kernel("global_max_pool", supports=_float32)
def emit_global_max_pool(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX GlobalMaxPool: the max of each channel's plane."""
    k = KernelBuilder(module, symbol, site)
    b = k.b
    _global(k, lambda acc, v: b.select(b.fcmp_unordered(">", v, acc), v, acc),
            ir.Constant(F32, float("-inf")), lambda total, n: total)

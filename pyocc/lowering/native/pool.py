"""Native pooling kernels: max_pool, average_pool, global_average_pool,
global_max_pool (float32, NC + spatial dims).

Windows are unrolled at compile time (their taps are static) inside a loop
over the last output dim, so that loop is the one LLVM vectorises. Each
output dim's loop is split into its interior, where every tap reads inside
the data, and the edges before and after it. At the edges a tap outside
the data reads a clamped, in-bounds address and is replaced by the padding
value (the lowest finite float for max, 0 for sums), so no branch sits in
the loop; in the interior the taps are plain loads and an average divides
by the constant window size. average_pool sums the window axis by axis, first axis
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


#: tap_value(x, out spatial indices, input plane offset, taps) -> the output value
TapValue = Callable[[Operand, list[ir.Value], ir.Value, "Taps"], ir.Value]


class Taps:
    """Where each tap of a window reads, per spatial axis: (index, flag)
    pairs, the index clamped into the data and the flag saying whether the
    tap was inside it; None flags along an axis known to be inside."""

    def __init__(self, k: KernelBuilder, spatial: tuple[int, ...], kernel: list[int], strides: list[int],
                 dilations: list[int], pads_begin: list[int]):
        """The window geometry of one pooling site."""
        self.k, self.spatial, self.kernel = k, spatial, kernel
        self.strides, self.dilations, self.pads_begin = strides, dilations, pads_begin

    def interior(self, axis: int, out_size: int) -> tuple[int, int]:
        """[lo, hi): the outputs along `axis` whose every tap is inside the data."""
        stride, pad, size = self.strides[axis], self.pads_begin[axis], self.spatial[axis]
        reach = (self.kernel[axis] - 1) * self.dilations[axis]
        hi = max(0, min(out_size, (size - 1 + pad - reach) // stride + 1))
        lo = min(-(-pad // stride), hi)
        return lo, hi

    def positions(self, indices: list[ir.Value], inside: list[bool]) -> list[list[tuple[ir.Value, ir.Value | None]]]:
        """Per axis and tap: (input index, in-data flag or None); `inside`
        says per axis whether every tap of these outputs is in the data."""
        k = self.k
        result = []
        for axis, o in enumerate(indices):
            taps = []
            for t in range(self.kernel[axis]):
                index = _tap_index(k, o, t, self.strides[axis], self.dilations[axis], self.pads_begin[axis])
                taps.append((index, None) if inside[axis] else k.clamp_index(index, self.spatial[axis]))
            result.append(taps)
        return result

    def read(self, x: Operand, base: ir.Value, chosen: list[tuple[ir.Value, ir.Value | None]],
             padding: ir.Value) -> ir.Value:
        """x at one tap (its per-axis positions), or `padding` outside the data."""
        b = self.k.b
        value = self.k.load(x, self.k.offset([index for index, _ in chosen], list(x.strides[2:]), base))
        inside = None
        for _, flag in chosen:
            if flag is not None:
                inside = flag if inside is None else b.and_(inside, flag)
        return value if inside is None else b.select(inside, value, padding)


def _pool(k: KernelBuilder, taps: Taps, tap_value: Callable[..., ir.Value]) -> None:
    """For each output element: store tap_value(x, out spatial indices,
    input plane offset, positions) at it. Loops over N*C and the spatial
    dims; each spatial dim's loop is split into its interior, where no tap
    leaves the data along any dim, with no bounds checks (no clamps, no
    selects: the last dim's loop vectorises), and its edges, which check.
    Where a dim has edges both before and after its interior, both run in
    one loop after it: one unrolled window body for the two, not one each
    (a 2-D pool has 4 bodies, not 9: most of its compile time)."""
    x, out = k.input(0), k.outputs[0]
    channels = x.shape[0] * x.shape[1]
    in_plane, out_plane = math.prod(x.shape[2:]), math.prod(out.shape[2:])
    spatial = list(out.shape[2:])
    # per axis, runs of outputs (first, stop, inside, skipped): [first, stop) but the `skipped` ones;
    # a dim with edges both before and after its interior runs both in one loop after it
    segments = []
    for axis, size in enumerate(spatial):
        lo, hi = taps.interior(axis, size)
        if lo > 0 and size > hi:
            runs = [(lo, hi, True, None)] if hi > lo else []
            segments.append([*runs, (0, size, False, (lo, hi))])
        else:
            segments.append([(first, stop, inside, None) for first, stop, inside in
                             ((0, lo, False), (lo, hi, True), (hi, size, False)) if stop > first])

    def plane(nc: ir.Value) -> None:
        in_base = k.b.mul(nc, k.i64(in_plane))
        out_base = k.b.mul(nc, k.i64(out_plane))

        def level(axis: int, indices: list[ir.Value], inside: list[bool]) -> None:
            if axis == len(spatial):
                value = tap_value(x, indices, in_base, taps.positions(indices, inside))
                k.store(value, out, k.offset(indices, list(out.strides[2:]), out_base))
                return
            for first, stop, within, skipped in segments[axis]:

                def run(o: ir.Value, first: int = first, within: bool = within,
                        skipped: tuple[int, int] | None = skipped) -> None:
                    if skipped is None:
                        index = k.b.add(o, k.i64(first))
                    else:  # both edges: the ones before the interior, then, past it, the ones after
                        lo, hi = skipped
                        index = k.b.add(o, k.b.select(k.b.icmp_signed("<", o, k.i64(lo)), k.i64(0), k.i64(hi - lo)))
                    level(axis + 1, [*indices, index], [*inside, within])

                gap = 0 if skipped is None else skipped[1] - skipped[0]
                k.loop(stop - first - gap, run)

        level(0, [], [])

    # each N*C plane of out is written from its own plane of x
    k.loop(channels, plane, parallel=True, work=channels * max(in_plane, out_plane))
    k.finish()


def _tap_index(k: KernelBuilder, o: ir.Value, tap: int, stride: int, dilation: int, pad: int) -> ir.Value:
    """o * stride - pad + tap * dilation: the input index a tap reads."""
    return k.b.add(k.b.mul(o, k.i64(stride)), k.i64(tap * dilation - pad))


@native_kernel("max_pool", supports=_supports_window, run_time_shapes=True)
def emit_max_pool(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX MaxPool (host_kernels.max_pool): padding is the lowest finite float."""
    k = KernelBuilder(module, symbol, site)
    kernel, strides, dilations, pads_begin, _ = _window(site)
    taps = Taps(k, k.input(0).shape[2:], kernel, strides, dilations, pads_begin)
    lowest = ir.Constant(F32, LOWEST_FLOAT32)

    def window_max(x: Operand, indices: list[ir.Value], base: ir.Value,
                   positions: list[list[tuple[ir.Value, ir.Value | None]]]) -> ir.Value:
        b = k.b
        acc: ir.Value | None = None
        for tap in np.ndindex(*kernel):
            value = taps.read(x, base, [positions[axis][t] for axis, t in enumerate(tap)], lowest)
            acc = value if acc is None else b.select(b.fcmp_unordered(">", value, acc), value, acc)
        assert acc is not None
        return acc

    _pool(k, taps, window_max)


def _supports_average(site: dict[str, Any]) -> bool:
    return _supports_window(site) and not any(d != 1 for d in site["kwargs"].get("dilations") or [])


@native_kernel("average_pool", supports=_supports_average, run_time_shapes=True)
def emit_average_pool(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX AveragePool (host_kernels.average_pool): zero-padded window sums
    over the window's count (count_include_pad: clipped to the padded extent)."""
    k = KernelBuilder(module, symbol, site)
    kernel, strides, _, pads_begin, pads_end = _window(site)
    include_pad = bool(site["kwargs"].get("count_include_pad", 0))
    spatial = k.input(0).shape[2:]
    taps = Taps(k, spatial, kernel, strides, [1] * len(kernel), pads_begin)
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

    def window_mean(x: Operand, indices: list[ir.Value], base: ir.Value,
                    positions: list[list[tuple[ir.Value, ir.Value | None]]]) -> ir.Value:
        b = k.b

        def axis_sum(axis: int, fixed: dict[int, int]) -> ir.Value:
            # the numpy kernel sums along the first spatial axis first, then
            # combines those sums along the next: the same order here
            if axis < 0:
                return taps.read(x, base, [positions[a][fixed[a]] for a in range(len(kernel))], zero)
            acc = None
            for t in range(kernel[axis]):
                term = axis_sum(axis - 1, {**fixed, axis: t})
                acc = term if acc is None else b.fadd(acc, term)
            assert acc is not None
            return acc

        total = axis_sum(len(kernel) - 1, {})
        if all(flag is None for axis in positions for _, flag in axis):
            # every tap inside the data: the window's count, whether padding counts or not
            return b.fdiv(total, ir.Constant(F32, float(math.prod(kernel))))
        divisor = count(indices[0], 0)
        for axis in range(1, len(kernel)):
            divisor = b.mul(divisor, count(indices[axis], axis))
        return b.fdiv(total, b.sitofp(divisor, F32))

    _pool(k, taps, window_mean)


def _global(k: KernelBuilder, combine: Callable[[ir.Value, ir.Value], ir.Value], initial: ir.Value,
            finish: Callable[[ir.Value, int], ir.Value]) -> None:
    x, out = k.input(0), k.outputs[0]
    plane = math.prod(x.shape[2:])

    def channel(nc: ir.Value) -> None:
        base = k.b.mul(nc, k.i64(plane))
        total = k.reduce(plane, initial, lambda i, acc: combine(acc, k.load(x, k.b.add(base, i))))
        k.store(finish(total, plane), out, nc)

    k.loop(x.shape[0] * x.shape[1], channel, parallel=True, work=x.size)
    k.finish()


@native_kernel("global_average_pool", supports=_float32, run_time_shapes=True)
def emit_global_average_pool(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX GlobalAveragePool: the mean of each channel's plane, summed in float64."""
    k = KernelBuilder(module, symbol, site)
    b = k.b
    _global(k, lambda acc, v: b.fadd(acc, b.fpext(v, F64)), ir.Constant(F64, 0.0),
            lambda total, n: b.fptrunc(b.fdiv(total, ir.Constant(F64, float(n))), F32))


@native_kernel("global_max_pool", supports=_float32, run_time_shapes=True)
def emit_global_max_pool(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX GlobalMaxPool: the max of each channel's plane."""
    k = KernelBuilder(module, symbol, site)
    b = k.b
    _global(k, lambda acc, v: b.select(b.fcmp_unordered(">", v, acc), v, acc),
            ir.Constant(F32, float("-inf")), lambda total, n: total)

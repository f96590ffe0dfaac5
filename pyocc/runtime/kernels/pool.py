"""Pooling host kernels: max, average and their global forms.

``out`` must not overlap the input. Output sizes come from ``out``'s shape, so
ceil_mode only changes how the last, partial window at each edge is treated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pyocc.runtime.kernels._window import Window

__all__ = ["average_pool", "global_average_pool", "global_max_pool", "max_pool"]


def _lowest(dtype: np.dtype) -> float | int:
    """Padding value for max pooling: the lowest finite value of ``dtype``.

    Not -inf: onnxruntime starts each window's max at the lowest finite value,
    which is what a window lying entirely in padding outputs (possible with
    dilation).
    """
    info = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
    return info.min


def max_pool(
    x: np.ndarray,
    *,
    out: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    ceil_mode: int = 0,
) -> None:
    """ONNX MaxPool (Y output only); padding holds the lowest finite value,
    so it only wins in windows with no data at all."""
    del ceil_mode  # encoded in out.shape; padding with -inf covers partial windows
    window = Window.from_onnx(kernel_shape, strides, pads, dilations)
    out_spatial = out.shape[2:]
    padded = window.pad_input(x, out_spatial, fill=_lowest(x.dtype))
    _reduce_separably(padded, window, np.maximum, out)


def _reduce_separably(padded: np.ndarray, window: Window, combine: np.ufunc, out: np.ndarray) -> None:
    """Combine (max or add) every window of `padded` into `out`, one spatial
    axis at a time.

    A k x k window is k taps along H, then k taps along W of that result:
    2k array sweeps instead of k*k, and the first sweep already shrinks H
    by the stride. Each sweep combines strided slices along one axis, so
    numpy's inner loop still runs over whole rows. (bench/host_latency.py:
    a 3x3 stride-2 max pool went from 7x onnxruntime's time to about 2.5x.)
    For max this is exact; for a sum it changes the order of the additions.
    """
    current = padded
    rank = out.ndim - 2
    for axis in range(rank):
        dim = 2 + axis
        size = out.shape[dim]
        step, dilation = window.strides[axis], window.dilations[axis]
        shape = current.shape[:dim] + (size,) + current.shape[dim + 1:]
        target = out if axis == rank - 1 else np.empty(shape, dtype=out.dtype)
        prefix = (slice(None),) * dim
        taps = [current[prefix + (slice(t * dilation, t * dilation + (size - 1) * step + 1, step),)]
                for t in range(window.kernel[axis])]
        if len(taps) == 1:
            np.copyto(target, taps[0])
        else:
            combine(taps[0], taps[1], out=target)
            for tap in taps[2:]:
                combine(target, tap, out=target)
        current = target


def _window_counts(
    size: int, out_size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, include_pad: bool
) -> np.ndarray:
    """Per output position along one axis, how many elements its window averages.

    Like onnxruntime: with count_include_pad the window is clipped to the
    padded extent [-pad_begin, size + pad_end), otherwise to the data [0, size).
    Positions added by ceil_mode beyond the padded extent never count.
    """
    start = np.arange(out_size) * stride - pad_begin
    end = np.minimum(start + kernel, size + pad_end)
    if include_pad:
        return end - start
    return np.minimum(end, size) - np.maximum(start, 0)


def average_pool(
    x: np.ndarray,
    *,
    out: np.ndarray,
    kernel_shape: Sequence[int],
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    ceil_mode: int = 0,
    count_include_pad: int = 0,
) -> None:
    """ONNX AveragePool: window sums (zero padding) divided by window counts."""
    del ceil_mode  # encoded in out.shape
    window = Window.from_onnx(kernel_shape, strides, pads, None)
    out_spatial = out.shape[2:]
    padded = window.pad_input(x, out_spatial, fill=0.0)
    _reduce_separably(padded, window, np.add, out)
    # The divisor is separable: a product of one count vector per axis.
    divisor = np.ones((), dtype=np.float64)
    for axis, (size, out_size) in enumerate(zip(x.shape[2:], out_spatial)):
        counts = _window_counts(
            size,
            out_size,
            window.kernel[axis],
            window.strides[axis],
            window.pads_begin[axis],
            window.pads_end[axis],
            bool(count_include_pad),
        )
        divisor = np.multiply.outer(divisor, counts)
    np.divide(out, divisor.astype(out.dtype), out=out)


def global_average_pool(x: np.ndarray, *, out: np.ndarray) -> None:
    """ONNX GlobalAveragePool: mean over all spatial dims, kept as size-1 dims."""
    np.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True, out=out)


def global_max_pool(x: np.ndarray, *, out: np.ndarray) -> None:
    """ONNX GlobalMaxPool: max over all spatial dims, kept as size-1 dims."""
    np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True, out=out)

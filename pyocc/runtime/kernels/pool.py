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
    for index, tap in enumerate(window.taps()):
        source = padded[(slice(None), slice(None)) + window.tap_slices(tap, out_spatial)]
        if index == 0:
            np.copyto(out, source)
        else:
            np.maximum(out, source, out=out)


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
    for index, tap in enumerate(window.taps()):
        source = padded[(slice(None), slice(None)) + window.tap_slices(tap, out_spatial)]
        if index == 0:
            np.copyto(out, source)
        else:
            np.add(out, source, out=out)
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

"""ONNX Resize host kernel: nearest, N-linear and cubic, one axis at a time.

All three modes are separable: resizing a tensor is resizing each axis in
turn with a 1-D rule that maps every output index to a few input indices and
weights. Coordinates are computed in float32 in onnxruntime's order of
operations, so rounding decisions (nearest) match it bit for bit.
``out`` must not overlap the input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["resize"]

_F32 = np.float32


def _original_coordinates(
    out_size: int,
    in_size: int,
    scale: np.float32,
    mode: str,
    roi_start: float,
    roi_end: float,
) -> np.ndarray:
    """Input coordinate of every output index along one axis (ONNX
    coordinate_transformation_mode), as float32."""
    x = np.arange(out_size, dtype=_F32)
    half = _F32(0.5)
    if mode == "half_pixel":
        return (x + half) / scale - half
    if mode == "pytorch_half_pixel":
        return (x + half) / scale - half if out_size > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + half) / scale
    if mode == "align_corners":
        if out_size == 1:
            return np.zeros_like(x)
        return x * _F32(in_size - 1) / _F32(out_size - 1)
    if mode == "half_pixel_symmetric":
        adjustment = _F32(out_size) / (scale * _F32(in_size))
        offset = _F32(in_size) / _F32(2) * (_F32(1) - adjustment)
        return offset + (x + half) / scale - half
    if mode == "tf_crop_and_resize":
        start, end = _F32(roi_start), _F32(roi_end)
        if out_size == 1:
            return np.full_like(x, _F32(0.5) * (start + end) * _F32(in_size - 1))
        return start * _F32(in_size - 1) + x * (end - start) * _F32(in_size - 1) / _F32(out_size - 1)
    raise ValueError(f"resize: unknown coordinate_transformation_mode {mode!r}")


def _nearest_taps(coordinates: np.ndarray, in_size: int, nearest_mode: str) -> tuple[np.ndarray, np.ndarray]:
    """One tap per output: the rounded coordinate, clamped into the input."""
    if nearest_mode == "round_prefer_floor":
        index = np.ceil(coordinates - _F32(0.5))  # halves go down, the rest round
    elif nearest_mode == "round_prefer_ceil":
        index = np.floor(coordinates + _F32(0.5))
    elif nearest_mode == "floor":
        index = np.floor(coordinates)
    elif nearest_mode == "ceil":
        index = np.ceil(coordinates)
    else:
        raise ValueError(f"resize: unknown nearest_mode {nearest_mode!r}")
    index = np.clip(index, 0, in_size - 1).astype(np.int64)
    return index[:, None], np.ones((len(index), 1), dtype=_F32)


def _linear_taps(coordinates: np.ndarray, in_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Two taps per output; like onnxruntime the coordinate is clamped into
    [0, in_size - 1] first, so edges replicate."""
    clamped = np.clip(coordinates, _F32(0), _F32(in_size - 1))
    lower = np.minimum(clamped.astype(np.int64), in_size - 1)
    upper = np.minimum(lower + 1, in_size - 1)
    upper_weight = clamped - lower.astype(_F32)
    weights = np.stack([_F32(1) - upper_weight, upper_weight], axis=1)
    return np.stack([lower, upper], axis=1), weights


def _cubic_taps(
    coordinates: np.ndarray, in_size: int, coeff_a: float, exclude_outside: int
) -> tuple[np.ndarray, np.ndarray]:
    """Four taps per output (Keys' cubic convolution with parameter ``a``);
    out-of-range taps replicate the edge, or are dropped and the remaining
    weights renormalised when ``exclude_outside`` is set."""
    a = np.float64(coeff_a)
    base = np.floor(coordinates.astype(np.float64))
    t = coordinates.astype(np.float64) - base
    distances = np.stack([t + 1, t, 1 - t, 2 - t], axis=1)
    near = ((a + 2) * distances - (a + 3)) * distances * distances + 1  # |d| <= 1
    far = ((a * distances - 5 * a) * distances + 8 * a) * distances - 4 * a  # 1 < |d| < 2
    weights = np.where(distances <= 1, near, far)
    index = base.astype(np.int64)[:, None] + np.arange(-1, 3)
    if exclude_outside:
        inside = (index >= 0) & (index < in_size)
        weights = np.where(inside, weights, 0.0)
        weights /= weights.sum(axis=1, keepdims=True)
    return np.clip(index, 0, in_size - 1), weights.astype(_F32)


def _resize_axis(data: np.ndarray, axis: int, index: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Combine taps along ``axis``: sum_t take(data, index[:, t]) * weights[:, t]."""
    shape = [1] * data.ndim
    shape[axis] = -1
    if index.shape[1] == 1:  # nearest: a pure gather, exact copies
        return np.take(data, index[:, 0], axis=axis)
    result = np.take(data, index[:, 0], axis=axis) * weights[:, 0].reshape(shape)
    for tap in range(1, index.shape[1]):
        result += np.take(data, index[:, tap], axis=axis) * weights[:, tap].reshape(shape)
    return result


def resize(
    x: np.ndarray,
    *,
    out: np.ndarray,
    mode: str = "nearest",
    coordinate_transformation_mode: str = "half_pixel",
    nearest_mode: str = "round_prefer_floor",
    cubic_coeff_a: float = -0.75,
    exclude_outside: int = 0,
    scales: Sequence[float] | None = None,
    roi: Sequence[float] | None = None,
    extrapolation_value: float = 0.0,
) -> None:
    """ONNX Resize (opset >= 11) to out's shape.

    ``scales`` are the Resize scales when the model gave them (they enter
    the coordinate formulas); otherwise each axis' scale is out/in, as when
    the model gave sizes. ``roi`` ([starts..., ends...], normalised) is only
    used by tf_crop_and_resize, whose outside points get ``extrapolation_value``.
    Modes: nearest, linear (N-linear), cubic.
    """
    rank = x.ndim
    roi = list(roi) if roi else [0.0] * rank + [1.0] * rank
    ctm = coordinate_transformation_mode
    result = x
    outside = np.zeros(out.shape, dtype=bool) if ctm == "tf_crop_and_resize" else None
    for axis in range(rank):
        in_size, out_size = x.shape[axis], out.shape[axis]
        scale = _F32(scales[axis]) if scales else _F32(out_size) / _F32(in_size)
        if in_size == out_size and scale == 1 and outside is None:
            continue  # identity along this axis in every mode
        coordinates = _original_coordinates(out_size, in_size, scale, ctm, roi[axis], roi[rank + axis])
        if mode == "nearest":
            index, weights = _nearest_taps(coordinates, in_size, nearest_mode)
        elif mode == "linear":
            index, weights = _linear_taps(coordinates, in_size)
        elif mode == "cubic":
            index, weights = _cubic_taps(coordinates, in_size, cubic_coeff_a, exclude_outside)
        else:
            raise ValueError(f"resize: unknown mode {mode!r}; expected nearest, linear or cubic")
        result = _resize_axis(result, axis, index, weights)
        if outside is not None:
            shape = [1] * rank
            shape[axis] = -1
            outside |= ((coordinates < 0) | (coordinates > in_size - 1)).reshape(shape)
    np.copyto(out, result, casting="unsafe")
    if outside is not None:
        out[outside] = extrapolation_value

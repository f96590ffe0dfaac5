"""Normalisation host kernels: per-channel affine (folded BatchNormalization),
batch_norm, softmax, attention_softmax (fused scaled, masked scores),
log_softmax, layer_norm and LRN.

channel_affine, batch_norm, softmax, log_softmax and layer_norm may write in
place (``out`` is ``x``): each reads x only in its first step, which writes
out. lrn assumes ``out`` does not overlap ``x``.
"""

from __future__ import annotations

import numpy as np

from pyocc.runtime.kernels.elementwise import apply_activation

__all__ = ["attention_softmax", "batch_norm", "channel_affine", "layer_norm", "log_softmax", "lrn", "softmax"]


def _per_channel(vector: np.ndarray, ndim: int, axis: int, dtype: np.dtype) -> np.ndarray:
    """Reshape a length-C vector to broadcast along ``axis`` of an ndim-D tensor."""
    axis = axis % ndim
    return np.asarray(vector, dtype=dtype).reshape((-1,) + (1,) * (ndim - axis - 1))


def channel_affine(
    x: np.ndarray,
    scale: np.ndarray,
    shift: np.ndarray,
    *,
    out: np.ndarray,
    axis: int = 1,
    activation: str | None = None,
    alpha: float | None = None,
    beta: float | None = None,
) -> None:
    """``out = x * scale[c] + shift[c]`` along ``axis``, then an optional
    activation; ``out`` may be ``x`` (both steps are elementwise)."""
    np.multiply(x, _per_channel(scale, x.ndim, axis, x.dtype), out=out)
    np.add(out, _per_channel(shift, x.ndim, axis, x.dtype), out=out)
    apply_activation(out, activation, alpha, beta)


def batch_norm(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    *,
    out: np.ndarray,
    epsilon: float = 1e-5,
) -> None:
    """ONNX BatchNormalization (inference): folds the statistics into one
    per-channel scale and shift (in float64), then runs channel_affine; so
    ``out`` may be ``x`` here too."""
    factor = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + epsilon)
    shift = bias.astype(np.float64) - mean.astype(np.float64) * factor
    channel_affine(x, factor, shift, out=out, axis=1)


def softmax(x: np.ndarray, *, out: np.ndarray, axis: int = -1) -> None:
    """ONNX Softmax (opset >= 13: along one axis), shifted by the max for
    stability; ``out`` may be ``x``. A row that is all -inf (every key
    masked) gives NaN, as in onnxruntime; exporters guard it with IsNaN."""
    with np.errstate(invalid="ignore"):
        np.subtract(x, np.max(x, axis=axis, keepdims=True), out=out)
        np.exp(out, out=out)
        out /= np.sum(out, axis=axis, keepdims=True)


def attention_softmax(
    a: np.ndarray,
    b: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    out: np.ndarray,
    scale: float = 1.0,
) -> None:
    """Attention scores ``softmax(scale * (a @ b) + mask)`` along the last
    axis, in one call: the product, the scaled and the masked scores are
    never separate tensors. ``out`` must not overlap ``a`` or ``b``."""
    np.matmul(a, b, out=out)
    if scale != 1.0:
        out *= np.asarray(scale, dtype=out.dtype)
    if mask is not None:
        out += mask
    softmax(out, out=out, axis=-1)


def log_softmax(x: np.ndarray, *, out: np.ndarray, axis: int = -1) -> None:
    """ONNX LogSoftmax (opset >= 13): ``x - max - log(sum(exp(x - max)))``;
    ``out`` may be ``x``."""
    np.subtract(x, np.max(x, axis=axis, keepdims=True), out=out)
    out -= np.log(np.sum(np.exp(out), axis=axis, keepdims=True))


def layer_norm(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    out: np.ndarray,
    axis: int = -1,
    epsilon: float = 1e-5,
) -> None:
    """ONNX LayerNormalization (Y only): normalise over dims ``axis..end``,
    then ``* scale + bias`` (both broadcast over those dims); ``out`` may be ``x``."""
    axes = tuple(range(axis % x.ndim, x.ndim))
    np.subtract(x, np.mean(x, axis=axes, keepdims=True), out=out)
    variance = np.mean(np.square(out), axis=axes, keepdims=True)
    out *= 1.0 / np.sqrt(variance + epsilon)
    out *= scale
    if bias is not None:
        out += bias


def lrn(
    x: np.ndarray,
    *,
    out: np.ndarray,
    size: int,
    alpha: float = 1e-4,
    beta: float = 0.75,
    bias: float = 1.0,
) -> None:
    """ONNX LRN across channels: ``x / (bias + alpha/size * window_sum(x^2))^beta``
    where channel c's window spans c - floor((size-1)/2) .. c + ceil((size-1)/2).
    ``out`` must not overlap ``x`` (it accumulates the window sums)."""
    channels = x.shape[1]
    before = (size - 1) // 2
    # Zero-padded channel axis: 'before' zeros in front, the rest behind.
    squares = np.zeros((x.shape[0], channels + size - 1, *x.shape[2:]), dtype=x.dtype)
    squares[:, before : before + channels] = np.square(x)
    # out doubles as the window-sum accumulator: it is fully written first.
    np.copyto(out, squares[:, 0:channels])
    for offset in range(1, size):
        out += squares[:, offset : offset + channels]
    out *= alpha / size
    out += bias
    np.power(out, -beta, out=out)
    out *= x

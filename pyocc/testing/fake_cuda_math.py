"""The numbers behind the CPU stand-in for cuDNN and cuBLAS (pyocc.testing.fake_cuda).

Plain numpy definitions of what each library routine computes, written from
the libraries' documented formulas and independent of pyocc's host kernels
(pyocc.runtime.kernels): a test that compares `target=cuda` code run on the
fake with the host kernels then compares two separate implementations.

Every function takes float32 arrays of the logical shapes (the fake builds
them from descriptors and device memory), never writes its inputs and returns
a new float32 array; the alpha/beta blending with the destination is the
caller's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pyocc.runtime import cuda_api as api

# cudnnActivationMode_t, from cuda_api's table
ACTIVATION_SIGMOID, ACTIVATION_RELU, ACTIVATION_TANH, ACTIVATION_CLIPPED_RELU, ACTIVATION_ELU, ACTIVATION_IDENTITY = (
    api.ACTIVATION_MODES[m] for m in ("sigmoid", "relu", "tanh", "clipped_relu", "elu", "identity"))
# cudnnSoftmaxAlgorithm_t, cudnnSoftmaxMode_t and cudnnPoolingMode_t values the lowering never passes
SOFTMAX_FAST = 0
SOFTMAX_MODE_INSTANCE = 0
POOLING_MAX_DETERMINISTIC = 3


def conv_output_dims(
    spatial: Sequence[int], kernel: Sequence[int], pads: Sequence[int], strides: Sequence[int], dilations: Sequence[int]
) -> tuple[int, ...]:
    """cuDNN's convolution output size per spatial dim: (in + 2p - d(k-1) - 1) / s + 1, rounded down."""
    return tuple(
        (size + 2 * pad - dilation * (extent - 1) - 1) // stride + 1
        for size, extent, pad, stride, dilation in zip(spatial, kernel, pads, strides, dilations, strict=True)
    )


def round_mantissa(a: np.ndarray, kept_bits: int) -> np.ndarray:
    """`a` (float32) rounded to nearest-even with only `kept_bits` of its 23 mantissa
    bits left: 10 emulates TF32 tensor-core inputs (exponent range unchanged)."""
    dropped = 23 - kept_bits
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    half = np.uint64(1 << (dropped - 1))
    lowest_kept = (bits >> np.uint64(dropped)) & np.uint64(1)
    rounded = (bits + half - np.uint64(1) + lowest_kept) >> np.uint64(dropped) << np.uint64(dropped)
    finite = np.isfinite(a)
    return np.where(finite, rounded.astype(np.uint32).view(np.float32), a).astype(np.float32)


def reduce_precision(a: np.ndarray, precision: str) -> np.ndarray:
    """Inputs as a tensor-core path sees them: "fp32" unchanged, "tf32" or "fp16" rounded."""
    if precision == "tf32":
        return round_mantissa(a, 10)
    if precision == "fp16":
        return a.astype(np.float16).astype(np.float32)
    return a


def convolution(
    x: np.ndarray,
    w: np.ndarray,
    *,
    pads: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    groups: int,
    cross_correlation: bool = True,
) -> np.ndarray:
    """Grouped N-d convolution of x (N, C, *S) with w (K, C/groups, *R), symmetric
    zero padding. cuDNN's CUDNN_CONVOLUTION mode (cross_correlation=False) flips
    the kernel; CUDNN_CROSS_CORRELATION (what DNN frameworks call convolution) does not.

    One batched matmul per kernel tap over a strided view of the padded input."""
    batch, channels = x.shape[:2]
    out_channels, kernel = w.shape[0], w.shape[2:]
    if not cross_correlation:
        w = np.flip(w, axis=tuple(range(2, w.ndim)))
    out_spatial = conv_output_dims(x.shape[2:], kernel, pads, strides, dilations)
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads])
    grouped_w = w.reshape(groups, out_channels // groups, channels // groups, *kernel)
    acc = np.zeros((batch, groups, out_channels // groups, math.prod(out_spatial)), dtype=np.float32)
    for tap in np.ndindex(*kernel):
        window = tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilations, out_spatial, strides)
        )
        x_tap = padded[(slice(None), slice(None), *window)].reshape(batch, groups, channels // groups, -1)
        acc += grouped_w[(..., *tap)] @ x_tap  # (g, K/g, C/g) @ (N, g, C/g, P) -> (N, g, K/g, P)
    return acc.reshape(batch, out_channels, *out_spatial)


def convolution_backward_data(
    dy: np.ndarray,
    w: np.ndarray,
    *,
    dx_spatial: Sequence[int],
    pads: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    groups: int,
    cross_correlation: bool = True,
) -> np.ndarray:
    """cudnnConvolutionBackwardData: the gradient of `convolution` with respect to
    its input x (N, C, *dx_spatial), given dy (N, K, *O) and w (K, C/groups, *R).
    Input cell i of a dim receives dy[o] * w[t] for every output o and tap t with
    o*s - pad + t*d == i; cells no window covers get 0. (It is the transpose of the
    forward convolution's linear map, hence ONNX's ConvTranspose.)

    Computed by scattering: per kernel tap, one batched matmul of the tap's weights
    with dy, added into a strided slice of the padded input, which is then cropped."""
    batch, out_channels = dy.shape[:2]
    kernel = w.shape[2:]
    channels = w.shape[1] * groups
    if not cross_correlation:
        w = np.flip(w, axis=tuple(range(2, w.ndim)))
    out_spatial = dy.shape[2:]
    padded_spatial = [
        max(size + 2 * pad, (o - 1) * s + (k - 1) * d + 1)
        for size, pad, o, s, k, d in zip(dx_spatial, pads, out_spatial, strides, kernel, dilations, strict=True)
    ]
    padded = np.zeros((batch, groups, channels // groups, *padded_spatial), dtype=np.float32)
    grouped_w = w.reshape(groups, out_channels // groups, channels // groups, *kernel)
    grouped_dy = dy.reshape(batch, groups, out_channels // groups, -1)
    for tap in np.ndindex(*kernel):
        window = tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilations, out_spatial, strides)
        )
        tap_w = np.swapaxes(grouped_w[(..., *tap)], -1, -2)  # (g, C/g, K/g)
        contribution = tap_w @ grouped_dy  # (N, g, C/g, P)
        padded[(slice(None), slice(None), slice(None), *window)] += contribution.reshape(
            batch, groups, channels // groups, *out_spatial
        )
    crop = tuple(slice(p, p + size) for p, size in zip(pads, dx_spatial))
    return padded[(slice(None), slice(None), slice(None), *crop)].reshape(batch, channels, *dx_spatial).copy()


def activation(x: np.ndarray, mode: int, coef: float, propagate_nan: bool) -> np.ndarray:
    """cudnnActivationForward's functions; coef is the clipped-ReLU ceiling or the ELU alpha.
    Without NaN propagation ReLU-like modes map NaN to a number, as cuDNN's fmax does."""
    clamp_low = np.maximum if propagate_nan else np.fmax
    if mode == ACTIVATION_SIGMOID:
        return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    if mode == ACTIVATION_RELU:
        return clamp_low(x, np.float32(0))
    if mode == ACTIVATION_TANH:
        return np.tanh(x)
    if mode == ACTIVATION_CLIPPED_RELU:
        clamp_high = np.minimum if propagate_nan else np.fmin
        return clamp_high(clamp_low(x, np.float32(0)), np.float32(coef))
    if mode == ACTIVATION_ELU:
        return np.where(x > 0, x, np.float32(coef) * np.expm1(np.minimum(x, 0))).astype(np.float32)
    if mode == ACTIVATION_IDENTITY:
        return x.copy()
    raise ValueError(f"activation mode {mode}")


def _valid_counts(
    size: int, window: int, pad: int, stride: int, out: int, include_pad: bool
) -> np.ndarray:
    """Per output position along one dim: how many window cells an average divides by.
    Excluding padding: cells inside [0, size). Including it: cells inside [-pad, size + pad)."""
    starts = np.arange(out) * stride - pad
    ends = starts + window
    if include_pad:
        return np.minimum(ends, size + pad) - starts
    return np.maximum(np.minimum(ends, size) - np.maximum(starts, 0), 0)


def pooling(
    x: np.ndarray,
    *,
    mode: int,
    window: Sequence[int],
    pads: Sequence[int],
    strides: Sequence[int],
    out_spatial: Sequence[int],
    propagate_nan: bool,
) -> np.ndarray:
    """cudnnPoolingForward. Output position o of a spatial dim covers input cells
    [o*s - pad, o*s - pad + window), clipped to the input; the output size is the
    caller's (cuDNN only requires x and y to agree on n and c), so windows may run
    past the right padding. MAX takes the valid cells (-inf when there are none);
    AVERAGE_COUNT_EXCLUDE_PADDING divides by the valid cells; AVERAGE_COUNT_INCLUDE_PADDING
    by the window cells inside [-pad, size + pad) (all of them for the usual output size)."""
    spatial = x.shape[2:]
    right = [
        max(0, (o - 1) * s - p + k - n)
        for o, s, p, k, n in zip(out_spatial, strides, pads, window, spatial, strict=True)
    ]
    is_max = mode in (api.POOLING_MAX, POOLING_MAX_DETERMINISTIC)
    fill = -np.inf if is_max else 0.0
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, r) for p, r in zip(pads, right)], constant_values=fill)
    combine = (np.maximum if propagate_nan else np.fmax) if is_max else np.add
    acc = np.full((*x.shape[:2], *out_spatial), fill, dtype=np.float32)
    for tap in np.ndindex(*window):
        cells = tuple(slice(t, t + (o - 1) * s + 1, s) for t, o, s in zip(tap, out_spatial, strides))
        acc = combine(acc, padded[(slice(None), slice(None), *cells)])
    if is_max:
        return acc
    include_pad = mode == api.POOLING_AVERAGE_INCLUDE_PAD
    counts = np.ones((), dtype=np.float32)
    for axis, (n, k, p, s, o) in enumerate(zip(spatial, window, pads, strides, out_spatial)):
        shape = [1] * len(spatial)
        shape[axis] = o
        counts = counts * _valid_counts(n, k, p, s, o, include_pad).reshape(shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (acc / counts.astype(np.float32)).astype(np.float32)


def softmax(x: np.ndarray, *, algo: int, mode: int) -> np.ndarray:
    """cudnnSoftmaxForward: INSTANCE mode normalises over all dims but n, CHANNEL mode
    over c for each (n, spatial position). FAST skips the max subtraction (it
    overflows for large inputs, as cuDNN's does); LOG is log-softmax."""
    axes = tuple(range(1, x.ndim)) if mode == SOFTMAX_MODE_INSTANCE else (1,)
    if algo == api.SOFTMAX_LOG:
        shifted = x - x.max(axis=axes, keepdims=True)
        return (shifted - np.log(np.exp(shifted).sum(axis=axes, keepdims=True))).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        exps = np.exp(x if algo == SOFTMAX_FAST else x - x.max(axis=axes, keepdims=True))
        return (exps / exps.sum(axis=axes, keepdims=True)).astype(np.float32)


def lrn_cross_channel(x: np.ndarray, *, size: int, alpha: float, beta: float, k: float) -> np.ndarray:
    """cudnnLRNCrossChannelForward: x / (k + alpha/size * sum of x^2 over the window)^beta,
    the window of channel c being c - floor((size-1)/2) .. c + size - 1 - floor((size-1)/2),
    clipped to the channels (cuDNN's lookBehind/lookAhead; ONNX LRN is the same)."""
    channels = x.shape[1]
    behind = (size - 1) // 2
    squares = np.square(x.astype(np.float64))
    padded = np.pad(squares, [(0, 0), (behind, size - 1 - behind)] + [(0, 0)] * (x.ndim - 2))
    window_sum = sum(padded[:, i : i + channels] for i in range(size))
    return (x / (k + alpha / size * window_sum) ** beta).astype(np.float32)


def batch_norm_inference(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, variance: np.ndarray, epsilon: float
) -> np.ndarray:
    """cudnnBatchNormalizationForwardInference: scale * (x - mean) / sqrt(variance + epsilon) + bias,
    the parameters already shaped to broadcast over x."""
    normalised = (x - mean) / np.sqrt(variance.astype(np.float64) + epsilon)
    return (scale * normalised + bias).astype(np.float32)


def op_tensor(op: int, a: np.ndarray, b: np.ndarray, propagate_nan: bool) -> np.ndarray:
    """cudnnOpTensor's binary ops on already-scaled operands (b broadcasts)."""
    ops = api.OP_TENSOR_OPS
    if op == ops["add"]:
        return a + b
    if op == ops["mul"]:
        return a * b
    if op == ops["min"]:
        return (np.minimum if propagate_nan else np.fmin)(a, b)
    if op == ops["max"]:
        return (np.maximum if propagate_nan else np.fmax)(a, b)
    raise ValueError(f"op {op}")

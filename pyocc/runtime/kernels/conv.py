"""Convolution host kernels: conv (with fused bias, residual and activation)
and conv_transpose, for any number of spatial dims.

``out`` must not overlap any input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pyocc.runtime.kernels._window import Window
from pyocc.runtime.kernels.elementwise import apply_activation

__all__ = ["conv", "conv_transpose"]


def _bias_shape(spatial_rank: int) -> tuple[int, ...]:
    """Shape suffix that broadcasts a per-channel vector over spatial dims."""
    return (-1,) + (1,) * spatial_rank


def conv(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    residual: np.ndarray | None = None,
    *,
    out: np.ndarray,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    group: int = 1,
    activation: str | None = None,
    alpha: float | None = None,
    beta: float | None = None,
) -> None:
    """ONNX Conv, then ``+= residual`` (a fused Add), then a fused activation.

    x is (N, C, *spatial), w is (M, C/group, *kernel), out is (N, M, *out_spatial).
    pads follow ONNX order [x1_begin, x2_begin, ..., x1_end, x2_end];
    activation is None or one of ``elementwise.ACTIVATIONS`` (alpha/beta as in
    ``unary``; None means that activation's ONNX default).

    Algorithm, chosen with bench/kernels.py: im2col (one strided copy per
    kernel tap) plus one BLAS matmul per image and group; 1x1 stride-1 convs
    skip the copy, and depthwise convs (one input channel per group)
    accumulate tap by tap instead (measured at 1 thread: 1.1-1.3x onnxruntime
    on ResNet-like 3x3/1x1/7x7 convs, 0.3x on a 144-channel depthwise 3x3).
    """
    window = Window.from_onnx(w.shape[2:], strides, pads, dilations)
    batch, channels = x.shape[:2]
    out_channels = w.shape[0]
    out_spatial = out.shape[2:]
    if channels % group or out_channels % group or w.shape[1] * group != channels:
        raise ValueError(f"conv: x has {channels} channels and w {w.shape}, inconsistent with group={group}")
    # Results are written through reshaped views of out; a non-contiguous out
    # would make those reshapes copies, so such an out gets a staging buffer.
    target = out if out.flags.c_contiguous else np.empty(out.shape, dtype=out.dtype)

    if w.shape[1] == 1 and group > 1:
        _conv_depthwise(x, w, target, window, group)
    else:
        _conv_im2col(x, w, target, window, group)

    spatial_rank = len(out_spatial)
    if bias is not None:
        target += bias.reshape(_bias_shape(spatial_rank))
    if residual is not None:
        target += residual
    apply_activation(target, activation, alpha, beta)
    if target is not out:
        np.copyto(out, target)


def _is_pointwise(window: Window) -> bool:
    """A 1x1 stride-1 unpadded conv is a plain matmul over the unchanged input."""
    return (
        all(k == 1 for k in window.kernel)
        and all(s == 1 for s in window.strides)
        and not any(window.pads_begin)
        and not any(window.pads_end)
    )


def _conv_im2col(x: np.ndarray, w: np.ndarray, out: np.ndarray, window: Window, group: int) -> None:
    """Grouped conv as (group, M/g, C/g*K) @ (group, C/g*K, P) per image."""
    batch, channels = x.shape[:2]
    out_channels = w.shape[0]
    out_spatial = out.shape[2:]
    positions = int(np.prod(out_spatial))
    taps = int(np.prod(window.kernel))
    weights = w.reshape(group, out_channels // group, (channels // group) * taps)
    if _is_pointwise(window) and x.shape[2:] == tuple(out_spatial):
        columns = np.ascontiguousarray(x).reshape(batch, group, channels // group, positions)
        for image in range(batch):
            np.matmul(weights, columns[image], out=out[image].reshape(group, -1, positions))
        return

    padded = window.pad_input(x, out_spatial, fill=0.0)
    # Column layout (C, *kernel, *out_spatial): grouping C/g with the kernel
    # taps makes each group's block the contiguous (C/g*K, P) matrix BLAS wants.
    columns = np.empty((channels, *window.kernel, *out_spatial), dtype=x.dtype)
    for image in range(batch):
        for tap in window.taps():
            source = padded[(image, slice(None)) + window.tap_slices(tap, out_spatial)]
            columns[(slice(None),) + tap] = source
        np.matmul(
            weights,
            columns.reshape(group, -1, positions),
            out=out[image].reshape(group, -1, positions),
        )


def _conv_depthwise(x: np.ndarray, w: np.ndarray, out: np.ndarray, window: Window, group: int) -> None:
    """Depthwise conv (C/group == 1): out += w[:, tap] * shifted x, tap by tap.

    Each output channel reads a single input channel, so a matmul would be
    (1 x K) @ (K x P) per channel: tiny and BLAS-hostile. Broadcasting the
    per-channel weight over a strided input slice is cheaper.
    """
    batch = x.shape[0]
    out_spatial = out.shape[2:]
    spatial_ones = (1,) * len(out_spatial)
    multiplier = w.shape[0] // group  # output channels per input channel
    padded = window.pad_input(x, out_spatial, fill=0.0)
    # Views split channel M into (group, multiplier) and C into (group, 1).
    out_view = out.reshape(batch, group, multiplier, *out_spatial)
    product = np.empty_like(out_view)
    for index, tap in enumerate(window.taps()):
        source = padded[(slice(None), slice(None)) + window.tap_slices(tap, out_spatial)]
        source = source.reshape(batch, group, 1, *out_spatial)
        tap_weight = w[(slice(None), 0) + tap].reshape(group, multiplier, *spatial_ones)
        if index == 0:
            np.multiply(source, tap_weight, out=out_view)
        else:
            np.multiply(source, tap_weight, out=product)
            out_view += product


def conv_transpose(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    out: np.ndarray,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    group: int = 1,
    output_padding: Sequence[int] | None = None,
) -> None:
    """ONNX ConvTranspose with explicit pads (the compiler resolves auto_pad
    and output_shape into pads and out's shape).

    x is (N, C, *in_spatial), w is (C, M/group, *kernel). Computed as one
    matmul per image and group into columns (M/g*K, P_in), then col2im: each
    kernel tap scatter-adds its column block into a strided slice of an
    uncropped output, from which pads are cropped. ``output_padding`` only
    grows the output, which out's shape already encodes.
    """
    del output_padding  # fully described by out.shape
    window = Window.from_onnx(w.shape[2:], strides, pads, dilations)
    batch, channels = x.shape[:2]
    in_spatial = x.shape[2:]
    out_spatial = out.shape[2:]
    per_group_out = w.shape[1]
    out_channels = per_group_out * group
    taps = int(np.prod(window.kernel))
    positions = int(np.prod(in_spatial))

    # Uncropped extent: every tap of every input position lands inside it.
    extent = [
        max((i - 1) * s + (k - 1) * d + 1, b + o)
        for i, s, k, d, b, o in zip(
            in_spatial, window.strides, window.kernel, window.dilations, window.pads_begin, out_spatial
        )
    ]
    full = np.empty((out_channels, *extent), dtype=out.dtype)
    crop = (slice(None),) + tuple(slice(b, b + o) for b, o in zip(window.pads_begin, out_spatial))
    # (group, C/g, M/g*K) -> (group, M/g*K, C/g): columns = weights @ x_group.
    weights = w.reshape(group, channels // group, per_group_out * taps).transpose(0, 2, 1)
    for image in range(batch):
        columns = np.matmul(weights, x[image].reshape(group, channels // group, positions))
        columns = columns.reshape(out_channels, *window.kernel, *in_spatial)
        full.fill(0)
        for tap in window.taps():
            destination = (slice(None),) + window.tap_slices(tap, in_spatial)
            full[destination] += columns[(slice(None),) + tap]
        out[image] = full[crop]
    if bias is not None:
        out += bias.reshape(_bias_shape(len(out_spatial)))

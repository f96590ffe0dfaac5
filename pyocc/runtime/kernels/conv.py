"""Convolution host kernels: conv (with fused bias, residual and activation),
preact_conv (conv of a per-channel affine + relu of its input, DenseNet's
pre-activation) and conv_transpose, for any number of spatial dims.

``out`` must not overlap any input, except that conv's ``residual`` may be
``out`` itself (dnn-coalesce writes a residual convolution over its dying
residual operand); preact_conv allows the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pyocc.runtime.kernels._window import Window
from pyocc.runtime.kernels.elementwise import apply_activation

__all__ = ["conv", "conv_transpose", "preact_conv"]


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
    shuffle: int | None = None,
) -> None:
    """ONNX Conv, then ``+= residual`` (a fused Add), then a fused activation.
    ``out`` may be ``residual`` itself; it must not overlap ``x``, ``w`` or ``bias``.
    With ``shuffle`` = s the result's channels, read as s groups of M/s, are
    stored transposed (a channel shuffle): channel a*(M/s) + b at b*s + a.

    x is (N, C, *spatial), w is (M, C/group, *kernel), out is (N, M, *out_spatial).
    pads follow ONNX order [x1_begin, x2_begin, ..., x1_end, x2_end];
    activation is None or one of ``elementwise.ACTIVATIONS`` (alpha/beta as in
    ``unary``; None means that activation's ONNX default).

    Algorithm, chosen with bench/kernels.py (one thread for BLAS and
    onnxruntime): im2col (one strided copy per kernel tap) plus one BLAS
    matmul per image and group, 1.1-1.45x onnxruntime's time on ResNet-50 /
    DenseNet 3x3, 1x1 and 7x7 convs (1x1 stride-1 convs skip the copy);
    depthwise convs accumulate tap by tap over flattened stride phases,
    1.4-1.55x (a strided tap loop was 2.8x, im2col + batched matmul 2.5x).
    Stride-1 2-D convs with fewer output than input channels (DenseNet's
    3x3 128->32) skip im2col: one matmul per tap over a shifted view of the
    padded input, accumulated (see ``_conv_tap_accumulate``).
    """
    window = Window.from_onnx(w.shape[2:], strides, pads, dilations)
    batch, channels = x.shape[:2]
    out_channels = w.shape[0]
    out_spatial = out.shape[2:]
    if channels % group or out_channels % group or w.shape[1] * group != channels:
        raise ValueError(f"conv: x has {channels} channels and w {w.shape}, inconsistent with group={group}")
    # Results are written through reshaped views of out; a non-contiguous out
    # would make those reshapes copies, so such an out gets a staging buffer.
    # So does an out that is the residual (in place): the convolution must not
    # overwrite the residual before adding it.
    # A shuffled result is computed in order, then stored shuffled.
    in_place = residual is not None and np.shares_memory(out, residual)
    shuffle = shuffle or 1
    shuffled = shuffle > 1
    target = out if out.flags.c_contiguous and not in_place and not shuffled else np.empty(out.shape, dtype=out.dtype)

    if w.shape[1] == 1 and group > 1:
        _conv_depthwise(x, w, target, window, group)
    elif _prefers_tap_accumulation(x, w, target, window, group):
        _conv_tap_accumulate(x, w, target, window)
    else:
        _conv_im2col(x, w, target, window, group)

    _epilogue(target, target if shuffled else out, bias, residual, activation, alpha, beta)
    if shuffled:
        run = out_channels // shuffle
        out[:, [c % run * shuffle + c // run for c in range(out_channels)]] = target


def _epilogue(
    target: np.ndarray,
    out: np.ndarray,
    bias: np.ndarray | None,
    residual: np.ndarray | None,
    activation: str | None,
    alpha: float | None,
    beta: float | None,
) -> None:
    """The fused tail of a convolution, in place on ``target``: ``+ bias``,
    ``+ residual``, the activation; then ``target`` into ``out`` if it was a
    staging buffer."""
    if bias is not None:
        target += bias.reshape(_bias_shape(target.ndim - 2))
    if residual is not None:
        target += residual
    apply_activation(target, activation, alpha, beta)
    if target is not out:
        np.copyto(out, target)


def preact_conv(
    x: np.ndarray,
    pre_scale: np.ndarray,
    pre_shift: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    residual: np.ndarray | None = None,
    *,
    out: np.ndarray,
    pre_activation: str | None = None,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    group: int = 1,
    activation: str | None = None,
    alpha: float | None = None,
    beta: float | None = None,
) -> None:
    """``conv(pre_act(x * pre_scale[c] + pre_shift[c]), w, bias, residual)``
    with ``pre_act`` None or relu, then the fused activation (see ``conv``).

    The pre-activated input is computed into kernel scratch before padding,
    so padded positions stay zero as ONNX requires; it is never a buffer of
    the memory plan. A pointwise conv (DenseNet's bottlenecks and
    transitions, the convs that read the big concatenations) runs as a sum
    over blocks of input channels, so its scratch is one block
    (``PREACT_BLOCK`` channels), not a copy of the input.
    """
    window = Window.from_onnx(w.shape[2:], strides, pads, dilations)
    if group == 1 and _is_pointwise(window) and x.shape[2:] == out.shape[2:]:
        in_place = residual is not None and np.shares_memory(out, residual)  # as in conv
        target = out if out.flags.c_contiguous and not in_place else np.empty(out.shape, dtype=out.dtype)
        _pointwise_preact(x, pre_scale, pre_shift, w, target, pre_activation)
        _epilogue(target, out, bias, residual, activation, alpha, beta)
        return
    shape = (1, -1) + (1,) * (x.ndim - 2)
    activated = x * pre_scale.reshape(shape).astype(x.dtype, copy=False)
    activated += pre_shift.reshape(shape).astype(x.dtype, copy=False)
    apply_activation(activated, pre_activation)
    conv(activated, w, bias, residual, out=out, strides=strides, pads=pads, dilations=dilations,
         group=group, activation=activation, alpha=alpha, beta=beta)


#: input channels pre-activated at a time by a pointwise preact_conv
PREACT_BLOCK = 64


def _pointwise_preact(
    x: np.ndarray, scale: np.ndarray, shift: np.ndarray, w: np.ndarray, out: np.ndarray, activation: str | None
) -> None:
    """out = W @ act(x * scale + shift) for a 1x1 stride-1 conv, one block of
    input channels at a time: out = sum over blocks of W[:, block] @ act(x[block])."""
    batch, channels = x.shape[:2]
    positions = int(np.prod(x.shape[2:]))
    weights = w.reshape(w.shape[0], channels)
    rows = np.ascontiguousarray(x).reshape(batch, channels, positions)
    scale = scale.reshape(-1, 1).astype(x.dtype, copy=False)
    shift = shift.reshape(-1, 1).astype(x.dtype, copy=False)
    block = np.empty((min(PREACT_BLOCK, channels), positions), dtype=x.dtype)
    partial = np.empty((w.shape[0], positions), dtype=out.dtype)
    for image in range(batch):
        result = out[image].reshape(w.shape[0], positions)
        for start in range(0, channels, PREACT_BLOCK):
            stop = min(start + PREACT_BLOCK, channels)
            activated = block[: stop - start]
            np.multiply(rows[image, start:stop], scale[start:stop], out=activated)
            activated += shift[start:stop]
            apply_activation(activated, activation)
            if start == 0:
                np.matmul(weights[:, start:stop], activated, out=result)
            else:
                np.matmul(weights[:, start:stop], activated, out=partial)
                result += partial


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


#: grid positions per channel up to which a depthwise conv stacks its taps and
#: runs one batched matmul (faster at 14x14 and 28x28, 2.5x slower at 56x56)
DEPTHWISE_MATMUL_SPAN = 1024


def _conv_depthwise(x: np.ndarray, w: np.ndarray, out: np.ndarray, window: Window, group: int) -> None:
    """Depthwise conv (C/group == 1): out += w[:, tap] * shifted x, tap by tap.

    Each output channel reads a single input channel, so a matmul would be
    (1 x K) @ (K x P) per channel: tiny and BLAS-hostile. Instead each tap is
    one broadcast multiply-add over all channels. To give those sweeps long
    contiguous inner loops, the zero-padded input is split into stride
    phases (``padded[a::s]`` per axis; with stride 1 the single phase is the
    padded input itself), built straight from x, and each phase is flattened: a tap then reads a *contiguous* 1-D window of a
    phase, shifted by the tap's flat offset. The sweep covers a grid as wide
    as the phase, whose extra columns are garbage and dropped at the end.
    """
    batch, channels = x.shape[:2]
    out_spatial = out.shape[2:]
    multiplier = w.shape[0] // group  # output channels per input channel

    # Phase grid per axis: enough rows for every output plus the largest tap shift.
    reach = [(k - 1) * d // s for k, d, s in zip(window.kernel, window.dilations, window.strides)]
    grid = [o + r for o, r in zip(out_spatial, reach)]
    pitches = [int(np.prod(grid[axis + 1 :])) for axis in range(len(grid))]
    span = out_spatial[0] * pitches[0]  # flat length swept per tap
    # Slack behind the grid so the most-shifted tap's window stays in bounds.
    flat_length = int(np.prod(grid)) + sum(r * p for r, p in zip(reach[1:], pitches[1:]))

    phases: dict[tuple[int, ...], np.ndarray] = {}

    def phase(key: tuple[int, ...]) -> np.ndarray:
        """Flattened stride phase ``padded(x)[..., a0::s0, a1::s1, ...]``, built
        once, straight from x: zeros wherever the phase falls into padding."""
        if key not in phases:
            flat = np.zeros((batch, channels, flat_length), dtype=x.dtype)
            view = flat[:, :, : int(np.prod(grid))].reshape(batch, channels, *grid)
            destination, source = [slice(None)] * 2, [slice(None)] * 2
            for a, g, s, b, size in zip(key, grid, window.strides, window.pads_begin, x.shape[2:]):
                # Phase row r holds padded row a + s*r, i.e. x row a + s*r - b.
                first = max(0, -(-(b - a) // s))
                stop = min(g, -(-(size + b - a) // s))
                destination.append(slice(first, max(first, stop)))
                source.append(slice(a + s * first - b, size, s))
            target = view[tuple(destination)]
            target[...] = x[tuple(source)][tuple(slice(0, n) for n in target.shape)]
            phases[key] = flat
        return phases[key]

    def tap_window(tap: tuple[int, ...]) -> np.ndarray:
        """What tap `tap` reads for every grid position: (batch, C, span)."""
        shifts = [t * d for t, d in zip(tap, window.dilations)]
        key = tuple(shift % s for shift, s in zip(shifts, window.strides))
        offset = sum((shift // s) * p for shift, s, p in zip(shifts, window.strides, pitches))
        return phase(key)[:, :, offset : offset + span]

    accumulator = np.empty((batch, group, multiplier, span), dtype=out.dtype)
    taps = list(window.taps())
    if span <= DEPTHWISE_MATMUL_SPAN:
        # Small images: the per-tap sweeps are too short to pay for their
        # numpy calls; stack the tap windows (they fit in cache) and do one
        # batched (multiplier x taps) @ (taps x span) matmul per channel.
        columns = np.empty((batch, group, len(taps), span), dtype=x.dtype)
        for index, tap in enumerate(taps):
            columns[:, :, index] = tap_window(tap)
        np.matmul(w.reshape(group, multiplier, len(taps)), columns, out=accumulator)
    else:
        product = np.empty_like(accumulator)
        for index, tap in enumerate(taps):
            source = tap_window(tap).reshape(batch, group, 1, span)
            tap_weight = w[(slice(None), 0) + tap].reshape(group, multiplier, 1)
            if index == 0:
                np.multiply(source, tap_weight, out=accumulator)
            else:
                np.multiply(source, tap_weight, out=product)
                accumulator += product
    on_grid = accumulator.reshape(batch, group * multiplier, out_spatial[0], *grid[1:])
    np.copyto(out, on_grid[(Ellipsis,) + tuple(slice(0, o) for o in out_spatial[1:])])


def _prefers_tap_accumulation(x: np.ndarray, w: np.ndarray, out: np.ndarray, window: Window, group: int) -> bool:
    """Whether ``_conv_tap_accumulate`` beats im2col for this conv.

    im2col writes channels x taps x positions column values; tap
    accumulation instead writes and re-reads out_channels x positions per
    tap, and runs taps matmuls with a short inner dimension. Measured on one
    thread (bench/host_latency.py, DenseNet-121 and ResNet-50 shapes): 1.3-1.6x
    faster for 3x3 128->32 at 14..56, 1.2x for 64->64 at 56, slower for
    256->256 at 14, 512->512 at 7 and every conv that widens the channels.
    """
    if group != 1 or x.ndim != 4 or any(s != 1 for s in window.strides) or len(list(window.taps())) == 1:
        return False
    channels, out_channels = x.shape[1], w.shape[0]
    positions = out.shape[2] * out.shape[3]
    return 2 * out_channels <= channels or (out_channels <= channels and positions >= 48 * 48)


def _conv_tap_accumulate(x: np.ndarray, w: np.ndarray, out: np.ndarray, window: Window) -> None:
    """Stride-1 2-D conv as a sum over kernel taps of (M, C) @ (C, P) matmuls.

    The zero-padded input of each image is laid out flat per channel, one
    padded row after another. A tap (i, j) then reads, for every output
    position, the element ``i*dh*row + j*dw`` further on: a contiguous window
    of each channel's flat data, i.e. a strided 2-D view BLAS takes as is,
    with no copy. The sweep covers a grid as wide as a padded row, whose
    extra columns are garbage and dropped at the end (as in
    ``_conv_depthwise``). The sum runs over taps, so its order differs from
    im2col's by rounding only.
    """
    batch, channels, height, width = x.shape
    out_channels, _, kernel_h, kernel_w = w.shape
    out_h, out_w = out.shape[2:]
    (dil_h, dil_w), (pad_h, pad_w) = window.dilations, window.pads_begin
    grid_h, grid_w = out_h + (kernel_h - 1) * dil_h, out_w + (kernel_w - 1) * dil_w
    span = out_h * grid_w
    # Slack behind the grid so the right-most tap's window stays in bounds.
    flat = np.zeros((channels, grid_h * grid_w + (kernel_w - 1) * dil_w), dtype=x.dtype)
    grid = flat[:, : grid_h * grid_w].reshape(channels, grid_h, grid_w)
    rows = slice(max(0, -pad_h), min(height, grid_h - pad_h))
    cols = slice(max(0, -pad_w), min(width, grid_w - pad_w))
    interior = (slice(None), slice(rows.start + pad_h, rows.stop + pad_h), slice(cols.start + pad_w, cols.stop + pad_w))
    tap_weights = np.ascontiguousarray(w.transpose(2, 3, 0, 1))  # (kh, kw, M, C)
    accumulator = np.empty((out_channels, span), dtype=out.dtype)
    product = np.empty_like(accumulator)
    for image in range(batch):
        grid[interior] = x[image, :, rows, cols]
        for index, (i, j) in enumerate(window.taps()):
            offset = i * dil_h * grid_w + j * dil_w
            shifted = flat[:, offset : offset + span]
            if index == 0:
                np.matmul(tap_weights[i, j], shifted, out=accumulator)
            else:
                np.matmul(tap_weights[i, j], shifted, out=product)
                accumulator += product
        np.copyto(out[image], accumulator.reshape(out_channels, out_h, grid_w)[:, :, :out_w])


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

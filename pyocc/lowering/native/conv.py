"""Native convolutions: conv, preact_conv and conv_transpose for 1-, 2- and
3-D images, with the semantics of pyocc.runtime.kernels.conv.

conv picks its algorithm with pyocc.dialects.dnn.scratch.conv_algorithm,
the same rule that sized its planned scratch (`ConvOp.scratch_bytes`):
- im2col: per group, a block of output rows at a time (at least
  IM2COL_MIN_POSITIONS positions), and within it a slice of the input
  channels at a time, the slice's columns (channels * taps) x (block
  positions) are written into the op's workspace (a buffer of the memory
  plan), then one BLAS sgemm adds the slice's part onto the block's
  outputs (`im2col_block` sizes both within the workspace). The plan
  sizes that workspace to the pool's slack at the op (from one output
  row's columns up to a full block); without one (`_without_columns`: the
  plan for an NPU's scratchpad, `--scratchpad`, gives the host no scratch)
  the op runs the register tiles below at any depth where their other
  conditions hold, on any host (there is no sgemm to keep), else the
  direct loops.
  In a model compiled for several threads, a workspace
  whose blocks are too small to split between them holds one copy per
  thread (its spec's "copies", `im2col_copies`): the blocks of rows are
  then cut into runs of whole blocks, one per copy, run on the threads,
  each block computed exactly as on one thread. A shallow one
  (`tiled_spatial`: group 1, stride 1, or 2 when at most
  TILED_SPATIAL_SHALLOW deep, no residual, relu or no activation) on a
  host without AVX-512 instead runs generated register tiles read from the
  input in place (`_spatial_tiles`: no im2col, no BLAS; its planned
  workspace stays unused; on threads, each runs a run of (tile, output
  row) pairs).
- pointwise (1x1, stride 1, unpadded): per image and group, one sgemm
  per block of rows over the input itself; a shallow one (at most
  TILED_POINTWISE_DEPTH input channels per group, no residual, relu or no
  activation) on a host without AVX-512 instead runs generated register
  tiles (`_pointwise_tiles`: no BLAS, bias and relu applied in registers;
  on threads, each runs a run of position vectors).
- direct (depthwise, and groups of fewer than GROUPED_BLAS_CHANNELS
  channels): loops, no scratch. For each output row,
  each input channel of the group and each kernel tap, one multiply-add
  sweep along the row, whose valid range is known at compile time, so the
  inner loop has no bounds checks and vectorises.
The output block starts as the residual (the bias is added after) or as
the bias, and BLAS accumulates onto it (beta = 1, so OpenBLAS never runs
its own pass zeroing C); the activation is one pass over the block, while
it is in cache.
Stride-1 and stride-2 im2col rows are copied in explicit vectors (stride
2: two loads and a shuffle per LANES columns); other strides element by
element.

preact_conv applies `pre_act(x * scale + shift)` as it reads x (padding
stays zero, as ONNX requires): group 1 as im2col blocks (pointwise ones
too: `PreActConvOp.scratch_bytes`) + sgemm; grouped ones by the direct
loops; group-1 ones without a planned workspace as register tiles that
pre-activate what they load (padding set back to zero) where those run,
else by the direct loops. conv_transpose
runs direct loops, scattering each input row's contributions into the
output rows it reaches.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as ir

from pyocc.dialects.dnn.scratch import (
    IM2COL_MIN_POSITIONS,
    conv_algorithm,
    conv_scratch_bytes,
    im2col_block,
    im2col_block_bytes,
    im2col_row_bytes,
    output_block_rows,
)
from pyocc.lowering.native.dense_ir import (
    F32,
    I32,
    I64,
    LANES,
    PTR,
    VECTOR,
    Kernel,
    NotNative,
    Passes,
    all_float32,
    require_float32,
)
from pyocc.lowering.native.loops import PARALLEL_MIN_WORK, run_time_size
from pyocc.lowering.native.registry import native_kernel

__all__ = ["direct_conv_layouts", "emit_conv", "emit_conv_transpose", "emit_preact_conv"]

#: reads x[channel] at a flat element pointer: (kernel, channel index, value) -> value
InputTransform = Callable[[Kernel, ir.Value, ir.Value], ir.Value]


@dataclass(frozen=True)
class RunTimeSizes:
    """The sizes a preact_conv kernel shared by sites that differ only in
    them reads at run time (`preact_conv_sizes`), as i64 values."""

    channels: ir.Value
    """input channels (group 1)"""
    block_rows: ir.Value
    """output rows of one im2col block (`im2col_block`)"""
    block_channels: ir.Value
    """input channels of one slice of it"""


@dataclass(frozen=True)
class RowSizes:
    """The sizes a 2-D conv kernel shared by sites that differ only in their
    rows (the patches of a tiled op, `conv_row_sizes`) reads at run time,
    as i64 values."""

    in_rows: ir.Value
    """input rows (dim 0 of the image)"""
    out_rows: ir.Value
    """output rows"""
    pad_top: ir.Value
    """padding rows above the image"""
    block_rows: ir.Value
    """output rows of one im2col or pointwise block"""
    block_channels: ir.Value
    """input channels of one im2col slice (0 for a pointwise conv)"""


#: the names under which a parallel_loop part gets a shared kernel's rows
ROW_CAPTURES = ("in_rows", "out_rows", "pad_top")


@dataclass(frozen=True)
class Geometry:
    """A convolution's static shapes, with a 1-D one seen as 2-D (a unit row
    dim in front), so every kernel has a row dim (0) and a last dim. In a
    kernel shared by a tiled op's patches (`RowSizes`) the rows of dim 0
    (in_spatial[0], out_spatial[0], pads_begin[0]) are i64 values read at
    run time; every other size is static."""

    batch: int
    channels: int
    out_channels: int
    group: int
    in_spatial: tuple[int, ...]
    out_spatial: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]

    @classmethod
    def of(cls, x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int],
           kwargs: dict[str, Any], transpose: bool = False) -> Geometry:
        rank = len(w_shape) - 2
        if rank not in (1, 2, 3):
            raise NotNative(f"{rank}-D convolutions run on the numpy kernel")
        strides = list(kwargs.get("strides") or [1] * rank)
        dilations = list(kwargs.get("dilations") or [1] * rank)
        pads = list(kwargs.get("pads") or [0] * (2 * rank))
        group = int(kwargs.get("group") or 1)
        in_spatial, out_spatial, kernel = list(x_shape[2:]), list(out_shape[2:]), list(w_shape[2:])
        pads_begin = pads[:rank]
        if rank == 1:
            in_spatial, out_spatial, kernel = [1, *in_spatial], [1, *out_spatial], [1, *kernel]
            strides, dilations, pads_begin = [1, *strides], [1, *dilations], [0, *pads_begin]
        out_channels = w_shape[1] * group if transpose else w_shape[0]
        return cls(x_shape[0], x_shape[1], out_channels, group, tuple(in_spatial), tuple(out_spatial),
                   tuple(kernel), tuple(strides), tuple(dilations), tuple(pads_begin))

    def with_rows(self, in_rows: ir.Value, out_rows: ir.Value, pad_top: ir.Value) -> Geometry:
        """This geometry with its rows of dim 0 read at run time."""
        return replace(self, in_spatial=(in_rows, *self.in_spatial[1:]), out_spatial=(out_rows, *self.out_spatial[1:]),
                       pads_begin=(pad_top, *self.pads_begin[1:]))

    @property
    def static_rows(self) -> bool:
        """Whether the rows of dim 0 are known at compile time."""
        return isinstance(self.out_spatial[0], int)

    def row_values(self) -> dict[str, ir.Value]:
        """The run-time rows, to capture into a parallel_loop part (none when static)."""
        if self.static_rows:
            return {}
        return dict(zip(ROW_CAPTURES, (self.in_spatial[0], self.out_spatial[0], self.pads_begin[0]), strict=True))

    def in_part(self, values: dict[str, Any]) -> Geometry:
        """This geometry inside a parallel_loop part: its run-time rows as
        the part sees them (`values`, captured from `row_values`)."""
        return self if self.static_rows else self.with_rows(*(values[name] for name in ROW_CAPTURES))

    def in_size(self, k: Kernel) -> ir.Value | int:
        """Positions of one input channel plane (a value with run-time rows)."""
        return k.mul(self.in_spatial[0], math.prod(self.in_spatial[1:]))

    def out_size(self, k: Kernel) -> ir.Value | int:
        """Positions of one output channel plane (a value with run-time rows)."""
        return k.mul(self.out_spatial[0], math.prod(self.out_spatial[1:]))

    def out_rows_estimate(self) -> int:
        """Output rows of dim 0 for a work estimate: the static ones, else
        enough to pass any threshold (a shared kernel's come at run time)."""
        return self.out_spatial[0] if self.static_rows else PARALLEL_MIN_WORK

    @property
    def taps(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(k) for k in self.kernel)))

    @property
    def in_positions(self) -> int:
        return math.prod(self.in_spatial)

    @property
    def out_positions(self) -> int:
        return math.prod(self.out_spatial)

    def valid_range(self, tap: int) -> tuple[int, int]:
        """Output positions [lo, hi) of the last dim whose input, for last-dim
        tap `tap`, lies inside the image (not in the padding)."""
        s, d, p = self.strides[-1], self.dilations[-1], self.pads_begin[-1]
        size, out = self.in_spatial[-1], self.out_spatial[-1]
        shift = tap * d - p  # input = o * s + shift
        lo = min(out, max(0, -(shift // s)) if shift < 0 else 0)  # the first o with o * s + shift >= 0
        hi = min(out, (size - 1 - shift) // s + 1)  # one past the last o with o * s + shift < size
        return lo, max(lo, hi)


def _outer_loops(k: Kernel, sizes: Sequence[int], body: Callable[[list[ir.Value]], None]) -> None:
    """Nested run-time loops over `sizes` (outermost first); body(indices)."""
    if not sizes:
        body([])
        return
    with k.loop(0, sizes[0]) as index:
        _outer_loops(k, sizes[1:], lambda rest: body([index, *rest]))


def _flat(k: Kernel, indices: Sequence[ir.Value | int], sizes: Sequence[int]) -> ir.Value | int:
    """Row-major flat index of `indices` in `sizes`."""
    flat: ir.Value | int = 0
    for index, size in zip(indices, sizes, strict=True):
        flat = k.add(k.mul(flat, size), index)
    return flat


def _input_outer(k: Kernel, g: Geometry, outs: Sequence[ir.Value | int], tap: Sequence[ir.Value | int]
                 ) -> tuple[list[ir.Value], ir.Value | None]:
    """For output coords `outs` of dims 0..rank-2 and a tap (ints, or i64
    values of a run-time tap loop): the input coords and the i1 "all inside
    the image" (None when always inside)."""
    coords: list[ir.Value] = []
    inside: ir.Value | None = None
    for axis, (o, t) in enumerate(zip(outs, tap, strict=True)):
        pad = g.pads_begin[axis]
        if not isinstance(pad, int):  # a shared kernel's rows: the padding above comes at run time
            coord = k.builder.sub(k.index(k.add(k.mul(o, g.strides[axis]), k.mul(t, g.dilations[axis]))), pad)
            coords.append(coord)
            # never folded away: the sites sharing the kernel differ in which rows are inside
            test = k.builder.icmp_unsigned("<", coord, k.index(g.in_spatial[axis]))
            inside = test if inside is None else k.builder.and_(inside, test)
            continue
        shift = k.add(k.mul(t, g.dilations[axis]), -pad)
        coord = k.add(k.mul(o, g.strides[axis]), shift)
        coords.append(coord)
        # the tap's shift, or for a run-time tap the range of the kernel's shifts
        low = shift if isinstance(shift, int) else -g.pads_begin[axis]
        high = shift if isinstance(shift, int) else (g.kernel[axis] - 1) * g.dilations[axis] - g.pads_begin[axis]
        if low >= 0 and (g.out_spatial[axis] - 1) * g.strides[axis] + high < g.in_spatial[axis]:
            continue  # every output row of this tap reads inside the image
        test = k.in_range(k.index(coord), 0, g.in_spatial[axis])
        inside = test if inside is None else k.builder.and_(inside, test)
    return coords, inside


def _copy_or_zero(k: Kernel, target: ir.Value, source: ir.Value | None, count: int | ir.Value) -> None:
    """target[:count] = source[:count], or zeros without a source (vectorised)."""
    k.copy(target, source, count)


def _epilogue(k: Kernel, out: ir.Value, bias: ir.Value | None, channel: ir.Value | int, count: int | ir.Value,
              activation: str | None, alpha: float | None, beta: float | None) -> None:
    """out[:count] = act(out[:count] + bias[channel]): the fused tail."""
    if bias is None and activation is None:
        return
    shift = k.load(bias, channel) if bias is not None else None
    with k.loop(0, count) as i:
        value = k.load(out, i)
        if shift is not None:
            value = k.builder.fadd(value, shift)
        k.store(k.activation(value, activation, alpha, beta), out, i)


def _stored_channel(k: Kernel, oc: ir.Value | int, shuffle: int, out_channels: int) -> ir.Value | int:
    """The plane output channel `oc` is stored in: its own, or with a
    channel shuffle of `shuffle` groups (ConvOp.shuffle) (oc % run) *
    shuffle + oc // run, run = out_channels / shuffle."""
    if shuffle == 1:
        return oc
    run, b = out_channels // shuffle, k.builder
    return k.add(k.mul(b.urem(k.index(oc), I64(run)), shuffle), b.udiv(k.index(oc), I64(run)))


def _direct(k: Kernel, g: Geometry, x: ir.Value, w: ir.Value, bias: ir.Value | None, residual: ir.Value | None,
            out: ir.Value, kwargs: dict[str, Any], transform: InputTransform | None = None,
            keep: Sequence[ir.Value] = ()) -> None:
    """Grouped/depthwise (or any) convolution by direct loops, row by row;
    the output channels of an image may run on threads (Kernel.parallel_loop;
    `keep`: the pointers `transform` reads). With a channel shuffle
    (kwargs "shuffle") each output channel's plane is `_stored_channel`'s;
    its bias stays its own."""
    channels_per_group = g.channels // g.group
    outs_per_group = g.out_channels // g.group
    shuffle = int(kwargs.get("shuffle") or 1)
    taps = g.taps
    out_row_length = g.out_spatial[-1]
    in_row_length = g.in_spatial[-1]
    # the output channels of an image are independent: they may run on threads
    work = g.out_channels * g.out_rows_estimate() * math.prod(g.out_spatial[1:]) * channels_per_group * len(taps)
    whole = g

    with k.loop(0, g.batch) as outer_image:

        def channel_plane(oc: ir.Value, v: dict[str, Any]) -> None:
            image, x, w, bias, residual, out = (v["image"], v["x"], v["w"], v["bias"], v["residual"], v["out"])
            b = k.builder
            g = whole.in_part(v)  # a shared kernel's rows, as this part sees them
            outer_out = list(g.out_spatial[:-1])
            outer_in = list(g.in_spatial[:-1])
            out_size, in_size = g.out_size(k), g.in_size(k)
            group = b.udiv(oc, I64(outs_per_group)) if g.group > 1 else 0
            stored = _stored_channel(k, oc, shuffle, g.out_channels)
            plane = k.add(k.mul(image, k.mul(g.out_channels, out_size)), k.mul(stored, out_size))

            def row(outs: list[ir.Value]) -> None:
                out_row = k.element(out, k.add(plane, k.mul(_flat(k, outs, outer_out), out_row_length)))
                source = k.element(residual, k.add(plane, k.mul(_flat(k, outs, outer_out), out_row_length))) \
                    if residual is not None else None
                _copy_or_zero(k, out_row, source, out_row_length)
                with k.loop(0, channels_per_group) as icl:
                    ic = k.add(k.mul(group, channels_per_group), icl)
                    x_plane = k.element(x, k.add(k.mul(image, k.mul(g.channels, in_size)), k.mul(ic, in_size)))
                    w_base = k.mul(k.add(k.mul(oc, channels_per_group), icl), len(taps))
                    # the taps of one kernel row (same outer coords) are summed in
                    # registers over the positions where all of them are inside
                    # the image, so each output element is loaded and stored once
                    # per kernel row; the edges take the taps one by one
                    last = g.kernel[-1]
                    for row_start in range(0, len(taps), last):
                        row_taps = list(enumerate(taps[row_start:row_start + last], start=row_start))
                        ranges = [g.valid_range(tap[-1]) for _, tap in row_taps]
                        common = (max(lo for lo, _ in ranges), min(hi for _, hi in ranges))
                        coords, inside = _input_outer(k, g, outs, row_taps[0][1][:-1])

                        def sweep(row_taps=row_taps, ranges=ranges, common=common, coords=coords) -> None:
                            x_row = k.element(x_plane, k.mul(_flat(k, coords, outer_in), in_row_length))
                            weights = [k.load(w, k.add(w_base, index)) for index, _ in row_taps]

                            def tap_value(tap: tuple[int, ...], o: ir.Value) -> ir.Value:
                                shift = tap[-1] * g.dilations[-1] - g.pads_begin[-1]
                                value = k.load(x_row, k.add(k.mul(o, g.strides[-1]), shift))
                                return transform(k, ic, value) if transform is not None else value

                            spans: list[tuple[int, int, list[int]]] = []
                            if common[0] < common[1]:
                                spans.append((common[0], common[1], list(range(len(row_taps)))))
                            for j, (lo, hi) in enumerate(ranges):
                                pieces = [(lo, min(hi, common[0])), (max(lo, common[1]), hi)] \
                                    if common[0] < common[1] else [(lo, hi)]
                                spans += [(a, z, [j]) for a, z in pieces if a < z]
                            for start, stop, members in spans:
                                with k.loop(start, stop) as o:
                                    total = k.load(out_row, o)
                                    for j in members:
                                        total = b.fadd(total, b.fmul(weights[j], tap_value(row_taps[j][1], o)))
                                    k.store(total, out_row, o)

                        if all(lo >= hi for lo, hi in ranges):
                            continue
                        if inside is None:
                            sweep()
                        else:
                            with k.when(inside):
                                sweep()
                _epilogue(k, out_row, bias, oc, out_row_length, kwargs.get("activation"), kwargs.get("alpha"),
                          kwargs.get("beta"))

            _outer_loops(k, outer_out, row)

        values = {"image": outer_image, "x": x, "w": w, "bias": bias, "residual": residual, "out": out,
                  **{f"keep{i}": value for i, value in enumerate(keep)}, **g.row_values()}
        k.parallel_loop(g.out_channels, work, values, channel_plane)


#: im2col of a kernel of at most this many taps loops over its kernel rows
#: (every dim but the last) at run time and emits one body per tap of the
#: last dim, with its valid range as constants (a 3x3 kernel: 3 bodies); a
#: larger kernel (AlexNet's 11x11 stem, ResNet's 7x7) loops over all its
#: taps at run time, one body in all, since each body is a few vectorised
#: loops that LLVM's O3 then spends most of a model's compile time on (see
#: docs/performance.md, "Compile time of the native convolution")
UNROLLED_TAPS = 9


def _im2col_block(k: Kernel, g: Geometry, x_image: ir.Value, columns: ir.Value, first_row: ir.Value,
                  rows: ir.Value, block_rows: int | ir.Value, transform: InputTransform | None = None,
                  channels: int | ir.Value | None = None, first_channel: ir.Value | int = 0,
                  keep: Sequence[ir.Value] = ()) -> None:
    """columns[(c, tap), (row - first_row, ...)] = x at that tap (0 in the
    padding; `transform`ed inside the image) for output rows first_row ..
    first_row + rows of dim 0 and input channels first_channel ..
    first_channel + channels (c counts from first_channel). Up to
    UNROLLED_TAPS taps, a run-time loop over the kernel rows with the last
    dim's taps unrolled; else a run-time loop over every tap. The channels may
    run on threads (Kernel.parallel_loop); `keep`: the pointers `transform`
    reads, which the threads' part must capture."""
    taps = g.taps
    count = g.channels if channels is None else channels
    # elements written, for a block of `channels` (at most all of them) whole rows
    # (a shared kernel's run-time block counted as all the rows, its channels as enough to share)
    work = PARALLEL_MIN_WORK if g.channels is None else \
        g.channels * len(taps) * (block_rows if isinstance(block_rows, int) else g.out_rows_estimate()) \
        * math.prod(g.out_spatial[1:])
    values = {"x": x_image, "columns": columns, "first_row": first_row, "rows": rows, "first": first_channel,
              "block_rows": block_rows, **{f"keep{i}": value for i, value in enumerate(keep)}, **g.row_values()}
    whole = g

    def one_channel(block_channel: ir.Value, v: dict[str, Any]) -> None:
        g = whole.in_part(v)  # a shared kernel's rows, as this part sees them
        channel = k.add(v["first"], block_channel)
        x_plane = k.element(v["x"], k.mul(channel, g.in_size(k)))
        tap_rows = k.mul(block_channel, len(taps))
        if len(taps) <= UNROLLED_TAPS:

            def kernel_row(outer: list[ir.Value]) -> None:
                # the last dim's taps unrolled: their valid ranges are constants
                for last in range(g.kernel[-1]):
                    tap = [*outer, last]
                    _im2col_tap(k, g, x_plane, v["columns"], channel, k.add(tap_rows, _flat(k, tap, g.kernel)), tap,
                                g.valid_range(last), v["first_row"], v["rows"], v["block_rows"], transform)

            _outer_loops(k, g.kernel[:-1], kernel_row)
        else:

            def tap_body(tap: list[ir.Value]) -> None:
                _im2col_tap(k, g, x_plane, v["columns"], channel, k.add(tap_rows, _flat(k, tap, g.kernel)), tap,
                            _valid_range_at(k, g, tap[-1]), v["first_row"], v["rows"], v["block_rows"], transform)

            _outer_loops(k, g.kernel, tap_body)

    k.parallel_loop(count, work, values, one_channel)


def _valid_range_at(k: Kernel, g: Geometry, tap: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Geometry.valid_range for a last-dim tap known at run time (i64)."""
    b = k.builder
    s, d, p = g.strides[-1], g.dilations[-1], g.pads_begin[-1]
    size, out = g.in_spatial[-1], g.out_spatial[-1]
    shift = b.sub(b.mul(tap, I64(d)), I64(p))  # input = o * s + shift

    def smin(a: ir.Value, z: ir.Value) -> ir.Value:
        return b.select(b.icmp_signed("<", a, z), a, z)

    def smax(a: ir.Value, z: ir.Value) -> ir.Value:
        return b.select(b.icmp_signed(">", a, z), a, z)

    below = smax(b.sub(I64(0), shift), I64(0))  # input positions in the leading padding
    lo = smin(b.udiv(b.add(below, I64(s - 1)), I64(s)), I64(out))
    top = b.sub(I64(size - 1), shift)  # the last o has o * s <= top
    hi = b.select(b.icmp_signed("<", top, I64(0)), I64(0), b.add(b.udiv(smax(top, I64(0)), I64(s)), I64(1)))
    return lo, smax(lo, smin(hi, I64(out)))


def _im2col_tap(k: Kernel, g: Geometry, x_plane: ir.Value, columns: ir.Value, channel: ir.Value | int,
                column: ir.Value | int, tap: Sequence[ir.Value | int], valid: tuple[ir.Value | int, ir.Value | int],
                first_row: ir.Value, rows: ir.Value, block_rows: int | ir.Value,
                transform: InputTransform | None) -> None:
    """One tap of _im2col_block: columns row `column` = the channel's input
    at `tap` (ints, or i64 values in a run-time tap loop) for the block's
    output rows; `valid` is the tap's last-dim valid range [lo, hi)."""
    row_positions = math.prod(g.out_spatial[1:])  # positions per output row of dim 0
    leading = k.mul(block_rows, row_positions)  # the columns matrix's row length
    middle_out = list(g.out_spatial[1:-1])
    middle_in = list(g.in_spatial[1:-1])
    out_length, in_length = g.out_spatial[-1], g.in_spatial[-1]
    b = k.builder
    column_row = k.element(columns, k.mul(column, leading))
    lo, hi = valid
    shift = k.add(k.mul(tap[-1], g.dilations[-1]), -g.pads_begin[-1])

    def sub(a: ir.Value | int, z: ir.Value | int) -> ir.Value | int:
        return a - z if isinstance(a, int) and isinstance(z, int) else b.sub(k.index(a), k.index(z))

    with k.loop(0, rows) as r:

        def fill(middle: list[ir.Value]) -> None:
            outs = [b.add(first_row, r), *middle]
            coords, inside = _input_outer(k, g, outs, tap[:-1])
            target = k.element(column_row, k.mul(_flat(k, [r, *middle], [block_rows, *middle_out]), out_length))

            def copy_row() -> None:
                x_row = k.element(x_plane, k.mul(_flat(k, coords, [g.in_spatial[0], *middle_in]), in_length))
                if g.strides[-1] == 1:  # contiguous: explicit vectors
                    k.copy(target, None, lo)
                    k.copy(k.element(target, lo), k.element(x_row, k.add(lo, shift)), sub(hi, lo),
                           (lambda value: transform(k, channel, value)) if transform is not None else None)
                    k.copy(k.element(target, hi), None, sub(out_length, hi))
                    return
                if g.strides[-1] == 2:  # every other input: explicit vectors too
                    k.copy(target, None, lo)
                    _copy_every_other(k, k.element(target, lo), k.element(x_row, k.add(k.mul(lo, 2), shift)),
                                      sub(hi, lo), (lambda value: transform(k, channel, value))
                                      if transform is not None else None)
                    k.copy(k.element(target, hi), None, sub(out_length, hi))
                    return
                with k.loop(0, lo) as o:
                    k.store(F32(0.0), target, o)
                with k.loop(lo, hi) as o:
                    value = k.load(x_row, k.add(k.mul(o, g.strides[-1]), shift))
                    if transform is not None:
                        value = transform(k, channel, value)
                    k.store(value, target, o)
                with k.loop(hi, out_length) as o:
                    k.store(F32(0.0), target, o)

            if inside is None:
                copy_row()
            else:
                with b.if_else(inside) as (then, otherwise):
                    with then:
                        copy_row()
                    with otherwise:
                        k.copy(target, None, out_length)

        _outer_loops(k, middle_out, fill)


def _copy_every_other(k: Kernel, target: ir.Value, source: ir.Value, count: int | ir.Value,
                      transform: Callable[[ir.Value], ir.Value] | None) -> None:
    """target[i] = transform(source[2 i]) for i < count (a stride-2 im2col
    row): LANES outputs at a time from two vector loads and one shuffle,
    then the rest one by one. The vectors stop while at least one output
    is left after them, so no load reads past source[2 (count - 1)]."""
    b = k.builder
    if isinstance(count, int):
        full: int | ir.Value = max(count - 1, 0) // LANES * LANES
    else:
        last = b.sub(count, I64(1))
        full = b.select(b.icmp_signed("<", last, I64(0)), I64(0), b.and_(last, I64(-LANES)))
    evens = ir.Constant(ir.VectorType(I32, LANES), list(range(0, 2 * LANES, 2)))
    with k.loop(0, full, LANES) as i:
        pair = k.element(source, b.mul(i, I64(2)))
        low = b.load(pair, typ=VECTOR, align=4)
        high = b.load(k.element(pair, LANES), typ=VECTOR, align=4)
        value = b.shuffle_vector(low, high, evens)
        b.store(transform(value) if transform is not None else value, k.element(target, i), align=4)
    with k.loop(full, count) as i:
        value = k.load(source, b.mul(i, I64(2)))
        k.store(transform(value) if transform is not None else value, target, i)


def supports_conv(site: dict[str, Any]) -> bool:
    """float32 convolutions of 1, 2 or 3 spatial dims."""
    weights = site["inputs"][3 if site["kernel"] == "preact_conv" else 1]
    return all_float32(site) and 1 <= len(weights["shape"]) - 2 <= 3


def _without_columns(site: dict[str, Any]) -> bool:
    """Whether an im2col site has no planned workspace holding one output
    row's columns: the plan for an NPU's scratchpad (`--scratchpad`)
    gives the host none, so the site runs register tiles at any depth
    (`tiled_spatial`'s `any_depth`) or the direct loops, which need no
    scratch, instead of the numpy kernel's temporaries outside the plan."""
    weights = site["inputs"][3 if site["kernel"] == "preact_conv" else 1]
    return _im2col(site) and _workspace_bytes(site) < im2col_row_bytes(weights["shape"],
                                                                       site["outputs"][0]["shape"], 4)


def _im2col(site: dict[str, Any]) -> bool:
    """Whether the site's kernel runs im2col blocks (so needs a workspace)."""
    kwargs = site["kwargs"]
    if site["kernel"] == "preact_conv":
        return int(kwargs.get("group") or 1) == 1
    if site["kernel"] != "conv":
        return False
    return conv_algorithm(site["inputs"][1]["shape"], kwargs.get("strides"), kwargs.get("pads"),
                          kwargs.get("group"), kwargs.get("shuffle")) == "im2col"


def _workspace_bytes(site: dict[str, Any]) -> int:
    """The bytes of the site's planned scratch for one thread (its
    `workspace`: the plan sizes it between one output row's columns and one
    full block, and a workspace with "copies" holds that many); 0 when it
    has none."""
    workspace = site.get("workspace")
    return math.prod(workspace["shape"]) // _workspace_copies(site) if workspace is not None else 0


def _workspace_copies(site: dict[str, Any]) -> int:
    """How many copies of one thread's block the site's workspace holds
    (dnn-memory-pool{threads}: `im2col_copies`); 1 without "copies"."""
    workspace = site.get("workspace")
    return int(workspace.get("copies", 1)) if workspace is not None else 1


#: the sizes a conv kernel shared by a tiled op's patches reads at run time (RowSizes)
ROW_SIZES = len(RowSizes.__dataclass_fields__)


def register_tiles(site: dict[str, Any]) -> bool:
    """Whether the conv site's own kernel runs generated register tiles
    (`tiled_pointwise` or `tiled_spatial`). Such a site keeps its own
    kernel where patches of a tiled conv would share one (`conv_row_sizes`):
    the tiles are specialised to their sizes, and the shared kernel's sgemm
    would sum each output in another order, so give other bits than the
    patch compiled alone."""
    if site["kernel"] != "conv":
        return False
    x_spec, w_spec, _, residual_spec = site["inputs"]
    kwargs, out_shape = site["kwargs"], site["outputs"][0]["shape"]
    algorithm = conv_algorithm(w_spec["shape"], kwargs.get("strides"), kwargs.get("pads"), kwargs.get("group"),
                               kwargs.get("shuffle"))
    if algorithm == "direct":
        return False
    g = Geometry.of(x_spec["shape"], w_spec["shape"], out_shape, kwargs)
    tiled = tiled_pointwise if algorithm == "pointwise" else tiled_spatial
    return tiled(g, kwargs, residual_spec is not None)


def conv_row_sizes(site: dict[str, Any]) -> tuple[dict[str, Any], list[int]] | None:
    """The patches of a tiled 2-D conv differ only in their rows: input
    rows, output rows, the padding above and below (the first and last
    patch reach the image's edge) and the planned scratch. A shared kernel
    reads them at run time: (the site with those None, [input rows, output
    rows, padding above, block rows, block channels]); the blocks are what
    the site's own kernel would run (`im2col_block`, or a pointwise conv's
    row blocks; 0 where unused). None for a site that keeps its own
    function (not 2-D, nothing to compute, or one whose own kernel runs
    register tiles: `register_tiles`)."""
    x_spec, w_spec, _, residual_spec = site["inputs"]
    out_shape = site["outputs"][0]["shape"]
    w_shape, kwargs = w_spec["shape"], site["kwargs"]
    if (len(w_shape) != 4 or math.prod(out_shape) == 0 or math.prod(x_spec["shape"]) == 0 or register_tiles(site)
            or "packed_weights" in site or _without_columns(site)):
        return None
    pads = list(kwargs.get("pads") or [0, 0, 0, 0])
    algorithm = conv_algorithm(w_shape, kwargs.get("strides"), pads, kwargs.get("group"), kwargs.get("shuffle"))
    block_rows, block_channels = 0, 0
    if algorithm == "im2col":
        block_rows, block_channels = im2col_block(x_spec["shape"], w_shape, out_shape, 4, _workspace_bytes(site))
    elif algorithm == "pointwise":
        block_rows = _pointwise_block_rows(w_shape, out_shape)
    general = json.loads(json.dumps(site))  # a deep copy of plain data
    x, _, _, residual = general["inputs"]
    x["shape"][2] = general["outputs"][0]["shape"][2] = None
    if residual is not None:
        residual["shape"][2] = None
    if algorithm != "pointwise":  # (a pointwise conv has none: its sites keep the zeros, so stay apart)
        general["kwargs"]["pads"] = [None, pads[1], None, pads[3]]
    if general.get("workspace") is not None:
        general["workspace"]["shape"] = [None]
    return general, [x_spec["shape"][2], out_shape[2], pads[0], block_rows, block_channels]


def _pointwise_block_rows(w_shape: Sequence[int], out_shape: Sequence[int]) -> int:
    """Output rows of one block of a pointwise conv: enough positions for
    a good sgemm (IM2COL_MIN_POSITIONS), yet its outputs fit in cache
    (`output_block_rows`), so each block's epilogue finds them there."""
    spatial = list(out_shape[2:]) if len(out_shape) > 3 else [1, *out_shape[2:]]
    least = -(-IM2COL_MIN_POSITIONS // math.prod(spatial[1:]))
    return max(1, min(spatial[0], max(least, output_block_rows(w_shape, out_shape, 4))))


#: the output positions (of one row) of a direct 3x3 convolution's register
#: tile, each a VECTOR of LANES output channels (two AVX2 registers): 12
#: accumulators (bench/direct_conv.py measured 16 x 6 and 24 x 4 tiles)
DIRECT_POSITIONS = 6
#: The convolutions the direct kernel beat im2col + sgemm on
#: (docs/performance.md, "Where one thread still loses, layer by layer"):
#: products of at most DIRECT_NARROW_OUTS output channels, at any image
#: size, and images of DIRECT_POSITIONS_RANGE output positions (28x28 to
#: 64x64) with at most DIRECT_DEEPEST input channels
DIRECT_NARROW_OUTS = 32
DIRECT_POSITIONS_RANGE = (700, 4096)
DIRECT_DEEPEST = 128


def direct_conv_layouts(site: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """The weight layout a conv site's direct kernel (`_direct_tiles`) reads,
    {"1": output channels in blocks of LANES}, for the sites it runs: a
    static 2-D 3x3 stride-1 convolution padded by 1 on every side, group 1,
    undilated, of a multiple of LANES output channels, on a host without
    AVX-512 (the tile's size), not in register tiles (`register_tiles`),
    whose planned im2col scratch holds three padded input rows of every
    channel, and that is narrow (DIRECT_NARROW_OUTS) or of a mid-sized
    image (DIRECT_POSITIONS_RANGE, DIRECT_DEEPEST); None for the others,
    which stay on im2col + sgemm. select_kernels packs the weights (and
    marks the site "packed_weights") only where the site is their one reader."""
    if site["kernel"] != "conv" or "run_time_sizes" in site or host_has_avx512():
        return None
    x_spec, w_spec, _, _ = site["inputs"]
    kwargs, out_shape, w_shape = site["kwargs"], site["outputs"][0]["shape"], w_spec["shape"]
    shapes = [*x_spec["shape"], *w_shape, *out_shape]
    if not all(isinstance(size, int) and size > 0 for size in shapes) or len(w_shape) != 4:
        return None
    outs, channels, height, width = w_shape[0], w_shape[1], x_spec["shape"][2], x_spec["shape"][3]
    if (w_shape[2:] != [3, 3] or list(kwargs.get("pads") or []) != [1, 1, 1, 1] or (kwargs.get("group") or 1) != 1
            or (kwargs.get("shuffle") or 1) != 1
            or any(s != 1 for s in kwargs.get("strides") or []) or any(d != 1 for d in kwargs.get("dilations") or [])
            or outs % LANES or out_shape[2:] != [height, width] or register_tiles(site)):
        return None
    if _band_rows(channels, height, width, _workspace_bytes(site)) < 1:
        return None
    positions = height * width
    narrow = outs <= DIRECT_NARROW_OUTS
    mid_sized = DIRECT_POSITIONS_RANGE[0] <= positions <= DIRECT_POSITIONS_RANGE[1] and channels <= DIRECT_DEEPEST
    if not (narrow or mid_sized):
        return None
    return {"1": {"layout": "output_channel_blocks", "block": LANES}}


def _band_rows(channels: int, height: int, width: int, workspace_bytes: int) -> int:
    """Output rows of one band of `_direct_tiles`: as many as the planned
    scratch holds with the two input rows beyond them, every channel's
    rows padded by a zero column on each side (at most the image's; < 1:
    the scratch is too small for the direct kernel)."""
    return min(height, workspace_bytes // (channels * (width + 2) * 4) - 2)


@native_kernel("conv", supports=supports_conv, shared_sizes=conv_row_sizes, min_sharing_sites=2,
               run_time_shapes=True, weight_layouts=direct_conv_layouts)
def emit_conv(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Conv + bias + residual + activation (pyocc.runtime.kernels.conv.conv);
    for a site with "run_time_sizes" (`conv_row_sizes`) the kernel shared
    by a tiled op's patches, which reads their rows at run time."""
    require_float32(site)
    x_spec, w_spec, bias_spec, residual_spec = site["inputs"]
    kwargs = site["kwargs"]
    x_shape, w_shape, out_shape = x_spec["shape"], w_spec["shape"], site["outputs"][0]["shape"]
    g = Geometry.of(x_shape, w_shape, out_shape, kwargs)
    rows: RowSizes | None = None
    if "run_time_sizes" not in site and (g.batch == 0 or g.out_positions == 0 or g.out_channels == 0):
        Kernel(module, symbol).finish()
        return
    k = Kernel(module, symbol)
    # a shared kernel's padding above varies between its sites (None): any padding rules out pointwise
    pads = [1 if pad is None else pad for pad in kwargs.get("pads") or []]
    algorithm = conv_algorithm(w_shape, kwargs.get("strides"), pads, kwargs.get("group"), kwargs.get("shuffle"))
    if "run_time_sizes" in site:
        first = site["run_time_sizes"]
        rows = RowSizes(*(run_time_size(k.builder, k.function.args[0], first + i) for i in range(ROW_SIZES)))
        g = g.with_rows(rows.in_rows, rows.out_rows, rows.pad_top)
    x, w, out = k.buffer(0), k.buffer(1), k.buffer(4)
    bias = k.buffer(2) if bias_spec is not None else None
    residual = k.buffer(3) if residual_spec is not None else None
    if algorithm == "direct":
        _direct(k, g, x, w, bias, residual, out, kwargs)
        k.finish()
        return

    if "packed_weights" in site:  # select_kernels gave the weights the layout `direct_conv_layouts` asked for
        _direct_tiles(k, g, x, w, bias, residual, out, k.buffer(5), _workspace_bytes(site), kwargs)
        k.finish()
        return
    if rows is None and register_tiles(site):
        if algorithm == "pointwise":
            _pointwise_tiles(k, g, x, w, bias, out, kwargs.get("activation"), int(kwargs.get("shuffle") or 1))
        else:  # (group 1, so never shuffled: conv_algorithm)
            _spatial_tiles(k, g, x, w, bias, out, kwargs.get("activation"))
        k.finish()
        return
    if rows is None and _without_columns(site):
        _read_in_place(k, g, x, w, bias, residual, out, kwargs)
        k.finish()
        return
    im2col = algorithm == "im2col"
    block_bytes = _workspace_bytes(site) if im2col and rows is None else 0
    _blas_conv(k, g, (x_shape, w_shape, out_shape), x, w, bias, residual, out, kwargs, im2col,
               k.buffer(5) if im2col else None, block_bytes, sizes=rows, copies=_workspace_copies(site))
    k.finish()


#: the deepest pointwise convolution (input channels) that runs generated
#: register tiles instead of sgemm (measured in docs/performance.md: "Shallow
#: pointwise convolutions in register tiles")
TILED_POINTWISE_DEPTH = 128
#: output channels of one register tile (each a VECTOR of positions)
TILE_CHANNELS = 4


@functools.cache
def host_has_avx512() -> bool:
    """Whether the CPU the kernels are compiled for has AVX-512 (LLVM's
    host features, as the JIT and `pyocc compile` target them)."""
    return bool(llvm.get_host_cpu_features().get("avx512f", False))


def tiled_pointwise(g: Geometry, kwargs: dict[str, Any], residual: bool) -> bool:
    """Whether a pointwise convolution runs `_pointwise_tiles`: at most
    TILED_POINTWISE_DEPTH input channels per group (a grouped one runs its
    groups' tiles one after the other), no residual (with one the
    tiles measured no faster: both paths stream it), no activation but
    relu, sizes known at compile time, on a host without AVX-512 (the tiles were
    measured against OpenBLAS on an AVX2 machine; the AVX-512 Xeons keep the
    sgemm path their numbers were measured with: at stop 70, on an AVX-512
    Xeon, this and `tiled_spatial` allowed there too ran five light models in
    1.15 of onnxruntime's time in geomean against 1.16, within the spread of
    one run to the next, so the rule stayed)."""
    static = all(isinstance(size, int) for size in (g.batch, g.channels, g.out_channels, g.out_positions))
    return static and g.channels // g.group <= TILED_POINTWISE_DEPTH and not residual \
        and kwargs.get("activation") in (None, "relu") and not host_has_avx512()


def _pointwise_tiles(k: Kernel, g: Geometry, x: ir.Value, w: ir.Value, bias: ir.Value | None, out: ir.Value,
                     activation: str | None, shuffle: int = 1) -> None:
    """A shallow pointwise convolution without BLAS: out[m, p] =
    act(bias[m] + sum over c of w[m, c] * x[c, p]) (c over m's group's input
    channels), the sum starting at the bias (or 0) as the sgemm path's
    does. TILE_CHANNELS output channels (of one group) x
    LANES positions are summed in registers over the input channels in
    order (one fma each), then finished and stored once: no pass filling
    the outputs before the product, none applying the activation after it,
    and no packing (with a depth of at most TILED_POINTWISE_DEPTH, sgemm
    spent about as long on those as on the product). The positions after
    the last whole vector run as one more vector ending at the last
    position (overlapping the one before it, whose outputs it rewrites with
    the same bits), or one by one when there are fewer than LANES. On
    threads, each takes a run of whole vectors (Kernel.parallel_loop); the
    overlapping one runs after the last whole one, in the same iteration,
    so no two threads write one output. Each output is summed by the same
    instructions whatever the thread count, so the bits are the same.
    A channel shuffle (`shuffle` groups) stores each output channel in
    `_stored_channel`'s plane."""
    positions, groups, outs = g.out_positions, g.group, g.out_channels
    depth, group_outs = g.channels // groups, outs // groups  # (of one group)
    fma_vector, fma_scalar = _fma(k.module, VECTOR, f"v{LANES}f32"), _fma(k.module, F32, "f32")
    full_positions = positions - positions % LANES
    full_channels = group_outs - group_outs % TILE_CHANNELS

    def tile(x_image: ir.Value, out_image: ir.Value, first_out: ir.Value, channels: int, position: ir.Value,
             vector: bool) -> None:
        """Output channels [first_out, first_out + channels) at `position`
        (LANES positions from it with `vector`, else one), of the group
        whose input channels start at `x_image`."""
        b = k.builder  # (inside a thread's part, the part's builder)
        kind, fma = (VECTOR, fma_vector) if vector else (F32, fma_scalar)

        def spread(value: ir.Value) -> ir.Value:
            return k.splat(value) if vector else value

        zero = ir.Constant(kind, [0.0] * LANES if vector else 0.0)
        sums = []
        for j in range(channels):
            variable = k.variable(kind)
            b.store(spread(k.load(bias, k.add(first_out, j))) if bias is not None else zero, variable)
            sums.append(variable)
        with k.loop(0, depth) as c:
            at = k.element(x_image, k.add(k.mul(c, positions), position))
            inputs = b.load(at, typ=VECTOR, align=4) if vector else b.load(at, typ=F32)
            for j, variable in enumerate(sums):
                weight = spread(k.load(w, k.add(k.mul(k.add(first_out, j), depth), c)))
                b.store(b.call(fma, [weight, inputs, b.load(variable, typ=kind)]), variable)
        for j, variable in enumerate(sums):
            value = b.load(variable, typ=kind)
            if activation == "relu":
                value = b.select(b.fcmp_ordered(">", value, zero), value, zero)
            stored = _stored_channel(k, k.add(first_out, j), shuffle, outs)
            b.store(value, k.element(out_image, k.add(k.mul(stored, positions), position)), align=4)

    def every_channel(x_image: ir.Value, out_image: ir.Value, position: ir.Value, vector: bool) -> None:
        """All output channels at `position`, group by group: a group's tiles,
        then its channels after them."""
        with k.loop(0, groups) as group:
            x_group = k.element(x_image, k.mul(group, depth * positions))
            first = k.mul(group, group_outs)
            for start, stop, channels in ((first, k.add(first, full_channels), TILE_CHANNELS),
                                          (k.add(first, full_channels), k.add(first, group_outs), 1)):
                with k.loop(start, stop, channels) as first_out:
                    tile(x_group, out_image, first_out, channels, position, vector)

    vectors = full_positions // LANES

    def one_vector(index: ir.Value, v: dict[str, Any]) -> None:
        """The whole vector of positions `index`; the last one also runs the
        vector that ends at the last position, so one thread writes both."""
        every_channel(v["x"], v["out"], k.mul(index, LANES), True)
        if full_positions < positions:
            with k.when(k.builder.icmp_signed("==", index, I64(vectors - 1))):
                every_channel(v["x"], v["out"], I64(positions - LANES), True)

    with k.loop(0, g.batch) as image:
        x_image = k.element(x, k.mul(image, g.channels * positions))
        out_image = k.element(out, k.mul(image, outs * positions))
        if vectors:
            # positions outermost: the inputs of LANES positions (depth x LANES floats) stay in L1 while every
            # output channel reads them; on threads, each takes a run of vectors
            k.parallel_loop(vectors, vectors * outs * depth, {"x": x_image, "out": out_image, "w": w, "bias": bias},
                            one_vector)
        else:
            with k.loop(0, positions) as position:
                every_channel(x_image, out_image, position, False)


#: a stride-1 spatial convolution of at most this depth (input channels x
#: taps: the stems) runs generated register tiles instead of im2col +
#: sgemm; one of at most TILED_SPATIAL_DEPTH does when its im2col columns
#: (depth x positions) take more than TILED_SPATIAL_COLUMN_BYTES (measured
#: in docs/performance.md: "Shallow spatial convolutions in register tiles")
TILED_SPATIAL_SHALLOW = 32
#: the strides (the same along both dims) the spatial tiles run: 2 for the shallow stems (SqueezeNet's
#: and ShuffleNet's 3x3; a 7x7 stem, deeper, stays on sgemm, which it ties: docs/performance.md,
#: "Strided stems in register tiles")
TILED_SPATIAL_STRIDES = (1, 2)
TILED_SPATIAL_DEPTH = 216
TILED_SPATIAL_COLUMN_BYTES = 1 << 20
#: output channels of one spatial register tile (12 accumulators of 8 lanes: enough to hide the fma latency)
SPATIAL_TILE_CHANNELS = 6


def tiled_spatial(g: Geometry, kwargs: dict[str, Any], residual: bool, any_depth: bool = False) -> bool:
    """Whether an im2col convolution runs `_spatial_tiles` instead: 2-D
    (or 1-D), group 1, stride 1 or 2 (`TILED_SPATIAL_STRIDES`; 2 only when
    shallow), dilation 1, shallow (a depth, input channels x taps, of at
    most TILED_SPATIAL_SHALLOW; or of at most TILED_SPATIAL_DEPTH with more
    than TILED_SPATIAL_COLUMN_BYTES of im2col columns, which then stream
    through the cache for a short product), and the conditions of
    `tiled_pointwise` (no residual, relu or no activation, static sizes,
    a host without AVX-512). With `any_depth`, of any depth and stride 1
    or 2, on any host: a convolution with no planned scratch for im2col
    (`_without_columns`), where the other choice is the direct loops, not
    sgemm, and the tiles beat them (on an AVX-512 host too: ResNet-50's
    schedule for a 1 MiB scratchpad runs in 151 ms against 378 ms with
    the direct loops, docs/scratchpad.md)."""
    static = all(isinstance(size, int) for size in (g.batch, g.channels, g.out_channels, g.out_positions))
    if not (static and len(g.kernel) == 2 and g.group == 1 and len(set(g.strides)) == 1
            and g.strides[0] in TILED_SPATIAL_STRIDES and set(g.dilations) == {1}):
        return False
    depth = g.channels * len(g.taps)
    shallow = any_depth or depth <= TILED_SPATIAL_SHALLOW or (
        g.strides[0] == 1 and depth <= TILED_SPATIAL_DEPTH and depth * g.out_positions * 4 > TILED_SPATIAL_COLUMN_BYTES)
    return shallow and not residual and kwargs.get("activation") in (None, "relu") \
        and (any_depth or not host_has_avx512())


def _read_in_place(k: Kernel, g: Geometry, x: ir.Value, w: ir.Value, bias: ir.Value | None,
                   residual: ir.Value | None, out: ir.Value, kwargs: dict[str, Any],
                   transform: InputTransform | None = None, keep: Sequence[ir.Value] = ()) -> None:
    """A convolution that reads its input in place, with no scratch: the
    register tiles at any depth where they run (`tiled_spatial`'s
    `any_depth`), else the direct loops (`transform`, `keep`: a
    preact_conv's pre-activation, as both take it). Grouped convolutions
    and those with no planned im2col scratch (`_without_columns`)."""
    if tiled_spatial(g, kwargs, residual is not None, any_depth=True):
        _spatial_tiles(k, g, x, w, bias, out, kwargs.get("activation"), transform, keep)
    else:
        _direct(k, g, x, w, bias, residual, out, kwargs, transform, keep)


def _spatial_tiles(k: Kernel, g: Geometry, x: ir.Value, w: ir.Value, bias: ir.Value | None, out: ir.Value,
                   activation: str | None, transform: InputTransform | None = None,
                   keep: Sequence[ir.Value] = ()) -> None:
    """A shallow convolution (or one of any depth with no planned im2col
    scratch, `_without_columns`) of stride s (1 or 2) without im2col or
    BLAS, read from the input in place: out[m, oy, ox] = act(bias[m] + sum over c, ky, kx of
    w[m, c, ky, kx] * x[c, s*oy + ky - pad_top, s*ox + kx - pad_left]), summed
    as `_pointwise_tiles` sums: TILE_CHANNELS output channels x LANES
    positions of one output row in registers, then finished and stored once.
    The tiles of a row start at columns known at compile time (every LANES,
    the last one ending at the row's end, overlapping the one before it with
    the same bits), so for each tap the lanes whose input column lies in
    the padding are known at compile time too: such a tap loads with a
    constant mask (masked lanes read nothing and add 0), a tap that reads
    only padding is left out. With stride 2 a tap loads the 2 x LANES
    floats its lanes span and keeps every other one (a shuffle). The kernel rows in the padding are left out
    at run time (the range of ky for each output row). A row narrower than
    LANES stores its tile with a mask as well. On threads, each takes a run of (tile,
    output row) pairs, summed as on one thread. `transform` (a preact_conv's
    pre-activation, reading the pointers `keep`) applies to each loaded
    input, its lanes in the padding set back to zero (ONNX pads after it)."""
    (height, width), (out_rows, out_width) = g.in_spatial, g.out_spatial
    pad_top, pad_left = g.pads_begin
    kernel_rows, kernel_columns = g.kernel
    stride = g.strides[0]
    span = ir.VectorType(F32, stride * LANES)  # the floats a tap's lanes span
    span_masks = ir.VectorType(ir.IntType(1), stride * LANES)
    depth, outs, taps = g.channels, g.out_channels, len(g.taps)
    fma = _fma(k.module, VECTOR, f"v{LANES}f32")
    masks = ir.VectorType(ir.IntType(1), LANES)
    masked_span_load = _intrinsic(k.module, f"llvm.masked.load.v{stride * LANES}f32.p0", span,
                                  [PTR, I32, span_masks, span])
    every_other = ir.Constant(ir.VectorType(I32, LANES), [stride * lane for lane in range(LANES)])
    masked_store = _intrinsic(k.module, f"llvm.masked.store.v{LANES}f32.p0", ir.VoidType(),
                              [VECTOR, PTR, I32, masks])
    zero = ir.Constant(VECTOR, [0.0] * LANES)
    starts = list(range(0, max(1, out_width - LANES + 1), LANES))
    if out_width > LANES and out_width % LANES:
        starts.append(out_width - LANES)
    full_channels = outs - outs % SPATIAL_TILE_CHANNELS

    def lanes(start: int, tap: int) -> list[bool]:
        """Which lanes of the tile at column `start` read inside the image for kernel column `tap`."""
        return [lane + start < out_width and 0 <= (lane + start) * stride + tap - pad_left < width
                for lane in range(LANES)]

    def tap_inputs(x_row: ir.Value, start: int, tap: int, inside: list[bool]) -> ir.Value:
        """The VECTOR of inputs of kernel column `tap` for the tile at column
        `start` (lanes outside the image 0): the floats the lanes span,
        loaded whole where they lie in the row, else with a mask of the
        lanes' own floats, then every `stride`-th of them."""
        b = k.builder
        first = start * stride + tap - pad_left
        if all(inside) and first + stride * LANES <= width:
            loaded = b.load(k.element(x_row, first), typ=span, align=4)
        else:  # (not inbounds: the address of a masked lane may lie before the image)
            mask = [f % stride == 0 and inside[f // stride] for f in range(stride * LANES)]
            at = b.gep(x_row, [I64(first)], source_etype=F32)
            loaded = b.call(masked_span_load, [at, I32(4), ir.Constant(span_masks, mask),
                                               ir.Constant(span, [0.0] * (stride * LANES))])
        return loaded if stride == 1 else b.shuffle_vector(loaded, ir.Constant(span, ir.Undefined), every_other)

    def tile(x_image: ir.Value, out_image: ir.Value, first_out: ir.Value, channels: int, row: ir.Value,
             first_tap_row: ir.Value, stop_tap_row: ir.Value, start: int) -> None:
        """Output channels [first_out, first_out + channels) of output row
        `row` at columns [start, start + LANES), over kernel rows
        [first_tap_row, stop_tap_row) (those inside the image)."""
        b = k.builder  # (inside a thread's part, the part's builder)
        sums = []
        for j in range(channels):
            variable = k.variable(VECTOR)
            b.store(k.splat(k.load(bias, k.add(first_out, j))) if bias is not None else zero, variable)
            sums.append(variable)
        # where each channel's weights start: w[first_out + j, 0, 0, 0]
        weights = [k.index(k.mul(k.add(first_out, j), depth * taps)) for j in range(channels)]
        with k.loop(first_tap_row, stop_tap_row) as tap_row, k.loop(0, depth) as c:
            in_row = b.sub(b.add(b.mul(row, I64(stride)), tap_row), I64(pad_top))
            x_row = k.element(x_image, b.mul(b.add(b.mul(c, I64(height)), in_row), I64(width)))
            w_row = b.mul(b.add(b.mul(c, I64(kernel_rows)), tap_row), I64(kernel_columns))
            for tap in range(kernel_columns):
                inside = lanes(start, tap)
                if not any(inside):
                    continue
                inputs = tap_inputs(x_row, start, tap, inside)
                if transform is not None:
                    inputs = transform(k, c, inputs)
                    if not all(inside):
                        inputs = b.select(ir.Constant(masks, inside), inputs, zero)
                for j, variable in enumerate(sums):
                    weight = k.load(w, b.add(weights[j], b.add(w_row, I64(tap))))
                    b.store(b.call(fma, [k.splat(weight), inputs, b.load(variable, typ=VECTOR)]), variable)
        for j, variable in enumerate(sums):
            value = b.load(variable, typ=VECTOR)
            if activation == "relu":
                value = b.select(b.fcmp_ordered(">", value, zero), value, zero)
            plane = k.mul(k.add(first_out, j), out_rows * out_width)
            at = k.element(out_image, b.add(k.index(plane), b.add(b.mul(row, I64(out_width)), I64(start))))
            if start + LANES <= out_width:
                b.store(value, at, align=4)
            else:
                written = ir.Constant(masks, [lane + start < out_width for lane in range(LANES)])
                b.call(masked_store, [value, at, I32(4), written])

    def one_row(first: int, channels: int) -> Callable[[ir.Value, dict[str, Any]], None]:
        """The body of the loop over (tile, output row) pairs of the tiles of
        `channels` output channels from channel `first`: tile-major, so a run
        of pairs (one thread's) sweeps the rows with one tile's weights."""

        def body(index: ir.Value, v: dict[str, Any]) -> None:
            b = k.builder  # (inside a thread's part, the part's builder)
            first_out = b.add(I64(first), b.mul(b.udiv(index, I64(out_rows)), I64(channels)))
            row = b.urem(index, I64(out_rows))
            # the kernel rows inside the image: max(0, pad_top - s*row) <= ky < min(kh, height + pad_top - s*row)
            low = b.sub(I64(pad_top), b.mul(row, I64(stride)))
            high = b.sub(I64(height + pad_top), b.mul(row, I64(stride)))
            first_tap_row = b.select(b.icmp_signed(">", low, I64(0)), low, I64(0))
            stop_tap_row = b.select(b.icmp_signed("<", high, I64(kernel_rows)), high, I64(kernel_rows))
            for start in starts:
                tile(v["x"], v["out"], first_out, channels, row, first_tap_row, stop_tap_row, start)

        return body

    rest = outs - full_channels
    with k.loop(0, g.batch) as image:
        x_image = k.element(x, k.mul(image, depth * height * width))
        out_image = k.element(out, k.mul(image, outs * out_rows * out_width))
        values = {"x": x_image, "out": out_image, "w": w, "bias": bias,
                  **{f"keep{i}": value for i, value in enumerate(keep)}}
        # output channels outermost: a tile's weights stay in L1 while it sweeps the image
        # whole tiles, then one tile of the channels after them
        for first, tiles, channels in ((0, full_channels // SPATIAL_TILE_CHANNELS, SPATIAL_TILE_CHANNELS),
                                       (full_channels, 1, rest)):
            if tiles and channels:
                work = tiles * channels * out_rows * out_width * depth * taps // LANES
                k.parallel_loop(tiles * out_rows, work, values, one_row(first, channels))


def _direct_tiles(k: Kernel, g: Geometry, x: ir.Value, w: ir.Value, bias: ir.Value | None,
                  residual: ir.Value | None, out: ir.Value, workspace: ir.Value, workspace_bytes: int,
                  kwargs: dict[str, Any]) -> None:
    """A 3x3 stride-1 convolution padded by 1, without im2col or BLAS, on
    weights packed as [outs / LANES, channels, 3, 3, LANES]
    (`direct_conv_layouts`). A band of output rows at a time, the input rows
    it reads are copied into the planned scratch with a zero column on each
    side and zero rows beyond the image, so no tap needs a bound. Each
    register tile holds LANES output channels (one VECTOR) x
    DIRECT_POSITIONS positions of one output row (the row's last tile
    narrower): for every tap (input channel, ky, kx), one vector load of
    the tap's packed weights and a broadcast of each position's input,
    where it lies in the band. The taps are one run-time loop over a table
    of their offsets in the band: unrolled, LLVM shares broadcasts between
    taps and spills the tile (bench/direct_conv.py). Each output is then
    act(sum + residual + bias), stored once. On threads, each takes a run
    of (channel block, band row) pairs after the band is filled; every
    output is summed by one tile in tap order, whatever the thread count."""
    channels, outs = g.channels, g.out_channels
    height, width = g.in_spatial
    padded = width + 2
    band_rows = _band_rows(channels, height, width, workspace_bytes)
    plane = (band_rows + 2) * padded  # one channel's rows in the band
    taps = channels * 9
    table_type = ir.ArrayType(I32, taps)
    table = ir.GlobalVariable(k.module, table_type, k.module.get_unique_name(f"{k.symbol}.taps"))
    table.global_constant = True
    table.linkage = "internal"
    table.initializer = ir.Constant(table_type, [c * plane + ky * padded + kx for c in range(channels)
                                                 for ky in range(3) for kx in range(3)])
    fma = _fma(k.module, VECTOR, f"v{LANES}f32")
    blocks = outs // LANES
    activation, alpha, beta = kwargs.get("activation"), kwargs.get("alpha"), kwargs.get("beta")
    whole = width - width % DIRECT_POSITIONS  # the columns of full tiles
    b = k.builder

    def tile(v: dict[str, Any], block: ir.Value, row: ir.Value, start: ir.Value, positions: int) -> None:
        """Output channels [LANES * block, + LANES) of band row `row`, columns [start, start + positions)."""
        b = k.builder  # (inside a thread's part, the part's builder)
        sums = [k.variable(VECTOR) for _ in range(positions)]
        for variable in sums:
            b.store(ir.Constant(VECTOR, [0.0] * LANES), variable)
        weights = k.element(v["w"], k.mul(block, taps * LANES))
        inputs = k.element(v["band"], b.add(b.mul(row, I64(padded)), start))
        with k.loop(0, taps) as tap:
            offset = b.sext(b.load(b.gep(table, [I64(0), tap], inbounds=True, source_etype=table_type), typ=I32), I64)
            weight = b.load(k.element(weights, b.mul(tap, I64(LANES))), typ=VECTOR, align=4)
            at = k.element(inputs, offset)
            for j, variable in enumerate(sums):
                value = k.splat(k.load(at, j))
                b.store(b.call(fma, [weight, value, b.load(variable, typ=VECTOR)]), variable)
        # the tile goes through the stack to be stored channel by channel (a transpose), finished on the way
        stack = k.variable(ir.ArrayType(F32, positions * LANES))
        sums_by_lane = b.inttoptr(b.ptrtoint(stack, I64), PTR)  # an opaque pointer, as the buffers are
        for j, variable in enumerate(sums):
            b.store(b.load(variable, typ=VECTOR), k.element(sums_by_lane, j * LANES), align=4)
        first_out = k.mul(block, LANES)
        first_column = b.add(b.mul(b.add(v["first_row"], row), I64(width)), start)
        with k.loop(0, LANES) as lane:
            channel = b.add(first_out, lane)
            shift = k.load(v["bias"], channel) if bias is not None else None
            at = b.add(b.mul(channel, I64(height * width)), first_column)
            for j in range(positions):
                value = k.load(sums_by_lane, b.add(lane, I64(j * LANES)))
                if residual is not None:
                    value = b.fadd(value, k.load(v["residual"], b.add(at, I64(j))))
                if shift is not None:
                    value = b.fadd(value, shift)
                k.store(k.activation(value, activation, alpha, beta), v["out"], b.add(at, I64(j)))

    def pair(index: ir.Value, v: dict[str, Any]) -> None:
        """Channel block index // rows, band row index % rows: its tiles."""
        b = k.builder
        block, row = b.udiv(index, v["rows"]), b.urem(index, v["rows"])
        with k.loop(0, whole, DIRECT_POSITIONS) as start:
            tile(v, block, row, start, DIRECT_POSITIONS)
        if width > whole:
            tile(v, block, row, I64(whole), width - whole)

    with k.loop(0, g.batch) as image:
        x_image = k.element(x, k.mul(image, channels * height * width))
        out_image = k.element(out, k.mul(image, outs * height * width))
        residual_image = k.element(residual, k.mul(image, outs * height * width)) if residual is not None else None
        with k.loop(0, height, band_rows) as first_row:
            left = b.sub(I64(height), first_row)
            rows = b.select(b.icmp_signed("<", left, I64(band_rows)), left, I64(band_rows))
            # the band: input rows first_row - 1 .. first_row + rows, zero outside the image and at both sides
            k.fill(workspace, F32(0.0), channels * plane)
            with k.loop(0, channels) as c:
                with k.loop(0, b.add(rows, I64(2))) as t:
                    in_row = b.sub(b.add(first_row, t), I64(1))
                    with k.when(k.in_range(in_row, 0, height)):
                        source = k.element(x_image, b.add(b.mul(c, I64(height * width)), b.mul(in_row, I64(width))))
                        target = k.element(workspace, b.add(b.mul(c, I64(plane)), b.add(b.mul(t, I64(padded)), I64(1))))
                        k.copy(target, source, width)
            values = {"band": workspace, "w": w, "out": out_image, "first_row": first_row, "rows": rows,
                      "bias": bias, "residual": residual_image}
            values = {name: value for name, value in values.items() if value is not None}
            work = blocks * band_rows * width * taps
            k.parallel_loop(b.mul(rows, I64(blocks)), work, values, pair)


def _intrinsic(module: ir.Module, name: str, result: ir.Type, arguments: list[ir.Type]) -> ir.Function:
    """The LLVM intrinsic `name`, declared once per module."""
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, ir.FunctionType(result, arguments), name=name)


def _fma(module: ir.Module, kind: ir.Type, suffix: str) -> ir.Function:
    """llvm.fma for `kind` (a*b + c, rounded once), declared once per module."""
    name = f"llvm.fma.{suffix}"
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, ir.FunctionType(kind, [kind] * 3), name=name)


def _blas_conv(k: Kernel, g: Geometry, shapes: tuple[Sequence[int], Sequence[int], Sequence[int]], x: ir.Value,
               w: ir.Value, bias: ir.Value | None, residual: ir.Value | None, out: ir.Value, kwargs: dict[str, Any],
               im2col: bool, workspace: ir.Value | None, block_bytes: int = 0,
               transform: InputTransform | None = None, sizes: RunTimeSizes | RowSizes | None = None,
               keep: Sequence[ir.Value] = (), copies: int = 1) -> None:
    """A convolution through sgemm, per image and group a block of output
    rows at a time: im2col (in `workspace`, `block_bytes` of planned
    scratch) a slice of the input channels at a time (`im2col_block`
    sizes both to the workspace), one sgemm each, adding onto the last; or
    (`im2col` false: pointwise) one sgemm over the block's input. The block
    starts as the residual (bias added after) or as the bias, and every
    sgemm adds onto it (beta = 1); the activation runs on the block while
    it is in cache. On threads, a block whose product is one sgemm runs
    both passes inside the parts of its split product (Passes), each on
    its own outputs. `transform` (preact_conv) is for group 1 only. With
    `sizes` (im2col, group 1) the input channels and the block come from
    run time (a kernel shared by sites that differ only in those); with
    RowSizes (a tiled op's patches) its rows and blocks, `g` having its
    rows as run-time values (Geometry.with_rows). With `copies` > 1
    (im2col, group 1: the workspace holds that many copies of a block, one
    per thread, `im2col_copies`) the blocks of output rows are cut into
    that many runs of whole blocks, each run a part on the threads with its
    own copy, and every block computed exactly as on one thread (its
    im2col, sgemms and passes are not split further)."""
    x_shape, w_shape, out_shape = shapes
    shuffle = int(kwargs.get("shuffle") or 1)  # (conv_algorithm: each group's channels in one stride)
    assert transform is None or g.group == 1
    assert not isinstance(sizes, RunTimeSizes) or (im2col and g.group == 1)
    channels: int | ir.Value = sizes.channels if isinstance(sizes, RunTimeSizes) else g.channels
    group_channels: int | ir.Value = sizes.channels if isinstance(sizes, RunTimeSizes) else w_shape[1]
    image_in, image_out = k.mul(channels, g.in_size(k)), k.mul(g.out_channels, g.out_size(k))
    group_outs = g.out_channels // g.group
    whole_channels = group_channels
    columns = workspace if im2col else None
    block_rows: int | ir.Value
    block_channels: int | ir.Value
    if sizes is not None:
        block_rows, block_channels = sizes.block_rows, sizes.block_channels
    elif im2col:
        block_rows, block_channels = im2col_block(x_shape, w_shape, out_shape, 4, block_bytes)
    else:  # pointwise: blocks of rows too, so each block's epilogue finds its outputs in cache
        block_channels = 0
        block_rows = _pointwise_block_rows(w_shape, out_shape)
    row_positions = math.prod(g.out_spatial[1:])
    b = k.builder
    whole = g
    with k.loop(0, g.batch) as image:
        x_image = k.element(x, k.mul(image, image_in))
        out_image = k.element(out, k.mul(image, image_out))
        residual_image = k.element(residual, k.mul(image, image_out)) if residual is not None else None
        group_values = {"x": x_image, "out": out_image, "residual": residual_image, "w": w, "bias": bias,
                        "workspace": columns, **{f"keep{i}": value for i, value in enumerate(keep)},
                        **g.row_values(), **({} if isinstance(block_rows, int) else {"block_rows": block_rows}),
                        **({} if isinstance(block_channels, int) else {"block_channels": block_channels}),
                        **({} if isinstance(group_channels, int) else {"group_channels": group_channels})}

        def one_group(group: ir.Value | int, v: dict[str, Any], row_range: tuple[ir.Value, ir.Value] | None = None
                      ) -> None:
            x_image, out_image, residual_image = v["x"], v["out"], v["residual"]
            w, bias, columns, b = v["w"], v["bias"], v["workspace"], k.builder
            g = whole.in_part(v)  # a shared kernel's rows and blocks, as this part sees them
            rows_per_block = v.get("block_rows", block_rows)
            channels_per_slice = v.get("block_channels", block_channels)
            # a shared kernel's input channels (and so depth), as this part sees them
            group_channels = v.get("group_channels", whole_channels)
            depth = k.mul(group_channels, len(g.taps))
            positions = g.out_size(k)
            # (run-time sizes come with group 1 and im2col: this loop then stays in the kernel)
            x_group = k.element(x_image, k.mul(group, k.mul(group_channels, g.in_size(k))))
            w_group = k.element(w, k.mul(group, k.mul(depth, group_outs)))
            first_out = k.mul(group, group_outs)
            # shuffled, the group's channels are stored `shuffle` planes apart (conv_algorithm), from stored_first
            stored_first = _stored_channel(k, first_out, shuffle, g.out_channels)
            out_group = k.element(out_image, k.mul(stored_first, positions))
            out_rows = k.mul(positions, shuffle)  # the sgemms' ldc
            start_row, stop_row = row_range if row_range is not None else (0, g.out_spatial[0])
            with k.loop(start_row, stop_row, rows_per_block) as first_row:
                rows = _at_most(k, b.sub(k.index(g.out_spatial[0]), first_row), rows_per_block)
                start, count = b.mul(first_row, I64(row_positions)), b.mul(rows, I64(row_positions))
                out_block = k.element(out_group, start)
                # the block starts as the residual, else as the bias (or 0): the sgemms add onto
                # it (beta 1, so OpenBLAS skips its own pass zeroing C)
                # elements of a whole block (a run-time block counted as all the rows)
                block_work = group_outs * (rows_per_block if isinstance(rows_per_block, int)
                                           else g.out_rows_estimate()) * row_positions
                outputs = {"out": out_image, "residual": residual_image, "bias": bias, "first_out": first_out,
                           "stored_first": stored_first, "start": start, "count": count, "positions": positions}

                def init_columns(local: ir.Value, first: ir.Value | int, columns: ir.Value | int,
                                 v: dict[str, Any]) -> None:
                    """Output channel `local`'s block columns [first, first + columns) start as
                    the residual, else as the bias (or 0)."""
                    oc = k.add(v["first_out"], local)
                    stored = k.add(v["stored_first"], k.mul(local, shuffle))
                    plane = k.add(k.add(k.mul(stored, v["positions"]), v["start"]), first)
                    if v["residual"] is not None:
                        _copy_or_zero(k, k.element(v["out"], plane), k.element(v["residual"], plane), columns)
                    elif v["bias"] is not None:
                        k.fill(k.element(v["out"], plane), k.load(v["bias"], oc), columns)
                    else:
                        _copy_or_zero(k, k.element(v["out"], plane), None, columns)

                def finish_columns(local: ir.Value, first: ir.Value | int, columns: ir.Value | int,
                                   v: dict[str, Any]) -> None:
                    """Bias (after a residual) and activation on those columns."""
                    oc = k.add(v["first_out"], local)
                    stored = k.add(v["stored_first"], k.mul(local, shuffle))
                    late = v["bias"] if v["residual"] is not None else None
                    _epilogue(k, k.element(v["out"], k.add(k.add(k.mul(stored, v["positions"]), v["start"]), first)),
                              late, oc, columns, kwargs.get("activation"), kwargs.get("alpha"), kwargs.get("beta"))

                # bias (after a residual) + activation while the block's outputs are in cache
                late_bias = bias if residual_image is not None else None
                finishes = late_bias is not None or kwargs.get("activation") is not None
                # one slice (the common case): a depth known at compile time, so
                # the product can be split between threads (Kernel.sgemm)
                one_slice = isinstance(channels_per_slice, int) and isinstance(group_channels, int) \
                    and channels_per_slice >= group_channels
                # on threads, a block's product of one sgemm takes the first and last passes into its
                # parts: each thread writes, multiplies into and finishes its own outputs (Passes)
                fused = k.parallel_for_available() and (not im2col or one_slice)
                passes = Passes(init_columns, finish_columns if finishes else None, outputs, block_work) \
                    if fused else None
                if not fused:
                    k.parallel_loop(group_outs, block_work, outputs,
                                    lambda local, v: init_columns(local, 0, v["count"], v))
                if not im2col:
                    k.sgemm(group_outs, count, group_channels, w_group, group_channels, k.element(x_group, start),
                            positions, out_block, out_rows, beta=1.0, passes=passes)
                else:
                    assert columns is not None
                    # the block's channels a slice at a time, each sgemm adding onto the last
                    with k.loop(0, group_channels, channels_per_slice) as first_channel:
                        slice_channels = _at_most(k, b.sub(k.index(group_channels), first_channel),
                                                  channels_per_slice)
                        _im2col_block(k, g, x_group, columns, first_row, rows, rows_per_block, transform,
                                      slice_channels, first_channel, keep)
                        depth_now = depth if one_slice else b.mul(slice_channels, I64(len(g.taps)))
                        k.sgemm(group_outs, count, depth_now,
                                k.element(w_group, k.mul(first_channel, len(g.taps))), depth, columns,
                                k.mul(rows_per_block, row_positions), out_block, out_rows, beta=1.0, passes=passes)
                if finishes and not fused:
                    k.parallel_loop(group_outs, block_work, outputs,
                                    lambda local, v: finish_columns(local, 0, v["count"], v))

        if copies > 1 and im2col and g.group == 1 and not isinstance(sizes, RowSizes) \
                and k.parallel_for_available():

            def one_copy(copy: ir.Value, v: dict[str, Any]) -> None:
                """The blocks of one run, in copy `copy` of the workspace: blocks
                [copy * blocks / copies, (copy + 1) * blocks / copies)."""
                b = k.builder
                rows_per_block = k.index(v.get("block_rows", block_rows))
                total = k.index(g.out_spatial[0])
                blocks = b.udiv(b.add(total, b.sub(rows_per_block, I64(1))), rows_per_block)
                first = b.udiv(b.mul(blocks, copy), I64(copies))
                last = b.udiv(b.mul(blocks, b.add(copy, I64(1))), I64(copies))
                stop = b.mul(last, rows_per_block)
                stop = b.select(b.icmp_signed("<", stop, total), stop, total)
                # a copy: one block's columns (the slice's channel taps x the block's positions)
                stride = k.mul(k.mul(k.index(v.get("block_channels", block_channels)), len(g.taps)),
                               k.mul(rows_per_block, row_positions))
                columns = k.element(v["workspace"], b.mul(copy, k.index(stride)))
                one_group(0, {**v, "workspace": columns}, (b.mul(first, rows_per_block), stop))

            k.parallel_loop(copies, max(PARALLEL_MIN_WORK, g.out_channels * g.out_rows_estimate() * row_positions),
                            group_values, one_copy)
        else:
            # the groups of a pointwise convolution share nothing, so they may run on threads
            # (an im2col one fills the one workspace group by group)
            group_work = 0 if im2col or g.group < 2 else \
                g.out_channels * g.out_rows_estimate() * row_positions * group_channels
            k.parallel_loop(g.group, group_work, group_values, one_group)


def _at_most(k: Kernel, value: ir.Value, limit: int | ir.Value) -> ir.Value:
    """min(value, limit) for an i64 value."""
    limit = k.index(limit)
    return k.builder.select(k.builder.icmp_signed("<", value, limit), value, limit)


def preact_conv_sizes(site: dict[str, Any]) -> tuple[dict[str, Any], list[int]] | None:
    """A group-1 preact_conv with outputs runs im2col blocks whose code
    depends on the input channels and the planned scratch only through
    three numbers, which a shared kernel reads at run time: (the site with
    the channel dims and the workspace size None, [channels, block rows,
    block channels]). DenseNet's 1x1 preact_convs (61 sites, 64% of its
    IR) then share one function per image size. None for the sites that
    keep their own function (grouped: direct loops; without a workspace:
    register tiles or direct loops; nothing to compute)."""
    x_spec, scale_spec, shift_spec, w_spec = site["inputs"][:4]
    out_shape = site["outputs"][0]["shape"]
    if not _im2col(site) or math.prod(out_shape) == 0 or _without_columns(site):
        return None
    rows, block_channels = im2col_block(x_spec["shape"], w_spec["shape"], out_shape, 4, _workspace_bytes(site))
    general = json.loads(json.dumps(site))  # a deep copy of plain data
    x, scale, shift, w = general["inputs"][:4]
    x["shape"][1] = w["shape"][1] = None
    scale["shape"] = shift["shape"] = [None]
    general["workspace"]["shape"] = [None]
    return general, [x_spec["shape"][1], rows, block_channels]


@native_kernel("preact_conv", supports=supports_conv, shared_sizes=preact_conv_sizes)
def emit_preact_conv(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """conv(pre_act(x * pre_scale[c] + pre_shift[c]), w) + bias + residual,
    then the activation (pyocc.runtime.kernels.conv.preact_conv); for a
    site with "run_time_sizes" (`preact_conv_sizes`) the kernel shared by
    sites that differ only in them."""
    require_float32(site)
    x_spec, scale_spec, shift_spec, w_spec, bias_spec, residual_spec = site["inputs"]
    kwargs = site["kwargs"]
    k = Kernel(module, symbol)
    sizes: RunTimeSizes | None = None
    x_shape, w_shape = list(x_spec["shape"]), list(w_spec["shape"])
    if "run_time_sizes" in site:
        first = site["run_time_sizes"]
        buffers = k.function.args[0]
        sizes = RunTimeSizes(*(run_time_size(k.builder, buffers, first + i) for i in range(3)))
        # they stay None: nothing the shared kernel runs (the group-1 im2col path) reads Geometry's channels
    g = Geometry.of(x_shape, w_shape, site["outputs"][0]["shape"], kwargs)
    x, scale, shift, w, out = k.buffer(0), k.buffer(1), k.buffer(2), k.buffer(3), k.buffer(6)
    bias = k.buffer(4) if bias_spec is not None else None
    residual = k.buffer(5) if residual_spec is not None else None
    relu = kwargs.get("pre_activation") == "relu"

    def pre_activate(kernel: Kernel, channel: ir.Value, value: ir.Value) -> ir.Value:
        """pre_act(value * scale[channel] + shift[channel]), for a float32 or a VECTOR of them."""
        b = kernel.builder
        factor, offset = kernel.load(scale, channel), kernel.load(shift, channel)
        if isinstance(value.type, ir.VectorType):
            factor, offset = kernel.splat(factor), kernel.splat(offset)
        value = b.fadd(b.fmul(value, factor), offset)
        if not relu:
            return value
        zero = ir.Constant(value.type, [0.0] * value.type.count) if isinstance(value.type, ir.VectorType) \
            else F32(0.0)
        return b.select(b.fcmp_ordered(">", value, zero), value, zero)  # the activation's relu, lane by lane

    if sizes is not None:
        shapes = (x_shape, w_shape, site["outputs"][0]["shape"])
        _blas_conv(k, g, shapes, x, w, bias, residual, out, kwargs, True, k.buffer(7), transform=pre_activate,
                   sizes=sizes, keep=(scale, shift), copies=_workspace_copies(site))
    elif not (g.batch and g.out_positions and g.out_channels):
        pass
    elif g.group == 1 and not _without_columns(site):
        # pre-activated im2col blocks (padding stays zero) + sgemm
        shapes = (x_spec["shape"], w_spec["shape"], site["outputs"][0]["shape"])
        block_bytes = _workspace_bytes(site)
        _blas_conv(k, g, shapes, x, w, bias, residual, out, kwargs, True, k.buffer(7), block_bytes,
                   transform=pre_activate, keep=(scale, shift), copies=_workspace_copies(site))
    else:  # grouped, or no planned workspace for the pre-activated columns
        _read_in_place(k, g, x, w, bias, residual, out, kwargs, transform=pre_activate, keep=(scale, shift))
    k.finish()


@native_kernel("conv_transpose", supports=supports_conv)
def emit_conv_transpose(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX ConvTranspose with explicit pads (pyocc.runtime.kernels.conv.conv_transpose):
    out[o * ... ] += x[i] * w[c, m, tap] at o = i * stride + tap * dilation - pad."""
    require_float32(site)
    x_spec, w_spec, bias_spec = site["inputs"]
    kwargs = site["kwargs"]
    g = Geometry.of(x_spec["shape"], w_spec["shape"], site["outputs"][0]["shape"], kwargs, transpose=True)
    k = Kernel(module, symbol)
    x, w, out = k.buffer(0), k.buffer(1), k.buffer(3)
    bias = k.buffer(2) if bias_spec is not None else None
    b = k.builder
    channels_per_group = g.channels // g.group
    outs_per_group = g.out_channels // g.group
    taps = g.taps
    total = g.batch * g.out_channels * g.out_positions
    with k.loop(0, g.batch * g.out_channels) as plane:
        target = k.element(out, k.mul(plane, g.out_positions))
        channel = b.urem(plane, I64(g.out_channels)) if g.out_channels > 1 else 0
        value = k.load(bias, channel) if bias is not None else F32(0.0)
        with k.loop(0, g.out_positions) as i:
            k.store(value, target, i)
    if total == 0 or g.in_positions == 0:
        k.finish()
        return
    outer_in = list(g.in_spatial[:-1])
    outer_out = list(g.out_spatial[:-1])
    in_length, out_length = g.in_spatial[-1], g.out_spatial[-1]
    s_last, d_last, p_last = g.strides[-1], g.dilations[-1], g.pads_begin[-1]
    with k.loop(0, g.batch) as image:
        with k.loop(0, g.channels) as ic:
            group = b.udiv(ic, I64(channels_per_group)) if g.group > 1 else 0
            x_plane = k.element(x, k.add(k.mul(image, g.channels * g.in_positions), k.mul(ic, g.in_positions)))

            def row(ins: list[ir.Value]) -> None:
                x_row = k.element(x_plane, k.mul(_flat(k, ins, outer_in), in_length))
                with k.loop(0, outs_per_group) as ocl:
                    oc = k.add(k.mul(group, outs_per_group), ocl)
                    out_plane = k.element(out, k.add(k.mul(image, g.out_channels * g.out_positions),
                                                     k.mul(oc, g.out_positions)))
                    w_base = k.mul(k.add(k.mul(ic, outs_per_group), ocl), len(taps))
                    for tap_index, tap in enumerate(taps):
                        # output coord = input * s + tap * d - p; the valid inputs of the last dim
                        shift = tap[-1] * d_last - p_last
                        lo = 0
                        while lo < in_length and lo * s_last + shift < 0:
                            lo += 1
                        hi = lo
                        while hi < in_length and hi * s_last + shift < out_length:
                            hi += 1
                        if lo >= hi:
                            continue
                        coords: list[ir.Value] = []
                        inside: ir.Value | None = None
                        for axis, (i, t) in enumerate(zip(ins, tap[:-1], strict=True)):
                            coord = k.add(k.mul(i, g.strides[axis]), t * g.dilations[axis] - g.pads_begin[axis])
                            coords.append(coord)
                            test = k.in_range(k.index(coord), 0, g.out_spatial[axis])
                            inside = test if inside is None else b.and_(inside, test)

                        def scatter() -> None:
                            weight = k.load(w, k.add(w_base, tap_index))
                            out_row = k.element(out_plane, k.mul(_flat(k, coords, outer_out), out_length))
                            with k.loop(lo, hi) as i:
                                o = k.add(k.mul(i, s_last), shift)
                                k.store(b.fadd(k.load(out_row, o), b.fmul(weight, k.load(x_row, i))), out_row, o)

                        if inside is None:
                            scatter()
                        else:
                            with k.when(inside):
                                scatter()

            _outer_loops(k, outer_in, row)
    k.finish()

"""Kernel scratch of the host's native convolution, as plain arithmetic on shapes.

The native (LLVM IR) convolution of the host target runs a group-1
convolution (and each group of a grouped one with at least
GROUPED_BLAS_CHANNELS channels per group) as im2col + BLAS sgemm, a block
at a time: a block is some output rows (at least IM2COL_MIN_POSITIONS
positions, or the whole image) by some input channels, and its columns,
(block channels * kernel taps) x (block positions), are scratch, at most
`IM2COL_BLOCK_BYTES` (or one channel's columns, if more); the sgemm of a
block accumulates over the block's channels. Where they are not needed:
a pointwise stride-1 unpadded convolution multiplies the input itself, and
depthwise and narrow grouped convolutions run direct kernels. `ConvOp.scratch_bytes`
(pyocc/dialects/dnn/ops.py) declares this size on the op, so that
dnn-insert-memory-ops plans it as the op's `workspace` buffer; the emitter
(pyocc/lowering/native/conv.py) asks the same functions which algorithm
that buffer was sized for. No xDSL here: shapes and ints only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["GROUPED_BLAS_CHANNELS", "IM2COL_BLOCK_BYTES", "IM2COL_MIN_POSITIONS", "SGEMM_COLUMN_BLOCK",
           "SGEMM_PARALLEL_MACS", "SGEMM_ROW_BLOCK", "conv_algorithm", "conv_scratch_bytes", "im2col_block",
           "im2col_block_bytes", "im2col_block_rows", "im2col_copies", "im2col_row_bytes", "is_pointwise",
           "output_block_rows", "sgemm_split_block", "sgemm_splits"]

#: the most bytes of im2col columns a convolution fills before one sgemm
#: (measured in docs/performance.md: blocks this size run as fast as whole images)
IM2COL_BLOCK_BYTES = 1 << 20
#: the fewest output positions a block spans (whole rows; the image if it
#: has fewer): the sgemm repacks the weights once per block of positions,
#: so short blocks of a deep layer (VGG-19's 28x28 3x3 convs: 56 positions
#: of 4608 channel taps a block when blocks were whole-channel) spent a
#: third of the conv repacking (docs/performance.md)
IM2COL_MIN_POSITIONS = 512


#: a block of an sgemm split between threads (pyocc.lowering.native.dense_ir)
#: has a multiple of this many columns of C (a cache line of floats; what
#: decides the rounding is only that every part holds SGEMM_PARALLEL_MACS:
#: split at 16-column multiples, parts of 32x112x1152 .. 64x200x576
#: products matched the whole call bit for bit, while any part under 100^3
#: multiply-adds did not)
SGEMM_COLUMN_BLOCK = 16
#: ... and at least this many multiply-adds (above OpenBLAS's small-matrix
#: sizes); an sgemm is split when it has two blocks
SGEMM_PARALLEL_MACS = 1 << 20
#: a product with too few columns for two blocks (a convolution on a 7x7 or
#: 14x14 image) is split by rows of C instead, a multiple of this many each
SGEMM_ROW_BLOCK = 64


def sgemm_split_block(per_unit: int, unit: int) -> int:
    """Columns (rows) of C per part of a split sgemm whose columns (rows)
    cost `per_unit` multiply-adds each: a multiple of `unit`, holding at
    least SGEMM_PARALLEL_MACS."""
    block = -(-SGEMM_PARALLEL_MACS // max(per_unit, 1))
    return max(unit, -(-block // unit) * unit)


def sgemm_splits(m: int, n: int, k: int) -> bool:
    """Whether the native kernels split an m x n x k sgemm (C is m x n)
    between threads: it has two column blocks, or (with at least two row
    blocks of SGEMM_ROW_BLOCK) two row blocks."""
    by_columns = n >= 2 * sgemm_split_block(m * k, SGEMM_COLUMN_BLOCK)
    by_rows = m >= 2 * SGEMM_ROW_BLOCK and m >= 2 * sgemm_split_block(n * k, SGEMM_ROW_BLOCK)
    return by_columns or by_rows


def is_pointwise(kernel: Sequence[int], strides: Sequence[int] | None, pads: Sequence[int] | None) -> bool:
    """A 1x1 stride-1 unpadded convolution: a matrix product over the input as is."""
    return (all(k == 1 for k in kernel) and all(s == 1 for s in strides or ())
            and not any(pads or ()))


#: input channels per group from which a grouped convolution runs per-group
#: sgemms instead of direct loops (measured in docs/performance.md)
GROUPED_BLAS_CHANNELS = 8


def conv_algorithm(w_shape: Sequence[int], strides: Sequence[int] | None, pads: Sequence[int] | None,
                   group: int | None, shuffle: int | None = None) -> str:
    """How the native kernel runs a convolution of weights `w_shape`:
    "direct" (depthwise and narrow groups: loops, no BLAS), "pointwise" (one
    sgemm per image and group over the input) or "im2col" (a group's
    columns in scratch, then sgemm). A channel shuffle (`shuffle`, ConvOp)
    runs sgemm only when it stores each group's output channels evenly
    apart (its runs of M/shuffle channels hold whole groups), else direct."""
    groups, shuffle = group or 1, shuffle or 1
    if (groups != 1 and w_shape[1] < GROUPED_BLAS_CHANNELS) or (w_shape[0] // shuffle) % (w_shape[0] // groups):
        return "direct"
    if is_pointwise(w_shape[2:], strides, pads):
        return "pointwise"
    return "im2col"


def im2col_block(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int],
                 element_bytes: int, block_bytes: int | None = None) -> tuple[int, int]:
    """(rows, channels) of one im2col block (of at most `block_bytes`,
    default IM2COL_BLOCK_BYTES, or one channel's columns if more): output
    rows of the first spatial dim (a 1-D convolution has one row), as many
    as fit with all the group's channels (and no more than
    `output_block_rows`) but at least IM2COL_MIN_POSITIONS positions'
    worth, and the input channels (of a group) whose columns fill the
    block with those rows, spread evenly over the blocks."""
    block_bytes = IM2COL_BLOCK_BYTES if block_bytes is None else block_bytes
    spatial = _as_rows(out_shape[2:])
    row_positions = max(math.prod(spatial[1:]), 1)
    channel_row_bytes = math.prod(w_shape[2:]) * row_positions * element_bytes  # one channel's taps, one row
    channels = w_shape[1]
    # as many rows as fit with all channels, but no more than the outputs that fit beside them in cache
    # (a stem's few channel taps would otherwise make a block's outputs outgrow the cache)
    fit = min(block_bytes // max(channel_row_bytes * channels, 1), output_block_rows(w_shape, out_shape, element_bytes,
                                                                                     block_bytes))
    rows = min(spatial[0], max(fit, -(-IM2COL_MIN_POSITIONS // row_positions), 1))
    # ... and no more than one channel's columns fit (a planned block may hold as little as one row)
    rows = min(rows, max(1, block_bytes // max(channel_row_bytes, 1)))
    fitting = max(1, min(channels, block_bytes // max(channel_row_bytes * rows, 1)))
    blocks = -(-channels // fitting)
    return rows, -(-channels // blocks) if channels else 0


def output_block_rows(w_shape: Sequence[int], out_shape: Sequence[int], element_bytes: int,
                      block_bytes: int | None = None) -> int:
    """Output rows (first spatial dim) whose outputs, all channels, fill at
    most `block_bytes` (default IM2COL_BLOCK_BYTES), at least 1: the block
    a convolution finishes (bias, activation) while it is in cache."""
    block_bytes = IM2COL_BLOCK_BYTES if block_bytes is None else block_bytes
    spatial = _as_rows(out_shape[2:])
    return max(1, min(spatial[0], block_bytes // max(w_shape[0] * math.prod(spatial[1:]) * element_bytes, 1)))


def im2col_block_rows(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int],
                      element_bytes: int, block_bytes: int | None = None) -> int:
    """Output rows (first spatial dim; a 1-D convolution has one row) of
    one im2col block (`im2col_block`)."""
    return im2col_block(x_shape, w_shape, out_shape, element_bytes, block_bytes)[0]


def im2col_row_bytes(w_shape: Sequence[int], out_shape: Sequence[int], element_bytes: int) -> int:
    """Bytes of one output row's im2col columns (of one group): the smallest
    block the kernel runs, and the unit a planned block is a multiple of."""
    return w_shape[1] * math.prod(w_shape[2:]) * math.prod(_as_rows(out_shape[2:])[1:]) * element_bytes


def _as_rows(spatial: Sequence[int]) -> list[int]:
    """Spatial dims with a row dim in front: a 1-D image is one row."""
    return [1, *spatial] if len(spatial) == 1 else list(spatial)


def conv_scratch_bytes(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int],
                       strides: Sequence[int] | None, pads: Sequence[int] | None, group: int | None,
                       element_bytes: int, shuffle: int | None = None) -> int:
    """Bytes of one block of im2col columns, (C * taps) x (block rows *
    positions per row) elements; 0 when `conv_algorithm` needs no columns."""
    if conv_algorithm(w_shape, strides, pads, group, shuffle) != "im2col":
        return 0
    return im2col_block_bytes(x_shape, w_shape, out_shape, element_bytes)


def im2col_block_bytes(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int],
                       element_bytes: int) -> int:
    """Bytes of one im2col block of one group (whatever the algorithm)."""
    rows, channels = im2col_block(x_shape, w_shape, out_shape, element_bytes)
    return channels * math.prod(w_shape[2:]) * rows * math.prod(_as_rows(out_shape[2:])[1:]) * element_bytes


def im2col_copies(x_shape: Sequence[int], w_shape: Sequence[int], out_shape: Sequence[int], block_bytes: int,
                  threads: int) -> int:
    """How many copies of its im2col workspace (each `block_bytes`, the
    size the plan fitted for one thread) a group-1 convolution runs on
    `threads` threads: one per thread (at most one per block of output
    rows) when the sgemm of one block is too small to split between
    threads (`sgemm_splits`; a workspace fitted to little slack holds few
    positions or a slice of the channels), so that each thread runs whole
    blocks in its own copy, exactly as one thread runs them; otherwise 1
    (each block's sgemm is split instead)."""
    if threads < 2 or w_shape[1] * math.prod(w_shape[2:]) == 0 or math.prod(out_shape) == 0:
        return 1
    rows, channels = im2col_block(x_shape, w_shape, out_shape, 4, block_bytes)
    spatial = _as_rows(out_shape[2:])
    blocks = -(-spatial[0] // rows)
    if blocks < 2 or sgemm_splits(w_shape[0], rows * math.prod(spatial[1:]), channels * math.prod(w_shape[2:])):
        return 1
    return min(threads, blocks)

"""Data-movement host kernels: concat, split, slice, transpose, gathers,
scatter_nd, scatter_elements, expand, tile, pad, range, constant_of_shape,
the ordering kernels cum_sum and top_k, and dnn-tile's empty and insert_slice.

None of them computes new values, so each is one or a few numpy copies into
``out``. ``out`` must not overlap any input, except insert_slice's ``dest``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import numpy as np

__all__ = [
    "concat",
    "constant_of_shape",
    "empty",
    "cum_sum",
    "expand",
    "gather",
    "gather_elements",
    "gather_nd",
    "insert_slice",
    "pad",
    "range",
    "scatter_elements",
    "scatter_nd",
    "slice",
    "split",
    "tile",
    "top_k",
    "transpose",
]

# This module defines kernels named ``slice`` and ``range`` (the ONNX names);
# these aliases keep the builtins reachable inside it.
_slice = builtins.slice
_range = builtins.range


def _along(axis: int, index: _slice) -> tuple[_slice, ...]:
    """An index tuple that applies ``index`` on ``axis`` and takes all before it."""
    return (_slice(None),) * axis + (index,)


def concat(inputs: Sequence[np.ndarray], *, out: np.ndarray, axis: int) -> None:
    """ONNX Concat: copy each input into its band of ``out`` along ``axis``."""
    axis %= out.ndim
    offset = 0
    for part in inputs:
        length = part.shape[axis]
        out[_along(axis, _slice(offset, offset + length))] = part
        offset += length


def split(x: np.ndarray, *, outs: Sequence[np.ndarray], axis: int = 0) -> None:
    """ONNX Split: the split sizes are the outputs' lengths along ``axis``."""
    axis %= x.ndim
    offset = 0
    for part in outs:
        length = part.shape[axis]
        np.copyto(part, x[_along(axis, _slice(offset, offset + length))])
        offset += length


def onnx_axis_slice(start: int, end: int, step: int, dim: int) -> _slice:
    """Clamp one ONNX Slice range like the spec does and return a Python slice
    (the kernel below, and dnn-coalesce when it turns a slice into a view).

    Negative starts/ends count from the end; then starts clamp to [0, dim]
    (step > 0) or [0, dim - 1] (step < 0) and ends to [0, dim] or [-1, dim - 1].
    An end of -1 with a negative step means "past the first element", which a
    Python slice spells ``None``.
    """
    if step == 0:
        raise ValueError("slice: steps must be non-zero")
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start = min(max(start, 0), dim)
        end = min(max(end, 0), dim)
        return _slice(start, end, step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return _slice(start, None if end == -1 else end, step)


def slice(
    x: np.ndarray,
    *,
    out: np.ndarray,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
) -> None:
    """ONNX Slice (opset >= 10 inputs given as static lists), incl. negative
    steps and INT64_MAX / INT64_MIN ends."""
    axes = list(axes) if axes is not None else list(_range(len(starts)))
    steps = list(steps) if steps is not None else [1] * len(starts)
    index: list[_slice] = [_slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis %= x.ndim
        index[axis] = onnx_axis_slice(int(start), int(end), int(step), x.shape[axis])
    np.copyto(out, x[tuple(index)])


def transpose(x: np.ndarray, *, out: np.ndarray, perm: Sequence[int] | None = None) -> None:
    """ONNX Transpose; no ``perm`` reverses the axes."""
    np.copyto(out, np.transpose(x, perm))


def gather(x: np.ndarray, indices: np.ndarray, *, out: np.ndarray, axis: int = 0) -> None:
    """ONNX Gather: ``np.take`` along ``axis``; negative indices count from the end."""
    np.take(x, indices, axis=axis, out=out)


def _wrap_negative(indices: np.ndarray, dims: np.ndarray | int) -> np.ndarray:
    """Map ONNX's negative indices (-1 = last) onto [0, dim)."""
    return np.where(indices < 0, indices + dims, indices)


def gather_elements(x: np.ndarray, indices: np.ndarray, *, out: np.ndarray, axis: int = 0) -> None:
    """ONNX GatherElements: ``np.take_along_axis`` with negative indices wrapped."""
    axis %= x.ndim
    np.copyto(out, np.take_along_axis(x, _wrap_negative(indices, x.shape[axis]), axis=axis))


def gather_nd(x: np.ndarray, indices: np.ndarray, *, out: np.ndarray, batch_dims: int = 0) -> None:
    """ONNX GatherND: each row of ``indices`` (last dim k) addresses a slice of
    ``x`` within its batch (the first ``batch_dims`` dims are shared)."""
    batch_shape = x.shape[:batch_dims]
    batch = int(np.prod(batch_shape, dtype=np.int64))
    depth = indices.shape[-1]
    addressed = np.asarray(x.shape[batch_dims : batch_dims + depth])
    rows = _wrap_negative(indices.reshape(batch, -1, depth), addressed)
    data = x.reshape(batch, *x.shape[batch_dims:])
    batch_index = np.arange(batch).reshape(batch, 1)
    gathered = data[(batch_index,) + tuple(rows[..., i] for i in _range(depth))]
    np.copyto(out, gathered.reshape(out.shape))


def expand(x: np.ndarray, *, out: np.ndarray) -> None:
    """ONNX Expand: broadcast ``x`` to out's shape (the compiler folded the shape input)."""
    np.copyto(out, x)


def tile(x: np.ndarray, *, out: np.ndarray, repeats: Sequence[int]) -> None:
    """ONNX Tile, without a tiled temporary.

    Viewing out (contiguous) as (r0, d0, r1, d1, ...) turns tiling into one
    broadcast copy of x viewed as (1, d0, 1, d1, ...).
    """
    interleaved = [n for pair in zip(repeats, x.shape) for n in pair]
    x_view = x.reshape([n for d in x.shape for n in (1, d)])
    if out.flags.c_contiguous:
        np.copyto(out.reshape(interleaved), x_view)
    else:
        np.copyto(out, np.tile(x, repeats))


def pad(
    x: np.ndarray,
    *,
    out: np.ndarray,
    pads: Sequence[int],
    mode: str = "constant",
    value: float = 0.0,
) -> None:
    """ONNX Pad (modes constant, reflect, edge, wrap); pads are [begins..., ends...]
    and may be negative, which crops."""
    rank = x.ndim
    begins, ends = list(pads[:rank]), list(pads[rank:])
    # Negative pads crop first; what remains is a non-negative pad.
    crop = tuple(_slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begins, ends)))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
    if mode == "constant":
        # Fill then copy the interior: no padded temporary.
        out.fill(value)
        interior = tuple(_slice(b, b + n) for (b, _), n in zip(widths, x.shape))
        out[interior] = x
    elif mode in ("reflect", "edge", "wrap"):
        np.copyto(out, np.pad(x, widths, mode=mode))
    else:
        raise ValueError(f"pad: unknown mode {mode!r}; expected constant, reflect, edge or wrap")


def range(*, out: np.ndarray, start: float, delta: float) -> None:
    """ONNX Range; the limit is implied by out's length.

    onnxruntime accumulates ``value += delta`` step by step, so a cumulative
    sum in out's dtype reproduces its rounding exactly.
    """
    if out.size == 0:
        return
    out.fill(delta)
    out[0] = start
    np.cumsum(out, out=out)


def constant_of_shape(*, out: np.ndarray, value: float = 0.0) -> None:
    """ONNX ConstantOfShape: fill ``out`` with ``value``."""
    out.fill(value)


def empty(*, out: np.ndarray) -> None:
    """dnn.empty: ``out`` is the value; nothing is written (dnn.insert_slice
    fills it band by band)."""


def insert_slice(dest: np.ndarray, x: np.ndarray, *, out: np.ndarray, axis: int, offset: int) -> None:
    """dnn.insert_slice: ``dest`` with ``x`` written at [offset, offset + len)
    along ``axis``. ``out`` may be ``dest`` (the usual case, after
    dnn-coalesce): the copy is then skipped."""
    if not np.may_share_memory(out, dest):
        np.copyto(out, dest)
    out[_along(axis, _slice(offset, offset + x.shape[axis]))] = x


def scatter_nd(x: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, out: np.ndarray,
               reduction: str = "none") -> None:
    """ONNX ScatterND: ``out`` = ``x`` with ``out[indices[i]]`` replaced by
    (or combined by ``reduction``: add, mul, max, min with) ``updates[i]``,
    in index order, so a repeated index sees every update."""
    np.copyto(out, x)
    depth = indices.shape[-1]
    flat_indices = _wrap_negative(indices.reshape(-1, depth), np.array(x.shape[:depth]))
    flat_updates = updates.reshape((flat_indices.shape[0],) + x.shape[depth:])
    combine = {"none": None, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    if reduction not in combine:
        raise ValueError(f"scatter_nd: reduction must be one of {sorted(combine)}, got {reduction!r}")
    ufunc = combine[reduction]
    for index, update in zip(flat_indices, flat_updates, strict=True):
        where = tuple(int(i) for i in index)
        out[where] = update if ufunc is None else ufunc(out[where], update)


def cum_sum(x: np.ndarray, *, out: np.ndarray, axis: int = 0, exclusive: int = 0, reverse: int = 0) -> None:
    """ONNX CumSum along ``axis``: ``exclusive`` leaves each element out of
    its own sum, ``reverse`` sums from the end."""
    axis %= x.ndim
    source = np.flip(x, axis) if reverse else x
    target = np.flip(out, axis) if reverse else out  # a view: writing it writes out
    if exclusive:
        length = x.shape[axis]
        target[_along(axis, _slice(0, 1))] = 0
        if length > 1:
            np.cumsum(source[_along(axis, _slice(0, length - 1))], axis=axis,
                      out=target[_along(axis, _slice(1, length))])
    else:
        np.cumsum(source, axis=axis, out=target)


def top_k(x: np.ndarray, *, outs: Sequence[np.ndarray], axis: int = -1, largest: int = 1, sorted: int = 1) -> None:
    """ONNX TopK: ``outs`` = (values, int64 indices) of the k largest (or
    smallest) elements along ``axis``, k being their length there. Equal
    values keep the lower index first, as ONNX requires; the order is always
    sorted (ONNX leaves it unspecified when ``sorted`` is 0)."""
    del sorted  # a sorted result is one valid unsorted result
    values, indices = outs
    axis %= x.ndim
    k = values.shape[axis]
    if largest:
        # order by descending value with a stable sort: negate floats, and
        # flip integers bitwise (~v = -v - 1 never overflows)
        key = np.negative(x) if np.issubdtype(x.dtype, np.floating) else np.invert(x)
    else:
        key = x
    order = np.argsort(key, axis=axis, kind="stable")[_along(axis, _slice(0, k))]
    np.copyto(indices, order)
    np.copyto(values, np.take_along_axis(x, order, axis=axis))


def scatter_elements(x: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, out: np.ndarray,
                     axis: int = 0, reduction: str = "none") -> None:
    """ONNX ScatterElements: ``out`` = ``x`` with ``out[..., indices[i], ...]``
    (``indices`` along ``axis``) replaced by ``updates[i]``, or combined with
    it by ``reduction`` (add, mul, max, min); a repeated index sees every
    update, in order."""
    np.copyto(out, x)
    axis %= x.ndim
    index = _wrap_negative(indices, x.shape[axis])
    if reduction == "none":
        np.put_along_axis(out, index, updates, axis=axis)
        return
    combine = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    if reduction not in combine:
        raise ValueError(f"scatter_elements: reduction must be one of none, {', '.join(combine)}, got {reduction!r}")
    positions = list(np.indices(indices.shape))
    positions[axis] = index
    combine[reduction].at(out, tuple(positions), updates)

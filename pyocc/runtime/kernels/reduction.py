"""Reduction host kernels: the ONNX Reduce* family, ArgMax and ArgMin.

``out`` must not overlap the input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["arg_max", "arg_min", "reduce"]

_Axes = tuple[int, ...]


def _reduce_log_sum_exp(x: np.ndarray, axes: _Axes, keepdims: bool, out: np.ndarray) -> None:
    """log(sum(exp(x))), shifted by the max so large inputs do not overflow."""
    shift = np.max(x, axis=axes, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0).astype(x.dtype)  # all -inf: no shift
    np.sum(np.exp(x - shift), axis=axes, keepdims=keepdims, out=out)
    with np.errstate(divide="ignore"):
        np.log(out, out=out)
    out += shift.reshape(out.shape)


def _sum_then(post: np.ufunc | None, pre: np.ufunc | None) -> Callable[[np.ndarray, _Axes, bool, np.ndarray], None]:
    """Reduction = optional elementwise ``pre``, a sum, then optional ``post``."""

    def apply(x: np.ndarray, axes: _Axes, keepdims: bool, out: np.ndarray) -> None:
        np.sum(pre(x) if pre else x, axis=axes, keepdims=keepdims, out=out)
        if post:
            with np.errstate(divide="ignore"):
                post(out, out=out)

    return apply


def _numpy_reduction(function: Callable[..., np.ndarray]) -> Callable[[np.ndarray, _Axes, bool, np.ndarray], None]:
    """Adapt np.max/np.mean/... to the reduction calling convention."""

    def apply(x: np.ndarray, axes: _Axes, keepdims: bool, out: np.ndarray) -> None:
        function(x, axis=axes, keepdims=keepdims, out=out)

    return apply


_REDUCTIONS = {
    "sum": _numpy_reduction(np.sum),
    "mean": _numpy_reduction(np.mean),
    "max": _numpy_reduction(np.max),
    "min": _numpy_reduction(np.min),
    "prod": _numpy_reduction(np.prod),
    "l1": _sum_then(None, np.abs),
    "l2": _sum_then(np.sqrt, np.square),
    "sum_square": _sum_then(None, np.square),
    "log_sum": _sum_then(np.log, None),
    "log_sum_exp": _reduce_log_sum_exp,
}


def reduce(
    x: np.ndarray,
    *,
    out: np.ndarray,
    fn: str,
    axes: Sequence[int] | None = None,
    keepdims: int = 1,
    noop_with_empty_axes: int = 0,
) -> None:
    """ONNX Reduce<fn> with fn in sum, mean, max, min, prod, l1, l2,
    sum_square, log_sum, log_sum_exp.

    ``axes`` None or empty reduces every axis, unless ``noop_with_empty_axes``
    is set, in which case an empty ``axes`` copies the input.
    """
    if fn not in _REDUCTIONS:
        raise ValueError(f"reduce: unknown fn {fn!r}; expected one of {sorted(_REDUCTIONS)}")
    if not axes:
        if axes is not None and noop_with_empty_axes:
            np.copyto(out, x)
            return
        axes = range(x.ndim)
    normalised = tuple(sorted({a % x.ndim for a in axes}))
    _REDUCTIONS[fn](x, normalised, bool(keepdims), out)


def _arg_extreme(
    finder: Callable[..., np.ndarray], x: np.ndarray, out: np.ndarray, axis: int, select_last_index: int
) -> None:
    """Shared ArgMax/ArgMin: numpy returns the first extreme; for the last one
    search the reversed axis and map the index back."""
    if select_last_index:
        reversed_index = finder(np.flip(x, axis=axis), axis=axis, keepdims=True)
        index = x.shape[axis] - 1 - reversed_index
    else:
        index = finder(x, axis=axis, keepdims=True)
    np.copyto(out, index.reshape(out.shape))


def arg_max(x: np.ndarray, *, out: np.ndarray, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> None:
    """ONNX ArgMax into an int64 ``out`` (its shape encodes keepdims)."""
    del keepdims  # encoded in out.shape
    _arg_extreme(np.argmax, x, out, axis, select_last_index)


def arg_min(x: np.ndarray, *, out: np.ndarray, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> None:
    """ONNX ArgMin into an int64 ``out`` (its shape encodes keepdims)."""
    del keepdims  # encoded in out.shape
    _arg_extreme(np.argmin, x, out, axis, select_last_index)

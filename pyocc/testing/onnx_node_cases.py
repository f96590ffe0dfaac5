"""onnx's backend node test cases, loaded without onnx's slowest loop.

onnx builds its node test cases when their modules are first imported:
each case computes its expected outputs with onnx's reference. The
reference pooling (`onnx.reference.ops.op_pool_common.pool`) loops in
Python over every output element and, for each, over its window: the three
3-D `*pool_3d_default` cases (1x3x32x32x32) take 12.6 of the 15.8 CPU s
the import costs, paid by every test process that collects the node tests.

`node_test_cases` imports them with that function replaced by `pool`
below, which computes the same windows with numpy (sliding window views)
where a pool has no padding and no dilation, and calls onnx's own function
otherwise. tests/backend/test_onnx_node_cases.py checks the two against
each other."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import onnx.reference.ops.op_pool_common as op_pool_common

_reference_pool: Callable[..., np.ndarray] = op_pool_common.pool


def _unpadded(padded: np.ndarray, x_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
              out_shape: Sequence[int], pads_required: Sequence[int] | None, pads: Sequence[int] | None,
              dilations: Sequence[int] | None) -> bool:
    """Whether every window lies inside the input, undilated, and the
    output is exactly the windows the reference visits: the case `pool`
    computes with numpy."""
    spatial = len(x_shape) - 2
    steps = list(strides or [1] * spatial)
    return (tuple(padded.shape) == tuple(x_shape)
            and all(p == 0 for p in (pads_required if pads_required is not None else []))
            and all(p == 0 for p in (pads if pads is not None else []))
            and all(d == 1 for d in (dilations if dilations is not None else []))
            and len(kernel) == len(steps) == len(out_shape) == spatial
            and all(out == (size - k) // s + 1
                    for out, size, k, s in zip(out_shape, x_shape[2:], kernel, steps, strict=True))
            and not np.isnan(padded).any())


def pool(padded: np.ndarray, x_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
         out_shape: Sequence[int], pooling_type: str, pads_required: Sequence[int] | None = None,
         pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None, count_include_pad: int = 0,
         p: int = 1) -> np.ndarray:
    """`onnx.reference.ops.op_pool_common.pool`, with the same arguments
    and result; an unpadded, undilated pool is computed on numpy's sliding
    window views (the same reduction of each window: `np.average`, `np.max`
    or `sum(|x| ** p) ** (1 / p)`), any other by onnx's function."""
    if not _unpadded(padded, x_shape, kernel, strides, out_shape, pads_required, pads, dilations):
        return _reference_pool(padded, x_shape, kernel, strides, out_shape, pooling_type, pads_required, pads,
                               dilations, count_include_pad, p)
    spatial = len(x_shape) - 2
    steps = list(strides or [1] * spatial)
    windows = np.lib.stride_tricks.sliding_window_view(padded, tuple(kernel), axis=tuple(range(2, 2 + spatial)))
    windows = windows[(slice(None), slice(None), *(slice(None, None, s) for s in steps))]
    values = windows.reshape(*windows.shape[:2 + spatial], -1)
    if pooling_type == "AVG":
        y = np.average(values, axis=-1)
    elif pooling_type == "MAX":
        y = np.max(values, axis=-1)
    elif pooling_type == "LPPOOL":
        y = np.sum(np.abs(values) ** p, axis=-1) ** (1.0 / p)
    else:
        return _reference_pool(padded, x_shape, kernel, strides, out_shape, pooling_type, pads_required, pads,
                               dilations, count_include_pad, p)
    return y.astype(padded.dtype)


@contextlib.contextmanager
def _numpy_pool() -> Iterator[None]:
    """onnx's reference `pool` replaced by `pool` above while the node case
    modules import it (each binds the function by name at its import)."""
    op_pool_common.pool = pool
    try:
        yield
    finally:
        op_pool_common.pool = _reference_pool


def node_test_cases() -> list[Any]:
    """onnx's node test cases (`load_model_tests(kind="node")`, a list of
    onnx's TestCase), their pools' expected outputs computed by `pool`
    above. onnx keeps the list: the first call in a process builds it, and
    later calls (and onnx's own `load_model_tests`, `BackendTest`) return
    the same list."""
    from onnx.backend.test.loader import load_model_tests  # noqa: PLC0415 - imports the case modules' package

    with _numpy_pool():
        return load_model_tests(kind="node")

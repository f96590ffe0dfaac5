"""pyocc.testing.onnx_node_cases: the numpy pool that builds onnx's node
test cases computes what onnx's reference pool computes, so the node tests'
expected outputs are still onnx's."""

from __future__ import annotations

import numpy as np
import pytest

from pyocc.testing import onnx_node_cases
from pyocc.testing.onnx_node_cases import node_test_cases, pool


def _reference(*args, **kwargs) -> np.ndarray:
    return onnx_node_cases._reference_pool(*args, **kwargs)


@pytest.mark.parametrize("pooling_type", ["AVG", "MAX", "LPPOOL"])
@pytest.mark.parametrize("x_shape, kernel, strides", [
    ((2, 3, 9), [3], [2]),
    ((1, 2, 7, 6), [2, 3], [1, 2]),
    ((1, 2, 6, 5, 7), [2, 2, 3], [1, 2, 2]),
    ((1, 1, 5, 4, 6), [2, 2, 2], None),
])
def test_an_unpadded_pool_is_the_references(pooling_type: str, x_shape: tuple[int, ...], kernel: list[int],
                                            strides: list[int] | None) -> None:
    x = np.random.default_rng(0).standard_normal(x_shape).astype(np.float32)
    steps = strides or [1] * len(kernel)
    out_shape = [(size - k) // s + 1 for size, k, s in zip(x_shape[2:], kernel, steps, strict=True)]
    want = _reference(x, x_shape, kernel, strides, out_shape, pooling_type, p=3)
    got = pool(x, x_shape, kernel, strides, out_shape, pooling_type, p=3)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_a_padded_pool_is_left_to_the_reference() -> None:
    # MaxPool 2-D with pads: the input is padded with NaN, which the reference skips
    x_shape, kernel, strides, pads = (1, 1, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1]
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.nan)
    args = (padded, x_shape, kernel, strides, [3, 3], "MAX", pads, pads)
    np.testing.assert_array_equal(pool(*args), _reference(*args))


def test_a_3d_node_case_expects_the_references_output() -> None:
    """test_maxpool_3d_default (1x3x32x32x32, one of the three cases whose
    reference pool took 12 CPU s) against the reference on a corner."""
    cases = {case.name: case for case in node_test_cases()}
    (x,), (y,) = cases["test_maxpool_3d_default"].data_sets[0]
    assert x.shape == (1, 3, 32, 32, 32) and y.shape == (1, 3, 31, 31, 31)
    head = x[:, :, :4, :4, :4]
    np.testing.assert_array_equal(y[:, :, :3, :3, :3],
                                  _reference(head, head.shape, [2, 2, 2], [1, 1, 1], [3, 3, 3], "MAX"))


def test_the_node_cases_were_built_with_the_numpy_pool() -> None:
    """Collection imported onnx's pool case modules inside node_test_cases:
    a module that loads onnx's node cases first (load_model_tests,
    BackendTest) would build them with the reference pool again, 12 CPU s
    per test process."""
    node_test_cases()
    import onnx.backend.test.case.node.averagepool as averagepool
    import onnx.backend.test.case.node.lppool as lppool
    import onnx.backend.test.case.node.maxpool as maxpool

    assert averagepool.pool is lppool.pool is maxpool.pool is pool

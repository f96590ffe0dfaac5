"""Each speed path of the conv and pooling kernels against onnxruntime.

The kernels pick an algorithm by shape (im2col, tap accumulation, the two
depthwise forms, separable pooling); the small cases of test_host_kernels.py
do not reach all of them. Every case first asserts which path its shape
takes, so the test cannot silently stop covering it, then compares with
onnxruntime on random data, into a garbage-filled ``out``.
"""

from __future__ import annotations

import numpy as np
import pytest

from pyocc.runtime import host_kernels as hk
from pyocc.runtime.kernels import conv as conv_module
from pyocc.runtime.kernels._window import Window
from tests.runtime.test_host_kernels import assert_matches, ort_run, randn, run_kernel


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def _conv_against_ort(rng: np.random.Generator, x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                      attrs: dict) -> None:
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    (want,) = ort_run("Conv", {"x": x, "w": w, "b": b}, attrs)
    got = run_kernel(hk.conv, want, x, w, b, strides=attrs.get("strides"), pads=attrs.get("pads"),
                     dilations=attrs.get("dilations"), group=attrs.get("group", 1))
    assert_matches(got, want)


def _window(w_shape: tuple[int, ...], attrs: dict) -> Window:
    return Window.from_onnx(w_shape[2:], attrs.get("strides"), attrs.get("pads"), attrs.get("dilations"))


TAP_ACCUMULATION_CASES = [
    pytest.param((1, 32, 12, 12), (8, 32, 3, 3), dict(pads=[1, 1, 1, 1]), id="3x3-narrowing"),
    pytest.param((2, 16, 11, 13), (4, 16, 3, 3), dict(pads=[1, 2, 0, 1]), id="batch2-asymmetric-pads"),
    pytest.param((1, 16, 14, 12), (6, 16, 3, 2), dict(pads=[2, 1, 2, 1], dilations=[2, 3]), id="dilated"),
    pytest.param((1, 16, 9, 9), (8, 16, 3, 3), {}, id="unpadded"),
    pytest.param((1, 8, 50, 50), (8, 8, 3, 3), dict(pads=[1, 1, 1, 1]), id="equal-channels-large-image"),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", TAP_ACCUMULATION_CASES)
def test_conv_tap_accumulation(rng: np.random.Generator, x_shape, w_shape, attrs) -> None:
    out_spatial = _out_spatial(x_shape, w_shape, attrs)
    out = np.empty((x_shape[0], w_shape[0], *out_spatial), np.float32)
    assert conv_module._prefers_tap_accumulation(np.empty(x_shape, np.float32), np.empty(w_shape, np.float32),
                                                 out, _window(w_shape, attrs), 1)
    _conv_against_ort(rng, x_shape, w_shape, attrs)


def test_conv_widening_keeps_im2col() -> None:
    x, w = np.empty((1, 8, 20, 20), np.float32), np.empty((32, 8, 3, 3), np.float32)
    out = np.empty((1, 32, 20, 20), np.float32)
    assert not conv_module._prefers_tap_accumulation(x, w, out, _window(w.shape, dict(pads=[1] * 4)), 1)


DEPTHWISE_CASES = [
    # (x, w, attrs, whether the per-channel grid is small enough for the matmul form)
    pytest.param((1, 6, 12, 12), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1]), True, id="small-matmul"),
    pytest.param((2, 4, 9, 9), (8, 1, 3, 3), dict(group=4, pads=[1, 1, 1, 1], strides=[2, 2]), True,
                 id="small-matmul-multiplier2-s2"),
    pytest.param((1, 4, 40, 40), (4, 1, 3, 3), dict(group=4, pads=[1, 1, 1, 1]), False, id="large-per-tap"),
    pytest.param((2, 3, 70, 66), (6, 1, 3, 3), dict(group=3, pads=[1, 0, 2, 1], strides=[2, 1],
                                                     dilations=[1, 2]), False, id="large-per-tap-multiplier2"),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs, small", DEPTHWISE_CASES)
def test_conv_depthwise_forms(rng: np.random.Generator, x_shape, w_shape, attrs, small: bool) -> None:
    out_spatial = _out_spatial(x_shape, w_shape, attrs)
    window = _window(w_shape, attrs)
    reach = [(k - 1) * d // s for k, d, s in zip(window.kernel, window.dilations, window.strides)]
    span = out_spatial[0] * (out_spatial[1] + reach[1])  # the grid _conv_depthwise sweeps
    assert (span <= conv_module.DEPTHWISE_MATMUL_SPAN) == small
    _conv_against_ort(rng, x_shape, w_shape, attrs)


POOL_CASES = [
    pytest.param("MaxPool", (1, 5, 21, 21), dict(kernel_shape=[3, 3], strides=[2, 2]), id="max-3x3-s2"),
    pytest.param("MaxPool", (2, 3, 14, 15), dict(kernel_shape=[3, 2], strides=[1, 2], pads=[1, 0, 1, 1]),
                 id="max-rect-pads"),
    pytest.param("MaxPool", (1, 2, 13, 12), dict(kernel_shape=[2, 3], strides=[2, 2], dilations=[2, 2],
                                                 pads=[1, 1, 1, 1]), id="max-dilated"),
    pytest.param("MaxPool", (1, 2, 11, 11), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
                 id="max-ceil"),
    pytest.param("MaxPool", (1, 2, 7, 6, 5), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2]), id="max-3d"),
    pytest.param("AveragePool", (1, 4, 15, 15), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                 id="avg-pads-exclude"),
    pytest.param("AveragePool", (1, 4, 15, 15), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                                     count_include_pad=1), id="avg-pads-include"),
    pytest.param("AveragePool", (2, 3, 9), dict(kernel_shape=[4], strides=[3], pads=[1, 2]), id="avg-1d"),
]


@pytest.mark.parametrize("op_type, x_shape, attrs", POOL_CASES)
def test_pool_separable(rng: np.random.Generator, op_type: str, x_shape, attrs) -> None:
    x = randn(rng, *x_shape)
    (want,) = ort_run(op_type, {"x": x}, attrs)
    kernel = hk.max_pool if op_type == "MaxPool" else hk.average_pool
    got = run_kernel(kernel, want, x, **attrs)  # the ONNX attribute names are the kernel's
    assert_matches(got, want)


def _out_spatial(x_shape: tuple[int, ...], w_shape: tuple[int, ...], attrs: dict) -> list[int]:
    """ONNX Conv output size per spatial axis (explicit pads)."""
    window = _window(w_shape, attrs)
    return [
        (size + b + e - ((k - 1) * d + 1)) // s + 1
        for size, k, s, d, b, e in zip(x_shape[2:], window.kernel, window.strides, window.dilations,
                                       window.pads_begin, window.pads_end)
    ]

"""Property tests: random geometries for the kernels whose index arithmetic
is easiest to get wrong (conv, pooling, slice), against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("onnxruntime")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pyocc.runtime import host_kernels as hk  # noqa: E402
from tests.runtime.test_host_kernels import assert_matches, garbage, ort_run  # noqa: E402

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def window_geometry(draw: st.DrawFn, max_rank: int = 2) -> dict:
    """A valid sliding-window geometry (at least one output per axis)."""
    rank = draw(st.integers(1, max_rank))
    kernel = [draw(st.integers(1, 4)) for _ in range(rank)]
    strides = [draw(st.integers(1, 3)) for _ in range(rank)]
    dilations = [draw(st.integers(1, 2)) for _ in range(rank)]
    pads = [draw(st.integers(0, k - 1)) for k in kernel * 2]  # ONNX pools need pad < kernel
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    sizes = [draw(st.integers(max(1, s - pads[i] - pads[i + rank]), 9)) for i, s in enumerate(spans)]
    return dict(kernel=kernel, strides=strides, dilations=dilations, pads=pads, sizes=sizes)


@SETTINGS
@given(geometry=window_geometry(), layout=st.sampled_from(["dense", "grouped", "depthwise"]), seed=st.integers(0, 99))
def test_conv_random_geometry(geometry: dict, layout: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    group, in_per_group, out_per_group = {"dense": (1, 3, 4), "grouped": (2, 2, 3), "depthwise": (3, 1, 2)}[layout]
    x = rng.standard_normal((2, group * in_per_group, *geometry["sizes"])).astype(np.float32)
    w = rng.standard_normal((group * out_per_group, in_per_group, *geometry["kernel"])).astype(np.float32)
    attrs = {k: geometry[k] for k in ("strides", "dilations", "pads")} | {"group": group}
    (want,) = ort_run("Conv", {"x": x, "w": w}, attrs)
    out = garbage(want.shape, np.float32)
    hk.conv(x, w, out=out, **attrs)
    assert_matches(out, want)


@SETTINGS
@given(geometry=window_geometry(), ceil_mode=st.integers(0, 1), include_pad=st.integers(0, 1), seed=st.integers(0, 99))
def test_pools_random_geometry(geometry: dict, ceil_mode: int, include_pad: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((1, 2, *geometry["sizes"])).astype(np.float32)
    common = dict(kernel_shape=geometry["kernel"], strides=geometry["strides"], pads=geometry["pads"], ceil_mode=ceil_mode)
    (want,) = ort_run("MaxPool", {"x": x}, common | {"dilations": geometry["dilations"]})
    out = garbage(want.shape, np.float32)
    hk.max_pool(x, out=out, dilations=geometry["dilations"], **common)
    assert_matches(out, want)

    (want,) = ort_run("AveragePool", {"x": x}, common | {"count_include_pad": include_pad})
    out = garbage(want.shape, np.float32)
    hk.average_pool(x, out=out, count_include_pad=include_pad, **common)
    assert_matches(out, want)


BOUND = st.one_of(st.integers(-9, 9), st.sampled_from([np.iinfo(np.int64).max, np.iinfo(np.int64).min]))


@SETTINGS
@given(
    starts=st.lists(BOUND, min_size=2, max_size=2),
    ends=st.lists(BOUND, min_size=2, max_size=2),
    steps=st.lists(st.sampled_from([-3, -2, -1, 1, 2, 3]), min_size=2, max_size=2),
    axes=st.sampled_from([[0, 1], [1, 2], [-1, 0], [2, -3]]),
)
def test_slice_random_bounds(starts: list[int], ends: list[int], steps: list[int], axes: list[int]) -> None:
    # onnxruntime reads an INT64_MAX end with a negative step as "run to the
    # start" (e.g. ORT gives x[0:INT64_MAX:-3] one element); the ONNX spec
    # clamps it to dim - 1 (an empty slice here), as the kernel does.
    hypothesis.assume(not any(e == np.iinfo(np.int64).max and s < 0 for e, s in zip(ends, steps)))
    x = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    i64 = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    (want,) = ort_run("Slice", {"x": x, "s": i64(starts), "e": i64(ends), "a": i64(axes), "t": i64(steps)})
    out = garbage(want.shape, np.float32)
    hk.slice(x, out=out, starts=starts, ends=ends, axes=axes, steps=steps)
    assert_matches(out, want)

"""dnn-recompute end to end: programs that compute cheap values again at
their late readers match onnxruntime on random weights, pass the plan
verifier (dnn-memory-pool verifies every plan; run_passes checks lifetimes
after each pass) and the sanitizer, and `memory_limit` keeps a
recomputation only when the planned pool goes down."""

from __future__ import annotations

import numpy as np
import pytest

import pyocc
from pyocc.api import _limit_rank, lower
from pyocc.errors import PyoccError
from pyocc.examples.tiny_cnn import build as tiny_cnn
from pyocc.report.explain import explain_peak
from pyocc.report.timeline import build_timeline
from pyocc.testing.fake_cuda import FakeCuda
from tests.graphs import random_inputs, unet_skips

ort = pytest.importorskip("onnxruntime")


def _check(model, **options) -> pyocc.api.MemoryReport:
    inputs = random_inputs(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled = pyocc.compile(model, **options)
    outputs = list(compiled.run(inputs).values())
    for got, want in zip(outputs, session.run(None, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return compiled.memory_report()


@pytest.mark.parametrize("sanitize", [False, True])
def test_unet_min_recomputes_the_upsample_and_matches_onnxruntime(sanitize: bool) -> None:
    model = unet_skips()
    _, given = lower(model, sanitize=sanitize)
    report = _check(model, memory_limit="min", sanitize=sanitize)
    # the last upsample's 512 KiB output no longer lives across the head conv:
    # it is made again from its 128 KiB input before the residual add
    assert report.recomputed == ["up_top"]
    assert report.activation_bytes < given.activation_bytes
    assert report.lower_bound_bytes == given.lower_bound_bytes  # the untransformed program's bound
    assert report.tiled_lower_bound_bytes is not None and report.tiled_lower_bound_bytes < given.lower_bound_bytes
    assert report.recompute_ops == 32 * 64 * 64 * 4  # the resize's elements, 4 ops each (its Recomputable trait)
    assert report.macs == given.macs and report.extra_macs == 0.0  # a resize declares no MACs
    assert "recompute        up_top again at late readers: 524,288 element ops, +0.0% MACs" in str(report)


def test_named_recomputations_match_onnxruntime_with_the_sanitizer() -> None:
    # the long skip normed = relu(bn(image)) too, which the search leaves out (it does not lower this plan)
    report = _check(unet_skips(), recompute="normed,up_top", sanitize=True)
    assert report.recomputed == ["normed", "up_top"]


def test_a_byte_limit_recomputes_only_as_needed() -> None:
    model = unet_skips()
    _, given = lower(model)
    _, fits = lower(model, memory_limit=given.activation_bytes)
    assert fits.recomputed == [] and fits.activation_bytes == given.activation_bytes
    _, report = lower(model, memory_limit=given.activation_bytes - 1)
    assert report.recomputed == ["up_top"] and report.activation_bytes < given.activation_bytes
    with pytest.raises(PyoccError, match=r"the smallest reached, with up_top recomputed$"):
        lower(model, memory_limit=1 << 20)


def test_explain_says_what_was_recomputed() -> None:
    module, report = lower(unet_skips(), memory_limit="min")
    text = explain_peak(build_timeline(module, report))
    assert "recomputed at late readers: up_top" in text
    assert f"the lower bound, {report.tiled_lower_bound_bytes / 2**20:.2f} MiB" in text


def test_nothing_is_recomputed_where_it_does_not_help() -> None:
    _, report = lower(tiny_cnn(), memory_limit="min")
    assert report.recomputed == [] and report.recompute_ops == 0


def test_a_bad_value_name_is_one_line() -> None:
    with pytest.raises(PyoccError, match=r"^dnn-recompute: no value named %skip in @main_graph; name an op result"):
        lower(unet_skips(), recompute="skip")


def test_the_greedy_search_keeps_only_what_lowers_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    # with the exact search off, the candidates are tried in order of work:
    # normed (32,768 element ops) first, which does not lower this plan, then up_top
    monkeypatch.setattr("pyocc.rewrites.dnn_recompute_search.EXACT_CANDIDATES", 0)
    _, report = lower(unet_skips(), memory_limit="min")
    assert report.recomputed == ["up_top"]


def test_recomputation_runs_on_the_cuda_stand_in() -> None:
    model = unet_skips()
    _, given = lower(model, target="cuda", workspace=0)
    report = _check(model, target="cuda", cuda_libraries=FakeCuda(), workspace=0, memory_limit="min")
    assert report.recomputed == ["up_top"] and report.activation_bytes < given.activation_bytes


def test_memory_limit_ranks_ways_by_fit_then_least_work() -> None:
    """--memory-limit compares recomputation (+ tiling) with tiling alone:
    with min the smaller pool wins; with a byte limit whatever fits, then
    the least extra work (a cached halo's zero beats a recomputation)."""
    assert _limit_rank("min", 900, 10) < _limit_rank("min", 1000, 0)
    assert _limit_rank("min", 900, 0) < _limit_rank("min", 900, 10)
    assert _limit_rank(1000, 1000, 0) < _limit_rank(1000, 800, 10)  # both fit: less work
    assert _limit_rank(1000, 1000, 50) < _limit_rank(1000, 1200, 0)  # only one fits
    assert _limit_rank(1000, 1100, 50) < _limit_rank(1000, 1200, 0)  # neither: the smaller

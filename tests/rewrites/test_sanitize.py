"""The plan sanitizer (dnn-sanitize, `pyocc run --sanitize`): silent on a
correct plan, loud on a wrong one."""

from __future__ import annotations

import numpy as np
import pytest

import pyocc
from pyocc.rewrites import dnn_memory_pool
from pyocc.errors import PyoccError
from pyocc.examples.tiny_cnn import build
from pyocc.planning import Plan
from pyocc.testing.random_graphs import compare_with_onnxruntime, random_inputs

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("memory", ["eager", "lazy", "pool"])
def test_a_correct_plan_runs_clean(memory: str) -> None:
    model = build()
    assert compare_with_onnxruntime(model, random_inputs(model, 0), memory=memory, sanitize=True) is None


def test_an_overlapping_plan_shows_nan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every buffer at offset 0 (the verifier bypassed): the poison of dead
    buffers spreads into live ones, and the output is NaN, not a plausible
    wrong number."""

    def everything_at_zero(problem, algorithm="auto", **_):  # noqa: ANN001, ANN202 - planner signature
        size = max((b.size for b in problem.buffers), default=0)
        return Plan({b.name: 0 for b in problem.buffers}, size, "broken", False, 0.0)

    # where dnn-memory-pool calls it (it imports the planner at module level)
    monkeypatch.setattr(dnn_memory_pool, "plan_memory", everything_at_zero)
    model = build()
    # without kernel scratch: a convolution's im2col block at offset 0 would
    # trip a live buffer's guard bytes first (the next test's error)
    outputs = pyocc.compile(model, memory="pool", sanitize=True, scratch=False).run(random_inputs(model, 0))
    assert np.isnan(outputs["y"]).any()


def test_an_out_of_bounds_write_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that writes one float past its output is stopped by the guard
    check, which names the buffer and the op."""
    import ctypes

    from pyocc.runtime import host_kernels

    real_max_pool = host_kernels.max_pool

    def overflowing_max_pool(*args, out, **kwargs):  # noqa: ANN002, ANN003, ANN202 - kernel signature
        real_max_pool(*args, out=out, **kwargs)
        ctypes.memmove(out.__array_interface__["data"][0] + out.nbytes, b"\x00\x00\x00\x00", 4)

    monkeypatch.setattr(host_kernels, "max_pool", overflowing_max_pool)
    model = build()
    # the numpy kernels, so that the patched max_pool is the one that runs
    compiled = pyocc.compile(model, memory="pool", sanitize=True, kernels="numpy")
    with pytest.raises(PyoccError, match=r"sanitizer: dnn.max_pool wrote past the end of buffer 'pool'"):
        compiled.run(random_inputs(model, 0))

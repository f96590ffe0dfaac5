"""Shared pytest fixtures: the light models that ship inside the onnx wheel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pyocc.testing.light_models import LIGHT_MODELS, light_model_path  # noqa: F401 - re-exported for the tests


@pytest.fixture(params=LIGHT_MODELS)
def light_model(request: pytest.FixtureRequest) -> Path:
    """Each of the nine light models in turn."""
    return light_model_path(request.param)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked `gpu` skip, saying why, where no GPU is usable for
    target=cuda (no CUDA libraries, no driver, no device); with
    PYOCC_REQUIRE_GPU=1 (bench/gpu_check.sh on the GPU machine) they fail
    instead, so a check that was meant to run on a GPU cannot pass by skipping."""
    if item.get_closest_marker("gpu") is not None:
        from pyocc.runtime.cuda import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason is not None:
            if os.environ.get("PYOCC_REQUIRE_GPU") == "1":
                pytest.fail(reason, pytrace=False)
            pytest.skip(reason)

"""Shared pytest fixtures: the light models that ship inside the onnx wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyocc.testing.light_models import LIGHT_MODELS, light_model_path  # noqa: F401 - re-exported for the tests


@pytest.fixture(params=LIGHT_MODELS)
def light_model(request: pytest.FixtureRequest) -> Path:
    """Each of the nine light models in turn."""
    return light_model_path(request.param)

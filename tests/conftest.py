"""Shared pytest fixtures: the light models that ship inside the onnx wheel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

LIGHT_MODELS = [
    "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
    "shufflenet", "squeezenet", "vgg19", "zfnet512",
]


def light_model_path(name: str) -> Path:
    """Path of `light_<name>.onnx` inside the installed onnx package."""
    import onnx

    return Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


@pytest.fixture(params=LIGHT_MODELS)
def light_model(request: pytest.FixtureRequest) -> Path:
    """Each of the nine light models in turn."""
    return light_model_path(request.param)

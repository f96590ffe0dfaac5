"""pyocc.testing.light_models.random_weights_file: a write that fails
half-way (a full disk) does not break the next call in the process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import onnx
import pytest
from onnx import numpy_helper

from pyocc.testing import light_models


def test_a_write_that_failed_half_way_is_written_again(monkeypatch: pytest.MonkeyPatch) -> None:
    real = light_models._random_weights

    def fails_after_one(model: onnx.ModelProto, seed: int) -> Iterator[Any]:
        weights = real(model, seed)
        yield next(weights)
        raise OSError(28, "No space left on device")

    seed = 12345  # a folder no other test in this process uses
    monkeypatch.setattr(light_models, "_random_weights", fails_after_one)
    with pytest.raises(OSError, match="No space left"):
        light_models.random_weights_file("squeezenet", seed)
    monkeypatch.setattr(light_models, "_random_weights", real)
    path = light_models.random_weights_file("squeezenet", seed)
    model = onnx.load(str(path))  # with its external data
    original = onnx.load(str(light_models.light_model_path("squeezenet")))
    wanted = [node.output[0] for node in original.graph.node if node.op_type == "ConstantOfShape"]
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert wanted and set(wanted) <= set(arrays)
    assert all(arrays[name].size > 0 and arrays[name].any() for name in wanted)

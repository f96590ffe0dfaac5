"""End to end on the CPU: light models with their ConstantOfShape weights
replaced by seeded random ones (constant weights hide aliasing bugs) match
onnxruntime in every memory mode. A wrong plan shows up here as wrong numbers.

Weights are drawn in float32 straight into the model (He-style scale
sqrt(2 / fan_in), so activations neither vanish nor saturate the final
softmax); that keeps AlexNet, ZFNet-512 and VGG-19, whose fully connected
weights are 250-550 MB of random numbers, within seconds each. Each model is
built and run by onnxruntime once and shared by its memory modes.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import pyocc
from tests.conftest import light_model_path

ort = pytest.importorskip("onnxruntime")

CASES = [
    ("squeezenet", "eager"), ("squeezenet", "lazy"), ("squeezenet", "pool"),
    ("shufflenet", "eager"), ("shufflenet", "lazy"), ("shufflenet", "pool"),
    ("inception_v1", "lazy"), ("inception_v1", "pool"),
    ("resnet50", "pool"), ("densenet121", "pool"), ("inception_v2", "lazy"),
    ("inception_v2", "pool"),  # concat elimination and in-place chains in the pool
    ("bvlc_alexnet", "eager"), ("bvlc_alexnet", "lazy"), ("bvlc_alexnet", "pool"),
    ("zfnet512", "eager"), ("zfnet512", "lazy"), ("zfnet512", "pool"),
    ("vgg19", "eager"), ("vgg19", "lazy"), ("vgg19", "pool"),
]


def with_random_weights(name: str, seed: int = 0) -> onnx.ModelProto:
    """The light model with every ConstantOfShape output turned into a random
    float32 initializer, uniform with mean 0 and variance 2 / fan_in for
    weights, 0.01 for vectors, and variances kept positive so batch norm
    stays finite."""
    model = onnx.load(str(light_model_path(name)))
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape":
            nodes.append(node)
            continue
        shape = [int(d) for d in numpy_helper.to_array(inits[node.input[0]])]
        std = math.sqrt(2.0 / math.prod(shape[1:])) if len(shape) > 1 else 0.1
        # uniform with that std: a quarter of standard_normal's cost on VGG's 143M weights
        w = rng.random(shape, dtype=np.float32)
        w -= np.float32(0.5)
        w *= np.float32(std * math.sqrt(12.0))
        if "var" in node.output[0] or node.output[0].endswith("_riv_0"):
            w = np.abs(w) + np.float32(0.5)
        # filled in place: numpy_helper.from_array + append would copy it twice more
        tensor = model.graph.initializer.add()
        tensor.name, tensor.data_type = node.output[0], onnx.TensorProto.FLOAT
        tensor.dims.extend(shape)
        tensor.raw_data = w.tobytes()
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


@lru_cache(maxsize=1)  # the modes of one model run in a row; keep one model alive
def reference(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    """The model with random weights, seeded random inputs, and onnxruntime's outputs."""
    model = with_random_weights(name)
    rng = np.random.default_rng(1)
    init_names = {t.name for t in model.graph.initializer}
    inputs = {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input if i.name not in init_names
    }
    options = ort.SessionOptions()
    options.log_severity_level = 3
    expected = ort.InferenceSession(model.SerializeToString(), options).run(None, inputs)
    return model, inputs, expected


@pytest.mark.parametrize("name, memory", CASES)
def test_matches_onnxruntime(name: str, memory: str) -> None:
    model, inputs, expected = reference(name)
    compiled = pyocc.compile(model, memory=memory)
    got = compiled.run(inputs)
    for value, want in zip(got.values(), expected):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
    report = compiled.memory_report()
    # Compiled with the default dnn-reorder: never above the given order.
    assert report.lower_bound_bytes <= report.lower_bound_given_order_bytes
    if memory == "pool":
        assert report.allocator_calls_per_run == 1
        assert report.activation_bytes <= report.lower_bound_bytes + 64 * len(report.buffers)
    elif memory == "lazy":
        assert report.allocator_calls_per_run == len(report.buffers)

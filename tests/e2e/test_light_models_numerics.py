"""End to end on the CPU: light models with their ConstantOfShape weights
replaced by seeded random ones (constant weights hide aliasing bugs) match
onnxruntime in every memory mode. A wrong plan shows up here as wrong numbers.

AlexNet, ZFNet-512 and VGG-19 are left out of CI: their fully connected
weights (250-550 MB of random numbers each) make the run too slow for CI's
two cores; `bench/` covers them."""

from __future__ import annotations

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
]


def with_random_weights(name: str, seed: int = 0) -> onnx.ModelProto:
    """The light model with every ConstantOfShape output turned into a random
    initializer (variances kept positive so batch norm stays finite)."""
    model = onnx.load(str(light_model_path(name)))
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape":
            nodes.append(node)
            continue
        shape = [int(d) for d in numpy_helper.to_array(inits[node.input[0]])]
        w = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if "var" in node.output[0] or node.output[0].endswith("_riv_0"):
            w = np.abs(w) + 0.5
        model.graph.initializer.append(numpy_helper.from_array(w, node.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


@pytest.mark.parametrize("name, memory", CASES)
def test_matches_onnxruntime(name: str, memory: str) -> None:
    model = with_random_weights(name)
    compiled = pyocc.compile(model, memory=memory)
    rng = np.random.default_rng(1)
    init_names = {t.name for t in model.graph.initializer}
    inputs = {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input if i.name not in init_names
    }
    options = ort.SessionOptions()
    options.log_severity_level = 3
    expected = ort.InferenceSession(model.SerializeToString(), options).run(None, inputs)
    got = compiled.run(inputs)
    for value, want in zip(got.values(), expected):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
    report = compiled.memory_report()
    if memory == "pool":
        assert report.allocator_calls_per_run == 1
        assert report.activation_bytes <= report.lower_bound_bytes + 64 * len(report.buffers)
    elif memory == "lazy":
        assert report.allocator_calls_per_run == len(report.buffers)

"""The nine "light" models that ship inside the onnx wheel, and the recipe
that makes them worth running: random weights.

The light models carry their weights as ConstantOfShape nodes (one value per
tensor). Constant weights hide aliasing bugs (two tensors sharing bytes give
the same numbers), so tests and benchmarks replace them with seeded random
ones. One recipe, used by the tests and the benches alike.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

LIGHT_MODELS = [
    "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
    "shufflenet", "squeezenet", "vgg19", "zfnet512",
]


def light_model_path(name: str) -> Path:
    """Path of `light_<name>.onnx` inside the installed onnx package."""
    return Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


def with_random_weights(name: str, seed: int = 0) -> onnx.ModelProto:
    """The light model with every ConstantOfShape output turned into a random
    float32 initializer, uniform with mean 0 and variance 2 / fan_in for
    weights (so activations neither vanish nor saturate the final softmax),
    0.01 for vectors, and variances kept positive so batch norm stays finite."""
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
        data = w.tobytes()
        del w  # VGG-19's fc6 is 411 MB: never hold the array, its bytes and the proto's copy at once
        tensor.raw_data = data
        del data
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def random_inputs_for(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded standard-normal float32 arrays for the graph inputs of `model`
    that are not initializers."""
    rng = np.random.default_rng(seed)
    init_names = {t.name for t in model.graph.initializer}
    return {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input if i.name not in init_names
    }


def onnxruntime_reference(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    """Light model `name` with random weights, its seeded inputs, and
    onnxruntime's outputs on the CPU: what every numerics check compares with.
    (onnxruntime is a test dependency; it is imported here only.)"""
    import onnxruntime as ort  # a test dependency only: pyocc itself runs without it

    model = with_random_weights(name)
    inputs = random_inputs_for(model)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.enable_cpu_mem_arena = False  # give the activations back when the session goes
    # From a file, not SerializeToString(): one copy of the weights fewer in
    # memory while onnxruntime loads them (VGG-19: 548 MB).
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    outputs = session.run(None, inputs)
    del session
    return model, inputs, outputs

"""The nine "light" models that ship inside the onnx wheel, and the recipe
that makes them worth running: random weights.

The light models carry their weights as ConstantOfShape nodes (one value per
tensor). Constant weights hide aliasing bugs (two tensors sharing bytes give
the same numbers), so tests and benchmarks replace them with seeded random
ones. One recipe, used by the tests and the benches alike.
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
from collections.abc import Iterator
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


def _random_weights(model: onnx.ModelProto, seed: int) -> Iterator[tuple[str, list[int], np.ndarray]]:
    """(name, shape, array) for every ConstantOfShape output of `model`, in
    graph order: seeded uniform random float32 weights with mean 0 and
    variance 2 / fan_in (so activations neither vanish nor saturate the
    final softmax), 0.01 for vectors, and variances kept positive so batch
    norm stays finite. Each array is new; the caller may keep or drop it."""
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape":
            continue
        shape = [int(d) for d in numpy_helper.to_array(inits[node.input[0]])]
        std = math.sqrt(2.0 / math.prod(shape[1:])) if len(shape) > 1 else 0.1
        # uniform with that std: a quarter of standard_normal's cost on VGG's 143M weights
        w = rng.random(shape, dtype=np.float32)
        w -= np.float32(0.5)
        w *= np.float32(std * math.sqrt(12.0))
        if "var" in node.output[0] or node.output[0].endswith("_riv_0"):
            w = np.abs(w) + np.float32(0.5)
        yield node.output[0], shape, w


def _without_constant_of_shape(model: onnx.ModelProto) -> None:
    nodes = [node for node in model.graph.node if node.op_type != "ConstantOfShape"]
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def with_random_weights(name: str, seed: int = 0) -> onnx.ModelProto:
    """The light model with every ConstantOfShape output turned into a random
    float32 initializer (see _random_weights), held in the proto. For the
    models with large weights, random_weights_file holds them once instead."""
    model = onnx.load(str(light_model_path(name)))
    for output, shape, w in _random_weights(model, seed):
        # filled in place: numpy_helper.from_array + append would copy it twice more
        tensor = model.graph.initializer.add()
        tensor.name, tensor.data_type = output, onnx.TensorProto.FLOAT
        tensor.dims.extend(shape)
        data = w.tobytes()
        del w  # VGG-19's fc6 is 411 MB: never hold the array, its bytes and the proto's copy at once
        tensor.raw_data = data
        del data
    _without_constant_of_shape(model)
    return model


@functools.cache
def _folder() -> tempfile.TemporaryDirectory[str]:
    """Where random_weights_file writes: one folder per process, removed at exit."""
    return tempfile.TemporaryDirectory(prefix="pyocc-light-models-")


#: external data offsets are page-aligned, so that readers may map each tensor
_PAGE = 4096


def random_weights_file(name: str, seed: int = 0) -> Path:
    """The light model with random weights (the same as with_random_weights),
    saved with its weights as ONNX external data: `<name>_<seed>/model.onnx`
    and `model.onnx.data` beside it, in a folder of this process's, written
    on the first call and reused after. Each tensor is drawn and written
    straight to the data file, so memory never holds more than one; readers
    given the path (onnxruntime, pyocc.compile) need not hold a proto with
    every weight."""
    folder = Path(_folder().name) / f"{name}_{seed}"
    path = folder / "model.onnx"
    if path.exists():
        return path
    # model.onnx is written last, so a folder without it is a write that failed
    # half-way (a full disk): write it again from the start
    folder.mkdir(exist_ok=True)
    model = onnx.load(str(light_model_path(name)))
    with open(folder / "model.onnx.data", "wb") as data:
        for output, shape, w in _random_weights(model, seed):
            data.write(b"\0" * (-data.tell() % _PAGE))
            offset = data.tell()
            w.tofile(data)
            tensor = model.graph.initializer.add()
            tensor.name, tensor.data_type = output, onnx.TensorProto.FLOAT
            tensor.dims.extend(shape)
            tensor.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", "model.onnx.data"), ("offset", str(offset)), ("length", str(w.nbytes))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            del w
    _without_constant_of_shape(model)
    onnx.save(model, str(path))
    return path


def random_inputs_for(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded standard-normal float32 arrays for the graph inputs of `model`
    that are not initializers."""
    rng = np.random.default_rng(seed)
    init_names = {t.name for t in model.graph.initializer}
    return {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input if i.name not in init_names
    }


def onnxruntime_reference(name: str) -> tuple[Path, dict[str, np.ndarray], list[np.ndarray]]:
    """Light model `name` with random weights (random_weights_file: the
    path of a model whose weights lie beside it, for pyocc.compile or
    pyocc.lower), its seeded inputs, and onnxruntime's outputs on the CPU:
    what every numerics check compares with. onnxruntime reads the weights
    from the file, and nothing here keeps them: the weights are in memory
    once while onnxruntime runs, and once in the compiled model later.
    Computed once per process (a few MB each are kept); the arrays are
    read-only, since every caller shares them."""
    path, inputs, outputs = _onnxruntime_reference(name)
    return path, dict(inputs), list(outputs)


@functools.cache
def _onnxruntime_reference(name: str) -> tuple[Path, dict[str, np.ndarray], list[np.ndarray]]:
    import onnxruntime as ort  # a test dependency only: pyocc itself runs without it

    path = random_weights_file(name)
    inputs = random_inputs_for(onnx.load(str(path), load_external_data=False))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    # one thread: a test worker runs one test at a time, and pool threads
    # spin while they wait (two workers already fill a two-core machine)
    options.intra_op_num_threads = 1
    options.enable_cpu_mem_arena = False  # give the activations back when the session goes
    # onnxruntime maps the page-aligned external data; prepacking would copy every
    # matrix product's weights besides (VGG-19: 0.5 GB twice at once)
    options.add_session_config_entry("session.disable_prepacking", "1")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    outputs = session.run(None, inputs)
    del session
    for array in [*inputs.values(), *outputs]:
        array.flags.writeable = False
    return path, inputs, outputs

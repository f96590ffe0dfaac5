"""pyocc.backend's own behaviour: the ONNX Backend API, the compile-on-first-run
specialisation rule (dynamic dimensions, shape-like graph inputs), its
cache, and its errors. Numbers are checked against onnxruntime with seeded
random inputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import pyocc.backend
from pyocc.errors import PyoccError

ort = pytest.importorskip("onnxruntime")


def reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs for `feeds`."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def dynamic_batch_model(seed: int = 0) -> onnx.ModelProto:
    """y = relu(x @ W + b), x of shape [N, 8] with N dynamic; z = x + 1."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    one = numpy_helper.from_array(np.ones(1, np.float32), "one")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["pre"]),
         helper.make_node("Relu", ["pre"], ["y"]),
         helper.make_node("Add", ["x", "one"], ["z"])],
        "dynamic_batch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 8])],
        [w, b, one],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def reshape_by_input_model() -> onnx.ModelProto:
    """out = Reshape(x, shape) * 2 with `shape` a graph input (not an initializer)."""
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("Mul", ["r", "two"], ["out"])],
        "reshape_by_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [two],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("memory", ["pool", "lazy", "eager"])
def test_dynamic_batch_compiles_per_shape_and_matches_onnxruntime(memory: str) -> None:
    model = dynamic_batch_model()
    rep = pyocc.backend.prepare(model, "CPU", memory=memory)
    assert rep.compiled == {}, "prepare must not compile"
    rng = np.random.default_rng(1)
    for batch in (3, 5, 3):
        x = rng.standard_normal((batch, 8)).astype(np.float32)
        y, z = rep.run([x])
        expected_y, expected_z = reference(model, {"x": x})
        np.testing.assert_allclose(y, expected_y, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(z, expected_z, rtol=1e-4, atol=1e-5)
    assert len(rep.compiled) == 2, "batch 3 twice must reuse one compiled model"


def test_shape_input_is_frozen_per_value() -> None:
    model = reshape_by_input_model()
    rep = pyocc.backend.prepare(model)
    assert rep.frozen_inputs == {"shape"}
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    for shape in ([6, 4], [4, 6], [6, 4]):
        (out,) = rep.run([x, np.array(shape, np.int64)])
        np.testing.assert_allclose(out, x.reshape(shape) * 2, rtol=1e-6)
    assert len(rep.compiled) == 2, "the same shape value must reuse its compiled model"


def test_shape_computed_from_an_input_is_frozen() -> None:
    """pads = Concat(k, k) computed from graph input k: k is frozen too."""
    graph = helper.make_graph(
        [helper.make_node("Concat", ["k", "k"], ["pads"], axis=0),
         helper.make_node("Pad", ["x", "pads"], ["y"], mode="constant")],
        "pad_by_input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    assert pyocc.backend.compile_time_inputs(model) == {"k"}
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    k = np.array([1, 2], np.int64)
    (y,) = pyocc.backend.run_model(model, [x, k])
    np.testing.assert_allclose(y, np.pad(x, [(1, 1), (2, 2)]), rtol=1e-6)


def test_shape_only_use_does_not_freeze() -> None:
    """Reshape(x, Shape(y)): only y's shape is needed, not its values."""
    graph = helper.make_graph(
        [helper.make_node("Shape", ["y"], ["s"]),
         helper.make_node("Reshape", ["x", "s"], ["out"])],
        "shape_only",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert pyocc.backend.compile_time_inputs(model) == set()
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 6)).astype(np.float32)
    rep = pyocc.backend.prepare(model)
    for _ in range(2):
        (out,) = rep.run([x, rng.standard_normal((3, 4)).astype(np.float32)])
        np.testing.assert_array_equal(out, x.reshape(3, 4))
    assert len(rep.compiled) == 1, "new values of y (same shape) must not recompile"


def test_outputs_by_position_and_by_name_and_dict_inputs() -> None:
    model = dynamic_batch_model()
    x = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)
    outputs = pyocc.backend.prepare(model).run({"x": x})
    np.testing.assert_array_equal(outputs["z"], outputs[1])
    np.testing.assert_allclose(outputs["z"], x + 1, rtol=1e-6)


def test_run_node() -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    (c,) = pyocc.backend.run_node(helper.make_node("Sub", ["a", "b"], ["c"]), [a, b])
    np.testing.assert_allclose(c, a - b, rtol=1e-6)


def test_devices() -> None:
    assert pyocc.backend.supports_device("CPU")
    assert not pyocc.backend.supports_device("CUDA")
    assert not pyocc.backend.supports_device("TPU")
    with pytest.raises(PyoccError, match="device 'CUDA'"):
        pyocc.backend.prepare(dynamic_batch_model(), "CUDA")


@pytest.mark.parametrize("kwargs, message", [
    ({"memory": "static"}, "memory mode must be one of"),
    ({"optimise": True}, "unknown backend option"),
])
def test_bad_options(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(PyoccError, match=message):
        pyocc.backend.prepare(dynamic_batch_model(), "CPU", **kwargs)


def test_bad_inputs() -> None:
    rep = pyocc.backend.prepare(dynamic_batch_model())
    x = np.zeros((2, 8), np.float32)
    with pytest.raises(PyoccError, match="takes 1 input"):
        rep.run([x, x])
    with pytest.raises(PyoccError, match="missing"):
        rep.run({"y": x})
    with pytest.raises(PyoccError, match="dimension 1 to 7"):
        rep.run([np.zeros((2, 7), np.float32)])


def test_large_compile_time_input_is_refused() -> None:
    model = reshape_by_input_model()
    rep = pyocc.backend.prepare(model)
    x = np.zeros((2, 3, 4), np.float32)
    huge = np.ones(pyocc.backend.FROZEN_INPUT_LIMIT + 1, np.int64)
    with pytest.raises(PyoccError, match="decides a shape at compile time"):
        rep.run([x, huge])

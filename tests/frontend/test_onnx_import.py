"""The ONNX frontend: light models import and round-trip, op counts match
the file, and every bad input gets one clear line."""

from __future__ import annotations

import collections
import gc
import mmap
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from xdsl.dialects.builtin import DenseResourceAttr, ModuleOp

import pyocc
from pyocc.errors import PyoccError
from pyocc.frontend import onnx_import
from pyocc.frontend.onnx_import import import_model
from pyocc.weights import load_bytes
from tests.conftest import light_model_path
from tests.tools.inprocess import run_tool

PYOCC_OPT = str(Path(sys.executable).with_name("pyocc-opt"))

#: ops that the importer may fold into constants, so their count can shrink
CONSTANT_LIKE = {"ConstantOfShape", "Constant", "Unsqueeze", "Shape", "Reshape"}


def op_counts(module) -> collections.Counter:
    return collections.Counter(
        op.name.removeprefix("onnx.") for op in module.walk() if op.name.startswith("onnx.")
    )


def test_light_model_imports_with_matching_op_counts(light_model: Path) -> None:
    model = onnx.load(str(light_model))
    expected = collections.Counter(n.op_type for n in model.graph.node)
    got = op_counts(import_model(model))
    for op_type, count in expected.items():
        if op_type in CONSTANT_LIKE:
            continue
        assert got[op_type] == count, op_type
    # Weights are either kept as ConstantOfShape or folded into constants.
    assert got["ConstantOfShape"] + got["Constant"] >= 1


def test_light_model_round_trips_through_pyocc_opt(light_model: Path, tmp_path: Path) -> None:
    """In this process (each call with its own empty weights store, as a
    fresh process has); test_random_weights_round_trip_byte_exact below
    runs the round trip as real processes."""
    first = run_tool(PYOCC_OPT, str(light_model))
    assert first.returncode == 0, first.stderr
    second = run_tool(PYOCC_OPT, stdin=first.stdout)
    assert second.returncode == 0, second.stderr
    assert first.stdout == second.stdout
    assert len(first.stdout) < 250_000  # readable: weights are not printed in full


def make_model(nodes, inputs, outputs, initializers=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_random_weights_round_trip_byte_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    model = make_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 5, 5])],
        [numpy_helper.from_array(w, "w")],
    )
    path = tmp_path / "conv.onnx"
    onnx.save(model, str(path))
    text = subprocess.run([PYOCC_OPT, str(path)], capture_output=True, text=True, check=True).stdout
    assert "dense_resource<w>" in text
    again = subprocess.run([PYOCC_OPT], input=text, capture_output=True, text=True, check=True).stdout
    assert again == text
    blob = text.split('w: "0x')[1].split('"')[0]
    assert bytes.fromhex(blob)[4:] == w.tobytes()


def test_opset_forms_are_normalised_to_properties() -> None:
    # Unsqueeze axes: an attribute at opset 11, an input at opset 13.
    for opset, node, inits in [
        (11, helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0]), []),
        (13, helper.make_node("Unsqueeze", ["x", "axes"], ["y"]),
         [numpy_helper.from_array(np.array([0], dtype=np.int64), "axes")]),
    ]:
        model = make_model(
            [node],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
            inits, opset=opset,
        )
        text = str(import_model(model))
        assert '"onnx.Unsqueeze"(%x) <{axes = array<i64: 0>}>' in text, text


def test_shape_computations_fold_away() -> None:
    # Reshape(x, Concat(Shape(x)[0], -1)) as exporters write it.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
         numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"),
         numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1")],
    )
    module = import_model(model)
    assert dict(op_counts(module)) == {"Reshape": 1}
    assert "tensor<2x12xf32>" in str(module)


def test_op_without_lowering_folds_when_its_inputs_are_constant() -> None:
    """Hardmax has no dnn lowering, but a one-hot mask built by Hardmax from
    a constant folds away at import; on a run-time input it is rejected."""
    ones = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "ones")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])
    folded = make_model([helper.make_node("Hardmax", ["ones"], ["hot"]),
                         helper.make_node("Mul", ["x", "hot"], ["y"])], [x], [y], [ones])
    assert dict(op_counts(import_model(folded))) == {"Constant": 1, "Mul": 1}
    runtime = make_model([helper.make_node("Hardmax", ["x"], ["y"])], [x], [y])
    with pytest.raises(PyoccError, match="unsupported op Hardmax"):
        import_model(runtime)


def test_a_fold_computes_quietly_what_the_model_computes() -> None:
    """A constant fold runs the model's own arithmetic: T5's relative
    position buckets take log(0) = -inf and cast it to an integer, which
    onnxruntime does without a word. The import folds it without printing
    numpy's floating-point warnings, which the user can do nothing about."""
    positions = numpy_helper.from_array(np.arange(4, dtype=np.float32), "positions")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    model = make_model([helper.make_node("Log", ["positions"], ["log"]),
                        helper.make_node("Cast", ["log"], ["bucket"], to=TensorProto.INT64),
                        helper.make_node("Cast", ["bucket"], ["scale"], to=TensorProto.FLOAT),
                        helper.make_node("Mul", ["x", "scale"], ["y"])], [x], [y], [positions])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dict(op_counts(import_model(model))) == {"Constant": 1, "Mul": 1}


def _run_opt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYOCC_OPT, *args], capture_output=True, text=True)


#: case -> the line pyocc-opt prints (docs/guide.md's troubleshooting table
#: shows each; tests/docs/test_guide.py checks it does)
BAD_INPUT_MESSAGES = [
    ("missing", "no such file"),
    ("truncated", "not a valid ONNX model"),
    ("garbage", "not a valid ONNX model"),
    ("unsupported_op", "unsupported op GridSample"),
    ("foreign_domain", "of domain 'com.microsoft'"),
    ("dynamic_dim", "has a dynamic dimension 0 ('N'); fix it with --shape x=1x3"),
    ("bad_shape_flag", "--shape names 'nope', which is not a graph input"),
    ("range_at_run_time", "Range node 'r': input 'limit' must be a constant"),
]


@pytest.mark.parametrize("case, message", BAD_INPUT_MESSAGES)
def test_bad_input_gets_one_clear_line(case: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    args: list[str] = [str(path)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    if case == "truncated":
        path.write_bytes(light_model_path("squeezenet").read_bytes()[:1000])
    elif case == "garbage":
        path.write_bytes(b"\x00\xffnot a model at all" * 10)
    elif case == "unsupported_op":
        onnx.save(make_model([helper.make_node("GridSample", ["x", "x"], ["y"])], [x], [y]), str(path))
    elif case == "foreign_domain":
        model = make_model([helper.make_node("FusedGemm", ["x"], ["y"], domain="com.microsoft")], [x], [y])
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        onnx.save(model, str(path))
    elif case == "dynamic_dim":
        xd = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
        onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"])], [xd], [y]), str(path))
    elif case == "bad_shape_flag":
        onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]), str(path))
        args += ["--shape", "nope=1x3"]
    elif case == "range_at_run_time":
        # (the graph's output is Relu(x): an output of unknown shape is refused first)
        n = helper.make_tensor_value_info("n", TensorProto.INT64, [])
        model = make_model([helper.make_node("Range", ["zero", "n", "one"], ["positions"], name="r"),
                            helper.make_node("Relu", ["x"], ["y"])], [x, n], [y])
        model.graph.initializer.extend([numpy_helper.from_array(np.array(v, np.int64), name)
                                        for name, v in (("zero", 0), ("one", 1))])
        onnx.save(model, str(path))
    result = _run_opt(*args)
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]


def test_dynamic_dimension_fixed_by_the_user() -> None:
    xd = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    module = import_model(make_model([helper.make_node("Relu", ["x"], ["y"])], [xd], [y]), {"x": (4, 3)})
    assert "tensor<4x3xf32>" in str(module)
    with pytest.raises(PyoccError, match="dynamic dimension"):
        import_model(make_model([helper.make_node("Relu", ["x"], ["y"])], [xd], [y]))


def test_output_file_is_not_written_on_error(tmp_path: Path) -> None:
    out = tmp_path / "out.mlir"
    result = _run_opt(str(tmp_path / "missing.onnx"), "-o", str(out))
    assert result.returncode != 0 and not out.exists()


def _save_with_external_weights(path: Path) -> np.ndarray:
    """A conv whose weight is stored as ONNX external data next to `path`
    (`path.name + ".data"`); returns the weight."""
    w = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g", [x], [y],
                              [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path),
              save_as_external_data=True, location=path.name + ".data", size_threshold=0)
    return w


def test_external_weights_are_memory_mapped_and_match(tmp_path: Path) -> None:
    """A model whose weights lie in a file beside it: the importer maps the
    file instead of reading it (the blob store holds a memmap), and the
    compiled model computes the same as onnx's reference on the inlined
    weight; the module still prints the weight after compiling evicted it."""
    path = tmp_path / "m.onnx"
    w = _save_with_external_weights(path)
    module = import_model(path)
    (attr,) = [value for op in module.walk() if op.name == "onnx.Constant"
               for value in [op.properties.get("value")] if hasattr(value, "resource_handle")]
    data = load_bytes(attr)
    np.testing.assert_array_equal(np.frombuffer(data, np.float32).reshape(w.shape), w)
    base = data.obj  # the array the store holds, a view of ... of the mapped file
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    assert isinstance(base, mmap.mmap)
    x = np.random.default_rng(4).standard_normal((1, 3, 8, 8)).astype(np.float32)
    compiled = pyocc.compile(path)
    (got,) = compiled.run({"x": x}).values()
    (want,) = ReferenceEvaluator(onnx.load(str(path))).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # compiling gave back the mapped pages (pyocc.weights.evict_mapped): reading pages them in again
    (attr,) = [value for op in compiled.module.walk() for value in op.properties.values()
               if hasattr(value, "resource_handle")]
    assert bytes(load_bytes(attr)) == w.tobytes()


def _held(path: Path) -> tuple[int, int]:
    """(mappings, open descriptors) of this process on the file at `path`."""
    target = str(path.resolve())
    maps = sum(1 for line in Path("/proc/self/maps").read_text().splitlines() if line.endswith(" " + target))
    fds = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            fds += fd.readlink() == Path(target)
        except OSError:
            pass  # the descriptor listing the folder itself
    return maps, fds


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc/self/maps and /proc/self/fd")
def test_external_weights_file_is_mapped_once_and_let_go_with_the_model(tmp_path: Path) -> None:
    """The importer maps a model's data file once, however many weights it
    holds (a mapping and a descriptor each would pile up in a long-lived
    process: a test worker held 837); dropping the compiled model lets go
    of it, so compiling the model again and again holds no more."""
    rng = np.random.default_rng(5)
    weights = [rng.standard_normal((8, 8)).astype(np.float32) for _ in range(6)]
    nodes, value = [], "x"
    for i in range(len(weights)):
        nodes.append(helper.make_node("MatMul", [value, f"w{i}"], [f"h{i}"]))
        value = f"h{i}"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info(value, TensorProto.FLOAT, [2, 8])],
                              [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(weights)])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path),
              save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    data = tmp_path / "m.onnx.data"
    x = rng.standard_normal((2, 8)).astype(np.float32)
    want = x
    for w in weights:
        want = want @ w
    for _ in range(3):
        compiled = pyocc.compile(path)
        assert _held(data) == (1, 1)
        (got,) = compiled.run({"x": x}).values()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        del compiled
        gc.collect()
        assert _held(data) == (0, 0)


def test_missing_external_weights_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    _save_with_external_weights(path)
    (tmp_path / "m.onnx.data").unlink()
    with pytest.raises(PyoccError, match=r"initializer 'w' keeps its data in 'm.onnx.data', which is not in "
                                         r".*; put that file next to the model$"):
        import_model(path)


def test_truncated_external_weights_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    _save_with_external_weights(path)
    data = tmp_path / "m.onnx.data"
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(PyoccError, match=r"initializer 'w' needs 432 bytes at offset 0 of 'm.onnx.data', which "
                                         r"holds 100 bytes; the file is truncated or not this model's$"):
        import_model(path)


def test_imports_that_share_folds_give_the_programs_imported_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A symbolic compile's probes import one model at several values and
    share the importer's folds (`import_model(folds=...)`): a fold whose
    inputs are the same (the transposed table) is evaluated once, one
    whose inputs follow the value (the table's rows up to the length) at
    every import, and every import is the program imported alone."""
    table = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32), "table")
    constants = [numpy_helper.from_array(np.array([0], np.int64), name) for name in ("zero", "axis")]
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["table"], ["rows"]),
         helper.make_node("Shape", ["x"], ["length"], start=1),
         helper.make_node("Slice", ["rows", "zero", "length", "axis"], ["used"]),
         helper.make_node("MatMul", ["x", "used"], ["y"])],
        "folds", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [table, *constants])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    evaluations = collections.Counter()

    class Counted(ReferenceEvaluator):
        def run(self, *args: object, **kwargs: object) -> object:
            evaluations[self.proto_.graph.node[0].op_type] += 1
            return super().run(*args, **kwargs)

    def program(module: ModuleOp) -> tuple[str, list[bytes]]:
        """The module's text (resource keys aside) and its constants' bytes."""
        data = [load_bytes(attr) for op in module.walk() for attr in op.properties.values()
                if isinstance(attr, DenseResourceAttr)]
        return re.sub(r"dense_resource<[^>]*>", "dense_resource<>", str(module)), data

    monkeypatch.setattr("pyocc.frontend.onnx_import.ReferenceEvaluator", Counted)
    onnx_import._evaluator.cache_clear()  # each node's evaluator is made once a process: counted from here
    folds: dict = {}
    for s in (5, 3):
        alone = program(import_model(onnx.ModelProto.FromString(model.SerializeToString()), {"x": [1, s]}))
        evaluations.clear()
        shared = import_model(onnx.ModelProto.FromString(model.SerializeToString()), {"x": [1, s]}, folds=folds)
        assert program(shared) == alone
        assert evaluations == ({"Transpose": 1, "Slice": 1} if s == 5 else {"Slice": 1})


def test_a_fold_is_its_own_array() -> None:
    """onnx's reference evaluator hands a Reshape's input back as a view;
    the importer's fold (each node's evaluator made once, its inputs fed)
    is an array of its own, and the evaluator, fed other values, folds them."""
    model = helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[helper.make_opsetid("", 17)])
    importer = onnx_import._Importer(model, {}, "g")
    node = helper.make_node("Reshape", ["data", "shape"], ["out"])
    data = np.arange(6, dtype=np.float32)
    [folded] = importer.evaluate(node, [data, np.array([2, 3], dtype=np.int64)])
    np.testing.assert_array_equal(folded, data.reshape(2, 3))
    assert not np.shares_memory(folded, data)
    [again] = importer.evaluate(node, [data + 1, np.array([3, 2], dtype=np.int64)])
    np.testing.assert_array_equal(again, (data + 1).reshape(3, 2))

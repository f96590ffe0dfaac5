"""AOT: write a model as LLVM IR, an object file and a shared library, then
load and run the library in a separate Python process that has only the
.so and its .weights file (and must not import xDSL)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pyocc.lowering.convert_dnn_to_llvm import compile_module
from tests.runtime.test_jit import POOL, conv_weights, parse_with_weights

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="linking a .so needs a C compiler")

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from pyocc.runtime.loader import load_shared_library

    library, inputs, outputs = sys.argv[1:4]
    model = load_shared_library(library)
    y = model.run({"x": np.load(inputs)})["y"]
    np.save(outputs, y)
    stats = model.alloc_stats()
    print(json.dumps({"xdsl_imported": any(m == "xdsl" or m.startswith("xdsl.") for m in sys.modules),
                      "allocations": stats.allocations, "peak_bytes": stats.peak_bytes}))
""")


def test_shared_library_runs_in_another_process(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    model = compile_module(parse_with_weights(POOL, conv_weights(rng)))
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = model.run({"x": x})["y"]

    model.write_llvm_ir(tmp_path / "model.ll")
    model.write_object(tmp_path / "model.o")
    weights = model.write_shared_library(tmp_path / "model.so")
    assert "define i32 @main_graph_run(" in (tmp_path / "model.ll").read_text()
    assert (tmp_path / "model.o").stat().st_size > 0
    assert weights == tmp_path / "model.weights"
    assert weights.stat().st_size == model.meta["weights"]["bytes"]

    np.save(tmp_path / "x.npy", x)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "model.so"), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"xdsl_imported": False, "allocations": 1, "peak_bytes": 2048}
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)


def test_missing_weights_file_is_a_clear_error(tmp_path: Path) -> None:
    from pyocc.errors import PyoccError
    from pyocc.runtime.loader import load_shared_library

    rng = np.random.default_rng(8)
    model = compile_module(parse_with_weights(POOL, conv_weights(rng)))
    model.write_shared_library(tmp_path / "other.so")
    (tmp_path / "other.weights").unlink()
    with pytest.raises(PyoccError, match="no such weights file"):
        load_shared_library(tmp_path / "other.so")


@pytest.mark.parametrize("threads", [1, 2])
def test_a_model_compiled_only_to_be_saved_is_jit_compiled_on_its_first_run(
        tmp_path: Path, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """jit=False (pyocc compile's way) generates no machine code in the
    process until the first run, writes the same object file as a model
    JIT-compiled at once, and then runs as that one does."""
    from pyocc.runtime import jit

    rng = np.random.default_rng(9)
    module = parse_with_weights(POOL, conv_weights(rng))
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    at_once = compile_module(module, threads=threads)
    expected = at_once.run({"x": x})["y"]
    at_once.write_object(tmp_path / "at_once.o")

    real_jit_module = jit.jit_module

    def no_jit(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model compiled with jit=False was JIT-compiled before its first run")

    monkeypatch.setattr(jit, "jit_module", no_jit)
    saved_only = compile_module(module, threads=threads, jit=False)
    saved_only.write_object(tmp_path / "saved_only.o")
    saved_only.write_shared_library(tmp_path / "saved_only.so")
    assert (tmp_path / "saved_only.o").read_bytes() == (tmp_path / "at_once.o").read_bytes()
    monkeypatch.setattr(jit, "jit_module", real_jit_module)
    np.testing.assert_array_equal(saved_only.run({"x": x})["y"], expected)
    saved_only.close()
    at_once.close()


def test_pyocc_compile_generates_machine_code_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pyocc compile -o model.so` builds no JIT engine: the object file is
    the only machine code it generates."""
    import onnx
    from onnx import TensorProto, helper

    from pyocc.runtime import jit
    from pyocc.runtime.loader import load_shared_library
    from pyocc.tools.cli import main as pyocc_main

    graph = helper.make_graph([helper.make_node("Tanh", ["x"], ["y"])], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "tiny.onnx")

    def no_jit(*args: object, **kwargs: object) -> None:
        raise AssertionError("pyocc compile JIT-compiled the model")

    monkeypatch.setattr(jit, "jit_module", no_jit)
    assert pyocc_main(["compile", str(tmp_path / "tiny.onnx"), "-o", str(tmp_path / "tiny.so")]) == 0
    monkeypatch.undo()
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    model = load_shared_library(tmp_path / "tiny.so")
    np.testing.assert_allclose(model.run({"x": x})["y"], np.tanh(x), rtol=1e-6)
    model.close()

"""examples/c/run_model.c runs a model without numpy sites from C: built
with the system C compiler, fed raw inputs, its raw outputs equal the
Python runtime's, on any number of threads; models that call numpy are
refused with one line. ResNet-50, compiled by `pyocc compile` and linked
with the line it prints, matches onnxruntime from C. A library compiled
with a symbolic sequence (`pyocc compile --dim sequence=64`) runs every
length the runner's `--dim` gives and matches onnxruntime."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import pyocc
from pyocc.errors import PyoccError
from pyocc.runtime.loader import SymbolicLibraryModel, load_shared_library
from pyocc.testing.light_models import onnxruntime_reference
from pyocc.tools.cli import main as pyocc_main
from tests.graphs import bert_symbolic, encoder_symbolic

RUNNER = Path(__file__).resolve().parents[2] / "examples" / "c" / "run_model.c"

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc) to build the runner")


def tiny_model() -> onnx.ModelProto:
    """Two inputs, two outputs, a weight, ops that all have native kernels:
    y = softmax(maxpool(relu(x)) + w), z = transpose(x) * s."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((1, 3, 4, 4)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Add", ["p", "w"], ["a"]),
        helper.make_node("Softmax", ["a"], ["y"], axis=-1),
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Mul", ["t", "s"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8, 8, 3])],
        [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = tmp_path_factory.mktemp("runner") / "run_model"
    result = subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-o", str(binary), str(RUNNER), "-ldl"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return binary


def test_runs_a_model_from_c(tmp_path: Path, runner: Path) -> None:
    model = pyocc.compile(tiny_model())
    assert model.numpy_sites == 0 and model.native_sites == 6
    model.save(tmp_path / "m.so")
    rng = np.random.default_rng(5)
    inputs = {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32),
              "s": rng.standard_normal(3).astype(np.float32)}
    expected = model.run(inputs)
    (tmp_path / "in.bin").write_bytes(inputs["x"].tobytes() + inputs["s"].tobytes())
    result = subprocess.run([str(runner), "m.so", "in.bin", "out.bin", "--repeat", "5"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("median ")
    assert result.stdout.splitlines()[-1].endswith(" ms per run over 5 runs")
    raw = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.float32)
    y, z = expected["y"], expected["z"]
    assert raw.size == y.size + z.size
    np.testing.assert_array_equal(raw[:y.size].reshape(y.shape), y)
    np.testing.assert_array_equal(raw[y.size:].reshape(z.shape), z)
    # warm-up runs come first, untimed: the median is still over the timed ones
    result = subprocess.run([str(runner), "m.so", "in.bin", "warm.bin", "--repeat", "3", "--warmup", "2"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].endswith(" ms per run over 3 runs")
    assert (tmp_path / "warm.bin").read_bytes() == (tmp_path / "out.bin").read_bytes()


def test_refuses_wrong_input_size_and_numpy_sites(tmp_path: Path, runner: Path) -> None:
    model = pyocc.compile(tiny_model(), kernels="numpy", jit=False)  # run from C only
    model.save(tmp_path / "numpy.so")
    (tmp_path / "in.bin").write_bytes(b"\0" * 12)
    result = subprocess.run([str(runner), "numpy.so", "in.bin", "out.bin"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert "6 ops call numpy kernels" in result.stderr
    pyocc.compile(tiny_model(), jit=False).save(tmp_path / "native.so")
    result = subprocess.run([str(runner), "native.so", "in.bin", "out.bin"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == "run_model: in.bin has 12 bytes; the model's inputs need 780"
    assert not (tmp_path / "out.bin").exists()


def test_compile_prints_the_weights_and_the_link_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    onnx.save(tiny_model(), tmp_path / "tiny.onnx")
    monkeypatch.chdir(tmp_path)
    assert pyocc_main(["compile", "tiny.onnx", "-o", "tiny.so"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "wrote tiny.so and tiny.weights (its weights: keep the two together)"
    assert lines[1] == f"link: cc -o app app.c {tmp_path / 'tiny.so'} -Wl,-rpath,{tmp_path}"
    assert lines[2].startswith("run:  cc -O2 -o run_model examples/c/run_model.c -ldl && ./run_model tiny.so")
    assert pyocc_main(["compile", "tiny.onnx", "-o", "numpy.so", "--kernels", "numpy"]) == 0
    assert "note: 6 of 6 ops call numpy kernels" in capsys.readouterr().out


def test_threads_in_the_runner(tmp_path: Path, runner: Path) -> None:
    """A library compiled for threads runs on any count the runner asks for,
    with the same bytes out; one compiled for one thread refuses more."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    s = rng.standard_normal(3).astype(np.float32)
    (tmp_path / "in.bin").write_bytes(x.tobytes() + s.tobytes())
    pyocc.compile(tiny_model(), threads=2, jit=False).save(tmp_path / "threads.so")
    outputs = []
    for count in (None, 1, 3):
        option = [] if count is None else ["--threads", str(count)]
        result = subprocess.run([str(runner), "threads.so", "in.bin", f"out{count}.bin", *option], cwd=tmp_path,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        outputs.append((tmp_path / f"out{count}.bin").read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    pyocc.compile(tiny_model(), jit=False).save(tmp_path / "one.so")
    result = subprocess.run([str(runner), "one.so", "in.bin", "out.bin", "--threads", "2"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == ("run_model: one.so: compiled for one thread; compile it with pyocc compile "
                                     "--threads N to run it on more")
    for bad in (["--threads", "0"], ["--repeat", "x"], ["--threads"], ["--warmup", "0"]):
        result = subprocess.run([str(runner), "threads.so", "in.bin", "out.bin", *bad], cwd=tmp_path,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2
        assert result.stderr.strip() == f"run_model: {bad[0]} needs a positive whole number"


def test_resnet50_from_c_matches_onnxruntime(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #16's done-criterion: `pyocc compile light_resnet50.onnx -o m.so`
    (random weights), the runner linked with the line pyocc prints, run
    from C on 1 and 2 threads, matches onnxruntime, and the counts agree."""
    model, inputs, (expected,) = onnxruntime_reference("resnet50")
    onnx.save(onnx.load(str(model)), tmp_path / "resnet50.onnx")
    monkeypatch.chdir(tmp_path)
    assert pyocc_main(["compile", "resnet50.onnx", "-o", "m.so", "--threads", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    link = next(line for line in lines if line.startswith("link: "))[len("link: "):].split()
    assert link[:4] == ["cc", "-o", "app", "app.c"]
    # the printed link line, with the runner for app.c (it also dlopens the library)
    build = subprocess.run(["cc", "-O2", "-o", "run_model", str(RUNNER), *link[4:], "-ldl"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    (x,) = inputs.values()
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    outputs = []
    for threads in ("1", "2"):
        result = subprocess.run(["./run_model", "m.so", "in.bin", f"out{threads}.bin", "--threads", threads],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        raw = (tmp_path / f"out{threads}.bin").read_bytes()
        outputs.append(raw)
        np.testing.assert_allclose(np.frombuffer(raw, dtype=np.float32).reshape(expected.shape), expected,
                                   rtol=1e-4, atol=1e-5)
    # the same up to OpenBLAS's rounding of the products split between the two threads
    # (tests/runtime/test_threads.py, assert_same_as_one_thread)
    one, two = (np.frombuffer(raw, dtype=np.float32) for raw in outputs)
    np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-6 * float(np.abs(one).max()))


def test_a_scratchpad_schedule_runs_from_c(tmp_path: Path, runner: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`pyocc compile --scratchpad 1MiB`: the NPU schedule (its SRAM arena,
    the DMA as copies) as a library. Every op runs a native kernel (the
    plan gives the host no im2col scratch: those convolutions run register
    tiles or direct loops), so it runs from C without Python and matches
    onnxruntime."""
    model, inputs, (expected,) = onnxruntime_reference("squeezenet")
    onnx.save(onnx.load(str(model)), tmp_path / "squeezenet.onnx")
    monkeypatch.chdir(tmp_path)
    assert pyocc_main(["compile", "squeezenet.onnx", "--scratchpad", "1MiB", "-o", "m.so"]) == 0
    out = capsys.readouterr().out
    assert "wrote m.so and m.weights" in out and "numpy" not in out
    (x,) = inputs.values()
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    result = subprocess.run([str(runner), "m.so", "in.bin", "out.bin"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.float32).reshape(expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    # the library's pools are the schedule's: the SRAM of the given size, and DRAM for what it spills
    pools = load_shared_library(tmp_path / "m.so").meta["pools"]
    assert [(pool["name"], pool["size"]) for pool in pools][0] == ("sram", 1 << 20)
    for args in (["--target", "cuda", "-o", "m2.ll"], ["--memory", "eager", "-o", "m2.so"]):
        assert pyocc_main(["compile", "squeezenet.onnx", "--scratchpad", "1MiB", *args]) == 1
        assert capsys.readouterr().err.splitlines() == [
            "pyocc: error: --scratchpad runs on target host in pool mode without --memory-pools "
            "(the schedule plans the SRAM and the DRAM)"]
    assert not list(tmp_path.glob("m2.*"))


def _bert_inputs(model: onnx.ModelProto, s: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """bert_symbolic's inputs at length `s`: token ids, positions 0..s-1, a 0/1 mask."""
    inputs = {"input_ids": rng.integers(0, 50, (1, s)), "position_ids": np.arange(s)[None],
              "attention_mask": np.concatenate([np.ones((1, 1), np.int64), rng.integers(0, 2, (1, s - 1))], axis=1)}
    return {i.name: inputs[i.name].astype(np.int64) for i in model.graph.input}


def test_a_symbolic_library_runs_every_length_from_c(tmp_path: Path, runner: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`pyocc compile --dim sequence=64 -o m.so`: one library (C ABI version
    2) that the runner runs at every length its --dim gives, matching
    onnxruntime; a missing, unknown or out-of-range --dim is one line, and
    so is --dim for a static library; the run itself returns 2 for a value
    out of range. pyocc's loader runs it too, reading the length off the
    inputs."""
    model = bert_symbolic(max_positions=64)
    onnx.save(model, tmp_path / "bert.onnx")
    monkeypatch.chdir(tmp_path)
    assert pyocc_main(["compile", "bert.onnx", "--dim", "sequence=64", "-o", "m.so"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["wrote m.so and m.weights (its weights: keep the two together)",
                     f"run:  cc -O2 -o run_model examples/c/run_model.c -ldl && ./run_model {tmp_path / 'm.so'} "
                     "input.bin output.bin --dim sequence=N   (sequence in 1..64)"]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    for length in (1, 2, 17, 64):
        inputs = _bert_inputs(model, length, rng)
        (tmp_path / "in.bin").write_bytes(b"".join(inputs[i.name].tobytes() for i in model.graph.input))
        result = subprocess.run([str(runner), "m.so", "in.bin", "out.bin", "--dim", f"sequence={length}"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        raw = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.float32)
        expected = session.run(None, inputs)
        assert raw.size == sum(e.size for e in expected)
        offset = 0
        for want in expected:
            np.testing.assert_allclose(raw[offset:offset + want.size].reshape(want.shape), want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"S={length}")
            offset += want.size
    for options, message in (
            ([], "run_model: m.so has a symbolic dimension sequence: give --dim sequence=N with N in 1..64"),
            (["--dim", "sequence=65"], "run_model: m.so has a symbolic dimension sequence: give --dim sequence=N "
                                       "with N in 1..64"),
            (["--dim", "sequence=0"], "run_model: m.so has a symbolic dimension sequence: give --dim sequence=N "
                                      "with N in 1..64"),
            (["--dim", "length=3"], "run_model: --dim 'length=3' names no symbolic dimension of m.so (give "
                                    "NAME=VALUE; it has sequence)")):
        result = subprocess.run([str(runner), "m.so", "in.bin", "bad.bin", *options], capture_output=True, text=True,
                                timeout=60)
        assert (result.returncode, result.stderr.strip()) == (2, message)
        assert not (tmp_path / "bad.bin").exists()
    # the run function checks the range itself (a C caller may skip the runner's check)
    library = ctypes.CDLL(str(tmp_path / "m.so"))
    library.bert_onnx_run.restype = ctypes.c_int32
    state = (ctypes.c_int64 * 4)()
    none = (ctypes.c_void_p * 3)()
    for length, status in ((65, 2), (0, 2)):
        symbols = (ctypes.c_int64 * 1)(length)
        assert library.bert_onnx_run(none, none, None, state, symbols) == status
    assert list(state) == [0, 0, 0, 0]  # nothing allocated
    # and from Python, without the model: the lengths read off the inputs
    loaded = load_shared_library(tmp_path / "m.so")
    assert isinstance(loaded, SymbolicLibraryModel)
    for length in (3, 64):
        inputs = _bert_inputs(model, length, rng)
        got = loaded.run(inputs)
        assert (loaded.alloc_stats().allocations, loaded.alloc_stats().frees) == (1, 1)
        for value, want in zip(got.values(), session.run(None, inputs), strict=True):
            np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5, err_msg=f"loaded, S={length}")
    with pytest.raises(PyoccError, match=r"^bert_onnx: sequence=65 is out of range: the library was compiled for "
                                         r"sequence in 1..64$"):
        loaded.run(_bert_inputs(model, 65, rng))
    wrong = _bert_inputs(model, 5, rng)
    wrong["position_ids"] = wrong["position_ids"][:, :4]
    with pytest.raises(PyoccError, match=r"^bert_onnx: input 'position_ids' has int64\[1, 4\], the model takes "
                                         r"int64\[1, 5\] at \{'sequence': 5\}$"):
        loaded.run(wrong)
    pyocc.compile(tiny_model(), jit=False).save(tmp_path / "static.so")
    result = subprocess.run([str(runner), "static.so", "in.bin", "out.bin", "--dim", "sequence=3"],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr.strip()) == (
        1, "run_model: static.so has no symbolic dimension (compiled with fixed shapes); drop --dim")


def test_a_library_with_two_symbols_takes_them_by_name(tmp_path: Path, runner: Path) -> None:
    """`batch` and `sequence` both symbolic: the runner's --dim options in
    any order, the run's values sorted by name; matches onnxruntime."""
    model = encoder_symbolic(layers=1)
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    pyocc.compile(fresh, dims={"batch": 4, "sequence": 32}).save(tmp_path / "e.so")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(8)
    for batch, length in ((1, 1), (3, 7), (4, 32), (2, 31)):
        x = rng.standard_normal((batch, length, 32)).astype(np.float32)
        (tmp_path / "in.bin").write_bytes(x.tobytes())
        result = subprocess.run([str(runner), "e.so", "in.bin", "out.bin", "--dim", f"sequence={length}",
                                 "--dim", f"batch={batch}"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        (want,) = session.run(None, {"x": x})
        got = np.frombuffer((tmp_path / "out.bin").read_bytes(), dtype=np.float32)
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5, err_msg=f"{batch}x{length}")

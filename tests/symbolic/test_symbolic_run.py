"""One compile, every sequence length: `pyocc.compile(path, dims=...)` runs
a BERT-style graph, a GPT-2-style decoder (its causal mask and positions
Slices up to the length) and a plain transformer encoder with a symbolic sequence
dimension at S in {1, 2, 17, 128} and matches onnxruntime; its pool at each
S is compared with the static plan compiled for that S. All three run
generated code (pyocc.lowering.symbolic_native): S in {1, 2, 17, 128, 384,
512} with no numpy kernel called and the pool each run allocates equal to
the plan's at S; so does the ViT-style graph (a symbolic batch: its patch
embedding is a convolution over a run-time number of images)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import pyocc
from pyocc.api import SymbolicModel, lower
from pyocc.runtime import host_kernels
from pyocc.errors import PyoccError
from pyocc.tools.cli import main
from tests.conftest import on_one_worker
from tests.graphs import bert_symbolic, encoder_symbolic, gpt2_symbolic, vit_symbolic

LENGTHS = (1, 2, 17, 128)
GRAPHS = {"encoder": encoder_symbolic, "bert": bert_symbolic, "gpt2": gpt2_symbolic}


def inputs_at(name: str, s: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if name == "encoder":
        return {"x": rng.standard_normal((1, s, 32)).astype(np.float32)}
    if name == "gpt2":
        return {"input_ids": rng.integers(0, 50, (1, s))}
    return {"input_ids": rng.integers(0, 50, (1, s)), "position_ids": np.arange(s)[None],
            "attention_mask": np.concatenate([np.ones((1, 1), np.int64), rng.integers(0, 2, (1, s - 1))], axis=1)}


@pytest.fixture(scope="module", params=on_one_worker("symbolic", sorted(GRAPHS)))  # a graph's tests: one compile
def compiled(request: pytest.FixtureRequest) -> tuple[str, onnx.ModelProto, SymbolicModel]:
    model = GRAPHS[request.param]()
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    return request.param, model, pyocc.compile(fresh, dims={"sequence": 512})


def test_one_compile_runs_every_length_like_onnxruntime(compiled: tuple[str, onnx.ModelProto, SymbolicModel]) -> None:
    name, model, symbolic = compiled
    assert isinstance(symbolic, SymbolicModel)
    assert symbolic.fallback_reason is None and symbolic.numpy_sites == 0 and symbolic.native_sites > 0
    session = ort.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(0)
    for s in LENGTHS:
        inputs = inputs_at(name, s, rng)
        outputs = symbolic.run(inputs)
        expected = session.run(None, inputs)
        assert list(outputs) == [o.name for o in model.graph.output]
        for got, want in zip(outputs.values(), expected, strict=True):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_pool_at_each_length_against_the_static_plan(compiled: tuple[str, onnx.ModelProto, SymbolicModel]) -> None:
    """At most 1.05x the static plan compiled for that S at every S of the
    issue, the smallest included: the plan is cut into pieces where one
    layout would not be (one layout for 1..512 was 1.29x at S = 1 on the
    BERT graph: alignment paddings)."""
    name, model, symbolic = compiled
    for s in (*LENGTHS, 384, 512):
        fresh = onnx.ModelProto()
        fresh.CopyFrom(model)
        _, static = lower(fresh, shapes={n: v.shape for n, v in inputs_at(name, s, np.random.default_rng(0)).items()})
        report = symbolic.memory_report(dims={"sequence": s})
        assert report.activation_bytes >= report.lower_bound_bytes
        assert report.activation_bytes <= 1.05 * static.activation_bytes, (s, report.activation_bytes,
                                                                           static.activation_bytes)


class _CountingKernels:
    """Every numpy host kernel wrapped to count its calls (the symbolic
    numpy path looks them up by name at each step)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.calls = 0
        for name in dir(host_kernels):
            kernel = getattr(host_kernels, name)
            if callable(kernel) and not name.startswith("_") and not isinstance(kernel, type):
                monkeypatch.setattr(host_kernels, name, self._counted(kernel))

    def _counted(self, kernel):  # noqa: ANN001, ANN202 - any kernel
        def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.calls += 1
            return kernel(*args, **kwargs)
        return counted


def test_generated_code_runs_every_length_without_python(compiled: tuple[str, onnx.ModelProto, SymbolicModel],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """S in {1, 2, 17, 128, 384, 512} and both ends of every piece of the
    plan (the BERT graph's plan has several; the run function branches to
    one. GPT-2's had two until its causal mask, a Slice of a constant that
    both blocks read, was made again before the second block,
    dnn-recompute{tables}: one layout now meets the static plans at
    every S): outputs like onnxruntime, no numpy kernel called
    during a run (the same counter counts the numpy path's calls), one pool
    allocated per run whose size is the plan's at S."""
    name, model, symbolic = compiled
    session = ort.InferenceSession(model.SerializeToString())
    counter = _CountingKernels(monkeypatch)
    rng = np.random.default_rng(1)
    pieces = symbolic.lowered.plan.pieces
    assert len(pieces) > 1 or name in ("encoder", "gpt2"), [p.ranges for p in pieces]
    ends = sorted({s for piece in pieces for s in piece.ranges["sequence"]})
    for s in sorted({1, 2, 17, 128, 384, 512, *ends}):
        inputs = inputs_at(name, s, rng)
        outputs = symbolic.run(inputs)
        assert counter.calls == 0
        for got, want in zip(outputs.values(), session.run(None, inputs), strict=True):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        stats = symbolic.alloc_stats()
        assert stats is not None and (stats.allocations, stats.frees, stats.live_bytes) == (1, 1, 0)
        pool = symbolic.lowered.plan.pool_bytes({"sequence": s})
        assert stats.peak_bytes == pool == symbolic.memory_report(dims={"sequence": s}).activation_bytes
    # the counter sees the numpy kernels when they run
    symbolic.runner.run({"sequence": 3}, inputs_at(name, 3, rng))
    assert counter.calls > 0


def test_the_json_lists_the_pieces(compiled: tuple[str, onnx.ModelProto, SymbolicModel]) -> None:
    """`pyocc plan --dim ... --format json`'s document: one entry per piece
    with its range and pool formula; `activation_bytes_expr` names the
    pieces' bounds when their formulas differ (BERT-style: they do)."""
    name, _, symbolic = compiled
    plan = symbolic.lowered.plan
    document = symbolic.lowered.to_json()
    assert [p["symbols"]["sequence"] for p in document["pieces"]] == [list(p.ranges["sequence"])
                                                                      for p in plan.pieces]
    formulas = [p["activation_bytes_expr"] for p in document["pieces"]]
    if len(set(formulas)) == 1:
        assert document["activation_bytes_expr"] == formulas[0]
    else:
        parts = [f"sequence <= {p['symbols']['sequence'][1]}: {f}"
                 for p, f in zip(document["pieces"][:-1], formulas[:-1], strict=True)]
        assert document["activation_bytes_expr"] == "; ".join([*parts, f"else: {formulas[-1]}"])
    assert name != "bert" or len(set(formulas)) > 1


def test_a_wrong_dtype_is_one_error(compiled: tuple[str, onnx.ModelProto, SymbolicModel]) -> None:
    name, _, symbolic = compiled
    inputs = inputs_at(name, 5, np.random.default_rng(0))
    first = symbolic.input_names[0]
    inputs[first] = inputs[first].astype(np.float64 if inputs[first].dtype != np.float64 else np.float32)
    with pytest.raises(PyoccError, match=rf"input '{first}' has {inputs[first].dtype}\[1, 5.*\], the model takes "
                                         r".*\[1, 5.*\] at \{'sequence': 5\}$"):
        symbolic.run(inputs)


def test_a_length_out_of_range_is_one_error(compiled: tuple[str, onnx.ModelProto, SymbolicModel]) -> None:
    name, _, symbolic = compiled
    with pytest.raises(PyoccError, match=r"sequence=513 is out of range: it was compiled for sequence in 1..512 "
                                         r"\(--dim sequence=512\); compile with a larger --dim"):
        symbolic.run(inputs_at(name, 513, np.random.default_rng(0)))


def test_cli_run_and_compile_with_dim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "encoder.onnx"
    onnx.save(encoder_symbolic(layers=1), str(path))
    np.savez(tmp_path / "in.npz", x=np.ones((1, 9, 32), np.float32))
    assert main(["run", str(path), "--dim", "sequence=64", "--inputs", str(tmp_path / "in.npz")]) == 0
    lines = capsys.readouterr().out.splitlines()
    # generated code: no note
    assert lines[0].startswith("layernormalization_") and "shape [1, 9, 32] float32" in lines[0]
    assert lines[1] == "sequence=9"
    assert main(["run", str(path), "--dim", "sequence=64", "--kernels", "numpy",
                 "--inputs", str(tmp_path / "in.npz")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "note: symbolic shapes run the numpy kernels from Python for this model: kernels=numpy")
    np.savez(tmp_path / "long.npz", x=np.ones((1, 70, 32), np.float32))
    assert main(["run", str(path), "--dim", "sequence=64", "--inputs", str(tmp_path / "long.npz")]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "pyocc: error: encoder.onnx: sequence=70 is out of range: it was compiled for sequence in 1..64 "
        "(--dim sequence=64); compile with a larger --dim"]
    # a library holds generated code only (tests/runtime/test_c_runner.py runs one from C)
    assert main(["compile", str(path), "--dim", "sequence=64", "--kernels", "numpy", "-o",
                 str(tmp_path / "m.so")]) == 1
    assert not (tmp_path / "m.so").exists() and not (tmp_path / "m.weights").exists()
    assert capsys.readouterr().err.splitlines() == [
        "pyocc: error: encoder.onnx: with --dim this model runs the numpy kernels from Python (kernels=numpy), "
        "which no library can hold; run it with pyocc run --dim, or fix the dimension with --shape to write a library"]
    assert main(["compile", str(path), "--dim", "sequence=64", "--threads", "2", "-o", str(tmp_path / "m.so")]) == 1
    assert not (tmp_path / "m.so").exists()
    assert capsys.readouterr().err.splitlines() == [
        "pyocc: error: --dim does not combine with --threads, --memory-pools, --memory-limit or --scratchpad yet; "
        "fix the dimension with --shape to use them"]
    assert main(["compile", str(path), "--dim", "sequence=64", "--scratchpad", "1MiB", "-o", str(tmp_path / "m.so")]) == 1
    assert not (tmp_path / "m.so").exists()
    assert capsys.readouterr().err.splitlines()[-1].endswith("--memory-limit or --scratchpad yet; "
                                                             "fix the dimension with --shape to use them")


def test_two_symbols_batch_and_sequence() -> None:
    """`batch` and `sequence` both symbolic: sizes are products of the two
    (128*batch*sequence), and one compile runs every (batch, sequence)."""
    model = encoder_symbolic(layers=1)
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    symbolic = pyocc.compile(fresh, dims={"batch": 4, "sequence": 32})
    assert "128*batch*sequence" in {b["size_expr"] for b in symbolic.lowered.to_json()["buffers"]}
    assert symbolic.fallback_reason is None and symbolic.numpy_sites == 0
    session = ort.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(0)
    for batch, s in ((1, 1), (3, 17), (4, 32), (2, 5)):
        x = {"x": rng.standard_normal((batch, s, 32)).astype(np.float32)}
        (got,) = symbolic.run(x).values()
        np.testing.assert_allclose(got, session.run(None, x)[0], rtol=1e-4, atol=1e-5)


def test_vit_one_compile_runs_every_batch() -> None:
    """The ViT-style graph with a symbolic batch (its class token Expanded
    to Shape(image)[0] rows, folded at import at each probe): one compile
    runs B in {1, 2, 17, 64} like onnxruntime, within 1.05x the static plan
    for that B. At B = 1 the patch embedding's 12 KiB im2col block (a
    constant) is most of the memory, and one layout for the whole range was
    1.22x the static plan there (docs/memory.md): B = 1 is a piece of its own."""
    model = vit_symbolic()
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    symbolic = pyocc.compile(fresh, dims={"batch": 64})
    assert symbolic.fallback_reason is None and symbolic.numpy_sites == 0
    session = ort.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(0)
    for batch in (1, 2, 17, 64):
        x = {"image": rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)}
        (got,) = symbolic.run(x).values()
        assert got.shape == (batch, 10)
        np.testing.assert_allclose(got, session.run(None, x)[0], rtol=1e-4, atol=1e-5)
        assert symbolic.alloc_stats().peak_bytes == symbolic.lowered.plan.pool_bytes({"batch": batch})
        static_model = onnx.ModelProto()
        static_model.CopyFrom(model)
        _, static = lower(static_model, shapes={"image": (batch, 3, 32, 32)})
        arena = symbolic.memory_report(dims={"batch": batch}).activation_bytes
        assert arena <= 1.05 * static.activation_bytes, (batch, arena, static.activation_bytes)

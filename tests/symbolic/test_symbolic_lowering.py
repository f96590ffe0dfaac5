"""Symbolic dimensions end to end up to the plan: a model whose input has an
ONNX dim_param ("sequence") is lowered for every value up to --dim's
maximum, its program's integers are polynomials in the symbol, and one pool
plan with offsets as formulas holds at every value."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from xdsl.dialects.builtin import ModuleOp

import pyocc.api as api
from pyocc import pipelines
from pyocc.api import compile as compile_model
from pyocc.api import lower, lower_symbolic
from pyocc.errors import PyoccError
from pyocc.frontend.symbolic_shapes import SymbolicShapes
from pyocc.pipelines import Options
from pyocc.lowering.symbolic_native import _needed_ends
from pyocc.planning import Poly, plan_symbolic, symbolic_problem_from_json
from pyocc.symbolic import fit_polynomials, fit_program, probe_points
from pyocc.tools.cli import main
from pyocc.units import format_bytes
from tests.graphs import GraphBuilder, bert_symbolic, encoder_symbolic, vit_symbolic


def copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """A fresh copy: the importer fixes input shapes in the proto it is given."""
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    return fresh


# -- fitting ----------------------------------------------------------------

def test_probe_points_fit_then_check() -> None:
    fits, checks = probe_points({"S": (1, 512)})
    assert [p["S"] for p in fits] == [509, 503, 499] and [p["S"] for p in checks] == [491]
    small_fits, small_checks = probe_points({"S": (1, 3)})
    assert [p["S"] for p in small_fits] == [3, 2, 1] and small_checks == []
    # a degree of 1 (a batch) needs two fit values; not where no check value is left
    fits, checks = probe_points({"S": (1, 512)}, {"S": 1})
    assert [p["S"] for p in fits] == [509, 503] and [p["S"] for p in checks] == [491]
    assert probe_points({"S": (1, 3)}, {"S": 1}) == (small_fits, small_checks)


def test_fit_recovers_polynomials_and_rejects_the_rest() -> None:
    fits, checks = probe_points({"S": (1, 512)})
    points = [p["S"] for p in fits + checks]
    columns = np.array([[48 * s * s + 3072 * s, 4 * s + 64, 768, s // 2] for s in points], dtype=np.int64)
    polys, wrong = fit_polynomials(columns, fits, checks)
    assert polys[:3] == [Poly.parse("48*S^2 + 3072*S"), Poly.parse("4*S + 64"), Poly.constant(768)]
    assert wrong == [3]  # S // 2 is no polynomial


def test_fit_with_two_symbols_is_exact() -> None:
    """Two symbols near 512: the basis spans 1 to S^2 T^2 ~ 7e10, where a
    float64 least-squares fit lost the integers of 128*S (T5 with its encoder
    and decoder lengths as two symbols failed on it); the exact solve does not."""
    fits, checks = probe_points({"S": (1, 512), "T": (1, 512)})
    points = fits + checks
    columns = np.array([[128 * p["S"], 32 * p["T"] + 64, 16 * p["S"] * p["T"], 3 * p["S"] ** 2 * p["T"] ** 2 + 1,
                         p["S"] * p["T"] // 3] for p in points], dtype=np.int64)
    polys, wrong = fit_polynomials(columns, fits, checks)
    assert polys[:4] == [Poly.parse("128*S"), Poly.parse("32*T + 64"), Poly.parse("16*S*T"),
                         Poly.parse("3*S^2*T^2 + 1")]
    assert wrong == [4]  # S T // 3 is no polynomial


def test_program_whose_ops_change_with_the_size_is_one_line() -> None:
    fits, checks = probe_points({"S": (1, 512)})
    texts = [f"%a = dnn.malloc {{size = {4 * p['S']}}}\n" + ("dnn.relu\n" if p["S"] > 500 else "")
             for p in fits + checks]
    with pytest.raises(PyoccError, match=r"the program differs between S=509 and S=499 .*fix the dimension with --shape"):
        fit_program(texts, fits, checks, {"S": (1, 512)})


# -- lowering ---------------------------------------------------------------

def test_encoder_program_and_plan_are_symbolic() -> None:
    lowered = lower_symbolic(encoder_symbolic(), {"sequence": 512})
    text = lowered.program.symbolic_text()
    assert "%x: memref<1x{sequence}x32xf32>" in text
    assert "dnn.malloc {size = {128*sequence} : i64} : memref<{sequence}x32xf32>" in text
    # attention scores: [1, heads=4, S, S] floats
    assert "{16*sequence^2}" in text
    assert lowered.ranges == {"sequence": (1, 512)}
    for s in (1, 2, 17, 128, 512):
        symbolic = lowered.memory_report({"sequence": s})
        _, static = lower(copy(encoder_symbolic()), shapes={"x": (1, s, 32)})
        # the program is the one dnn-reorder chose at the top of the range:
        # there, and at S <= 2 where the order does not matter, the static one
        if s >= 128 or s <= 2:
            assert symbolic.lower_bound_bytes == static.lower_bound_bytes
        assert symbolic.lower_bound_bytes <= symbolic.activation_bytes <= 1.05 * static.activation_bytes
        assert symbolic.weight_bytes == static.weight_bytes and symbolic.io_bytes == static.io_bytes
        assert sorted(b.bytes for b in symbolic.buffers) == sorted(b.bytes for b in static.buffers)
    # the program at one value is the static program's text (with the
    # symbolic compile's reorder, as at a probe)
    _, point = probe_points({"sequence": (1, 512)})
    static_module, _ = lower(copy(encoder_symbolic()), shapes={"x": (1, 40, 32)},
                             options=Options(memory="lazy", reorder_symbol_dim=40))
    strip = __import__("re").compile(r"dense_resource<[^>]*>")
    assert strip.sub("", lowered.program.text_at({"sequence": 40})) == strip.sub("", str(static_module))


def test_bert_style_plan_holds_over_the_range() -> None:
    lowered = lower_symbolic(bert_symbolic(), {"sequence": 512})
    plan = lowered.plan
    for s in (1, 17, 384, 512):
        static = plan.problem.at({"sequence": s})
        offsets = plan.offsets({"sequence": s})
        # no two buffers alive at once share a byte (verify_symbolic_plan checked all of 1..512)
        for a in static.buffers:
            for b in static.buffers:
                if a.name < b.name and a.first <= b.last and b.first <= a.last and a.size and b.size:
                    assert offsets[a.name] + a.size <= offsets[b.name] or offsets[b.name] + b.size <= offsets[a.name]


def test_out_of_range_value_is_one_line() -> None:
    lowered = lower_symbolic(encoder_symbolic(layers=1), {"sequence": 64})
    with pytest.raises(PyoccError, match=r"sequence=65 is out of range: it was compiled for sequence in 1..64 "
                                         r"\(--dim sequence=64\); compile with a larger --dim"):
        lowered.memory_report({"sequence": 65})
    with pytest.raises(PyoccError, match=r"input 'x' has shape \[1, 3, 16\], expected \[1, '\?', 32\]"):
        lowered.values_of({"x": (1, 3, 16)})
    assert lowered.values_of({"x": (1, 9, 32)}) == {"sequence": 9}


def test_constant_folded_from_the_symbol_runs_as_the_leading_block() -> None:
    """A Slice of a constant table up to Shape(x)[1] and a causal Trilu mask
    fold at import into constants of S rows: at every probe each is the
    leading block of its value at the maximum, so the run takes that block."""
    g = GraphBuilder("sliced_positions", 0)
    x = g.input("x", TensorProto.FLOAT, [1, "sequence", 8])
    length = g.op("Gather", g.op("Shape", x), g.const([1], np.int64), axis=0)
    table = g.op("Slice", g.weight([64, 8]), g.const([0], np.int64), length, g.const([0], np.int64))
    causal = g.op("Trilu", g.op("Expand", g.const(1.0), g.op("Concat", length, length, axis=0)), upper=0)
    scores = g.op("Mul", g.op("MatMul", g.op("Add", x, table), g.op("Transpose", x, perm=[0, 2, 1])), causal)
    model = g.model([(g.op("MatMul", scores, x), TensorProto.FLOAT)])
    # the causal mask's [S, S] block is not a prefix of its [64, 64] bytes: the numpy kernels run it
    with pytest.warns(UserWarning, match="a constant of shape \\[64, 64\\] is read in leading blocks"):
        symbolic = compile_model(copy(model), dims={"sequence": 64})
    session = ort.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(0)
    for s in (1, 5, 17, 64):
        x_s = {"x": rng.standard_normal((1, s, 8)).astype(np.float32)}
        (got,) = symbolic.run(x_s).values()
        np.testing.assert_allclose(got, session.run(None, x_s)[0], rtol=1e-4, atol=1e-4)


def _sliced_table(rows: int, mask: int, width: int = 8) -> onnx.ModelProto:
    """x [1, S, width] plus a constant table sliced to S rows; with `mask`,
    then a Where on h h^T with a [mask, mask] causal mask sliced to [S, S]."""
    g = GraphBuilder("sliced_table", 0)
    x = g.input("x", TensorProto.FLOAT, [1, "sequence", width])
    length = g.op("Gather", g.op("Shape", x), g.const([1], np.int64), axis=0)
    table = g.op("Slice", g.weight([rows, width]), g.const([0], np.int64), length, g.const([0], np.int64))
    h = g.op("Add", x, table)
    if not mask:
        return g.model([(h, TensorProto.FLOAT)])
    causal = g.op("Slice", g.const(np.tril(np.ones((mask, mask), dtype=bool)), np.bool_), g.const([0, 0], np.int64),
                  g.op("Concat", length, length, axis=0), g.const([0, 1], np.int64))
    scores = g.op("MatMul", h, g.op("Transpose", h, perm=[0, 2, 1]))
    return g.model([(g.op("Where", causal, scores, g.const(-1.0)), TensorProto.FLOAT)])


@pytest.mark.parametrize(("rows", "mask", "maximum", "lowered"), [
    (80, 0, 64, [61, 59, 64]),  # every size linear in S: two fit values
    # a 300 x 300 mask is too big to fold: a dnn.slice, which the maximum has not (GPT-2's)
    (300, 300, 300, [293, 283, 281, 300, 277]),
])
def test_probes_are_the_fit_values_and_one_check_the_maximum_when_a_constant_is_folded(
        rows: int, mask: int, maximum: int, lowered: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Degree 2 needs three fit values and one check: four lowerings (the
    encoder); degree 1 two fit values and one check. A constant folded from the symbol (a table sliced to the
    length) needs the program at the maximum for its data; that lowering is
    then the check. Where the program differs there (a Slice of a whole
    table is no Slice), the usual check value is lowered too, and the fit
    is checked there. Either way the run matches onnxruntime."""
    lowered_at: list[int] = []
    real_lower = api.lower

    def counting_lower(model: onnx.ModelProto, **kwargs: object) -> object:
        lowered_at.append(kwargs["shapes"]["x"][1])  # type: ignore[index]
        return real_lower(model, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "lower", counting_lower)
    lower_symbolic(encoder_symbolic(layers=1), {"sequence": 64})
    assert lowered_at == [61, 59, 53, 47]
    lowered_at.clear()
    model = _sliced_table(rows, mask)
    folded = lower_symbolic(copy(model), {"sequence": maximum})
    assert lowered_at == lowered
    session = ort.InferenceSession(model.SerializeToString())
    for s in (1, 17, maximum):
        x_s = {"x": np.random.default_rng(s).standard_normal((1, s, 8)).astype(np.float32)}
        (got,) = folded.runner.run({"sequence": s}, x_s).values()
        np.testing.assert_allclose(got, session.run(None, x_s)[0], rtol=1e-4, atol=1e-4)


def test_a_batch_is_fitted_at_two_values_and_a_wrong_degree_at_three(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ViT-style graph's shapes are linear in the batch: two fit values
    and the check (three lowerings; its class token is Expanded to the
    batch at run time, not folded into copies held among the weights,
    whose data would need the check at the maximum). Told degree 1 for the encoder, whose
    attention scores are S^2, the check finds the S^2 sizes, the third fit
    value is lowered too and the result is the one fitted at degree 2."""
    lowered_at: list[tuple[int, ...]] = []
    real_lower = api.lower

    def counting_lower(model: onnx.ModelProto, **kwargs: object) -> object:
        lowered_at.append(tuple(kwargs["shapes"].values())[0])  # type: ignore[attr-defined]
        return real_lower(model, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "lower", counting_lower)
    lower_symbolic(vit_symbolic(), {"batch": 64})
    assert [shape[0] for shape in lowered_at] == [61, 59, 47]
    lowered_at.clear()
    expected = lower_symbolic(encoder_symbolic(layers=1), {"sequence": 64})
    assert [shape[1] for shape in lowered_at] == [61, 59, 53, 47]
    lowered_at.clear()
    monkeypatch.setattr(SymbolicShapes, "degrees", lambda self: {"sequence": 1})
    refitted = lower_symbolic(encoder_symbolic(layers=1), {"sequence": 64})
    assert [shape[1] for shape in lowered_at] == [61, 59, 47, 53]
    assert refitted.program.symbolic_text() == expected.program.symbolic_text()
    assert refitted.plan.problem == expected.plan.problem


def test_constant_whose_data_follows_the_symbol_is_one_line() -> None:
    """Gather(table, Shape(x)[1] - 1) folds into one row whose data changes
    with the sequence: no leading block of anything."""
    g = GraphBuilder("last_position", 0)
    x = g.input("x", TensorProto.FLOAT, [1, "sequence", 256])
    last = g.op("Sub", g.op("Gather", g.op("Shape", x), g.const([1], np.int64), axis=0), g.const([1], np.int64))
    model = g.model([(g.op("Add", x, g.op("Gather", g.weight([64, 256]), last, axis=0)), TensorProto.FLOAT)])
    with pytest.raises(PyoccError, match=r"^last_position: the constant %gather holds data computed at import from "
                                         r"the value of sequence; pyocc cannot run it for every value: feed it as a "
                                         r"graph input, or fix the dimension with --shape$"):
        lower_symbolic(model, {"sequence": 64})


# -- the command line -------------------------------------------------------

def pyocc(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the `pyocc` command in this process: (exit status, stdout, stderr)."""
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def encoder_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("symbolic") / "encoder.onnx"
    onnx.save(encoder_symbolic(layers=1), str(path))
    return path


def test_plan_json_gives_the_formula_and_the_value_at_the_maximum(encoder_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = pyocc(capsys, "plan", str(encoder_path), "--dim", "sequence=256", "--format", "json")
    assert status == 0, err
    plan = json.loads(out)
    assert plan["symbols"] == {"sequence": [1, 256]}
    output = encoder_symbolic(layers=1).graph.output[0].name
    assert plan["types"] == {"x": "1x{sequence}x32xf32", output: "1x{sequence}x32xf32"}
    assert plan["activation_bytes_expr"].startswith("max(end(") or plan["activation_bytes_expr"].startswith("end(")
    lowered = lower_symbolic(encoder_path, {"sequence": 256})
    assert plan["activation_bytes"] == lowered.plan.pool_bytes({"sequence": 256})
    assert {b["size_expr"] for b in plan["buffers"]} >= {"128*sequence", "16*sequence^2"}


@pytest.mark.parametrize(("args", "message"), [
    ((), "graph input 'x' has a dynamic dimension 1 ('sequence'); fix it with --shape x=1x1x32 "
         "(or shapes={'x': ...} in the API), or run every value up to MAX with --dim sequence=MAX"),
    (("--dim", "sequence"), "--dim 'sequence' must look like NAME=MAX, e.g. --dim sequence=512"),
    (("--dim", "sequence=0"), "--dim 'sequence=0': the maximum must be at least 1"),
    (("--dim", "sequence=8", "--dim", "batch=2"),
     "--dim names 'batch', which no graph input's dimension is (symbolic dimensions: sequence)"),
    # a mistyped name alone: named as such, not as the undeclared dimension it left
    (("--dim", "seq=8"), "--dim names 'seq', which no graph input's dimension is (symbolic dimensions: sequence)"),
    (("--dim", "sequence=8", "--target", "cuda"),
     "symbolic shapes (--dim) run on the host only for now; use --target host, or fix the dimensions "
     "with --shape for target cuda"),
    (("--dim", "sequence=8", "--memory", "lazy"), "symbolic shapes (--dim) plan one pool: use --memory pool, not 'lazy'"),
])
def test_bad_dims_are_one_line(encoder_path: Path, args: tuple[str, ...], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = pyocc(capsys, "plan", str(encoder_path), *args)
    assert status != 0 and out == ""
    assert err.strip().splitlines() == [f"pyocc: error: {message}"]


def test_shape_still_fixes_the_dimension(encoder_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--shape gives the static plan: the same report as lowering the model
    at that shape, planned by the static planners."""
    status, out, err = pyocc(capsys, "plan", str(encoder_path), "--shape", "x=1x16x32", "--format", "json")
    assert status == 0, err
    fixed = json.loads(out)
    _, static = lower(encoder_path, shapes={"x": (1, 16, 32)})
    assert fixed["planner"] == static.planner and fixed["planner"] != "symbolic"
    assert fixed["activation_bytes"] == static.activation_bytes
    assert [b["offset"] for b in fixed["buffers"]] == [b.offset for b in static.buffers]
    # and --dim on a dimension --shape fixed says so
    status, out, err = pyocc(capsys, "plan", str(encoder_path), "--shape", "x=1x16x32", "--dim", "sequence=64")
    assert status == 1 and err.splitlines() == [
        "pyocc: error: --dim names 'sequence', but --shape fixes every input that has it; drop one of the two"]


def test_plan_at_one_value_draws_the_symbolic_plan_there(encoder_path: Path, capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path) -> None:
    lowered = lower_symbolic(encoder_path, {"sequence": 64})
    at_17 = lowered.memory_report(dims={"sequence": 17})
    status, out, err = pyocc(capsys, "plan", str(encoder_path), "--dim", "sequence=64", "--at", "sequence=17",
                             "--format", "json")
    assert status == 0, err
    report = json.loads(out)
    assert report["planner"] == "symbolic" and report["activation_bytes"] == at_17.activation_bytes
    assert sorted(b["offset"] for b in report["buffers"]) == sorted(lowered.plan.offsets({"sequence": 17}).values())
    assert [1, 4, 17, 17] in [b["shape"] for b in report["buffers"]]
    svg = tmp_path / "plan.svg"
    assert pyocc(capsys, "plan", str(encoder_path), "--dim", "sequence=64", "--at", "sequence=17", "-o", str(svg))[0] == 0
    assert svg.read_text().startswith("<svg") and format_bytes(at_17.activation_bytes) in svg.read_text()
    status, out, err = pyocc(capsys, "plan", str(encoder_path), "--dim", "sequence=64", "--format", "svg")
    assert status == 1 and err.splitlines() == [
        "pyocc: error: with --dim, pictures, --explain and --liveness show one value: add --at NAME=VALUE, "
        "e.g. --at sequence=17"]
    status, out, err = pyocc(capsys, "plan", str(encoder_path), "--at", "sequence=17")
    assert status == 1 and err.splitlines() == [
        "pyocc: error: --at picks a value of a symbolic dimension: give its range with --dim too, "
        "e.g. --dim sequence=512 --at sequence=17"]


def test_an_op_order_that_changes_between_probes_is_the_first_probes_at_every_probe() -> None:
    """At --dim sequence=32 dnn-reorder, searching at each probe, picks one
    order at S = 31 and another at S = 23 (the programs then differed, and
    the lowering fell back to the model's own order at every size). The
    probes now take the first probe's order (S = 31, the top of the range):
    one program, searched once, and its bound at each S no higher than the
    model's own order's, lower at the top."""
    def order_at(s: int) -> tuple[int, ...] | None:
        options = Options(memory="lazy", reorder_symbol_dim=s, unfold_broadcasts=s)
        return lower(copy(encoder_symbolic()), shapes={"x": (1, s, 32)}, options=options)[1].reorder_order

    assert order_at(31) != order_at(23)
    lowered = lower_symbolic(encoder_symbolic(), {"sequence": 32})
    assert lowered.options.reorder == "auto"
    for s in (1, 23, 32):
        _, given = lower(copy(encoder_symbolic()), shapes={"x": (1, s, 32)}, reorder="given")
        bound = lowered.memory_report(dims={"sequence": s}).lower_bound_bytes
        assert bound < given.lower_bound_bytes if s == 32 else bound <= given.lower_bound_bytes


def test_a_probe_taking_the_first_probes_order_is_the_probe_searched_alone() -> None:
    """The BERT-style graph at its first two probes for --dim sequence=512
    (509 and 503): lowered at 503 with the order the search took at 509
    (`Options.reorder_order`), the program is the one its own search makes,
    integers, buffers and sizes alike."""
    def lowered_at(s: int, order: tuple[int, ...] = ()) -> tuple[str, api.MemoryReport]:
        options = Options(memory="lazy", reorder_symbol_dim=s, unfold_broadcasts=s, reorder_order=order)
        model = bert_symbolic()
        module, report = lower(copy(model), shapes={i.name: (1, s) for i in model.graph.input}, options=options)
        return re.sub(r"dense_resource<[^>]*>", "dense_resource<>", str(module)), report

    _, first = lowered_at(509)
    assert first.reorder_order is not None and first.reorder_order != tuple(range(len(first.reorder_order)))
    searched, alone = lowered_at(503)
    taken, reused = lowered_at(503, first.reorder_order)
    assert taken == searched
    assert reused.reorder_order == alone.reorder_order == first.reorder_order
    assert (reused.naive_bytes, reused.lower_bound_bytes) == (alone.naive_bytes, alone.lower_bound_bytes)


def test_generated_plan_arithmetic_reads_fewer_ends_for_the_same_offsets() -> None:
    """The generated run function computes each offset from the ends of
    only those buffers of its below-set that no other member sits on, and
    the pool from the buffers nothing sits on (`_needed_ends`): on BERT's
    recorded planning problem (4 pieces) that is fewer maxima, and the
    offsets and pool computed so equal the plan's at every length."""
    problem = symbolic_problem_from_json(json.loads(
        (Path(__file__).parent.parent / "planning" / "data" / "bert_classic_symbolic.json").read_text()))
    plan = plan_symbolic(problem)
    assert len(plan.pieces) > 1
    buffers = problem.buffers
    read = [sum(map(len, _needed_ends(piece)[0])) for piece in plan.pieces]
    assert sum(read) < sum(sum(map(len, piece.below)) for piece in plan.pieces) * 0.6, read
    for piece in plan.pieces:
        below, tops = _needed_ends(piece)
        low, high = piece.ranges["sequence"]
        for s in range(low, high + 1):
            values = {"sequence": s}
            ends: dict[int, int] = {}
            offsets: dict[str, int] = {}
            for i in piece.order:
                top = max((ends[c] for c in below[i]), default=0)
                alignment = buffers[i].alignment_at(values)
                offsets[buffers[i].name] = -(-top // alignment) * alignment
                ends[i] = offsets[buffers[i].name] + buffers[i].size.evaluate(values)
            assert offsets == plan.offsets(values), s
            assert max((ends[i] for i in tops), default=0) == plan.pool_bytes(values), s


def _plan_function(plan) -> tuple[object, object]:
    """`_emit_plan`'s code for `plan` (one symbol) in a function of its own,
    `void plan(i64 value, i64 *out)` writing the pool size and then every
    buffer's offset, JIT-compiled: (the C function, its engine)."""
    import ctypes

    import llvmlite.ir as ir

    from pyocc.lowering.symbolic_native import _emit_plan
    from pyocc.runtime.jit import jit_module

    (name,) = plan.problem.symbols
    i64 = ir.IntType(64)
    module = ir.Module("plan")
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64, ir.PointerType()]), "plan")
    entry = function.append_basic_block("entry")
    b = ir.IRBuilder(function.append_basic_block("body"))
    ir.IRBuilder(entry).branch(b.block)
    value, out = function.args

    def poly(p: Poly | int) -> ir.Value:
        if not isinstance(p, Poly):
            return ir.Constant(i64, int(p))
        total: ir.Value = ir.Constant(i64, 0)
        for monomial, coefficient in p.terms:
            term: ir.Value = ir.Constant(i64, coefficient)
            for _, power in monomial:
                for _ in range(power):
                    term = b.mul(term, value)
            total = b.add(total, term)
        return total

    offsets, pool = _emit_plan(function, b, plan, poly)
    for k, result in enumerate([pool, *(offsets[i] for i in range(len(plan.problem.buffers)))]):
        b.store(result, b.gep(out, [ir.Constant(i64, k)], source_etype=i64))
    b.ret_void()
    engine, _ = jit_module(str(module), speed_level=0)
    return ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(engine.get_function_address("plan")), engine


@pytest.mark.parametrize("problem", ["bert", "fitted"])
def test_the_generated_plan_code_gives_the_plans_offsets_at_every_value(problem: str) -> None:
    """The run function's plan arithmetic (`_emit_plan`: the plan's pieces
    as tables, one loop) gives the plan's pool size and every offset at
    every value of the range: BERT's recorded problem (four pieces, so
    every piece's tables), and two 16*S^2-byte buffers whose alignment
    follows their size at small S (fitted at run time)."""
    from pyocc.planning import SymbolicBuffer, SymbolicProblem

    if problem == "bert":
        symbolic = symbolic_problem_from_json(json.loads(
            (Path(__file__).parent.parent / "planning" / "data" / "bert_classic_symbolic.json").read_text()))
    else:
        symbolic = SymbolicProblem((SymbolicBuffer("bias", Poly.parse("16*S^2"), 0, 2, 64),
                                    SymbolicBuffer("masked", Poly.parse("16*S^2"), 1, 3, 64)), {"S": (1, 8)})
    plan = plan_symbolic(symbolic)
    assert len(plan.pieces) > 1 or problem == "fitted"
    run, _engine = _plan_function(plan)
    (name, (low, high)), = symbolic.ranges.items()
    out = np.zeros(1 + len(symbolic.buffers), dtype=np.int64)
    for s in range(low, high + 1):
        run(s, out.ctypes.data)
        offsets = plan.offsets({name: s})
        assert out.tolist() == [plan.pool_bytes({name: s}), *(offsets[b.name] for b in symbolic.buffers)], s


def test_only_the_first_probe_runs_the_op_verifiers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The op verifiers run on the first probe's lowering only (on its
    imported and its lowered module, as for a static lowering; the others
    must be its program but for their integers: fit_program refuses
    anything else), so a symbolic compile verifies as often as one static
    lowering, not once per probe (four times for the encoder); the buffer
    lifetimes are still checked after every pass of every probe."""
    verified: list[int] = []
    lifetimes: list[int] = []
    real_verify, real_check = ModuleOp.verify, pipelines.check_lifetimes

    def counting_verify(module: ModuleOp, *args: object, **kwargs: object) -> None:
        verified.append(1)
        real_verify(module, *args, **kwargs)

    monkeypatch.setattr(ModuleOp, "verify", counting_verify)
    monkeypatch.setattr(pipelines, "check_lifetimes", lambda module: lifetimes.append(1) or real_check(module))
    model = encoder_symbolic(layers=1)
    lower(copy(model), shapes={"x": [1, 61, 32]}, memory="lazy")
    static_verified, static_checked = len(verified), len(lifetimes)
    verified.clear()
    lifetimes.clear()
    lowered = lower_symbolic(copy(model), {"sequence": 64})
    assert static_verified > 0
    assert len(verified) == static_verified
    assert len(lifetimes) == 4 * static_checked  # four probes
    x = {"x": np.random.default_rng(0).standard_normal((1, 17, 32)).astype(np.float32)}
    (got,) = lowered.runner.run({"sequence": 17}, x).values()
    np.testing.assert_allclose(got, ort.InferenceSession(model.SerializeToString()).run(None, x)[0],
                               rtol=1e-4, atol=1e-4)

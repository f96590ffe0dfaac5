"""dnn-reorder on real IR: the DAG it builds counts bytes exactly as the
liveness analysis does, reordered light models keep a valid body and never
a higher lower bound, and a reordered model still computes what onnxruntime
computes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType, f32

import pyocc
from pyocc.analysis.liveness import analyze_function
from pyocc.errors import PyoccError
from pyocc.examples.branches import build as branches_model
from pyocc.frontend.onnx_import import import_model
from pyocc.lowering.convert_onnx_to_dnn import ConvertOnnxToDnnPass
from pyocc.planning.schedule import is_topological, peak_of
from pyocc.rewrites.dnn_reorder import (
    DnnReorderPass,
    bytes_at,
    dimension_at,
    order_taken,
    reorder_function,
    schedule_graph,
    schedule_nodes,
)
from tests.conftest import light_model_path
from tests.tools.inprocess import run_tool


def tensor_function(model: Path | onnx.ModelProto) -> func.FuncOp:
    module = import_model(model)
    ConvertOnnxToDnnPass().apply(Context(), module)
    return next(op for op in module.walk() if isinstance(op, func.FuncOp))


@pytest.mark.parametrize("name, better", [
    ("squeezenet", False), ("inception_v1", False), ("shufflenet", True), ("resnet50", False),
])
def test_light_models_reorder_to_a_bound_no_higher(name: str, better: bool) -> None:
    function = tensor_function(light_model_path(name))
    given = analyze_function(function).lower_bound
    graph, _ = schedule_graph(function.body.block)
    assert peak_of(graph, range(graph.size)) == given
    result = reorder_function(function, "auto", budget_ms=2000)
    function.verify()
    assert is_topological(graph, result.order)
    assert result.given_peak == given
    assert analyze_function(function).lower_bound == result.peak
    assert result.proven_optimal
    # ShuffleNet's stride-2 units can run the pooled shortcut before the
    # grouped convolutions; the others' given orders are already optimal.
    assert (result.peak < given) if better else (result.peak == given)


def test_a_given_order_is_taken_as_the_search_made_it() -> None:
    """dnn-reorder{order}: ShuffleNet's order as the search took it
    (`order_taken`), given to the pass on a fresh import, makes the same
    program without searching; the identity leaves the given order as it
    is, and an order that is none of the function's (reversed) is ignored:
    the pass searches as without it."""
    searched = tensor_function(light_model_path("shufflenet"))
    nodes = schedule_nodes(searched.body.block)
    DnnReorderPass().apply(Context(), searched.parent_op())
    order = order_taken(nodes, searched.body.block)
    assert order != tuple(range(len(nodes)))  # the search moved ops

    def text(function: func.FuncOp) -> str:
        # each import names its weights' resources anew
        return re.sub(r"dense_resource<[^>]*>", "dense_resource<>", str(function))

    def reordered(given: tuple[int, ...]) -> str:
        function = tensor_function(light_model_path("shufflenet"))
        DnnReorderPass(order=given).apply(Context(), function.parent_op())
        function.verify()
        return text(function)

    assert reordered(order) == text(searched)
    assert reordered(tuple(range(len(nodes)))) == text(tensor_function(light_model_path("shufflenet")))
    assert reordered(order[::-1]) == text(searched)


def test_random_graphs_cost_model_is_the_liveness_analysis() -> None:
    """On the fuzzer's random graphs (branches, skips, views, returned
    intermediates) the DAG's given peak is the liveness lower bound, and the
    exact order's peak is the lower bound of the reordered body."""
    from pyocc.testing.random_graphs import random_graph

    improved = 0
    for seed in range(60):
        function = tensor_function(random_graph(seed))
        given = analyze_function(function).lower_bound
        graph, _ = schedule_graph(function.body.block)
        assert peak_of(graph, range(graph.size)) == given, seed
        result = reorder_function(function, "exact", budget_ms=10_000)
        function.verify()
        assert analyze_function(function).lower_bound == result.peak <= given, seed
        improved += result.peak < given
    assert improved > 0


@pytest.mark.parametrize("memory", ["lazy", "pool"])
def test_reordered_branches_match_onnxruntime(memory: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    model = branches_model()
    compiled = pyocc.compile(model, memory=memory, reorder="auto")
    report = compiled.memory_report()
    # Given: three 4096-byte maps and the first 64-byte pooling are live
    # together. Reordered: one map at a time next to the finished poolings.
    assert report.lower_bound_given_order_bytes == 3 * 4096 + 64
    assert report.tensor_lower_bound_bytes == 4096 + 3 * 64
    # the buffers' bound also holds the convolutions' im2col scratch (its op's
    # least block where it runs at the peak)
    scratch = max((b.bytes for b in report.buffers if b.name.endswith("_scratch")), default=0)
    assert report.lower_bound_bytes <= report.tensor_lower_bound_bytes + scratch
    assert report.reorder == "auto"
    x = np.random.default_rng(1).standard_normal((1, 4, 8, 8)).astype(np.float32)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    (expected,) = ort.InferenceSession(model.SerializeToString(), options).run(None, {"x": x})
    np.testing.assert_allclose(compiled.run({"x": x})["y"], expected, rtol=1e-4, atol=1e-5)


def test_given_keeps_the_order_and_reports_one_bound() -> None:
    _, report = pyocc.lower(branches_model(), reorder="given")
    assert report.reorder is None
    assert report.tensor_lower_bound_bytes == report.lower_bound_given_order_bytes == 3 * 4096 + 64


def test_exact_out_of_budget_is_a_user_error_and_auto_still_improves() -> None:
    wide = branches_model(k=24)
    with pytest.raises(PyoccError, match=r"dnn-reorder: exact search on @\w+ did not finish in 500 ms; "
                                         r"raise budget_ms or use strategy=auto"):
        pyocc.lower(wide, reorder="exact")
    _, report = pyocc.lower(wide, reorder="auto")
    assert report.tensor_lower_bound_bytes < report.lower_bound_given_order_bytes


def test_unknown_strategy_is_a_user_error() -> None:
    with pytest.raises(PyoccError, match="dnn-reorder: unknown strategy 'magic'"):
        pyocc.lower(branches_model(), reorder="magic")


def test_cli_reorder_flag(tmp_path: Path) -> None:
    path = tmp_path / "branches.onnx"
    onnx.save(branches_model(), str(path))
    run = run_tool("pyocc", "plan", str(path), "--format", "json", "--reorder", "exact")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert (report["lower_bound_given_order_bytes"], report["tensor_lower_bound_bytes"]) == (3 * 4096 + 64, 4096 + 3 * 64)
    bad = run_tool("pyocc", "plan", str(path), "--reorder", "magic")
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        "pyocc: error: dnn-reorder: unknown strategy 'magic' (choose from auto, exact, greedy, given)"]


def test_a_symbolic_probe_counts_its_multiples_as_multiples_of_the_size() -> None:
    """A symbolic compile compares two orders at small values of the size
    (dnn-reorder{symbol_dim}). At batch 2 the classic BERT export's linear
    layers run on [2 * S, hidden]: rows of 1,018 at the probe 509, which
    were counted as 1,018 rows at every size, so the order was chosen on
    wrong sizes (1.081x the static plan at S = 17). A multiple of the probe
    (a prime) is that multiple of the size; a small probe only itself."""
    assert dimension_at(509, 22, 509) == 22
    assert dimension_at(509, 22, 2 * 509) == 2 * 22
    assert dimension_at(509, 22, 4 * 509 * 509) == 4 * 22 * 22
    assert dimension_at(509, 22, 768) == 768
    assert dimension_at(509, 22, 0) == 0
    assert dimension_at(7, 2, 7) == 2
    assert dimension_at(7, 2, 14) == 14  # below MULTIPLES_FROM: 7 divides too many of a model's own sizes
    assert bytes_at(509, 1, TensorType(f32, [2 * 509, 32])) == 2 * 32 * 4
    assert bytes_at(509, 17, TensorType(f32, [2, 4, 509, 509])) == 2 * 4 * 17 * 17 * 4

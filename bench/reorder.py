"""What dnn-reorder buys: the max-live lower bound in the given ONNX order and
after reordering, the pool the planner then reaches, and the time it takes.

Per light model and per toy architecture of tests/graphs.py (MobileNetV2,
UNet, BERT, GPT-2, ViT), in tensor-form dnn after convert-onnx-to-dnn: ops, regions
between cuts and the largest one, the lower bound in the given order, after
`greedy` (beam search alone) and after `auto` (exact per region within the
budget), whether auto proved its order optimal, the time of the dnn-reorder
pass, the planned pool (`pyocc.lower`, memory=pool) with the given order
and with auto, and the bounds in the given order and after auto when
in-place writes over dying inputs are modelled (`in_place=true`, the rule
dnn-coalesce applies after memory insertion). Then synthetic graphs of parallel branches whose given order
is poor (every big map first), where `exact` must reach the optimum.

    python bench/reorder.py            # the table (about a minute)
    python bench/reorder.py --quick    # squeezenet, shufflenet, inception_v1 only
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import onnx

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xdsl.context import Context
from xdsl.dialects import func

import pyocc
from pyocc.analysis.liveness import analyze_function
from pyocc.frontend.onnx_import import import_model
from pyocc.lowering.convert_onnx_to_dnn import ConvertOnnxToDnnPass
from pyocc.planning.schedule import ScheduleGraph, Tensor, schedule
from pyocc.rewrites.dnn_reorder import reorder_function, schedule_graph
from tests import graphs
from tests.conftest import LIGHT_MODELS, light_model_path


def tensor_function(model: Path | onnx.ModelProto) -> func.FuncOp:
    """The model's main function in tensor-form dnn."""
    module = import_model(model)
    ConvertOnnxToDnnPass().apply(Context(), module)
    return next(op for op in module.walk() if isinstance(op, func.FuncOp))


def model_row(name: str, model: Path | onnx.ModelProto, budget_ms: float) -> list[str]:
    """One table row for a model."""
    function = tensor_function(model)
    given = analyze_function(function).lower_bound
    graph, _ = schedule_graph(function.body.block)
    greedy = schedule(graph, "greedy", budget_ms)
    in_place = schedule(schedule_graph(function.body.block, in_place=True)[0], "auto", budget_ms)
    start = time.perf_counter()
    auto = reorder_function(function, "auto", budget_ms)
    pass_ms = (time.perf_counter() - start) * 1000
    after = analyze_function(function).lower_bound
    assert after == auto.peak <= given
    _, pool_given = pyocc.lower(model, reorder="given")
    _, pool_auto = pyocc.lower(model, reorder="auto")
    return [name, str(graph.size), str(auto.regions), str(max(auto.region_sizes)), f"{given:,}",
            f"{greedy.peak:,}", f"{after:,}", f"{after / given:.3f}", "yes" if auto.proven_optimal else "no",
            f"{pass_ms:.0f}", f"{pool_given.activation_bytes:,}", f"{pool_auto.activation_bytes:,}",
            f"{in_place.given_peak:,}", f"{in_place.peak:,}"]


def parallel_branches(k: int, big: int = 1 << 20, small: int = 1 << 10) -> ScheduleGraph:
    """k branches of one source: a big map then a small reduction each, all
    read by one sink; the given order runs every map first."""
    names = ["source", *(f"map{i}" for i in range(k)), *(f"reduce{i}" for i in range(k)), "sink"]
    tensors = [Tensor(small, 0, frozenset(range(1, k + 1)))]
    tensors += [Tensor(big + 4096 * i, 1 + i, frozenset({1 + k + i})) for i in range(k)]
    tensors += [Tensor(small, 1 + k + i, frozenset({2 * k + 1})) for i in range(k)]
    return ScheduleGraph(tuple(names), tuple(tensors))


def synthetic_row(k: int, budget_ms: float) -> list[str]:
    """One table row for a parallel-branch graph of k branches."""
    graph = parallel_branches(k)
    greedy = schedule(graph, "greedy", budget_ms)
    exact = schedule(graph, "exact", budget_ms=60_000)
    auto = schedule(graph, "auto", budget_ms)
    return [f"branches-{k}", str(graph.size), str(exact.regions), str(max(exact.region_sizes)),
            f"{exact.given_peak:,}", f"{greedy.peak:,}", f"{auto.peak:,}", f"{auto.peak / exact.given_peak:.3f}",
            f"{'yes' if auto.proven_optimal else 'no'} (exact {exact.peak:,}, {exact.ms:.0f} ms)",
            f"{auto.ms:.0f}", "", "", "", ""]


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three models only")
    parser.add_argument("--budget-ms", type=float, default=500.0, help="dnn-reorder budget_ms (default 500)")
    args = parser.parse_args()
    names = ["squeezenet", "shufflenet", "inception_v1"] if args.quick else LIGHT_MODELS
    header = ["model", "ops", "regions", "largest", "LB given", "LB greedy", "LB auto", "auto/given",
              "proven optimal", "reorder ms", "pool given", "pool auto", "in-place given", "in-place auto"]
    rows = [model_row(name, light_model_path(name), args.budget_ms) for name in names]
    if not args.quick:
        rows += [model_row(name, getattr(graphs, name)(), args.budget_ms)
                 for name in ("mobilenet_v2", "unet", "bert", "gpt2", "vit")]
    rows += [synthetic_row(k, args.budget_ms) for k in (4, 8, 12)]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


if __name__ == "__main__":
    main()

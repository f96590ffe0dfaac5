"""Kernel launches before and after layer fusion, next to onnxruntime's.

For each light model: the number of dnn compute ops (one kernel call each;
views and weights are free) after convert-onnx-to-dnn, then after dnn-fuse,
the activation bytes of pool mode (the planned pool) before and after
(fusion must never raise them), and the node count of onnxruntime's optimised graph
(ORT_ENABLE_ALL, saved with optimized_model_filepath). Goal: ours <= ORT's.

    python bench/fusion_ops.py [MODEL ...] [--graphs]

Not a test: it prints a table. The light models make their weights with
ConstantOfShape nodes; onnxruntime gets them as initializers (as a deployed
model has them: it folds batch norms into convs only then), pyocc the model
as shipped (it folds either; weight values change no count and no byte).

bench/memory.py shows the same as columns (``memory_columns``).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LIGHT_MODELS = [
    "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
    "shufflenet", "squeezenet", "vgg19", "zfnet512",
]


@dataclass
class FusionCounts:
    """One row of the table."""

    model: str
    ops_before: int
    ops_after: int
    pool_before: int
    pool_after: int
    ort_nodes: int


def dnn_op_count(model: object, fuse: bool) -> tuple[int, int]:
    """(kernel launches, pool-mode activation bytes) of the compiled model."""
    from pyocc.api import lower

    module, report = lower(model, memory="pool", fuse=fuse)  # type: ignore[arg-type]
    return kernel_launches(module), report.activation_bytes


def ort_node_count(model: object) -> int:
    """Nodes in onnxruntime's fully optimised graph of `model`."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "optimized.onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = path
        options.log_severity_level = 3
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])  # type: ignore[attr-defined]
        return len(onnx.load(path, load_external_data=False).graph.node)


def light_model(name: str) -> object:
    """The light model `name` as shipped in the onnx wheel."""
    import onnx

    return onnx.load(str(Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"))


def with_initializers(model: Any) -> Any:
    """`model` with each ConstantOfShape node replaced by the initializer it
    computes."""
    import numpy as np
    from onnx import helper, numpy_helper

    model = type(model).FromString(model.SerializeToString())
    inits = {t.name: t for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            nodes.append(node)
            continue
        shape = [int(n) for n in numpy_helper.to_array(inits[node.input[0]])]
        value = next((numpy_helper.to_array(helper.get_attribute_value(a)).reshape(-1)[0]
                      for a in node.attribute if a.name == "value"), np.float32(0))
        model.graph.initializer.append(numpy_helper.from_array(np.full(shape, value), node.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def kernel_launches(module: object) -> int:
    """dnn compute ops (one kernel call each) in a lowered module."""
    from pyocc.dialects.dnn import ops as d

    return sum(isinstance(o, d.DnnComputeOp) for o in module.walk())  # type: ignore[attr-defined]


def memory_columns(column: Callable[..., Any]) -> list[Any]:
    """bench/memory.py columns (pass its ``Column``): kernel launches without
    and with fusion, onnxruntime's optimised node count, the max-live bytes
    and auto's pool with fusion (its ``ModelContext.lower(fuse=...)``; its
    baseline keeps ``fuse=False``)."""
    from pyocc.planning import lower_bound, plan_memory

    return [
        column("ops", "count", lambda ctx: kernel_launches(ctx.lower(fuse=False).module)),
        column("ops fused", "count", lambda ctx: kernel_launches(ctx.lower(fuse=True).module)),
        column("ORT ops", "count", lambda ctx: ort_node_count(with_initializers(light_model(ctx.name)))),
        column("max-live fused", "bytes", lambda ctx: lower_bound(ctx.lower(fuse=True).problem)),
        column("auto fused", "bytes", lambda ctx: plan_memory(ctx.lower(fuse=True).problem, "auto").pool_size),
    ]


def fusion_counts(name: str) -> FusionCounts:
    """Measure one light model."""
    model = light_model(name)
    before, pool_before = dnn_op_count(model, fuse=False)
    after, pool_after = dnn_op_count(model, fuse=True)
    return FusionCounts(name, before, after, pool_before, pool_after, ort_node_count(with_initializers(model)))


def graph_counts(name: str) -> FusionCounts:
    """Measure one of the transformer/CNN test graphs (tests/graphs.py)."""
    from tests.graphs import GRAPHS

    model = GRAPHS[name](seed=0)
    before, pool_before = dnn_op_count(model, fuse=False)
    after, pool_after = dnn_op_count(model, fuse=True)
    return FusionCounts(name, before, after, pool_before, pool_after, ort_node_count(model))


def main(argv: list[str]) -> None:
    """Print the table for the named (default: all) light models; `--graphs`
    adds the small test graphs of tests/graphs.py (BERT, GPT-2, ViT, ...)."""
    from tests.graphs import GRAPHS

    graphs = "--graphs" in argv
    names = [a for a in argv if a != "--graphs"] or LIGHT_MODELS
    print(f"{'model':14s} {'dnn ops':>8s} {'fused':>6s} {'ORT':>5s}  {'pool MiB':>9s} {'fused':>6s}")
    rows = (fusion_counts(n) if n in LIGHT_MODELS else graph_counts(n) for n in names)
    for r in [*rows, *(graph_counts(n) for n in (sorted(GRAPHS) if graphs else []))]:
        print(f"{r.model:14s} {r.ops_before:8d} {r.ops_after:6d} {r.ort_nodes:5d}  "
              f"{r.pool_before / 2**20:9.2f} {r.pool_after / 2**20:6.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

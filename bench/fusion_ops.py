"""Kernel launches before and after layer fusion, next to onnxruntime's.

For each light model: the number of dnn compute ops (one kernel call each;
views and weights are free) after convert-onnx-to-dnn, then after dnn-fuse,
the activation bytes of pool mode (the planned pool) before and after
(fusion must never raise them), and the node count of onnxruntime's optimised graph
(ORT_ENABLE_ALL, saved with optimized_model_filepath). Goal: ours <= ORT's.

    python bench/fusion_ops.py [MODEL ...]

Not a test: it prints a table. The ConstantOfShape weights of the light
models are replaced by random initializers first, as in tests/e2e, so that
onnxruntime sees real constants to fold (as a deployed model has).
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

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
    from xdsl.dialects import func

    from pyocc.api import lower
    from pyocc.dialects.dnn import ops as d

    module, report = lower(model, memory="pool", fuse=fuse)  # type: ignore[arg-type]
    function = next(o for o in module.walk() if isinstance(o, func.FuncOp))
    count = sum(isinstance(o, d.DnnComputeOp) for o in function.body.block.ops)
    return count, report.activation_bytes


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


def fusion_counts(name: str) -> FusionCounts:
    """Measure one light model."""
    from tests.e2e.test_light_models_numerics import with_random_weights

    model = with_random_weights(name)
    before, pool_before = dnn_op_count(model, fuse=False)
    after, pool_after = dnn_op_count(model, fuse=True)
    return FusionCounts(name, before, after, pool_before, pool_after, ort_node_count(model))


def main(argv: list[str]) -> None:
    """Print the table for the named (default: all) light models."""
    print(f"{'model':14s} {'dnn ops':>8s} {'fused':>6s} {'ORT':>5s}  {'pool MiB':>9s} {'fused':>6s}")
    for name in argv or LIGHT_MODELS:
        r = fusion_counts(name)
        print(f"{r.model:14s} {r.ops_before:8d} {r.ops_after:6d} {r.ort_nodes:5d}  "
              f"{r.pool_before / 2**20:9.2f} {r.pool_after / 2**20:6.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""A model whose given op order is poor: the operator-order chapter's model.

    python -m pyocc.examples.branches branches.onnx

x ─┬─ conv3x3 ─ global average pool ─┐
   ├─ conv3x3 ─ global average pool ─┼─ concat ─ y
   └─ conv3x3 ─ global average pool ─┘

The node list runs every convolution first, so all three 4,096-byte maps
are live together; running one branch at a time keeps one map and the small
pooled results. Weights are seeded random numbers.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(k: int = 3, seed: int = 0) -> onnx.ModelProto:
    """k convolution branches of one input, each pooled, then concatenated,
    with every convolution listed first."""
    rng = np.random.default_rng(seed)
    inits, convs, pools = [], [], []
    for i in range(k):
        inits.append(numpy_helper.from_array(rng.standard_normal((16, 4, 3, 3)).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), f"b{i}"))
        convs.append(helper.make_node("Conv", ["x", f"w{i}", f"b{i}"], [f"map{i}"], pads=[1, 1, 1, 1]))
        pools.append(helper.make_node("GlobalAveragePool", [f"map{i}"], [f"pooled{i}"]))
    concat = helper.make_node("Concat", [f"pooled{i}" for i in range(k)], ["y"], axis=1)
    graph = helper.make_graph(
        [*convs, *pools, concat], "branches",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16 * k, 1, 1])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def main(argv: list[str]) -> int:
    """Write the model to the path given as the only argument."""
    if len(argv) != 2:
        print("usage: python -m pyocc.examples.branches OUT.onnx", file=sys.stderr)
        return 2
    onnx.save(build(), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The tutorial's model: a tiny CNN with the shapes real networks have.

    python -m pyocc.examples.tiny_cnn tiny.onnx

x ─ conv3x3 ─ batchnorm ─ relu ─┬─ conv1x1 ─ relu ─ add ─ maxpool ─┬─ conv1x1 ─┬─ concat ─ avgpool ─ flatten ─ gemm ─ y
                                └──────────────────┘               └─ conv3x3 ─┘

A residual Add (in-place candidate), a two-branch block joined by a Concat
(concat elimination, reordering), BatchNormalization (folding) and ReLUs
(fusion): one of each thing the compiler's chapters talk about. Weights are
seeded random numbers, so every run of this script writes the same file.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build() -> onnx.ModelProto:
    """The tiny CNN as an opset-17 ONNX model with random weights."""
    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)

    inits = [
        weight("w1", 8, 3, 3, 3), weight("b1", 8),
        weight("bn_scale", 8), weight("bn_bias", 8), weight("bn_mean", 8),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn_var"),
        weight("w2", 8, 8, 1, 1), weight("w3", 8, 8, 1, 1), weight("w4", 8, 8, 3, 3),
        weight("fc_w", 10, 16), weight("fc_b", 10),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["conv1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["conv1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["relu1"]),
        helper.make_node("Conv", ["relu1", "w2"], ["conv2"]),
        helper.make_node("Relu", ["conv2"], ["relu2"]),
        helper.make_node("Add", ["relu2", "relu1"], ["sum"]),
        helper.make_node("MaxPool", ["sum"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool", "w3"], ["left"]),
        helper.make_node("Conv", ["pool", "w4"], ["right"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["left", "right"], ["cat"], axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def main(argv: list[str]) -> int:
    """Write the model to the path given as the only argument."""
    if len(argv) != 2:
        print("usage: python -m pyocc.examples.tiny_cnn OUT.onnx", file=sys.stderr)
        return 2
    onnx.save(build(), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

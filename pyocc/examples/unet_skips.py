"""A small U-Net whose long-lived tensors are cheap to make again: the model
dnn-recompute (and `--memory-limit`'s recomputation) is for.

    python -m pyocc.examples.unet_skips unet.onnx

image ─ bn ─ relu ─ normed ─ conv ─ enc1 ─ pool ─ conv ─ enc2 ─ pool ─ conv ─ bottom ─ upsample ─ up_mid ─┐
           normed, enc1 ──────────────────┐             enc2 ───────────────────────────── concat ─ conv ─ dec_mid
                                          └─ concat(up_top, enc1, normed) ─ conv ─ conv (head) ─ conv1x1 + up_top ─ out
                                             up_top = upsample(dec_mid) ────────────────────────────────┘

`normed` (relu of the batch-normalised input) is a long skip made from the
graph input; `up_top`, the last upsample's output (32 x 64 x 64), is read
by the last concat and again, after the wide head conv, by the residual add
at the very end: a big tensor made from a 4x smaller one. Input 1x8x64x64,
conv3x3 + ReLU, MaxPool 2x2, nearest-neighbour Resize. Weights are seeded
random numbers, so every run writes the same file.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(seed: int = 0) -> onnx.ModelProto:
    """The U-Net as an opset-17 ONNX model with random weights."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv(name: str, x: str, c_in: int, c_out: int, k: int, relu: bool = True) -> str:
        w = const(f"{name}_w", rng.standard_normal((c_out, c_in, k, k)) / np.sqrt(c_in * k * k))
        b = const(f"{name}_b", 0.1 * rng.standard_normal(c_out))
        out = f"{name}_conv" if relu else name
        nodes.append(helper.make_node("Conv", [x, w, b], [out], kernel_shape=[k, k], pads=[k // 2] * 4))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [name]))
        return name

    def op(op_type: str, inputs: list[str], name: str, **attrs: object) -> str:
        nodes.append(helper.make_node(op_type, inputs, [name], **attrs))
        return name

    scales = const("scales", np.array([1.0, 1.0, 2.0, 2.0]))
    bn = [const("bn_scale", 1.0 + 0.1 * rng.standard_normal(8)), const("bn_bias", 0.1 * rng.standard_normal(8)),
          const("bn_mean", 0.1 * rng.standard_normal(8)), const("bn_var", 1.0 + 0.1 * rng.random(8))]
    normed = op("Relu", [op("BatchNormalization", ["image", *bn], "bn")], "normed")      # 8 x 64x64
    enc1 = conv("enc1", normed, 8, 16, 3)                                                  # 16 x 64x64
    pool1 = op("MaxPool", [enc1], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    enc2 = conv("enc2", pool1, 16, 32, 3)                                                  # 32 x 32x32
    pool2 = op("MaxPool", [enc2], "pool2", kernel_shape=[2, 2], strides=[2, 2])
    bottom = conv("bottom", pool2, 32, 64, 3)                                              # 64 x 16x16
    up_mid = op("Resize", [bottom, "", scales], "up_mid", mode="nearest")                  # 64 x 32x32
    dec_mid = conv("dec_mid", op("Concat", [up_mid, enc2], "cat_mid", axis=1), 96, 32, 3)  # 32 x 32x32
    up_top = op("Resize", [dec_mid, "", scales], "up_top", mode="nearest")                 # 32 x 64x64
    dec_top = conv("dec_top", op("Concat", [up_top, enc1, normed], "cat_top", axis=1), 56, 16, 3)  # 16 x 64x64
    head = conv("head", dec_top, 16, 64, 3)                                                # 64 x 64x64
    out = op("Add", [conv("proj", head, 64, 32, 1, relu=False), up_top], "out")            # 32 x 64x64
    graph = helper.make_graph(nodes, "unet_skips",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 8, 64, 64])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 32, 64, 64])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str]) -> int:
    """Write the model to the path given as the only argument."""
    if len(argv) != 2:
        print("usage: python -m pyocc.examples.unet_skips OUT.onnx", file=sys.stderr)
        return 2
    onnx.save(build(), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

# RUN: %python %s %t.onnx && pyocc-opt %t.onnx | filecheck %s
# RUN: pyocc-opt %t.onnx | pyocc-opt | filecheck %s
# A residual block built with onnx.helper: Conv -> Relu -> Add(skip), opset 13
# Unsqueeze with axes as an input, which the importer turns into a property.
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w")
axes = numpy_helper.from_array(np.array([0], dtype=np.int64), "axes")
graph = helper.make_graph(
    [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["s"]),
        helper.make_node("Unsqueeze", ["s", "axes"], ["y"]),
    ],
    "residual",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    [w, axes],
)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])

# CHECK: func.func @main_graph(%x: tensor<1x4x5x5xf32> {onnx.name = "x"}) -> (tensor<1x1x4x5x5xf32> {onnx.name = "y"})
# CHECK-NEXT: %w = "onnx.Constant"() <{value = dense_resource<w{{.*}}> : tensor<4x4x3x3xf32>}>
# CHECK-NEXT: %c = "onnx.Conv"(%x, %w) <{pads = array<i64: 1, 1, 1, 1>
# CHECK-NEXT: %r = "onnx.Relu"(%c)
# CHECK-NEXT: %s = "onnx.Add"(%r, %x)
# CHECK-NEXT: %y = "onnx.Unsqueeze"(%s) <{axes = array<i64: 0>}>
# CHECK: dialect_resources

# RUN: %python %s | filecheck %s
# A symbolic compile's probe (here the value 2 of its symbol) imports a
# folded constant whose blocks along its first axis are all equal (a
# batch's copies of a position table) and that has the probe value in a
# later axis as the Expand of its first block
# (import_model(unfold_broadcasts=2)); a constant whose blocks differ stays
# a constant, so does one without the value after its first axis, and so
# does every constant of a static import (the default).
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from pyocc.frontend.onnx_import import import_model

row = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
copies = numpy_helper.from_array(np.concatenate([row, row]), "copies")          # 2 x 2 x 3, blocks equal
different = numpy_helper.from_array(np.concatenate([row, row + 1]), "different")  # 2 x 2 x 3, blocks differ
wide = numpy_helper.from_array(np.ones((3, 1, 6), np.float32) * np.arange(6, dtype=np.float32), "wide")  # no 2 after
graph = helper.make_graph(
    [helper.make_node("Add", ["x", "copies"], ["a"]), helper.make_node("Add", ["a", "different"], ["y"]),
     helper.make_node("Add", ["w", "wide"], ["z"])],
    "batch",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 3]),
     helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 1, 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    [copies, different, wide],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
print(import_model(model, unfold_broadcasts=2))
print("// -----")
print(import_model(model))

# CHECK:      %copies__pyocc_block = "onnx.Constant"() <{value = dense<{{.*}}> : tensor<1x2x3xf32>}>
# CHECK-NEXT: %copies = "onnx.Expand"(%copies__pyocc_block) <{shape = array<i64: 2, 2, 3>}>
# CHECK-SAME: -> tensor<2x2x3xf32>
# CHECK:      %a = "onnx.Add"(%x, %copies)
# CHECK:      %different = "onnx.Constant"() <{value = dense<{{.*}}> : tensor<2x2x3xf32>}>
# CHECK:      %wide = "onnx.Constant"() <{value = dense{{.*}} : tensor<3x1x6xf32>}>
# CHECK:      // -----
# CHECK-NOT:  onnx.Expand
# CHECK:      %copies = "onnx.Constant"() <{value = dense<{{.*}}> : tensor<2x2x3xf32>}>

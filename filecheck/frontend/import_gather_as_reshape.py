# RUN: %python %s %t.onnx && pyocc-opt %t.onnx | filecheck %s
# A Gather whose constant indices are every position of its axis in order
# (transformers' lookup of a flattened mask at batch * S + position) is
# imported as the Reshape it is; one with indices out of order stays a Gather.
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

in_order = numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 1, 3), "in_order")
shuffled = numpy_helper.from_array(np.array([[1, 0, 2], [3, 5, 4]], dtype=np.int64), "shuffled")
graph = helper.make_graph(
    [
        helper.make_node("Flatten", ["x"], ["flat"], axis=2),
        helper.make_node("Gather", ["flat", "in_order"], ["same"], axis=0),
        helper.make_node("Gather", ["flat", "shuffled"], ["moved"], axis=0),
    ],
    "lookups",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("same", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("moved", TensorProto.FLOAT, None)],
    [in_order, shuffled],
)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])

# CHECK: func.func @main_graph(%x: tensor<2x3xf32> {onnx.name = "x"})
# CHECK: %flat = "onnx.Flatten"(%x)
# CHECK-NOT: %in_order
# CHECK: %same = "onnx.Reshape"(%flat) <{shape = array<i64: 2, 1, 3, 1>
# CHECK-SAME: -> tensor<2x1x3x1xf32>
# CHECK: %moved = "onnx.Gather"(%flat, %shuffled)

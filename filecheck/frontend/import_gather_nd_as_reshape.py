# RUN: %python %s %t.onnx && pyocc-opt %t.onnx | filecheck %s
# A GatherND whose constant indices are every (row, column) pair in order
# (the dynamo exporter's lookup of a batch's mask by (batch, position)) is
# imported as the Reshape it is; one with pairs out of order, with
# batch_dims 1, or over a batch of 1 (pairs [1, ..., 2], read in place by a
# symbolic program already), stays a GatherND.
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

in_order = numpy_helper.from_array(np.indices((2, 3)).reshape(2, -1).T.reshape(2, 1, 3, 2).astype(np.int64),
                                   "in_order")
swapped = numpy_helper.from_array(np.indices((2, 3)).reshape(2, -1).T[::-1].reshape(2, 1, 3, 2).astype(np.int64),
                                  "swapped")
# every row in order with batch_dims 0 (a Reshape), but with batch_dims 1 the diagonal x[b, b]
per_batch = numpy_helper.from_array(np.array([[0], [1]], dtype=np.int64), "per_batch")
# every (row, column) pair of a 1 x 3 mask in order, but over a batch of 1
one_row = numpy_helper.from_array(np.indices((1, 3)).reshape(2, -1).T.reshape(1, 1, 3, 2).astype(np.int64), "one_row")
graph = helper.make_graph(
    [
        helper.make_node("Neg", ["x"], ["mask"]),
        helper.make_node("GatherND", ["mask", "in_order"], ["same"]),
        helper.make_node("GatherND", ["mask", "swapped"], ["moved"]),
        helper.make_node("GatherND", ["mask", "per_batch"], ["batched"], batch_dims=1),
        helper.make_node("Slice", ["mask", "zero", "one", "zero"], ["first_row"]),
        helper.make_node("GatherND", ["first_row", "one_row"], ["single"]),
    ],
    "lookups",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("same", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("moved", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("batched", TensorProto.FLOAT, None),
     helper.make_tensor_value_info("single", TensorProto.FLOAT, None)],
    [in_order, swapped, per_batch, one_row, numpy_helper.from_array(np.array([0], np.int64), "zero"),
     numpy_helper.from_array(np.array([1], np.int64), "one")],
)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])

# CHECK: func.func @main_graph(%x: tensor<2x3xf32> {onnx.name = "x"})
# CHECK: %mask = "onnx.Neg"(%x)
# CHECK-NOT: %in_order
# CHECK: %same = "onnx.Reshape"(%mask) <{shape = array<i64: 2, 1, 3>
# CHECK-SAME: -> tensor<2x1x3xf32>
# CHECK: %moved = "onnx.GatherND"(%mask, %swapped)
# CHECK: %batched = "onnx.GatherND"(%mask, %per_batch)
# CHECK: %single = "onnx.GatherND"(%first_row, %one_row)

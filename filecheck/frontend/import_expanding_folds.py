# RUN: %python %s | filecheck %s
# Folding must not make the program's memory larger
# (pyocc.frontend.onnx_import.EXPANDING_FOLD_LIMIT): a constant
# computation whose result is larger than the constants it is computed
# from, and than 64 bytes, stays ops (T5's relative positions: two Ranges
# to the length, subtracted into [S, S]), back to its small sources. A
# fold that is not larger than its sources (a table plus a row) still
# folds, and so does a larger one of at most 64 bytes (the same Ranges at
# S = 2). A splat (ConstantOfShape) that an op broadcasting its operands
# reads is stored as its smallest block (one element of a [S, S] zeros);
# read by an op that does not broadcast (MatMul), it stays whole.
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from pyocc.frontend.onnx_import import import_model


def model(length: int):
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
        helper.make_node("Unsqueeze", ["positions", "axis0"], ["row"]),
        helper.make_node("Unsqueeze", ["positions", "axis1"], ["column"]),
        helper.make_node("Sub", ["row", "column"], ["relative"]),                 # S x S
        helper.make_node("Cast", ["relative"], ["relative_f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["table", "bias"], ["shifted"]),                  # S x S, from S x S
        helper.make_node("Shape", ["relative"], ["square"]),
        helper.make_node("ConstantOfShape", ["square"], ["zeros"],
                         value=numpy_helper.from_array(np.array([0.0], np.float32))),
        helper.make_node("Max", ["y", "zeros"], ["clipped"]),
        helper.make_node("MatMul", ["clipped", "zeros"], ["product"]),
        helper.make_node("Add", ["product", "relative_f"], ["a"]),
        helper.make_node("Add", ["a", "shifted"], ["out"]),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n)
             for n, v in (("zero", 0), ("one", 1), ("axis0", [0]), ("axis1", [1]))]
    inits += [numpy_helper.from_array(np.arange(length * length, dtype=np.float32).reshape(length, length), "table"),
              numpy_helper.from_array(np.ones((1, length), np.float32), "bias")]
    graph = helper.make_graph(
        nodes, "expanding",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, length]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [length, length])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


print(import_model(model(16)))
print("// -----")
print(import_model(model(2)))

# CHECK-LABEL: func.func @main_graph
# CHECK:       %positions = "onnx.Range"() <{start = 0.000000e+00 : f64, delta = 1.000000e+00 : f64}> : () -> tensor<16xi64>
# CHECK:       %row = "onnx.Unsqueeze"(%positions)
# CHECK:       %column = "onnx.Unsqueeze"(%positions)
# CHECK:       %relative = "onnx.Sub"(%row, %column) : (tensor<1x16xi64>, tensor<16x1xi64>) -> tensor<16x16xi64>
# CHECK:       %relative_f = "onnx.Cast"(%relative)
# CHECK:       %zeros__pyocc_block0 = "onnx.Constant"() <{value = dense<0.000000e+00> : tensor<1x1xf32>}>
# CHECK-NEXT:  %clipped = "onnx.Max"(%y, %zeros__pyocc_block0) : (tensor<16x16xf32>, tensor<1x1xf32>) -> tensor<16x16xf32>
# CHECK-NEXT:  %zeros = "onnx.ConstantOfShape"() <{value = dense<0.000000e+00> : tensor<1xf32>}> : () -> tensor<16x16xf32>
# CHECK-NEXT:  %product = "onnx.MatMul"(%clipped, %zeros)
# CHECK:       %shifted = "onnx.Constant"() <{value = dense_resource<{{.*}}> : tensor<16x16xf32>}>
# CHECK-NEXT:  %out = "onnx.Add"(%a, %shifted)
# CHECK-LABEL: // -----
# CHECK-NOT:   onnx.Range
# CHECK-NOT:   onnx.Sub
# CHECK:       %relative_f = "onnx.Constant"() <{value = dense<{{\[\[}}0.000000e+00, 1.000000e+00], [-1.000000e+00, 0.000000e+00]]> : tensor<2x2xf32>}>

# RUN: %python %s %t
# RUN: filecheck %s --check-prefix=PROGRAM --input-file %t.program
# RUN: filecheck %s --check-prefix=PLAN --input-file %t.plan
# RUN: filecheck %s --check-prefix=FOLDED --input-file %t.folded
# RUN: not pyocc plan %t.onnx --dim sequence=64 --target cuda 2>&1 | filecheck %s --check-prefix=CUDA
# Symbolic shapes through onnx -> dnn -> pool: a one-head attention block
# whose input x is [1, "sequence", 8] (an ONNX dim_param), lowered for every
# sequence up to 64. `program` prints the buffer-form program with its
# varying integers as formulas; `plan` the pool plan's formulas; `folded`
# the one line for a constant folded from the sequence length whose data
# follows it (negative).
import contextlib
import json
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pyocc.api import lower_symbolic
from pyocc.errors import PyoccError
from pyocc.weights import isolated_store

rng = np.random.default_rng(0)


def weight(name, shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def model(folded=False):
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "x"], ["y"]),
    ]
    inits = [weight("wq", (8, 8)), weight("wk", (8, 8))]
    if folded:
        # last = table[Shape(x)[1] - 1]: folded at import into one row whose data follows the sequence
        nodes += [helper.make_node("Shape", ["x"], ["shape"]),
                  helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
                  helper.make_node("Sub", ["length", "one"], ["index"]),
                  helper.make_node("Gather", ["table", "index"], ["last"], axis=0),
                  helper.make_node("MatMul", ["y", "last"], ["out"])]
        inits += [weight("table", (64, 8, 32)), numpy_helper.from_array(np.array([1], np.int64), "one")]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence", 8])],
                              [helper.make_tensor_value_info("out" if folded else "y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def program_mode() -> None:
    print(lower_symbolic(model(), {"sequence": 64}).program.symbolic_text())


def plan_mode() -> None:
    print(json.dumps(lower_symbolic(model(), {"sequence": 64}).to_json(), indent=1))


def folded_mode() -> None:
    try:
        lower_symbolic(model(folded=True), {"sequence": 64})
    except PyoccError as e:
        print(f"error: {e}")


# One process writes each mode's output to its own file (%t.MODE), one
# filecheck prefix per file: the modes share the import of pyocc (1.5 s of
# CPU each). Each mode runs with an empty weights store and a fresh random
# generator, as in a process of its own.
out = sys.argv[1]
onnx.save(model(), out + ".onnx")
for name, run in {"program": program_mode, "plan": plan_mode, "folded": folded_mode}.items():
    rng = np.random.default_rng(0)
    with open(f"{out}.{name}", "w") as f, contextlib.redirect_stdout(f), isolated_store():
        run()

# PROGRAM: func.func @main_graph(%x: memref<1x{sequence}x8xf32> {onnx.name = "x"}, %y_out: memref<1x{sequence}x8xf32> {onnx.name = "y", dnn.output})
# PROGRAM: %q = dnn.malloc {size = {32*sequence} : i64} : memref<1x{sequence}x8xf32>
# PROGRAM-NEXT: dnn.matmul ins(%x, %wq : memref<1x{sequence}x8xf32>, memref<8x8xf32>) outs(%q : memref<1x{sequence}x8xf32>)
# PROGRAM: %kt = dnn.malloc {size = {32*sequence} : i64} : memref<1x8x{sequence}xf32>
# PROGRAM: %scores = dnn.malloc {size = {4*sequence^2} : i64} : memref<1x{sequence}x{sequence}xf32>
# PROGRAM-NEXT: dnn.matmul ins(%q, %kt : memref<1x{sequence}x8xf32>, memref<1x8x{sequence}xf32>) outs(%scores : memref<1x{sequence}x{sequence}xf32>)
# PROGRAM-NEXT: dnn.dealloc %q {size = {32*sequence} : i64}

# PLAN: "symbols": {
# PLAN-NEXT: "sequence": [
# PLAN-NEXT: 1,
# PLAN-NEXT: 64
# PLAN: "activation_bytes_expr": "{{(max\()?}}end({{.*}}",
# PLAN-NEXT: "activation_bytes":
# PLAN: "size_expr": "32*sequence",
# PLAN-NEXT: "offset_expr": "0",
# PLAN: "size_expr": "4*sequence^2",
# PLAN-NEXT: "offset_expr": "align({{(max\()?}}end({{.*}}), fitted(64, 4*sequence^2))",

# FOLDED: error: attention: the constant %last holds data computed at import from the value of sequence; pyocc cannot run it for every value: feed it as a graph input, or fix the dimension with --shape
# FOLDED-NOT: error

# CUDA: pyocc: error: symbolic shapes (--dim) run on the host only for now; use --target host, or fix the dimensions with --shape for target cuda

# RUN: %python %s %t
# RUN: filecheck %s --check-prefix=SHAPES --input-file %t.shapes
# RUN: filecheck %s --check-prefix=POOL --input-file %t.pool
# RUN: filecheck %s --check-prefix=FIXED --input-file %t.fixed
# RUN: not pyocc plan %t.onnx --dim sequence=64 2>&1 | filecheck %s --check-prefix=NORULE
# RUN: filecheck %s --check-prefix=CROSSING --input-file %t.crossing
# RUN: filecheck %s --check-prefix=FORM --input-file %t.form
# RUN: filecheck %s --check-prefix=FOLDED --input-file %t.form-folded
# Symbols in the IR through onnx -> dnn -> pool: a one-head attention block
# on x [1, "sequence", 8] (an ONNX dim_param) whose merge Reshape takes its
# target from Shape -> Gather -> Concat. `shapes` prints every tensor's
# inferred symbolic type (no probing); `pool` the pool plan as IR, offsets
# and pool size as arith ops on %sequence, and the buffers as views with
# dynamic dimensions (memref<1x?x?xf32>, the ? as SSA values); `form` the
# whole pool-form program with those memrefs (negative: `form-folded`, a
# constant sliced to the length has no symbolic form yet); `fixed` the same model with
# --shape (no symbol anywhere). Negative: an op without a symbolic shape
# rule and a Slice whose end crosses its dimension inside the range are one
# line each.
import contextlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pyocc.api import lower_symbolic
from pyocc.errors import PyoccError
from pyocc.frontend.symbolic_shapes import infer_symbolic_shapes
from pyocc.frontend.symbols import symbolic_inputs
from pyocc.weights import isolated_store

rng = np.random.default_rng(0)


def weight(name, shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def model(extra=(), extra_inits=(), output="out"):
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "x"], ["y"]),
        helper.make_node("Shape", ["y"], ["shape"]),
        helper.make_node("Gather", ["shape", "first_two"], ["batch_seq"], axis=0),
        helper.make_node("Concat", ["batch_seq", "width"], ["target"], axis=0),
        helper.make_node("Reshape", ["y", "target"], ["out"]),
        *extra,
    ]
    inits = [weight("wq", (8, 8)), weight("wk", (8, 8)), ints("first_two", [0, 1]), ints("width", [8]),
             *extra_inits]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence", 8])
    graph = helper.make_graph(nodes, "attention", [x], [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def shapes_mode() -> None:
    m = model()
    shapes = infer_symbolic_shapes(m, symbolic_inputs(m, {"sequence": 64}))
    for node in m.graph.node:
        tensor = shapes.tensors[node.output[0]]
        values = "" if tensor.values is None else " = [" + ", ".join(map(str, tensor.values)) + "]"
        print(f"%{node.output[0]} : {shapes.text(node.output[0])}{values}")


def pool_mode() -> None:
    lowered = lower_symbolic(model(), {"sequence": 64})
    for i, b in enumerate(lowered.plan.problem.buffers):
        print(f"// buffer {b.name}: size {b.size}, offset {lowered.plan.offset_expr(i)}")
    module = lowered.pool_module()
    module.verify()
    print(module)


def fixed_mode() -> None:
    m = model()
    shapes = infer_symbolic_shapes(m, symbolic_inputs(m, {}, {"x": [1, 5, 8]}), {"x": [1, 5, 8]})
    for node in m.graph.node:
        print(f"%{node.output[0]} : {shapes.text(node.output[0])}")


def form_mode() -> None:
    module = lower_symbolic(model(), {"sequence": 64}).pool_form_module()
    module.verify()
    print(module)
    names = [op.name for op in module.walk()]
    print(f"// mallocs: {names.count('dnn.malloc')}, deallocs: {names.count('dnn.dealloc')}, "
          f"views: {names.count('dnn.symbolic_view')}")


def form_folded_mode() -> None:
    # out + table[:sequence]: import folds the Slice at each probe into a constant of `sequence` rows
    m = model([helper.make_node("Shape", ["x"], ["xshape"]),
               helper.make_node("Gather", ["xshape", "one"], ["length"], axis=0),
               helper.make_node("Slice", ["table", "zero", "length", "zero"], ["rows"]),
               helper.make_node("Add", ["out", "rows"], ["sum"])],
              [ints("one", [1]), ints("zero", [0]), weight("table", (64, 8))], "sum")
    try:
        lower_symbolic(m, {"sequence": 64}).pool_form_module()
    except PyoccError as e:
        print(f"error: {e}")


def crossing_mode() -> None:
    # table[:, :sequence] of a 40-column table: the end crosses 40 inside 1..64
    m = model([helper.make_node("Shape", ["x"], ["xshape"]),
               helper.make_node("Gather", ["xshape", "one"], ["length"], axis=0),
               helper.make_node("Slice", ["table", "zero", "length", "one"], ["rows"])],
              [ints("one", [1]), ints("zero", [0]), weight("table", (8, 40))], "rows")
    try:
        lower_symbolic(m, {"sequence": 64})
    except PyoccError as e:
        print(f"error: {e}")

# SHAPES: %q : 1x{sequence}x8xf32
# SHAPES-NEXT: %k : 1x{sequence}x8xf32
# SHAPES-NEXT: %kt : 1x8x{sequence}xf32
# SHAPES-NEXT: %scores : 1x{sequence}x{sequence}xf32
# SHAPES-NEXT: %p : 1x{sequence}x{sequence}xf32
# SHAPES-NEXT: %y : 1x{sequence}x8xf32
# SHAPES-NEXT: %shape : 3xi64 = [1, sequence, 8]
# SHAPES-NEXT: %batch_seq : 2xi64 = [1, sequence]
# SHAPES-NEXT: %target : 3xi64 = [1, sequence, 8]
# SHAPES-NEXT: %out : 1x{sequence}x8xf32

# FIXED: %scores : 1x5x5xf32
# FIXED: %target : 3xi64
# FIXED-NOT: sequence

# NORULE: pyocc: error: {{.*}}.onnx: symbolic shape inference: TopK at node 'top' has no symbolic shape rule {{.*}}; fix the dimension with --shape
# NORULE-NOT: Traceback

# CROSSING: error: attention: symbolic shape inference: Slice at node 'rows' compares sequence with 40, whose order changes inside the range; fix the dimension with --shape

# POOL: // buffer q#0: size 32*sequence, offset 0
# POOL: // buffer kt#2: size 32*sequence, offset align(end(q#0), fitted(64, 32*sequence))
# POOL: // buffer scores#3: size 4*sequence^2, offset align(max(end(q#0), end(kt#2)), fitted(64, 4*sequence^2))
# POOL: func.func @attention_pool(%sequence: index) -> (index, index, index, index, index) {
# POOL: %[[Q_SIZE:.*]] = arith.muli %c32, %sequence : index
# POOL-NEXT: %end_q = arith.addi %c0, %[[Q_SIZE]] : index
# a buffer smaller than 64 bytes is aligned to the next power of two of its size: kt follows q
# (32 * sequence bytes, 32 at the least) at 32 bytes or 64, chosen from q's size at run time
# POOL-NEXT: %[[SMALL:.*]] = arith.cmpi sle, %[[Q_SIZE]], %c32 : index
# POOL-NEXT: %[[ALIGN:.*]] = arith.select %[[SMALL]], %c32, %c64 : index
# POOL-NEXT: %[[BUMP:.*]] = arith.addi %[[ALIGN]], %cm1 : index
# POOL-NEXT: %[[UP:.*]] = arith.addi %end_q, %[[BUMP]] : index
# POOL-NEXT: %[[BLOCKS:.*]] = arith.floordivsi %[[UP]], %[[ALIGN]] : index
# POOL-NEXT: %offset_kt = arith.muli %[[BLOCKS]], %[[ALIGN]] : index
# POOL-NEXT: %end_kt = arith.addi %offset_kt, %[[Q_SIZE]] : index
# POOL: %[[SQUARE:.*]] = arith.muli %sequence, %sequence : index
# POOL-NEXT: %[[SCORES_SIZE:.*]] = arith.muli %c4, %[[SQUARE]] : index
# POOL: %offset_scores = arith.muli
# POOL-NEXT: %end_scores = arith.addi %offset_scores, %[[SCORES_SIZE]] : index
# POOL-NEXT: %[[TOP:.*]] = arith.cmpi sge, %end_k, %end_scores : index
# POOL-NEXT: %[[POOL:.*]] = arith.select %[[TOP]], %end_k, %end_scores : index
# POOL-NEXT: %pool = dnn.symbolic_pool %[[POOL]] : memref<?xi8>
# POOL-NEXT: %q = dnn.symbolic_view %pool[%c0] (%sequence) : memref<?xi8> -> memref<1x?x8xf32>
# POOL-NEXT: %k = dnn.symbolic_view %pool[%offset_k] (%sequence) : memref<?xi8> -> memref<1x?x8xf32>
# POOL-NEXT: %kt = dnn.symbolic_view %pool[%offset_kt] (%sequence) : memref<?xi8> -> memref<1x8x?xf32>
# POOL-NEXT: %scores = dnn.symbolic_view %pool[%offset_scores] (%sequence, %sequence) : memref<?xi8> -> memref<1x?x?xf32>
# POOL-NEXT: dnn.pool_release %pool : memref<?xi8>
# POOL-NEXT: func.return %[[POOL]], %c0, %offset_k, %offset_kt, %offset_scores : index, index, index, index, index

# FORM: func.func @main_graph(%sequence: index, %x: memref<1x?x8xf32> {onnx.name = "x"}, %out_out: memref<1x?x8xf32> {onnx.name = "out", dnn.output}) {
# FORM: %pool = dnn.symbolic_pool %{{.*}} : memref<?xi8>
# FORM: %q = dnn.symbolic_view %pool[%c0] (%sequence) : memref<?xi8> -> memref<1x?x8xf32>
# FORM-NEXT: dnn.matmul ins(%x, %wq : memref<1x?x8xf32>, memref<8x8xf32>) outs(%q : memref<1x?x8xf32>)
# FORM: %kt = dnn.symbolic_view %pool[%offset_kt] (%sequence) : memref<?xi8> -> memref<1x8x?xf32>
# FORM-NEXT: dnn.transpose ins(%k : memref<1x?x8xf32>) outs(%kt : memref<1x8x?xf32>)
# FORM-NEXT: %scores = dnn.symbolic_view %pool[%offset_scores] (%sequence, %sequence) : memref<?xi8> -> memref<1x?x?xf32>
# FORM-NEXT: dnn.matmul ins(%q, %kt : memref<1x?x8xf32>, memref<1x8x?xf32>) outs(%scores : memref<1x?x?xf32>)
# FORM-NEXT: dnn.softmax ins(%scores : memref<1x?x?xf32>) outs(%scores : memref<1x?x?xf32>)
# FORM: dnn.pool_release %pool : memref<?xi8>
# FORM-NEXT: func.return
# FORM: // mallocs: 0, deallocs: 0, views: 4

# FOLDED: error: attention: dnn.weight %rows holds a number that depends on the symbolic size; the symbolic pool form cannot write it yet (the plan and the probed program still run)


# One process writes every mode's output to its own file (%t.MODE), one
# filecheck prefix per file: the modes share the import of pyocc and numpy
# (1.5 s of CPU each) and each still prints into its own file, as when the
# RUN lines ran the script once per mode. Each mode runs with an empty
# weights store and a fresh random generator, as a fresh process would (the
# keys printed stay w1, not w1_3).
MODES = {"shapes": shapes_mode, "pool": pool_mode, "fixed": fixed_mode, "crossing": crossing_mode,
         "form": form_mode, "form-folded": form_folded_mode}
out = sys.argv[1]
onnx.save(model([helper.make_node("TopK", ["out", "two"], ["top", "index"], axis=-1)], [ints("two", [2])], "top"),
          out + ".onnx")
for name, run in MODES.items():
    rng = np.random.default_rng(0)  # each mode's weights as in a process of its own
    with open(f"{out}.{name}", "w") as f, contextlib.redirect_stdout(f), isolated_store():
        run()

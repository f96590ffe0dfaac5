# RUN: %python %s pieces | filecheck %s --check-prefix=PIECES
# RUN: %python %s one | filecheck %s --check-prefix=ONE
# RUN: %python %s pool | filecheck %s --check-prefix=POOL
# A symbolic plan in pieces (pyocc.planning.symbolic): one attention block
# on x [1, "sequence", 8] whose first activation is 4x wider than the rest,
# compiled for every length up to 64. One layout for 1..64 is more than 2%
# over the static plan at the small lengths, so the planner cuts the range:
# sequence <= 9 and 10..64, each with its own layout. `pieces` prints the
# plan's pieces and the generated run function (pyocc.lowering.symbolic_native):
# it is `noinline optnone` (its kernels are not). The plan is data: every
# piece's placement order, below-sets, alignments and top buffers in
# constant tables, one piece after the other; the run function counts the
# piece bounds the length is above (one compare here) and runs one loop
# over that piece's rows, before the pool is allocated. Negative: `one`,
# the same block without the wide activation, is one piece: no compare,
# and tables of one piece. `pool`: the plan as IR computes both pieces'
# offsets and selects with the length's compare.
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from pyocc.api import lower_symbolic
from pyocc.lowering.symbolic_native import build_symbolic_native

rng = np.random.default_rng(0)


def model(wide: bool):
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["hr"]),
             helper.make_node("MatMul", ["hr", "w2"], ["q"])] if wide else \
        [helper.make_node("MatMul", ["x", "w2"], ["q"])]
    nodes += [helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
              helper.make_node("MatMul", ["q", "qt"], ["scores"]),
              helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "q"], ["out"])]
    inits = [numpy_helper.from_array(rng.standard_normal((8, 32)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal((32, 8) if wide else (8, 8)).astype(np.float32), "w2")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence", 8])
    graph = helper.make_graph(nodes, "attention", [x], [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              inits if wide else inits[1:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


lowered = lower_symbolic(model(sys.argv[1] != "one"), {"sequence": 64})
if sys.argv[1] == "pool":
    print(lowered.pool_module(views=False))
else:
    for piece in lowered.plan.pieces:
        print(f"// piece sequence in {piece.ranges['sequence']}")
    print(build_symbolic_native("attention", lowered.runner.steps, lowered.runner.weights, lowered.plan).llvm_ir)

# PIECES:      // piece sequence in (1, 9)
# PIECES-NEXT: // piece sequence in (10, 64)
# (the kernels, defined before the run function, are optimised; the run function is not)
# PIECES:      define internal void @"attention_site_0"
# PIECES-NOT:  optnone
# PIECES-LABEL: define i32 @"attention_run"(ptr %{{.*}}, ptr %{{.*}}, ptr %{{.*}}, ptr %{{.*}}, ptr %[[SYMBOLS:[^)]*]]) noinline optnone
# PIECES:       %[[S:.*]] = ptrtoint ptr %{{.*}} to i64
# PIECES:     body:
# PIECES:       %"above_piece0" = icmp ugt i64 %[[S]], 9
# PIECES-NOT:   above_piece1
# PIECES:       @"attention_run_plan_order_start"
# PIECES:     while:
# PIECES:       @"attention_run_plan_order"
# PIECES:       %"pool_bytes" = load i64
# PIECES:       call ptr @"pyocc_alloc"(i64 64, i64 %{{.*}})
# PIECES:       ret i32 0
# (the tables: each piece's 4 buffers in its placement order, piece 0's then piece 1's)
# PIECES:     @"attention_run_plan_order_start" = internal constant [3 x i64] [i64 0, i64 4, i64 8]
# PIECES-NEXT: @"attention_run_plan_order" = internal constant [8 x i64]

# ONE:      // piece sequence in (1, 64)
# ONE-NOT:  // piece
# ONE-LABEL: define i32 @"attention_run"
# ONE:      body:
# ONE-NOT:  above_piece
# ONE:      while:
# ONE:      call ptr @"pyocc_alloc"(i64 64, i64 %{{.*}})
# ONE:      ret i32 0
# ONE:      @"attention_run_plan_order_start" = internal constant [2 x i64] [i64 0, i64 3]

# POOL-LABEL: func.func @attention_pool(%sequence: index) -> (index, index, index, index, index)
# POOL:       %end_h_0_piece0 = arith.addi
# POOL:       %end_h_0_piece1 = arith.addi
# POOL:       %[[IN:.*]] = arith.cmpi sle, %sequence, %c9 : index
# POOL-NEXT:  %offset_{{[a-z]+}} = arith.select %[[IN]], %{{.*}}, %{{.*}} : index
# POOL:       %offset_qt = arith.select %[[IN]], %offset_qt_2_piece0, %offset_qt_2_piece1 : index
# POOL:       %pool_size = arith.select %[[IN]], %{{.*}}, %{{.*}} : index
# POOL-NEXT:  func.return %pool_size, {{.*}} : index, index, index, index, index

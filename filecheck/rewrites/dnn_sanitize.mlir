// RUN: pyocc-opt %s -p "dnn-insert-memory-ops{mode=lazy},dnn-sanitize{guard=32}" | filecheck %s
// RUN: pyocc-opt %s -p "dnn-insert-memory-ops{mode=lazy},dnn-sanitize{guard=32},dnn-memory-pool" | filecheck %s --check-prefix=POOL
// RUN: not pyocc-opt %s -p "dnn-insert-memory-ops,dnn-memory-pool,dnn-sanitize" 2>&1 | filecheck %s --check-prefix=AFTER

// Each intermediate is poisoned when allocated (its malloc grows by the
// guard), checked after its producer wrote it, and poisoned again before its
// dealloc. The pool plan then includes the guard bytes.
// CHECK-LABEL: func.func @chain
// CHECK: %[[A:.*]] = dnn.malloc {size = 4128 : i64}
// CHECK-NEXT: dnn.sanitize outs(%[[A]] : {{.*}}) {action = "poison", guard = 32 : i64, buffer = "a"
// CHECK-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}})
// CHECK-NEXT: dnn.sanitize outs(%[[A]] : {{.*}}) {action = "check", guard = 32 : i64, buffer = "a", {{.*}}writer = "dnn.unary"}
// CHECK: dnn.unary ins(%[[A]] : {{.*}}) outs(%{{.*}} : {{.*}})
// CHECK: dnn.sanitize outs(%[[A]] : {{.*}}) {action = "poison", guard = 0 : i64, buffer = "a"
// CHECK-NEXT: dnn.dealloc %[[A]] {size = 4128 : i64}
// Two buffers of 4096 + 32 guard bytes, the second at the next 64-byte boundary (4160).
// POOL: dnn.pool_init {size = 8288 : i64}
// AFTER: dnn-sanitize needs buffer-form dnn (dnn.malloc/dnn.dealloc), which dnn-insert-memory-ops produces, but @chain is in a planned pool (dnn.pool_init/dnn.mem_offset); run dnn-sanitize before dnn-memory-pool
func.func @chain(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "relu"} : tensor<1024xf32>
  %b = dnn.unary ins(%a : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %c = dnn.unary ins(%b : tensor<1024xf32>) {fn = "tanh"} : tensor<1024xf32>
  func.return %c : tensor<1024xf32>
}

// Negative: an op that writes straight into a graph output has no
// intermediate, so nothing is probed (the caller owns that memory).
// CHECK-LABEL: func.func @output_only
// CHECK-NOT: dnn.sanitize
// CHECK: func.return
func.func @output_only(%x: tensor<16xf32>) -> tensor<16xf32> {
  %r = dnn.unary ins(%x : tensor<16xf32>) {fn = "relu"} : tensor<16xf32>
  func.return %r : tensor<16xf32>
}

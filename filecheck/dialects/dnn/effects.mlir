// RUN: pyocc-opt %s -p canonicalize | filecheck %s

// A buffer-form kernel has no result but writes its `out`: dead-code
// elimination must keep it (dnn's KernelEffects trait, not Pure).
// CHECK-LABEL: func.func @kept
// CHECK: dnn.unary ins(%x : {{.*}}) outs(%y : {{.*}})
func.func @kept(%x: memref<4xf32>, %y: memref<4xf32> {dnn.output}) {
  dnn.unary ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) {fn = "relu"}
  func.return
}

// A tensor-form op whose value nobody reads has no effect: it goes.
// CHECK-LABEL: func.func @dropped
// CHECK-NOT: dnn.unary
// CHECK: func.return %x
func.func @dropped(%x: tensor<4xf32>) -> tensor<4xf32> {
  %dead = dnn.unary ins(%x : tensor<4xf32>) {fn = "relu"} : tensor<4xf32>
  func.return %x : tensor<4xf32>
}

// RUN: pyocc-opt %s -p "dnn-reorder" | filecheck %s
// RUN: pyocc-opt %s -p "dnn-reorder{strategy=exact}" | filecheck %s

// Negative: an op that is not a dnn op (here a call, which may have side
// effects) keeps its place among all others, so the maps stay before it and
// the poolings after it; no better order is left and the body is kept.
// CHECK-LABEL: func.func @pinned_by_a_call
// CHECK-NEXT: %a1 = dnn.unary ins(%x : {{.*}})
// CHECK-NEXT: %c1 = dnn.unary ins(%x : {{.*}})
// CHECK-NEXT: func.call @observe(%a1)
// CHECK-NEXT: %a2 = dnn.global_average_pool ins(%a1 : {{.*}})
// CHECK-NEXT: %c2 = dnn.global_average_pool ins(%c1 : {{.*}})

// Without the call the same body is reordered (one branch at a time).
// CHECK-LABEL: func.func @not_pinned
// CHECK-NEXT: %[[M1:.*]] = dnn.unary ins(%x : {{.*}})
// CHECK-NEXT: dnn.global_average_pool ins(%[[M1]] : {{.*}})
// CHECK-NEXT: %[[M2:.*]] = dnn.unary ins(%x : {{.*}})
// CHECK-NEXT: dnn.global_average_pool ins(%[[M2]] : {{.*}})
func.func private @observe(tensor<1x4x16x16xf32>) -> ()
func.func @pinned_by_a_call(%x: tensor<1x4x16x16xf32>) -> tensor<1x4x1x1xf32> {
  %a1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "relu"} : tensor<1x4x16x16xf32>
  %c1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "exp"} : tensor<1x4x16x16xf32>
  func.call @observe(%a1) : (tensor<1x4x16x16xf32>) -> ()
  %a2 = dnn.global_average_pool ins(%a1 : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %c2 = dnn.global_average_pool ins(%c1 : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %s = dnn.binary ins(%a2, %c2 : tensor<1x4x1x1xf32>, tensor<1x4x1x1xf32>) {fn = "add"} : tensor<1x4x1x1xf32>
  func.return %s : tensor<1x4x1x1xf32>
}

func.func @not_pinned(%x: tensor<1x4x16x16xf32>) -> tensor<1x4x1x1xf32> {
  %a1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "relu"} : tensor<1x4x16x16xf32>
  %c1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "exp"} : tensor<1x4x16x16xf32>
  %a2 = dnn.global_average_pool ins(%a1 : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %c2 = dnn.global_average_pool ins(%c1 : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %s = dnn.binary ins(%a2, %c2 : tensor<1x4x1x1xf32>, tensor<1x4x1x1xf32>) {fn = "add"} : tensor<1x4x1x1xf32>
  func.return %s : tensor<1x4x1x1xf32>
}

// RUN: pyocc-opt %s -p "dnn-reorder" | filecheck %s
// RUN: pyocc-opt %s -p "dnn-print-liveness" | filecheck %s --check-prefix=BEFORE
// RUN: pyocc-opt %s -p "dnn-reorder{strategy=exact},dnn-print-liveness" | filecheck %s --check-prefix=AFTER
// RUN: pyocc-opt %s -p "dnn-reorder{strategy=greedy},dnn-print-liveness" | filecheck %s --check-prefix=AFTER
// RUN: pyocc-opt %s -p "dnn-reorder{strategy=given}" | filecheck %s --check-prefix=GIVEN
// RUN: pyocc-opt %s -p "dnn-reorder{in_place=true}" | filecheck %s --check-prefix=INPLACE
// RUN: pyocc-opt %s -p "dnn-reorder{keep_given=true}" | filecheck %s --check-prefix=KEEP
// RUN: pyocc-opt %s -p "dnn-reorder{symbol_dim=16}" | filecheck %s --check-prefix=SYMBOL
// RUN: not pyocc-opt %s -p "dnn-reorder{strategy=magic}" 2>&1 | filecheck %s --check-prefix=BAD
// RUN: not pyocc-opt %s -p "dnn-insert-memory-ops,dnn-reorder" 2>&1 | filecheck %s --check-prefix=BUFFERS

// Two branches, each a 4096-byte map reduced to 16 bytes. The given order
// runs both maps first: 4096 + 4096 + 16 = 8208 bytes live at the first
// pooling. Finishing one branch before starting the other keeps one map at
// a time: the peak is 16 + 4096 + 16 = 4128 bytes (at the second pooling).
// Either branch may go first; the weight moves to just before its user.
// BEFORE-LABEL: liveness of @two_branches
// BEFORE: max-live lower bound: 8208 bytes
// AFTER-LABEL: liveness of @two_branches
// AFTER: max-live lower bound: 4128 bytes
// CHECK-LABEL: func.func @two_branches
// CHECK-NEXT: %[[M1:.*]] = dnn.unary ins(%x : {{.*}})
// CHECK-NEXT: %[[R1:.*]] = dnn.global_average_pool ins(%[[M1]] : {{.*}})
// CHECK-NEXT: %[[M2:.*]] = dnn.unary ins(%x : {{.*}})
// CHECK-NEXT: %[[R2:.*]] = dnn.global_average_pool ins(%[[M2]] : {{.*}})
// CHECK-NEXT: %s = dnn.binary ins(%a2, %c2 : {{.*}})
// CHECK-NEXT: %w = "dnn.weight"()
// CHECK-NEXT: %t = dnn.binary ins(%s, %w : {{.*}})
// CHECK-NEXT: func.return %t
// GIVEN-LABEL: func.func @two_branches
// GIVEN-NEXT: %w = "dnn.weight"()
// GIVEN-NEXT: %a1 = dnn.unary ins(%x : {{.*}})
// GIVEN-NEXT: %c1 = dnn.unary ins(%x : {{.*}})
// GIVEN-NEXT: %a2 = dnn.global_average_pool ins(%a1 : {{.*}})
// GIVEN-NEXT: %c2 = dnn.global_average_pool ins(%c1 : {{.*}})
// BAD: dnn-reorder: unknown strategy 'magic'
// BUFFERS: dnn-reorder needs tensor-form dnn, which convert-onnx-to-dnn produces, but @two_branches is in buffer-form dnn (dnn.malloc/dnn.dealloc); run dnn-reorder before dnn-insert-memory-ops
func.func @two_branches(%x: tensor<1x4x16x16xf32>) -> tensor<1x4x1x1xf32> {
  %w = "dnn.weight"() <{splat = dense<5.000000e-01> : tensor<1xf32>}> : () -> tensor<1x4x1x1xf32>
  %a1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "relu"} : tensor<1x4x16x16xf32>
  %c1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "exp"} : tensor<1x4x16x16xf32>
  %a2 = dnn.global_average_pool ins(%a1 : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %c2 = dnn.global_average_pool ins(%c1 : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %s = dnn.binary ins(%a2, %c2 : tensor<1x4x1x1xf32>, tensor<1x4x1x1xf32>) {fn = "add"} : tensor<1x4x1x1xf32>
  %t = dnn.binary ins(%s, %w : tensor<1x4x1x1xf32>, tensor<1x4x1x1xf32>) {fn = "mul"} : tensor<1x4x1x1xf32>
  func.return %t : tensor<1x4x1x1xf32>
}

// A view moves with its user: the branch whose result is read through a
// view is still finished before the other starts (peak 4128 bytes again).
// AFTER-LABEL: liveness of @view_branch
// AFTER: max-live lower bound: 4128 bytes
// CHECK-LABEL: func.func @view_branch
// CHECK: dnn.global_average_pool
// CHECK-NEXT: dnn.unary ins(%x : {{.*}})
// CHECK: %v = "dnn.view"(%b2)
// CHECK-NEXT: %s = dnn.binary ins(%v, %a2 : {{.*}})
func.func @view_branch(%x: tensor<1x4x16x16xf32>) -> tensor<4xf32> {
  %a1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "relu"} : tensor<1x4x16x16xf32>
  %b1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "exp"} : tensor<1x4x16x16xf32>
  %a1v = "dnn.view"(%a1) : (tensor<1x4x16x16xf32>) -> tensor<1x4x256xf32>
  %a2 = dnn.reduce ins(%a1v : tensor<1x4x256xf32>) {fn = "mean", axes = array<i64: 2>, keepdims = 0 : i64} : tensor<1x4xf32>
  %b2 = dnn.global_average_pool ins(%b1 : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %v = "dnn.view"(%b2) : (tensor<1x4x1x1xf32>) -> tensor<1x4xf32>
  %s = dnn.binary ins(%v, %a2 : tensor<1x4xf32>, tensor<1x4xf32>) {fn = "add"} : tensor<1x4xf32>
  %r = "dnn.view"(%s) : (tensor<1x4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// Negative: a chain has one order; the body is left exactly as it was
// (the weight stays at the top).
// BEFORE-LABEL: liveness of @chain
// BEFORE: max-live lower bound: 8192 bytes
// AFTER-LABEL: liveness of @chain
// AFTER: max-live lower bound: 8192 bytes
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %w = "dnn.weight"()
// CHECK-NEXT: %a = dnn.unary ins(%x : {{.*}})
// CHECK-NEXT: %b = dnn.binary ins(%a, %w : {{.*}})
// CHECK-NEXT: %c = dnn.unary ins(%b : {{.*}})
// CHECK-NEXT: func.return %c
func.func @chain(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %w = "dnn.weight"() <{splat = dense<2.000000e+00> : tensor<1xf32>}> : () -> tensor<1024xf32>
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "relu"} : tensor<1024xf32>
  %b = dnn.binary ins(%a, %w : tensor<1024xf32>, tensor<1024xf32>) {fn = "mul"} : tensor<1024xf32>
  %c = dnn.unary ins(%b : tensor<1024xf32>) {fn = "tanh"} : tensor<1024xf32>
  func.return %c : tensor<1024xf32>
}

// With in-place writes modelled, the pooling of %x runs first so that the
// relu is %x's last reader and may write over it: at most one 4096-byte map
// is live. Without them no order beats the given one, which is kept.
// CHECK-LABEL: func.func @in_place_last_reader
// CHECK-NEXT: %x = dnn.unary ins(%arg : {{.*}})
// CHECK-NEXT: %r = dnn.unary ins(%x : {{.*}})
// CHECK-NEXT: %m = dnn.global_average_pool ins(%x : {{.*}})
// INPLACE-LABEL: func.func @in_place_last_reader
// INPLACE-NEXT: %x = dnn.unary ins(%arg : {{.*}})
// INPLACE-NEXT: %m = dnn.global_average_pool ins(%x : {{.*}})
// INPLACE-NEXT: %r = dnn.unary ins(%x : {{.*}})
// INPLACE-NEXT: %g = dnn.global_average_pool ins(%r : {{.*}})
func.func @in_place_last_reader(%arg: tensor<1x4x16x16xf32>) -> tensor<1x4x1x1xf32> {
  %x = dnn.unary ins(%arg : tensor<1x4x16x16xf32>) {fn = "exp"} : tensor<1x4x16x16xf32>
  %r = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "relu"} : tensor<1x4x16x16xf32>
  %m = dnn.global_average_pool ins(%x : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %g = dnn.global_average_pool ins(%r : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %s = dnn.binary ins(%m, %g : tensor<1x4x1x1xf32>, tensor<1x4x1x1xf32>) {fn = "add"} : tensor<1x4x1x1xf32>
  func.return %s : tensor<1x4x1x1xf32>
}

// keep_given: the search finishes one branch before the other (the peak),
// and is free elsewhere: it runs %s before %p, %q and %pq. With
// keep_given the order found moves back toward the given one wherever the
// peak allows: the branches still run one after the other, %s stays after %pq.
// symbol_dim=16 (a symbolic compile's probe): the dimensions equal to 16
// are the size; of the two orders (same peak here), the one with the lower
// peak at its small values (1 and 4) is taken. There %a2 and %c2 are 16
// bytes each, as %s is: the kept order holds both while %p, %q and %pq
// run (80 bytes at %pq), the searched order only %s (64): the searched one.
// SYMBOL-LABEL: func.func @free_part
// SYMBOL: %c2 = dnn.global_average_pool
// SYMBOL-NEXT: %s = dnn.binary
// SYMBOL-NEXT: %p = dnn.unary
// CHECK-LABEL: func.func @free_part
// CHECK: %a1 = dnn.unary
// CHECK-NEXT: %a2 = dnn.global_average_pool
// CHECK-NEXT: %c1 = dnn.unary
// CHECK-NEXT: %c2 = dnn.global_average_pool
// CHECK-NEXT: %s = dnn.binary
// CHECK-NEXT: %p = dnn.unary
// KEEP-LABEL: func.func @free_part
// KEEP: %a1 = dnn.unary
// KEEP-NEXT: %a2 = dnn.global_average_pool
// KEEP-NEXT: %c1 = dnn.unary
// KEEP-NEXT: %c2 = dnn.global_average_pool
// KEEP-NEXT: %p = dnn.unary
// KEEP-NEXT: %q = dnn.unary
// KEEP-NEXT: %pq = dnn.binary
// KEEP-NEXT: %s = dnn.binary
func.func @free_part(%x: tensor<1x4x16x16xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %a1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "relu"} : tensor<1x4x16x16xf32>
  %c1 = dnn.unary ins(%x : tensor<1x4x16x16xf32>) {fn = "exp"} : tensor<1x4x16x16xf32>
  %a2 = dnn.global_average_pool ins(%a1 : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %c2 = dnn.global_average_pool ins(%c1 : tensor<1x4x16x16xf32>) : tensor<1x4x1x1xf32>
  %p = dnn.unary ins(%y : tensor<4xf32>) {fn = "neg"} : tensor<4xf32>
  %q = dnn.unary ins(%y : tensor<4xf32>) {fn = "abs"} : tensor<4xf32>
  %pq = dnn.binary ins(%p, %q : tensor<4xf32>, tensor<4xf32>) {fn = "add"} : tensor<4xf32>
  %s = dnn.binary ins(%a2, %c2 : tensor<1x4x1x1xf32>, tensor<1x4x1x1xf32>) {fn = "add"} : tensor<1x4x1x1xf32>
  %v = "dnn.view"(%s) : (tensor<1x4x1x1xf32>) -> tensor<4xf32>
  %t = dnn.binary ins(%v, %pq : tensor<4xf32>, tensor<4xf32>) {fn = "mul"} : tensor<4xf32>
  func.return %t : tensor<4xf32>
}

// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy}" | filecheck %s --check-prefix=LAZY
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=eager}" | filecheck %s --check-prefix=EAGER

// A diamond: %a feeds two branches that meet in an add.
// LAZY-LABEL: func.func @diamond
// LAZY-SAME: (%x: memref<1024xf32>, %{{.*}}: memref<1024xf32> {dnn.output})
// LAZY-NEXT: %[[A:.*]] = dnn.malloc {size = 4096 : i64} : memref<1024xf32>
// LAZY-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "relu"
// LAZY-NEXT: %[[B:.*]] = dnn.malloc {size = 4096 : i64}
// LAZY-NEXT: dnn.unary ins(%[[A]] : {{.*}}) outs(%[[B]] : {{.*}}) {fn = "exp"
// LAZY-NEXT: %[[C:.*]] = dnn.malloc {size = 4096 : i64}
// LAZY-NEXT: dnn.unary ins(%[[A]] : {{.*}}) outs(%[[C]] : {{.*}}) {fn = "tanh"
// LAZY-NEXT: dnn.dealloc %[[A]]
// LAZY-NEXT: dnn.binary ins(%[[B]], %[[C]] : {{.*}}) outs(%{{.*}} : {{.*}}) {fn = "add"
// LAZY-DAG: dnn.dealloc %[[B]]
// LAZY-DAG: dnn.dealloc %[[C]]
// LAZY: func.return
// EAGER-LABEL: func.func @diamond
// EAGER-NEXT: dnn.malloc
// EAGER-NEXT: dnn.malloc
// EAGER-NEXT: dnn.malloc
// EAGER-NEXT: dnn.unary
// EAGER-NOT: dnn.dealloc
// EAGER: dnn.binary
// EAGER-NEXT: dnn.dealloc
// EAGER-NEXT: dnn.dealloc
// EAGER-NEXT: dnn.dealloc
// EAGER-NEXT: func.return
func.func @diamond(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "relu"} : tensor<1024xf32>
  %b = dnn.unary ins(%a : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %c = dnn.unary ins(%a : tensor<1024xf32>) {fn = "tanh"} : tensor<1024xf32>
  %d = dnn.binary ins(%b, %c : tensor<1024xf32>, tensor<1024xf32>) {fn = "add"} : tensor<1024xf32>
  func.return %d : tensor<1024xf32>
}

// -----

// A view keeps its root alive until the view's last use.
// LAZY-LABEL: func.func @view_extends_life
// LAZY: %[[A:.*]] = dnn.malloc {size = 64 : i64} : memref<4x4xf32>
// LAZY: %[[V:.*]] = "dnn.view"(%[[A]])
// LAZY: dnn.unary ins(%[[V]] : {{.*}}) outs(%{{.*}} : {{.*}}) {fn = "exp"
// LAZY-NEXT: dnn.dealloc %[[A]]
func.func @view_extends_life(%x: tensor<4x4xf32>) -> tensor<16xf32> {
  %a = dnn.unary ins(%x : tensor<4x4xf32>) {fn = "relu"} : tensor<4x4xf32>
  %v = "dnn.view"(%a) : (tensor<4x4xf32>) -> tensor<16xf32>
  %e = dnn.unary ins(%v : tensor<16xf32>) {fn = "exp"} : tensor<16xf32>
  func.return %e : tensor<16xf32>
}

// -----

// Negative: a returned view is copied into the output, never aliased.
// LAZY-LABEL: func.func @returned_view_is_copied
// LAZY: dnn.copy
// LAZY: func.return
func.func @returned_view_is_copied(%x: tensor<4x4xf32>) -> tensor<16xf32> {
  %a = dnn.unary ins(%x : tensor<4x4xf32>) {fn = "relu"} : tensor<4x4xf32>
  %v = "dnn.view"(%a) : (tensor<4x4xf32>) -> tensor<16xf32>
  func.return %v : tensor<16xf32>
}

// -----

// A residual block: the skip input stays alive across the branch.
// LAZY-LABEL: func.func @residual
// LAZY: %[[A:.*]] = dnn.malloc {size = 256 : i64}
// LAZY: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "relu"
// LAZY: %[[B:.*]] = dnn.malloc {size = 256 : i64}
// LAZY: dnn.unary ins(%[[A]] : {{.*}}) outs(%[[B]] : {{.*}}) {fn = "exp"
// LAZY-NOT: dnn.dealloc %[[A]]
// LAZY: %[[C:.*]] = dnn.malloc {size = 256 : i64}
// LAZY: dnn.unary ins(%[[B]] : {{.*}}) outs(%[[C]] : {{.*}}) {fn = "tanh"
// LAZY-NEXT: dnn.dealloc %[[B]]
// LAZY-NEXT: dnn.binary ins(%[[C]], %[[A]] : {{.*}}) outs(%{{.*}} : {{.*}}) {fn = "add"
// LAZY-DAG: dnn.dealloc %[[A]]
// LAZY-DAG: dnn.dealloc %[[C]]
func.func @residual(%x: tensor<64xf32>) -> tensor<64xf32> {
  %a = dnn.unary ins(%x : tensor<64xf32>) {fn = "relu"} : tensor<64xf32>
  %b = dnn.unary ins(%a : tensor<64xf32>) {fn = "exp"} : tensor<64xf32>
  %c = dnn.unary ins(%b : tensor<64xf32>) {fn = "tanh"} : tensor<64xf32>
  %d = dnn.binary ins(%c, %a : tensor<64xf32>, tensor<64xf32>) {fn = "add"} : tensor<64xf32>
  func.return %d : tensor<64xf32>
}

// -----

// A concat: both inputs live until the concat, then are freed together.
// LAZY-LABEL: func.func @concat
// LAZY: %[[A:.*]] = dnn.malloc {size = 64 : i64}
// LAZY: %[[B:.*]] = dnn.malloc {size = 64 : i64}
// LAZY: dnn.concat ins(%[[A]], %[[B]] : {{.*}}) outs(%{{.*}} : {{.*}}) {axis = 0 : i64
// LAZY-DAG: dnn.dealloc %[[A]]
// LAZY-DAG: dnn.dealloc %[[B]]
// LAZY: func.return
func.func @concat(%x: tensor<16xf32>) -> tensor<32xf32> {
  %a = dnn.unary ins(%x : tensor<16xf32>) {fn = "relu"} : tensor<16xf32>
  %b = dnn.unary ins(%x : tensor<16xf32>) {fn = "exp"} : tensor<16xf32>
  %c = dnn.concat ins(%a, %b : tensor<16xf32>, tensor<16xf32>) {axis = 0 : i64} : tensor<32xf32>
  func.return %c : tensor<32xf32>
}

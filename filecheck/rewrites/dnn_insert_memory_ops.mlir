// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy scratch=true}" | filecheck %s --check-prefix=LAZY
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=eager scratch=true}" | filecheck %s --check-prefix=EAGER
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy}" | filecheck %s --check-prefix=NOSCRATCH

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

// -----

// A 3x3 convolution needs its im2col columns (C*taps x positions floats =
// 2*9*16*4 bytes) as scratch: a malloc live only around the op, passed as
// its workspace operand (the last one). Its kernel also runs in smaller
// blocks, down to one output row's columns (2*9*4*4 bytes): min_size.
// LAZY-LABEL: func.func @conv_scratch
// LAZY-NEXT: %[[Y:.*]] = dnn.malloc {size = 192 : i64} : memref<1x3x4x4xf32>
// LAZY-NEXT: %[[S:.*]] = dnn.malloc {size = 1152 : i64, min_size = 288 : i64} : memref<1152xi8>
// LAZY-NEXT: dnn.conv ins(%x, %w : {{.*}}) outs(%[[Y]], workspace %[[S]] : memref<1x3x4x4xf32>, memref<1152xi8>)
// LAZY-NEXT: dnn.dealloc %[[S]]
// LAZY-NEXT: dnn.unary ins(%[[Y]]
// LAZY-NEXT: dnn.dealloc %[[Y]]
// EAGER-LABEL: func.func @conv_scratch
// EAGER-NEXT: dnn.malloc {size = 192 : i64}
// EAGER-NEXT: %[[S:.*]] = dnn.malloc {size = 1152 : i64, min_size = 288 : i64} : memref<1152xi8>
// EAGER-NEXT: dnn.conv ins(%x, %w : {{.*}}) outs(%{{.*}}, workspace %[[S]] :
// EAGER-NEXT: dnn.unary
// EAGER-NEXT: dnn.dealloc
// EAGER-NEXT: dnn.dealloc %[[S]]
// NOSCRATCH-LABEL: func.func @conv_scratch
// NOSCRATCH-NOT: xi8>
// NOSCRATCH: dnn.conv ins(%x, %w : {{.*}}) outs(%{{[a-z0-9_]+}} : memref<1x3x4x4xf32>)
func.func @conv_scratch(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32> {
  %y = dnn.conv ins(%x, %w : tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x3x4x4xf32>
  %r = dnn.unary ins(%y : tensor<1x3x4x4xf32>) {fn = "relu"} : tensor<1x3x4x4xf32>
  func.return %r : tensor<1x3x4x4xf32>
}

// -----

// Negative: a pointwise convolution multiplies its input as is and a
// depthwise one runs a direct kernel: neither gets scratch.
// LAZY-LABEL: func.func @conv_without_scratch
// LAZY-NOT: xi8>
// LAZY: dnn.conv ins(%x, %w1 : {{.*}}) outs(%{{[a-z0-9_]+}} : memref<1x3x4x4xf32>)
// LAZY-NOT: xi8>
// LAZY: dnn.conv ins(%{{.*}}, %w2 : {{.*}}) outs(%{{[a-z0-9_]+}} : memref<1x3x4x4xf32>)
// LAZY: func.return
func.func @conv_without_scratch(%x: tensor<1x2x4x4xf32>, %w1: tensor<3x2x1x1xf32>, %w2: tensor<3x1x3x3xf32>) -> tensor<1x3x4x4xf32> {
  %y = dnn.conv ins(%x, %w1 : tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) : tensor<1x3x4x4xf32>
  %z = dnn.conv ins(%y, %w2 : tensor<1x3x4x4xf32>, tensor<3x1x3x3xf32>) {group = 3 : i64, pads = array<i64: 1, 1, 1, 1>} : tensor<1x3x4x4xf32>
  func.return %z : tensor<1x3x4x4xf32>
}

// -----

// A pointwise preact_conv still needs scratch: its input is pre-activated
// into im2col columns (2 channels x 16 positions x 4 bytes) before the sgemm.
// LAZY-LABEL: func.func @preact_conv_scratch
// LAZY: %[[S:.*]] = dnn.malloc {size = 128 : i64, min_size = 32 : i64} : memref<128xi8>
// LAZY-NEXT: dnn.preact_conv ins(%x, %s, %t, %w : {{.*}}) outs(%{{.*}}, workspace %[[S]] :
// LAZY-NEXT: dnn.dealloc %[[S]]
// NOSCRATCH-LABEL: func.func @preact_conv_scratch
// NOSCRATCH-NOT: xi8>
// NOSCRATCH: func.return
func.func @preact_conv_scratch(%x: tensor<1x2x4x4xf32>, %s: tensor<2xf32>, %t: tensor<2xf32>, %w: tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32> {
  %y = dnn.preact_conv ins(%x, %s, %t, %w : tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<3x2x1x1xf32>) {pre_activation = "relu"} : tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}

// -----

// A buffer is aligned by its element type: floats to the pass's alignment
// (64, the default, not printed), integers and booleans to their element's
// size (d.buffer_alignment).
// LAZY-LABEL: func.func @alignment_by_element_type
// LAZY: dnn.malloc {size = 16 : i64} : memref<4xf32>
// LAZY: dnn.malloc {size = 4 : i64, alignment = 1 : i64} : memref<4xi1>
// LAZY: dnn.malloc {size = 32 : i64, alignment = 8 : i64} : memref<4xi64>
// LAZY: dnn.malloc {size = 16 : i64} : memref<4xf32>
func.func @alignment_by_element_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = dnn.unary ins(%x : tensor<4xf32>) {fn = "relu"} : tensor<4xf32>
  %b = dnn.binary ins(%a, %x : tensor<4xf32>, tensor<4xf32>) {fn = "less"} : tensor<4xi1>
  %c = dnn.cast ins(%b : tensor<4xi1>) : tensor<4xi64>
  %d = dnn.cast ins(%c : tensor<4xi64>) : tensor<4xf32>
  %e = dnn.binary ins(%a, %d : tensor<4xf32>, tensor<4xf32>) {fn = "add"} : tensor<4xf32>
  func.return %e : tensor<4xf32>
}

// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy},dnn-coalesce" | filecheck %s
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=eager},dnn-coalesce{mode=eager}" | filecheck %s --check-prefix=EAGER
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy},dnn-coalesce,dnn-memory-pool" | filecheck %s --check-prefix=POOL
// RUN: not pyocc-opt %s --split-input-file -p "dnn-coalesce" 2>&1 | filecheck %s --check-prefix=TENSOR

// In place: each op of the chain writes over its input, which dies there:
// one buffer instead of three.
// CHECK-LABEL: func.func @chain_in_place
// CHECK-NEXT: %[[A:.*]] = dnn.malloc {size = 4096 : i64} : memref<1024xf32>
// CHECK-NEXT: "dnn.unary"(%x, %[[A]]) <{fn = "relu"
// CHECK-NEXT: "dnn.unary"(%[[A]], %[[A]]) <{fn = "exp"
// CHECK-NEXT: "dnn.binary"(%[[A]], %w, %[[A]]) <{fn = "add"
// CHECK-NEXT: "dnn.unary"(%[[A]], %{{.*}}) <{fn = "neg"
// CHECK-NEXT: dnn.dealloc %[[A]]
// CHECK-NEXT: func.return
// EAGER-LABEL: func.func @chain_in_place
// EAGER-NEXT: %[[A:.*]] = dnn.malloc {size = 4096 : i64} : memref<1024xf32>
// EAGER-NEXT: "dnn.unary"(%x, %[[A]])
// EAGER-NEXT: "dnn.unary"(%[[A]], %[[A]])
// EAGER-NEXT: "dnn.binary"(%[[A]], %w, %[[A]])
// EAGER-NEXT: "dnn.unary"(%[[A]], %{{.*}})
// EAGER-NEXT: dnn.dealloc %[[A]]
// EAGER-NEXT: func.return
// TENSOR: dnn-coalesce needs buffer-form dnn (dnn.malloc/dnn.dealloc), which dnn-insert-memory-ops produces, but @chain_in_place is in tensor-form dnn; run dnn-insert-memory-ops first
func.func @chain_in_place(%x: tensor<1024xf32>, %w: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1024xf32>) -> tensor<1024xf32>
  %b = "dnn.unary"(%a) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1024xf32>) -> tensor<1024xf32>
  %c = "dnn.binary"(%b, %w) <{fn = "add", operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %d = "dnn.unary"(%c) <{fn = "neg", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1024xf32>) -> tensor<1024xf32>
  func.return %d : tensor<1024xf32>
}

// -----

// Negative: %a is read again after the exp, so the exp gets its own buffer.
// CHECK-LABEL: func.func @in_place_not_when_read_later
// CHECK: %[[A:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK: %[[B:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: "dnn.unary"(%[[A]], %[[B]]) <{fn = "exp"
// CHECK: "dnn.binary"(%[[B]], %[[A]], %{{.*}}) <{fn = "add"
func.func @in_place_not_when_read_later(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1024xf32>) -> tensor<1024xf32>
  %b = "dnn.unary"(%a) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1024xf32>) -> tensor<1024xf32>
  %c = "dnn.binary"(%b, %a) <{fn = "add", operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  func.return %c : tensor<1024xf32>
}

// -----

// Negative: an alias (view) of %a is read after the exp: %a does not die there.
// CHECK-LABEL: func.func @in_place_not_when_a_view_is_read_later
// CHECK: %[[A:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK: %[[V:.*]] = "dnn.view"(%[[A]])
// CHECK: %[[B:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: "dnn.unary"(%[[A]], %[[B]]) <{fn = "exp"
func.func @in_place_not_when_a_view_is_read_later(%x: tensor<1024xf32>) -> tensor<32x32xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1024xf32>) -> tensor<1024xf32>
  %v = "dnn.view"(%a) : (tensor<1024xf32>) -> tensor<32x32xf32>
  %b = "dnn.unary"(%a) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1024xf32>) -> tensor<1024xf32>
  %bv = "dnn.view"(%b) : (tensor<1024xf32>) -> tensor<32x32xf32>
  %c = "dnn.binary"(%bv, %v) <{fn = "add", operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  func.return %c : tensor<32x32xf32>
}

// -----

// Negative: graph inputs and weights are never overwritten, and a result
// never goes over an input of another size (%s is broadcast; %a is read later).
// CHECK-LABEL: func.func @in_place_not_over_inputs_weights_or_other_sizes
// CHECK-NEXT: %[[W:.*]] = "dnn.weight"
// CHECK-NEXT: %[[A:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: "dnn.unary"(%x, %[[A]]) <{fn = "relu"
// CHECK-NEXT: %[[B:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: "dnn.unary"(%[[W]], %[[B]]) <{fn = "exp"
// CHECK: %[[S:.*]] = dnn.malloc {size = 128 : i64}
// CHECK: %[[C:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: "dnn.binary"(%[[S]], %[[A]], %[[C]]) <{fn = "add"
func.func @in_place_not_over_inputs_weights_or_other_sizes(%x: tensor<32x32xf32>, %y: tensor<32xf32>) -> tensor<32x32xf32> {
  %w = "dnn.weight"() <{splat = dense<1.0> : tensor<1xf32>}> : () -> tensor<32x32xf32>
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<32x32xf32>) -> tensor<32x32xf32>
  %b = "dnn.unary"(%w) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<32x32xf32>) -> tensor<32x32xf32>
  %s = "dnn.unary"(%y) <{fn = "tanh", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<32xf32>) -> tensor<32xf32>
  %c = "dnn.binary"(%s, %a) <{fn = "add", operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %d = "dnn.binary"(%c, %a) <{fn = "mul", operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %e = "dnn.binary"(%d, %b) <{fn = "mul", operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  func.return %e : tensor<32x32xf32>
}

// -----

// Negative: a kernel that is not safe in place (lrn accumulates into out)
// and a result of another dtype (less writes i1) get their own buffers.
// CHECK-LABEL: func.func @in_place_not_for_unsafe_kernels_or_dtypes
// CHECK: %[[A:.*]] = dnn.malloc {size = 64 : i64}
// CHECK: %[[B:.*]] = dnn.malloc {size = 64 : i64}
// CHECK-NEXT: "dnn.lrn"(%[[A]], %[[B]])
// CHECK: %[[C:.*]] = dnn.malloc {size = 16 : i64} : memref<1x4x2x2xi1>
// CHECK-NEXT: "dnn.binary"(%[[B]], %[[B]], %[[C]]) <{fn = "less"
func.func @in_place_not_for_unsafe_kernels_or_dtypes(%x: tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  %b = "dnn.lrn"(%a) <{size = 3 : i64, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  %c = "dnn.binary"(%b, %b) <{fn = "less", operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xi1>
  %d = "dnn.cast"(%c) <{operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4x2x2xi1>) -> tensor<1x4x2x2xf32>
  func.return %d : tensor<1x4x2x2xf32>
}

// -----

// A residual convolution writes over its dying residual operand.
// CHECK-LABEL: func.func @conv_over_residual
// CHECK: %[[R:.*]] = dnn.malloc {size = 64 : i64}
// CHECK-NEXT: "dnn.unary"(%x, %[[R]]) <{fn = "relu"
// CHECK-NEXT: "dnn.conv"(%x, %w, %[[R]], %[[R]])
func.func @conv_over_residual(%x: tensor<1x4x2x2xf32>, %w: tensor<4x4x1x1xf32>) -> tensor<1x4x2x2xf32> {
  %r = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  %c = "dnn.conv"(%x, %w, %r) <{operandSegmentSizes = array<i32: 1, 1, 0, 1, 0, 0>}> : (tensor<1x4x2x2xf32>, tensor<4x4x1x1xf32>, tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  %d = "dnn.unary"(%c) <{fn = "tanh", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32>
  func.return %d : tensor<1x4x2x2xf32>
}

// -----

// Concat elimination, nested: the producers write into their bands of the
// outer output; both concats disappear and one buffer remains. The pool sees
// one buffer whose bands are subviews.
// CHECK-LABEL: func.func @nested_concat
// CHECK-NEXT: %[[O:.*]] = dnn.malloc {size = 48 : i64} : memref<1x12xf32>
// CHECK-DAG: %[[I:.*]] = dnn.subview %[[O]] {offset = 0 : i64} : memref<1x12xf32> -> memref<1x8xf32>
// CHECK-DAG: %[[C:.*]] = dnn.subview %[[O]] {offset = 32 : i64} : memref<1x12xf32> -> memref<1x4xf32>
// CHECK-DAG: %[[A:.*]] = dnn.subview %[[I]] {offset = 0 : i64} : memref<1x8xf32> -> memref<1x4xf32>
// CHECK-DAG: %[[B:.*]] = dnn.subview %[[I]] {offset = 16 : i64} : memref<1x8xf32> -> memref<1x4xf32>
// CHECK: "dnn.unary"(%x, %[[A]]) <{fn = "relu"
// CHECK-NEXT: "dnn.unary"(%x, %[[B]]) <{fn = "exp"
// CHECK-NEXT: "dnn.unary"(%x, %[[C]]) <{fn = "tanh"
// CHECK-NOT: dnn.concat
// CHECK-NOT: dnn.copy
// CHECK: "dnn.unary"(%[[O]], %{{.*}}) <{fn = "neg"
// CHECK-NEXT: dnn.dealloc %[[O]]
// EAGER-LABEL: func.func @nested_concat
// EAGER-NEXT: %[[O:.*]] = dnn.malloc {size = 48 : i64}
// EAGER-NOT: dnn.malloc
// EAGER-NOT: dnn.concat
// EAGER: dnn.dealloc %[[O]]
// EAGER-NEXT: func.return
// POOL-LABEL: func.func @nested_concat
// POOL-NEXT: %[[P:.*]] = dnn.pool_init {size = 48 : i64}
// POOL-NEXT: %[[O:.*]] = dnn.mem_offset %[[P]] {offset = 0 : i64, size = 48 : i64}
// POOL: dnn.subview %[[O]]
func.func @nested_concat(%x: tensor<1x4xf32>) -> tensor<1x12xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %b = "dnn.unary"(%x) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %i = "dnn.concat"(%a, %b) <{axis = 1 : i64, operandSegmentSizes = array<i32: 2, 0>}> : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  %c = "dnn.unary"(%x) <{fn = "tanh", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %o = "dnn.concat"(%i, %c) <{axis = 1 : i64, operandSegmentSizes = array<i32: 2, 0>}> : (tensor<1x8xf32>, tensor<1x4xf32>) -> tensor<1x12xf32>
  %n = "dnn.unary"(%o) <{fn = "neg", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x12xf32>) -> tensor<1x12xf32>
  func.return %n : tensor<1x12xf32>
}

// -----

// Negative: bands along axis 1 of a 2x... tensor are not contiguous, so the
// concat stays; a graph input is copied, never moved.
// CHECK-LABEL: func.func @concat_not_when_bands_are_strided
// CHECK: "dnn.concat"
// CHECK-LABEL: func.func @concat_copies_graph_inputs
// CHECK: %[[O:.*]] = dnn.malloc {size = 32 : i64}
// CHECK-DAG: %[[A:.*]] = dnn.subview %[[O]] {offset = 16 : i64}
// CHECK-DAG: %[[X:.*]] = dnn.subview %[[O]] {offset = 0 : i64}
// CHECK: "dnn.unary"(%x, %[[A]]) <{fn = "relu"
// CHECK-NEXT: "dnn.copy"(%x, %[[X]])
// CHECK-NOT: dnn.concat
func.func @concat_not_when_bands_are_strided(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %b = "dnn.unary"(%x) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %o = "dnn.concat"(%a, %b) <{axis = 1 : i64, operandSegmentSizes = array<i32: 2, 0>}> : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  %n = "dnn.unary"(%o) <{fn = "neg", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return %n : tensor<2x8xf32>
}
func.func @concat_copies_graph_inputs(%x: tensor<1x4xf32>) -> tensor<1x8xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %o = "dnn.concat"(%x, %a) <{axis = 1 : i64, operandSegmentSizes = array<i32: 2, 0>}> : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  %n = "dnn.unary"(%o) <{fn = "neg", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  func.return %n : tensor<1x8xf32>
}

// -----

// Selective: moving %a or %s into the output would keep the output alive
// across the 4 KiB tile and raise the peak, so only %b (made after the tile
// is freed) is written into its band; %a and %s are copied. In eager mode
// every band is a saving.
// CHECK-LABEL: func.func @concat_selective
// CHECK: %[[A:.*]] = dnn.malloc {size = 256 : i64}
// CHECK: %[[T:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK: %[[S:.*]] = dnn.malloc {size = 4 : i64}
// CHECK: dnn.dealloc %[[T]]
// CHECK-NEXT: %[[O:.*]] = dnn.malloc {size = 516 : i64}
// CHECK-DAG: %[[SB:.*]] = dnn.subview %[[O]] {offset = 512 : i64}
// CHECK-DAG: %[[AB:.*]] = dnn.subview %[[O]] {offset = 0 : i64}
// CHECK-DAG: %[[B:.*]] = dnn.subview %[[O]] {offset = 256 : i64}
// CHECK: "dnn.unary"(%x, %[[B]]) <{fn = "exp"
// CHECK-NEXT: "dnn.copy"(%[[A]], %[[AB]])
// CHECK-NEXT: dnn.dealloc %[[A]]
// CHECK-NEXT: "dnn.copy"(%[[S]], %[[SB]])
// CHECK-NEXT: dnn.dealloc %[[S]]
// EAGER-LABEL: func.func @concat_selective
// EAGER-COUNT-2: dnn.malloc
// EAGER-NOT: dnn.malloc
// EAGER-NOT: dnn.copy
// EAGER: func.return
func.func @concat_selective(%x: tensor<1x64xf32>) -> tensor<1x129xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x64xf32>) -> tensor<1x64xf32>
  %t = "dnn.tile"(%x) <{repeats = array<i64: 16, 1>, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x64xf32>) -> tensor<16x64xf32>
  %s = "dnn.reduce"(%t) <{fn = "sum", keepdims = 1 : i64, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<16x64xf32>) -> tensor<1x1xf32>
  %b = "dnn.unary"(%x) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x64xf32>) -> tensor<1x64xf32>
  %o = "dnn.concat"(%a, %b, %s) <{axis = 1 : i64, operandSegmentSizes = array<i32: 3, 0>}> : (tensor<1x64xf32>, tensor<1x64xf32>, tensor<1x1xf32>) -> tensor<1x129xf32>
  %r = "dnn.unary"(%o) <{fn = "tanh", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x129xf32>) -> tensor<1x129xf32>
  func.return %r : tensor<1x129xf32>
}

// -----

// Negative: the concat output is overwritten in place (relu) while %a, one of
// its bands, is still read afterwards, so %a keeps its own buffer.
// CHECK-LABEL: func.func @concat_not_when_output_overwritten_before_band_dies
// CHECK: %[[A:.*]] = dnn.malloc {size = 16 : i64}
// CHECK-NEXT: "dnn.unary"(%x, %[[A]]) <{fn = "exp"
// CHECK: "dnn.copy"(%[[A]],
// CHECK: "dnn.unary"(%[[O:.*]], %[[O]]) <{fn = "relu"
// CHECK: "dnn.binary"(%{{.*}}, %[[A]], %{{.*}})
func.func @concat_not_when_output_overwritten_before_band_dies(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %a = "dnn.unary"(%x) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %b = "dnn.unary"(%x) <{fn = "tanh", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %o = "dnn.concat"(%a, %b) <{axis = 1 : i64, operandSegmentSizes = array<i32: 2, 0>}> : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  %r = "dnn.unary"(%o) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %s = "dnn.reduce"(%r) <{fn = "sum", axes = array<i64: 1>, keepdims = 1 : i64, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x1xf32>
  %y = "dnn.binary"(%s, %a) <{fn = "add", operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<1x1xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  func.return %y : tensor<1x4xf32>
}

// -----

// Split along a contiguous axis: the outputs are bands of the input, no copy.
// CHECK-LABEL: func.func @split_as_bands
// CHECK: %[[A:.*]] = dnn.malloc {size = 32 : i64}
// CHECK-DAG: %[[Y:.*]] = dnn.subview %[[A]] {offset = 0 : i64} : memref<1x8xf32> -> memref<1x2xf32>
// CHECK-DAG: %[[Z:.*]] = dnn.subview %[[A]] {offset = 8 : i64} : memref<1x8xf32> -> memref<1x6xf32>
// CHECK: "dnn.unary"(%x, %[[A]]) <{fn = "relu"
// CHECK-NEXT: "dnn.unary"(%[[Y]], %{{.*}}) <{fn = "exp"
// CHECK-NEXT: "dnn.unary"(%[[Z]], %{{.*}}) <{fn = "exp"
// CHECK-NOT: dnn.split
// CHECK-LABEL: func.func @split_not_strided
// CHECK: "dnn.split"
func.func @split_as_bands(%x: tensor<1x8xf32>) -> (tensor<1x2xf32>, tensor<1x6xf32>) {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %y, %z = "dnn.split"(%a) <{axis = 1 : i64, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> (tensor<1x2xf32>, tensor<1x6xf32>)
  %y2 = "dnn.unary"(%y) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x2xf32>) -> tensor<1x2xf32>
  %z2 = "dnn.unary"(%z) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x6xf32>) -> tensor<1x6xf32>
  func.return %y2, %z2 : tensor<1x2xf32>, tensor<1x6xf32>
}
func.func @split_not_strided(%x: tensor<2x8xf32>) -> (tensor<2x2xf32>, tensor<2x6xf32>) {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %y, %z = "dnn.split"(%a) <{axis = 1 : i64, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<2x8xf32>) -> (tensor<2x2xf32>, tensor<2x6xf32>)
  %y2 = "dnn.unary"(%y) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %z2 = "dnn.unary"(%z) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<2x6xf32>) -> tensor<2x6xf32>
  func.return %y2, %z2 : tensor<2x2xf32>, tensor<2x6xf32>
}

// -----

// Negative: a Split band is part of a bigger buffer, so it cannot move into
// the concat output (its whole buffer would have to); it is copied there.
// CHECK-LABEL: func.func @concat_not_of_a_band
// CHECK: %[[A:.*]] = dnn.malloc {size = 32 : i64} : memref<1x8xf32>
// CHECK: %[[P:.*]] = dnn.subview %[[A]] {offset = 0 : i64} : memref<1x8xf32> -> memref<1x4xf32>
// CHECK: "dnn.copy"(%[[P]], %{{.*}})
func.func @concat_not_of_a_band(%x: tensor<1x8xf32>) -> tensor<1x8xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %p, %q = "dnn.split"(%a) <{axis = 1 : i64, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> (tensor<1x4xf32>, tensor<1x4xf32>)
  %e = "dnn.unary"(%q) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %o = "dnn.concat"(%p, %e) <{axis = 1 : i64, operandSegmentSizes = array<i32: 2, 0>}> : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  %n = "dnn.unary"(%o) <{fn = "neg", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  func.return %n : tensor<1x8xf32>
}

// -----

// A buffer read by two concats is a band of one of them at most; the other
// copies it.
// CHECK-LABEL: func.func @concat_input_shared_by_two_concats
// CHECK: "dnn.copy"(%a, %{{.*}})
// CHECK-NOT: "dnn.copy"
// CHECK-NOT: dnn.concat
// CHECK: func.return
func.func @concat_input_shared_by_two_concats(%x: tensor<1x4xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>) {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %b = "dnn.unary"(%x) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %c = "dnn.unary"(%x) <{fn = "tanh", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %o = "dnn.concat"(%a, %b) <{axis = 1 : i64, operandSegmentSizes = array<i32: 2, 0>}> : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  %p = "dnn.concat"(%c, %a) <{axis = 1 : i64, operandSegmentSizes = array<i32: 2, 0>}> : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  %n = "dnn.unary"(%o) <{fn = "neg", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %m = "dnn.unary"(%p) <{fn = "neg", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  func.return %n, %m : tensor<1x8xf32>, tensor<1x8xf32>
}

// -----

// Slice of one contiguous range is a band; a strided slice is not.
// CHECK-LABEL: func.func @slice_as_band
// CHECK: %[[A:.*]] = dnn.malloc {size = 32 : i64}
// CHECK: dnn.subview %[[A]] {offset = 8 : i64} : memref<1x8xf32> -> memref<1x3xf32>
// CHECK-NOT: dnn.slice
// CHECK-LABEL: func.func @slice_not_with_steps
// CHECK: "dnn.slice"
func.func @slice_as_band(%x: tensor<1x8xf32>) -> tensor<1x3xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %s = "dnn.slice"(%a) <{starts = array<i64: 2>, ends = array<i64: 5>, axes = array<i64: 1>, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x3xf32>
  %e = "dnn.unary"(%s) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x3xf32>) -> tensor<1x3xf32>
  func.return %e : tensor<1x3xf32>
}
func.func @slice_not_with_steps(%x: tensor<1x8xf32>) -> tensor<1x3xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %s = "dnn.slice"(%a) <{starts = array<i64: 1>, ends = array<i64: 7>, axes = array<i64: 1>, steps = array<i64: 2>, operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x8xf32>) -> tensor<1x3xf32>
  %e = "dnn.unary"(%s) <{fn = "exp", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<1x3xf32>) -> tensor<1x3xf32>
  func.return %e : tensor<1x3xf32>
}

// -----

// A returned view lives in the graph output: no buffer, no copy.
// CHECK-LABEL: func.func @returned_view
// CHECK-SAME: (%x: memref<4x4xf32>, %[[OUT:.*]]: memref<16xf32> {dnn.output})
// CHECK-NEXT: %[[A:.*]] = "dnn.view"(%[[OUT]]) : (memref<16xf32>) -> memref<4x4xf32>
// CHECK-NEXT: "dnn.unary"(%x, %[[A]]) <{fn = "relu"
// CHECK-NEXT: func.return
func.func @returned_view(%x: tensor<4x4xf32>) -> tensor<16xf32> {
  %a = "dnn.unary"(%x) <{fn = "relu", operandSegmentSizes = array<i32: 1, 0>}> : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %v = "dnn.view"(%a) : (tensor<4x4xf32>) -> tensor<16xf32>
  func.return %v : tensor<16xf32>
}

// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy},dnn-coalesce" | filecheck %s
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=eager},dnn-coalesce{mode=eager}" | filecheck %s --check-prefix=EAGER
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy},dnn-coalesce,dnn-memory-pool" | filecheck %s --check-prefix=POOL
// RUN: not pyocc-opt %s --split-input-file -p "dnn-coalesce" 2>&1 | filecheck %s --check-prefix=TENSOR

// In place: each op of the chain writes over its input, which dies there:
// one buffer instead of three.
// CHECK-LABEL: func.func @chain_in_place
// CHECK-NEXT: %[[A:.*]] = dnn.malloc {size = 4096 : i64} : memref<1024xf32>
// CHECK-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "relu"
// CHECK-NEXT: dnn.unary ins(%[[A]] : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "exp"
// CHECK-NEXT: dnn.binary ins(%[[A]], %w : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "add"
// CHECK-NEXT: dnn.unary ins(%[[A]] : {{.*}}) outs(%{{.*}} : {{.*}}) {fn = "neg"
// CHECK-NEXT: dnn.dealloc %[[A]]
// CHECK-NEXT: func.return
// EAGER-LABEL: func.func @chain_in_place
// EAGER-NEXT: %[[A:.*]] = dnn.malloc {size = 4096 : i64} : memref<1024xf32>
// EAGER-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}})
// EAGER-NEXT: dnn.unary ins(%[[A]] : {{.*}}) outs(%[[A]] : {{.*}})
// EAGER-NEXT: dnn.binary ins(%[[A]], %w : {{.*}}) outs(%[[A]] : {{.*}})
// EAGER-NEXT: dnn.unary ins(%[[A]] : {{.*}}) outs(%{{.*}} : {{.*}})
// EAGER-NEXT: dnn.dealloc %[[A]]
// EAGER-NEXT: func.return
// TENSOR: dnn-coalesce needs buffer-form dnn (dnn.malloc/dnn.dealloc), which dnn-insert-memory-ops produces, but @chain_in_place is in tensor-form dnn; run dnn-insert-memory-ops first
func.func @chain_in_place(%x: tensor<1024xf32>, %w: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "relu"} : tensor<1024xf32>
  %b = dnn.unary ins(%a : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %c = dnn.binary ins(%b, %w : tensor<1024xf32>, tensor<1024xf32>) {fn = "add"} : tensor<1024xf32>
  %d = dnn.unary ins(%c : tensor<1024xf32>) {fn = "neg"} : tensor<1024xf32>
  func.return %d : tensor<1024xf32>
}

// -----

// Negative: %a is read again after the exp, so the exp gets its own buffer.
// CHECK-LABEL: func.func @in_place_not_when_read_later
// CHECK: %[[A:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK: %[[B:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: dnn.unary ins(%[[A]] : {{.*}}) outs(%[[B]] : {{.*}}) {fn = "exp"
// CHECK: dnn.binary ins(%[[B]], %[[A]] : {{.*}}) outs(%{{.*}} : {{.*}}) {fn = "add"
func.func @in_place_not_when_read_later(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "relu"} : tensor<1024xf32>
  %b = dnn.unary ins(%a : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %c = dnn.binary ins(%b, %a : tensor<1024xf32>, tensor<1024xf32>) {fn = "add"} : tensor<1024xf32>
  func.return %c : tensor<1024xf32>
}

// -----

// Negative: an alias (view) of %a is read after the exp: %a does not die there.
// CHECK-LABEL: func.func @in_place_not_when_a_view_is_read_later
// CHECK: %[[A:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK: %[[V:.*]] = "dnn.view"(%[[A]])
// CHECK: %[[B:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: dnn.unary ins(%[[A]] : {{.*}}) outs(%[[B]] : {{.*}}) {fn = "exp"
func.func @in_place_not_when_a_view_is_read_later(%x: tensor<1024xf32>) -> tensor<32x32xf32> {
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "relu"} : tensor<1024xf32>
  %v = "dnn.view"(%a) : (tensor<1024xf32>) -> tensor<32x32xf32>
  %b = dnn.unary ins(%a : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %bv = "dnn.view"(%b) : (tensor<1024xf32>) -> tensor<32x32xf32>
  %c = dnn.binary ins(%bv, %v : tensor<32x32xf32>, tensor<32x32xf32>) {fn = "add"} : tensor<32x32xf32>
  func.return %c : tensor<32x32xf32>
}

// -----

// Negative: graph inputs and weights are never overwritten, and a result
// never goes over an input of another size (%s is broadcast; %a is read later).
// CHECK-LABEL: func.func @in_place_not_over_inputs_weights_or_other_sizes
// CHECK-NEXT: %[[W:.*]] = "dnn.weight"
// CHECK-NEXT: %[[A:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "relu"
// CHECK-NEXT: %[[B:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: dnn.unary ins(%[[W]] : {{.*}}) outs(%[[B]] : {{.*}}) {fn = "exp"
// CHECK: %[[S:.*]] = dnn.malloc {size = 128 : i64}
// CHECK: %[[C:.*]] = dnn.malloc {size = 4096 : i64}
// CHECK-NEXT: dnn.binary ins(%[[S]], %[[A]] : {{.*}}) outs(%[[C]] : {{.*}}) {fn = "add"
func.func @in_place_not_over_inputs_weights_or_other_sizes(%x: tensor<32x32xf32>, %y: tensor<32xf32>) -> tensor<32x32xf32> {
  %w = "dnn.weight"() <{splat = dense<1.0> : tensor<1xf32>}> : () -> tensor<32x32xf32>
  %a = dnn.unary ins(%x : tensor<32x32xf32>) {fn = "relu"} : tensor<32x32xf32>
  %b = dnn.unary ins(%w : tensor<32x32xf32>) {fn = "exp"} : tensor<32x32xf32>
  %s = dnn.unary ins(%y : tensor<32xf32>) {fn = "tanh"} : tensor<32xf32>
  %c = dnn.binary ins(%s, %a : tensor<32xf32>, tensor<32x32xf32>) {fn = "add"} : tensor<32x32xf32>
  %d = dnn.binary ins(%c, %a : tensor<32x32xf32>, tensor<32x32xf32>) {fn = "mul"} : tensor<32x32xf32>
  %e = dnn.binary ins(%d, %b : tensor<32x32xf32>, tensor<32x32xf32>) {fn = "mul"} : tensor<32x32xf32>
  func.return %e : tensor<32x32xf32>
}

// -----

// Negative: a kernel that is not safe in place (lrn accumulates into out)
// and a result of another dtype (less writes i1) get their own buffers.
// CHECK-LABEL: func.func @in_place_not_for_unsafe_kernels_or_dtypes
// CHECK: %[[A:.*]] = dnn.malloc {size = 64 : i64}
// CHECK: %[[B:.*]] = dnn.malloc {size = 64 : i64}
// CHECK-NEXT: dnn.lrn ins(%[[A]] : {{.*}}) outs(%[[B]] : {{.*}})
// CHECK: %[[C:.*]] = dnn.malloc {size = 16 : i64, alignment = 1 : i64} : memref<1x4x2x2xi1>
// CHECK-NEXT: dnn.binary ins(%[[B]], %[[B]] : {{.*}}) outs(%[[C]] : {{.*}}) {fn = "less"
func.func @in_place_not_for_unsafe_kernels_or_dtypes(%x: tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> {
  %a = dnn.unary ins(%x : tensor<1x4x2x2xf32>) {fn = "relu"} : tensor<1x4x2x2xf32>
  %b = dnn.lrn ins(%a : tensor<1x4x2x2xf32>) {size = 3 : i64} : tensor<1x4x2x2xf32>
  %c = dnn.binary ins(%b, %b : tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) {fn = "less"} : tensor<1x4x2x2xi1>
  %d = dnn.cast ins(%c : tensor<1x4x2x2xi1>) : tensor<1x4x2x2xf32>
  func.return %d : tensor<1x4x2x2xf32>
}

// -----

// A residual convolution writes over its dying residual operand.
// CHECK-LABEL: func.func @conv_over_residual
// CHECK: %[[R:.*]] = dnn.malloc {size = 64 : i64}
// CHECK-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[R]] : {{.*}}) {fn = "relu"
// CHECK-NEXT: dnn.conv ins(%x, %w, residual %[[R]] : {{.*}}) outs(%[[R]] : {{.*}})
func.func @conv_over_residual(%x: tensor<1x4x2x2xf32>, %w: tensor<4x4x1x1xf32>) -> tensor<1x4x2x2xf32> {
  %r = dnn.unary ins(%x : tensor<1x4x2x2xf32>) {fn = "relu"} : tensor<1x4x2x2xf32>
  %c = dnn.conv ins(%x, %w, residual %r : tensor<1x4x2x2xf32>, tensor<4x4x1x1xf32>, tensor<1x4x2x2xf32>) : tensor<1x4x2x2xf32>
  %d = dnn.unary ins(%c : tensor<1x4x2x2xf32>) {fn = "tanh"} : tensor<1x4x2x2xf32>
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
// CHECK: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "relu"
// CHECK-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[B]] : {{.*}}) {fn = "exp"
// CHECK-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[C]] : {{.*}}) {fn = "tanh"
// CHECK-NOT: dnn.concat
// CHECK-NOT: dnn.copy
// CHECK: dnn.unary ins(%[[O]] : {{.*}}) outs(%{{.*}} : {{.*}}) {fn = "neg"
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
  %a = dnn.unary ins(%x : tensor<1x4xf32>) {fn = "relu"} : tensor<1x4xf32>
  %b = dnn.unary ins(%x : tensor<1x4xf32>) {fn = "exp"} : tensor<1x4xf32>
  %i = dnn.concat ins(%a, %b : tensor<1x4xf32>, tensor<1x4xf32>) {axis = 1 : i64} : tensor<1x8xf32>
  %c = dnn.unary ins(%x : tensor<1x4xf32>) {fn = "tanh"} : tensor<1x4xf32>
  %o = dnn.concat ins(%i, %c : tensor<1x8xf32>, tensor<1x4xf32>) {axis = 1 : i64} : tensor<1x12xf32>
  %n = dnn.unary ins(%o : tensor<1x12xf32>) {fn = "neg"} : tensor<1x12xf32>
  func.return %n : tensor<1x12xf32>
}

// -----

// Negative: bands along axis 1 of a 2x... tensor are not contiguous, so the
// concat stays; a graph input is copied, never moved.
// CHECK-LABEL: func.func @concat_not_when_bands_are_strided
// CHECK: dnn.concat
// CHECK-LABEL: func.func @concat_copies_graph_inputs
// CHECK: %[[O:.*]] = dnn.malloc {size = 32 : i64}
// CHECK-DAG: %[[A:.*]] = dnn.subview %[[O]] {offset = 16 : i64}
// CHECK-DAG: %[[X:.*]] = dnn.subview %[[O]] {offset = 0 : i64}
// CHECK: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "relu"
// CHECK-NEXT: dnn.copy ins(%x : {{.*}}) outs(%[[X]] : {{.*}})
// CHECK-NOT: dnn.concat
func.func @concat_not_when_bands_are_strided(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %a = dnn.unary ins(%x : tensor<2x4xf32>) {fn = "relu"} : tensor<2x4xf32>
  %b = dnn.unary ins(%x : tensor<2x4xf32>) {fn = "exp"} : tensor<2x4xf32>
  %o = dnn.concat ins(%a, %b : tensor<2x4xf32>, tensor<2x4xf32>) {axis = 1 : i64} : tensor<2x8xf32>
  %n = dnn.unary ins(%o : tensor<2x8xf32>) {fn = "neg"} : tensor<2x8xf32>
  func.return %n : tensor<2x8xf32>
}
func.func @concat_copies_graph_inputs(%x: tensor<1x4xf32>) -> tensor<1x8xf32> {
  %a = dnn.unary ins(%x : tensor<1x4xf32>) {fn = "relu"} : tensor<1x4xf32>
  %o = dnn.concat ins(%x, %a : tensor<1x4xf32>, tensor<1x4xf32>) {axis = 1 : i64} : tensor<1x8xf32>
  %n = dnn.unary ins(%o : tensor<1x8xf32>) {fn = "neg"} : tensor<1x8xf32>
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
// CHECK: dnn.unary ins(%x : {{.*}}) outs(%[[B]] : {{.*}}) {fn = "exp"
// CHECK-NEXT: dnn.copy ins(%[[A]] : {{.*}}) outs(%[[AB]] : {{.*}})
// CHECK-NEXT: dnn.dealloc %[[A]]
// CHECK-NEXT: dnn.copy ins(%[[S]] : {{.*}}) outs(%[[SB]] : {{.*}})
// CHECK-NEXT: dnn.dealloc %[[S]]
// EAGER-LABEL: func.func @concat_selective
// EAGER-COUNT-2: dnn.malloc
// EAGER-NOT: dnn.malloc
// EAGER-NOT: dnn.copy
// EAGER: func.return
func.func @concat_selective(%x: tensor<1x64xf32>) -> tensor<1x129xf32> {
  %a = dnn.unary ins(%x : tensor<1x64xf32>) {fn = "relu"} : tensor<1x64xf32>
  %t = dnn.tile ins(%x : tensor<1x64xf32>) {repeats = array<i64: 16, 1>} : tensor<16x64xf32>
  %s = dnn.reduce ins(%t : tensor<16x64xf32>) {fn = "sum", keepdims = 1 : i64} : tensor<1x1xf32>
  %b = dnn.unary ins(%x : tensor<1x64xf32>) {fn = "exp"} : tensor<1x64xf32>
  %o = dnn.concat ins(%a, %b, %s : tensor<1x64xf32>, tensor<1x64xf32>, tensor<1x1xf32>) {axis = 1 : i64} : tensor<1x129xf32>
  %r = dnn.unary ins(%o : tensor<1x129xf32>) {fn = "tanh"} : tensor<1x129xf32>
  func.return %r : tensor<1x129xf32>
}

// -----

// Negative: the concat output is overwritten in place (relu) while %a, one of
// its bands, is still read afterwards, so %a keeps its own buffer.
// CHECK-LABEL: func.func @concat_not_when_output_overwritten_before_band_dies
// CHECK: %[[A:.*]] = dnn.malloc {size = 16 : i64}
// CHECK-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "exp"
// CHECK: dnn.copy ins(%[[A]] :
// CHECK: dnn.unary ins(%[[O:.*]] : {{.*}}) outs(%[[O]] : {{.*}}) {fn = "relu"
// CHECK: dnn.binary ins(%{{.*}}, %[[A]] : {{.*}}) outs(%{{.*}} : {{.*}})
func.func @concat_not_when_output_overwritten_before_band_dies(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %a = dnn.unary ins(%x : tensor<1x4xf32>) {fn = "exp"} : tensor<1x4xf32>
  %b = dnn.unary ins(%x : tensor<1x4xf32>) {fn = "tanh"} : tensor<1x4xf32>
  %o = dnn.concat ins(%a, %b : tensor<1x4xf32>, tensor<1x4xf32>) {axis = 1 : i64} : tensor<1x8xf32>
  %r = dnn.unary ins(%o : tensor<1x8xf32>) {fn = "relu"} : tensor<1x8xf32>
  %s = dnn.reduce ins(%r : tensor<1x8xf32>) {fn = "sum", axes = array<i64: 1>, keepdims = 1 : i64} : tensor<1x1xf32>
  %y = dnn.binary ins(%s, %a : tensor<1x1xf32>, tensor<1x4xf32>) {fn = "add"} : tensor<1x4xf32>
  func.return %y : tensor<1x4xf32>
}

// -----

// Split along a contiguous axis: the outputs are bands of the input, no copy.
// CHECK-LABEL: func.func @split_as_bands
// CHECK: %[[A:.*]] = dnn.malloc {size = 32 : i64}
// CHECK-DAG: %[[Y:.*]] = dnn.subview %[[A]] {offset = 0 : i64} : memref<1x8xf32> -> memref<1x2xf32>
// CHECK-DAG: %[[Z:.*]] = dnn.subview %[[A]] {offset = 8 : i64} : memref<1x8xf32> -> memref<1x6xf32>
// CHECK: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "relu"
// CHECK-NEXT: dnn.unary ins(%[[Y]] : {{.*}}) outs(%{{.*}} : {{.*}}) {fn = "exp"
// CHECK-NEXT: dnn.unary ins(%[[Z]] : {{.*}}) outs(%{{.*}} : {{.*}}) {fn = "exp"
// CHECK-NOT: dnn.split
// CHECK-LABEL: func.func @split_not_strided
// CHECK: dnn.split
func.func @split_as_bands(%x: tensor<1x8xf32>) -> (tensor<1x2xf32>, tensor<1x6xf32>) {
  %a = dnn.unary ins(%x : tensor<1x8xf32>) {fn = "relu"} : tensor<1x8xf32>
  %y, %z = dnn.split ins(%a : tensor<1x8xf32>) {axis = 1 : i64} : tensor<1x2xf32>, tensor<1x6xf32>
  %y2 = dnn.unary ins(%y : tensor<1x2xf32>) {fn = "exp"} : tensor<1x2xf32>
  %z2 = dnn.unary ins(%z : tensor<1x6xf32>) {fn = "exp"} : tensor<1x6xf32>
  func.return %y2, %z2 : tensor<1x2xf32>, tensor<1x6xf32>
}
func.func @split_not_strided(%x: tensor<2x8xf32>) -> (tensor<2x2xf32>, tensor<2x6xf32>) {
  %a = dnn.unary ins(%x : tensor<2x8xf32>) {fn = "relu"} : tensor<2x8xf32>
  %y, %z = dnn.split ins(%a : tensor<2x8xf32>) {axis = 1 : i64} : tensor<2x2xf32>, tensor<2x6xf32>
  %y2 = dnn.unary ins(%y : tensor<2x2xf32>) {fn = "exp"} : tensor<2x2xf32>
  %z2 = dnn.unary ins(%z : tensor<2x6xf32>) {fn = "exp"} : tensor<2x6xf32>
  func.return %y2, %z2 : tensor<2x2xf32>, tensor<2x6xf32>
}

// -----

// Negative: a Split band is part of a bigger buffer, so it cannot move into
// the concat output (its whole buffer would have to); it is copied there.
// CHECK-LABEL: func.func @concat_not_of_a_band
// CHECK: %[[A:.*]] = dnn.malloc {size = 32 : i64} : memref<1x8xf32>
// CHECK: %[[P:.*]] = dnn.subview %[[A]] {offset = 0 : i64} : memref<1x8xf32> -> memref<1x4xf32>
// CHECK: dnn.copy ins(%[[P]] : {{.*}}) outs(%{{.*}} : {{.*}})
func.func @concat_not_of_a_band(%x: tensor<1x8xf32>) -> tensor<1x8xf32> {
  %a = dnn.unary ins(%x : tensor<1x8xf32>) {fn = "relu"} : tensor<1x8xf32>
  %p, %q = dnn.split ins(%a : tensor<1x8xf32>) {axis = 1 : i64} : tensor<1x4xf32>, tensor<1x4xf32>
  %e = dnn.unary ins(%q : tensor<1x4xf32>) {fn = "exp"} : tensor<1x4xf32>
  %o = dnn.concat ins(%p, %e : tensor<1x4xf32>, tensor<1x4xf32>) {axis = 1 : i64} : tensor<1x8xf32>
  %n = dnn.unary ins(%o : tensor<1x8xf32>) {fn = "neg"} : tensor<1x8xf32>
  func.return %n : tensor<1x8xf32>
}

// -----

// A buffer read by two concats is a band of one of them at most; the other
// copies it.
// CHECK-LABEL: func.func @concat_input_shared_by_two_concats
// CHECK: dnn.copy ins(%a : {{.*}}) outs(%{{.*}} : {{.*}})
// CHECK-NOT: dnn.copy
// CHECK-NOT: dnn.concat
// CHECK: func.return
func.func @concat_input_shared_by_two_concats(%x: tensor<1x4xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>) {
  %a = dnn.unary ins(%x : tensor<1x4xf32>) {fn = "relu"} : tensor<1x4xf32>
  %b = dnn.unary ins(%x : tensor<1x4xf32>) {fn = "exp"} : tensor<1x4xf32>
  %c = dnn.unary ins(%x : tensor<1x4xf32>) {fn = "tanh"} : tensor<1x4xf32>
  %o = dnn.concat ins(%a, %b : tensor<1x4xf32>, tensor<1x4xf32>) {axis = 1 : i64} : tensor<1x8xf32>
  %p = dnn.concat ins(%c, %a : tensor<1x4xf32>, tensor<1x4xf32>) {axis = 1 : i64} : tensor<1x8xf32>
  %n = dnn.unary ins(%o : tensor<1x8xf32>) {fn = "neg"} : tensor<1x8xf32>
  %m = dnn.unary ins(%p : tensor<1x8xf32>) {fn = "neg"} : tensor<1x8xf32>
  func.return %n, %m : tensor<1x8xf32>, tensor<1x8xf32>
}

// -----

// Slice of one contiguous range is a band; a strided slice is not.
// CHECK-LABEL: func.func @slice_as_band
// CHECK: %[[A:.*]] = dnn.malloc {size = 32 : i64}
// CHECK: dnn.subview %[[A]] {offset = 8 : i64} : memref<1x8xf32> -> memref<1x3xf32>
// CHECK-NOT: dnn.slice
// CHECK-LABEL: func.func @slice_not_with_steps
// CHECK: dnn.slice
func.func @slice_as_band(%x: tensor<1x8xf32>) -> tensor<1x3xf32> {
  %a = dnn.unary ins(%x : tensor<1x8xf32>) {fn = "relu"} : tensor<1x8xf32>
  %s = dnn.slice ins(%a : tensor<1x8xf32>) {starts = array<i64: 2>, ends = array<i64: 5>, axes = array<i64: 1>} : tensor<1x3xf32>
  %e = dnn.unary ins(%s : tensor<1x3xf32>) {fn = "exp"} : tensor<1x3xf32>
  func.return %e : tensor<1x3xf32>
}
func.func @slice_not_with_steps(%x: tensor<1x8xf32>) -> tensor<1x3xf32> {
  %a = dnn.unary ins(%x : tensor<1x8xf32>) {fn = "relu"} : tensor<1x8xf32>
  %s = dnn.slice ins(%a : tensor<1x8xf32>) {starts = array<i64: 1>, ends = array<i64: 7>, axes = array<i64: 1>, steps = array<i64: 2>} : tensor<1x3xf32>
  %e = dnn.unary ins(%s : tensor<1x3xf32>) {fn = "exp"} : tensor<1x3xf32>
  func.return %e : tensor<1x3xf32>
}

// -----

// A returned view lives in the graph output: no buffer, no copy.
// CHECK-LABEL: func.func @returned_view
// CHECK-SAME: (%x: memref<4x4xf32>, %[[OUT:.*]]: memref<16xf32> {dnn.output})
// CHECK-NEXT: %[[A:.*]] = "dnn.view"(%[[OUT]]) : (memref<16xf32>) -> memref<4x4xf32>
// CHECK-NEXT: dnn.unary ins(%x : {{.*}}) outs(%[[A]] : {{.*}}) {fn = "relu"
// CHECK-NEXT: func.return
func.func @returned_view(%x: tensor<4x4xf32>) -> tensor<16xf32> {
  %a = dnn.unary ins(%x : tensor<4x4xf32>) {fn = "relu"} : tensor<4x4xf32>
  %v = "dnn.view"(%a) : (tensor<4x4xf32>) -> tensor<16xf32>
  func.return %v : tensor<16xf32>
}

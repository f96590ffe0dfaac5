// RUN: pyocc-opt %s --split-input-file -p "dnn-recompute{tables=true}" | filecheck %s
// RUN: pyocc-opt %s --split-input-file -p "dnn-recompute" | filecheck %s --check-prefix=OFF

// A table made from weights alone (a rotary table: cos of positions times
// frequencies) read by two layers: the ops that make it run again before
// the second layer, at the step between the layers where the fewest bytes
// are alive (before %w2: only %h2 and the table; before %r the wide %w2
// is alive too), and the first copy dies in the first layer.
// CHECK-LABEL: func.func @table_read_by_two_layers
// CHECK:      %h = dnn.binary ins(%x, %t : {{.*}}) {fn = "mul"}
// CHECK:      %h2 = dnn.binary ins(%h, %d : {{.*}}) {fn = "add"}
// CHECK-NEXT: %p_again = dnn.range
// CHECK-NEXT: %c_again = "dnn.view"(%p_again)
// CHECK-NEXT: %a_again = dnn.binary ins(%c_again, %f : {{.*}}) {fn = "mul"}
// CHECK-NEXT: %t_again = dnn.unary ins(%a_again : {{.*}}) {fn = "cos"}
// CHECK-NEXT: %w2 = dnn.matmul ins(%h2, %wu
// CHECK-NEXT: %r = dnn.binary ins(%h2, %t_again : {{.*}}) {fn = "mul"}
// OFF-LABEL: func.func @table_read_by_two_layers
// OFF-NOT: _again
// OFF: func.return
func.func @table_read_by_two_layers(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %f = "dnn.weight"() <{splat = dense<1.000000e-01> : tensor<8xf32>}> : () -> tensor<8xf32>
  %wu = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<8x32xf32>}> : () -> tensor<8x32xf32>
  %wd = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<32x8xf32>}> : () -> tensor<32x8xf32>
  %p = dnn.range {start = 0.000000e+00 : f32, delta = 1.000000e+00 : f32} : tensor<4xf32>
  %c = "dnn.view"(%p) : (tensor<4xf32>) -> tensor<4x1xf32>
  %a = dnn.binary ins(%c, %f : tensor<4x1xf32>, tensor<8xf32>) {fn = "mul"} : tensor<4x8xf32>
  %t = dnn.unary ins(%a : tensor<4x8xf32>) {fn = "cos"} : tensor<4x8xf32>
  %h = dnn.binary ins(%x, %t : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "mul"} : tensor<4x8xf32>
  %u = dnn.matmul ins(%h, %wu : tensor<4x8xf32>, tensor<8x32xf32>) : tensor<4x32xf32>
  %g = dnn.unary ins(%u : tensor<4x32xf32>) {fn = "sigmoid"} : tensor<4x32xf32>
  %d = dnn.matmul ins(%g, %wd : tensor<4x32xf32>, tensor<32x8xf32>) : tensor<4x8xf32>
  %h2 = dnn.binary ins(%h, %d : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "add"} : tensor<4x8xf32>
  %w2 = dnn.matmul ins(%h2, %wu : tensor<4x8xf32>, tensor<8x32xf32>) : tensor<4x32xf32>
  %r = dnn.binary ins(%h2, %t : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "mul"} : tensor<4x8xf32>
  %e = dnn.matmul ins(%w2, %wd : tensor<4x32xf32>, tensor<32x8xf32>) : tensor<4x8xf32>
  %y = dnn.binary ins(%r, %e : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "add"} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// The quietest step of the gap is its first (before %u only %h and the
// table are alive), but a table made there stays alive across the MLP's
// wide %u and %g: made before %n it adds only itself where %d is alive,
// and the MLP runs without it (the step where it adds least to the peak
// over the rest of the gap, not the quietest).
// CHECK-LABEL: func.func @quiet_then_busy
// CHECK:      %d = dnn.matmul ins(%g, %wd
// CHECK-NEXT: %t_again = dnn.unary ins(%wt : {{.*}}) {fn = "cos"}
// CHECK-NEXT: %n = dnn.matmul ins(%d, %wn
// CHECK-NEXT: %r = dnn.binary ins(%n, %t_again : {{.*}}) {fn = "mul"}
func.func @quiet_then_busy(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %wt = "dnn.weight"() <{splat = dense<1.000000e-01> : tensor<4x8xf32>}> : () -> tensor<4x8xf32>
  %wu = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<8x32xf32>}> : () -> tensor<8x32xf32>
  %wd = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<32x16xf32>}> : () -> tensor<32x16xf32>
  %wn = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<16x8xf32>}> : () -> tensor<16x8xf32>
  %t = dnn.unary ins(%wt : tensor<4x8xf32>) {fn = "cos"} : tensor<4x8xf32>
  %h = dnn.binary ins(%x, %t : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "mul"} : tensor<4x8xf32>
  %u = dnn.matmul ins(%h, %wu : tensor<4x8xf32>, tensor<8x32xf32>) : tensor<4x32xf32>
  %g = dnn.unary ins(%u : tensor<4x32xf32>) {fn = "sigmoid"} : tensor<4x32xf32>
  %d = dnn.matmul ins(%g, %wd : tensor<4x32xf32>, tensor<32x16xf32>) : tensor<4x16xf32>
  %n = dnn.matmul ins(%d, %wn : tensor<4x16xf32>, tensor<16x8xf32>) : tensor<4x8xf32>
  %r = dnn.binary ins(%n, %t : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "mul"} : tensor<4x8xf32>
  %m = dnn.matmul ins(%d, %wn : tensor<4x16xf32>, tensor<16x8xf32>) : tensor<4x8xf32>
  %y = dnn.binary ins(%r, %m : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "add"} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// Negative: the table is made from the input (cos of %x), not from weights
// alone: recomputing it would keep %x alive instead; nothing is cloned.
// CHECK-LABEL: func.func @made_from_the_input
// CHECK-NOT: _again
// CHECK: func.return
func.func @made_from_the_input(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %wu = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<8x32xf32>}> : () -> tensor<8x32xf32>
  %wd = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<32x8xf32>}> : () -> tensor<32x8xf32>
  %t = dnn.unary ins(%x : tensor<4x8xf32>) {fn = "cos"} : tensor<4x8xf32>
  %h = dnn.binary ins(%x, %t : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "mul"} : tensor<4x8xf32>
  %u = dnn.matmul ins(%h, %wu : tensor<4x8xf32>, tensor<8x32xf32>) : tensor<4x32xf32>
  %d = dnn.matmul ins(%u, %wd : tensor<4x32xf32>, tensor<32x8xf32>) : tensor<4x8xf32>
  %y = dnn.binary ins(%d, %t : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "mul"} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// Negative: the table is made through a result larger than itself (a
// 4x32 cos of a weight, then a product down to 4x8): its clone would need
// more bytes than the table frees; nothing is cloned.
// CHECK-LABEL: func.func @made_through_a_larger_result
// CHECK-NOT: _again
// CHECK: func.return
func.func @made_through_a_larger_result(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %wa = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<4x32xf32>}> : () -> tensor<4x32xf32>
  %wu = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<8x32xf32>}> : () -> tensor<8x32xf32>
  %wd = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<32x8xf32>}> : () -> tensor<32x8xf32>
  %big = dnn.unary ins(%wa : tensor<4x32xf32>) {fn = "cos"} : tensor<4x32xf32>
  %t = dnn.matmul ins(%big, %wd : tensor<4x32xf32>, tensor<32x8xf32>) : tensor<4x8xf32>
  %h = dnn.binary ins(%x, %t : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "mul"} : tensor<4x8xf32>
  %u = dnn.matmul ins(%h, %wu : tensor<4x8xf32>, tensor<8x32xf32>) : tensor<4x32xf32>
  %d = dnn.matmul ins(%u, %wd : tensor<4x32xf32>, tensor<32x8xf32>) : tensor<4x8xf32>
  %y = dnn.binary ins(%d, %t : tensor<4x8xf32>, tensor<4x8xf32>) {fn = "mul"} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// RUN: pyocc-opt %s --split-input-file -p "dnn-recompute{values=v}" | filecheck %s
// RUN: not pyocc-opt %s --split-input-file -p "dnn-recompute{values=c}" 2>&1 | filecheck %s --check-prefix=CONV
// RUN: not pyocc-opt %s --split-input-file -p "dnn-recompute{values=nothing}" 2>&1 | filecheck %s --check-prefix=NAME
// RUN: not pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops,dnn-recompute{values=v}" 2>&1 | filecheck %s --check-prefix=FORM

// An upsample read by a concat early and by an add at the end: the resize
// runs again from its 4x smaller input just before the add, so the big
// output dies at the concat.
// CHECK-LABEL: func.func @upsample_read_late
// CHECK:      %v = dnn.resize ins(%c : tensor<1x2x4x4xf32>)
// CHECK-NEXT: %j = dnn.concat ins(%v, %x : {{.*}})
// CHECK-NEXT: %h = dnn.conv ins(%j, %w1
// CHECK-NEXT: %k = dnn.conv ins(%h, %w2
// CHECK-NEXT: %v_again = dnn.resize ins(%c : tensor<1x2x4x4xf32>)
// CHECK-NEXT: %y = dnn.binary ins(%k, %v_again : {{.*}}) {fn = "add"}
// CHECK-NEXT: func.return %y
// CONV: dnn-recompute: %c is made by dnn.conv, which is not Recomputable; only cheap ops (the Recomputable trait: unary, binary, channel_affine, batch_norm, resize) are recomputed
// NAME: dnn-recompute: no value named %nothing in @upsample_read_late; name an op result as the tensor-form IR prints it (pyocc-opt MODEL -p ...)
// FORM: dnn-recompute needs tensor-form dnn, which convert-onnx-to-dnn produces, but @upsample_read_late is in buffer-form dnn (dnn.malloc/dnn.dealloc); run dnn-recompute before dnn-insert-memory-ops
func.func @upsample_read_late(%x: tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %w0 = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x2x3x3xf32>}> : () -> tensor<2x2x3x3xf32>
  %w1 = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x4x3x3xf32>}> : () -> tensor<2x4x3x3xf32>
  %w2 = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x2x3x3xf32>}> : () -> tensor<2x2x3x3xf32>
  %c = dnn.conv ins(%x, %w0 : tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x4x4xf32>
  %v = dnn.resize ins(%c : tensor<1x2x4x4xf32>) {scales = array<f32: 1.0, 1.0, 2.0, 2.0>} : tensor<1x2x8x8xf32>
  %j = dnn.concat ins(%v, %x : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) {axis = 1 : i64} : tensor<1x4x8x8xf32>
  %h = dnn.conv ins(%j, %w1 : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %k = dnn.conv ins(%h, %w2 : tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %y = dnn.binary ins(%k, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) {fn = "add"} : tensor<1x2x8x8xf32>
  func.return %y : tensor<1x2x8x8xf32>
}

// -----

// A long skip made from the graph input: relu(affine(x)). The affine's
// result dies at the relu and reads no more bytes than it makes, so both
// run again before the late concat (the clone reads only %x, alive anyway).
// CHECK-LABEL: func.func @long_skip_from_input
// CHECK:      %n = dnn.channel_affine ins(%x,
// CHECK-NEXT: %v = dnn.unary ins(%n
// CHECK-NEXT: %h = dnn.conv ins(%v, %w
// CHECK-NEXT: %k = dnn.conv ins(%h, %w
// CHECK-NEXT: %n_again = dnn.channel_affine ins(%x,
// CHECK-NEXT: %v_again = dnn.unary ins(%n_again
// CHECK-NEXT: %y = dnn.concat ins(%k, %v_again : {{.*}})
func.func @long_skip_from_input(%x: tensor<1x2x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %s = "dnn.weight"() <{splat = dense<2.000000e+00> : tensor<2xf32>}> : () -> tensor<2xf32>
  %t = "dnn.weight"() <{splat = dense<-1.000000e+00> : tensor<2xf32>}> : () -> tensor<2xf32>
  %w = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x2x3x3xf32>}> : () -> tensor<2x2x3x3xf32>
  %n = dnn.channel_affine ins(%x, %s, %t : tensor<1x2x8x8xf32>, tensor<2xf32>, tensor<2xf32>) : tensor<1x2x8x8xf32>
  %v = dnn.unary ins(%n : tensor<1x2x8x8xf32>) {fn = "relu"} : tensor<1x2x8x8xf32>
  %h = dnn.conv ins(%v, %w : tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %k = dnn.conv ins(%h, %w : tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %y = dnn.concat ins(%k, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) {axis = 1 : i64} : tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// -----

// Negative: the relu's two readers are next to each other: no op between
// them keeps it alive longer than needed, so nothing is recomputed.
// CHECK-LABEL: func.func @readers_adjacent_not_recomputed
// CHECK-NOT: _again
// CHECK: func.return
func.func @readers_adjacent_not_recomputed(%x: tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %w = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x2x3x3xf32>}> : () -> tensor<2x2x3x3xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %v = dnn.unary ins(%c : tensor<1x2x8x8xf32>) {fn = "relu"} : tensor<1x2x8x8xf32>
  %h = dnn.conv ins(%v, %w : tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %y = dnn.binary ins(%h, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) {fn = "add"} : tensor<1x2x8x8xf32>
  func.return %y : tensor<1x2x8x8xf32>
}

// -----

// Negative: the skip's producer is not Recomputable (a conv): keeping it
// alive is the only choice, and naming it is an error (CONV above).
// CHECK-LABEL: func.func @conv_skip_kept
// CHECK-NOT: _again
// CHECK: func.return
func.func @conv_skip_kept(%x: tensor<1x2x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x2x3x3xf32>}> : () -> tensor<2x2x3x3xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %v = dnn.unary ins(%x : tensor<1x2x8x8xf32>) {fn = "relu"} : tensor<1x2x8x8xf32>
  %h = dnn.conv ins(%c, %w : tensor<1x2x8x8xf32>, tensor<2x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %k = dnn.binary ins(%h, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) {fn = "add"} : tensor<1x2x8x8xf32>
  %y = dnn.concat ins(%k, %c : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) {axis = 1 : i64} : tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

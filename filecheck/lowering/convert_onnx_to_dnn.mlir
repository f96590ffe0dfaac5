// RUN: pyocc-opt %s --split-input-file -p convert-onnx-to-dnn | filecheck %s

// CHECK-LABEL: func.func @conv_relu
func.func @conv_relu(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w = "onnx.ConstantOfShape"() <{value = dense<0.5> : tensor<1xf32>}> : () -> tensor<4x3x3x3xf32>
  // CHECK: %[[W:.*]] = "dnn.weight"() <{splat = dense<5.000000e-01> : tensor<1xf32>}> : () -> tensor<4x3x3x3xf32>
  // CHECK: %[[C:.*]] = dnn.conv ins(%x, %[[W]] : {{.*}}) {{\{.*}}pads = array<i64: 1, 1, 1, 1>
  %c = "onnx.Conv"(%x, %w) <{auto_pad = "SAME_UPPER"}> : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: dnn.unary ins(%[[C]] : {{.*}}) {fn = "relu"
  %r = "onnx.Relu"(%c) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %r : tensor<1x4x8x8xf32>
}

// -----

// Sum of three is a chain of two binary adds; Reshape is a view.
// CHECK-LABEL: func.func @sum_and_view
func.func @sum_and_view(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %c: tensor<2x3xf32>) -> tensor<6xf32> {
  // CHECK: %[[S1:.*]] = dnn.binary ins(%a, %b : {{.*}}) {fn = "add"
  // CHECK-NEXT: %[[S2:.*]] = dnn.binary ins(%[[S1]], %c : {{.*}}) {fn = "add"
  %s = "onnx.Sum"(%a, %b, %c) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: "dnn.view"(%[[S2]]) : (tensor<2x3xf32>) -> tensor<6xf32>
  %v = "onnx.Reshape"(%s) <{shape = array<i64: 6>}> : (tensor<2x3xf32>) -> tensor<6xf32>
  func.return %v : tensor<6xf32>
}

// -----

// BatchNormalization with constant statistics folds into a channel_affine.
// CHECK-LABEL: func.func @batchnorm
func.func @batchnorm(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %s = "onnx.Constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %b = "onnx.Constant"() <{value = dense<[0.0, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %m = "onnx.Constant"() <{value = dense<[0.5, 0.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %v = "onnx.Constant"() <{value = dense<[3.0, 0.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  // CHECK-NOT: dnn.batch_norm
  // CHECK: dnn.channel_affine ins(%x,
  %y = "onnx.BatchNormalization"(%x, %s, %b, %m, %v) <{epsilon = 1.0 : f32}> : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}

// -----

// Negative: statistics computed at run time are not folded.
// CHECK-LABEL: func.func @batchnorm_not_folded
func.func @batchnorm_not_folded(%x: tensor<1x2x4x4xf32>, %s: tensor<2xf32>) -> tensor<1x2x4x4xf32> {
  // CHECK-NOT: dnn.channel_affine
  // CHECK: dnn.batch_norm ins(%x, %s,
  %y = "onnx.BatchNormalization"(%x, %s, %s, %s, %s) : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}

// -----

// ConvTranspose sized by auto_pad: total padding 2*(3-1) + 3 - 6 = 1,
// SAME_UPPER puts the smaller half (0) first, SAME_LOWER the larger.
// CHECK-LABEL: func.func @conv_transpose_auto_pad
func.func @conv_transpose_auto_pad(%x: tensor<1x1x3x3xf32>, %w: tensor<1x2x3x3xf32>) -> (tensor<1x2x6x6xf32>, tensor<1x2x6x6xf32>) {
  // CHECK: dnn.conv_transpose ins(%x, %w : {{.*}}) {{\{.*}}pads = array<i64: 0, 0, 1, 1>
  %u = "onnx.ConvTranspose"(%x, %w) <{auto_pad = "SAME_UPPER", strides = array<i64: 2, 2>}> : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  // CHECK: dnn.conv_transpose ins(%x, %w : {{.*}}) {{\{.*}}pads = array<i64: 1, 1, 0, 0>
  %l = "onnx.ConvTranspose"(%x, %w) <{auto_pad = "SAME_LOWER", strides = array<i64: 2, 2>}> : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  func.return %u, %l : tensor<1x2x6x6xf32>, tensor<1x2x6x6xf32>
}

// -----

// With output_shape alone (no pads), nothing is cropped at the start, and
// given pads are kept as they are.
// CHECK-LABEL: func.func @conv_transpose_output_shape
func.func @conv_transpose_output_shape(%x: tensor<1x1x3x3xf32>, %w: tensor<1x2x3x3xf32>) -> (tensor<1x2x10x8xf32>, tensor<1x2x7x3xf32>) {
  // CHECK: dnn.conv_transpose ins(%x, %w : {{.*}}) {{\{.*}}pads = array<i64: 0, 0, 0, 0>
  %o = "onnx.ConvTranspose"(%x, %w) <{output_shape = array<i64: 10, 8>, strides = array<i64: 3, 2>}> : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x10x8xf32>
  // CHECK: dnn.conv_transpose ins(%x, %w : {{.*}}) {{\{.*}}pads = array<i64: 0, 1, 0, 1>
  %p = "onnx.ConvTranspose"(%x, %w) <{pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 2, 1>}> : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x7x3xf32>
  func.return %o, %p : tensor<1x2x10x8xf32>, tensor<1x2x7x3xf32>
}

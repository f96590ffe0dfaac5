// RUN: pyocc-opt %s | pyocc-opt | filecheck %s
// One function per op family; the text must survive a print-parse-print.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x3xi1>) -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xf32>) {
  // CHECK: %[[ADD:.*]] = "onnx.Add"(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = "onnx.Add"(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: "onnx.Relu"(%[[ADD]])
  %1 = "onnx.Relu"(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: "onnx.Less"
  %2 = "onnx.Less"(%1, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK-NEXT: "onnx.And"
  %3 = "onnx.And"(%2, %c) : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK-NEXT: "onnx.LeakyRelu"(%{{.*}}) <{alpha = 1.000000e-01 : f32}>
  %4 = "onnx.LeakyRelu"(%1) <{alpha = 0.1 : f32}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: "onnx.Sum"(%{{.*}}, %{{.*}}, %{{.*}})
  %5 = "onnx.Sum"(%4, %1, %b) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: "onnx.Where"
  %6 = "onnx.Where"(%3, %5, %4) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %6, %3, %5 : tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @nn
func.func @nn(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6xf32> {
  // CHECK: "onnx.Conv"(%x, %w) <{pads = array<i64: 1, 1, 1, 1>, group = 2 : i64
  %0 = "onnx.Conv"(%x, %w) <{pads = array<i64: 1, 1, 1, 1>, group = 2 : i64}> : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x8x8xf32>
  // CHECK: "onnx.MaxPool"({{.*}}) <{kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>
  %1 = "onnx.MaxPool"(%0) <{kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}> : (tensor<1x6x8x8xf32>) -> tensor<1x6x4x4xf32>
  // CHECK: "onnx.GlobalAveragePool"
  %2 = "onnx.GlobalAveragePool"(%1) : (tensor<1x6x4x4xf32>) -> tensor<1x6x1x1xf32>
  // CHECK: "onnx.Flatten"
  %3 = "onnx.Flatten"(%2) <{axis = 1 : i64}> : (tensor<1x6x1x1xf32>) -> tensor<1x6xf32>
  // CHECK: "onnx.Softmax"({{.*}}) <{axis = -1 : i64}>
  %4 = "onnx.Softmax"(%3) <{axis = -1 : i64}> : (tensor<1x6xf32>) -> tensor<1x6xf32>
  func.return %4 : tensor<1x6xf32>
}

// CHECK-LABEL: func.func @tensor
func.func @tensor(%x: tensor<2x3x4xf32>, %i: tensor<5xi64>) -> (tensor<4x3x2xf32>, tensor<2x6x4xf32>, tensor<2x5x4xf32>, tensor<2x3xf32>) {
  // CHECK: "onnx.Transpose"(%x) <{perm = array<i64: 2, 1, 0>}>
  %0 = "onnx.Transpose"(%x) <{perm = array<i64: 2, 1, 0>}> : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  // CHECK: "onnx.Concat"(%x, %x) <{axis = 1 : i64}>
  %1 = "onnx.Concat"(%x, %x) <{axis = 1 : i64}> : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  // CHECK: "onnx.Gather"(%{{.*}}, %i) <{axis = 1 : i64}>
  %2 = "onnx.Gather"(%1, %i) <{axis = 1 : i64}> : (tensor<2x6x4xf32>, tensor<5xi64>) -> tensor<2x5x4xf32>
  // CHECK: "onnx.ReduceMean"(%x) <{axes = array<i64: -1>, keepdims = 0 : i64, noop_with_empty_axes = 0 : i64}>
  %3 = "onnx.ReduceMean"(%x) <{axes = array<i64: -1>, keepdims = 0 : i64}> : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  // CHECK: "onnx.ConstantOfShape"() <{value = dense<5.000000e-01> : tensor<1xf32>}>
  %4 = "onnx.ConstantOfShape"() <{value = dense<0.5> : tensor<1xf32>}> : () -> tensor<2x3xf32>
  %5 = "onnx.Add"(%3, %4) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %0, %1, %2, %5 : tensor<4x3x2xf32>, tensor<2x6x4xf32>, tensor<2x5x4xf32>, tensor<2x3xf32>
}

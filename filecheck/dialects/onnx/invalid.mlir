// RUN: pyocc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// Each verifier message names the op and the rule it enforces.

func.func @bad_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  %0 = "onnx.Add"(%a, %b) : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
// CHECK: onnx.Add: operand shapes [2, 3] and [4] do not broadcast

// -----

func.func @conv_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) -> tensor<1x6x6x6xf32> {
  %0 = "onnx.Conv"(%x, %w) : (tensor<1x4x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<1x6x6x6xf32>
  func.return %0 : tensor<1x6x6x6xf32>
}
// CHECK: onnx.Conv: input channels 4 must equal weight channels 3 x group 1

// -----

func.func @kernel_rank(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %0 = "onnx.MaxPool"(%x) <{kernel_shape = array<i64: 2, 2, 2>}> : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  func.return %0 : tensor<1x4x4x4xf32>
}
// CHECK: onnx.MaxPool: kernel_shape has 3 values but the input has 2 spatial dimensions

// -----

func.func @axis_range(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "onnx.Softmax"(%x) <{axis = 2 : i64}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
// CHECK: onnx.Softmax: axis 2 is out of range for rank 2

// -----

func.func @relu_on_bool(%x: tensor<2xi1>) -> tensor<2xi1> {
  %0 = "onnx.Relu"(%x) : (tensor<2xi1>) -> tensor<2xi1>
  func.return %0 : tensor<2xi1>
}
// CHECK: onnx.Relu: operand must have a numeric element type, got i1

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) -> tensor<7xf32> {
  %0 = "onnx.Reshape"(%x) <{shape = array<i64: 7>}> : (tensor<2x3xf32>) -> tensor<7xf32>
  func.return %0 : tensor<7xf32>
}
// CHECK: onnx.Reshape: cannot view [2, 3] as [7]: element counts differ

// -----

func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) -> tensor<2x6xf32> {
  %0 = "onnx.Concat"(%a, %b) <{axis = 1 : i64}> : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  func.return %0 : tensor<2x6xf32>
}
// CHECK: onnx.Concat: input shapes [[2, 3], [3, 3]] differ outside axis 1

// -----

func.func @gemm_inner(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  %0 = "onnx.Gemm"(%a, %b) : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  func.return %0 : tensor<2x5xf32>
}
// CHECK: onnx.Gemm: inner dimensions differ after transposition (3 != 4)

// -----

func.func @einsum_term_count(%a: tensor<2x3xf32>) -> tensor<2xf32> {
  %0 = "onnx.Einsum"(%a) <{equation = "ij,jk->i"}> : (tensor<2x3xf32>) -> tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
// CHECK: onnx.Einsum: equation 'ij,jk->i' has 2 operand terms for 1 inputs

// -----

func.func @einsum_sizes(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  %0 = "onnx.Einsum"(%a, %b) <{equation = "ij,jk->ik"}> : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  func.return %0 : tensor<2x5xf32>
}
// CHECK: onnx.Einsum: label 'j' of equation 'ij,jk->ik' has sizes 3 and 4

// -----

func.func @top_k_too_many(%x: tensor<3x4xf32>) -> (tensor<3x5xf32>, tensor<3x5xi64>) {
  %v, %i = "onnx.TopK"(%x) <{K = 5 : i64}> : (tensor<3x4xf32>) -> (tensor<3x5xf32>, tensor<3x5xi64>)
  func.return %v, %i : tensor<3x5xf32>, tensor<3x5xi64>
}
// CHECK: onnx.TopK: K = 5 must be in [0, 4] (the length of axis 1)

// -----

func.func @scatter_nd_updates(%x: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x3xf32>) -> tensor<3x4xf32> {
  %0 = "onnx.ScatterND"(%x, %i, %u) : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}
// CHECK: onnx.ScatterND: updates of shape [2, 3] must have shape indices.shape[:-1] + data.shape[indices.shape[-1]:] = [2, 4]

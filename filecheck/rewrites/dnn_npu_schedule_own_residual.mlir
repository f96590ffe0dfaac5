// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=48KiB chains=false}" --verify-diagnostics | filecheck %s

// A 1x1 convolution whose residual is its own input: every block of it
// needs all 16 channels of %y, so %y is no input sliced with the output
// channels (`_channel_inputs`). It was taken for one: each block read one
// channel of %y for both operands, and the IR's view of that channel as
// the whole input broke ("dnn.view: a view keeps the byte size").
// CHECK-LABEL: func.func @own_residual
// CHECK-NOT:   ["y", "block
// CHECK:       dnn.conv ins(%y_sram{{[_0-9]*}}, %v_sram, residual %y_sram{{[_0-9]*}} : memref<1x16x{{[0-9]+}}x32xf32>, memref<16x16x1x1xf32>, memref<1x16x{{[0-9]+}}x32xf32>)
// CHECK-NOT:   ["y", "block
// CHECK:       func.return
func.func @own_residual(%x: tensor<1x8x32x32xf32>) -> tensor<1x16x32x32xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<16x8x3x3xf32>}> : () -> tensor<16x8x3x3xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<16x16x1x1xf32>}> : () -> tensor<16x16x1x1xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x8x32x32xf32>, tensor<16x8x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x16x32x32xf32>
  %s = dnn.conv ins(%y, %v, residual %y : tensor<1x16x32x32xf32>, tensor<16x16x1x1xf32>, tensor<1x16x32x32xf32>) : tensor<1x16x32x32xf32>
  func.return %s : tensor<1x16x32x32xf32>
}

// -----

// Negative: a residual that is another tensor (%r) is still sliced with the
// output channels: a block of %s reads %y whole and its block of %r.
// CHECK-LABEL: func.func @other_residual
// CHECK:       npu.reads = {{\[}}["y", "all", 16384 : i64, 16384 : i64], ["v", "block0/{{[0-9]+}}", {{.*}}["r", "block0/
func.func @other_residual(%y: tensor<1x64x8x8xf32>, %r: tensor<1x256x8x8xf32>) -> tensor<1x256x8x8xf32> {
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<256x64x1x1xf32>}> : () -> tensor<256x64x1x1xf32>
  %s = dnn.conv ins(%y, %v, residual %r : tensor<1x64x8x8xf32>, tensor<256x64x1x1xf32>, tensor<1x256x8x8xf32>) : tensor<1x256x8x8xf32>
  func.return %s : tensor<1x256x8x8xf32>
}

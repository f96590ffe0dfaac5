// RUN: not pyocc-opt %s -p convert-onnx-to-dnn 2>&1 | filecheck %s

// A stride larger than the kernel makes SAME_UPPER's output (in * stride)
// larger than the transposed convolution reaches: that would need negative
// pads, which the conv_transpose kernel has no meaning for.
// CHECK: convert-onnx-to-dnn: onnx.ConvTranspose with auto_pad=SAME_UPPER needs negative pads [-1, -1]
func.func @conv_transpose_negative_pads(%x: tensor<1x1x3x3xf32>, %w: tensor<1x2x1x1xf32>) -> tensor<1x2x9x9xf32> {
  %u = "onnx.ConvTranspose"(%x, %w) <{auto_pad = "SAME_UPPER", strides = array<i64: 3, 3>}> : (tensor<1x1x3x3xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x9x9xf32>
  func.return %u : tensor<1x2x9x9xf32>
}

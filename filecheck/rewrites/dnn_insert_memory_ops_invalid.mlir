// RUN: not pyocc-opt %s -p "dnn-insert-memory-ops{mode=sometimes}" 2>&1 | filecheck %s --check-prefix=MODE
// RUN: not pyocc-opt %s -p dnn-insert-memory-ops 2>&1 | filecheck %s --check-prefix=ONNX
// MODE: dnn-insert-memory-ops: mode must be 'eager' or 'lazy', got 'sometimes'
// ONNX: onnx.Relu is not lowered yet; run convert-onnx-to-dnn first
func.func @not_lowered(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = "onnx.Relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

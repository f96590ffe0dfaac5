// RUN: not pyocc-opt %s -p "convert-onnx-to-dnn,dnn-insert-memory-ops{mode=sometimes}" 2>&1 | filecheck %s --check-prefix=MODE
// RUN: not pyocc-opt %s -p dnn-insert-memory-ops 2>&1 | filecheck %s --check-prefix=ONNX
// MODE: dnn-insert-memory-ops: mode must be 'eager' or 'lazy', got 'sometimes'
// ONNX: dnn-insert-memory-ops needs tensor-form dnn, which convert-onnx-to-dnn produces, but @not_lowered is in the onnx dialect; run convert-onnx-to-dnn first
func.func @not_lowered(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = "onnx.Relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

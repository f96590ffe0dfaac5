"""Lowerings between pyocc's dialects: onnx -> dnn, and dnn -> llvm per target."""

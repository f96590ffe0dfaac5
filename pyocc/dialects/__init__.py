"""pyocc's dialects: `onnx` (the imported model) and `dnn` (Occamy's DNN IR)."""

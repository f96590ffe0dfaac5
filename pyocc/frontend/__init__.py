"""Frontends: ONNX models into the `onnx` dialect."""

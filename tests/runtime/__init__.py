"""Tests of the run-time support: host kernels against onnxruntime."""

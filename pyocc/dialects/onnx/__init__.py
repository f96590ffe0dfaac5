"""The `onnx` dialect: ONNX operators as xDSL ops, on value-semantics
tensors with static shapes. One op per ONNX op_type, ONNX attribute names."""

from xdsl.ir import Dialect

from pyocc.dialects.onnx.math import MATH_OPS
from pyocc.dialects.onnx.nn import NN_OPS
from pyocc.dialects.onnx.tensor import TENSOR_OPS

ONNX_OPS = [*MATH_OPS, *NN_OPS, *TENSOR_OPS]

#: ONNX op_type -> op class, for the frontend.
OP_BY_TYPE = {op.name.removeprefix("onnx."): op for op in ONNX_OPS}

Onnx = Dialect("onnx", ONNX_OPS, [])

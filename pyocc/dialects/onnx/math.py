"""Elementwise arithmetic, logic, matrix products and reductions of the
`onnx` dialect (ONNX's "math" and "logical" families)."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, result_def, traits_def
from xdsl.traits import Pure

from pyocc.dialects.onnx.base import (
    BinaryElementwiseOp,
    OnnxOp,
    ReduceOp,
    UnaryElementwiseOp,
    VariadicElementwiseOp,
    broadcast_shapes,
    check_element_kind,
    float_prop,
    int_prop,
    normalize_axis,
    opt_float_prop,
    shape_of,
    str_prop,
    tensor_type,
)

# --- unary -----------------------------------------------------------------


@irdl_op_definition
class AbsOp(UnaryElementwiseOp):
    name = "onnx.Abs"
    ACCEPTS: ClassVar[str] = "numeric"


@irdl_op_definition
class NegOp(UnaryElementwiseOp):
    name = "onnx.Neg"
    ACCEPTS: ClassVar[str] = "numeric"


@irdl_op_definition
class ExpOp(UnaryElementwiseOp):
    name = "onnx.Exp"


@irdl_op_definition
class LogOp(UnaryElementwiseOp):
    name = "onnx.Log"


@irdl_op_definition
class SqrtOp(UnaryElementwiseOp):
    name = "onnx.Sqrt"


@irdl_op_definition
class ReciprocalOp(UnaryElementwiseOp):
    name = "onnx.Reciprocal"


@irdl_op_definition
class ErfOp(UnaryElementwiseOp):
    name = "onnx.Erf"


@irdl_op_definition
class FloorOp(UnaryElementwiseOp):
    name = "onnx.Floor"


@irdl_op_definition
class CeilOp(UnaryElementwiseOp):
    name = "onnx.Ceil"


@irdl_op_definition
class NotOp(UnaryElementwiseOp):
    name = "onnx.Not"
    ACCEPTS: ClassVar[str] = "bool"


@irdl_op_definition
class IdentityOp(UnaryElementwiseOp):
    name = "onnx.Identity"
    ACCEPTS: ClassVar[str] = "any"


# --- binary ----------------------------------------------------------------


@irdl_op_definition
class AddOp(BinaryElementwiseOp):
    name = "onnx.Add"


@irdl_op_definition
class SubOp(BinaryElementwiseOp):
    name = "onnx.Sub"


@irdl_op_definition
class MulOp(BinaryElementwiseOp):
    name = "onnx.Mul"


@irdl_op_definition
class DivOp(BinaryElementwiseOp):
    name = "onnx.Div"


@irdl_op_definition
class PowOp(BinaryElementwiseOp):
    name = "onnx.Pow"
    SAME_OPERAND_TYPES: ClassVar[bool] = False


@irdl_op_definition
class EqualOp(BinaryElementwiseOp):
    name = "onnx.Equal"
    ACCEPTS: ClassVar[str] = "any"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class LessOp(BinaryElementwiseOp):
    name = "onnx.Less"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class LessOrEqualOp(BinaryElementwiseOp):
    name = "onnx.LessOrEqual"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class GreaterOp(BinaryElementwiseOp):
    name = "onnx.Greater"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class GreaterOrEqualOp(BinaryElementwiseOp):
    name = "onnx.GreaterOrEqual"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class AndOp(BinaryElementwiseOp):
    name = "onnx.And"
    ACCEPTS: ClassVar[str] = "bool"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class OrOp(BinaryElementwiseOp):
    name = "onnx.Or"
    ACCEPTS: ClassVar[str] = "bool"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class XorOp(BinaryElementwiseOp):
    name = "onnx.Xor"
    ACCEPTS: ClassVar[str] = "bool"
    RESULT_IS_BOOL: ClassVar[bool] = True


@irdl_op_definition
class ModOp(BinaryElementwiseOp):
    name = "onnx.Mod"
    fmod = int_prop(0)


# --- variadic --------------------------------------------------------------


@irdl_op_definition
class SumOp(VariadicElementwiseOp):
    name = "onnx.Sum"


@irdl_op_definition
class MaxOp(VariadicElementwiseOp):
    name = "onnx.Max"


@irdl_op_definition
class MinOp(VariadicElementwiseOp):
    name = "onnx.Min"


@irdl_op_definition
class MeanOp(VariadicElementwiseOp):
    name = "onnx.Mean"


@irdl_op_definition
class WhereOp(OnnxOp):
    """output = condition ? X : Y, all three broadcast."""

    name = "onnx.Where"
    condition = operand_def(TensorType)
    X = operand_def(TensorType)
    Y = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())

    def verify_onnx(self) -> None:
        check_element_kind(self, self.condition, "bool")
        self.check_same_element_type(self.X, self.Y)
        self.check_result_shape(
            broadcast_shapes(self.name, shape_of(self.condition), shape_of(self.X), shape_of(self.Y))
        )


# --- matrix products -------------------------------------------------------


@irdl_op_definition
class MatMulOp(OnnxOp):
    """numpy.matmul: batch dimensions broadcast, 1-D operands promoted."""

    name = "onnx.MatMul"
    A = operand_def(TensorType)
    B = operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    def verify_onnx(self) -> None:
        check_element_kind(self, self.A, "numeric")
        self.check_same_element_type(self.A, self.B)
        a, b = shape_of(self.A), shape_of(self.B)
        if not a or not b:
            raise self.fail("operands must have rank >= 1")
        k_a = a[-1]
        k_b = b[0] if len(b) == 1 else b[-2]
        if k_a != k_b:
            raise self.fail(f"inner dimensions differ: {list(a)} x {list(b)} ({k_a} != {k_b})")
        batch = broadcast_shapes(self.name, a[:-2], b[:-2])
        out = list(batch)
        if len(a) > 1:
            out.append(a[-2])
        if len(b) > 1:
            out.append(b[-1])
        self.check_result_shape(out)


@irdl_op_definition
class GemmOp(OnnxOp):
    """Y = alpha * op(A) @ op(B) + beta * C, with op a transpose if asked."""

    name = "onnx.Gemm"
    A = operand_def(TensorType)
    B = operand_def(TensorType)
    C = opt_operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    alpha = float_prop(1.0)
    beta = float_prop(1.0)
    transA = int_prop(0)
    transB = int_prop(0)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.A, "numeric")
        a, b = shape_of(self.A), shape_of(self.B)
        if len(a) != 2 or len(b) != 2:
            raise self.fail(f"A and B must be 2-D, got ranks {len(a)} and {len(b)}")
        m, k = (a[1], a[0]) if self.int_attr("transA") else a
        k2, n = (b[1], b[0]) if self.int_attr("transB") else b
        if k != k2:
            raise self.fail(f"inner dimensions differ after transposition ({k} != {k2})")
        self.check_result_shape((m, n))
        if self.C is not None:
            c = shape_of(self.C)
            if broadcast_shapes(self.name, c, (m, n)) != (m, n):
                raise self.fail(f"C of shape {list(c)} does not broadcast to {[m, n]}")


# --- reductions ------------------------------------------------------------


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "onnx.ReduceSum"


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    name = "onnx.ReduceMean"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "onnx.ReduceMax"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    name = "onnx.ReduceMin"


@irdl_op_definition
class ReduceProdOp(ReduceOp):
    name = "onnx.ReduceProd"


@irdl_op_definition
class ArgMaxOp(OnnxOp):
    """Index of the largest element along `axis` (int64)."""

    name = "onnx.ArgMax"
    data = operand_def(TensorType)
    reduced = result_def(TensorType)
    traits = traits_def(Pure())

    axis = int_prop(0)
    keepdims = int_prop(1)
    select_last_index = int_prop(0)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.data, "numeric")
        shape = shape_of(self.data)
        axis = normalize_axis(self.name, self.int_attr("axis"), len(shape))
        if self.int_attr("keepdims"):
            expected = shape[:axis] + (1,) + shape[axis + 1:]
        else:
            expected = shape[:axis] + shape[axis + 1:]
        self.check_result_shape(expected)
        if str(tensor_type(self.reduced).element_type) != "i64":
            raise self.fail("result element type must be i64")


# --- activations with parameters (elementwise, kept with math) -------------


@irdl_op_definition
class ReluOp(UnaryElementwiseOp):
    name = "onnx.Relu"
    ACCEPTS: ClassVar[str] = "numeric"


@irdl_op_definition
class SigmoidOp(UnaryElementwiseOp):
    name = "onnx.Sigmoid"


@irdl_op_definition
class TanhOp(UnaryElementwiseOp):
    name = "onnx.Tanh"


@irdl_op_definition
class LeakyReluOp(UnaryElementwiseOp):
    name = "onnx.LeakyRelu"
    alpha = float_prop(0.01)


@irdl_op_definition
class HardSigmoidOp(UnaryElementwiseOp):
    name = "onnx.HardSigmoid"
    alpha = float_prop(0.2)
    beta = float_prop(0.5)


@irdl_op_definition
class HardSwishOp(UnaryElementwiseOp):
    name = "onnx.HardSwish"


@irdl_op_definition
class GeluOp(UnaryElementwiseOp):
    name = "onnx.Gelu"
    approximate = str_prop("none")

    def verify_onnx(self) -> None:
        super().verify_onnx()
        if self.str_attr("approximate") not in ("none", "tanh"):
            raise self.fail("approximate must be 'none' or 'tanh'")


@irdl_op_definition
class ClipOp(UnaryElementwiseOp):
    """Clip with bounds folded into properties (inputs since opset 11,
    attributes before); an absent bound is unbounded."""

    name = "onnx.Clip"
    ACCEPTS: ClassVar[str] = "numeric"
    min = opt_float_prop()
    max = opt_float_prop()


MATH_OPS = [
    AbsOp, NegOp, ExpOp, LogOp, SqrtOp, ReciprocalOp, ErfOp, FloorOp, CeilOp, NotOp,
    IdentityOp, AddOp, SubOp, MulOp, DivOp, PowOp, EqualOp, LessOp, LessOrEqualOp,
    GreaterOp, GreaterOrEqualOp, AndOp, OrOp, XorOp, ModOp, SumOp, MaxOp, MinOp, MeanOp,
    WhereOp, MatMulOp, GemmOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp,
    ReduceProdOp, ArgMaxOp, ReluOp, SigmoidOp, TanhOp, LeakyReluOp, HardSigmoidOp,
    HardSwishOp, GeluOp, ClipOp,
]

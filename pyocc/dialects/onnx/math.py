"""Elementwise arithmetic, logic, matrix products and reductions of the
`onnx` dialect (ONNX's "math" and "logical" families)."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    result_def,
    traits_def,
    var_operand_def,
)
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


@irdl_op_definition
class IsNaNOp(UnaryElementwiseOp):
    """Y = isnan(X), a bool tensor (transformers guard masked softmax rows with it)."""

    name = "onnx.IsNaN"
    SAME_RESULT_TYPE: ClassVar[bool] = False

    def verify_onnx(self) -> None:
        super().verify_onnx()
        check_bool_result(self, self.Y)


@irdl_op_definition
class IsInfOp(UnaryElementwiseOp):
    """Y = X is +inf (when detect_positive) or -inf (when detect_negative)."""

    name = "onnx.IsInf"
    SAME_RESULT_TYPE: ClassVar[bool] = False
    detect_negative = int_prop(1)
    detect_positive = int_prop(1)

    def verify_onnx(self) -> None:
        super().verify_onnx()
        check_bool_result(self, self.Y)


@irdl_op_definition
class SinOp(UnaryElementwiseOp):
    name = "onnx.Sin"


@irdl_op_definition
class CosOp(UnaryElementwiseOp):
    name = "onnx.Cos"


@irdl_op_definition
class TanOp(UnaryElementwiseOp):
    name = "onnx.Tan"


@irdl_op_definition
class AsinOp(UnaryElementwiseOp):
    name = "onnx.Asin"


@irdl_op_definition
class AcosOp(UnaryElementwiseOp):
    name = "onnx.Acos"


@irdl_op_definition
class AtanOp(UnaryElementwiseOp):
    name = "onnx.Atan"


@irdl_op_definition
class SinhOp(UnaryElementwiseOp):
    name = "onnx.Sinh"


@irdl_op_definition
class CoshOp(UnaryElementwiseOp):
    name = "onnx.Cosh"


@irdl_op_definition
class AsinhOp(UnaryElementwiseOp):
    name = "onnx.Asinh"


@irdl_op_definition
class AcoshOp(UnaryElementwiseOp):
    name = "onnx.Acosh"


@irdl_op_definition
class AtanhOp(UnaryElementwiseOp):
    name = "onnx.Atanh"


@irdl_op_definition
class SignOp(UnaryElementwiseOp):
    name = "onnx.Sign"
    ACCEPTS: ClassVar[str] = "numeric"


@irdl_op_definition
class RoundOp(UnaryElementwiseOp):
    """Round half to even, as ONNX specifies."""

    name = "onnx.Round"


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

    BROADCASTS: ClassVar[bool] = True

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
class ReduceL1Op(ReduceOp):
    name = "onnx.ReduceL1"


@irdl_op_definition
class ReduceL2Op(ReduceOp):
    name = "onnx.ReduceL2"


@irdl_op_definition
class ReduceLogSumOp(ReduceOp):
    name = "onnx.ReduceLogSum"


@irdl_op_definition
class ReduceLogSumExpOp(ReduceOp):
    name = "onnx.ReduceLogSumExp"


@irdl_op_definition
class ReduceSumSquareOp(ReduceOp):
    name = "onnx.ReduceSumSquare"


class ArgExtremeOp(OnnxOp):
    """Index of the largest (ArgMax) or smallest (ArgMin) element along `axis` (int64)."""

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


@irdl_op_definition
class ArgMaxOp(ArgExtremeOp):
    name = "onnx.ArgMax"


@irdl_op_definition
class ArgMinOp(ArgExtremeOp):
    name = "onnx.ArgMin"


@irdl_op_definition
class CumSumOp(OnnxOp):
    """Running sums along `axis` (a constant input in ONNX, a property here);
    `exclusive` leaves out the element itself, `reverse` sums from the end."""

    name = "onnx.CumSum"
    x = operand_def(TensorType)
    y = result_def(TensorType)
    traits = traits_def(Pure())

    axis = int_prop(0)
    exclusive = int_prop(0)
    reverse = int_prop(0)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.x, "numeric")
        shape = shape_of(self.x)
        normalize_axis(self.name, self.int_attr("axis"), len(shape))
        self.check_result_shape(shape)


@irdl_op_definition
class TopKOp(OnnxOp):
    """The `K` largest (or smallest) elements along `axis` and their int64
    indices; K is a constant input in ONNX, a property here."""

    name = "onnx.TopK"
    X = operand_def(TensorType)
    Values = result_def(TensorType)
    Indices = result_def(TensorType)
    traits = traits_def(Pure())

    K = int_prop(1)
    axis = int_prop(-1)
    largest = int_prop(1)
    sorted = int_prop(1)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.X, "numeric")
        shape = shape_of(self.X)
        axis = normalize_axis(self.name, self.int_attr("axis"), len(shape))
        k = self.int_attr("K")
        if not 0 <= k <= shape[axis]:
            raise self.fail(f"K = {k} must be in [0, {shape[axis]}] (the length of axis {axis})")
        expected = shape[:axis] + (k,) + shape[axis + 1:]
        self.check_result_shape(expected, 0)
        self.check_result_shape(expected, 1)
        if tensor_type(self.Values).element_type != tensor_type(self.X).element_type:
            raise self.fail("Values must have the input's element type")
        if str(tensor_type(self.Indices).element_type) != "i64":
            raise self.fail("Indices must have element type i64")


@irdl_op_definition
class EinsumOp(OnnxOp):
    """Einstein summation over any number of operands (`equation` as in
    numpy.einsum, with `...` for broadcast dimensions)."""

    name = "onnx.Einsum"
    Inputs = var_operand_def(TensorType)
    Output = result_def(TensorType)
    traits = traits_def(Pure())

    equation = str_prop("")

    def verify_onnx(self) -> None:
        if not self.Inputs:
            raise self.fail("needs at least one input")
        self.check_same_element_type(*self.Inputs)
        check_element_kind(self, self.Inputs[0], "numeric")
        try:
            spec = parse_einsum(self.str_attr("equation"), [shape_of(v) for v in self.Inputs])
        except ValueError as e:
            raise self.fail(str(e)) from None
        self.check_result_shape(spec.output_shape())


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


@irdl_op_definition
class SoftplusOp(UnaryElementwiseOp):
    name = "onnx.Softplus"


@irdl_op_definition
class SoftsignOp(UnaryElementwiseOp):
    name = "onnx.Softsign"


@irdl_op_definition
class EluOp(UnaryElementwiseOp):
    name = "onnx.Elu"
    alpha = float_prop(1.0)


@irdl_op_definition
class SeluOp(UnaryElementwiseOp):
    name = "onnx.Selu"
    alpha = float_prop(1.67326319217681884765625)
    gamma = float_prop(1.05070102214813232421875)


@irdl_op_definition
class CeluOp(UnaryElementwiseOp):
    name = "onnx.Celu"
    alpha = float_prop(1.0)


@irdl_op_definition
class ThresholdedReluOp(UnaryElementwiseOp):
    name = "onnx.ThresholdedRelu"
    alpha = float_prop(1.0)


@irdl_op_definition
class MishOp(UnaryElementwiseOp):
    name = "onnx.Mish"


@irdl_op_definition
class ShrinkOp(UnaryElementwiseOp):
    """x < -lambd: x + bias; x > lambd: x - bias; else 0."""

    name = "onnx.Shrink"
    ACCEPTS: ClassVar[str] = "numeric"
    bias = float_prop(0.0)
    lambd = float_prop(0.5)


def check_bool_result(op: OnnxOp, value: object) -> None:
    """Predicates (IsNaN, IsInf) produce i1 (bool)."""
    if str(tensor_type(value).element_type) != "i1":  # type: ignore[arg-type]
        raise op.fail("result element type must be i1 (bool)")


@dataclass(frozen=True)
class EinsumSpec:
    """A parsed Einsum equation: one label per axis of every input and of the
    output. Each `...` is spelled out as labels of its own ("0", "1", ...,
    numbered from the right, so broadcast dimensions line up the numpy way);
    `sizes` maps every label to its size (the largest, 1s broadcast)."""

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    sizes: dict[str, int]

    def output_shape(self) -> tuple[int, ...]:
        """The shape of the result."""
        return tuple(self.sizes[label] for label in self.output)


def parse_einsum(equation: str, shapes: Sequence[Sequence[int]]) -> EinsumSpec:
    """Parse `equation` for operands of `shapes`; raises ValueError with the
    rule it breaks. Without `->` the output is the ellipsis, then the labels
    used exactly once, in alphabetical order (numpy's implicit mode)."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"equation '{equation}' has {len(terms)} operand terms for {len(shapes)} inputs")
    inputs: list[tuple[str, ...]] = []
    sizes: dict[str, int] = {}
    ellipsis_rank = 0
    for term, shape in zip(terms, shapes, strict=True):
        labels = _einsum_term(term, equation)
        if "..." in labels:
            rank = len(shape) - (len(labels) - 1)
            if rank < 0:
                raise ValueError(f"term '{term}' of equation '{equation}' names more axes than its rank {len(shape)}")
            ellipsis_rank = max(ellipsis_rank, rank)
            at = labels.index("...")
            labels = labels[:at] + [str(rank - 1 - i) for i in range(rank)] + labels[at + 1:]
        if len(labels) != len(shape):
            raise ValueError(f"term '{term}' of equation '{equation}' names {len(labels)} axes, the input has rank {len(shape)}")
        for label, size in zip(labels, shape, strict=True):
            known = sizes.get(label, 1)
            if size != known and 1 not in (size, known):
                raise ValueError(f"label '{label}' of equation '{equation}' has sizes {known} and {size}")
            sizes[label] = max(size, known) if label in sizes else size
        inputs.append(tuple(labels))
    ellipsis = [str(ellipsis_rank - 1 - i) for i in range(ellipsis_rank)]
    if arrow:
        out = _einsum_term(rhs, equation)
        if "..." in out:
            at = out.index("...")
            out = out[:at] + ellipsis + out[at + 1:]
        for label in out:
            if label not in sizes:
                raise ValueError(f"output label '{label}' of equation '{equation}' appears in no input")
        if len(set(out)) != len(out):
            raise ValueError(f"output of equation '{equation}' repeats a label")
    else:
        counts = collections.Counter(label for labels in inputs for label in labels if not label.isdigit())
        out = ellipsis + sorted(label for label, n in counts.items() if n == 1)
    return EinsumSpec(tuple(inputs), tuple(out), sizes)


def _einsum_term(term: str, equation: str) -> list[str]:
    """The labels of one term, `...` kept as one item."""
    labels: list[str] = []
    rest = term
    while rest:
        if rest.startswith("..."):
            if "..." in labels:
                raise ValueError(f"term '{term}' of equation '{equation}' has two ellipses")
            labels.append("...")
            rest = rest[3:]
        elif rest[0].isalpha():
            labels.append(rest[0])
            rest = rest[1:]
        else:
            raise ValueError(f"equation '{equation}' has an invalid character {rest[0]!r} (labels are letters)")
    return labels


MATH_OPS = [
    AbsOp, NegOp, ExpOp, LogOp, SqrtOp, ReciprocalOp, ErfOp, FloorOp, CeilOp, NotOp,
    IdentityOp, AddOp, SubOp, MulOp, DivOp, PowOp, EqualOp, LessOp, LessOrEqualOp,
    GreaterOp, GreaterOrEqualOp, AndOp, OrOp, XorOp, ModOp, SumOp, MaxOp, MinOp, MeanOp,
    WhereOp, MatMulOp, GemmOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp,
    ReduceProdOp, ArgMaxOp, ReluOp, SigmoidOp, TanhOp, LeakyReluOp, HardSigmoidOp,
    HardSwishOp, GeluOp, ClipOp, IsNaNOp, IsInfOp, SinOp, CosOp, TanOp, AsinOp, AcosOp, AtanOp,
    SinhOp, CoshOp, AsinhOp, AcoshOp, AtanhOp, SignOp, RoundOp, ReduceL1Op, ReduceL2Op,
    ReduceLogSumOp, ReduceLogSumExpOp, ReduceSumSquareOp, ArgMinOp, CumSumOp, TopKOp, EinsumOp,
    SoftplusOp, SoftsignOp, EluOp, SeluOp, CeluOp, ThresholdedReluOp, MishOp, ShrinkOp,
]

"""Shared pieces of the `onnx` dialect: type constraints, property helpers and
the abstract op families (elementwise, pooling, reductions) that concrete ops
only name.

Conventions (see docs/guide.md):
- an op's name is ONNX's op_type (`onnx.Conv`); properties keep ONNX's
  attribute names and defaults;
- operands that ONNX passes as tensors but pyocc needs at compile time
  (shapes, axes, pads, slice bounds, scales) are properties: the frontend
  folds them, so each op has exactly one form whatever the opset;
- every verifier message starts with the op name and states the rule.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    AnyFloat,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f32,
    i1,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from pyocc.dialects.properties import property_value

# ---------------------------------------------------------------------------
# Property helpers: one line per ONNX attribute in the op declarations.
# ---------------------------------------------------------------------------


def int_prop(default: int) -> IntegerAttr:
    """An ONNX `int` attribute with its ONNX default."""
    return prop_def(IntegerAttr, default_value=IntegerAttr(default, i64))


def float_prop(default: float) -> FloatAttr:
    """An ONNX `float` attribute with its ONNX default."""
    return prop_def(FloatAttr, default_value=FloatAttr(default, f32))


def str_prop(default: str) -> StringAttr:
    """An ONNX `string` attribute with its ONNX default."""
    return prop_def(StringAttr, default_value=StringAttr(default))


def ints_prop() -> DenseArrayBase | None:
    """An optional ONNX `ints` attribute, printed as `array<i64: ...>`."""
    return opt_prop_def(DenseArrayBase)


def floats_prop() -> DenseArrayBase | None:
    """An optional ONNX `floats` attribute, printed as `array<f32: ...>`."""
    return opt_prop_def(DenseArrayBase)


def opt_int_prop() -> IntegerAttr | None:
    """An optional ONNX `int` attribute without a default."""
    return opt_prop_def(IntegerAttr)


def opt_float_prop() -> FloatAttr | None:
    """An optional ONNX `float` attribute without a default."""
    return opt_prop_def(FloatAttr)


# ---------------------------------------------------------------------------
# Small accessors used by verifiers, lowering and kernels.
# ---------------------------------------------------------------------------


def tensor_type(value: SSAValue | Attribute) -> TensorType:
    """The ranked tensor type of a value (or the type itself)."""
    t = value.type if isinstance(value, SSAValue) else value
    assert isinstance(t, TensorType), f"expected a tensor type, got {t}"
    return t


def shape_of(value: SSAValue) -> tuple[int, ...]:
    """The static shape of a tensor value."""
    return tuple(tensor_type(value).get_shape())


def is_float(t: Attribute) -> bool:
    """True for floating-point element types."""
    return isinstance(t, AnyFloat)


def is_bool(t: Attribute) -> bool:
    """True for ONNX's bool, which pyocc spells i1."""
    return t == i1


def is_integer(t: Attribute) -> bool:
    """True for integer element types other than bool."""
    return isinstance(t, IntegerType) and t != i1


def broadcast_shapes(op_name: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    """Numpy (multidirectional) broadcasting of static shapes.

    Raises VerifyException naming the op when two dimensions clash."""
    rank = max((len(s) for s in shapes), default=0)
    result: list[int] = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise VerifyException(
                f"{op_name}: operand shapes {' and '.join(str(list(s)) for s in shapes)} "
                "do not broadcast (dimensions must be equal or 1)"
            )
        result.append(dims.pop() if dims else 1)
    return tuple(result)


def normalize_axis(op_name: str, axis: int, rank: int, what: str = "axis") -> int:
    """ONNX axes may be negative; returns the axis in [0, rank) or raises."""
    if not -rank <= axis < rank:
        raise VerifyException(
            f"{op_name}: {what} {axis} is out of range for rank {rank} "
            f"(must be in [{-rank}, {rank - 1}])"
        )
    return axis % rank if rank else 0


class OnnxOp(IRDLOperation, ABC):
    """Base of every `onnx` op: ONNX-style verification with messages that
    name the op and the broken rule, and typed accessors for properties."""

    #: True when every operand broadcasts the numpy way (multidirectionally)
    #: to the result's shape: an operand may then have 1 in any axis where
    #: the others give the result its size (the importer stores a splat
    #: constant such an op reads as that smaller block)
    BROADCASTS: ClassVar[bool] = False

    def verify_(self) -> None:
        self.verify_onnx()

    def verify_onnx(self) -> None:
        """The op's ONNX rules beyond operand/result types (override)."""

    def fail(self, rule: str) -> VerifyException:
        """An exception whose message names this op and the rule it broke."""
        return VerifyException(f"{self.name}: {rule}")

    def int_attr(self, name: str) -> int:
        """The integer value of property `name`."""
        value = property_value(self.properties[name])
        assert isinstance(value, int)
        return value

    def float_attr(self, name: str) -> float:
        """The float value of property `name`."""
        value = property_value(self.properties[name])
        assert isinstance(value, float)
        return value

    def str_attr(self, name: str) -> str:
        """The string value of property `name`."""
        value = property_value(self.properties[name])
        assert isinstance(value, str)
        return value

    def ints_attr(self, name: str) -> list[int] | None:
        """The list value of an optional `ints` property, or None if absent."""
        attr = self.properties.get(name)
        return None if attr is None else [int(v) for v in property_value(attr)]  # type: ignore[union-attr]

    def opt_int_attr(self, name: str) -> int | None:
        """The value of an optional int property, or None if absent."""
        return None if name not in self.properties else self.int_attr(name)

    def result_shape(self, index: int = 0) -> tuple[int, ...]:
        """The static shape of result `index`."""
        return tuple(tensor_type(self.results[index].type).get_shape())

    def check_result_shape(self, expected: Sequence[int], index: int = 0) -> None:
        """Fail unless result `index` has exactly the shape `expected`."""
        got = self.result_shape(index)
        if tuple(got) != tuple(expected):
            raise self.fail(
                f"result shape {list(got)} does not match the inferred shape {list(expected)}"
            )

    def check_same_element_type(self, *values: SSAValue) -> None:
        """Fail unless all `values` share one element type."""
        types = {tensor_type(v).element_type for v in values}
        if len(types) > 1:
            raise self.fail(
                "operands must share one element type, got "
                + ", ".join(str(t) for t in types)
            )


# ---------------------------------------------------------------------------
# Op families. Concrete ops set `name` and, where they differ, the allowed
# element types; verification is written once here.
# ---------------------------------------------------------------------------


class UnaryElementwiseOp(OnnxOp, ABC):
    """Y = f(X), same shape and (unless stated) same element type."""

    X = operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    #: which element types the op accepts: "float", "numeric" or "bool"
    ACCEPTS: ClassVar[str] = "float"
    #: True when Y keeps X's element type
    SAME_RESULT_TYPE: ClassVar[bool] = True

    def __init__(self, x: SSAValue, result_type: Attribute | None = None, **props: Attribute):
        super().__init__(
            operands=[x], result_types=[result_type or x.type], properties=props
        )

    def verify_onnx(self) -> None:
        check_element_kind(self, self.X, self.ACCEPTS)
        if tuple(shape_of(self.X)) != self.result_shape():
            raise self.fail(
                f"result shape {list(self.result_shape())} must equal the operand "
                f"shape {list(shape_of(self.X))}"
            )
        if self.SAME_RESULT_TYPE and tensor_type(self.Y).element_type != tensor_type(self.X).element_type:
            raise self.fail("result element type must equal the operand's")


class BinaryElementwiseOp(OnnxOp, ABC):
    """C = f(A, B) with numpy broadcasting."""

    BROADCASTS: ClassVar[bool] = True

    A = operand_def(TensorType)
    B = operand_def(TensorType)
    C = result_def(TensorType)
    traits = traits_def(Pure())

    ACCEPTS: ClassVar[str] = "numeric"
    #: comparisons and logical ops produce bool
    RESULT_IS_BOOL: ClassVar[bool] = False
    #: Pow allows the exponent to have another element type
    SAME_OPERAND_TYPES: ClassVar[bool] = True

    def __init__(self, a: SSAValue, b: SSAValue, result_type: Attribute):
        super().__init__(operands=[a, b], result_types=[result_type])

    def verify_onnx(self) -> None:
        check_element_kind(self, self.A, self.ACCEPTS)
        if self.SAME_OPERAND_TYPES:
            self.check_same_element_type(self.A, self.B)
        self.check_result_shape(broadcast_shapes(self.name, shape_of(self.A), shape_of(self.B)))
        out = tensor_type(self.C).element_type
        if self.RESULT_IS_BOOL and out != i1:
            raise self.fail("result element type must be i1 (bool)")
        if not self.RESULT_IS_BOOL and out != tensor_type(self.A).element_type:
            raise self.fail("result element type must equal the operands'")


class VariadicElementwiseOp(OnnxOp, ABC):
    """Sum/Max/Min/Mean over one or more broadcast operands."""

    BROADCASTS: ClassVar[bool] = True

    data_0 = var_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, inputs: Sequence[SSAValue], result_type: Attribute):
        super().__init__(operands=[list(inputs)], result_types=[result_type])

    def verify_onnx(self) -> None:
        if len(self.data_0) == 0:
            raise self.fail("needs at least one operand")
        self.check_same_element_type(*self.data_0)
        self.check_result_shape(broadcast_shapes(self.name, *(shape_of(v) for v in self.data_0)))


class PoolOp(OnnxOp, ABC):
    """MaxPool / AveragePool: a window of `kernel_shape` slides over the
    spatial dimensions (all but N and C)."""

    X = operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    kernel_shape = ints_prop()
    strides = ints_prop()
    pads = ints_prop()
    auto_pad = str_prop("NOTSET")
    ceil_mode = int_prop(0)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.X, "float")
        rank = len(shape_of(self.X))
        if rank < 3:
            raise self.fail(f"input must have rank >= 3 (N, C, spatial...), got {rank}")
        kernel = self.ints_attr("kernel_shape")
        if kernel is None:
            raise self.fail("attribute kernel_shape is required")
        check_spatial_attrs(self, rank - 2)
        if self.result_shape()[:2] != shape_of(self.X)[:2]:
            raise self.fail("result must keep the input's N and C dimensions")


class GlobalPoolOp(OnnxOp, ABC):
    """GlobalAveragePool / GlobalMaxPool: every spatial dimension becomes 1."""

    X = operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    def verify_onnx(self) -> None:
        check_element_kind(self, self.X, "float")
        shape = shape_of(self.X)
        if len(shape) < 3:
            raise self.fail(f"input must have rank >= 3, got {len(shape)}")
        self.check_result_shape(shape[:2] + (1,) * (len(shape) - 2))


class ReduceOp(OnnxOp, ABC):
    """Reductions over `axes` (all axes when absent, unless
    noop_with_empty_axes)."""

    data = operand_def(TensorType)
    reduced = result_def(TensorType)
    traits = traits_def(Pure())

    axes = ints_prop()
    keepdims = int_prop(1)
    noop_with_empty_axes = int_prop(0)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.data, "numeric")
        shape = shape_of(self.data)
        axes = self.ints_attr("axes")
        if axes is None or not axes:
            if self.int_attr("noop_with_empty_axes"):
                self.check_result_shape(shape)
                return
            axes = list(range(len(shape)))
        norm = {normalize_axis(self.name, a, len(shape)) for a in axes}
        if len(norm) != len(axes):
            raise self.fail(f"axes {axes} repeat an axis")
        if self.int_attr("keepdims"):
            expected = tuple(1 if i in norm else d for i, d in enumerate(shape))
        else:
            expected = tuple(d for i, d in enumerate(shape) if i not in norm)
        self.check_result_shape(expected)


# ---------------------------------------------------------------------------
# Checks shared by several families.
# ---------------------------------------------------------------------------


def check_element_kind(op: OnnxOp, value: SSAValue, accepts: str) -> None:
    """Fail unless `value`'s element type is of the accepted kind."""
    elem = tensor_type(value).element_type
    ok = {
        "float": is_float(elem),
        "numeric": is_float(elem) or is_integer(elem),
        "bool": is_bool(elem),
        "any": True,
    }[accepts]
    if not ok:
        kind = {"float": "a floating-point", "numeric": "a numeric", "bool": "an i1 (bool)"}[accepts]
        raise op.fail(f"operand must have {kind} element type, got {elem}")


def check_spatial_attrs(op: OnnxOp, spatial: int) -> None:
    """kernel_shape, strides, dilations and pads must match the number of
    spatial dimensions (pads twice over: begins, then ends)."""
    for name, expected in (("kernel_shape", spatial), ("strides", spatial),
                           ("dilations", spatial), ("pads", 2 * spatial)):
        values = op.ints_attr(name) if name in op.properties else None
        if values is None:
            continue
        if len(values) != expected:
            raise op.fail(
                f"{name} has {len(values)} values but the input has {spatial} spatial "
                f"dimensions (expected {expected})"
            )
        if name == "pads" and any(v < 0 for v in values):
            raise op.fail(f"pads must be non-negative, got {values}")
        if name != "pads" and any(v < 1 for v in values):
            raise op.fail(f"{name} must be positive, got {values}")
    auto_pad = op.str_attr("auto_pad") if "auto_pad" in op.properties else "NOTSET"
    if auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise op.fail(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got {auto_pad!r}")

"""Tensor construction and data movement in the `onnx` dialect: constants,
views (Reshape, Squeeze, ...), Concat/Split/Slice, gathers, Pad, Resize.

Shape-like inputs (Reshape's shape, Slice's bounds, Pad's pads, ...) are
properties here: pyocc plans memory statically, so they must be known at
compile time, and the frontend folds them (see pyocc/frontend/onnx_import.py).
"""

from __future__ import annotations

from typing import ClassVar

import math

from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    TensorType,
)
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import ConstantLike, Pure

from pyocc.dialects.onnx.base import (
    OnnxOp,
    check_element_kind,
    float_prop,
    floats_prop,
    int_prop,
    ints_prop,
    normalize_axis,
    opt_int_prop,
    shape_of,
    str_prop,
    tensor_type,
)


@irdl_op_definition
class ConstantOp(OnnxOp):
    """A constant tensor: inline `dense<...>` for small or splat values, or a
    `dense_resource<name>` whose bytes live in the module's blob store (the
    weight store) so that printed IR stays readable."""

    name = "onnx.Constant"
    output = result_def(TensorType)
    value = prop_def(DenseIntOrFPElementsAttr | DenseResourceAttr)
    traits = traits_def(Pure(), ConstantLike())

    def __init__(self, value: DenseIntOrFPElementsAttr | DenseResourceAttr):
        super().__init__(result_types=[value.type], properties={"value": value})

    def verify_onnx(self) -> None:
        if self.value.type != self.output.type:
            raise self.fail(f"value type {self.value.type} differs from result type {self.output.type}")


@irdl_op_definition
class ConstantOfShapeOp(OnnxOp):
    """A tensor of the result's shape filled with one value (a one-element
    dense attribute). Kept as an op rather than materialised: the light
    models build all their weights this way and VGG-19 alone would be
    half a gigabyte of identical numbers."""

    name = "onnx.ConstantOfShape"
    output = result_def(TensorType)
    value = prop_def(DenseIntOrFPElementsAttr)
    traits = traits_def(Pure(), ConstantLike())

    def verify_onnx(self) -> None:
        shape = self.value.get_shape()
        if math.prod(shape or ()) != 1:
            raise self.fail(f"value must hold exactly one element, got shape {list(shape or ())}")
        if self.value.get_element_type() != tensor_type(self.output).element_type:
            raise self.fail("value's element type must equal the result's")


class ViewLikeOp(OnnxOp):
    """Ops that only reinterpret the shape: the element count is unchanged."""

    data = operand_def(TensorType)
    reshaped = result_def(TensorType)
    traits = traits_def(Pure())

    def verify_onnx(self) -> None:
        if math.prod(shape_of(self.data)) != math.prod(self.result_shape()):
            raise self.fail(
                f"cannot view {list(shape_of(self.data))} as {list(self.result_shape())}: "
                "element counts differ"
            )
        if tensor_type(self.data).element_type != tensor_type(self.reshaped).element_type:
            raise self.fail("result element type must equal the operand's")


@irdl_op_definition
class ReshapeOp(ViewLikeOp):
    name = "onnx.Reshape"
    shape = ints_prop()
    allowzero = int_prop(0)


@irdl_op_definition
class FlattenOp(ViewLikeOp):
    name = "onnx.Flatten"
    axis = int_prop(1)

    def verify_onnx(self) -> None:
        super().verify_onnx()
        shape = shape_of(self.data)
        axis = self.int_attr("axis")
        if not -len(shape) <= axis <= len(shape):
            raise self.fail(f"axis {axis} is out of range for rank {len(shape)}")
        if axis < 0:  # -1 splits before the last axis, not after it
            axis += len(shape)
        self.check_result_shape((math.prod(shape[:axis]), math.prod(shape[axis:])))


@irdl_op_definition
class SqueezeOp(ViewLikeOp):
    name = "onnx.Squeeze"
    axes = ints_prop()

    def verify_onnx(self) -> None:
        super().verify_onnx()
        shape = shape_of(self.data)
        for a in self.ints_attr("axes") or []:
            if shape[normalize_axis(self.name, a, len(shape))] != 1:
                raise self.fail(f"cannot squeeze axis {a} of size {shape[a]} (must be 1)")


@irdl_op_definition
class UnsqueezeOp(ViewLikeOp):
    name = "onnx.Unsqueeze"
    axes = ints_prop()

    def verify_onnx(self) -> None:
        super().verify_onnx()
        axes = self.ints_attr("axes")
        if not axes:
            raise self.fail("axes are required")
        rank = len(self.result_shape())
        for a in axes:
            normalize_axis(self.name, a, rank)


@irdl_op_definition
class TransposeOp(OnnxOp):
    name = "onnx.Transpose"
    data = operand_def(TensorType)
    transposed = result_def(TensorType)
    traits = traits_def(Pure())
    perm = ints_prop()

    def verify_onnx(self) -> None:
        shape = shape_of(self.data)
        perm = self.ints_attr("perm") or list(reversed(range(len(shape))))
        if sorted(perm) != list(range(len(shape))):
            raise self.fail(f"perm {perm} is not a permutation of 0..{len(shape) - 1}")
        self.check_result_shape([shape[p] for p in perm])


@irdl_op_definition
class ConcatOp(OnnxOp):
    name = "onnx.Concat"
    inputs = var_operand_def(TensorType)
    concat_result = result_def(TensorType)
    traits = traits_def(Pure())
    axis = int_prop(0)

    def verify_onnx(self) -> None:
        if not self.inputs:
            raise self.fail("needs at least one input")
        self.check_same_element_type(*self.inputs)
        shapes = [shape_of(v) for v in self.inputs]
        rank = len(shapes[0])
        axis = normalize_axis(self.name, self.int_attr("axis"), rank)
        for s in shapes:
            if len(s) != rank or any(s[i] != shapes[0][i] for i in range(rank) if i != axis):
                raise self.fail(
                    f"input shapes {[list(s) for s in shapes]} differ outside axis {axis}"
                )
        expected = list(shapes[0])
        expected[axis] = sum(s[axis] for s in shapes)
        self.check_result_shape(expected)


@irdl_op_definition
class SplitOp(OnnxOp):
    name = "onnx.Split"
    input = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    traits = traits_def(Pure())
    axis = int_prop(0)
    split = ints_prop()

    def verify_onnx(self) -> None:
        shape = shape_of(self.input)
        axis = normalize_axis(self.name, self.int_attr("axis"), len(shape))
        sizes = [tensor_type(r).get_shape()[axis] for r in self.outputs]
        if sum(sizes) != shape[axis]:
            raise self.fail(f"output sizes {sizes} along axis {axis} do not add up to {shape[axis]}")


@irdl_op_definition
class SliceOp(OnnxOp):
    name = "onnx.Slice"
    data = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    starts = ints_prop()
    ends = ints_prop()
    axes = ints_prop()
    steps = ints_prop()

    def verify_onnx(self) -> None:
        starts, ends = self.ints_attr("starts"), self.ints_attr("ends")
        if starts is None or ends is None or len(starts) != len(ends):
            raise self.fail("starts and ends are required and must have the same length")
        rank = len(shape_of(self.data))
        axes = self.ints_attr("axes") or list(range(len(starts)))
        steps = self.ints_attr("steps") or [1] * len(starts)
        if len(axes) != len(starts) or len(steps) != len(starts):
            raise self.fail("axes and steps must have as many values as starts")
        for a in axes:
            normalize_axis(self.name, a, rank)
        if 0 in steps:
            raise self.fail("steps must not be 0")


@irdl_op_definition
class GatherOp(OnnxOp):
    name = "onnx.Gather"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    axis = int_prop(0)

    def verify_onnx(self) -> None:
        shape = shape_of(self.data)
        axis = normalize_axis(self.name, self.int_attr("axis"), len(shape))
        check_integer_indices(self, self.indices)
        self.check_result_shape(shape[:axis] + shape_of(self.indices) + shape[axis + 1:])


@irdl_op_definition
class GatherElementsOp(OnnxOp):
    name = "onnx.GatherElements"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    axis = int_prop(0)

    def verify_onnx(self) -> None:
        shape = shape_of(self.data)
        normalize_axis(self.name, self.int_attr("axis"), len(shape))
        check_integer_indices(self, self.indices)
        if len(shape_of(self.indices)) != len(shape):
            raise self.fail("indices must have the data's rank")
        self.check_result_shape(shape_of(self.indices))


@irdl_op_definition
class GatherNDOp(OnnxOp):
    name = "onnx.GatherND"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    batch_dims = int_prop(0)

    def verify_onnx(self) -> None:
        check_integer_indices(self, self.indices)
        data, idx = shape_of(self.data), shape_of(self.indices)
        b = self.int_attr("batch_dims")
        if not idx or idx[-1] > len(data) - b:
            raise self.fail("the last indices dimension must be at most rank(data) - batch_dims")


@irdl_op_definition
class ExpandOp(OnnxOp):
    name = "onnx.Expand"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    shape = ints_prop()


@irdl_op_definition
class TileOp(OnnxOp):
    name = "onnx.Tile"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    repeats = ints_prop()

    def verify_onnx(self) -> None:
        shape = shape_of(self.input)
        repeats = self.ints_attr("repeats") or []
        if len(repeats) != len(shape):
            raise self.fail(f"repeats has {len(repeats)} values for an input of rank {len(shape)}")
        self.check_result_shape([d * r for d, r in zip(shape, repeats)])


@irdl_op_definition
class PadOp(OnnxOp):
    name = "onnx.Pad"
    data = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    pads = ints_prop()
    mode = str_prop("constant")
    constant_value = float_prop(0.0)

    def verify_onnx(self) -> None:
        shape = shape_of(self.data)
        pads = self.ints_attr("pads") or []
        if len(pads) != 2 * len(shape):
            raise self.fail(f"pads has {len(pads)} values, expected {2 * len(shape)} (begins then ends)")
        if self.str_attr("mode") not in ("constant", "reflect", "edge", "wrap"):
            raise self.fail(f"mode must be constant, reflect, edge or wrap, got {self.str_attr('mode')!r}")
        r = len(shape)
        self.check_result_shape([d + pads[i] + pads[i + r] for i, d in enumerate(shape)])


@irdl_op_definition
class ResizeOp(OnnxOp):
    """Resize to the result's shape; scales are kept for the coordinate
    transformation (sizes are folded into the result type)."""

    name = "onnx.Resize"
    X = operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())
    scales = floats_prop()
    mode = str_prop("nearest")
    coordinate_transformation_mode = str_prop("half_pixel")
    nearest_mode = str_prop("round_prefer_floor")
    cubic_coeff_a = float_prop(-0.75)
    exclude_outside = int_prop(0)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.X, "float")
        if self.str_attr("mode") not in ("nearest", "linear", "cubic"):
            raise self.fail(f"mode must be nearest, linear or cubic, got {self.str_attr('mode')!r}")
        if len(self.result_shape()) != len(shape_of(self.X)):
            raise self.fail("result must have the input's rank")


@irdl_op_definition
class CastOp(OnnxOp):
    """Element type conversion; the target type is the result's element type
    (ONNX's `to` attribute is folded into it at import)."""

    name = "onnx.Cast"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())

    def verify_onnx(self) -> None:
        self.check_result_shape(shape_of(self.input))


@irdl_op_definition
class ShapeOp(OnnxOp):
    """The (static) shape as an int64 tensor; always folded by
    onnx-fold-constants, kept so that hand-written IR can use it."""

    name = "onnx.Shape"
    data = operand_def(TensorType)
    shape = result_def(TensorType)
    traits = traits_def(Pure())
    start = int_prop(0)
    end = opt_int_prop()


@irdl_op_definition
class RangeOp(OnnxOp):
    """start, start + delta, ... with the length given by the result type."""

    name = "onnx.Range"
    output = result_def(TensorType)
    traits = traits_def(Pure())
    start = float_prop(0.0)
    delta = float_prop(1.0)


@irdl_op_definition
class SizeOp(OnnxOp):
    """The (static) element count as an int64 scalar; folded at import like
    Shape, kept so that hand-written IR can use it."""

    name = "onnx.Size"
    data = operand_def(TensorType)
    size = result_def(TensorType)
    traits = traits_def(Pure())


@irdl_op_definition
class TriluOp(OnnxOp):
    """The upper (`upper` = 1) or lower triangle of the last two axes, from
    diagonal `k` on (a constant input in ONNX, a property here); the rest is 0."""

    name = "onnx.Trilu"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    upper = int_prop(1)
    k = int_prop(0)

    def verify_onnx(self) -> None:
        shape = shape_of(self.input)
        if len(shape) < 2:
            raise self.fail(f"input must have rank >= 2, got {len(shape)}")
        self.check_result_shape(shape)


@irdl_op_definition
class ScatterNDOp(OnnxOp):
    """A copy of `data` with the slices that `indices` names replaced by (or,
    with `reduction`, combined with) `updates`."""

    name = "onnx.ScatterND"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    updates = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    reduction = str_prop("none")

    def verify_onnx(self) -> None:
        check_integer_indices(self, self.indices)
        self.check_same_element_type(self.data, self.updates)
        data, idx, upd = shape_of(self.data), shape_of(self.indices), shape_of(self.updates)
        if not idx or idx[-1] > len(data):
            raise self.fail("the last indices dimension must be at most rank(data)")
        if tuple(upd) != tuple(idx[:-1]) + tuple(data[idx[-1]:]):
            raise self.fail(
                f"updates of shape {list(upd)} must have shape indices.shape[:-1] + data.shape[indices.shape[-1]:] "
                f"= {list(idx[:-1]) + list(data[idx[-1]:])}"
            )
        if self.str_attr("reduction") not in ("none", "add", "mul", "max", "min"):
            raise self.fail(f"reduction must be none, add, mul, max or min, got {self.str_attr('reduction')!r}")
        self.check_result_shape(data)


@irdl_op_definition
class ScatterElementsOp(OnnxOp):
    """A copy of `data` where each element of `updates` replaces (or, with
    `reduction`, is combined with) the element of `data` that its index in
    `indices` names along `axis` (torch's scatter)."""

    name = "onnx.ScatterElements"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    updates = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    axis = int_prop(0)
    reduction = str_prop("none")

    def verify_onnx(self) -> None:
        check_integer_indices(self, self.indices)
        self.check_same_element_type(self.data, self.updates)
        data = shape_of(self.data)
        normalize_axis(self.name, self.int_attr("axis"), len(data))
        if shape_of(self.indices) != shape_of(self.updates) or len(shape_of(self.indices)) != len(data):
            raise self.fail("indices and updates must have one shape, of the data's rank")
        if self.str_attr("reduction") not in ("none", "add", "mul", "max", "min"):
            raise self.fail(f"reduction must be none, add, mul, max or min, got {self.str_attr('reduction')!r}")
        self.check_result_shape(data)


class BlockRearrangeOp(OnnxOp):
    """DepthToSpace / SpaceToDepth: blocks of `blocksize` x `blocksize`
    move between the channels and the two spatial axes of an NCHW tensor;
    `mode` orders the channels depth-column-row (DCR) or column-row-depth
    (CRD)."""

    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    blocksize = int_prop(1)
    mode = str_prop("DCR")

    def expected_shape(self, n: int, c: int, h: int, w: int, b: int) -> tuple[int, ...]:
        """The result shape (override)."""
        raise NotImplementedError

    def verify_onnx(self) -> None:
        shape = shape_of(self.input)
        if len(shape) != 4:
            raise self.fail(f"input must be 4-D (N, C, H, W), got rank {len(shape)}")
        b = self.int_attr("blocksize")
        if b < 1:
            raise self.fail(f"blocksize must be positive, got {b}")
        if self.str_attr("mode") not in ("DCR", "CRD"):
            raise self.fail(f"mode must be DCR or CRD, got {self.str_attr('mode')!r}")
        self.check_result_shape(self.expected_shape(*shape, b))


@irdl_op_definition
class DepthToSpaceOp(BlockRearrangeOp):
    name = "onnx.DepthToSpace"

    def expected_shape(self, n: int, c: int, h: int, w: int, b: int) -> tuple[int, ...]:
        if c % (b * b):
            raise self.fail(f"channels {c} are not a multiple of blocksize^2 = {b * b}")
        return (n, c // (b * b), h * b, w * b)


@irdl_op_definition
class SpaceToDepthOp(BlockRearrangeOp):
    name = "onnx.SpaceToDepth"

    def expected_shape(self, n: int, c: int, h: int, w: int, b: int) -> tuple[int, ...]:
        if h % b or w % b:
            raise self.fail(f"spatial size {h}x{w} is not a multiple of blocksize {b}")
        return (n, c * b * b, h // b, w // b)


def check_integer_indices(op: OnnxOp, value: object) -> None:
    """Gather-style indices must be int32 or int64."""
    elem = str(tensor_type(value).element_type)  # type: ignore[arg-type]
    if elem not in ("i32", "i64"):
        raise op.fail(f"indices must be i32 or i64, got {elem}")


TENSOR_OPS = [
    ConstantOp, ConstantOfShapeOp, ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp,
    TransposeOp, ConcatOp, SplitOp, SliceOp, GatherOp, GatherElementsOp, GatherNDOp,
    ExpandOp, TileOp, PadOp, ResizeOp, CastOp, ShapeOp, RangeOp, SizeOp, TriluOp, ScatterNDOp,
    DepthToSpaceOp, SpaceToDepthOp, ScatterElementsOp,
]

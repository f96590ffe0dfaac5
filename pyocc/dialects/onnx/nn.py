"""Neural-network operators of the `onnx` dialect: convolution, pooling,
normalisation, softmax (ONNX's "nn" family)."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, result_def, traits_def
from xdsl.traits import Pure

from pyocc.dialects.onnx.base import (
    GlobalPoolOp,
    OnnxOp,
    PoolOp,
    check_element_kind,
    check_spatial_attrs,
    float_prop,
    int_prop,
    ints_prop,
    normalize_axis,
    shape_of,
    str_prop,
)


class ConvLikeOp(OnnxOp):
    """Shared attributes and checks of Conv and ConvTranspose."""

    X = operand_def(TensorType)
    W = operand_def(TensorType)
    B = opt_operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    kernel_shape = ints_prop()
    strides = ints_prop()
    pads = ints_prop()
    dilations = ints_prop()
    group = int_prop(1)
    auto_pad = str_prop("NOTSET")

    def verify_conv_like(self, w_in_channels_axis: int) -> None:
        """Rank and channel checks; `w_in_channels_axis` is 1 for Conv (W is
        M x C/group x k...) and 0 for ConvTranspose (W is C x M/group x k...)."""
        check_element_kind(self, self.X, "float")
        self.check_same_element_type(self.X, self.W)
        x, w = shape_of(self.X), shape_of(self.W)
        if len(x) < 3:
            raise self.fail(f"input X must have rank >= 3 (N, C, spatial...), got {len(x)}")
        if len(w) != len(x):
            raise self.fail(f"weight W must have the input's rank {len(x)}, got {len(w)}")
        group = self.int_attr("group")
        if group < 1:
            raise self.fail(f"group must be >= 1, got {group}")
        kernel = self.ints_attr("kernel_shape")
        check_spatial_attrs(self, len(x) - 2)
        if kernel is not None and list(kernel) != list(w[2:]):
            raise self.fail(f"kernel_shape {kernel} does not match the weight's spatial shape {list(w[2:])}")
        if w_in_channels_axis == 1 and x[1] != w[1] * group:
            raise self.fail(
                f"input channels {x[1]} must equal weight channels {w[1]} x group {group}"
            )
        if w_in_channels_axis == 0 and x[1] != w[0]:
            raise self.fail(f"input channels {x[1]} must equal the weight's first dimension {w[0]}")
        out_channels = w[0] if w_in_channels_axis == 1 else w[1] * group
        if w_in_channels_axis == 1 and out_channels % group:
            raise self.fail(f"output channels {out_channels} must be divisible by group {group}")
        if self.B is not None and shape_of(self.B) != (out_channels,):
            raise self.fail(f"bias B must have shape [{out_channels}], got {list(shape_of(self.B))}")
        y = self.result_shape()
        if y[:2] != (x[0], out_channels):
            raise self.fail(f"result must have N={x[0]} and C={out_channels}, got {list(y[:2])}")


@irdl_op_definition
class ConvOp(ConvLikeOp):
    name = "onnx.Conv"

    def verify_onnx(self) -> None:
        self.verify_conv_like(w_in_channels_axis=1)


@irdl_op_definition
class ConvTransposeOp(ConvLikeOp):
    name = "onnx.ConvTranspose"
    output_padding = ints_prop()
    output_shape = ints_prop()

    def verify_onnx(self) -> None:
        self.verify_conv_like(w_in_channels_axis=0)


@irdl_op_definition
class MaxPoolOp(PoolOp):
    name = "onnx.MaxPool"
    dilations = ints_prop()
    storage_order = int_prop(0)


@irdl_op_definition
class AveragePoolOp(PoolOp):
    name = "onnx.AveragePool"
    count_include_pad = int_prop(0)


@irdl_op_definition
class GlobalAveragePoolOp(GlobalPoolOp):
    name = "onnx.GlobalAveragePool"


@irdl_op_definition
class GlobalMaxPoolOp(GlobalPoolOp):
    name = "onnx.GlobalMaxPool"


@irdl_op_definition
class BatchNormalizationOp(OnnxOp):
    """Inference-mode batch normalisation (the running statistics are inputs)."""

    name = "onnx.BatchNormalization"
    X = operand_def(TensorType)
    scale = operand_def(TensorType)
    B = operand_def(TensorType)
    input_mean = operand_def(TensorType)
    input_var = operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    epsilon = float_prop(1e-5)
    momentum = float_prop(0.9)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.X, "float")
        x = shape_of(self.X)
        if len(x) < 2:
            raise self.fail(f"input must have rank >= 2, got {len(x)}")
        for label, value in (("scale", self.scale), ("B", self.B),
                             ("input_mean", self.input_mean), ("input_var", self.input_var)):
            if shape_of(value) != (x[1],):
                raise self.fail(f"{label} must have shape [{x[1]}] (one per channel), got {list(shape_of(value))}")
        self.check_result_shape(x)


@irdl_op_definition
class LayerNormalizationOp(OnnxOp):
    """Normalise over dimensions axis..rank-1, then scale and shift."""

    name = "onnx.LayerNormalization"
    X = operand_def(TensorType)
    Scale = operand_def(TensorType)
    B = opt_operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    axis = int_prop(-1)
    epsilon = float_prop(1e-5)
    stash_type = int_prop(1)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.X, "float")
        x = shape_of(self.X)
        axis = normalize_axis(self.name, self.int_attr("axis"), len(x))
        self.check_result_shape(x)
        normalized = x[axis:]
        for label, value in (("Scale", self.Scale), ("B", self.B)):
            if value is None:
                continue
            s = shape_of(value)
            if len(s) > len(normalized) or any(
                d not in (1, n) for d, n in zip(reversed(s), reversed(normalized))
            ):
                raise self.fail(f"{label} of shape {list(s)} does not broadcast to the normalised shape {list(normalized)}")


@irdl_op_definition
class LRNOp(OnnxOp):
    """Local response normalisation across channels."""

    name = "onnx.LRN"
    X = operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    alpha = float_prop(1e-4)
    beta = float_prop(0.75)
    bias = float_prop(1.0)
    size = int_prop(1)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.X, "float")
        if len(shape_of(self.X)) < 3:
            raise self.fail("input must have rank >= 3 (N, C, spatial...)")
        if self.int_attr("size") < 1:
            raise self.fail("size must be >= 1")
        self.check_result_shape(shape_of(self.X))


class SoftmaxLikeOp(OnnxOp):
    """Softmax and LogSoftmax along one axis (opset-13 semantics; older
    models are rewritten to it at import)."""

    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())

    axis = int_prop(-1)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.input, "float")
        shape = shape_of(self.input)
        normalize_axis(self.name, self.int_attr("axis"), len(shape))
        self.check_result_shape(shape)


@irdl_op_definition
class SoftmaxOp(SoftmaxLikeOp):
    name = "onnx.Softmax"


@irdl_op_definition
class LogSoftmaxOp(SoftmaxLikeOp):
    name = "onnx.LogSoftmax"


@irdl_op_definition
class DropoutOp(OnnxOp):
    """Dropout at inference: the identity. The ratio and training mode are
    folded to properties; a used mask output is rejected at import."""

    name = "onnx.Dropout"
    data = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())

    ratio = float_prop(0.5)

    def verify_onnx(self) -> None:
        self.check_result_shape(shape_of(self.data))


@irdl_op_definition
class PReluOp(OnnxOp):
    """Y = X < 0 ? slope * X : X, slope broadcast to X (unidirectionally)."""

    name = "onnx.PRelu"
    X = operand_def(TensorType)
    slope = operand_def(TensorType)
    Y = result_def(TensorType)
    traits = traits_def(Pure())

    def verify_onnx(self) -> None:
        check_element_kind(self, self.X, "float")
        self.check_same_element_type(self.X, self.slope)
        x, s = shape_of(self.X), shape_of(self.slope)
        if len(s) > len(x) or any(d not in (1, n) for d, n in zip(reversed(s), reversed(x))):
            raise self.fail(f"slope of shape {list(s)} does not broadcast to X {list(x)}")
        self.check_result_shape(x)


@irdl_op_definition
class InstanceNormalizationOp(OnnxOp):
    """Normalise each channel of each sample over its spatial dimensions,
    then scale and shift per channel."""

    name = "onnx.InstanceNormalization"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    B = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())

    epsilon = float_prop(1e-5)

    def verify_onnx(self) -> None:
        check_element_kind(self, self.input, "float")
        x = shape_of(self.input)
        if len(x) < 3:
            raise self.fail(f"input must have rank >= 3 (N, C, spatial...), got {len(x)}")
        for label, value in (("scale", self.scale), ("B", self.B)):
            if tuple(shape_of(value)) != (x[1],):
                raise self.fail(f"{label} must hold one value per channel ({x[1]}), got {list(shape_of(value))}")
        self.check_result_shape(x)


NN_OPS = [
    ConvOp, ConvTransposeOp, MaxPoolOp, AveragePoolOp, GlobalAveragePoolOp,
    GlobalMaxPoolOp, BatchNormalizationOp, LayerNormalizationOp, LRNOp, SoftmaxOp,
    LogSoftmaxOp, DropoutOp, PReluOp, InstanceNormalizationOp,
]

"""The `dnn` dialect: Occamy's DNN IR.

Compute ops map one-to-one onto a kernel call. Each op's name is the name of
its kernel (`dnn.conv` runs `conv`), its properties are the kernel's static
arguments, and its operands are the kernel's inputs in order. So the runtime
needs no table: it reads the op.

**Two forms, one definition.** Every compute op exists
- on tensors (value semantics, used by fusion): it has a result and no `out`;
- on buffers (destination-passing style, after dnn-insert-memory-ops): it has
  an `out` operand (a memref it writes) and no result.
The verifier requires exactly one of the two. Inputs follow the form: tensors
with a result, memrefs with an `out`.

**Memory ops**: `dnn.malloc`/`dnn.dealloc` (bytes and alignment),
`dnn.memcpy` (host/device), `dnn.pool_init` and `dnn.mem_offset(pool, offset,
size)` (Occamy's Mem-offset: a view at a planned offset), `dnn.view` (a
reshape that shares its operand's bytes), `dnn.subview` (a contiguous band
of a buffer, from dnn-coalesce), and `dnn.weight` (a read-only
constant, loaded once into the constant pool).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import ClassVar, Self

from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FloatAttr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    ParsePropInAttrDict,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import (
    ConstantLike,
    EffectInstance,
    MemoryEffect,
    MemoryEffectKind,
    Pure,
)
from xdsl.utils.exceptions import VerifyException

TensorOrBuffer = TensorType | MemRefType


def element_bytes(t: Attribute) -> int:
    """Bytes per element of an element type (i1 is stored as one byte)."""
    width = getattr(t, "width", None) or getattr(t, "bitwidth", None)
    if width is None:
        raise VerifyException(f"element type {t} has no known size")
    width = width.data if hasattr(width, "data") else width
    return max(1, math.ceil(int(width) / 8))


def type_bytes(t: Attribute) -> int:
    """Bytes of a statically shaped tensor or memref type."""
    assert isinstance(t, TensorType | MemRefType), t
    return math.prod(t.get_shape()) * element_bytes(t.get_element_type())


# ---------------------------------------------------------------------------
# Compute ops
# ---------------------------------------------------------------------------


class KernelEffects(MemoryEffect):
    """A compute op's side effects follow its form: none on tensors (a value
    nobody reads can be deleted), a read and a write on buffers (the op
    exists for what it writes, though it has no result). Plain `Pure` would
    let dead-code elimination delete every buffer-form kernel call."""

    @classmethod
    def get_effects(cls, op: Operation) -> frozenset[EffectInstance]:
        if op.results:
            return frozenset()
        return frozenset((EffectInstance(MemoryEffectKind.READ), EffectInstance(MemoryEffectKind.WRITE)))


class DnnComputeOp(IRDLOperation):
    """Base of compute ops: the tensor/buffer form rule and kernel naming."""

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    #: operand fields that are not kernel inputs (destinations, workspace)
    NOT_INPUTS: ClassVar[frozenset[str]] = frozenset({"out", "outs", "workspace"})

    @classmethod
    def build(
        cls,
        operands: Mapping[str, SSAValue | Sequence[SSAValue] | None],
        result_types: Sequence[Attribute] = (),
        properties: Mapping[str, Attribute] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ) -> Self:
        """The op from its operands by field name (a missing or None entry is
        an absent optional operand, a list fills a variadic one), with
        `operandSegmentSizes` worked out (in place of a stale one, if
        `properties` has it): the one place that knows how xDSL lays out
        segmented operands."""
        flat: list[SSAValue] = []
        sizes: list[int] = []
        for name, _ in cls.get_irdl_definition().operands:
            value = operands.get(name)
            group = list(value) if isinstance(value, list | tuple) else ([] if value is None else [value])
            flat.extend(group)
            sizes.append(len(group))
        props = dict(properties or {})
        props["operandSegmentSizes"] = DenseArrayBase.from_list(i32, sizes)
        return cls.create(operands=flat, result_types=list(result_types), properties=props,
                          attributes=dict(attributes or {}))

    @property
    def kernel(self) -> str:
        """The kernel this op calls: its name without the dialect prefix."""
        return self.name.removeprefix("dnn.")

    @property
    def on_buffers(self) -> bool:
        """True in destination-passing (buffer) form."""
        return len(self.destinations()) > 0

    def destinations(self) -> list[SSAValue]:
        """The buffers this op writes (empty in tensor form)."""
        out = getattr(self, "out", None)
        if out is not None:
            return [out]
        return list(getattr(self, "outs", ()) or ())

    def kernel_inputs(self) -> list[SSAValue | None | list[SSAValue]]:
        """The kernel's positional inputs in order; None for an absent optional
        input, a list for a variadic one."""
        inputs: list[SSAValue | None | list[SSAValue]] = []
        for name, _ in self.get_irdl_definition().operands:
            if name in self.NOT_INPUTS:
                continue
            value = getattr(self, name)
            inputs.append(list(value) if isinstance(value, tuple | list) else value)
        return inputs

    def read_values(self) -> list[SSAValue]:
        """Every value this op reads (inputs and workspace)."""
        read: list[SSAValue] = []
        for value in self.kernel_inputs():
            if isinstance(value, list):
                read.extend(value)
            elif value is not None:
                read.append(value)
        return read

    def kernel_attributes(self) -> dict[str, Attribute]:
        """The static kernel arguments (properties minus bookkeeping)."""
        return {k: v for k, v in self.properties.items() if k != "operandSegmentSizes"}

    def verify_(self) -> None:
        has_results = len(self.results) > 0
        if has_results == self.on_buffers:
            raise VerifyException(
                f"{self.name}: an op has either results (tensor form) or destination "
                "buffers (buffer form), exactly one of the two"
            )
        want = TensorType if has_results else MemRefType
        for value in self.read_values():
            if not isinstance(value.type, want):
                form = "tensor" if has_results else "buffer"
                raise VerifyException(
                    f"{self.name}: in {form} form every input must be a "
                    f"{'tensor' if has_results else 'memref'}, got {value.type}"
                )


def _ints() -> DenseArrayBase | None:
    return opt_prop_def(DenseArrayBase)


def _int() -> IntegerAttr | None:
    return opt_prop_def(IntegerAttr)


def _float() -> FloatAttr | None:
    return opt_prop_def(FloatAttr)


def _str() -> StringAttr | None:
    return opt_prop_def(StringAttr)


class UnaryKernelOp(DnnComputeOp):
    """One input `x`, one output."""

    x = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())


@irdl_op_definition
class ConvOp(DnnComputeOp):
    """Convolution with optional fused bias, residual add and activation:
    out = act(conv(x, w) + bias + residual)."""

    name = "dnn.conv"
    x = operand_def(TensorOrBuffer)
    w = operand_def(TensorOrBuffer)
    bias = opt_operand_def(TensorOrBuffer)
    residual = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    workspace = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    strides = _ints()
    pads = _ints()
    dilations = _ints()
    group = _int()
    activation = _str()
    alpha = _float()
    beta = _float()

    def verify_(self) -> None:
        super().verify_()
        _verify_fused_conv(self)


@irdl_op_definition
class PreActConvOp(DnnComputeOp):
    """Convolution of a pre-activated input (dnn-fuse's DenseNet rule):
    out = act(conv(pre_act(x * pre_scale[c] + pre_shift[c]), w) + bias + residual).

    The per-channel affine and `pre_activation` (none or relu) are applied
    inside the kernel, so the pre-activated tensor is never a buffer."""

    name = "dnn.preact_conv"
    x = operand_def(TensorOrBuffer)
    pre_scale = operand_def(TensorOrBuffer)
    pre_shift = operand_def(TensorOrBuffer)
    w = operand_def(TensorOrBuffer)
    bias = opt_operand_def(TensorOrBuffer)
    residual = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    pre_activation = _str()
    strides = _ints()
    pads = _ints()
    dilations = _ints()
    group = _int()
    activation = _str()
    alpha = _float()
    beta = _float()

    def verify_(self) -> None:
        super().verify_()
        _verify_fused_conv(self)
        channels = self.x.type.get_shape()[1]
        for operand in (self.pre_scale, self.pre_shift):
            if list(operand.type.get_shape()) != [channels]:
                raise VerifyException(
                    f"{self.name}: pre_scale and pre_shift must be vectors of the input's {channels} channels, "
                    f"got {operand.type}"
                )
        if self.pre_activation is not None and self.pre_activation.data != "relu":
            raise VerifyException(f"{self.name}: pre_activation must be relu or absent, got {self.pre_activation.data!r}")


#: activations a kernel can fuse onto its result (host_kernels.ACTIVATIONS)
FUSED_ACTIVATIONS: frozenset[str] = frozenset(
    {"relu", "leaky_relu", "clip", "sigmoid", "tanh", "hard_swish", "hard_sigmoid"}
)


def _verify_fused_conv(op: ConvOp | PreActConvOp) -> None:
    """The fused parts of a convolution: a known activation, a residual of
    the output's shape, a bias of one value per output channel."""
    if op.activation is not None and op.activation.data not in FUSED_ACTIVATIONS:
        raise VerifyException(
            f"{op.name}: activation {op.activation.data!r} cannot be fused; expected one of {sorted(FUSED_ACTIVATIONS)}"
        )
    out_type = op.results[0].type if op.results else op.out.type  # type: ignore[union-attr]
    out_shape = list(out_type.get_shape())
    if op.residual is not None and list(op.residual.type.get_shape()) != out_shape:
        raise VerifyException(f"{op.name}: the residual {op.residual.type} must have the output's shape {out_shape}")
    if op.bias is not None and list(op.bias.type.get_shape()) != out_shape[1:2]:
        raise VerifyException(f"{op.name}: the bias {op.bias.type} must hold one value per output channel")


@irdl_op_definition
class ConvTransposeOp(DnnComputeOp):
    name = "dnn.conv_transpose"
    x = operand_def(TensorOrBuffer)
    w = operand_def(TensorOrBuffer)
    bias = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    strides = _ints()
    pads = _ints()
    dilations = _ints()
    group = _int()
    output_padding = _ints()


@irdl_op_definition
class MaxPoolOp(UnaryKernelOp):
    name = "dnn.max_pool"
    kernel_shape = _ints()
    strides = _ints()
    pads = _ints()
    dilations = _ints()
    ceil_mode = _int()


@irdl_op_definition
class AveragePoolOp(UnaryKernelOp):
    name = "dnn.average_pool"
    kernel_shape = _ints()
    strides = _ints()
    pads = _ints()
    ceil_mode = _int()
    count_include_pad = _int()


@irdl_op_definition
class GlobalAveragePoolOp(UnaryKernelOp):
    name = "dnn.global_average_pool"


@irdl_op_definition
class GlobalMaxPoolOp(UnaryKernelOp):
    name = "dnn.global_max_pool"


@irdl_op_definition
class GemmOp(DnnComputeOp):
    """out = act(alpha * op(a) @ op(b) + beta * c)."""

    name = "dnn.gemm"
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    c = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    alpha = _float()
    beta = _float()
    trans_a = _int()
    trans_b = _int()
    activation = _str()
    activation_alpha = _float()
    activation_beta = _float()

    def verify_(self) -> None:
        super().verify_()
        if self.activation is not None and self.activation.data not in FUSED_ACTIVATIONS:
            raise VerifyException(
                f"{self.name}: activation {self.activation.data!r} cannot be fused; "
                f"expected one of {sorted(FUSED_ACTIVATIONS)}"
            )


@irdl_op_definition
class MatMulOp(DnnComputeOp):
    """Batched matrix product with numpy broadcasting."""

    name = "dnn.matmul"
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())


@irdl_op_definition
class UnaryOp(UnaryKernelOp):
    """Elementwise f(x); `fn` names the function (relu, sigmoid, exp, ...).
    Safe in place: `out` may be `x`'s buffer."""

    name = "dnn.unary"
    fn = prop_def(StringAttr)
    alpha = _float()
    beta = _float()
    approximate = _str()


@irdl_op_definition
class BinaryOp(DnnComputeOp):
    """Elementwise act(f(a, b)) with broadcasting; the fused activation
    (dnn-fuse) is optional and only for arithmetic fns. Safe in place when
    `out` has an operand's shape."""

    name = "dnn.binary"
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    fn = prop_def(StringAttr)
    fmod = _int()
    activation = _str()
    alpha = _float()
    beta = _float()

    #: fns whose result an activation may follow inside the kernel
    ARITHMETIC: ClassVar[frozenset[str]] = frozenset({"add", "sub", "mul", "div", "max", "min"})

    def verify_(self) -> None:
        super().verify_()
        if self.activation is None:
            return
        if self.activation.data not in FUSED_ACTIVATIONS:
            raise VerifyException(
                f"{self.name}: activation {self.activation.data!r} cannot be fused; "
                f"expected one of {sorted(FUSED_ACTIVATIONS)}"
            )
        if self.fn.data not in self.ARITHMETIC:
            raise VerifyException(f"{self.name}: only {sorted(self.ARITHMETIC)} take a fused activation, not {self.fn.data!r}")


@irdl_op_definition
class VariadicOp(DnnComputeOp):
    """Sum/max/min/mean over any number of broadcast inputs."""

    name = "dnn.variadic"
    inputs = var_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    fn = prop_def(StringAttr)


@irdl_op_definition
class WhereOp(DnnComputeOp):
    name = "dnn.where"
    cond = operand_def(TensorOrBuffer)
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())


@irdl_op_definition
class CastOp(UnaryKernelOp):
    name = "dnn.cast"


@irdl_op_definition
class CopyOp(UnaryKernelOp):
    name = "dnn.copy"


@irdl_op_definition
class ChannelAffineOp(DnnComputeOp):
    """out = act(x * scale[c] + shift[c]): inference batch normalisation after
    its statistics are folded. Safe in place."""

    name = "dnn.channel_affine"
    x = operand_def(TensorOrBuffer)
    scale = operand_def(TensorOrBuffer)
    shift = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    axis = _int()
    activation = _str()
    alpha = _float()
    beta = _float()


@irdl_op_definition
class BatchNormOp(DnnComputeOp):
    """Inference batch normalisation when its statistics are not constants
    (otherwise convert-onnx-to-dnn folds it into a channel_affine)."""

    name = "dnn.batch_norm"
    x = operand_def(TensorOrBuffer)
    scale = operand_def(TensorOrBuffer)
    bias = operand_def(TensorOrBuffer)
    mean = operand_def(TensorOrBuffer)
    var = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    epsilon = _float()


@irdl_op_definition
class SoftmaxOp(UnaryKernelOp):
    name = "dnn.softmax"
    axis = _int()


@irdl_op_definition
class AttentionSoftmaxOp(DnnComputeOp):
    """Attention scores in one kernel (dnn-fuse's transformer rule):
    out = softmax(scale * (a @ b) + mask) along the last axis; `mask`, when
    given, broadcasts to the scores. `out` must not overlap `a` or `b`."""

    name = "dnn.attention_softmax"
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    mask = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    scale = _float()


@irdl_op_definition
class LogSoftmaxOp(UnaryKernelOp):
    name = "dnn.log_softmax"
    axis = _int()


@irdl_op_definition
class LayerNormOp(DnnComputeOp):
    name = "dnn.layer_norm"
    x = operand_def(TensorOrBuffer)
    scale = operand_def(TensorOrBuffer)
    bias = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    axis = _int()
    epsilon = _float()


@irdl_op_definition
class LRNOp(UnaryKernelOp):
    name = "dnn.lrn"
    size = prop_def(IntegerAttr)
    alpha = _float()
    beta = _float()
    bias = _float()


@irdl_op_definition
class ReduceOp(UnaryKernelOp):
    name = "dnn.reduce"
    fn = prop_def(StringAttr)
    axes = _ints()
    keepdims = _int()
    noop_with_empty_axes = _int()


@irdl_op_definition
class ArgMaxOp(UnaryKernelOp):
    name = "dnn.arg_max"
    axis = _int()
    keepdims = _int()
    select_last_index = _int()


@irdl_op_definition
class ArgMinOp(UnaryKernelOp):
    name = "dnn.arg_min"
    axis = _int()
    keepdims = _int()
    select_last_index = _int()


@irdl_op_definition
class CumSumOp(UnaryKernelOp):
    """Running sums along `axis` (ONNX CumSum). `out` must not overlap `x`."""

    name = "dnn.cum_sum"
    axis = _int()
    exclusive = _int()
    reverse = _int()


@irdl_op_definition
class TopKOp(DnnComputeOp):
    """The k largest (or smallest) values along `axis` and their int64
    indices: two destinations, values then indices (k is their length along
    `axis`)."""

    name = "dnn.top_k"
    x = operand_def(TensorOrBuffer)
    outs = var_operand_def(MemRefType)
    results_ = var_result_def(TensorType)
    traits = traits_def(KernelEffects())
    axis = _int()
    largest = _int()
    sorted = _int()


@irdl_op_definition
class ConcatOp(DnnComputeOp):
    name = "dnn.concat"
    inputs = var_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    axis = prop_def(IntegerAttr)


@irdl_op_definition
class SplitOp(DnnComputeOp):
    name = "dnn.split"
    x = operand_def(TensorOrBuffer)
    outs = var_operand_def(MemRefType)
    results_ = var_result_def(TensorType)
    traits = traits_def(KernelEffects())
    axis = _int()


@irdl_op_definition
class SliceOp(UnaryKernelOp):
    name = "dnn.slice"
    starts = _ints()
    ends = _ints()
    axes = _ints()
    steps = _ints()


@irdl_op_definition
class TransposeOp(UnaryKernelOp):
    name = "dnn.transpose"
    perm = _ints()


class GatherLikeOp(DnnComputeOp):
    x = operand_def(TensorOrBuffer)
    indices = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())


@irdl_op_definition
class GatherOp(GatherLikeOp):
    name = "dnn.gather"
    axis = _int()


@irdl_op_definition
class GatherElementsOp(GatherLikeOp):
    name = "dnn.gather_elements"
    axis = _int()


@irdl_op_definition
class GatherNDOp(GatherLikeOp):
    name = "dnn.gather_nd"
    batch_dims = _int()


@irdl_op_definition
class ScatterNDOp(DnnComputeOp):
    """A copy of `x` with the slices `indices` names replaced by `updates`
    (or combined with them by `reduction`). `out` must not overlap an input."""

    name = "dnn.scatter_nd"
    x = operand_def(TensorOrBuffer)
    indices = operand_def(TensorOrBuffer)
    updates = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    reduction = _str()


@irdl_op_definition
class ScatterElementsOp(DnnComputeOp):
    """A copy of `x` with `updates` written (or combined by `reduction`) at
    the positions `indices` names along `axis`. `out` must not overlap an input."""

    name = "dnn.scatter_elements"
    x = operand_def(TensorOrBuffer)
    indices = operand_def(TensorOrBuffer)
    updates = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    axis = _int()
    reduction = _str()


@irdl_op_definition
class ExpandOp(UnaryKernelOp):
    name = "dnn.expand"


@irdl_op_definition
class TileOp(UnaryKernelOp):
    name = "dnn.tile"
    repeats = _ints()


@irdl_op_definition
class PadOp(UnaryKernelOp):
    name = "dnn.pad"
    pads = _ints()
    mode = _str()
    value = _float()


@irdl_op_definition
class ResizeOp(UnaryKernelOp):
    name = "dnn.resize"
    mode = _str()
    coordinate_transformation_mode = _str()
    nearest_mode = _str()
    cubic_coeff_a = _float()
    exclude_outside = _int()
    scales = _ints()


@irdl_op_definition
class RangeOp(DnnComputeOp):
    name = "dnn.range"
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    start = prop_def(FloatAttr)
    delta = prop_def(FloatAttr)


# ---------------------------------------------------------------------------
# Values that are not computed: weights and views
# ---------------------------------------------------------------------------


@irdl_op_definition
class WeightOp(IRDLOperation):
    """A read-only constant: `value` (inline dense or a dense_resource blob in
    the weight store) or `splat` (one value repeated, as ConstantOfShape
    writes). Lives in the constant pool, never in the activation pool."""

    name = "dnn.weight"
    value = opt_prop_def(DenseIntOrFPElementsAttr | DenseResourceAttr)
    splat = opt_prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorOrBuffer)
    traits = traits_def(Pure(), ConstantLike())

    def verify_(self) -> None:
        if (self.value is None) == (self.splat is None):
            raise VerifyException("dnn.weight: give exactly one of `value` and `splat`")
        if self.value is not None and list(self.value.type.get_shape()) != list(self.result.type.get_shape()):
            raise VerifyException("dnn.weight: value shape differs from the result shape")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """A reshape that shares its operand's bytes (Reshape, Flatten, Squeeze,
    Unsqueeze, Identity, Dropout at inference): no copy, no allocation. The
    operand's lifetime is extended to the view's last use."""

    name = "dnn.view"
    source = operand_def(TensorOrBuffer)
    result = result_def(TensorOrBuffer)
    traits = traits_def(Pure())

    def verify_(self) -> None:
        if type(self.source.type) is not type(self.result.type):
            raise VerifyException("dnn.view: operand and result must both be tensors or both memrefs")
        if type_bytes(self.source.type) != type_bytes(self.result.type):
            raise VerifyException(
                f"dnn.view: a view keeps the byte size ({type_bytes(self.source.type)} != "
                f"{type_bytes(self.result.type)})"
            )


@irdl_op_definition
class SubviewOp(IRDLOperation):
    """A buffer that is a contiguous slice of another: the bytes
    [offset, offset + size of the result) of `source`, seen with the result's
    type. dnn-coalesce makes one when a producer writes straight into its
    band of a concat output, or a Split/Slice output is a band of its input.
    Like dnn.view it owns no bytes: the lifetime of `source`'s root covers
    every use of the subview."""

    name = "dnn.subview"
    source = operand_def(MemRefType)
    offset = prop_def(IntegerAttr)
    result = result_def(MemRefType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, offset: int, result_type: MemRefType):
        super().__init__(operands=[source], result_types=[result_type],
                         properties={"offset": IntegerAttr(offset, i64)})

    def verify_(self) -> None:
        offset = self.offset.value.data
        end = offset + type_bytes(self.result.type)
        if offset < 0 or end > type_bytes(self.source.type):
            raise VerifyException(
                f"dnn.subview: bytes [{offset}, {end}) fall outside the {type_bytes(self.source.type)}-byte source"
            )


ALIAS_OPS: tuple[type[IRDLOperation], ...] = (ViewOp, SubviewOp)
"""Ops whose result shares its operand's bytes (an alias, owning nothing)."""


# ---------------------------------------------------------------------------
# Memory ops
# ---------------------------------------------------------------------------


def _size_prop() -> IntegerAttr:
    return prop_def(IntegerAttr)


@irdl_op_definition
class MallocOp(IRDLOperation):
    """Allocate `size` bytes aligned to `alignment` (eager: at entry; lazy:
    right before the producer)."""

    name = "dnn.malloc"
    size = _size_prop()
    alignment = prop_def(IntegerAttr, default_value=IntegerAttr(64, i64))
    result = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, buffer_type: MemRefType, alignment: int = 64):
        super().__init__(
            result_types=[buffer_type],
            properties={"size": IntegerAttr(type_bytes(buffer_type), i64),
                        "alignment": IntegerAttr(alignment, i64)},
        )

    def verify_(self) -> None:
        need = type_bytes(self.result.type)
        if self.size.value.data < need:
            raise VerifyException(
                f"dnn.malloc: size {self.size.value.data} is smaller than the {need} bytes of {self.result.type}"
            )
        if self.alignment.value.data < 1:
            raise VerifyException("dnn.malloc: alignment must be positive")


@irdl_op_definition
class DeallocOp(IRDLOperation):
    """Free a buffer from dnn.malloc. Nothing in the block may use the buffer
    (or a view of it) afterwards: pyocc.analysis.verify_lifetimes checks
    that for a whole function in one walk (an op verifier would have to scan
    the rest of the block for every dealloc)."""

    name = "dnn.dealloc"
    buffer = operand_def(MemRefType)
    size = _size_prop()
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$buffer attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue):
        super().__init__(operands=[buffer],
                         properties={"size": IntegerAttr(type_bytes(buffer.type), i64)})


@irdl_op_definition
class MemcpyOp(IRDLOperation):
    """Copy `source` into `target`; `kind` is host_to_device,
    device_to_host, device_to_device or host_to_host."""

    name = "dnn.memcpy"
    source = operand_def(MemRefType)
    target = operand_def(MemRefType)
    kind = prop_def(StringAttr)
    size = _size_prop()

    def verify_(self) -> None:
        if self.kind.data not in ("host_to_device", "device_to_host", "device_to_device", "host_to_host"):
            raise VerifyException(f"dnn.memcpy: unknown kind {self.kind.data!r}")
        if type_bytes(self.source.type) != type_bytes(self.target.type):
            raise VerifyException("dnn.memcpy: source and target sizes differ")


@irdl_op_definition
class PoolInitOp(IRDLOperation):
    """One memory pool of `size` bytes, allocated once; buffers are views
    into it at planned offsets. With several named pools (SRAM, DRAM) there is
    one per pool, told apart by `pool_name`."""

    name = "dnn.pool_init"
    size = _size_prop()
    alignment = prop_def(IntegerAttr, default_value=IntegerAttr(64, i64))
    pool_name = opt_prop_def(StringAttr)
    """The named memory this pool lives in (`--memory-pools`); absent for
    the one anonymous pool."""
    pool = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($pool)"

    def verify_(self) -> None:
        shape = self.pool.type.get_shape()
        if len(shape) != 1 or shape[0] != self.size.value.data:
            raise VerifyException("dnn.pool_init: the pool must be a memref<SIZExi8> of `size` bytes")


@irdl_op_definition
class MemOffsetOp(IRDLOperation):
    """Occamy's Mem-offset(base, offset, size): the buffer at `offset` in
    `pool`, `size` bytes long, viewed with the result's type."""

    name = "dnn.mem_offset"
    pool = operand_def(MemRefType)
    offset = prop_def(IntegerAttr)
    size = _size_prop()
    result = result_def(MemRefType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$pool attr-dict `:` type($pool) `->` type($result)"

    def verify_(self) -> None:
        offset, size = self.offset.value.data, self.size.value.data
        if offset < 0:
            raise VerifyException(f"dnn.mem_offset: offset {offset} is negative")
        pool_bytes = type_bytes(self.pool.type)
        if offset + size > pool_bytes:
            raise VerifyException(
                f"dnn.mem_offset: bytes [{offset}, {offset + size}) fall outside the {pool_bytes}-byte pool"
            )
        if size < type_bytes(self.result.type):
            raise VerifyException(
                f"dnn.mem_offset: size {size} is smaller than the {type_bytes(self.result.type)} bytes of {self.result.type}"
            )


@irdl_op_definition
class PoolReleaseOp(IRDLOperation):
    """Release a pool created by dnn.pool_init (at function exit)."""

    name = "dnn.pool_release"
    pool = operand_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$pool attr-dict `:` type($pool)"


@irdl_op_definition
class SanitizeOp(DnnComputeOp):
    """The plan sanitizer's probe on one buffer (buffer form only; inserted
    by dnn-sanitize). `action = "poison"` fills the buffer with a pattern
    (NaN for floats) and its `guard` trailing bytes with 0xFD, so a read of
    dead memory shows up as NaN; `action = "check"` verifies the guard bytes
    after `writer` wrote the buffer named `buffer`, and fails naming both."""

    name = "dnn.sanitize"
    out = operand_def(MemRefType)
    action = prop_def(StringAttr)
    guard = prop_def(IntegerAttr)
    writer = _str()
    buffer = _str()

    def verify_(self) -> None:
        if self.action.data not in ("poison", "check"):
            raise VerifyException(f"dnn.sanitize: action must be 'poison' or 'check', got '{self.action.data}'")


COMPUTE_OPS = [
    ConvOp, PreActConvOp, ConvTransposeOp, MaxPoolOp, AveragePoolOp, GlobalAveragePoolOp, GlobalMaxPoolOp,
    GemmOp, MatMulOp, UnaryOp, BinaryOp, VariadicOp, WhereOp, CastOp, CopyOp, ChannelAffineOp,
    BatchNormOp, SoftmaxOp, AttentionSoftmaxOp, LogSoftmaxOp, LayerNormOp, LRNOp, ReduceOp, ArgMaxOp, ConcatOp, SplitOp, SliceOp,
    TransposeOp, GatherOp, GatherElementsOp, GatherNDOp, ExpandOp, TileOp, PadOp, ResizeOp, RangeOp,
    SanitizeOp, ArgMinOp, CumSumOp, TopKOp, ScatterNDOp, ScatterElementsOp,
]
MEMORY_OPS = [MallocOp, DeallocOp, MemcpyOp, PoolInitOp, MemOffsetOp, PoolReleaseOp]
DNN_OPS = [*COMPUTE_OPS, WeightOp, ViewOp, SubviewOp, *MEMORY_OPS]

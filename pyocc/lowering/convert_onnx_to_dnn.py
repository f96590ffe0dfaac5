"""`convert-onnx-to-dnn`: ONNX operators become kernel-sized dnn ops on tensors.

Most ops map one to one (`onnx.Conv` -> `dnn.conv`); the rest are
decomposed where they belong:
- Sum of two or more operands -> a chain of binary adds;
- BatchNormalization with constant statistics -> `dnn.channel_affine` with
  scale' = scale / sqrt(var + eps) and shift' = B - mean * scale', computed
  now, at compile time;
- Gemm keeps its transposes as kernel flags; MatMul stays a batched matmul;
- Dropout (inference), Identity, Reshape, Flatten, Squeeze, Unsqueeze ->
  `dnn.view`, which shares its operand's bytes;
- PRelu -> where(x < 0, x * slope, x);
- Trilu -> where(triangle mask, x, 0), the mask a constant;
- DepthToSpace / SpaceToDepth -> view, transpose, view;
- InstanceNormalization -> layer_norm over the spatial axes (scale 1),
  then channel_affine with the per-channel scale and shift;
- IsInf -> unary isinf / isposinf / isneginf (or a constant false);
- Einsum (any equation ONNX allows) -> transposes, views, sum reductions,
  gathers for repeated labels (diagonals) and one batched matmul per pair
  of operands: no kernel of its own;
- auto_pad becomes explicit pads, so kernels see one convention.
After the pass no onnx op remains; one that cannot be lowered fails the pass
with its name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.transforms.dead_code_elimination import dce
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.dialects.dnn import ops as d
from pyocc.dialects.dnn.constants import numpy_dtype, weight_array, weight_from_array
from pyocc.dialects.onnx import base as ob
from pyocc.dialects.onnx import math as om
from pyocc.dialects.onnx import nn as on
from pyocc.dialects.onnx import tensor as ot

_ALPHA = {"alpha": "alpha"}

#: onnx op -> (dnn.unary fn, onnx properties carried over: onnx name -> alpha/beta)
UNARY_FNS: dict[type, tuple[str, dict[str, str]]] = {
    om.ReluOp: ("relu", {}), om.SigmoidOp: ("sigmoid", {}), om.TanhOp: ("tanh", {}),
    om.ExpOp: ("exp", {}), om.LogOp: ("log", {}), om.SqrtOp: ("sqrt", {}),
    om.AbsOp: ("abs", {}), om.NegOp: ("neg", {}), om.ReciprocalOp: ("reciprocal", {}),
    om.ErfOp: ("erf", {}), om.FloorOp: ("floor", {}), om.CeilOp: ("ceil", {}),
    om.NotOp: ("not", {}), om.LeakyReluOp: ("leaky_relu", _ALPHA),
    om.HardSigmoidOp: ("hard_sigmoid", {"alpha": "alpha", "beta": "beta"}), om.HardSwishOp: ("hard_swish", {}),
    om.IsNaNOp: ("isnan", {}), om.SinOp: ("sin", {}), om.CosOp: ("cos", {}), om.TanOp: ("tan", {}),
    om.AsinOp: ("asin", {}), om.AcosOp: ("acos", {}), om.AtanOp: ("atan", {}), om.SinhOp: ("sinh", {}),
    om.CoshOp: ("cosh", {}), om.AsinhOp: ("asinh", {}), om.AcoshOp: ("acosh", {}), om.AtanhOp: ("atanh", {}),
    om.SignOp: ("sign", {}), om.RoundOp: ("round", {}), om.SoftplusOp: ("softplus", {}),
    om.SoftsignOp: ("softsign", {}), om.EluOp: ("elu", _ALPHA), om.SeluOp: ("selu", {"alpha": "alpha", "gamma": "beta"}),
    om.CeluOp: ("celu", _ALPHA), om.ThresholdedReluOp: ("thresholded_relu", _ALPHA), om.MishOp: ("mish", {}),
    om.ShrinkOp: ("shrink", {"lambd": "alpha", "bias": "beta"}),
}

BINARY_FNS: dict[type, str] = {
    om.AddOp: "add", om.SubOp: "sub", om.MulOp: "mul", om.DivOp: "div", om.PowOp: "pow",
    om.ModOp: "mod", om.EqualOp: "equal", om.LessOp: "less", om.LessOrEqualOp: "less_or_equal",
    om.GreaterOp: "greater", om.GreaterOrEqualOp: "greater_or_equal", om.AndOp: "and",
    om.OrOp: "or", om.XorOp: "xor",
}

VARIADIC_FNS: dict[type, str] = {om.MaxOp: "max", om.MinOp: "min", om.MeanOp: "mean"}

REDUCE_FNS: dict[type, str] = {
    om.ReduceSumOp: "sum", om.ReduceMeanOp: "mean", om.ReduceMaxOp: "max",
    om.ReduceMinOp: "min", om.ReduceProdOp: "prod", om.ReduceL1Op: "l1", om.ReduceL2Op: "l2",
    om.ReduceLogSumOp: "log_sum", om.ReduceLogSumExpOp: "log_sum_exp", om.ReduceSumSquareOp: "sum_square",
}

VIEW_OPS = (ot.ReshapeOp, ot.FlattenOp, ot.SqueezeOp, ot.UnsqueezeOp, om.IdentityOp, on.DropoutOp)


def _ints(values: list[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, values)


def _copy_props(op: Operation, names: tuple[str, ...], rename: dict[str, str] | None = None) -> dict[str, Attribute]:
    """The listed properties of `op` that are present, optionally renamed."""
    rename = rename or {}
    return {rename.get(n, n): op.properties[n] for n in names if n in op.properties}


def explicit_pads(op: ob.OnnxOp, in_shape: tuple[int, ...], kernel: list[int]) -> list[int] | None:
    """The pads an op uses, with ONNX's auto_pad resolved to numbers."""
    auto_pad = op.str_attr("auto_pad") if "auto_pad" in op.properties else "NOTSET"
    spatial = in_shape[2:]
    if auto_pad == "NOTSET":
        return op.ints_attr("pads")
    if auto_pad == "VALID":
        return [0] * (2 * len(spatial))
    strides = op.ints_attr("strides") or [1] * len(spatial)
    dilations = (op.ints_attr("dilations") if "dilations" in op.properties else None) or [1] * len(spatial)
    begins, ends = [], []
    for size, k, s, dl in zip(spatial, kernel, strides, dilations):
        out = math.ceil(size / s)
        total = max(0, (out - 1) * s + (k - 1) * dl + 1 - size)
        small, big = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else big)
        ends.append(big if auto_pad == "SAME_UPPER" else small)
    return begins + ends


class LowerOnnxOp(RewritePattern):
    """Every onnx op, dispatched by class to a small rule below."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, ob.OnnxOp):
            return
        rule = self.rule_for(op)
        if rule is None:
            raise PassFailedException(
                f"convert-onnx-to-dnn: no dnn lowering for {op.name} (at {op.results[0].name_hint or 'an unnamed value'})"
            )
        replacement = rule(op, rewriter)
        if replacement is not None:
            for old, new in zip(op.results, replacement.results if isinstance(replacement, Operation) else replacement):
                if old.name_hint and isinstance(new, SSAValue):
                    new.name_hint = old.name_hint
            if isinstance(replacement, Operation):
                rewriter.replace(op, [], list(replacement.results))
            else:
                rewriter.replace(op, [], list(replacement))

    def rule_for(self, op: ob.OnnxOp) -> Callable[[ob.OnnxOp, PatternRewriter], object] | None:
        for cls in type(op).__mro__:
            if cls in RULES:
                return RULES[cls]
        if type(op) in UNARY_FNS:
            return lower_unary
        if type(op) in BINARY_FNS:
            return lower_binary
        if type(op) in VARIADIC_FNS:
            return lower_variadic
        if type(op) in REDUCE_FNS:
            return lower_reduce
        if isinstance(op, VIEW_OPS):
            return lower_view
        return None


def _insert(rewriter: PatternRewriter, op: Operation) -> Operation:
    rewriter.insert(op)
    return op


def _compute(cls: type[d.DnnComputeOp], operands: list, result: Attribute, props: dict[str, Attribute]) -> d.DnnComputeOp:
    """Build a tensor-form dnn compute op; `operands` follows the op's kernel
    inputs in order (None for absent optional, list for variadic)."""
    names = [name for name, _ in cls.get_irdl_definition().operands if name not in d.DnnComputeOp.NOT_INPUTS]
    return cls.build(dict(zip(names, operands, strict=True)), [result], props)


def lower_constant(op: ot.ConstantOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, d.WeightOp.create(result_types=[op.output.type], properties={"value": op.value}))


def lower_constant_of_shape(op: ot.ConstantOfShapeOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, d.WeightOp.create(result_types=[op.output.type], properties={"splat": op.value}))


def lower_conv(op: on.ConvOp, rewriter: PatternRewriter) -> Operation:
    kernel = list(ob.shape_of(op.W)[2:])
    props = _copy_props(op, ("strides", "dilations", "group"))
    pads = explicit_pads(op, ob.shape_of(op.X), kernel)
    if pads is not None:
        props["pads"] = _ints(pads)
    return _insert(rewriter, _compute(d.ConvOp, [op.X, op.W, op.B, None], op.Y.type, props))


def conv_transpose_pads(op: on.ConvTransposeOp) -> list[int] | None:
    """The explicit pads of a ConvTranspose whose output size comes from
    `output_shape` or `auto_pad` (the result type already has that size).
    total = stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - out;
    SAME_UPPER puts the smaller half first, SAME_LOWER the larger; with
    output_shape alone (NOTSET, no pads) nothing is cropped at the start."""
    auto_pad = op.str_attr("auto_pad")
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        if "output_shape" in op.properties and "pads" not in op.properties:
            return [0] * (2 * (len(ob.shape_of(op.X)) - 2))
        return op.ints_attr("pads")
    in_spatial, out_spatial = ob.shape_of(op.X)[2:], ob.shape_of(op.Y)[2:]
    rank = len(in_spatial)
    kernel = ob.shape_of(op.W)[2:]
    strides = op.ints_attr("strides") or [1] * rank
    dilations = op.ints_attr("dilations") or [1] * rank
    output_padding = op.ints_attr("output_padding") or [0] * rank
    begins, ends = [], []
    for i, o, k, s, d, p in zip(in_spatial, out_spatial, kernel, strides, dilations, output_padding):
        total = s * (i - 1) + p + (k - 1) * d + 1 - o
        begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        begins.append(begin)
        ends.append(total - begin)
    if any(b < 0 for b in begins):
        raise PassFailedException(
            f"convert-onnx-to-dnn: onnx.ConvTranspose with auto_pad={auto_pad} needs negative pads {begins}")
    return begins + ends


def lower_conv_transpose(op: on.ConvTransposeOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("strides", "dilations", "group", "output_padding"))
    pads = conv_transpose_pads(op)
    if pads is not None:
        props["pads"] = _ints(pads)
    return _insert(rewriter, _compute(d.ConvTransposeOp, [op.X, op.W, op.B], op.Y.type, props))


def lower_pool(op: ob.PoolOp, rewriter: PatternRewriter) -> Operation:
    kernel = op.ints_attr("kernel_shape") or []
    cls = d.MaxPoolOp if isinstance(op, on.MaxPoolOp) else d.AveragePoolOp
    names = ("kernel_shape", "strides", "ceil_mode") + (("dilations",) if cls is d.MaxPoolOp else ("count_include_pad",))
    props = _copy_props(op, names)
    pads = explicit_pads(op, ob.shape_of(op.X), kernel)
    if pads is not None:
        props["pads"] = _ints(pads)
    return _insert(rewriter, _compute(cls, [op.X], op.Y.type, props))


def lower_global_pool(op: ob.GlobalPoolOp, rewriter: PatternRewriter) -> Operation:
    cls = d.GlobalMaxPoolOp if isinstance(op, on.GlobalMaxPoolOp) else d.GlobalAveragePoolOp
    return _insert(rewriter, _compute(cls, [op.X], op.Y.type, {}))


def lower_gemm(op: om.GemmOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("alpha", "beta", "transA", "transB"), {"transA": "trans_a", "transB": "trans_b"})
    return _insert(rewriter, _compute(d.GemmOp, [op.A, op.B, op.C], op.Y.type, props))


def lower_matmul(op: om.MatMulOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, _compute(d.MatMulOp, [op.A, op.B], op.Y.type, {}))


def lower_unary(op: ob.UnaryElementwiseOp, rewriter: PatternRewriter) -> Operation:
    fn, carried = UNARY_FNS[type(op)]
    props: dict[str, Attribute] = {"fn": StringAttr(fn), **_copy_props(op, tuple(carried), carried)}
    return _insert(rewriter, _compute(d.UnaryOp, [op.X], op.Y.type, props))


def lower_gelu(op: om.GeluOp, rewriter: PatternRewriter) -> Operation:
    props = {"fn": StringAttr("gelu"), "approximate": op.properties["approximate"]}
    return _insert(rewriter, _compute(d.UnaryOp, [op.X], op.Y.type, props))


def lower_clip(op: om.ClipOp, rewriter: PatternRewriter) -> Operation:
    props: dict[str, Attribute] = {"fn": StringAttr("clip"), **_copy_props(op, ("min", "max"), {"min": "alpha", "max": "beta"})}
    return _insert(rewriter, _compute(d.UnaryOp, [op.X], op.Y.type, props))


def lower_binary(op: ob.BinaryElementwiseOp, rewriter: PatternRewriter) -> Operation:
    props: dict[str, Attribute] = {"fn": StringAttr(BINARY_FNS[type(op)])}
    if isinstance(op, om.ModOp):
        props["fmod"] = op.properties["fmod"]
    return _insert(rewriter, _compute(d.BinaryOp, [op.A, op.B], op.C.type, props))


def lower_sum(op: om.SumOp, rewriter: PatternRewriter) -> Operation:
    """sum(a, b, c, ...) => add(add(a, b), c) ...: each step a binary kernel."""
    inputs = list(op.data_0)
    if len(inputs) == 1:
        return _insert(rewriter, _compute(d.CopyOp, [inputs[0]], op.result.type, {}))
    acc = inputs[0]
    out_type = op.result.type
    elem = out_type.element_type
    for i, value in enumerate(inputs[1:], start=1):
        last = i == len(inputs) - 1
        shape = out_type.get_shape() if last else ob.broadcast_shapes(op.name, ob.shape_of(acc), ob.shape_of(value))
        step = _insert(rewriter, _compute(d.BinaryOp, [acc, value], TensorType(elem, list(shape)), {"fn": StringAttr("add")}))
        acc = step.results[0]
    return step


def lower_variadic(op: ob.VariadicElementwiseOp, rewriter: PatternRewriter) -> Operation:
    props = {"fn": StringAttr(VARIADIC_FNS[type(op)])}
    return _insert(rewriter, _compute(d.VariadicOp, [list(op.data_0)], op.result.type, props))


def lower_where(op: om.WhereOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, _compute(d.WhereOp, [op.condition, op.X, op.Y], op.output.type, {}))


def lower_batch_norm(op: on.BatchNormalizationOp, rewriter: PatternRewriter) -> Operation:
    """batchnorm(x) with constant statistics => channel_affine(x, scale', shift')."""
    stats = [op.scale, op.B, op.input_mean, op.input_var]
    eps = op.float_attr("epsilon")
    if all(isinstance(v.owner, d.WeightOp) for v in stats):
        scale, bias, mean, var = (weight_array(v.owner).astype(np.float64) for v in stats)  # type: ignore[arg-type]
        new_scale = scale / np.sqrt(var + eps)
        new_shift = bias - mean * new_scale
        ttype = op.scale.type
        dtype = numpy_dtype(ttype.element_type)
        base = op.Y.name_hint or "bn"
        s = _insert(rewriter, weight_from_array(base + "_scale", new_scale.astype(dtype), ttype))
        t = _insert(rewriter, weight_from_array(base + "_shift", new_shift.astype(dtype), ttype))
        return _insert(rewriter, _compute(d.ChannelAffineOp, [op.X, s.results[0], t.results[0]], op.Y.type, {}))
    props = {"epsilon": op.properties["epsilon"]}
    return _insert(rewriter, _compute(d.BatchNormOp, [op.X, *stats], op.Y.type, props))


def lower_layer_norm(op: on.LayerNormalizationOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("axis", "epsilon"))
    return _insert(rewriter, _compute(d.LayerNormOp, [op.X, op.Scale, op.B], op.Y.type, props))


def lower_lrn(op: on.LRNOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("size", "alpha", "beta", "bias"))
    return _insert(rewriter, _compute(d.LRNOp, [op.X], op.Y.type, props))


def lower_softmax(op: on.SoftmaxLikeOp, rewriter: PatternRewriter) -> Operation:
    cls = d.LogSoftmaxOp if isinstance(op, on.LogSoftmaxOp) else d.SoftmaxOp
    return _insert(rewriter, _compute(cls, [op.input], op.output.type, _copy_props(op, ("axis",))))


def lower_prelu(op: on.PReluOp, rewriter: PatternRewriter) -> Operation:
    """prelu(x, s) => where(x < 0, x * s, x)."""
    x_type = op.X.type
    zero = _insert(rewriter, weight_from_array("zero", np.zeros(1, dtype=numpy_dtype(x_type.element_type)),
                                               TensorType(x_type.element_type, [1])))
    negative = _insert(rewriter, _compute(d.BinaryOp, [op.X, zero.results[0]], TensorType(i1, x_type.get_shape()),
                                          {"fn": StringAttr("less")}))
    scaled = _insert(rewriter, _compute(d.BinaryOp, [op.X, op.slope], x_type, {"fn": StringAttr("mul")}))
    return _insert(rewriter, _compute(d.WhereOp, [negative.results[0], scaled.results[0], op.X], op.Y.type, {}))


def lower_view(op: ob.OnnxOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, d.ViewOp.create(operands=[op.operands[0]], result_types=[op.results[0].type]))


def lower_reduce(op: ob.ReduceOp, rewriter: PatternRewriter) -> Operation:
    props: dict[str, Attribute] = {"fn": StringAttr(REDUCE_FNS[type(op)]),
                                   **_copy_props(op, ("axes", "keepdims", "noop_with_empty_axes"))}
    return _insert(rewriter, _compute(d.ReduceOp, [op.data], op.reduced.type, props))


def lower_arg_extreme(op: om.ArgExtremeOp, rewriter: PatternRewriter) -> Operation:
    cls = d.ArgMinOp if isinstance(op, om.ArgMinOp) else d.ArgMaxOp
    props = _copy_props(op, ("axis", "keepdims", "select_last_index"))
    return _insert(rewriter, _compute(cls, [op.data], op.reduced.type, props))


def lower_is_inf(op: om.IsInfOp, rewriter: PatternRewriter) -> Operation:
    """isinf(x) => unary isinf / isposinf / isneginf by the detect flags;
    with neither flag set the answer is a constant false."""
    positive, negative = op.int_attr("detect_positive"), op.int_attr("detect_negative")
    if not positive and not negative:
        return _insert(rewriter, weight_from_array("isinf", np.zeros(1, dtype=np.bool_), op.Y.type))
    fn = "isinf" if positive and negative else ("isposinf" if positive else "isneginf")
    return _insert(rewriter, _compute(d.UnaryOp, [op.X], op.Y.type, {"fn": StringAttr(fn)}))


def lower_cum_sum(op: om.CumSumOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("axis", "exclusive", "reverse"))
    return _insert(rewriter, _compute(d.CumSumOp, [op.x], op.y.type, props))


def lower_top_k(op: om.TopKOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("axis", "largest", "sorted"))
    return _insert(rewriter, d.TopKOp.build({"x": op.X}, [op.Values.type, op.Indices.type], props))


def lower_scatter_nd(op: ot.ScatterNDOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("reduction",))
    return _insert(rewriter, _compute(d.ScatterNDOp, [op.data, op.indices, op.updates], op.output.type, props))


def lower_scatter_elements(op: ot.ScatterElementsOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("axis", "reduction"))
    return _insert(rewriter, _compute(d.ScatterElementsOp, [op.data, op.indices, op.updates], op.output.type, props))


def lower_trilu(op: ot.TriluOp, rewriter: PatternRewriter) -> Operation:
    """trilu(x) => where(mask, x, 0) with the triangle's mask a constant of
    the last two axes (broadcast over the others)."""
    x_type = op.input.type
    rows, cols = ob.shape_of(op.input)[-2:]
    k = op.int_attr("k")
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    mask = offset >= k if op.int_attr("upper") else offset <= k
    mask_w = _insert(rewriter, weight_from_array("trilu_mask", mask, TensorType(i1, [rows, cols])))
    zero = _insert(rewriter, weight_from_array("zero", np.zeros(1, dtype=numpy_dtype(x_type.element_type)),
                                               TensorType(x_type.element_type, [1])))
    return _insert(rewriter, _compute(d.WhereOp, [mask_w.results[0], op.input, zero.results[0]], op.output.type, {}))


def lower_size(op: ot.SizeOp, rewriter: PatternRewriter) -> Operation:
    count = np.array(math.prod(ob.shape_of(op.data)), dtype=np.int64).reshape(op.size.type.get_shape())
    return _insert(rewriter, weight_from_array("size", count, op.size.type))


def lower_transpose(op: ot.TransposeOp, rewriter: PatternRewriter) -> Operation:
    perm = op.ints_attr("perm") or list(reversed(range(len(ob.shape_of(op.data)))))
    return _insert(rewriter, _compute(d.TransposeOp, [op.data], op.transposed.type, {"perm": _ints(perm)}))


def lower_concat(op: ot.ConcatOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, _compute(d.ConcatOp, [list(op.inputs)], op.concat_result.type,
                                      {"axis": op.properties["axis"]}))


def lower_split(op: ot.SplitOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, d.SplitOp.build({"x": op.input}, [r.type for r in op.outputs],
                                             {"axis": op.properties["axis"]}))


def lower_slice(op: ot.SliceOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, _compute(d.SliceOp, [op.data], op.output.type,
                                      _copy_props(op, ("starts", "ends", "axes", "steps"))))


def lower_gather(op: ob.OnnxOp, rewriter: PatternRewriter) -> Operation:
    cls = {ot.GatherOp: d.GatherOp, ot.GatherElementsOp: d.GatherElementsOp, ot.GatherNDOp: d.GatherNDOp}[type(op)]
    props = _copy_props(op, ("axis", "batch_dims"))
    return _insert(rewriter, _compute(cls, [op.operands[0], op.operands[1]], op.results[0].type, props))


def lower_expand(op: ot.ExpandOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, _compute(d.ExpandOp, [op.input], op.output.type, {}))


def lower_tile(op: ot.TileOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, _compute(d.TileOp, [op.input], op.output.type, _copy_props(op, ("repeats",))))


def lower_pad(op: ot.PadOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("pads", "mode", "constant_value"), {"constant_value": "value"})
    return _insert(rewriter, _compute(d.PadOp, [op.data], op.output.type, props))


def lower_resize(op: ot.ResizeOp, rewriter: PatternRewriter) -> Operation:
    props = _copy_props(op, ("mode", "coordinate_transformation_mode", "nearest_mode",
                             "cubic_coeff_a", "exclude_outside", "scales"))
    return _insert(rewriter, _compute(d.ResizeOp, [op.X], op.Y.type, props))


def lower_cast(op: ot.CastOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, _compute(d.CastOp, [op.input], op.output.type, {}))


def lower_range(op: ot.RangeOp, rewriter: PatternRewriter) -> Operation:
    return _insert(rewriter, _compute(d.RangeOp, [], op.output.type,
                                      {"start": op.properties["start"], "delta": op.properties["delta"]}))


def lower_shape(op: ot.ShapeOp, rewriter: PatternRewriter) -> Operation:
    shape = list(ob.shape_of(op.data))
    end = op.opt_int_attr("end")
    values = np.array(shape[op.int_attr("start"):end], dtype=np.int64)
    return _insert(rewriter, weight_from_array("shape", values, op.shape.type))


def lower_block_rearrange(op: ot.BlockRearrangeOp, rewriter: PatternRewriter) -> Operation:
    """depth_to_space / space_to_depth => view to 6-D, transpose, view back
    (ONNX's own definition; no kernel of its own)."""
    n, c, h, w = ob.shape_of(op.input)
    b = op.int_attr("blocksize")
    crd = op.str_attr("mode") == "CRD"
    if isinstance(op, ot.DepthToSpaceOp):
        six = [n, c // (b * b), b, b, h, w] if crd else [n, b, b, c // (b * b), h, w]
        perm = [0, 1, 4, 2, 5, 3] if crd else [0, 3, 4, 1, 5, 2]
    else:
        six = [n, c, h // b, b, w // b, b]
        perm = [0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4]
    element = op.input.type.element_type
    blocks = _insert(rewriter, d.ViewOp.create(operands=[op.input], result_types=[TensorType(element, six)]))
    moved = _insert(rewriter, _compute(d.TransposeOp, [blocks.results[0]], TensorType(element, [six[p] for p in perm]),
                                       {"perm": _ints(perm)}))
    return _insert(rewriter, d.ViewOp.create(operands=[moved.results[0]], result_types=[op.output.type]))


def lower_instance_norm(op: on.InstanceNormalizationOp, rewriter: PatternRewriter) -> Operation:
    """instance_norm(x, s, b) => channel_affine(layer_norm(x, 1, axis=2), s, b):
    normalise over the spatial axes, then scale and shift per channel."""
    element = op.input.type.element_type
    one = _insert(rewriter, weight_from_array("one", np.ones(1, dtype=numpy_dtype(element)), TensorType(element, [1])))
    normal = _insert(rewriter, _compute(d.LayerNormOp, [op.input, one.results[0], None], op.output.type,
                                        {"axis": IntegerAttr(2, i64), "epsilon": op.properties["epsilon"]}))
    return _insert(rewriter, _compute(d.ChannelAffineOp, [normal.results[0], op.scale, op.B], op.output.type, {}))


# ---------------------------------------------------------------------------
# Einsum: transposes, views, sum reductions, gathers (diagonals) and matmuls.
# ---------------------------------------------------------------------------


@dataclass
class _Labelled:
    """A tensor value and the einsum label of each of its axes."""

    value: SSAValue
    labels: list[str]

    @property
    def shape(self) -> list[int]:
        return list(ob.shape_of(self.value))


@dataclass
class _EinsumBuilder:
    """Emits the dnn ops of one einsum, one step at a time."""

    rewriter: PatternRewriter
    element: Attribute

    def typed(self, shape: list[int]) -> TensorType:
        return TensorType(self.element, shape)

    def view(self, t: _Labelled, shape: list[int], labels: list[str]) -> _Labelled:
        if t.shape == shape:
            return _Labelled(t.value, labels)
        op = _insert(self.rewriter, d.ViewOp.create(operands=[t.value], result_types=[self.typed(shape)]))
        return _Labelled(op.results[0], labels)

    def permute(self, t: _Labelled, perm: list[int]) -> _Labelled:
        """`t` with axis `perm[i]` as its axis i."""
        if perm == list(range(len(perm))):
            return t
        shape = [t.shape[p] for p in perm]
        op = _insert(self.rewriter, _compute(d.TransposeOp, [t.value], self.typed(shape), {"perm": _ints(perm)}))
        return _Labelled(op.results[0], [t.labels[p] for p in perm])

    def transpose(self, t: _Labelled, order: list[str]) -> _Labelled:
        """`t` with its axes in the order of `order` (t's distinct labels, permuted)."""
        return self.permute(t, [t.labels.index(label) for label in order])

    def sum_out(self, t: _Labelled, labels: list[str]) -> _Labelled:
        """`t` summed over the axes of `labels` (dropped)."""
        if not labels:
            return t
        axes = [t.labels.index(label) for label in labels]
        keep = [i for i in range(len(t.labels)) if i not in axes]
        shape = [t.shape[i] for i in keep]
        props = {"fn": StringAttr("sum"), "axes": _ints(axes), "keepdims": IntegerAttr(0, i64)}
        op = _insert(self.rewriter, _compute(d.ReduceOp, [t.value], self.typed(shape), props))
        return _Labelled(op.results[0], [t.labels[i] for i in keep])

    def diagonal(self, t: _Labelled) -> _Labelled:
        """`t` with every label that repeats within it taken once, along the
        diagonal: the two axes moved last, flattened, and gathered at
        k * (n + 1)."""
        while len(set(t.labels)) != len(t.labels):
            label = next(lab for lab in t.labels if t.labels.count(lab) > 1)
            first = t.labels.index(label)
            second = t.labels.index(label, first + 1)
            rest = [i for i in range(len(t.labels)) if i not in (first, second)]
            moved = self.permute(t, rest + [first, second])
            n = moved.shape[-1]
            outer = moved.shape[:-2]
            flat = self.view(moved, outer + [n * n], moved.labels[:-2] + ["#flat"])
            index = _insert(self.rewriter, weight_from_array(
                "einsum_diagonal", np.arange(n, dtype=np.int64) * (n + 1), TensorType(i64, [n])))
            op = _insert(self.rewriter, _compute(d.GatherOp, [flat.value, index.results[0]], self.typed(outer + [n]),
                                                 {"axis": IntegerAttr(len(outer), i64)}))
            t = _Labelled(op.results[0], moved.labels[:-2] + [label])
        return t

    def contract(self, a: _Labelled, b: _Labelled, keep: set[str]) -> _Labelled:
        """a * b summed over their shared labels that `keep` does not name:
        a batched matmul [batch, M, K] @ [batch, K, N]."""
        shared = [label for label in a.labels if label in b.labels]
        batch = [label for label in shared if label in keep]
        inner = [label for label in shared if label not in keep]
        # a contracted label of size 1 on one side broadcasts: sum the other side first
        for label in list(inner):
            size_a, size_b = a.shape[a.labels.index(label)], b.shape[b.labels.index(label)]
            if size_a != size_b:
                big, small = (a, b) if size_a > size_b else (b, a)
                summed = self.sum_out(big, [label])
                squeezed = self.view(small, [s for s, lab in zip(small.shape, small.labels) if lab != label],
                                     [lab for lab in small.labels if lab != label])
                a, b = (summed, squeezed) if big is a else (squeezed, summed)
                inner.remove(label)
        a_only = [label for label in a.labels if label not in b.labels]
        b_only = [label for label in b.labels if label not in a.labels]
        a = self.transpose(a, batch + a_only + inner)
        b = self.transpose(b, batch + inner + b_only)
        size = lambda t, labels: math.prod(t.shape[t.labels.index(lab)] for lab in labels)  # noqa: E731
        batch_a = [a.shape[a.labels.index(lab)] for lab in batch]
        batch_b = [b.shape[b.labels.index(lab)] for lab in batch]
        m, k, n = size(a, a_only), size(a, inner), size(b, b_only)
        a3 = self.view(a, batch_a + [m, k], batch + ["#m", "#k"])
        b3 = self.view(b, batch_b + [k, n], batch + ["#k", "#n"])
        batch_out = [max(x, y) for x, y in zip(batch_a, batch_b, strict=True)]
        op = _insert(self.rewriter, _compute(d.MatMulOp, [a3.value, b3.value], self.typed(batch_out + [m, n]), {}))
        product = _Labelled(op.results[0], batch + ["#m", "#n"])
        shape = batch_out + [a.shape[a.labels.index(lab)] for lab in a_only] + [b.shape[b.labels.index(lab)] for lab in b_only]
        return self.view(product, shape, batch + a_only + b_only)


def lower_einsum(op: om.EinsumOp, rewriter: PatternRewriter) -> Operation | list[SSAValue]:
    """einsum(x1, ..., xn) => per operand: diagonals (gather), labels no one
    else needs summed out (reduce); then left to right, one batched matmul
    per pair over their shared labels; finally a transpose into the output's
    order (and an expand where a broadcast dimension of size 1 remains)."""
    spec = om.parse_einsum(op.str_attr("equation"), [ob.shape_of(v) for v in op.Inputs])
    builder = _EinsumBuilder(rewriter, op.Output.type.element_type)
    output = list(spec.output)
    terms = [builder.diagonal(_Labelled(v, list(labels))) for v, labels in zip(op.Inputs, spec.inputs, strict=True)]
    for i, t in enumerate(terms):
        elsewhere = {lab for j, other in enumerate(terms) if j != i for lab in other.labels} | set(output)
        terms[i] = builder.sum_out(t, [lab for lab in t.labels if lab not in elsewhere])
    acc = terms[0]
    for i in range(1, len(terms)):
        keep = set(output) | {lab for later in terms[i + 1:] for lab in later.labels}
        acc = builder.contract(acc, terms[i], keep)
    acc = builder.sum_out(acc, [lab for lab in acc.labels if lab not in output])
    acc = builder.transpose(acc, output)
    want = list(spec.output_shape())
    if acc.shape != want:
        expanded = _insert(rewriter, _compute(d.ExpandOp, [acc.value], op.Output.type, {}))
        return expanded
    if acc.value in op.Inputs:
        return _insert(rewriter, _compute(d.CopyOp, [acc.value], op.Output.type, {}))
    return [acc.value]


RULES: dict[type, Callable[..., object]] = {
    ot.ConstantOp: lower_constant, ot.ConstantOfShapeOp: lower_constant_of_shape,
    on.ConvOp: lower_conv, on.ConvTransposeOp: lower_conv_transpose, ob.PoolOp: lower_pool,
    ob.GlobalPoolOp: lower_global_pool, om.GemmOp: lower_gemm, om.MatMulOp: lower_matmul,
    om.GeluOp: lower_gelu, om.ClipOp: lower_clip, om.SumOp: lower_sum, om.WhereOp: lower_where,
    on.BatchNormalizationOp: lower_batch_norm, on.LayerNormalizationOp: lower_layer_norm,
    on.LRNOp: lower_lrn, on.SoftmaxLikeOp: lower_softmax, on.PReluOp: lower_prelu,
    om.ArgExtremeOp: lower_arg_extreme, om.IsInfOp: lower_is_inf, om.CumSumOp: lower_cum_sum,
    om.TopKOp: lower_top_k, ot.ScatterNDOp: lower_scatter_nd, ot.TriluOp: lower_trilu, ot.SizeOp: lower_size,
    om.EinsumOp: lower_einsum, ot.BlockRearrangeOp: lower_block_rearrange,
    on.InstanceNormalizationOp: lower_instance_norm, ot.ScatterElementsOp: lower_scatter_elements, ot.TransposeOp: lower_transpose, ot.ConcatOp: lower_concat,
    ot.SplitOp: lower_split, ot.SliceOp: lower_slice, ot.GatherOp: lower_gather,
    ot.GatherElementsOp: lower_gather, ot.GatherNDOp: lower_gather, ot.ExpandOp: lower_expand,
    ot.TileOp: lower_tile, ot.PadOp: lower_pad, ot.ResizeOp: lower_resize, ot.CastOp: lower_cast,
    ot.RangeOp: lower_range, ot.ShapeOp: lower_shape,
}


@dataclass(frozen=True)
class ConvertOnnxToDnnPass(ModulePass):
    """Lower every onnx op to tensor-form dnn ops (see the module docstring)."""

    name = "convert-onnx-to-dnn"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "onnx")
        PatternRewriteWalker(LowerOnnxOp(), apply_recursively=False).rewrite_module(op)
        remaining = [o for o in op.walk() if o.name.startswith("onnx.")]
        if remaining:
            raise PassFailedException(f"convert-onnx-to-dnn: {remaining[0].name} was not lowered")
        # Drop what nothing reads: folded BN statistics, nodes the model
        # computes but never uses (a dead view would otherwise outlive the
        # buffer it views). Tensor-form dnn ops have no side effects
        # (KernelEffects), so xDSL's dead-code elimination may remove them.
        dce(op)

"""`dnn-fuse`: layer fusion on tensor-form dnn, written as a table of rules.

Fusion merges a producer into its consumer so the tensor between them is
never stored and one kernel runs instead of two (Occamy's second step). Each
rule is data that reads like its one-line statement, not a graph walk:

    # relu(conv(x))  =>  conv{activation=relu}(x)
    Rule("conv-activation",
         match=op(d.UnaryOp, "act", fn=ACTIVATION, x=op(CONV, "conv", activation=None)),
         produce=with_activation("conv")),

`match` is an expression over dnn op classes, read from the root (the op
that is replaced, the last one) back to its producers; `where` lists named
extra conditions; `produce` builds the op that replaces the root. The
pattern language (`op`, `var`, `const`, `Rule`, `Match`) is
pyocc/rewrites/fusion/language.py: a rule is checked against the op
definitions when it is built, so a field the op does not have is an error
naming the rule, not a silent "absent". One small engine
(pyocc/rewrites/fusion/engine.py, `RulePattern`) turns every rule into an
xDSL `RewritePattern`; the pass applies them greedily, in table order, until
none matches; composite rules (`stage=0`: GELU, LayerNorm, attention) run to
completion before the rest. This file is the table, its named conditions
and its produce functions.

Every rule also gets the condition fusion always needs: each matched op but
the root is read only inside the match (no other reader, not a graph
output), so the intermediate disappears and nothing else sees a change; and
the replacement never reads a tensor the match removes. The fused op takes
the root's place, so the inputs of the fused-away producers live until
there; in the models we compile a producer sits right before its consumer,
so no lifetime grows and the peak cannot rise (tests/rewrites/test_dnn_fuse.py
checks it with the liveness analysis on every light model). Kernel scratch
(preact_conv's pre-activated input, like conv's im2col columns) is not a
buffer of the plan.

Adding a rule takes three steps:
  1. write its statement as a one-line comment (`f(g(x)) => h(x)`);
  2. add `Rule(name, match=..., where=..., produce=...)` to RULES, before any
     more general rule it must win over; `produce` is usually `m.rebuild(...)`
     (the matched op with changed operands/properties) or `m.build(...)`;
  3. add a positive case and a `<case>_not_fused` case to
     filecheck/rewrites/dnn_fuse.mlir.
A rule whose fused op needs a new kernel ability also extends the op in
pyocc/dialects/dnn/ops.py and its kernel in pyocc/runtime/kernels/.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import AnyFloat, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker, RewritePattern
from xdsl.transforms.dead_code_elimination import dce
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.dialects.dnn import ops as d
from pyocc.rewrites.fusion.engine import compile_rules
from pyocc.rewrites.fusion.language import Condition, Match, OpPattern, Rule, const, op, prop_value, var

# ---------------------------------------------------------------------------
# Conditions (named, so a rule lists what it needs)
# ---------------------------------------------------------------------------


def _is_weight(value: SSAValue | None) -> bool:
    return value is None or isinstance(value.owner, d.WeightOp)


def conv_weights_constant(m: Match) -> bool:
    """The conv's weights and bias are constants (so they can be folded)."""
    conv = m["conv"]
    return _is_weight(conv.w) and _is_weight(conv.bias)


def unshuffled(m: Match) -> bool:
    """The conv stores its channels in order (no folded channel shuffle), so
    a per-channel constant or a residual after it lines up with its filters."""
    return prop_value(m["conv"], "shuffle") in (None, 1)


def channel_shuffle(m: Match) -> bool:
    """view(transpose(view(conv))) is a channel shuffle of the conv's result:
    the first view splits its channels M into (s, M/s) and keeps every other
    axis, the transpose swaps those two axes only, and the last view merges
    them back into the conv's shape."""
    conv_shape = list(m["conv"].results[0].type.get_shape())
    split = list(m["split"].result.type.get_shape())
    rank = len(split)
    if len(conv_shape) < 3 or rank != len(conv_shape) + 1 or split[:1] + split[3:] != conv_shape[:1] + conv_shape[2:]:
        return False
    perm = prop_value(m["transpose"], "perm")
    return (split[1] * split[2] == conv_shape[1] and split[1] > 1 and perm == (0, 2, 1, *range(3, rank))
            and list(m.root.results[0].type.get_shape()) == conv_shape)


def channel_vector(m: Match, name: str, target: str, axis: int = 1) -> np.ndarray | None:
    """The constant `name` as one float64 value per channel (`axis`) of
    `target`'s result, or None if it varies along another axis or would
    grow the result by broadcasting."""
    shape = list(m[target].results[0].type.get_shape())
    array = m.array(name)
    if array.ndim > len(shape):
        return None
    padded = [1] * (len(shape) - array.ndim) + list(array.shape)
    if any(n != 1 for i, n in enumerate(padded) if i != axis) or padded[axis] not in (1, shape[axis]):
        return None
    return np.broadcast_to(array.astype(np.float64).reshape(-1), (shape[axis],)).copy()


def affine_vector(m: Match, name: str, length: int) -> np.ndarray:
    """A channel_affine scale or shift (one value, or one per channel) as a
    float64 vector of `length`."""
    return np.broadcast_to(m.array(name).astype(np.float64).reshape(-1), (length,)).copy()


def per_channel(name: str, target: str) -> Condition:
    """Condition: constant `name` holds one value per channel of `target`."""

    def holds(m: Match) -> bool:
        return channel_vector(m, name, target) is not None

    holds.__name__ = f"per_channel({name}, {target})"
    return holds


def same_shape(name: str, target: str) -> Condition:
    """Condition: value `name` has the type of `target`'s result."""

    def holds(m: Match) -> bool:
        return m[name].type == m[target].results[0].type

    holds.__name__ = f"same_shape({name}, {target})"
    return holds


def matrices(m: Match) -> bool:
    """matmul of two matrices whose add only broadcasts a bias over rows."""
    a, b, c = m["a"].type.get_shape(), m["b"].type.get_shape(), m["c"].type.get_shape()
    out = tuple(m.root.results[0].type.get_shape())
    product = m["mm"] if "mm" in m.ops else m["gemm"]
    if len(a) != 2 or len(b) != 2 or len(c) > 2 or tuple(product.results[0].type.get_shape()) != out:
        return False
    try:
        return tuple(np.broadcast_shapes(tuple(c), out)) == out
    except ValueError:
        return False


def rows_times_matrix(m: Match) -> bool:
    """A batch of rows (rank >= 3) times a matrix, plus a bias over the last
    axis: a Gemm on the rows flattened to one matrix."""
    a, b, c = m["a"].type.get_shape(), m["b"].type.get_shape(), m["c"].type.get_shape()
    out = list(m.root.results[0].type.get_shape())
    return (len(a) >= 3 and len(b) == 2 and list(m["mm"].results[0].type.get_shape()) == out
            and math.prod(c) == out[-1] and (len(c) == 0 or c[-1] == out[-1]))


def floating(m: Match) -> bool:
    """The fused result is a float tensor (activations are float functions)."""
    return isinstance(m.root.results[0].type.element_type, AnyFloat)


def channel_vectors(*names: str) -> Condition:
    """Condition: each named value is a vector of the input's channels."""

    def holds(m: Match) -> bool:
        channels = m["x"].type.get_shape()[1]
        return all(list(m[n].type.get_shape()) == [channels] for n in names)

    holds.__name__ = f"channel_vectors({', '.join(names)})"
    return holds


def last_axis_norm(m: Match) -> bool:
    """Both means reduce over the last axis only, keeping it; scale and bias
    vary along that axis only."""
    rank = len(m["x"].type.get_shape())
    for mean in ("mean", "var"):
        axes = prop_value(m[mean], "axes")
        if axes is None or len(axes) != 1 or axes[0] % rank != rank - 1 or prop_value(m[mean], "keepdims") == 0:
            return False
    width = m["x"].type.get_shape()[-1]
    return all(list(m[n].type.get_shape()) in ([width], [1] * (rank - 1) + [width]) for n in ("scale", "bias"))


# ---------------------------------------------------------------------------
# Produce functions
# ---------------------------------------------------------------------------


def _weight_or_zeros(m: Match, value: SSAValue | None, length: int) -> np.ndarray:
    return np.zeros(length) if value is None else m.array(value).astype(np.float64).reshape(-1)


def _folded_conv(m: Match, scale: np.ndarray, shift: np.ndarray, **props: Any) -> d.DnnComputeOp:
    """`conv` with out = conv * scale[c] + shift[c] folded into its weights."""
    conv = m["conv"]
    w = m.array(conv.w).astype(np.float64)
    bias = _weight_or_zeros(m, conv.bias, w.shape[0])
    new_w = m.weight(w * scale.reshape((-1,) + (1,) * (w.ndim - 1)), conv.w.type, "w")
    new_b = m.weight(bias * scale + shift, conv.w.type, "b")
    return m.rebuild("conv", {"w": new_w, "bias": new_b}, **props)


def fold_affine_into_conv(m: Match) -> Operation:
    """produce: the conv with the affine folded into w and bias (and its activation)."""
    affine, channels = m["affine"], m["conv"].results[0].type.get_shape()[1]
    return _folded_conv(m, affine_vector(m, "s", channels), affine_vector(m, "t", channels),
                        activation=affine.activation, alpha=affine.alpha, beta=affine.beta)


def fold_scale_into_conv(m: Match) -> Operation:
    """produce: the conv with w and bias scaled per output channel."""
    c = channel_vector(m, "c", "conv")
    return _folded_conv(m, c, np.zeros_like(c))


def fold_shift_into_conv(m: Match) -> Operation:
    """produce: the conv with the constant added to its bias."""
    c = channel_vector(m, "c", "conv")
    return _folded_conv(m, np.ones_like(c), c)


def fold_scale_into_affine(m: Match) -> Operation:
    """produce: the affine with scale and shift multiplied by the constant."""
    c = channel_vector(m, "c", "affine")
    s, t = affine_vector(m, "s", len(c)), affine_vector(m, "t", len(c))
    like = m["s"].type
    return m.rebuild("affine", {"scale": m.weight(s * c, like, "scale"), "shift": m.weight(t * c, like, "shift")})


def fold_shift_into_affine(m: Match) -> Operation:
    """produce: the affine with the constant added to its shift."""
    c = channel_vector(m, "c", "affine")
    t = affine_vector(m, "t", len(c))
    return m.rebuild("affine", {"shift": m.weight(t + c, m["t"].type, "shift")})


def with_activation(target: str, alpha: str = "alpha", beta: str = "beta") -> Callable[[Match], Operation]:
    """produce: `target` rebuilt with the matched `act` op's function as its
    fused activation (its alpha/beta as the target's `alpha`/`beta` fields)."""

    def produce(m: Match) -> Operation:
        act = m["act"]
        return m.rebuild(target, activation=act.fn, **{alpha: act.alpha, beta: act.beta})

    return produce


def with_residual(m: Match) -> Operation:
    """produce: the conv adding `r` to its result."""
    return m.rebuild("conv", {"residual": m["r"]})


def matmul_to_gemm(m: Match) -> Operation:
    """produce: gemm(a, b, c)."""
    return m.build(d.GemmOp, {"a": m["a"], "b": m["b"], "c": m["c"]}, {})


def rows_to_gemm(m: Match) -> Operation:
    """view(gemm(view(a, rows x k), b, view(c, n)), out shape)."""
    a, out_type = m["a"], m.root.results[0].type
    width = out_type.get_shape()[-1]
    rows = math.prod(a.type.get_shape()[:-1])
    bias = m["c"]
    if list(bias.type.get_shape()) != [width]:
        is_weight = isinstance(bias.owner, d.WeightOp)
        bias = m.weight(m.array(bias).reshape(width), bias.type, "bias") if is_weight else m.view(bias, [width])
    gemm = m.build(d.GemmOp, {"a": m.view(a, [rows, a.type.get_shape()[-1]]), "b": m["b"], "c": bias}, {},
                   result_type=TensorType(out_type.element_type, [rows, width]))
    m.new_ops.append(gemm)
    return d.ViewOp.create(operands=[gemm.results[0]], result_types=[out_type])


def gemm_with_bias(m: Match) -> Operation:
    """produce: the gemm with `c` as its bias (beta 1)."""
    return m.rebuild("gemm", {"c": m["c"]}, beta=1.0)


def shuffled_conv(m: Match) -> Operation:
    """produce: the conv storing its channels shuffled in (split[1]) groups."""
    return m.rebuild("conv", shuffle=m["split"].result.type.get_shape()[1])


def preact_conv(m: Match) -> Operation:
    """produce: preact_conv(x, s, t, w, bias, residual) with the conv's properties."""
    conv, pre = m["conv"], m["pre"]
    operands = {f: getattr(conv, f) for f in ("w", "bias", "residual")}
    operands.update(x=m["x"], pre_scale=m["s"], pre_shift=m["t"])
    return m.build(d.PreActConvOp, operands, {**conv.kernel_attributes(), "pre_activation": pre.activation})


def gelu_of(approximate: str) -> Callable[[Match], Operation]:
    """produce: unary{fn=gelu, approximate}(x)."""

    def produce(m: Match) -> Operation:
        return m.build(d.UnaryOp, {"x": m["x"]}, {"fn": "gelu", "approximate": approximate})

    return produce


def last_axis_softmax(m: Match) -> bool:
    """The softmax runs along the last axis, the scale is one number and the
    mask (if any) does not grow the scores by broadcasting."""
    scores = m["product"].results[0].type
    rank = len(scores.get_shape())
    axis = prop_value(m.root, "axis")
    if (-1 if axis is None else axis) % rank != rank - 1 or math.prod(m["c"].type.get_shape()) != 1:
        return False
    if "mask" not in m.values:
        return True
    try:
        return tuple(np.broadcast_shapes(tuple(m["mask"].type.get_shape()), tuple(scores.get_shape()))) == tuple(
            scores.get_shape())
    except ValueError:
        return False


def attention_softmax(m: Match) -> Operation:
    """produce: attention_softmax{scale}(a, b, mask), a Div turned into its reciprocal scale."""
    c = float(m.array("c").reshape(-1)[0])
    scale = c if m["scaled"].fn.data == "mul" else 1.0 / c
    return m.build(d.AttentionSoftmaxOp, {"a": m["a"], "b": m["b"], "mask": m.values.get("mask")}, {"scale": scale})


def layer_norm(m: Match) -> Operation:
    """produce: layer_norm(x, scale, bias) over the last axis with the matched epsilon."""
    width = m["x"].type.get_shape()[-1]
    eps = float(m.array("eps").reshape(-1)[0])
    scale = m.weight(m.array("scale").reshape(width), m["scale"].type, "scale")
    bias = m.weight(m.array("bias").reshape(width), m["bias"].type, "bias")
    return m.build(d.LayerNormOp, {"x": m["x"], "scale": scale, "bias": bias}, {"axis": -1, "epsilon": eps})


# ---------------------------------------------------------------------------
# The rule table
# ---------------------------------------------------------------------------

CONV = (d.ConvOp, d.PreActConvOp)
ACTIVATION = d.FUSED_ACTIVATIONS
CHANNEL_AXIS = frozenset({None, 1})


def plain_conv() -> OpPattern:
    """A conv whose result is still the bare convolution plus bias."""
    return op(CONV, "conv", activation=None, residual=None)


def activation(x: OpPattern) -> OpPattern:
    """A fusable activation of `x`."""
    return op(d.UnaryOp, "act", fn=ACTIVATION, x=x)


def affine(**fields: Any) -> OpPattern:
    """A per-channel affine along axis 1 with constant scale and shift."""
    return op(d.ChannelAffineOp, "affine", axis=CHANNEL_AXIS, scale=const("s"), shift=const("t"), **fields)


# The Erf form of GELU: (x * (erf(x / sqrt 2) + 1)) * 0.5, as exporters write it.
_ERF_GATE = op(d.BinaryOp, "one_plus", fn="add", b=const("one", approx=1.0),
               a=op(d.UnaryOp, "erf", fn="erf",
                    x=op(d.BinaryOp, "scaled", fn="div", a=var("x"), b=const("sqrt2", approx=math.sqrt(2.0)))))
# The tanh form of GELU: (x * 0.5) * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
_TANH_GELU = op(
    d.BinaryOp, "gated", fn="mul", a=op(d.BinaryOp, "half", fn="mul", a=var("x"), b=const("half", approx=0.5)),
    b=op(d.BinaryOp, "one_plus", fn="add", b=const("one", approx=1.0),
         a=op(d.UnaryOp, "tanh", fn="tanh",
              x=op(d.BinaryOp, "inner", fn="mul", b=const("k", approx=math.sqrt(2.0 / math.pi)),
                   a=op(d.BinaryOp, "cubic", fn="add", a=var("x"),
                        b=op(d.BinaryOp, "cube_scaled", fn="mul", b=const("c", approx=0.044715),
                             a=op(d.BinaryOp, "cube", fn="pow", a=var("x"), b=const("three", approx=3.0))))))))
# The decomposed LayerNormalization: d = x - mean(x); d / sqrt(mean(d^2) + eps) * scale + bias.
_CENTRED = op(d.BinaryOp, "centred", fn="sub", a=var("x"), b=op(d.ReduceOp, "mean", fn="mean", x=var("x")))
_LAYER_NORM = op(
    d.BinaryOp, "shifted", fn="add", b=const("bias"),
    a=op(d.BinaryOp, "scaled", fn="mul", b=const("scale"),
         a=op(d.BinaryOp, "normed", fn="div", a=_CENTRED,
              b=op(d.UnaryOp, "std", fn="sqrt",
                   x=op(d.BinaryOp, "plus_eps", fn="add", b=const("eps"),
                        a=op(d.ReduceOp, "var", fn="mean",
                             x=op(d.BinaryOp, "square", fn="pow", a=_CENTRED, b=const("two", approx=2.0))))))))

# scale * (a @ b), with the scale written as a Mul or a Div by a constant
_SCALED_SCORES = op(d.BinaryOp, "scaled", fn=frozenset({"mul", "div"}), a=op(d.MatMulOp, "product", a=var("a"), b=var("b")),
                    b=const("c"))

RULES: tuple[Rule, ...] = (
    # channel_affine{act}(conv(x), s, t)  =>  conv{act}(x, w * s, b * s + t)   (folded BatchNormalization)
    Rule("fold-affine-into-conv",
         match=affine(x=op(CONV, "conv", activation=None, residual=None)),
         where=(conv_weights_constant, unshuffled), produce=fold_affine_into_conv),
    # mul(conv(x), c)  =>  conv(x, w * c, b * c)   (c one constant per output channel)
    Rule("fold-mul-into-conv",
         match=op(d.BinaryOp, "mul", fn="mul", a=plain_conv(), b=const("c")),
         where=(conv_weights_constant, unshuffled, per_channel("c", "conv")), produce=fold_scale_into_conv),
    # add(conv(x), c)  =>  conv(x, w, b + c)   (c one constant per output channel)
    Rule("fold-add-into-conv",
         match=op(d.BinaryOp, "add", fn="add", a=plain_conv(), b=const("c")),
         where=(conv_weights_constant, unshuffled, per_channel("c", "conv")), produce=fold_shift_into_conv),
    # mul(channel_affine(x, s, t), c)  =>  channel_affine(x, s * c, t * c)
    Rule("fold-mul-into-affine",
         match=op(d.BinaryOp, "mul", fn="mul", a=affine(activation=None, x=var("x")), b=const("c")),
         where=(per_channel("c", "affine"),), produce=fold_scale_into_affine),
    # add(channel_affine(x, s, t), c)  =>  channel_affine(x, s, t + c)
    Rule("fold-add-into-affine",
         match=op(d.BinaryOp, "add", fn="add", a=affine(activation=None, x=var("x")), b=const("c")),
         where=(per_channel("c", "affine"),), produce=fold_shift_into_affine),
    # add(conv(x), r)  =>  conv{residual=r}(x)
    Rule("conv-residual",
         match=op(d.BinaryOp, "add", fn="add", a=plain_conv(), b=var("r")),
         where=(same_shape("r", "conv"), unshuffled), produce=with_residual),
    # act(conv(x))  =>  conv{activation=act}(x)
    Rule("conv-activation", match=activation(op(CONV, "conv", activation=None)), produce=with_activation("conv")),
    # view(transpose{perm=0,2,1,...}(view(conv(x), N x s x M/s x ...)))  =>  conv{shuffle=s}(x)
    #   (ShuffleNet's channel shuffle, stored by the conv as it writes; its kernel is host-only)
    Rule("conv-channel-shuffle",
         match=op(d.ViewOp, "merged", source=op(d.TransposeOp, "transpose", x=op(
             d.ViewOp, "split", source=op(d.ConvOp, "conv", residual=None, shuffle=None)))),
         where=(channel_shuffle,), produce=shuffled_conv, targets=frozenset({"host"})),
    # act(binary(a, b))  =>  binary{activation=act}(a, b)   (add, sub, mul, div, max, min)
    Rule("binary-activation",
         match=activation(op(d.BinaryOp, "binary", fn=d.BinaryOp.ARITHMETIC, activation=None)),
         where=(floating,), produce=with_activation("binary")),
    # act(channel_affine(x, s, t))  =>  channel_affine{activation=act}(x, s, t)
    Rule("affine-activation", match=activation(op(d.ChannelAffineOp, "affine", activation=None)),
         produce=with_activation("affine")),
    # add(matmul(a, b), c)  =>  gemm(a, b, c)   (a, b matrices; c broadcasts over rows)
    Rule("matmul-add-to-gemm",
         match=op(d.BinaryOp, "add", fn="add", a=op(d.MatMulOp, "mm", a=var("a"), b=var("b")), b=var("c")),
         where=(matrices,), produce=matmul_to_gemm),
    # add(matmul(a, b), c)  =>  view(gemm(view(a), b, c))   (a a batch of rows, c a bias over the last axis)
    Rule("rows-matmul-add-to-gemm",
         match=op(d.BinaryOp, "add", fn="add", a=op(d.MatMulOp, "mm", a=var("a"), b=var("b")), b=var("c")),
         where=(rows_times_matrix,), produce=rows_to_gemm),
    # add(gemm(a, b), c)  =>  gemm(a, b, c)
    Rule("gemm-bias",
         match=op(d.BinaryOp, "add", fn="add", a=op(d.GemmOp, "gemm", c=None, activation=None, a=var("a"), b=var("b")),
                  b=var("c")),
         where=(matrices,), produce=gemm_with_bias),
    # act(gemm(a, b, c))  =>  gemm{activation=act}(a, b, c)
    Rule("gemm-activation", match=activation(op(d.GemmOp, "gemm", activation=None)),
         produce=with_activation("gemm", "activation_alpha", "activation_beta")),
    # conv(relu(channel_affine(x, s, t)))  =>  preact_conv{pre_activation=relu}(x, s, t)   (DenseNet)
    Rule("preact-conv",
         match=op(d.ConvOp, "conv", shuffle=None, x=op(d.ChannelAffineOp, "pre", axis=CHANNEL_AXIS,
                                       activation=frozenset({None, "relu"}), x=var("x"), scale=const("s"),
                                       shift=const("t"))),
         where=(channel_vectors("s", "t"),), produce=preact_conv, targets=d.PreActConvOp.targets()),
    # (x * (erf(x / sqrt 2) + 1)) * 0.5  =>  gelu(x)
    Rule("gelu-erf",
         match=op(d.BinaryOp, "half", fn="mul", b=const("half", approx=0.5),
                  a=op(d.BinaryOp, "gated", fn="mul", a=var("x"), b=_ERF_GATE)),
         produce=gelu_of("none"), stage=0),
    # x * ((erf(x / sqrt 2) + 1) * 0.5)  =>  gelu(x)
    Rule("gelu-erf-halved-gate",
         match=op(d.BinaryOp, "gated", fn="mul", a=var("x"),
                  b=op(d.BinaryOp, "half", fn="mul", a=_ERF_GATE, b=const("half", approx=0.5))),
         produce=gelu_of("none"), stage=0),
    # (x * 0.5) * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))  =>  gelu{approximate=tanh}(x)
    Rule("gelu-tanh", match=_TANH_GELU, produce=gelu_of("tanh"), stage=0),
    # (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * scale + bias  =>  layer_norm(x, scale, bias)
    Rule("layer-norm", match=_LAYER_NORM, where=(last_axis_norm,), produce=layer_norm, stage=0),
    # softmax(scale * (a @ b) + mask)  =>  attention_softmax{scale}(a, b, mask)
    Rule("attention-softmax-masked",
         match=op(d.SoftmaxOp, "softmax", x=op(d.BinaryOp, "masked", fn="add", a=_SCALED_SCORES, b=var("mask"))),
         where=(last_axis_softmax,), produce=attention_softmax, stage=0,
         targets=d.AttentionSoftmaxOp.targets()),
    # softmax(scale * (a @ b))  =>  attention_softmax{scale}(a, b)
    Rule("attention-softmax", match=op(d.SoftmaxOp, "softmax", x=_SCALED_SCORES),
         where=(last_axis_softmax,), produce=attention_softmax, stage=0,
         targets=d.AttentionSoftmaxOp.targets()),
)


# ---------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------


def fusion_patterns(rules: Sequence[Rule] = RULES, stage: int | None = None,
                    target: str | None = None) -> list[RewritePattern]:
    """The rule table (or one stage of it, or the rules one target can run)
    compiled to rewrite patterns, in table order."""
    return compile_rules(rules, stage, target)


@dataclass(frozen=True)
class DnnFusePass(ModulePass):
    """Apply the fusion rules (module docstring) to tensor-form dnn."""

    name = "dnn-fuse"

    target: str = "host"
    """Apply only the rules whose fused ops this target runs (host, cuda)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Rewrite with every rule, stage by stage, until none matches; then
        drop what nothing reads any more."""
        require_form(op, self.name, "tensors")
        if self.target not in ("host", "cuda"):
            raise PassFailedException(f"dnn-fuse: unknown target '{self.target}' (expected host or cuda)")
        for stage in sorted({rule.stage for rule in RULES}):
            patterns = GreedyRewritePatternApplier(fusion_patterns(stage=stage, target=self.target))
            PatternRewriteWalker(patterns, apply_recursively=True).rewrite_module(op)
        dce(op)  # weights only the fused-away ops read (old conv weights, BN scales)


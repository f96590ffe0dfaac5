"""Shape inference with symbols: every tensor's shape as polynomials in a
model's symbolic dimensions (ONNX ``dim_param``), without probing.

``infer_symbolic_shapes(model, inputs)`` walks the graph once. A graph
input's ``dim_param`` declared with ``--dim`` is the symbol itself
(``Poly.symbol("sequence")``); every other dimension is an integer. Each op
maps its inputs' shapes to its outputs' shapes as sums and products of those
polynomials. Small integer tensors that hold shapes (the results of Shape,
Gather, Concat, Slice, Unsqueeze, Cast and arithmetic on them) carry their
*values* as polynomials too, so that a Reshape whose target is
``Concat(Gather(Shape(x), [0, 1]), [768])`` or a Slice that ends at
``Shape(ids)[1]`` gets an exact symbolic shape.

Comparisons a rule needs (a Slice end against its dimension, a broadcast of
two dimensions) are decided over the symbols' whole range. An op without a
rule, or a shape no polynomial describes (a Reshape's ``-1`` that does not
divide), is one ``PyoccError`` naming the node.

The result is a cross-check of, and an explanation for, the sizes that
pyocc.symbolic reads off probes: a buffer's fitted byte size is its
tensor's symbolic element count times the element size.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from pyocc.errors import PyoccError
from pyocc.frontend.symbols import SymbolicInputs
from pyocc.planning.symbolic import Poly

Shape = tuple[Poly, ...]

VALUE_LIMIT = 64
"""Integer tensors with at most this many elements carry their values (shapes, axes, indices)."""
RANGE_LIMIT = 4096
"""Comparisons are decided at every value of a range with at most this many points;
larger ranges are sampled at their ends and 64 values between (see `_range_points`)."""


@dataclass(frozen=True)
class SymbolicTensor:
    """A tensor's shape, and, for a small integer tensor, its values (flat,
    row-major) as polynomials; ``values`` is None when unknown."""

    shape: Shape
    elem_type: int
    values: tuple[Poly, ...] | None = None

    def concrete(self, values: Mapping[str, int]) -> tuple[int, ...]:
        """The shape at one value of every symbol."""
        return tuple(d.evaluate(values) for d in self.shape)


@dataclass(frozen=True)
class SymbolicShapes:
    """The result of `infer_symbolic_shapes`: every named tensor of the graph."""

    tensors: dict[str, SymbolicTensor]
    ranges: Mapping[str, tuple[int, int]]
    inputs: tuple[str, ...] = ()
    """The graph inputs (initializers excluded), in order."""
    outputs: tuple[str, ...] = ()
    """The graph outputs, in order."""

    def shape(self, name: str) -> Shape:
        """The shape of tensor `name` (KeyError when the graph has none)."""
        return self.tensors[name].shape

    def elements(self, name: str) -> Poly:
        """The element count of tensor `name` as a polynomial."""
        total = Poly.constant(1)
        for dim in self.tensors[name].shape:
            total = total * dim
        return total

    def bytes(self, name: str) -> Poly:
        """The byte size of tensor `name` as a polynomial."""
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(self.tensors[name].elem_type)).itemsize
        return self.elements(name) * Poly.constant(itemsize)

    def degrees(self) -> dict[str, int]:
        """Every symbol's highest power in any tensor's element count or
        known values (2 for a sequence that attention scores square, 1 for
        a batch): the degree a lowered program's integers are expected to have."""
        degrees = dict.fromkeys(self.ranges, 0)
        for name, tensor in self.tensors.items():
            for poly in (self.elements(name), *(tensor.values or ())):
                for monomial, _ in poly.terms:
                    for symbol, power in monomial:
                        degrees[symbol] = max(degrees.get(symbol, 0), power)
        return degrees

    def text(self, name: str) -> str:
        """``1x{sequence}x32xf32``-like rendering of a tensor's type, symbolic dims in braces."""
        tensor = self.tensors[name]
        dims = [str(d) if d.is_constant() else "{" + str(d) + "}" for d in tensor.shape]
        elem = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        return "x".join([*dims, _TYPE_NAMES.get(np.dtype(elem).name, np.dtype(elem).name)])


_TYPE_NAMES = {"float32": "f32", "float16": "f16", "float64": "f64", "int64": "i64", "int32": "i32",
               "bool": "i1", "int8": "i8", "uint8": "ui8"}


class _Context:
    """What a rule sees: the node, its input tensors, the symbols' ranges."""

    def __init__(self, node: onnx.NodeProto, inputs: list[SymbolicTensor | None],
                 ranges: Mapping[str, tuple[int, int]], what: str) -> None:
        self.node = node
        self.inputs = inputs
        self.ranges = ranges
        self.what = what
        self.attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def fail(self, reason: str) -> PyoccError:
        """The one-line error for this node."""
        return PyoccError(f"{self.what}: symbolic shape inference: {self.node.op_type} at node "
                          f"'{self.node.name or self.node.output[0]}' {reason}; fix the dimension with --shape")

    def input(self, i: int) -> SymbolicTensor:
        """Input `i` (an error when it is absent)."""
        if i >= len(self.inputs) or self.inputs[i] is None:
            raise self.fail(f"lacks input {i}")
        tensor = self.inputs[i]
        assert tensor is not None
        return tensor

    def optional(self, i: int) -> SymbolicTensor | None:
        """Input `i`, or None when the node omits it."""
        return self.inputs[i] if i < len(self.inputs) else None

    def values(self, i: int, what: str) -> tuple[Poly, ...]:
        """The values of input `i`, which must be known at compile time."""
        tensor = self.input(i)
        if tensor.values is None:
            raise self.fail(f"needs its {what} at compile time, and it is computed at run time")
        return tensor.values

    def constants(self, i: int, what: str) -> list[int]:
        """The values of input `i` as integers (no symbol allowed)."""
        values = self.values(i, what)
        if any(not v.is_constant() for v in values):
            raise self.fail(f"has a symbolic {what} ({', '.join(map(str, values))})")
        return [v.evaluate({}) for v in values]

    def compare(self, a: Poly, b: Poly) -> int:
        """0 when a == b at every value of the range, -1 when a <= b at every
        value (a < b somewhere), 1 when a >= b at every value (a > b
        somewhere); an error when the order changes inside the range."""
        difference = a - b
        if not difference.terms:
            return 0
        values = difference.evaluate_grid(_range_points(self.ranges))
        if np.all(values == 0):
            return 0
        if np.all(values <= 0):
            return -1
        if np.all(values >= 0):
            return 1
        raise self.fail(f"compares {a} with {b}, whose order changes inside the range")


def _range_points(ranges: Mapping[str, tuple[int, int]]) -> dict[str, np.ndarray]:
    """Every point of the ranges when there are at most `RANGE_LIMIT`;
    otherwise each symbol's ends and 64 values between, in every combination."""
    names = sorted(ranges)
    total = math.prod(high - low + 1 for low, high in ranges.values())
    if total <= RANGE_LIMIT:
        axes = [range(ranges[n][0], ranges[n][1] + 1) for n in names]
    else:
        axes = [sorted({*np.linspace(ranges[n][0], ranges[n][1], 66).round().astype(int).tolist()}) for n in names]
    combos = list(itertools.product(*axes))
    return {name: np.array([c[k] for c in combos], dtype=np.int64) for k, name in enumerate(names)}


def _int(value: int) -> Poly:
    return Poly.constant(int(value))


def _product(dims: Sequence[Poly]) -> Poly:
    total = Poly.constant(1)
    for dim in dims:
        total = total * dim
    return total


def _divide(a: Poly, b: Poly) -> Poly | None:
    """a / b when b is one term (c * a monomial) dividing every term of a; else None."""
    if len(b.terms) != 1:
        return None
    (monomial, coefficient), = b.terms
    powers = dict(monomial)
    result: dict[tuple[tuple[str, int], ...], int] = {}
    for term, c in a.terms:
        mine = dict(term)
        if c % coefficient or any(mine.get(n, 0) < p for n, p in powers.items()):
            return None
        rest = {n: mine.get(n, 0) - powers.get(n, 0) for n in mine}
        result[tuple(sorted((n, p) for n, p in rest.items() if p))] = c // coefficient
    return Poly.of(result)


def _axis(ctx: _Context, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ctx.fail(f"has axis {axis} outside rank {rank}")
    return axis % rank


def _broadcast(ctx: _Context, shapes: Sequence[Shape]) -> Shape:
    """numpy broadcasting of symbolic shapes (1 stretches; equal dims stay)."""
    rank = max(len(s) for s in shapes)
    result: list[Poly] = []
    for k in range(rank):
        dims = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        chosen = _int(1)
        for dim in dims:
            if dim == _int(1):
                continue
            if chosen == _int(1):
                chosen = dim
            elif ctx.compare(chosen, dim) != 0:
                raise ctx.fail(f"broadcasts {chosen} against {dim}")
        result.append(chosen)
    return tuple(result)


# ---------------------------------------------------------------------------
# Rules: op_type -> outputs
# ---------------------------------------------------------------------------

Rule = Callable[[_Context], list[SymbolicTensor]]


def _same(ctx: _Context) -> list[SymbolicTensor]:
    """Shape (and, for Identity/Cast, values) of input 0; Cast changes the type."""
    x = ctx.input(0)
    elem = int(ctx.attrs.get("to", x.elem_type))
    keep = x.values if ctx.node.op_type in ("Identity", "Cast") else None
    return [SymbolicTensor(x.shape, elem, keep)]


def _elementwise(ctx: _Context) -> list[SymbolicTensor]:
    """Broadcasting ops. On small tensors whose values are known, the
    arithmetic (Add/Sub/Mul/Div/Max/Min), comparisons, logic and Where on
    shapes compute the values too (see `_element_value`): an exporter writes
    ``Expand(x, Where(Equal(shape, -1), 1, shape))``, whose shape is
    known only through them."""
    present = [t for t in ctx.inputs if t is not None]
    shape = _broadcast(ctx, [t.shape for t in present])
    elem = present[-1].elem_type if ctx.node.op_type == "Where" else present[0].elem_type
    if ctx.node.op_type in _PREDICATES:
        elem = onnx.TensorProto.BOOL
    values = None
    op = ctx.node.op_type
    if op in _VALUE_OPS and all(t.values is not None for t in present) and math.prod(
            d.evaluate({}) if d.is_constant() else VALUE_LIMIT + 1 for d in shape) <= VALUE_LIMIT:
        concrete = tuple(d.evaluate({}) for d in shape)
        columns = [np.broadcast_to(np.array(t.values, dtype=object).reshape(
            tuple(d.evaluate({}) for d in t.shape)), concrete).reshape(-1) for t in present]
        out = [_element_value(ctx, op, list(args)) for args in zip(*columns, strict=True)]
        values = None if any(v is None for v in out) else tuple(v for v in out if v is not None)
    return [SymbolicTensor(shape, elem, values)]


_PREDICATES = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor")
_VALUE_OPS = ("Add", "Sub", "Mul", "Div", "Max", "Min", "Where", *_PREDICATES)
"""Elementwise ops whose values `_element_value` computes."""


def _element_value(ctx: _Context, op: str, args: list[Poly]) -> Poly | None:
    """One element of `op` on known values: a polynomial; a truth value as
    0 or 1 when it holds (or fails) at every value of the range; None when
    it depends on the value (the tensor's values are then unknown)."""
    if op in ("Add", "Sub", "Mul"):
        a, b = args
        return a + b if op == "Add" else a - b if op == "Sub" else a * b
    if op == "Div":
        if not np.issubdtype(helper.tensor_dtype_to_np_dtype(ctx.input(0).elem_type), np.integer):
            return None
        quotient = _divide(*args)
        if quotient is None:
            raise ctx.fail(f"divides {args[0]} by {args[1]}, which is no polynomial")
        return quotient
    if len(args) > 3 or (op != "Where" and len(args) == 3):
        return None  # variadic Max/Min of three or more: not needed for shapes
    if op in ("Not", "And", "Or", "Xor", "Where"):
        truths = [a.evaluate({}) != 0 if a.is_constant() else None for a in args[:len(args) if op != "Where" else 1]]
        if None in truths:
            return None
        if op == "Where":
            return args[1] if truths[0] else args[2]
        truth = {"Not": lambda: not truths[0], "And": lambda: all(truths), "Or": lambda: any(truths),
                 "Xor": lambda: truths[0] != truths[1]}[op]()
        return _int(int(truth))
    difference = (args[0] - args[1]).evaluate_grid(_range_points(ctx.ranges))
    holds = {"Equal": difference == 0, "Less": difference < 0, "Greater": difference > 0,
             "LessOrEqual": difference <= 0, "GreaterOrEqual": difference >= 0,
             "Max": difference >= 0, "Min": difference <= 0}[op]
    if op in ("Max", "Min"):
        return args[0] if np.all(holds) else args[1] if not np.any(holds) else None
    return _int(1) if np.all(holds) else _int(0) if not np.any(holds) else None


def _matmul(ctx: _Context) -> list[SymbolicTensor]:
    a, b = ctx.input(0), ctx.input(1)
    sa, sb = list(a.shape), list(b.shape)
    if len(sa) == 0 or len(sb) == 0:
        raise ctx.fail("has a scalar operand")
    squeeze_a, squeeze_b = len(sa) == 1, len(sb) == 1
    if squeeze_a:
        sa = [_int(1), *sa]
    if squeeze_b:
        sb = [*sb, _int(1)]
    if ctx.compare(sa[-1], sb[-2]) != 0:
        raise ctx.fail(f"multiplies a {sa[-1]}-wide operand by one of {sb[-2]} rows")
    batch = _broadcast(ctx, [tuple(sa[:-2]), tuple(sb[:-2])])
    out = [*batch, *([] if squeeze_a else [sa[-2]]), *([] if squeeze_b else [sb[-1]])]
    return [SymbolicTensor(tuple(out), a.elem_type)]


def _gemm(ctx: _Context) -> list[SymbolicTensor]:
    a, b = ctx.input(0), ctx.input(1)
    m = a.shape[1] if ctx.attrs.get("transA", 0) else a.shape[0]
    n = b.shape[0] if ctx.attrs.get("transB", 0) else b.shape[1]
    return [SymbolicTensor((m, n), a.elem_type)]


def _transpose(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    perm = ctx.attrs.get("perm", list(reversed(range(len(x.shape)))))
    return [SymbolicTensor(tuple(x.shape[p] for p in perm), x.elem_type)]


def _reshape(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    target = list(ctx.values(1, "target shape"))
    allow_zero = ctx.attrs.get("allowzero", 0)
    out: list[Poly | None] = []
    for k, dim in enumerate(target):
        if dim == _int(0) and not allow_zero:
            if k >= len(x.shape):
                raise ctx.fail(f"copies dimension {k} of a rank-{len(x.shape)} input")
            out.append(x.shape[k])
        elif dim == _int(-1):
            out.append(None)
        else:
            out.append(dim)
    known = [d for d in out if d is not None]
    if len(known) < len(out) - 1:
        raise ctx.fail("has more than one -1 in its target shape")
    total = _product(x.shape)
    if len(known) < len(out):
        rest = _divide(total, _product(known))
        if rest is None:
            raise ctx.fail(f"infers -1 as ({total}) / ({_product(known)}), which is no polynomial")
        out = [rest if d is None else d for d in out]
    elif ctx.compare(_product(known), total) != 0:
        raise ctx.fail(f"reshapes {total} elements into {_product(known)}")
    values = x.values
    return [SymbolicTensor(tuple(d for d in out if d is not None), x.elem_type, values)]


def _shape(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    rank = len(x.shape)
    start = ctx.attrs.get("start", 0)
    end = ctx.attrs.get("end", rank)
    start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
    dims = x.shape[start:end]
    return [SymbolicTensor((_int(len(dims)),), onnx.TensorProto.INT64, tuple(dims))]


def _gather(ctx: _Context) -> list[SymbolicTensor]:
    data, indices = ctx.input(0), ctx.input(1)
    axis = _axis(ctx, ctx.attrs.get("axis", 0), len(data.shape))
    shape = (*data.shape[:axis], *indices.shape, *data.shape[axis + 1:])
    values = None
    if data.values is not None and indices.values is not None and len(data.shape) == 1:
        length = data.shape[0].evaluate({})
        if all(i.is_constant() for i in indices.values):
            values = tuple(data.values[i.evaluate({}) % length] for i in indices.values)
    return [SymbolicTensor(shape, data.elem_type, values)]


def _concat(ctx: _Context) -> list[SymbolicTensor]:
    present = [t for t in ctx.inputs if t is not None]
    axis = _axis(ctx, ctx.attrs["axis"], len(present[0].shape))
    total = _int(0)
    for t in present:
        total = total + t.shape[axis]
    shape = (*present[0].shape[:axis], total, *present[0].shape[axis + 1:])
    values = None
    if len(shape) == 1 and all(t.values is not None for t in present):
        values = tuple(v for t in present for v in (t.values or ()))
    return [SymbolicTensor(shape, present[0].elem_type, values)]


def _axes(ctx: _Context) -> list[int] | None:
    """The `axes` of Squeeze/Unsqueeze/Reduce*: input 1 from opset 13 (18 for Reduce), else the attribute."""
    if "axes" in ctx.attrs:
        return list(ctx.attrs["axes"])
    if ctx.optional(1) is not None:
        return ctx.constants(1, "axes")
    return None


def _unsqueeze(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    axes = _axes(ctx)
    if axes is None:
        raise ctx.fail("has no axes")
    rank = len(x.shape) + len(axes)
    positions = sorted(a % rank for a in axes)
    dims = iter(x.shape)
    shape = tuple(_int(1) if k in positions else next(dims) for k in range(rank))
    return [SymbolicTensor(shape, x.elem_type, x.values)]


def _squeeze(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    axes = _axes(ctx)
    if axes is None:
        axes = [k for k, d in enumerate(x.shape) if d == _int(1)]
    positions = {a % len(x.shape) for a in axes}
    return [SymbolicTensor(tuple(d for k, d in enumerate(x.shape) if k not in positions), x.elem_type, x.values)]


def _slice(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    starts = list(ctx.values(1, "starts"))
    ends = list(ctx.values(2, "ends"))
    rank = len(x.shape)
    axes = ctx.constants(3, "axes") if ctx.optional(3) is not None else list(range(len(starts)))
    steps = ctx.constants(4, "steps") if ctx.optional(4) is not None else [1] * len(starts)
    shape = list(x.shape)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis = _axis(ctx, axis, rank)
        dim = x.shape[axis]
        if step != 1:
            raise ctx.fail(f"has step {step}; symbolic slices take step 1")
        low, high = (_clamp(ctx, v, dim) for v in (start, end))
        shape[axis] = high - low if ctx.compare(high, low) >= 0 else _int(0)
    values = None
    if x.values is not None and rank == 1 and all(d.is_constant() for d in shape):
        low = _clamp(ctx, starts[0], x.shape[0])
        if low.is_constant():
            values = x.values[low.evaluate({}):low.evaluate({}) + shape[0].evaluate({})]
    return [SymbolicTensor(tuple(shape), x.elem_type, values)]


def _clamp(ctx: _Context, value: Poly, dim: Poly) -> Poly:
    """A Slice bound (negative counts from the end) clamped to 0..dim over the whole range."""
    if ctx.compare(value, _int(0)) < 0:
        value = value + dim
    if ctx.compare(value, _int(0)) <= 0:
        return _int(0)
    return dim if ctx.compare(value, dim) >= 0 else value


def _expand(ctx: _Context) -> list[SymbolicTensor]:
    """Broadcast input 0 to the shape held by input 1."""
    x = ctx.input(0)
    target = ctx.values(1, "shape")
    return [SymbolicTensor(_broadcast(ctx, [x.shape, tuple(target)]), x.elem_type)]


def _range(ctx: _Context) -> list[SymbolicTensor]:
    """Range(start, limit, delta): max(ceil((limit - start) / delta), 0) elements."""
    start, limit = ctx.values(0, "start")[0], ctx.values(1, "limit")[0]
    delta = ctx.constants(2, "delta")[0]
    count = _divide(limit - start, _int(delta)) if delta else None
    if count is None:
        raise ctx.fail(f"has ({limit} - {start}) / {delta} elements, which is no polynomial")
    if ctx.compare(count, _int(0)) < 0:
        raise ctx.fail(f"has {count} elements, negative inside the range")
    return [SymbolicTensor((count,), ctx.input(0).elem_type)]


def _window(ctx: _Context) -> list[SymbolicTensor]:
    """Conv, MaxPool, AveragePool: N and C pass through (C from the weight
    for Conv); each spatial size must be an integer (the usual formula)."""
    x = ctx.input(0)
    spatial = x.shape[2:]
    if any(not d.is_constant() for d in spatial):
        raise ctx.fail("has a symbolic spatial size; symbols may be its batch only")
    sizes = [d.evaluate({}) for d in spatial]
    if ctx.node.op_type == "Conv":
        weight = ctx.input(1)
        channels = weight.shape[0]
        kernel = ctx.attrs.get("kernel_shape", [d.evaluate({}) for d in weight.shape[2:]])
    else:
        channels = x.shape[1]
        kernel = ctx.attrs["kernel_shape"]
    rank = len(sizes)
    strides = ctx.attrs.get("strides", [1] * rank)
    dilations = ctx.attrs.get("dilations", [1] * rank)
    pads = ctx.attrs.get("pads", [0] * (2 * rank))
    auto_pad = ctx.attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    ceil = ctx.attrs.get("ceil_mode", 0)
    out = []
    for k in range(rank):
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-sizes[k] // strides[k]))
            continue
        extent = sizes[k] + (0 if auto_pad == "VALID" else pads[k] + pads[k + rank]) \
            - dilations[k] * (kernel[k] - 1) - 1
        out.append((-(-extent // strides[k]) if ceil else extent // strides[k]) + 1)
    return [SymbolicTensor((x.shape[0], channels, *(_int(v) for v in out)), x.elem_type)]


def _global_pool(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    return [SymbolicTensor((*x.shape[:2], *(_int(1) for _ in x.shape[2:])), x.elem_type)]


def _flatten(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    axis = ctx.attrs.get("axis", 1) % (len(x.shape) + 1) if x.shape else 0
    return [SymbolicTensor((_product(x.shape[:axis]), _product(x.shape[axis:])), x.elem_type)]


def _layer_norm(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    return [SymbolicTensor(x.shape, x.elem_type)] + [None] * (len(ctx.node.output) - 1)  # type: ignore[list-item]


def _constant(ctx: _Context) -> list[SymbolicTensor]:
    if "value" not in ctx.attrs:
        raise ctx.fail("has a constant given other than by 'value'")
    value = next(a.t for a in ctx.node.attribute if a.name == "value")
    return [_from_array(numpy_helper.to_array(value))]


def _constant_of_shape(ctx: _Context) -> list[SymbolicTensor]:
    """A tensor of the shape held by input 0, filled with `value`; a small
    integer one carries its values (the exporters' ``ConstantOfShape([n], 1)``)."""
    shape = ctx.values(0, "shape")
    value = next((a.t for a in ctx.node.attribute if a.name == "value"), None)
    elem = value.data_type if value is not None else onnx.TensorProto.FLOAT
    values = None
    fill = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    if np.issubdtype(fill.dtype, np.integer) and all(d.is_constant() for d in shape):
        count = math.prod(d.evaluate({}) for d in shape)
        if count <= VALUE_LIMIT:
            values = (_int(int(fill[0])),) * count
    return [SymbolicTensor(tuple(shape), elem, values)]


def _same_shape(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    return [SymbolicTensor(x.shape, x.elem_type)]


def _reduce(ctx: _Context) -> list[SymbolicTensor]:
    x = ctx.input(0)
    axes = _axes(ctx)
    rank = len(x.shape)
    positions = set(range(rank)) if axes is None else {a % rank for a in axes}
    keep = ctx.attrs.get("keepdims", 1)
    shape = tuple(_int(1) if k in positions else d for k, d in enumerate(x.shape) if keep or k not in positions)
    return [SymbolicTensor(shape, x.elem_type)]


def _is_value(ctx: _Context) -> list[SymbolicTensor]:
    """IsNaN, IsInf: input 0's shape, booleans."""
    return [SymbolicTensor(ctx.input(0).shape, onnx.TensorProto.BOOL)]


def _gather_elements(ctx: _Context) -> list[SymbolicTensor]:
    """The indices' shape, the data's type."""
    return [SymbolicTensor(ctx.input(1).shape, ctx.input(0).elem_type)]


def _gather_nd(ctx: _Context) -> list[SymbolicTensor]:
    """GatherND: the batch dims, the indices' leading dims, then the data's
    dims after the `indices.shape[-1]` it indexes (a number known at compile time)."""
    data, indices = ctx.input(0), ctx.input(1)
    batch = int(ctx.attrs.get("batch_dims", 0))
    if not indices.shape or not indices.shape[-1].is_constant():
        raise ctx.fail("has indices whose last dimension is not a number")
    depth = indices.shape[-1].evaluate({})
    if batch + depth > len(data.shape):
        raise ctx.fail(f"indexes {depth} dimensions after {batch} batch dimensions of a rank-{len(data.shape)} input")
    return [SymbolicTensor((*data.shape[:batch], *indices.shape[batch:-1], *data.shape[batch + depth:]),
                           data.elem_type)]


def _split(ctx: _Context) -> list[SymbolicTensor]:
    """Split along `axis` into the sizes of input 1 (opset 13) or the
    attribute `split`, else into equal parts (one per output, or
    `num_outputs`, the last part smaller when they do not divide)."""
    x = ctx.input(0)
    axis = _axis(ctx, ctx.attrs.get("axis", 0), len(x.shape))
    dim = x.shape[axis]
    if "split" in ctx.attrs:
        sizes = [_int(v) for v in ctx.attrs["split"]]
    elif ctx.optional(1) is not None:
        sizes = list(ctx.values(1, "split sizes"))
    else:
        parts = int(ctx.attrs.get("num_outputs", len(ctx.node.output)))
        size = _divide(dim, _int(parts))
        if size is None:
            if not dim.is_constant():
                raise ctx.fail(f"splits {dim} into {parts} parts, which is no polynomial")
            whole = -(-dim.evaluate({}) // parts)
            sizes = [_int(min(whole, max(0, dim.evaluate({}) - k * whole))) for k in range(parts)]
        else:
            sizes = [size] * parts
    if ctx.compare(sum(sizes, _int(0)), dim) != 0:
        raise ctx.fail(f"splits {dim} into parts of {' + '.join(map(str, sizes))}")
    return [SymbolicTensor((*x.shape[:axis], size, *x.shape[axis + 1:]), x.elem_type) for size in sizes]


def _arg_reduce(ctx: _Context) -> list[SymbolicTensor]:
    """ArgMax, ArgMin: `axis` removed (kept as 1 with keepdims), int64 indices."""
    x = ctx.input(0)
    axis = _axis(ctx, ctx.attrs.get("axis", 0), len(x.shape))
    keep = ctx.attrs.get("keepdims", 1)
    shape = tuple(_int(1) if k == axis else d for k, d in enumerate(x.shape) if keep or k != axis)
    return [SymbolicTensor(shape, onnx.TensorProto.INT64)]


def _size(ctx: _Context) -> list[SymbolicTensor]:
    """Size: a scalar holding the element count."""
    return [SymbolicTensor((), onnx.TensorProto.INT64, (_product(ctx.input(0).shape),))]


def _tile(ctx: _Context) -> list[SymbolicTensor]:
    """Tile: each dimension times its repeat count (input 1)."""
    x = ctx.input(0)
    repeats = ctx.values(1, "repeats")
    if len(repeats) != len(x.shape):
        raise ctx.fail(f"repeats {len(repeats)} dimensions of a rank-{len(x.shape)} input")
    return [SymbolicTensor(tuple(d * r for d, r in zip(x.shape, repeats, strict=True)), x.elem_type)]


def _pad(ctx: _Context) -> list[SymbolicTensor]:
    """Pad: each dimension plus its two pads (input 1, or the attribute before opset 11; input 3 names the axes)."""
    x = ctx.input(0)
    rank = len(x.shape)
    pads = [_int(v) for v in ctx.attrs["pads"]] if "pads" in ctx.attrs else list(ctx.values(1, "pads"))
    axes = ctx.constants(3, "axes") if ctx.optional(3) is not None else list(range(rank))
    if len(pads) != 2 * len(axes):
        raise ctx.fail(f"has {len(pads)} pads for {len(axes)} axes")
    shape = list(x.shape)
    for k, axis in enumerate(axes):
        axis = _axis(ctx, axis, rank)
        shape[axis] = shape[axis] + pads[k] + pads[k + len(axes)]
    return [SymbolicTensor(tuple(shape), x.elem_type)]


_UNARY = ("Identity", "Cast", "Erf", "Tanh", "Sqrt", "Relu", "Exp", "Log", "Neg", "Sigmoid", "Gelu", "Abs",
          "Reciprocal", "Dropout", "Softsign", "Softplus", "Floor", "Ceil", "Round", "Sign", "Elu",
          "LeakyRelu", "HardSigmoid", "Clip", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
          "Asinh", "Acosh", "Atanh", "Celu", "Selu", "Mish", "HardSwish", "Shrink", "ThresholdedRelu",
          "InstanceNormalization", "LRN")
_BROADCAST = ("Add", "Sub", "Mul", "Div", "Pow", "Where", "Equal", "Less", "Greater", "LessOrEqual",
              "GreaterOrEqual", "Not", "And", "Or", "Xor", "Max", "Min", "Mod", "PRelu", "Sum", "Mean")

RULES: dict[str, Rule] = {
    **{op: _same for op in _UNARY},
    **{op: _elementwise for op in _BROADCAST},
    "Conv": _window, "MaxPool": _window, "AveragePool": _window, "GlobalAveragePool": _global_pool,
    "GlobalMaxPool": _global_pool, "Flatten": _flatten, "BatchNormalization": _layer_norm,
    "Expand": _expand, "Range": _range, "Trilu": _same_shape, "CumSum": _same_shape,
    "MatMul": _matmul, "Gemm": _gemm, "Transpose": _transpose, "Reshape": _reshape, "Shape": _shape,
    "Gather": _gather, "Concat": _concat, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Slice": _slice,
    "LayerNormalization": _layer_norm, "Softmax": _same_shape, "LogSoftmax": _same_shape,
    "Constant": _constant, "ConstantOfShape": _constant_of_shape, "ReduceMean": _reduce, "ReduceSum": _reduce,
    "ReduceMax": _reduce, "ReduceMin": _reduce, "ReduceProd": _reduce, "ReduceL1": _reduce, "ReduceL2": _reduce,
    "ReduceLogSum": _reduce, "ReduceLogSumExp": _reduce, "ReduceSumSquare": _reduce,
    "IsNaN": _is_value, "IsInf": _is_value, "GatherElements": _gather_elements, "GatherND": _gather_nd,
    "Split": _split,
    "ArgMax": _arg_reduce, "ArgMin": _arg_reduce, "Size": _size, "Tile": _tile, "Pad": _pad,
}
"""ONNX op_type -> its symbolic shape rule. These run on the ONNX graph
before import (the onnx dialect's types are static), so they are keyed by
ONNX op_type like the importer's OP_BY_TYPE."""


def _from_array(array: np.ndarray) -> SymbolicTensor:
    """A constant: its shape, and its values when it is a small integer tensor."""
    elem = helper.np_dtype_to_tensor_dtype(array.dtype)
    values = None
    if np.issubdtype(array.dtype, np.integer) and array.size <= VALUE_LIMIT:
        values = tuple(_int(v) for v in array.reshape(-1).tolist())
    return SymbolicTensor(tuple(_int(d) for d in array.shape), elem, values)


def infer_symbolic_shapes(model: onnx.ModelProto, inputs: SymbolicInputs,
                          shapes: Mapping[str, Sequence[int]] | None = None,
                          what: str = "the model") -> SymbolicShapes:
    """Every tensor's shape in `model` as polynomials in the symbols of
    `inputs` (see pyocc.frontend.symbols.symbolic_inputs); `shapes` fixes
    other graph inputs. PyoccError (one line, naming the node) for an op
    without a rule or a shape no polynomial describes."""
    shapes = dict(shapes or {})
    tensors: dict[str, SymbolicTensor] = {}
    for init in model.graph.initializer:
        tensors[init.name] = _from_array(numpy_helper.to_array(init))
    for inp in model.graph.input:
        if inp.name in tensors:
            continue
        ttype = inp.type.tensor_type
        if inp.name in inputs.shapes:
            dims = [Poly.symbol(d) if isinstance(d, str) else _int(d) for d in inputs.shapes[inp.name]]
        elif inp.name in shapes:
            dims = [_int(d) for d in shapes[inp.name]]
        else:
            dims = []
            for k, dim in enumerate(ttype.shape.dim):
                if not dim.HasField("dim_value") or dim.dim_value <= 0:
                    raise PyoccError(f"{what}: graph input '{inp.name}' has a dynamic dimension {k}; "
                                     f"declare it with --dim or fix it with --shape")
                dims.append(_int(dim.dim_value))
        tensors[inp.name] = SymbolicTensor(tuple(dims), ttype.elem_type)
    for node in model.graph.node:
        rule = RULES.get(node.op_type)
        ctx = _Context(node, [tensors.get(i) if i else None for i in node.input], inputs.ranges, what)
        if node.domain not in ("", "ai.onnx") or rule is None:
            raise ctx.fail(f"has no symbolic shape rule (rules: {len(RULES)} op types, see "
                           "pyocc.frontend.symbolic_shapes.RULES)")
        missing = [i for i in node.input if i and i not in tensors]
        if missing:
            raise ctx.fail(f"reads '{missing[0]}', which no node before it defines")
        for name, tensor in zip(node.output, rule(ctx), strict=False):
            if name and tensor is not None:
                tensors[name] = tensor
    initializers = {t.name for t in model.graph.initializer}
    return SymbolicShapes(tensors, dict(inputs.ranges),
                          tuple(i.name for i in model.graph.input if i.name not in initializers),
                          tuple(o.name for o in model.graph.output))

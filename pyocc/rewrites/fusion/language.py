"""The fusion pattern language: what a rule of `dnn-fuse` is made of.

    # relu(conv(x))  =>  conv{activation=relu}(x)
    Rule("conv-activation",
         match=op(d.UnaryOp, "act", fn=ACTIVATION, x=op(d.ConvOp, "conv", activation=None)),
         produce=with_activation("conv"))

    op(cls, name, **fields)   a dnn op of class `cls` (or of one of a tuple
                              of classes; a compute op or dnn.view), bound
                              to `name`. A field that
                              names an operand takes a sub-pattern (None: an
                              absent optional operand); one that names a
                              property takes a value it must equal, None
                              (absent), a frozenset (one of) or a predicate.
    var("x")                  any value, bound to "x"; a name bound twice must
                              be the same value (how a DAG shares a node).
    const("c", approx=v)      a dnn.weight; with `approx`, a scalar close to v.

A rule is checked when it is built, against the op definitions: a field
the op does not have is a `FusionRuleError` naming the rule, the op and the
field (a misspelt `activaton=None` would otherwise read as "absent" and
fuse over an existing activation). `Match` is what a rule's conditions and
`produce` see. The engine that applies rules is pyocc.rewrites.fusion.engine.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, TensorType, f32, i64
from xdsl.ir import Attribute, Operation, SSAValue

from pyocc.dialects.dnn import ops as d
from pyocc.dialects.dnn.constants import numpy_dtype, weight_array, weight_from_array

if TYPE_CHECKING:
    import numpy as np


class FusionRuleError(ValueError):
    """A rule that cannot mean what it says (checked when it is built)."""


@dataclass(frozen=True)
class Var:
    """A leaf of a pattern: any value (or only a weight), bound to `name`."""

    name: str
    constant: bool = False
    approx: float | None = None


@dataclass(frozen=True)
class OpPattern:
    """A dnn op of one of `classes`, bound to `name`, with per-field conditions."""

    classes: tuple[type[Operation], ...]
    name: str
    fields: tuple[tuple[str, Any], ...]

    def walk(self) -> Iterator[OpPattern]:
        """This pattern and every op pattern below it."""
        yield self
        for _, test in self.fields:
            if isinstance(test, OpPattern):
                yield from test.walk()


#: the op classes a pattern may name besides the compute ops: dnn.view, a
#: reshape a fusion can see through (a channel shuffle is view, transpose, view)
VIEWS = (d.ViewOp,)


def op(cls: type[Operation] | tuple[type[Operation], ...], name: str, **fields: Any) -> OpPattern:
    """Pattern of one dnn op (see the module docstring)."""
    classes = cls if isinstance(cls, tuple) else (cls,)
    for c in classes:
        if not (isinstance(c, type) and (issubclass(c, d.DnnComputeOp) or c in VIEWS)):
            raise FusionRuleError(f"op({name!r}): {c!r} is not a dnn compute op class (e.g. d.ConvOp) "
                                  "or dnn.view")
    return OpPattern(classes, name, tuple(fields.items()))


def var(name: str) -> Var:
    """Pattern of any value, bound to `name`."""
    return Var(name)


def const(name: str, approx: float | None = None) -> Var:
    """Pattern of a dnn.weight (with `approx`: a scalar close to it)."""
    return Var(name, constant=True, approx=approx)


def operand_names(cls: type[Operation]) -> frozenset[str]:
    """The operand fields of an op class."""
    return frozenset(name for name, _ in cls.get_irdl_definition().operands)


def property_names(cls: type[Operation]) -> frozenset[str]:
    """The property fields of an op class (not the operand segment sizes)."""
    return frozenset(cls.get_irdl_definition().properties) - {"operandSegmentSizes"}


def check_pattern(rule: str, pattern: OpPattern) -> None:
    """Every field of every op pattern names an operand (given a pattern or
    None) or a property (given a value) of each of its op classes;
    `FusionRuleError` otherwise, naming the rule, the op and the field."""
    for p in pattern.walk():
        for cls in p.classes:
            operands, properties = operand_names(cls), property_names(cls)
            for name, test in p.fields:
                where = f"fusion rule {rule!r}: {cls.name} (pattern {p.name!r})"
                if name in operands:
                    if test is not None and not isinstance(test, OpPattern | Var):
                        raise FusionRuleError(f"{where}: operand {name!r} takes a pattern (op, var, const) or None, "
                                              f"got {test!r}")
                elif name in properties:
                    if isinstance(test, OpPattern | Var):
                        raise FusionRuleError(f"{where}: {name!r} is a property; it takes a value, not a pattern")
                else:
                    close = difflib.get_close_matches(name, sorted(operands | properties), n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else \
                        f"; it has {', '.join(sorted(operands | properties))}"
                    raise FusionRuleError(f"{where} has no field {name!r}{hint}")


Condition = Callable[["Match"], bool]


@dataclass(frozen=True)
class Rule:
    """One fusion rule: what to match, when it applies, what replaces it.
    Its pattern is checked against the op definitions when it is built."""

    name: str
    match: OpPattern
    produce: Callable[[Match], Operation]
    where: tuple[Condition, ...] = ()
    stage: int = 1
    """Rules of a lower stage run to completion first: the composite
    patterns (GELU, LayerNorm, attention) at stage 0, so that a small rule
    (tanh as a fused activation) cannot eat the inside of a larger one."""
    targets: frozenset[str] = frozenset({"host", "cuda"})
    """The targets whose lowering can run what the rule produces: the
    produced op's `targets()` (its `Targets` trait) where that is narrower."""

    def __post_init__(self) -> None:
        check_pattern(self.name, self.match)


def prop_value(operation: Operation, name: str) -> Any:
    """A property as a Python value (None when absent)."""
    attr = operation.properties.get(name)
    if attr is None:
        return None
    if isinstance(attr, IntegerAttr | FloatAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, DenseArrayBase):
        return tuple(attr.get_values())
    return attr


@dataclass
class Match:
    """What a rule matched: ops and values by pattern name, plus the weights
    `produce` creates (inserted before the fused op)."""

    root: Operation
    ops: dict[str, Operation] = field(default_factory=dict)
    values: dict[str, SSAValue] = field(default_factory=dict)
    new_ops: list[Operation] = field(default_factory=list)

    def copy(self) -> Match:
        """A copy to extend while trying one alternative (backtracking)."""
        return Match(self.root, dict(self.ops), dict(self.values), [])

    def __getitem__(self, name: str) -> Any:
        return self.ops[name] if name in self.ops else self.values[name]

    # -- reading constants -------------------------------------------------

    def array(self, value: SSAValue | str) -> np.ndarray:
        """The numpy value of a weight (a bound name or an SSA value)."""
        value = self.values[value] if isinstance(value, str) else value
        assert isinstance(value.owner, d.WeightOp)
        return weight_array(value.owner)

    # -- building the replacement -------------------------------------------

    def weight(self, array: np.ndarray, like: TensorType, name: str = "fused") -> SSAValue:
        """A new weight of `like`'s element type holding `array`."""
        ttype = TensorType(like.element_type, list(array.shape))
        hint = (self.root.results[0].name_hint or "fused") + "_" + name
        weight = weight_from_array(hint, array.astype(numpy_dtype(like.element_type)), ttype)
        weight.result.name_hint = hint
        self.new_ops.append(weight)
        return weight.result

    def build(self, cls: type[d.DnnComputeOp], operands: dict[str, Any], props: dict[str, Any],
              result_type: Attribute | None = None) -> d.DnnComputeOp:
        """A tensor-form `cls` op with the root's result type (or
        `result_type`); `operands` by field name (absent = None), `props` as
        Attributes or Python values (None = absent)."""
        inputs = {k: v for k, v in operands.items() if k not in d.DnnComputeOp.NOT_INPUTS}
        properties = {k: _attr(v) for k, v in props.items() if v is not None}
        return cls.build(inputs, [result_type or self.root.results[0].type], properties)

    def view(self, value: SSAValue, shape: Sequence[int]) -> SSAValue:
        """`value` reshaped (a dnn.view: no copy), inserted before the fused op."""
        view = d.ViewOp.create(operands=[value], result_types=[TensorType(value.type.element_type, list(shape))])
        self.new_ops.append(view)
        return view.result

    def rebuild(self, name: str, operands: dict[str, Any] | None = None, **props: Any) -> d.DnnComputeOp:
        """The matched op `name` with some operands and properties replaced
        (a property set to None is dropped), typed like the root."""
        source = self.ops[name]
        assert isinstance(source, d.DnnComputeOp)
        current: dict[str, Any] = {f: getattr(source, f) for f, _ in source.get_irdl_definition().operands}
        current.update(operands or {})
        properties: dict[str, Any] = dict(source.kernel_attributes())
        properties.update(props)
        return self.build(type(source), current, properties)


def _attr(value: Any) -> Attribute:
    """A Python value as a property attribute (Attributes pass through)."""
    if isinstance(value, Attribute):
        return value
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, bool | int):
        return IntegerAttr(int(value), i64)
    if isinstance(value, float):
        return FloatAttr(value, f32)
    if isinstance(value, list | tuple):
        return DenseArrayBase.from_list(i64, list(value))
    raise TypeError(f"dnn-fuse: no property form for {value!r}")

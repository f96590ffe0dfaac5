"""The fusion engine: one xDSL `RewritePattern` (`RulePattern`) that applies
any rule of the pattern language (pyocc.rewrites.fusion.language).

It matches a rule at a root op, reading the pattern from the root back to
its producers (binary add and mul match either operand order, with
backtracking), and adds the conditions every fusion needs: each matched op
but the root is read only inside the match (no other reader, not a graph
output), so the intermediate disappears and nothing else sees a change;
and the replacement never reads a tensor the match removes. MLIR's DRR
needs an explicit `HasOneUse` for the first; here no rule can forget it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from pyocc.dialects.dnn import ops as d
from pyocc.rewrites.fusion.language import VIEWS, Match, OpPattern, Rule, Var, operand_names, prop_value

COMMUTATIVE = frozenset({"add", "mul"})
"""The binary functions whose operands match in either order."""


def _prop_holds(test: Any, value: Any) -> bool:
    if test is None:
        return value is None
    if isinstance(test, frozenset):
        return value in test
    if callable(test):
        return value is not None and bool(test(value))
    return value == test


def _match_value(pattern: OpPattern | Var, value: SSAValue, m: Match) -> Match | None:
    if isinstance(pattern, Var):
        bound = m.values.get(pattern.name)
        if bound is not None:
            return m if bound is value else None
        if pattern.constant and not isinstance(value.owner, d.WeightOp):
            return None
        if pattern.approx is not None and not _is_scalar_near(m, value, pattern.approx):
            return None
        m = m.copy()
        m.values[pattern.name] = value
        return m
    owner = value.owner
    if not isinstance(owner, (d.DnnComputeOp, *VIEWS)) or len(owner.results) != 1:
        return None
    return match_op(pattern, owner, m)


def _is_scalar_near(m: Match, value: SSAValue, target: float) -> bool:
    if math.prod(value.type.get_shape()) != 1:  # type: ignore[attr-defined]
        return False
    return math.isclose(float(m.array(value).reshape(-1)[0]), target, rel_tol=1e-3)


def match_op(pattern: OpPattern, operation: Operation, m: Match) -> Match | None:
    """`m` extended by `pattern` matched at `operation`, or None."""
    if pattern.name in m.ops:
        return m if m.ops[pattern.name] is operation else None
    if type(operation) not in pattern.classes:
        return None
    operands = operand_names(type(operation))
    operand_fields = []
    for name, test in pattern.fields:
        if name in operands:
            operand_fields.append((name, test))
        elif not _prop_holds(test, prop_value(operation, name)):
            return None
    m = m.copy()
    m.ops[pattern.name] = operation
    swaps = [{}]
    if isinstance(operation, d.BinaryOp) and operation.fn.data in COMMUTATIVE:
        swaps.append({"a": "b", "b": "a"})
    for swap in swaps:
        current: Match | None = m
        for name, sub in operand_fields:
            value = getattr(operation, swap.get(name, name))
            if sub is None:  # the optional operand must be absent
                current = current if value is None else None
            else:
                current = None if value is None else _match_value(sub, value, current)
            if current is None:
                break
        if current is not None:
            return current
    return None


def intermediates_are_private(m: Match) -> bool:
    """Every matched op but the root is read only inside the match (so no
    other reader and no graph output needs its result)."""
    inside = set(m.ops.values())
    return all(
        use.operation in inside
        for matched in inside if matched is not m.root
        for result in matched.results
        for use in result.uses
    )


def inputs_come_from_outside(m: Match) -> bool:
    """No bound value is a result of a matched op (those are erased)."""
    inside = set(m.ops.values())
    return all(value.owner not in inside for value in m.values.values())


class RulePattern(RewritePattern):
    """The generic engine: one Rule as an xDSL rewrite pattern."""

    def __init__(self, rule: Rule):
        self.rule = rule

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        """Match the rule at `op` (its root), check it, replace the matched ops."""
        # the root's class first: each rule is tried at every op, and most ops are no root of it
        if type(op) not in self.rule.match.classes or len(op.results) != 1:
            return
        m = match_op(self.rule.match, op, Match(op))
        if m is None or not intermediates_are_private(m) or not inputs_come_from_outside(m):
            return
        if not all(condition(m) for condition in self.rule.where):
            return
        fused = self.rule.produce(m)
        inside = set(m.ops.values())
        if any(operand.owner in inside for new in [*m.new_ops, fused] for operand in new.operands):
            return  # the replacement still reads a tensor the match removes
        fused.results[0].name_hint = op.results[0].name_hint
        rewriter.replace(op, [*m.new_ops, fused], [fused.results[0]])
        dead = [o for o in m.ops.values() if o is not op]
        while dead:  # consumers first, so each op is unused when erased
            unused = next(o for o in dead if all(not r.uses for r in o.results))
            rewriter.erase(unused)
            dead.remove(unused)


def compile_rules(rules: Sequence[Rule], stage: int | None = None, target: str | None = None) -> list[RewritePattern]:
    """`rules` (or one stage of them, or those one target can run) as
    rewrite patterns, in table order."""
    return [RulePattern(rule) for rule in rules
            if (stage is None or rule.stage == stage) and (target is None or target in rule.targets)]

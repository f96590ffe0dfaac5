"""One plan for every value of a symbolic size (a sequence length, a batch).

A symbolic problem is a static problem whose buffer sizes are polynomials in
named symbols, each with a range ``[low, high]`` (``--dim sequence=512``:
1..512). The plan it gets is one set of offsets that are *expressions* in
those symbols, valid for every value in range:

    offset(b) = align(max(end(c) for c in below(b)), alignment(b))
    end(b)    = offset(b) + size(b)
    pool      = max(end(b) for every b)

``below(b)`` is a fixed set of buffers, chosen once by the planner. Sizes
are non-negative on the range, so `offset(b) >= end(c)` holds for every
``c`` in ``below(b)`` at every value by construction. A buffer also fits into
a gap under a conflicting buffer ``a`` when ``end(b) <= offset(a)`` holds at
every value of the range (checked on the whole range when it has at most
``GRID_LIMIT`` points; otherwise no gaps are used). Evaluating the offsets is
one pass over the buffers in placement order, which is what generated code
does once per run.

``verify_symbolic_plan`` checks the plan with ``verify_plan`` at every value
of the range when it has at most ``GRID_LIMIT`` points, and otherwise at the
range's ends and at every value where two buffer sizes cross (the only
places where the order of two sizes, and so the plan's shape, can change).
"""

from __future__ import annotations

import ast
import itertools
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .planner import plan_memory
from .problem import Buffer, Plan, PlanError, PlanningError, Problem
from .verify import verify_plan

GRID_LIMIT = 4096
"""Ranges with at most this many points are planned and verified point by point."""
STATIC_ALGORITHMS = ("greedy-by-size", "best-fit-decreasing", "greedy-by-conflicts", "long-lived-first",
                     "occamy-first-fit")
"""The static planners candidates start from: the deterministic ones (no
time budget), so that a symbolic plan does not depend on the machine's speed."""
SEARCH_ALGORITHM = "hill-climb"
"""One improving search is a candidate too, at the top of the range (where
the memory is): TVM's hill climb, seeded, at most 2,000 steps. Its time
budget, ``SEARCH_BUDGET_MS``, is a safety cap far above what those steps take on
a model's problem, so in practice it is deterministic too; a plan it cuts
short is still verified like every other."""
SEARCH_BUDGET_MS = 5000.0
SEARCH_BUFFER_LIMIT = 400
"""Problems with more buffers skip the search (its steps grow with the buffers)."""
SCORE_SAMPLES = 64
"""Values per symbol a plan is scored at when its range is larger than ``GRID_LIMIT``."""

Monomial = tuple[tuple[str, int], ...]
"""Sorted (symbol, power) pairs; () is the constant term."""


# ---------------------------------------------------------------------------
# Polynomials in named symbols
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Poly:
    """A polynomial with integer coefficients in named symbols, e.g.
    ``48*S^2 + 3072*S``: the byte size of a tensor whose shape has symbolic
    dimensions. Immutable; ``+`` and ``*`` build new ones."""

    terms: tuple[tuple[Monomial, int], ...] = ()
    """(monomial, coefficient) pairs, sorted, no zero coefficients."""

    @staticmethod
    def of(terms: Mapping[Monomial, int]) -> Poly:
        """The polynomial with these terms (zeros dropped, order normalised)."""
        return Poly(tuple(sorted((m, c) for m, c in terms.items() if c)))

    @staticmethod
    def constant(value: int) -> Poly:
        """The constant polynomial ``value``."""
        return Poly.of({(): value})

    @staticmethod
    def symbol(name: str) -> Poly:
        """The polynomial ``name``."""
        return Poly.of({((name, 1),): 1})

    @staticmethod
    def parse(text: str) -> Poly:
        """Parse ``text``: integers, symbol names, ``+``, ``-``, ``*``,
        ``^``/``**`` with a non-negative integer power, parentheses.
        Raises ``PlanningError`` naming what it cannot read."""
        try:
            # `^` binds looser than `+` in Python: read it as `**`
            tree = ast.parse(text.strip().replace("^", "**"), mode="eval")
        except SyntaxError:
            raise PlanningError(f"size {text!r} is not an expression (write e.g. 4*S*768 or 48*S^2)") from None
        return _poly_of_node(tree.body, text)

    @property
    def symbols(self) -> frozenset[str]:
        """The symbols the polynomial uses."""
        return frozenset(name for monomial, _ in self.terms for name, _ in monomial)

    def is_constant(self) -> bool:
        """True when no symbol appears."""
        return all(not monomial for monomial, _ in self.terms)

    def __add__(self, other: Poly) -> Poly:
        """The sum."""
        total = dict(self.terms)
        for monomial, coefficient in other.terms:
            total[monomial] = total.get(monomial, 0) + coefficient
        return Poly.of(total)

    def __neg__(self) -> Poly:
        """The negation."""
        return Poly(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: Poly) -> Poly:
        """The difference."""
        return self + (-other)

    def __mul__(self, other: Poly) -> Poly:
        """The product."""
        total: dict[Monomial, int] = {}
        for (m1, c1), (m2, c2) in itertools.product(self.terms, other.terms):
            powers = dict(m1)
            for name, power in m2:
                powers[name] = powers.get(name, 0) + power
            monomial = tuple(sorted(powers.items()))
            total[monomial] = total.get(monomial, 0) + c1 * c2
        return Poly.of(total)

    def evaluate(self, values: Mapping[str, int]) -> int:
        """The value at ``values`` (every symbol must be given)."""
        return sum(c * math.prod(values[name] ** power for name, power in m) for m, c in self.terms)

    def evaluate_grid(self, grid: Mapping[str, np.ndarray]) -> np.ndarray:
        """The values at every point of a grid (arrays of equal length, one per symbol)."""
        length = len(next(iter(grid.values()))) if grid else 1
        result = np.zeros(length, dtype=np.int64)
        for monomial, coefficient in self.terms:
            term = np.full(length, coefficient, dtype=np.int64)
            for name, power in monomial:
                term = term * grid[name] ** power
            result = result + term
        return result

    def __str__(self) -> str:
        """Readable and parseable: ``48*S^2 + 3072*S + 64``."""
        if not self.terms:
            return "0"
        parts: list[str] = []
        # highest degree first reads like a formula
        for monomial, coefficient in sorted(self.terms, key=lambda t: (-sum(p for _, p in t[0]), t[0])):
            factors = [name if power == 1 else f"{name}^{power}" for name, power in monomial]
            magnitude = abs(coefficient)
            if magnitude != 1 or not factors:
                factors.insert(0, str(magnitude))
            sign = "-" if coefficient < 0 else "+"
            parts.append((sign, "*".join(factors)))
        text = ("-" if parts[0][0] == "-" else "") + parts[0][1]
        for sign, body in parts[1:]:
            text += f" {sign} {body}"
        return text


def _poly_of_node(node: ast.AST, text: str) -> Poly:
    """The polynomial an expression tree denotes (PlanningError otherwise)."""
    match node:
        case ast.Constant(value=int() as value) if not isinstance(value, bool):
            return Poly.constant(value)
        case ast.Name(id=name):
            return Poly.symbol(name)
        case ast.BinOp(left=left, op=ast.Add(), right=right):
            return _poly_of_node(left, text) + _poly_of_node(right, text)
        case ast.BinOp(left=left, op=ast.Sub(), right=right):
            return _poly_of_node(left, text) - _poly_of_node(right, text)
        case ast.BinOp(left=left, op=ast.Mult(), right=right):
            return _poly_of_node(left, text) * _poly_of_node(right, text)
        case ast.BinOp(left=left, op=ast.Pow(), right=ast.Constant(value=int() as power)) if power >= 0:
            base = _poly_of_node(left, text)
            result = Poly.constant(1)
            for _ in range(power):
                result = result * base
            return result
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_poly_of_node(operand, text)
    raise PlanningError(
        f"size {text!r}: cannot read {ast.unparse(node)!r} (sizes use integers, symbols, +, -, * and ^N)"
    )


# ---------------------------------------------------------------------------
# Problems and plans
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SymbolicBuffer:
    """A buffer whose byte size is a polynomial in the problem's symbols."""

    name: str
    size: Poly
    first: int
    last: int
    alignment: int = 1

    def overlaps(self, other: SymbolicBuffer) -> bool:
        """True when the two live ranges share at least one step."""
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class SymbolicProblem:
    """Buffers with polynomial sizes, and the range of every symbol."""

    buffers: tuple[SymbolicBuffer, ...]
    ranges: Mapping[str, tuple[int, int]]
    """symbol -> (low, high), inclusive, low >= 0."""

    def __post_init__(self) -> None:
        """Validate: known symbols, sane ranges, sizes >= 0 on the range (PlanningError)."""
        object.__setattr__(self, "buffers", tuple(self.buffers))
        object.__setattr__(self, "ranges", dict(self.ranges))
        for name, bounds in self.ranges.items():
            low, high = bounds
            if not (isinstance(low, int) and isinstance(high, int)) or low < 0 or high < low:
                raise PlanningError(f"symbol {name!r}: range must be two integers 0 <= low <= high, got {bounds!r}")
        seen: set[str] = set()
        for buffer in self.buffers:
            if buffer.name in seen:
                raise PlanningError(f"duplicate buffer name {buffer.name!r}")
            seen.add(buffer.name)
            unknown = sorted(buffer.size.symbols - set(self.ranges))
            if unknown:
                raise PlanningError(
                    f"buffer {buffer.name!r}: size {buffer.size} uses {', '.join(unknown)}, which has no range "
                    f"(declare it, e.g. \"symbols\": {{\"{unknown[0]}\": [1, 512]}})"
                )
            if buffer.last < buffer.first:
                raise PlanningError(f"buffer {buffer.name!r}: last ({buffer.last}) is before first ({buffer.first})")
            if not isinstance(buffer.alignment, int) or buffer.alignment < 1:
                raise PlanningError(f"buffer {buffer.name!r}: alignment must be an integer >= 1")
        points = self.check_points()
        grid = {name: np.array([p[name] for p in points], dtype=np.int64) for name in self.symbols}
        for buffer in self.buffers:
            negative = np.flatnonzero(buffer.size.evaluate_grid(grid) < 0)
            if len(negative):
                raise PlanningError(
                    f"buffer {buffer.name!r}: size {buffer.size} is negative at {_show(points[negative[0]])}")

    @property
    def symbols(self) -> tuple[str, ...]:
        """The symbols, sorted."""
        return tuple(sorted(self.ranges))

    def points(self) -> int:
        """How many value combinations the ranges hold."""
        return math.prod(high - low + 1 for low, high in self.ranges.values())

    def maximum(self) -> dict[str, int]:
        """Every symbol at the top of its range."""
        return {name: high for name, (_, high) in self.ranges.items()}

    def at(self, values: Mapping[str, int]) -> Problem:
        """The static problem at one value of every symbol."""
        return Problem(tuple(Buffer(b.name, b.size.evaluate(values), b.first, b.last, b.alignment)
                             for b in self.buffers))

    def check_points(self) -> list[dict[str, int]]:
        """The values a plan is checked at: the whole range when it has at
        most ``GRID_LIMIT`` points; otherwise every corner of the ranges and,
        per symbol (the others at each of their ends), every integer next to
        a value where two sizes cross."""
        names = self.symbols
        if self.points() <= GRID_LIMIT:
            axes = [range(low, high + 1) for low, high in (self.ranges[n] for n in names)]
            return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes)]
        corners = [dict(zip(names, combo, strict=True))
                   for combo in itertools.product(*(self.ranges[n] for n in names))]
        points = {tuple(sorted(c.items())) for c in corners}
        sizes = list({b.size for b in self.buffers})
        for name in names:
            low, high = self.ranges[name]
            for corner in corners:
                for crossing in _crossings(sizes, name, corner, low, high):
                    points.add(tuple(sorted({**corner, name: crossing}.items())))
        return [dict(p) for p in sorted(points)]


def _crossings(sizes: Sequence[Poly], name: str, fixed: Mapping[str, int], low: int, high: int) -> set[int]:
    """Integers in [low, high] next to a real root of a difference of two
    sizes (or of a size), as polynomials in `name` with the other symbols
    fixed."""
    def univariate(poly: Poly) -> np.ndarray:
        degree = max((dict(m).get(name, 0) for m, _ in poly.terms), default=0)
        coefficients = np.zeros(degree + 1)
        for monomial, coefficient in poly.terms:
            powers = dict(monomial)
            rest = math.prod(fixed[s] ** p for s, p in powers.items() if s != name)
            coefficients[degree - powers.get(name, 0)] += coefficient * rest
        return coefficients

    result: set[int] = set()
    differences = [*sizes, *(a - b for a, b in itertools.combinations(sizes, 2))]
    for poly in differences:
        coefficients = np.trim_zeros(univariate(poly), "f")
        if len(coefficients) < 2:
            continue
        for root in np.roots(coefficients):
            if abs(root.imag) > 1e-9 or not low - 1 <= root.real <= high + 1:
                continue
            for value in (math.floor(root.real), math.ceil(root.real)):
                if low <= value <= high:
                    result.add(value)
    return result


def _show(values: Mapping[str, int]) -> str:
    """'S=17, B=2' for messages."""
    return ", ".join(f"{name}={value}" for name, value in sorted(values.items()))


@dataclass(frozen=True)
class SymbolicPlan:
    """Offsets as expressions: buffer ``i`` sits at the aligned top of the
    buffers ``below[i]``; ``order`` is a placement order (every buffer after
    those below it), the order in which generated code evaluates them."""

    problem: SymbolicProblem
    below: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]
    plan_ms: float = field(default=0.0, compare=False)

    def offsets(self, values: Mapping[str, int]) -> dict[str, int]:
        """Every buffer's offset at one value of every symbol."""
        buffers = self.problem.buffers
        ends: dict[int, int] = {}
        offsets: dict[str, int] = {}
        for i in self.order:
            top = max((ends[c] for c in self.below[i]), default=0)
            alignment = buffers[i].alignment
            offset = -(-top // alignment) * alignment
            offsets[buffers[i].name] = offset
            ends[i] = offset + buffers[i].size.evaluate(values)
        return offsets

    def pool_bytes(self, values: Mapping[str, int]) -> int:
        """The pool size at one value of every symbol."""
        offsets = self.offsets(values)
        return max((offsets[b.name] + b.size.evaluate(values) for b in self.problem.buffers), default=0)

    def at(self, values: Mapping[str, int]) -> Plan:
        """The static plan at one value of every symbol."""
        offsets = self.offsets(values)
        pool = max((offsets[b.name] + b.size.evaluate(values) for b in self.problem.buffers), default=0)
        return Plan(offsets, pool, "symbolic", False, 0.0)

    def offset_expr(self, index: int) -> str:
        """Buffer ``index``'s offset as a formula over the others' ends,
        e.g. ``align(max(end(a), end(b)), 64)``; ``0`` at the bottom."""
        buffer = self.problem.buffers[index]
        names = [f"end({self.problem.buffers[c].name})" for c in self.below[index]]
        if not names:
            return "0"
        top = names[0] if len(names) == 1 else f"max({', '.join(names)})"
        return top if buffer.alignment == 1 else f"align({top}, {buffer.alignment})"

    def pool_expr(self) -> str:
        """The pool size as a formula: the max of the ends of the buffers no
        other buffer sits on."""
        under = {c for cs in self.below for c in cs}
        tops = [f"end({b.name})" for i, b in enumerate(self.problem.buffers) if i not in under]
        if not tops:
            return "0"
        return tops[0] if len(tops) == 1 else f"max({', '.join(tops)})"


# ---------------------------------------------------------------------------
# Planning and verification
# ---------------------------------------------------------------------------


def _grid(problem: SymbolicProblem) -> dict[str, np.ndarray]:
    """The points plans are scored at, as one array per symbol, the maximum
    of every symbol last: the check points, plus, when they are not the
    whole range, ``SCORE_SAMPLES`` geometrically spaced values of each
    symbol with the others at their maximum."""
    points = {tuple(sorted(p.items())) for p in problem.check_points()}
    if problem.points() > GRID_LIMIT:
        maximum = problem.maximum()
        for name, (low, high) in problem.ranges.items():
            for value in np.unique(np.geomspace(max(low, 1), high, SCORE_SAMPLES).round().astype(np.int64)):
                if low <= value <= high:
                    points.add(tuple(sorted({**maximum, name: int(value)}.items())))
    ordered = sorted(points, key=lambda p: (sum(v for _, v in p), p))
    return {name: np.array([dict(p)[name] for p in ordered], dtype=np.int64) for name in problem.symbols}


def plan_symbolic(problem: SymbolicProblem) -> SymbolicPlan:
    """One plan valid for every value in range, verified before it is returned.

    Candidates, each from one *reference point* (the first, last and
    quartile check points):
    - the static plans at that point (``STATIC_ALGORITHMS``, and at the
      last point also ``SEARCH_ALGORITHM``) made symbolic:
      each buffer sits on the conflicting buffers under it there; valid at
      every point by construction;
    - greedy by size at that point, each buffer in the lowest gap there
      that stays a gap at every point of the range (gaps only when the
      check points are the whole range).
    The plan kept is the one whose pool is closest to the max-live lower
    bound at its worst check point. Raises
    ``PlanError`` if verification fails (a bug, never expected)."""
    start = time.perf_counter()
    grid = _grid(problem)
    sizes = [b.size.evaluate_grid(grid) for b in problem.buffers]
    bound = _max_live(problem, sizes)
    length = len(bound)
    references = sorted({length - 1, 0, length // 4, length // 2, (3 * length) // 4})
    points = [{name: int(grid[name][r]) for name in problem.symbols} for r in references]
    candidates = [_greedy(problem, sizes, r, use_gaps=problem.points() <= GRID_LIMIT) for r in references]
    candidates += [_stacked(problem, sizes, problem.at(point), algorithm)
                   for point in points for algorithm in STATIC_ALGORITHMS]
    if len(problem.buffers) <= SEARCH_BUFFER_LIMIT:
        candidates.append(_stacked(problem, sizes, problem.at(points[-1]), SEARCH_ALGORITHM))
    # alignment padding (at most one alignment per buffer) is all there is
    # to a plan at tiny sizes: score the ratio over the bound plus that slack,
    # so that bytes of padding at S = 1 do not outweigh percent at S = 512
    slack = sum(b.alignment - 1 for b in problem.buffers)
    best: tuple[float, tuple[tuple[int, ...], ...], tuple[int, ...]] | None = None
    for below, order, pool in candidates:
        score = float(np.max(pool / (bound + max(slack, 1))))
        if best is None or score < best[0]:
            best = (score, below, order)
    assert best is not None
    plan = SymbolicPlan(problem, best[1], best[2], (time.perf_counter() - start) * 1e3)
    verify_symbolic_plan(plan)
    return plan


def _stacked(problem: SymbolicProblem, sizes: list[np.ndarray], static: Problem,
             algorithm: str) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], np.ndarray]:
    """(below, order, pool at every grid point) of the static plan of
    `static` (the problem at one point) by `algorithm` made symbolic: every
    buffer sits on the conflicting buffers under it in that plan. Sorted by (offset, end),
    one of any two conflicting buffers is under the other, so the result is
    valid at every point, and at the static plan's own point it is no larger."""
    buffers = problem.buffers
    plan = plan_memory(static, algorithm, time_budget_ms=SEARCH_BUDGET_MS)
    start = [plan.offsets[b.name] for b in buffers]
    end = [start[i] + b.size for i, b in enumerate(static.buffers)]
    order = sorted(range(len(buffers)), key=lambda i: (start[i], end[i], i))
    below: list[tuple[int, ...]] = [()] * len(buffers)
    placed: list[int] = []
    for i in order:
        below[i] = tuple(sorted(c for c in placed if buffers[c].overlaps(buffers[i]) and end[c] <= start[i]))
        placed.append(i)
    return tuple(below), tuple(order), _pool(problem, sizes, below, order)


def _pool(problem: SymbolicProblem, sizes: list[np.ndarray], below: Sequence[tuple[int, ...]],
          order: Sequence[int]) -> np.ndarray:
    """The pool size at every grid point of a plan given by `below` and `order`."""
    ends: dict[int, np.ndarray] = {}
    pool = np.zeros(len(sizes[0]) if sizes else 1, dtype=np.int64)
    for i in order:
        offset = _aligned_top([ends[c] for c in below[i]], problem.buffers[i].alignment, len(pool))
        ends[i] = offset + sizes[i]
        pool = np.maximum(pool, ends[i])
    return pool


def _max_live(problem: SymbolicProblem, sizes: list[np.ndarray]) -> np.ndarray:
    """The max-live lower bound at every grid point."""
    steps = sorted({s for b in problem.buffers for s in (b.first, b.last)})
    if not steps:
        return np.zeros(len(sizes[0]) if sizes else 1, dtype=np.int64)
    best = np.zeros(len(sizes[0]), dtype=np.int64)
    for step in steps:  # the live total only peaks where some buffer starts or ends
        live = np.zeros_like(best)
        for buffer, size in zip(problem.buffers, sizes, strict=True):
            if buffer.first <= step <= buffer.last:
                live = live + size
        best = np.maximum(best, live)
    return best


def _greedy(problem: SymbolicProblem, sizes: list[np.ndarray], reference: int,
            use_gaps: bool) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], np.ndarray]:
    """(below, order, pool at every grid point) of greedy by size at the
    grid point `reference`."""
    buffers = problem.buffers
    order = sorted(range(len(buffers)),
                   key=lambda i: (-int(sizes[i][reference]), -(buffers[i].last - buffers[i].first), i))
    offsets: dict[int, np.ndarray] = {}
    below: list[tuple[int, ...]] = [()] * len(buffers)
    for i in order:
        conflicts = [c for c in offsets if buffers[c].overlaps(buffers[i])]
        chosen: tuple[int, ...] = tuple(sorted(conflicts))
        if use_gaps and conflicts:
            chosen = _lowest_gap(i, conflicts, offsets, sizes, buffers[i].alignment, reference) or chosen
        below[i] = chosen
        offsets[i] = _aligned_top([offsets[c] + sizes[c] for c in chosen], buffers[i].alignment, len(sizes[i]))
    return tuple(below), tuple(order), _pool(problem, sizes, below, order)


def _aligned_top(ends: Iterable[np.ndarray], alignment: int, length: int) -> np.ndarray:
    """align(max(ends), alignment) point by point (zeros when there are none)."""
    top = np.zeros(length, dtype=np.int64)
    for end in ends:
        top = np.maximum(top, end)
    return -(-top // alignment) * alignment


def _lowest_gap(i: int, conflicts: list[int], offsets: dict[int, np.ndarray], sizes: list[np.ndarray],
                alignment: int, reference: int) -> tuple[int, ...] | None:
    """The buffers to sit on for the lowest offset at grid point `reference`
    that is a gap at every point: the candidates are the bottom and the ends
    of the conflicting buffers, lowest first; None when only the top of
    them all works."""
    ends = {c: offsets[c] + sizes[c] for c in conflicts}
    for candidate in sorted({0, *(int(ends[c][reference]) for c in conflicts)}):
        sit_on = tuple(sorted(c for c in conflicts if ends[c][reference] <= candidate))
        if len(sit_on) == len(conflicts):
            return None
        end = _aligned_top([ends[c] for c in sit_on], alignment, len(sizes[i])) + sizes[i]
        if all(np.all(end <= offsets[c]) for c in conflicts if c not in sit_on):
            return sit_on
    return None


def verify_symbolic_plan(plan: SymbolicPlan) -> None:
    """Raise ``PlanError`` unless the plan is valid at every check point of
    its problem (``SymbolicProblem.check_points``), naming the values."""
    for point in plan.problem.check_points():
        try:
            verify_plan(plan.problem.at(point), plan.at(point))
        except PlanError as error:
            raise PlanError(f"at {_show(point)}: {error}") from None

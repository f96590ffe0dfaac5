"""One plan for every value of a symbolic size (a sequence length, a batch).

A symbolic problem is a static problem whose buffer sizes are polynomials in
named symbols, each with a range ``[low, high]`` (``--dim sequence=512``:
1..512). The plan it gets is one set of offsets that are *expressions* in
those symbols, valid for every value in range:

    offset(b) = align(max(end(c) for c in below(b)), alignment(b))
    end(b)    = offset(b) + size(b)
    pool      = max(end(b) for every b)

``alignment(b)`` is the buffer's ``alignment`` where its size is at least
that, and the next power of two of its size where it is smaller
(``fitted_alignment``): it varies with the symbols, and generated code
computes it from the size it computes anyway.

``below(b)`` is a fixed set of buffers, chosen once by the planner. Sizes
are non-negative on the range, so `offset(b) >= end(c)` holds for every
``c`` in ``below(b)`` at every value by construction. A buffer also fits into
a gap under a conflicting buffer ``a`` when ``end(b) <= offset(a)`` holds at
every value of the range (checked on the whole range when it has at most
``GRID_LIMIT`` points; otherwise no gaps are used). Evaluating the offsets is
one pass over the buffers in placement order, which is what generated code
does once per run.

``verify_symbolic_plan`` checks the plan with ``verify_plan``'s rules at every value
of the range when it has at most ``GRID_LIMIT`` points, and otherwise at the
range's ends and at every value where two buffer sizes cross (the only
places where the order of two sizes, and so the plan's shape, can change):
at all those values at once with numpy, and where a rule breaks,
``verify_plan`` itself names the buffers.

Pieces. One layout for the whole range is chosen where the memory is (the
top of the range) and pays for it at the smallest values, where alignment
padding and constant blocks are most of the pool: the test BERT-style
encoder's one layout is 1.29x the static plan at S = 1 and still 1.2x at
S = 8. So a plan is a few *pieces*: the range of one symbol is cut into
consecutive sub-ranges, each with its own layout (below-sets and order)
valid over it, and generated code picks the piece with one
compare-and-branch per run (``S <= 4``, ``S <= 32``, else the last). The
planner chooses the cuts:

1. plan the whole range as one piece (the candidates below);
2. find the values where a piece's pool exceeds the best static plan of
   that value by more than ``SPLIT_THRESHOLD``. The static plan is the one
   the candidates use (``STATIC_ALGORITHMS`` and the search), made only
   where the piece's pool exceeds the max-live bound by the threshold (the
   static plan is never below it) and at most at ``STATIC_CHECKS`` values
   (spread over the octaves of the range, 1, 2..3, 4..7, ...: the worst
   against the bound in each first), so a plan that meets the bound costs
   nothing more;
3. cut the worst piece just above its last bad value (the excess sits at
   the small values, so the bad values are a prefix ``[low, k]``: one cut
   gives a piece for them and one for the rest; when the last value is
   bad too, just below the first bad one, and when both ends are, at the
   widest gap between two bad values, or just above the worst where there
   is none), plan both parts alone (a part keeps the piece's
   layout when its own is no closer to the static plans) and keep the cut
   if it lowers the worst ratio, or, while that ratio is above
   ``1 + FIX_THRESHOLD``, keeps it and lowers the bad values' total excess
   (one part fixed, the other left for the next cut); when it
   does neither (bad values spread over the whole piece), try once more with
   the lowest bad value alone (or with what lies below it); repeat up to
   ``MAX_PIECES`` pieces. A part's candidates include the best static plan
   made at each value within it (step 2 makes them where the piece is
   bad), made symbolic like the reference points' plans.

4. when no cut is left (``MAX_PIECES``, or none helped), a piece still
   bad gets one more candidate: the search's static plan at its worst
   value, made symbolic (step 2 runs the search only where the heuristic
   plans leave a value good, so there was none where they leave it bad).

5. then the cuts themselves are checked: the best segmentation of the
   whole range into at most ``MAX_PIECES`` pieces, each with one of the
   static plans made so far made symbolic (two dynamic programs over the
   pieces' ends: the lowest worst ratio over the bound, then the lowest
   sum), replaces the pieces when its worst ratio is lower, or, while a
   piece is still bad, as low with a lower mean. One cut at a time, where
   the bad values suggest, misplaces cuts when a piece is bad at every
   scale (DistilBERT at batch 2: 1, 2..8, 9 and 10..512, 1.12x at S = 12).

Candidates are ranked by their worst ratio over the bound, then by their
mean ratio (many layouts tie at the top of the range, where the worst is).

A part that is a single value is a static problem: its candidates are the
static plans at that value. Everything is deterministic (no time budget
decides anything in practice, see ``SEARCH_ALGORITHM``), so the same
problem always gets the same pieces. Only problems with one symbol are cut
(with several, the pieces would be boxes and their number would multiply);
the others get one piece, as before. Measured on tests/graphs.py's graphs
at 1..512 (docs/memory.md): one piece for the encoder, two for the
GPT-2- and ViT-style graphs, three for the BERT-style one (segmented,
step 5), and every value within 1.6% of the best static plan.

The verifier checks that the pieces cover the range exactly, in order, and
every piece over its own sub-range as above.
"""

from __future__ import annotations

import ast
import bisect
import functools
import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .algorithms import HEURISTICS, hill_climb_offsets
from .bounds import lower_bound, packed_lower_bound
from .prepared import PreparedProblem
from .problem import Buffer, Plan, PlanError, PlanningError, Problem, fitted_alignment
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
short is still verified like every other. It stops at ``packed_lower_bound``
(``_search``): the same plan as ``plan_memory``'s hill climb, sooner."""
SEARCH_BUDGET_MS = 5000.0
SEARCH_BUFFER_LIMIT = 400
"""Problems with more buffers skip the search (its steps grow with the buffers)."""
SCORE_SAMPLES = 64
"""Values per symbol a plan is scored at when its range is larger than ``GRID_LIMIT``."""
SPLIT_THRESHOLD = 0.02
"""A piece is cut where its pool exceeds the best static plan by more than this fraction."""
FIX_THRESHOLD = 0.05
"""A cut that fixes one part and leaves the piece's worst ratio as it was
is kept only while that ratio exceeds ``1 + FIX_THRESHOLD`` (#21's goal,
1.05x the static plan): below it, more pieces would cost more planning time
than the bytes are worth (BERT's planning took 3x longer for 2%)."""
MAX_PIECES = 5
"""The most pieces a plan is cut into (each costs a layout's arithmetic in
generated code). Five, not four, since buffers smaller than their
alignment get less (``fitted_alignment``) and the smallest values want
more layouts: with four (1..6, 7..12, 13..15, 16..512) T5's S = 1 was
768 B against a static plan of 689 on its problem; with five it gets a
layout of its own, 688 B."""
SEGMENT_RESOLUTION = 24
"""`_Planner.segmented` ends pieces where ``ln(value - low + 1)`` passes a
multiple of ``1 / SEGMENT_RESOLUTION``: at any value up to 24, every 4% of
the value above (150 places in 1..512), so that its dynamic programs stay
small."""
STATIC_CHECKS = 32
"""The most values a static plan is made at to look for cuts, per problem."""

SEARCH_CHECKS = 8
"""Of those, the most values the (slow) search is run at to look for cuts, per problem."""

Monomial = tuple[tuple[str, int], ...]
"""Sorted (symbol, power) pairs; () is the constant term."""
_Shape = tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]
"""A layout: (below-sets, placement order), as a `Piece` holds them."""


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
    """The most the offset is aligned to: at a value where the size is
    smaller, the next power of two of the size (``fitted_alignment``)."""

    def alignment_at(self, values: Mapping[str, int]) -> int:
        """The alignment at one value of every symbol (``fitted_alignment``)."""
        return fitted_alignment(self.alignment, self.size.evaluate(values))

    def least_alignment(self, ranges: Mapping[str, tuple[int, int]]) -> int:
        """The least alignment the buffer gets at any value of `ranges`: the
        one at its least size where the size grows with every symbol (its
        terms' coefficients are all non-negative, so its least value is at
        the ranges' low ends), else 1 (it may get any)."""
        lows = {name: low for name, (low, _) in ranges.items()}
        growing = all(coefficient >= 0 for monomial, coefficient in self.size.terms if monomial)
        return fitted_alignment(self.alignment, self.size.evaluate(lows)) if growing else 1

    def fixed_alignment(self, ranges: Mapping[str, tuple[int, int]]) -> int | None:
        """The alignment where it is one number at every value of `ranges`:
        the size is constant, or never below ``alignment`` there; None where
        it may vary, and generated code computes it from the size (only the
        powers of two from ``least_alignment`` up)."""
        if self.size.is_constant():
            return fitted_alignment(self.alignment, self.size.evaluate({name: low for name, (low, _) in ranges.items()}))
        return self.alignment if self.least_alignment(ranges) == self.alignment else None

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
        object.__setattr__(self, "_points", points)
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
        return Problem(tuple(Buffer(b.name, b.size.evaluate(values), b.first, b.last, b.alignment_at(values))
                             for b in self.buffers))

    def within(self, ranges: Mapping[str, tuple[int, int]]) -> SymbolicProblem:
        """The same buffers over sub-ranges of the symbols (a piece's problem)."""
        for name, (low, high) in ranges.items():
            if name not in self.ranges or not self.ranges[name][0] <= low <= high <= self.ranges[name][1]:
                raise PlanningError(f"symbol {name!r}: {low}..{high} is not within the problem's range")
        return SymbolicProblem(self.buffers, {**self.ranges, **ranges})

    def check_points(self) -> list[dict[str, int]]:
        """The values a plan is checked at: the whole range when it has at
        most ``GRID_LIMIT`` points; otherwise every corner of the ranges and,
        per symbol (the others at each of their ends), every integer next to
        a value where two sizes cross. Computed once per problem."""
        cached: list[dict[str, int]] | None = getattr(self, "_points", None)
        if cached is not None:
            return [dict(p) for p in cached]
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
class Piece:
    """One layout of a symbolic plan and the sub-range it is valid over:
    buffer ``i`` sits at the aligned top of the buffers ``below[i]``;
    ``order`` is a placement order (every buffer after those below it), the
    order in which generated code evaluates them."""

    ranges: Mapping[str, tuple[int, int]]
    """symbol -> (low, high), inclusive: the values this layout is used for."""
    below: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]

    def contains(self, values: Mapping[str, int]) -> bool:
        """Whether every symbol's value is in this piece's range."""
        return all(low <= values[name] <= high for name, (low, high) in self.ranges.items())


@dataclass(frozen=True)
class SymbolicPlan:
    """Offsets as expressions, in one or more pieces: consecutive sub-ranges
    of one symbol (``split``), each with its own layout (see the module
    docstring). ``SymbolicPlan.single`` makes a one-piece plan."""

    problem: SymbolicProblem
    pieces: tuple[Piece, ...]
    plan_ms: float = field(default=0.0, compare=False)

    @staticmethod
    def single(problem: SymbolicProblem, below: tuple[tuple[int, ...], ...], order: tuple[int, ...],
               plan_ms: float = 0.0) -> SymbolicPlan:
        """The plan with one layout over the problem's whole range."""
        return SymbolicPlan(problem, (Piece(dict(problem.ranges), below, order),), plan_ms)

    @property
    def split(self) -> str | None:
        """The symbol the pieces cut (None for one piece)."""
        if len(self.pieces) < 2:
            return None
        first = self.pieces[0].ranges
        return next(n for n in self.problem.symbols if first[n] != self.problem.ranges[n])

    def piece_index(self, values: Mapping[str, int]) -> int:
        """The index of the piece whose range holds ``values`` (ValueError if none does)."""
        for index, piece in enumerate(self.pieces):
            if piece.contains(values):
                return index
        raise ValueError(f"{_show(values)} is outside the plan's range")

    def piece_problem(self, index: int) -> SymbolicProblem:
        """The problem over piece ``index``'s sub-range."""
        ranges = self.pieces[index].ranges
        return self.problem if ranges == self.problem.ranges else self.problem.within(ranges)

    def offsets(self, values: Mapping[str, int]) -> dict[str, int]:
        """Every buffer's offset at one value of every symbol."""
        piece = self.pieces[self.piece_index(values)]
        buffers = self.problem.buffers
        ends: dict[int, int] = {}
        offsets: dict[str, int] = {}
        for i in piece.order:
            top = max((ends[c] for c in piece.below[i]), default=0)
            alignment = buffers[i].alignment_at(values)
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

    def piece_offset_expr(self, piece: int, index: int) -> str:
        """Buffer ``index``'s offset in piece ``piece`` as a formula over
        the others' ends, e.g. ``align(max(end(a), end(b)), 64)``, or
        ``align(end(a), fitted(64, 32*S))`` where the buffer's size falls
        below its alignment somewhere in the piece (``fitted_alignment``:
        the next power of two of the size there); ``0`` at the bottom."""
        buffer = self.problem.buffers[index]
        names = [f"end({self.problem.buffers[c].name})" for c in self.pieces[piece].below[index]]
        if not names:
            return "0"
        top = names[0] if len(names) == 1 else f"max({', '.join(names)})"
        fixed = buffer.fixed_alignment(self.pieces[piece].ranges)
        if fixed == 1:
            return top
        return f"align({top}, {fixed if fixed is not None else f'fitted({buffer.alignment}, {buffer.size})'})"

    def piece_pool_expr(self, piece: int) -> str:
        """Piece ``piece``'s pool size as a formula: the max of the ends of
        the buffers no other buffer sits on there."""
        under = {c for cs in self.pieces[piece].below for c in cs}
        tops = [f"end({b.name})" for i, b in enumerate(self.problem.buffers) if i not in under]
        if not tops:
            return "0"
        return tops[0] if len(tops) == 1 else f"max({', '.join(tops)})"

    def offset_expr(self, index: int) -> str:
        """Buffer ``index``'s offset as a formula (`piece_offset_expr`);
        piecewise (`piecewise`) when the pieces differ."""
        return self.piecewise([self.piece_offset_expr(k, index) for k in range(len(self.pieces))])

    def pool_expr(self) -> str:
        """The pool size as a formula (`piece_pool_expr`); piecewise
        (`piecewise`) when the pieces differ."""
        return self.piecewise([self.piece_pool_expr(k) for k in range(len(self.pieces))])

    def piecewise(self, formulas: Sequence[str]) -> str:
        """One formula per piece as one text: the formula itself when all
        are the same, else ``S <= 4: A; S <= 32: B; else: C`` (the first
        piece whose bound holds; ``split`` is the symbol)."""
        if len(set(formulas)) == 1:
            return formulas[0]
        name = self.split
        assert name is not None
        parts = [f"{name} <= {piece.ranges[name][1]}: {formula}"
                 for piece, formula in zip(self.pieces[:-1], formulas[:-1], strict=True)]
        return "; ".join([*parts, f"else: {formulas[-1]}"])


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
    """One plan valid for every value in range, in pieces where one layout
    is more than ``SPLIT_THRESHOLD`` over the static plans (see the module
    docstring); verified before it is returned.

    Each piece's layout is the best of these candidates, each from one
    *reference point* (the first, last and quartile check points of the
    piece):
    - the static plans at that point (``STATIC_ALGORITHMS``, and at the
      first and last points also ``SEARCH_ALGORITHM``) made symbolic:
      each buffer sits on the conflicting buffers under it there; valid at
      every point by construction;
    - greedy by size at that point, each buffer in the lowest gap there
      that stays a gap at every point of the range (gaps only when the
      check points are the whole range);
    - the best static plan already made at any other value of the range
      (by the search for cuts), made symbolic the same way.
    The layout kept is the one whose pool is closest to the max-live lower
    bound at its worst check point. Raises
    ``PlanError`` if verification fails (a bug, never expected)."""
    start = time.perf_counter()
    pieces = _Planner(problem).pieces()
    plan = SymbolicPlan(problem, tuple(pieces), (time.perf_counter() - start) * 1e3)
    verify_symbolic_plan(plan)
    return plan


@dataclass
class _Layout:
    """A piece's layout and what the search for cuts reads off it: the
    piece's scoring grid, and its pool and max-live bound there."""

    piece: Piece
    grid: dict[str, np.ndarray]
    pool: np.ndarray
    bound: np.ndarray


class _Planner:
    """One `plan_symbolic` call: the problem, and the static plans made so
    far (by value and algorithm), which every piece's candidates and the
    search for cuts share."""

    def __init__(self, problem: SymbolicProblem) -> None:
        self.problem = problem
        self.static_plans: dict[tuple[tuple[tuple[str, int], ...], str], Plan] = {}
        self.stacked_layouts: dict[tuple[tuple[tuple[str, int], ...], str], _Shape] = {}
        """The static plans made symbolic (`_stacked`), by the key of `static_plans`."""
        self.grid = _grid(problem)
        self.sizes = [b.size.evaluate_grid(self.grid) for b in problem.buffers]
        self.alignments = _alignments(problem, self.sizes)
        self.overlapping = _overlapping(problem)
        """Every buffer's conflicts (the same over every part of the range)."""
        self.pools: dict[_Shape, np.ndarray] = {}
        """Every layout's pool over the whole problem's grid, computed once:
        a pool at a value depends on that value alone, so a part of the
        range reads its values off it (`pool`)."""
        self.matrices: tuple[np.ndarray, np.ndarray] | None = None
        """The sizes and alignments as arrays (a row per buffer) for the native pool (`_whole_pool`)."""
        self.conflicts: list[list[int]] | None = None
        """Every buffer's conflicts but itself, sorted, for the native greedy (`greedy`)."""
        self.checks_left = STATIC_CHECKS
        self.searches_left = SEARCH_CHECKS
        self.prepared: dict[tuple[tuple[str, int], ...], PreparedProblem] = {}
        """The static problem at each value plans were made at, prepared once
        for all the planners (its checks, conflict lists and bound computed once)."""

    def static(self, values: Mapping[str, int], algorithm: str) -> Plan:
        """The static plan at `values` by `algorithm` (made once)."""
        key = (tuple(sorted(values.items())), algorithm)
        if key not in self.static_plans:
            point = key[0]
            if point not in self.prepared:
                self.prepared[point] = PreparedProblem(self.problem.at(values))
            prep = self.prepared[point]
            self.static_plans[key] = _search(prep) if algorithm == SEARCH_ALGORITHM else _heuristic(prep, algorithm)
        return self.static_plans[key]

    def stacked(self, values: Mapping[str, int], plan: Plan) -> _Shape:
        """`_stacked` of `plan`, the static plan at `values` made by
        `static` (made once: it does not depend on the range it is used over)."""
        key = (tuple(sorted(values.items())), plan.algorithm)
        if key not in self.stacked_layouts:
            sizes = [b.size for b in self.prepared[key[0]].problem.buffers]  # the static problem's there
            self.stacked_layouts[key] = _stacked(self.problem, sizes, plan)
        return self.stacked_layouts[key]

    def pool(self, grid: Mapping[str, np.ndarray], sizes: list[np.ndarray], layout: _Shape) -> np.ndarray:
        """`layout`'s pool at every point of `grid` (the grid of the problem
        or of a part of its range; `sizes` there): read off its pool over
        the whole problem's grid (`pools`) where that grid holds every
        point of `grid` (one symbol: a range of at most ``GRID_LIMIT``
        values, whose grid is every value), else computed (`_pool`; no
        buffers: one zero, whatever the grid)."""
        index = self._grid_index(grid)
        if index is None or not sizes:
            return _pool(sizes, _alignments(self.problem, sizes), *layout)
        if layout not in self.pools:
            self.pools[layout] = self._whole_pool(layout)
        return self.pools[layout][index]

    def _whole_pool(self, layout: _Shape) -> np.ndarray:
        """`_pool` of `layout` over the whole problem's grid: natively
        (pyocc.runtime.planner_native, the same numbers, a third of the
        time) once the hill climb has compiled it in this process."""
        from pyocc.runtime import planner_native  # loaded by the hill climb, if at all

        below, order = layout
        if not self.sizes or not planner_native.compiled() or len(order) != len(self.sizes):
            return _pool(self.sizes, self.alignments, below, order)
        if self.matrices is None:
            self.matrices = _matrices(self.sizes, self.alignments)
        return planner_native.stacked_pool(*self.matrices, below, order)

    def greedy(self, problem: SymbolicProblem, sizes: list[np.ndarray], alignments: Sequence[int | np.ndarray],
               references: Sequence[int], use_gaps: bool) -> list[_Shape]:
        """`_greedy`'s layout at each of `references`: natively
        (pyocc.runtime.planner_native, the same layouts) once the hill
        climb has compiled it in this process."""
        from pyocc.runtime import planner_native  # loaded by the hill climb, if at all

        if not sizes or not planner_native.compiled():
            return [_greedy(problem, sizes, alignments, self.overlapping, r, use_gaps) for r in references]
        if self.conflicts is None:
            self.conflicts = [sorted(c for c in overlapping if c != i)
                              for i, overlapping in enumerate(self.overlapping)]
        matrices = _matrices(sizes, alignments)
        shapes = []
        for reference in references:
            order = _greedy_order(problem, sizes, reference)
            shapes.append((planner_native.stacked_greedy(*matrices, self.conflicts, order, reference, use_gaps),
                           tuple(order)))
        return shapes

    def _grid_index(self, grid: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """The positions of `grid`'s points in the whole problem's grid, or
        None where that grid lacks one of them (or there are several symbols)."""
        if len(grid) != 1 or len(self.grid) != 1:
            return None
        (name, values), = grid.items()
        whole = self.grid[name]
        index = np.searchsorted(whole, values)
        if np.any(index >= len(whole)) or not np.array_equal(whole[np.minimum(index, len(whole) - 1)], values):
            return None
        return index

    def best_made(self, problem: SymbolicProblem) -> dict[tuple[tuple[str, int], ...], Plan]:
        """The smallest static plan made so far at each value within
        `problem`'s range (by value)."""
        best: dict[tuple[tuple[str, int], ...], Plan] = {}
        for (key, _), plan in self.static_plans.items():
            inside = all(low <= dict(key)[name] <= high for name, (low, high) in problem.ranges.items())
            if inside and (key not in best or plan.pool_size < best[key].pool_size):
                best[key] = plan
        return best

    def algorithms(self) -> tuple[str, ...]:
        """The static planners a value's best static plan is the best of."""
        search = len(self.problem.buffers) <= SEARCH_BUFFER_LIMIT
        return (*STATIC_ALGORITHMS, *((SEARCH_ALGORITHM,) if search else ()))

    def pieces(self) -> list[Piece]:
        """The plan's pieces: the whole range, cut where a piece is more than
        ``SPLIT_THRESHOLD`` over the best static plan (module docstring)."""
        layouts = [self.layout(self.problem)]
        if len(self.problem.symbols) != 1:
            return [layouts[0].piece]
        while len(layouts) < MAX_PIECES:
            bad = [self.bad_values(layout) for layout in layouts]
            worst = [max(b.values(), default=0.0) for b in bad]
            cuttable = [k for k, layout in enumerate(layouts) if bad[k] and _width(layout.piece) > 1]
            if not cuttable:
                break
            k = max(cuttable, key=lambda j: (worst[j], -j))
            parts = self.cut(layouts[k], bad[k], worst[k])
            if parts is None:
                break  # no cut helps: keep one piece there
            layouts[k:k + 1] = parts
        layouts = [self.retouch(layout) for layout in layouts]
        pieces = [layout.piece for layout in layouts]
        return self.segmented(pieces, any(self.bad_values(layout) for layout in layouts))

    def segmented(self, pieces: list[Piece], bad: bool) -> list[Piece]:
        """`pieces` (the cut search's; `bad`: one of them is still bad), or the best segmentation of the
        range into at most ``MAX_PIECES`` pieces, each with one of the
        static plans made so far made symbolic (`best_made`, `_stacked`:
        valid at every value), when that is better over the whole range
        (`_segment`, against the bound plus the alignment slack as
        `_layout_score` does): its worst ratio is lower, or, while a piece
        is still bad, as low with a lower mean. The cut search cuts one piece at a time
        where its bad values suggest; where a piece is bad at every scale
        it peeled single values off its ends: DistilBERT (classic, batch
        2) got 1, 2..8, 9 and 10..512, 1.043x at S = 128, where one layout
        is within 0.5% over 1..24, one over 24..128 and one over 64..512."""
        problem = self.problem
        if not problem.buffers:
            return pieces
        grid = self.grid
        (name, values), = grid.items()
        sizes = self.sizes
        bound = _max_live(problem, sizes)
        slack = _slack(problem, sizes)
        layouts = []
        seen: set[bytes] = set()
        for key, plan in sorted(self.best_made(problem).items()):
            below, order = self.stacked(dict(key), plan)
            pool = self.pool(grid, sizes, (below, order))
            if pool.tobytes() not in seen:  # one of the layouts with the same pools
                seen.add(pool.tobytes())
                layouts.append((below, order, pool))
        if not layouts:
            return pieces
        ratios = np.array([pool for _, _, pool in layouts], dtype=np.float64) / (bound + slack)
        # pieces end at the ends of runs of grid points, every value up to
        # SEGMENT_RESOLUTION, then ever longer runs (the same share of the value)
        low = problem.ranges[name][0]
        keys = np.floor(np.log(values - low + 1) * SEGMENT_RESOLUTION).astype(np.int64)
        blocks = np.split(np.arange(len(values)), np.flatnonzero(np.diff(keys)) + 1)
        segments = [(int(blocks[i][0]), int(blocks[j][-1]), k) for i, j, k in _segment(
            np.stack([ratios[:, b].max(axis=1) for b in blocks], axis=1),
            np.stack([ratios[:, b].sum(axis=1) for b in blocks], axis=1), MAX_PIECES)]
        current = np.zeros(len(values), dtype=np.int64)
        for piece in pieces:
            low, high = piece.ranges[name]
            inside = (values >= low) & (values <= high)
            current[inside] = self.pool(grid, sizes, (piece.below, piece.order))[inside]
        chosen = np.concatenate([ratios[k, i:j + 1] for i, j, k in segments])
        mine = current / (bound + slack)
        worse = chosen.max() > mine.max() or (chosen.max() == mine.max() and (not bad or chosen.mean() >= mine.mean()))
        if worse:
            return pieces
        low, high = problem.ranges[name]
        result = []
        for n, (i, j, k) in enumerate(segments):
            top = high if n == len(segments) - 1 else int(values[j])
            result.append(Piece({name: (low, top)}, layouts[k][0], layouts[k][1]))
            low = top + 1
        return result

    def retouch(self, layout: _Layout) -> _Layout:
        """`layout`, or, when it is still bad somewhere (no more cuts, or none
        helped), the search's static plan at its worst value made symbolic
        over the piece, if that scores better (`_layout_score`). The search
        for cuts runs the search only where the heuristic static plans leave
        a value good, so at a value they leave bad there was none to be a
        candidate: T5's last piece 1..6 kept 1,540 B at S = 2, the search's
        plan there 1,412 B and no larger at any other value of the piece."""
        bad = self.bad_values(layout)
        if not bad or len(self.problem.buffers) > SEARCH_BUFFER_LIMIT:
            return layout
        (name, _), = layout.piece.ranges.items()
        worst = min(bad, key=lambda v: (-bad[v], v))
        problem = self.problem.within(layout.piece.ranges)
        sizes = [b.size.evaluate_grid(layout.grid) for b in problem.buffers]
        below, order = self.stacked({name: worst}, self.static({name: worst}, SEARCH_ALGORITHM))
        pool = self.pool(layout.grid, sizes, (below, order))
        slack = _slack(problem, sizes)
        if _layout_score(pool, layout.bound, slack) < _layout_score(layout.pool, layout.bound, slack):
            return _Layout(Piece(dict(layout.piece.ranges), below, order), layout.grid, pool, layout.bound)
        return layout

    def bad_values(self, layout: _Layout) -> dict[int, float]:
        """value -> pool / best static pool at the values of the piece's
        (one-symbol) grid where that ratio exceeds ``1 + SPLIT_THRESHOLD``.
        Only values whose pool exceeds the max-live bound by the threshold
        can be (a static plan is never below the bound); static plans are
        made at most at ``STATIC_CHECKS`` values per problem (the search at
        ``SEARCH_CHECKS`` of them), spread over
        the scales: the worst against the bound in each octave of the range
        (1, 2..3, 4..7, ...) first, then the second worst of each, and so on
        (ranked by the bound alone, a run of bad values at one scale spent
        every check, and LLaMA's S = 2 was never looked at)."""
        (name, values), = layout.grid.items()
        limit = 1.0 + SPLIT_THRESHOLD
        assert self.problem.symbols == (name,)
        suspects = np.flatnonzero(layout.pool > limit * layout.bound)
        by_ratio = sorted(suspects, key=lambda j: (-float(layout.pool[j] / layout.bound[j]), int(values[j])))
        low = self.problem.ranges[name][0]
        seen: dict[int, int] = {}
        rank: dict[int, int] = {}
        for j in by_ratio:
            octave = (int(values[j]) - low + 1).bit_length()
            rank[j] = seen[octave] = seen.get(octave, -1) + 1
        ranked = sorted(by_ratio, key=lambda j: rank[j])  # stable: worst first within a rank
        result: dict[int, float] = {}
        for j in ranked:
            value = int(values[j])
            if (((name, value),), STATIC_ALGORITHMS[0]) not in self.static_plans:  # the key static() makes
                if self.checks_left == 0:
                    continue
                self.checks_left -= 1
            pool = int(layout.pool[j])
            # the search (the slow one) only where the heuristics leave the value good,
            # at most at SEARCH_CHECKS values
            best = min(self.static({name: value}, a).pool_size for a in STATIC_ALGORITHMS)
            searched = (((name, value),), SEARCH_ALGORITHM) in self.static_plans
            if pool <= limit * best and (searched or self.searches_left > 0):
                self.searches_left -= not searched
                best = min(self.static({name: value}, a).pool_size for a in self.algorithms())
            if pool > limit * best:
                result[value] = pool / max(best, 1)
        return result

    def cut(self, layout: _Layout, bad: Mapping[int, float], worst: float) -> list[_Layout] | None:
        """The piece of `layout` cut in two around its bad values (module
        docstring), each part with its own layout: the first cut, in the
        order of ``_cut_points``, that makes things better: its parts' worst
        ratio is below `worst` (the piece's), or, when that is above
        ``1 + FIX_THRESHOLD``, no higher and their bad values' total excess
        over the static plans is smaller (one part fixed, the other left for
        a later cut); None when none does."""
        (name, (low, high)), = layout.piece.ranges.items()
        for last in _cut_points(bad, low, high):
            parts = [self.part(layout, self.problem.within({name: part}))
                     for part in ((low, last), (last + 1, high))]
            ratios = [ratio for part in parts for ratio in self.bad_values(part).values()]
            # the piece against the static plans made so far (planning the parts made more)
            before = self.bad_values(layout).values()
            worst = max(before, default=worst)
            if max(ratios, default=0.0) < worst or (worst > 1.0 + FIX_THRESHOLD and max(ratios) <= worst
                                                     and sum(r - 1.0 for r in ratios) < sum(r - 1.0 for r in before)):
                return parts
        return None

    def part(self, layout: _Layout, part: SymbolicProblem) -> _Layout:
        """`part`'s own layout, or `layout`'s piece's, which still holds over
        it, when the part's own is no closer to the static plans."""
        planned = self.layout(part)
        grid = _grid(part)
        sizes = [b.size.evaluate_grid(grid) for b in part.buffers]
        kept = _Layout(Piece(dict(part.ranges), layout.piece.below, layout.piece.order), grid,
                       self.pool(grid, sizes, (layout.piece.below, layout.piece.order)), _max_live(part, sizes))
        worst = [max(self.bad_values(c).values(), default=0.0) for c in (planned, kept)]
        return planned if worst[0] < worst[1] else kept

    def layout(self, problem: SymbolicProblem) -> _Layout:
        """The best candidate layout over `problem`'s range (`plan_symbolic`)."""
        grid = _grid(problem)
        sizes = [b.size.evaluate_grid(grid) for b in problem.buffers]
        bound = _max_live(problem, sizes)
        length = len(bound)
        references = sorted({length - 1, 0, length // 4, length // 2, (3 * length) // 4})
        points = [{name: int(grid[name][r]) for name in problem.symbols} for r in references]
        alignments = _alignments(problem, sizes)
        shapes = self.greedy(problem, sizes, alignments, references, use_gaps=problem.points() <= GRID_LIMIT)
        shapes += [self.stacked(point, self.static(point, algorithm))
                   for point in points for algorithm in STATIC_ALGORITHMS]
        if len(problem.buffers) <= SEARCH_BUFFER_LIMIT:
            # at the top, where the memory is, and at the bottom, where the padding is: the
            # heuristics' layouts there can be a line per buffer above the search's (T5 at
            # S = 2: 1,476 B for 1..6, the search's plan at 2 1,412 B)
            shapes += [self.stacked(point, self.static(point, SEARCH_ALGORITHM))
                       for point in ([points[0], points[-1]] if len(points) > 1 else points)]
        # the best static plan already made at any other value of the range
        # (the search for cuts makes them where a piece is bad): a layout
        # good there is often good over a part of the range
        references = {tuple(sorted(point.items())) for point in points}
        for key, plan in self.best_made(problem).items():
            if key not in references:
                shapes.append(self.stacked(dict(key), plan))
        candidates = [(*shape, self.pool(grid, sizes, shape)) for shape in shapes]
        # alignment padding (at most one alignment per buffer) is all there is
        # to a plan at tiny sizes: score the ratio over the bound plus that slack,
        # so that bytes of padding at S = 1 do not outweigh percent at S = 512
        slack = _slack(problem, sizes)
        best: tuple[tuple[float, float], tuple[tuple[int, ...], ...], tuple[int, ...], np.ndarray] | None = None
        for below, order, pool in candidates:
            score = _layout_score(pool, bound, slack)
            if best is None or score < best[0]:
                best = (score, below, order, pool)
        assert best is not None
        return _Layout(Piece(dict(problem.ranges), best[1], best[2]), grid, best[3], bound)


def _heuristic(prep: PreparedProblem, algorithm: str) -> Plan:
    """``plan_memory(prep.problem, algorithm)`` for one of
    ``STATIC_ALGORITHMS``: the same plan, on a problem prepared once for
    all of them (`_Planner.static`). Verified like every static plan."""
    start = time.perf_counter()
    offsets = HEURISTICS[algorithm](prep)
    pool = prep.pool_size(offsets)
    plan = Plan(prep.offsets_by_name(offsets), pool, algorithm, pool <= lower_bound(prep), 0.0)
    verify_plan(prep.problem, plan)
    return Plan(plan.offsets, pool, algorithm, plan.optimal, (time.perf_counter() - start) * 1e3)


def _search(prep: PreparedProblem) -> Plan:
    """``plan_memory(prep.problem, SEARCH_ALGORITHM)``, the same plan, sooner:
    the hill climb stops at ``packed_lower_bound`` where that is above
    ``lower_bound`` (where sizes are not multiples of the alignment the
    search often ends a few bytes above ``lower_bound`` and then ran all its
    2,000 steps; classic BERT's problem at S = 255: 1,398,468 B against
    1,398,464). A stop bound never changes the result (see
    ``hill_climb_offsets``). Verified like every static plan."""
    start = time.perf_counter()
    bound = max(lower_bound(prep), packed_lower_bound(prep))
    offsets = hill_climb_offsets(prep, time_budget_ms=SEARCH_BUDGET_MS, bound=bound)
    pool = prep.pool_size(offsets)
    plan = Plan(prep.offsets_by_name(offsets), pool, SEARCH_ALGORITHM, pool <= bound, 0.0)
    verify_plan(prep.problem, plan)
    return Plan(plan.offsets, pool, SEARCH_ALGORITHM, plan.optimal, (time.perf_counter() - start) * 1e3)


def _slack(problem: SymbolicProblem, sizes: list[np.ndarray]) -> np.ndarray:
    """The most alignment padding a plan can hold at every grid point (one
    alignment less a byte per buffer, its alignment there: a buffer smaller
    than its alignment gets less, ``fitted_alignment``), at least 1."""
    slack = np.zeros(len(sizes[0]) if sizes else 1, dtype=np.int64)
    for fitted in _alignments(problem, sizes):
        slack += fitted - 1
    return np.maximum(slack, 1)


def _layout_score(pool: np.ndarray, bound: np.ndarray, slack: np.ndarray) -> tuple[float, float]:
    """How far a candidate layout's pool (at every grid point) is from the
    max-live bound plus the alignment slack: its worst ratio, then, among
    layouts with the same worst, its mean ratio. The worst is usually at the
    top of the range, where the memory is and many layouts tie; without the
    mean, the first of them was kept even where another was smaller at every
    other value (T5's part 1..6: the search's plan at 6 kept, 1,540 B at
    S = 2, where the search's plan at 2, 1,412 B, was as good at 6)."""
    ratio = pool / (bound + slack)
    return float(np.max(ratio)), float(np.mean(ratio))


def _segment(maxima: np.ndarray, sums: np.ndarray, most: int) -> list[tuple[int, int, int]]:
    """The segmentation of the blocks (columns; one row per layout: its
    largest ratio and its sum of ratios in each block) into at most `most`
    runs of consecutive blocks ``(first, last, layout)`` whose largest
    ratio is smallest, then, among those, whose sum of ratios is smallest,
    then with the fewest runs: two dynamic programs over the runs' ends,
    the second keeping only runs within the first's optimum."""
    count, n = maxima.shape
    after = np.arange(n)[None, :] >= np.arange(n)[:, None]  # [first, last]: last >= first
    worst = np.full((n, n), np.inf)
    for row in maxima:
        worst = np.minimum(worst, np.where(after, np.maximum.accumulate(np.where(after, row[None, :], -np.inf),
                                                                        axis=1), np.inf))
    optimum = _best_split(worst, most, np.maximum)[0]
    # the sum of each layout's ratios over [first, last], where its worst there is within the optimum
    within = np.full((n, n), np.inf)
    chosen = np.zeros((n, n), dtype=np.int64)
    totals = np.concatenate([np.zeros((count, 1)), np.cumsum(sums, axis=1)], axis=1)
    for k, row in enumerate(maxima):
        running = np.maximum.accumulate(np.where(after, row[None, :], -np.inf), axis=1)
        total = np.where(after & (running <= optimum * (1 + 1e-12)), totals[k][None, 1:] - totals[k][:, None][:n],
                         np.inf)
        better = total < within
        within = np.where(better, total, within)
        chosen = np.where(better, k, chosen)
    _, ends = _best_split(within, most, np.add)
    segments = []
    last = n - 1
    for first in ends:
        segments.append((first, last, int(chosen[first, last])))
        last = first - 1
    return segments[::-1]


def _best_split(cost: np.ndarray, most: int, combine: np.ufunc) -> tuple[float, list[int]]:
    """The split of ``0..n-1`` into at most `most` segments with the least
    total (`combine`: maximum or add) of ``cost[first, last]``, fewest
    segments on ties: (that total, the segments' firsts from the last
    segment back)."""
    n = cost.shape[0]
    best = cost[0].copy()  # best[j]: 0..j in one segment
    starts = [np.zeros(n, dtype=np.int64)]
    tables = [best]
    for _ in range(most - 1):
        # previous[i - 1] combined with cost[i, j], for i >= 1
        candidates = combine(tables[-1][:-1, None], cost[1:, :])
        first = np.argmin(candidates, axis=0)
        value = candidates[first, np.arange(n)]
        improved = value < tables[-1]
        tables.append(np.where(improved, value, tables[-1]))
        starts.append(np.where(improved, first + 1, -1))
    total = float(tables[-1][n - 1])
    ends: list[int] = []
    j, level = n - 1, len(tables) - 1
    while j >= 0:
        while level > 0 and starts[level][j] < 0:
            level -= 1
        first = int(starts[level][j]) if level > 0 else 0
        ends.append(first)
        j, level = first - 1, level - 1
    return total, ends


def _cut_points(bad: Mapping[int, float], low: int, high: int) -> list[int]:
    """Where to try cutting a piece ``[low, high]`` with these bad values (a
    cut at k makes ``[low, k]`` and ``[k + 1, high]``), in order: just above
    the last bad value (when the bad values are a prefix, one piece for them
    and one for the rest), else just below the first, else just above the
    worst; then, when the bad values spread over the piece so that the first
    cut leaves them together, the lowest bad value alone (or with what lies
    below it), so that the smallest values, where alignment padding is most
    of the pool, get a layout of their own."""
    values = sorted(bad)
    if values[-1] < high:
        first = values[-1]
    elif values[0] > low:
        first = values[0] - 1
    else:
        first = _widest_gap(values) or min(min(values, key=lambda v: (-bad[v], v)), high - 1)
    points = [first]
    if values[0] < high and values[0] not in points:
        points.append(values[0])
    return points


def _widest_gap(values: Sequence[int]) -> int | None:
    """The bad value below the widest gap between two consecutive bad values
    (sorted), by ratio, when the next is at least twice it: a cut there
    separates small values from large ones, each part with a layout of its
    own; None when there is no such gap. (Cutting just above the worst
    value instead peeled DistilBERT's bad 6..20 and 59..512 one or two
    values at a time: pieces 6, 7..8 and 9..512, the last still 1.11x at
    S = 17.)"""
    gaps = [(b / max(a, 1), a) for a, b in itertools.pairwise(values) if b >= 2 * max(a, 1)]
    return max(gaps)[1] if gaps else None


def _width(piece: Piece) -> int:
    """How many values a piece holds."""
    return math.prod(high - low + 1 for low, high in piece.ranges.values())


def _stacked(problem: SymbolicProblem, sizes: Sequence[int], plan: Plan) -> _Shape:
    """(below, order) of `plan`, a static plan of the problem at a point
    where its buffers' sizes are `sizes`, made symbolic: every buffer sits
    on the conflicting buffers under it in that plan. Sorted by (offset, end),
    one of any two conflicting buffers is under the other, so the result is
    valid at every point, and at the static plan's own point it is no larger.
    (Every pair at once with numpy: buffer ``c`` is under ``i`` when it comes
    before ``i`` in that order, their live ranges overlap and ``c`` ends at
    or below ``i``'s offset.)"""
    buffers = problem.buffers
    start = [plan.offsets[b.name] for b in buffers]
    ends = [offset + size for offset, size in zip(start, sizes, strict=True)]
    order = sorted(range(len(buffers)), key=lambda i: (start[i], ends[i], i))
    position = np.empty(len(buffers), dtype=np.int64)
    position[order] = np.arange(len(buffers))
    firsts, lasts = _lifetimes(problem)
    # rows c, columns i
    under = ((position[:, None] < position[None, :]) & (firsts[:, None] <= lasts[None, :])
             & (firsts[None, :] <= lasts[:, None])
             & (np.array(ends, dtype=np.int64)[:, None] <= np.array(start, dtype=np.int64)[None, :]))
    sits_on: list[list[int]] = [[] for _ in buffers]
    for c, i in zip(*(pairs.tolist() for pairs in np.nonzero(under)), strict=True):  # by c, so each list sorted
        sits_on[i].append(c)
    return tuple(tuple(cs) for cs in sits_on), tuple(order)


def _lifetimes(problem: SymbolicProblem) -> tuple[np.ndarray, np.ndarray]:
    """Every buffer's first and last step, as arrays."""
    return (np.array([b.first for b in problem.buffers], dtype=np.int64),
            np.array([b.last for b in problem.buffers], dtype=np.int64))


def _pool(sizes: list[np.ndarray], alignments: Sequence[int | np.ndarray], below: Sequence[tuple[int, ...]],
          order: Sequence[int]) -> np.ndarray:
    """The pool size at every grid point of a plan given by `below` and `order`
    (`sizes` and `alignments`, `_alignments`, at those points; every buffer's
    ends in an array of its own: a below-set holds four buffers on average,
    and the maxima of a few arrays cost less than gathering rows of one;
    this runs for every candidate layout)."""
    if not sizes:
        return np.zeros(1, dtype=np.int64)
    ends: list[np.ndarray] = [sizes[0]] * len(sizes)
    for i in order:
        ends[i] = _aligned_top([ends[c] for c in below[i]], alignments[i], sizes[i]) + sizes[i]
    return np.max(ends, axis=0)


def _alignments(problem: SymbolicProblem, sizes: list[np.ndarray]) -> list[int | np.ndarray]:
    """Every buffer's alignment at the points of `sizes` (`_fitted_alignments`)."""
    return [_fitted_alignments(b.alignment, size) for b, size in zip(problem.buffers, sizes, strict=True)]


def _max_live(problem: SymbolicProblem, sizes: list[np.ndarray]) -> np.ndarray:
    """The max-live lower bound at every grid point: the live total peaks
    where some buffer starts or ends, so at those steps, each buffer added
    at its first and taken away after its last (a running sum over them)."""
    steps = sorted({s for b in problem.buffers for s in (b.first, b.last)})
    if not steps:
        return np.zeros(len(sizes[0]) if sizes else 1, dtype=np.int64)
    index = {step: k for k, step in enumerate(steps)}
    change = np.zeros((len(steps) + 1, len(sizes[0])), dtype=np.int64)
    for buffer, size in zip(problem.buffers, sizes, strict=True):
        change[index[buffer.first]] += size
        change[index[buffer.last] + 1] -= size
    return np.cumsum(change[:-1], axis=0).max(axis=0)


def _greedy(problem: SymbolicProblem, sizes: list[np.ndarray], alignments: Sequence[int | np.ndarray],
            overlapping: Sequence[set[int]], reference: int, use_gaps: bool) -> _Shape:
    """(below, order) of greedy by size at the grid point `reference`
    (`sizes` and `alignments`, `_alignments`, at the grid's points;
    `overlapping`, `_overlapping`, the buffers' conflicts)."""
    buffers = problem.buffers
    order = _greedy_order(problem, sizes, reference)
    offsets: dict[int, np.ndarray] = {}
    ends: dict[int, np.ndarray] = {}
    below: list[tuple[int, ...]] = [()] * len(buffers)
    for i in order:
        conflicts = sorted(c for c in overlapping[i] if c in ends)
        chosen: tuple[int, ...] = tuple(conflicts)
        if use_gaps and conflicts:
            chosen = _lowest_gap(conflicts, offsets, ends, sizes[i], alignments[i], reference) or chosen
        below[i] = chosen
        offsets[i] = _aligned_top([ends[c] for c in chosen], alignments[i], sizes[i])
        ends[i] = offsets[i] + sizes[i]
    return tuple(below), tuple(order)


def _matrices(sizes: list[np.ndarray], alignments: Sequence[int | np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """`sizes` and `alignments` (`_alignments`) as the native planner code
    takes them (pyocc.runtime.planner_native): int64 arrays, a row per
    buffer and a column per grid point."""
    points = len(sizes[0])
    return np.stack(sizes), np.stack([np.broadcast_to(alignment, points) for alignment in alignments])


def _greedy_order(problem: SymbolicProblem, sizes: list[np.ndarray], reference: int) -> list[int]:
    """`_greedy`'s order: by size at grid point `reference`, largest first,
    then the longest lived, then by index."""
    buffers = problem.buffers
    return sorted(range(len(buffers)),
                  key=lambda i: (-int(sizes[i][reference]), -(buffers[i].last - buffers[i].first), i))


def _overlapping(problem: SymbolicProblem) -> list[set[int]]:
    """Every buffer's conflicts: the buffers whose live range overlaps its own (itself included)."""
    firsts, lasts = _lifetimes(problem)
    return [set(np.flatnonzero((firsts <= b.last) & (lasts >= b.first)).tolist()) for b in problem.buffers]


def _fitted_alignments(alignment: int, size: np.ndarray) -> int | np.ndarray:
    """``fitted_alignment(alignment, size)`` point by point: `alignment`
    itself where the size is never smaller (most buffers), else an array."""
    if alignment == 1 or size.min() >= alignment:
        return alignment
    fitted = np.full(size.shape, alignment, dtype=np.int64)
    power = 1 << (alignment - 1).bit_length() - 1  # the largest power of two below `alignment`
    while power >= 1:
        fitted[size <= power] = power
        power //= 2
    return fitted


def _aligned(top: np.ndarray, fitted: int | np.ndarray) -> np.ndarray:
    """`top` (not negative) rounded up to a multiple of `fitted`, a
    buffer's alignment at each point (`_fitted_alignments`)."""
    if isinstance(fitted, int) and fitted & (fitted - 1) == 0:  # a power of two: a mask (division is slower)
        return (top + (fitted - 1)) & -fitted
    return -(-top // fitted) * fitted


def _aligned_top(ends: Sequence[np.ndarray], fitted: int | np.ndarray, size: np.ndarray) -> np.ndarray:
    """align(max(ends), `fitted`) point by point (zeros when there are none;
    `size`: the buffer's sizes, for their number of points)."""
    if not ends:
        return np.zeros(len(size), dtype=np.int64)
    top = ends[0]
    for end in ends[1:]:
        top = np.maximum(top, end)
    return _aligned(top, fitted)


def _lowest_gap(conflicts: list[int], offsets: dict[int, np.ndarray], ends: dict[int, np.ndarray],
                size: np.ndarray, fitted: int | np.ndarray, reference: int) -> tuple[int, ...] | None:
    """The buffers to sit on for the lowest offset at grid point `reference`
    that is a gap at every point for a buffer of `size` bytes aligned to
    `fitted` (at each point): the candidates are the bottom and the ends
    of the conflicting buffers, lowest first; None when only the top of
    them all works. A candidate sits on the conflicts that end at or below
    it at `reference`: with the conflicts sorted by that end, a prefix,
    whose top there is the prefix's last end. A candidate that is no gap at
    `reference` is none at every point: only those that are (a buffer has
    four conflicts on average, so this is a few integers) are checked at
    every point, with numpy."""
    by_end = sorted(conflicts, key=lambda c: int(ends[c][reference]))
    at = [int(ends[c][reference]) for c in by_end]
    floors_at = list(itertools.accumulate(reversed([int(offsets[c][reference]) for c in by_end]), min))[::-1]
    alignment = fitted if isinstance(fitted, int) else int(fitted[reference])
    size_at = int(size[reference])
    for m in sorted({bisect.bisect_right(at, value) for value in (0, *at)}):
        if m == len(by_end):
            return None
        top_at = at[m - 1] if m else 0
        if -(-top_at // alignment) * alignment + size_at > floors_at[m]:
            continue  # no gap at the reference point
        top = functools.reduce(np.maximum, (ends[c] for c in by_end[:m]), np.zeros(len(size), dtype=np.int64))
        floor = functools.reduce(np.minimum, (offsets[c] for c in by_end[m:]))
        if np.all(_aligned(top, fitted) + size <= floor):
            return tuple(sorted(by_end[:m]))
    return None


def verify_symbolic_plan(plan: SymbolicPlan) -> None:
    """Raise ``PlanError`` unless the pieces cover the problem's range
    exactly, in order, cutting one symbol, and every piece's layout is
    valid at every check point of its sub-range
    (``SymbolicProblem.check_points``), naming the values."""
    _check_pieces(plan)
    for index, piece in enumerate(plan.pieces):
        points = plan.piece_problem(index).check_points()
        bad = _first_invalid(plan.problem, piece, points)
        if bad is None:
            continue
        point = points[bad]
        try:
            verify_plan(plan.problem.at(point), plan.at(point))
        except PlanError as error:
            raise PlanError(f"at {_show(point)}: {error}") from None
        raise PlanError(f"at {_show(point)}: the plan breaks a placement rule (found by the check at all points, "
                        "missed by verify_plan: a bug)")


VERIFY_CHUNK = 1024
"""Points the plan check evaluates at once (bounds its arrays: buffers x points)."""


def _first_invalid(problem: SymbolicProblem, piece: Piece, points: Sequence[Mapping[str, int]]) -> int | None:
    """The index of the first of `points` where `piece`'s layout breaks one
    of ``verify_plan``'s rules (an offset negative or not a multiple of its
    buffer's alignment there, ``fitted_alignment``, a buffer beyond the pool, two non-empty buffers
    live at a common step sharing a byte), or None. The offsets are
    evaluated like ``SymbolicPlan.offsets``, one array over the points per
    buffer (the layout is well formed: ``_check_pieces``), and every pair of
    buffers with overlapping live ranges is compared at every point, with
    numpy, ``VERIFY_CHUNK`` points at a time."""
    buffers = problem.buffers
    if not buffers:
        return None
    firsts = np.array([b.first for b in buffers])
    lasts = np.array([b.last for b in buffers])
    overlapping = [np.flatnonzero((firsts[:i] <= lasts[i]) & (lasts[:i] >= firsts[i])) for i in range(len(buffers))]
    for start in range(0, len(points), VERIFY_CHUNK):
        chunk = points[start:start + VERIFY_CHUNK]
        grid = {name: np.array([p[name] for p in chunk], dtype=np.int64) for name in problem.symbols}
        sizes = np.array([b.size.evaluate_grid(grid) for b in buffers], dtype=np.int64).reshape(len(buffers), -1)
        alignments = np.array([np.broadcast_to(_fitted_alignments(b.alignment, size), size.shape)
                               for b, size in zip(buffers, sizes, strict=True)])
        offsets = np.zeros_like(sizes)
        ends = np.zeros_like(sizes)
        for i in piece.order:
            below = piece.below[i]
            top = ends[list(below)].max(axis=0) if below else np.zeros(len(chunk), dtype=np.int64)
            offsets[i] = -(-top // alignments[i]) * alignments[i]
            ends[i] = offsets[i] + sizes[i]
        pool = ends.max(axis=0)
        invalid = ((offsets < 0) | (offsets % alignments != 0) | (ends > pool)).any(axis=0)
        nonempty = sizes > 0
        for i in range(1, len(buffers)):
            others = overlapping[i]
            if len(others):
                clash = (nonempty[others] & (offsets[others] < ends[i]) & (offsets[i] < ends[others])).any(axis=0)
                invalid |= clash & nonempty[i]
        hits = np.flatnonzero(invalid)
        if len(hits):
            return start + int(hits[0])
    return None


def _check_pieces(plan: SymbolicPlan) -> None:
    """PlanError unless the pieces cut one symbol's range into consecutive
    sub-ranges from its low to its high end, the other symbols whole, and
    every layout has one below-set per buffer and orders every buffer once,
    after those below it."""
    problem = plan.problem
    if not plan.pieces:
        raise PlanError("a symbolic plan needs at least one piece")
    count = len(problem.buffers)
    for index, piece in enumerate(plan.pieces):
        if len(piece.below) != count or sorted(piece.order) != list(range(count)):
            raise PlanError(f"piece {index}: its layout does not place each of the {count} buffers once")
        position = {b: k for k, b in enumerate(piece.order)}
        for i, below in enumerate(piece.below):
            if any(position[c] >= position[i] for c in below):
                raise PlanError(f"piece {index}: buffer {problem.buffers[i].name!r} is ordered before a buffer "
                                "it sits on")
        if set(piece.ranges) != set(problem.ranges):
            raise PlanError(f"piece {index}: its ranges name other symbols than the problem's")
    cut = [n for n in problem.symbols if any(p.ranges[n] != problem.ranges[n] for p in plan.pieces)]
    if len(plan.pieces) > 1 and len(cut) != 1:
        raise PlanError(f"the pieces must cut exactly one symbol's range, not {len(cut)}")
    if len(plan.pieces) == 1 and cut:
        raise PlanError("a plan of one piece must cover the whole range")
    if cut:
        name = cut[0]
        low, high = problem.ranges[name]
        expected = low
        for index, piece in enumerate(plan.pieces):
            first, last = piece.ranges[name]
            if first != expected or last < first:
                raise PlanError(f"piece {index}: {name} in {first}..{last} does not start at {expected}")
            expected = last + 1
        if expected != high + 1:
            raise PlanError(f"the pieces end at {name}={expected - 1}, not at {high}")

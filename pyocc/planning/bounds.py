"""Bounds on the pool size: what no plan can beat, and what no reuse costs.

``lower_bound`` lets ``plan_memory`` stop early and call a plan optimal;
``naive_bytes`` is the baseline a report compares against.
"""

from __future__ import annotations

import math

import numpy as np

from .prepared import PreparedProblem, round_up
from .problem import Problem

# int64 sums are exact below this; above it (absurd, but legal) we sum in Python.
_INT64_SAFE = 2**62


def _busiest_step(prep: PreparedProblem) -> tuple[int, int]:
    """(max-live bytes, a step where it is reached) by a sweep over step events.

    Each buffer adds its size at ``first`` and removes it at ``last + 1``; at
    equal positions removals sort first, so the running sum's maximum is the
    largest total of sizes live at one step.
    """
    if not prep.active:
        return 0, 0
    sizes = [prep.sizes[i] for i in prep.active]
    firsts = [prep.firsts[i] for i in prep.active]
    lasts = [prep.lasts[i] for i in prep.active]
    if sum(sizes) < _INT64_SAFE:
        size = np.array(sizes, dtype=np.int64)
        position = np.concatenate([np.array(firsts, np.int64), np.array(lasts, np.int64) + 1])
        delta = np.concatenate([size, -size])
        order = np.lexsort((delta, position))
        running = np.cumsum(delta[order])
        peak = int(np.argmax(running))
        return int(running[peak]), int(position[order][peak])
    events = sorted(
        [(f, s) for f, s in zip(firsts, sizes)] + [(l + 1, -s) for l, s in zip(lasts, sizes)]
    )
    best, best_step, running = 0, 0, 0
    for step, delta in events:
        running += delta
        if running > best:
            best, best_step = running, step
    return best, best_step


def max_live(problem: Problem | PreparedProblem) -> int:
    """The largest total size of buffers live at the same step."""
    prep = problem if isinstance(problem, PreparedProblem) else PreparedProblem(problem)
    return _busiest_step(prep)[0]


def lower_bound(problem: Problem | PreparedProblem) -> int:
    """A pool size no valid plan can go below.

    Two facts, both proven cheaply:

    1. *Max-live*: buffers live at the same step pairwise overlap, so they
       occupy disjoint bytes; the pool holds at least their total size. (For
       interval lifetimes this is the maximum-weight clique of the conflict
       graph, the best bound of its kind.)
    2. *Alignment at the busiest step*: of the buffers live there, the one
       placed highest, ``b``, sits above all the others (they are disjoint and
       start below it), so its offset is at least ``S - size_b`` rounded up to
       ``b``'s alignment and the pool at least that plus ``size_b``. Which
       buffer is highest is unknown, so the bound takes the minimum over them.
       It equals max-live when no alignment is above 1.
    """
    prep = problem if isinstance(problem, PreparedProblem) else PreparedProblem(problem)
    if prep.lower_bound is None:
        prep.lower_bound = _lower_bound(prep)
    return prep.lower_bound


def _lower_bound(prep: PreparedProblem) -> int:
    """``lower_bound`` without the cache."""
    total, step = _busiest_step(prep)
    live = [
        i for i in prep.active if prep.firsts[i] <= step <= prep.lasts[i]
    ] if any(prep.aligns[i] > 1 for i in prep.active) else []
    if not live:
        return total
    return max(
        total,
        min(round_up(total - prep.sizes[i], prep.aligns[i]) + prep.sizes[i] for i in live),
    )


def packed_lower_bound(problem: Problem | PreparedProblem) -> int:
    """A pool size no valid plan can go below, counting every live buffer's
    alignment padding: often above ``lower_bound`` when sizes are not
    multiples of the alignment (a transformer's ``S x 4`` byte rows at 64).

    Why it holds: every offset is a multiple of ``g``, the greatest common
    divisor of the non-empty buffers' alignments. The buffers live at one
    step occupy disjoint bytes; in the order of their offsets each starts at
    a multiple of ``g`` at or above the previous one's end, so each but the
    highest takes at least its size rounded up to ``g``, and the highest its
    size. The pool is at least the largest, over the steps where a buffer
    starts, of the sum of the live sizes rounded up to ``g`` less the
    largest rounding among them (the best buffer to put highest). Costs
    one pass over the live buffers of each such step (use it where a
    search's time matters, not for every plan; ``lower_bound`` is what
    reports quote)."""
    prep = problem if isinstance(problem, PreparedProblem) else PreparedProblem(problem)
    active = prep.active
    if not active:
        return 0
    unit = 0
    for i in active:
        unit = math.gcd(unit, prep.aligns[i])
    firsts = np.array([prep.firsts[i] for i in active], dtype=np.int64)
    lasts = np.array([prep.lasts[i] for i in active], dtype=np.int64)
    sizes = np.array([prep.sizes[i] for i in active], dtype=object if sum(prep.sizes) >= _INT64_SAFE else np.int64)
    rounded = -(-sizes // unit) * unit
    best = 0
    for step in np.unique(firsts):  # the live set only grows where a buffer starts
        live = (firsts <= step) & (lasts >= step)
        best = max(best, int(rounded[live].sum() - (rounded[live] - sizes[live]).max()))
    return best


def naive_bytes(problem: Problem) -> int:
    """The pool size with no reuse at all: the sum of buffer sizes.

    Alignment padding is not counted (a plan with no reuse could still need
    some); it is the "one allocation per tensor" baseline reports compare to.
    """
    return sum(b.size for b in problem.buffers)

"""The planning algorithms, each a function from a problem to offsets.

Each ``*_offsets`` function takes a ``PreparedProblem`` and returns offsets
indexed like it; ``HEURISTICS`` names them. planner.py's ``ALGORITHMS`` wraps
them (and exact.py's solver, which starts from two of them) as
``Problem -> {name: offset}`` for callers outside the package, and
``plan_memory`` runs them, picks among them for ``auto`` and verifies the
result.

Which algorithm models which system:

* ``occamy-first-fit``  Occamy (DAC 2023): replay malloc/free on a free list.
* ``greedy-by-size``    TFLite arena planner (Pisarchyk & Lee 2020).
* ``best-fit-decreasing``  XLA heap simulator, global decreasing-size best fit.
* ``greedy-by-conflicts``  TVM USMP greedy by conflicts.
* ``hill-climb``        TVM USMP hill climb over placement orders.
* ``long-lived-first``  pyocc's scalable planner for very large problems.
* ``exact``             branch and bound (exact.py), for small problems.
"""

from __future__ import annotations

import heapq
import random
import time
from bisect import bisect_left
from collections.abc import Callable, MutableSequence, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .bounds import lower_bound
from .placement import choose_gap, native_placer, place_in_order, place_within
from .prepared import PreparedProblem, round_up

if TYPE_CHECKING:
    from pyocc.runtime.planner_native import Climb

NATIVE_CLIMB_CHUNK = 64
"""Trials the native climb runs per call (about 0.2 ms on T5's 151
buffers): the time budget is looked at between calls, where the Python
loop looked at it before each trial."""

NATIVE_AFTER_TRIALS = 200
"""The hill climb runs its trials in Python until this many, then
natively (pyocc.runtime.planner_native: the same trials, from the same
random numbers), which costs about 0.1 s to JIT-compile once a process: a
short climb (most static plans that do not meet the bound at once:
DenseNet-121's takes 7 ms) never pays it, a long one (the symbolic
planner's, 1,000 to 2,000 trials each) runs about 15 times quicker
(T5's: 60 µs a trial in Python, 4 natively). Once compiled, every climb
runs natively from its first trial. The offsets are the same either way."""

# ---------------------------------------------------------------- orders


def size_order(prep: PreparedProblem) -> list[int]:
    """Non-empty buffers by size, largest first (ties: problem order)."""
    # reverse=True keeps equal keys in their original order (sort is stable).
    return sorted(prep.active, key=prep.sizes.__getitem__, reverse=True)


def lifetime_order(prep: PreparedProblem) -> list[int]:
    """Non-empty buffers by lifetime length, then size, longest first."""
    sizes, firsts, lasts = prep.sizes, prep.firsts, prep.lasts
    return sorted(prep.active, key=lambda i: (lasts[i] - firsts[i], sizes[i]), reverse=True)


def conflict_order(prep: PreparedProblem) -> list[int]:
    """Non-empty buffers by number of conflicts, then size, most first."""
    conflicts, sizes = prep.conflict_counts(), prep.sizes
    return sorted(prep.active, key=lambda i: (conflicts[i], sizes[i]), reverse=True)


# ---------------------------------------------------------------- order-based heuristics


def greedy_by_size_offsets(prep: PreparedProblem) -> list[int]:
    """TFLite: largest first, each at the lowest gap among overlapping placed buffers."""
    return place_in_order(prep, size_order(prep))


def greedy_by_conflicts_offsets(prep: PreparedProblem) -> list[int]:
    """TVM USMP: most-conflicting first, each at the lowest fitting offset."""
    return place_in_order(prep, conflict_order(prep))


def best_fit_decreasing_offsets(prep: PreparedProblem) -> list[int]:
    """XLA: best fit (smallest fitting gap) in spatial and in temporal order; the better."""
    spatial = place_in_order(prep, size_order(prep), best_fit=True)
    temporal = place_in_order(prep, lifetime_order(prep), best_fit=True)
    return spatial if prep.pool_size(spatial) <= prep.pool_size(temporal) else temporal


def hill_climb_offsets(
    prep: PreparedProblem,
    *,
    time_budget_ms: float = 200.0,
    seed: int = 0,
    max_iterations: int = 2000,
    start: list[int] | None = None,
    bound: int | None = None,
) -> list[int]:
    """TVM USMP hill climb: perturb the placement order, keep what does not hurt.

    Starts from greedy-by-size's order (or ``start``). Each step either moves a
    buffer that touches the top of the pool to an earlier random position (it
    is what sets the pool size) or swaps two random buffers, re-places, and
    keeps the new order if the pool did not grow (equal moves let it cross
    plateaus). Stops after ``max_iterations``, at the time budget, or on
    reaching the lower bound: ``bound`` when given (a caller that knows a
    higher lower bound, e.g. ``packed_lower_bound``; it must be one), else
    ``lower_bound``. The bound only decides when to stop, never the result:
    only a strictly smaller pool replaces the best plan, and none is below a
    lower bound. Deterministic for a seed as long as the time budget does not
    cut it short.
    """
    deadline = time.perf_counter() + time_budget_ms / 1000.0
    order: MutableSequence[int] = list(start) if start is not None else size_order(prep)
    current: Sequence[int] = place_in_order(prep, order)
    best, best_size = current, prep.pool_size(current)
    bound = lower_bound(prep) if bound is None else bound
    rng = random.Random(seed)
    sizes = prep.sizes
    # the pool's top and the positions of the buffers that reach it change only when a trial is kept
    top = best_size
    critical = [p for p, i in enumerate(order) if current[i] + sizes[i] == top]
    for step in range(max_iterations):
        if len(order) < 2 or best_size <= bound or time.perf_counter() > deadline:
            break
        if step in (0, NATIVE_AFTER_TRIALS):
            # natively from the first trial once compiled in this process; a long climb compiles it
            native = native_placer(prep, compile=step > 0)
            if native is not None:
                return _climb_natively(native.climb(order, current, best, critical, top, best_size, rng),
                                       max_iterations - step, bound, deadline)
        trial = order[:]
        position = rng.choice(critical)
        if position > 0 and rng.random() < 0.5:
            changed = rng.randrange(position)
            trial.insert(changed, trial.pop(position))
        else:
            a, b = rng.randrange(len(order)), rng.randrange(len(order))
            trial[a], trial[b] = trial[b], trial[a]
            changed = min(a, b)
        # Buffers before the first changed position land where they were; a
        # trial whose pool would grow is abandoned at the buffer that grows it.
        offsets = place_within(prep, trial, top, keep=changed, kept=current)
        if offsets is None:
            continue
        current, top = offsets, prep.pool_size(offsets)
        critical = [p for p, i in enumerate(trial) if current[i] + sizes[i] == top]
        order = trial
        if top < best_size:
            best, best_size = current, top
    return list(best)


def _climb_natively(climb: Climb, trials: int, bound: int, deadline: float) -> list[int]:
    """The rest of a hill climb, `trials` trials at most, natively
    (pyocc.runtime.planner_native.Climb: the Python loop's trials, from
    the same random numbers), ``NATIVE_CLIMB_CHUNK`` at a time, the
    deadline looked at between them; the best offsets."""
    while trials > 0 and climb.best_size > bound and time.perf_counter() <= deadline:
        ran = climb.run(min(trials, NATIVE_CLIMB_CHUNK), bound)
        if ran == 0:
            break  # at the bound, or no buffer at the top (an empty pool)
        trials -= ran
    return climb.best.tolist()


# ---------------------------------------------------------------- Occamy


def occamy_first_fit_offsets(prep: PreparedProblem) -> list[int]:
    """Occamy: replay malloc at ``first`` (by first, then name) and free after ``last``.

    A free list of ``[offset, end)`` blocks sorted by offset; malloc takes the
    first block with room for the aligned buffer, the pool grows at its end
    when none has. Frees coalesce with neighbours. Unlike the gap searches it
    only knows the past, so it fragments: buffers freed early leave holes
    that later, larger buffers cannot use.
    """
    names, sizes, firsts, lasts, aligns = prep.names, prep.sizes, prep.firsts, prep.lasts, prep.aligns
    offsets = [0] * prep.n
    block_start: list[int] = []  # free blocks, sorted, never adjacent (coalesced)
    block_end: list[int] = []
    pool_end = 0
    pending_frees: list[tuple[int, int]] = []  # heap of (last, index)

    def release(start: int, end: int) -> None:
        """Return ``[start, end)`` to the free list, merging with touching blocks."""
        position = bisect_left(block_start, start)
        if position > 0 and block_end[position - 1] == start:
            position -= 1
            start = block_start[position]
            del block_start[position], block_end[position]
        if position < len(block_start) and block_start[position] == end:
            end = block_end[position]
            del block_start[position], block_end[position]
        block_start.insert(position, start)
        block_end.insert(position, end)

    for i in sorted(prep.active, key=lambda i: (firsts[i], names[i])):
        while pending_frees and pending_frees[0][0] < firsts[i]:
            j = heapq.heappop(pending_frees)[1]
            release(offsets[j], offsets[j] + sizes[j])
        size, alignment = sizes[i], aligns[i]
        for position, start in enumerate(block_start):
            chosen = round_up(start, alignment)
            end = block_end[position]
            if chosen + size <= end:
                del block_start[position], block_end[position]
                break
        else:
            # Nothing fits: grow the pool, starting in a free block that ends at the top.
            if block_end and block_end[-1] == pool_end:
                start = block_start.pop()
                block_end.pop()
            else:
                start = pool_end
            chosen = round_up(start, alignment)
            end = pool_end = chosen + size
        # Alignment padding before the buffer and the block's tail stay free.
        if chosen > start:
            release(start, chosen)
        if end > chosen + size:
            release(chosen + size, end)
        offsets[i] = chosen
        heapq.heappush(pending_frees, (lasts[i], i))
    return offsets


# ---------------------------------------------------------------- very large problems


def long_lived_first_offsets(prep: PreparedProblem) -> list[int]:
    """Greedy by size in two layers, in about O(n log n) for short-lived buffers.

    Why: when a few percent of 100,000 buffers live through most of the
    program, every short buffer conflicts with thousands of long ones, and any
    gap search that lists conflicts is quadratic. So:

    1. Steps are compressed to the distinct ``first`` values (overlap is
       unchanged), and buffers whose compressed span exceeds a width ``W`` are
       *long*; ``W`` is chosen so that at most ~1/16 of the buffers are long.
    2. Long buffers are placed by greedy by size among themselves (numpy gap
       search), then collapse into a *floor*: per step, the highest end of a
       long buffer live there.
    3. Short buffers are placed by greedy by size above the floor of their
       steps, searching gaps only among short buffers, found through per-step
       lists (each short buffer is listed at each of its <= W steps).

    The price: short buffers never use holes under the floor. At the busiest
    steps, where the pool size is decided, long buffers are packed low and the
    floor is tight, so the loss is small (see bench/planner_scaling.py).
    """
    active = prep.active
    offsets = [0] * prep.n
    if not active:
        return offsets
    firsts = np.array([prep.firsts[i] for i in active], dtype=np.int64)
    lasts = np.array([prep.lasts[i] for i in active], dtype=np.int64)
    distinct_firsts = np.unique(firsts)
    rank_first = np.searchsorted(distinct_firsts, firsts).tolist()
    rank_last = (np.searchsorted(distinct_firsts, lasts, side="right") - 1).tolist()
    spans = np.array(rank_last) - np.array(rank_first) + 1
    allowed_long = max(64, len(active) // 16)
    width = max(8, int(np.sort(spans)[max(0, len(active) - allowed_long - 1)]))
    long_ = [i for i, span in zip(active, spans.tolist()) if span > width]
    short = [i for i, span in zip(active, spans.tolist()) if span <= width]
    first_rank = [0] * prep.n  # lists, not dicts: looked up 2n times
    last_rank = [0] * prep.n
    for i, f, l in zip(active, rank_first, rank_last):
        first_rank[i], last_rank[i] = f, l
    sizes, aligns = prep.sizes, prep.aligns

    # Layer 1: long buffers, then their per-step floor. (The engine follows
    # the conflict count: numpy masks only pay off on really big problems.)
    long_offsets = place_in_order(prep, sorted(long_, key=sizes.__getitem__, reverse=True))
    floor_array = np.zeros(len(distinct_firsts), dtype=np.int64)
    for i in sorted(long_, key=lambda i: long_offsets[i] + sizes[i]):
        # Ascending ends: each assignment raises the floor where the buffer lives.
        floor_array[first_rank[i] : last_rank[i] + 1] = long_offsets[i] + sizes[i]
        offsets[i] = long_offsets[i]
    floor = floor_array.tolist()

    # Layer 2: short buffers above the floor, gap search among short ones.
    # Each placed short buffer is listed under every step it is live (at most
    # W steps), so the conflicts of [f, l] are exactly the lists f..l (a
    # buffer may appear twice; a repeated busy range changes no gap).
    live_short: list[list[tuple[int, int]]] = [[] for _ in floor]
    for i in sorted(short, key=sizes.__getitem__, reverse=True):
        f, l = first_rank[i], last_rank[i]
        base = max(floor[f : l + 1])
        busy = [(0, base)] if base else []
        for at_step in live_short[f : l + 1]:
            busy += at_step
        chosen = choose_gap(busy, sizes[i], aligns[i], best_fit=False)
        offsets[i] = chosen
        placed = (chosen, chosen + sizes[i])
        for at_step in live_short[f : l + 1]:
            at_step.append(placed)
    return offsets


# ---------------------------------------------------------------- registry


HEURISTICS: dict[str, Callable[..., list[int]]] = {
    "occamy-first-fit": occamy_first_fit_offsets,
    "greedy-by-size": greedy_by_size_offsets,
    "best-fit-decreasing": best_fit_decreasing_offsets,
    "greedy-by-conflicts": greedy_by_conflicts_offsets,
    "hill-climb": hill_climb_offsets,
    "long-lived-first": long_lived_first_offsets,
}
"""The index-based algorithms (``PreparedProblem -> offsets``) by name."""

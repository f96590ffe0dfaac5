"""Gap search: put buffers, one after another, at the lowest (or best) free gap.

Every order-based planner (TFLite's greedy by size, TVM's greedy by conflicts
and hill climb, XLA's best fit) is the same loop with a different order: take
the next buffer, look at the already-placed buffers whose lifetimes overlap
it, and choose an offset in a gap between them. Two engines find those
overlapping buffers:

* ``graph``: walks precomputed conflict lists; O(pairs) per pass, pure
  Python, fastest when buffers overlap few others (real networks).
* ``vector``: masks numpy arrays of the placed buffers; O(placed) numpy work
  per buffer, for problems with too many conflicting pairs to list.

Both return exactly the same offsets (tests check this). So does the
native placement over the conflict lists (`native_placer`,
pyocc.runtime.planner_native) that the hill climb places its thousands of
trials with, and that every graph-engine placement takes once compiled.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .prepared import PreparedProblem, round_up

if TYPE_CHECKING:
    from pyocc.runtime.planner_native import Placer

GRAPH_PAIR_LIMIT = 400_000
"""Above this many conflicting pairs the conflict lists cost more (time and
memory) than masking arrays, and ``place_in_order`` switches to ``vector``."""


def choose_gap(busy: list[tuple[int, int]], size: int, alignment: int, best_fit: bool) -> int:
    """The offset for a buffer of ``size`` bytes among ``busy`` byte ranges.

    ``busy`` holds ``(offset, end)`` of the placed buffers it conflicts with
    (sorted here). First fit takes the lowest aligned offset that fits; best
    fit takes the smallest free gap that fits (XLA), the lowest on ties. With
    no fitting gap the buffer goes on top of everything.
    """
    busy.sort()
    running_end = 0  # every byte below this is taken by some busy range
    best_offset = -1
    best_gap = 0
    for offset, end in busy:
        if offset >= running_end:
            candidate = -(-running_end // alignment) * alignment  # round_up, inlined: hot
            if candidate + size <= offset:
                if not best_fit:
                    return candidate
                gap = offset - running_end
                if best_offset < 0 or gap < best_gap:
                    best_offset, best_gap = candidate, gap
        if end > running_end:
            running_end = end
    if best_offset >= 0:
        return best_offset
    return round_up(running_end, alignment)


def _place_graph(
    prep: PreparedProblem, order: Sequence[int], best_fit: bool, keep: int = 0, kept: Sequence[int] = (),
    limit: int | None = None,
) -> list[int] | None:
    """Gap search over the conflict lists (see module docstring); the first
    ``keep`` buffers of ``order`` take their offsets from ``kept``. None as
    soon as a buffer placed here ends above ``limit`` (when given).

    First fit is ``choose_gap`` written out in the loop (the hill climb
    places hundreds of thousands of buffers; a call per buffer was a fifth
    of its time): the same offsets."""
    adjacency = prep.adjacency()
    sizes, aligns = prep.sizes, prep.aligns
    top = sys.maxsize if limit is None else limit
    offsets = [-1] * prep.n  # -1: not placed yet
    ends = [-1] * prep.n  # offset + size of the placed buffers
    for i in order[:keep]:
        offset = offsets[i] = kept[i]
        end = ends[i] = offset + sizes[i]
        if end > top:
            return None
    for i in order[keep:]:
        busy = [(offsets[j], end) for j in adjacency[i] if (end := ends[j]) >= 0]
        size = sizes[i]
        if best_fit:
            offset = choose_gap(busy, size, aligns[i], True)
        else:
            busy.sort()
            alignment = aligns[i]
            running_end = 0  # every byte below this is taken by some busy range
            for start, end in busy:
                if start >= running_end:
                    offset = -(-running_end // alignment) * alignment
                    if offset + size <= start:
                        break
                if end > running_end:
                    running_end = end
            else:
                offset = -(-running_end // alignment) * alignment
        offsets[i] = offset
        end = ends[i] = offset + size
        if end > top:
            return None
    return [max(offset, 0) for offset in offsets]


def _place_vector(prep: PreparedProblem, order: Sequence[int], best_fit: bool) -> list[int]:
    """Gap search with numpy masks over the placed buffers (see module docstring).

    The same rule as ``choose_gap``, vectorised: after sorting the overlapping
    buffers by offset, the free gap before buffer ``k`` starts at the running
    maximum of the ends before it.
    """
    n = len(order)
    placed_first = np.empty(n, dtype=np.int64)
    placed_last = np.empty(n, dtype=np.int64)
    placed_offset = np.empty(n, dtype=np.int64)
    placed_end = np.empty(n, dtype=np.int64)
    offsets = [0] * prep.n
    sizes, aligns, firsts, lasts = prep.sizes, prep.aligns, prep.firsts, prep.lasts
    count = 0
    for i in order:
        size, alignment, first, last = sizes[i], aligns[i], firsts[i], lasts[i]
        if size == 0:
            continue
        chosen = 0
        if count:
            hit = np.flatnonzero(
                (placed_first[:count] <= last) & (placed_last[:count] >= first)
            )
            if hit.size:
                starts = placed_offset[hit]
                by_offset = np.argsort(starts, kind="stable")
                starts = starts[by_offset]
                ends = placed_end[hit][by_offset]
                below = np.empty_like(ends)
                below[0] = 0
                np.maximum.accumulate(ends[:-1], out=below[1:])
                candidates = -(-below // alignment) * alignment
                fits = candidates + size <= starts
                if fits.any():
                    if best_fit:
                        gaps = np.where(fits, starts - below, np.iinfo(np.int64).max)
                        chosen = int(candidates[int(np.argmin(gaps))])
                    else:
                        chosen = int(candidates[int(np.argmax(fits))])
                else:
                    chosen = round_up(int(ends.max()), alignment)
        offsets[i] = chosen
        placed_first[count] = first
        placed_last[count] = last
        placed_offset[count] = chosen
        placed_end[count] = chosen + size
        count += 1
    return offsets


def place_in_order(
    prep: PreparedProblem,
    order: Sequence[int],
    *,
    best_fit: bool = False,
    engine: str | None = None,
    keep: int = 0,
    kept: Sequence[int] = (),
) -> list[int]:
    """Offsets (indexed like ``prep``) placing ``order``'s buffers one by one.

    Buffers not in ``order`` get offset 0 and are ignored while placing (so a
    caller can place a subset). ``engine`` is "graph", "vector" or None to
    choose by the number of conflicting pairs (and to place natively where
    the graph engine would, once this process has compiled the native
    placement, `native_placer`: the same offsets).

    ``keep`` and ``kept``: a caller that changed only ``order[keep:]`` since
    it placed ``order`` into ``kept`` passes both, and the first ``keep``
    buffers keep their offsets (a buffer's place depends only on those
    before it, so the result is the same; the graph engine then skips them).
    """
    if engine is None:
        engine = "graph" if prep.total_conflicts() <= GRAPH_PAIR_LIMIT else "vector"
        native = native_placer(prep, compile=False) if engine == "graph" else None
        if native is not None:  # the graph engine's offsets, natively, once compiled in this process
            placed = native.place(array("q", order), sys.maxsize, keep, array("q", kept) if keep else None, best_fit)
            assert placed is not None  # no limit: every buffer is placed
            return placed[0].tolist()
    if engine == "graph":
        offsets = _place_graph(prep, order, best_fit, keep, kept)
        assert offsets is not None  # no limit: every buffer is placed
        return offsets
    if engine == "vector":
        return _place_vector(prep, order, best_fit)
    raise ValueError(f"unknown placement engine {engine!r}")


def place_within(
    prep: PreparedProblem,
    order: Sequence[int],
    limit: int,
    *,
    keep: int = 0,
    kept: Sequence[int] = (),
) -> list[int] | None:
    """``place_in_order(prep, order, keep=keep, kept=kept)`` (first fit)
    when its pool is at most ``limit`` bytes, else None. The graph engine
    stops at the first buffer that ends above ``limit``: the hill climb
    rejects such a trial whatever the buffers after it do (a placed
    buffer never moves), so most rejected trials cost a fraction of a
    placement. ``limit`` must be at least every size of a buffer not in
    ``order`` (those count at offset 0, as in ``pool_size``): the hill
    climb places every non-empty buffer. (The hill climb places natively,
    `native_placer`, where the graph engine would.)"""
    if prep.total_conflicts() <= GRAPH_PAIR_LIMIT:
        return _place_graph(prep, order, False, keep, kept, limit)
    offsets = _place_vector(prep, order, False)
    return offsets if prep.pool_size(offsets) <= limit else None


def native_placer(prep: PreparedProblem, compile: bool = True) -> Placer | None:
    """The native placement of `prep` (pyocc.runtime.planner_native: the
    graph engine's offsets, first or best fit, in a few µs), made once per
    problem; None where the graph engine does not place (more than
    ``GRAPH_PAIR_LIMIT`` conflicting pairs: no conflict lists), and, with
    `compile` false, where this process has not JIT-compiled it yet."""
    if prep.total_conflicts() > GRAPH_PAIR_LIMIT:
        return None
    if prep.placer is None:
        from pyocc.runtime import planner_native  # llvmlite and the JIT: only for a hill climb

        if not compile and not planner_native.compiled():
            return None
        prep.placer = planner_native.Placer(prep.sizes, prep.aligns, prep.adjacency())
    return prep.placer

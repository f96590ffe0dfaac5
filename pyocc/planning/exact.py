"""An exact solver for small problems: branch and bound over normal-form plans.

Normal form: take any plan and drop every buffer to the lowest aligned offset
free of its conflicts until nothing moves (the pool never grows). Then each
buffer sits at 0 or at the end of a conflicting buffer below it, rounded up to
its alignment. Placing buffers in order of offset, every offset is therefore 0
or ``round_up(end of an already-placed conflicting buffer)``: the standard
"left-bottom" candidate set. The search enumerates exactly those sequences
(offsets non-decreasing, ties broken by buffer index so each plan is built
once) and prunes with a bound, so when it finishes its plan is optimal.

The bound at a node whose next offsets are all >= ``y``: at any step, the
unplaced buffers live there and the parts above ``y`` of the placed ones are
pairwise disjoint and all above ``y``, so the pool is at least ``y`` plus
their total.
"""

from __future__ import annotations

import time

from .algorithms import best_fit_decreasing_offsets, greedy_by_size_offsets
from .bounds import lower_bound
from .prepared import PreparedProblem, round_up
from .problem import PlanningError

MAX_EXACT_BUFFERS = 40
"""``exact`` refuses problems with more non-empty buffers than this unless
forced: the search is exponential, and beyond this size it would almost never
finish within a useful budget (use ``auto``, which runs it only when small)."""


class _Timeout(Exception):
    """Raised inside the search when the time budget is spent."""


def solve_exact(
    prep: PreparedProblem,
    *,
    time_budget_ms: float = 200.0,
    force: bool = False,
    incumbent: list[int] | None = None,
) -> tuple[list[int], bool]:
    """(offsets, finished): the best plan found, and whether it is proven optimal.

    ``incumbent`` (offsets indexed like ``prep``) seeds the search; by default
    the better of greedy by size and best-fit decreasing. Raises
    ``PlanningError`` above ``MAX_EXACT_BUFFERS`` non-empty buffers unless
    ``force``.
    """
    active = prep.active
    if len(active) > MAX_EXACT_BUFFERS and not force:
        raise PlanningError(
            f"exact solver refuses {len(active)} buffers (limit {MAX_EXACT_BUFFERS}); "
            "use algorithm 'auto', or call solve_exact(..., force=True)"
        )
    if incumbent is None:
        first, second = greedy_by_size_offsets(prep), best_fit_decreasing_offsets(prep)
        incumbent = first if prep.pool_size(first) <= prep.pool_size(second) else second
    best_offsets = list(incumbent)
    bound = lower_bound(prep)
    if prep.pool_size(best_offsets) <= bound:
        return best_offsets, True
    deadline = time.perf_counter() + time_budget_ms / 1000.0
    finished = True
    for group in _independent_groups(prep):
        # A group at or below the global bound cannot be what makes the pool big.
        if max(best_offsets[i] + prep.sizes[i] for i in group) > bound:
            finished &= _search(prep, group, best_offsets, deadline)
    return best_offsets, finished


def _independent_groups(prep: PreparedProblem) -> list[list[int]]:
    """Non-empty buffers split where no buffer is live across a step boundary.

    Groups never conflict, so each can be solved alone; the pool is the
    largest group's. Real networks often split at narrow points.
    """
    groups: list[list[int]] = []
    reach = None  # the last step of the current group so far
    for i in sorted(prep.active, key=prep.firsts.__getitem__):
        if reach is None or prep.firsts[i] > reach:
            groups.append([])
            reach = prep.lasts[i]
        groups[-1].append(i)
        reach = max(reach, prep.lasts[i])
    return groups


def _search(prep: PreparedProblem, active: list[int], best_offsets: list[int], deadline: float) -> bool:
    """Branch and bound over one group; improves ``best_offsets`` in place.

    Returns True when the search finished (the group's part is optimal).
    """
    best_size = max(best_offsets[i] + prep.sizes[i] for i in active)

    # Local numbering 0..m-1 of the group's buffers; steps compressed to the
    # distinct first steps (every set of buffers live together is live at one).
    m = len(active)
    size = [prep.sizes[i] for i in active]
    align = [prep.aligns[i] for i in active]
    first = [prep.firsts[i] for i in active]
    last = [prep.lasts[i] for i in active]
    points = sorted(set(first))
    covers = [[p for p, step in enumerate(points) if first[k] <= step <= last[k]] for k in range(m)]
    conflicts = [
        [c for c in range(m) if c != k and first[k] <= last[c] and first[c] <= last[k]]
        for k in range(m)
    ]
    unplaced_live = [0] * len(points)
    for k in range(m):
        for p in covers[k]:
            unplaced_live[p] += size[k]
    offset = [-1] * m
    placed: list[int] = []
    nodes = 0

    def search(floor: int, last_placed: int, top: int) -> None:
        """Extend the placement; next offsets >= ``floor``; ``top`` is the pool so far."""
        nonlocal best_size, nodes
        nodes += 1
        if nodes & 255 == 0 and time.perf_counter() > deadline:
            raise _Timeout
        if len(placed) == m:
            if top < best_size:
                best_size = top
                for k in range(m):
                    best_offsets[active[k]] = offset[k]
            return
        above = unplaced_live[:]
        for k in placed:
            end = offset[k] + size[k]
            if end > floor:
                part = end - max(offset[k], floor)
                for p in covers[k]:
                    above[p] += part
        if max(top, floor + max(above)) >= best_size:
            return
        children = []
        for k in range(m):
            if offset[k] >= 0:
                continue
            candidates = {0}
            for c in conflicts[k]:
                if offset[c] >= 0:
                    candidates.add(round_up(offset[c] + size[c], align[k]))
            for y in candidates:
                if y < floor or (y == floor and k < last_placed) or y + size[k] >= best_size:
                    continue
                if all(
                    offset[c] < 0 or y >= offset[c] + size[c] or offset[c] >= y + size[k]
                    for c in conflicts[k]
                ):
                    children.append((y, -size[k], k))
        children.sort()
        for y, _, k in children:
            offset[k] = y
            placed.append(k)
            for p in covers[k]:
                unplaced_live[p] -= size[k]
            search(y, k, max(top, y + size[k]))
            for p in covers[k]:
                unplaced_live[p] += size[k]
            placed.pop()
            offset[k] = -1

    try:
        search(0, -1, 0)
    except _Timeout:
        return False
    return True

"""Checking a plan against its problem, independently of how it was made.

``plan_memory`` runs ``verify_plan`` on every plan it returns, so a bug in any
algorithm surfaces as a ``PlanError`` naming the buffers, never as corrupted
tensors at run time. The check is a sweep over steps that keeps the live
buffers sorted by offset, so it costs O(n log n), not O(n^2).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left

from .problem import Buffer, Plan, PlanError, Problem, _is_int


def _describe(buffer: Buffer, offset: int) -> str:
    """'name' (bytes [offset, end), steps first..last): enough to find a clash by eye."""
    return (
        f"{buffer.name!r} (bytes [{offset}, {offset + buffer.size}), "
        f"steps {buffer.first}..{buffer.last})"
    )


def _offsets_in_problem_order(problem: Problem, plan: Plan) -> list[int]:
    """The plan's offsets indexed like ``problem.buffers``; names must match exactly."""
    offsets = [plan.offsets.get(b.name) for b in problem.buffers]
    if len(plan.offsets) != len(problem.buffers) or None in offsets:
        names = {b.name for b in problem.buffers}
        for buffer in problem.buffers:
            if buffer.name not in plan.offsets:
                raise PlanError(f"plan has no offset for buffer {buffer.name!r}")
        for name in plan.offsets:
            if name not in names:
                raise PlanError(f"plan has an offset for unknown buffer {name!r}")
    return offsets  # type: ignore[return-value]


def _check_each_buffer(problem: Problem, plan: Plan, offsets: list[int]) -> None:
    """Per-buffer rules: offsets are aligned and the buffer lies inside the pool."""
    pool_size = plan.pool_size
    if not _is_int(pool_size) or pool_size < 0:
        raise PlanError(f"pool size must be a non-negative integer, got {pool_size!r}")
    for buffer, offset in zip(problem.buffers, offsets):
        if not _is_int(offset) or offset < 0:
            raise PlanError(f"buffer {buffer.name!r}: offset {offset!r} is not a non-negative integer")
        if offset % buffer.alignment:
            raise PlanError(
                f"buffer {buffer.name!r}: offset {offset} is not a multiple of "
                f"its alignment {buffer.alignment}"
            )
        if offset + buffer.size > pool_size:
            raise PlanError(
                f"buffer {buffer.name!r}: bytes [{offset}, {offset + buffer.size}) "
                f"go beyond the pool size {pool_size}"
            )


def _check_no_overlap(problem: Problem, offsets: list[int]) -> None:
    """No two buffers live at the same step share a byte.

    Invariant of the sweep: the live buffers are pairwise disjoint, so a new
    buffer can only clash with its neighbours in offset order.
    """
    buffers = problem.buffers
    # Flat lists: attribute lookups dominate the sweep on big problems.
    firsts = [b.first for b in buffers]
    lasts = [b.last for b in buffers]
    ends = [offset + b.size for offset, b in zip(offsets, buffers)]
    nonempty = [i for i, b in enumerate(buffers) if b.size > 0]
    nonempty.sort(key=firsts.__getitem__)
    live: list[tuple[int, int]] = []  # (offset, buffer index), sorted
    ending: list[tuple[int, int]] = []  # heap of (last, buffer index)
    for index in nonempty:
        first = firsts[index]
        while ending and ending[0][0] < first:
            gone = heapq.heappop(ending)[1]
            del live[bisect_left(live, (offsets[gone], gone))]
        offset = offsets[index]
        key = (offset, index)
        position = bisect_left(live, key)
        if position > 0:
            below = live[position - 1][1]
            if ends[below] > offset:
                _clash(buffers[below], offsets[below], buffers[index], offset)
        if position < len(live):
            above_offset, above = live[position]
            if ends[index] > above_offset:
                _clash(buffers[index], offset, buffers[above], above_offset)
        live.insert(position, key)
        heapq.heappush(ending, (lasts[index], index))


def _clash(a: Buffer, a_offset: int, b: Buffer, b_offset: int) -> None:
    """Raise the overlap error for two buffers, naming both."""
    raise PlanError(
        f"buffers {a.name!r} and {b.name!r} are live at the same step and share bytes: "
        f"{_describe(a, a_offset)} vs {_describe(b, b_offset)}"
    )


def verify_plan(problem: Problem, plan: Plan) -> None:
    """Raise ``PlanError`` unless ``plan`` is a valid placement for ``problem``.

    Rules: every buffer (and no other name) has an offset; offsets are
    non-negative multiples of the buffer's alignment; every buffer ends within
    ``pool_size``; two non-empty buffers whose live ranges share a step do not
    share a byte.
    """
    offsets = _offsets_in_problem_order(problem, plan)
    _check_each_buffer(problem, plan, offsets)
    _check_no_overlap(problem, offsets)

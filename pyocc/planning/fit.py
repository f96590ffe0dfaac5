"""Fitting flexible buffers (kernel scratch) into the slack of a plan.

A kernel's scratch (a convolution's im2col block) works at any size between a
minimum (one output row's columns) and the size it would like (one block of
at most IM2COL_BLOCK_BYTES); the kernel loops over as many blocks as the size
allows. ``fit_flexible`` plans the fixed buffers first, then gives each
flexible one the largest free extent of the pool at its steps (never more than
its maximum), so the scratch costs no pool bytes wherever the steps around its
op leave at least its minimum free. Where they do not, it goes where the pool
grows least, at its minimum. The combined plan passes ``verify_plan``.
Plain data only (no IR).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from .planner import plan_memory
from .problem import Buffer, Plan, Problem
from .verify import verify_plan

__all__ = ["FittedPlan", "fit_flexible", "widen_flexible"]


@dataclass(frozen=True)
class FittedPlan:
    """A verified plan of fixed and flexible buffers, and the size each
    flexible buffer got (between its minimum and maximum)."""

    plan: Plan
    sizes: dict[str, int]
    """Flexible buffer name -> the bytes it was given."""
    problem: Problem
    """The problem the plan was verified against (flexible buffers at their
    given sizes)."""
    fixed_pool_size: int
    """The pool of the fixed buffers alone: `plan.pool_size` minus this is
    what the flexible buffers cost."""


def _round_down(value: int, step: int) -> int:
    return value // step * step


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def _place(buffer: Buffer, low: int, high: int, placed: list[tuple[Buffer, int]], pool: int
           ) -> tuple[tuple[int, int], int]:
    """((offset, size), pool size) for `buffer` at `low`..`high` bytes among
    the `placed` buffers: the longest free run below the pool top at its
    steps that holds `low` (capped at `high`), else the lowest place where
    `low` fits (the pool grows by the least)."""
    busy = sorted((o, o + b.size) for b, o in placed  # type: ignore[operator]
                  if b.first <= buffer.last and buffer.first <= b.last)
    # free runs [start, end) between the busy extents, the last one open
    runs: list[tuple[int, int | None]] = []
    cursor = 0
    for lo, hi in busy:
        if lo > cursor:
            runs.append((cursor, lo))
        cursor = max(cursor, hi)
    runs.append((cursor, None))
    best: tuple[int, int] | None = None  # (offset, size) inside the current pool
    for run_start, run_end in runs:
        offset = _round_up(run_start, buffer.alignment)
        end = pool if run_end is None else min(run_end, pool)
        size = min(high, end - offset)
        if size >= low and (best is None or size > best[1]):
            best = (offset, size)
    if best is None:  # no slack holds the minimum: grow the pool by the least
        fits = [_round_up(s, buffer.alignment) for s, e in runs]
        offset = min(o for o, (_, e) in zip(fits, runs, strict=True) if e is None or o + low <= e)
        best = (offset, low)
        pool = max(pool, offset + low)
    return best, pool


def fit_flexible(problem: Problem, flexible: dict[str, int], algorithm: str = "auto",
                 time_budget_ms: int = 200, planner: Callable[..., Plan] = plan_memory) -> FittedPlan:
    """Plan `problem`, whose buffers named in `flexible` (name -> minimum
    bytes) may shrink from their `size` (the maximum) down to that minimum.

    The fixed buffers are planned with `algorithm`; then each flexible
    buffer, largest maximum first, takes the longest free run of bytes below
    the pool top at its steps that holds its minimum (capped at its maximum),
    else the lowest place where its minimum fits (the pool grows by the
    least). `planner` plans the fixed buffers (`plan_memory`'s signature).
    Raises `PlanError` if the combined plan fails verification."""
    start = time.perf_counter()
    fixed = Problem(tuple(b for b in problem.buffers if b.name not in flexible))
    if fixed.buffers:
        base = planner(fixed, algorithm, time_budget_ms=time_budget_ms)
        offsets, fixed_pool, algo, optimal = dict(base.offsets), base.pool_size, base.algorithm, base.optimal
    else:
        offsets, fixed_pool, algo, optimal = {}, 0, "none", True
    pool = fixed_pool
    placed: list[tuple[Buffer, int]] = [(b, offsets[b.name]) for b in fixed.buffers if b.size]
    sizes: dict[str, int] = {}
    wanted = sorted((b for b in problem.buffers if b.name in flexible), key=lambda b: (-(b.size or 0), b.first))
    for buffer in wanted:
        low, high = flexible[buffer.name], buffer.size or 0
        if not 0 <= low <= high:
            raise ValueError(f"flexible buffer {buffer.name!r}: minimum {low} is not within 0..{high}")
        best, pool = _place(buffer, low, high, placed, pool)
        offsets[buffer.name], sizes[buffer.name] = best
        if best[1]:
            placed.append((replace(buffer, size=best[1]), best[0]))
    fitted = Problem(tuple(replace(b, size=sizes[b.name]) if b.name in sizes else b for b in problem.buffers))
    plan = Plan(offsets, pool, algo, optimal and pool == fixed_pool,
                (time.perf_counter() - start) * 1000)
    verify_plan(fitted, plan)
    return FittedPlan(plan, sizes, fitted, fixed_pool)


def widen_flexible(fitted: FittedPlan, wider: dict[str, int]) -> FittedPlan:
    """`fitted` with the flexible buffers named in `wider` (name -> bytes,
    at least the size each was fitted) placed again at those sizes, one
    after another, where `_place` puts them among all the other buffers
    (in the slack, else where the pool grows least): per-thread copies of
    a kernel's scratch (`pyocc.dialects.dnn.scratch.im2col_copies`). The
    other buffers keep their offsets. Raises `PlanError` if the plan fails
    verification."""
    start = time.perf_counter()
    buffers = {b.name: b for b in fitted.problem.buffers}
    offsets, sizes = dict(fitted.plan.offsets), dict(fitted.sizes)
    for name, size in wider.items():
        if size < sizes[name]:
            raise ValueError(f"flexible buffer {name!r}: {size} is less than the {sizes[name]} it was fitted")
    placed = [(b, offsets[b.name]) for b in fitted.problem.buffers if b.size and b.name not in wider]
    pool = max([fitted.fixed_pool_size, *(o + b.size for b, o in placed)])  # type: ignore[operator]
    for name, size in sorted(wider.items(), key=lambda item: -item[1]):
        buffer = replace(buffers[name], size=size)
        (offsets[name], sizes[name]), pool = _place(buffer, size, size, placed, pool)
        placed.append((buffer, offsets[name]))
    problem = Problem(tuple(replace(b, size=sizes[b.name]) if b.name in wider else b for b in fitted.problem.buffers))
    plan = Plan(offsets, pool, fitted.plan.algorithm, fitted.plan.optimal and pool == fitted.fixed_pool_size,
                fitted.plan.plan_ms + (time.perf_counter() - start) * 1000)
    verify_plan(problem, plan)
    return FittedPlan(plan, sizes, problem, fitted.fixed_pool_size)

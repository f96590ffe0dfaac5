"""``plan_memory``: run a planning algorithm (or pick the best), then verify.

``auto`` is the default and what the compiler calls; the named algorithms are
there to compare planners and to reproduce what other systems would do.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .algorithms import (
    HEURISTICS,
    best_fit_decreasing_offsets,
    greedy_by_conflicts_offsets,
    greedy_by_size_offsets,
    hill_climb_offsets,
    long_lived_first_offsets,
    occamy_first_fit_offsets,
)
from .bounds import lower_bound
from .exact import MAX_EXACT_BUFFERS, solve_exact
from .placement import GRAPH_PAIR_LIMIT
from .prepared import PreparedProblem
from .problem import Plan, PlanningError, Problem
from .verify import verify_plan

def _by_name(
    offsets_of: Callable[..., list[int]],
) -> Callable[..., dict[str, int]]:
    """Wrap an index-based algorithm as ``Problem -> {name: offset}``."""

    def run(problem: Problem, **options: object) -> dict[str, int]:
        # The docstring is copied from the wrapped algorithm below.
        prep = PreparedProblem(problem)
        return prep.offsets_by_name(offsets_of(prep, **options))

    run.__doc__ = offsets_of.__doc__
    run.__name__ = offsets_of.__name__.removesuffix("_offsets")
    return run


def _exact(problem: Problem, **options: object) -> dict[str, int]:
    """Branch and bound (see exact.py)."""
    prep = PreparedProblem(problem)
    offsets, _finished = solve_exact(prep, **options)
    return prep.offsets_by_name(offsets)


ALGORITHMS: dict[str, Callable[..., dict[str, int]]] = {
    **{name: _by_name(offsets_of) for name, offsets_of in HEURISTICS.items()},
    "exact": _exact,
}
"""Algorithm name -> ``f(problem, **options) -> {buffer name: offset}``.

Every entry accepts just a problem; ``hill-climb`` and ``exact`` also take
``time_budget_ms`` (and ``exact`` takes ``force``). ``plan_memory`` accepts
these names and "auto"."""


HILL_CLIMB_AUTO_LIMIT = 5_000
"""``auto`` hill-climbs only up to this many buffers: every step re-places all."""


def _auto(prep: PreparedProblem, time_budget_ms: float) -> tuple[list[int], str, bool]:
    """(offsets, winner, proven optimal) for ``auto``.

    1. Fast heuristics, cheapest first, stopping as soon as one meets the
       lower bound. When the conflict graph is small enough to list
       (``GRAPH_PAIR_LIMIT`` pairs) these are greedy-by-size,
       long-lived-first, best-fit-decreasing, greedy-by-conflicts and
       occamy-first-fit. Above it (e.g. 10,000+ buffers with a few long-lived
       ones) the others would be quadratic (Occamy's free-list scan too), so
       only ``long-lived-first`` runs, in about O(n log n).
    2. If no plan met the bound, hill-climb from the best order within the
       time budget (up to ``HILL_CLIMB_AUTO_LIMIT`` buffers), then, for at
       most ``MAX_EXACT_BUFFERS`` buffers, the exact solver with the rest of
       the budget, seeded with the best plan so far.

    The result is never worse than any heuristic it ran.
    """
    start = time.perf_counter()
    bound = lower_bound(prep)
    heuristics: list[tuple[str, Callable[[PreparedProblem], list[int]]]]
    if prep.total_conflicts() <= GRAPH_PAIR_LIMIT:
        heuristics = [
            ("greedy-by-size", greedy_by_size_offsets),
            ("long-lived-first", long_lived_first_offsets),
            ("best-fit-decreasing", best_fit_decreasing_offsets),
            ("greedy-by-conflicts", greedy_by_conflicts_offsets),
            ("occamy-first-fit", occamy_first_fit_offsets),
        ]
    else:
        heuristics = [("long-lived-first", long_lived_first_offsets)]

    best: list[int] = []
    best_size = -1
    winner = ""
    for name, run in heuristics:
        offsets = run(prep)
        size = prep.pool_size(offsets)
        if best_size < 0 or size < best_size:
            best, best_size, winner = offsets, size, name
        if best_size <= bound:
            return best, winner, True

    def remaining_ms() -> float:
        """What is left of the time budget."""
        return time_budget_ms - (time.perf_counter() - start) * 1000.0

    small_enough = prep.total_conflicts() <= GRAPH_PAIR_LIMIT
    if small_enough and prep.n <= HILL_CLIMB_AUTO_LIMIT and remaining_ms() > 0:
        exact_share = 0.5 if len(prep.active) <= MAX_EXACT_BUFFERS else 0.0
        offsets = hill_climb_offsets(prep, time_budget_ms=remaining_ms() * (1 - exact_share))
        size = prep.pool_size(offsets)
        if size < best_size:
            best, best_size, winner = offsets, size, "hill-climb"
        if best_size <= bound:
            return best, winner, True
    if len(prep.active) <= MAX_EXACT_BUFFERS and remaining_ms() > 0:
        offsets, finished = solve_exact(prep, time_budget_ms=remaining_ms(), incumbent=best)
        size = prep.pool_size(offsets)
        if size < best_size:
            best, best_size, winner = offsets, size, "exact"
        if finished:
            return best, winner, True
    return best, winner, best_size <= bound


def plan_memory(problem: Problem, algorithm: str = "auto", *, time_budget_ms: float = 200.0) -> Plan:
    """Place every buffer of ``problem`` in one pool with ``algorithm``; verified.

    ``algorithm`` is "auto" or a name in ``ALGORITHMS``. ``auto`` runs every
    fast heuristic on ordinary problems, but above ``GRAPH_PAIR_LIMIT``
    conflicting pairs (in practice from ~10,000 buffers when some live long)
    only ``long-lived-first``, so 100,000 buffers plan in about a second;
    named algorithms always run as asked, even when quadratic. ``time_budget_ms``
    bounds the improving searches (hill climb, exact); fast heuristics always
    run to completion. The plan is checked by ``verify_plan`` before it is
    returned, so an algorithm bug raises ``PlanError`` here. Raises
    ``PlanningError`` for an unknown algorithm or ``exact`` on a big problem.
    """
    if algorithm != "auto" and algorithm not in ALGORITHMS:
        known = ", ".join(["auto", *ALGORITHMS])
        raise PlanningError(f"unknown algorithm {algorithm!r} (known: {known})")
    dynamic = problem.dynamic
    if dynamic:
        raise PlanningError(
            f"buffer {dynamic[0].name!r} has no static size; plan it with plan_pools, "
            "which leaves dynamic buffers to the runtime allocator"
        )
    start = time.perf_counter()
    prep = PreparedProblem(problem)
    optimal = False
    if algorithm == "auto":
        offsets, winner, optimal = _auto(prep, time_budget_ms)
        name = f"auto:{winner}" if winner else "auto"
    elif algorithm == "exact":
        offsets, optimal = solve_exact(prep, time_budget_ms=time_budget_ms)
        name = algorithm
    elif algorithm == "hill-climb":
        offsets = hill_climb_offsets(prep, time_budget_ms=time_budget_ms)
        name = algorithm
    else:
        offsets = HEURISTICS[algorithm](prep)
        name = algorithm
    pool_size = prep.pool_size(offsets)
    if not optimal:
        optimal = pool_size <= lower_bound(prep)
    plan = Plan(
        offsets=prep.offsets_by_name(offsets),
        pool_size=pool_size,
        algorithm=name,
        optimal=optimal,
        plan_ms=0.0,
    )
    verify_plan(problem, plan)
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    return Plan(plan.offsets, plan.pool_size, plan.algorithm, plan.optimal, elapsed_ms)

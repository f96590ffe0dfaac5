"""Each algorithm on hand-made problems whose optimum is known by reasoning."""

import pytest

from pyocc.planning import ALGORITHMS, Buffer, PlanningError, Problem, lower_bound, plan_memory
from pyocc.planning.algorithms import (
    HEURISTICS,
    conflict_order,
    hill_climb_offsets,
    lifetime_order,
    long_lived_first_offsets,
    size_order,
)
from pyocc.planning.exact import MAX_EXACT_BUFFERS, solve_exact
from pyocc.planning.placement import choose_gap, place_in_order
from pyocc.planning.prepared import PreparedProblem

# Three buffers, all live at step 1: greedy by size stacks 100, 60, 40 -> 200,
# exactly max-live, so it is optimal.
STACK = Problem([Buffer("big", 100, 0, 1), Buffer("mid", 60, 1, 2), Buffer("small", 40, 1, 1)])

# Occamy replay: a and b are allocated at step 0, a is freed after it, and c
# (20 bytes) arrives at step 1. a's 10-byte hole below b is too small, so the
# pool grows to 40. Max-live is 30 (b + c at step 1), and greedy by size
# reaches it: c at 0, a at 0 (never live with c), b on top at 20.
FRAGMENTS = Problem([Buffer("a", 10, 0, 0), Buffer("b", 10, 0, 1), Buffer("c", 20, 1, 1)])

# Greedy by size is not optimal here: of the equal-size b and c it places b
# first (problem order) at 0, so c (live at step 3) must go to 3, and d
# (steps 3-4) collides with c at step 3 and with a at step 4: it ends at 7.
# With c at 0 and b at 3 instead, d fits at 5: pool 6 = a + d at step 4.
GREEDY_MISSES = Problem(
    [Buffer("a", 5, 4, 4), Buffer("b", 3, 1, 2), Buffer("c", 3, 1, 3), Buffer("d", 1, 3, 4)]
)

# Alignment: b needs a 64-aligned offset. Placing a first pushes b to 64;
# b at 0 and a at 10 needs only 20 bytes.
ALIGNED = Problem([Buffer("a", 10, 0, 0), Buffer("b", 10, 0, 0, alignment=64)])


@pytest.mark.parametrize("algorithm", [*ALGORITHMS, "auto"])
def test_every_algorithm_is_optimal_on_a_stack(algorithm: str) -> None:
    plan = plan_memory(STACK, algorithm)
    assert plan.pool_size == 200
    assert plan.optimal


@pytest.mark.parametrize("algorithm", [*ALGORITHMS, "auto"])
def test_every_algorithm_handles_empty_and_zero_size_problems(algorithm: str) -> None:
    assert plan_memory(Problem(()), algorithm).pool_size == 0
    plan = plan_memory(Problem([Buffer("z", 0, 0, 3, alignment=64)]), algorithm)
    assert plan.offsets == {"z": 0} and plan.pool_size == 0


def test_greedy_by_size_order_and_offsets() -> None:
    plan = plan_memory(STACK, "greedy-by-size")
    assert plan.offsets == {"big": 0, "mid": 100, "small": 160}


def test_occamy_first_fit_fragments() -> None:
    plan = plan_memory(FRAGMENTS, "occamy-first-fit")
    assert plan.offsets == {"a": 0, "b": 10, "c": 20}
    assert plan.pool_size == 40 > lower_bound(FRAGMENTS) == 30
    assert not plan.optimal
    assert plan_memory(FRAGMENTS, "greedy-by-size").pool_size == 30


def test_occamy_reuses_a_freed_hole_and_coalesces() -> None:
    # a and b freed after step 0 leave one 20-byte hole (coalesced) that c fills.
    problem = Problem([Buffer("a", 10, 0, 0), Buffer("b", 10, 0, 0), Buffer("c", 20, 1, 1)])
    assert plan_memory(problem, "occamy-first-fit").offsets == {"a": 0, "b": 10, "c": 0}


def test_greedy_by_size_misses_and_exact_finds_the_optimum() -> None:
    assert plan_memory(GREEDY_MISSES, "greedy-by-size").pool_size == 7
    exact = plan_memory(GREEDY_MISSES, "exact", time_budget_ms=5000)
    assert exact.pool_size == 6 == lower_bound(GREEDY_MISSES)
    assert exact.optimal
    auto = plan_memory(GREEDY_MISSES, "auto")
    assert auto.pool_size == 6 and auto.optimal


def test_exact_and_auto_respect_alignment() -> None:
    assert plan_memory(ALIGNED, "greedy-by-size").pool_size == 74
    assert plan_memory(ALIGNED, "exact").offsets == {"a": 10, "b": 0}
    assert plan_memory(ALIGNED, "auto").pool_size == 20


def test_exact_proves_optimality_above_the_bound() -> None:
    # b and c both need 64-aligned offsets and are live together, so one
    # starts at >= 64: the optimum is 74 (b at 0, a at 10, c at 64), far above
    # the lower bound of 30 (the bound takes a as the top buffer). Only a
    # finished search can call it optimal.
    problem = Problem([Buffer("a", 10, 0, 0), Buffer("b", 10, 0, 0, 64), Buffer("c", 10, 0, 0, 64)])
    assert lower_bound(problem) == 30
    plan = plan_memory(problem, "exact", time_budget_ms=5000)
    assert plan.pool_size == 74 and plan.optimal
    assert plan_memory(problem, "greedy-by-size").optimal is False


def test_exact_refuses_big_problems_unless_forced() -> None:
    problem = Problem([Buffer(f"b{i}", 1 + i, i, i + 3) for i in range(MAX_EXACT_BUFFERS + 1)])
    with pytest.raises(PlanningError, match="exact solver refuses 41 buffers"):
        plan_memory(problem, "exact")
    offsets, _finished = solve_exact(PreparedProblem(problem), time_budget_ms=10, force=True)
    assert len(offsets) == len(problem)


def test_unknown_algorithm() -> None:
    with pytest.raises(PlanningError, match="unknown algorithm 'nope'"):
        plan_memory(STACK, "nope")


def test_first_fit_and_best_fit_gaps() -> None:
    busy = [(45, 100), (0, 10), (30, 40)]
    assert choose_gap(list(busy), 5, 1, best_fit=False) == 10
    assert choose_gap(list(busy), 5, 1, best_fit=True) == 40  # the 5-byte gap
    assert choose_gap(list(busy), 5, 16, best_fit=False) == 16
    assert choose_gap(list(busy), 60, 1, best_fit=True) == 100  # nothing fits: on top
    assert choose_gap([], 5, 64, best_fit=True) == 0


def test_orders() -> None:
    prep = PreparedProblem(
        Problem([Buffer("short", 10, 0, 0), Buffer("long", 5, 0, 9), Buffer("mid", 20, 0, 3), Buffer("z", 0, 0, 9)])
    )
    names = lambda order: [prep.names[i] for i in order]  # noqa: E731
    assert names(size_order(prep)) == ["mid", "short", "long"]
    assert names(lifetime_order(prep)) == ["long", "mid", "short"]
    # Everyone conflicts with the two others: ties broken by size.
    assert names(conflict_order(prep)) == ["mid", "short", "long"]
    assert prep.conflict_counts() == [2, 2, 2, 0]


def test_greedy_by_conflicts_places_the_hub_first() -> None:
    # hub overlaps both leaves; leaves do not overlap each other.
    problem = Problem([Buffer("left", 50, 0, 1), Buffer("hub", 10, 1, 2), Buffer("right", 50, 2, 3)])
    plan = plan_memory(problem, "greedy-by-conflicts")
    assert plan.offsets["hub"] == 0 and plan.pool_size == 60


def test_hill_climb_is_deterministic_and_never_worse_than_its_start() -> None:
    prep = PreparedProblem(GREEDY_MISSES)
    runs = [hill_climb_offsets(prep, time_budget_ms=10_000, seed=7, max_iterations=200) for _ in range(2)]
    assert runs[0] == runs[1]
    assert prep.pool_size(runs[0]) == 6  # a swap of b and c finds the optimum


def test_both_placement_engines_agree() -> None:
    prep = PreparedProblem(GREEDY_MISSES)
    for order in (size_order(prep), lifetime_order(prep)):
        for best_fit in (False, True):
            graph = place_in_order(prep, order, best_fit=best_fit, engine="graph")
            vector = place_in_order(prep, order, best_fit=best_fit, engine="vector")
            assert graph == vector


def test_long_lived_first_stacks_long_buffers_below_short_ones() -> None:
    # Forty short buffers and one that lives throughout: with W = 8, "whole"
    # is long, goes to the floor, and every short buffer sits on top of it.
    buffers = [Buffer("whole", 1000, 0, 99)]
    buffers += [Buffer(f"s{i}", 10 + i, 2 * i, 2 * i + 1) for i in range(40)]
    problem = Problem(buffers)
    prep = PreparedProblem(problem)
    offsets = long_lived_first_offsets(prep)
    assert offsets[0] == 0
    assert prep.pool_size(offsets) == lower_bound(problem)


def test_registry_functions_take_a_problem() -> None:
    for name, run in ALGORITHMS.items():
        assert set(run(STACK)) == {"big", "mid", "small"}, name
    assert set(HEURISTICS) | {"exact"} == set(ALGORITHMS)


def test_long_lived_first_on_a_thousand_buffers_with_long_ones() -> None:
    # Seeded mix like the benchmark: 5% of buffers live through most steps.
    import random

    rng = random.Random(5)
    buffers = []
    for i in range(1000):
        if i % 20 == 0:
            first, last = rng.randrange(50), rng.randrange(450, 500)
        else:
            first = rng.randrange(500)
            last = first + rng.randrange(5)
        buffers.append(Buffer(f"t{i}", rng.randrange(1, 5000), first, last, rng.choice([1, 64])))
    problem = Problem(buffers)
    plan = plan_memory(problem, "long-lived-first")  # verified inside
    assert plan.pool_size >= lower_bound(problem)
    assert plan.pool_size <= plan_memory(problem, "occamy-first-fit").pool_size

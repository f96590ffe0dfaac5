"""pyocc.planning.fit: flexible buffers (kernel scratch) take the slack of
the fixed buffers' plan; where there is none, the pool grows by their
minimum only; per-thread copies of a fitted scratch are placed again at
their wider size (widen_flexible); every result passes the plan verifier."""

from __future__ import annotations

import pytest

from pyocc.planning import Buffer, PlanError, Problem, fit_flexible, plan_memory, verify_plan, widen_flexible


def test_scratch_takes_the_slack_and_the_pool_does_not_grow() -> None:
    # a and b (100 each) peak at step 1; at step 3 only c (40) is live
    problem = Problem((Buffer("a", 100, 0, 1), Buffer("b", 100, 1, 2), Buffer("c", 40, 3, 4),
                       Buffer("s", 1000, 3, 3)))
    fitted = fit_flexible(problem, {"s": 10})
    assert fitted.plan.pool_size == fitted.fixed_pool_size == 200
    assert fitted.sizes["s"] == 160  # everything c leaves free, capped by nothing smaller
    verify_plan(fitted.problem, fitted.plan)


def test_scratch_is_capped_at_its_maximum() -> None:
    problem = Problem((Buffer("a", 100, 0, 1), Buffer("b", 100, 1, 2), Buffer("s", 30, 3, 3)))
    fitted = fit_flexible(problem, {"s": 10})
    assert fitted.sizes["s"] == 30 and fitted.plan.pool_size == 200


def test_at_the_peak_the_pool_grows_by_the_minimum() -> None:
    # s is live at the peak step: the pool grows by its least block, not its 1000
    problem = Problem((Buffer("a", 100, 0, 1), Buffer("b", 100, 1, 2), Buffer("s", 1000, 1, 1)))
    fitted = fit_flexible(problem, {"s": 64})
    assert fitted.fixed_pool_size == 200 and fitted.sizes["s"] == 64 and fitted.plan.pool_size == 264
    whole = plan_memory(problem)
    assert whole.pool_size == 1200  # the same problem planned whole


def test_alignment_is_kept_and_overlaps_are_impossible() -> None:
    buffers = [Buffer(f"t{i}", 96 + 32 * (i % 3), i, i + 2, 64) for i in range(12)]
    buffers += [Buffer(f"s{i}", 4096, i, i, 64) for i in range(0, 12, 3)]
    problem = Problem(tuple(buffers))
    fitted = fit_flexible(problem, {f"s{i}": 64 for i in range(0, 12, 3)})
    for name, size in fitted.sizes.items():
        assert 64 <= size <= 4096 and fitted.plan.offsets[name] % 64 == 0
    verify_plan(fitted.problem, fitted.plan)
    # a corrupted result is caught by the verifier the fit runs
    offsets = dict(fitted.plan.offsets)
    offsets["s0"] = offsets["t0"]
    with pytest.raises(PlanError):
        verify_plan(fitted.problem, type(fitted.plan)(offsets, fitted.plan.pool_size, "x", False, 0.0))


def test_a_minimum_above_the_maximum_is_refused() -> None:
    with pytest.raises(ValueError, match="minimum 20 is not within 0..10"):
        fit_flexible(Problem((Buffer("s", 10, 0, 0),)), {"s": 20})


def test_copies_of_a_fitted_scratch_use_the_slack_then_grow_the_pool() -> None:
    # s fits 160 bytes at step 3 (c holds 40 of the 200); two copies (320) do not fit there:
    # placed above what is live at step 3, the pool grows by the least; t's copies fit the slack
    problem = Problem((Buffer("a", 100, 0, 1), Buffer("b", 100, 1, 2), Buffer("c", 40, 3, 4),
                       Buffer("s", 1000, 3, 3), Buffer("t", 40, 4, 4)))
    fitted = fit_flexible(problem, {"s": 10, "t": 10})
    assert fitted.sizes == {"s": 160, "t": 40} and fitted.plan.pool_size == 200
    wider = widen_flexible(fitted, {"s": 320})
    assert wider.sizes == {"s": 320, "t": 40}
    for name in ("a", "b", "c", "t"):  # the others stay where they were
        assert wider.plan.offsets[name] == fitted.plan.offsets[name]
    assert wider.plan.pool_size == 360  # c's 40 and the 320 of the copies, nothing more
    verify_plan(wider.problem, wider.plan)
    # two copies of t (80 bytes) fit in the 160 that c leaves free at step 4: the pool stays
    both = widen_flexible(fitted, {"t": 80})
    assert both.sizes["t"] == 80 and both.plan.pool_size == 200
    verify_plan(both.problem, both.plan)


def test_copies_smaller_than_the_fitted_size_are_refused() -> None:
    fitted = fit_flexible(Problem((Buffer("s", 100, 0, 0),)), {"s": 10})
    assert fitted.sizes["s"] == 10  # no slack at all: its minimum
    with pytest.raises(ValueError, match="5 is less than the 10 it was fitted"):
        widen_flexible(fitted, {"s": 5})

"""Problem validation, bounds and the verifier's rules (one test per rule)."""

import pytest

from pyocc.planning import (
    Buffer,
    Plan,
    PlanError,
    PlanningError,
    Problem,
    lower_bound,
    max_live,
    naive_bytes,
    packed_lower_bound,
    plan_memory,
    verify_plan,
)


def plan(offsets: dict[str, int], pool_size: int) -> Plan:
    """A hand-written plan for the verifier."""
    return Plan(offsets, pool_size, "hand", False, 0.0)


# ---------------------------------------------------------------- problem validation


@pytest.mark.parametrize(
    "buffer, message",
    [
        (Buffer("x", -1, 0, 0), "buffer 0 ('x'): size must be a non-negative integer"),
        (Buffer("x", 4, 3, 2), "buffer 0 ('x'): last (2) is before first (3)"),
        (Buffer("x", 4, 0, 1, alignment=0), "buffer 0 ('x'): alignment must be an integer >= 1"),
        (Buffer("", 4, 0, 1), "buffer 0: name must be a non-empty string"),
        (Buffer("x", True, 0, 1), "size must be a non-negative integer"),
    ],
)
def test_bad_buffer_is_a_planning_error(buffer: Buffer, message: str) -> None:
    with pytest.raises(PlanningError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Problem((buffer,))


def test_duplicate_names_are_a_planning_error() -> None:
    with pytest.raises(PlanningError, match="buffer 1: duplicate buffer name 'x'"):
        Problem([Buffer("x", 1, 0, 0), Buffer("x", 2, 1, 1)])


def test_problem_accepts_a_list_and_stores_a_tuple() -> None:
    problem = Problem([Buffer("a", 1, 0, 0)])
    assert problem.buffers == (Buffer("a", 1, 0, 0),)
    assert problem.by_name()["a"].size == 1
    assert problem.steps == range(0, 1)
    assert Problem(()).steps == range(0)


# ---------------------------------------------------------------- bounds


def test_lower_bound_is_max_live() -> None:
    # Steps: 0 -> a; 1 -> a, b; 2 -> b, c; 3 -> c.  Max live is at step 1: 150.
    problem = Problem([Buffer("a", 100, 0, 1), Buffer("b", 50, 1, 2), Buffer("c", 90, 2, 3)])
    assert max_live(problem) == 150
    assert lower_bound(problem) == 150
    assert naive_bytes(problem) == 240


def test_lower_bound_counts_alignment_at_the_busiest_step() -> None:
    # Both live at step 0. Whichever is on top starts at an aligned offset >= 10:
    # b on top: 64 + 10; a on top: 10 + 10. So the pool is at least 20, and
    # with alignments 64 for both, at least 64 + 10.
    assert lower_bound(Problem([Buffer("a", 10, 0, 0), Buffer("b", 10, 0, 0, 64)])) == 20
    assert lower_bound(Problem([Buffer("a", 10, 0, 0, 64), Buffer("b", 10, 0, 0, 64)])) == 74


def test_packed_lower_bound_counts_every_live_buffers_padding() -> None:
    # Three 10-byte buffers at alignment 64 live together: two of them take
    # 64 bytes each, the top one 10, so no plan is below 138; lower_bound
    # pads only the top one (74). With alignment 1 both are max-live.
    three = Problem([Buffer(n, 10, 0, 0, 64) for n in "abc"])
    assert lower_bound(three) == 74
    assert packed_lower_bound(three) == 138 == plan_memory(three, "greedy-by-size").pool_size
    assert packed_lower_bound(Problem([Buffer(n, 10, 0, 0) for n in "abc"])) == 30
    # at alignments 4 and 64 every offset is a multiple of 4 only: 12 + 12 + 10
    assert packed_lower_bound(Problem([Buffer("a", 10, 0, 0, 4), Buffer("b", 10, 0, 0, 64),
                                       Buffer("c", 10, 0, 0, 64)])) == 34
    # the steps are taken one by one: a and c never live together
    assert packed_lower_bound(Problem([Buffer("a", 10, 0, 0, 64), Buffer("b", 10, 0, 1, 64),
                                       Buffer("c", 10, 1, 1, 64)])) == 74


def test_bounds_of_empty_and_zero_size_problems() -> None:
    assert lower_bound(Problem(())) == 0
    assert lower_bound(Problem([Buffer("z", 0, 0, 9)])) == 0
    assert packed_lower_bound(Problem(())) == packed_lower_bound(Problem([Buffer("z", 0, 0, 9, 64)])) == 0
    assert naive_bytes(Problem(())) == 0


# ---------------------------------------------------------------- verifier

TWO = Problem([Buffer("a", 16, 0, 2), Buffer("b", 16, 2, 4, alignment=8), Buffer("c", 16, 3, 5)])


def test_valid_plan_passes() -> None:
    # a and b share step 2; c does not overlap a, so it may reuse a's bytes.
    verify_plan(TWO, plan({"a": 0, "b": 16, "c": 0}, 32))


def test_overlap_names_both_buffers() -> None:
    with pytest.raises(PlanError, match="'a' and 'b' are live at the same step and share bytes"):
        verify_plan(TWO, plan({"a": 0, "b": 8, "c": 32}, 48))


def test_touching_at_one_step_is_an_overlap() -> None:
    # a's last step is b's first: both live at step 2.
    with pytest.raises(PlanError, match="'a' and 'b'"):
        verify_plan(TWO, plan({"a": 0, "b": 0, "c": 32}, 48))


def test_misaligned_offset() -> None:
    with pytest.raises(PlanError, match="buffer 'b': offset 20 is not a multiple of its alignment 8"):
        verify_plan(TWO, plan({"a": 0, "b": 20, "c": 0}, 36))


def test_buffer_beyond_pool() -> None:
    with pytest.raises(PlanError, match=r"buffer 'b': bytes \[16, 32\) go beyond the pool size 31"):
        verify_plan(TWO, plan({"a": 0, "b": 16, "c": 0}, 31))


def test_missing_and_extra_names() -> None:
    with pytest.raises(PlanError, match="no offset for buffer 'c'"):
        verify_plan(TWO, plan({"a": 0, "b": 16}, 32))
    with pytest.raises(PlanError, match="unknown buffer 'd'"):
        verify_plan(TWO, plan({"a": 0, "b": 16, "c": 0, "d": 0}, 32))


def test_negative_offset() -> None:
    with pytest.raises(PlanError, match="buffer 'a': offset -16 is not a non-negative integer"):
        verify_plan(TWO, plan({"a": -16, "b": 16, "c": 0}, 32))


def test_zero_size_buffers_conflict_with_nothing() -> None:
    problem = Problem([Buffer("a", 16, 0, 5), Buffer("z", 0, 0, 5)])
    verify_plan(problem, plan({"a": 0, "z": 8}, 16))


def test_overlap_found_beyond_the_neighbour_in_time() -> None:
    # c clashes with a, which started long before; b sits between them in offset.
    problem = Problem([Buffer("a", 100, 0, 9), Buffer("b", 10, 5, 6), Buffer("c", 10, 8, 8)])
    with pytest.raises(PlanError, match="'a' and 'c'"):
        verify_plan(problem, plan({"a": 0, "b": 100, "c": 50}, 110))

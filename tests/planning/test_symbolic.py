"""The symbolic planner: one plan whose offsets are formulas in a size
symbol, checked against static plans at every value it claims to cover."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pyocc.planning import (
    Plan,
    fitted_alignment,
    lower_bound,
    Poly,
    SymbolicBuffer,
    SymbolicPlan,
    SymbolicProblem,
    plan_memory,
    plan_symbolic,
    symbolic_plan_to_json,
    symbolic_problem_from_json,
    verify_plan,
    verify_symbolic_plan,
)
from pyocc.planning import algorithms, symbolic
from pyocc.planning.cli import main as plan_json_main
from pyocc.planning.prepared import PreparedProblem
from pyocc.planning.problem import PlanError, PlanningError
from pyocc.runtime.planner_native import Climb

HIDDEN = 768


def encoder_layers(layers: int, symbol: str = "S") -> list[SymbolicBuffer]:
    """The buffers of a transformer encoder's layers, sizes in bytes as
    polynomials in the sequence length: activations 4*HIDDEN*S, attention
    scores for 12 heads 48*S^2, the MLP's hidden 16*HIDDEN*S."""
    buffers = []

    def add(name: str, size: str, first: int, last: int) -> None:
        buffers.append(SymbolicBuffer(name, Poly.parse(size.replace("S", symbol)), first, last, 64))

    for layer in range(layers):
        t = 10 * layer
        add(f"x{layer}", f"{4 * HIDDEN}*S", t, t + 9)
        add(f"q{layer}", f"{4 * HIDDEN}*S", t + 1, t + 3)
        add(f"k{layer}", f"{4 * HIDDEN}*S", t + 1, t + 3)
        add(f"v{layer}", f"{4 * HIDDEN}*S", t + 1, t + 4)
        add(f"scores{layer}", "48*S^2", t + 3, t + 4)
        add(f"context{layer}", f"{4 * HIDDEN}*S", t + 4, t + 5)
        add(f"proj{layer}", f"{4 * HIDDEN}*S", t + 5, t + 6)
        add(f"mlp{layer}", f"{16 * HIDDEN}*S", t + 6, t + 7)
        add(f"out{layer}", f"{4 * HIDDEN}*S", t + 7, t + 10)
    return buffers


def test_polynomials_parse_evaluate_and_print_back() -> None:
    poly = Poly.parse("48*S^2 + 3072*S + 64")
    assert poly.evaluate({"S": 3}) == 48 * 9 + 3072 * 3 + 64
    assert str(poly) == "48*S^2 + 3072*S + 64"
    assert Poly.parse(str(poly)) == poly
    assert str(Poly.parse("4*(S+1)*S")) == "4*S^2 + 4*S"
    assert str(Poly.parse("2*S - 2*S")) == "0"
    assert Poly.parse("B*S**2").evaluate({"B": 2, "S": 5}) == 50
    with pytest.raises(PlanningError, match="cannot read"):
        Poly.parse("S / 2")
    with pytest.raises(PlanningError, match="not an expression"):
        Poly.parse("4*")


@pytest.mark.parametrize("high", [512, 100_000])
def test_one_plan_matches_the_static_plan_at_every_length(high: int) -> None:
    """Over a small range (every value checked) and a large one (ends and
    crossings checked), the symbolic pool is within 5% of the static plan
    compiled for that length; the issue's lengths, plus a few more."""
    problem = SymbolicProblem(tuple(encoder_layers(2)), {"S": (1, high)})
    plan = plan_symbolic(problem)
    for length in (1, 2, 17, 64, 65, 128, 256, 384, 512):
        static = plan_memory(problem.at({"S": length})).pool_size
        assert plan.pool_bytes({"S": length}) <= 1.05 * static, length


def test_the_plan_is_valid_at_every_value_not_only_the_checked_ones() -> None:
    """A large range is verified only at its ends and crossings; the plan's
    construction makes it valid everywhere: check a sample with the static
    verifier."""
    problem = SymbolicProblem(tuple(encoder_layers(2)), {"S": (1, 100_000)})
    plan = plan_symbolic(problem)
    assert len(problem.check_points()) < 20
    for length in random.Random(0).sample(range(1, 100_001), 200):
        verify_plan(problem.at({"S": length}), plan.at({"S": length}))


def test_random_problems_in_two_symbols_verify() -> None:
    rng = random.Random(7)
    for trial in range(8):
        buffers = []
        for i in range(12):
            first = rng.randrange(10)
            size = f"{rng.randrange(1, 5) * 64}*B*S + {rng.randrange(0, 3) * 64}*S^2 + {rng.randrange(0, 256)}"
            buffers.append(SymbolicBuffer(f"t{i}", Poly.parse(size), first, first + rng.randrange(4),
                                          rng.choice([1, 16, 64])))
        problem = SymbolicProblem(tuple(buffers), {"B": (1, 4), "S": (1, 64)})
        plan = plan_symbolic(problem)  # verifies at all 256 points
        again = plan_symbolic(problem)
        assert again.pieces == plan.pieces, "planning is deterministic"
        for point in ({"B": 1, "S": 1}, {"B": 4, "S": 64}, {"B": 2, "S": 33}):
            assert plan.pool_bytes(point) >= lower_bound(problem.at(point)), (trial, point)


def test_the_verifier_names_the_value_where_a_plan_breaks() -> None:
    """Two buffers live together; `b` sits on nothing, so it overlaps `a`
    wherever `a` is non-empty: from S=2 on."""
    a = SymbolicBuffer("a", Poly.parse("64*S - 64"), 0, 1)
    b = SymbolicBuffer("b", Poly.parse("64"), 1, 2)
    problem = SymbolicProblem((a, b), {"S": (1, 8)})
    bad = SymbolicPlan.single(problem, below=((), ()), order=(0, 1))
    with pytest.raises(PlanError, match=r"at S=2: buffers 'a' and 'b' are live at the same step"):
        verify_symbolic_plan(bad)
    verify_symbolic_plan(SymbolicPlan.single(problem, below=((), (0,)), order=(0, 1)))


def test_a_buffer_smaller_than_its_alignment_gets_the_next_power_of_two_of_its_size() -> None:
    """T5's `[4, S, S]` position bias is 16 bytes at S = 1: a whole 64-byte
    line for it and its masked copy was most of the pool there. A buffer
    may get at most its alignment; where its size is smaller, the next
    power of two of the size (`fitted_alignment`), so at S = 1 the two sit
    16 bytes apart and at S = 8 (1 KiB each) a line apart, as before; the
    static problem at each value carries that alignment, and the static
    verifier refuses an offset that is not a multiple of it."""
    bias = SymbolicBuffer("bias", Poly.parse("16*S^2"), 0, 2, 64)
    masked = SymbolicBuffer("masked", Poly.parse("16*S^2"), 1, 3, 64)
    problem = SymbolicProblem((bias, masked), {"S": (1, 8)})
    plan = plan_symbolic(problem)  # verified at every S
    assert sorted(plan.offsets({"S": 1}).values()) == [0, 16] and plan.pool_bytes({"S": 1}) == 32
    assert sorted(plan.offsets({"S": 2}).values()) == [0, 64]
    assert sorted(plan.offsets({"S": 8}).values()) == [0, 1024]
    assert [b.alignment for b in problem.at({"S": 1}).buffers] == [16, 16]
    assert [b.alignment for b in problem.at({"S": 3}).buffers] == [64, 64]  # 144 bytes
    verify_plan(problem.at({"S": 1}), Plan({"bias": 0, "masked": 16}, 32, "by hand", False, 0.0))
    with pytest.raises(PlanError, match="buffer 'masked': offset 24 is not a multiple of its alignment 16"):
        verify_plan(problem.at({"S": 1}), Plan({"bias": 0, "masked": 24}, 40, "by hand", False, 0.0))
    assert [fitted_alignment(64, size) for size in (0, 1, 3, 4, 12, 16, 17, 63, 64, 1000)] == \
        [1, 1, 4, 4, 16, 16, 32, 64, 64, 64]
    assert fitted_alignment(4, 2) == 2 and fitted_alignment(4, 8) == 4  # an element's alignment: its own


def test_an_offset_formula_says_where_the_alignment_follows_the_size() -> None:
    """The plan's offset formula (the JSON's `offset_expr`) names the
    alignment the offset really gets: over 1..8 the masked bias is 16 bytes
    at S = 1, so its alignment follows its size; over 2..8 it is never
    below 64 bytes, so the formula keeps the plain 64."""
    bias = SymbolicBuffer("bias", Poly.parse("16*S^2"), 0, 2, 64)
    masked = SymbolicBuffer("masked", Poly.parse("16*S^2"), 1, 3, 64)
    problem = SymbolicProblem((bias, masked), {"S": (1, 8)})
    formulas = {plan_symbolic(problem.within({"S": (low, 8)})).offset_expr(i) for i in (0, 1) for low in (1, 2)}
    assert formulas == {"0", "align(end(bias), fitted(64, 16*S^2))", "align(end(bias), 64)"}


def _random_layout(rng: random.Random, count: int) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """A random layout: a random order, each buffer on a random subset of
    the ones before it (often not all it conflicts with: then invalid)."""
    order = list(range(count))
    rng.shuffle(order)
    below: list[tuple[int, ...]] = [()] * count
    for k, i in enumerate(order):
        below[i] = tuple(sorted(c for c in order[:k] if rng.random() < 0.6))
    return tuple(below), tuple(order)


@pytest.mark.parametrize("chunk", [symbolic.VERIFY_CHUNK, 2])
def test_the_check_at_all_points_agrees_with_verify_plan_at_each(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify_symbolic_plan checks every point of a piece at once (numpy, in
    chunks of VERIFY_CHUNK points: here also 2, so that a range holds
    several); on random problems and random plans of one or two pieces,
    valid and not (buffers sitting on a random subset of the earlier ones,
    some misaligned, some empty at the smallest values), the first point it
    rejects is the first where verify_plan, run point by point piece after
    piece, rejects the plan, with the same message."""
    monkeypatch.setattr(symbolic, "VERIFY_CHUNK", chunk)
    high = 40
    rng = random.Random(11)
    rejected, late = 0, 0
    trials = 80
    for trial in range(trials):
        buffers = []
        for i in range(rng.randrange(2, 9)):
            first = rng.randrange(6)
            size = f"{rng.randrange(0, 3) * 16}*S^2 + {rng.randrange(0, 2) * 16}*S + {rng.randrange(0, 3) * 16}"
            if rng.random() < 0.4:
                size = f"{rng.randrange(1, 3) * 16}*(S - 1)*(S - 2)"  # empty at S = 1 and 2
            buffers.append(SymbolicBuffer(f"t{i}", Poly.parse(size), first, first + rng.randrange(3),
                                          rng.choice([1, 16, 64])))
        problem = SymbolicProblem(tuple(buffers), {"S": (1, high)})
        if rng.random() < 0.5:
            plan = SymbolicPlan.single(problem, *_random_layout(rng, len(buffers)))
        else:
            cut = rng.randrange(1, high)
            plan = SymbolicPlan(problem, (symbolic.Piece({"S": (1, cut)}, *_random_layout(rng, len(buffers))),
                                          symbolic.Piece({"S": (cut + 1, high)}, *_random_layout(rng, len(buffers)))))
        expected = None
        for index in range(len(plan.pieces)):
            for point in plan.piece_problem(index).check_points():
                try:
                    verify_plan(problem.at(point), plan.at(point))
                except PlanError as error:
                    expected = f"at S={point['S']}: {error}"
                    break
            if expected is not None:
                break
        if expected is None:
            verify_symbolic_plan(plan)
            continue
        rejected += 1
        with pytest.raises(PlanError) as caught:
            verify_symbolic_plan(plan)
        assert str(caught.value) == expected, trial
        late += not expected.startswith("at S=1:")
    assert 0 < rejected < trials, "the random plans are a mix of valid and invalid ones"
    assert late > 5, "some plans break only above the first point (past the first chunks)"


@pytest.mark.parametrize(("document", "message"), [
    ({"symbols": {"S": [1, 8]}, "buffers": [{"name": "a", "size": "4*T", "first": 0, "last": 1}]},
     "uses T, which has no range"),
    ({"symbols": {"S": [8, 1]}, "buffers": []}, "range must be two integers"),
    ({"symbols": {"S": [1, 8]}, "buffers": [{"name": "a", "size": "4 - S", "first": 0, "last": 1}]},
     "is negative at S=5"),
    ({"symbols": {"S": [1, 8]}, "buffers": [{"name": "a", "size": "4*S", "first": 0, "last": 1, "pools": []}]},
     "unknown key 'pools'"),
    ({"symbols": {}, "buffers": []}, "'symbols' must be an object of ranges"),
])
def test_bad_symbolic_problems_are_one_line(document: dict, message: str) -> None:
    with pytest.raises(PlanningError, match=message):
        symbolic_problem_from_json({"format": "pyocc-plan-problem", "version": 1, **document})


def test_plan_json_plans_a_symbolic_problem(tmp_path, capsys) -> None:
    problem = {"format": "pyocc-plan-problem", "version": 1, "symbols": {"S": [1, 512]},
               "buffers": [{"name": b.name, "size": str(b.size), "first": b.first, "last": b.last, "alignment": 64}
                           for b in encoder_layers(1)]}
    path = tmp_path / "problem.json"
    path.write_text(json.dumps(problem))
    assert plan_json_main([str(path)]) == 0
    solution = json.loads(capsys.readouterr().out)
    assert solution["format"] == "pyocc-symbolic-solution"
    assert solution["verified_points"] == 512
    read = symbolic_problem_from_json(problem)
    assert solution["pool_size"] == plan_symbolic(read).pool_bytes({"S": 512})
    assert {b["name"]: b["size_expr"] for b in solution["buffers"]}["scores0"] == "48*S^2"
    assert symbolic_plan_to_json(plan_symbolic(read))["pool_size_expr"] == solution["pool_size_expr"]
    path.write_text(json.dumps({**problem, "symbols": {"S": [1, "n"]}}))
    assert plan_json_main([str(path)]) == 2
    assert "symbol 'S': its range must be [low, high]" in capsys.readouterr().err


def _three_buffers(high: int = 64) -> SymbolicProblem:
    """Three buffers whose largest is 128*S at small S and 16*S^2 at large S:
    one layout for 1..high cannot be tight at both ends."""
    return SymbolicProblem((SymbolicBuffer("t0", Poly.parse("32*S"), 3, 5, 64),
                            SymbolicBuffer("t1", Poly.parse("128*S"), 2, 3, 64),
                            SymbolicBuffer("t2", Poly.parse("16*S^2"), 4, 5, 64)), {"S": (1, high)})


def _best_static(problem: SymbolicProblem, values: dict[str, int]) -> int:
    return min(plan_memory(problem.at(values), algorithm).pool_size
               for algorithm in (*symbolic.STATIC_ALGORITHMS, symbolic.SEARCH_ALGORITHM))


def test_pieces_bring_every_value_within_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut into pieces, the plan is within SPLIT_THRESHOLD of the best static
    plan at every value; one layout for the whole range is not."""
    problem = _three_buffers()
    plan = plan_symbolic(problem)
    assert 1 < len(plan.pieces) <= symbolic.MAX_PIECES
    assert plan.split == "S" and plan.pieces[0].ranges["S"][0] == 1 and plan.pieces[-1].ranges["S"][1] == 64
    for s in range(1, 65):
        assert plan.pool_bytes({"S": s}) <= (1 + symbolic.SPLIT_THRESHOLD) * _best_static(problem, {"S": s}), s
    monkeypatch.setattr(symbolic, "MAX_PIECES", 1)
    one = plan_symbolic(problem)
    assert len(one.pieces) == 1
    assert any(one.pool_bytes({"S": s}) > (1 + symbolic.SPLIT_THRESHOLD) * _best_static(problem, {"S": s})
               for s in range(1, 65))


def test_static_plans_made_once_still_count_when_the_checks_are_spent() -> None:
    """The search for cuts makes static plans at no more than STATIC_CHECKS
    values per problem; a value planned before is read back, not skipped,
    once they are spent (on LLaMA the first piece spent all 32, and every
    later part looked free of excess, so no further cut was made)."""
    problem = _three_buffers()
    planner = symbolic._Planner(problem)
    layout = planner.layout(problem)
    bad = planner.bad_values(layout)
    assert bad
    planner.checks_left = 0
    assert planner.bad_values(layout) == bad


def test_static_checks_are_spread_over_the_octaves_of_the_range() -> None:
    """With two checks left and suspects at S = 20 and 21 (1.3x and 1.25x
    the bound) and at S = 2 (1.1x), one check goes to the worst of each
    octave: 20 and 2, not 20 and 21 (ranked by the bound alone, a run of bad
    values at one scale spent every check and S = 2 was never looked at)."""
    problem = SymbolicProblem((SymbolicBuffer("a", Poly.parse("64*S"), 0, 1),), {"S": (1, 64)})
    planner = symbolic._Planner(problem)
    grid = symbolic._grid(problem)
    bound = 64 * grid["S"]  # the static plan at every S is the one buffer: the bound
    factor = np.ones(len(bound))
    for value, ratio in ((20, 1.3), (21, 1.25), (2, 1.1)):
        factor[value - 1] = ratio
    layout = symbolic._Layout(symbolic.Piece({"S": (1, 64)}, ((),), (0,)), grid,
                              np.rint(bound * factor).astype(np.int64), bound)
    planner.checks_left = 2
    assert sorted(planner.bad_values(layout)) == [2, 20]
    assert planner.checks_left == 0


LLAMA = Path(__file__).parent / "data" / "llama_dynamo_symbolic.json"
"""LLaMA's planning problem (bench/zoo.py's llama, 2 layers, dynamo export,
sequence in 1..512), written by the symbolic compile."""


def test_llama_pieces_are_near_the_static_plans_from_small_to_large() -> None:
    """Its one layout was 1.10x the best static plan at S = 17 to 49 and
    was never cut there: the cut above those values left their worst ratio
    as it was (it fixed 50..72), so it was refused; the candidates had no
    layout from a static plan inside 16..31. Now a cut that fixes a part and
    leaves the worst is kept, and every static plan made while looking for
    cuts is a candidate."""
    problem = symbolic_problem_from_json(json.loads(LLAMA.read_text()))
    plan = plan_symbolic(problem)
    assert len(plan.pieces) <= symbolic.MAX_PIECES
    for s in (1, 2, 17, 33, 128, 512):
        values = {"sequence": s}
        best = min(plan_memory(problem.at(values), a).pool_size for a in symbolic.STATIC_ALGORITHMS)
        assert plan.pool_bytes(values) <= 1.02 * best, s


BERT = Path(__file__).parent / "data" / "bert_classic_symbolic.json"
"""BERT's planning problem (bench/zoo.py's bert, 2 layers, classic export,
sequence in 1..512), written by the symbolic compile."""


def test_the_search_stops_at_the_packed_bound_with_the_same_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hill climb at the values the search for cuts looks at ended a few
    bytes above ``lower_bound`` (rows of S x 4 bytes at alignment 64) and
    ran all its 2,000 steps; it now stops at ``packed_lower_bound``. The
    plan is the same byte for byte as with the search stopped at
    ``lower_bound`` only (what ``plan_memory(..., "hill-climb")`` does),
    with far fewer placements tried."""
    problem = symbolic_problem_from_json(json.loads(BERT.read_text()))
    placements = [0]
    place, run = algorithms.place_in_order, Climb.run

    def counted(*args: object, **kwargs: object) -> list[int]:
        placements[0] += 1
        return place(*args, **kwargs)

    def counted_trials(climb: Climb, trials: int, bound: int) -> int:
        ran = run(climb, trials, bound)
        placements[0] += ran  # trials of the hill climb (run natively)
        return ran

    monkeypatch.setattr(algorithms, "place_in_order", counted)
    monkeypatch.setattr(Climb, "run", counted_trials)
    plan = plan_symbolic(problem)
    packed = placements[0]
    placements[0] = 0
    monkeypatch.setattr(symbolic, "packed_lower_bound", lambda prep: 0)
    old = plan_symbolic(problem)
    assert plan.pieces == old.pieces and len(plan.pieces) > 1
    assert packed < placements[0] - 5000, (packed, placements[0])  # 8,704 against 14,330
    # and each search's plan is the one plan_memory's hill climb makes
    for s in (15, 255):
        static = problem.at({"sequence": s})
        assert symbolic._search(PreparedProblem(static)).offsets == plan_memory(static, "hill-climb", time_budget_ms=5000).offsets


T5 = Path(__file__).parent / "data" / "t5_classic_symbolic.json"
"""T5's planning problem (bench/zoo.py's t5, 2 layers, classic export,
encoder and decoder sequence one symbol in 1..512), written by the symbolic
compile."""


def test_t5_pieces_meet_the_search_at_small_values() -> None:
    """T5 is cut into MAX_PIECES pieces and its first, 1..6, was still 1.09x
    the search's static plan at S = 2 (1,540 B against 1,412 B): the search
    had not run there (the heuristic plans already left S = 2 bad), and the
    search's plan at 6, first among layouts with the same worst ratio, was
    kept over one as good at 6 and smaller below. Now a piece still bad
    after the cuts gets the search's plan at its worst value as a
    candidate, and equal worst ratios are decided by the mean. The
    reference is each static heuristic and the search run to its steps
    (`symbolic._search`, not cut by a time budget: with a budget the
    reference depended on the machine's load); against it the pieces are
    within 2% but at S = 6, where the search's 2,000 steps find 5,028 B and
    the layout of its piece, 5..6, gives 5,184 (1.031x; the issue's goal is
    1.05x)."""
    problem = symbolic_problem_from_json(json.loads(T5.read_text()))
    plan = plan_symbolic(problem)
    for s, within in ((1, 1.02), (2, 1.02), (3, 1.02), (6, 1.05), (17, 1.02)):
        values = {"sequence": s}
        static = problem.at(values)
        best = min(min(plan_memory(static, a).pool_size for a in symbolic.STATIC_ALGORITHMS),
                   symbolic._search(PreparedProblem(static)).pool_size)
        assert plan.pool_bytes(values) <= within * best, s


def _plain_alignments(buffer: SymbolicBuffer, size: np.ndarray) -> np.ndarray:
    """The buffer's alignment at every grid point, one `fitted_alignment` each."""
    return np.array([fitted_alignment(buffer.alignment, int(bytes_)) for bytes_ in size], dtype=np.int64)


def _plain_pool(problem: SymbolicProblem, sizes: list[np.ndarray], below: tuple[tuple[int, ...], ...],
                order: tuple[int, ...]) -> np.ndarray:
    """A layout's pool at every grid point, written plainly: each buffer at
    the aligned top of the buffers it sits on."""
    ends = np.zeros((len(sizes), len(sizes[0])), dtype=np.int64)
    for i in order:
        alignment = _plain_alignments(problem.buffers[i], sizes[i])
        top = ends[list(below[i])].max(axis=0) if below[i] else 0
        ends[i] = -(-top // alignment) * alignment + sizes[i]
    return ends.max(axis=0)


def _plain_greedy(problem: SymbolicProblem, sizes: list[np.ndarray], reference: int) -> tuple[tuple[int, ...], ...]:
    """Greedy by size at grid point `reference` with gaps, written plainly:
    each buffer tries the bottom and the end of each placed conflicting
    buffer there, lowest first, and sits on those ending at or below it
    where the rest start above its end at every point (the bottom itself
    is never taken: `_greedy` reads an empty below-set as "none found")."""
    buffers = problem.buffers
    order = sorted(range(len(buffers)),
                   key=lambda i: (-int(sizes[i][reference]), -(buffers[i].last - buffers[i].first), i))
    offsets: dict[int, np.ndarray] = {}
    below: list[tuple[int, ...]] = [()] * len(buffers)

    def aligned_top(sit_on: list[int], alignment: np.ndarray) -> np.ndarray:
        top = np.zeros(len(sizes[0]), dtype=np.int64)
        for c in sit_on:
            top = np.maximum(top, offsets[c] + sizes[c])
        return -(-top // alignment) * alignment

    for i in order:
        conflicts = [c for c in offsets if buffers[c].overlaps(buffers[i])]
        chosen = tuple(sorted(conflicts))
        for candidate in sorted({0, *(int(offsets[c][reference] + sizes[c][reference]) for c in conflicts)}):
            sit_on = sorted(c for c in conflicts if offsets[c][reference] + sizes[c][reference] <= candidate)
            if len(sit_on) == len(conflicts):
                break
            end = aligned_top(sit_on, _plain_alignments(buffers[i], sizes[i])) + sizes[i]
            if all(np.all(end <= offsets[c]) for c in conflicts if c not in sit_on):
                chosen = tuple(sit_on) or chosen  # as _greedy: the bottom (sitting on none) is not taken
                break
        below[i] = chosen
        offsets[i] = aligned_top(list(chosen), _plain_alignments(buffers[i], sizes[i]))
    return tuple(below)


def _plain_max_live(problem: SymbolicProblem, sizes: list[np.ndarray]) -> np.ndarray:
    """The max-live bound at every grid point, written plainly: the most
    bytes of the buffers live at one step."""
    steps = range(min(b.first for b in problem.buffers), max(b.last for b in problem.buffers) + 1)
    return np.max([sum((size for b, size in zip(problem.buffers, sizes) if b.first <= step <= b.last),
                       np.zeros_like(sizes[0])) for step in steps], axis=0)


@pytest.mark.parametrize("path", [T5, BERT])
def test_candidate_layouts_and_pools_are_the_plain_ones(path: Path) -> None:
    """The candidates' pools (`_pool`, one array per buffer, alignments
    rounded with a mask), greedy by size's gaps (`_lowest_gap`, every
    candidate offset from running maxima of the conflicts sorted by end),
    a static plan's below-sets (`_stacked`) and the max-live bound
    (`_max_live`, a running sum) are those written plainly, on T5's and
    BERT's recorded problems at each reference point, as over a cut part
    of the range."""
    whole = symbolic_problem_from_json(json.loads(path.read_text()))
    # the encoder's buffers start at the steps where others end
    encoder = SymbolicProblem(tuple(encoder_layers(2, "sequence")), {"sequence": (1, 64)})
    for problem in (whole, whole.within({"sequence": (5, 40)}), encoder):
        grid = symbolic._grid(problem)
        sizes = [b.size.evaluate_grid(grid) for b in problem.buffers]
        length = len(sizes[0])
        assert np.array_equal(symbolic._max_live(problem, sizes), _plain_max_live(problem, sizes))
        point = {"sequence": int(grid["sequence"][length // 2])}
        plan = plan_memory(problem.at(point), "greedy-by-size")
        alignments = symbolic._alignments(problem, sizes)
        below, order = symbolic._stacked(problem, [b.size for b in problem.at(point).buffers], plan)
        pool = symbolic._pool(sizes, alignments, below, order)
        buffers = problem.buffers
        offset = [plan.offsets[b.name] for b in buffers]
        end = [offset[c] + b.size.evaluate(point) for c, b in enumerate(buffers)]
        for i, b in enumerate(buffers):  # on the conflicting buffers placed before it and ending below it
            before = order[:order.index(i)]
            assert below[i] == tuple(sorted(c for c in before if buffers[c].overlaps(b) and end[c] <= offset[i]))
        assert np.array_equal(pool, _plain_pool(problem, sizes, below, order))
        overlapping = symbolic._overlapping(problem)
        for reference in sorted({0, length // 4, length // 2, length - 1}):
            below, order = symbolic._greedy(problem, sizes, alignments, overlapping, reference, use_gaps=True)
            assert below == _plain_greedy(problem, sizes, reference)
            assert np.array_equal(symbolic._pool(sizes, alignments, below, order),
                                  _plain_pool(problem, sizes, below, order))
            no_gaps = symbolic._greedy(problem, sizes, alignments, overlapping, reference, use_gaps=False)
            assert np.array_equal(symbolic._pool(sizes, alignments, *no_gaps), _plain_pool(problem, sizes, *no_gaps))


@pytest.mark.parametrize("high", [512, 5000])
def test_a_part_reads_its_pools_off_the_whole_range(high: int) -> None:
    """The planner computes a layout's pool once, over the whole problem's
    grid, and a part of the range reads its values there (`_Planner.pool`);
    a part whose grid holds values the whole grid lacks (a range above
    ``GRID_LIMIT``: each grid has its own samples) computes its own. Either
    way the pools are those written plainly at the part's grid, and a
    static plan made symbolic (`_Planner.stacked`) is `_stacked`'s."""
    whole = SymbolicProblem(symbolic_problem_from_json(json.loads(T5.read_text())).buffers,
                            {"sequence": (1, high)})
    planner = symbolic._Planner(whole)
    point = {"sequence": 17}
    plan = planner.static(point, "greedy-by-size")
    layout = planner.stacked(point, plan)
    assert layout == symbolic._stacked(whole, [b.size.evaluate(point) for b in whole.buffers], plan)
    greedy = symbolic._greedy(whole, planner.sizes, planner.alignments, planner.overlapping, 0, use_gaps=False)
    for part in ((1, high), (1, 8), (9, 12), (13, high)):
        problem = whole.within({"sequence": part})
        grid = symbolic._grid(problem)
        sizes = [b.size.evaluate_grid(grid) for b in problem.buffers]
        for shape in (layout, greedy):
            assert np.array_equal(planner.pool(grid, sizes, shape), _plain_pool(problem, sizes, *shape)), part
    assert len(planner.pools) == 2  # one pool per layout, over the whole grid


T5_INT_ALIGNED = Path(__file__).parent / "data" / "t5_classic_int_aligned_symbolic.json"
"""The same T5's planning problem with integer and boolean buffers at
their element's alignment (dnn.buffer_alignment), as the compile writes it now."""


def test_t5_with_small_integer_alignments_meets_the_search_at_small_values() -> None:
    """With its masks and bucket ids aligned to their elements, T5's first
    piece, 1..6, kept a layout of 1,476 B at S = 2 against the search's
    1,412 B: the heuristic plans at 2 were within ``SPLIT_THRESHOLD`` of
    1,476, so the search for cuts never ran the search there. Now a piece's
    candidates include the search's plan at its first value too."""
    problem = symbolic_problem_from_json(json.loads(T5_INT_ALIGNED.read_text()))
    plan = plan_symbolic(problem)
    for s in (1, 2, 6):  # the piece's ends and S = 2 (the larger values: the test above, on the same planner)
        static = problem.at({"sequence": s})
        # the search's 2,000 steps (its default time budget cuts them short on a loaded machine)
        best = min([plan_memory(static, a).pool_size for a in symbolic.STATIC_ALGORITHMS]
                   + [plan_memory(static, symbolic.SEARCH_ALGORITHM, time_budget_ms=5000).pool_size])
        assert plan.pool_bytes({"sequence": s}) <= 1.02 * best, s


DISTILBERT = Path(__file__).parent / "data" / "distilbert_classic_symbolic.json"
"""DistilBERT's planning problem (bench/zoo.py's distilbert, 2 layers,
classic export, sequence in 1..512), written by the symbolic compile."""


def test_bad_values_at_both_ends_are_cut_at_the_widest_gap() -> None:
    """DistilBERT's piece 6..512 was bad at 6..20 and 59..512: cut just above
    its worst value (6), then again (7..8), it kept 9..512 as one piece,
    1.11x the best static plan at S = 17. Cut where the bad values are
    farthest apart (20..59), the small and the large values get layouts of
    their own."""
    problem = symbolic_problem_from_json(json.loads(DISTILBERT.read_text()))
    plan = plan_symbolic(problem)
    algorithms = (*symbolic.STATIC_ALGORITHMS, symbolic.SEARCH_ALGORITHM)
    for s in (1, 2, 17, 128, 384, 512):
        values = {"sequence": s}
        best = min(plan_memory(problem.at(values), a).pool_size for a in algorithms)
        assert plan.pool_bytes(values) <= 1.05 * best, s


DISTILBERT_BATCH2 = Path(__file__).parent / "data" / "distilbert_classic_batch2_symbolic.json"
"""DistilBERT's planning problem at batch 2 (bench/zoo.py's distilbert, 2
layers, classic export, sequence in 1..512), written by the symbolic compile."""


def test_pieces_bad_at_every_scale_are_placed_by_segmentation() -> None:
    """Its one layout is bad at every scale (1.07 to 1.25x the best static
    plan over 1..256). The cut search peeled single values off its ends
    (pieces 1, 2..8, 9, 10..512) and left 1.122x at S = 12 and 1.043x at
    128. The best segmentation of the range over the static plans made
    while looking for cuts has one layout within 0.5% over 1..64 and two
    more above."""
    problem = symbolic_problem_from_json(json.loads(DISTILBERT_BATCH2.read_text()))
    plan = plan_symbolic(problem)
    assert len(plan.pieces) <= symbolic.MAX_PIECES
    algorithms = (*symbolic.STATIC_ALGORITHMS, symbolic.SEARCH_ALGORITHM)
    for s in (1, 2, 12, 17, 33, 128, 256, 384, 512):
        values = {"sequence": s}
        best = min(plan_memory(problem.at(values), a).pool_size for a in algorithms)
        assert plan.pool_bytes(values) <= 1.005 * best, s


def test_segmentation_minimises_the_worst_then_the_sum_with_few_pieces() -> None:
    """Three layouts over six blocks: the first good at the start, the
    second at the end, the third never best. Two pieces reach a worst of
    1.0; a third piece could only lower the sum, which it does not here."""
    ratios = np.array([[1.0, 1.0, 1.0, 1.2, 1.3, 1.4],
                       [1.5, 1.4, 1.3, 1.0, 1.0, 1.0],
                       [1.1, 1.1, 1.1, 1.1, 1.1, 1.1]])
    assert symbolic._segment(ratios, ratios, 4) == [(0, 2, 0), (3, 5, 1)]
    assert symbolic._segment(ratios, ratios, 1) == [(0, 5, 2)]  # one piece: the layout with the lowest worst
    # the worst first: two layouts that tie on it, the one with the lower sum
    ties = np.array([[1.2, 1.0, 1.0], [1.2, 1.1, 1.1]])
    assert symbolic._segment(ties, ties, 1) == [(0, 2, 0)]
    assert symbolic._best_split(np.array([[1.0, 2.0], [np.inf, 1.0]]), 2, np.maximum) == (1.0, [1, 0])


def test_layouts_with_the_same_worst_ratio_are_ranked_by_their_mean() -> None:
    """Two pools equal at the top, where the ratio is worst: the one smaller
    below scores better; a lower worst ratio still beats any mean."""
    bound = np.array([100, 1000])
    assert symbolic._layout_score(np.array([110, 1100]), bound, 1) < \
        symbolic._layout_score(np.array([130, 1100]), bound, 1)
    assert symbolic._layout_score(np.array([195, 1950]), bound, 1) < \
        symbolic._layout_score(np.array([101, 2000]), bound, 1)


def test_cuts_are_tried_above_the_bad_values_then_at_the_lowest_alone() -> None:
    """Bad values in a prefix: cut above the last, then try the lowest alone;
    bad values at both ends: cut above the worst, then the lowest alone."""
    assert symbolic._cut_points({1: 1.3, 2: 1.2}, 1, 64) == [2, 1]
    assert symbolic._cut_points({60: 1.1, 64: 1.2}, 1, 64) == [59, 60]
    assert symbolic._cut_points({1: 1.05, 3: 1.1, 64: 1.2}, 1, 64) == [3, 1]  # the widest gap, 3..64
    assert symbolic._cut_points({3: 1.05, 4: 1.1, 5: 1.2, 6: 1.1}, 3, 6) == [5, 3]  # no wide gap: the worst
    assert symbolic._cut_points({1: 1.3, 64: 1.2}, 1, 64) == [1]


def test_piecewise_formulas_name_each_piece() -> None:
    plan = plan_symbolic(_three_buffers())
    bound = plan.pieces[0].ranges["S"][1]
    text = plan.pool_expr()
    assert text.startswith(f"S <= {bound}: ") and "; else: " in text
    assert text == plan.piecewise([plan.piece_pool_expr(k) for k in range(len(plan.pieces))])
    assert plan.piecewise(["end(a)"] * len(plan.pieces)) == "end(a)"  # equal in every piece: one formula
    solution = symbolic_plan_to_json(plan)
    assert [p["symbols"]["S"] for p in solution["pieces"]] == [list(p.ranges["S"]) for p in plan.pieces]
    assert solution["verified_points"] == 64


def test_a_problem_without_excess_and_one_in_two_symbols_stay_one_piece() -> None:
    """Negative twins: a layout that meets the bound everywhere is not cut,
    and problems in two symbols are never cut."""
    problem = SymbolicProblem((SymbolicBuffer("a", Poly.parse("64*S"), 0, 1, 64),
                               SymbolicBuffer("b", Poly.parse("64*S"), 1, 2, 64)), {"S": (1, 64)})
    assert len(plan_symbolic(problem).pieces) == 1
    two = SymbolicProblem(tuple(SymbolicBuffer(b.name, Poly.parse(str(b.size).replace("S", "B*S")), b.first, b.last,
                                               64) for b in _three_buffers().buffers), {"B": (1, 2), "S": (1, 32)})
    assert len(plan_symbolic(two).pieces) == 1


def test_the_verifier_rejects_pieces_that_do_not_cover_the_range() -> None:
    plan = plan_symbolic(_three_buffers())
    first, *rest = plan.pieces
    low, high = first.ranges["S"]
    gap = SymbolicPlan(plan.problem, (replace(first, ranges={"S": (low, high - 1)}), *rest))
    with pytest.raises(PlanError, match=rf"piece 1: S in {high + 1}\.\.\d+ does not start at {high}"):
        verify_symbolic_plan(gap)
    short = SymbolicPlan(plan.problem, (first,))
    with pytest.raises(PlanError, match="a plan of one piece must cover the whole range"):
        verify_symbolic_plan(short)
    # every buffer at 0 in the last piece: the verifier names that piece's first value
    stacked = SymbolicPlan(plan.problem, (*plan.pieces[:-1], replace(plan.pieces[-1], below=((), (), ()))))
    start = plan.pieces[-1].ranges["S"][0]
    with pytest.raises(PlanError, match=rf"^at S={start}: buffers"):
        verify_symbolic_plan(stacked)
    verify_symbolic_plan(plan)


def test_a_problem_without_buffers_gets_an_empty_plan() -> None:
    """A program with no intermediate buffer (a graph that only reshapes
    its input) still plans: one piece, a pool of 0 at every value (the
    planner's shared pools have no grid of their own there)."""
    plan = plan_symbolic(SymbolicProblem((), {"S": (1, 64)}))
    assert len(plan.pieces) == 1 and plan.pool_bytes({"S": 17}) == 0


@pytest.mark.parametrize("seed", range(8))
def test_the_native_pool_of_a_layout_is_numpys(seed: int) -> None:
    """pyocc.runtime.planner_native.stacked_pool, which scores the
    candidate layouts once the hill climb has compiled it: `_pool`'s numbers
    on random layouts (alignments powers of two, fitted ones varying by
    point, and others)."""
    from pyocc.runtime import planner_native

    rng = np.random.default_rng(seed)
    count, points = int(rng.integers(1, 40)), int(rng.integers(1, 70))
    sizes = [rng.integers(0, 5000, points) for _ in range(count)]
    alignments = [int(rng.choice([1, 3, 48, 64])) if rng.random() < 0.7 else rng.choice([1, 2, 8, 64], points)
                  for _ in range(count)]
    order = [int(i) for i in rng.permutation(count)]
    below = [()] * count
    for k, i in enumerate(order):
        below[i] = tuple(sorted(int(c) for c in order[:k] if rng.random() < 0.3))
    native = planner_native.stacked_pool(
        np.stack(sizes), np.stack([np.broadcast_to(a, points) for a in alignments]), below, order)
    assert native.tolist() == symbolic._pool(sizes, alignments, below, order).tolist()


@pytest.mark.parametrize("seed", range(12))
def test_the_native_greedy_is_pythons(seed: int) -> None:
    """pyocc.runtime.planner_native.stacked_greedy, which makes the
    symbolic planner's greedy layouts once the hill climb has compiled it:
    `_greedy`'s layouts on random problems (sizes that grow, shrink or
    stay over the points, alignments powers of two, fitted per point, and
    others; every reference point; with and without gaps)."""
    from pyocc.planning.symbolic import _greedy, _greedy_order, _overlapping
    from pyocc.runtime import planner_native

    rng = np.random.default_rng(seed)
    count, points = int(rng.integers(1, 30)), int(rng.integers(1, 40))
    firsts = rng.integers(0, 12, count)
    problem = SymbolicProblem(tuple(SymbolicBuffer(f"b{i}", Poly.constant(1), int(firsts[i]),
                                                   int(firsts[i] + rng.integers(0, 6)), 64) for i in range(count)),
                              {"S": (1, points)})
    base = rng.integers(0, 400, count)
    slope = rng.integers(-3, 20, count)
    sizes = [np.maximum(base[i] + slope[i] * np.arange(points), 0) for i in range(count)]
    alignments = [int(rng.choice([1, 3, 48, 64])) if rng.random() < 0.7 else rng.choice([1, 2, 8, 64], points)
                  for _ in range(count)]
    overlapping = _overlapping(problem)
    conflicts = [sorted(c for c in overlapping[i] if c != i) for i in range(count)]
    matrices = np.stack(sizes), np.stack([np.broadcast_to(a, points) for a in alignments])
    for reference in {0, points // 2, points - 1}:
        for use_gaps in (True, False):
            order = _greedy_order(problem, sizes, reference)
            native = planner_native.stacked_greedy(*matrices, conflicts, order, reference, use_gaps)
            assert (native, tuple(order)) == _greedy(problem, sizes, alignments, overlapping, reference, use_gaps)


def test_the_symbolic_plan_is_the_same_with_the_native_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """BERT's recorded problem plans the same with the native pool and
    greedy as with numpy's."""
    from pyocc.runtime import planner_native

    problem = symbolic_problem_from_json(json.loads(BERT.read_text()))
    planner_native.Placer([1], [1], [[]])  # compiled in this process: the planner scores natively
    native = plan_symbolic(problem)
    monkeypatch.setattr(planner_native, "compiled", lambda: False)
    assert plan_symbolic(problem).pieces == native.pieces


def test_the_native_climb_is_the_python_climb_on_t5(monkeypatch: pytest.MonkeyPatch) -> None:
    """T5's static problem at S = 509, the symbolic planner's first search:
    2,000 trials short of the bound, natively (`pyocc_climb`, Python's
    random numbers drawn natively: the generator's words are twisted again
    several times) and in Python, to the same offsets."""
    from pyocc.planning import algorithms
    from pyocc.planning.placement import native_placer
    from pyocc.planning.prepared import PreparedProblem

    problem = symbolic_problem_from_json(json.loads(T5.read_text())).at({"sequence": 509})
    native = PreparedProblem(problem)
    native_placer(native)
    natively = algorithms.hill_climb_offsets(native, time_budget_ms=1e9, max_iterations=2000)
    assert native.pool_size(natively) > algorithms.lower_bound(native), "the climb ran all its trials"
    monkeypatch.setattr(algorithms, "native_placer", lambda prep, compile=True: None)
    assert algorithms.hill_climb_offsets(PreparedProblem(problem), time_budget_ms=1e9, max_iterations=2000) == natively

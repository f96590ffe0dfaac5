"""Memory-aware scheduling (pyocc.planning.schedule) on plain DAGs.

Peaks are checked against this file's own definition (live intervals from
producer to last consumer, summed per step), and `exact` against brute force
over every topological order of small random DAGs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyocc.planning.schedule import (
    ScheduleGraph,
    ScheduleTimeout,
    Tensor,
    find_cuts,
    is_topological,
    least_worst,
    peak_of,
    schedule,
)

SETTINGS = settings(max_examples=100, deadline=None)


def interval_peak(graph: ScheduleGraph, order: list[int]) -> int:
    """The peak by definition: each tensor is live from its producer's step
    to its last consumer's step; sum per step, take the max. A node that
    writes in place over an input whose last consumer it is shares those
    bytes at its step."""
    position = {v: i for i, v in enumerate(order)}
    live = [0] * len(order)
    last_reader = {}
    for i, t in enumerate(graph.tensors):
        first = position[t.producer]
        last = max((position[c] for c in t.consumers), default=first)
        last_reader[i] = order[last]
        for step in range(first, last + 1):
            live[step] += t.bytes
    for v, candidates in enumerate(graph.in_place):
        if any(last_reader[i] == v for i in candidates):
            live[position[v]] -= sum(t.bytes for t in graph.tensors if t.producer == v)
    return max(live, default=0)


def topological_orders(graph: ScheduleGraph) -> Iterator[list[int]]:
    """Every topological order (small graphs only)."""
    preds = [graph.predecessors(v) for v in range(graph.size)]

    def extend(order: list[int], done: set[int]) -> Iterator[list[int]]:
        if len(order) == graph.size:
            yield list(order)
            return
        for v in range(graph.size):
            if v not in done and preds[v] <= done:
                order.append(v)
                done.add(v)
                yield from extend(order, done)
                order.pop()
                done.remove(v)

    yield from extend([], set())


@st.composite
def dags(draw: st.DrawFn, max_nodes: int = 7) -> ScheduleGraph:
    """A random DAG whose node order 0..n-1 is topological: each node makes
    0-2 tensors (some of zero bytes) read by later nodes, plus a few
    order-only edges and, for some nodes with one result, inputs of the same
    size they may write over."""
    n = draw(st.integers(1, max_nodes))
    tensors = []
    for v in range(n):
        for _ in range(draw(st.integers(0, 2))):
            later = list(range(v + 1, n))
            consumers = draw(st.sets(st.sampled_from(later), max_size=3)) if later else set()
            size = draw(st.one_of(st.just(0), st.sampled_from([10, 20]), st.integers(1, 100)))
            tensors.append(Tensor(size, v, frozenset(consumers)))
    after = tuple(frozenset(draw(st.sets(st.integers(0, v - 1), max_size=1))) if v and draw(st.booleans())
                  else frozenset() for v in range(n))
    in_place = []
    for v in range(n):
        results = [t for t in tensors if t.producer == v]
        inputs = [i for i, t in enumerate(tensors) if v in t.consumers]
        same = [i for i in inputs if len(results) == 1 and results[0].bytes and tensors[i].bytes == results[0].bytes]
        in_place.append(frozenset(draw(st.sets(st.sampled_from(same), max_size=2))) if same else frozenset())
    return ScheduleGraph(tuple(f"n{v}" for v in range(n)), tuple(tensors), after, tuple(in_place))


@SETTINGS
@given(dags())
def test_exact_equals_brute_force_over_all_orders(graph: ScheduleGraph) -> None:
    best = min(interval_peak(graph, order) for order in topological_orders(graph))
    result = schedule(graph, "exact", budget_ms=10_000)
    assert is_topological(graph, result.order)
    assert result.peak == interval_peak(graph, result.order) == best
    assert result.proven_optimal


@SETTINGS
@given(dags(max_nodes=14), st.sampled_from(["auto", "greedy", "exact", "given"]))
def test_every_strategy_gives_a_topological_order_with_its_stated_peak(graph: ScheduleGraph, strategy: str) -> None:
    result = schedule(graph, strategy, budget_ms=10_000)
    assert is_topological(graph, result.order)
    assert result.peak == interval_peak(graph, result.order) == peak_of(graph, result.order)
    assert result.given_peak == interval_peak(graph, list(range(graph.size)))
    if strategy != "greedy":
        assert result.peak <= result.given_peak
    if strategy == "given":
        assert result.order == list(range(graph.size))


@SETTINGS
@given(dags(max_nodes=14))
def test_auto_within_budget_reaches_exact(graph: ScheduleGraph) -> None:
    assert schedule(graph, "auto", budget_ms=10_000).peak == schedule(graph, "exact", budget_ms=10_000).peak


@SETTINGS
@given(dags(max_nodes=7))
def test_cuts_are_the_nodes_every_order_runs_at_one_position(graph: ScheduleGraph) -> None:
    # A node comparable with every other one has exactly its ancestors
    # before it in any order; any other node can move.
    orders = list(topological_orders(graph))
    fixed = [v for v in range(graph.size) if len({order.index(v) for order in orders}) == 1]
    assert find_cuts(graph) == fixed


@SETTINGS
@given(dags(max_nodes=14), st.sampled_from(["auto", "greedy", "exact"]))
def test_keeping_the_given_order_keeps_the_peak(graph: ScheduleGraph, strategy: str) -> None:
    searched = schedule(graph, strategy, budget_ms=10_000)
    kept = schedule(graph, strategy, budget_ms=10_000, keep_given=True)
    assert is_topological(graph, kept.order)
    assert kept.peak == interval_peak(graph, kept.order) <= searched.peak


def test_keeping_the_given_order_where_the_peak_does_not_depend_on_it() -> None:
    # Nodes 0-3 set the peak: 0 -> A (100 bytes) -> 2 and 1 -> B (100) -> 3;
    # finishing A's branch before B's gives 102 bytes instead of 201. Nodes
    # 4 and 5 make two small tensors read by 6; in any order they stay far
    # under the peak, and the search runs 5 before 4. Kept: 4, then 5.
    tensors = (Tensor(100, 0, frozenset({2})), Tensor(100, 1, frozenset({3})), Tensor(1, 2, frozenset({7})),
               Tensor(1, 3, frozenset({7})), Tensor(10, 4, frozenset({6})), Tensor(10, 5, frozenset({6})),
               Tensor(10, 6, frozenset({7})))
    graph = ScheduleGraph(tuple(f"n{v}" for v in range(8)), tensors)
    searched = schedule(graph, "auto")
    assert searched.peak == 102 and searched.order.index(5) < searched.order.index(4)
    kept = schedule(graph, "auto", keep_given=True)
    assert kept.order == [0, 2, 1, 3, 4, 5, 6, 7] and kept.peak == 102
    # the given order where nothing was moved
    chain = ScheduleGraph(("a", "b", "c"), (Tensor(8, 0, frozenset({1})), Tensor(8, 1, frozenset({2}))))
    assert schedule(chain, "auto", keep_given=True).order == [0, 1, 2]


def test_least_worst_takes_the_order_closest_to_the_best_at_every_size() -> None:
    # two independent nodes, each a tensor read by a sink; the sizes differ per graph
    def graph(a: int, b: int, c: int) -> ScheduleGraph:
        return ScheduleGraph(("a", "b", "c", "sink"), (Tensor(a, 0, frozenset({3})), Tensor(b, 1, frozenset({2})),
                                                      Tensor(c, 2, frozenset({3}))))
    first, second = [0, 1, 2, 3], [1, 2, 0, 3]
    # b (100) dies into c (1): running it first keeps a (100) and b apart
    assert least_worst([first, second], [graph(100, 100, 1)]) == 1
    assert peak_of(graph(100, 100, 1), first) == 201 and peak_of(graph(100, 100, 1), second) == 101
    # with a empty, the orders tie (20 bytes each): the first is taken
    assert least_worst([first, second], [graph(0, 10, 10)]) == 0
    # over several sizes, the worst ratio decides: a tie at one, 2x at the other
    assert least_worst([first, second], [graph(0, 10, 10), graph(100, 100, 1)]) == 1


def parallel_branches(k: int, big: int = 1000, small: int = 10) -> ScheduleGraph:
    """k branches from one source, each a big map then a small reduction, all
    summed by one sink; the given order runs every big map first (poor)."""
    names = ["source", *(f"map{i}" for i in range(k)), *(f"reduce{i}" for i in range(k)), "sink"]
    source, sink = 0, 2 * k + 1
    tensors = [Tensor(small, source, frozenset(range(1, k + 1)))]
    tensors += [Tensor(big, 1 + i, frozenset({1 + k + i})) for i in range(k)]
    tensors += [Tensor(small, 1 + k + i, frozenset({sink})) for i in range(k)]
    return ScheduleGraph(tuple(names), tuple(tensors))


@pytest.mark.parametrize("k", [2, 4, 8])
def test_parallel_branches_reach_the_optimum(k: int) -> None:
    graph = parallel_branches(k)
    # Given: all k maps live at the last map, with the source.
    assert peak_of(graph, list(range(graph.size))) == 10 + k * 1000
    # Best: one branch at a time; the last map runs with the source and the
    # k - 1 finished reductions (its reduction then replaces the source).
    # No order does better: at the last map, the source and one tensor of
    # every other branch are live.
    optimum = 10 + 1000 + 10 * (k - 1)
    result = schedule(graph, "exact", budget_ms=10_000)
    assert result.peak == interval_peak(graph, result.order) == optimum
    assert result.proven_optimal
    assert schedule(graph, "auto").peak == optimum


def test_exact_times_out_on_a_wide_graph_and_auto_falls_back() -> None:
    # Many independent branches of mixed sizes and no cut between them.
    k = 24
    names = ["source", *(f"a{i}" for i in range(k)), *(f"b{i}" for i in range(k)), "sink"]
    tensors = [Tensor(1, 0, frozenset(range(1, k + 1)))]
    tensors += [Tensor(100 + 37 * i % 91, 1 + i, frozenset({1 + k + i})) for i in range(k)]
    tensors += [Tensor(1 + 13 * i % 17, 1 + k + i, frozenset({2 * k + 1})) for i in range(k)]
    graph = ScheduleGraph(tuple(names), tuple(tensors))
    with pytest.raises(ScheduleTimeout):
        schedule(graph, "exact", budget_ms=0)
    result = schedule(graph, "auto", budget_ms=0)
    assert is_topological(graph, result.order)
    assert result.peak < result.given_peak


def test_a_chain_is_all_cuts_and_keeps_its_order() -> None:
    graph = ScheduleGraph(("a", "b", "c"), (Tensor(8, 0, frozenset({1})), Tensor(8, 1, frozenset({2}))))
    assert find_cuts(graph) == [0, 1, 2]
    result = schedule(graph, "auto")
    assert result.order == [0, 1, 2] and result.peak == 16 and result.proven_optimal


@pytest.mark.parametrize("tensors, after, in_place", [
    ((Tensor(1, 1, frozenset({0})),), (), ()),  # consumer before producer
    ((Tensor(-1, 0, frozenset({1})),), (), ()),  # negative size
    ((), (frozenset(), frozenset({1})), ()),  # runs after itself
    ((Tensor(4, 0, frozenset({1})), Tensor(8, 1)), (), (frozenset(), frozenset({0}))),  # in place, other size
    ((Tensor(4, 0), Tensor(4, 1)), (), (frozenset(), frozenset({0}))),  # in place over a tensor it does not read
])
def test_malformed_graphs_are_rejected(tensors: tuple[Tensor, ...], after: tuple, in_place: tuple) -> None:
    with pytest.raises(ValueError):
        ScheduleGraph(("a", "b"), tensors, after, in_place)


def test_in_place_decides_which_reader_runs_last() -> None:
    # x (100 bytes) is read by a relu that may overwrite it and by a
    # reduction; running the reduction first lets the relu work in place.
    graph = ScheduleGraph(
        ("x", "relu", "reduce", "sink"),
        (Tensor(100, 0, frozenset({1, 2})), Tensor(100, 1, frozenset({3})), Tensor(1, 2, frozenset({3}))),
        in_place=(frozenset(), frozenset({0}), frozenset(), frozenset()),
    )
    assert peak_of(graph, [0, 1, 2, 3]) == 201
    result = schedule(graph, "exact")
    assert result.order == [0, 2, 1, 3] and result.peak == 101


def test_unknown_strategy_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        schedule(ScheduleGraph(("a",), ()), "magic")

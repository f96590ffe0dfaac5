"""Differential fuzzing: random graphs, compiled with every memory mode and
planner, must match onnxruntime. A wrong plan computes wrong numbers without
crashing; this is where it shows.

CI runs a bounded, seeded sample (PYOCC_FUZZ_GRAPHS graphs, 200 by default),
each graph with one setting from CONFIGS in turn, so every setting sees
every kind of graph across the run. `python bench/fuzz.py --minutes N` runs
longer, tries every setting on every graph, and saves shrunk reproducers.
"""

from __future__ import annotations

import os

import pytest

from pyocc.testing.random_graphs import (
    CONFIGS,
    InvalidGraph,
    compare_with_onnxruntime,
    random_graph,
    random_inputs,
    shrink,
)

pytest.importorskip("onnxruntime")

GRAPHS = int(os.environ.get("PYOCC_FUZZ_GRAPHS", "200"))
CHUNK = 20


@pytest.mark.parametrize("start", range(0, GRAPHS, CHUNK))
def test_random_graphs_match_onnxruntime(start: int) -> None:
    failures = []
    for seed in range(start, min(start + CHUNK, GRAPHS)):
        model = random_graph(seed)
        options = CONFIGS[seed % len(CONFIGS)]
        problem = compare_with_onnxruntime(model, random_inputs(model, seed), **options)
        if problem is not None:
            failures.append(f"seed {seed} {options}: {problem}")
    assert not failures, "\n".join(failures)


def test_a_wrong_plan_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness is not vacuous: with a planner that puts every buffer at
    offset 0 (and no verifier to stop it), the outputs differ."""
    from pyocc.examples.tiny_cnn import build
    from pyocc.planning import Plan, PlanError
    from pyocc.rewrites import dnn_memory_pool

    model = build()
    inputs = random_inputs(model, 0)
    assert compare_with_onnxruntime(model, inputs) is None

    def everything_at_zero(problem, algorithm="auto", **_):  # noqa: ANN001, ANN202 - planner signature
        size = max((b.size for b in problem.buffers), default=0)
        return Plan({b.name: 0 for b in problem.buffers}, size, "broken", False, 0.0)

    # where dnn-memory-pool calls it (it imports the planner at module level)
    monkeypatch.setattr(dnn_memory_pool, "plan_memory", everything_at_zero)
    # without kernel scratch: fitting the scratch verifies the combined plan,
    # which would stop this one before it runs
    assert compare_with_onnxruntime(model, inputs, memory="pool", scratch=False) is not None
    with pytest.raises(PlanError, match="live at the same step and share bytes"):
        compare_with_onnxruntime(model, inputs, memory="pool")


def test_shrink_keeps_the_failure_and_drops_the_rest() -> None:
    """shrink() removes every node not needed to show a failure: here the
    'failure' is containing a Concat."""
    model = next(random_graph(s) for s in range(100)
                 if sum(n.op_type == "Concat" for n in random_graph(s).graph.node) >= 1
                 and len(random_graph(s).graph.node) > 6)

    def has_concat(m):  # noqa: ANN001, ANN202 - a predicate for shrink
        try:
            compare_with_onnxruntime(m, random_inputs(m, 0))
        except InvalidGraph:
            return False
        return any(n.op_type == "Concat" for n in m.graph.node)

    small = shrink(model, has_concat)
    assert any(n.op_type == "Concat" for n in small.graph.node)
    assert len(small.graph.node) < len(model.graph.node)

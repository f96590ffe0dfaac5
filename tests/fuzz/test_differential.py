"""Differential fuzzing: random graphs, compiled with every memory mode and
planner, must match onnxruntime. A wrong plan computes wrong numbers without
crashing; this is where it shows.

CI runs a bounded, seeded sample: for each setting of CONFIGS, the graphs
among its first CANDIDATES (30) seeds (`seed % len(CONFIGS)` is the
setting, so a seed still names its failure) that together contain every op
kind the generator makes, a returned intermediate and a second input (3-6
graphs, chosen greedily by random_graphs.covering_seeds), and at least
PYOCC_FUZZ_GRAPHS_PER_SETTING graphs (4 by default): 83 graphs in all.
The rotation this replaced ran 200 graphs, one setting after another, and
left 10 of the 18 settings without some op kind (eager mode never met a
Reshape or an Identity) in 1.8x the ops (1,707 against 951) at 60 CPU s
against 42; test_every_setting_meets_every_kind_of_graph checks the cover.
`python bench/fuzz.py --minutes N` runs longer, tries every setting on
every graph, and saves shrunk reproducers.
"""

from __future__ import annotations

import functools
import os

import pytest

from pyocc.testing.random_graphs import (
    CONFIGS,
    InvalidGraph,
    compare_with_onnxruntime,
    covering_seeds,
    graph_features,
    random_graph,
    random_inputs,
    shrink,
)

pytest.importorskip("onnxruntime")

PER_SETTING = int(os.environ.get("PYOCC_FUZZ_GRAPHS_PER_SETTING", "4"))
COVER_AT_MOST = 6
"""The most graphs a setting's cover may take (covering_seeds needs 3-6)."""
CANDIDATES = 30
"""How many of each setting's seeds the cover chooses from."""


@functools.cache
def seeds_by_setting() -> dict[int, list[int]]:
    """Each setting's seeds (covering_seeds), computed once per worker (0.5 CPU s)."""
    return covering_seeds(len(CONFIGS), PER_SETTING, max(PER_SETTING, COVER_AT_MOST), CANDIDATES)


def _setting_id(options: dict[str, object]) -> str:
    return ",".join(f"{key}={value}" for key, value in options.items())


@pytest.mark.parametrize("setting", range(len(CONFIGS)), ids=[_setting_id(o) for o in CONFIGS])
def test_random_graphs_match_onnxruntime(setting: int) -> None:
    options = CONFIGS[setting]
    failures = []
    for seed in seeds_by_setting()[setting]:
        model = random_graph(seed)
        problem = compare_with_onnxruntime(model, random_inputs(model, seed), **options)
        if problem is not None:
            failures.append(f"seed {seed} {options}: {problem}")
    assert not failures, "\n".join(failures)


def test_every_setting_meets_every_kind_of_graph() -> None:
    """The sample is no thinner than it looks: every setting's graphs
    together contain every op kind, a returned intermediate and a second
    input that any of the candidate graphs does, and each seed belongs to
    the setting it is run with."""
    seeds = seeds_by_setting()
    every = frozenset().union(*(graph_features(random_graph(seed)) for seed in range(CANDIDATES * len(CONFIGS))))
    assert {"Concat", "Reshape", "Identity", "Conv", "returned intermediate", "two inputs"} <= every
    for setting, chosen in seeds.items():
        assert PER_SETTING <= len(chosen) == len(set(chosen)) <= max(PER_SETTING, COVER_AT_MOST)
        assert all(seed % len(CONFIGS) == setting for seed in chosen)
        met = frozenset().union(*(graph_features(random_graph(seed)) for seed in chosen))
        assert met == every, f"setting {CONFIGS[setting]} never meets {sorted(every - met)}"


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

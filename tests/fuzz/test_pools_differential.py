"""Differential fuzzing with named pools: random graphs planned across tiny
fast pools (so buffers spill, and pools with different alignments hold
neighbours of each other) must still match onnxruntime. A buffer placed in
the wrong pool, or two pools' offsets confused, shows up as wrong numbers
(or, under dnn-sanitize, as NaN or a guard-byte error)."""

from __future__ import annotations

import pytest

from pyocc.testing.random_graphs import InvalidGraph, compare_with_onnxruntime, random_graph, random_inputs

pytest.importorskip("onnxruntime")

SPECS = [
    "sram:size=2KiB,dram",
    "sram:size=16KiB:align=128,dram:align=256",
    "tcm:size=512,sram:size=8KiB,dram",
]
"""Fast pools small enough that the random graphs' buffers spill."""


def test_random_graphs_with_pools_match_onnxruntime() -> None:
    failures = []
    checked = 0
    for seed in range(30):
        model = random_graph(seed)
        spec = SPECS[seed % len(SPECS)]
        try:
            # every other graph under the sanitizer: dead bytes poisoned, guard bytes checked
            problem = compare_with_onnxruntime(model, random_inputs(model, seed), memory_pools=spec,
                                               sanitize=seed % 2 == 1)
        except InvalidGraph:
            continue
        checked += 1
        if problem is not None:
            failures.append(f"seed {seed} memory_pools={spec!r}: {problem}")
    assert checked >= 20, f"only {checked} of 30 random graphs were valid"
    assert not failures, "\n".join(failures)

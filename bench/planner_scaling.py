"""How the memory planner scales: pool size against the lower bound, and time.

Prints one table row per (problem, algorithm): buffers, pool size, lower
bound, their ratio, and planning milliseconds (``Plan.plan_ms``, which
includes verification). Problems are seeded synthetic ones at 1k, 10k and
100k buffers (5% long-lived across most steps, the rest live 1-5 steps,
sizes log-uniform 1 KiB..4 MiB, 64-byte alignment) plus structured networks.

    python bench/planner_scaling.py          # the full table, under a minute
    python bench/planner_scaling.py --quick  # small problems only, seconds
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.planning import ALGORITHMS, Buffer, Problem, lower_bound, plan_memory
from pyocc.planning.exact import MAX_EXACT_BUFFERS


def synthetic_problem(n: int, seed: int = 0, alignment: int = 64) -> Problem:
    """``n`` buffers: 5% live through most steps, the rest 1-5 steps (see module docstring)."""
    rng = random.Random(seed)
    steps = max(10, n // 2)
    buffers = []
    for i in range(n):
        size = int(2 ** rng.uniform(10, 22))
        if rng.random() < 0.05:
            first = rng.randrange(0, steps // 10 + 1)
            last = rng.randrange(steps * 9 // 10, steps)
        else:
            first = rng.randrange(steps)
            last = min(steps - 1, first + rng.randrange(5))
        buffers.append(Buffer(f"t{i}", size, first, last, alignment))
    return Problem(tuple(buffers))


def densenet_like(blocks: tuple[int, ...] = (6, 12, 24, 16), growth: int = 32) -> Problem:
    """A DenseNet-121-shaped schedule: per layer BN, ReLU, 1x1 conv, BN, ReLU,
    3x3 conv and concat, the 3x3 outputs live to the end of their block (they
    are concatenated), everything else is consumed by the next op."""
    buffers = []
    step = 0
    channels, side = 64, 56
    batch_bytes = 4  # float32, batch 1

    def add(name: str, ch: int, last: int | None = None) -> None:
        """A ``ch``-channel activation produced now, read by the next op (or until ``last``)."""
        buffers.append(Buffer(name, ch * side * side * batch_bytes, step, step + 1 if last is None else last, 64))

    add("stem", channels)
    step += 1
    for b, layers in enumerate(blocks):
        block_end = step + 7 * layers
        for l in range(layers):
            add(f"b{b}l{l}_bn1", channels)
            step += 1
            add(f"b{b}l{l}_relu1", channels)
            step += 1
            add(f"b{b}l{l}_conv1", 4 * growth)
            step += 1
            add(f"b{b}l{l}_bn2", 4 * growth)
            step += 1
            add(f"b{b}l{l}_relu2", 4 * growth)
            step += 1
            add(f"b{b}l{l}_conv2", growth, last=block_end)
            step += 1
            channels += growth
            add(f"b{b}l{l}_concat", channels)
            step += 1
        if b + 1 < len(blocks):
            for op in ("bn", "relu", "conv"):
                add(f"t{b}_{op}", channels)
                step += 1
            channels //= 2
            side //= 2
            add(f"t{b}_pool", channels)
            step += 1
    return Problem(tuple(buffers))


def unet_like(levels: int = 5, convs: int = 60) -> Problem:
    """An encoder/decoder: each encoder level's output lives until its decoder
    level (skip connection), with ``convs`` short-lived convolutions between."""
    buffers = []
    step = 0
    skips = []
    for level in range(levels):
        for c in range(convs):
            buffers.append(Buffer(f"enc{level}_{c}", (64 << level) * (256 >> level) ** 2, step, step + 1, 64))
            step += 1
        skips.append((level, step))
        step += 1
    for level in reversed(range(levels)):
        for c in range(convs):
            buffers.append(Buffer(f"dec{level}_{c}", (64 << level) * (256 >> level) ** 2, step, step + 1, 64))
            step += 1
        start = dict(skips)[level]
        buffers.append(Buffer(f"skip{level}", (64 << level) * (256 >> level) ** 2, start, step, 64))
        step += 1
    return Problem(tuple(buffers))


def resnet_like(blocks: int = 250) -> Problem:
    """A deep residual chain, 4 buffers per block (conv, relu, conv, add): each
    block's input stays live until the block's add reads it; everything else
    feeds the next op. Channels double and the image halves every 50 blocks."""
    sizes: list[int] = []
    ranges: list[list[int]] = []  # [first, last] per buffer, last extended below
    channels, side = 64, 112
    sizes.append(channels * side * side * 4)
    ranges.append([0, 1])
    step = 0
    for b in range(blocks):
        if b and b % 50 == 0:
            channels, side = channels * 2, max(7, side // 2)
        block_input = len(sizes) - 1
        for _ in range(4):  # conv1, relu, conv2, add
            step += 1
            sizes.append(channels * side * side * 4)
            ranges.append([step, step + 1])
        ranges[block_input][1] = step  # read again by the add
    return Problem(
        tuple(Buffer(f"r{i}", size, first, last, 64) for i, (size, (first, last)) in enumerate(zip(sizes, ranges)))
    )


def run_row(case: str, problem: Problem, algorithm: str, bound: int, budget_ms: float) -> None:
    """Plan ``problem`` with ``algorithm`` and print one table row."""
    plan = plan_memory(problem, algorithm, time_budget_ms=budget_ms)
    ratio = plan.pool_size / bound if bound else 1.0
    print(
        f"{case:<14} {len(problem):>7} {plan.algorithm:<30} {plan.pool_size:>14,} "
        f"{bound:>14,} {ratio:>6.3f} {plan.plan_ms:>9.1f}"
    )


def main() -> None:
    """Print the scaling table (``--quick``: small problems only)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small problems only (seconds)")
    parser.add_argument("--budget-ms", type=float, default=200.0, help="time budget for auto/hill-climb")
    args = parser.parse_args()

    cases: list[tuple[str, Problem, list[str]]] = []
    every = [name for name in ALGORITHMS if name != "exact"] + ["auto"]
    cases.append(("densenet-like", densenet_like(), every))
    cases.append(("unet-like", unet_like(), every))
    cases.append(("resnet-like", resnet_like(), every))
    cases.append(("synthetic", synthetic_problem(1_000, seed=1), every))
    if not args.quick:
        cases.append(("synthetic", synthetic_problem(10_000, seed=2),
                      ["occamy-first-fit", "long-lived-first", "auto"]))
        cases.append(("synthetic", synthetic_problem(100_000, seed=3), ["long-lived-first", "auto"]))
    small = synthetic_problem(MAX_EXACT_BUFFERS // 2, seed=4)
    cases.append(("synthetic", small, ["greedy-by-size", "exact", "auto"]))

    print(f"{'case':<14} {'buffers':>7} {'algorithm':<30} {'pool bytes':>14} {'lower bound':>14} {'ratio':>6} {'ms':>9}")
    started = time.perf_counter()
    for case, problem, algorithms in cases:
        bound = lower_bound(problem)
        for algorithm in algorithms:
            run_row(case, problem, algorithm, bound, args.budget_ms)
    print(f"# total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()

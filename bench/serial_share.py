"""How much of a model's one-thread time a second thread could share.

For each light model (random weights) this compiles the model for two
threads (`pyocc.compile(threads=2)`), then instruments the module's LLVM IR
before JIT-compiling it (a timing build made here, not a pyocc option):
every site function and the model's parallel-for are wrapped in
`llvm.readcyclecounter` reads. It runs the model on ONE thread
(`NAME_set_threads(1)`: the parallel-for then runs each body once over its
whole range, so these are one-thread times) and prints:

- parallel-fors per run: the calls of at least 2 iterations (each wakes
  the workers and waits for them);
- in parallel: the share of the run's cycles spent inside parallel-for
  calls of at least 2 iterations (what the threads share: the claimed
  loops of native kernels and the split sgemms);
- the serial cycles (outside such calls) by kernel family, as shares of
  the run, with the site that contributes most to each.

    python bench/serial_share.py squeezenet shufflenet
    python bench/serial_share.py --runs 20 --top 8 resnet50

Shares of cycles on one thread change little with the load of a shared
machine (a descheduled thread's cycles count too, alike for every site).
docs/performance.md ("Two threads") has the measured table.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyocc  # noqa: E402
from pyocc.runtime.jit import CompiledModel  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS, random_inputs_for, with_random_weights  # noqa: E402


#: how many of the most serial sites `measure` lists on stderr (--sites)
SHOW_SITES = 0


def instrument(llvm_ir: str, name: str, sites: int) -> str:
    """`llvm_ir` with cycle counters around every site and the parallel-for:
    globals NAME_timing_sites ([sites x 2] i64: total, inside parallel-fors),
    NAME_timing_parallel (cycles inside parallel-fors of >= 2 iterations),
    NAME_timing_calls (how many such calls)."""
    parallel_for = f"{name}_parallel_for"
    pattern = re.compile(rf'^define internal void @"{re.escape(parallel_for)}"\(', re.M)
    if not pattern.search(llvm_ir):
        raise SystemExit("the module has no parallel-for (compiled for one thread?)")
    text = pattern.sub(f'define internal void @"{parallel_for}.timed"(', llvm_ir)
    # the pool's spin (pyocc.lowering.native.threads) may already read the cycle counter
    declared = re.search(r'^declare i64 @"?llvm\.readcyclecounter"?\(\)', text, re.M)
    extra = [] if declared else ["declare i64 @llvm.readcyclecounter()"]
    extra += [
        f'@"{name}_timing_parallel" = global i64 0',
        f'@"{name}_timing_calls" = global i64 0',
        f'@"{name}_timing_sites" = global [{sites} x [2 x i64]] zeroinitializer',
        f'define internal void @"{parallel_for}"(ptr %body, ptr %context, i64 %count, i64 %per) {{',
        "  %t0 = call i64 @llvm.readcyclecounter()",
        f'  call void @"{parallel_for}.timed"(ptr %body, ptr %context, i64 %count, i64 %per)',
        "  %t1 = call i64 @llvm.readcyclecounter()",
        "  %shared = icmp uge i64 %count, 2",
        "  %d = sub i64 %t1, %t0",
        "  %add = select i1 %shared, i64 %d, i64 0",
        f'  %old = load i64, ptr @"{name}_timing_parallel"',
        "  %new = add i64 %old, %add",
        f'  store i64 %new, ptr @"{name}_timing_parallel"',
        f'  %calls = load i64, ptr @"{name}_timing_calls"',
        "  %one = zext i1 %shared to i64",
        "  %more = add i64 %calls, %one",
        f'  store i64 %more, ptr @"{name}_timing_calls"',
        "  ret void",
        "}",
    ]
    for site in range(sites):
        symbol = f"{name}_site_{site}"
        site_pattern = re.compile(rf'^define internal void @"{re.escape(symbol)}"\(', re.M)
        if not site_pattern.search(text):
            continue  # a numpy site (called through the bridge) or one shared with another site
        text = site_pattern.sub(f'define internal void @"{symbol}.timed"(', text)
        slot = f'getelementptr [{sites} x [2 x i64]], ptr @"{name}_timing_sites", i64 0, i64 {site}'
        extra += [
            f'define internal void @"{symbol}"(ptr %buffers) noinline {{',
            "  %t0 = call i64 @llvm.readcyclecounter()",
            f'  %p0 = load i64, ptr @"{name}_timing_parallel"',
            f'  call void @"{symbol}.timed"(ptr %buffers)',
            "  %t1 = call i64 @llvm.readcyclecounter()",
            f'  %p1 = load i64, ptr @"{name}_timing_parallel"',
            f"  %total = {slot}, i64 0",
            f"  %inside = {slot}, i64 1",
            "  %d = sub i64 %t1, %t0",
            "  %dp = sub i64 %p1, %p0",
            "  %a = load i64, ptr %total",
            "  %a1 = add i64 %a, %d",
            "  store i64 %a1, ptr %total",
            "  %b = load i64, ptr %inside",
            "  %b1 = add i64 %b, %dp",
            "  store i64 %b1, ptr %inside",
            "  ret void",
            "}",
        ]
    return text + "\n" + "\n".join(extra) + "\n"


def at_least_two_parts(text: str, name: str) -> str:
    """`text` with NAME_threads_team (pyocc.lowering.native.threads) answering
    at least 2, so that on one thread a split sgemm still calls the
    parallel-for with the two parts it has on two threads (which then runs
    them as one call over the whole range, as before), and counts as
    shared; a module without it is returned as it is."""
    team = f"{name}_threads_team"
    pattern = re.compile(rf'^define internal i64 @"{re.escape(team)}"\(\)', re.M)
    if not pattern.search(text):
        return text
    text = pattern.sub(f'define internal i64 @"{team}.running"()', text)
    return text + "\n".join([
        f'define internal i64 @"{team}"() {{',
        f'  %running = call i64 @"{team}.running"()',
        "  %few = icmp ult i64 %running, 2",
        "  %team = select i1 %few, i64 2, i64 %running",
        "  ret i64 %team",
        "}",
    ]) + "\n"


def timed_build(model_name: str, instrument: Callable[[str, str, int], str]
                ) -> tuple[dict[str, np.ndarray], str, list[dict], CompiledModel, Any, Callable[[int], int]]:
    """The light model `model_name` (random weights) compiled for two
    threads, its LLVM IR passed through `instrument(ir, name, sites)` and
    at_least_two_parts, and JIT-compiled: (random inputs, the model
    function's name, its sites, the timed model, its LLVM engine, its
    NAME_set_threads)."""
    proto = with_random_weights(model_name)
    inputs = random_inputs_for(proto)
    compiled = pyocc.compile(proto, threads=2).native
    meta = compiled.meta
    name, sites = meta["name"], meta["sites"]
    timed = CompiledModel(at_least_two_parts(instrument(compiled.llvm_ir, name, len(sites)), name), meta,
                          compiled.weight_pool)
    engine = timed._keepalive[0]  # (the model engine, the kernel engines)
    set_threads = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(
        engine.get_function_address(f"{name}_set_threads"))
    return inputs, name, sites, timed, engine, set_threads


def measure(model_name: str, runs: int) -> tuple[float, float, int, dict[str, tuple[float, int, float]]]:
    """(cycles per run, share inside parallel-fors, parallel-for calls per
    run, family -> (serial share, largest site, its share))."""
    inputs, name, sites, timed, engine, set_threads = timed_build(model_name, instrument)
    assert set_threads(1) == 0
    timed.run(inputs)  # warm-up
    table = (ctypes.c_int64 * (2 * len(sites))).from_address(engine.get_global_value_address(f"{name}_timing_sites"))
    parallel = ctypes.c_int64.from_address(engine.get_global_value_address(f"{name}_timing_parallel"))
    calls = ctypes.c_int64.from_address(engine.get_global_value_address(f"{name}_timing_calls"))
    ctypes.memset(ctypes.addressof(table), 0, ctypes.sizeof(table))
    parallel.value = calls.value = 0
    for _ in range(runs):
        timed.run(inputs)
    counts = np.frombuffer(table, dtype=np.int64).reshape(len(sites), 2).astype(float)
    total = counts[:, 0].sum()
    serial: dict[str, list[float]] = collections.defaultdict(list)
    for site, (cycles, inside) in zip(sites, counts, strict=True):
        serial[site["kernel"]].append(cycles - inside)
    families = {kind: (sum(values) / total, int(np.argmax(values)), max(values) / total)
                for kind, values in serial.items()}
    # the site index within its family -> the site itself
    by_kind: dict[str, list[int]] = collections.defaultdict(list)
    for site in sites:
        by_kind[site["kernel"]].append(site["site"])
    families = {kind: (share, by_kind[kind][index], top) for kind, (share, index, top) in families.items()}
    timed.close()
    if SHOW_SITES:
        order = np.argsort(-(counts[:, 0] - counts[:, 1]))[:SHOW_SITES]
        for index in order:
            site = sites[index]
            shapes = [spec["shape"] for spec in site["inputs"] if isinstance(spec, dict)]
            kwargs = {k: v for k, v in site["kwargs"].items() if k in ("group", "strides", "pads", "activation")}
            workspace = site.get("workspace")
            if workspace is not None:
                kwargs["workspace bytes"] = workspace["shape"][0]
            print(f"    site {index} {site['kernel']} {shapes} -> {site['outputs'][0]['shape']} {kwargs}: "
                  f"serial {(counts[index, 0] - counts[index, 1]) / total:.1%}, "
                  f"parallel {counts[index, 1] / total:.1%}", file=sys.stderr)
    return total / runs, parallel.value / total, calls.value // runs, families


def main() -> None:
    """Time each model on one thread and print its parallel share."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=LIGHT_MODELS)
    parser.add_argument("--runs", type=int, default=5, help="timed runs per model (after one warm-up)")
    parser.add_argument("--top", type=int, default=5, help="kernel families listed per model")
    parser.add_argument("--sites", type=int, default=0, help="also list this many most serial sites (stderr)")
    args = parser.parse_args()
    global SHOW_SITES
    SHOW_SITES = args.sites
    print("| model | Mcycles per run | parallel-fors per run | in parallel | serial, by kernel family "
          "(share of the run; largest site) |")
    print("|---|---:|---:|---:|---|")
    shares = []
    for model_name in args.models:
        cycles, inside, forks, families = measure(model_name, args.runs)
        shares.append(inside)
        ranked = sorted(families.items(), key=lambda item: -item[1][0])[:args.top]
        parts = [f"{kind} {share:.0%} (site {site}: {top:.0%})" for kind, (share, site, top) in ranked]
        print(f"| {model_name} | {cycles / 1e6:.1f} | {forks} | {inside:.0%} | {'; '.join(parts)} |", flush=True)
    print(f"| mean |  |  | {sum(shares) / len(shares):.0%} |  |")


if __name__ == "__main__":
    main()

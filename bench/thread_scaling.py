"""Where a second thread's time goes: each site's cycles on one thread and on two.

For each light model (random weights) this compiles the model for two
threads, instruments its LLVM IR (a timing build made here, as
bench/serial_share.py does, not a pyocc option) and runs the SAME build
alternately on one thread and on two (`NAME_set_threads`), so both see the
same load. Counters (`llvm.readcyclecounter`, i.e. wall-clock ticks):

- per site: its cycles (total), and at two threads the caller's cycles
  inside the pool's chunk loop ("caller work"), the caller's cycles after
  its last chunk waiting for the worker's ("wait": load imbalance, or a
  worker that was late or lost its core), and the worker's cycles inside
  the chunk loop ("worker work", charged to the site running when it
  started);
- per run: parallel-fors, and the process's CPU time.

It prints per kernel family, then the top sites: cycles at 1 thread, at 2,
the speedup, "work x" = (caller work + worker work + serial cycles) at two
threads / cycles at one thread (above 1: the two threads do more work than
one, e.g. each part of a split sgemm packing the whole shared operand again,
or they slow each other down through shared caches and memory), and the
wait's share of the two-thread cycles.

    python bench/thread_scaling.py squeezenet --runs 10
    python bench/thread_scaling.py resnet50 inception_v1 --runs 6 --sites 12

The cycles are the wall clock, so a loaded machine stretches them: compare
the ratios (and look at `uptime`), not the cycles of two different minutes.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.testing.light_models import LIGHT_MODELS  # noqa: E402
from serial_share import timed_build  # noqa: E402  (bench/, the script's own folder)

#: the per-site counters: total, inside parallel-fors (>= 2 iterations), caller work, caller wait,
#: worker work, parallel-for calls, the worker's latency (cycles from the parallel-for's call to the
#: worker's entering its chunk loop), jobs the worker entered
FIELDS = 15
#: cycle-counter ticks per microsecond (the time-stamp counter of this project's 2.1 GHz machine)
TICKS_PER_US = 2100.0
TOTAL, INSIDE, CALLER_WORK, WAIT, WORKER_WORK, CALLS, LATENCY, JOINED = range(8)
#: what a parallel-for runs, by its body's name (pyocc.lowering.native: a split sgemm or sgemv, an
#: element kernel's body, an outlined loop of a convolution kernel: `part`, `part.1`, ... in the order
#: the kernel emits them; in an im2col convolution `part` writes the bias or residual into the
#: output block, `part.1` is the im2col and `part.2` the last pass (bias after a residual, activation))
#: -> the field of its cycles
KINDS = {"sgemm": 8, "sgemv": 9, "body": 10, "part": 11, "part.1": 12, "part.2": 13, "part.3+": 14}


def _rename(text: str, symbol: str, new: str, exported: bool = False) -> str:
    """Rename the definition of `symbol` (internal) to `new`."""
    pattern = re.compile(rf'^define internal void @"{re.escape(symbol)}"\(', re.M)
    if not pattern.search(text):
        raise SystemExit(f"no definition of {symbol} in the module")
    return pattern.sub(f'define {"" if exported else "internal "}void @"{new}"(', text)


def _function_text(text: str, symbol: str) -> tuple[int, int]:
    """[start, end) of the definition of `symbol` in `text`."""
    start = re.search(rf'^define [^\n]*@"{re.escape(symbol)}"\(', text, re.M)
    assert start is not None, symbol
    end = text.index("\n}\n", start.start()) + 3
    return start.start(), end


def instrument(llvm_ir: str, name: str, sites: int) -> str:
    """`llvm_ir` with the counters of the module docstring: global
    NAME_tt_sites ([sites x FIELDS] i64), NAME_tt_current (the site running),
    and NAME_threads_start exported (to restart the pool after set_threads(1))."""
    parallel_for, run_chunks = f"{name}_parallel_for", f"{name}_run_chunks"
    table = f'@"{name}_tt_sites"'
    current = f'@"{name}_tt_current"'
    text = _rename(llvm_ir, f"{name}_threads_start", f"{name}_threads_start", exported=True)
    # the caller's chunk loop and its wait, inside the parallel-for
    text = _rename(text, parallel_for, f"{parallel_for}.timed")
    start, end = _function_text(text, f"{parallel_for}.timed")
    body = text[start:end]
    call = re.compile(rf'(  call void @"{re.escape(run_chunks)}"\(([^\n]*)\)\n)')
    assert len(call.findall(body)) == 1, "expected one chunk loop in the parallel-for"
    body = call.sub(lambda m: f'  call void @"{run_chunks}.caller"({m.group(2)})\n'
                              "  %tt.wait0 = call i64 @llvm.readcyclecounter()\n", body)
    done = re.compile(r"\ndone:\n  ret void\n")
    assert len(done.findall(body)) == 1, "expected one `done` block in the parallel-for"
    body = done.sub("\ndone:\n  %tt.wait1 = call i64 @llvm.readcyclecounter()\n"
                    "  %tt.waited = sub i64 %tt.wait1, %tt.wait0\n"
                    f'  %tt.site = load i64, ptr {current}\n'
                    f"  %tt.slot = getelementptr [{sites} x [{FIELDS} x i64]], ptr {table}, i64 0, i64 %tt.site, "
                    f"i64 {WAIT}\n"
                    "  %tt.old = load i64, ptr %tt.slot\n"
                    "  %tt.new = add i64 %tt.old, %tt.waited\n"
                    "  store i64 %tt.new, ptr %tt.slot\n"
                    "  ret void\n", body)
    text = text[:start] + body + text[end:]
    # the worker's chunk loop
    start, end = _function_text(text, f"{name}_worker")
    body = text[start:end]
    assert body.count(f'call void @"{run_chunks}"(') == 1
    body = body.replace(f'call void @"{run_chunks}"(', f'call void @"{run_chunks}.worker"(')
    text = text[:start] + body + text[end:]

    def slot(site: str, field: int) -> str:
        return f"getelementptr [{sites} x [{FIELDS} x i64]], ptr {table}, i64 0, i64 {site}, i64 {field}"

    # the pool's spin already reads the cycle counter (on x86)
    declared = re.search(r'^declare i64 @"?llvm\.readcyclecounter"?\(\)', text, re.M)
    extra = [] if declared else ["declare i64 @llvm.readcyclecounter()"]
    extra += [
        f"{table} = global [{sites} x [{FIELDS} x i64]] zeroinitializer, align 64",
        f"{current} = global i64 0, align 64",
        f'@"{name}_tt_called" = global i64 0, align 64',
    ]
    for who, field in (("caller", CALLER_WORK), ("worker", WORKER_WORK)):
        extra += [
            f'define internal void @"{run_chunks}.{who}"(i64 %a, ptr %b, ptr %c, i64 %d, i64 %e, i64 %f) noinline {{',
            f"  %site = load atomic i64, ptr {current} monotonic, align 8",
            "  %t0 = call i64 @llvm.readcyclecounter()",
            f'  call void @"{run_chunks}"(i64 %a, ptr %b, ptr %c, i64 %d, i64 %e, i64 %f)',
            "  %t1 = call i64 @llvm.readcyclecounter()",
            "  %dt = sub i64 %t1, %t0",
            f"  %slot = {slot('%site', field)}",
            "  %old = atomicrmw add ptr %slot, i64 %dt monotonic",
        ] + ([
            f'  %called = load atomic i64, ptr @"{name}_tt_called" monotonic, align 8',
            "  %late = sub i64 %t0, %called",
            f"  %lslot = {slot('%site', LATENCY)}",
            "  %old1 = atomicrmw add ptr %lslot, i64 %late monotonic",
            f"  %jslot = {slot('%site', JOINED)}",
            "  %old2 = atomicrmw add ptr %jslot, i64 1 monotonic",
        ] if who == "worker" else []) + [
            "  ret void",
            "}",
        ]
    # each call of the parallel-for goes through a wrapper for its body's kind
    def by_kind(match: re.Match) -> str:
        kind = match.group(2)
        kind = kind if kind in KINDS else "part.3+" if kind.startswith("part.") else kind.split(".")[0]
        assert kind in KINDS, match.group(0)
        return f'call void @"{parallel_for}.{kind}"({match.group(1)}'
    calls = re.compile(rf'call void @"{re.escape(parallel_for)}"\(([^@\n]*@"{re.escape(name)}_site_\d+(?:_sizes)?\.([\w.]+)")')
    text, replaced = calls.subn(by_kind, text)
    assert replaced == len(re.findall(rf'call void @"{re.escape(parallel_for)}"\(', llvm_ir)), "a parallel-for call not matched"
    for kind, field in KINDS.items():
        extra += [
            f'define internal void @"{parallel_for}.{kind}"(ptr %body, ptr %context, i64 %count, i64 %per) {{',
            "  %t0 = call i64 @llvm.readcyclecounter()",
            f'  store atomic i64 %t0, ptr @"{name}_tt_called" monotonic, align 8',
            f'  call void @"{parallel_for}.timed"(ptr %body, ptr %context, i64 %count, i64 %per)',
            "  %t1 = call i64 @llvm.readcyclecounter()",
            "  %shared = icmp uge i64 %count, 2",
            "  %d = sub i64 %t1, %t0",
            "  %add = select i1 %shared, i64 %d, i64 0",
            "  %one = zext i1 %shared to i64",
            f"  %site = load i64, ptr {current}",
        ]
        for target, value in ((INSIDE, "%add"), (field, "%d"), (CALLS, "%one")):
            extra += [
                f"  %slot{target} = {slot('%site', target)}",
                f"  %old{target} = load i64, ptr %slot{target}",
                f"  %new{target} = add i64 %old{target}, {value}",
                f"  store i64 %new{target}, ptr %slot{target}",
            ]
        extra += ["  ret void", "}"]
    for site in range(sites):
        symbol = f"{name}_site_{site}"
        if not re.search(rf'^define internal void @"{re.escape(symbol)}"\(', text, re.M):
            continue  # a numpy site or one shared with another site
        text = _rename(text, symbol, f"{symbol}.timed")
        extra += [
            f'define internal void @"{symbol}"(ptr %buffers) noinline {{',
            f"  store atomic i64 {site}, ptr {current} monotonic, align 8",
            "  %t0 = call i64 @llvm.readcyclecounter()",
            f'  call void @"{symbol}.timed"(ptr %buffers)',
            "  %t1 = call i64 @llvm.readcyclecounter()",
            f"  %total = {slot(str(site), TOTAL)}",
            "  %d = sub i64 %t1, %t0",
            "  %a = load i64, ptr %total",
            "  %a1 = add i64 %a, %d",
            "  store i64 %a1, ptr %total",
            "  ret void",
            "}",
        ]
    return text + "\n" + "\n".join(extra) + "\n"


def describe(site: dict) -> str:
    """A short line naming a site: kernel, input shapes, output shape."""
    shapes = [spec["shape"] for spec in site["inputs"] if isinstance(spec, dict)]
    kwargs = {k: v for k, v in site["kwargs"].items() if k in ("group", "strides")}
    return f"{site['kernel']} {shapes} -> {site['outputs'][0]['shape']} {kwargs or ''}".strip()


def measure(model_name: str, runs: int) -> tuple[list[dict], np.ndarray, np.ndarray, dict[int, float]]:
    """(sites, counters per run at 1 thread, at 2 threads [sites x FIELDS],
    CPU seconds per run by thread count)."""
    inputs, name, sites, timed, engine, set_threads = timed_build(model_name, instrument)
    start_pool = ctypes.CFUNCTYPE(None)(engine.get_function_address(f"{name}_threads_start"))
    table = (ctypes.c_int64 * (FIELDS * len(sites))).from_address(engine.get_global_value_address(f"{name}_tt_sites"))
    sums = {1: np.zeros((len(sites), FIELDS)), 2: np.zeros((len(sites), FIELDS))}
    cpu = {1: 0.0, 2: 0.0}
    for threads in (1, 2):  # warm both
        assert set_threads(threads) == 0
        if threads > 1:
            start_pool()
        timed.run(inputs)
    for _ in range(runs):
        for threads in (1, 2):
            assert set_threads(threads) == 0
            if threads > 1:
                start_pool()
            timed.run(inputs)  # one untimed run: the pool's threads and caches settle
            ctypes.memset(ctypes.addressof(table), 0, ctypes.sizeof(table))
            before = time.process_time()
            timed.run(inputs)
            cpu[threads] += time.process_time() - before
            sums[threads] += np.frombuffer(table, dtype=np.int64).reshape(len(sites), FIELDS)
    timed.close()
    return sites, sums[1] / runs, sums[2] / runs, {k: v / runs for k, v in cpu.items()}


def report(model_name: str, runs: int, top_sites: int) -> None:
    """Measure one model and print its tables (markdown)."""
    load = os.getloadavg()[0]
    sites, one, two, cpu = measure(model_name, runs)
    total1, total2 = one[:, TOTAL].sum(), two[:, TOTAL].sum()
    # work at two threads: both threads' chunk loops, plus what the caller ran outside parallel-fors
    serial2 = two[:, TOTAL] - two[:, INSIDE]
    work2 = two[:, CALLER_WORK] + two[:, WORKER_WORK] + serial2

    def row(label: str, index: np.ndarray, calls: str = "") -> str:
        c1, c2 = one[index, TOTAL].sum(), two[index, TOTAL].sum()
        w2, wait = work2[index].sum(), two[index, WAIT].sum()
        par1 = one[index, INSIDE].sum()
        return (f"| {label} | {c1 / 1e6:.2f} | {c1 / total1:.0%} | {par1 / max(c1, 1):.0%} | {c2 / 1e6:.2f} | "
                f"{c1 / max(c2, 1):.2f} | {w2 / max(c1, 1):.2f} | {wait / max(c2, 1):.0%} | "
                f"{two[index, WORKER_WORK].sum() / max(two[index, CALLER_WORK].sum() + two[index, WORKER_WORK].sum(), 1):.0%}"
                f" | {calls} | {two[index, JOINED].sum():.0f} | "
                f"{two[index, LATENCY].sum() / max(two[index, JOINED].sum(), 1) / TICKS_PER_US:.1f} |")

    print(f"\n### {model_name} ({runs} runs each, alternating; load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end; CPU ms per run: 1 thread {cpu[1] * 1e3:.1f}, "
          f"2 threads {cpu[2] * 1e3:.1f})\n")
    print("| family / site | Mcycles, 1 thread | share | in parallel | Mcycles, 2 threads | speedup | work x | "
          "wait | worker's share | parallel-fors | worker joined | worker's latency, us |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    families: dict[str, list[int]] = collections.defaultdict(list)
    for index, site in enumerate(sites):
        families[site["kernel"]].append(index)
    for kind, indices in sorted(families.items(), key=lambda item: -one[item[1], TOTAL].sum()):
        array = np.array(indices)
        print(row(kind, array, f"{two[array, CALLS].sum():.0f}"))
    print(row("**whole run**", np.arange(len(sites)), f"{two[:, CALLS].sum():.0f}"))
    # (a split sgemm runs as one part, on one thread, when one thread runs: counted here all the same)
    print("\n| parallel-for body | Mcycles, 1 thread | share | Mcycles, 2 threads | speedup |")
    print("|---|---:|---:|---:|---:|")
    for kind, field in KINDS.items():
        c1, c2 = one[:, field].sum(), two[:, field].sum()
        print(f"| {kind} | {c1 / 1e6:.2f} | {c1 / total1:.0%} | {c2 / 1e6:.2f} | {c1 / max(c2, 1):.2f} |")
    c1 = (one[:, TOTAL] - one[:, [*KINDS.values()]].sum(axis=1)).sum()
    c2 = (two[:, TOTAL] - two[:, [*KINDS.values()]].sum(axis=1)).sum()
    print(f"| outside parallel-fors | {c1 / 1e6:.2f} | {c1 / total1:.0%} | {c2 / 1e6:.2f} | {c1 / max(c2, 1):.2f} |\n")
    lost = two[:, TOTAL] - one[:, TOTAL] / 2  # cycles above a perfect halving
    for index in np.argsort(-lost)[:top_sites]:
        print(row(f"site {index}: {describe(sites[index])}", np.array([index]), f"{two[index, CALLS]:.0f}"))


def main() -> None:
    """Measure each model named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=LIGHT_MODELS)
    parser.add_argument("--runs", type=int, default=6, help="timed runs per thread count (alternating)")
    parser.add_argument("--sites", type=int, default=8, help="sites listed per model (most cycles lost)")
    args = parser.parse_args()
    for model_name in args.models:
        report(model_name, args.runs, args.sites)


if __name__ == "__main__":
    main()

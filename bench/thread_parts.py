"""How each site of a two-thread model is shared between the threads: counts, not times.

For each light model (random weights) this compiles the model for two
threads, instruments its LLVM IR (a timing build
made here, as bench/serial_share.py does, not a pyocc option) and runs it
on ONE thread with NAME_threads_team answering 2, so every parallel-for
is called with the parts it has when both threads run, and each
parallel-for of at least two iterations runs the chunks the pool cuts for
two threads, one call each, one after the other.
Per site it counts, per run:

- parallel-fors of at least two iterations, by what they run (a split
  sgemm/sgemv, whose iterations are its parts; an outlined loop of a
  convolution, `part`; an element kernel's body) and their iterations;
- parallel-fors of one iteration (a split sgemm whose blocks came out
  fewer than two at run time);
- BLAS calls (sgemm, sgemv) made whole, outside any parallel-for of at
  least two iterations, with their multiply-adds and the shape of the
  largest (m x n x k): these run on one thread whatever the thread count;
- the site's CPU time and the CPU time outside parallel-fors of at least two
  iterations ("serial"), of which the whole BLAS calls' CPU time;
- "split work x": the site's CPU time so (the two threads' work, done by
  one) over its CPU time with no split at all (NAME_threads_team answering
  1 and each parallel-for one call over its range, as a one-thread build
  runs), both on one thread, in turns: what the split itself adds (each
  part packing the operand it does not cut again, smaller BLAS calls),
  which two threads must win back first. Not in it: what two threads on
  two cores cost each other (caches, memory, waiting).

Counts and multiply-adds do not depend on the machine's load. The times
are the running thread's CPU time (clock_gettime's thread clock, so the
time slices a loaded machine gives other jobs do not count), each site's
least of `--runs` runs, reported as shares of the run and as ratios.

    python bench/thread_parts.py squeezenet densenet121 --runs 5
    python bench/thread_parts.py resnet50 --sites 20

The "why" column names the cause of a site's serial share: whole BLAS
calls (too few columns and rows for two blocks of SGEMM_PARALLEL_MACS
multiply-adds), loops below PARALLEL_MIN_WORK, or a kernel with no
parallel loop.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.lowering.native.dense_ir import SGEMM, SGEMV  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS  # noqa: E402
from serial_share import timed_build  # noqa: E402  (bench/, the script's own folder)

#: clock_gettime's clock of the calling thread's CPU time (Linux)
CLOCK_THREAD_CPUTIME_ID = 3
#: per-site counters
(TOTAL, INSIDE, SGEMM_PARTS, SGEMM_SPLIT, LOOP_FORKS, LOOP_ITERATIONS, BODY_FORKS, BODY_ITERATIONS, ONE_PART,
 WHOLE_CALLS, WHOLE_MACS, WHOLE_CYCLES, SPLIT_MACS, LARGEST_M, LARGEST_N, LARGEST_K, LARGEST_MACS,
 SGEMV_PARTS, SGEMV_SPLIT) = range(19)
FIELDS = 19
#: what a parallel-for runs, by its body's name -> (the field counting calls, the field counting iterations)
KINDS = {"sgemm": (SGEMM_SPLIT, SGEMM_PARTS), "sgemv": (SGEMV_SPLIT, SGEMV_PARTS),
         "part": (LOOP_FORKS, LOOP_ITERATIONS),
         "body": (BODY_FORKS, BODY_ITERATIONS)}


def _rename_definition(text: str, symbol: str, new: str) -> str:
    pattern = re.compile(rf'^define internal (\w+) @"{re.escape(symbol)}"\(', re.M)
    if not pattern.search(text):
        raise SystemExit(f"no definition of {symbol} in the module")
    return pattern.sub(lambda m: f'define internal {m.group(1)} @"{new}"(', text)


def instrument(llvm_ir: str, name: str, sites: int) -> str:
    """`llvm_ir` with the counters of the module docstring in global
    NAME_tp_sites ([sites x FIELDS] i64), for a run on one thread."""
    parallel_for = f"{name}_parallel_for"
    table, current, depth = f'@"{name}_tp_sites"', f'@"{name}_tp_current"', f'@"{name}_tp_depth"'
    NOW = f"{name}_tp_now"  # noqa: N806  (the clock's symbol, in the lines below)

    def slot(site: str, field: int | str) -> str:
        return f"getelementptr [{sites} x [{FIELDS} x i64]], ptr {table}, i64 0, i64 {site}, i64 {field}"

    def add(site: str, field: int | str, value: str, tag: str) -> list[str]:
        return [f"  %s{tag} = {slot(site, field)}", f"  %o{tag} = load i64, ptr %s{tag}",
                f"  %n{tag} = add i64 %o{tag}, {value}", f"  store i64 %n{tag}, ptr %s{tag}"]

    def at_most(site: str, field: int, value: str, tag: str) -> list[str]:
        return [f"  %s{tag} = {slot(site, field)}", f"  store i64 {value}, ptr %s{tag}"]

    text = _rename_definition(llvm_ir, parallel_for, f"{parallel_for}.counted")
    # the team a split BLAS call cuts parts for: NAME_tp_team (set between runs), not the threads running
    team = f"{name}_threads_team"
    text = _rename_definition(text, team, f"{team}.running")
    text = text.replace(f'call i64 @"{team}"()', f'call i64 @"{team}.tp"()')
    # the calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID: on one thread, the run's own work; a
    # loaded machine's preemptions, which stretch a cycle counter by whole time slices, do not count)
    # (called through a pointer the script sets: generated code may call only what pyocc's runtime binds)
    extra = [f'@"{name}_tp_clock" = global ptr null',
             f'define internal i64 @"{NOW}"() {{',
             "  %spec = alloca [2 x i64]",
             f'  %clock = load ptr, ptr @"{name}_tp_clock"',
             f"  %ok = call i32 %clock(i32 {CLOCK_THREAD_CPUTIME_ID}, ptr %spec)",
             "  %s = load i64, ptr %spec",
             "  %nsp = getelementptr [2 x i64], ptr %spec, i64 0, i64 1",
             "  %ns = load i64, ptr %nsp",
             "  %sns = mul i64 %s, 1000000000",
             "  %t = add i64 %sns, %ns",
             "  ret i64 %t",
             "}"]
    extra += [f"{table} = global [{sites} x [{FIELDS} x i64]] zeroinitializer, align 64",
              f"{current} = global i64 0", f"{depth} = global i64 0",
              f'@"{name}_tp_team" = global i64 2',
              f'define internal i64 @"{team}.tp"() {{',
              f'  %team = load i64, ptr @"{name}_tp_team"',
              "  ret i64 %team",
              "}"]
    # each parallel-for call goes through a wrapper for its body's kind
    site_body = rf'@"{re.escape(name)}_site_\d+(?:_sizes)?\.([\w.]+)"'  # a site's (or shared kernel's) part
    calls = re.compile(rf'call void @"{re.escape(parallel_for)}"\(([^@\n]*{site_body})')

    def by_kind(match: re.Match) -> str:
        kind = match.group(2).split(".")[0]
        assert kind in KINDS, match.group(0)
        return f'call void @"{parallel_for}.{kind}"({match.group(1)}'

    text, replaced = calls.subn(by_kind, text)
    assert replaced == len(re.findall(rf'call void @"{re.escape(parallel_for)}"\(', llvm_ir)), \
        "a parallel-for call not matched"
    for kind, (forks, iterations) in KINDS.items():
        extra += [
            f'define internal void @"{parallel_for}.{kind}"(ptr %body, ptr %context, i64 %count, i64 %per) {{',
            f"  %site = load i64, ptr {current}",
            "  %shared = icmp uge i64 %count, 2",
            "  br i1 %shared, label %many, label %one",
            "many:",
            f"  %d0 = load i64, ptr {depth}",
            "  %d1 = add i64 %d0, 1",
            f"  store i64 %d1, ptr {depth}",
            # the chunks the pool cuts for two threads (per thread `per`), one call each, in turn
            '  %t0 = call i64 @"{NOW}"()',
            "  %chunks = mul i64 %per, 2",
            "  %c1 = add i64 %count, %chunks",
            "  %c2 = sub i64 %c1, 1",
            "  %chunk = udiv i64 %c2, %chunks",
            "  br label %loop",
            "loop:",
            "  %begin = phi i64 [0, %many], [%end, %call]",
            "  %more = icmp ult i64 %begin, %count",
            "  br i1 %more, label %call, label %after",
            "call:",
            "  %e0 = add i64 %begin, %chunk",
            "  %short = icmp ult i64 %e0, %count",
            "  %end = select i1 %short, i64 %e0, i64 %count",
            "  call void %body(ptr %context, i64 %begin, i64 %end)",
            "  br label %loop",
            "after:",
            '  %t1 = call i64 @"{NOW}"()',
            f"  store i64 %d0, ptr {depth}",
            "  %dt = sub i64 %t1, %t0",
            f"  %outer = icmp eq i64 %d0, 0",
            "  %inside = select i1 %outer, i64 %dt, i64 0",
            *add("%site", INSIDE, "%inside", "i"),
            *add("%site", forks, "1", "f"),
            *add("%site", iterations, "%count", "c"),
            "  ret void",
            "one:",
            f'  call void @"{parallel_for}.counted"(ptr %body, ptr %context, i64 %count, i64 %per)',
            *add("%site", ONE_PART, "1", "p"),
            "  ret void",
            "}",
        ]
    # the BLAS calls: whole (no parallel-for of >= 2 iterations around) or a part of one
    for symbol, signature, dims in (
            (SGEMM, "i32 %order, i32 %ta, i32 %tb, i32 %m, i32 %n, i32 %k, float %alpha, ptr %a, i32 %lda, "
                    "ptr %b, i32 %ldb, float %beta, ptr %c, i32 %ldc", ("%m", "%n", "%k")),
            (SGEMV, "i32 %order, i32 %t, i32 %m, i32 %n, float %alpha, ptr %a, i32 %lda, ptr %x, i32 %incx, "
                    "float %beta, ptr %y, i32 %incy", ("%m", "%n", None))):
        if f'@"{symbol}"(' not in text:
            continue
        text = text.replace(f'call void @"{symbol}"(', f'call void @"{symbol}.counted"(')
        m, n, k = dims
        extra += [
            f'define internal void @"{symbol}.counted"({signature}) {{',
            f"  %site = load i64, ptr {current}",
            f"  %m64 = sext i32 {m} to i64",
            f"  %n64 = sext i32 {n} to i64",
            f"  %k64 = {'sext i32 ' + k + ' to i64' if k else 'add i64 1, 0'}",
            "  %mn = mul i64 %m64, %n64",
            "  %macs = mul i64 %mn, %k64",
            '  %t0 = call i64 @"{NOW}"()',
            f'  call void @"{symbol}"({signature})',
            '  %t1 = call i64 @"{NOW}"()',
            "  %dt = sub i64 %t1, %t0",
            f"  %d = load i64, ptr {depth}",
            "  %whole = icmp eq i64 %d, 0",
            "  br i1 %whole, label %alone, label %part",
            "alone:",
            *add("%site", WHOLE_CALLS, "1", "w"),
            *add("%site", WHOLE_MACS, "%macs", "m"),
            *add("%site", WHOLE_CYCLES, "%dt", "y"),
            f"  %sl = {slot('%site', LARGEST_MACS)}",
            "  %largest = load i64, ptr %sl",
            "  %larger = icmp ugt i64 %macs, %largest",
            "  br i1 %larger, label %record, label %done",
            "record:",
            "  store i64 %macs, ptr %sl",
            *at_most("%site", LARGEST_M, "%m64", "rm"),
            *at_most("%site", LARGEST_N, "%n64", "rn"),
            *at_most("%site", LARGEST_K, "%k64", "rk"),
            "  br label %done",
            "part:",
            *add("%site", SPLIT_MACS, "%macs", "s"),
            "  br label %done",
            "done:",
            "  ret void",
            "}",
        ]
    for site in range(sites):
        symbol = f"{name}_site_{site}"
        if not re.search(rf'^define internal void @"{re.escape(symbol)}"\(', text, re.M):
            continue  # a numpy site or one shared with another site
        text = _rename_definition(text, symbol, f"{symbol}.counted")
        extra += [
            f'define internal void @"{symbol}"(ptr %buffers) noinline {{',
            f"  store i64 {site}, ptr {current}",
            '  %t0 = call i64 @"{NOW}"()',
            f'  call void @"{symbol}.counted"(ptr %buffers)',
            '  %t1 = call i64 @"{NOW}"()',
            "  %dt = sub i64 %t1, %t0",
            *add(str(site), TOTAL, "%dt", "t"),
            "  ret void",
            "}",
        ]
    return text + "\n" + "\n".join(line.replace("{NOW}", NOW) for line in extra) + "\n"


def measure(model_name: str, runs: int) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """(sites, counters per site with every split cut for two threads (the
    least CPU time of its runs, the counts of the last run), each site's CPU time
    with no split at all (team 1: the one-thread build's calls), least)."""
    inputs, name, sites, timed, engine, set_threads = timed_build(model_name, instrument)
    assert set_threads(1) == 0
    table = (ctypes.c_int64 * (FIELDS * len(sites))).from_address(engine.get_global_value_address(f"{name}_tp_sites"))
    team = ctypes.c_int64.from_address(engine.get_global_value_address(f"{name}_tp_team"))
    clock = ctypes.c_void_p.from_address(engine.get_global_value_address(f"{name}_tp_clock"))
    clock.value = ctypes.cast(ctypes.CDLL(None).clock_gettime, ctypes.c_void_p).value
    per_run: dict[int, list[np.ndarray]] = {1: [], 2: []}
    for parts in (1, 2):  # warm-up
        team.value = parts
        timed.run(inputs)
    for _ in range(runs):
        for parts in (1, 2):  # in turns, so both see the same load
            team.value = parts
            ctypes.memset(ctypes.addressof(table), 0, ctypes.sizeof(table))
            timed.run(inputs)
            per_run[parts].append(np.frombuffer(table, dtype=np.int64).reshape(len(sites), FIELDS).astype(float))
    timed.close()
    stacked = np.stack(per_run[2])
    counts = stacked[-1].copy()
    # CPU time: each site's least (what is left of the load in a thread's CPU time: caches
    # another job emptied, only ever more)
    fastest = np.argmin(stacked[:, :, TOTAL], axis=0)
    for field in (TOTAL, INSIDE, WHOLE_CYCLES):
        counts[:, field] = stacked[fastest, np.arange(len(sites)), field]
    unsplit = np.stack(per_run[1])[:, :, TOTAL].min(axis=0)
    return sites, counts, unsplit


def describe(site: dict) -> str:
    """A short line naming a site: kernel, input shapes, output shape, planned workspace."""
    shapes = [spec["shape"] for spec in site["inputs"] if isinstance(spec, dict)]
    kwargs = {k: v for k, v in site["kwargs"].items() if k in ("group", "strides") and v not in (None, 1, [1, 1])}
    workspace = site.get("workspace")
    extra = f" ws {workspace['shape'][0]:,} B" if workspace is not None else ""
    return f"{site['kernel']} {shapes} -> {site['outputs'][0]['shape']}{' ' + str(kwargs) if kwargs else ''}{extra}"


def why(row: np.ndarray) -> str:
    """The cause of a site's serial CPU time, from its counts."""
    serial = row[TOTAL] - row[INSIDE]
    reasons = []
    if row[WHOLE_CALLS]:
        reasons.append(f"{row[WHOLE_CALLS]:.0f} whole BLAS calls (largest {row[LARGEST_M]:.0f}x{row[LARGEST_N]:.0f}"
                       f"x{row[LARGEST_K]:.0f}: under two blocks), {row[WHOLE_CYCLES] / max(row[TOTAL], 1):.0%}")
    if row[ONE_PART]:
        reasons.append(f"{row[ONE_PART]:.0f} split calls that came out one part")
    rest = serial - row[WHOLE_CYCLES]
    if rest > 0.05 * row[TOTAL]:
        reasons.append("loops below PARALLEL_MIN_WORK" if row[INSIDE] else "no parallel loop")
    return "; ".join(reasons)


def report(model_name: str, runs: int, top: int) -> None:
    """Measure one model and print its table (markdown)."""
    load = os.getloadavg()[0]
    sites, counts, unsplit = measure(model_name, runs)
    total = counts[:, TOTAL].sum()
    serial = counts[:, TOTAL] - counts[:, INSIDE]
    whole = counts[:, WHOLE_MACS].sum()
    split = counts[:, SPLIT_MACS].sum()
    print(f"\n### {model_name} (compiled for two threads, run on one; thread CPU time, each site's least of {runs} runs; "
          f"load average {load:.1f} -> {os.getloadavg()[0]:.1f})\n")
    print(f"- in parallel-fors of >= 2 iterations: {counts[:, INSIDE].sum() / total:.0%} of the CPU time "
          f"(serial {serial.sum() / total:.0%}, of which whole BLAS calls {counts[:, WHOLE_CYCLES].sum() / total:.0%})")
    print(f"- parallel-fors per run: {counts[:, [f for f, _ in KINDS.values()]].sum():.0f} "
          f"(split sgemm {counts[:, SGEMM_SPLIT].sum():.0f} in {counts[:, SGEMM_PARTS].sum():.0f} parts, "
          f"sgemv {counts[:, SGEMV_SPLIT].sum():.0f}, conv loops {counts[:, LOOP_FORKS].sum():.0f}, "
          f"element bodies {counts[:, BODY_FORKS].sum():.0f}); "
          f"split calls of one part: {counts[:, ONE_PART].sum():.0f}")
    print(f"- BLAS multiply-adds in split calls: {split / 1e6:.1f} M, in whole calls: {whole / 1e6:.1f} M "
          f"({whole / max(whole + split, 1):.0%})")
    print(f"- one thread running the two threads' parts, against no split at all (the work a split adds): "
          f"{total / max(unsplit.sum(), 1):.2f}x\n")
    print("| site | share of the run | serial (share of the run) | split work x | sgemm splits: calls x parts "
          "| whole BLAS calls | conv loops / element bodies on threads | why serial |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for index in np.argsort(-serial)[:top]:
        row = counts[index]
        if row[TOTAL] == 0:
            continue
        parts = f"{row[SGEMM_SPLIT]:.0f} x {row[SGEMM_PARTS] / max(row[SGEMM_SPLIT], 1):.1f}" if row[SGEMM_SPLIT] \
            else "0"
        print(f"| {index}: {describe(sites[index])} | {row[TOTAL] / total:.1%} | {serial[index] / total:.1%} | "
              f"{row[TOTAL] / max(unsplit[index], 1):.2f} | {parts} | {row[WHOLE_CALLS]:.0f} | "
              f"{row[LOOP_FORKS]:.0f} / {row[BODY_FORKS]:.0f} | {why(row)} |")


def main() -> None:
    """Count each model named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=LIGHT_MODELS)
    parser.add_argument("--runs", type=int, default=5,
                        help="runs on one thread in each mode (each site's least CPU time is shown)")
    parser.add_argument("--sites", type=int, default=10, help="sites listed per model (most serial CPU time first)")
    args = parser.parse_args()
    for model_name in args.models:
        report(model_name, args.runs, args.sites)


if __name__ == "__main__":
    main()

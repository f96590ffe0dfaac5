"""What a two-thread run's chunks cost when their data crosses between the cores, without running two threads at once.

On a loaded machine two threads of one process seldom run at the same
time, so a two-thread latency says little about a quiet machine
(docs/performance.md, "What two threads do to each other"). This runs the
chunks of every parallel-for in turn instead, as a relay: the light model
is compiled for two threads, its parallel-for replaced (a timing build made
here, as bench/thread_parts.py does, not a pyocc option) by
bench/thread_relay.c's, which cuts the chunks the pool cuts for two threads
and runs them one at a time:

- "local": every chunk on the calling thread, pinned to CPU 0;
- "same": the even chunks there, the odd ones on a helper thread also
  pinned to CPU 0, which the caller hands each one to and waits for
  (yielding its CPU);
- "cross": the same with the helper pinned to CPU 1.

Nothing runs concurrently, so the chunks' thread CPU time is their work.
"same" pays what handing chunks over costs on a loaded machine (other jobs
run while a thread waits and take the caches); what "cross" adds over
"same" is what the chunks pay for data the other core wrote last (the
split products, the passes, the element kernels taking turns at each
other's outputs). The modes take turns run by run; the table gives each
one's median (and least) CPU ms of chunk work per run.

    python bench/thread_relay.py squeezenet --runs 15
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.testing.light_models import LIGHT_MODELS  # noqa: E402
from serial_share import timed_build  # noqa: E402  (bench/, the script's own folder)

SOURCE = Path(__file__).with_name("thread_relay.c")
#: what a parallel-for runs, by its body's name (as bench/thread_scaling.py): a split sgemm or sgemv, an
#: outlined loop of a convolution (`part`: im2col, or a pass where the product is not split), an
#: element kernel's body
KINDS = {"sgemm": 0, "sgemv": 1, "part": 2, "body": 3}


def instrument(llvm_ir: str, name: str, sites: int) -> str:
    """`llvm_ir` with NAME_parallel_for calling through the pointer NAME_relay (set by the script)."""
    del sites
    symbol = f"{name}_parallel_for"
    pattern = re.compile(rf'^define internal void @"{re.escape(symbol)}"\(', re.M)
    if not pattern.search(llvm_ir):
        raise SystemExit(f"no {symbol} in the module: was it compiled for two threads?")
    text = pattern.sub(f'define internal void @"{symbol}.pool"(', llvm_ir)
    # each call through a wrapper for its body's kind, which tells the relay (relay_kind) first
    site_body = rf'@"{re.escape(name)}_site_\d+(?:_sizes)?\.([\w.]+)"'
    calls = re.compile(rf'call void @"{re.escape(symbol)}"\(([^@\n]*{site_body})')

    def by_kind(match: re.Match) -> str:
        kind = match.group(2).split(".")[0]
        return f'call void @"{symbol}.{kind if kind in KINDS else "other"}"({match.group(1)}'

    text = calls.sub(by_kind, text)
    extra = [f'@"{name}_relay" = global ptr null', f'@"{name}_relay_kind" = global ptr null']
    for kind, index in [*KINDS.items(), ("other", len(KINDS))]:
        extra += [f'define internal void @"{symbol}.{kind}"(ptr %body, ptr %context, i64 %count, i64 %per) {{',
                  f'  %kind = load ptr, ptr @"{name}_relay_kind"',
                  f"  store i64 {index}, ptr %kind",
                  f'  call void @"{symbol}"(ptr %body, ptr %context, i64 %count, i64 %per)',
                  "  ret void",
                  "}"]
    return text + "\n".join([
        *extra,
        f'define internal void @"{symbol}"(ptr %body, ptr %context, i64 %count, i64 %per) {{',
        f'  %relay = load ptr, ptr @"{name}_relay"',
        "  call void %relay(ptr %body, ptr %context, i64 %count, i64 %per)",
        "  ret void",
        "}",
    ]) + "\n"


def build(directory: Path) -> ctypes.CDLL:
    """bench/thread_relay.c as a shared library, loaded."""
    compiler = shutil.which("cc")
    if compiler is None:
        raise SystemExit("thread_relay: no C compiler (cc) on PATH")
    library = directory / "relay.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", str(SOURCE), "-o", str(library), "-lpthread"], check=True)
    return ctypes.CDLL(str(library))


def measure(model_name: str, runs: int, relay: ctypes.CDLL) -> dict[str, list[float]]:
    """CPU ms of chunk work per run, by mode, the modes taking turns."""
    inputs, name, _, timed, engine, set_threads = timed_build(model_name, instrument)
    assert set_threads(1) == 0  # no worker: the relay runs every chunk
    pointer = ctypes.c_void_p.from_address(engine.get_global_value_address(f"{name}_relay"))
    pointer.value = ctypes.cast(relay.relay_parallel_for, ctypes.c_void_p).value
    spent = (ctypes.c_int64 * 2).in_dll(relay, "relay_ns")
    by_kind = (ctypes.c_int64 * 8).in_dll(relay, "relay_kind_ns")
    ctypes.c_void_p.from_address(engine.get_global_value_address(f"{name}_relay_kind")).value = \
        ctypes.addressof(ctypes.c_int64.in_dll(relay, "relay_kind"))
    samples: dict[str, list[float]] = {"local": [], "same": [], "cross": []}
    kinds: dict[str, list[list[float]]] = {mode: [] for mode in samples}
    helper_cpu = {"local": 0, "same": 0, "cross": 1}
    os.sched_setaffinity(0, {0})  # this (the calling) thread on CPU 0
    try:
        for round_ in range(runs + 1):
            for mode in samples:
                relay.relay_start(int(mode != "local"), helper_cpu[mode])
                timed.run(inputs)  # untimed: caches and the helper settle
                spent[0] = spent[1] = 0
                ctypes.memset(by_kind, 0, ctypes.sizeof(by_kind))
                timed.run(inputs)
                relay.relay_stop()
                if round_:
                    samples[mode].append((spent[0] + spent[1]) / 1e6)
                    kinds[mode].append([by_kind[i] / 1e6 for i in range(len(KINDS) + 1)])
    finally:
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    timed.close()
    for mode in list(samples):  # per kind: the median over runs, as one more row of samples
        samples[f"{mode} by kind"] = [statistics.median(run[i] for run in kinds[mode]) for i in range(len(KINDS) + 1)]
    return samples


def main() -> None:
    """Print the table of the module docstring for each model named."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["squeezenet"])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per mode (taking turns)")
    args = parser.parse_args()
    for name in args.models:
        if name not in LIGHT_MODELS:
            parser.error(f"unknown model '{name}': use one of {', '.join(LIGHT_MODELS)}")
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("thread_relay: needs two CPUs")
    print("| model | load average | chunk CPU ms, local (median, least) | same | cross | cross / same |")
    print("|---|---|---:|---:|---:|---:|")
    kinds: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory() as directory:
        relay = build(Path(directory))
        for name in args.models:
            before = os.getloadavg()[0]
            samples = measure(name, args.runs, relay)
            modes = ("local", "same", "cross")
            cells = [f"{statistics.median(samples[mode]):.2f} ({min(samples[mode]):.2f})" for mode in modes]
            ratio = statistics.median(samples["cross"]) / statistics.median(samples["same"])
            print(f"| {name} | {before:.1f}-{os.getloadavg()[0]:.1f} | {' | '.join(cells)} | {ratio:.2f} |", flush=True)
            kinds.append((name, samples))
    print("\n| model | body kind | chunk CPU ms, local | same | cross | cross / same |")
    print("|---|---|---:|---:|---:|---:|")
    for name, samples in kinds:
        for kind, index in [*KINDS.items(), ("other", len(KINDS))]:
            local, same, cross = (samples[f"{mode} by kind"][index] for mode in ("local", "same", "cross"))
            if max(local, same, cross) > 0:
                print(f"| {name} | {kind} | {local:.2f} | {same:.2f} | {cross:.2f} | {cross / max(same, 1e-9):.2f} |")


if __name__ == "__main__":
    main()

"""Did the second thread work? Each thread's CPU time during a light model's runs.

For each light model (random weights) this compiles it for one and for
`--threads` threads (default 2) and runs the two in turns, in one process,
after one onnxruntime run on as many threads (as bench/host_latency.py has
a model's runs follow onnxruntime's). Per build it prints the median wall
milliseconds per run and, summed over the timed runs and divided by their
number, the CPU milliseconds per run of: the calling thread, pyocc's
workers (the threads the build started), onnxruntime's threads and any
other thread of the process (each thread's time on a CPU, from
/proc/self/task/*/schedstat).

Read together, on any load: "workers" near the caller's means the threads
shared the chunks (the pool hands them out one at a time); "extra CPU" is
the multi-thread build's CPU per run over the one-thread build's, i.e.
what splitting, waiting and spinning add; onnxruntime's CPU during pyocc's
runs is its workers spinning on after its own run, taking a core. The
wall milliseconds say what the load let the threads do at once.

    python bench/thread_cpu.py shufflenet squeezenet inception_v2 --runs 30
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import onnxruntime as ort  # noqa: E402

import pyocc  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS, random_inputs_for, with_random_weights  # noqa: E402

#: where Linux keeps each thread's scheduler statistics (the first field: nanoseconds on a CPU)
TASKS = Path("/proc/self/task")


def thread_cpu_ns() -> dict[str, int]:
    """Nanoseconds on a CPU so far, per thread id of this process."""
    spent = {}
    for task in os.listdir(TASKS):
        try:
            spent[task] = int((TASKS / task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            continue
    return spent


def measure(name: str, threads: int, runs: int) -> list[str]:
    """The table rows of one model: one per build (one thread, `threads` threads)."""
    proto = with_random_weights(name)
    inputs = random_inputs_for(proto)
    known = set(thread_cpu_ns())
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3  # no warnings about unused initializers
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    ort_threads = set(thread_cpu_ns()) - known
    known |= ort_threads
    builds, workers = {}, {}
    for count in (1, threads):
        builds[count] = pyocc.compile(proto, threads=count)
        workers[count] = set(thread_cpu_ns()) - known
        known |= workers[count]
    caller = str(os.getpid())
    walls: dict[int, list[float]] = {count: [] for count in builds}
    cpu: dict[int, dict[str, float]] = {count: dict.fromkeys(("caller", "workers", "onnxruntime", "others"), 0.0)
                                        for count in builds}
    session.run(None, inputs)
    for round_ in range(runs + 1):
        for count, model in builds.items():
            model.run(inputs)  # untimed: caches settle, idle workers wake
            before = thread_cpu_ns()
            start = time.perf_counter()
            model.run(inputs)
            wall = time.perf_counter() - start
            after = thread_cpu_ns()
            if not round_:
                continue
            walls[count].append(wall * 1e3)
            for task, spent in after.items():
                ms = (spent - before.get(task, 0)) / 1e6 / runs
                kind = ("caller" if task == caller else "workers" if task in workers[count]
                        else "onnxruntime" if task in ort_threads else "others")
                cpu[count][kind] += ms
    one_cpu = sum(cpu[1].values())
    rows = []
    for count in builds:
        total = sum(cpu[count].values())
        rows.append(f"| {name} | {count} | {statistics.median(walls[count]):.2f} | {cpu[count]['caller']:.2f} | "
                    f"{cpu[count]['workers']:.2f} | {cpu[count]['onnxruntime']:.2f} | {cpu[count]['others']:.2f} | "
                    f"{total / one_cpu:.2f} |")
    for model in builds.values():
        model.native.close()
    return rows


def main() -> None:
    """Print the table of the module docstring for each model named."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["shufflenet"])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per build (the builds take turns)")
    parser.add_argument("--threads", type=int, default=2, help="threads of the second build and of onnxruntime")
    args = parser.parse_args()
    for name in args.models:
        if name not in LIGHT_MODELS:
            parser.error(f"unknown model '{name}': use one of {', '.join(LIGHT_MODELS)}")
    if args.threads < 2:
        parser.error("--threads must be at least 2")
    if not TASKS.is_dir():
        raise SystemExit("thread_cpu: needs Linux's /proc/self/task")
    print(f"load average {os.getloadavg()[0]:.1f} at the start; CPU ms per run")
    print("| model | threads | wall ms (median) | caller | workers | onnxruntime | others | CPU / one thread's |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.models:
        for row in measure(name, args.threads, args.runs):
            print(row, flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

"""Two threads that spin before they sleep against two that sleep at once, per light model.

The worker pool of a model compiled for several threads
(pyocc.lowering.native.threads) lets a waiting thread (a worker between
jobs, the caller waiting for the last chunk) spin for SPIN_TICKS of the
cycle counter, then yield its core YIELDS times, then sleep on a condition
variable. This compiles each model (random weights) three ways in one
process: one thread; two threads whose waiting threads sleep at once
("sleep": SPIN_LIMIT 0 and YIELDS 0 while it compiles, a timing build made
here, not a pyocc option); two threads as pyocc compiles them ("spin").
The three take turns run by run, so a load burst on a shared machine hits
all alike, and the script prints each one's median and fastest wall
milliseconds, process CPU milliseconds (both threads: what spinning
costs the machine) and the process's voluntary context switches per run
(a thread going to sleep: /proc/self/task/*/status, Linux), and checks
that all three give the same bytes. With `--ort`, an onnxruntime session
on two threads (test dependency; its threads spin between jobs) runs
untimed before each timed run, as bench/host_latency.py alternates the
two runtimes.

    python bench/spin_wait.py squeezenet densenet121 --runs 9
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyocc  # noqa: E402
from pyocc.lowering.native import threads as pool  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS, random_inputs_for, with_random_weights  # noqa: E402


def compile_sleeping(model: object) -> pyocc.Model:
    """The model on two threads whose waiting threads never spin or yield."""
    saved = pool.SPIN_LIMIT, pool.YIELDS
    pool.SPIN_LIMIT, pool.YIELDS = 0, 0
    try:
        return pyocc.compile(model, threads=2)
    finally:
        pool.SPIN_LIMIT, pool.YIELDS = saved


def ort_session(model: Any) -> Any:
    """onnxruntime on two intra-op threads (imported only for --ort)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def sleeps() -> int:
    """Voluntary context switches of all this process's threads so far (0 without /proc)."""
    total = 0
    for status in Path("/proc/self/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:  # a thread that has just ended
            continue
        total += sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("voluntary_ctxt"))
    return total


def main() -> None:
    """Time the three builds of each model, taking turns, and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["squeezenet", "inception_v1", "densenet121", "resnet50"],
                        metavar="MODEL", help=f"light models (of {', '.join(LIGHT_MODELS)})")
    parser.add_argument("--runs", type=int, default=9, help="timed runs per build (after one warm-up)")
    parser.add_argument("--ort", action="store_true",
                        help="run onnxruntime (2 threads, untimed) before each timed run, as host_latency.py does")
    args = parser.parse_args()
    for name in args.models:
        if name not in LIGHT_MODELS:
            parser.error(f"unknown model '{name}': use one of {', '.join(LIGHT_MODELS)}")
    print("| model | 1 thread ms (fastest) | 2 sleep ms (fastest) | 2 spin ms (fastest) | CPU ms: 1 / sleep / spin "
          "| sleeps per run: 1 / sleep / spin |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.models:
        model = with_random_weights(name)
        inputs = random_inputs_for(model)
        builds = {"1": pyocc.compile(model), "sleep": compile_sleeping(model), "spin": pyocc.compile(model, threads=2)}
        session = ort_session(model) if args.ort else None
        wall: dict[str, list[float]] = {k: [] for k in builds}
        cpu: dict[str, list[float]] = {k: [] for k in builds}
        switches: dict[str, list[int]] = {k: [] for k in builds}
        outputs: dict[str, dict[str, np.ndarray]] = {}
        for round_ in range(args.runs + 1):
            for key, build in builds.items():
                if session is not None:
                    session.run(None, inputs)
                start, start_cpu, start_sleeps = time.perf_counter(), time.process_time(), sleeps()
                outputs[key] = build.run(inputs)
                if round_:  # the first round warms up
                    wall[key].append((time.perf_counter() - start) * 1e3)
                    cpu[key].append((time.process_time() - start_cpu) * 1e3)
                    switches[key].append(sleeps() - start_sleeps)
        for key in ("sleep", "spin"):
            for output, expected in outputs["1"].items():
                np.testing.assert_array_equal(outputs[key][output], expected, err_msg=f"{name} {key} {output}")
        cells = [f"{statistics.median(wall[k]):.1f} ({min(wall[k]):.1f})" for k in builds]
        cpus = " / ".join(f"{statistics.median(cpu[k]):.1f}" for k in builds)
        counts = " / ".join(f"{statistics.median(switches[k]):.0f}" for k in builds)
        print(f"| {name} | {' | '.join(cells)} | {cpus} | {counts} |", flush=True)


if __name__ == "__main__":
    main()

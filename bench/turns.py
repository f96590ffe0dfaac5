"""Does a two-thread run depend on what ran just before it? pyocc and onnxruntime alone and in turns.

bench/host_latency.py times pyocc and onnxruntime in turns, run by run, in
one process (so a burst of load hits both alike). On two threads each, a
runtime's run then starts right after the other's, whose idle worker threads
may still hold a core: onnxruntime's workers spin for a while after a run
(its `session.intra_op.allow_spinning`, on by default), pyocc's for at most
pyocc.lowering.native.threads.SPIN_TICKS. This prints, per light model, the
median milliseconds of each runtime's runs:

- alone: its runs back to back;
- in turns: as host_latency.py times them (pyocc, onnxruntime, pyocc, ...);
- in turns, no spin: the same with onnxruntime's spinning turned off
  (`session.intra_op.allow_spinning` = 0);

and pyocc on one thread, alone, for reference.

    python bench/turns.py squeezenet resnet50 --runs 15
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyocc  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS, random_inputs_for, with_random_weights  # noqa: E402


def session(model: bytes, threads: int, spin: bool) -> ort.InferenceSession:
    """onnxruntime's CPU session as host_latency.py makes it; `spin`: its workers spin between runs."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def medians(runners: list[Callable[[], object]], runs: int, warmup: int = 3) -> list[float]:
    """Median milliseconds of each runner, the runners taking turns run by run."""
    for _ in range(warmup):
        for run in runners:
            run()
    samples: list[list[float]] = [[] for _ in runners]
    for _ in range(runs):
        for run, times in zip(runners, samples, strict=True):
            start = time.perf_counter()
            run()
            times.append((time.perf_counter() - start) * 1e3)
    return [statistics.median(times) for times in samples]


def main() -> None:
    """Print the table of the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=LIGHT_MODELS)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"| model | pyocc 1 thread alone | pyocc alone | ort alone | pyocc in turns | ort in turns | "
          f"pyocc in turns, ort not spinning | ort in turns, not spinning |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.models:
        model = with_random_weights(name)
        inputs = random_inputs_for(model)
        serialized = model.SerializeToString()
        one = pyocc.compile(model, threads=1)
        ours = pyocc.compile(model, threads=args.threads)
        spinning, still = session(serialized, args.threads, True), session(serialized, args.threads, False)

        def run_one() -> object:
            return one.run(inputs)

        def run_ours() -> object:
            return ours.run(inputs)

        def run_spinning() -> object:
            return spinning.run(None, inputs)

        def run_still() -> object:
            return still.run(None, inputs)

        [single] = medians([run_one], args.runs)
        [alone] = medians([run_ours], args.runs)
        [ort_alone] = medians([run_spinning], args.runs)
        turns = medians([run_ours, run_spinning], args.runs)
        quiet = medians([run_ours, run_still], args.runs)
        print(f"| {name} | {single:.2f} | {alone:.2f} | {ort_alone:.2f} | {turns[0]:.2f} | {turns[1]:.2f} | "
              f"{quiet[0]:.2f} | {quiet[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()

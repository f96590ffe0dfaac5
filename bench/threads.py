"""A model's own threads against OpenBLAS's threads, on one light model.

Compiles the model for 1 and for N threads (``pyocc.compile(threads=)``),
then times every pair (model threads, OpenBLAS threads): OpenBLAS's count is
process-wide and set after the model is loaded (``pyocc.runtime.blas.
set_threads``), so "OpenBLAS N" makes each of the model's sgemm calls (or
parts of one, with model threads > 1) run on N OpenBLAS threads. The pairs
take turns run by run; each line is the median wall and CPU milliseconds.

    python bench/threads.py                      # resnet50, 2 threads
    python bench/threads.py --model densenet121 --threads 4 --runs 9
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyocc  # noqa: E402
from pyocc.runtime import blas  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS, random_inputs_for, with_random_weights  # noqa: E402


def main() -> None:
    """Time each (model threads, OpenBLAS threads) pair and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", choices=LIGHT_MODELS)
    parser.add_argument("--threads", type=int, default=2, help="the thread count compared with 1")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per pair (median reported)")
    args = parser.parse_args()
    model = with_random_weights(args.model)
    inputs = random_inputs_for(model)
    compiled = {t: pyocc.compile(model, threads=t) for t in (1, args.threads)}
    pairs = [(t, b) for b in (1, args.threads) for t in (1, args.threads)]
    wall: dict[tuple[int, int], list[float]] = {p: [] for p in pairs}
    cpu: dict[tuple[int, int], list[float]] = {p: [] for p in pairs}
    for round_ in range(args.runs + 1):
        for pair in pairs:
            threads, blas_threads = pair
            blas.set_threads(blas_threads)
            start, start_cpu = time.perf_counter(), time.process_time()
            compiled[threads].run(inputs)
            if round_:  # the first round warms up
                wall[pair].append(time.perf_counter() - start)
                cpu[pair].append(time.process_time() - start_cpu)
    print(f"| model threads | OpenBLAS threads | {args.model} wall ms | CPU ms |")
    print("|---:|---:|---:|---:|")
    for pair in pairs:
        print(f"| {pair[0]} | {pair[1]} | {statistics.median(wall[pair]) * 1e3:.1f} | "
              f"{statistics.median(cpu[pair]) * 1e3:.1f} |")


if __name__ == "__main__":
    main()

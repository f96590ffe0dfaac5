"""The heap each light model takes when run from C, and what planning the
kernel scratch costs its pool (issue 16).

For each of the nine light models (pool mode, native kernels): compile it,
run it 3 times with examples/c/run_model under the LD_PRELOAD shim
bench/heapcount.c, and print the process's heap peak beside the planned
pool, the graph I/O and the weights (memory-mapped by the runner, so not on
the heap), OpenBLAS's once-per-process buffer (measured by a C program that
calls sgemm once), and what is left: `unplanned` = peak - pool - I/O -
OpenBLAS's buffer (issue 16's goal: at most 64 KiB). The pool columns: the
pool without the kernels' scratch (`scratch=False`: the im2col convolutions
would then run numpy kernels), with it fitted to the slack (the default),
and with every block planned whole (`fit_scratch=False`).

    python bench/heapcount.py                     # all nine, markdown table
    python bench/heapcount.py --models resnet50,squeezenet

Needs `cc`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyocc  # noqa: E402
from pyocc.pipelines import Options  # noqa: E402
from pyocc.testing.heapcount import HEAP_SLACK_BYTES, blas_init_bytes, build_tools, count_heap  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS, light_model_path  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 1 if a model's unplanned heap is above 64 KiB."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(LIGHT_MODELS), help="comma-separated light model names")
    parser.add_argument("--repeat", type=int, default=3, help="runs per model (default 3)")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(LIGHT_MODELS))
    if unknown:
        print(f"heapcount: unknown model {unknown[0]!r}; choose from {', '.join(LIGHT_MODELS)}", file=sys.stderr)
        return 2
    directory = Path(tempfile.mkdtemp(prefix="heapcount-"))
    runner, shim = build_tools(directory)
    blas = blas_init_bytes(directory, shim)
    print(f"OpenBLAS's first sgemm takes {blas:,d} heap bytes, once per process\n")
    print("| model | pool, no scratch | pool (scratch fitted) | pool, whole blocks | graph I/O | weights (mapped) "
          "| heap peak | peak - pool - I/O | unplanned | malloc calls |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0
    for name in names:
        start = time.perf_counter()
        path = light_model_path(name)
        _, without = pyocc.lower(path, scratch=False)
        _, whole = pyocc.lower(path, options=Options(fit_scratch=False))
        model = pyocc.compile(path)
        heap = count_heap(model, directory, runner, shim, blas, repeat=args.repeat)
        worst = max(worst, heap.unplanned_bytes)
        print(f"| {name} | {without.activation_bytes:,d} | {heap.pool_bytes:,d} | {whole.activation_bytes:,d} "
              f"| {heap.io_bytes:,d} | {heap.weight_bytes:,d} | {heap.peak_bytes:,d} | {heap.extra_bytes:,d} "
              f"| {heap.unplanned_bytes:,d} | {heap.calls} |", flush=True)
        print(f"  ({name}: {time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0 if worst <= HEAP_SLACK_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())

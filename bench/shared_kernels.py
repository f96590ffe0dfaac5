"""Sites that differ only in sizes sharing one native function, against
every site having its own: compile time, outputs and run time, in one process.

For each named light model (random weights, as the e2e tests use) this
compiles it twice, as pyocc does (sites alike but for the sizes their
emitter reads at run time share a function, pyocc.lowering.native.registry)
and with every site its own function (`select_kernels(share_sizes=False)`,
patched in for this process only), checks that the two give the same
bytes, then runs them in turns and prints the median and the best of
`--runs` runs of each. Each compile starts with the JIT's kernel cache empty.

    python bench/shared_kernels.py densenet121 --runs 30
    python bench/shared_kernels.py densenet121 --threads 2
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from pathlib import Path

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import pyocc  # noqa: E402
import pyocc.lowering.convert_dnn_to_llvm as convert_dnn_to_llvm  # noqa: E402
from pyocc.runtime import jit, object_cache  # noqa: E402
from pyocc.testing.light_models import onnxruntime_reference  # noqa: E402


def main() -> None:
    """Compile each named model both ways, compare their outputs and time their runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="light model names, e.g. densenet121")
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each (median and best printed)")
    parser.add_argument("--threads", type=int, default=1, help="threads both are compiled for")
    args = parser.parse_args()
    os.environ.pop(object_cache.CACHE_DIR_VARIABLE, None)  # cold compiles: no code loaded from a disk cache
    export = convert_dnn_to_llvm._export
    for name in args.models:
        model, inputs, _ = onnxruntime_reference(name)
        compiled = {}
        for label, share in (("shared", True), ("own", False)):
            convert_dnn_to_llvm._export = functools.partial(export, share_sizes=share)
            jit._kernels.clear()  # a cold compile each: no kernel from the other
            start = time.process_time()
            compiled[label] = pyocc.compile(model, threads=args.threads)
            print(f"{name} {label}: compile {time.process_time() - start:.2f} CPU s", flush=True)
        convert_dnn_to_llvm._export = export
        outputs = [m.run(inputs) for m in compiled.values()]
        for a, b in zip(outputs[0].values(), outputs[1].values(), strict=True):
            assert np.array_equal(a, b), f"{name}: the shared kernels' outputs differ from the own kernels'"
        times: dict[str, list[float]] = {label: [] for label in compiled}
        for run in range(args.runs):
            order = list(compiled.items()) if run % 2 == 0 else list(reversed(compiled.items()))
            for label, m in order:
                start = time.perf_counter()
                m.run(inputs)
                times[label].append(time.perf_counter() - start)
        for label, values in times.items():
            print(f"{name} {label}: run median {1000 * statistics.median(values):.2f} ms, "
                  f"best {1000 * min(values):.2f} ms (wall, {args.runs} runs, {args.threads} thread(s))")


if __name__ == "__main__":
    main()

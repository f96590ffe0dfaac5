"""The heap a compiled model takes from C, counted: examples/c/run_model runs
the `.so` under the LD_PRELOAD shim bench/heapcount.c, which tracks every
malloc-family call of the process and writes its peak of live heap bytes at
exit. `extra_bytes` is that peak minus what a run must hold: the planned
pool and the graph's inputs and outputs. The weights are not subtracted:
the runner memory-maps them, so they are not on the heap (a runner that
copied them there would show them here). Nor is OpenBLAS's one allocation at
its first sgemm (about 144 KiB, the same for every model, never repeated):
`blas_init_bytes` measures it with a ten-line C program that calls sgemm
once, and `unplanned_bytes` is what is left: the runner's own few
allocations, libc's and the dynamic loader's, and any kernel temporary that
is not a buffer of the plan.
Used by tests/runtime/test_heapcount.py and bench/heapcount.py; needs `cc`.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pyocc.runtime import blas

__all__ = ["HEAP_SLACK_BYTES", "HeapCount", "blas_init_bytes", "build_tools", "count_heap"]

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "examples" / "c" / "run_model.c"
SHIM = ROOT / "bench" / "heapcount.c"

#: issue 16's goal: heap peak during a run minus (pool + I/O + weights)
HEAP_SLACK_BYTES = 64 << 10


@dataclass(frozen=True)
class HeapCount:
    """One counted run of a compiled model from C."""

    peak_bytes: int
    """The process's peak of live heap bytes (malloc_usable_size of each block)."""
    calls: int
    """malloc-family calls the process made (loading included)."""
    pool_bytes: int
    io_bytes: int
    weight_bytes: int
    """Bytes of the weights file (memory-mapped by the runner: not subtracted)."""
    blas_init_bytes: int
    """OpenBLAS's heap at its first sgemm, once per process (`blas_init_bytes`)."""

    @property
    def extra_bytes(self) -> int:
        """The peak beyond pool + I/O."""
        return self.peak_bytes - (self.pool_bytes + self.io_bytes)

    @property
    def unplanned_bytes(self) -> int:
        """The peak beyond pool + I/O + OpenBLAS's once-per-process buffer:
        what the plan does not hold (issue 16's goal: at most 64 KiB)."""
        return self.extra_bytes - self.blas_init_bytes


#: loads OpenBLAS and, given a second argument, calls one 64x256x72 sgemm
BLAS_PROBE = r"""
#include <dlfcn.h>
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);
static float a[64 * 72], b[72 * 256], c[64 * 256];
int main(int argc, char **argv) {
    void *blas = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!blas) return 1;
    sgemm_fn sgemm = (sgemm_fn)dlsym(blas, "scipy_cblas_sgemm");
    if (!sgemm) return 1;
    if (argc > 2) sgemm(101, 111, 111, 64, 256, 72, 1.0f, a, 72, b, 256, 0.0f, c, 256);
    return 0;
}
"""


def build_tools(directory: Path) -> tuple[Path, Path]:
    """Build the C runner and the heap-count shim into `directory` with `cc`;
    (runner, shim). Raises CalledProcessError with the compiler's message."""
    runner, shim = directory / "run_model", directory / "heapcount.so"
    subprocess.run(["cc", "-O2", "-o", str(runner), str(RUNNER), "-ldl"], check=True, capture_output=True, text=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(SHIM), "-ldl"], check=True,
                   capture_output=True, text=True)
    return runner, shim


def blas_init_bytes(directory: Path, shim: Path) -> int:
    """OpenBLAS's heap taken by its first sgemm: the peak of a process that
    loads it and calls sgemm once, minus that of one that only loads it."""
    probe = directory / "blas_probe"
    (directory / "blas_probe.c").write_text(BLAS_PROBE)
    subprocess.run(["cc", "-O2", "-o", str(probe), str(directory / "blas_probe.c"), "-ldl"], check=True,
                   capture_output=True, text=True)
    peaks = []
    for extra in ([], ["sgemm"]):
        out = directory / "probe.txt"
        env = {**os.environ, "LD_PRELOAD": str(shim), "HEAPCOUNT_OUT": str(out), "OPENBLAS_NUM_THREADS": "1"}
        subprocess.run([str(probe), blas.library_path(), *extra], env=env, check=True, capture_output=True, timeout=60)
        peaks.append(int(out.read_text().split()[1]))
    return peaks[1] - peaks[0]


def count_heap(model: Any, directory: Path, runner: Path, shim: Path, blas_init: int, repeat: int = 3,
               seed: int = 0) -> HeapCount:
    """Save `model` (a `pyocc.compile` result with no numpy sites) as
    `directory`/model.so, run it `repeat` times from C under the shim on
    random inputs, and count its heap (`blas_init`: from `blas_init_bytes`)."""
    library = directory / "model.so"
    model.save(library)
    meta = model.native.meta
    rng = np.random.default_rng(seed)
    raw = b"".join((rng.standard_normal(spec["shape"]).astype(spec["dtype"]) if np.dtype(spec["dtype"]).kind == "f"
                    else np.zeros(spec["shape"], spec["dtype"])).tobytes() for spec in meta["inputs"])
    (directory / "in.bin").write_bytes(raw)
    out = directory / "heap.txt"
    env = {**os.environ, "LD_PRELOAD": str(shim), "HEAPCOUNT_OUT": str(out), "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run([str(runner), str(library), str(directory / "in.bin"), str(directory / "out.bin"),
                           "--repeat", str(repeat)], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"run_model failed ({done.returncode}): {done.stderr.strip()}")
    fields = out.read_text().split()
    report = model.memory_report()
    pool = report.activation_bytes if report.memory == "pool" else 0
    return HeapCount(peak_bytes=int(fields[1]), calls=int(fields[3]), pool_bytes=pool, io_bytes=report.io_bytes,
                     weight_bytes=meta["weights"]["bytes"], blas_init_bytes=blas_init)

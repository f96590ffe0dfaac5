"""The nine light models on target=cuda, run on the CPU stand-in.

For each light model (random weights) and memory mode: the largest
difference from onnxruntime, cudaMalloc / cudaFree calls per run, the peak of
activation bytes, the workspace init allocated, and the stand-in's error and
leak counts (both must be 0). A markdown table; exits 1 on any mismatch,
error or leak. On a GPU, bench/gpu_memory_latency.py measures the real thing.

    python bench/cuda_stand_in_models.py [--models resnet50 squeezenet]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import pyocc  # noqa: E402
from pyocc.testing.fake_cuda import FakeCuda  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS, onnxruntime_reference  # noqa: E402

MiB = 1 << 20


def main(argv: list[str] | None = None) -> int:
    """Run every model in every mode; print the table; exit 1 on a problem."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(LIGHT_MODELS))
    args = parser.parse_args(argv)
    print("| model | mode | max abs diff vs onnxruntime | cudaMalloc / cudaFree per run | peak activation MiB "
          "| workspace MiB (stand-in's sizes) | stand-in errors | leaks |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    bad = 0
    for name in args.models:
        model, inputs, expected = onnxruntime_reference(name)
        for mode in ("eager", "lazy", "pool"):
            fake = FakeCuda()
            compiled = pyocc.compile(model, target="cuda", memory=mode, cuda_libraries=fake)
            got = list(compiled.run(inputs).values())
            stats, workspace = compiled.native.alloc_stats(), compiled.native.workspace_bytes
            compiled.native.close()
            diff = max(float(np.abs(g - w).max()) for g, w in zip(got, expected))
            ok = all(np.allclose(g, w, rtol=1e-4, atol=1e-5) for g, w in zip(got, expected))
            bad += (not ok) + len(fake.errors) + len(fake.leaks())
            print(f"| {name} | {mode} | {diff:.2g}{'' if ok else ' MISMATCH'} | {stats.allocations} / {stats.frees} "
                  f"| {stats.peak_bytes / MiB:.2f} | {workspace / MiB:.2f} | {len(fake.errors)} | {len(fake.leaks())} |",
                  flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

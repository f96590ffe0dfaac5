"""The nine light models on target=cuda, run on the CPU stand-in.

For each light model (random weights) and memory mode: the largest
difference from onnxruntime, cudaMalloc / cudaFree calls per run and the
pools init allocated once, the activation bytes (the pool in pool mode, which
includes the planned cuDNN workspace; the measured peak per run otherwise),
the workspace init allocated outside the plan, and the stand-in's error and
leak counts (both must be 0). A markdown table; exits 1 on any mismatch,
error or leak. On a GPU, bench/gpu_memory_latency.py measures the real thing.

    python bench/cuda_stand_in_models.py [--models densenet121] [--modes pool] [--workspace 0]
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
    parser.add_argument("--modes", nargs="*", default=["eager", "lazy", "pool"],
                        help="memory modes; pool-run is pool mode with the pool allocated per run")
    parser.add_argument("--workspace", type=int, default=32 << 20, help="cuDNN workspace bound per convolution (bytes)")
    args = parser.parse_args(argv)
    print(f"cuDNN workspace bound: {args.workspace / MiB:g} MiB per convolution")
    print("| model | mode | max abs diff vs onnxruntime | cudaMalloc / cudaFree per run | pools cudaMalloc'd at init "
          "| activation MiB | workspace outside the plan MiB | stand-in errors | leaks |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    bad = 0
    for name in args.models:
        model, inputs, expected = onnxruntime_reference(name)
        for mode in args.modes:
            fake = FakeCuda()
            memory, _, allocation = mode.partition("-")
            compiled = pyocc.compile(model, target="cuda", memory=memory, cuda_libraries=fake,
                                     workspace=args.workspace, pool_allocation=allocation or None)
            got = list(compiled.run(inputs).values())
            native = compiled.native
            stats, workspace = native.alloc_stats(), native.workspace_bytes
            activation = stats.peak_bytes + native.init_pool_bytes
            native.close()
            diff = max(float(np.abs(g - w).max()) for g, w in zip(got, expected, strict=True))
            ok = all(np.allclose(g, w, rtol=1e-4, atol=1e-5) for g, w in zip(got, expected, strict=True))
            bad += (not ok) + len(fake.errors) + len(fake.leaks())
            print(f"| {name} | {mode} | {diff:.2g}{'' if ok else ' MISMATCH'} | {stats.allocations} / {stats.frees} "
                  f"| {native.init_pool_allocations} | {activation / MiB:.2f} | {workspace / MiB:.2f} "
                  f"| {len(fake.errors)} | {len(fake.leaks())} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

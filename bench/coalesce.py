"""What tensor coalescing (dnn-coalesce) saves on each light model.

For each of the nine light models (shipped in the onnx wheel) one row: the
buffers the plan places (mallocs) before and after coalescing, the pool-mode
activation bytes without and with it, and the two peers of issue 6 (TVM
Relax StaticPlanBlockMemory with fusion, onnxruntime 1.32's memory pattern).
When the flow has layer fusion (an ``Options.fuse`` field), the same two
columns are repeated with fusion on. Batch 1, fp32, activations only, MiB.

    python bench/coalesce.py
    python bench/coalesce.py --models densenet121,resnet50
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.pipelines import Options  # noqa: E402
from pyocc.testing.light_models import light_model_path  # noqa: E402

LIGHT_MODELS = [
    "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
    "shufflenet", "squeezenet", "vgg19", "zfnet512",
]

#: issue 6, pool-mode activation MiB: (TVM Relax fused, onnxruntime ORT_ENABLE_ALL);
#: ShuffleNet's onnxruntime figure is 2.78 at ORT_ENABLE_EXTENDED
PEERS_MIB: dict[str, tuple[float, float]] = {
    "bvlc_alexnet": (3.27, 2.14), "densenet121": (7.96, 11.87), "inception_v1": (9.47, 4.43),
    "inception_v2": (7.47, 3.83), "resnet50": (9.39, 6.89), "shufflenet": (3.95, 2.78),
    "squeezenet": (6.06, 3.75), "vgg19": (25.31, 24.50), "zfnet512": (13.21, 8.70),
}


def has_fusion() -> bool:
    """True when the flow has a layer-fusion switch (Options.fuse)."""
    return any(f.name == "fuse" for f in dataclasses.fields(Options))


def measure(imported, options: Options) -> tuple[int, int]:  # noqa: ANN001 - an xDSL ModuleOp
    """(mallocs before the pool, pool bytes) of an imported module lowered
    with ``options`` in pool mode."""
    from xdsl.context import Context

    from pyocc.dialects.dnn import ops as d
    from pyocc.pipelines import buffer_passes, pool_passes, run_passes, tensor_passes

    module = imported.clone()
    ctx = Context()
    run_passes(ctx, module, tensor_passes(options))
    run_passes(ctx, module, buffer_passes(options))
    mallocs = sum(isinstance(op, d.MallocOp) for op in module.walk())
    run_passes(ctx, module, pool_passes(options))
    pool = next((op for op in module.walk() if isinstance(op, d.PoolInitOp)), None)
    return mallocs, pool.size.value.data if pool is not None else 0


def row(name: str) -> list[str]:
    """One table row for model ``name``."""
    from pyocc.frontend.onnx_import import import_model

    start = time.perf_counter()
    imported = import_model(light_model_path(name))
    settings = [{"fuse": False}, {"fuse": True}] if has_fusion() else [{}]
    cells: list[str] = []
    for extra in settings:
        before, without = measure(imported, Options(memory="pool", coalesce=False, **extra))
        after, with_ = measure(imported, Options(memory="pool", coalesce=True, **extra))
        if not cells:
            cells += [str(before), str(after)]
        cells += [f"{without / 2**20:.2f}", f"{with_ / 2**20:.2f}"]
    tvm, ort = PEERS_MIB[name]
    best = min(tvm, ort)
    ours = float(cells[-1])
    cells += [f"{tvm:.2f}", f"{ort:.2f}", "yes" if ours <= best else f"no (+{ours - best:.2f})",
              f"{time.perf_counter() - start:.1f}"]
    return [name, *cells]


def main(argv: list[str] | None = None) -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(LIGHT_MODELS), help="comma-separated light model names")
    args = parser.parse_args(argv)
    headers = ["model", "buffers", "coalesced", "MiB plain", "MiB coalesce"]
    if has_fusion():
        headers += ["MiB fuse", "MiB fuse+coalesce"]
    headers += ["TVM", "ORT", "<= best peer", "s"]
    rows = [headers]
    for name in args.models.split(","):
        rows.append(row(name))
        print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    for r in rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

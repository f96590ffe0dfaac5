"""Patch-based execution of the stem (dnn-tile) on the light models: per
model the untiled pool, the pool with `--memory-limit min` (at most 10% more
MACs by default), their ratio, the extra MACs, the tiling chosen, and the
seconds `lower` takes without and with the search (wall clock: noisy on a
busy machine).

    python bench/tiling.py [--models vgg19,resnet50] [--max-extra-macs 0.1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.api import lower  # noqa: E402
from pyocc.testing.light_models import light_model_path  # noqa: E402

MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
          "squeezenet", "vgg19", "zfnet512")


def main() -> None:
    """Print the table (markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated light model names")
    parser.add_argument("--max-extra-macs", type=float, default=0.10, help="the MAC budget of min")
    args = parser.parse_args()
    print("| model | untiled pool B | tiled pool B (min) | ratio | extra MACs | tiling | lower s | lower s (min) |")
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for name in args.models.split(","):
        path = light_model_path(name)
        start = time.perf_counter()
        _, untiled = lower(path)
        plain = time.perf_counter() - start
        start = time.perf_counter()
        _, tiled = lower(path, memory_limit="min", max_extra_macs=args.max_extra_macs)
        seconds = time.perf_counter() - start
        print(f"| {name} | {untiled.activation_bytes:,} | {tiled.activation_bytes:,} | "
              f"{tiled.activation_bytes / untiled.activation_bytes:.3f} | {tiled.extra_macs:.2%} | "
              f"{tiled.tiling or '-'} | {plain:.1f} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()

"""Recomputation (dnn-recompute) under `--memory-limit min` on the light
models and the U-Net of pyocc.examples.unet_skips: per model the pool as
given, the pool `min` reaches (recomputation, then tiling), the values it
recomputed (none: no candidate spanning the peak lowered the plan), the
element operations they add, the tiling chosen and the seconds `lower`
takes with the search (wall clock: noisy on a busy machine).

    python bench/recompute.py [--models vgg19,resnet50] [--max-extra-macs 0.1] [--no-unet]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.api import lower  # noqa: E402
from pyocc.examples.unet_skips import build as unet_skips  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS as MODELS, light_model_path  # noqa: E402


def main() -> None:
    """Print the table (markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated light model names")
    parser.add_argument("--max-extra-macs", type=float, default=0.10, help="the MAC budget of min")
    parser.add_argument("--no-unet", action="store_true", help="leave out the U-Net example")
    args = parser.parse_args()
    print("| model | pool as given B | pool min B | recomputed | element ops | tiling | lower s (min) |")
    print("|---|---:|---:|---|---:|---|---:|")
    models = [(name, str(light_model_path(name))) for name in args.models.split(",") if name]
    if not args.no_unet:
        models.append(("unet_skips", unet_skips()))
    for name, model in models:
        _, given = lower(model)
        start = time.perf_counter()
        _, report = lower(model, memory_limit="min", max_extra_macs=args.max_extra_macs)
        seconds = time.perf_counter() - start
        print(f"| {name} | {given.activation_bytes:,} | {report.activation_bytes:,} | "
              f"{', '.join(report.recomputed) or '-'} | {report.recompute_ops:,} | {report.tiling or '-'} | "
              f"{seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()

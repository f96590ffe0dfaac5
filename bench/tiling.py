"""Patch-based execution (dnn-tile) on the light models and MobileNetV2-224:
per model the untiled pool, the pool with `--memory-limit min` (at most 10%
more MACs by default), their ratio, the extra MACs, the tiling chosen, the
tiled pool over the best peer of issue 6 (TVM, onnxruntime; pool mode,
activation bytes) and the seconds `lower` takes without and with the search
(wall clock: noisy on a busy machine). Then the geomean over the light
models. The graph input is the caller's and never in the pool; for
MobileNetV2-224 the row after it adds the input image (MCUNetV2 counts it
apart).

    python bench/tiling.py [--models vgg19,resnet50] [--max-extra-macs 0.1] [--no-mobilenet]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.memory import PEERS_MIB  # noqa: E402
from pyocc.api import lower  # noqa: E402
from pyocc.testing.light_models import light_model_path  # noqa: E402
from tests.graphs import mobilenet_v2_224  # noqa: E402

MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
          "squeezenet", "vgg19", "zfnet512")


def main() -> None:
    """Print the table (markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated light model names")
    parser.add_argument("--max-extra-macs", type=float, default=0.10, help="the MAC budget of min")
    parser.add_argument("--no-mobilenet", action="store_true", help="leave out MobileNetV2-224")
    args = parser.parse_args()
    print("| model | untiled pool B | tiled pool B (min) | ratio | extra MACs | tiling | vs best peer | "
          "lower s | lower s (min) |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    ratios: list[float] = []
    peers: list[float] = []
    models = [(name, light_model_path(name)) for name in args.models.split(",")]
    if not args.no_mobilenet:
        models.append(("mobilenet_v2_224", mobilenet_v2_224()))
    for name, model in models:
        start = time.perf_counter()
        _, untiled = lower(model)
        plain = time.perf_counter() - start
        start = time.perf_counter()
        _, tiled = lower(model, memory_limit="min", max_extra_macs=args.max_extra_macs)
        seconds = time.perf_counter() - start
        ratio = tiled.activation_bytes / untiled.activation_bytes
        peer = "-"
        if name in PEERS_MIB:
            ratios.append(ratio)
            peers.append(tiled.activation_bytes / (min(PEERS_MIB[name]) * 2**20))
            peer = f"{peers[-1]:.3f}"
        print(f"| {name} | {untiled.activation_bytes:,} | {tiled.activation_bytes:,} | {ratio:.3f} | "
              f"{tiled.extra_macs:.2%} | {tiled.tiling or '-'} | {peer} | {plain:.1f} | {seconds:.1f} |", flush=True)
        if name == "mobilenet_v2_224":
            image = 3 * 224 * 224 * 4
            print(f"| {name} + input image | {untiled.activation_bytes + image:,} | "
                  f"{tiled.activation_bytes + image:,} | "
                  f"{(tiled.activation_bytes + image) / (untiled.activation_bytes + image):.3f} | | | | | |")
    if ratios:
        print(f"| geomean (light models) | | | {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} | | | "
              f"{math.exp(sum(map(math.log, peers)) / len(peers)):.3f} | | |")


if __name__ == "__main__":
    main()

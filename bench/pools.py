"""Two memory pools on the light models: how much activation traffic the
fast pool serves, pyocc's traffic policy against a simple baseline.

For each light model (ONNX's `light_*.onnx`, planned only, not run) and an
SRAM of `--sram` bytes (default 1 MiB) followed by an unbounded DRAM, one row
with: the single-pool plan's size; for the `traffic` policy (pyocc's default:
highest traffic per byte-step first) and the `first-fit` baseline (program
order, first fit), the SRAM and DRAM sizes and the bytes and fraction of the
activation traffic (bytes read + written in intermediate buffers) that the
SRAM serves. `bound` is an upper bound on that share: the traffic of the
buffers small enough to fit the SRAM at all. The last column checks the goal that with an unbounded fast pool
the pools together cost no more than the single pool plus alignment slack
(64 bytes per buffer at most; it prints the excess in bytes).

    python bench/pools.py                 # every light model, ~1 minute
    python bench/pools.py --sram 512KiB   # another SRAM size
    python bench/pools.py --models squeezenet resnet50
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.api import lower  # noqa: E402
from pyocc.pipelines import Options  # noqa: E402
from pyocc.planning import parse_size  # noqa: E402
from tests.conftest import LIGHT_MODELS, light_model_path  # noqa: E402


def measure(name: str, sram: int) -> dict[str, object]:
    """One table row for light model `name` (see the module docstring)."""
    path = light_model_path(name)
    _, single = lower(path)
    row: dict[str, object] = {"model": name, "single": single.activation_bytes, "buffers": len(single.buffers)}
    for policy in ("traffic", "first-fit"):
        _, report = lower(path, options=Options(memory_pools=f"sram:size={sram},dram", pool_policy=policy))
        fast, slow = report.pools
        row[policy] = (fast.bytes, slow.bytes, report.fast_pool_traffic_bytes, report.fast_pool_traffic_fraction)
        row["traffic_total"] = report.activation_traffic_bytes
        fits = sum(b.traffic for b in report.buffers if b.bytes <= sram)
        row["bound"] = fits / report.activation_traffic_bytes if report.activation_traffic_bytes else 0.0
    _, unbounded = lower(path, memory_pools="sram,dram")
    row["excess"] = unbounded.activation_bytes - single.activation_bytes
    return row


def mib(n: int) -> str:
    """Bytes as MiB with two decimals."""
    return f"{n / 2**20:.2f}"


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sram", default="1MiB", help="size of the fast pool (default 1MiB)")
    parser.add_argument("--models", nargs="*", default=LIGHT_MODELS)
    args = parser.parse_args()
    sram = parse_size(args.sram)
    print(f"SRAM {sram:,d} B + unbounded DRAM; sizes in MiB; traffic = bytes read + written per run")
    header = (f"{'model':14s} {'single':>7s} {'traffic(MiB)':>12s} | {'traffic: sram':>13s} {'dram':>6s} "
              f"{'from sram':>10s} {'share':>6s} | {'first-fit: sram':>15s} {'dram':>6s} {'from sram':>10s} "
              f"{'share':>6s} | {'bound':>6s} | {'unbounded excess B':>18s}")
    print(header)
    print("-" * len(header))
    for name in args.models:
        row = measure(name, sram)
        t = row["traffic"]
        f = row["first-fit"]
        print(f"{name:14s} {mib(row['single']):>7s} {mib(row['traffic_total']):>12s} | "
              f"{mib(t[0]):>13s} {mib(t[1]):>6s} {mib(t[2]):>10s} {t[3]:>6.1%} | "
              f"{mib(f[0]):>15s} {mib(f[1]):>6s} {mib(f[2]):>10s} {f[3]:>6.1%} | {row['bound']:>6.1%} | {row['excess']:>18d}",
              flush=True)


if __name__ == "__main__":
    main()

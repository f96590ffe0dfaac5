"""What two threads on two cores do to each other, measured without a quiet machine.

Builds bench/thread_interference.c (cc, linked against scipy-openblas32's
OpenBLAS as pyocc's models are) and runs its three experiments; every
number is a thread's own CPU time, or the wall time of a call its thread
ran unpreempted, so other jobs' load moves them little (see the C file):

- OpenBLAS with two callers: two pthreads each calling sgemm on their own
  matrices, OpenBLAS on one thread (as a model on threads sets it) and on
  two: GFLOP per CPU second and voluntary context switches per caller
  (a lock inside OpenBLAS would show as switches, spinning as a lower rate);
- together or alone: a call's time on CPU 0 while CPU 1 runs the same
  kernel, against while CPU 1 is idle (fma in registers, an sgemm, a copy);
- a pass over a block the other core wrote last, against one this core
  wrote (a convolution's last pass after another thread's product).

    python bench/thread_interference.py
    python bench/thread_interference.py --rounds 400 --sizes 774400 193600
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.runtime import blas  # noqa: E402

SOURCE = Path(__file__).with_name("thread_interference.c")
#: products of SqueezeNet's sizes: a 3x3 expand at 13x13, a column part of the 55x55 one, a 1x1 squeeze
PRODUCTS = ("256 169 576", "64 1512 144", "128 729 256")


def build(directory: Path) -> Path:
    """The experiment binary, compiled into `directory`."""
    compiler = shutil.which("cc")
    if compiler is None:
        raise SystemExit("thread_interference: no C compiler (cc) on PATH")
    binary = directory / "thread_interference"
    subprocess.run([compiler, "-O3", "-march=native", str(SOURCE), "-o", str(binary), *blas.link_flags(),
                    "-lpthread"], check=True)
    return binary


def run(binary: Path, *args: str) -> list[dict[str, str]]:
    """Run one experiment; its lines as dicts of their key=value fields (plus 'line')."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}  # OpenBLAS starts its own server thread, as in a model
    out = subprocess.run([str(binary), *args], check=True, capture_output=True, text=True, env=env).stdout
    return [{"line": line, **dict(re.findall(r"(\w+)=([\w.]+)", line))} for line in out.splitlines()]


def main() -> None:
    """Run the experiments and print their tables (Markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="sgemm calls per caller (blas)")
    parser.add_argument("--rounds", type=int, default=200, help="passes per handoff measurement")
    parser.add_argument("--sizes", type=int, nargs="*", default=[774_400, 193_600, 3_000_000],
                        help="block bytes for the handoff (SqueezeNet's 64 x 55 x 55 and 64 x 27 x 27 outputs)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs\n")
    with tempfile.TemporaryDirectory() as directory:
        binary = build(Path(directory))
        print("| OpenBLAS threads | callers | product | GFLOP per CPU s, each caller | voluntary switches |")
        print("|---:|---:|---|---|---|")
        for product in PRODUCTS:
            for blas_threads, callers in ((1, 1), (1, 2), (2, 2)):
                rows = run(binary, "blas", str(blas_threads), str(callers), *product.split(), str(args.calls))
                print(f"| {blas_threads} | {callers} | {product.replace(' ', ' x ')} | "
                      f"{', '.join(r['gflop_per_cpu_s'] for r in rows)} | {', '.join(r['voluntary'] for r in rows)} |",
                      flush=True)
        print("\n| kernel | calls alone | median us | calls together | median us | together / alone |")
        print("|---|---:|---:|---:|---:|---:|")
        for kind, sizes in (("fma", []), ("sgemm", PRODUCTS[1].split()), ("copy", ["1024", "1", "1024"])):
            [row] = run(binary, "together", kind, *sizes)
            counts = re.findall(r"n=(\d+) median_us=([\d.]+)", row["line"])
            (alone, alone_us), (both, both_us) = counts
            ratio = f"{float(both_us) / float(alone_us):.2f}" if int(alone) and int(both) else "n/a"
            print(f"| {kind} | {alone} | {alone_us} | {both} | {both_us} | {ratio} |", flush=True)
        print("\n| block bytes | pass after this core wrote it: min / median us | after the other core: min / median us "
              "| median ratio |")
        print("|---:|---|---|---:|")
        for size in args.sizes:
            [own] = run(binary, "handoff", str(size), str(args.rounds), "self")
            [other] = run(binary, "handoff", str(size), str(args.rounds), "cross")
            print(f"| {size:,} | {own['min_us']} / {own['median_us']} | {other['min_us']} / {other['median_us']} | "
                  f"{float(other['median_us']) / float(own['median_us']):.2f} |", flush=True)


if __name__ == "__main__":
    main()

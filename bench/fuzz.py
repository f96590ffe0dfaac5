"""Differential fuzzing for as long as you like: random graphs, every setting.

Each graph (pyocc.testing.random_graphs, seeded) is compiled with every
setting in CONFIGS (memory modes and planners) and compared with onnxruntime.
A mismatch or a crash is shrunk to a minimal graph and saved as
`<out>/seed<N>-<setting>.onnx` with a `.txt` beside it saying what failed,
so it can be replayed with `pyocc run` or turned into a test.

    python bench/fuzz.py --minutes 30            # the long run
    python bench/fuzz.py --graphs 100 --start 5000
    python bench/fuzz.py --target cuda --minutes 10   # target=cuda on the CPU stand-in
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import onnx  # noqa: E402

from pyocc.testing.random_graphs import (  # noqa: E402
    CONFIGS,
    InvalidGraph,
    compare_with_onnxruntime,
    random_graph,
    random_inputs,
    shrink,
)


#: target=cuda settings: the memory modes, each run against a fresh CPU stand-in
CUDA_CONFIGS: list[dict[str, object]] = [{"target": "cuda", "memory": m} for m in ("eager", "lazy", "pool")]


def check(model: onnx.ModelProto, seed: int, options: dict[str, object]) -> str | None:
    """None if pyocc matches onnxruntime, else what went wrong (one line)."""
    try:
        if options.get("target") == "cuda":
            from pyocc.testing.fake_cuda import FakeCuda

            fake = FakeCuda()
            problem = compare_with_onnxruntime(model, random_inputs(model, seed), cuda_libraries=fake, **options)
            return f"{problem} ({'; '.join(fake.errors[:2])})" if problem and fake.errors else problem
        return compare_with_onnxruntime(model, random_inputs(model, seed), **options)
    except InvalidGraph:
        raise
    except Exception as e:  # noqa: BLE001 - a crash is a finding too
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"


def save_reproducer(out: Path, model: onnx.ModelProto, seed: int, options: dict[str, object], problem: str) -> Path:
    """Shrink the failing graph and write it with a note; returns the .onnx path."""

    def still_fails(m: onnx.ModelProto) -> bool:
        try:
            return check(m, seed, options) is not None
        except InvalidGraph:
            return False

    small = shrink(model, still_fails)
    label = "-".join(str(v) for v in options.values())
    path = out / f"seed{seed}-{label}.onnx"
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(small, str(path))
    path.with_suffix(".txt").write_text(
        f"seed {seed}, options {options}\n{problem}\n"
        f"{len(model.graph.node)} nodes shrunk to {len(small.graph.node)}\n"
    )
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the fuzzer; print a summary table; exit 1 if anything failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, help="run for this long (default: until --graphs)")
    parser.add_argument("--graphs", type=int, default=50, help="graphs to try when --minutes is not given")
    parser.add_argument("--start", type=int, default=10_000, help="first seed (CI uses 0..199)")
    parser.add_argument("--out", default="fuzz-failures", help="folder for reproducers")
    parser.add_argument("--target", choices=["host", "cuda"], default="host",
                        help="cuda: the target=cuda code on the CPU stand-in (pyocc.testing.fake_cuda)")
    args = parser.parse_args(argv)
    configs = CUDA_CONFIGS if args.target == "cuda" else CONFIGS

    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    tried = runs = invalid = 0
    failures: dict[str, int] = {}
    seed = args.start
    started = time.monotonic()
    while (deadline is None and tried < args.graphs) or (deadline is not None and time.monotonic() < deadline):
        model = random_graph(seed)
        tried += 1
        for options in configs:
            runs += 1
            try:
                problem = check(model, seed, options)
            except InvalidGraph:
                invalid += 1
                break
            if problem is not None:
                label = " ".join(f"{k}={v}" for k, v in options.items())
                failures[label] = failures.get(label, 0) + 1
                path = save_reproducer(Path(args.out), model, seed, options, problem)
                print(f"seed {seed} [{label}]: {problem}\n  reproducer: {path}", flush=True)
        if tried % 25 == 0:
            print(f"... {tried} graphs, {runs} runs, {sum(failures.values())} failures", flush=True)
        seed += 1

    elapsed = time.monotonic() - started
    print()
    print("| graphs | settings | compiled runs | rejected by onnxruntime | mismatches or crashes | minutes |")
    print("|---|---|---|---|---|---|")
    print(f"| {tried} | {len(configs)} | {runs} | {invalid} | {sum(failures.values())} | {elapsed / 60:.1f} |")
    for label, count in sorted(failures.items()):
        print(f"  {count} x {label}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

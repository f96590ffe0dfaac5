"""Which ONNX ops target=cuda runs, checked on the CPU stand-in.

Runs every node test of onnx's backend suite (single-op models with their
expected outputs) through `pyocc.compile(target="cuda")` bound to
pyocc.testing.fake_cuda, and compares with the expected outputs. Each test
ends as one of: ok, mismatch, unsupported on cuda (the lowering names the op
and stops), not compiled (pyocc's host target refuses it too), or error (a
failed library call, a leak or a crash: a bug). Prints a table per op type
and the problems; exits 1 if any test mismatched or errored.

    python bench/cuda_coverage.py [--match conv] [--memory pool]
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import warnings
from pathlib import Path

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import pyocc  # noqa: E402
from pyocc.errors import PyoccError  # noqa: E402
from pyocc.testing.fake_cuda import FakeCuda  # noqa: E402
from pyocc.testing.onnx_node_cases import node_test_cases  # noqa: E402

#: what the cuda lowering says when it has no lowering for an op or a case
UNSUPPORTED = ("on target=cuda", "neither a cuDNN lowering", "no cuDNN lowering", "cuDNN cannot",
               "no cuBLAS lowering", "float32 tensors only", "cuDNN's", "cuDNN convolution", "has no kernel")
OUTCOMES = ("ok", "mismatch", "error", "unsupported", "not compiled")


def run_case(model: onnx.ModelProto, inputs: list[np.ndarray], expected: list[np.ndarray],
             memory: str) -> tuple[str, str]:
    """(outcome, detail) of one node test."""
    if not all(isinstance(value, np.ndarray) for value in [*inputs, *expected]):
        return "not compiled", "sequence or optional inputs"
    feeds = {i.name: value for i, value in zip(model.graph.input, inputs)}
    try:
        pyocc.compile(model, memory=memory)
    except Exception as e:  # noqa: BLE001 - what the host refuses is out of scope here
        return "not compiled", (str(e).splitlines() or [type(e).__name__])[0][:120]
    fake = FakeCuda()
    try:
        compiled = pyocc.compile(model, target="cuda", memory=memory, cuda_libraries=fake)
    except PyoccError as e:
        message = str(e)
        if any(marker in message for marker in UNSUPPORTED):
            return "unsupported", message.split("cannot lower ", 1)[-1][:120]
        return "error", message[:200]
    try:
        got = list(compiled.run(feeds).values())
    except PyoccError as e:
        return "error", f"{str(e)[:160]} {fake.errors[:1]}"
    finally:
        compiled.native.close()
    for have, want in zip(got, expected):
        want = np.asarray(want)
        if have.shape != want.shape or not np.allclose(have, want, rtol=1e-3, atol=1e-4, equal_nan=True):
            diff = float(np.nanmax(np.abs(have - want))) if have.shape == want.shape else float("nan")
            return "mismatch", f"max |diff| {diff:.3g}, shapes {have.shape} vs {want.shape}"
    if fake.leaks():
        return "error", f"leaks: {fake.leaks()[:1]}"
    return "ok", ""


def main(argv: list[str] | None = None) -> int:
    """Run the node tests; print the table; exit 1 on a mismatch or an error."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--match", default="", help="only tests whose name matches this regex")
    parser.add_argument("--memory", default="pool", choices=["pool", "lazy", "eager"])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # onnx's test generators warn about their own overflows
    outcomes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    problems: list[str] = []
    for case in node_test_cases():
        if (args.match and not re.search(args.match, case.name)) or not case.data_sets:
            continue
        inputs, expected = case.data_sets[0]
        outcome, detail = run_case(case.model, list(inputs), list(expected), args.memory)
        outcomes[case.model.graph.node[0].op_type][outcome] += 1
        if outcome in ("mismatch", "error"):
            problems.append(f"{case.name}: {outcome}: {detail}")
    print("| op | " + " | ".join(OUTCOMES) + " |")
    print("|---|" + "---:|" * len(OUTCOMES))
    total: collections.Counter[str] = collections.Counter()
    for op_type in sorted(outcomes):
        total.update(outcomes[op_type])
        if any(outcomes[op_type][c] for c in OUTCOMES[:4]):
            print(f"| {op_type} | " + " | ".join(str(outcomes[op_type][c] or "") for c in OUTCOMES) + " |")
    print("| **all** | " + " | ".join(str(total[c]) for c in OUTCOMES) + " |")
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

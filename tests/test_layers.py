"""The layering holds: `lint-imports` keeps every contract of pyproject.toml's
`[tool.importlinter]` (layers, no xDSL in planning/runtime, no GPU library in
the compiler, no cycles), and `pyocc-opt` starts without the heavy imports.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_lint_imports_keeps_every_contract() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    assert lint_imports.exists(), "lint-imports is missing: pip install -e '.[test]' (import-linter)"
    run = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    report = run.stdout + run.stderr
    assert run.returncode == 0, f"an import contract is broken (fix the import, not the contract):\n{report}"
    # every contract of pyproject.toml was checked, none was skipped or lost
    counts = re.search(r"Contracts: (\d+) kept, (\d+) broken", report)
    assert counts is not None, report
    assert (int(counts[1]), int(counts[2])) == (len(CONTRACTS), 0), report


HEAVY = ("numpy", "onnx", "onnxruntime", "llvmlite", "cuda")


def test_pyocc_opt_starts_without_heavy_imports() -> None:
    """`pyocc-opt --help` imports neither numpy, onnx, llvmlite nor a CUDA
    library: they load only with the frontend or pass that needs them."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "pyocc.tools.opt", "--help"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "pyocc.registry" in imported  # the check reads real -X importtime lines
    heavy = sorted(name for name in imported if name.split(".")[0] in HEAVY)
    assert not heavy, f"pyocc-opt's start-up imports {heavy}"

"""The layering holds: `lint-imports` keeps every contract of pyproject.toml's
`[tool.importlinter]` (layers, no xDSL in planning/runtime, no GPU library in
the compiler, no cycles), and `pyocc-opt` starts without the heavy imports.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def lint_imports(root: Path) -> tuple[int, str]:
    """Run lint-imports on the package under `root` with `root`/pyproject.toml."""
    command = Path(sys.executable).with_name("lint-imports")
    assert command.exists(), "lint-imports is missing: pip install -e '.[test]' (import-linter)"
    env = {**os.environ, "PYTHONPATH": str(root)}
    run = subprocess.run([str(command), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    return run.returncode, run.stdout + run.stderr


def test_lint_imports_keeps_every_contract() -> None:
    returncode, report = lint_imports(ROOT)
    assert returncode == 0, f"an import contract is broken (fix the import, not the contract):\n{report}"
    # every contract of pyproject.toml was checked, none was skipped or lost
    counts = re.search(r"Contracts: (\d+) kept, (\d+) broken", report)
    assert counts is not None, report
    assert (int(counts[1]), int(counts[2])) == (len(CONTRACTS), 0), report


def test_a_planted_violation_breaks_the_contract(tmp_path: Path) -> None:
    """The check above can fail: a copy of pyocc whose runtime imports the
    lowering and xDSL breaks the layers and the no-xDSL contracts."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(ROOT / "pyocc", tmp_path / "pyocc", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "pyocc" / "runtime" / "jit.py", "a") as f:
        f.write("\nimport xdsl.ir  # noqa\nimport pyocc.lowering.convert_onnx_to_dnn  # noqa\n")
    returncode, report = lint_imports(tmp_path)
    assert returncode != 0, report
    assert "pyocc.runtime is not allowed to import pyocc.lowering" in report, report
    assert "planning and runtime never import xDSL BROKEN" in report, report


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

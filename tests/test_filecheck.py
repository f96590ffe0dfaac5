"""Runs the lit/FileCheck IR tests under filecheck/ as part of pytest, so
that one command (`python -m pytest`) runs every test of the project: one
pytest test per lit file, so that pytest's workers share them out.

The RUN lines run in the worker's process (tests/lit_inprocess.py): the
same commands and FileCheck patterns, without a fresh `pyocc-opt` paying
its imports for each. A few files also run under real `lit`, which is
how `lit -v filecheck/` runs them all, so that lit.cfg and the in-process
runner are both kept honest."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.lit_inprocess import run_lit_file

ROOT = Path(__file__).resolve().parent.parent
FILECHECK = ROOT / "filecheck"
LIT_FILES = sorted(
    path for suffix in ("*.mlir", "*.py", "*.test") for path in FILECHECK.rglob(suffix)
    if "Inputs" not in path.parts and "Output" not in path.parts and path.name not in ("lit.cfg", "lit.local.cfg")
)

REAL_LIT_FILES = [
    FILECHECK / "dialects" / "onnx" / "roundtrip.mlir",  # pyocc-opt piped into pyocc-opt and filecheck
    FILECHECK / "lowering" / "dnn_to_llvm_pools.mlir",  # `not`, `2>%t.err` and `filecheck < %t.err`
    FILECHECK / "frontend" / "import_small_graph.py",  # a .py test, %python, %t and `&&`
]
"""Files run under real lit too, cheap ones (1-3 s of CPU each) that use
lit.cfg's suffixes and substitutions and the common shell forms."""


def test_the_lit_files_are_found() -> None:
    """The parametrisation below is not empty (a moved folder would skip every IR test)."""
    assert len(LIT_FILES) >= 20
    assert set(REAL_LIT_FILES) <= set(LIT_FILES)


@pytest.mark.parametrize("path", LIT_FILES, ids=lambda p: str(p.relative_to(FILECHECK)))
def test_filecheck(path: Path, tmp_path: Path) -> None:
    passed, log = run_lit_file(path, tmp_path)
    assert passed, log


@pytest.mark.parametrize("path", REAL_LIT_FILES, ids=lambda p: str(p.relative_to(FILECHECK)))
def test_filecheck_under_lit(path: Path) -> None:
    """lit itself finds, runs and passes the file (not UNSUPPORTED, not excluded)."""
    lit = Path(sys.executable).with_name("lit")
    result = subprocess.run([str(lit), "-q", "-j1", "--no-progress-bar", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Total Discovered Tests: 1" in result.stdout + result.stderr, "lit did not find the test (UNSUPPORTED or excluded?)"

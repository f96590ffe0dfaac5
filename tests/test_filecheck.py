"""Runs the lit/FileCheck IR tests under filecheck/ as part of pytest, so
that one command (`python -m pytest`) runs every test of the project: one
pytest test per lit file, so that pytest's workers share them out."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILECHECK = ROOT / "filecheck"
LIT_FILES = sorted(
    path for suffix in ("*.mlir", "*.py", "*.test") for path in FILECHECK.rglob(suffix)
    if "Inputs" not in path.parts and "Output" not in path.parts and path.name not in ("lit.cfg", "lit.local.cfg")
)


def test_the_lit_files_are_found() -> None:
    """The parametrisation below is not empty (a moved folder would skip every IR test)."""
    assert len(LIT_FILES) >= 20


@pytest.mark.parametrize("path", LIT_FILES, ids=lambda p: str(p.relative_to(FILECHECK)))
def test_filecheck(path: Path) -> None:
    lit = Path(sys.executable).with_name("lit")
    result = subprocess.run([str(lit), "-q", "-j1", "--no-progress-bar", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Total Discovered Tests: 1" in result.stdout + result.stderr, "lit did not find the test (UNSUPPORTED or excluded?)"

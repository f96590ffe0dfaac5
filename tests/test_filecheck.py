"""Runs the lit/FileCheck IR tests under filecheck/ as part of pytest, so
that one command (`python -m pytest`) runs every test of the project."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_filecheck_suite() -> None:
    lit = Path(sys.executable).with_name("lit")
    result = subprocess.run(
        [str(lit), "-q", "--no-progress-bar", str(ROOT / "filecheck")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr

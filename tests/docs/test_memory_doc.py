"""Every command in docs/memory.md runs and prints what the page shows (the
report, the picture's numbers, --explain), so the page describes the
picture its commands draw. Same rules as the tutorial's chapters
(tests/docs/test_tutorial.py): ```console blocks, `$ ` commands, shown
lines matched in order, `...` for any text."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.docs.test_tutorial import check_output, parse_chapter, run_command

PAGE = Path(__file__).resolve().parents[2] / "docs" / "memory.md"


def test_memory_page_has_commands() -> None:
    """The runner below is not vacuous: the page has console blocks."""
    steps = parse_chapter(PAGE.read_text())
    assert len(steps) >= 6 and any("--explain" in s.command for s in steps)


def test_memory_page_commands(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    for step in parse_chapter(PAGE.read_text()):
        status, output = run_command(step.command, tmp_path, env)
        assert status == step.exit_code, f"`{step.command}` exited {status}:\n{output[-3000:]}"
        missing = check_output(step.shown, output)
        assert missing is None, f"`{step.command}` did not print\n  {missing}\n--- it printed:\n{output[-6000:]}"

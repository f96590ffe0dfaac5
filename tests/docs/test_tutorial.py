"""Every command in docs/tutorial runs, and prints what the chapter shows.

A chapter's ```console blocks are its script: a line starting with `$ ` is a
command (run with bash in a fresh directory per chapter, in order); the lines
after it, up to the next command, are what it prints, trimmed the way a
reader expects:

  * each shown line must appear in the output, in order (like FileCheck's
    CHECK), with runs of spaces compared as one space;
  * `...` inside a line stands for any text (a number that changes, a tail
    that was cut);
  * a line that is only `...` stands for lines left out (allowed anywhere,
    so it only helps the reader).

A command that fails fails the test unless the chapter shows `[exit N]` as
the first line after it, in which case it must exit with N.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial"
CHAPTERS = sorted(TUTORIAL.glob("[0-9][0-9]-*.md"))


@dataclass
class Step:
    """One `$ command` of a chapter and the output it shows."""

    command: str
    shown: list[str] = field(default_factory=list)
    exit_code: int = 0


def parse_chapter(text: str) -> list[Step]:
    """The commands of a chapter's ```console blocks, in order."""
    steps: list[Step] = []
    in_console = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_console = line.strip() == "```console" and not in_console
            continue
        if not in_console:
            continue
        if line.startswith("$ "):
            steps.append(Step(line[2:].strip()))
        elif steps and (m := re.fullmatch(r"\[exit (\d+)\]", line.strip())) and not steps[-1].shown:
            steps[-1].exit_code = int(m.group(1))
        elif steps and line.strip():
            steps[-1].shown.append(line)
    return steps


def _pattern(shown: str) -> re.Pattern[str]:
    """A shown line as a regex: `...` is any text, runs of spaces are one."""
    parts = [re.escape(" ".join(p.split())) for p in shown.split("...")]
    return re.compile(".*".join(parts))


def check_output(shown: list[str], output: str) -> str | None:
    """None if every shown line appears in order in `output`, else the first
    line that does not."""
    lines = [" ".join(line.split()) for line in output.splitlines()]
    at = 0
    for want in shown:
        if want.strip() == "...":
            continue
        pattern = _pattern(want.strip())
        while at < len(lines) and not pattern.search(lines[at]):
            at += 1
        if at == len(lines):
            return want
        at += 1
    return None


def test_tutorial_has_chapters() -> None:
    """The runner below is not vacuous: the chapters are there."""
    assert len(CHAPTERS) >= 4
    assert all(parse_chapter(c.read_text()) for c in CHAPTERS)


def test_runner_catches_a_wrong_line() -> None:
    """The matcher rejects output that differs from what is shown."""
    assert check_output(["a ... c", "d"], "a b c\nd\n") is None
    assert check_output(["d", "a ... c"], "a b c\nd\n") == "a ... c"
    assert check_output(["x"], "a\n") == "x"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_commands(chapter: Path, tmp_path: Path) -> None:
    """Run the chapter's commands in order and check what each prints."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "100"
    for step in parse_chapter(chapter.read_text()):
        done = subprocess.run(["bash", "-c", step.command], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        output = done.stdout + done.stderr
        assert done.returncode == step.exit_code, f"{chapter.name}: `{step.command}` exited {done.returncode}:\n{output[-3000:]}"
        missing = check_output(step.shown, output)
        assert missing is None, f"{chapter.name}: `{step.command}` did not print\n  {missing}\n--- it printed:\n{output[-6000:]}"

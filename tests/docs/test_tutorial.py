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

A plain `pyocc ...`, `pyocc-opt ...`, `python -m MODULE ...` or
`python -c CODE` command (no pipe, redirection, variable, glob or brace
for bash to expand), or one piped once into a program such as grep (which
then runs as a process on its output), runs in this process: the same
`main` its console script calls (or the code `python` would run as
`__main__`), with the same argv, cwd and COLUMNS, its stdout and stderr
captured and its exit status returned.
Each fresh interpreter spent about 1.9 s of CPU importing onnx (ml_dtypes),
xDSL and numpy before it began, 190 s of CPU over the tutorial and
docs/memory.md. Every other command runs in bash; tests/tools/ runs the
installed commands themselves (a few real processes per tool).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.tools.inprocess import MAINS, call_captured, run_python

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


def _in_process(argv: list[str]) -> Callable[[], int | None] | None:
    """What a command's console script or `python -m` would call, or None
    for a command this process does not run."""
    if argv[0] in MAINS:
        return lambda: MAINS[argv[0]](argv[1:])
    if argv[0] == "python" and len(argv) >= 3 and argv[1] in ("-m", "-c"):
        return lambda: run_python(argv[1:])
    return None


def run_command(command: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run one `$ ` command in `cwd`: (exit status, stdout then stderr).
    A plain pyocc/pyocc-opt/`python -m` command runs in this process (see
    the module docstring), and so does the first half of `COMMAND | PROGRAM`
    (one pipe, nothing else for bash to expand), whose stdout then goes to
    PROGRAM (grep) as a process; anything else runs in bash."""
    unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", command)
    if not re.search(SHELL_SYNTAX, unquoted):
        call = _in_process(shlex.split(command))
        if call is not None:
            status, out, err = _run_in_process(call, cwd, env)
            return status, out + err
    elif unquoted.count("|") == 1 and not re.search(SHELL_SYNTAX, unquoted.replace("|", " ")):
        lexer = shlex.shlex(command, posix=True, punctuation_chars="|")
        lexer.whitespace_split = True
        words = list(lexer)
        at = words.index("|")
        call = _in_process(words[:at])
        if call is not None:
            status, out, err = _run_in_process(call, cwd, env)
            # bash without pipefail: the pipeline's status is its last command's
            done = subprocess.run(words[at + 1:], input=out, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=600)
            return done.returncode, done.stdout + err + done.stderr
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


SHELL_SYNTAX = r"[|&;<>$`\\*?~{}\[\]()]"
"""Characters outside quotes that make a command bash's to run."""


def _run_in_process(call: Callable[[], int | None], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """`call()` in `cwd` with env's COLUMNS, as call_captured gives it: (status, stdout, stderr)."""
    saved_columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = env.get("COLUMNS", "80")
    try:
        with contextlib.chdir(cwd):
            status, out, err = call_captured(call)
    finally:
        if saved_columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved_columns
    return status, out, err


def test_run_command_in_process_and_in_bash(tmp_path: Path) -> None:
    """In process and in bash alike: the exit status, stdout then stderr."""
    env = dict(os.environ)
    assert run_command("pyocc plan missing.onnx", tmp_path, env)[0] != 0
    status, output = run_command("pyocc --version", tmp_path, env)
    assert status == 0 and output.startswith("pyocc ")
    assert run_command("pyocc --version | grep -c pyocc", tmp_path, env) == (0, "1\n")
    # a pipe whose first half runs in this process: bash's status (the last command's) and output
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    command = "python -c 'import sys; print(sys.argv, __name__)' a b"
    in_bash = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run_command(command, tmp_path, env) == (0, in_bash.stdout) == (0, "['-c', 'a', 'b'] __main__\n")
    command = "pyocc plan missing.onnx | grep -c 'not here'"
    in_bash = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert in_bash.returncode == 1 and "missing.onnx" in in_bash.stderr
    assert run_command(command, tmp_path, env) == (in_bash.returncode, in_bash.stdout + in_bash.stderr)
    assert run_command("python -m pyocc.examples.tiny_cnn tiny.onnx", tmp_path, env)[0] == 0
    assert (tmp_path / "tiny.onnx").exists()


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
        status, output = run_command(step.command, tmp_path, env)
        assert status == step.exit_code, f"{chapter.name}: `{step.command}` exited {status}:\n{output[-3000:]}"
        missing = check_output(step.shown, output)
        assert missing is None, f"{chapter.name}: `{step.command}` did not print\n  {missing}\n--- it printed:\n{output[-6000:]}"

"""Run a lit file's RUN lines inside the pytest process: `pyocc-opt`,
`pyocc`, `filecheck`, `diff` and `%python` scripts are called in-process,
anything else as a subprocess, as lit's internal shell would.

A fresh `pyocc-opt` costs 0.6-1 s of CPU to import xDSL, the dialects and
the passes it runs before it reads a byte, a script 1 s to import onnx,
numpy and llvmlite; the ~130 tool calls of the FileCheck tests paid that
once each. Here a pytest worker pays it once.
What a RUN line checks is unchanged: the same command line, parsed by
lit's own shell parser, the same FileCheck patterns checked by the same
`filecheck`, the same exit statuses (`not`, pipefail). Each in-process
call gets what a fresh process has (tests/tools/inprocess.call_captured):
empty stdin unless piped, its own stdout and stderr (one stream for
`2>&1`), an empty weights store, xDSL's process-wide switches
(`--disable-verify`) put back afterwards, and the test's folder as its
working folder, as lit gives.

`lit -v filecheck/` still runs every file the usual way, and
tests/test_filecheck.py runs real lit on a few files to keep lit.cfg honest.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from filecheck.main import main as filecheck_main
from lit.ShCommands import Command, Pipeline, Seq
from lit.ShUtil import ShParser
from tests.tools.inprocess import MAINS, call_captured, run_python

FILECHECK_ROOT = Path(__file__).resolve().parent.parent / "filecheck"
INPUTS = FILECHECK_ROOT / "Inputs"

RUN_LINE = re.compile(r"\bRUN:(.*)$")
UNSUPPORTED_KEYWORDS = re.compile(r"\b(REQUIRES|UNSUPPORTED|XFAIL|ALLOW_RETRIES|DEFINE|REDEFINE):|\bEND\.")
SUBSTITUTION = re.compile(r"%(python|inputs|%|s|S|t)")
LEFT_SUBSTITUTION = re.compile(r"%[A-Za-z{]")


class LitFileError(Exception):
    """A lit file this runner cannot run as lit would (a keyword or a
    substitution it does not know): fix the runner, do not skip the file."""


def run_lines(path: Path) -> list[tuple[int, str]]:
    """The RUN lines of `path` as (line number, command), continuation
    lines (ending in a backslash) joined, as lit reads them."""
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if UNSUPPORTED_KEYWORDS.search(text):
            raise LitFileError(f"{path}:{number}: lit keyword not supported by the in-process runner: {text.strip()}")
        match = RUN_LINE.search(text)
        if match is None:
            if pending is not None:
                raise LitFileError(f"{path}:{pending[0]}: RUN line continued with '\\' but not followed by one")
            continue
        command = match.group(1).strip()
        start, before = pending if pending is not None else (number, "")
        if command.endswith("\\"):
            pending = (start, before + command[:-1] + " ")
            continue
        pending = None
        lines.append((start, before + command))
    if pending is not None:
        raise LitFileError(f"{path}:{pending[0]}: last RUN line ends with '\\'")
    return lines


def substitute(command: str, path: Path, tmp_base: Path) -> str:
    """`command` with lit.cfg's and lit's substitutions applied: %python,
    %inputs, %s (the file), %S (its folder), %t (a temporary path base), %% (a percent sign)."""
    values = {"python": sys.executable, "inputs": str(INPUTS), "s": str(path), "S": str(path.parent), "t": str(tmp_base), "%": "%"}
    result = SUBSTITUTION.sub(lambda m: values[m.group(1)], command)
    left = LEFT_SUBSTITUTION.search(SUBSTITUTION.sub("", command))
    if left is not None:
        raise LitFileError(f"{path}: substitution {left.group(0)}... not known to the in-process runner: {command}")
    return result


@dataclass
class _Result:
    """What one command gave back."""

    status: int
    stdout: bytes
    stderr: bytes


@dataclass
class _Shell:
    """lit's internal shell, for the pipelines and sequences lit's parser
    gives: `a | b` (pipefail), `a && b`, `a || b`, `a ; b`, `not a`,
    redirections `<`, `>`, `>>`, `2>`, `2>&1`, `&>`."""

    cwd: Path
    log: list[str] = field(default_factory=list)

    def run(self, node: Seq | Pipeline) -> int:
        """Run `node`; its exit status."""
        if isinstance(node, Seq):
            status = self.run(node.lhs)
            if node.op == ";" or (node.op == "&&" and status == 0) or (node.op == "||" and status != 0):
                return self.run(node.rhs)
            if node.op in ("&&", "||"):
                return status
            raise LitFileError(f"shell operator '{node.op}' not supported")
        return self._pipeline(node)

    def _pipeline(self, pipeline: Pipeline) -> int:
        piped = b""
        statuses = []
        for position, command in enumerate(pipeline.commands):
            last = position == len(pipeline.commands) - 1
            args, negations = _strip_not(command)
            stdin, stdout_to, stderr_to = self._redirects(command, piped)
            merged = stderr_to == "stdout"
            result = _call(args, stdin, merged, self.cwd)
            status = result.status
            for _ in range(negations):
                status = 0 if status != 0 else 1
            statuses.append(status)
            self.log.append(f"$ {' '.join(command.args)}\n# exit {result.status}"
                            + (f" (not: {status})" if negations else ""))
            piped = b""
            if stdout_to is None:
                if last:
                    self._log_stream("stdout", result.stdout)
                else:
                    piped = result.stdout
            else:
                stdout_to[0].parent.mkdir(parents=True, exist_ok=True)
                with open(stdout_to[0], "ab" if stdout_to[1] else "wb") as f:
                    f.write(result.stdout)
            if isinstance(stderr_to, tuple):
                stderr_to[0].parent.mkdir(parents=True, exist_ok=True)
                with open(stderr_to[0], "ab" if stderr_to[1] else "wb") as f:
                    f.write(result.stderr)
            elif not merged:
                self._log_stream("stderr", result.stderr)
        # lit sets pipefail: the pipeline fails when any command in it fails
        status = next((s for s in reversed(statuses) if s != 0), 0)
        if pipeline.negate:
            status = 0 if status != 0 else 1
        return status

    def _redirects(self, command: Command, piped: bytes) -> tuple[bytes, tuple[Path, bool] | None,
                                                                   tuple[Path, bool] | str | None]:
        """(stdin bytes, stdout file and whether to append, stderr file or
        'stdout' for 2>&1) of `command`'s redirections."""
        stdin = piped
        stdout_to: tuple[Path, bool] | None = None
        stderr_to: tuple[Path, bool] | str | None = None
        for op, target in command.redirects:
            path = self.cwd / target
            if op == ("<",):
                stdin = path.read_bytes()
            elif op in ((">",), (">>",), (">", 1), (">>", 1)):
                stdout_to = (path, op[0] == ">>")
            elif op in ((">", 2), (">>", 2)):
                stderr_to = (path, op[0] == ">>")
            elif op == (">&", 2) and target == "1":
                stderr_to = "stdout"
            elif op == ("&>",):
                stdout_to, stderr_to = (path, False), "stdout"
            else:
                raise LitFileError(f"redirection {op} {target} not supported by the in-process runner")
        return stdin, stdout_to, stderr_to

    def _log_stream(self, name: str, data: bytes) -> None:
        if data:
            text = data.decode(errors="replace")
            if len(text) > 20_000:
                text = text[:10_000] + "\n[...]\n" + text[-10_000:]
            self.log.append(f"# {name}:\n{text}")


def _strip_not(command: Command) -> tuple[list[str], int]:
    """`command`'s arguments without leading `not`s, and how many there were."""
    args = list(command.args)
    negations = 0
    while args and args[0] in ("not", "!"):
        args.pop(0)
        negations += 1
        if args and args[0] == "--crash":
            raise LitFileError("'not --crash' not supported by the in-process runner")
    if not args:
        raise LitFileError(f"empty command in {command}")
    return args, negations


def _diff(args: list[str]) -> int:
    """lit's `diff FILE1 FILE2`: 0 when equal, else a unified diff and 1."""
    if len(args) != 2:
        raise LitFileError(f"diff takes two files here, got {args}")
    a, b = (Path(p).read_text().splitlines(keepends=True) for p in args)
    if a == b:
        return 0
    sys.stdout.writelines(difflib.unified_diff(a, b, args[0], args[1]))
    return 1


def _in_process(args: list[str]) -> Callable[[list[str]], int | None] | None:
    """The main function to call for the command `args`, or None to start it as a process."""
    if args[0] == sys.executable:
        return run_python if len(args) >= 2 and (args[1] == "-m" or not args[1].startswith("-")) else None
    base = Path(args[0]).name
    if base in MAINS:
        return MAINS[base]
    if base == "filecheck":
        return lambda rest: filecheck_main(["filecheck", *rest])
    if base == "diff":
        return _diff
    return None


def _call(args: list[str], stdin: bytes, merged: bool, cwd: Path) -> _Result:
    """Run one command: in this process when _in_process knows it, else as a subprocess."""
    main = _in_process(args)
    if main is None:
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        done = subprocess.run(args, input=stdin, cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if merged else subprocess.PIPE, check=False)
        return _Result(done.returncode, done.stdout, done.stderr or b"")

    def as_a_process() -> int | None:
        try:
            return main(args[1:])
        except Exception:  # what an uncaught exception does to a process: a traceback and exit 1
            traceback.print_exc()
            return 1

    with contextlib.chdir(cwd):
        status, out, err = call_captured(as_a_process, stdin.decode(), merge_stderr=merged)
    return _Result(status, out.encode(), err.encode())


def run_lit_file(path: Path, tmp_dir: Path) -> tuple[bool, str]:
    """Run every RUN line of `path` (temporary files under `tmp_dir`),
    stopping at the first that fails, as lit does: (passed, the log)."""
    shell = _Shell(cwd=path.parent)
    tmp_base = tmp_dir / "Output" / f"{path.name}.tmp"
    tmp_base.parent.mkdir(parents=True, exist_ok=True)
    local_configs = [folder / "lit.local.cfg" for folder in path.parents
                     if folder.is_relative_to(FILECHECK_ROOT) and (folder / "lit.local.cfg").exists()]
    if local_configs:
        raise LitFileError(f"{path}: the in-process runner does not read {local_configs[0]} "
                           "(teach tests/lit_inprocess.py what it sets)")
    lines = run_lines(path)
    if not lines:
        raise LitFileError(f"{path}: no RUN line")
    for number, command in lines:
        text = substitute(command, path, tmp_base)
        shell.log.append(f"RUN: at line {number}: {text}")
        status = shell.run(ShParser(text, pipefail=True).parse())
        if status != 0:
            shell.log.append(f"error: RUN line {number} exited with status {status}")
            return False, "\n".join(shell.log)
    return True, "\n".join(shell.log)

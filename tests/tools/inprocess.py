"""Run `pyocc` or `pyocc-opt` in this process, as its console script would
run it, and give back what a subprocess would: the exit status, stdout and
stderr. A fresh process costs 1.5-3 s of CPU to import xDSL, onnx and
llvmlite before it does anything; the tests of messages and exit statuses
call main() here instead, and a few tests per tool keep running the real
processes (tests/tools/test_cli.py, tests/tools/test_bad_input.py).

An exception that escapes main() is not caught: it fails the test, as the
traceback it would print fails the "one line" assertions."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pyocc.tools.cli import main as pyocc_main
from pyocc.tools.opt import main as opt_main
from pyocc.weights import isolated_store

MAINS = {"pyocc": pyocc_main, "pyocc-opt": opt_main}


def call_captured(call: Callable[[], int | None]) -> tuple[int, str, str]:
    """`call()` with stdout and stderr captured, SystemExit turned into the
    exit status, and an empty weights store as a fresh process has:
    (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), isolated_store():
        try:
            status = call()
        except SystemExit as e:
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
                status = 1
            else:
                status = e.code
    return status or 0, out.getvalue(), err.getvalue()


def run_tool(tool: str, *args: str) -> subprocess.CompletedProcess:
    """`tool ARGS` (tool: pyocc or pyocc-opt, or a path ending in one) run
    in this process (call_captured), given back as a subprocess's result."""
    main = MAINS[Path(tool).name]
    status, out, err = call_captured(lambda: main(list(args)))
    return subprocess.CompletedProcess([tool, *args], status, out, err)

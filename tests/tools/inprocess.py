"""Run `pyocc` or `pyocc-opt` in this process, as its console script would
run it, and give back what a subprocess would: the exit status, stdout and
stderr. A fresh process costs 1.5-3 s of CPU to import xDSL, onnx and
llvmlite before it does anything; the tests of messages and exit statuses
call main() here instead, and a few tests per tool keep running the real
processes (tests/tools/test_cli.py, tests/tools/test_bad_input.py).

An exception that escapes main() is not caught: it fails the test, as the
traceback it would print fails the "one line" assertions."""

from __future__ import annotations

import builtins
import contextlib
import io
import runpy
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from xdsl.ir import Attribute
from xdsl.utils.diagnostic import Diagnostic

from pyocc.tools.cli import main as pyocc_main
from pyocc.tools.opt import main as opt_main
from pyocc.weights import isolated_store

MAINS = {"pyocc": pyocc_main, "pyocc-opt": opt_main}


def call_captured(call: Callable[[], int | None], stdin: str = "", merge_stderr: bool = False) -> tuple[int, str, str]:
    """`call()` as a fresh process would run it: `stdin` on standard input
    (empty by default), stdout and stderr captured, SystemExit turned into
    the exit status, an empty weights store, and xDSL's process-wide
    switches put back afterwards: (status, stdout, stderr). With
    `merge_stderr` stderr goes into stdout, as `2>&1` sends it, and the
    third item is empty."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    # text streams over bytes, as a process has: some writers use .buffer
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    err = out if merge_stderr else io.TextIOWrapper(err_bytes, encoding="utf-8", write_through=True)
    with _fresh_process(stdin, out, err):
        try:
            status = call()
        except SystemExit as e:
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
                status = 1
            else:
                status = e.code
    return status or 0, out_bytes.getvalue().decode(), err_bytes.getvalue().decode()


@contextlib.contextmanager
def _fresh_process(stdin: str, out: io.TextIOWrapper, err: io.TextIOWrapper) -> Iterator[None]:
    """Standard streams, an empty weights store, and xDSL's process-wide
    switches as a fresh process has them, put back afterwards."""
    post_init, colored = Attribute.__post_init__, Diagnostic.colored
    real_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), isolated_store():
            yield
    finally:
        sys.stdin = real_stdin
        # xdsl-opt's --disable-verify and --syntax-highlight change these for the whole process
        Attribute.__post_init__ = post_init  # type: ignore[method-assign]
        Diagnostic.colored = colored


def run_python(args: list[str]) -> int:
    """`python SCRIPT ARGS`, `python -m MODULE ARGS` or `python -c CODE ARGS`
    (the arguments after `python`), run as `__main__` in this process, with the arguments a process would
    see in sys.argv and the script's folder first on sys.path."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    try:
        if len(args) >= 2 and args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            with warnings.catch_warnings():
                # runpy warns when an earlier test imported the module: its code runs afresh as
                # __main__ all the same, with globals of its own, as in a new process
                warnings.filterwarnings("ignore", "'.*' found in sys.modules after import of package",
                                        RuntimeWarning)
                runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        elif len(args) >= 2 and args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            sys.path.insert(0, "")  # as `python -c` has: the working folder first
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": builtins})
        elif args and not args[0].startswith("-"):
            sys.argv = list(args)
            sys.path.insert(0, str(Path(args[0]).resolve().parent))
            runpy.run_path(args[0], run_name="__main__")
        else:
            raise ValueError(f"python {' '.join(args)}: only 'python SCRIPT', '-m MODULE' and '-c CODE' run in-process")
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
    return 0


def run_tool(tool: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """`tool ARGS` (tool: pyocc or pyocc-opt, or a path ending in one) run
    in this process (call_captured) with `stdin` as its input, given back
    as a subprocess's result."""
    main = MAINS[Path(tool).name]
    status, out, err = call_captured(lambda: main(list(args)), stdin)
    return subprocess.CompletedProcess([tool, *args], status, out, err)

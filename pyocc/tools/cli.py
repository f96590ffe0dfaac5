"""`pyocc`: compile, run and plan ONNX models.

    pyocc run MODEL.onnx [--inputs in.npz] [--save-outputs out.npz] [--memory pool|lazy|eager] [--no-fuse] [--no-coalesce]
    pyocc compile MODEL.onnx -o model.so|model.o|model.ll [--memory ...]
    pyocc plan MODEL.onnx [--memory ...] [--planner NAME] [--format text|json|svg|html] [--explain] [-o FILE]
    pyocc plan-json problem.json [--algorithm NAME] [-o solution.json]
    (run, compile and plan take --memory-pools "sram:size=1MiB,dram" [--pool-candidates "concat=dram"])

User mistakes are one line on stderr and a non-zero exit; nothing is written
half-way.

This module is the command line only (options, --version, --help, argument
errors) and stays light: it does not import xDSL, onnx or llvmlite. The
commands themselves live in pyocc.tools.commands, which main() imports only
once a subcommand is to run: that import (onnx, xDSL, llvmlite, the kernels)
costs about a second and a half of CPU, which `pyocc --version`, `--help`
and a mistyped option should not pay.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from pyocc import __version__, progress
from pyocc.errors import PyoccError
from pyocc.lowering.limits import CONV_SEARCHES, CUDA_CONV_SEARCH, CUDA_WORKSPACE, MAX_THREADS
from pyocc.planning import ALGORITHMS, PlanningError
from pyocc.planning.cli import main as plan_json_main
from pyocc.planning.pools import parse_size
from pyocc.tools.output import PLAN_FORMATS


class _Parser(argparse.ArgumentParser):
    """argparse, but a wrong option is one line (plus where to read more),
    like every other user error of pyocc."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _size(text: str) -> int:
    """A byte count like 8MiB, 512KiB or 1000 (argparse type)."""
    try:
        return parse_size(text)
    except PlanningError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _limit(text: str) -> int | str:
    """--memory-limit: a byte count, or min (argparse type)."""
    return "min" if text == "min" else _size(text)


def _ratio(text: str) -> float:
    """--max-extra-macs: a non-negative ratio like 0.1 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be a non-negative ratio, e.g. 0.1 for 10% more MACs")
    return value


def _threads(text: str) -> int:
    """--threads: a whole number of threads from 1 to MAX_THREADS (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"'{text}' must be a whole number of threads from 1 to {MAX_THREADS}")
    return value


RUN_EXAMPLES = """examples:
  pyocc run model.onnx                                   random inputs, pool mode, prints the memory report
  pyocc run model.onnx --inputs in.npz --save-outputs out.npz   in.npz: np.savez('in.npz', x=...)
  pyocc run model.onnx --memory lazy --planner exact --no-fuse"""



def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="the .onnx file")
    p.add_argument("--memory", choices=["pool", "lazy", "eager"], default="pool",
                   help="memory mode (default: pool)")
    p.add_argument("--planner", default="auto", metavar="NAME",
                   help=f"pool planner: auto (default: the best of several), {', '.join(sorted(ALGORITHMS))}")
    p.add_argument("--reorder", default="auto", metavar="STRATEGY",
                   help="op order: auto (default), exact, greedy, or given (keep the model's)")
    p.add_argument("--memory-pools", default=None, metavar="SPEC",
                   help="named pools tried in order, e.g. 'sram:size=1MiB,dram' (pool mode; "
                        "options size=, align=, targets=, ro)")
    p.add_argument("--pool-candidates", default=None, metavar="KIND=POOL[+POOL],...",
                   help="with --memory-pools: pools for the buffers each kind of op writes, e.g. 'concat=dram'")
    p.add_argument("--target", choices=["host", "cuda"], default="host",
                   help="where the code runs: host (default, the CPU) or cuda (an NVIDIA GPU through "
                        "the CUDA runtime, cuDNN and cuBLAS; needs pyocc[cuda])")
    p.add_argument("--workspace", type=_size, default=CUDA_WORKSPACE, metavar="SIZE",
                   help="target cuda: the cuDNN workspace a convolution may use, planned in the pool "
                        f"(default {CUDA_WORKSPACE >> 20}MiB)")
    p.add_argument("--pool-allocation", choices=["init", "run"], default=None,
                   help="target cuda, pool mode: allocate the planned pool once when the model is loaded "
                        "(init, the default) or once per run (run, Occamy's way)")
    p.add_argument("--memory-limit", type=_limit, default=None, metavar="SIZE",
                   help="fit the activation memory in SIZE (e.g. 8MiB), running the stem patch by patch "
                        "if needed, or fail; min: the smallest within --max-extra-macs")
    p.add_argument("--max-extra-macs", type=_ratio, default=0.10, metavar="RATIO",
                   help="with --memory-limit min: the extra MACs patch-based execution may add (default 0.10)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=1x3x224x224",
                   help="fix a graph input's shape (repeatable)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=MAX",
                   help="plan a symbolic dimension (ONNX dim_param) for every value 1..MAX (repeatable)")
    p.add_argument("--no-fuse", dest="fuse", action="store_false",
                   help="turn layer fusion (dnn-fuse) off, to measure its effect")
    p.add_argument("--no-coalesce", dest="coalesce", action="store_false",
                   help="turn tensor coalescing (dnn-coalesce) off")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `pyocc` (one subcommand per job)."""
    parser = _Parser(prog="pyocc", description="A memory-efficient DNN inference compiler.")
    parser.add_argument("--version", action="version", version=f"pyocc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="compile and run a model on random or given inputs",
                         formatter_class=argparse.RawDescriptionHelpFormatter, epilog=RUN_EXAMPLES)
    _common(run)
    run.add_argument("--inputs", help=".npz with one array per graph input name")
    run.add_argument("--save-outputs", help="write outputs to this .npz")
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run.add_argument("--sanitize", action="store_true",
                     help="poison dead buffers with NaN and stop on out-of-bounds writes (slow; for testing)")
    comp = sub.add_parser("compile", help="compile a model to .so, .o or .ll")
    _common(comp)
    for command in (run, comp):
        command.add_argument("--kernels", choices=["native", "numpy"], default="native",
                             help="target host: native (default) compiles a kernel for every op that has one "
                                  "and calls numpy for the rest; numpy calls the numpy kernels for every op")
        command.add_argument("--threads", type=_threads, default=1, metavar="N",
                             help="target host: run the model on N threads, its BLAS calls and the outer loops "
                                  "of its native kernels (default 1; results do not depend on N)")
        command.add_argument("--conv-search", choices=CONV_SEARCHES, default=CUDA_CONV_SEARCH,
                             help="target cuda: how init chooses each convolution's algorithm among those whose "
                                  "workspace fits: ranked (cuDNN's heuristics) or timed (cuDNN runs each once and "
                                  f"the fastest is kept; a slower init); default {CUDA_CONV_SEARCH}")
    comp.add_argument("-o", "--output", required=True, help="output file (.so, .o or .ll)")
    plan = sub.add_parser("plan", help="print the memory plan of a model")
    _common(plan)
    plan.add_argument("--format", choices=list(PLAN_FORMATS), default=None,
                      help="text or json report, or the plan as a picture (svg, or html with hover details); "
                           "default: the -o file's suffix (.txt, .json, .svg, .html), else text")
    plan.add_argument("--explain", action="store_true",
                      help="list the buffers live at the peak and who still needs each")
    plan.add_argument("--liveness", action="store_true", help="print the liveness table instead")
    plan.add_argument("--at", action="append", default=[], metavar="NAME=VALUE",
                      help="with --dim: show the plan at this value of the symbol (repeatable)")
    plan.add_argument("-o", "--output", help="write to this file")
    for command, what in ((plan, "report the simulated cycles of its schedule "
                                 "(on the host target, the one run --scratchpad runs)"),
                          (run, "run it staged through that SRAM by DMA (host copies), and report the simulation"),
                          (comp, "and write the code that runs it staged through that SRAM by DMA (host copies)")):
        command.add_argument("--scratchpad", default=None, metavar="SIZE",
                             help=f"schedule for an NPU with SIZE bytes of SRAM (e.g. 1MiB), {what}")
        command.add_argument("--npu-cost", default=None, metavar="SPEC", help="the NPU cost model, e.g. "
                             "'macs_per_cycle=256,sram_bytes_per_cycle=64,dram_bytes_per_cycle=8'")
    sub.add_parser("plan-json", help="solve a planning problem given as JSON (see docs/guide.md)", add_help=False)
    return parser


def _progress_on_a_terminal() -> contextlib.AbstractContextManager[None]:
    """Long work (pyocc.progress) draws a progress line on stderr when it
    is a terminal; on a pipe or a file, nothing."""
    if sys.stderr.isatty():
        return progress.reporting(progress.TerminalBar(sys.stderr))
    return contextlib.nullcontext()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `pyocc`."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["plan-json"]:
        return plan_json_main(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    try:
        # the commands' heavy imports, here and not at the top (see the module docstring)
        from pyocc.tools import commands

        handler = {"run": commands.cmd_run, "compile": commands.cmd_compile, "plan": commands.cmd_plan}[args.command]
        with _progress_on_a_terminal():
            return handler(args)
    except PyoccError as e:
        print(f"pyocc: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pyocc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`pyocc run m.onnx | head -1`): not an error.
        # Point stdout at /dev/null so the interpreter's final flush is quiet.

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

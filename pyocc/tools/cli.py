"""`pyocc`: compile, run and plan ONNX models.

    pyocc run MODEL.onnx [--inputs in.npz] [--save-outputs out.npz] [--memory pool|lazy|eager] [--no-fuse] [--no-coalesce]
    pyocc compile MODEL.onnx -o model.so|model.o|model.ll [--memory ...]
    pyocc plan MODEL.onnx [--memory ...] [--planner NAME] [--format text|json|svg|html] [--explain] [-o FILE]
    pyocc plan-json problem.json [--algorithm NAME] [-o solution.json]
    (run, compile and plan take --memory-pools "sram:size=1MiB,dram" [--pool-candidates "concat=dram"])

User mistakes are one line on stderr and a non-zero exit; nothing is written
half-way.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from xdsl.context import Context
from xdsl.utils.exceptions import PassFailedException

from pyocc import __version__
from pyocc.api import compile as compile_model
from pyocc.api import SymbolicLowering, lower, lower_symbolic, npu_schedule
from pyocc.errors import PyoccError
from pyocc.frontend.onnx_import import parse_shape
from pyocc.frontend.symbols import parse_dims
from pyocc.lowering.convert_dnn_to_llvm import ConvertDnnToLlvmPass, to_llvm_ir
from pyocc.lowering.native.threads import MAX_THREADS
from pyocc.planning import ALGORITHMS, PlanningError
from pyocc.planning.cli import main as plan_json_main
from pyocc.planning.pools import parse_size
from pyocc.report.explain import explain_peak
from pyocc.report.npu_picture import render_npu_svg
from pyocc.report.picture import render_html, render_svg
from pyocc.report.timeline import build_timeline
from pyocc.runtime.jit import weights_path_for
from pyocc.tools.output import check_output_path


def _shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for spec in specs:
        name, sep, dims = spec.rpartition("=")
        if not sep or not name:
            raise PyoccError(f"--shape '{spec}' must look like NAME=1x3x224x224")
        shapes[name] = parse_shape(dims)
    return shapes


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


def _write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename: never half a file."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=".pyocc-")
    except OSError as e:
        raise PyoccError(f"{path}: cannot write there ({e.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give what open() would
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
    p.add_argument("--workspace", type=_size, default=32 << 20, metavar="SIZE",
                   help="target cuda: the cuDNN workspace a convolution may use, planned in the pool "
                        "(default 32MiB)")
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


def _load_inputs(path: str, input_names: list[str]) -> dict[str, Any]:
    """The arrays of `--inputs`: an .npz with one array per graph input name,
    or (for a model with one input) an .npy with that one array."""
    try:
        data = np.load(path)
    except (OSError, ValueError, EOFError) as e:
        raise PyoccError(f"{path}: cannot read inputs ({e}); give an .npz (np.savez) with one array "
                         "per graph input name") from None
    if isinstance(data, np.ndarray):
        if len(input_names) != 1:
            raise PyoccError(f"{path}: an .npy file holds one array, but the model takes {len(input_names)} "
                             f"inputs ({', '.join(input_names)}); give an .npz (np.savez) with one array per name")
        return {input_names[0]: data}
    return {k: data[k] for k in data.files}


def _bytes(limit: int | str | None) -> int | None:
    """The byte limit to check a report against (none for min)."""
    return limit if isinstance(limit, int) else None


def cmd_run(args: argparse.Namespace) -> int:
    if args.save_outputs:
        check_output_path(args.save_outputs)
    if args.dim:
        return _run_symbolic(args)
    model = compile_model(args.model, target=args.target, memory=args.memory, planner=args.planner,
                          shapes=_shapes(args.shape), fuse=args.fuse, coalesce=args.coalesce,
                          sanitize=args.sanitize,
                          memory_pools=args.memory_pools, pool_candidates=args.pool_candidates,
                          reorder=args.reorder, workspace=args.workspace, pool_allocation=args.pool_allocation,
                          kernels=args.kernels, threads=args.threads,
                           memory_limit=args.memory_limit, max_extra_macs=args.max_extra_macs,
                          scratchpad=args.scratchpad, npu_cost=args.npu_cost)
    model.memory_report().check_limit(_bytes(args.memory_limit))
    if args.inputs:
        inputs = _load_inputs(args.inputs, model.input_names)
    else:
        rng = np.random.default_rng(args.seed)
        inputs = {}
        for spec in model.native.meta["inputs"]:
            name, shape, dtype = spec["name"], spec["shape"], spec["dtype"]
            inputs[name] = (rng.standard_normal(shape).astype(dtype) if np.dtype(dtype).kind == "f"
                            else rng.integers(0, 2, shape).astype(dtype))
    _print_outputs(args, model.run(inputs))
    print(model.memory_report())
    return 0


def _print_outputs(args: argparse.Namespace, outputs: dict[str, np.ndarray]) -> None:
    """Save the outputs where --save-outputs says (all or nothing), and print
    a line per output."""
    if args.save_outputs:
        buffer = io.BytesIO()
        np.savez(buffer, **outputs)
        _write_atomically(Path(args.save_outputs), buffer.getvalue())
    for name, value in outputs.items():
        print(f"{name}: shape {list(value.shape)} {value.dtype}, mean {float(np.mean(value)):.6g}")


def _run_symbolic(args: argparse.Namespace) -> int:
    """`pyocc run --dim NAME=MAX`: compile once for every value, run on the
    --inputs (any size in range) or on random inputs at the maximum."""
    if (args.sanitize or args.memory_pools or args.memory_limit is not None or args.threads != 1
            or args.scratchpad is not None):
        raise PyoccError("--dim does not combine with --sanitize, --memory-pools, --memory-limit, "
                         "--threads or --scratchpad yet; fix the dimension with --shape to use them")
    with warnings.catch_warnings():
        # the fallback's warning is the note below, one line
        warnings.simplefilter("ignore")
        model = compile_model(args.model, target=args.target, memory=args.memory, planner=args.planner,
                              shapes=_shapes(args.shape), fuse=args.fuse, coalesce=args.coalesce,
                              reorder=args.reorder, kernels=args.kernels, dims=parse_dims(args.dim))
    if model.fallback_reason is not None:
        print(f"note: symbolic shapes run the numpy kernels from Python for this model: {model.fallback_reason}")
    lowered = model.lowered
    if args.inputs:
        inputs = _load_inputs(args.inputs, model.input_names)
        values = lowered.values_of({name: np.shape(inputs[name]) for name in lowered.inputs.shapes
                                    if name in inputs})
    else:
        values = lowered.plan.problem.maximum()
        rng = np.random.default_rng(args.seed)
        inputs = {}
        for step in lowered.runner.steps_at(values):
            if step[0] == "arg" and not step[3]:
                shape, dtype = step[4], step[5]
                inputs[step[2]] = (rng.standard_normal(shape).astype(dtype) if np.dtype(dtype).kind == "f"
                                   else rng.integers(0, 2, shape).astype(dtype))
    _print_outputs(args, model.run(inputs))
    print(", ".join(f"{k}={v}" for k, v in values.items()))
    print(model.memory_report(values))
    return 0
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    if args.dim:
        raise PyoccError("--dim models run in-process only for now (pyocc run, or pyocc.compile(..., dims=...)); "
                         "pyocc compile -o writes static models: fix the dimension with --shape")
    out = Path(args.output)
    if out.suffix not in (".so", ".o", ".ll"):
        raise PyoccError(f"{out}: unknown output kind '{out.suffix}'; use .so, .o or .ll")
    check_output_path(out)
    if args.target == "cuda":
        return _compile_cuda_ir(args, out)
    model = compile_model(args.model, target=args.target, memory=args.memory, planner=args.planner,
                          shapes=_shapes(args.shape), fuse=args.fuse, coalesce=args.coalesce,
                          memory_pools=args.memory_pools,
                          pool_candidates=args.pool_candidates, reorder=args.reorder, pool_allocation=args.pool_allocation,
                          kernels=args.kernels, threads=args.threads,
                           memory_limit=args.memory_limit, max_extra_macs=args.max_extra_macs,
                          jit=False)  # written to disk, never run here: machine code once, for the file
    model.memory_report().check_limit(_bytes(args.memory_limit))
    model.save(out)
    if out.suffix == ".so":
        print(f"wrote {out} and {weights_path_for(out)} (its weights: keep the two together)")
        _print_library_use(out, model.numpy_sites, model.numpy_sites + model.native_sites)
    else:
        print(f"wrote {out}")
    return 0


def _print_library_use(library: Path, numpy_sites: int, sites: int) -> None:
    """After writing a shared library: how a C program links it or runs it
    (examples/c/run_model.c)."""
    path = library.resolve()
    if numpy_sites:
        print(f"note: {numpy_sites} of {sites} ops call numpy kernels: this library runs through pyocc's "
              "Python runtime (pyocc.runtime.loader), not from C")
        return
    print(f"link: cc -o app app.c {path} -Wl,-rpath,{path.parent}")
    print(f"run:  cc -O2 -o run_model examples/c/run_model.c -ldl && ./run_model {library} input.bin output.bin")


def _compile_cuda_ir(args: argparse.Namespace, out: Path) -> int:
    """target cuda: write the host code as LLVM IR. Emitting it needs no GPU
    (running it does: `pyocc run --target cuda`)."""
    if args.threads != 1:
        raise PyoccError("threads applies to the host target; drop --threads with --target cuda")
    if out.suffix != ".ll":
        raise PyoccError(f"{out}: target cuda writes LLVM IR (.ll) only; its library calls are bound when it is run")
    module, report = lower(args.model, memory=args.memory, planner=args.planner, shapes=_shapes(args.shape),
                           fuse=args.fuse, coalesce=args.coalesce, memory_pools=args.memory_pools,
                           pool_candidates=args.pool_candidates, reorder=args.reorder, target="cuda",
                           pool_allocation=args.pool_allocation, workspace=args.workspace,
                           memory_limit=args.memory_limit, max_extra_macs=args.max_extra_macs)
    report.check_limit(_bytes(args.memory_limit))
    try:
        ConvertDnnToLlvmPass(target="cuda", workspace=args.workspace,
                             pool_allocation=args.pool_allocation or "init").apply(Context(), module)
    except PassFailedException as e:
        raise PyoccError(str(e)) from None
    _write_atomically(out, to_llvm_ir(module).encode())
    print(f"wrote {out}")
    return 0


#: What `pyocc plan` writes, by format, and the file suffixes each may have
#: (the first is the one to suggest). An -o suffix picks the format.
PLAN_FORMATS: dict[str, tuple[str, ...]] = {
    "text": (".txt", ".text", ".log", ""),
    "json": (".json",),
    "svg": (".svg",),
    "html": (".html", ".htm"),
}


def plan_format(requested: str | None, output: str | None, text_only: str | None, stdout_is_terminal: bool) -> str:
    """The format `pyocc plan` writes: `--format` if given, else the one the
    -o file's suffix names, else text. A suffix that does not fit the format
    (SVG into plan.png, text into plan.html) and a page written to a terminal
    are refused in one line. `text_only` names the option (--explain,
    --liveness) that makes the output text whatever the format."""
    suffix = Path(output).suffix.lower() if output else None
    if suffix is not None and requested is None and text_only is None:
        requested = next((f for f, suffixes in PLAN_FORMATS.items() if suffix in suffixes), None)
        if requested is None:
            known = ", ".join(f"{f} ({'/'.join(x for x in xs if x)})" for f, xs in PLAN_FORMATS.items())
            raise PyoccError(f"{output}: pyocc plan cannot write '{suffix}' files; it writes {known}: "
                             "give -o one of these suffixes")
    fmt = "text" if text_only is not None else (requested or "text")
    if suffix is not None and suffix not in PLAN_FORMATS[fmt]:
        what = text_only or f"--format {fmt}"
        raise PyoccError(f"{output}: {what} writes {fmt}, not '{suffix}'; name the file "
                         f"{Path(output).with_suffix(PLAN_FORMATS[fmt][0]).name}"
                         + ("" if text_only else " or drop --format to follow the suffix"))
    if output is None and fmt in ("svg", "html") and stdout_is_terminal:
        raise PyoccError(f"--format {fmt} writes a picture, not text for the terminal; "
                         f"give -o plan.{fmt} (or pipe it: ... > plan.{fmt})")
    return fmt


def cmd_plan(args: argparse.Namespace) -> int:
    text_only = "--explain" if args.explain else "--liveness" if args.liveness else None
    args.format = plan_format(args.format, args.output, text_only, sys.stdout.isatty())
    if args.output:
        check_output_path(args.output)
    if args.at and not args.dim:
        raise PyoccError("--at picks a value of a symbolic dimension: give its range with --dim too, "
                         "e.g. --dim sequence=512 --at sequence=17")
    if args.dim and args.scratchpad is not None:
        raise PyoccError("--scratchpad does not combine with --dim yet; fix the dimension with --shape")
    if args.dim and not args.at:
        return _plan_symbolic(args)
    if args.scratchpad is not None and args.format in ("svg", "html") and not args.dim:
        # the schedule's picture: both memories and the DMA between them
        svg = render_npu_svg(npu_schedule(args.model, scratchpad=args.scratchpad, npu_cost=args.npu_cost,
                                          shapes=_shapes(args.shape), fuse=args.fuse, reorder=args.reorder),
                             title=f"{Path(args.model).name}: scratchpad schedule")
        text = svg if args.format == "svg" else f"<!doctype html>\n<html><body>\n{svg}</body></html>\n"
        if args.output:
            _write_atomically(Path(args.output), text.encode())
        else:
            sys.stdout.write(text)
        return 0
    if args.dim:
        module, report = _lower_symbolic(args).module_at(parse_dims(args.at, option="--at", low=0))
    else:
        module, report = lower(args.model, memory=args.memory, planner=args.planner, shapes=_shapes(args.shape),
                               fuse=args.fuse, coalesce=args.coalesce, memory_pools=args.memory_pools,
                               pool_candidates=args.pool_candidates,
                               reorder=args.reorder, target=args.target, pool_allocation=args.pool_allocation,
                               workspace=args.workspace,
                                    memory_limit=args.memory_limit, max_extra_macs=args.max_extra_macs,
                               scratchpad=args.scratchpad, npu_cost=args.npu_cost)
        report.check_limit(_bytes(args.memory_limit))
    if args.explain or args.format in ("svg", "html"):
        timeline = build_timeline(module, report)
    if args.explain:
        text = explain_peak(timeline) + "\n"
    elif args.format in ("svg", "html"):
        text = render_svg(timeline) if args.format == "svg" else render_html(timeline)
    elif args.liveness:
        text = "\n".join(
            f"{b.name:30s} {'x'.join(map(str, b.shape)):>18s} {b.dtype:>5s} {b.bytes:>12,d} {b.first:>5d} {b.last:>5d}"
            for b in report.buffers) + "\n"
    elif args.format == "json":
        text = json.dumps(report.to_json(), indent=2) + "\n"
    else:
        text = str(report) + "\n"
    if args.output:
        _write_atomically(Path(args.output), text.encode())
    else:
        sys.stdout.write(text)
    return 0


def _lower_symbolic(args: argparse.Namespace) -> SymbolicLowering:
    """The symbolic lowering `pyocc plan --dim` asks for."""
    if args.memory_pools or args.memory_limit is not None:
        raise PyoccError("--dim does not combine with --memory-pools or --memory-limit yet; "
                         "fix the dimension with --shape to use them")
    return lower_symbolic(args.model, parse_dims(args.dim), shapes=_shapes(args.shape), planner=args.planner,
                          fuse=args.fuse, coalesce=args.coalesce, reorder=args.reorder,
                          memory=args.memory, target=args.target)


def _plan_symbolic(args: argparse.Namespace) -> int:
    """`pyocc plan --dim NAME=MAX`: the one plan for every value, as a text
    report at the maximum with the formulas, or as JSON."""
    if args.explain or args.liveness or args.format in ("svg", "html"):
        raise PyoccError("with --dim, pictures, --explain and --liveness show one value: add --at NAME=VALUE, "
                         "e.g. --at sequence=17")
    symbolic = _lower_symbolic(args)
    if args.format == "json":
        text = json.dumps(symbolic.to_json(), indent=2) + "\n"
    else:
        ranges = ", ".join(f"{name} in {low}..{high}" for name, (low, high) in symbolic.ranges.items())
        text = (f"symbols          {ranges} (report at the maximum)\n"
                f"activation expr  {symbolic.plan.pool_expr()}\n{symbolic.memory_report()}\n")
    if args.output:
        _write_atomically(Path(args.output), text.encode())
    else:
        sys.stdout.write(text)
    return 0


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
    for command, what in ((plan, "report its simulated cycles"),
                          (run, "run it staged through that SRAM by DMA (host copies), and report the simulation")):
        command.add_argument("--scratchpad", default=None, metavar="SIZE",
                             help=f"schedule for an NPU with SIZE bytes of SRAM (e.g. 1MiB), {what}")
        command.add_argument("--npu-cost", default=None, metavar="SPEC", help="the NPU cost model, e.g. "
                             "'macs_per_cycle=256,sram_bytes_per_cycle=64,dram_bytes_per_cycle=8'")
    sub.add_parser("plan-json", help="solve a planning problem given as JSON (see docs/guide.md)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `pyocc`."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["plan-json"]:
        return plan_json_main(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    try:
        handler = {"run": cmd_run, "compile": cmd_compile, "plan": cmd_plan}[args.command]
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

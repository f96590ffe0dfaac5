"""The work of `pyocc run`, `pyocc compile` and `pyocc plan`, one cmd_*
function per subcommand taking the parsed arguments (pyocc.tools.cli parses
them and imports this module only when a command runs: it imports onnx, xDSL
and llvmlite)."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.utils.exceptions import PassFailedException

from pyocc.api import compile as compile_model
from pyocc.api import SCRATCHPAD_MODE, SymbolicLowering, SymbolicModel, lower, lower_symbolic, npu_schedule
from pyocc.errors import PyoccError
from pyocc.frontend.onnx_import import parse_shape
from pyocc.frontend.symbols import parse_dims
from pyocc.lowering.convert_dnn_to_llvm import ConvertDnnToLlvmPass, to_llvm_ir
from pyocc.report.explain import explain_peak
from pyocc.report.npu_picture import render_npu_svg
from pyocc.report.picture import render_html, render_svg
from pyocc.report.timeline import build_timeline
from pyocc.runtime.jit import weights_path_for
from pyocc.tools.output import check_output_path, plan_format


def _shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for spec in specs:
        name, sep, dims = spec.rpartition("=")
        if not sep or not name:
            raise PyoccError(f"--shape '{spec}' must look like NAME=1x3x224x224")
        shapes[name] = parse_shape(dims)
    return shapes


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
                          conv_search=args.conv_search, kernels=args.kernels, threads=args.threads,
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


def cmd_compile(args: argparse.Namespace) -> int:
    out = Path(args.output)
    if out.suffix not in (".so", ".o", ".ll"):
        raise PyoccError(f"{out}: unknown output kind '{out.suffix}'; use .so, .o or .ll")
    check_output_path(out)
    if args.dim:
        return _compile_symbolic(args, out)
    if args.target == "cuda":
        if args.scratchpad is not None:
            raise PyoccError(SCRATCHPAD_MODE)  # as `pyocc run` says it
        return _compile_cuda_ir(args, out)
    model = compile_model(args.model, target=args.target, memory=args.memory, planner=args.planner,
                          shapes=_shapes(args.shape), fuse=args.fuse, coalesce=args.coalesce,
                          memory_pools=args.memory_pools,
                          pool_candidates=args.pool_candidates, reorder=args.reorder, pool_allocation=args.pool_allocation,
                          kernels=args.kernels, threads=args.threads,
                          memory_limit=args.memory_limit, max_extra_macs=args.max_extra_macs,
                          scratchpad=args.scratchpad, npu_cost=args.npu_cost,
                          jit=False)  # written to disk, never run here: machine code once, for the file
    model.memory_report().check_limit(_bytes(args.memory_limit))
    model.save(out)
    if out.suffix == ".so":
        print(f"wrote {out} and {weights_path_for(out)} (its weights: keep the two together)")
        _print_library_use(out, model.numpy_sites, model.numpy_sites + model.native_sites)
    else:
        print(f"wrote {out}")
    return 0


def _compile_symbolic(args: argparse.Namespace, out: Path) -> int:
    """`pyocc compile --dim NAME=MAX -o model.so|.o|.ll`: one library for
    every value in range (C ABI version 2: its run takes the symbols' values)."""
    if args.threads != 1 or args.memory_pools or args.memory_limit is not None or args.scratchpad is not None:
        raise PyoccError("--dim does not combine with --threads, --memory-pools, --memory-limit or --scratchpad "
                         "yet; fix the dimension with --shape to use them")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the numpy fallback's warning: save() refuses it in one line
        model = compile_model(args.model, target=args.target, memory=args.memory, planner=args.planner,
                              shapes=_shapes(args.shape), fuse=args.fuse, coalesce=args.coalesce,
                              reorder=args.reorder, kernels=args.kernels, memory_pools=args.memory_pools,
                              pool_candidates=args.pool_candidates, dims=parse_dims(args.dim))
    assert isinstance(model, SymbolicModel)
    model.save(out)
    if out.suffix != ".so":
        print(f"wrote {out}")
        return 0
    print(f"wrote {out} and {weights_path_for(out)} (its weights: keep the two together)")
    ranges = sorted(model.lowered.ranges.items())
    dims = " ".join(f"--dim {name}=N" for name, _ in ranges)
    within = ", ".join(f"{name} in {low}..{high}" for name, (low, high) in ranges)
    print(f"run:  cc -O2 -o run_model examples/c/run_model.c -ldl && ./run_model {out.resolve()} input.bin "
          f"output.bin {dims}   ({within})")
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
        ConvertDnnToLlvmPass(target="cuda", workspace=args.workspace, pool_allocation=args.pool_allocation or "init",
                             conv_search=args.conv_search).apply(Context(), module)
    except PassFailedException as e:
        raise PyoccError(str(e)) from None
    _write_atomically(out, to_llvm_ir(module).encode())
    print(f"wrote {out}")
    return 0



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
                                          shapes=_shapes(args.shape), fuse=args.fuse, reorder=args.reorder,
                                          target=args.target),
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

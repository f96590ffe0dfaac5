"""`pyocc-opt`: xdsl-opt with pyocc's dialects, passes and an ONNX frontend.

    pyocc-opt model.onnx                      # the model in the onnx dialect
    pyocc-opt model.onnx -p occamy-lazy       # a named pipeline
    pyocc-opt in.mlir -p "dnn-insert-memory-ops{mode=eager}"

Everything heavy (onnx, numpy, llvmlite) is imported only by the frontend or
pass that needs it, so `pyocc-opt --help` starts fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import sys
import textwrap
from collections.abc import Sequence
from io import StringIO
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    PassFailedException,
    VerifyException,
)
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from pyocc import __version__
from pyocc.errors import PyoccError, one_line
from pyocc.registry import PASS_SUMMARIES, PYOCC_DIALECTS, PYOCC_PASSES
from pyocc.tools.output import check_output_path
from pyocc.tools.string_literals import write_string_literals_at_once


class PyoccOptMain(xDSLOptMain):
    """xdsl-opt, plus `.onnx` inputs, `--shape NAME=1x3x224x224`, and pyocc's
    dialects and passes (registered lazily)."""

    version_format = f"pyocc-opt {__version__} (pyocc), built on xdsl version {{xdsl_version}}"

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in PYOCC_DIALECTS.items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in PYOCC_PASSES.items():
            self.register_pass(name, factory)

    def setup_pipeline(self) -> None:
        """xdsl-opt's pipeline, which runs the op verifiers after every pass,
        plus pyocc's buffer-lifetime check (no use after dnn.dealloc);
        `--disable-verify` turns both off. With --print-between-passes each
        `occamy-*` pipeline is replaced by its stages, so the IR is printed
        (and checked) after each: to xDSL a pipeline is one pass."""
        self._check_pass_names()
        super().setup_pipeline()
        inner = self.pipeline.callback

        def callback(previous: ModulePass | None, module: ModuleOp, following: ModulePass | None) -> None:
            if inner is not None:
                inner(previous, module, following)
            if previous is not None and not self.args.disable_verify:
                # loads the dnn dialect (a quarter of start-up): only once a pass has run,
                # not for a round trip or an onnx-dialect input that needs no dnn
                from pyocc.analysis.verify_lifetimes import check_lifetimes

                check_lifetimes(module)

        self.pipeline = dataclasses.replace(self.pipeline, callback=callback)
        if self.args.print_between_passes:
            self.pipeline = dataclasses.replace(self.pipeline, passes=_expand_pipelines(self.pipeline.passes))

    def _check_pass_names(self) -> None:
        """An unknown pass is one line naming it and the closest known name;
        a malformed pipeline is one line (xDSL raises a BaseException)."""
        if not self.args.passes:
            return
        try:
            specs = list(parse_pipeline(self.args.passes))
        except ArgSpecParseError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            column = lines[1].rsplit(":", 1)[-1] if len(lines) > 1 else "?"
            raise PyoccError(f"-p '{self.args.passes}': {lines[-1]} (column {column})") from None
        for spec in specs:
            if spec.name not in self.available_passes:
                close = difflib.get_close_matches(spec.name, list(PASS_SUMMARIES) + sorted(self.available_passes), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise PyoccError(f"unknown pass '{spec.name}'{hint} (pyocc-opt --help lists the passes)")

    def register_all_targets(self) -> None:
        """xdsl-opt's targets, with `-t llvm` replaced by pyocc's converter,
        which also handles the indirect kernel call of convert-dnn-to-llvm's
        host code (xDSL's stops at it)."""
        super().register_all_targets()
        self.available_targets["llvm"] = _pyocc_llvm_target

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["onnx"] = self.parse_onnx

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        """xdsl-opt's options plus --shape; --help lists pyocc's passes first,
        one line each, and xDSL's after the options."""
        super().register_all_arguments(arg_parser)
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter
        width = max(map(len, PASS_SUMMARIES)) + 2
        arg_parser.description = (
            f"{arg_parser.description or ''}\n\npyocc's passes and pipelines (-p NAME, options in braces):\n"
            + "\n".join(f"  {name:<{width}s}{summary}" for name, summary in PASS_SUMMARIES.items())
            + "\n\nexample: pyocc-opt model.onnx -p occamy-pool")
        xdsl_passes = sorted(n for n in self.available_passes if n not in PASS_SUMMARIES)
        arg_parser.epilog = (f"xDSL's own {len(xdsl_passes)} passes work too: "
                             + textwrap.fill(", ".join(xdsl_passes), width=100))
        for action in arg_parser._actions:
            if action.dest == "passes":
                action.help = "comma-separated pass pipeline, e.g. 'convert-onnx-to-dnn,dnn-fuse' (passes listed above)"
        arg_parser.add_argument(
            "--shape",
            action="append",
            default=[],
            metavar="NAME=1x3x224x224",
            help="fix the shape of an ONNX graph input (repeatable); needed for dynamic dimensions",
        )

    def parse_onnx(self, stream: IO[bytes]) -> ModuleOp:
        """The `.onnx` frontend: bytes -> onnx-dialect module."""
        # onnx (and the frontend, which needs it) only for .onnx inputs, off the start-up path
        import onnx
        from google.protobuf.message import DecodeError

        from pyocc.frontend.onnx_import import import_model, parse_shape

        shapes = {}
        for spec in self.args.shape:
            name, sep, dims = spec.rpartition("=")
            if not sep or not name:
                raise PyoccError(f"--shape '{spec}' must look like NAME=1x3x224x224")
            shapes[name] = parse_shape(dims)
        data = stream.read()
        try:
            model = onnx.load_model_from_string(data)
        except (DecodeError, ValueError, RuntimeError) as e:
            raise PyoccError(
                f"{self.args.input_file}: not a valid ONNX model (the file is corrupt or truncated: "
                f"{str(e).splitlines()[0] if str(e) else type(e).__name__})"
            ) from None
        if not model.graph.node and not model.graph.output:
            raise PyoccError(f"{self.args.input_file}: not a valid ONNX model (it has no graph)")
        module = import_model(model, shapes)
        # Load the dialects the module uses so that the printer finds the
        # builtin blob store (weights) when it writes the resources section.
        for name in ("builtin", "func", "onnx"):
            self.ctx.get_dialect(name)
        return module


def _expand_pipelines(passes: Sequence[ModulePass]) -> tuple[ModulePass, ...]:
    """`passes` with every occamy-* pipeline replaced by its stages."""
    # pipelines import every pass, and through them numpy: only with --print-between-passes
    from pyocc.pipelines import PIPELINES

    pipelines = tuple(PIPELINES.values())
    return tuple(stage for p in passes for stage in (p.stages() if isinstance(p, pipelines) else [p]))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `pyocc-opt`: user errors are one line on stderr and a
    non-zero exit, never a traceback; output is written only on success."""
    args = list(sys.argv[1:] if argv is None else argv)
    write_string_literals_at_once()
    try:
        tool = PyoccOptMain(description="pyocc's modular optimizer driver", args=args)
        if tool.args.input_file is not None:
            _check_input_file(tool.args.input_file)
        output_file = tool.args.output_file
        if output_file is not None:
            check_output_path(output_file)
            # Write nothing half-way: collect the output, then write it at once.
            tool.args.output_file = None
            buffer = StringIO()
            real_stdout, sys.stdout = sys.stdout, buffer
            try:
                tool.run()
            finally:
                sys.stdout = real_stdout
            with open(output_file, "w") as f:
                f.write(buffer.getvalue())
        else:
            tool.run()
    except PyoccError as e:
        print(f"pyocc-opt: error: {e}", file=sys.stderr)
        return 1
    except (ParseError, VerifyException, PassFailedException, DiagnosticException) as e:
        print(f"pyocc-opt: error: {one_line(e)}", file=sys.stderr)
        return 1
    except ValueError as e:  # xDSL raises ValueError for unknown passes / options
        print(f"pyocc-opt: error: {one_line(e)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    return 0


def _check_input_file(path: str) -> None:
    if not os.path.exists(path):
        raise PyoccError(f"{path}: no such file")
    if os.path.isdir(path):
        raise PyoccError(f"{path}: is a directory")


def _pyocc_llvm_target() -> type:
    """The `-t llvm` target class (imported lazily: it needs llvmlite)."""
    # the converter needs llvmlite: only for -t llvm, off the start-up path
    from pyocc.lowering.convert_dnn_to_llvm import to_llvm_ir

    class PyoccLLVMTarget(Target):
        """LLVM IR text of a module in the llvm dialect (after convert-dnn-to-llvm)."""

        name = "llvm"

        def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
            left = sorted({op.name for op in module.ops if not op.name.startswith("llvm.")})
            if left:
                raise PyoccError(f"-t llvm takes the llvm dialect, but the module still has {', '.join(left)}; "
                                 "lower it first with -p convert-dnn-to-llvm (or convert-dnn-to-llvm{target=cuda})")
            print(to_llvm_ir(module), file=output)

    return PyoccLLVMTarget


if __name__ == "__main__":
    sys.exit(main())

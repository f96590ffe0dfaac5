"""Where `pyocc.compile` spends its CPU time on the light models.

For each named light model (from the onnx wheel), compiles it once from its
path (`pyocc.compile(path)`, the default native kernels and pool) and prints
the CPU seconds (`time.process_time`) of the whole compile and of its
phases: `pyocc.api.lower` (ONNX import and the dnn pass pipeline, memory
planning included), the emission of the LLVM IR
(`convert_dnn_to_llvm.to_llvm_parts`, or `to_llvmlite` on threads), LLVM's
O3 pipeline (`jit.optimize`, once per kernel module and once for the
model's) and machine-code generation (`ExecutionEngine.finalize_object`);
the rest is parsing and verifying the IR and packing the weights. Then
the size of what LLVM compiled: the native functions (the shared ones
among them) and the characters of LLVM IR. The one-off import of pyocc,
xDSL, onnx and llvmlite is printed apart. The phases are timed by wrapping
those functions in this process only. The JIT's kernel cache is emptied
before each model, so each compile is a cold one.

    python bench/compile_time.py bvlc_alexnet resnet50 densenet121
    python bench/compile_time.py resnet50 --scratchpad 1MiB --kernels numpy

With `--scratchpad` the import + passes column is the NPU schedule with
its DMA staged as copies, and `dnn -> llvm` (the convert-dnn-to-llvm
pass, part of the emission) is printed apart.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

START = time.process_time()
import llvmlite.binding.executionengine as executionengine  # noqa: E402

import pyocc  # noqa: E402
import pyocc.api as api  # noqa: E402
import pyocc.lowering.convert_dnn_to_llvm as convert_dnn_to_llvm  # noqa: E402
import pyocc.runtime.jit as jit  # noqa: E402
from pyocc.runtime import object_cache  # noqa: E402
from pyocc.testing.light_models import light_model_path  # noqa: E402

IMPORT_SECONDS = time.process_time() - START

#: (owner, attribute, column): the functions whose CPU time is a phase
PHASES: list[tuple[Any, str, str]] = [
    (api, "lower", "import + passes"),
    (convert_dnn_to_llvm.ConvertDnnToLlvmPass, "apply", "dnn -> llvm"),
    (convert_dnn_to_llvm, "to_llvmlite", "emit IR"),
    (convert_dnn_to_llvm, "to_llvm_parts", "emit IR"),
    (jit, "optimize", "LLVM O3"),
    (executionengine.ExecutionEngine, "finalize_object", "LLVM codegen"),
]


def timed(function: Callable[..., Any], column: str, totals: dict[str, float]) -> Callable[..., Any]:
    """`function`, adding the CPU seconds of each call to totals[column]."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            totals[column] += time.process_time() - start

    return wrapper


def main() -> None:
    """Compile each named model and print one markdown row of CPU seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="light model names, e.g. resnet50")
    parser.add_argument("--scratchpad", default=None, help="compile for an NPU scratchpad of this size, e.g. 1MiB")
    parser.add_argument("--kernels", default="native", choices=["native", "numpy"], help="the kernels of the sites")
    args = parser.parse_args()
    os.environ.pop(object_cache.CACHE_DIR_VARIABLE, None)  # cold compiles: no code loaded from a disk cache
    totals = dict.fromkeys((column for _, _, column in PHASES), 0.0)
    for owner, attribute, column in PHASES:
        setattr(owner, attribute, timed(getattr(owner, attribute), column, totals))
    print(f"imports: {IMPORT_SECONDS:.2f} CPU s (once per process)")
    print("| model | compile s | " + " | ".join(totals) + " | native functions (shared) | IR chars |")
    print("|---|---:|" + "---:|" * len(totals) + "---:|---:|")
    for name in args.models:
        for column in totals:
            totals[column] = 0.0
        jit._kernels.clear()
        start = time.process_time()
        model = pyocc.compile(str(light_model_path(name)), scratchpad=args.scratchpad, kernels=args.kernels)
        seconds = time.process_time() - start
        kernels = model.native.kernels
        shared = sum(symbol.endswith("_sizes") for symbol in kernels)
        ir_chars = len(model.native.llvm_ir) + sum(len(text) for text in kernels.values())
        print(f"| {name} | {seconds:.2f} | " + " | ".join(f"{t:.2f}" for t in totals.values())
              + f" | {len(kernels)} ({shared}) | {ir_chars:,} |", flush=True)


if __name__ == "__main__":
    main()

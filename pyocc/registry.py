"""The one registry of pyocc's dialects and passes: name -> lazy factory.

A factory imports its module only when called, so tools that list passes
(`pyocc-opt --help`) or run one pass pay only for what they use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from xdsl.ir import Dialect
from xdsl.passes import ModulePass


def _lazy(module: str, name: str) -> Callable[[], Any]:
    """A factory that imports `module` and returns its attribute `name`.

    The registry imports nothing itself, on purpose: xDSL's `Context` and
    `xdsl-opt` take factories so that a tool loads only the dialects and
    passes its input uses, and the passes pull in numpy, llvmlite and the
    planner, which `pyocc-opt`'s start-up must not import."""

    def factory() -> Any:
        return getattr(importlib.import_module(module), name)

    return factory


PYOCC_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "onnx": _lazy("pyocc.dialects.onnx", "Onnx"),
    "dnn": _lazy("pyocc.dialects.dnn", "Dnn"),
}


def _lazy_pass(module: str, cls: str) -> Callable[[], type[ModulePass]]:
    """A factory that imports `module` and returns its pass class `cls`."""
    return _lazy(module, cls)


PYOCC_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "convert-onnx-to-dnn": _lazy_pass("pyocc.lowering.convert_onnx_to_dnn", "ConvertOnnxToDnnPass"),
    "dnn-fuse": _lazy_pass("pyocc.rewrites.dnn_fuse", "DnnFusePass"),
    "dnn-insert-memory-ops": _lazy_pass("pyocc.rewrites.dnn_insert_memory_ops", "DnnInsertMemoryOpsPass"),
    "dnn-verify-lifetimes": _lazy_pass("pyocc.analysis.verify_lifetimes", "DnnVerifyLifetimesPass"),
    "dnn-print-liveness": _lazy_pass("pyocc.analysis.print_liveness", "DnnPrintLivenessPass"),
    "dnn-coalesce": _lazy_pass("pyocc.rewrites.dnn_coalesce", "DnnCoalescePass"),
    "dnn-reorder": _lazy_pass("pyocc.rewrites.dnn_reorder", "DnnReorderPass"),
    "dnn-sanitize": _lazy_pass("pyocc.rewrites.dnn_sanitize", "DnnSanitizePass"),
    "dnn-tile": _lazy_pass("pyocc.rewrites.dnn_tile", "DnnTilePass"),
    "dnn-memory-pool": _lazy_pass("pyocc.rewrites.dnn_memory_pool", "DnnMemoryPoolPass"),
    "convert-dnn-to-llvm": _lazy_pass("pyocc.lowering.convert_dnn_to_llvm", "ConvertDnnToLlvmPass"),
    "occamy-eager": _lazy_pass("pyocc.pipelines", "OccamyEagerPipeline"),
    "occamy-lazy": _lazy_pass("pyocc.pipelines", "OccamyLazyPipeline"),
    "occamy-pool": _lazy_pass("pyocc.pipelines", "OccamyPoolPipeline"),
}

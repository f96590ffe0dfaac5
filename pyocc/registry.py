"""The one registry of pyocc's dialects and passes: name -> lazy factory.

A factory imports its module only when called, so tools that list passes
(`pyocc-opt --help`) or run one pass pay only for what they use.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Dialect
from xdsl.passes import ModulePass


def _onnx_dialect() -> Dialect:
    from pyocc.dialects.onnx import Onnx

    return Onnx


PYOCC_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "onnx": _onnx_dialect,
}


def _lazy_pass(module: str, cls: str) -> Callable[[], type[ModulePass]]:
    """A factory that imports `module` and returns its pass class `cls`."""

    def factory() -> type[ModulePass]:
        import importlib

        return getattr(importlib.import_module(module), cls)

    return factory


PYOCC_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "convert-dnn-to-llvm": _lazy_pass("pyocc.lowering.convert_dnn_to_llvm", "ConvertDnnToLlvmPass"),
}

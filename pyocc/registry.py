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


#: name, module, class, and the one line `pyocc-opt --help` shows (in pipeline order).
_PASSES: list[tuple[str, str, str, str]] = [
    ("convert-onnx-to-dnn", "pyocc.lowering.convert_onnx_to_dnn", "ConvertOnnxToDnnPass",
     "onnx dialect -> tensor-form dnn"),
    ("dnn-fuse", "pyocc.rewrites.dnn_fuse", "DnnFusePass", "layer fusion on tensor-form dnn"),
    ("dnn-reorder", "pyocc.rewrites.dnn_reorder", "DnnReorderPass",
     "run tensor-form ops in the order with the lowest peak of live bytes"),
    ("dnn-recompute", "pyocc.rewrites.dnn_recompute", "DnnRecomputePass",
     "compute cheap values again at their late readers instead of keeping them alive"),
    ("dnn-tile", "pyocc.rewrites.dnn_tile", "DnnTilePass",
     "run the stem's first row-local ops patch by patch (below the max-live bound)"),
    ("dnn-insert-memory-ops", "pyocc.rewrites.dnn_insert_memory_ops", "DnnInsertMemoryOpsPass",
     "tensor form -> buffer form with dnn.malloc/dnn.dealloc {mode=lazy|eager}"),
    ("dnn-coalesce", "pyocc.rewrites.dnn_coalesce", "DnnCoalescePass",
     "buffers share bytes: in-place results, split/slice views, concat bands"),
    ("dnn-sanitize", "pyocc.rewrites.dnn_sanitize", "DnnSanitizePass", "poison dead buffers, check guard bytes"),
    ("dnn-scratchpad", "pyocc.rewrites.dnn_scratchpad", "DnnScratchpadPass",
     "compute reads only SRAM: DMA DRAM operands (weights, graph I/O) in and results out"),
    ("dnn-npu-schedule", "pyocc.rewrites.dnn_npu_schedule", "DnnNpuSchedulePass",
     "tensor form -> the scratchpad schedule (DMA, SRAM and DRAM offsets) as buffer form, simulated"),
    ("dnn-memory-pool", "pyocc.rewrites.dnn_memory_pool", "DnnMemoryPoolPass",
     "malloc/dealloc -> one planned pool (dnn.pool_init + dnn.mem_offset)"),
    ("dnn-cuda-scratch", "pyocc.lowering.cuda_scratch", "DnnCudaScratchPass",
     "give each cuda convolution a planned workspace buffer of --workspace bytes"),
    ("dnn-dma-to-memcpy", "pyocc.lowering.dnn_dma_to_memcpy", "DnnDmaToMemcpyPass",
     "DMA start/wait -> synchronous host copies (run DMA programs on the host)"),
    ("convert-dnn-to-llvm", "pyocc.lowering.convert_dnn_to_llvm", "ConvertDnnToLlvmPass",
     "buffer-form dnn -> llvm dialect {target=host|cuda}"),
    ("dnn-print-liveness", "pyocc.analysis.print_liveness", "DnnPrintLivenessPass",
     "print each function's liveness table"),
    ("dnn-verify-lifetimes", "pyocc.analysis.verify_lifetimes", "DnnVerifyLifetimesPass",
     "check that no buffer is used outside its lifetime"),
    ("occamy-eager", "pyocc.pipelines", "OccamyEagerPipeline", "pipeline: onnx -> buffers, all allocated at entry"),
    ("occamy-lazy", "pyocc.pipelines", "OccamyLazyPipeline", "pipeline: onnx -> buffers, allocated just in time"),
    ("occamy-pool", "pyocc.pipelines", "OccamyPoolPipeline", "pipeline: occamy-lazy, then one planned pool"),
]

PYOCC_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    name: _lazy_pass(module, cls) for name, module, cls, _ in _PASSES
}

PASS_SUMMARIES: dict[str, str] = {name: summary for name, _, _, summary in _PASSES}
"""Pass name -> the one line `pyocc-opt --help` shows for it."""

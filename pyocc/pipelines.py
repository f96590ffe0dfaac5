"""Named pipelines: one pass name that runs a whole Occamy flow.

    occamy-eager   onnx -> dnn -> buffers, everything allocated at entry
    occamy-lazy    onnx -> dnn -> buffers, allocated just in time
    occamy-pool    occamy-lazy, then one planned pool (mem_offset views)
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from pyocc.lowering.convert_onnx_to_dnn import ConvertOnnxToDnnPass
from pyocc.rewrites.dnn_insert_memory_ops import DnnInsertMemoryOpsPass


def _run(ctx: Context, module: ModuleOp, passes: list[ModulePass]) -> None:
    for p in passes:
        p.apply(ctx, module)
        module.verify()


@dataclass(frozen=True)
class OccamyEagerPipeline(ModulePass):
    """convert-onnx-to-dnn, dnn-insert-memory-ops{mode=eager}."""

    name = "occamy-eager"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _run(ctx, op, [ConvertOnnxToDnnPass(), DnnInsertMemoryOpsPass(mode="eager")])


@dataclass(frozen=True)
class OccamyLazyPipeline(ModulePass):
    """convert-onnx-to-dnn, dnn-insert-memory-ops{mode=lazy}."""

    name = "occamy-lazy"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _run(ctx, op, [ConvertOnnxToDnnPass(), DnnInsertMemoryOpsPass(mode="lazy")])


@dataclass(frozen=True)
class OccamyPoolPipeline(ModulePass):
    """occamy-lazy, then dnn-memory-pool{planner, alignment}."""

    name = "occamy-pool"

    planner: str = "auto"
    """The planning algorithm (see dnn-memory-pool)."""

    alignment: int = 64
    """Byte alignment of every buffer in the pool."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from pyocc.rewrites.dnn_memory_pool import DnnMemoryPoolPass

        _run(ctx, op, [ConvertOnnxToDnnPass(), DnnInsertMemoryOpsPass(mode="lazy"),
                       DnnMemoryPoolPass(planner=self.planner, alignment=self.alignment)])


PIPELINES = {"eager": OccamyEagerPipeline, "lazy": OccamyLazyPipeline, "pool": OccamyPoolPipeline}

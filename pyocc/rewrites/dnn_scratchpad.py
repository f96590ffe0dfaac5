"""`dnn-scratchpad`: stage every DRAM operand of a compute op through SRAM.

On an NPU, compute reads and writes only the SRAM scratchpad. Weights and
the graph's inputs and outputs live in DRAM; the buffers dnn.malloc makes
are SRAM (dnn-memory-pool then plans them into one pool: the scratchpad).
This pass, on buffer form with malloc/dealloc, makes every compute op obey
that rule with explicit DMA, whole buffer by whole buffer:

    op(%w)             =>  %s = dnn.malloc ; %t = dnn.dma_start ins(%w) outs(%s) {dram_to_sram}
                           dnn.dma_wait %t ; op(%s) ; dnn.dealloc %s
    op(outs %y)        =>  %s = dnn.malloc ; op(outs %s)
                           %t = dnn.dma_start ins(%s) outs(%y) {sram_to_dram} ; dnn.dma_wait %t ; dnn.dealloc %s

It is the staged form of the no-prefetch baseline (copy in, compute,
copy out; activations stay in SRAM): each wait follows its start. The
prefetching schedule of pyocc/planning/scratchpad/ is written as IR by
dnn-npu-schedule, which is what `pyocc run --scratchpad` runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import function_bodies, root_buffer
from pyocc.dialects.dnn import ops as d
from pyocc.dialects.dnn.dma import DmaStartOp, DmaWaitOp


def in_dram(value: SSAValue) -> bool:
    """True for bytes that live in DRAM: a weight, or a graph input or
    output (a function argument), seen through any view."""
    root = root_buffer(value)
    return isinstance(root, BlockArgument) or isinstance(root.owner, d.WeightOp)


def stage_op(op: d.DnnComputeOp) -> int:
    """Stage the DRAM operands of one buffer-form compute op through SRAM
    buffers; returns how many it staged."""
    reads = set(op.read_values())
    writes = set(op.destinations())
    staged = 0
    for value in list(dict.fromkeys(op.operands)):
        if not in_dram(value):
            continue
        sram = d.MallocOp(value.type)  # type: ignore[arg-type]
        sram.result.name_hint = f"{value.name_hint or 'dram'}_sram"
        before: list[Operation] = [sram]
        if value in reads:
            load = DmaStartOp(value, sram.result, "dram_to_sram")
            load.token.name_hint = f"{value.name_hint or 'dram'}_in"
            before += [load, DmaWaitOp(load.token)]
        Rewriter.insert_op(before, InsertPoint.before(op))
        after: list[Operation] = []
        if value in writes:
            store = DmaStartOp(sram.result, value, "sram_to_dram")
            store.token.name_hint = f"{value.name_hint or 'dram'}_out"
            after += [store, DmaWaitOp(store.token)]
        after.append(d.DeallocOp(sram.result))
        Rewriter.insert_op(after, InsertPoint.after(op))
        op.operands = [sram.result if operand == value else operand for operand in op.operands]
        staged += 1
    return staged


def stage_function(function: func.FuncOp) -> int:
    """Stage every compute op of a function; returns the buffers staged."""
    return sum(stage_op(op) for op in list(function.body.block.ops)
               if isinstance(op, d.DnnComputeOp) and op.on_buffers)


@dataclass(frozen=True)
class DnnScratchpadPass(ModulePass):
    """Compute reads and writes only SRAM: DMA in DRAM operands, DMA out
    DRAM results (see the module docstring)."""

    name = "dnn-scratchpad"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "buffers")
        functions = function_bodies(op)
        if any(isinstance(o, DmaStartOp) for f in functions for o in f.walk()):
            raise PassFailedException("dnn-scratchpad: the function has DMA already; run the pass once")
        for function in functions:
            stage_function(function)

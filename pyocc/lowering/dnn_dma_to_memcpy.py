"""`dnn-dma-to-memcpy`: run DMA on the host as plain copies.

On the host both memories are ordinary memory (two arenas: the planned pool
is the SRAM, the weights and the caller's inputs and outputs the DRAM), so
an asynchronous transfer becomes a synchronous copy and its wait has
nothing left to wait for:

    %t = dnn.dma_start ins(%a) outs(%b)  =>  dnn.memcpy(%a, %b) {kind = "host_to_host"}
    dnn.dma_wait %t                      =>  (nothing)

The functional result is the same as on the NPU; the timing is not (that is
the simulator's job).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from pyocc.dialects.dnn import ops as d
from pyocc.dialects.dnn.dma import DmaStartOp, DmaWaitOp


@dataclass(frozen=True)
class DnnDmaToMemcpyPass(ModulePass):
    """DMA start/wait pairs -> synchronous host copies (see the module docstring)."""

    name = "dnn-dma-to-memcpy"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for wait in [o for o in op.walk() if isinstance(o, DmaWaitOp)]:
            Rewriter.erase_op(wait)
        for start in [o for o in op.walk() if isinstance(o, DmaStartOp)]:
            copy = d.MemcpyOp.create(
                operands=[start.source, start.target],
                properties={"kind": StringAttr("host_to_host"), "size": IntegerAttr(start.size.value.data, i64)},
            )
            Rewriter.insert_op(copy, InsertPoint.before(start))
            Rewriter.erase_op(start)  # its token's waits are gone

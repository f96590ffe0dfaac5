"""`dnn-dma-to-memcpy`: run DMA on the host as plain copies.

On the host both memories are ordinary memory (two arenas: the planned pool
is the SRAM, the weights and the caller's inputs and outputs the DRAM), so
an asynchronous transfer becomes a synchronous copy and its wait has
nothing left to wait for:

    %t = dnn.dma_start ins(%a) outs(%b)  =>  dnn.memcpy(%a, %b) {kind = "host_to_host"}
    dnn.dma_wait %t                      =>  (nothing)

A band of rows (`rows = array<i64: lo, hi>`) is one copy per leading index
(per channel of NCHW) between `dnn.subview`s of the two sides, each of the
band's rows of that channel (one copy when the band is contiguous):

    %t = dnn.dma_start ins(%x : memref<1x2x4x3xf32>) outs(%b : memref<1x2x2x3xf32>) {rows = array<i64: 1, 3>, ...}
      =>  dnn.memcpy(subview %x at 12 B, subview %b at 0 B)   rows 1..2 of channel 0
          dnn.memcpy(subview %x at 60 B, subview %b at 24 B)  rows 1..2 of channel 1

The functional result is the same as on the NPU; the timing is not (that is
the simulator's job).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, StringAttr, i8, i64
from xdsl.passes import ModulePass
from xdsl.ir import Operation
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
            for copy in _copies(start):
                Rewriter.insert_op(copy, InsertPoint.before(start))
            Rewriter.erase_op(start)  # its token's waits are gone


def _copies(start: DmaStartOp) -> list[Operation]:
    """The host copies of one transfer (with the subviews a band needs)."""
    kind = StringAttr("host_to_host")
    if start.row_band() is None:
        return [d.MemcpyOp.create(operands=[start.source, start.target],
                                  properties={"kind": kind, "size": IntegerAttr(start.size.value.data, i64)})]
    ops: list[Operation] = []
    load = start.direction.data == "dram_to_sram"
    for dram_offset, sram_offset, nbytes in start.chunks():
        chunk = MemRefType(i8, [nbytes])
        dram = d.SubviewOp(start.dram_side(), dram_offset, chunk)
        sram = d.SubviewOp(start.sram_side(), sram_offset, chunk)
        source, target = (dram, sram) if load else (sram, dram)
        ops += [dram, sram, d.MemcpyOp.create(operands=[source.result, target.result],
                                              properties={"kind": kind, "size": IntegerAttr(nbytes, i64)})]
    return ops

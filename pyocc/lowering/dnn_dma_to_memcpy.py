"""`dnn-dma-to-memcpy`: run DMA on the host as plain copies.

On the host both memories are ordinary memory (two arenas: the planned pool
is the SRAM, the weights and the caller's inputs and outputs the DRAM), so
an asynchronous transfer becomes a synchronous copy and its wait has
nothing left to wait for:

    %t = dnn.dma_start ins(%a) outs(%b)  =>  dnn.memcpy(%a, %b) {kind = "host_to_host"}
    dnn.dma_wait %t                      =>  (nothing)

A band of rows (`rows = array<i64: lo, hi>`) is one strided copy: a chunk
per leading index (per channel of NCHW), `count` of them, from the band's
first byte of the DRAM side (a `dnn.subview`) a whole channel apart, packed
on the SRAM side (a plain copy when the band is contiguous):

    %t = dnn.dma_start ins(%x : memref<1x2x4x3xf32>) outs(%b : memref<1x2x2x3xf32>) {rows = array<i64: 1, 3>, ...}
      =>  %x1 = dnn.subview %x {offset = 12}                     rows 1.. of channel 0
          dnn.memcpy(%x1, %b) {size = 24, count = 2, source_stride = 48, target_stride = 24}
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr, i8
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


@functools.lru_cache(maxsize=4096)
def _bytes_type(size: int) -> MemRefType:
    """memref<size x i8>, made once per size (xDSL checks a type's
    parameters on every construction, a millisecond each)."""
    return MemRefType(i8, [size])


def _copies(start: DmaStartOp) -> list[Operation]:
    """The host copy of one transfer (after the subview a band needs)."""
    kind = StringAttr("host_to_host")
    if start.row_band() is None:
        return [d.MemcpyOp.create(operands=[start.source, start.target], properties={"kind": kind, "size": start.size})]
    offset, count, chunk, stride = start.chunks()
    dram_side = start.dram_side()
    span = chunk if count == 1 else d.type_bytes(dram_side.type) - offset
    dram = d.SubviewOp(dram_side, offset, _bytes_type(span))
    load = start.direction.data == "dram_to_sram"
    source, target = (dram.result, start.sram_side()) if load else (start.sram_side(), dram.result)
    properties = {"kind": kind, "size": d.i64_attr(chunk)}
    if count > 1:
        properties |= {"count": d.i64_attr(count), "source_stride": d.i64_attr(stride if load else chunk),
                       "target_stride": d.i64_attr(chunk if load else stride)}
    return [dram, d.MemcpyOp.create(operands=[source, target], properties=properties)]

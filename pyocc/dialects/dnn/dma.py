"""Asynchronous copies between an NPU's DRAM and its SRAM scratchpad.

`dnn.dma_start` starts a copy of `source` into `target` and returns a
`!dnn.dma_token`; `dnn.dma_wait` blocks until the copy behind a token is
done. Between the two, compute may run: that overlap is what prefetching and
double buffering buy. `direction` says which way the bytes go
(`dram_to_sram` brings data in, `sram_to_dram` writes it back), so a reader
of the IR, the simulator and the lowering need no pool lookup to know it.

    %t = dnn.dma_start ins(%w : memref<64xf32>) outs(%w_sram : memref<64xf32>) {direction = "dram_to_sram"} : !dnn.dma_token
    dnn.conv ins(...)        // runs while the copy is in flight
    dnn.dma_wait %t : !dnn.dma_token
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IntegerAttr, MemRefType, StringAttr, i64
from xdsl.ir import Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import EffectInstance, MemoryEffect, MemoryEffectKind
from xdsl.utils.exceptions import VerifyException

from pyocc.dialects.dnn.ops import type_bytes


@irdl_attr_definition
class DmaTokenType(ParametrizedAttribute, TypeAttribute):
    """The handle of one DMA transfer in flight: made by `dnn.dma_start`,
    consumed by exactly one `dnn.dma_wait`."""

    name = "dnn.dma_token"


class DmaEffects(MemoryEffect):
    """A transfer reads its source and writes its target (and a wait orders
    the program after that write): neither may be deleted or reordered as if
    it were pure, even when its token looks unused."""

    @classmethod
    def get_effects(cls, op: Operation) -> frozenset[EffectInstance]:
        return frozenset((EffectInstance(MemoryEffectKind.READ), EffectInstance(MemoryEffectKind.WRITE)))


@irdl_op_definition
class DmaStartOp(IRDLOperation):
    """Start copying `source` into `target` (same byte size) over the DRAM
    port; the copy runs concurrently with compute until its `dnn.dma_wait`."""

    name = "dnn.dma_start"
    DIRECTIONS: ClassVar[tuple[str, str]] = ("dram_to_sram", "sram_to_dram")
    source = operand_def(MemRefType)
    target = operand_def(MemRefType)
    direction = prop_def(StringAttr)
    """`dram_to_sram` (a load, prefetch) or `sram_to_dram` (a write-back, eviction)."""
    size = prop_def(IntegerAttr)
    """Bytes copied: what the transfer costs on the DRAM port."""
    token = result_def(DmaTokenType)
    traits = traits_def(DmaEffects())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "`ins` `(` $source `:` type($source) `)` `outs` `(` $target `:` type($target) `)` attr-dict `:` type($token)"
    )

    def __init__(self, source: SSAValue, target: SSAValue, direction: str):
        super().__init__(
            operands=[source, target],
            result_types=[DmaTokenType()],
            properties={"direction": StringAttr(direction),
                        "size": IntegerAttr(type_bytes(source.type), i64)},
        )

    def verify_(self) -> None:
        if self.direction.data not in self.DIRECTIONS:
            raise VerifyException(
                f"dnn.dma_start: direction must be one of {', '.join(self.DIRECTIONS)}, got {self.direction.data!r}"
            )
        source_bytes, target_bytes = type_bytes(self.source.type), type_bytes(self.target.type)
        if source_bytes != target_bytes:
            raise VerifyException(
                f"dnn.dma_start: source has {source_bytes} bytes but target has {target_bytes}: a transfer copies whole buffers"
            )
        if self.size.value.data != source_bytes:
            raise VerifyException(f"dnn.dma_start: size {self.size.value.data} is not the {source_bytes} bytes copied")
        if self.source == self.target:
            raise VerifyException("dnn.dma_start: source and target are the same buffer")
        waits = [use.operation for use in self.token.uses if isinstance(use.operation, DmaWaitOp)]
        if len(waits) != 1 or len(list(self.token.uses)) != 1:
            raise VerifyException(
                f"dnn.dma_start: its token must be waited on by exactly one dnn.dma_wait, found {len(list(self.token.uses))} uses"
            )


@irdl_op_definition
class DmaWaitOp(IRDLOperation):
    """Block until the transfer behind `token` has finished: after it, the
    target holds the source's bytes and the source may be overwritten."""

    name = "dnn.dma_wait"
    token = operand_def(DmaTokenType)
    traits = traits_def(DmaEffects())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$token attr-dict `:` type($token)"

    def __init__(self, token: SSAValue):
        super().__init__(operands=[token])

    def verify_(self) -> None:
        start = self.token.owner
        if not isinstance(start, DmaStartOp):
            raise VerifyException("dnn.dma_wait: the token must come from a dnn.dma_start")
        if start.parent_block() is not self.parent_block():
            raise VerifyException("dnn.dma_wait: the wait must be in the same block as its dnn.dma_start")


DMA_OPS = [DmaStartOp, DmaWaitOp]
DMA_TYPES = [DmaTokenType]

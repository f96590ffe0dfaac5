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

A transfer may move a band of rows: with `rows = array<i64: lo, hi>` its DRAM
side is the whole tensor and only rows [lo, hi) of its second-to-last axis
(H of NCHW) move, into (or out of) an SRAM buffer of the same shape with
hi - lo rows. The band is one strided chunk per leading index (per channel
of NCHW), so it is not a contiguous slice a `dnn.subview` could name:

    %t = dnn.dma_start ins(%x : memref<1x8x10x4xf32>) outs(%x_band : memref<1x8x3x4xf32>) {direction = "dram_to_sram", rows = array<i64: 2, 5>} : !dnn.dma_token
"""

from __future__ import annotations

from typing import ClassVar

import math

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, MemRefType, StringAttr, i64
from xdsl.ir import Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
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
    rows = opt_prop_def(DenseArrayBase)
    """[lo, hi): only these rows (of the second-to-last axis) of the DRAM
    side move; the SRAM side holds hi - lo rows. Absent: whole buffers."""
    token = result_def(DmaTokenType)
    traits = traits_def(DmaEffects())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "`ins` `(` $source `:` type($source) `)` `outs` `(` $target `:` type($target) `)` attr-dict `:` type($token)"
    )

    def __init__(self, source: SSAValue, target: SSAValue, direction: str, rows: tuple[int, int] | None = None):
        sram = target if direction == "dram_to_sram" else source
        properties = {"direction": StringAttr(direction), "size": IntegerAttr(type_bytes(sram.type), i64)}
        if rows is not None:
            properties["rows"] = DenseArrayBase.from_list(i64, list(rows))
        super().__init__(operands=[source, target], result_types=[DmaTokenType()], properties=properties)

    def dram_side(self) -> SSAValue:
        """The operand in DRAM: the source of a load, the target of a store."""
        return self.source if self.direction.data == "dram_to_sram" else self.target

    def sram_side(self) -> SSAValue:
        """The operand in SRAM: the target of a load, the source of a store."""
        return self.target if self.direction.data == "dram_to_sram" else self.source

    def row_band(self) -> tuple[int, int] | None:
        """The rows [lo, hi) of the DRAM side that move, None for whole buffers."""
        if self.rows is None:
            return None
        lo, hi = (int(v) for v in self.rows.get_values())
        return lo, hi

    def chunks(self) -> tuple[int, int, int, int]:
        """The transfer as equal contiguous copies: (DRAM byte offset of the
        first, count, bytes each, DRAM bytes between two); one copy for whole
        buffers or a contiguous band, one per leading index (channel) for a
        band of rows that is not the whole tensor. On the SRAM side the
        copies are packed."""
        band = self.row_band()
        size = self.size.value.data
        if band is None:
            return 0, 1, size, size
        shape = self.dram_side().type.get_shape()  # type: ignore[attr-defined]
        lo, hi = band
        outer = math.prod(shape[:-2])
        row_bytes = type_bytes(self.dram_side().type) // math.prod(shape) * shape[-1]
        if outer == 1 or (lo, hi) == (0, shape[-2]):
            return lo * row_bytes, 1, size, size
        return lo * row_bytes, outer, (hi - lo) * row_bytes, shape[-2] * row_bytes

    def verify_(self) -> None:
        if self.direction.data not in self.DIRECTIONS:
            raise VerifyException(
                f"dnn.dma_start: direction must be one of {', '.join(self.DIRECTIONS)}, got {self.direction.data!r}"
            )
        if self.rows is not None:
            self._verify_rows()
            return self._verify_token()
        source_bytes, target_bytes = type_bytes(self.source.type), type_bytes(self.target.type)
        if source_bytes != target_bytes:
            raise VerifyException(
                f"dnn.dma_start: source has {source_bytes} bytes but target has {target_bytes}: a transfer copies whole buffers"
            )
        if self.size.value.data != source_bytes:
            raise VerifyException(f"dnn.dma_start: size {self.size.value.data} is not the {source_bytes} bytes copied")
        if self.source == self.target:
            raise VerifyException("dnn.dma_start: source and target are the same buffer")
        self._verify_token()

    def _verify_rows(self) -> None:
        band = [int(v) for v in self.rows.get_values()]  # type: ignore[union-attr]
        dram, sram = self.dram_side().type, self.sram_side().type
        shape = list(dram.get_shape())  # type: ignore[attr-defined]
        if len(band) != 2 or len(shape) < 2 or not 0 <= band[0] < band[1] <= shape[-2]:
            raise VerifyException(
                f"dnn.dma_start: rows {band} are not a band [lo, hi) of the rows of the DRAM side {dram}"
            )
        want = [*shape[:-2], band[1] - band[0], shape[-1]]
        if list(sram.get_shape()) != want or sram.get_element_type() != dram.get_element_type():  # type: ignore[attr-defined]
            raise VerifyException(
                f"dnn.dma_start: a band of {band[1] - band[0]} rows needs an SRAM side of shape {want}, got {sram}"
            )
        if self.size.value.data != type_bytes(sram):
            raise VerifyException(f"dnn.dma_start: size {self.size.value.data} is not the {type_bytes(sram)} bytes copied")

    def _verify_token(self) -> None:
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

"""The `dnn` dialect: Occamy's DNN IR.

Compute ops map one-to-one onto a kernel call. Each op's name is the name of
its kernel (`dnn.conv` runs `conv`), its properties are the kernel's static
arguments, and its operands are the kernel's inputs in order. So the runtime
needs no table: it reads the op.

**Two forms, one definition.** Every compute op exists
- on tensors (value semantics, used by fusion): it has a result and no `out`;
- on buffers (destination-passing style, after dnn-insert-memory-ops): it has
  an `out` operand (a memref it writes) and no result.
The verifier requires exactly one of the two. Inputs follow the form: tensors
with a result, memrefs with an `out`.
Both print like a kernel call (`DnnComputeOp.print`):
`%y = dnn.conv ins(%x, %w, bias %b : ...) {pads = ...} : tensor<...>` and
`dnn.conv ins(%x, %w, bias %b : ...) outs(%y : memref<...>) {pads = ...}`.

**Memory ops**: `dnn.malloc`/`dnn.dealloc` (bytes and alignment),
`dnn.memcpy` (host/device), `dnn.pool_init` and `dnn.mem_offset(pool, offset,
size)` (Occamy's Mem-offset: a view at a planned offset), `dnn.view` (a
reshape that shares its operand's bytes), `dnn.subview` (a contiguous band
of a buffer, from dnn-coalesce), and `dnn.weight` (a read-only
constant, loaded once into the constant pool).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self, overload

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    TensorType,
    f32,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    ParsePropInAttrDict,
    IRDLOperation,
    OptOperandDef,
    VarOperandDef,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    ConstantLike,
    EffectInstance,
    MemoryEffect,
    MemoryEffectKind,
    OpTrait,
    Pure,
)
from xdsl.utils.exceptions import VerifyException

from pyocc.dialects.properties import property_value
from pyocc.dialects.dnn.scratch import conv_scratch_bytes, im2col_block_bytes, im2col_copies, im2col_row_bytes

TensorOrBuffer = TensorType | MemRefType


def element_bytes(t: Attribute) -> int:
    """Bytes per element of an element type (i1 is stored as one byte)."""
    width = getattr(t, "width", None) or getattr(t, "bitwidth", None)
    if width is None:
        raise VerifyException(f"element type {t} has no known size")
    width = width.data if hasattr(width, "data") else width
    return max(1, math.ceil(int(width) / 8))


def type_bytes(t: Attribute) -> int:
    """Bytes of a statically shaped tensor or memref type."""
    assert isinstance(t, TensorType | MemRefType), t
    return math.prod(t.get_shape()) * element_bytes(t.get_element_type())


@functools.lru_cache(maxsize=1 << 16)
def i64_attr(value: int) -> IntegerAttr:
    """IntegerAttr(value, i64), made once per value: xDSL checks an
    attribute's parameters on every construction, and a program names the
    same sizes, offsets and byte counts many times (every malloc and dealloc
    of a tiled program, a scheduled program's transfers)."""
    return IntegerAttr(value, i64)


@functools.lru_cache(maxsize=1024)
def _segment_sizes(sizes: tuple[int, ...]) -> DenseArrayBase:
    """A compute op's `operandSegmentSizes`, made once per layout (see i64_attr)."""
    return DenseArrayBase.from_list(i32, sizes)


# ---------------------------------------------------------------------------
# Compute ops
# ---------------------------------------------------------------------------


class KernelEffects(MemoryEffect):
    """A compute op's side effects follow its form: none on tensors (a value
    nobody reads can be deleted), a read and a write on buffers (the op
    exists for what it writes, though it has no result). Plain `Pure` would
    let dead-code elimination delete every buffer-form kernel call."""

    @classmethod
    def get_effects(cls, op: Operation) -> frozenset[EffectInstance]:
        if op.results:
            return frozenset()
        return frozenset((EffectInstance(MemoryEffectKind.READ), EffectInstance(MemoryEffectKind.WRITE)))


@dataclass(frozen=True)
class WritesInPlace(OpTrait):
    """The operands an op's kernel may overwrite with its result: the kernel
    reads each element of that input before or while it writes the same
    element of `out` (checked in pyocc/runtime/kernels). dnn-coalesce writes
    a result over such an input when the input dies there; dnn-reorder counts
    that write as needing no new bytes. A variadic operand names its first
    value."""

    operands: tuple[str, ...]

    def verify(self, op: Operation) -> None:
        fields = {name for name, _ in type(op).get_irdl_definition().operands}
        unknown = [name for name in self.operands if name not in fields]
        if unknown:
            raise VerifyException(f"{op.name}: WritesInPlace names operands it does not have: {unknown}")


@dataclass(frozen=True)
class Targets(OpTrait):
    """The targets whose lowering runs this op. Every compute op runs on
    "host" (its kernel is called by name, pyocc/runtime/kernels), so an op
    without this trait is host-only; an op that also names "cuda" has an
    entry in convert-dnn-to-cuda's lowering table (tests/dialects check the
    two agree). dnn-fuse produces an op only for the targets that run it."""

    names: tuple[str, ...]

    def verify(self, op: Operation) -> None:
        unknown = [name for name in self.names if name not in TARGETS]
        if unknown or "host" not in self.names:
            raise VerifyException(f"{op.name}: Targets must include 'host' and name only {list(TARGETS)}, got {list(self.names)}")


#: every target dnn lowers to
TARGETS: tuple[str, ...] = ("host", "cuda")
#: the `Targets` of an op both lowerings run
HOST_AND_CUDA = Targets(("host", "cuda"))


@dataclass(frozen=True)
class AliasesOperand(OpTrait):
    """The op's one result shares the bytes of its operand `operand` (a
    reshape or a band of it), owning nothing: liveness, the lifetime
    verifier, dnn-coalesce and dnn-memory-pool follow it to the buffer that
    owns the bytes (see `aliased_value`)."""

    operand: str = "source"

    def verify(self, op: Operation) -> None:
        fields = {name for name, _ in type(op).get_irdl_definition().operands}
        if self.operand not in fields or len(op.results) != 1:
            raise VerifyException(f"{op.name}: AliasesOperand needs one result and an operand '{self.operand}'")


def band_rows(first: int, end: int, extent: int, stride: int, pad_top: int, rows_in: int) -> tuple[int, int, int, int]:
    """The input rows [lo, hi) that output rows [first, end) of a row window
    (result row o reads [o * stride - pad_top, o * stride - pad_top + extent))
    read, clamped to the input's `rows_in`, and the (top, bottom) pads that
    replace what is clamped. Shared by the ops' `row_band` (the scratchpad's
    row bands) and the tiling pass's patches."""
    start = first * stride - pad_top
    stop = (end - 1) * stride - pad_top + extent
    lo, hi = max(0, start), min(rows_in, stop)
    return lo, hi, lo - start, stop - hi


def aliased_value(owner: Operation | Block) -> SSAValue | None:
    """The value whose bytes the result of `owner` shares, when `owner` is an
    op with the `AliasesOperand` trait; None otherwise (a block argument's
    owner is a block)."""
    if not isinstance(owner, Operation):
        return None
    trait = owner.get_trait(AliasesOperand)
    return None if trait is None else getattr(owner, trait.operand)


@dataclass(frozen=True)
class RowLocal(OpTrait):
    """Each row (axis 2 of NCHW) of the result depends only on a band of rows
    of the data input `x` (or `a`/`b`, a concat's inputs; a fused conv's
    `residual` row for row), and each column (axis 3) on a band of its
    columns: dnn-tile may run the op on a band of
    rows. `window`: the op slides a kernel along the rows (its `kernel_shape`
    or the weight `w`'s dim 2, with `strides`, `pads`, `dilations`); without
    it, row r of the result needs row r of the input (elementwise).
    `joins_channels`: the inputs are joined along the channels (axis 1, a
    concat), so their channel counts may differ from the result's."""

    window: bool = False
    joins_channels: bool = False


@dataclass(frozen=True)
class Recomputable(OpTrait):
    """The op is cheap next to keeping its result alive: a few operations
    per result element (a ReLU or another unary function, an add, a folded
    batch norm, an upsample), so dnn-recompute may compute it again just
    before a late reader instead of keeping the result alive in between.
    Recomputing it costs about `ops_per_element` operations per result
    element (what the report's `recompute_ops` counts; the op's `macs()`
    stays what it declares)."""

    ops_per_element: int = 1


#: the attribute dnn-memory-pool{threads} sets on an op whose workspace holds
#: one copy of its fitted scratch per thread (`DnnComputeOp.scratch_copies`): how many
SCRATCH_COPIES = "scratch_copies"


class DnnComputeOp(IRDLOperation):
    """Base of compute ops: the tensor/buffer form rule and kernel naming."""

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    #: operand fields that are not kernel inputs (destinations, workspace)
    NOT_INPUTS: ClassVar[frozenset[str]] = frozenset({"out", "outs", "workspace"})
    #: operand fields that are the buffers the op writes
    DESTINATIONS: ClassVar[frozenset[str]] = frozenset({"out", "outs"})

    @classmethod
    def build(
        cls,
        operands: Mapping[str, SSAValue | Sequence[SSAValue] | None],
        result_types: Sequence[Attribute] = (),
        properties: Mapping[str, Attribute] | None = None,
        attributes: Mapping[str, Attribute] | None = None,
    ) -> Self:
        """The op from its operands by field name (a missing or None entry is
        an absent optional operand, a list fills a variadic one), with
        `operandSegmentSizes` worked out (in place of a stale one, if
        `properties` has it): the one place that knows how xDSL lays out
        segmented operands."""
        flat: list[SSAValue] = []
        sizes: list[int] = []
        for name, _ in cls.get_irdl_definition().operands:
            value = operands.get(name)
            group = list(value) if isinstance(value, list | tuple) else ([] if value is None else [value])
            flat.extend(group)
            sizes.append(len(group))
        props = dict(properties or {})
        props["operandSegmentSizes"] = _segment_sizes(tuple(sizes))
        return cls.create(operands=flat, result_types=list(result_types), properties=props,
                          attributes=dict(attributes or {}))

    @classmethod
    def targets(cls) -> frozenset[str]:
        """The targets whose lowering runs this op (its `Targets` trait;
        host only without one)."""
        trait = cls.get_trait(Targets)
        return frozenset(("host",) if trait is None else trait.names)

    @property
    def kernel(self) -> str:
        """The kernel this op calls: its name without the dialect prefix."""
        return self.name.removeprefix("dnn.")

    @property
    def on_buffers(self) -> bool:
        """True in destination-passing (buffer) form."""
        return len(self.destinations()) > 0

    def destinations(self) -> list[SSAValue]:
        """The buffers this op writes (empty in tensor form)."""
        out = getattr(self, "out", None)
        if out is not None:
            return [out]
        return list(getattr(self, "outs", ()) or ())

    def kernel_inputs(self) -> list[SSAValue | None | list[SSAValue]]:
        """The kernel's positional inputs in order; None for an absent optional
        input, a list for a variadic one."""
        inputs: list[SSAValue | None | list[SSAValue]] = []
        for name, _ in self.get_irdl_definition().operands:
            if name in self.NOT_INPUTS:
                continue
            value = getattr(self, name)
            inputs.append(list(value) if isinstance(value, tuple | list) else value)
        return inputs

    def read_values(self) -> list[SSAValue]:
        """Every value this op reads (inputs and workspace)."""
        read: list[SSAValue] = []
        for value in self.kernel_inputs():
            if isinstance(value, list):
                read.extend(value)
            elif value is not None:
                read.append(value)
        return read

    def in_place_inputs(self) -> list[SSAValue]:
        """The present inputs this op's kernel may overwrite with its result
        (its `WritesInPlace` trait; none without one)."""
        trait = self.get_trait(WritesInPlace)
        if trait is None:
            return []
        values: list[SSAValue] = []
        for name in trait.operands:
            value = getattr(self, name)
            if isinstance(value, tuple | list):
                value = value[0] if value else None
            if value is not None:
                values.append(value)
        return values

    def output_type(self) -> TensorType | MemRefType:
        """The type of the (first) value this op produces, in either form."""
        return self.results[0].type if self.results else self.destinations()[0].type  # type: ignore[return-value]

    def macs(self) -> int:
        """Multiply-accumulates of one run of the kernel; 0 for ops whose
        cost is data movement or a few flops per element."""
        return 0

    def splits_by_rows(self) -> bool:
        """True when a band of the result's rows (axis 2 of NCHW, the second
        to last of a higher rank) needs only
        a band of each input's rows, so the op may run band by band (the
        scratchpad scheduler's row tiling): `splits_along(-2)`."""
        return self.splits_along(-2)

    def splits_along(self, axis: int) -> bool:
        """True when a band of the result along `axis` (-2: the rows, -1:
        the columns) needs only a band of each input along it: the
        `RowLocal` ops (local along the columns too), and ops that say so
        for their properties (a concat along another axis)."""
        return self.get_trait(RowLocal) is not None

    def row_windows(self) -> dict[str, tuple[int, int, int]] | None:
        """How the op runs on a band of its result's rows (the second to
        last axis, H of NCHW), for the scratchpad's row tiling: operand name
        -> (extent, stride, pad_top): result row o reads rows
        [o * stride - pad_top, o * stride - pad_top + extent) of that operand
        (clamped to it; the pads make up what is clamped). A sliding op's `x`
        has its kernel's window, a row-for-row operand (1, 1, 0); operands
        not named (weights, a broadcast along the rows) are read whole.
        None when the op cannot run on a band (`splits_by_rows` false, rank
        below 4, a window whose rows do not add up)."""
        return self.axis_windows(-2)

    def col_windows(self) -> dict[str, tuple[int, int, int]] | None:
        """As `row_windows`, along the columns (the last axis, W of NCHW):
        operand name -> (extent, stride, pad_left). The scratchpad's floor
        for every schedule reads it (`pyocc.planning.scratchpad.cones`)."""
        return self.axis_windows(-1)

    def axis_windows(self, axis: int) -> dict[str, tuple[int, int, int]] | None:
        """`row_windows` (axis -2) or `col_windows` (axis -1)."""
        if axis not in (-2, -1):
            raise ValueError(f"axis_windows: axis {axis} is neither -2 (the rows) nor -1 (the columns)")
        if not self.splits_along(axis):
            return None
        out_shape = self.output_type().get_shape()
        if len(out_shape) < 4:
            return None
        rows = out_shape[axis]
        windows: dict[str, tuple[int, int, int]] = {}
        sliding = "pads" in self.get_irdl_definition().properties
        for name, _ in self.get_irdl_definition().operands:
            if name in self.NOT_INPUTS:
                continue
            value = getattr(self, name)
            group = list(value) if isinstance(value, tuple | list) else ([] if value is None else [value])
            if not group:
                continue
            if sliding and name == "x":
                window = self._window(axis)
                if window is None:
                    return None
                windows[name] = window
            elif sliding and name == "w":
                continue  # the filter: read whole
            elif all(len(v.type.get_shape()) == len(out_shape) and v.type.get_shape()[axis] == rows for v in group):
                windows[name] = (1, 1, 0)
            elif any(len(v.type.get_shape()) >= 2 and v.type.get_shape()[axis] != 1 for v in group):
                return None  # rows (columns) that are not the result's
        return windows or None

    def _window(self, axis: int) -> tuple[int, int, int] | None:
        """(extent, stride, pad before) of a sliding op's window over `x`
        along `axis` (-2: rows, -1: columns)."""
        x = self.x  # type: ignore[attr-defined]
        w = getattr(self, "w", None)
        index = axis + 2  # of the two spatial axes: 0 rows, 1 columns
        if w is not None:
            if len(w.type.get_shape()) != 4:
                return None
            kernel = w.type.get_shape()[axis]
        else:
            shape = getattr(self, "kernel_shape", None)
            if shape is None or len(shape.get_values()) != 2:
                return None
            kernel = int(shape.get_values()[index])

        def value(name: str, default: int, at: int) -> int:
            attr = getattr(self, name, None)
            return int(attr.get_values()[at]) if attr is not None else default

        extent = (kernel - 1) * value("dilations", 1, index) + 1
        stride, top, bottom = value("strides", 1, index), value("pads", 0, index), value("pads", 0, index + 2)
        rows_in, rows_out = x.type.get_shape()[axis], self.output_type().get_shape()[axis]
        if (rows_in + top + bottom - extent) // stride + 1 != rows_out:
            ceil = getattr(self, "ceil_mode", None)
            counts_pad = getattr(self, "count_include_pad", None)
            if ceil is None or ceil.value.data == 0 or (counts_pad is not None and counts_pad.value.data):
                return None
            # ceil_mode: the last window hangs past the pad; a band's own
            # bottom pad covers it (pads never count)
        return extent, stride, top

    def row_band(self, first: int, end: int) -> tuple[dict[str, tuple[int, int]], dict[str, Attribute]] | None:
        """The op on its result's rows [first, end): (operand name -> the
        rows [lo, hi) of it the band reads, the band's properties: a sliding
        op's pads replaced by what its band lacks, the top pad on the first
        band only, the bottom on the last), or None (see `row_windows`)."""
        windows = self.row_windows()
        if windows is None:
            return None
        properties = dict(self.properties)
        reads: dict[str, tuple[int, int]] = {}
        for name, (extent, stride, pad_top) in windows.items():
            value = getattr(self, name)
            rows_in = (value[0] if isinstance(value, tuple | list) else value).type.get_shape()[-2]
            lo, hi, pad_above, pad_below = band_rows(first, end, extent, stride, pad_top, rows_in)
            reads[name] = (lo, hi)
            if name == "x" and "pads" in self.get_irdl_definition().properties:  # the sliding window's input
                pads = [int(v) for v in properties["pads"].get_values()] if "pads" in properties else [0, 0, 0, 0]  # type: ignore[attr-defined]
                pads[0], pads[len(pads) // 2] = pad_above, pad_below
                properties["pads"] = DenseArrayBase.from_list(i64, pads)
                if "ceil_mode" in properties:
                    properties["ceil_mode"] = IntegerAttr(0, i64)
        return reads, properties

    def joined_channels(self) -> tuple[int, ...] | None:
        """When the result is the inputs laid side by side along the
        channels (axis 1, every axis before it of extent 1, so each input is
        one contiguous channel band of the result), the channel count of
        each input in order: producers may then write their band of the
        result in place (the scratchpad scheduler's in-place concat). None
        (the default) for every other op."""
        return None

    def channel_split(self) -> tuple[int, dict[str, int]] | None:
        """How the op runs on a block of its output channels (axis 1 of an
        NCHW result, the last axis of a matrix), for the scratchpad
        scheduler's weight streaming: (output channels, operand name ->
        axis): each named operand is sliced along its axis in proportion
        to the block (a filter's rows, a bias's entries); `channel_block`
        says what else a block reads. None (the default): the op cannot be
        split by channels."""
        return None

    def channel_block(self, lo: int, hi: int) -> tuple[dict[str, tuple[int, int, int]], dict[str, Attribute]] | None:
        """The op on output channels [lo, hi): (operand name -> (axis,
        start, stop) of the slice it reads, the block's properties), or
        None when such a block cannot run. By default `channel_split`'s
        operands in proportion and the same properties."""
        split = self.channel_split()
        if split is None:
            return None
        channels, axes = split
        slices: dict[str, tuple[int, int, int]] = {}
        for name, axis in axes.items():
            value = getattr(self, name, None)
            if value is None:
                continue
            extent = value.type.get_shape()[axis]
            if extent == 1:  # broadcast: every block reads it whole
                continue
            slices[name] = (axis, lo * extent // channels, hi * extent // channels)
        return slices, dict(self.properties)

    def reduction_split(self) -> tuple[int, dict[str, int]] | None:
        """How the op's sum runs over blocks of its reduced axis (a
        convolution's input channels, a matrix product's inner dimension),
        for the scratchpad scheduler's input-channel blocks: (the reduced
        length, operand name -> axis): a block reads the named operands'
        slices along their axes in proportion (the input's channels, the
        filters' input channels); `reduction_block` says how the partial
        sums add up. None (the default): the op does not sum over an axis
        it can split."""
        return None

    def reduction_block(self, lo: int, hi: int, first: bool, last: bool
                        ) -> tuple[dict[str, tuple[int, int, int]], dict[str, Attribute], str, tuple[str, ...]] | None:
        """The op on the reduced block [lo, hi) (`reduction_split`): (operand
        name -> (axis, start, stop) of its slice, the block's properties, the
        operand that takes the running sum of the blocks before it (the
        output buffer of the earlier block, added element by element), the
        operands the block leaves out), or None. The `first` block alone
        adds what the op adds once (a bias, a residual); the `last` alone
        applies the fused activation. None by default."""
        return None

    def kernel_attributes(self) -> dict[str, Attribute]:
        """The static kernel arguments (properties minus bookkeeping)."""
        return {k: v for k, v in self.properties.items() if k != "operandSegmentSizes"}

    def kernel_kwargs(self) -> dict[str, Any]:
        """The kernel's keyword arguments as Python values (ints, floats,
        strings, lists): every property that is set, a default from the op
        definition for one that is not, and no entry for an absent property
        without a default (the kernel's argument is then None). The one
        reader of properties for lowerings."""
        kwargs: dict[str, Any] = {}
        for name, definition in self.get_irdl_definition().properties.items():
            if name == "operandSegmentSizes":
                continue
            attr = self.properties.get(name, definition.default_value)
            if attr is not None:
                kwargs[name] = property_value(attr)
        return kwargs

    # -- custom syntax ---------------------------------------------------------
    #
    #   %r = dnn.conv ins(%x, %w, bias %b : tensor<..>, tensor<..>, tensor<..>) {strides = array<i64: 2, 2>} : tensor<..>
    #   dnn.conv ins(%x, %w, bias %b : memref<..>, ...) outs(%o, workspace %ws : memref<..>, memref<..>)
    #
    # `ins` holds the kernel inputs, `outs` the destinations and the workspace
    # (NOT_INPUTS), each group in definition order: a required operand as a
    # bare value, an optional one after its field name (absent: left out), a
    # variadic one as a `[...]` list, or bare when it is its group's only
    # operand (concat's inputs, split's outs). The types follow in the same
    # order. Properties equal to their default are elided; properties and
    # discardable attributes share one dictionary. Results' types come last.

    @classmethod
    def _operand_groups(cls) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """The operand fields of `ins` and `outs`, each as (name, kind) with
        kind "single", "optional" (written with its name) or "variadic"."""
        ins: list[tuple[str, str]] = []
        outs: list[tuple[str, str]] = []
        for name, field in cls.get_irdl_definition().operands:
            if isinstance(field, OptOperandDef):
                kind = "single" if name in cls.DESTINATIONS else "optional"
            elif isinstance(field, VarOperandDef):
                kind = "variadic"
            else:
                kind = "single"
            (outs if name in cls.NOT_INPUTS else ins).append((name, kind))
        return ins, outs

    def _print_group(self, printer: Printer, keyword: str, fields: list[tuple[str, str]]) -> None:
        """Print ` keyword(entries : types)` for the given operand fields."""
        entries: list[str | SSAValue | list[SSAValue]] = []  # a bare value, a list, or a name before the next value
        values: list[SSAValue] = []
        for name, kind in fields:
            value = getattr(self, name)
            if kind == "variadic":
                group = list(value)
                if len(fields) == 1:
                    entries.extend(group)
                else:
                    entries.append(group)
                values.extend(group)
            elif value is not None:
                entries.extend([name, value] if kind == "optional" else [value])
                values.append(value)
        printer.print_string(f" {keyword}(")
        separator = ""
        for entry in entries:
            printer.print_string(separator)
            if isinstance(entry, str):
                printer.print_string(f"{entry} ")
                separator = ""
                continue
            if isinstance(entry, list):
                printer.print_string("[")
                printer.print_list(entry, printer.print_ssa_value)
                printer.print_string("]")
            else:
                printer.print_ssa_value(entry)
            separator = ", "
        if values:
            printer.print_string(" : ")
            printer.print_list([v.type for v in values], printer.print_attribute)
        printer.print_string(")")

    def print(self, printer: Printer) -> None:
        ins, outs = self._operand_groups()
        if ins:
            self._print_group(printer, "ins", ins)
        if any(getattr(self, name) not in (None, ()) for name, _ in outs):
            self._print_group(printer, "outs", outs)
        definitions = self.get_irdl_definition().properties
        shown = {name: attr for name, attr in self.properties.items()
                 if name != "operandSegmentSizes" and attr != definitions[name].default_value}
        printer.print_op_attributes({**shown, **self.attributes})
        if self.results:
            printer.print_string(" : ")
            printer.print_list([r.type for r in self.results], printer.print_attribute)

    @classmethod
    def _parse_group(cls, parser: Parser, keyword: str, fields: list[tuple[str, str]],
                     operands: dict[str, SSAValue | list[SSAValue] | None]) -> None:
        """Parse `keyword(entries : types)` into `operands` by field name."""
        start = parser.pos
        positional = [name for name, kind in fields if kind != "optional"]
        named = {name for name, kind in fields if kind == "optional"}
        flat_variadic = len(fields) == 1 and fields[0][1] == "variadic"
        parsed: list[tuple[str, list[UnresolvedOperand], bool]] = []  # (field, values, is a list)
        parser.parse_punctuation("(")
        while True:
            if parser.parse_optional_punctuation("["):
                values: list[UnresolvedOperand] = []
                while (operand := parser.parse_optional_unresolved_operand()) is not None:
                    values.append(operand)
                    if not parser.parse_optional_punctuation(","):
                        break
                parser.parse_punctuation("]")
                entry: tuple[list[UnresolvedOperand], bool, str | None] = (values, True, None)
            elif (operand := parser.parse_optional_unresolved_operand()) is not None:
                entry = ([operand], False, None)
            elif (name := parser.parse_optional_identifier()) is not None:
                if name not in named:
                    parser.raise_error(f"{cls.name}: {keyword}(...) has no optional operand '{name}' "
                                       f"(expected one of {sorted(named)})")
                if any(field == name for field, _, _ in parsed):
                    parser.raise_error(f"{cls.name}: {keyword}(...) names '{name}' twice")
                entry = ([parser.parse_unresolved_operand()], False, name)
            else:
                break
            values, is_list, name = entry
            if name is not None:
                parsed.append((name, values, False))
            elif flat_variadic:
                parsed.append((fields[0][0], values, True))
            else:
                taken = sum(1 for field, _, _ in parsed if field in positional)
                if taken >= len(positional):
                    parser.raise_error(f"{cls.name}: too many operands in {keyword}(...); it takes {positional} "
                                       f"and the named {sorted(named)}")
                field = positional[taken]
                if is_list != (dict(fields)[field] == "variadic"):
                    parser.raise_error(f"{cls.name}: operand '{field}' in {keyword}(...) "
                                       f"{'is a [...] list' if not is_list else 'is a single value, not a list'}")
                parsed.append((field, values, is_list))
            if not parser.parse_optional_punctuation(","):
                break
        count = sum(len(values) for _, values, _ in parsed)
        types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type) \
            if parser.parse_optional_punctuation(":") else []
        parser.parse_punctuation(")")
        if len(types) != count:
            parser.raise_error(f"{cls.name}: {keyword}(...) has {count} operands and {len(types)} types; "
                               "give one type per operand", start, parser.pos)
        missing = [f for f in positional if f not in {field for field, _, _ in parsed}
                   and not (flat_variadic and f == fields[0][0])]
        if missing:
            parser.raise_error(f"{cls.name}: {keyword}(...) lacks the operands {missing}", start, parser.pos)
        remaining = iter(types)
        for field, values, is_list in parsed:
            resolved = [parser.resolve_operand(v, next(remaining)) for v in values]
            if is_list:
                group = operands.setdefault(field, [])
                assert isinstance(group, list)
                group.extend(resolved)
            else:
                operands[field] = resolved[0]

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        ins, outs = cls._operand_groups()
        operands: dict[str, SSAValue | list[SSAValue] | None] = {}
        if ins:
            parser.parse_keyword("ins", f" ({cls.name} lists its inputs as ins(values : types))")
            cls._parse_group(parser, "ins", ins, operands)
        if parser.parse_optional_keyword("outs"):
            cls._parse_group(parser, "outs", outs, operands)
        entries = parser.parse_optional_attr_dict()
        definitions = cls.get_irdl_definition().properties
        properties = {k: v for k, v in entries.items() if k in definitions}
        attributes = {k: v for k, v in entries.items() if k not in definitions}
        result_types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type) \
            if parser.parse_optional_punctuation(":") else []
        return cls.build(operands, result_types, properties, attributes)

    def scratch_bytes(self) -> int:
        """Bytes of scratch the host's native kernel needs beside its inputs
        and outputs (im2col columns, ...): dnn-insert-memory-ops plans them
        as the op's `workspace` operand. 0, the default: none. An op that
        returns more must have a `workspace` operand."""
        return 0

    def scratch_min_bytes(self) -> int:
        """The least scratch the native kernel can work with (it loops over
        blocks of whatever size the plan gives, from this up to
        `scratch_bytes()`); the default: all of `scratch_bytes()`."""
        return self.scratch_bytes()

    def scratch_copies(self, fitted_bytes: int, threads: int) -> int:
        """How many copies of its scratch, each `fitted_bytes` (the size the
        plan fitted for one thread), the native kernel runs on `threads`
        threads (one per thread that runs blocks on it apart); 1, the
        default: one scratch whatever the thread count."""
        return 1

    def verify_(self) -> None:
        has_results = len(self.results) > 0
        if has_results == self.on_buffers:
            raise VerifyException(
                f"{self.name}: an op has either results (tensor form) or destination "
                "buffers (buffer form), exactly one of the two"
            )
        want = TensorType if has_results else MemRefType
        for value in self.read_values():
            if not isinstance(value.type, want):
                form = "tensor" if has_results else "buffer"
                raise VerifyException(
                    f"{self.name}: in {form} form every input must be a "
                    f"{'tensor' if has_results else 'memref'}, got {value.type}"
                )


# Property declarations. A property whose kernel argument has a default
# declares it (`_int(1)`): xDSL fills it in when the op is created, so every
# reader sees the value the kernel uses, and the custom syntax leaves it out.
# A property without one is absent when the kernel's argument is None (a
# rank-dependent default such as strides, or "no activation").


def _ints() -> DenseArrayBase | None:
    return opt_prop_def(DenseArrayBase)


@overload
def _int() -> IntegerAttr | None: ...
@overload
def _int(default: int) -> IntegerAttr: ...
def _int(default: int | None = None) -> IntegerAttr | None:
    if default is None:
        return opt_prop_def(IntegerAttr)
    return prop_def(IntegerAttr, default_value=IntegerAttr(default, i64))


@overload
def _float() -> FloatAttr | None: ...
@overload
def _float(default: float) -> FloatAttr: ...
def _float(default: float | None = None) -> FloatAttr | None:
    if default is None:
        return opt_prop_def(FloatAttr)
    return prop_def(FloatAttr, default_value=FloatAttr(default, f32))


@overload
def _str() -> StringAttr | None: ...
@overload
def _str(default: str) -> StringAttr: ...
def _str(default: str | None = None) -> StringAttr | None:
    if default is None:
        return opt_prop_def(StringAttr)
    return prop_def(StringAttr, default_value=StringAttr(default))


class UnaryKernelOp(DnnComputeOp):
    """One input `x`, one output."""

    x = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())


def _channelwise_split(op: UnaryKernelOp) -> tuple[int, dict[str, int]] | None:
    """`channel_split` of an op whose output channel c reads only input
    channel c (a pooling, an elementwise function) on a batch of one NCHW
    tensor: a block of output channels reads its input channels."""
    x_shape, out_shape = op.x.type.get_shape(), op.output_type().get_shape()
    if len(out_shape) != 4 or len(x_shape) != 4 or x_shape[0] != 1 or x_shape[1] != out_shape[1]:
        return None
    return out_shape[1], {"x": 1}


@irdl_op_definition
class ConvOp(DnnComputeOp):
    """Convolution with optional fused bias, residual add and activation:
    out = act(conv(x, w) + bias + residual); with `shuffle` = s, its M
    output channels, read as s groups of M/s, are stored transposed: channel
    a*(M/s) + b at b*s + a (ShuffleNet's channel shuffle, Reshape-Transpose-
    Reshape, folded into the convolution before it by dnn-fuse)."""

    name = "dnn.conv"
    x = operand_def(TensorOrBuffer)
    w = operand_def(TensorOrBuffer)
    bias = opt_operand_def(TensorOrBuffer)
    residual = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    workspace = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), WritesInPlace(("residual",)), HOST_AND_CUDA, RowLocal(window=True))
    strides = _ints()
    pads = _ints()
    dilations = _ints()
    group = _int(1)
    activation = _str()
    alpha = _float()
    beta = _float()
    shuffle = _int()

    def verify_(self) -> None:
        super().verify_()
        _verify_fused_conv(self)
        shuffle = self.shuffles()
        if shuffle > 1 and (self.output_type().get_shape()[1] % shuffle or self.residual is not None):
            raise VerifyException(f"{self.name}: shuffle {shuffle} needs output channels divisible by it "
                                  f"({self.output_type().get_shape()[1]}) and no residual")

    def shuffles(self) -> int:
        """The channel shuffle's number of groups (1: none)."""
        return self.shuffle.value.data if self.shuffle is not None else 1

    def scratch_bytes(self) -> int:
        """The im2col columns of one image when the native kernel needs them
        (pyocc.dialects.dnn.scratch); float32 only, the type it runs natively."""
        out_type = self.results[0].type if self.results else self.out.type  # type: ignore[union-attr]
        if not isinstance(out_type.get_element_type(), Float32Type):
            return 0
        return conv_scratch_bytes(
            self.x.type.get_shape(), self.w.type.get_shape(), out_type.get_shape(),
            self.strides.get_values() if self.strides else None,
            self.pads.get_values() if self.pads else None,
            self.group.value.data if self.group else None, 4, shuffle=self.shuffles())

    def scratch_min_bytes(self) -> int:
        """One output row's im2col columns (the kernel's smallest block), when
        it needs scratch at all."""
        return min(self.scratch_bytes(), im2col_row_bytes(self.w.type.get_shape(), self.output_type().get_shape(), 4))

    def scratch_copies(self, fitted_bytes: int, threads: int) -> int:
        """One im2col workspace per thread (group 1) when a block's sgemm is
        too small to split between the threads (`im2col_copies`)."""
        if self.scratch_bytes() <= 0 or (self.group and self.group.value.data != 1):
            return 1
        return im2col_copies(self.x.type.get_shape(), self.w.type.get_shape(), self.output_type().get_shape(),
                             fitted_bytes, threads)

    def macs(self) -> int:
        """Output elements times the input channels and taps each one sums."""
        return math.prod(self.output_type().get_shape()) * math.prod(self.w.type.get_shape()[1:])

    def channel_split(self) -> tuple[int, dict[str, int]] | None:
        """A block of output channels needs its filters, bias and residual
        channels (and, grouped, the input channels of its groups); shuffled,
        a block's channels are not stored together, so there is none."""
        return _conv_channel_split(self) if self.shuffles() == 1 else None

    def reduction_split(self) -> tuple[int, dict[str, int]] | None:
        """Group 1, a batch of one, not shuffled: a block of input channels
        reads its channels of `x` and of the filters."""
        return _conv_reduction_split(self) if self.shuffles() == 1 else None

    def reduction_block(self, lo: int, hi: int, first: bool, last: bool
                        ) -> tuple[dict[str, tuple[int, int, int]], dict[str, Attribute], str, tuple[str, ...]] | None:
        """The running sum comes in as the `residual` (the kernel reads
        each element before it writes it); bias and residual in the first
        block, the activation in the last."""
        return _conv_reduction_block(self, lo, hi, first, last)

    def channel_block(self, lo: int, hi: int) -> tuple[dict[str, tuple[int, int, int]], dict[str, Attribute]] | None:
        """Grouped: a block inside one group reads that group's input
        channels as a group-1 convolution; a block of whole groups reads
        theirs, with its number of groups; a block across part of a group
        cannot run."""
        block = super().channel_block(lo, hi)
        group = self.group.value.data if self.group is not None else 1
        if block is None or group == 1:
            return block
        slices, properties = block
        per_out = self.w.type.get_shape()[0] // group
        per_in = self.x.type.get_shape()[1] // group
        first, last = lo // per_out, (hi - 1) // per_out
        if first == last:
            groups = 1
        elif lo % per_out == 0 and hi % per_out == 0:
            groups = last + 1 - first
        else:
            return None
        slices["x"] = (1, first * per_in, (last + 1) * per_in)
        properties["group"] = IntegerAttr(groups, i64)
        return slices, properties


def _conv_channel_split(op: ConvOp | PreActConvOp) -> tuple[int, dict[str, int]] | None:
    """`channel_split` of a (pre-activated) convolution of a batch of one."""
    group = op.group.value.data if op.group is not None else 1
    if op.x.type.get_shape()[0] != 1 or (group != 1 and isinstance(op, PreActConvOp)):
        return None
    return op.w.type.get_shape()[0], {"w": 0, "bias": 0, "residual": 1}


def _conv_reduction_split(op: ConvOp | PreActConvOp) -> tuple[int, dict[str, int]] | None:
    """`reduction_split` of a (pre-activated) convolution: group 1, a batch of
    one; the pre-activation's per-input-channel scale and shift are sliced
    with the input channels."""
    group = op.group.value.data if op.group is not None else 1
    if group != 1 or op.x.type.get_shape()[0] != 1 or len(op.w.type.get_shape()) != 4:
        return None
    axes = {"x": 1, "w": 1}
    if isinstance(op, PreActConvOp):
        axes |= {"pre_scale": 0, "pre_shift": 0}
    return op.x.type.get_shape()[1], axes


#: the properties of a fused activation, which only the last block of a sum applies
_ACTIVATION_PROPERTIES = ("activation", "alpha", "beta")


def _conv_reduction_block(op: ConvOp | PreActConvOp, lo: int, hi: int, first: bool, last: bool
                          ) -> tuple[dict[str, tuple[int, int, int]], dict[str, Attribute], str, tuple[str, ...]] | None:
    """`reduction_block` of a (pre-activated) convolution (see `ConvOp.reduction_block`)."""
    split = _conv_reduction_split(op)
    if split is None:
        return None
    channels, axes = split
    slices = {name: (axis, lo, hi) for name, axis in axes.items()}
    properties = dict(op.properties)
    if not last:
        for key in _ACTIVATION_PROPERTIES:
            properties.pop(key, None)
    dropped = () if first else tuple(n for n in ("bias",) if getattr(op, n) is not None)
    return slices, properties, "residual", dropped


@irdl_op_definition
class PreActConvOp(DnnComputeOp):
    """Convolution of a pre-activated input (dnn-fuse's DenseNet rule):
    out = act(conv(pre_act(x * pre_scale[c] + pre_shift[c]), w) + bias + residual).

    The per-channel affine and `pre_activation` (none or relu) are applied
    inside the host kernel, so the pre-activated tensor is never a buffer
    there; on target=cuda it is written to a scratch buffer (`workspace`)
    live only while the op runs."""

    name = "dnn.preact_conv"
    x = operand_def(TensorOrBuffer)
    pre_scale = operand_def(TensorOrBuffer)
    pre_shift = operand_def(TensorOrBuffer)
    w = operand_def(TensorOrBuffer)
    bias = opt_operand_def(TensorOrBuffer)
    residual = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    workspace = opt_operand_def(MemRefType)
    """target=cuda: the scratch buffer the pre-activated input is written to
    (dnn-cuda-scratch); on the host (native kernels), the native
    kernel's im2col blocks (`scratch_bytes`)."""
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), WritesInPlace(("residual",)), HOST_AND_CUDA, RowLocal(window=True))
    pre_activation = _str()
    strides = _ints()
    pads = _ints()
    dilations = _ints()
    group = _int(1)
    activation = _str()
    alpha = _float()
    beta = _float()

    def verify_(self) -> None:
        super().verify_()
        _verify_fused_conv(self)
        channels = self.x.type.get_shape()[1]
        for operand in (self.pre_scale, self.pre_shift):
            if list(operand.type.get_shape()) != [channels]:
                raise VerifyException(
                    f"{self.name}: pre_scale and pre_shift must be vectors of the input's {channels} channels, "
                    f"got {operand.type}"
                )
        if self.pre_activation is not None and self.pre_activation.data != "relu":
            raise VerifyException(f"{self.name}: pre_activation must be relu or absent, got {self.pre_activation.data!r}")

    def macs(self) -> int:
        """Output elements times the input channels and taps each one sums."""
        return math.prod(self.output_type().get_shape()) * math.prod(self.w.type.get_shape()[1:])

    def splits_along(self, axis: int) -> bool:
        """A band of output rows (columns) needs a band of input rows
        (columns), as for `dnn.conv` (the pre-activation is per element).
        Not `RowLocal`: dnn-tile does not run it on patches."""
        return True

    def channel_split(self) -> tuple[int, dict[str, int]] | None:
        """As for `dnn.conv` (the pre-activation's per-input-channel
        scale and shift are read whole by every block); group 1 only."""
        return _conv_channel_split(self)

    def reduction_split(self) -> tuple[int, dict[str, int]] | None:
        """As for `dnn.conv`, the pre-activation's scale and shift sliced
        with the input channels."""
        return _conv_reduction_split(self)

    def reduction_block(self, lo: int, hi: int, first: bool, last: bool
                        ) -> tuple[dict[str, tuple[int, int, int]], dict[str, Attribute], str, tuple[str, ...]] | None:
        """As for `dnn.conv`: the running sum comes in as the `residual`."""
        return _conv_reduction_block(self, lo, hi, first, last)

    def scratch_bytes(self) -> int:
        """One block of pre-activated im2col columns (group 1, float32; pointwise
        convolutions too: the input must be pre-activated somewhere)."""
        out_type = self.results[0].type if self.results else self.out.type  # type: ignore[union-attr]
        if not isinstance(out_type.get_element_type(), Float32Type) or (self.group and self.group.value.data != 1):
            return 0
        return im2col_block_bytes(self.x.type.get_shape(), self.w.type.get_shape(), out_type.get_shape(), 4)

    def scratch_min_bytes(self) -> int:
        """One output row's pre-activated im2col columns (the smallest block)."""
        return min(self.scratch_bytes(), im2col_row_bytes(self.w.type.get_shape(), self.output_type().get_shape(), 4))

    def scratch_copies(self, fitted_bytes: int, threads: int) -> int:
        """As for `dnn.conv` (`im2col_copies`; scratch is group 1 only)."""
        if self.scratch_bytes() <= 0:
            return 1
        return im2col_copies(self.x.type.get_shape(), self.w.type.get_shape(), self.output_type().get_shape(),
                             fitted_bytes, threads)


#: activations a kernel can fuse onto its result (host_kernels.ACTIVATIONS)
FUSED_ACTIVATIONS: frozenset[str] = frozenset(
    {"relu", "leaky_relu", "clip", "sigmoid", "tanh", "hard_swish", "hard_sigmoid"}
)


def _verify_fused_conv(op: ConvOp | PreActConvOp) -> None:
    """The fused parts of a convolution: a known activation, a residual of
    the output's shape, a bias of one value per output channel."""
    if op.activation is not None and op.activation.data not in FUSED_ACTIVATIONS:
        raise VerifyException(
            f"{op.name}: activation {op.activation.data!r} cannot be fused; expected one of {sorted(FUSED_ACTIVATIONS)}"
        )
    out_type = op.results[0].type if op.results else op.out.type  # type: ignore[union-attr]
    out_shape = list(out_type.get_shape())
    if op.residual is not None and list(op.residual.type.get_shape()) != out_shape:
        raise VerifyException(f"{op.name}: the residual {op.residual.type} must have the output's shape {out_shape}")
    if op.bias is not None and list(op.bias.type.get_shape()) != out_shape[1:2]:
        raise VerifyException(f"{op.name}: the bias {op.bias.type} must hold one value per output channel")


@irdl_op_definition
class ConvTransposeOp(DnnComputeOp):
    name = "dnn.conv_transpose"
    x = operand_def(TensorOrBuffer)
    w = operand_def(TensorOrBuffer)
    bias = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), HOST_AND_CUDA)
    strides = _ints()
    pads = _ints()
    dilations = _ints()
    group = _int(1)
    output_padding = _ints()

    def macs(self) -> int:
        """Each input element scatters into out_channels/group times the taps."""
        return math.prod(self.x.type.get_shape()) * math.prod(self.w.type.get_shape()[1:])


@irdl_op_definition
class MaxPoolOp(UnaryKernelOp):
    name = "dnn.max_pool"
    traits = traits_def(KernelEffects(), HOST_AND_CUDA, RowLocal(window=True))
    kernel_shape = _ints()
    strides = _ints()
    pads = _ints()
    dilations = _ints()
    ceil_mode = _int(0)

    def macs(self) -> int:
        """Output elements times the window taps."""
        taps = math.prod(self.kernel_shape.get_values()) if self.kernel_shape is not None else 1
        return math.prod(self.output_type().get_shape()) * taps

    def channel_split(self) -> tuple[int, dict[str, int]] | None:
        """A block of channels reads the same channels of `x` (the scratchpad's
        channel blocks: no weights, a pooling per channel)."""
        return _channelwise_split(self)


@irdl_op_definition
class AveragePoolOp(UnaryKernelOp):
    name = "dnn.average_pool"
    traits = traits_def(KernelEffects(), HOST_AND_CUDA, RowLocal(window=True))
    kernel_shape = _ints()
    strides = _ints()
    pads = _ints()
    ceil_mode = _int(0)
    count_include_pad = _int(0)

    def macs(self) -> int:
        """Output elements times the window taps."""
        taps = math.prod(self.kernel_shape.get_values()) if self.kernel_shape is not None else 1
        return math.prod(self.output_type().get_shape()) * taps

    def channel_split(self) -> tuple[int, dict[str, int]] | None:
        """A block of channels reads the same channels of `x` (the scratchpad's
        channel blocks: no weights, a pooling per channel)."""
        return _channelwise_split(self)


@irdl_op_definition
class GlobalAveragePoolOp(UnaryKernelOp):
    name = "dnn.global_average_pool"
    traits = traits_def(HOST_AND_CUDA)

    def macs(self) -> int:
        """One accumulation per input element."""
        return math.prod(self.x.type.get_shape())

    def channel_split(self) -> tuple[int, dict[str, int]] | None:
        """A block of channels reads the same channels of `x` (the scratchpad's
        channel blocks: no weights, a pooling per channel)."""
        return _channelwise_split(self)


@irdl_op_definition
class GlobalMaxPoolOp(UnaryKernelOp):
    name = "dnn.global_max_pool"
    traits = traits_def(HOST_AND_CUDA)

    def macs(self) -> int:
        """One accumulation per input element."""
        return math.prod(self.x.type.get_shape())

    def channel_split(self) -> tuple[int, dict[str, int]] | None:
        """A block of channels reads the same channels of `x` (the scratchpad's
        channel blocks: no weights, a pooling per channel)."""
        return _channelwise_split(self)


@irdl_op_definition
class GemmOp(DnnComputeOp):
    """out = act(alpha * op(a) @ op(b) + beta * c)."""

    name = "dnn.gemm"
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    c = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), HOST_AND_CUDA)
    alpha = _float(1.0)
    beta = _float(1.0)
    trans_a = _int(0)
    trans_b = _int(0)
    activation = _str()
    activation_alpha = _float()
    activation_beta = _float()

    def macs(self) -> int:
        """M x N outputs, each a K-long dot product."""
        a = self.a.type.get_shape()
        k = a[0] if self.trans_a is not None and self.trans_a.value.data else a[1]
        return math.prod(self.output_type().get_shape()) * k

    def channel_split(self) -> tuple[int, dict[str, int]] | None:
        """One row of A (a fully connected layer) times B transposed: a
        block of output columns needs its rows of B and its part of C."""
        if (self.trans_b is None or not self.trans_b.value.data
                or (self.trans_a is not None and self.trans_a.value.data)
                or self.output_type().get_shape()[0] != 1):
            return None
        split = {"b": 0}
        if self.c is not None:
            c = list(self.c.type.get_shape())
            n = self.output_type().get_shape()[1]
            if c == [n]:
                split["c"] = 0
            elif c == [1, n]:
                split["c"] = 1
            elif math.prod(c) != 1:
                return None
        return self.output_type().get_shape()[1], split

    def reduction_split(self) -> tuple[int, dict[str, int]] | None:
        """One row of A times B transposed (a fully connected layer): a
        block of the inner dimension reads its columns of A and of B."""
        if self.channel_split() is None:
            return None
        return self.a.type.get_shape()[1], {"a": 1, "b": 1}

    def reduction_block(self, lo: int, hi: int, first: bool, last: bool
                        ) -> tuple[dict[str, tuple[int, int, int]], dict[str, Attribute], str, tuple[str, ...]] | None:
        """The running sum comes in as C with beta 1 (the first block adds
        beta * C itself); alpha scales every block's product; the last block
        applies the activation."""
        split = self.reduction_split()
        if split is None:
            return None
        slices = {name: (axis, lo, hi) for name, axis in split[1].items()}
        properties = dict(self.properties)
        if not first:
            properties["beta"] = FloatAttr(1.0, f32)
        if not last:
            for key in ("activation", "activation_alpha", "activation_beta"):
                properties.pop(key, None)
        return slices, properties, "c", ()

    def verify_(self) -> None:
        super().verify_()
        if self.activation is not None and self.activation.data not in FUSED_ACTIVATIONS:
            raise VerifyException(
                f"{self.name}: activation {self.activation.data!r} cannot be fused; "
                f"expected one of {sorted(FUSED_ACTIVATIONS)}"
            )


@irdl_op_definition
class MatMulOp(DnnComputeOp):
    """Batched matrix product with numpy broadcasting."""

    name = "dnn.matmul"
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), HOST_AND_CUDA)

    def macs(self) -> int:
        """Output elements times the contracted length (a's last dim)."""
        return math.prod(self.output_type().get_shape()) * self.a.type.get_shape()[-1]


@irdl_op_definition
class UnaryOp(UnaryKernelOp):
    """Elementwise f(x); `fn` names the function (relu, sigmoid, exp, ...).
    Safe in place: `out` may be `x`'s buffer."""

    name = "dnn.unary"
    traits = traits_def(KernelEffects(), WritesInPlace(("x",)), HOST_AND_CUDA, RowLocal(), Recomputable())
    fn = prop_def(StringAttr)
    alpha = _float()
    beta = _float()
    approximate = _str("none")

    def channel_split(self) -> tuple[int, dict[str, int]] | None:
        """A block of channels reads the same channels of `x` (elementwise)."""
        return _channelwise_split(self)


@irdl_op_definition
class BinaryOp(DnnComputeOp):
    """Elementwise act(f(a, b)) with broadcasting; the fused activation
    (dnn-fuse) is optional and only for arithmetic fns. Safe in place when
    `out` has an operand's shape."""

    name = "dnn.binary"
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), WritesInPlace(("a", "b")), HOST_AND_CUDA, RowLocal(), Recomputable())
    fn = prop_def(StringAttr)
    fmod = _int(0)
    activation = _str()
    alpha = _float()
    beta = _float()

    #: fns whose result an activation may follow inside the kernel
    ARITHMETIC: ClassVar[frozenset[str]] = frozenset({"add", "sub", "mul", "div", "max", "min"})

    def verify_(self) -> None:
        super().verify_()
        if self.activation is None:
            return
        if self.activation.data not in FUSED_ACTIVATIONS:
            raise VerifyException(
                f"{self.name}: activation {self.activation.data!r} cannot be fused; "
                f"expected one of {sorted(FUSED_ACTIVATIONS)}"
            )
        if self.fn.data not in self.ARITHMETIC:
            raise VerifyException(f"{self.name}: only {sorted(self.ARITHMETIC)} take a fused activation, not {self.fn.data!r}")


@irdl_op_definition
class VariadicOp(DnnComputeOp):
    """Sum/max/min/mean over any number of broadcast inputs."""

    name = "dnn.variadic"
    inputs = var_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), WritesInPlace(("inputs",)), HOST_AND_CUDA)
    fn = prop_def(StringAttr)


@irdl_op_definition
class WhereOp(DnnComputeOp):
    name = "dnn.where"
    cond = operand_def(TensorOrBuffer)
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), WritesInPlace(("b",)), HOST_AND_CUDA)


@irdl_op_definition
class CastOp(UnaryKernelOp):
    name = "dnn.cast"
    traits = traits_def(HOST_AND_CUDA)


@irdl_op_definition
class CopyOp(UnaryKernelOp):
    name = "dnn.copy"
    traits = traits_def(HOST_AND_CUDA)


@irdl_op_definition
class ChannelAffineOp(DnnComputeOp):
    """out = act(x * scale[c] + shift[c]): inference batch normalisation after
    its statistics are folded. Safe in place."""

    name = "dnn.channel_affine"
    x = operand_def(TensorOrBuffer)
    scale = operand_def(TensorOrBuffer)
    shift = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), WritesInPlace(("x",)), HOST_AND_CUDA, RowLocal(), Recomputable())
    axis = _int(1)
    activation = _str()
    alpha = _float()
    beta = _float()


@irdl_op_definition
class BatchNormOp(DnnComputeOp):
    """Inference batch normalisation when its statistics are not constants
    (otherwise convert-onnx-to-dnn folds it into a channel_affine)."""

    name = "dnn.batch_norm"
    x = operand_def(TensorOrBuffer)
    scale = operand_def(TensorOrBuffer)
    bias = operand_def(TensorOrBuffer)
    mean = operand_def(TensorOrBuffer)
    var = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), WritesInPlace(("x",)), HOST_AND_CUDA, Recomputable(ops_per_element=2))
    epsilon = _float(1e-5)


@irdl_op_definition
class SoftmaxOp(UnaryKernelOp):
    name = "dnn.softmax"
    traits = traits_def(KernelEffects(), WritesInPlace(("x",)), HOST_AND_CUDA)
    axis = _int(-1)


@irdl_op_definition
class AttentionSoftmaxOp(DnnComputeOp):
    """Attention scores in one kernel (dnn-fuse's transformer rule):
    out = softmax(scale * (a @ b) + mask) along the last axis; `mask`, when
    given, broadcasts to the scores. `out` must not overlap `a` or `b`."""

    name = "dnn.attention_softmax"
    a = operand_def(TensorOrBuffer)
    b = operand_def(TensorOrBuffer)
    mask = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    scale = _float(1.0)


@irdl_op_definition
class LogSoftmaxOp(UnaryKernelOp):
    name = "dnn.log_softmax"
    traits = traits_def(KernelEffects(), WritesInPlace(("x",)), HOST_AND_CUDA)
    axis = _int(-1)


@irdl_op_definition
class LayerNormOp(DnnComputeOp):
    name = "dnn.layer_norm"
    x = operand_def(TensorOrBuffer)
    scale = operand_def(TensorOrBuffer)
    bias = opt_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), WritesInPlace(("x",)), HOST_AND_CUDA)
    axis = _int(-1)
    epsilon = _float(1e-5)


@irdl_op_definition
class LRNOp(UnaryKernelOp):
    name = "dnn.lrn"
    traits = traits_def(KernelEffects(), HOST_AND_CUDA, RowLocal())
    size = prop_def(IntegerAttr)
    alpha = _float(1e-4)
    beta = _float(0.75)
    bias = _float(1.0)


@irdl_op_definition
class ReduceOp(UnaryKernelOp):
    name = "dnn.reduce"
    traits = traits_def(HOST_AND_CUDA)
    fn = prop_def(StringAttr)
    axes = _ints()
    keepdims = _int(1)
    noop_with_empty_axes = _int(0)


@irdl_op_definition
class ArgMaxOp(UnaryKernelOp):
    name = "dnn.arg_max"
    traits = traits_def(HOST_AND_CUDA)
    axis = _int(0)
    keepdims = _int(1)
    select_last_index = _int(0)


@irdl_op_definition
class ArgMinOp(UnaryKernelOp):
    name = "dnn.arg_min"
    axis = _int(0)
    keepdims = _int(1)
    select_last_index = _int(0)


@irdl_op_definition
class CumSumOp(UnaryKernelOp):
    """Running sums along `axis` (ONNX CumSum). `out` must not overlap `x`."""

    name = "dnn.cum_sum"
    axis = _int(0)
    exclusive = _int(0)
    reverse = _int(0)


@irdl_op_definition
class TopKOp(DnnComputeOp):
    """The k largest (or smallest) values along `axis` and their int64
    indices: two destinations, values then indices (k is their length along
    `axis`)."""

    name = "dnn.top_k"
    x = operand_def(TensorOrBuffer)
    outs = var_operand_def(MemRefType)
    results_ = var_result_def(TensorType)
    traits = traits_def(KernelEffects())
    axis = _int(-1)
    largest = _int(1)
    sorted = _int(1)


@irdl_op_definition
class ConcatOp(DnnComputeOp):
    name = "dnn.concat"
    inputs = var_operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), HOST_AND_CUDA, RowLocal(joins_channels=True))
    axis = prop_def(IntegerAttr)

    def splits_along(self, axis: int) -> bool:
        """A concat along any axis but `axis` (the rows, the second to last;
        or the columns, the last) copies row (column) bands into row
        (column) bands."""
        rank = len(self.output_type().get_shape())
        return rank >= 4 and self.axis.value.data % rank != rank + axis

    def joined_channels(self) -> tuple[int, ...] | None:
        """The inputs' channel counts when the concat joins them along axis
        1 with every axis before it of extent 1 (see DnnComputeOp)."""
        shape = self.output_type().get_shape()
        if len(shape) < 2 or self.axis.value.data % len(shape) != 1 or shape[0] != 1:
            return None
        return tuple(int(v.type.get_shape()[1]) for v in self.inputs)


@irdl_op_definition
class SplitOp(DnnComputeOp):
    name = "dnn.split"
    x = operand_def(TensorOrBuffer)
    outs = var_operand_def(MemRefType)
    results_ = var_result_def(TensorType)
    traits = traits_def(KernelEffects(), HOST_AND_CUDA)
    axis = _int(0)


@irdl_op_definition
class SliceOp(UnaryKernelOp):
    name = "dnn.slice"
    traits = traits_def(HOST_AND_CUDA)
    starts = _ints()
    ends = _ints()
    axes = _ints()
    steps = _ints()


@irdl_op_definition
class EmptyOp(DnnComputeOp):
    """An uninitialised tensor of the result's type (dnn-tile's region
    output, filled band by band by dnn.insert_slice). In buffer form it is
    just its destination: the kernel writes nothing."""

    name = "dnn.empty"
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())


@irdl_op_definition
class InsertSliceOp(DnnComputeOp):
    """`dest` with `x` written at [offset, offset + x's extent) along `axis`
    (dnn-tile: one patch's rows of the region output). Every other dim of `x`
    equals `dest`'s. In place: dnn-coalesce writes the result over `dest`."""

    name = "dnn.insert_slice"
    dest = operand_def(TensorOrBuffer)
    x = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects(), WritesInPlace(("dest",)))
    axis = prop_def(IntegerAttr)
    offset = prop_def(IntegerAttr)

    def verify_(self) -> None:
        super().verify_()
        dest, x = list(self.dest.type.get_shape()), list(self.x.type.get_shape())
        axis, offset = self.axis.value.data, self.offset.value.data
        if len(dest) != len(x) or not 0 <= axis < len(dest):
            raise VerifyException(f"{self.name}: axis {axis} must name a dim of both {self.dest.type} and {self.x.type}")
        if any(a != b for i, (a, b) in enumerate(zip(dest, x, strict=True)) if i != axis):
            raise VerifyException(f"{self.name}: {self.x.type} must match {self.dest.type} except along axis {axis}")
        if offset < 0 or offset + x[axis] > dest[axis]:
            raise VerifyException(
                f"{self.name}: rows [{offset}, {offset + x[axis]}) fall outside the {dest[axis]} rows of axis {axis}")


@irdl_op_definition
class TransposeOp(UnaryKernelOp):
    name = "dnn.transpose"
    traits = traits_def(HOST_AND_CUDA)
    perm = _ints()

    def splits_along(self, axis: int) -> bool:
        """A transpose that keeps the last two axes (rows, columns) in place
        (a channel shuffle) copies row (column) bands into row (column)
        bands."""
        rank = len(self.output_type().get_shape())
        perm = list(self.perm.get_values()) if self.perm else list(reversed(range(rank)))
        return rank >= 4 and perm[-2:] == [rank - 2, rank - 1]


class GatherLikeOp(DnnComputeOp):
    x = operand_def(TensorOrBuffer)
    indices = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())


@irdl_op_definition
class GatherOp(GatherLikeOp):
    name = "dnn.gather"
    traits = traits_def(HOST_AND_CUDA)
    axis = _int(0)


@irdl_op_definition
class GatherElementsOp(GatherLikeOp):
    name = "dnn.gather_elements"
    axis = _int(0)


@irdl_op_definition
class GatherNDOp(GatherLikeOp):
    name = "dnn.gather_nd"
    batch_dims = _int(0)


@irdl_op_definition
class ScatterNDOp(DnnComputeOp):
    """A copy of `x` with the slices `indices` names replaced by `updates`
    (or combined with them by `reduction`). `out` must not overlap an input."""

    name = "dnn.scatter_nd"
    x = operand_def(TensorOrBuffer)
    indices = operand_def(TensorOrBuffer)
    updates = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    reduction = _str("none")


@irdl_op_definition
class ScatterElementsOp(DnnComputeOp):
    """A copy of `x` with `updates` written (or combined by `reduction`) at
    the positions `indices` names along `axis`. `out` must not overlap an input."""

    name = "dnn.scatter_elements"
    x = operand_def(TensorOrBuffer)
    indices = operand_def(TensorOrBuffer)
    updates = operand_def(TensorOrBuffer)
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    axis = _int(0)
    reduction = _str("none")


@irdl_op_definition
class ExpandOp(UnaryKernelOp):
    name = "dnn.expand"
    traits = traits_def(HOST_AND_CUDA)


@irdl_op_definition
class TileOp(UnaryKernelOp):
    name = "dnn.tile"
    repeats = _ints()


@irdl_op_definition
class PadOp(UnaryKernelOp):
    name = "dnn.pad"
    pads = _ints()
    mode = _str("constant")
    value = _float(0.0)


@irdl_op_definition
class ResizeOp(UnaryKernelOp):
    name = "dnn.resize"
    traits = traits_def(HOST_AND_CUDA, Recomputable(ops_per_element=4))
    mode = _str("nearest")
    coordinate_transformation_mode = _str("half_pixel")
    nearest_mode = _str("round_prefer_floor")
    cubic_coeff_a = _float(-0.75)
    exclude_outside = _int(0)
    scales = _ints()


@irdl_op_definition
class RangeOp(DnnComputeOp):
    name = "dnn.range"
    out = opt_operand_def(MemRefType)
    result = opt_result_def(TensorType)
    traits = traits_def(KernelEffects())
    start = prop_def(FloatAttr)
    delta = prop_def(FloatAttr)


# ---------------------------------------------------------------------------
# Values that are not computed: weights and views
# ---------------------------------------------------------------------------


@irdl_op_definition
class WeightOp(IRDLOperation):
    """A read-only constant: `value` (inline dense or a dense_resource blob in
    the weight store) or `splat` (one value repeated, as ConstantOfShape
    writes). Lives in the constant pool, never in the activation pool."""

    name = "dnn.weight"
    value = opt_prop_def(DenseIntOrFPElementsAttr | DenseResourceAttr)
    splat = opt_prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorOrBuffer)
    traits = traits_def(Pure(), ConstantLike())

    def verify_(self) -> None:
        if (self.value is None) == (self.splat is None):
            raise VerifyException("dnn.weight: give exactly one of `value` and `splat`")
        if self.value is not None and list(self.value.type.get_shape()) != list(self.result.type.get_shape()):
            raise VerifyException("dnn.weight: value shape differs from the result shape")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """A reshape that shares its operand's bytes (Reshape, Flatten, Squeeze,
    Unsqueeze, Identity, Dropout at inference): no copy, no allocation. The
    operand's lifetime is extended to the view's last use."""

    name = "dnn.view"
    source = operand_def(TensorOrBuffer)
    result = result_def(TensorOrBuffer)
    traits = traits_def(Pure(), AliasesOperand("source"))

    def verify_(self) -> None:
        if type(self.source.type) is not type(self.result.type):
            raise VerifyException("dnn.view: operand and result must both be tensors or both memrefs")
        if type_bytes(self.source.type) != type_bytes(self.result.type):
            raise VerifyException(
                f"dnn.view: a view keeps the byte size ({type_bytes(self.source.type)} != "
                f"{type_bytes(self.result.type)})"
            )


@irdl_op_definition
class SubviewOp(IRDLOperation):
    """A buffer that is a contiguous slice of another: the bytes
    [offset, offset + size of the result) of `source`, seen with the result's
    type. dnn-coalesce makes one when a producer writes straight into its
    band of a concat output, or a Split/Slice output is a band of its input.
    Like dnn.view it owns no bytes: the lifetime of `source`'s root covers
    every use of the subview."""

    name = "dnn.subview"
    source = operand_def(MemRefType)
    offset = prop_def(IntegerAttr)
    result = result_def(MemRefType)
    traits = traits_def(Pure(), AliasesOperand("source"))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, offset: int, result_type: MemRefType):
        super().__init__(operands=[source], result_types=[result_type],
                         properties={"offset": IntegerAttr(offset, i64)})

    def verify_(self) -> None:
        offset = self.offset.value.data
        end = offset + type_bytes(self.result.type)
        if offset < 0 or end > type_bytes(self.source.type):
            raise VerifyException(
                f"dnn.subview: bytes [{offset}, {end}) fall outside the {type_bytes(self.source.type)}-byte source"
            )


# ---------------------------------------------------------------------------
# Memory ops
# ---------------------------------------------------------------------------


def _size_prop() -> IntegerAttr:
    return prop_def(IntegerAttr)


def buffer_alignment(buffer_type: Attribute, alignment: int) -> int:
    """The alignment a buffer of `buffer_type` is allocated at, given the
    most any buffer gets, `alignment` (the pool's; a cache line by default).
    Floating-point data gets all of it: kernels stream through it with
    vector loads, fastest when they start on a line. Integer and boolean
    elements (indices, masks, a relative position's bucket ids) get their
    own size: no kernel reads any element with more alignment than its
    size, and at a small symbolic size (a sequence of 1) a whole line for
    each of many one- to eight-byte tensors would be most of the pool.
    This is the most the buffer gets: planning gives a buffer of fewer
    bytes the next power of two of its size
    (`pyocc.planning.fitted_alignment`, where the planner, which knows no
    IR, reads it), at a symbolic size value by value."""
    assert isinstance(buffer_type, TensorType | MemRefType), buffer_type
    element = buffer_type.get_element_type()
    if isinstance(element, IntegerType):
        return min(element_bytes(element), alignment)
    return alignment


@irdl_op_definition
class MallocOp(IRDLOperation):
    """Allocate `size` bytes aligned to `alignment` (eager: at entry; lazy:
    right before the producer; dnn-insert-memory-ops gives each buffer its
    `buffer_alignment`)."""

    name = "dnn.malloc"
    size = _size_prop()
    alignment = prop_def(IntegerAttr, default_value=IntegerAttr(64, i64))
    min_size = opt_prop_def(IntegerAttr)
    """A kernel's scratch (dnn-insert-memory-ops{scratch=true}): its kernel
    works with any size from `min_size` up to `size`, so dnn-memory-pool may
    shrink it to the slack of the pool at its op (see pyocc.planning.fit)."""
    result = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, buffer_type: MemRefType, alignment: int = 64):
        super().__init__(
            result_types=[buffer_type],
            properties={"size": i64_attr(type_bytes(buffer_type)), "alignment": i64_attr(alignment)},
        )

    def verify_(self) -> None:
        need = type_bytes(self.result.type)
        if self.size.value.data < need:
            raise VerifyException(
                f"dnn.malloc: size {self.size.value.data} is smaller than the {need} bytes of {self.result.type}"
            )
        if self.alignment.value.data < 1:
            raise VerifyException("dnn.malloc: alignment must be positive")
        if self.min_size is not None and not 0 < self.min_size.value.data <= self.size.value.data:
            raise VerifyException(f"dnn.malloc: min_size {self.min_size.value.data} must be within 1..size "
                                  f"({self.size.value.data})")


@irdl_op_definition
class DeallocOp(IRDLOperation):
    """Free a buffer from dnn.malloc. Nothing in the block may use the buffer
    (or a view of it) afterwards: pyocc.analysis.verify_lifetimes checks
    that for a whole function in one walk (an op verifier would have to scan
    the rest of the block for every dealloc)."""

    name = "dnn.dealloc"
    buffer = operand_def(MemRefType)
    size = _size_prop()
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$buffer attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue):
        super().__init__(operands=[buffer], properties={"size": i64_attr(type_bytes(buffer.type))})


@irdl_op_definition
class MemcpyOp(IRDLOperation):
    """Copy `source` into `target`; `kind` is host_to_device,
    device_to_host, device_to_device or host_to_host. With `count`, a
    strided copy: `count` chunks of `size` bytes, chunk k from byte
    k * `source_stride` of `source` to byte k * `target_stride` of `target`
    (a band of rows of an NCHW tensor: one chunk per channel)."""

    name = "dnn.memcpy"
    source = operand_def(MemRefType)
    target = operand_def(MemRefType)
    kind = prop_def(StringAttr)
    size = _size_prop()
    count = opt_prop_def(IntegerAttr)
    source_stride = opt_prop_def(IntegerAttr)
    target_stride = opt_prop_def(IntegerAttr)

    def strides(self) -> tuple[int, int, int] | None:
        """(count, source stride, target stride) of a strided copy, None for a plain one."""
        if self.count is None:
            return None
        return (self.count.value.data, self.source_stride.value.data if self.source_stride else self.size.value.data,
                self.target_stride.value.data if self.target_stride else self.size.value.data)

    def verify_(self) -> None:
        if self.kind.data not in ("host_to_device", "device_to_host", "device_to_device", "host_to_host"):
            raise VerifyException(f"dnn.memcpy: unknown kind {self.kind.data!r}")
        strided = self.strides()
        if strided is not None:
            count, size = strided[0], self.size.value.data
            for side, value, stride in (("source", self.source, strided[1]), ("target", self.target, strided[2])):
                if count < 1 or stride < size or (count - 1) * stride + size > type_bytes(value.type):
                    raise VerifyException(
                        f"dnn.memcpy: {count} chunks of {size} bytes, {stride} bytes apart, do not fit the "
                        f"{type_bytes(value.type)}-byte {side} without overlap")
            return
        if type_bytes(self.source.type) != type_bytes(self.target.type):
            raise VerifyException("dnn.memcpy: source and target sizes differ")


@irdl_op_definition
class PoolInitOp(IRDLOperation):
    """One memory pool of `size` bytes, allocated once; buffers are views
    into it at planned offsets. With several named pools (SRAM, DRAM) there is
    one per pool, told apart by `pool_name`."""

    name = "dnn.pool_init"
    size = _size_prop()
    alignment = prop_def(IntegerAttr, default_value=IntegerAttr(64, i64))
    pool_name = opt_prop_def(StringAttr)
    """The named memory this pool lives in (`--memory-pools`); absent for
    the one anonymous pool."""
    pool = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($pool)"

    def verify_(self) -> None:
        shape = self.pool.type.get_shape()
        if len(shape) != 1 or shape[0] != self.size.value.data:
            raise VerifyException("dnn.pool_init: the pool must be a memref<SIZExi8> of `size` bytes")


@irdl_op_definition
class MemOffsetOp(IRDLOperation):
    """Occamy's Mem-offset(base, offset, size): the buffer at `offset` in
    `pool`, `size` bytes long, viewed with the result's type."""

    name = "dnn.mem_offset"
    pool = operand_def(MemRefType)
    offset = prop_def(IntegerAttr)
    size = _size_prop()
    result = result_def(MemRefType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$pool attr-dict `:` type($pool) `->` type($result)"

    def verify_(self) -> None:
        offset, size = self.offset.value.data, self.size.value.data
        if offset < 0:
            raise VerifyException(f"dnn.mem_offset: offset {offset} is negative")
        pool_bytes = type_bytes(self.pool.type)
        if offset + size > pool_bytes:
            raise VerifyException(
                f"dnn.mem_offset: bytes [{offset}, {offset + size}) fall outside the {pool_bytes}-byte pool"
            )
        if size < type_bytes(self.result.type):
            raise VerifyException(
                f"dnn.mem_offset: size {size} is smaller than the {type_bytes(self.result.type)} bytes of {self.result.type}"
            )


@irdl_op_definition
class SymbolicPoolOp(IRDLOperation):
    """The one pool of a symbolic plan (`--dim`): its byte size is an SSA
    index computed from the symbols' values (pyocc.lowering.symbolic_pool),
    so the pool is a `memref<?xi8>`."""

    name = "dnn.symbolic_pool"
    size = operand_def(IndexType)
    alignment = prop_def(IntegerAttr, default_value=IntegerAttr(64, i64))
    pool = result_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$size attr-dict `:` type($pool)"

    def verify_(self) -> None:
        pool = self.pool.type
        if pool.get_shape() != (DYNAMIC_INDEX,) or pool.element_type != IntegerType(8):
            raise VerifyException(f"dnn.symbolic_pool: the pool must be a memref<?xi8>, not {pool}")


@irdl_op_definition
class SymbolicViewOp(IRDLOperation):
    """A buffer of a symbolic plan: the bytes at `offset` in a
    `dnn.symbolic_pool`, viewed as the result's memref, whose dynamic
    dimensions (`?`) are the `dims` operands, in order. Offset and dims are
    SSA indices computed from the symbols' values."""

    name = "dnn.symbolic_view"
    pool = operand_def(MemRefType)
    offset = operand_def(IndexType)
    dims = var_operand_def(IndexType)
    result = result_def(MemRefType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$pool `[` $offset `]` `(` $dims `)` attr-dict `:` type($pool) `->` type($result)"

    def verify_(self) -> None:
        if self.pool.type.get_shape() != (DYNAMIC_INDEX,):
            raise VerifyException(f"dnn.symbolic_view: the pool must be a memref<?xi8>, not {self.pool.type}")
        dynamic = sum(1 for d in self.result.type.get_shape() if d == DYNAMIC_INDEX)
        if dynamic != len(self.dims):
            raise VerifyException(f"dnn.symbolic_view: {self.result.type} has {dynamic} dynamic dimensions "
                                  f"but {len(self.dims)} dims are given")


@irdl_op_definition
class PoolReleaseOp(IRDLOperation):
    """Release a pool created by dnn.pool_init (at function exit)."""

    name = "dnn.pool_release"
    pool = operand_def(MemRefType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$pool attr-dict `:` type($pool)"


@irdl_op_definition
class SanitizeOp(DnnComputeOp):
    """The plan sanitizer's probe on one buffer (buffer form only; inserted
    by dnn-sanitize). `action = "poison"` fills the buffer with a pattern
    (NaN for floats) and its `guard` trailing bytes with 0xFD, so a read of
    dead memory shows up as NaN; `action = "check"` verifies the guard bytes
    after `writer` wrote the buffer named `buffer`, and fails naming both."""

    name = "dnn.sanitize"
    out = operand_def(MemRefType)
    action = prop_def(StringAttr)
    guard = prop_def(IntegerAttr)
    writer = _str("")
    buffer = _str("")

    def verify_(self) -> None:
        if self.action.data not in ("poison", "check"):
            raise VerifyException(f"dnn.sanitize: action must be 'poison' or 'check', got '{self.action.data}'")


COMPUTE_OPS = [
    ConvOp, PreActConvOp, ConvTransposeOp, MaxPoolOp, AveragePoolOp, GlobalAveragePoolOp, GlobalMaxPoolOp,
    GemmOp, MatMulOp, UnaryOp, BinaryOp, VariadicOp, WhereOp, CastOp, CopyOp, ChannelAffineOp,
    BatchNormOp, SoftmaxOp, AttentionSoftmaxOp, LogSoftmaxOp, LayerNormOp, LRNOp, ReduceOp, ArgMaxOp, ConcatOp, SplitOp, SliceOp,
    TransposeOp, GatherOp, GatherElementsOp, GatherNDOp, ExpandOp, TileOp, PadOp, ResizeOp, RangeOp,
    SanitizeOp, EmptyOp, InsertSliceOp, ArgMinOp, CumSumOp, TopKOp, ScatterNDOp, ScatterElementsOp,
]
MEMORY_OPS = [MallocOp, DeallocOp, MemcpyOp, PoolInitOp, MemOffsetOp, PoolReleaseOp, SymbolicPoolOp, SymbolicViewOp]
DNN_OPS = [*COMPUTE_OPS, WeightOp, ViewOp, SubviewOp, *MEMORY_OPS]
ALIAS_OPS: tuple[type[IRDLOperation], ...] = tuple(op for op in DNN_OPS if op.has_trait(AliasesOperand))
"""Ops whose result shares an operand's bytes (their `AliasesOperand` trait),
for `isinstance` checks; `aliased_value` says which operand."""

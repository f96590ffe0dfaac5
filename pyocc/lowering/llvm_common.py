"""What both LLVM lowerings (convert-dnn-to-llvm{target=host|cuda}) share.

The C ABI's constants (ABI version, the `state` counter slots, the weight
alignment), the JSON table's pieces (buffer specs, kernel keyword arguments,
the weight-pool layout, the graph arguments), an llvm-dialect builder with
the allocation counters, and the string globals of the table. The target
lowerings (pyocc.lowering.convert_dnn_to_host, pyocc.lowering.cuda)
import this module and never each other; the ABI itself is described in
pyocc.lowering.convert_dnn_to_llvm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    Signedness,
    StringAttr,
    i8,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import PassFailedException

from pyocc.dialects.dnn.ops import WeightOp, type_bytes

ABI_VERSION = 1
#: alignment of every weight in the constant pool
WEIGHT_ALIGNMENT = 64
#: slots of the `state` array the generated code updates
STATE_ALLOC_CALLS, STATE_FREE_CALLS, STATE_CURRENT_BYTES, STATE_PEAK_BYTES = range(4)
STATE_SLOTS = 4
#: llvm's opaque pointer type
PTR = llvm.LLVMPointerType()
#: the symbol of `const char *pyocc_functions(void)`, the module's function list
MODULE_FUNCTIONS_SYMBOL = "pyocc_functions"


def cannot_lower(op: Operation, reason: str) -> PassFailedException:
    """The error that stops convert-dnn-to-llvm at `op`, saying why."""
    return PassFailedException(f"convert-dnn-to-llvm: cannot lower {op.name}: {reason}")


# ---------------------------------------------------------------------------
# Types -> the JSON table's (shape, dtype)
# ---------------------------------------------------------------------------


def callees(functions: Sequence[Operation]) -> set[str]:
    """The names of the functions that `functions` call (llvm.call), so that
    a module declares only those."""
    return {op.callee.string_value() for function in functions for op in function.walk()
            if isinstance(op, llvm.CallOp) and op.callee is not None}


def numpy_dtype_name(element: Attribute) -> str | None:
    """The numpy dtype name of an element type, or None if the host target
    has no kernel representation for it (i1 is numpy's one-byte bool)."""
    if isinstance(element, Float32Type):
        return "float32"
    if isinstance(element, Float16Type):
        return "float16"
    if isinstance(element, Float64Type):
        return "float64"
    if isinstance(element, IntegerType):
        width = element.width.data
        if width == 1:
            return "bool"
        if width in (8, 16, 32, 64):
            unsigned = element.signedness.data == Signedness.UNSIGNED
            return f"{'uint' if unsigned else 'int'}{width}"
    return None


def buffer_spec(op: Operation, t: Attribute) -> dict[str, Any]:
    """{"shape", "dtype"} of a static memref, or a pass error naming `op`."""
    if not isinstance(t, MemRefType):
        raise cannot_lower(op, f"expected a memref (buffer form), got {t}")
    shape = list(t.get_shape())
    if any(d < 0 for d in shape):
        raise cannot_lower(op, f"dynamic shape in {t}; fix the shape before lowering (pyocc-opt --shape)")
    dtype = numpy_dtype_name(t.get_element_type())
    if dtype is None:
        raise cannot_lower(op, f"element type {t.get_element_type()} has no host kernel representation")
    return {"shape": shape, "dtype": dtype}


def kernel_kwarg(op: Operation, name: str, attr: Attribute) -> Any:
    """A kernel property as a JSON value (the host kernel's keyword argument)."""
    if isinstance(attr, DenseArrayBase):
        return list(attr.get_values())
    if isinstance(attr, IntegerAttr):
        return attr.value.data
    if isinstance(attr, FloatAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    raise cannot_lower(op, f"property '{name}' ({attr}) has no kernel-argument form")


def weight_source(op: WeightOp, nbytes: int) -> dict[str, Any]:
    """Where a weight's bytes come from, as JSON (never the bytes of a blob)."""
    if op.splat is not None:
        return {"splat": op.splat.get_values()[0]}
    value = op.value
    if isinstance(value, DenseResourceAttr):
        return {"resource": value.resource_handle.data}
    assert isinstance(value, DenseIntOrFPElementsAttr)
    values = list(value.get_values())
    if len(values) * 8 > 1 << 20:
        raise cannot_lower(op, f"an inline dense value of {nbytes} bytes is too large; store it as dense_resource")
    return {"values": values}


# ---------------------------------------------------------------------------
# Building llvm-dialect IR
# ---------------------------------------------------------------------------


class LlvmBuilder:
    """Appends llvm ops to a current block; small helpers for what the
    lowering emits again and again (constants, state counters)."""

    def __init__(self, block: Block):
        self.block = block

    def add(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def const(self, value: int, type: Attribute = i64) -> SSAValue:
        return self.add(llvm.ConstantOp(IntegerAttr(value, type), type)).results[0]

    def gep(self, base: SSAValue, index: int, element: Attribute) -> SSAValue:
        """&base[index] for an array of `element`."""
        if index == 0:
            return base
        return self.add(llvm.GEPOp(base, [index], element, inbounds=True)).results[0]

    def load(self, ptr: SSAValue, type: Attribute) -> SSAValue:
        return self.add(llvm.LoadOp(ptr, type)).results[0]

    def store(self, value: SSAValue, ptr: SSAValue) -> None:
        self.add(llvm.StoreOp(value, ptr))

    def call(self, callee: str, *args: SSAValue, returns: Attribute | None = None) -> SSAValue | None:
        op = self.add(llvm.CallOp(callee, *args, return_type=returns))
        return op.results[0] if returns is not None else None


@dataclass
class MemoryTally:
    """What the IR implies per run: allocator calls, bytes allocated now,
    their peak (the native counters in `state` must agree after a run)."""

    allocations: int = 0
    live_bytes: int = 0
    peak_bytes: int = 0

    def allocate(self, size: int) -> None:
        """One more allocation of `size` bytes."""
        self.allocations += 1
        self.live_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def free(self, size: int) -> None:
        """`size` bytes freed."""
        self.live_bytes -= size

    def as_json(self) -> dict[str, int]:
        """The table's "memory" entry."""
        return {"allocations": self.allocations, "peak_bytes": self.peak_bytes}


def bump_counter(b: LlvmBuilder, state: SSAValue, slot: int, delta: SSAValue) -> SSAValue:
    """Emit state[slot] += delta; returns the new value."""
    ptr = b.gep(state, slot, i64)
    new = b.add(llvm.AddOp(b.load(ptr, i64), delta)).results[0]
    b.store(new, ptr)
    return new


def count_allocation(b: LlvmBuilder, state: SSAValue, size: SSAValue) -> None:
    """Emit the counters of one allocation: one more call, `size` more
    bytes allocated now, the peak raised."""
    bump_counter(b, state, STATE_ALLOC_CALLS, b.const(1))
    current = bump_counter(b, state, STATE_CURRENT_BYTES, size)
    peak_ptr = b.gep(state, STATE_PEAK_BYTES, i64)
    peak = b.load(peak_ptr, i64)
    higher = b.add(llvm.ICmpOp(current, peak, IntegerAttr(llvm.ICmpPredicateFlag.UGT.to_int(), i64))).results[0]
    b.store(b.add(llvm.SelectOp(higher, current, peak)).results[0], peak_ptr)


def count_free(b: LlvmBuilder, state: SSAValue, size: int) -> None:
    """Emit the counters of one free: one more call, `size` fewer bytes."""
    bump_counter(b, state, STATE_FREE_CALLS, b.const(1))
    bump_counter(b, state, STATE_CURRENT_BYTES, b.const(-size))


@dataclass
class WeightLayout:
    """The read-only constant pool: where each weight goes, 64-byte aligned,
    and where its bytes come from (never the bytes themselves)."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0

    def place(self, nbytes: int, spec: dict[str, Any], source: dict[str, Any]) -> int:
        """Append a weight of `nbytes` ({"shape", "dtype"} `spec`); its offset."""
        offset = -(-self.bytes // WEIGHT_ALIGNMENT) * WEIGHT_ALIGNMENT
        self.entries.append({"offset": offset, "nbytes": nbytes, **spec, "source": source})
        self.bytes = offset + nbytes
        return offset

    def place_weight(self, op: WeightOp) -> int:
        """Append a dnn.weight; its offset."""
        nbytes = type_bytes(op.result.type)
        return self.place(nbytes, buffer_spec(op, op.result.type), weight_source(op, nbytes))

    def as_json(self) -> dict[str, Any]:
        """The table's "weights" entry."""
        return {"bytes": self.bytes, "alignment": WEIGHT_ALIGNMENT, "entries": self.entries}


def table_header(name: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
                 weights: WeightLayout) -> dict[str, Any]:
    """The first fields of every target's JSON table: the ABI version, the
    function, its graph inputs and outputs, the weight-pool layout."""
    return {"abi": ABI_VERSION, "name": name, "inputs": inputs, "outputs": outputs, "weights": weights.as_json()}


def graph_arguments(f: func.FuncOp) -> list[tuple[SSAValue, bool, dict[str, Any]]]:
    """Each argument of `f` with whether it is a graph output (`dnn.output`)
    and its table entry: {"name" (the ONNX name), "shape", "dtype"}."""
    body = f.body.block
    arg_attrs = f.arg_attrs.data if f.arg_attrs else [None] * len(body.args)
    arguments = []
    for index, (arg, attrs) in enumerate(zip(body.args, arg_attrs)):
        entries = attrs.data if attrs is not None else {}
        onnx_name = entries.get("onnx.name")
        name = onnx_name.data if isinstance(onnx_name, StringAttr) else f"arg{index}"
        arguments.append((arg, "dnn.output" in entries, {"name": name, **buffer_spec(f, arg.type)}))
    return arguments


def check_lowerable(f: func.FuncOp) -> str:
    """The name of `f`, after checking it is what the LLVM lowerings take:
    destination-passing style (no results), one straight-line block."""
    name = f.sym_name.data
    if f.function_type.outputs.data:
        raise cannot_lower(f, f"@{name} returns values; lower it to destination-passing style first "
                       "(dnn-insert-memory-ops)")
    if len(f.body.blocks) != 1:
        raise cannot_lower(f, f"@{name} has {len(f.body.blocks)} blocks; only straight-line functions lower")
    return name


def string_global(symbol: str, text: str) -> list[Operation]:
    """An internal constant global holding `text`, NUL-terminated."""
    data = text + "\0"
    size = len(data.encode("utf-8"))
    return [llvm.GlobalOp(llvm.LLVMArrayType(IntAttr(size), i8), symbol, "internal",
                          constant=True, value=StringAttr(data))]


def string_getter(function: str, symbol: str) -> llvm.FuncOp:
    """`const char *function(void)`: returns the address of global `symbol`."""
    block = Block()
    b = LlvmBuilder(block)
    b.add(llvm.ReturnOp(b.add(llvm.AddressOfOp(symbol, PTR)).results[0]))
    return llvm.FuncOp(function, llvm.LLVMFunctionType([], PTR),
                       linkage=llvm.LinkageAttr("external"), body=Region(block))

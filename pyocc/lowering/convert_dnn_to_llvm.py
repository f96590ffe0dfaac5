"""`convert-dnn-to-llvm{target=host}`: buffer-form dnn functions -> llvm dialect.

Each `func.func @NAME` in destination-passing (buffer) form becomes a handful
of `llvm.func`s with a small C ABI, the same for the in-process JIT and for an
AOT shared library (ABI version 1):

    void    NAME_init(void *const *kernel_table);  // table[0]: the kernel callback
    int32_t NAME_run(void *const *inputs, void *const *outputs,
                     const void *weights, int64_t *state);
    void    NAME_destroy(void);                     // forgets the callback
    const char *NAME_meta(void);                    // the JSON table, NUL-terminated
    const char *pyocc_functions(void);              // JSON list of the NAMEs

- `inputs` / `outputs`: data pointers of the graph inputs / outputs, in
  argument order (outputs are the arguments marked `dnn.output`).
- `weights`: the base of the read-only constant pool; each `dnn.weight` is
  `weights + offset`, offsets 64-byte aligned, fixed at compile time. Weight
  bytes never enter the IR: the JSON table says where each one comes from.
- `state`: `int64_t[4]` the caller zeroes: allocator calls, free calls,
  bytes currently allocated, peak bytes allocated. The generated code keeps
  them up to date, so a run reports exactly what its allocations cost.
- `run` returns 0, or 1 when the allocator returned NULL.

Memory ops become real allocations (on the host every named pool, SRAM or
DRAM, is plain memory: one allocation per `dnn.pool_init` per run; the
table lists them under "pools"): `dnn.malloc` and `dnn.pool_init` ->
libc `aligned_alloc` (size rounded up to the alignment, as C11 requires; the
accounting uses the IR's size), `dnn.dealloc` / `dnn.pool_release` -> `free`,
`dnn.mem_offset` -> pool + offset, `dnn.view` -> the same pointer,
`dnn.subview` -> source + offset,
`dnn.memcpy{kind=host_to_host}` -> `memcpy`. The only external symbols are
these three libc functions.

Each compute op is a numbered *site*: the code fills a stack array with the
data pointers of the kernel inputs in order (variadic inputs expanded, NULL
for an absent optional input), then the destinations, then the op's
`workspace` (kernel scratch, a planned buffer) when it has one, and calls
`kernel(site, buffers)` through the pointer that `NAME_init` stored. The
JSON table (`NAME_meta`) describes each site: kernel name, the shape and
dtype of every buffer, the kernel keyword arguments; plus the graph inputs
and outputs and the weight-pool layout. The runtime (pyocc.runtime.bridge)
turns it into numpy views and host-kernel calls.

xDSL's llvmlite exporter cannot convert indirect calls, so `to_llvm_ir`
converts the one function that makes them (`NAME_dispatch`) with a small
shim; every other op goes through `xdsl.backend.llvm`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from xdsl.context import Context
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
    ModuleOp,
    Signedness,
    StringAttr,
    TensorType,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from pyocc.dialects.dnn.ops import (
    DeallocOp,
    DnnComputeOp,
    MallocOp,
    MemcpyOp,
    MemOffsetOp,
    PoolInitOp,
    PoolReleaseOp,
    SubviewOp,
    ViewOp,
    WeightOp,
    type_bytes,
)

if TYPE_CHECKING:
    import llvmlite.ir

ABI_VERSION = 1
#: alignment of every weight in the constant pool
WEIGHT_ALIGNMENT = 64
#: slots of the `state` array the generated code updates
STATE_ALLOC_CALLS, STATE_FREE_CALLS, STATE_CURRENT_BYTES, STATE_PEAK_BYTES = range(4)
STATE_SLOTS = 4
#: the libc functions generated code may call, and their llvm signatures
PTR = llvm.LLVMPointerType()
LIBC_FUNCTIONS: dict[str, llvm.LLVMFunctionType] = {
    "aligned_alloc": llvm.LLVMFunctionType([i64, i64], PTR),
    "free": llvm.LLVMFunctionType([PTR]),
    "memcpy": llvm.LLVMFunctionType([PTR, PTR, i64], PTR),
}
MODULE_FUNCTIONS_SYMBOL = "pyocc_functions"
#: where generated code can run
TARGETS = ("host", "cuda")


def cannot_lower(op: Operation, reason: str) -> PassFailedException:
    """The error that stops convert-dnn-to-llvm at `op`, saying why."""
    return PassFailedException(f"convert-dnn-to-llvm: cannot lower {op.name}: {reason}")


# ---------------------------------------------------------------------------
# Types -> the JSON table's (shape, dtype)
# ---------------------------------------------------------------------------


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


@dataclass
class _FunctionLowering:
    """Lowers one buffer-form `func.func` into its ABI functions."""

    function: func.FuncOp
    name: str = ""
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    sites: list[dict[str, Any]] = field(default_factory=list)
    weights: WeightLayout = field(default_factory=WeightLayout)
    #: per-run allocations the IR implies
    tally: MemoryTally = field(default_factory=MemoryTally)
    #: every dnn.pool_init: {"name", "size", "alignment"} (name null when anonymous)
    pools: list[dict[str, Any]] = field(default_factory=list)
    #: llvm pointer of each memref value
    pointers: dict[SSAValue, SSAValue] = field(default_factory=dict)
    #: IR byte size of each buffer that dnn.malloc / dnn.pool_init created
    allocated: dict[SSAValue, int] = field(default_factory=dict)
    #: blocks after the entry block, in order (each allocation's NULL check splits one)
    _extra_blocks: list[Block] = field(default_factory=list)

    def lower(self) -> list[Operation]:
        self.name = check_lowerable(self.function)
        run = self._lower_run()
        meta = self._meta()
        return [*self._abi_functions(meta), run]

    # -- the run function ---------------------------------------------------

    def _lower_run(self) -> llvm.FuncOp:
        entry = Block(arg_types=[PTR, PTR, PTR, PTR])
        self.inputs_arg, self.outputs_arg, self.weights_arg, self.state_arg = entry.args
        b = self.b = LlvmBuilder(entry)
        self.oom = Block()
        body = self.function.body.block

        # one stack array serves every kernel call: size it for the widest site
        widest = max((self._slot_count(op) for op in body.ops if isinstance(op, DnnComputeOp)), default=0)
        self.slots = b.add(llvm.AllocaOp(b.const(max(widest, 1)), PTR, alignment=8)).results[0]

        for arg, is_output, spec in graph_arguments(self.function):
            group, base = (self.outputs, self.outputs_arg) if is_output else (self.inputs, self.inputs_arg)
            self.pointers[arg] = b.load(b.gep(base, len(group), PTR), PTR)
            group.append(spec)

        for op in body.ops:
            self._lower_op(op)

        self.oom.add_op(llvm.ReturnOp(LlvmBuilder(self.oom).const(1, i32)))
        region = Region([entry])
        # blocks were appended as the lowering split them; the failure exit goes last
        for block in self._extra_blocks:
            region.add_block(block)
        region.add_block(self.oom)
        return llvm.FuncOp(f"{self.name}_run", llvm.LLVMFunctionType([PTR, PTR, PTR, PTR], i32),
                           linkage=llvm.LinkageAttr("external"), body=region)

    @staticmethod
    def _slot_count(op: DnnComputeOp) -> int:
        count = len(op.destinations()) + (getattr(op, "workspace", None) is not None)
        for value in op.kernel_inputs():
            count += len(value) if isinstance(value, list) else 1
        return count

    def _pointer(self, op: Operation, value: SSAValue) -> SSAValue:
        if value not in self.pointers:
            raise cannot_lower(op, f"operand {value.name_hint or value} is not a buffer this lowering knows "
                            "(a graph argument, dnn.malloc, dnn.mem_offset, dnn.view, dnn.subview or dnn.weight)")
        return self.pointers[value]

    def _lower_op(self, op: Operation) -> None:
        b = self.b
        match op:
            case func.ReturnOp():
                if op.operands:
                    raise cannot_lower(op, "the function returns values; outputs must be destination arguments")
                b.add(llvm.ReturnOp(b.const(0, i32)))
            case DnnComputeOp():
                self._lower_compute(op)
            case WeightOp():
                self._lower_weight(op)
            case ViewOp():
                buffer_spec(op, op.result.type)
                self.pointers[op.result] = self._pointer(op, op.source)
            case SubviewOp():
                buffer_spec(op, op.result.type)
                self.pointers[op.result] = b.gep(self._pointer(op, op.source), op.offset.value.data, i8)
            case MallocOp() | PoolInitOp():
                result = op.results[0]
                buffer_spec(op, result.type)
                size, alignment = op.size.value.data, op.alignment.value.data
                if alignment & (alignment - 1):
                    raise cannot_lower(op, f"alignment {alignment} is not a power of two")
                self.pointers[result] = self._allocate(size, alignment)
                self.allocated[result] = size
                if isinstance(op, PoolInitOp):
                    name = op.pool_name.data if op.pool_name is not None else None
                    self.pools.append({"name": name, "size": size, "alignment": alignment})
            case DeallocOp() | PoolReleaseOp():
                value = op.operands[0]
                if value not in self.allocated:
                    raise cannot_lower(op, "its operand was not allocated by dnn.malloc / dnn.pool_init in this function")
                self._free(self._pointer(op, value), self.allocated.pop(value))
            case MemOffsetOp():
                buffer_spec(op, op.result.type)
                pool = self._pointer(op, op.pool)
                self.pointers[op.result] = b.gep(pool, op.offset.value.data, i8)
            case MemcpyOp():
                if op.kind.data != "host_to_host":
                    raise cannot_lower(op, f"kind '{op.kind.data}' needs a device; target=host copies host_to_host only")
                b.call("memcpy", self._pointer(op, op.target), self._pointer(op, op.source),
                       b.const(op.size.value.data), returns=PTR)
            case _:
                raise cannot_lower(op, "no host lowering exists for this op")

    def _lower_compute(self, op: DnnComputeOp) -> None:
        b = self.b
        if not op.on_buffers:
            raise cannot_lower(op, "it is in tensor form; run dnn-insert-memory-ops first")
        values: list[SSAValue | None] = []
        inputs: list[Any] = []
        for value in op.kernel_inputs():
            if isinstance(value, list):
                inputs.append([buffer_spec(op, v.type) for v in value])
                values.extend(value)
            elif value is None:
                inputs.append(None)
                values.append(None)
            else:
                inputs.append(buffer_spec(op, value.type))
                values.append(value)
        destinations = op.destinations()
        outputs = [buffer_spec(op, v.type) for v in destinations]
        values.extend(destinations)
        # kernel scratch (a planned buffer) goes after the outputs; the numpy kernels ignore it
        workspace = getattr(op, "workspace", None)
        if workspace is not None:
            values.append(workspace)
        kwargs = {name: kernel_kwarg(op, name, attr) for name, attr in op.kernel_attributes().items()}
        site = len(self.sites)
        self.sites.append({
            "site": site,
            "op": op.name,
            "kernel": op.kernel,
            "inputs": inputs,
            "outputs": outputs,
            "out_keyword": "outs" if hasattr(op, "outs") else "out",
            "kwargs": kwargs,
            "workspace": None if workspace is None else buffer_spec(op, workspace.type),
        })
        null = None
        for slot, value in enumerate(values):
            if value is None:
                null = null or b.add(llvm.ZeroOp(result_types=[PTR])).results[0]
                pointer = null
            else:
                pointer = self._pointer(op, value)
            b.store(pointer, b.gep(self.slots, slot, PTR))
        b.call(f"{self.name}_dispatch", b.const(site), self.slots)

    def _lower_weight(self, op: WeightOp) -> None:
        self.pointers[op.result] = self.b.gep(self.weights_arg, self.weights.place_weight(op), i8)

    # -- allocation and its accounting ---------------------------------------

    def _allocate(self, size: int, alignment: int) -> SSAValue:
        """aligned_alloc + a NULL check that leaves `run` with 1, then the
        counters: one more call, `size` more bytes, the peak raised."""
        b = self.b
        # C11 wants a multiple of the alignment, and a zero size may return NULL
        rounded = max(alignment, -(-size // alignment) * alignment)
        pointer = b.call("aligned_alloc", b.const(alignment), b.const(rounded), returns=PTR)
        # xDSL's icmp takes integers only: compare the address with 0
        address = b.add(llvm.PtrToIntOp(pointer, i64)).results[0]
        failed = b.add(llvm.ICmpOp(address, b.const(0), IntegerAttr(llvm.ICmpPredicateFlag.EQ.to_int(), i64))).results[0]
        next_block = Block()
        b.add(llvm.CondBrOp(failed, self.oom, [], next_block, []))
        self._extra_blocks.append(next_block)
        b.block = next_block
        count_allocation(b, self.state_arg, b.const(size))
        self.tally.allocate(size)
        return pointer

    def _free(self, pointer: SSAValue, size: int) -> None:
        self.b.call("free", pointer)
        count_free(self.b, self.state_arg, size)
        self.tally.free(size)

    # -- the table and the small ABI functions -------------------------------

    def _meta(self) -> dict[str, Any]:
        return {
            **table_header(self.name, self.inputs, self.outputs, self.weights),
            "sites": self.sites,
            # what the IR implies; the native counters must agree after a run
            # one entry per dnn.pool_init (several with named memory pools)
            "pools": self.pools,
            "memory": self.tally.as_json(),
        }

    def _abi_functions(self, meta: dict[str, Any]) -> list[Operation]:
        name = self.name
        kernel_global = f"{name}_kernel"
        # the callback is kept as an i64: xDSL exports a pointer-typed global's
        # zero initializer as `ptr 0`, which LLVM rejects
        ops: list[Operation] = [llvm.GlobalOp(i64, kernel_global, "internal", value=IntegerAttr(0, i64))]
        ops += string_global(f"{name}_meta_json", json.dumps(meta, separators=(",", ":")))

        init = Block(arg_types=[PTR])
        b = LlvmBuilder(init)
        b.store(b.load(init.args[0], i64), b.add(llvm.AddressOfOp(kernel_global, PTR)).results[0])
        b.add(llvm.ReturnOp())
        ops.append(llvm.FuncOp(f"{name}_init", llvm.LLVMFunctionType([PTR]),
                               linkage=llvm.LinkageAttr("external"), body=Region(init)))

        destroy = Block()
        b = LlvmBuilder(destroy)
        b.store(b.const(0), b.add(llvm.AddressOfOp(kernel_global, PTR)).results[0])
        b.add(llvm.ReturnOp())
        ops.append(llvm.FuncOp(f"{name}_destroy", llvm.LLVMFunctionType([]),
                               linkage=llvm.LinkageAttr("external"), body=Region(destroy)))

        dispatch = Block(arg_types=[i64, PTR])
        b = LlvmBuilder(dispatch)
        address = b.load(b.add(llvm.AddressOfOp(kernel_global, PTR)).results[0], i64)
        callback = b.add(llvm.IntToPtrOp(address)).results[0]
        indirect = llvm.CallOp("indirect", callback, *dispatch.args)
        del indirect.properties["callee"]  # an indirect call: the callee is the first operand
        b.add(indirect)
        b.add(llvm.ReturnOp())
        ops.append(llvm.FuncOp(f"{name}_dispatch", llvm.LLVMFunctionType([i64, PTR]),
                               linkage=llvm.LinkageAttr("internal"), body=Region(dispatch)))

        ops.append(string_getter(f"{name}_meta", f"{name}_meta_json"))
        return ops


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


@dataclass(frozen=True)
class ConvertDnnToLlvmPass(ModulePass):
    """Lower buffer-form dnn functions to llvm-dialect functions with the C
    ABI described in this module's docstring."""

    name = "convert-dnn-to-llvm"

    target: str = "host"
    """Where the code runs: `host` (the CPU, kernels called through a table
    the runtime fills) or `cuda` (an NVIDIA GPU driven through the CUDA
    runtime, cuDNN and cuBLAS; see pyocc.lowering.convert_dnn_to_cuda)."""

    workspace: int = 32 << 20
    """target=cuda: bytes of the convolution workspace allocated at init;
    each convolution takes the fastest algorithm whose workspace fits."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.target not in TARGETS:
            raise PassFailedException(
                f"convert-dnn-to-llvm: unknown target '{self.target}' (expected one of {', '.join(TARGETS)})")
        if self.workspace < 0:
            raise PassFailedException(f"convert-dnn-to-llvm: workspace must be >= 0 bytes, got {self.workspace}")
        lower_function = self._function_lowering()
        lowered: list[Operation] = []
        names: list[str] = []
        for top in op.ops:
            if isinstance(top, func.FuncOp):
                if top.is_declaration:
                    raise cannot_lower(top, f"@{top.sym_name.data} has no body")
                lowered += lower_function(top)
                names.append(top.sym_name.data)
            elif isinstance(top, llvm.FuncOp | llvm.GlobalOp):
                lowered.append(top.clone())
            else:
                raise cannot_lower(top, "only func.func is lowered at module level")
        if self.target == "cuda":
            from pyocc.lowering.convert_dnn_to_cuda import declarations

            lowered += declarations()
        else:
            for callee, signature in LIBC_FUNCTIONS.items():
                lowered.append(llvm.FuncOp(callee, signature, linkage=llvm.LinkageAttr("external")))
        lowered += string_global(f"{MODULE_FUNCTIONS_SYMBOL}_json", json.dumps(names))
        lowered.append(string_getter(MODULE_FUNCTIONS_SYMBOL, f"{MODULE_FUNCTIONS_SYMBOL}_json"))
        body = op.body.block
        for old in list(body.ops):
            old.detach()
            old.erase(safe_erase=False)
        body.add_ops(lowered)


    def _function_lowering(self) -> Callable[[func.FuncOp], list[Operation]]:
        """How one function lowers for this pass's target."""
        if self.target == "cuda":
            from pyocc.lowering.convert_dnn_to_cuda import CudaFunctionLowering

            return lambda f: CudaFunctionLowering(f, workspace_bytes=self.workspace).lower()
        return lambda f: _FunctionLowering(f).lower()


# ---------------------------------------------------------------------------
# From the llvm dialect to LLVM IR text, and to a runnable model
# ---------------------------------------------------------------------------


def read_meta(module: ModuleOp, name: str) -> dict[str, Any]:
    """The JSON table of function `name` in a lowered module."""
    for op in module.ops:
        if isinstance(op, llvm.GlobalOp) and op.sym_name.data == f"{name}_meta_json":
            assert isinstance(op.value, StringAttr)
            return json.loads(op.value.data.rstrip("\0"))
    raise KeyError(name)


def lowered_functions(module: ModuleOp) -> list[str]:
    """The function names a lowered module exports (`pyocc_functions`)."""
    for op in module.ops:
        if isinstance(op, llvm.GlobalOp) and op.sym_name.data == f"{MODULE_FUNCTIONS_SYMBOL}_json":
            assert isinstance(op.value, StringAttr)
            return json.loads(op.value.data.rstrip("\0"))
    return []


def to_llvmlite(module: ModuleOp) -> llvmlite.ir.Module:
    """Convert a lowered (llvm-dialect) module to llvmlite IR: xDSL's exporter,
    plus indirect `llvm.call`s, which it does not convert."""
    import llvmlite.ir as ir
    from xdsl.backend.llvm.convert import convert_module
    from xdsl.backend.llvm.convert_op import convert_op

    module = module.clone()
    bodies: dict[str, Region] = {}
    linkages: dict[str, str] = {}
    for op in module.ops:
        if isinstance(op, llvm.FuncOp) and any(
            isinstance(inner, llvm.CallOp) and inner.callee is None for inner in op.walk()
        ):
            bodies[op.sym_name.data] = op.detach_region(op.body)
            linkages[op.sym_name.data] = op.linkage.linkage.data if op.linkage is not None else "external"
            op.add_region(Region())
    llvm_module = convert_module(module, fallback_target_triple=None)
    for name, region in bodies.items():
        function = llvm_module.get_global(name)
        function.linkage = linkages[name]  # a declaration's linkage is not exported
        if len(region.blocks) != 1:
            raise NotImplementedError(f"@{name}: indirect calls are converted in one-block functions only")
        block = region.block
        builder = ir.IRBuilder(function.append_basic_block())
        values: dict[SSAValue, ir.Value] = dict(zip(block.args, function.args))
        for op in block.ops:
            if isinstance(op, llvm.CallOp) and op.callee is None:
                target, *args = (values[a] for a in op.args)
                signature = ir.FunctionType(
                    ir.VoidType() if op.returned is None else _llvm_type(op.returned.type),
                    [a.type for a in args])
                # llvmlite's call() reads the signature from a typed pointer, and
                # builder.bitcast() drops a ptr -> ptr cast: insert the cast by hand
                typed = ir.instructions.CastInstr(builder.block, "bitcast", target, ir.PointerType(signature))
                builder._insert(typed)
                result = builder.call(typed, args)
                if op.returned is not None:
                    values[op.returned] = result
            else:
                convert_op(op, builder, values)
    return llvm_module


def _llvm_type(t: Attribute) -> llvmlite.ir.Type:
    from xdsl.backend.llvm.convert_type import convert_type

    return convert_type(t)


def to_llvm_ir(module: ModuleOp) -> str:
    """LLVM IR text of a lowered module."""
    return str(to_llvmlite(module))


def _read_resource(key: str, entry: dict[str, Any]) -> bytes:
    """A dense_resource blob's bytes from pyocc's weight store."""
    from pyocc.weights import load_bytes

    return load_bytes(DenseResourceAttr.from_params(key, TensorType(i1, entry["shape"])))


def compile_module(module: ModuleOp, function: str | None = None, target: str = "host",
                   cuda_libraries: Any = None, workspace: int = ConvertDnnToLlvmPass.workspace) -> Any:
    """Lower a buffer-form module (it is not modified) and JIT function
    `function` (default: the only one) into a runnable model: a
    CompiledModel on the host; on target "cuda" a CudaModel bound to
    `cuda_libraries` (anything with `symbols() -> {name: address}`; default
    NVIDIA's libraries, pyocc.runtime.cuda.CudaLibraries)."""
    from pyocc.errors import PyoccError
    from pyocc.runtime.bridge import pack_weight_pool
    from pyocc.runtime.jit import CompiledModel

    lowered = module.clone()
    try:
        ConvertDnnToLlvmPass(target=target, workspace=workspace).apply(Context(), lowered)
    except PassFailedException as e:
        raise PyoccError(str(e)) from None
    names = lowered_functions(lowered)
    if function is None:
        if len(names) != 1:
            raise PyoccError(f"the module has functions {names}; say which one to compile")
        function = names[0]
    if function not in names:
        raise PyoccError(f"no function @{function} in the module (it has {names})")
    meta = read_meta(lowered, function)
    weight_pool = pack_weight_pool(meta, _read_resource)
    if target == "cuda":
        from pyocc.runtime.cuda_model import CudaModel

        if cuda_libraries is None:
            from pyocc.runtime.cuda import CudaLibraries

            cuda_libraries = CudaLibraries.load()
        return CudaModel(to_llvm_ir(lowered), meta, weight_pool, cuda_libraries.symbols(), keepalive=cuda_libraries)
    return CompiledModel(to_llvm_ir(lowered), meta, weight_pool)

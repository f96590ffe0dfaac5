"""convert-dnn-to-llvm{target=host}: one buffer-form function -> the llvm
functions of the host C ABI (described in pyocc.lowering.convert_dnn_to_llvm).

Memory ops become libc calls and pointer arithmetic; each compute op is a
numbered *site* of the JSON table, called as `NAME_dispatch(site, buffers)`:
the code fills a stack array with the data pointers of the kernel inputs
(variadic inputs expanded, NULL for an absent optional one), then the
destinations. When the model is exported to LLVM (pyocc.lowering.convert_dnn_to_llvm.to_llvmlite)
each site becomes either a native kernel generated from its table entry
(pyocc.lowering.native) or a call of the numpy kernel through the callback
that `NAME_init` stored.

A run longer than `run_part_ops` compute ops and copies is split: the run
keeps the allocations, their checks and frees, and calls internal functions
`NAME_run_part<k>` of at most that many ops each, in order. A buffer is an
address into a graph argument, the weights or an allocation, so only those
pointers cross: the inputs, outputs and weights arrays, and an array of the
run's allocations. LLVM's code generation of one long straight-line function
grows faster than its length; of bounded parts, linearly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import IntegerAttr, UnitAttr, i8, i32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from pyocc import progress
from pyocc.dialects.dnn.ops import (
    SCRATCH_COPIES,
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
)
from pyocc.lowering.host_allocator import ALLOCATE, RELEASE
from pyocc.lowering.llvm_common import (
    PTR,
    LlvmBuilder,
    MemoryTally,
    WeightLayout,
    buffer_spec,
    callees,
    cannot_lower,
    check_lowerable,
    count_allocation,
    count_free,
    graph_arguments,
    kernel_kwarg,
    string_getter,
    string_global,
    table_header,
)
from pyocc.units import plural

#: the functions host code calls outside itself, and their llvm signatures:
#: libc's memcpy, and the module's allocator (pyocc.lowering.host_allocator:
#: declared here, defined when the module is exported on malloc and free)
HOST_FUNCTIONS: dict[str, llvm.LLVMFunctionType] = {
    ALLOCATE: llvm.LLVMFunctionType([i64, i64], PTR),
    RELEASE: llvm.LLVMFunctionType([PTR]),
    "memcpy": llvm.LLVMFunctionType([PTR, PTR, i64], PTR),
}

#: the copy of a band of rows, shared by every strided dnn.memcpy of a module:
#: (target, source, size, count, target stride, source stride)
STRIDED_COPY = "pyocc_strided_copy"
STRIDED_COPY_TYPE = llvm.LLVMFunctionType([PTR, PTR, i64, i64, i64, i64])

#: the most compute ops and copies one function of a host run holds (the pass's run_part_ops)
RUN_PART_OPS = 512
#: a part of a split run: (inputs, outputs, weights, the run's allocations)
RUN_PART_TYPE = llvm.LLVMFunctionType([PTR, PTR, PTR, PTR])


def run_part_name(name: str, index: int) -> str:
    """The symbol of part `index` of function `name`'s split run."""
    return f"{name}_run_part{index}"


def is_run_code(symbol: str, name: str) -> bool:
    """Whether `symbol` is function `name`'s run or a part of it (the code
    that calls its sites)."""
    return symbol == f"{name}_run" or (symbol.startswith(f"{name}_run_part")
                                       and symbol[len(f"{name}_run_part"):].isdigit())


#: the root of a buffer's address: ("input" | "output", index), ("weights", 0) or ("allocation", index)
Root = tuple[str, int]


@dataclass
class HostFunctionLowering:
    """Lowers one buffer-form `func.func` into its ABI functions."""

    function: func.FuncOp
    #: split a run of more compute ops and copies than this into parts (0: never)
    run_part_ops: int = RUN_PART_OPS
    name: str = ""
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    sites: list[dict[str, Any]] = field(default_factory=list)
    weights: WeightLayout = field(default_factory=WeightLayout)
    #: per-run allocations the IR implies
    tally: MemoryTally = field(default_factory=MemoryTally)
    #: every dnn.pool_init: {"name", "size", "alignment"} (name null when anonymous)
    pools: list[dict[str, Any]] = field(default_factory=list)
    #: llvm pointer of each memref value, in the function being written
    pointers: dict[SSAValue, SSAValue] = field(default_factory=dict)
    #: each memref value's address: its root and a byte offset (any function can rebuild its pointer)
    addresses: dict[SSAValue, tuple[Root, int]] = field(default_factory=dict)
    #: each dnn.weight result's entry in `weights` (a site's "weight_entries": those it alone reads)
    weight_entries: dict[SSAValue, int] = field(default_factory=dict)
    #: the parts of a split run, in call order
    parts: list[llvm.FuncOp] = field(default_factory=list)
    #: IR byte size of each buffer that dnn.malloc / dnn.pool_init created
    allocated: dict[SSAValue, int] = field(default_factory=dict)
    #: blocks after the entry block, in order (each allocation's NULL check splits one)
    _extra_blocks: list[Block] = field(default_factory=list)
    #: the addresses and i64 constants the run made (_gep, _i64)
    _geps: dict[tuple[SSAValue, int, Attribute], SSAValue] = field(default_factory=dict)
    _constants: dict[int, SSAValue] = field(default_factory=dict)
    #: the root pointers the function being written has loaded (the run has them all)
    _roots: dict[Root, SSAValue] = field(default_factory=dict)
    #: the part being written: its arrays of input, output and allocation pointers
    _root_arrays: dict[str, SSAValue] = field(default_factory=dict)
    #: a split run's array of its allocations (None: the run is one function)
    allocation_array: SSAValue | None = None
    #: the results of dnn.malloc / dnn.pool_init, in order (their index in that array)
    allocated_roots: list[SSAValue] = field(default_factory=list)

    def lower(self) -> list[Operation]:
        """The ABI functions and globals of the function (its `run` last,
        after the parts it calls)."""
        self.name = check_lowerable(self.function)
        run = self._lower_run()
        meta = self._meta()
        return [*self._abi_functions(meta), *self.parts, run]

    # -- the run function ---------------------------------------------------

    def _lower_run(self) -> llvm.FuncOp:
        entry = Block(arg_types=[PTR, PTR, PTR, PTR])
        self.inputs_arg, self.outputs_arg, self.weights_arg, self.state_arg = entry.args
        b = self.b = LlvmBuilder(entry)
        self.oom = Block()
        body = self.function.body.block

        # one stack array serves every kernel call: size it for the widest site
        self.widest = max((self._slot_count(op) for op in body.ops if isinstance(op, DnnComputeOp)), default=0)
        self.slots = b.add(llvm.AllocaOp(b.const(max(self.widest, 1)), PTR, alignment=8)).results[0]

        for arg, is_output, spec in graph_arguments(self.function):
            group, base = (self.outputs, self.outputs_arg) if is_output else (self.inputs, self.inputs_arg)
            root = ("output" if is_output else "input", len(group))
            self.pointers[arg] = self._roots[root] = b.load(b.gep(base, len(group), PTR), PTR)
            self.addresses[arg] = (root, 0)
            group.append(spec)
        self._roots[("weights", 0)] = self.weights_arg

        code_ops = sum(isinstance(op, DnnComputeOp | MemcpyOp) for op in body.ops)
        split = 0 < self.run_part_ops < code_ops
        if split:
            allocations = sum(isinstance(op, MallocOp | PoolInitOp) for op in body.ops)
            self.allocation_array = b.add(llvm.AllocaOp(b.const(max(allocations, 1)), PTR, alignment=8)).results[0]
        run_state = self._function_state()
        part_ops = 0
        ops = list(body.ops)
        with progress.steps(f"lowering {plural(len(ops), 'op')} to LLVM", len(ops)) as step:
            for op in ops:
                if not split:
                    self._lower_op(op)
                elif isinstance(op, MallocOp | PoolInitOp | DeallocOp | PoolReleaseOp | func.ReturnOp):
                    # allocations (whose failure leaves the run), frees and the return stay in the run
                    self._leave_part(run_state)
                    self._lower_op(op)
                else:
                    if isinstance(op, DnnComputeOp | MemcpyOp):
                        if self.b is run_state[0] or part_ops == self.run_part_ops:
                            self._leave_part(run_state)
                            self._start_part()
                            part_ops = 0
                        part_ops += 1
                    self._lower_op(op)
                step()
        self._leave_part(run_state)

        self.oom.add_op(llvm.ReturnOp(LlvmBuilder(self.oom).const(1, i32)))
        region = Region([entry])
        # blocks were appended as the lowering split them; the failure exit goes last
        for block in self._extra_blocks:
            region.add_block(block)
        region.add_block(self.oom)
        run = llvm.FuncOp(f"{self.name}_run", llvm.LLVMFunctionType([PTR, PTR, PTR, PTR], i32),
                          linkage=llvm.LinkageAttr("external"), body=region)
        # The run is a straight line of calls (the kernels carry the compute),
        # one op per transfer, view and kernel: tens of thousands for a
        # scratchpad program, which LLVM's O3 and instruction selection took
        # minutes over. Left unoptimised it compiles in linear time, and
        # nothing is inlined into it.
        run.no_inline = UnitAttr()
        run.optimize_none = UnitAttr()
        return run

    # -- the parts of a split run ---------------------------------------------

    def _function_state(self) -> tuple[Any, ...]:
        """What belongs to the function being written (_restore sets it back)."""
        return self.b, self.slots, self.pointers, self._geps, self._constants, self._roots

    def _restore(self, state: tuple[Any, ...]) -> None:
        self.b, self.slots, self.pointers, self._geps, self._constants, self._roots = state

    def _leave_part(self, run_state: tuple[Any, ...]) -> None:
        """End the part being written, if any, and write into the run again."""
        if self.b is not run_state[0]:
            self.b.add(llvm.ReturnOp())
            self._restore(run_state)

    def _start_part(self) -> None:
        """Call a new part from the run (the current function) and write into it from now on."""
        name = run_part_name(self.name, len(self.parts))
        self.b.call(name, self.inputs_arg, self.outputs_arg, self.weights_arg, self.allocation_array)
        entry = Block(arg_types=RUN_PART_TYPE.inputs.data)
        b = LlvmBuilder(entry)
        part = llvm.FuncOp(name, RUN_PART_TYPE, linkage=llvm.LinkageAttr("internal"), body=Region(entry))
        # as the run: a straight line of calls, compiled unoptimised, never inlined
        part.no_inline = UnitAttr()
        part.optimize_none = UnitAttr()
        self.parts.append(part)
        inputs, outputs, weights, allocations = entry.args
        slots = b.add(llvm.AllocaOp(b.const(max(self.widest, 1)), PTR, alignment=8)).results[0]
        self._restore((b, slots, {}, {}, {}, {("weights", 0): weights}))
        self._root_arrays = {"input": inputs, "output": outputs, "allocation": allocations}

    @staticmethod
    def _slot_count(op: DnnComputeOp) -> int:
        count = len(op.destinations()) + (getattr(op, "workspace", None) is not None)
        for value in op.kernel_inputs():
            count += len(value) if isinstance(value, list) else 1
        return count

    def _pointer(self, op: Operation, value: SSAValue) -> SSAValue:
        if value in self.pointers:
            return self.pointers[value]
        if value not in self.addresses:
            raise cannot_lower(op, f"operand {value.name_hint or value} is not a buffer this lowering knows "
                            "(a graph argument, dnn.malloc, dnn.mem_offset, dnn.view, dnn.subview or dnn.weight)")
        # made in another function of a split run: rebuilt from its root here
        root, offset = self.addresses[value]
        if root not in self._roots:
            array = self._root_arrays[root[0]]
            self._roots[root] = self.b.load(self._gep(array, root[1], PTR), PTR)
        self.pointers[value] = self._gep(self._roots[root], offset, i8)
        return self.pointers[value]

    def _address(self, result: SSAValue, source: SSAValue, offset: int) -> None:
        """`result` is `offset` bytes into `source`'s buffer."""
        root, base = self.addresses[source]
        self.addresses[result] = (root, base + offset)

    # The run is one chain of blocks (each allocation's NULL check splits it
    # and nothing branches back), so a value made once dominates every later
    # use: an address or a constant is made at its first use and reused.
    # A scheduled program asks for the same SRAM offsets, weight blocks and
    # kernel argument slots thousands of times.

    def _gep(self, base: SSAValue, index: int, element: Attribute) -> SSAValue:
        """&base[index] (LlvmBuilder.gep), made once per function."""
        key = (base, index, element)
        if key not in self._geps:
            self._geps[key] = self.b.gep(base, index, element)
        return self._geps[key]

    def _i64(self, value: int) -> SSAValue:
        """An i64 constant, made once per function."""
        if value not in self._constants:
            self._constants[value] = self.b.const(value)
        return self._constants[value]

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
                self._address(op.result, op.source, 0)
            case SubviewOp():
                buffer_spec(op, op.result.type)
                self.pointers[op.result] = self._gep(self._pointer(op, op.source), op.offset.value.data, i8)
                self._address(op.result, op.source, op.offset.value.data)
            case MallocOp() | PoolInitOp():
                result = op.results[0]
                buffer_spec(op, result.type)
                size, alignment = op.size.value.data, op.alignment.value.data
                if alignment & (alignment - 1):
                    raise cannot_lower(op, f"alignment {alignment} is not a power of two")
                self.pointers[result] = self._allocate(size, alignment)
                root = ("allocation", len(self.allocated_roots))
                self._roots[root] = self.pointers[result]  # allocations are made in the run
                self.allocated_roots.append(result)
                self.addresses[result] = (root, 0)
                if self.allocation_array is not None:  # a split run: its parts load it from there
                    self.b.store(self.pointers[result], self._gep(self.allocation_array, root[1], PTR))
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
                self.pointers[op.result] = self._gep(pool, op.offset.value.data, i8)
                self._address(op.result, op.pool, op.offset.value.data)
            case MemcpyOp():
                if op.kind.data != "host_to_host":
                    raise cannot_lower(op, f"kind '{op.kind.data}' needs a device; target=host copies host_to_host only")
                strided = op.strides()
                if strided is None:
                    b.call("memcpy", self._pointer(op, op.target), self._pointer(op, op.source),
                           self._i64(op.size.value.data), returns=PTR)
                else:
                    self._strided_copy(op, *strided)
            case _:
                raise cannot_lower(op, "no host lowering exists for this op")

    def _strided_copy(self, op: MemcpyOp, count: int, source_stride: int, target_stride: int) -> None:
        """One call of the module's shared STRIDED_COPY (a loop of `count`
        memcpys of `size` bytes, k * stride into each side; defined once by
        host_declarations): a loop per copy made a scheduled program's run
        function tens of thousands of blocks long."""
        b = self.b
        b.call(STRIDED_COPY, self._pointer(op, op.target), self._pointer(op, op.source),
               self._i64(op.size.value.data), self._i64(count), self._i64(target_stride), self._i64(source_stride))

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
            "workspace": None if workspace is None else _workspace_spec(op, workspace.type),
        })
        # the weights this op alone reads (no other op, copy or view): its native kernel may ask
        # for one in a layout of its own, which select_kernels then gives the weight's entry
        # (NativeKernel.weight_layouts, pyocc.lowering.native.registry)
        read = {str(position): self.weight_entries[value] for position, value in enumerate(op.kernel_inputs())
                if isinstance(value, SSAValue) and value in self.weight_entries and value.has_one_use()}
        if read:
            self.sites[-1]["weight_entries"] = read
        null = None
        for slot, value in enumerate(values):
            if value is None:
                null = null or b.add(llvm.ZeroOp(result_types=[PTR])).results[0]
                pointer = null
            else:
                pointer = self._pointer(op, value)
            b.store(pointer, self._gep(self.slots, slot, PTR))
        b.call(f"{self.name}_dispatch", b.const(site), self.slots)

    def _lower_weight(self, op: WeightOp) -> None:
        offset = self.weights.place_weight(op)
        self.weight_entries[op.result] = len(self.weights.entries) - 1
        self.pointers[op.result] = self._gep(self._roots[("weights", 0)], offset, i8)
        self.addresses[op.result] = (("weights", 0), offset)

    # -- allocation and its accounting ---------------------------------------

    def _allocate(self, size: int, alignment: int) -> SSAValue:
        """ALLOCATE (pyocc_alloc) + a NULL check that leaves `run` with 1,
        then the counters: one more call, `size` more bytes, the peak raised."""
        b = self.b
        # a whole number of alignment units, never zero bytes
        rounded = max(alignment, -(-size // alignment) * alignment)
        pointer = b.call(ALLOCATE, b.const(alignment), b.const(rounded), returns=PTR)
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
        self.b.call(RELEASE, pointer)
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


def host_declarations(lowered: list[Operation]) -> list[Operation]:
    """The functions host code calls outside itself (HOST_FUNCTIONS), and
    STRIDED_COPY's definition when the `lowered` functions call it."""
    ops: list[Operation] = [llvm.FuncOp(callee, signature, linkage=llvm.LinkageAttr("external"))
                            for callee, signature in HOST_FUNCTIONS.items()]
    if STRIDED_COPY in callees(lowered):
        ops.append(strided_copy_function())
    return ops


def strided_copy_function() -> llvm.FuncOp:
    """STRIDED_COPY, internal and never inlined (one copy of the loop per
    module, however many bands it moves):

        entry(target, source, size, count, ts, ss): br head(0)
        head(k): br k < count ? body : exit
        body:    memcpy(target + k * ts, source + k * ss, size); br head(k + 1)
        exit:    return
    """
    entry = Block(arg_types=STRIDED_COPY_TYPE.inputs.data)
    target, source, size, count, target_stride, source_stride = entry.args
    head, body, exit_ = Block(arg_types=[i64]), Block(), Block()
    b = LlvmBuilder(entry)
    b.add(llvm.BrOp(head, b.const(0)))
    k = head.args[0]
    b.block = head
    less = b.add(llvm.ICmpOp(k, count, IntegerAttr(llvm.ICmpPredicateFlag.SLT.to_int(), i64))).results[0]
    b.add(llvm.CondBrOp(less, body, [], exit_, []))
    b.block = body

    def at(base: SSAValue, stride: SSAValue) -> SSAValue:
        offset = b.add(llvm.MulOp(k, stride)).results[0]
        return b.add(llvm.GEPOp(base, [llvm.GEP_USE_SSA_VAL], i8, ssa_indices=[offset])).results[0]

    b.call("memcpy", at(target, target_stride), at(source, source_stride), size, returns=PTR)
    b.add(llvm.BrOp(head, b.add(llvm.AddOp(k, b.const(1))).results[0]))
    b.block = exit_
    b.add(llvm.ReturnOp())
    function = llvm.FuncOp(STRIDED_COPY, STRIDED_COPY_TYPE, linkage=llvm.LinkageAttr("internal"),
                           body=Region([entry, head, body, exit_]))
    function.no_inline = UnitAttr()
    return function


def _workspace_spec(op: Operation, workspace_type: Attribute) -> dict[str, Any]:
    """A kernel scratch's buffer spec; with "copies" when the plan made one
    copy per thread (dnn-memory-pool's `scratch_copies` attribute: the
    buffer holds that many copies of the size fitted for one thread)."""
    spec = buffer_spec(op, workspace_type)
    copies = op.attributes.get(SCRATCH_COPIES)
    if isinstance(copies, IntegerAttr) and copies.value.data > 1:
        spec["copies"] = copies.value.data
    return spec

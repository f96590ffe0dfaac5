"""`convert-dnn-to-llvm{target=cuda}`: the lowering of one buffer-form dnn
function to host code that drives a GPU: the ABI functions, the library
calls checked one by one, and the cuDNN descriptors. Each compute op is
lowered by the function registered for its class (pyocc.lowering.cuda.registry;
the op families in the sibling modules).

The generated code is ordinary LLVM IR for the CPU. It never runs a kernel of
its own: every buffer lives in device memory (the CUDA runtime), and every dnn
op becomes a short sequence of library calls: cuDNN for convolution, pooling,
activations, softmax, LRN and elementwise tensor arithmetic; cuBLAS for
matrix products; the runtime's asynchronous copies for concat, split and I/O.
The functions it may call are those of `pyocc.runtime.cuda_api` (one table
for the lowering, the runtime that binds them, and the CPU stand-in tests use).

ABI (per function NAME; version 1, "target": "cuda" in the table):

    int32_t NAME_init(const void *host_weights, int64_t *state);
    int32_t NAME_run(void *const *inputs, void *const *outputs, int64_t *state);
    int32_t NAME_destroy(int64_t *state);
    const char *NAME_meta(void);                  // the JSON table
    const char *pyocc_functions(void);

- `init` creates the stream, the cuDNN and cuBLAS handles, every descriptor,
  picks each convolution's algorithm (the fastest cuDNN ranks whose workspace
  fits the workspace limit), allocates one workspace of the largest size the
  chosen algorithms need and the weights, once, and copies the weights to the
  device. It counts what it allocated in `state` like `run` does.
- `run` takes host pointers; `dnn.memcpy` copies inputs in and outputs out on
  the stream. `dnn.malloc` / `dnn.dealloc` are real device allocations per
  run, as Occamy meant them (cudaMalloc / cudaFree), so eager and lazy mode
  pay one cudaMalloc per buffer per run. A planned pool (`dnn.pool_init`) is
  allocated once, by `init`, and freed by `destroy` (pool_allocation="init",
  the default): pool mode makes no cudaMalloc per run. With
  pool_allocation="run" (Occamy's way) `dnn.pool_init` / `dnn.pool_release`
  are a cudaMalloc / cudaFree per run. `dnn.mem_offset` -> pool + offset.
- `destroy` releases everything `init` created.
- `state` is `int64_t[5]`: cudaMalloc calls, cudaFree calls, bytes allocated
  now, peak bytes (as on the host), and the status of a failed call.

Every library call is checked: a nonzero status leaves the function at once,
returning the call's number (1-based) and storing its status in state[4];
the table's "calls" list says which call that was, so the runtime can name
it ("cudnnConvolutionForward (dnn.conv #3) failed: CUDNN_STATUS_BAD_PARAM").

Layouts: tensors are row-major (NCHW), float32. cuDNN descriptors take at
least four dimensions, so shorter shapes get trailing 1s; cuBLAS is
column-major, so a row-major C = A @ B is computed as C^T = B^T @ A^T.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    Float32Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    MemRefType,
    TensorType,
    f32,
    f64,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

import pyocc.dialects.dnn.ops as d
from pyocc.lowering.cuda.registry import cuda_lowering_for
from pyocc.lowering.cuda_kernels import (
    BINARY_FUNCTIONS,
    BLOCK,
    COMPARISONS,
    LOGICAL,
    Kernel,
    PointwiseKernel,
    grid,
    host_twins,
    pointer_bytes,
    ptx_module,
    row_major_strides,
)
from pyocc.lowering.limits import CUDA_CONV_SEARCH, CUDA_WORKSPACE
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
    numpy_dtype_name,
    string_getter,
    string_global,
    table_header,
)
from pyocc.lowering.llvm_math import (
    UNARY_FUNCTIONS,
    broadcast_strides,
)
from pyocc.runtime import cuda_api as api

#: the fifth state slot: the status of the call that failed
STATE_STATUS = 4
#: when a planned pool is allocated: once by NAME_init (freed by NAME_destroy), or per run (Occamy's way)
POOL_ALLOCATIONS = ("init", "run")

_KINDS: dict[str, Attribute] = {"ptr": PTR, "i32": i32, "u32": i32, "i64": i64, "f64": f64}


def declarations(lowered: Sequence[Operation]) -> list[llvm.FuncOp]:
    """An external `llvm.func` for each function of cuda_api.FUNCTIONS the
    `lowered` code calls, in that table's order. Only those: declaring all
    57 in every module cost a small model's compile 23 ms of its 132
    (building, printing and parsing them) for nothing."""
    called = callees(lowered)
    return [llvm.FuncOp(f.name, llvm.LLVMFunctionType([_KINDS[k] for k in f.kinds], i32),
                        linkage=llvm.LinkageAttr("external")) for f in api.FUNCTIONS if f.name in called]


def _dims(shape: Sequence[int]) -> list[int]:
    """A shape as cuDNN wants it: at least four dimensions (trailing 1s)."""
    dims = list(shape) or [1]
    return dims + [1] * (api.CUDNN_MIN_DIMS - len(dims))


def broadcast_shape(shape: Sequence[int], rank: int) -> list[int]:
    """numpy broadcasting: `shape` right-aligned to `rank` dimensions."""
    return [1] * (rank - len(shape)) + list(shape)


# ---------------------------------------------------------------------------
# One ABI function under construction
# ---------------------------------------------------------------------------


class _Code:
    """The blocks of one ABI function, a builder at its current block, and
    the exit every failed library call branches to: it stores the status in
    state[4] and returns the call's number."""

    def __init__(self, arg_types: Sequence[Attribute], state_index: int):
        self.entry = Block(arg_types=list(arg_types))
        self.blocks = [self.entry]
        self.b = LlvmBuilder(self.entry)
        self.state = self.entry.args[state_index]
        self.fail = Block(arg_types=[i32, i32])
        fb = LlvmBuilder(self.fail)
        status = fb.add(llvm.SExtOp(self.fail.args[1], i64)).results[0]
        fb.store(status, fb.gep(self.state, STATE_STATUS, i64))
        fb.add(llvm.ReturnOp(self.fail.args[0]))

    def next_block(self) -> Block:
        """Start a new block after the current one and build there."""
        block = Block()
        self.blocks.append(block)
        self.b.block = block
        return block

    def counted_loop(self, begin: int, end: int, body: Callable[[SSAValue], None]) -> None:
        """Emit `for k in range(begin, end): body(k)` at the current block,
        k an i64; `body` may add blocks (a checked call does). Nothing when
        the range is empty.

            br head(begin)
            head(k): br k < end ? body : exit
            body:    ...; br head(k + 1)
            exit:    (building goes on here)
        """
        if begin >= end:
            return
        b = self.b
        head, loop, exit_ = Block(arg_types=[i64]), Block(), Block()
        b.add(llvm.BrOp(head, b.const(begin)))
        self.blocks += [head, loop]
        b.block = head
        k = head.args[0]
        less = b.add(llvm.ICmpOp(k, b.const(end), IntegerAttr(llvm.ICmpPredicateFlag.SLT.to_int(), i64))).results[0]
        b.add(llvm.CondBrOp(less, loop, [], exit_, []))
        b.block = loop
        body(k)
        b.add(llvm.BrOp(head, b.add(llvm.AddOp(k, b.const(1))).results[0]))
        self.blocks.append(exit_)
        b.block = exit_

    def function(self, name: str, arg_types: Sequence[Attribute]) -> llvm.FuncOp:
        """The finished `llvm.func` (external linkage, returns i32)."""
        return llvm.FuncOp(name, llvm.LLVMFunctionType(list(arg_types), i32), linkage=llvm.LinkageAttr("external"),
                           body=Region([*self.blocks, self.fail]))


# ---------------------------------------------------------------------------
# The lowering of one function
# ---------------------------------------------------------------------------


@dataclass
class CudaFunctionLowering:
    """Lowers one buffer-form `func.func` into its cuda ABI functions."""

    function: func.FuncOp
    workspace_bytes: int = CUDA_WORKSPACE
    #: "init": each dnn.pool_init is one cudaMalloc in init; "run": one per run
    pool_allocation: str = "init"
    #: how init chooses a convolution's algorithm: "ranked" (cuDNN's heuristics) or "timed" (cuDNN runs each)
    conv_search: str = CUDA_CONV_SEARCH
    name: str = ""
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    weights: WeightLayout = field(default_factory=WeightLayout)
    #: what each checked call is, for error messages (call k is calls[k-1])
    calls: list[str] = field(default_factory=list)
    #: per-run allocations the IR implies
    tally: MemoryTally = field(default_factory=MemoryTally)
    #: the pools init allocates once (pool_allocation="init")
    init_tally: MemoryTally = field(default_factory=MemoryTally)
    #: pool value -> the global holding its device pointer (pools allocated by init)
    _init_pools: dict[SSAValue, str] = field(default_factory=dict)
    pools: list[dict[str, Any]] = field(default_factory=list)
    #: module-level globals this function needs (handles, descriptors, constants)
    globals_: list[Operation] = field(default_factory=list)
    pointers: dict[SSAValue, SSAValue] = field(default_factory=dict)
    #: values that hold host memory (graph arguments): only dnn.memcpy may touch them
    host_values: set[SSAValue] = field(default_factory=set)
    allocated: dict[SSAValue, int] = field(default_factory=dict)
    #: where each buffer lives: (the allocation or argument it is part of, byte offset)
    locations: dict[SSAValue, tuple[Any, int]] = field(default_factory=dict)
    _descriptors: dict[tuple[Any, ...], str] = field(default_factory=dict)
    _constants: dict[tuple[Any, ...], str] = field(default_factory=dict)
    #: whether run calls cuBLAS (init then creates its handle)
    uses_cublas: bool = False
    #: pointwise kernels pyocc writes for what cuDNN lacks (pyocc.lowering.cuda_kernels)
    kernels: list[Kernel] = field(default_factory=list)
    _kernel_globals: dict[Kernel, str] = field(default_factory=dict)
    _kernel_names: dict[Kernel, Kernel] = field(default_factory=dict)
    #: convolution algorithms chosen in init
    algorithms: int = 0
    #: convolutions without a planned workspace buffer: they share init's workspace
    shared_workspace_users: int = 0
    _op_counts: dict[str, int] = field(default_factory=dict)
    #: the least workspace init allocates (bytes): scratch of ops other than
    #: convolutions (a resize's intermediate), whatever the algorithms need
    workspace_floor: int = 0

    def lower(self) -> list[Operation]:
        """The ABI functions and the globals they use."""
        self.name = check_lowerable(self.function)
        self.init = _Code([PTR, PTR], state_index=1)
        self.destroy = _Code([PTR], state_index=0)
        self.run = _Code([PTR, PTR, PTR], state_index=2)
        self._handle_globals()
        self._begin_init()
        self._lower_run_body()
        self._end_init()
        self._end_destroy()
        functions = [
            self.init.function(f"{self.name}_init", [PTR, PTR]),
            self.run.function(f"{self.name}_run", [PTR, PTR, PTR]),
            self.destroy.function(f"{self.name}_destroy", [PTR]),
        ]
        meta = self._meta()
        return [*self.globals_, *string_global(f"{self.name}_meta_json", json.dumps(meta, separators=(",", ":"))),
                *functions, string_getter(f"{self.name}_meta", f"{self.name}_meta_json")]

    # -- globals ----------------------------------------------------------------

    def global_slot(self, suffix: str, type: Attribute = i64) -> str:
        """An internal, zero-initialised global (a handle is kept as an i64:
        xDSL exports a pointer global's zero initializer as `ptr 0`, which
        LLVM rejects)."""
        symbol = f"{self.name}_{suffix}"
        self.globals_.append(llvm.GlobalOp(type, symbol, "internal", value=IntegerAttr(0, type)))
        return symbol

    def _handle_globals(self) -> None:
        self.stream = self.global_slot("stream")
        self.cudnn = self.global_slot("cudnn")
        self.cublas = self.global_slot("cublas")
        self.device_weights = self.global_slot("weights")
        self.workspace = self.global_slot("workspace")
        #: the largest workspace a chosen algorithm needs (bytes), found in init
        self.workspace_size = self.global_slot("workspace_bytes")
        self.cuda_module = self.global_slot("module")

    def address(self, code: _Code, symbol: str) -> SSAValue:
        return code.b.add(llvm.AddressOfOp(symbol, PTR)).results[0]

    def load_global(self, code: _Code, symbol: str) -> SSAValue:
        return code.b.load(self.address(code, symbol), PTR)

    def int_array(self, code: _Code, values: Sequence[int]) -> SSAValue:
        """A pointer to a constant int32 array holding `values`."""
        key = ("ints", *values)
        if key not in self._constants:
            symbol = f"{self.name}_ints{len(self._constants)}"
            self._constants[key] = symbol
            self.globals_.append(llvm.GlobalOp(
                llvm.LLVMArrayType(IntAttr(len(values)), i32), symbol, "internal", constant=True,
                value=DenseIntOrFPElementsAttr.from_list(TensorType(i32, [len(values)]), list(values))))
        return self.address(code, self._constants[key])

    def scalar(self, code: _Code, value: float) -> SSAValue:
        """A pointer to a constant float (cuDNN's and cuBLAS's alpha and beta)."""
        key = ("f32", float(value))
        if key not in self._constants:
            symbol = f"{self.name}_f32_{len(self._constants)}"
            self._constants[key] = symbol
            self.globals_.append(llvm.GlobalOp(f32, symbol, "internal", constant=True,
                                               value=FloatAttr(float(value), f32)))
        return self.address(code, self._constants[key])

    # -- checked calls ------------------------------------------------------------

    def checked_call(self, code: _Code, function: str, *args: SSAValue | int | float, what: str) -> None:
        """Call a library function; branch to the failure exit on a nonzero
        status. Plain ints and floats become constants of the parameter's kind."""
        spec = api.BY_NAME[function]
        if len(args) != len(spec.params):
            raise AssertionError(f"{function} takes {len(spec.params)} arguments, got {len(args)}")
        b = code.b
        values = []
        for arg, kind in zip(args, spec.kinds):
            if isinstance(arg, SSAValue):
                values.append(arg)
            elif kind == "f64":
                values.append(b.add(llvm.ConstantOp(FloatAttr(float(arg), f64), f64)).results[0])
            elif kind == "ptr":
                if arg != 0:
                    raise AssertionError(f"{function}: an integer pointer argument must be 0 (NULL)")
                values.append(b.add(llvm.ZeroOp(result_types=[PTR])).results[0])
            else:
                values.append(b.const(int(arg), _KINDS[kind]))
        status = b.call(function, *values, returns=i32)
        assert status is not None
        self.calls.append(f"{function} ({what})")
        call_number = b.const(len(self.calls), i32)
        failed = b.add(llvm.ICmpOp(status, b.const(0, i32),
                                   IntegerAttr(llvm.ICmpPredicateFlag.NE.to_int(), i64))).results[0]
        here = b.block
        following = code.next_block()
        here.add_op(llvm.CondBrOp(failed, code.fail, [call_number, status], following, []))

    # -- descriptors (created in init, destroyed in destroy) -----------------------

    def descriptor(self, kind: str, key: tuple[Any, ...], configure: Callable[[SSAValue], None]) -> str:
        """The global holding a cuDNN descriptor of `kind` (Tensor, Filter,
        Convolution, ...) with parameters `key`, created once."""
        full_key = (kind, *key)
        if full_key in self._descriptors:
            return self._descriptors[full_key]
        symbol = self.global_slot(f"{kind.lower()}{len(self._descriptors)}")
        self._descriptors[full_key] = symbol
        self.checked_call(self.init, f"cudnnCreate{kind}Descriptor", self.address(self.init, symbol),
                   what=f"{kind.lower()} descriptor")
        configure(self.load_global(self.init, symbol))
        self.checked_call(self.destroy, f"cudnnDestroy{kind}Descriptor", self.load_global(self.destroy, symbol),
                   what=f"{kind.lower()} descriptor")
        return symbol

    def tensor_descriptor(self, shape: Sequence[int], strides: Sequence[int] | None = None) -> str:
        """A float tensor descriptor: `shape` with row-major (or given) strides."""
        dims = _dims(shape)
        strides = list(strides) if strides is not None else row_major_strides(list(shape) or [1])
        strides = strides + [1] * (len(dims) - len(strides))
        if len(dims) > api.CUDNN_MAX_DIMS:
            raise AssertionError("checked by the caller")

        def configure(desc: SSAValue) -> None:
            self.checked_call(self.init, "cudnnSetTensorNdDescriptor", desc, api.CUDNN_DATA_FLOAT, len(dims),
                       self.int_array(self.init, dims), self.int_array(self.init, strides), what=f"tensor {dims}")

        return self.descriptor("Tensor", (tuple(dims), tuple(strides)), configure)

    def filter_descriptor(self, shape: Sequence[int]) -> str:
        dims = _dims(shape)

        def configure(desc: SSAValue) -> None:
            self.checked_call(self.init, "cudnnSetFilterNdDescriptor", desc, api.CUDNN_DATA_FLOAT, api.CUDNN_TENSOR_NCHW,
                       len(dims), self.int_array(self.init, dims), what=f"filter {dims}")

        return self.descriptor("Filter", tuple(dims), configure)

    def activation_descriptor(self, mode: str, coef: float = 0.0) -> str:
        def configure(desc: SSAValue) -> None:
            self.checked_call(self.init, "cudnnSetActivationDescriptor", desc, api.ACTIVATION_MODES[mode],
                       api.CUDNN_NOT_PROPAGATE_NAN, coef, what=f"activation {mode}")

        return self.descriptor("Activation", (mode, coef), configure)

    def use(self, code: _Code, symbol: str) -> SSAValue:
        return self.load_global(code, symbol)

    # -- init and destroy: the handles, the weights, the workspace -----------------

    def _begin_init(self) -> None:
        init = self.init
        self.checked_call(init, "cudaStreamCreate", self.address(init, self.stream), what="stream")
        self.checked_call(init, "cudnnCreate", self.address(init, self.cudnn), what="cuDNN handle")
        self.checked_call(init, "cudnnSetStream", self.load_global(init, self.cudnn),
                          self.load_global(init, self.stream), what="cuDNN stream")

    def _end_init(self) -> None:
        """What only the whole body tells: cuBLAS, the weights, the workspace.
        Emitted into init's last block, after the descriptors."""
        init = self.init
        if self.uses_cublas:
            self.checked_call(init, "cublasCreate_v2", self.address(init, self.cublas), what="cuBLAS handle")
            self.checked_call(init, "cublasSetStream_v2", self.load_global(init, self.cublas),
                       self.load_global(init, self.stream), what="cuBLAS stream")
            self.checked_call(init, "cublasSetMathMode", self.load_global(init, self.cublas), api.CUBLAS_PEDANTIC_MATH,
                       what="cuBLAS fp32 math")
        if self.shared_workspace_users or self.workspace_floor:
            b = init.b
            needed = b.load(self.address(init, self.workspace_size), i64)
            if self.workspace_floor:
                floor = b.const(self.workspace_floor)
                below = b.add(llvm.ICmpOp(needed, floor, IntegerAttr(llvm.ICmpPredicateFlag.ULT.to_int(), i64)))
                needed = b.add(llvm.SelectOp(below.results[0], floor, needed)).results[0]
                b.store(needed, self.address(init, self.workspace_size))
            self.checked_call(init, "cudaMalloc", self.address(init, self.workspace), needed, what="workspace")
            count_allocation(init.b, init.state, needed)
        if self.kernels:
            self._load_kernels()
        if self.weights.bytes:
            self.checked_call(init, "cudaMalloc", self.address(init, self.device_weights), self.weights.bytes,
                       what="weights")
            count_allocation(init.b, init.state, init.b.const(self.weights.bytes))
            self.checked_call(init, "cudaMemcpy", self.load_global(init, self.device_weights), init.entry.args[0],
                       self.weights.bytes, api.MEMCPY_HOST_TO_DEVICE, what="weights to the device")
        init.b.add(llvm.ReturnOp(init.b.const(0, i32)))

    def _load_kernels(self) -> None:
        """init: load the PTX of this function's kernels and look each up."""
        init = self.init
        ptx_symbol = f"{self.name}_ptx"
        self.globals_ += string_global(ptx_symbol, ptx_module(self.kernels))
        self.checked_call(init, "cuModuleLoadData", self.address(init, self.cuda_module), self.address(init, ptx_symbol),
                   what="the generated kernels' PTX")
        for kernel in self.kernels:
            name_symbol = f"{kernel.name}_name"
            self.globals_ += string_global(name_symbol, kernel.name)
            self.checked_call(init, "cuModuleGetFunction", self.address(init, self._kernel_globals[kernel]),
                       self.load_global(init, self.cuda_module), self.address(init, name_symbol),
                       what=f"kernel {kernel.name}")
        self.checked_call(self.destroy, "cuModuleUnload", self.load_global(self.destroy, self.cuda_module),
                   what="the generated kernels")

    def launch(self, op: Operation, kernel: Kernel, out: SSAValue, inputs: Sequence[SSAValue]) -> None:
        """run: cuLaunchKernel(kernel) on the buffers (out, *inputs); the
        kernel is compiled once per distinct description."""
        self.launch_on(kernel, [self.device_pointer(op, v) for v in (out, *inputs)])

    def launch_on(self, kernel: Kernel, pointers: Sequence[SSAValue]) -> None:
        """run: cuLaunchKernel(kernel) on device pointers (out first)."""
        if kernel not in self._kernel_names:  # described without a name; named once compiled
            named = dataclasses.replace(kernel, name=f"{self.name}_k{len(self.kernels)}")
            self._kernel_names[kernel] = named
            self.kernels.append(named)
            self._kernel_globals[named] = self.global_slot(f"kernel{len(self.kernels) - 1}")
        kernel = self._kernel_names[kernel]
        b = self.run.b
        values = b.add(llvm.AllocaOp(b.const(len(pointers)), PTR, alignment=8)).results[0]
        params = b.add(llvm.AllocaOp(b.const(len(pointers)), PTR, alignment=8)).results[0]
        for index, pointer in enumerate(pointers):  # cuLaunchKernel takes a pointer to each argument
            slot = b.gep(values, index, PTR)
            b.store(pointer, slot)
            b.store(slot, b.gep(params, index, PTR))
        self.library_call("cuLaunchKernel", self.load_global(self.run, self._kernel_globals[kernel]), grid(kernel), 1, 1,
                  BLOCK, 1, 1, 0, self.load_global(self.run, self.stream), params, 0)

    def _end_destroy(self) -> None:
        destroy = self.destroy
        if self.weights.bytes:
            self.checked_call(destroy, "cudaFree", self.load_global(destroy, self.device_weights), what="weights")
        if self.shared_workspace_users or self.workspace_floor:
            self.checked_call(destroy, "cudaFree", self.load_global(destroy, self.workspace), what="workspace")
        if self.uses_cublas:
            self.checked_call(destroy, "cublasDestroy_v2", self.load_global(destroy, self.cublas), what="cuBLAS handle")
        self.checked_call(destroy, "cudnnDestroy", self.load_global(destroy, self.cudnn), what="cuDNN handle")
        self.checked_call(destroy, "cudaStreamDestroy", self.load_global(destroy, self.stream), what="stream")
        destroy.b.add(llvm.ReturnOp(destroy.b.const(0, i32)))

    # -- the run function -----------------------------------------------------------

    def _lower_run_body(self) -> None:
        run = self.run
        b = run.b
        inputs_arg, outputs_arg, _ = run.entry.args
        self.malloc_slot = b.add(llvm.AllocaOp(b.const(1), PTR, alignment=8)).results[0]
        body = self.function.body.block
        for arg, is_output, spec in graph_arguments(self.function):
            group, base = (self.outputs, outputs_arg) if is_output else (self.inputs, inputs_arg)
            self.pointers[arg] = b.load(b.gep(base, len(group), PTR), PTR)
            self.locations[arg] = (arg, 0)
            self.host_values.add(arg)
            group.append(spec)
        for op in body.ops:
            self._lower_op(op)

    def device_pointer(self, op: Operation, value: SSAValue | None) -> SSAValue:
        """The device pointer of a buffer operand."""
        if value is None or value not in self.pointers:
            raise cannot_lower(op, f"operand {value} is not a buffer this lowering knows")
        if value in self.host_values:
            raise cannot_lower(op, "it reads or writes a graph argument, which is host memory on target=cuda; "
                           "stage it with dnn-insert-memory-ops{memcpy=true}")
        return self.pointers[value]

    def _lower_op(self, op: Operation) -> None:
        b = self.run.b
        match op:
            case func.ReturnOp():
                if op.operands:
                    raise cannot_lower(op, "the function returns values; outputs must be destination arguments")
                self.checked_call(self.run, "cudaStreamSynchronize", self.load_global(self.run, self.stream),
                           what="end of run")
                b.add(llvm.ReturnOp(b.const(0, i32)))
            case d.WeightOp():
                offset = self.weights.place_weight(op)
                self.pointers[op.result] = b.gep(self.load_global(self.run, self.device_weights), offset, i8)
                self.locations[op.result] = ("weights", offset)
            case d.ViewOp():
                buffer_spec(op, op.result.type)
                self.pointers[op.result] = self.device_pointer(op, op.source)
                self.locations[op.result] = self.locations[op.source]
            case d.SubviewOp():
                buffer_spec(op, op.result.type)
                self.pointers[op.result] = b.gep(self.device_pointer(op, op.source), op.offset.value.data, i8)
                root, base = self.locations[op.source]
                self.locations[op.result] = (root, base + op.offset.value.data)
            case d.MemOffsetOp():
                buffer_spec(op, op.result.type)
                self.pointers[op.result] = b.gep(self.device_pointer(op, op.pool), op.offset.value.data, i8)
                self.locations[op.result] = (op.pool, op.offset.value.data)
            case d.MallocOp() | d.PoolInitOp():
                self._lower_allocation(op)
            case d.PoolReleaseOp() if op.pool in self._init_pools:
                pass  # freed by destroy
            case d.DeallocOp() | d.PoolReleaseOp():
                value = op.operands[0]
                if value not in self.allocated:
                    raise cannot_lower(op, "its operand was not allocated by dnn.malloc / dnn.pool_init in this function")
                self.checked_call(self.run, "cudaFree", self.device_pointer(op, value), what=op.name)
                size = self.allocated.pop(value)
                count_free(self.run.b, self.run.state, size)
                self.tally.free(size)
            case d.MemcpyOp():
                self._lower_memcpy(op)
            case d.DnnComputeOp():
                self._lower_compute(op)
            case _:
                raise cannot_lower(op, "no cuda lowering exists for this op")

    def _lower_allocation(self, op: d.MallocOp | d.PoolInitOp) -> None:
        result = op.results[0]
        buffer_spec(op, result.type)
        size = op.size.value.data
        if isinstance(op, d.PoolInitOp):
            name = op.pool_name.data if op.pool_name is not None else None
            self.pools.append({"name": name, "size": size, "alignment": op.alignment.value.data,
                               "allocated": self.pool_allocation})
            if self.pool_allocation == "init":
                self._allocate_pool_in_init(op, size)
                return
        self.checked_call(self.run, "cudaMalloc", self.malloc_slot, max(size, 1), what=op.name)
        b = self.run.b
        self.pointers[result] = b.load(self.malloc_slot, PTR)
        self.locations[result] = (result, 0)
        self.allocated[result] = size
        count_allocation(b, self.run.state, b.const(size))
        self.tally.allocate(size)

    def _allocate_pool_in_init(self, op: d.PoolInitOp, size: int) -> None:
        """A pool allocated once: cudaMalloc in init into a global, cudaFree
        in destroy; run reads its address from the global."""
        init = self.init
        symbol = self.global_slot(f"pool{len(self._init_pools)}")
        self._init_pools[op.pool] = symbol
        self.checked_call(init, "cudaMalloc", self.address(init, symbol), max(size, 1), what=op.name)
        count_allocation(init.b, init.state, init.b.const(size))
        self.init_tally.allocate(size)
        self.checked_call(self.destroy, "cudaFree", self.load_global(self.destroy, symbol), what=op.name)
        self.pointers[op.pool] = self.load_global(self.run, symbol)
        self.locations[op.pool] = (op.pool, 0)

    def _lower_memcpy(self, op: d.MemcpyOp) -> None:
        kind = op.kind.data
        if op.strides() is not None:
            raise cannot_lower(op, "a strided copy (count) runs on target=host only")
        source_host, target_host = op.source in self.host_values, op.target in self.host_values
        expected = {"host_to_device": (True, False), "device_to_host": (False, True),
                    "device_to_device": (False, False)}
        if kind not in expected:
            raise cannot_lower(op, f"kind '{kind}' does not occur on target=cuda")
        if (source_host, target_host) != expected[kind]:
            raise cannot_lower(op, f"kind '{kind}' does not match where its buffers live")
        source = self.pointers[op.source] if source_host else self.device_pointer(op, op.source)
        target = self.pointers[op.target] if target_host else self.device_pointer(op, op.target)
        self.checked_call(self.run, "cudaMemcpyAsync", target, source, op.size.value.data, api.MEMCPY_KINDS[kind],
                   self.load_global(self.run, self.stream), what=f"dnn.memcpy {kind}")

    # -- compute ops ------------------------------------------------------------------

    def _lower_compute(self, op: d.DnnComputeOp) -> None:
        if not op.on_buffers:
            raise cannot_lower(op, "it is in tensor form; run dnn-insert-memory-ops first")
        lowering = cuda_lowering_for(op)
        for value in op.read_values() + op.destinations():
            element = value.type.get_element_type() if isinstance(value.type, MemRefType) else None
            if not isinstance(element, Float32Type) and lowering is not None and lowering.other_dtypes(op, value):
                continue
            if not isinstance(element, Float32Type):
                raise cannot_lower(op, f"target=cuda computes float32 tensors only; this op has {value.type}")
            if len(value.type.get_shape()) > api.CUDNN_MAX_DIMS:
                raise cannot_lower(op, f"{value.type} has more than {api.CUDNN_MAX_DIMS} dimensions")
        count = self._op_counts.get(op.name, 0)
        self._op_counts[op.name] = count + 1
        self.what = f"{op.name} #{count}"
        if lowering is None:
            raise cannot_lower(op, "no cuDNN, cuBLAS or copy lowering exists for this op on target=cuda yet "
                           "(use target=host)")
        lowering.lower(self, op)

    def overlaps(self, a: SSAValue, b: SSAValue) -> bool:
        """Whether two buffers share a byte (dnn-coalesce writes results in
        place, and cuDNN allows only some outputs to alias some inputs)."""
        (root_a, start_a), (root_b, start_b) = self.locations[a], self.locations[b]
        if root_a is not root_b and root_a != root_b:
            return False
        return start_a < start_b + d.type_bytes(b.type) and start_b < start_a + d.type_bytes(a.type)

    def cudnn_handle(self) -> SSAValue:
        return self.load_global(self.run, self.cudnn)

    def library_call(self, function: str, *args: SSAValue | int | float) -> None:
        """A checked call in `run`, described by the op being lowered."""
        self.checked_call(self.run, function, *args, what=self.what)

    def copy(self, op: Operation, source: SSAValue, target: SSAValue) -> None:
        """target = source, device to device (nothing when they are one buffer)."""
        if source is target:
            return
        self.library_call("cudaMemcpyAsync", self.device_pointer(op, target), self.device_pointer(op, source),
                          d.type_bytes(source.type), api.MEMCPY_DEVICE_TO_DEVICE, self.load_global(self.run, self.stream))

    def constant(self, values: Any) -> SSAValue:
        """A float32 constant the lowering computed, stored with the weights
        (init uploads it); its device pointer in run."""
        array = np.ascontiguousarray(values, dtype=np.float32)
        offset = self.weights.place(array.nbytes, {"shape": list(array.shape), "dtype": "float32"},
                                    {"values": array.ravel().tolist()})
        return self.run.b.gep(self.load_global(self.run, self.device_weights), offset, i8)

    def shape(self, value: SSAValue) -> list[int]:
        return list(value.type.get_shape())  # type: ignore[attr-defined]

    def apply_activation(self, op: Operation, activation: str | None, alpha: float | None, beta: float | None,
                          out: SSAValue, source: SSAValue | None = None) -> None:
        """out = act(source), by default in place (source = out): relu,
        sigmoid, tanh and clip(0, max) with cudnnActivationForward, any other
        function with a generated pointwise kernel."""
        if activation is None:
            return
        x = out if source is None else source
        if not isinstance(out.type.get_element_type(), Float32Type):  # type: ignore[attr-defined]
            self.pointwise(op, activation, out, [x])
            return
        if activation == "clip" and (alpha or 0.0) == 0.0 and beta is not None:
            mode, coef = "clipped_relu", beta
        elif activation in ("relu", "sigmoid", "tanh"):
            mode, coef = activation, 0.0
        else:
            self.pointwise(op, activation, out, [x], alpha=alpha, beta=beta,
                           approximate=op.kernel_kwargs().get("approximate") or "none")
            return
        desc = self.use(self.run, self.tensor_descriptor(self.shape(out)))
        self.library_call("cudnnActivationForward", self.cudnn_handle(), self.use(self.run, self.activation_descriptor(mode, coef)),
                  self.scalar(self.run, 1.0), desc, self.device_pointer(op, x), self.scalar(self.run, 0.0), desc,
                  self.device_pointer(op, out))

    def pointwise(self, op: Operation, fn: str, out: SSAValue, inputs: Sequence[SSAValue], **params: Any) -> None:
        """out = fn(inputs) (broadcast) with a generated kernel; `params`
        are PointwiseKernel's alpha, beta, approximate and activation fields."""
        known = UNARY_FUNCTIONS | BINARY_FUNCTIONS | COMPARISONS.keys() | LOGICAL | {"where"}
        activation = params.get("activation")
        if fn not in known or (activation is not None and activation not in UNARY_FUNCTIONS):
            missing = fn if fn not in known else activation
            raise cannot_lower(op, f"{missing!r} has neither a cuDNN lowering nor a generated kernel yet (use target=host)")
        out_shape = self.shape(out)
        data = inputs[-1]  # where's condition comes first; its values do not
        kernel = PointwiseKernel(name="", fn=fn, shape=tuple(out_shape),
                                 input_strides=tuple(broadcast_strides(self.shape(v), out_shape) for v in inputs),
                                 input_dtype=numpy_dtype_name(data.type.get_element_type()), **params)  # type: ignore[attr-defined]
        self.launch(op, kernel, out, inputs)

    # -- the table ------------------------------------------------------------------------

    def _meta(self) -> dict[str, Any]:
        return {
            **table_header(self.name, self.inputs, self.outputs, self.weights),
            "target": "cuda",
            "calls": self.calls,
            "pools": self.pools,
            # per run, what the IR implies; the native counters must agree
            "memory": self.tally.as_json(),
            # the pools init allocates once (pool_allocation="init"), besides the weights and workspace
            "init_memory": {"allocations": self.init_tally.allocations, "bytes": self.init_tally.peak_bytes},
            # init allocates the weights and a workspace of at most this many bytes
            "workspace_limit": max(self.workspace_bytes if self.shared_workspace_users else 0, self.workspace_floor),
            # the generated kernels: launch shape, the bytes each pointer argument spans,
            # and their host twins (LLVM IR) for running them without a GPU
            "kernels": [{"name": k.name, "grid": grid(k), "block": BLOCK, "pointer_bytes": pointer_bytes(k)}
                        for k in self.kernels],
            "kernel_twins": host_twins(self.kernels) if self.kernels else "",
        }


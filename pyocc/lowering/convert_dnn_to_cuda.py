"""`convert-dnn-to-llvm{target=cuda}`: buffer-form dnn -> host code that drives a GPU.

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
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from pyocc.lowering.cuda_kernels import (
    BINARY_FUNCTIONS,
    BLOCK,
    COMPARISONS,
    DTYPES,
    LOGICAL,
    REDUCTIONS,
    CastKernel,
    ChannelAffineKernel,
    GatherKernel,
    Kernel,
    LayerNormKernel,
    PointwiseKernel,
    ReduceKernel,
    grid,
    host_twins,
    pointer_bytes,
    ptx_module,
    row_major_strides,
)
from pyocc.lowering.cuda_scratch import ScratchLayout, preact_block, preact_in_place
from pyocc.lowering.llvm_common import (
    PTR,
    LlvmBuilder,
    MemoryTally,
    WeightLayout,
    buffer_spec,
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
    INTEGER_FUNCTIONS,
    UNARY_FUNCTIONS,
    broadcast_strides,
)
from pyocc.runtime import cuda_api as api

#: the fifth state slot: the status of the call that failed
STATE_STATUS = 4
#: the most a convolution's workspace may take when the pass option does not say (bytes)
DEFAULT_WORKSPACE = 32 << 20
#: when a planned pool is allocated: once by NAME_init (freed by NAME_destroy), or per run (Occamy's way)
POOL_ALLOCATIONS = ("init", "run")

_KINDS: dict[str, Attribute] = {"ptr": PTR, "i32": i32, "u32": i32, "i64": i64, "f64": f64}


def declarations() -> list[llvm.FuncOp]:
    """An external `llvm.func` for every function in cuda_api.FUNCTIONS."""
    return [llvm.FuncOp(f.name, llvm.LLVMFunctionType([_KINDS[k] for k in f.kinds], i32),
                        linkage=llvm.LinkageAttr("external")) for f in api.FUNCTIONS]


def _dims(shape: Sequence[int]) -> list[int]:
    """A shape as cuDNN wants it: at least four dimensions (trailing 1s)."""
    dims = list(shape) or [1]
    return dims + [1] * (api.CUDNN_MIN_DIMS - len(dims))


def _broadcast_shape(shape: Sequence[int], rank: int) -> list[int]:
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
    workspace_bytes: int = DEFAULT_WORKSPACE
    #: "init": each dnn.pool_init is one cudaMalloc in init; "run": one per run
    pool_allocation: str = "init"
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
    _uses_cublas: bool = False
    #: pointwise kernels pyocc writes for what cuDNN lacks (pyocc.lowering.cuda_kernels)
    kernels: list[Kernel] = field(default_factory=list)
    _kernel_globals: dict[Kernel, str] = field(default_factory=dict)
    _kernel_names: dict[Kernel, Kernel] = field(default_factory=dict)
    #: convolution algorithms chosen in init
    _algorithms: int = 0
    #: convolutions without a planned workspace buffer: they share init's workspace
    _shared_workspace_users: int = 0
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
        if self._uses_cublas:
            self.checked_call(init, "cublasCreate_v2", self.address(init, self.cublas), what="cuBLAS handle")
            self.checked_call(init, "cublasSetStream_v2", self.load_global(init, self.cublas),
                       self.load_global(init, self.stream), what="cuBLAS stream")
            self.checked_call(init, "cublasSetMathMode", self.load_global(init, self.cublas), api.CUBLAS_PEDANTIC_MATH,
                       what="cuBLAS fp32 math")
        if self._shared_workspace_users or self.workspace_floor:
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
        if self._shared_workspace_users or self.workspace_floor:
            self.checked_call(destroy, "cudaFree", self.load_global(destroy, self.workspace), what="workspace")
        if self._uses_cublas:
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
        for value in op.read_values() + op.destinations():
            element = value.type.get_element_type() if isinstance(value.type, MemRefType) else None
            if not isinstance(element, Float32Type) and _other_dtype_allowed(op, value):
                continue
            if not isinstance(element, Float32Type):
                raise cannot_lower(op, f"target=cuda computes float32 tensors only; this op has {value.type}")
            if len(value.type.get_shape()) > api.CUDNN_MAX_DIMS:
                raise cannot_lower(op, f"{value.type} has more than {api.CUDNN_MAX_DIMS} dimensions")
        count = self._op_counts.get(op.name, 0)
        self._op_counts[op.name] = count + 1
        self.what = f"{op.name} #{count}"
        lower = _COMPUTE.get(type(op))
        if lower is None:
            raise cannot_lower(op, "no cuDNN, cuBLAS or copy lowering exists for this op on target=cuda yet "
                           "(use target=host)")
        lower(self, op)

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
            "workspace_limit": max(self.workspace_bytes if self._shared_workspace_users else 0, self.workspace_floor),
            # the generated kernels: launch shape, the bytes each pointer argument spans,
            # and their host twins (LLVM IR) for running them without a GPU
            "kernels": [{"name": k.name, "grid": grid(k), "block": BLOCK, "pointer_bytes": pointer_bytes(k)}
                        for k in self.kernels],
            "kernel_twins": host_twins(self.kernels) if self.kernels else "",
        }


# ---------------------------------------------------------------------------
# Per-op lowerings: each turns one buffer-form op into library calls
# ---------------------------------------------------------------------------


def _symmetric_pads(lw: CudaFunctionLowering, op: Operation, spatial: int) -> list[int]:
    pads = op.kernel_kwargs().get("pads", [0] * (2 * spatial))
    begin, end = pads[:spatial], pads[spatial:]
    if begin != end:
        raise cannot_lower(op, f"asymmetric pads {pads}: cuDNN convolution pads both sides alike")
    return begin


def _lower_conv(lw: CudaFunctionLowering, op: d.ConvOp) -> None:
    """out = act(conv(x, w) + bias + residual), the Occamy Conv+ReLU fusion."""
    _convolution(lw, op, lw.device_pointer(op, op.x), _scratch(lw, op))


def _lower_preact_conv(lw: CudaFunctionLowering, op: d.PreActConvOp) -> None:
    """DenseNet's pre-activation convolution, out = act(conv(pre_act(x *
    pre_scale[c] + pre_shift[c]), w) + bias + residual): a generated kernel
    writes the pre-activated input in place when x dies here, else into the
    op's planned scratch buffer (dnn-cuda-scratch), by blocks of input
    channels for a 1x1 convolution (then multiplied by cuBLAS), whole for
    another (then convolved by cuDNN)."""
    scratch = _scratch(lw, op)
    kernel = ChannelAffineKernel(name="", shape=tuple(lw.shape(op.x)), activation=op.kernel_kwargs().get("pre_activation"))
    if preact_in_place(op):
        lw.launch(op, kernel, op.x, [op.x, op.pre_scale, op.pre_shift])
        _convolution(lw, op, lw.device_pointer(op, op.x), scratch)
        return
    if scratch is None:
        raise cannot_lower(op, "its pre-activated input needs a scratch buffer on target=cuda; "
                               "run dnn-cuda-scratch first")
    block = preact_block(op)
    if block is not None:
        _pointwise_preact_conv(lw, op, block, scratch[1])
        return
    lw.launch(op, kernel, op.workspace, [op.x, op.pre_scale, op.pre_shift])
    _convolution(lw, op, lw.device_pointer(op, op.workspace), scratch)


def _pointwise_preact_conv(lw: CudaFunctionLowering, op: d.PreActConvOp, block: int, scratch: SSAValue) -> None:
    """A 1x1 preact_conv as a sum over blocks of `block` input channels:
    y = sum_b W[:, b] @ act(x[b] * s[b] + t[b]), each block pre-activated by a
    generated kernel into `scratch` and multiplied by cuBLAS, which reads the
    weights' columns of the block in place (leading dimension C), onto y
    (beta 1 after the first block, or from the first when the residual is
    already in y); then bias, residual and activation as for a convolution."""
    run, b = lw.run, lw.run.b
    lw._uses_cublas = True
    shape = lw.shape(op.x)
    batch, channels, positions = shape[0], shape[1], math.prod(shape[2:])
    filters = lw.shape(op.w)[0]
    x, w, y = lw.device_pointer(op, op.x), lw.device_pointer(op, op.w), lw.device_pointer(op, op.out)
    scale, shift = lw.device_pointer(op, op.pre_scale), lw.device_pointer(op, op.pre_shift)
    in_place = op.residual is not None and op.residual is op.out
    handle = lw.load_global(run, lw.cublas)
    activation = op.kernel_kwargs().get("pre_activation")
    for start in range(0, channels, block):
        size = min(block, channels - start)
        kernel = ChannelAffineKernel(name="", shape=(batch, size, positions), activation=activation,
                                     batch_stride=channels * positions)
        lw.launch_on(kernel, [scratch, b.gep(x, 4 * start * positions, i8), b.gep(scale, 4 * start, i8),
                              b.gep(shift, 4 * start, i8)])
        beta = lw.scalar(run, 1.0 if start or in_place else 0.0)
        # row-major Y[n] (K, P) += W[:, block] (K, size; row stride C) @ S[n] (size, P), as the
        # column-major Y^T = S^T W^T: m = P, n = K, k = size
        a_block, one = b.gep(w, 4 * start, i8), lw.scalar(run, 1.0)
        if batch == 1:
            lw.library_call("cublasSgemm_v2", handle, api.CUBLAS_OP_N, api.CUBLAS_OP_N, positions, filters, size,
                            one, scratch, positions, a_block, channels, beta, y, positions)
        else:
            lw.library_call("cublasSgemmStridedBatched", handle, api.CUBLAS_OP_N, api.CUBLAS_OP_N, positions,
                            filters, size, one, scratch, positions, size * positions, a_block, channels, 0, beta,
                            y, positions, filters * positions, batch)
    y_desc = lw.tensor_descriptor(lw.shape(op.out))
    one = lw.scalar(run, 1.0)
    if op.bias is not None:
        bias_desc = lw.tensor_descriptor([1, filters] + [1] * (len(shape) - 2))
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, lw.use(run, bias_desc),
                        lw.device_pointer(op, op.bias), one, lw.use(run, y_desc), y)
    if op.residual is not None and not in_place:
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, lw.use(run, y_desc),
                        lw.device_pointer(op, op.residual), one, lw.use(run, y_desc), y)
    lw.apply_activation(op, op.kernel_kwargs().get("activation"), op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.out)


def _scratch(lw: CudaFunctionLowering, op: d.ConvOp | d.PreActConvOp) -> tuple[ScratchLayout, SSAValue] | None:
    """The op's planned scratch buffer (dnn-cuda-scratch): how it is laid
    out and its device pointer; None when it has none."""
    if op.workspace is None:
        return None
    layout = ScratchLayout.of_buffer(_preact_bytes(op), d.type_bytes(op.workspace.type))
    return layout, lw.device_pointer(op, op.workspace)


def _preact_bytes(op: d.ConvOp | d.PreActConvOp) -> int:
    """Bytes of the op's scratch that hold its pre-activated input (before
    the cuDNN workspace): the whole input unless it is pre-activated in
    place or by blocks (whose scratch is only that), none for a plain conv."""
    if not isinstance(op, d.PreActConvOp) or preact_in_place(op):
        return 0
    return d.type_bytes(op.x.type)


def _convolution(lw: CudaFunctionLowering, op: d.ConvOp | d.PreActConvOp, x: SSAValue,
                 scratch: tuple[ScratchLayout, SSAValue] | None) -> None:
    """out = act(conv(x, w) + bias + residual), x the device pointer of the
    input: one cudnnConvolutionBiasActivationForward when the activation is
    relu and a bias is given, else convolution, bias add, residual add,
    activation. The cuDNN workspace is the planned one in `scratch` (the
    algorithm chosen in init fits it), else init's shared workspace."""
    run = lw.run
    x_shape, w_shape, y_shape = lw.shape(op.x), lw.shape(op.w), lw.shape(op.out)
    spatial = len(x_shape) - 2
    if spatial < 1:
        raise cannot_lower(op, "a convolution needs at least one spatial dimension")
    pads = _symmetric_pads(lw, op, spatial)
    strides = op.kernel_kwargs().get("strides", [1] * spatial)
    dilations = op.kernel_kwargs().get("dilations", [1] * spatial)
    group = op.kernel_kwargs()["group"]
    # cuDNN convolves at least two spatial dimensions: a 1-D conv is 2-D with width 1
    if spatial == 1:
        x_shape, w_shape, y_shape = x_shape + [1], w_shape + [1], y_shape + [1]
        pads, strides, dilations = pads + [0], strides + [1], dilations + [1]
    conv = _convolution_descriptor(lw, pads, strides, dilations, group)
    x_desc, w_desc, y_desc = lw.tensor_descriptor(x_shape), lw.filter_descriptor(w_shape), lw.tensor_descriptor(y_shape)
    algo = _choose_algorithm(lw, conv, x_desc, w_desc, y_desc,
                             planned=None if scratch is None else scratch[0].cudnn_bytes)

    h = lw.cudnn_handle()
    w, y = lw.device_pointer(op, op.w), lw.device_pointer(op, op.out)
    algo_value = run.b.load(lw.address(run, algo), i32)
    workspace: SSAValue | int
    workspace_bytes: SSAValue | int
    if scratch is None:
        workspace = lw.load_global(run, lw.workspace)
        workspace_bytes = run.b.load(lw.address(run, lw.workspace_size), i64)
    elif scratch[0].cudnn_bytes:
        workspace = run.b.gep(scratch[1], scratch[0].cudnn_offset, i8)
        workspace_bytes = run.b.const(scratch[0].cudnn_bytes)
    else:  # no workspace allowed: implicit GEMM needs none
        workspace, workspace_bytes = 0, 0
    one, zero = lw.scalar(run, 1.0), lw.scalar(run, 0.0)
    activation = op.kernel_kwargs().get("activation")
    bias_desc = lw.tensor_descriptor([1, y_shape[1]] + [1] * (len(y_shape) - 2)) if op.bias is not None else None
    use = lambda symbol: lw.use(run, symbol)  # noqa: E731 - a local shorthand

    if activation == "relu" and op.bias is not None:
        z = lw.device_pointer(op, op.residual) if op.residual is not None else y
        alpha2 = one if op.residual is not None else zero
        lw.library_call("cudnnConvolutionBiasActivationForward", h, one, use(x_desc), x, use(w_desc), w, use(conv),
                algo_value, workspace, workspace_bytes, alpha2, use(y_desc), z, use(bias_desc),
                lw.device_pointer(op, op.bias), use(lw.activation_descriptor("relu")), use(y_desc), y)
        return
    # the residual is already in y when dnn-coalesce wrote the result in place
    in_place = op.residual is not None and op.residual is op.out
    lw.library_call("cudnnConvolutionForward", h, one, use(x_desc), x, use(w_desc), w, use(conv), algo_value, workspace,
            workspace_bytes, one if in_place else zero, use(y_desc), y)
    if op.bias is not None:
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, use(bias_desc), lw.device_pointer(op, op.bias), one, use(y_desc), y)
    if op.residual is not None and not in_place:
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, use(y_desc), lw.device_pointer(op, op.residual), one,
                use(y_desc), y)
    lw.apply_activation(op, activation, op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.out)


def _convolution_descriptor(lw: CudaFunctionLowering, pads: Sequence[int], strides: Sequence[int],
                            dilations: Sequence[int], group: int) -> str:
    """The convolution descriptor (cross-correlation, fp32 FMA math, groups),
    shared by convolution and its transpose (backward data)."""

    def configure(desc: SSAValue) -> None:
        lw.checked_call(lw.init, "cudnnSetConvolutionNdDescriptor", desc, len(pads), lw.int_array(lw.init, pads),
                        lw.int_array(lw.init, strides), lw.int_array(lw.init, dilations),
                        api.CUDNN_CROSS_CORRELATION, api.CUDNN_DATA_FLOAT, what="convolution descriptor")
        lw.checked_call(lw.init, "cudnnSetConvolutionGroupCount", desc, group, what="convolution groups")
        lw.checked_call(lw.init, "cudnnSetConvolutionMathType", desc, api.CUDNN_FMA_MATH,
                        what="convolution fp32 math")

    return lw.descriptor("Convolution", (tuple(pads), tuple(strides), tuple(dilations), group), configure)


def _choose_algorithm(lw: CudaFunctionLowering, conv: str, x: str, w: str, y: str,
                      query: str = "cudnnGetConvolutionForwardAlgorithm_v7",
                      count: int = api.CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                      fallback: int = api.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                      planned: int | None = None) -> str:
    """In init: ask cuDNN for its ranked forward algorithms and keep the first
    that succeeded and whose workspace fits the limit (else implicit GEMM,
    which needs none). The limit is `planned`, the bytes of the op's planned
    workspace buffer; without one (None) it is the pass's workspace bound,
    and init's shared workspace is raised to what the choice needs.
    Returns the i32 global holding the choice. `query`, `count` and
    `fallback` select another family (backward data, whose query takes
    w, dy, conv, dx: pass them as x, w, conv, y)."""
    init = lw.init
    b = init.b
    lw._algorithms += 1
    symbol = lw.global_slot(f"algo{lw._algorithms - 1}", i32)
    limit = lw.workspace_bytes if planned is None else planned
    returned = b.add(llvm.AllocaOp(b.const(1), i32, alignment=4)).results[0]
    results = b.add(llvm.AllocaOp(b.const(count * api.CONV_PERF_SIZE // 8), i64, alignment=8)).results[0]
    def field(entry: int, offset: int, type: Attribute) -> SSAValue:
        """&results[entry].<the field at byte offset>, typed as `type`."""
        size = 8 if type == i64 else 4
        return b.gep(results, (entry * api.CONV_PERF_SIZE + offset) // size, type)

    for i in range(count):  # an entry cuDNN does not fill must not look successful
        b.store(b.const(1, i32), field(i, api.CONV_PERF_STATUS, i32))
    b.store(b.const(0, i32), returned)
    lw.checked_call(init, query, lw.load_global(init, lw.cudnn),
             lw.load_global(init, x), lw.load_global(init, w), lw.load_global(init, conv),
             lw.load_global(init, y), count, returned, results, what="convolution algorithm")
    n = b.load(returned, i32)
    choice = b.const(fallback, i32)
    needs = b.const(0)
    flag = lambda pred: IntegerAttr(pred.to_int(), i64)  # noqa: E731
    # best-ranked last, so that it wins
    for i in reversed(range(count)):
        algo = b.load(field(i, api.CONV_PERF_ALGO, i32), i32)
        status = b.load(field(i, api.CONV_PERF_STATUS, i32), i32)
        memory = b.load(field(i, api.CONV_PERF_MEMORY, i64), i64)
        ranked = b.add(llvm.ICmpOp(b.const(i, i32), n, flag(llvm.ICmpPredicateFlag.SLT))).results[0]
        ok = b.add(llvm.ICmpOp(status, b.const(0, i32), flag(llvm.ICmpPredicateFlag.EQ))).results[0]
        fits = b.add(llvm.ICmpOp(memory, b.const(limit), flag(llvm.ICmpPredicateFlag.ULE))).results[0]
        usable = b.add(llvm.AndOp(b.add(llvm.AndOp(ranked, ok)).results[0], fits)).results[0]
        choice = b.add(llvm.SelectOp(usable, algo, choice)).results[0]
        needs = b.add(llvm.SelectOp(usable, memory, needs)).results[0]
    b.store(choice, lw.address(init, symbol))
    if planned is not None:
        return symbol
    lw._shared_workspace_users += 1
    size_ptr = lw.address(init, lw.workspace_size)
    size = b.load(size_ptr, i64)
    larger = b.add(llvm.ICmpOp(needs, size, flag(llvm.ICmpPredicateFlag.UGT))).results[0]
    b.store(b.add(llvm.SelectOp(larger, needs, size)).results[0], size_ptr)
    return symbol


def _lower_conv_transpose(lw: CudaFunctionLowering, op: d.ConvTransposeOp) -> None:
    """ONNX ConvTranspose is cuDNN's backward data: y = conv_transpose(x, w) is
    the gradient dx of a forward convolution from a y-shaped tensor to an
    x-shaped one with filter w ([C_in, C_out/group, k...] is that forward
    convolution's [K, C/group, k...]). So x is dy, y is dx, and the bias is a
    cudnnAddTensor afterwards.

    cuDNN pads each dim alike at both ends and requires dy to be the forward
    convolution's output of dx; ONNX crops pads_begin cells at the start of
    the uncropped output and whatever is left over at the end. Padding by
    pads_begin and giving dx y's shape therefore covers output_padding,
    output_shape and asymmetric pads whenever the forward output size of y,
    floor((out + 2 pads_begin - d(k-1) - 1) / s) + 1, is x's size (else the
    op fails to lower). The algorithm is chosen in init as for Conv, from
    cudnnGetConvolutionBackwardDataAlgorithm_v7's ranking, within the
    workspace limit, else ALGO_0, the implicit-GEMM analogue (it adds with
    atomics, so its sums are not bitwise reproducible; should it need
    workspace too, the call fails and is named)."""
    run = lw.run
    x_shape, w_shape, y_shape = lw.shape(op.x), lw.shape(op.w), lw.shape(op.out)
    spatial = len(x_shape) - 2
    if spatial < 1:
        raise cannot_lower(op, "a transposed convolution needs at least one spatial dimension")
    pads = op.kernel_kwargs().get("pads", [0] * (2 * spatial))[:spatial]
    strides = op.kernel_kwargs().get("strides", [1] * spatial)
    dilations = op.kernel_kwargs().get("dilations", [1] * spatial)
    group = op.kernel_kwargs()["group"]
    forward = [(out + 2 * p - d * (k - 1) - 1) // s + 1
               for out, p, d, k, s in zip(y_shape[2:], pads, dilations, w_shape[2:], strides)]
    if forward != x_shape[2:]:
        all_pads = op.kernel_kwargs().get("pads", [0] * (2 * spatial))
        raise cannot_lower(op, f"pads {all_pads} with output size {y_shape[2:]}: cuDNN cannot pad the two ends "
                               f"differently here (the leading pads at both give a convolution from {y_shape[2:]} "
                               f"to {forward}, not {x_shape[2:]}); use target=host")
    if spatial == 1:  # cuDNN convolves at least two spatial dimensions
        x_shape, w_shape, y_shape = x_shape + [1], w_shape + [1], y_shape + [1]
        pads, strides, dilations = pads + [0], strides + [1], dilations + [1]
    conv = _convolution_descriptor(lw, pads, strides, dilations, group)
    w_desc = lw.filter_descriptor(w_shape)
    dy_desc, dx_desc = lw.tensor_descriptor(x_shape), lw.tensor_descriptor(y_shape)
    algo = _choose_algorithm(lw, conv, w_desc, dy_desc, dx_desc, query="cudnnGetConvolutionBackwardDataAlgorithm_v7",
                             count=api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                             fallback=api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)
    use = lambda symbol: lw.use(run, symbol)  # noqa: E731 - a local shorthand
    y = lw.device_pointer(op, op.out)
    one, zero = lw.scalar(run, 1.0), lw.scalar(run, 0.0)
    lw.library_call("cudnnConvolutionBackwardData", lw.cudnn_handle(), one, use(w_desc), lw.device_pointer(op, op.w),
                    use(dy_desc), lw.device_pointer(op, op.x), use(conv), run.b.load(lw.address(run, algo), i32),
                    lw.load_global(run, lw.workspace), run.b.load(lw.address(run, lw.workspace_size), i64), zero,
                    use(dx_desc), y)
    if op.bias is not None:
        bias_desc = lw.tensor_descriptor([1, y_shape[1]] + [1] * (len(y_shape) - 2))
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, use(bias_desc), lw.device_pointer(op, op.bias), one,
                        use(dx_desc), y)


def _lower_pool(lw: CudaFunctionLowering, op: d.DnnComputeOp) -> None:
    """Max / average / global pooling. cuDNN checks only N and C of the
    output against the input, so ONNX's asymmetric pads and ceil_mode map
    onto pad = the leading pad and the output shape ONNX computed."""
    x_shape, y_shape = lw.shape(op.x), lw.shape(op.out)  # type: ignore[attr-defined]
    spatial = len(x_shape) - 2
    if spatial < 1:
        raise cannot_lower(op, "pooling needs at least one spatial dimension")
    if isinstance(op, d.GlobalAveragePoolOp | d.GlobalMaxPoolOp):
        window, pads, strides = x_shape[2:], [0] * spatial, x_shape[2:]
        mode = api.POOLING_MAX if isinstance(op, d.GlobalMaxPoolOp) else api.POOLING_AVERAGE_EXCLUDE_PAD
    else:
        window = op.kernel_kwargs().get("kernel_shape", [])
        strides = op.kernel_kwargs().get("strides", [1] * spatial)
        all_pads = op.kernel_kwargs().get("pads", [0] * (2 * spatial))
        pads = all_pads[:spatial]
        if any(dl != 1 for dl in op.kernel_kwargs().get("dilations", [1] * spatial)):
            raise cannot_lower(op, "dilated pooling has no cuDNN lowering")
        if isinstance(op, d.MaxPoolOp):
            mode = api.POOLING_MAX
        elif op.kernel_kwargs()["count_include_pad"]:
            if all_pads[spatial:] != pads or op.kernel_kwargs()["ceil_mode"]:
                raise cannot_lower(op, "count_include_pad with asymmetric pads or ceil_mode has no cuDNN lowering")
            mode = api.POOLING_AVERAGE_INCLUDE_PAD
        else:
            mode = api.POOLING_AVERAGE_EXCLUDE_PAD
    if spatial == 1:
        x_shape, y_shape = x_shape + [1], y_shape + [1]
        window, pads, strides = list(window) + [1], list(pads) + [0], list(strides) + [1]
    key = (mode, tuple(window), tuple(pads), tuple(strides))

    def configure(desc: SSAValue) -> None:
        lw.checked_call(lw.init, "cudnnSetPoolingNdDescriptor", desc, mode, api.CUDNN_NOT_PROPAGATE_NAN, len(window),
                 lw.int_array(lw.init, window), lw.int_array(lw.init, pads), lw.int_array(lw.init, strides),
                 what="pooling descriptor")

    pooling = lw.descriptor("Pooling", key, configure)
    run = lw.run
    lw.library_call("cudnnPoolingForward", lw.cudnn_handle(), lw.use(run, pooling), lw.scalar(run, 1.0),
            lw.use(run, lw.tensor_descriptor(x_shape)), lw.device_pointer(op, op.x), lw.scalar(run, 0.0),  # type: ignore[attr-defined]
            lw.use(run, lw.tensor_descriptor(y_shape)), lw.device_pointer(op, op.out))  # type: ignore[attr-defined]


def _lower_gemm(lw: CudaFunctionLowering, op: d.GemmOp) -> None:
    """out = act(alpha * op(a) @ op(b) + beta * c): c broadcast into out by
    cudnnAddTensor, then one cublasSgemm accumulating onto it."""
    run = lw.run
    lw._uses_cublas = True
    trans_a, trans_b = op.kernel_kwargs()["trans_a"], op.kernel_kwargs()["trans_b"]
    a_shape, b_shape = lw.shape(op.a), lw.shape(op.b)
    m, k = (a_shape[1], a_shape[0]) if trans_a else (a_shape[0], a_shape[1])
    n = b_shape[0] if trans_b else b_shape[1]
    alpha = op.kernel_kwargs().get("alpha")
    beta = op.kernel_kwargs().get("beta")
    alpha = 1.0 if alpha is None else alpha
    beta = 1.0 if beta is None else beta
    y = lw.device_pointer(op, op.out)
    accumulate = 0.0
    if op.c is not None and beta != 0.0:
        c_dims = [1, 1, *_broadcast_shape(lw.shape(op.c), 2)]
        y_desc = lw.use(run, lw.tensor_descriptor([1, 1, m, n]))
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), lw.scalar(run, beta), lw.use(run, lw.tensor_descriptor(c_dims)),
                lw.device_pointer(op, op.c), lw.scalar(run, 0.0), y_desc, y)
        accumulate = 1.0
    _sgemm(lw, op, trans_a, trans_b, m, n, k, alpha, lw.device_pointer(op, op.a), lw.device_pointer(op, op.b), accumulate, y)
    lw.apply_activation(op, op.kernel_kwargs().get("activation"), op.kernel_kwargs().get("activation_alpha"),
                         op.kernel_kwargs().get("activation_beta"), op.out)


def _sgemm(lw: CudaFunctionLowering, op: Operation, trans_a: int, trans_b: int, m: int, n: int, k: int,
           alpha: float, a: SSAValue, b: SSAValue, beta: float, y: SSAValue,
           batch: tuple[int, int, int, int] | None = None) -> None:
    """Row-major Y[m, n] = alpha * op(A) @ op(B) + beta * Y, as the
    column-major Y^T = op(B)^T @ op(A)^T; `batch` = (count, strideA,
    strideB, strideY) in elements for cublasSgemmStridedBatched."""
    run = lw.run
    handle = lw.load_global(run, lw.cublas)
    op_b = api.CUBLAS_OP_T if trans_b else api.CUBLAS_OP_N
    op_a = api.CUBLAS_OP_T if trans_a else api.CUBLAS_OP_N
    ldb = k if trans_b else n
    lda = m if trans_a else k
    alpha_ptr, beta_ptr = lw.scalar(run, alpha), lw.scalar(run, beta)
    if batch is None:
        lw.library_call("cublasSgemm_v2", handle, op_b, op_a, n, m, k, alpha_ptr, b, ldb, a, lda, beta_ptr, y, n)
    else:
        count, stride_a, stride_b, stride_y = batch
        lw.library_call("cublasSgemmStridedBatched", handle, op_b, op_a, n, m, k, alpha_ptr, b, ldb, stride_b,
                a, lda, stride_a, beta_ptr, y, n, stride_y, count)


def _lower_matmul(lw: CudaFunctionLowering, op: d.MatMulOp) -> None:
    """Batched a @ b: one strided-batched gemm; a side whose batch is a
    single matrix is broadcast with stride 0."""
    lw._uses_cublas = True
    a_shape, b_shape, y_shape = lw.shape(op.a), lw.shape(op.b), lw.shape(op.out)
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise cannot_lower(op, "a matrix-vector product has no cuBLAS lowering yet")
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    batch = math.prod(y_shape[:-2])
    a_batch, b_batch = math.prod(a_shape[:-2]), math.prod(b_shape[:-2])
    for side, count in (("a", a_batch), ("b", b_batch)):
        if count not in (1, batch):
            raise cannot_lower(op, f"{side} broadcasts over part of the batch, which has no cuBLAS lowering yet "
                                   "(a whole batch or a single matrix has)")
    a, b, y = lw.device_pointer(op, op.a), lw.device_pointer(op, op.b), lw.device_pointer(op, op.out)
    if batch == 1:
        _sgemm(lw, op, 0, 0, m, n, k, 1.0, a, b, 0.0, y)
    elif b_batch == 1:  # rows of all a matrices times one b: a single gemm
        _sgemm(lw, op, 0, 0, batch * m, n, k, 1.0, a, b, 0.0, y)
    else:
        _sgemm(lw, op, 0, 0, m, n, k, 1.0, a, b, 0.0, y,
               batch=(batch, m * k if a_batch > 1 else 0, k * n, m * n))


def _lower_softmax(lw: CudaFunctionLowering, op: d.SoftmaxOp | d.LogSoftmaxOp) -> None:
    """Softmax along one axis: the shape viewed as (before, axis, after, 1),
    cuDNN's per-channel mode."""
    shape = lw.shape(op.x)
    axis = op.kernel_kwargs()["axis"] % len(shape)
    dims = [math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:]), 1]
    algo = api.SOFTMAX_LOG if isinstance(op, d.LogSoftmaxOp) else api.SOFTMAX_ACCURATE
    run = lw.run
    desc = lw.use(run, lw.tensor_descriptor(dims))
    lw.library_call("cudnnSoftmaxForward", lw.cudnn_handle(), algo, api.SOFTMAX_MODE_CHANNEL, lw.scalar(run, 1.0), desc,
            lw.device_pointer(op, op.x), lw.scalar(run, 0.0), desc, lw.device_pointer(op, op.out))


def _lower_lrn(lw: CudaFunctionLowering, op: d.LRNOp) -> None:
    """ONNX LRN is cuDNN's cross-channel LRN: x / (k + alpha/n * sum x^2)^beta."""
    size = op.size.value.data
    alpha, beta, bias = (op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.kernel_kwargs().get("bias"))
    alpha = 1e-4 if alpha is None else alpha
    beta = 0.75 if beta is None else beta
    bias = 1.0 if bias is None else bias
    if not 1 <= size <= 16:
        raise cannot_lower(op, f"cuDNN's LRN takes a window of 1 to 16 channels, not {size}")

    def configure(desc: SSAValue) -> None:
        lw.checked_call(lw.init, "cudnnSetLRNDescriptor", desc, size, alpha, beta, bias, what="LRN descriptor")

    lrn = lw.descriptor("LRN", (size, alpha, beta, bias), configure)
    run = lw.run
    desc = lw.use(run, lw.tensor_descriptor(lw.shape(op.x)))
    lw.library_call("cudnnLRNCrossChannelForward", lw.cudnn_handle(), lw.use(run, lrn), api.LRN_CROSS_CHANNEL_DIM1,
            lw.scalar(run, 1.0), desc, lw.device_pointer(op, op.x), lw.scalar(run, 0.0), desc, lw.device_pointer(op, op.out))


def _op_tensor(lw: CudaFunctionLowering, fn: str) -> str:
    def configure(desc: SSAValue) -> None:
        lw.checked_call(lw.init, "cudnnSetOpTensorDescriptor", desc, api.OP_TENSOR_OPS[fn], api.CUDNN_DATA_FLOAT,
                 api.CUDNN_NOT_PROPAGATE_NAN, what=f"op-tensor {fn}")

    return lw.descriptor("OpTensor", (fn,), configure)


_SWAPPABLE = frozenset({"add", "sub", "mul", "min", "max"})


def _elementwise(lw: CudaFunctionLowering, op: Operation, fn: str, a: SSAValue, b: SSAValue,
                 out: SSAValue) -> None:
    """out = fn(a, b) with cudnnOpTensor, C = op(alpha1 * A, alpha2 * B).
    A must have out's shape while B broadcasts, and cuDNN writes in place
    only over A; so a broadcast `a`, or an out that is b's buffer, swaps the
    sides (sub becomes -b + a)."""
    out_shape = lw.shape(out)
    alpha1, alpha2 = 1.0, 1.0
    if lw.overlaps(a, b) and lw.overlaps(out, a):
        _self_elementwise(lw, op, fn, a, b, out)
        return
    a_fits = lw.shape(a) == out_shape and not (lw.overlaps(out, b) and not lw.overlaps(out, a))
    if not a_fits:
        if lw.shape(b) != out_shape:
            raise cannot_lower(op, "both operands broadcast; cuDNN's op-tensor needs one of out's shape")
        if fn not in _SWAPPABLE:
            raise cannot_lower(op, f"{fn} with a broadcast or overwritten first operand has no cuDNN lowering")
        a, b = b, a
        if fn == "sub":
            alpha1 = -1.0
    elif fn == "sub":
        alpha2 = -1.0
    _op_tensor_call(lw, op, fn, (alpha1, a), (alpha2, b), out)


def _self_elementwise(lw: CudaFunctionLowering, op: Operation, fn: str, a: SSAValue, b: SSAValue,
                      out: SSAValue) -> None:
    """fn(a, a) written over a itself (dnn-coalesce's in-place Add(a, a)):
    cuDNN lets only A alias C, so add / sub become C = +-1 * A + 1 * C."""
    if not (a is b and out is a) and not (lw.locations[a] == lw.locations[b] == lw.locations[out]):
        raise cannot_lower(op, "its operands partly overlap its output; cuDNN cannot compute that in place")
    if fn in ("min", "max"):
        return  # fn(a, a) = a, already there
    if fn not in ("add", "sub"):
        raise cannot_lower(op, f"{fn}(a, a) in place has no cuDNN lowering yet")
    run = lw.run
    desc = lw.use(run, lw.tensor_descriptor(lw.shape(out)))
    lw.library_call("cudnnAddTensor", lw.cudnn_handle(), lw.scalar(run, 1.0 if fn == "add" else -1.0), desc,
            lw.device_pointer(op, a), lw.scalar(run, 1.0), desc, lw.device_pointer(op, out))


def _op_tensor_call(lw: CudaFunctionLowering, op: Operation, fn: str, a: tuple[float, SSAValue],
                    b: tuple[float, SSAValue], out: SSAValue) -> None:
    """One cudnnOpTensor: out = fn(alpha1 * A, alpha2 * B), B broadcast; sub is
    add (the caller negated its alpha)."""
    op_fn = "add" if fn == "sub" else fn
    if op_fn not in api.OP_TENSOR_OPS:
        raise cannot_lower(op, f"{fn} has no cuDNN op-tensor lowering yet (add, sub, mul, min, max do)")
    run = lw.run
    out_shape = lw.shape(out)
    c_desc = lw.use(run, lw.tensor_descriptor(out_shape))
    b_dims = _broadcast_shape(lw.shape(b[1]), len(out_shape))
    lw.library_call("cudnnOpTensor", lw.cudnn_handle(), lw.use(run, _op_tensor(lw, op_fn)), lw.scalar(run, a[0]), c_desc,
            lw.device_pointer(op, a[1]), lw.scalar(run, b[0]), lw.use(run, lw.tensor_descriptor(b_dims)), lw.device_pointer(op, b[1]),
            lw.scalar(run, 0.0), c_desc, lw.device_pointer(op, out))


def _lower_binary(lw: CudaFunctionLowering, op: d.BinaryOp) -> None:
    """cudnnOpTensor where it computes the op (then the activation), else
    one generated kernel with the activation fused in."""
    fn, activation = op.fn.data, op.kernel_kwargs().get("activation")
    out_shape = lw.shape(op.out)
    one_full = out_shape in (lw.shape(op.a), lw.shape(op.b))
    self_in_place = lw.overlaps(op.a, op.b) and lw.overlaps(op.out, op.a)
    floating = isinstance(op.out.type.get_element_type(), Float32Type)  # type: ignore[union-attr]
    if fn in _SWAPPABLE and one_full and floating and not (self_in_place and fn == "mul"):
        _elementwise(lw, op, fn, op.a, op.b, op.out)
        lw.apply_activation(op, activation, op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.out)
        return
    lw.pointwise(op, fn, op.out, [op.a, op.b], activation=activation, activation_alpha=op.kernel_kwargs().get("alpha"),
                 activation_beta=op.kernel_kwargs().get("beta"))


def _other_dtype_allowed(op: Operation, value: SSAValue) -> bool:
    """Whether `value` may be other than float32: where's condition and a
    comparison's result (bools), integer arithmetic, comparisons and where,
    gather's indices, cast's operands."""
    dtype = numpy_dtype_name(value.type.get_element_type())  # type: ignore[attr-defined]
    integer = dtype in ("int32", "int64")
    if isinstance(op, d.WhereOp):
        return dtype == "bool" if value is op.cond else integer
    if isinstance(op, d.BinaryOp | d.UnaryOp) and op.fn.data in INTEGER_FUNCTIONS and integer:
        return op.activation is None if isinstance(op, d.BinaryOp) else True
    if isinstance(op, d.BinaryOp) and op.fn.data in COMPARISONS:
        return dtype == "bool" if value is op.out else dtype in ("int32", "int64")
    if isinstance(op, d.BinaryOp | d.UnaryOp) and op.fn.data in LOGICAL:
        return dtype == "bool"
    if isinstance(op, d.GatherOp):
        return value is op.indices and dtype in ("int32", "int64")
    if isinstance(op, d.ArgMaxOp):
        return value is op.out and dtype == "int64"
    return isinstance(op, d.CastOp | d.ExpandOp | d.SliceOp) and dtype in DTYPES


def _lower_gather(lw: CudaFunctionLowering, op: d.GatherOp) -> None:
    shape = lw.shape(op.x)
    axis = op.kernel_kwargs()["axis"] % len(shape)
    indices_type = op.indices.type
    kernel = GatherKernel(name="", x_shape=tuple(shape), axis=axis, index_count=math.prod(lw.shape(op.indices)),
                          index_dtype=numpy_dtype_name(indices_type.get_element_type()))  # type: ignore[attr-defined]
    lw.launch(op, kernel, op.out, [op.x, op.indices])


def _lower_cast(lw: CudaFunctionLowering, op: d.CastOp) -> None:
    source = numpy_dtype_name(op.x.type.get_element_type())  # type: ignore[attr-defined]
    target = numpy_dtype_name(op.out.type.get_element_type())  # type: ignore[attr-defined]
    if source == target:
        _copy(lw, op, op.x, op.out)
        return
    lw.launch(op, CastKernel(name="", count=math.prod(lw.shape(op.x)), source=source, target=target),
              op.out, [op.x])


def _lower_layer_norm(lw: CudaFunctionLowering, op: d.LayerNormOp) -> None:
    shape = lw.shape(op.x)
    axis = op.kernel_kwargs()["axis"] % len(shape)
    width = math.prod(shape[axis:])
    for name, value in (("scale", op.scale), ("bias", op.bias)):
        if value is not None and math.prod(lw.shape(value)) != width:
            raise cannot_lower(op, f"a {name} that broadcasts within the normalised axes has no kernel yet")
    epsilon = op.kernel_kwargs().get("epsilon")
    kernel = LayerNormKernel(name="", rows=math.prod(shape[:axis]), width=width,
                             epsilon=1e-5 if epsilon is None else epsilon, has_bias=op.bias is not None)
    lw.launch(op, kernel, op.out, [op.x, op.scale] + ([op.bias] if op.bias is not None else []))


def _lower_expand(lw: CudaFunctionLowering, op: d.ExpandOp) -> None:
    """numpy broadcasting as a copy kernel (stride 0 along broadcast axes)."""
    lw.pointwise(op, "identity", op.out, [op.x])


def _lower_slice(lw: CudaFunctionLowering, op: d.SliceOp) -> None:
    """A slice is a strided copy: each axis starts at its start and steps by
    its step (negative steps too), as a copy kernel with an input offset."""
    shape = lw.shape(op.x)
    starts, ends = op.kernel_kwargs().get("starts", []), op.kernel_kwargs().get("ends", [])
    axes = op.kernel_kwargs().get("axes", list(range(len(starts))))
    steps = op.kernel_kwargs().get("steps", [1] * len(starts))
    row_major = row_major_strides(shape)
    strides, offset = list(row_major), 0
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis %= len(shape)
        first, _, _ = slice(start, end, step).indices(shape[axis])
        strides[axis] = row_major[axis] * step
        offset += first * row_major[axis]
    dtype = numpy_dtype_name(op.x.type.get_element_type())  # type: ignore[attr-defined]
    if math.prod(lw.shape(op.out)) == 0:
        return
    kernel = PointwiseKernel(name="", fn="identity", shape=tuple(lw.shape(op.out)), input_strides=(tuple(strides),),
                             input_dtype=dtype, input_offsets=(offset,))
    lw.launch(op, kernel, op.out, [op.x])


def _lower_reduce(lw: CudaFunctionLowering, op: d.ReduceOp | d.ArgMaxOp) -> None:
    """Reduce<fn> (and ArgMax) with a kernel: a thread per output element."""
    shape = lw.shape(op.x)
    if isinstance(op, d.ArgMaxOp):
        fn, axes = "arg_max", [op.kernel_kwargs()["axis"] % len(shape)]
    else:
        fn, axes = op.fn.data, op.kernel_kwargs().get("axes", [])
        if not axes:
            if op.axes is not None and op.kernel_kwargs().get("noop_with_empty_axes", 0):
                _copy(lw, op, op.x, op.out)
                return
            axes = list(range(len(shape)))
    axes = sorted({axis % len(shape) for axis in axes})
    if fn not in REDUCTIONS or any(shape[axis] == 0 for axis in axes):
        raise cannot_lower(op, f"reduce {fn} (over an empty axis?) has no kernel yet")
    kernel = ReduceKernel(name="", fn=fn, shape=tuple(shape), axes=tuple(axes),
                          select_last_index=bool(op.kernel_kwargs().get("select_last_index", 0)))
    lw.launch(op, kernel, op.out, [op.x])


def _lower_where(lw: CudaFunctionLowering, op: d.WhereOp) -> None:
    lw.pointwise(op, "where", op.out, [op.cond, op.a, op.b])


def _lower_variadic(lw: CudaFunctionLowering, op: d.VariadicOp) -> None:
    """sum / mean / max / min of n inputs: n - 1 op-tensor calls
    accumulating in out (mean then scales it by 1/n in place)."""
    fn = {"sum": "add", "mean": "add", "max": "max", "min": "min"}.get(op.fn.data)
    inputs = list(op.inputs)
    if fn is None:
        raise cannot_lower(op, f"{op.fn.data} of several inputs has no cuDNN lowering yet (sum, mean, max, min do)")
    if len(inputs) == 1:
        _copy(lw, op, inputs[0], op.out)
        return
    _elementwise(lw, op, fn, inputs[0], inputs[1], op.out)
    for value in inputs[2:]:
        _elementwise(lw, op, fn, op.out, value, op.out)
    if op.fn.data == "mean":  # out = (1/n) * out, A being C: cuDNN's in-place add
        run = lw.run
        desc = lw.use(run, lw.tensor_descriptor(lw.shape(op.out)))
        out = lw.device_pointer(op, op.out)
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), lw.scalar(run, 1.0 / len(inputs)), desc, out,
                        lw.scalar(run, 0.0), desc, out)


def _lower_unary(lw: CudaFunctionLowering, op: d.UnaryOp) -> None:
    fn = op.fn.data
    if fn == "identity":
        _copy(lw, op, op.x, op.out)
        return
    lw.apply_activation(op, fn, op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.out, source=op.x)


def _copy(lw: CudaFunctionLowering, op: Operation, source: SSAValue, target: SSAValue) -> None:
    """target = source, device to device (nothing when they are one buffer)."""
    if source is target:
        return
    run = lw.run
    lw.library_call("cudaMemcpyAsync", lw.device_pointer(op, target), lw.device_pointer(op, source), d.type_bytes(source.type),
            api.MEMCPY_DEVICE_TO_DEVICE, lw.load_global(run, lw.stream))


def _lower_copy(lw: CudaFunctionLowering, op: d.CopyOp) -> None:
    _copy(lw, op, op.x, op.out)


def _lower_channel_affine(lw: CudaFunctionLowering, op: d.ChannelAffineOp) -> None:
    """out = act(x * scale[c] + shift[c]): an op-tensor multiply by the
    broadcast scale, an add of the broadcast shift, the activation."""
    shape = lw.shape(op.x)
    if op.kernel_kwargs()["axis"] % len(shape) != 1:
        raise cannot_lower(op, "a channel affine along an axis other than 1 has no cuDNN lowering yet")
    run = lw.run
    vector = lw.use(run, lw.tensor_descriptor([1, shape[1]] + [1] * (len(shape) - 2)))
    desc = lw.use(run, lw.tensor_descriptor(shape))
    y = lw.device_pointer(op, op.out)
    one, zero = lw.scalar(run, 1.0), lw.scalar(run, 0.0)
    lw.library_call("cudnnOpTensor", lw.cudnn_handle(), lw.use(run, _op_tensor(lw, "mul")), one, desc, lw.device_pointer(op, op.x),
            one, vector, lw.device_pointer(op, op.scale), zero, desc, y)
    lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, vector, lw.device_pointer(op, op.shift), one, desc, y)
    lw.apply_activation(op, op.kernel_kwargs().get("activation"), op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"),
                         op.out)


def _lower_batch_norm(lw: CudaFunctionLowering, op: d.BatchNormOp) -> None:
    shape = lw.shape(op.x)
    run = lw.run
    desc = lw.use(run, lw.tensor_descriptor(shape))
    vector = lw.use(run, lw.tensor_descriptor([1, shape[1]] + [1] * (len(shape) - 2)))
    epsilon = op.kernel_kwargs().get("epsilon")
    lw.library_call("cudnnBatchNormalizationForwardInference", lw.cudnn_handle(), api.BATCHNORM_SPATIAL, lw.scalar(run, 1.0),
            lw.scalar(run, 0.0), desc, lw.device_pointer(op, op.x), desc, lw.device_pointer(op, op.out), vector,
            lw.device_pointer(op, op.scale), lw.device_pointer(op, op.bias), lw.device_pointer(op, op.mean), lw.device_pointer(op, op.var),
            1e-5 if epsilon is None else epsilon)


def _lower_transpose(lw: CudaFunctionLowering, op: d.TransposeOp) -> None:
    """A permutation is a strided copy: read x with its strides permuted."""
    x_shape, y_shape = lw.shape(op.x), lw.shape(op.out)
    perm = op.kernel_kwargs().get("perm", list(reversed(range(len(x_shape)))))
    x_strides = row_major_strides(x_shape)
    run = lw.run
    lw.library_call("cudnnTransformTensor", lw.cudnn_handle(), lw.scalar(run, 1.0),
            lw.use(run, lw.tensor_descriptor(y_shape, [x_strides[p] for p in perm])), lw.device_pointer(op, op.x),
            lw.scalar(run, 0.0), lw.use(run, lw.tensor_descriptor(y_shape)), lw.device_pointer(op, op.out))


def _band_copies(lw: CudaFunctionLowering, op: Operation, whole: SSAValue, parts: Sequence[SSAValue], axis: int,
                 into_whole: bool) -> None:
    """Concat (into_whole) or split along `axis`: each part is `outer` rows
    of a contiguous band of the whole, one cudaMemcpy2DAsync per part."""
    shape = lw.shape(whole)
    axis %= len(shape)
    outer = math.prod(shape[:axis])
    row = d.type_bytes(whole.type) // max(outer, 1)
    offset = 0
    run = lw.run
    base = lw.device_pointer(op, whole)
    for part in parts:
        width = d.type_bytes(part.type) // max(outer, 1)
        band = run.b.gep(base, offset, i8)
        source, target = (lw.device_pointer(op, part), band) if into_whole else (band, lw.device_pointer(op, part))
        spitch, dpitch = (width, row) if into_whole else (row, width)
        lw.library_call("cudaMemcpy2DAsync", target, dpitch, source, spitch, width, outer, api.MEMCPY_DEVICE_TO_DEVICE,
                lw.load_global(run, lw.stream))
        offset += width


def _lower_concat(lw: CudaFunctionLowering, op: d.ConcatOp) -> None:
    _band_copies(lw, op, op.out, list(op.inputs), op.axis.value.data, into_whole=True)


def _lower_split(lw: CudaFunctionLowering, op: d.SplitOp) -> None:
    _band_copies(lw, op, op.x, list(op.outs), op.kernel_kwargs()["axis"], into_whole=False)


def _constant(lw: CudaFunctionLowering, values: Any) -> SSAValue:
    """A float32 constant the lowering computed, stored with the weights
    (init uploads it); its device pointer in run."""
    import numpy as np

    array = np.ascontiguousarray(values, dtype=np.float32)
    offset = lw.weights.place(array.nbytes, {"shape": list(array.shape), "dtype": "float32"},
                              {"values": array.ravel().tolist()})
    return lw.run.b.gep(lw.load_global(lw.run, lw.device_weights), offset, i8)


#: the most bytes of interpolation matrices one resize may add to the weights
RESIZE_MATRIX_LIMIT = 1 << 20


def _resize_matrix(op: d.ResizeOp, in_size: int, out_size: int, scale: float | None) -> Any:
    """The (in_size, out_size) matrix of one axis of a resize: column o holds
    the weight of every input cell in output cell o. Every ONNX Resize mode
    (nearest, linear, cubic) is a linear map per axis, so resizing an
    identity with the host kernel gives exactly its matrix."""
    import numpy as np

    from pyocc.runtime.kernels.resize import resize

    kwargs = {name: value for name in ("mode", "coordinate_transformation_mode", "nearest_mode")
              if (value := op.kernel_kwargs().get(name)) is not None}
    if (coeff := op.kernel_kwargs().get("cubic_coeff_a")) is not None:
        kwargs["cubic_coeff_a"] = coeff
    kwargs["exclude_outside"] = op.kernel_kwargs()["exclude_outside"]
    matrix = np.empty((in_size, out_size), dtype=np.float32)
    resize(np.eye(in_size, dtype=np.float32), out=matrix, scales=None if scale is None else [1.0, scale], **kwargs)
    return matrix


def _lower_resize(lw: CudaFunctionLowering, op: d.ResizeOp) -> None:
    """Resize of the last two axes as matrix products with cuBLAS: with Aw
    and Ah the per-axis interpolation matrices (computed here, stored with
    the weights), each (H, W) plane X becomes Ah^T X Aw, the width pass one
    gemm over all rows into the workspace, the height pass one strided
    batched gemm sharing Ah (stride 0). An axis that keeps its size and
    scale is skipped. Nearest mode is exact (weights 1 and 0) except that an
    inf or NaN input spreads along its row and column (0 * inf is NaN)."""
    x_shape, y_shape = lw.shape(op.x), lw.shape(op.out)
    rank = len(x_shape)
    scales = op.kernel_kwargs().get("scales", [])
    if op.kernel_kwargs().get("coordinate_transformation_mode") == "tf_crop_and_resize":
        raise cannot_lower(op, "tf_crop_and_resize has no cuBLAS lowering (use target=host)")
    resized = [axis for axis in range(rank)
               if x_shape[axis] != y_shape[axis] or (scales and float(scales[axis]) != 1.0)]
    if not resized:
        _copy(lw, op, op.x, op.out)
        return
    if min(resized) < rank - 2:
        raise cannot_lower(op, f"it resizes axis {min(resized)}, which has no cuBLAS lowering (the last two axes "
                               "have; use target=host)")
    if rank == 1:
        x_shape, y_shape, resized, scales = [1, *x_shape], [1, *y_shape], [1], [1.0, *scales]
        rank = 2
    lw._uses_cublas = True
    outer = math.prod(x_shape[:-2])
    (h, w), (h2, w2) = x_shape[-2:], y_shape[-2:]
    matrix_bytes = 4 * ((h * h2 if rank - 2 in resized else 0) + (w * w2 if rank - 1 in resized else 0))
    if matrix_bytes > RESIZE_MATRIX_LIMIT:
        raise cannot_lower(op, f"no cuBLAS lowering with interpolation matrices of {matrix_bytes} bytes (the "
                               f"limit is {RESIZE_MATRIX_LIMIT}); use target=host")
    scale = lambda axis: float(scales[axis]) if scales else None  # noqa: E731
    x, y = lw.device_pointer(op, op.x), lw.device_pointer(op, op.out)
    if rank - 1 in resized:  # width: rows (outer * h, w) @ Aw (w, w2)
        a_w = _constant(lw, _resize_matrix(op, w, w2, scale(rank - 1)))
        target = y
        if rank - 2 in resized:  # the height pass reads it from the workspace
            lw.workspace_floor = max(lw.workspace_floor, 4 * outer * h * w2)
            target = lw.load_global(lw.run, lw.workspace)
        _sgemm(lw, op, 0, 0, outer * h, w2, w, 1.0, x, a_w, 0.0, target)
        x = target
    if rank - 2 in resized:  # height: Ah^T (h2, h) @ each plane (h, w2)
        a_h = _constant(lw, _resize_matrix(op, h, h2, scale(rank - 2)).T)
        batch = None if outer == 1 else (outer, 0, h * w2, h2 * w2)
        _sgemm(lw, op, 0, 0, h2, w2, h, 1.0, a_h, x, 0.0, y, batch=batch)


_COMPUTE: dict[type[Operation], Callable[[CudaFunctionLowering, Any], None]] = {
    d.ConvOp: _lower_conv,
    d.PreActConvOp: _lower_preact_conv,
    d.MaxPoolOp: _lower_pool,
    d.AveragePoolOp: _lower_pool,
    d.GlobalAveragePoolOp: _lower_pool,
    d.GlobalMaxPoolOp: _lower_pool,
    d.GemmOp: _lower_gemm,
    d.MatMulOp: _lower_matmul,
    d.SoftmaxOp: _lower_softmax,
    d.LogSoftmaxOp: _lower_softmax,
    d.LRNOp: _lower_lrn,
    d.BinaryOp: _lower_binary,
    d.VariadicOp: _lower_variadic,
    d.UnaryOp: _lower_unary,
    d.CopyOp: _lower_copy,
    d.ChannelAffineOp: _lower_channel_affine,
    d.BatchNormOp: _lower_batch_norm,
    d.TransposeOp: _lower_transpose,
    d.ConcatOp: _lower_concat,
    d.SplitOp: _lower_split,
    d.WhereOp: _lower_where,
    d.GatherOp: _lower_gather,
    d.CastOp: _lower_cast,
    d.LayerNormOp: _lower_layer_norm,
    d.ExpandOp: _lower_expand,
    d.SliceOp: _lower_slice,
    d.ReduceOp: _lower_reduce,
    d.ArgMaxOp: _lower_reduce,
    d.ConvTransposeOp: _lower_conv_transpose,
    d.ResizeOp: _lower_resize,
}
#: the dnn ops target=cuda lowers (the rest fail with a clear message)
CUDA_OPS: frozenset[str] = frozenset(cls.name for cls in _COMPUTE)  # type: ignore[attr-defined]

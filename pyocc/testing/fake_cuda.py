"""A CPU stand-in for the CUDA runtime, cuDNN and cuBLAS, for testing `target=cuda`
code on machines without a GPU.

Generated host code calls NVIDIA's libraries through function addresses bound
to its external symbols. `FakeCuda.symbols()` hands out, for every function of
pyocc.runtime.cuda_api.FUNCTIONS, the address of a ctypes callback with the
same C signature, so the same generated code runs end to end on the CPU:

- "device memory" is numpy memory that cudaMalloc fills with 0xFF bytes (a
  float NaN), so a value read before it was written shows up in the results;
- every device pointer a routine touches (the whole extent its descriptor
  implies) must lie inside one live allocation, host pointers must not point
  into device memory, and freed memory stays quarantined for a while so that a
  use after cudaFree is reported instead of silently reading reused memory;
- handles, streams and descriptors are opaque addresses; using one that was
  never set, destroyed, or is of another kind is reported;
- routines compute with numpy (pyocc.testing.fake_cuda_math), synchronously,
  and follow the documented contracts: beta == 0 means the destination is not
  read, workspace limits hold, dims must agree as cuDNN requires, results of
  tensor-core math modes are rounded as the hardware would.

A violated contract never raises through ctypes (the C caller would see 0,
success): the callback appends one readable line to `errors` and returns the
library's error status. The fake is deliberately stricter than the real
libraries where those return success with undefined results: an output that
overlaps an input (other than the documented in-place cases) is an error.
`leaks()` lists what was allocated or created and never freed or destroyed.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pyocc.runtime import cuda_api as api
from pyocc.testing import fake_cuda_math as fm

__all__ = ["FakeCuda"]

#: cudaMalloc's alignment
ALIGNMENT = 256
#: what uninitialised device memory holds (0xFFFFFFFF is a float NaN)
POISON_BYTE = 0xFF
#: freed device memory kept unreusable (and poisoned) so a use after free is caught
QUARANTINE_BYTES = 256 << 20
#: the workspace the fake's WINOGRAD_NONFUSED convolution asks for
HUGE_WORKSPACE = 1 << 30
FLOAT_BYTES = 4
_POISON_WORD = np.uint32(0xFFFFFFFF)
#: cudaMemcpyDefault: the direction follows from the pointers
MEMCPY_DEFAULT = 4
#: cudaStreamLegacy, cudaStreamPerThread: stream handles that need no creation
_BUILTIN_STREAMS = (0, 1, 2)

# -- failures -----------------------------------------------------------------


class ContractViolation(Exception):
    """A call that breaks its library's contract. `kind` picks the status code:
    "invalid", "unsupported", "alloc", "handle" or "internal"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


_STATUS: dict[str, dict[str, int]] = {
    "cudart": {"invalid": 1, "unsupported": 1, "alloc": 2, "handle": 1, "internal": 1},
    "cudnn": {"invalid": 2000, "unsupported": 3000, "alloc": 2000, "handle": 2000, "internal": 5000},
    "cublas": {"invalid": 7, "unsupported": 15, "alloc": 3, "handle": 1, "internal": 13},
    # CUDA_ERROR_INVALID_VALUE, _NOT_SUPPORTED, _OUT_OF_MEMORY, _INVALID_HANDLE, _UNKNOWN
    "cuda": {"invalid": 1, "unsupported": 801, "alloc": 2, "handle": 400, "internal": 999},
}


def _invalid(message: str) -> ContractViolation:
    return ContractViolation("invalid", message)


def _unsupported(message: str) -> ContractViolation:
    return ContractViolation("unsupported", message)


# -- device memory --------------------------------------------------------------


@dataclass
class _Allocation:
    """One cudaMalloc block: `address` is 256-byte aligned inside `raw`."""

    address: int
    size: int
    raw: np.ndarray
    serial: int

    @property
    def end(self) -> int:
        return self.address + self.size

    @property
    def raw_address(self) -> int:
        return int(self.raw.ctypes.data)

    def describe(self) -> str:
        return f"allocation #{self.serial} [{self.address:#x}, +{self.size} B)"


class _Blocks:
    """Non-overlapping address intervals, found by address with a binary search."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self.by_start: dict[int, _Allocation] = {}

    def add(self, block: _Allocation) -> None:
        bisect.insort(self._starts, block.address)
        self.by_start[block.address] = block

    def remove(self, block: _Allocation) -> None:
        self._starts.pop(bisect.bisect_left(self._starts, block.address))
        del self.by_start[block.address]

    def containing(self, address: int) -> _Allocation | None:
        """The block whose [address, end) holds `address` (a zero-size block holds nothing)."""
        index = bisect.bisect_right(self._starts, address) - 1
        if index < 0:
            return None
        block = self.by_start[self._starts[index]]
        return block if address < block.end else None


class _DeviceMemory:
    """Live allocations, the quarantine of freed ones, and byte counts."""

    def __init__(self) -> None:
        self.live = _Blocks()
        self.freed = _Blocks()
        self._freed_order: collections.deque[_Allocation] = collections.deque()
        self._freed_bytes = 0
        self.live_bytes = 0
        self.peak_bytes = 0
        self._serial = 0

    def allocate(self, size: int) -> int:
        self._serial += 1
        raw = np.full(size + ALIGNMENT, POISON_BYTE, dtype=np.uint8)
        address = -(-int(raw.ctypes.data) // ALIGNMENT) * ALIGNMENT
        self.live.add(_Allocation(address, size, raw, self._serial))
        self.live_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return address

    def free(self, address: int) -> None:
        block = self.live.by_start.get(address)
        if block is None:
            raise _invalid(f"{address:#x} {self._not_an_allocation(address)}")
        self.live.remove(block)
        self.live_bytes -= block.size
        block.raw.fill(POISON_BYTE)
        self.freed.add(block)
        self._freed_order.append(block)
        self._freed_bytes += block.size
        while self._freed_bytes > QUARANTINE_BYTES and len(self._freed_order) > 1:
            oldest = self._freed_order.popleft()
            self.freed.remove(oldest)
            self._freed_bytes -= oldest.size

    def _not_an_allocation(self, address: int) -> str:
        freed = self.freed.containing(address)
        if freed is not None and freed.address == address:
            return f"was already freed ({freed.describe()})"
        inside = self.live.containing(address)
        if inside is not None:
            return f"is inside {inside.describe()}, not its start"
        return "is not an address cudaMalloc returned"

    def require(self, address: int, nbytes: int, what: str) -> _Allocation:
        """The live allocation holding all of [address, address + nbytes)."""
        block = self.live.containing(address)
        if block is not None and address + nbytes <= block.end and nbytes >= 0:
            return block
        why = ""
        if address == 0:
            why = " (it is NULL)"
        elif block is not None:
            why = f" (it starts inside {block.describe()} but runs {address + nbytes - block.end} B past its end)"
        else:
            freed = self.freed.containing(address)
            if freed is not None:
                why = f" (it points into {freed.describe()}, freed by cudaFree)"
        raise _invalid(f"{what} [{address:#x}, +{nbytes} B) is not inside a live device allocation{why}")

    def require_host(self, address: int, what: str) -> None:
        """`address` must be a non-NULL host pointer, not device memory."""
        if address == 0:
            raise _invalid(f"{what} is NULL")
        block = self.live.containing(address)
        if block is not None:
            raise _invalid(
                f"{what} {address:#x} is device memory ({block.describe()}) where a host pointer is expected"
            )
        freed = self.freed.containing(address)
        if freed is not None:
            raise _invalid(f"{what} {address:#x} points into freed device memory ({freed.describe()})")

    def is_device(self, address: int) -> bool:
        return self.live.containing(address) is not None or self.freed.containing(address) is not None


# -- handles and descriptors -------------------------------------------------------

STREAM = "stream"
CUDNN_HANDLE = "cuDNN handle"
CUBLAS_HANDLE = "cuBLAS handle"
TENSOR = "tensor descriptor"
FILTER = "filter descriptor"
CONVOLUTION = "convolution descriptor"
ACTIVATION = "activation descriptor"
POOLING = "pooling descriptor"
OP_TENSOR = "op-tensor descriptor"
LRN = "LRN descriptor"
CU_MODULE = "CUmodule"
CU_FUNCTION = "CUfunction"
#: void twin(void **kernelParams, int64_t first, int64_t last): a kernel's host twin
_TWIN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


@dataclass
class _Object:
    """A handle, stream or descriptor: an opaque address (the address of `anchor`, so
    no two objects share one) and the parameters Set* recorded (None until then)."""

    kind: str
    address: int
    serial: int
    anchor: Any
    params: Any = None
    destroyed: bool = False


class _Objects:
    """Every handle, stream and descriptor ever created; destroyed ones are kept
    (marked) so that a use after destroy says what the address was."""

    def __init__(self) -> None:
        self.by_address: dict[int, _Object] = {}
        self._serial = 0

    def create(self, kind: str, params: Any = None) -> int:
        self._serial += 1
        anchor = ctypes.create_string_buffer(16)
        address = ctypes.addressof(anchor)
        self.by_address[address] = _Object(kind, address, self._serial, anchor, params)
        return address

    def get(self, address: int, kind: str, what: str, *, must_be_set: bool = True) -> _Object:
        obj = self.by_address.get(address)
        if obj is None:
            null = " (NULL)" if address == 0 else ""
            raise ContractViolation("handle", f"{what} {address:#x}{null} is not a {kind}")
        if obj.kind != kind:
            raise ContractViolation("handle", f"{what} {address:#x} is a {obj.kind}, not a {kind}")
        if obj.destroyed:
            raise ContractViolation("handle", f"{what} {address:#x} is a destroyed {kind}")
        if must_be_set and obj.params is None:
            raise _invalid(f"{what} {address:#x} is a {kind} that was never set")
        return obj

    def destroy(self, address: int, kind: str, what: str) -> None:
        self.get(address, kind, what, must_be_set=False).destroyed = True

    def live(self) -> list[_Object]:
        return [obj for obj in self.by_address.values() if not obj.destroyed]


# -- descriptor parameters -------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """A float tensor in memory: dims and strides in elements."""

    dims: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def extent_bytes(self) -> int:
        return (sum((d - 1) * s for d, s in zip(self.dims, self.strides)) + 1) * FLOAT_BYTES

    @staticmethod
    def packed(dims: Sequence[int]) -> _Layout:
        strides = [1] * len(dims)
        for i in range(len(dims) - 2, -1, -1):
            strides[i] = strides[i + 1] * dims[i + 1]
        return _Layout(tuple(dims), tuple(strides))


@dataclass(frozen=True)
class _Filter:
    dims: tuple[int, ...]

    @property
    def layout(self) -> _Layout:
        return _Layout.packed(self.dims)


@dataclass
class _Convolution:
    """Created with cuDNN's defaults (one group, default math); `nd` holds what
    cudnnSetConvolutionNdDescriptor set, None until then."""

    pads: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()
    mode: int = api.CUDNN_CROSS_CORRELATION
    compute_type: int = api.CUDNN_DATA_FLOAT
    groups: int = 1
    math_type: int = 0
    is_set: bool = False


@dataclass(frozen=True)
class _Activation:
    mode: int
    propagate_nan: bool
    coef: float


@dataclass(frozen=True)
class _Pooling:
    mode: int
    propagate_nan: bool
    window: tuple[int, ...]
    pads: tuple[int, ...]
    strides: tuple[int, ...]


@dataclass(frozen=True)
class _OpTensor:
    op: int
    compute_type: int
    propagate_nan: bool


@dataclass(frozen=True)
class _Lrn:
    size: int = 5
    alpha: float = 1e-4
    beta: float = 0.75
    k: float = 2.0


@dataclass
class _Handle:
    """cuDNN or cuBLAS handle state."""

    stream: int = 0
    math_mode: int = 0


#: cudnnMathType_t -> the precision a float convolution's inputs get (on an Ampere-or-later GPU)
_CUDNN_MATH_PRECISION = {0: "tf32", 1: "tf32", 2: "fp16", api.CUDNN_FMA_MATH: "fp32"}
#: cublasMath_t (low bits) -> the precision sgemm's inputs get
_CUBLAS_MATH_PRECISION = {0: "fp32", 1: "fp16", api.CUBLAS_PEDANTIC_MATH: "fp32", 3: "tf32"}
#: cudnnConvolutionFwdAlgo_t values
_ALGO_PRECOMP_GEMM, _ALGO_GEMM, _ALGO_WINOGRAD, _ALGO_WINOGRAD_NONFUSED = 1, 2, 6, 7


class _ConvFwdAlgoPerf(ctypes.Structure):
    """cudnnConvolutionFwdAlgoPerf_t."""

    _fields_ = [
        ("algo", ctypes.c_int32),
        ("status", ctypes.c_int32),
        ("time", ctypes.c_float),
        ("memory", ctypes.c_size_t),
        ("determinism", ctypes.c_int32),
        ("mathType", ctypes.c_int32),
        ("reserved", ctypes.c_int32 * 3),
    ]


assert ctypes.sizeof(_ConvFwdAlgoPerf) == api.CONV_PERF_SIZE
assert _ConvFwdAlgoPerf.memory.offset == api.CONV_PERF_MEMORY


@dataclass(frozen=True)
class _ConvProblem:
    """A convolution whose descriptors agree: x (N, C, *S), w (K, C/groups, *R), y (N, K, *O)."""

    x: _Layout
    w: _Filter
    y: _Layout
    conv: _Convolution

    @property
    def kernel(self) -> tuple[int, ...]:
        return self.w.dims[2:]

    @property
    def winograd_fits(self) -> bool:
        """The fake's Winograd algorithms take 3x3 kernels at stride 1, undilated."""
        return self.kernel == (3, 3) and set(self.conv.strides) == {1} and set(self.conv.dilations) == {1}

    def workspace(self, algo: int) -> int | None:
        """The fake's workspace need of `algo` in bytes; None where it does not support it.
        Fastest (by the fake's claimed times) needs the most, so a caller that ignores
        its workspace limit is caught: IMPLICIT_GEMM none, PRECOMP_GEMM an index table,
        GEMM an im2col buffer, WINOGRAD (3x3, stride 1) transformed filters,
        WINOGRAD_NONFUSED a gigabyte."""
        channels, kernel_size = self.x.dims[1], math.prod(self.kernel)
        if algo == api.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
            return 0
        if algo == _ALGO_PRECOMP_GEMM:
            return 8 * (channels // self.conv.groups) * kernel_size
        if algo == _ALGO_GEMM:
            return FLOAT_BYTES * channels * kernel_size * math.prod(self.y.dims[2:])
        if algo == _ALGO_WINOGRAD:
            return FLOAT_BYTES * 16 * self.w.dims[0] * self.w.dims[1] if self.winograd_fits else None
        if algo == _ALGO_WINOGRAD_NONFUSED:
            return HUGE_WORKSPACE
        return None  # DIRECT, FFT, FFT_TILING


#: the order cudnnGetConvolutionForwardAlgorithm_v7 ranks algorithms in, with claimed times (ms)
_ALGO_RANKING = ((7, 0.05), (6, 0.08), (1, 0.1), (2, 0.2), (0, 0.3), (3, -1.0), (4, -1.0), (5, -1.0))

#: cudnnConvolutionBwdDataAlgo_t values
_BWD_DATA_ALGO_FFT, _BWD_DATA_ALGO_FFT_TILING, _BWD_DATA_ALGO_WINOGRAD, _BWD_DATA_ALGO_WINOGRAD_NONFUSED = 2, 3, 4, 5
#: the order cudnnGetConvolutionBackwardDataAlgorithm_v7 ranks algorithms in, with claimed times (ms)
_BWD_DATA_ALGO_RANKING = ((5, 0.05), (4, 0.08), (1, 0.1), (0, 0.2), (2, -1.0), (3, -1.0))


def _bwd_data_workspace(problem: _ConvProblem, algo: int) -> int | None:
    """The fake's workspace need of backward-data `algo` for `problem` (x is dx,
    y is dy) in bytes; None where it does not support it. As for the forward
    algorithms, the faster ones need more: ALGO_0 none, ALGO_1 a copy of the
    filter, WINOGRAD (3x3, stride 1) transformed filters, WINOGRAD_NONFUSED a
    gigabyte; FFT and FFT_TILING are not implemented."""
    if algo == api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
        return 0
    if algo == api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
        return FLOAT_BYTES * math.prod(problem.w.dims)
    if algo == _BWD_DATA_ALGO_WINOGRAD:
        return FLOAT_BYTES * 16 * problem.w.dims[0] * problem.w.dims[1] if problem.winograd_fits else None
    if algo == _BWD_DATA_ALGO_WINOGRAD_NONFUSED:
        return HUGE_WORKSPACE
    return None


# -- the fake ----------------------------------------------------------------------


class FakeCuda:
    """A CPU stand-in for the CUDA runtime, cuDNN and cuBLAS functions that
    `target=cuda` code calls (pyocc.runtime.cuda_api.FUNCTIONS).

    Bind generated code's external symbols to `symbols()` and run it: device
    memory is numpy memory, kernels are numpy, every call is checked against
    its library's documented contract. After the run, `errors` says what went
    wrong (one line per failed call), `calls` counts calls per function,
    `live_bytes`/`peak_bytes` give device memory use and `leaks()` lists what was
    never freed or destroyed."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.errors: list[str] = []
        #: one line per call that read never-written device memory (0xFF poison); such
        #: calls succeed, as on a GPU, but their results are NaN: this says where it came from
        self.uninitialised_reads: list[str] = []
        self._current = ""
        self._memory = _DeviceMemory()
        self._objects = _Objects()
        self._host_kernels: dict[str, tuple[int, list[int]]] = {}
        self._callbacks: dict[str, Any] = {}
        for function in api.FUNCTIONS:
            self._callbacks[function.name] = self._callback(function)

    # -- public interface --------------------------------------------------------

    @property
    def live_bytes(self) -> int:
        """Device memory currently allocated, in bytes."""
        return self._memory.live_bytes

    @property
    def peak_bytes(self) -> int:
        """The most device memory allocated at once, in bytes (since reset_counts)."""
        return self._memory.peak_bytes

    def symbols(self) -> dict[str, int]:
        """Function name -> address of its callback, for every cuda_api function."""
        return {name: ctypes.cast(cb, ctypes.c_void_p).value or 0 for name, cb in self._callbacks.items()}

    def reset_counts(self) -> None:
        """Zero `calls` and restart the peak at the current use."""
        self.calls.clear()
        self._memory.peak_bytes = self._memory.live_bytes

    def leaks(self) -> list[str]:
        """One line per live device allocation, handle, stream or descriptor; [] when clean."""
        lines = [
            f"device memory: {block.describe()} from cudaMalloc was never freed"
            for block in sorted(self._memory.live.by_start.values(), key=lambda b: b.serial)
        ]
        lines += [
            f"{obj.kind} {obj.address:#x} (object #{obj.serial}) was never destroyed"
            for obj in sorted(self._objects.live(), key=lambda o: o.serial)
        ]
        return lines

    # -- callbacks -----------------------------------------------------------------
    # Each function's implementation is the method "_" + its C name, with the
    # C parameter names (camelCase, as in NVIDIA's headers), returning nothing on
    # success and raising ContractViolation otherwise.

    def _callback(self, function: api.ApiFunction) -> Any:
        """A ctypes callback for `function` that counts the call, runs its implementation
        and turns any exception into an `errors` line and the library's error status."""
        implementation: Callable[..., None] = getattr(self, "_" + function.name)
        prototype = function.c_prototype()
        statuses = _STATUS[function.library]
        pointer_positions = [i for i, kind in enumerate(function.kinds) if kind == "ptr"]

        def entry(*args: Any) -> int:
            self.calls[function.name] += 1
            self._current = function.name
            try:
                values = list(args)
                for i in pointer_positions:
                    values[i] = values[i] or 0  # ctypes passes NULL as None
                with np.errstate(all="ignore"):  # a GPU overflows to inf silently; so does the fake
                    implementation(*values)
                return 0
            except ContractViolation as violation:
                status = statuses[violation.kind]
                self.errors.append(f"{function.name}: {violation} -> {api.status_name(function.name, status)}")
                return status
            except BaseException as error:  # noqa: BLE001 - nothing may raise through ctypes
                status = statuses["internal"]
                self.errors.append(
                    f"{function.name}: failed in the fake's computation ({type(error).__name__}: {error})"
                    f" -> {api.status_name(function.name, status)}"
                )
                return status

        return prototype(entry)

    # -- small helpers ---------------------------------------------------------------

    def _write_pointer(self, where: int, value: int, what: str) -> None:
        """*where = value, `where` being a host pointer the caller passed for an output."""
        self._memory.require_host(where, what)
        ctypes.c_void_p.from_address(where).value = value

    def _read_ints(self, address: int, count: int, what: str) -> tuple[int, ...]:
        self._memory.require_host(address, what)
        return tuple((ctypes.c_int32 * count).from_address(address))

    def _read_scalar(self, address: int, what: str) -> float:
        """A float scaling factor (alpha, beta) from host memory."""
        self._memory.require_host(address, what)
        return float(ctypes.c_float.from_address(address).value)

    def _view(self, address: int, layout: _Layout, what: str) -> np.ndarray:
        """A numpy view of a float tensor in device memory, after checking its whole extent."""
        if address % FLOAT_BYTES:
            raise _invalid(f"{what} {address:#x} is not aligned to {FLOAT_BYTES} bytes")
        block = self._memory.require(address, layout.extent_bytes, what)
        return np.ndarray(
            layout.dims,
            dtype=np.float32,
            buffer=block.raw,
            offset=address - block.raw_address,
            strides=tuple(s * FLOAT_BYTES for s in layout.strides),
        )

    def _tensor(self, desc: int, what: str) -> _Layout:
        layout: _Layout = self._objects.get(desc, TENSOR, what).params
        return layout

    def _cudnn_handle(self, handle: int) -> _Handle:
        return self._library_handle(handle, CUDNN_HANDLE)

    def _cublas_handle(self, handle: int) -> _Handle:
        return self._library_handle(handle, CUBLAS_HANDLE)

    def _library_handle(self, handle: int, kind: str) -> _Handle:
        """A live handle whose stream (set with Set*Stream) is live too."""
        state: _Handle = self._objects.get(handle, kind, "handle").params
        self._check_stream(state.stream, "the handle's stream")
        return state

    def _check_stream(self, stream: int, what: str = "stream") -> None:
        if stream not in _BUILTIN_STREAMS:
            self._objects.get(stream, STREAM, what)

    def _create(self, where: int, kind: str, params: Any = None) -> None:
        """Create* functions: a fresh `kind` object, its address written to *where."""
        self._write_pointer(where, self._objects.create(kind, params), "the output pointer")

    # -- CUDA runtime ----------------------------------------------------------------

    def _cudaMalloc(self, devPtr: int, size: int) -> None:
        self._memory.require_host(devPtr, "devPtr")
        if size < 0:
            raise ContractViolation("alloc", f"size {size} (negative as size_t: {size % 2**64} B)")
        if size == 0:  # success, and a NULL pointer
            self._write_pointer(devPtr, 0, "devPtr")
            return
        try:
            address = self._memory.allocate(size)
        except MemoryError:
            raise ContractViolation("alloc", f"cannot allocate {size} B") from None
        self._write_pointer(devPtr, address, "devPtr")

    def _cudaFree(self, devPtr: int) -> None:
        if devPtr:
            self._memory.free(devPtr)

    def _memcpy_sides(self, dst: int, src: int, kind: int) -> tuple[bool, bool]:
        """(dst is device, src is device) as the copy kind says."""
        if kind == MEMCPY_DEFAULT:
            return self._memory.is_device(dst), self._memory.is_device(src)
        sides = {0: (False, False), 1: (True, False), 2: (False, True), 3: (True, True)}
        if kind not in sides:
            raise _invalid(f"kind {kind} is not a cudaMemcpyKind")
        return sides[kind]

    def _check_copy_side(self, address: int, nbytes: int, on_device: bool, what: str) -> None:
        if on_device:
            self._memory.require(address, nbytes, what)
        else:
            self._memory.require_host(address, what)

    def _copy(self, dst: int, src: int, count: int, kind: int, stream: int = 0) -> None:
        self._check_stream(stream)
        if count < 0:
            raise _invalid(f"count {count} is negative")
        dst_device, src_device = self._memcpy_sides(dst, src, kind)
        if count == 0:
            return
        self._check_copy_side(dst, count, dst_device, "dst")
        self._check_copy_side(src, count, src_device, "src")
        if dst_device and src_device and dst < src + count and src < dst + count and dst != src:
            raise _invalid(f"dst [{dst:#x}, +{count} B) and src [{src:#x}, +{count} B) overlap")
        ctypes.memmove(dst, src, count)

    def _cudaMemcpy(self, dst: int, src: int, count: int, kind: int) -> None:
        self._copy(dst, src, count, kind)

    def _cudaMemcpyAsync(self, dst: int, src: int, count: int, kind: int, stream: int) -> None:
        self._copy(dst, src, count, kind, stream)

    def _cudaMemcpy2DAsync(
        self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int, stream: int
    ) -> None:
        self._check_stream(stream)
        if min(dpitch, spitch, width, height) < 0:
            raise _invalid("a negative pitch, width or height")
        if width > dpitch or width > spitch:
            raise _invalid(f"width {width} exceeds dpitch {dpitch} or spitch {spitch} (cudaErrorInvalidPitchValue)")
        dst_device, src_device = self._memcpy_sides(dst, src, kind)
        if width == 0 or height == 0:
            return
        self._check_copy_side(dst, (height - 1) * dpitch + width, dst_device, "dst")
        self._check_copy_side(src, (height - 1) * spitch + width, src_device, "src")
        for row in range(height):
            ctypes.memmove(dst + row * dpitch, src + row * spitch, width)

    def _cudaStreamCreate(self, stream: int) -> None:
        self._create(stream, STREAM, params=True)

    def _cudaStreamSynchronize(self, stream: int) -> None:
        self._check_stream(stream)

    def _cudaStreamDestroy(self, stream: int) -> None:
        self._objects.destroy(stream, STREAM, "stream")

    # -- the driver API: pyocc's generated kernels ------------------------------------------
    # PTX cannot run on the CPU; each kernel's host twin (the same expression code
    # compiled for the host, pyocc.lowering.cuda_kernels) runs in its place, once
    # the runtime has registered it.

    def register_host_kernels(self, kernels: dict[str, tuple[int, list[int]]]) -> None:
        """Kernel name -> (address of its host twin, bytes each pointer argument
        spans), so that cuLaunchKernel can run and check it."""
        self._host_kernels.update(kernels)

    def _cuModuleLoadData(self, module: int, image: int) -> None:
        self._memory.require_host(image, "image")
        ptx = ctypes.string_at(image).decode()
        if ".entry" not in ptx:
            raise _invalid("the image holds no PTX kernel (.entry)")
        self._create(module, CU_MODULE, ptx)

    def _cuModuleGetFunction(self, hfunc: int, hmod: int, name: int) -> None:
        ptx = self._objects.get(hmod, CU_MODULE, "hmod").params
        kernel = ctypes.string_at(name).decode()
        if f".entry {kernel}(" not in ptx:
            raise ContractViolation("invalid", f"the module has no kernel {kernel!r} (CUDA_ERROR_NOT_FOUND)")
        self._write_pointer(hfunc, self._objects.create(CU_FUNCTION, (hmod, kernel)), "the output pointer")

    def _cuModuleUnload(self, hmod: int) -> None:
        self._objects.destroy(hmod, CU_MODULE, "hmod")
        for obj in self._objects.live():  # a module's functions go with it
            if obj.kind == CU_FUNCTION and obj.params[0] == hmod:
                obj.destroyed = True

    def _cuLaunchKernel(self, f: int, gridDimX: int, gridDimY: int, gridDimZ: int, blockDimX: int,
                        blockDimY: int, blockDimZ: int, sharedMemBytes: int, hStream: int, kernelParams: int,
                        extra: int) -> None:
        hmod, name = self._objects.get(f, CU_FUNCTION, "f").params
        self._objects.get(hmod, CU_MODULE, "the function's module")
        self._check_stream(hStream, "hStream")
        if name not in self._host_kernels:
            raise _unsupported(f"kernel {name!r} has no host twin registered (register_host_kernels)")
        if extra or not kernelParams:
            raise _invalid("pass the arguments in kernelParams, and extra as NULL")
        if not 1 <= blockDimX * blockDimY * blockDimZ <= 1024:
            raise _invalid(f"a block of {blockDimX * blockDimY * blockDimZ} threads (1 to 1024 allowed)")
        twin, pointer_bytes = self._host_kernels[name]
        for index, nbytes in enumerate(pointer_bytes):
            argument = ctypes.c_void_p.from_address(kernelParams + 8 * index).value or 0
            pointer = ctypes.c_void_p.from_address(argument).value or 0
            self._memory.require(pointer, nbytes, f"{name} argument {index}")
        threads = gridDimX * gridDimY * gridDimZ * blockDimX * blockDimY * blockDimZ
        _TWIN(twin)(kernelParams, 0, threads)

    # -- cuDNN: handle and descriptors ---------------------------------------------------

    def _cudnnCreate(self, handle: int) -> None:
        self._create(handle, CUDNN_HANDLE, _Handle())

    def _cudnnDestroy(self, handle: int) -> None:
        self._objects.destroy(handle, CUDNN_HANDLE, "handle")

    def _cudnnSetStream(self, handle: int, stream: int) -> None:
        self._set_stream(handle, CUDNN_HANDLE, stream)

    def _set_stream(self, handle: int, kind: str, stream: int) -> None:
        """cudnnSetStream / cublasSetStream_v2: the library handle's stream."""
        state: _Handle = self._objects.get(handle, kind, "handle").params
        self._check_stream(stream)
        state.stream = stream

    def _cudnnCreateTensorDescriptor(self, desc: int) -> None:
        self._create(desc, TENSOR)

    def _cudnnDestroyTensorDescriptor(self, desc: int) -> None:
        self._objects.destroy(desc, TENSOR, "tensorDesc")

    @staticmethod
    def _check_dims(nb_dims: int, what: str) -> None:
        if nb_dims < 3:
            raise _invalid(f"nbDims {nb_dims}: {what} take at least 3 dimensions")
        if nb_dims > api.CUDNN_MAX_DIMS:
            raise _unsupported(f"nbDims {nb_dims} exceeds CUDNN_DIM_MAX ({api.CUDNN_MAX_DIMS})")

    @staticmethod
    def _check_float(data_type: int) -> None:
        if data_type != api.CUDNN_DATA_FLOAT:
            raise _unsupported(f"dataType {data_type}: the fake implements CUDNN_DATA_FLOAT (0) only")

    def _cudnnSetTensorNdDescriptor(
        self, desc: int, dataType: int, nbDims: int, dimA: int, strideA: int
    ) -> None:
        obj = self._objects.get(desc, TENSOR, "tensorDesc", must_be_set=False)
        self._check_float(dataType)
        self._check_dims(nbDims, "tensor descriptors")
        dims, strides = self._read_ints(dimA, nbDims, "dimA"), self._read_ints(strideA, nbDims, "strideA")
        if min(dims) <= 0:
            raise _invalid(f"dimA {list(dims)} has a dimension <= 0")
        if min(strides) <= 0:
            raise _invalid(f"strideA {list(strides)} has a stride <= 0")
        if math.prod(dims) >= 2**31:
            raise _unsupported(f"dimA {list(dims)} has 2 Gi elements or more")
        obj.params = _Layout(dims, strides)

    def _cudnnCreateFilterDescriptor(self, desc: int) -> None:
        self._create(desc, FILTER)

    def _cudnnDestroyFilterDescriptor(self, desc: int) -> None:
        self._objects.destroy(desc, FILTER, "filterDesc")

    def _cudnnSetFilterNdDescriptor(
        self, desc: int, dataType: int, format: int, nbDims: int, filterDimA: int
    ) -> None:
        obj = self._objects.get(desc, FILTER, "filterDesc", must_be_set=False)
        self._check_float(dataType)
        if format != api.CUDNN_TENSOR_NCHW:
            raise _unsupported(f"format {format}: the fake implements CUDNN_TENSOR_NCHW ({api.CUDNN_TENSOR_NCHW}) only")
        self._check_dims(nbDims, "filter descriptors")
        dims = self._read_ints(filterDimA, nbDims, "filterDimA")
        if min(dims) <= 0:
            raise _invalid(f"filterDimA {list(dims)} has a dimension <= 0")
        obj.params = _Filter(dims)

    def _cudnnCreateConvolutionDescriptor(self, desc: int) -> None:
        self._create(desc, CONVOLUTION, _Convolution())

    def _cudnnDestroyConvolutionDescriptor(self, desc: int) -> None:
        self._objects.destroy(desc, CONVOLUTION, "convDesc")

    def _cudnnSetConvolutionNdDescriptor(
        self, desc: int, arrayLength: int, padA: int, filterStrideA: int, dilationA: int, mode: int, computeType: int
    ) -> None:
        conv: _Convolution = self._objects.get(desc, CONVOLUTION, "convDesc").params
        if not 1 <= arrayLength <= api.CUDNN_MAX_DIMS - 2:
            raise _invalid(f"arrayLength {arrayLength} is outside 1..{api.CUDNN_MAX_DIMS - 2}")
        pads = self._read_ints(padA, arrayLength, "padA")
        strides = self._read_ints(filterStrideA, arrayLength, "filterStrideA")
        dilations = self._read_ints(dilationA, arrayLength, "dilationA")
        if min(pads) < 0 or min(strides) <= 0 or min(dilations) <= 0:
            raise _invalid(f"padA {list(pads)} < 0, filterStrideA {list(strides)} or dilationA {list(dilations)} <= 0")
        if mode not in (0, api.CUDNN_CROSS_CORRELATION):
            raise _invalid(f"mode {mode} is not a cudnnConvolutionMode_t")
        conv.pads, conv.strides, conv.dilations = pads, strides, dilations
        conv.mode, conv.compute_type, conv.is_set = mode, computeType, True

    def _cudnnSetConvolutionGroupCount(self, desc: int, groupCount: int) -> None:
        conv: _Convolution = self._objects.get(desc, CONVOLUTION, "convDesc").params
        if groupCount < 1:
            raise _invalid(f"groupCount {groupCount} < 1")
        conv.groups = groupCount

    def _cudnnSetConvolutionMathType(self, desc: int, mathType: int) -> None:
        conv: _Convolution = self._objects.get(desc, CONVOLUTION, "convDesc").params
        if mathType not in _CUDNN_MATH_PRECISION:
            raise _invalid(f"mathType {mathType} is not a cudnnMathType_t")
        conv.math_type = mathType

    def _conv_problem(
        self, x_desc: int, w_desc: int, conv_desc: int, y_desc: int, names: tuple[str, str] = ("xDesc", "yDesc")
    ) -> _ConvProblem:
        """The descriptors of a convolution, checked against each other as cuDNN does;
        `names` are what the caller's parameters for x and y are called (dxDesc and
        dyDesc for the backward-data routines)."""
        x_name, y_name = names
        x, y = self._tensor(x_desc, x_name), self._tensor(y_desc, y_name)
        w: _Filter = self._objects.get(w_desc, FILTER, "wDesc").params
        conv: _Convolution = self._objects.get(conv_desc, CONVOLUTION, "convDesc").params
        if not conv.is_set:
            raise _invalid(f"convDesc {conv_desc:#x} was never set with cudnnSetConvolutionNdDescriptor")
        spatial = len(conv.pads)
        if spatial not in (2, 3):
            raise _unsupported(f"a {spatial}-d convolution: cuDNN convolves 4-d and 5-d tensors (pad 1-d with a 1)")
        if not len(x.dims) == len(w.dims) == len(y.dims) == spatial + 2:
            raise _invalid(
                f"{x_name} has {len(x.dims)} dims, wDesc {len(w.dims)}, {y_name} {len(y.dims)}; "
                f"a {spatial}-d convolution needs {spatial + 2} each"
            )
        channels, out_channels = x.dims[1], w.dims[0]
        if w.dims[1] * conv.groups != channels or out_channels % conv.groups:
            raise _invalid(
                f"x has {channels} channels and the filter is {list(w.dims)}: inconsistent with {conv.groups} group(s)"
            )
        out = fm.conv_output_dims(x.dims[2:], w.dims[2:], conv.pads, conv.strides, conv.dilations)
        expected = (x.dims[0], out_channels, *out)
        if min(out) <= 0 or y.dims != expected:
            raise _invalid(f"{y_name} dims {list(y.dims)} differ from the convolution's output dims {list(expected)}")
        if conv.compute_type != api.CUDNN_DATA_FLOAT:
            raise _unsupported(f"computeType {conv.compute_type} with float tensors (needs CUDNN_DATA_FLOAT)")
        return _ConvProblem(x, w, y, conv)

    def _cudnnGetConvolutionForwardAlgorithm_v7(
        self,
        handle: int,
        xDesc: int,
        wDesc: int,
        convDesc: int,
        yDesc: int,
        requestedAlgoCount: int,
        returnedAlgoCount: int,
        perfResults: int,
    ) -> None:
        self._cudnn_handle(handle)
        problem = self._conv_problem(xDesc, wDesc, convDesc, yDesc)
        if requestedAlgoCount < 1:
            raise _invalid(f"requestedAlgoCount {requestedAlgoCount} < 1")
        self._write_perf(requestedAlgoCount, returnedAlgoCount, perfResults, _ALGO_RANKING, problem.workspace,
                         lambda algo: 1, problem.conv.math_type)

    def _write_perf(self, requested: int, returned: int, results: int, ranking: Sequence[tuple[int, float]],
                    needs: Callable[[int], int | None], determinism: Callable[[int], int], math_type: int) -> None:
        """Fill cudnnGet*Algorithm_v7's outputs: `ranking` with the supported
        algorithms first, each with its workspace need (`needs`) and status."""
        self._memory.require_host(returned, "returnedAlgoCount")
        self._memory.require_host(results, "perfResults")
        ordered = sorted(ranking, key=lambda entry: needs(entry[0]) is None)
        count = min(requested, len(ordered))
        for slot, (algo, time) in zip((_ConvFwdAlgoPerf * count).from_address(results), ordered):
            memory = needs(algo)
            slot.algo, slot.determinism, slot.mathType = algo, determinism(algo), math_type
            slot.status = 0 if memory is not None else _STATUS["cudnn"]["unsupported"]
            slot.time = time if memory is not None else -1.0
            slot.memory = memory or 0
        ctypes.c_int32.from_address(returned).value = count

    def _cudnnCreateActivationDescriptor(self, desc: int) -> None:
        self._create(desc, ACTIVATION)

    def _cudnnDestroyActivationDescriptor(self, desc: int) -> None:
        self._objects.destroy(desc, ACTIVATION, "activationDesc")

    @staticmethod
    def _nan_option(value: int, what: str) -> bool:
        if value not in (0, 1):
            raise _invalid(f"{what} {value} is not a cudnnNanPropagation_t")
        return value == 1

    def _cudnnSetActivationDescriptor(self, desc: int, mode: int, reluNanOpt: int, coef: float) -> None:
        obj = self._objects.get(desc, ACTIVATION, "activationDesc", must_be_set=False)
        if not 0 <= mode <= 6:
            raise _invalid(f"mode {mode} is not a cudnnActivationMode_t")
        obj.params = _Activation(mode, self._nan_option(reluNanOpt, "reluNanOpt"), coef)

    def _cudnnCreatePoolingDescriptor(self, desc: int) -> None:
        self._create(desc, POOLING)

    def _cudnnDestroyPoolingDescriptor(self, desc: int) -> None:
        self._objects.destroy(desc, POOLING, "poolingDesc")

    def _cudnnSetPoolingNdDescriptor(
        self, desc: int, mode: int, maxpoolingNanOpt: int, nbDims: int, windowDimA: int, paddingA: int, strideA: int
    ) -> None:
        obj = self._objects.get(desc, POOLING, "poolingDesc", must_be_set=False)
        if not 0 <= mode <= fm.POOLING_MAX_DETERMINISTIC:
            raise _invalid(f"mode {mode} is not a cudnnPoolingMode_t")
        if not 1 <= nbDims <= api.CUDNN_MAX_DIMS - 2:
            raise _invalid(f"nbDims {nbDims} is outside 1..{api.CUDNN_MAX_DIMS - 2} spatial dims")
        window = self._read_ints(windowDimA, nbDims, "windowDimA")
        pads = self._read_ints(paddingA, nbDims, "paddingA")
        strides = self._read_ints(strideA, nbDims, "strideA")
        if min(window) <= 0 or min(pads) < 0 or min(strides) <= 0:
            raise _invalid(f"windowDimA {list(window)} or strideA {list(strides)} <= 0, or paddingA {list(pads)} < 0")
        propagate = self._nan_option(maxpoolingNanOpt, "maxpoolingNanOpt")
        obj.params = _Pooling(mode, propagate, window, pads, strides)

    def _cudnnCreateOpTensorDescriptor(self, desc: int) -> None:
        self._create(desc, OP_TENSOR)

    def _cudnnDestroyOpTensorDescriptor(self, desc: int) -> None:
        self._objects.destroy(desc, OP_TENSOR, "opTensorDesc")

    def _cudnnSetOpTensorDescriptor(self, desc: int, opTensorOp: int, compType: int, nanOpt: int) -> None:
        obj = self._objects.get(desc, OP_TENSOR, "opTensorDesc", must_be_set=False)
        if not 0 <= opTensorOp <= 5:
            raise _invalid(f"opTensorOp {opTensorOp} is not a cudnnOpTensorOp_t")
        obj.params = _OpTensor(opTensorOp, compType, self._nan_option(nanOpt, "nanOpt"))

    def _cudnnCreateLRNDescriptor(self, desc: int) -> None:
        self._create(desc, LRN, _Lrn())  # cuDNN's defaults: n 5, alpha 1e-4, beta 0.75, k 2

    def _cudnnDestroyLRNDescriptor(self, desc: int) -> None:
        self._objects.destroy(desc, LRN, "normDesc")

    def _cudnnSetLRNDescriptor(
        self, desc: int, lrnN: int, lrnAlpha: float, lrnBeta: float, lrnK: float
    ) -> None:
        obj = self._objects.get(desc, LRN, "normDesc")
        # CUDNN_LRN_MIN_N, CUDNN_LRN_MAX_N, CUDNN_LRN_MIN_K, CUDNN_LRN_MIN_BETA
        if not 1 <= lrnN <= 16 or lrnK < 1e-5 or lrnBeta < 0.01:
            raise _invalid(f"lrnN {lrnN} outside 1..16, lrnK {lrnK} < 1e-5 or lrnBeta {lrnBeta} < 0.01")
        obj.params = _Lrn(lrnN, lrnAlpha, lrnBeta, lrnK)

    # -- cuDNN: computing --------------------------------------------------------------

    def _operand(self, desc: int, address: int, what: str) -> tuple[_Layout, np.ndarray]:
        layout = self._tensor(desc, what + "Desc")
        return layout, self._view(address, layout, what)

    @staticmethod
    def _same_dims(a: _Layout, b: _Layout, a_name: str, b_name: str) -> None:
        if a.dims != b.dims:
            raise _invalid(f"{a_name} dims {list(a.dims)} differ from {b_name} dims {list(b.dims)}")

    def _note_poison(self, value: np.ndarray, what: str) -> None:
        """Record a read of device memory that still holds cudaMalloc's poison."""
        if value.dtype != np.float32:
            return
        count = int(np.count_nonzero(value.view(np.uint32) == _POISON_WORD))
        if count:
            self.uninitialised_reads.append(
                f"{self._current}: {what} reads {count} of {value.size} elements never written since cudaMalloc"
            )

    def _store(self, out: np.ndarray, result: np.ndarray, alpha: float, beta: float) -> None:
        """out = alpha * result + beta * out; out is not read when beta == 0."""
        scaled = result if alpha == 1.0 else np.float32(alpha) * result
        if beta != 0.0:
            self._note_poison(out, "the destination (beta != 0)")
            scaled = scaled + np.float32(beta) * out
        out[...] = scaled

    def _outputs_clear(
        self, outputs: dict[str, np.ndarray], inputs: dict[str, np.ndarray], in_place: Sequence[tuple[str, str]] = ()
    ) -> None:
        """No output may overlap itself or an input, except the (output, input) pairs
        in `in_place` when both are exactly the same tensor."""
        for in_name, value in inputs.items():
            if in_name != "workSpace":
                self._note_poison(value, in_name)
        for out_name, out in outputs.items():
            if not _elements_distinct(out):
                raise _invalid(f"{out_name}'s strides make elements overlap")
            for in_name, value in inputs.items():
                if (out_name, in_name) in in_place and _same_tensor(out, value):
                    continue
                if _overlap(out, value):
                    allowed = [i for o, i in in_place if o == out_name]
                    note = f" (only exactly {', '.join(allowed)} in place is allowed)" if allowed else ""
                    raise _invalid(f"output {out_name} overlaps input {in_name} in device memory{note}")

    def _cudnnConvolutionForward(
        self,
        handle: int,
        alpha: int,
        xDesc: int,
        x: int,
        wDesc: int,
        w: int,
        convDesc: int,
        algo: int,
        workSpace: int,
        workSpaceSizeInBytes: int,
        beta: int,
        yDesc: int,
        y: int,
    ) -> None:
        self._cudnn_handle(handle)
        problem = self._conv_problem(xDesc, wDesc, convDesc, yDesc)
        needed = self._check_algo(problem.workspace, "cudnnConvolutionFwdAlgo_t", algo, workSpace,
                                  workSpaceSizeInBytes)
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        x_view, w_view = self._view(x, problem.x, "x"), self._view(w, problem.w.layout, "w")
        y_view = self._view(y, problem.y, "y")
        self._outputs_clear({"y": y_view}, {"x": x_view, "w": w_view, **self._workspace(workSpace, needed)})
        result = self._convolve(problem, x_view, w_view)
        self._scribble_workspace(workSpace, needed)
        self._store(y_view, result, scale, blend)

    def _check_algo(self, needs: Callable[[int], int | None], algo_type: str, algo: int, workspace: int,
                    workspace_size: int) -> int:
        """The workspace bytes `algo` needs, after checking it is an algorithm
        of `algo_type` that supports the problem (`needs`) and fits the
        workspace the caller gave."""
        count = {"cudnnConvolutionFwdAlgo_t": api.CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                 "cudnnConvolutionBwdDataAlgo_t": api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT}[algo_type]
        if not 0 <= algo < count:
            raise _invalid(f"algo {algo} is not a {algo_type}")
        needed = needs(algo)
        if needed is None:
            raise _unsupported(f"algo {algo} does not support this convolution (its perf status says so)")
        if needed > workspace_size:
            raise _invalid(f"algo {algo} needs {needed} B of workspace; workSpaceSizeInBytes is {workspace_size}")
        if needed and not workspace:
            raise _invalid(f"algo {algo} needs {needed} B of workspace; workSpace is NULL")
        if workspace and workspace_size > 0:
            self._memory.require(workspace, workspace_size, "workSpace")
        return needed

    def _workspace(self, address: int, needed: int) -> dict[str, np.ndarray]:
        """The part of the workspace an algorithm uses (`needed` bytes), as an
        input for the overlap checks."""
        if not address or needed < FLOAT_BYTES or address % FLOAT_BYTES:
            return {}
        return {"workSpace": self._view(address, _Layout((needed // FLOAT_BYTES,), (1,)), "workSpace")}

    @staticmethod
    def _scribble_workspace(address: int, needed: int) -> None:
        """The algorithm's scratch writes: poison the workspace it used, as a real one leaves garbage."""
        if address and needed:
            ctypes.memset(address, POISON_BYTE, min(needed, 1 << 20))

    @staticmethod
    def _convolve(problem: _ConvProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        conv = problem.conv
        precision = _CUDNN_MATH_PRECISION[conv.math_type]
        return fm.convolution(
            fm.reduce_precision(x, precision),
            fm.reduce_precision(w, precision),
            pads=conv.pads,
            strides=conv.strides,
            dilations=conv.dilations,
            groups=conv.groups,
            cross_correlation=conv.mode == api.CUDNN_CROSS_CORRELATION,
        )

    def _cudnnConvolutionBiasActivationForward(
        self,
        handle: int,
        alpha1: int,
        xDesc: int,
        x: int,
        wDesc: int,
        w: int,
        convDesc: int,
        algo: int,
        workSpace: int,
        workSpaceSizeInBytes: int,
        alpha2: int,
        zDesc: int,
        z: int,
        biasDesc: int,
        bias: int,
        activationDesc: int,
        yDesc: int,
        y: int,
    ) -> None:
        self._cudnn_handle(handle)
        problem = self._conv_problem(xDesc, wDesc, convDesc, yDesc)
        act: _Activation = self._objects.get(activationDesc, ACTIVATION, "activationDesc").params
        if act.mode not in (fm.ACTIVATION_RELU, fm.ACTIVATION_IDENTITY):
            raise _unsupported(f"activation mode {act.mode}: only RELU and IDENTITY are supported")
        if act.mode == fm.ACTIVATION_IDENTITY and algo != _ALGO_PRECOMP_GEMM:
            raise _unsupported(f"IDENTITY activation needs algo IMPLICIT_PRECOMP_GEMM (1), not {algo}")
        needed = self._check_algo(problem.workspace, "cudnnConvolutionFwdAlgo_t", algo, workSpace,
                                  workSpaceSizeInBytes)
        z_layout, bias_layout = self._tensor(zDesc, "zDesc"), self._tensor(biasDesc, "biasDesc")
        self._same_dims(z_layout, problem.y, "zDesc", "yDesc")
        bias_dims = (1, problem.y.dims[1]) + (1,) * (len(problem.y.dims) - 2)
        if bias_layout.dims != bias_dims:
            raise _invalid(f"biasDesc dims {list(bias_layout.dims)} are not {list(bias_dims)}")
        scale, z_scale = self._read_scalar(alpha1, "alpha1"), self._read_scalar(alpha2, "alpha2")
        x_view, w_view = self._view(x, problem.x, "x"), self._view(w, problem.w.layout, "w")
        y_view, bias_view = self._view(y, problem.y, "y"), self._view(bias, bias_layout, "bias")
        inputs = {"x": x_view, "w": w_view, "bias": bias_view, **self._workspace(workSpace, needed)}
        if z_scale != 0.0:
            inputs["z"] = self._view(z, z_layout, "z")
        self._outputs_clear({"y": y_view}, inputs, in_place=[("y", "z")])
        result = np.float32(scale) * self._convolve(problem, x_view, w_view)
        if z_scale != 0.0:
            result = result + np.float32(z_scale) * inputs["z"]
        result = fm.activation(result + bias_view, act.mode, act.coef, act.propagate_nan)
        self._scribble_workspace(workSpace, needed)
        y_view[...] = result

    def _cudnnAddTensor(
        self, handle: int, alpha: int, aDesc: int, A: int, beta: int, cDesc: int, C: int
    ) -> None:
        self._cudnn_handle(handle)
        a_layout, a_view = self._operand(aDesc, A, "A")
        c_layout, c_view = self._operand(cDesc, C, "C")
        _check_at_most_5_dims(c_layout, "cDesc")
        _check_broadcast(a_layout, c_layout, "A", "C")
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        self._outputs_clear({"C": c_view}, {"A": a_view}, in_place=[("C", "A")])
        self._store(c_view, np.broadcast_to(a_view, c_layout.dims), scale, blend)

    def _cudnnOpTensor(
        self,
        handle: int,
        opTensorDesc: int,
        alpha1: int,
        aDesc: int,
        A: int,
        alpha2: int,
        bDesc: int,
        B: int,
        beta: int,
        cDesc: int,
        C: int,
    ) -> None:
        self._cudnn_handle(handle)
        op: _OpTensor = self._objects.get(opTensorDesc, OP_TENSOR, "opTensorDesc").params
        if op.op not in api.OP_TENSOR_OPS.values():
            raise _unsupported(f"opTensorOp {op.op}: the fake implements add, mul, min and max")
        if op.compute_type != api.CUDNN_DATA_FLOAT:
            raise _invalid(f"opTensorCompType {op.compute_type} with float tensors (needs CUDNN_DATA_FLOAT)")
        a_layout, a_view = self._operand(aDesc, A, "A")
        b_layout, b_view = self._operand(bDesc, B, "B")
        c_layout, c_view = self._operand(cDesc, C, "C")
        self._same_dims(a_layout, c_layout, "aDesc", "cDesc")
        _check_at_most_5_dims(c_layout, "cDesc")
        _check_broadcast(b_layout, c_layout, "B", "C")
        scale_a, scale_b = self._read_scalar(alpha1, "alpha1"), self._read_scalar(alpha2, "alpha2")
        blend = self._read_scalar(beta, "beta")
        self._outputs_clear({"C": c_view}, {"A": a_view, "B": b_view}, in_place=[("C", "A")])
        result = fm.op_tensor(op.op, np.float32(scale_a) * a_view, np.float32(scale_b) * b_view, op.propagate_nan)
        self._store(c_view, result, 1.0, blend)

    def _cudnnActivationForward(
        self, handle: int, activationDesc: int, alpha: int, xDesc: int, x: int, beta: int, yDesc: int, y: int
    ) -> None:
        self._cudnn_handle(handle)
        act: _Activation = self._objects.get(activationDesc, ACTIVATION, "activationDesc").params
        if act.mode == fm.ACTIVATION_IDENTITY:
            raise _invalid("CUDNN_ACTIVATION_IDENTITY does not work with cudnnActivationForward")
        if act.mode not in (0, 1, 2, 3, 4):
            raise _unsupported(f"activation mode {act.mode}: the fake implements modes 0..4")
        x_layout, x_view = self._operand(xDesc, x, "x")
        y_layout, y_view = self._operand(yDesc, y, "y")
        self._same_dims(x_layout, y_layout, "xDesc", "yDesc")
        self._outputs_clear({"y": y_view}, {"x": x_view}, in_place=[("y", "x")])
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        self._store(y_view, fm.activation(x_view, act.mode, act.coef, act.propagate_nan), scale, blend)

    def _cudnnPoolingForward(
        self, handle: int, poolingDesc: int, alpha: int, xDesc: int, x: int, beta: int, yDesc: int, y: int
    ) -> None:
        self._cudnn_handle(handle)
        pool: _Pooling = self._objects.get(poolingDesc, POOLING, "poolingDesc").params
        x_layout, x_view = self._operand(xDesc, x, "x")
        y_layout, y_view = self._operand(yDesc, y, "y")
        rank = len(pool.window) + 2
        if rank not in (4, 5):
            raise _unsupported(f"{rank - 2}-d pooling: only 2 and 3 spatial dimensions are allowed")
        if len(x_layout.dims) != rank or len(y_layout.dims) != rank:
            raise _invalid(
                f"xDesc has {len(x_layout.dims)} dims and yDesc {len(y_layout.dims)}; "
                f"a {rank - 2}-d pooling needs {rank} each"
            )
        if x_layout.dims[:2] != y_layout.dims[:2]:
            raise _invalid(f"n, c of x {list(x_layout.dims[:2])} and y {list(y_layout.dims[:2])} differ")
        self._outputs_clear({"y": y_view}, {"x": x_view})
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        result = fm.pooling(
            x_view,
            mode=pool.mode,
            window=pool.window,
            pads=pool.pads,
            strides=pool.strides,
            out_spatial=y_layout.dims[2:],
            propagate_nan=pool.propagate_nan,
        )
        self._store(y_view, result, scale, blend)

    def _cudnnSoftmaxForward(
        self, handle: int, algo: int, mode: int, alpha: int, xDesc: int, x: int, beta: int, yDesc: int, y: int
    ) -> None:
        self._cudnn_handle(handle)
        if algo not in (fm.SOFTMAX_FAST, api.SOFTMAX_ACCURATE, api.SOFTMAX_LOG):
            raise _invalid(f"algo {algo} is not a cudnnSoftmaxAlgorithm_t")
        if mode not in (fm.SOFTMAX_MODE_INSTANCE, api.SOFTMAX_MODE_CHANNEL):
            raise _invalid(f"mode {mode} is not a cudnnSoftmaxMode_t")
        x_layout, x_view = self._operand(xDesc, x, "x")
        y_layout, y_view = self._operand(yDesc, y, "y")
        self._same_dims(x_layout, y_layout, "xDesc", "yDesc")
        for layout, name in ((x_layout, "xDesc"), (y_layout, "yDesc")):
            if len(layout.dims) > 5 and layout.strides[2:] != _Layout.packed(layout.dims[2:]).strides:
                raise _unsupported(f"{name}: tensors of more than 5 dims must be packed in their spatial dims")
        self._outputs_clear({"y": y_view}, {"x": x_view}, in_place=[("y", "x")])
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        self._store(y_view, fm.softmax(x_view, algo=algo, mode=mode), scale, blend)

    def _cudnnLRNCrossChannelForward(
        self, handle: int, normDesc: int, lrnMode: int, alpha: int, xDesc: int, x: int, beta: int, yDesc: int, y: int
    ) -> None:
        self._cudnn_handle(handle)
        lrn: _Lrn = self._objects.get(normDesc, LRN, "normDesc").params
        if lrnMode != api.LRN_CROSS_CHANNEL_DIM1:
            raise _invalid(f"lrnMode {lrnMode} is not CUDNN_LRN_CROSS_CHANNEL_DIM1")
        x_layout, x_view = self._operand(xDesc, x, "x")
        y_layout, y_view = self._operand(yDesc, y, "y")
        self._same_dims(x_layout, y_layout, "xDesc", "yDesc")
        if len(x_layout.dims) not in (4, 5):
            raise _unsupported(f"{len(x_layout.dims)}-d tensors (LRN takes 4-d or 5-d ones)")
        self._outputs_clear({"y": y_view}, {"x": x_view})
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        result = fm.lrn_cross_channel(x_view, size=lrn.size, alpha=lrn.alpha, beta=lrn.beta, k=lrn.k)
        self._store(y_view, result, scale, blend)

    def _cudnnTransformTensor(
        self, handle: int, alpha: int, xDesc: int, x: int, beta: int, yDesc: int, y: int
    ) -> None:
        self._cudnn_handle(handle)
        x_layout, x_view = self._operand(xDesc, x, "x")
        y_layout, y_view = self._operand(yDesc, y, "y")
        self._same_dims(x_layout, y_layout, "xDesc", "yDesc")
        self._outputs_clear({"y": y_view}, {"x": x_view})
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        self._store(y_view, x_view, scale, blend)

    def _cudnnBatchNormalizationForwardInference(
        self,
        handle: int,
        mode: int,
        alpha: int,
        beta: int,
        xDesc: int,
        x: int,
        yDesc: int,
        y: int,
        bnScaleBiasMeanVarDesc: int,
        bnScale: int,
        bnBias: int,
        estimatedMean: int,
        estimatedVariance: int,
        epsilon: float,
    ) -> None:
        self._cudnn_handle(handle)
        if mode not in (0, api.BATCHNORM_SPATIAL, 2):
            raise _invalid(f"mode {mode} is not a cudnnBatchNormMode_t")
        if epsilon < 0:  # CUDNN_BN_MIN_EPSILON is 0
            raise _invalid(f"epsilon {epsilon} < 0")
        x_layout, x_view = self._operand(xDesc, x, "x")
        y_layout, y_view = self._operand(yDesc, y, "y")
        self._same_dims(x_layout, y_layout, "xDesc", "yDesc")
        params = self._tensor(bnScaleBiasMeanVarDesc, "bnScaleBiasMeanVarDesc")
        spatial = x_layout.dims[2:] if mode == 0 else (1,) * (len(x_layout.dims) - 2)
        expected = (1, x_layout.dims[1], *spatial)
        if params.dims != expected:
            raise _invalid(f"bnScaleBiasMeanVarDesc dims {list(params.dims)} are not {list(expected)} for mode {mode}")
        names = ("bnScale", "bnBias", "estimatedMean", "estimatedVariance")
        pointers = (bnScale, bnBias, estimatedMean, estimatedVariance)
        vectors = {name: self._view(pointer, params, name) for name, pointer in zip(names, pointers)}
        self._outputs_clear({"y": y_view}, {"x": x_view, **vectors}, in_place=[("y", "x")])
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        result = fm.batch_norm_inference(x_view, *vectors.values(), epsilon)
        self._store(y_view, result, scale, blend)

    # -- cuDNN: backward data (what ONNX calls ConvTranspose) ----------------------------

    def _cudnnGetConvolutionBackwardDataAlgorithm_v7(
        self,
        handle: int,
        wDesc: int,
        dyDesc: int,
        convDesc: int,
        dxDesc: int,
        requestedAlgoCount: int,
        returnedAlgoCount: int,
        perfResults: int,
    ) -> None:
        """Ranked backward-data algorithms (cudnnConvolutionBwdDataAlgoPerf_t has the
        forward perf struct's layout): supported ones first, fastest first."""
        self._cudnn_handle(handle)
        problem = self._conv_problem(dxDesc, wDesc, convDesc, dyDesc, names=("dxDesc", "dyDesc"))
        if requestedAlgoCount < 1:
            raise _invalid(f"requestedAlgoCount {requestedAlgoCount} < 1")
        # ALGO_0 adds with atomics: CUDNN_NON_DETERMINISTIC (0)
        self._write_perf(requestedAlgoCount, returnedAlgoCount, perfResults, _BWD_DATA_ALGO_RANKING,
                         lambda algo: _bwd_data_workspace(problem, algo),
                         lambda algo: int(algo != api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_0), problem.conv.math_type)

    def _cudnnConvolutionBackwardData(
        self,
        handle: int,
        alpha: int,
        wDesc: int,
        w: int,
        dyDesc: int,
        dy: int,
        convDesc: int,
        algo: int,
        workSpace: int,
        workSpaceSizeInBytes: int,
        beta: int,
        dxDesc: int,
        dx: int,
    ) -> None:
        """dx = alpha * (the gradient of convolving dx-shaped data with w, given dy)
        + beta * dx. The descriptors must describe a forward convolution from dx to
        dy; dx is not read when beta == 0 and may overlap neither w nor dy."""
        self._cudnn_handle(handle)
        problem = self._conv_problem(dxDesc, wDesc, convDesc, dyDesc, names=("dxDesc", "dyDesc"))
        needed = self._check_algo(lambda a: _bwd_data_workspace(problem, a), "cudnnConvolutionBwdDataAlgo_t", algo,
                                  workSpace, workSpaceSizeInBytes)
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        w_view, dy_view = self._view(w, problem.w.layout, "w"), self._view(dy, problem.y, "dy")
        dx_view = self._view(dx, problem.x, "dx")
        self._outputs_clear({"dx": dx_view}, {"w": w_view, "dy": dy_view, **self._workspace(workSpace, needed)})
        conv = problem.conv
        precision = _CUDNN_MATH_PRECISION[conv.math_type]
        result = fm.convolution_backward_data(
            fm.reduce_precision(dy_view, precision),
            fm.reduce_precision(w_view, precision),
            dx_spatial=problem.x.dims[2:],
            pads=conv.pads,
            strides=conv.strides,
            dilations=conv.dilations,
            groups=conv.groups,
            cross_correlation=conv.mode == api.CUDNN_CROSS_CORRELATION,
        )
        self._scribble_workspace(workSpace, needed)
        self._store(dx_view, result, scale, blend)

    # -- cuBLAS ------------------------------------------------------------------------

    def _cublasCreate_v2(self, handle: int) -> None:
        self._create(handle, CUBLAS_HANDLE, _Handle())

    def _cublasDestroy_v2(self, handle: int) -> None:
        self._objects.destroy(handle, CUBLAS_HANDLE, "handle")

    def _cublasSetStream_v2(self, handle: int, stream: int) -> None:
        self._set_stream(handle, CUBLAS_HANDLE, stream)

    def _cublasSetMathMode(self, handle: int, mode: int) -> None:
        state = self._cublas_handle(handle)
        # the low bits are the mode; CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (16) may be or-ed in
        if mode & ~16 not in _CUBLAS_MATH_PRECISION:
            raise _invalid(f"mode {mode} is not a cublasMath_t")
        state.math_mode = mode & ~16

    def _cublasSgemm_v2(
        self,
        handle: int,
        transa: int,
        transb: int,
        m: int,
        n: int,
        k: int,
        alpha: int,
        A: int,
        lda: int,
        B: int,
        ldb: int,
        beta: int,
        C: int,
        ldc: int,
    ) -> None:
        self._gemm(handle, transa, transb, m, n, k, alpha, (A, lda, 0), (B, ldb, 0), beta, (C, ldc, 0), 1)

    def _cublasSgemmStridedBatched(
        self,
        handle: int,
        transa: int,
        transb: int,
        m: int,
        n: int,
        k: int,
        alpha: int,
        A: int,
        lda: int,
        strideA: int,
        B: int,
        ldb: int,
        strideB: int,
        beta: int,
        C: int,
        ldc: int,
        strideC: int,
        batchCount: int,
    ) -> None:
        self._gemm(
            handle, transa, transb, m, n, k, alpha,
            (A, lda, strideA), (B, ldb, strideB), beta, (C, ldc, strideC), batchCount,
        )

    def _gemm(
        self,
        handle: int,
        transa: int,
        transb: int,
        m: int,
        n: int,
        k: int,
        alpha: int,
        a: tuple[int, int, int],
        b: tuple[int, int, int],
        beta: int,
        c: tuple[int, int, int],
        batch: int,
    ) -> None:
        """C_i (m x n) = alpha op(A_i) op(B_i) + beta C_i for i < batch, column-major,
        each operand given as (pointer, leading dimension, batch stride in elements)."""
        state = self._cublas_handle(handle)
        if transa not in (0, 1, 2) or transb not in (0, 1, 2):
            raise _invalid(f"transa {transa} or transb {transb} is not a cublasOperation_t")
        if min(m, n, k, batch) < 0:
            raise _invalid(f"m {m}, n {n}, k {k} or batchCount {batch} is negative")
        a_rows, a_cols = (m, k) if transa == api.CUBLAS_OP_N else (k, m)
        b_rows, b_cols = (k, n) if transb == api.CUBLAS_OP_N else (n, k)
        for name, rows, ld in (("lda", a_rows, a[1]), ("ldb", b_rows, b[1]), ("ldc", m, c[1])):
            if ld < max(1, rows):
                raise _invalid(f"{name} {ld} < max(1, {rows}), the rows of the stored matrix")
        if min(a[2], b[2], c[2]) < 0:
            raise _invalid("a negative batch stride")
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        if m == 0 or n == 0 or batch == 0:
            return
        c_view = self._matrices(c, m, n, batch, "C")
        inputs: dict[str, np.ndarray] = {}
        if scale != 0.0 and k > 0:
            inputs = {
                "A": self._matrices(a, a_rows, a_cols, batch, "A"),
                "B": self._matrices(b, b_rows, b_cols, batch, "B"),
            }
        self._outputs_clear({"C": c_view}, inputs)
        if not inputs:
            self._store(c_view, np.zeros(c_view.shape, np.float32), 1.0, blend)
            return
        precision = _CUBLAS_MATH_PRECISION[state.math_mode]
        op_a = fm.reduce_precision(inputs["A"], precision)
        op_b = fm.reduce_precision(inputs["B"], precision)
        op_a = op_a if transa == api.CUBLAS_OP_N else op_a.transpose(0, 2, 1)
        op_b = op_b if transb == api.CUBLAS_OP_N else op_b.transpose(0, 2, 1)
        self._store(c_view, np.matmul(op_a, op_b), scale, blend)

    def _matrices(self, operand: tuple[int, int, int], rows: int, cols: int, batch: int, what: str) -> np.ndarray:
        """A (batch, rows, cols) view of column-major matrices with leading dimension ld."""
        address, ld, stride = operand
        return self._view(address, _Layout((batch, rows, cols), (stride, 1, ld)), what)


# -- overlap checks ----------------------------------------------------------------


def _check_at_most_5_dims(layout: _Layout, what: str) -> None:
    """cudnnAddTensor and cudnnOpTensor support tensors of up to 5 dims."""
    if len(layout.dims) > 5:
        raise _unsupported(f"{what} has {len(layout.dims)} dims; this routine supports at most 5")


def _check_broadcast(source: _Layout, target: _Layout, source_name: str, target_name: str) -> None:
    """Each dim of `source` must equal `target`'s or be 1 (same rank)."""
    if len(source.dims) != len(target.dims) or any(
        s not in (1, t) for s, t in zip(source.dims, target.dims)
    ):
        raise _invalid(
            f"{source_name} dims {list(source.dims)} do not broadcast to {target_name} dims {list(target.dims)} "
            "(each must be equal or 1)"
        )


def _byte_range(a: np.ndarray) -> tuple[int, int]:
    low, high = np.lib.array_utils.byte_bounds(a)  # numpy >= 2 (pyproject.toml)
    return int(low), int(high)


def _element_addresses(a: np.ndarray) -> np.ndarray:
    """The start address of every element (all float32, 4-byte aligned), as int64."""
    base = int(a.__array_interface__["data"][0])
    addresses = np.full((1,) * a.ndim, base, dtype=np.int64)
    for axis, (dim, stride) in enumerate(zip(a.shape, a.strides)):
        shape = [1] * a.ndim
        shape[axis] = dim
        addresses = addresses + (np.arange(dim, dtype=np.int64) * stride).reshape(shape)
    return addresses.ravel()


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a and b share an element (exactly, not just their address ranges:
    interleaved slices of one buffer, like channel slices of a concatenation, do not)."""
    if a.size == 0 or b.size == 0:
        return False
    a_low, a_high = _byte_range(a)
    b_low, b_high = _byte_range(b)
    if a_high <= b_low or b_high <= a_low:
        return False
    if a.dtype.itemsize != FLOAT_BYTES or b.dtype.itemsize != FLOAT_BYTES:
        return True
    return bool(np.isin(_element_addresses(a), _element_addresses(b)).any())


def _same_tensor(a: np.ndarray, b: np.ndarray) -> bool:
    """The same elements in the same order: an in-place operation is well defined."""
    return (
        a.shape == b.shape
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
        and all(sa == sb for sa, sb, d in zip(a.strides, b.strides, a.shape) if d > 1)
    )


def _elements_distinct(a: np.ndarray) -> bool:
    """No two elements of `a` share memory: sorted by stride, each dim must step past
    everything the smaller ones span (else compare every element's address)."""
    spans = sorted((stride, dim) for stride, dim in zip(a.strides, a.shape) if dim > 1)
    covered = FLOAT_BYTES
    for stride, dim in spans:
        if stride < covered:
            return bool(np.unique(_element_addresses(a)).size == a.size)
        covered = stride * dim
    return True

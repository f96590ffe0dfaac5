"""The CPU stand-in's common ground: device memory, handles and descriptors,
the status codes, the ctypes callbacks every library function goes through,
and the checks the libraries share (views of device tensors, overlaps, the
beta = 0 rule). pyocc.testing.fake_cuda puts the libraries on top of it.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pyocc.runtime import cuda_api as api

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


@dataclass
class _Handle:
    """cuDNN or cuBLAS handle state."""

    stream: int = 0
    math_mode: int = 0


# -- the fake ----------------------------------------------------------------------


class FakeCudaBase:
    """What every library of the stand-in shares: its state (device memory,
    objects, call counts, errors), the public interface and the callbacks.
    The libraries are mixins on it (runtime.CudaRuntime, cudnn.Cudnn,
    cublas.Cublas), and pyocc.testing.fake_cuda.FakeCuda is all of them."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.errors: list[str] = []
        #: one line per call that read never-written device memory (0xFF poison); such
        #: calls succeed, as on a GPU, but their results are NaN: this says where it came from
        self.uninitialised_reads: list[str] = []
        #: cudnnConvolutionFwdAlgo_t -> the forward convolutions that ran with it
        self.forward_algorithms: collections.Counter[int] = collections.Counter()
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
        """Zero `calls` and `forward_algorithms`, and restart the peak at the current use."""
        self.calls.clear()
        self.forward_algorithms.clear()
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

    def _set_stream(self, handle: int, kind: str, stream: int) -> None:
        """cudnnSetStream / cublasSetStream_v2: the library handle's stream."""
        state: _Handle = self._objects.get(handle, kind, "handle").params
        self._check_stream(stream)
        state.stream = stream

    def _create(self, where: int, kind: str, params: Any = None) -> None:
        """Create* functions: a fresh `kind` object, its address written to *where."""
        self._write_pointer(where, self._objects.create(kind, params), "the output pointer")

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

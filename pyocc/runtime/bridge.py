"""The ctypes bridge between generated code and the host kernels.

Generated code (see pyocc.lowering.convert_dnn_to_llvm for the ABI) calls one
C callback, `kernel(site, buffers)`, for every site without a native kernel. `KernelBridge` implements it from the
model's JSON site table: it wraps each data pointer as a numpy array of the
site's shape and dtype and calls `host_kernels.<kernel>(*inputs, out=...,
**kwargs)`. `NativeModel` drives a compiled model through the ABI (JIT and
AOT alike): it checks inputs, fills the pointer arrays, runs, and reads the
allocation counters. `pack_weight_pool` builds the constant pool.

Like all of pyocc.runtime, this module never imports xDSL.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pyocc.errors import PyoccError
from pyocc.runtime import host_kernels as hk

#: void kernel(int64_t site, void **buffers)
KERNEL_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p))
_INIT = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_RUN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_DESTROY = ctypes.CFUNCTYPE(None)

ABI_VERSION = 1
STATE_SLOTS = 4  # allocator calls, free calls, bytes allocated now, peak bytes


def aligned_bytes(nbytes: int, alignment: int = 64) -> np.ndarray:
    """A zeroed uint8 array of `nbytes` whose data pointer is `alignment`-aligned."""
    raw = np.zeros(nbytes + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + nbytes]


def _view(address: int | None, spec: dict[str, Any]) -> np.ndarray:
    """The numpy array of shape/dtype `spec` whose data lives at `address`."""
    dtype = np.dtype(spec["dtype"])
    shape = tuple(spec["shape"])
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0:
        return np.empty(shape, dtype)
    if not address:
        raise PyoccError(f"generated code passed a NULL buffer for a {spec['dtype']}{list(shape)} tensor")
    memory = (ctypes.c_char * nbytes).from_address(address)
    return np.frombuffer(memory, dtype=dtype).reshape(shape)


def _slot_count(site: dict[str, Any]) -> int:
    """How many pointers the generated code passes to a site: one per input
    (absent optional ones included, variadic ones expanded) and output."""
    inputs = sum(len(spec) if isinstance(spec, list) else 1 for spec in site["inputs"])
    return inputs + len(site["outputs"])


class KernelBridge:
    """The C callback of one model: site number -> host-kernel call.

    A Python exception cannot cross the C frames of the generated code, so
    the callback records the first one, skips every later site of that run,
    and `raise_pending()` re-raises it once `run` has returned.

    Wrapping pointers as numpy arrays costs more than many small kernels, so
    each site remembers the addresses of its last call and the arguments it
    built from them; a call with the same addresses (the weights always, the
    pool and the inputs usually) reuses them. An array over memory that was
    freed is never used: it is reused only when the site gets exactly that
    address again, which then holds the site's live buffer of the same shape.
    """

    def __init__(self, sites: list[dict[str, Any]]):
        self.sites = sites
        self.kernels: list[Callable[..., None]] = []
        for site in sites:
            kernel = getattr(hk, site["kernel"], None)
            if kernel is None or not callable(kernel):
                raise PyoccError(f"site {site['site']} ({site['op']}): no host kernel named '{site['kernel']}'")
            self.kernels.append(kernel)
        self.slot_counts = [_slot_count(site) for site in sites]
        # per site: (addresses, positional args, keyword args) of its last call
        self._last: list[tuple[list[int | None], list[Any], dict[str, Any]] | None] = [None] * len(sites)
        self.error: BaseException | None = None
        self.error_site = -1
        # ctypes frees the trampoline with the CFUNCTYPE object: keep both alive
        self.callback = KERNEL_CALLBACK(self._dispatch)
        self.table = (ctypes.c_void_p * 1)(ctypes.cast(self.callback, ctypes.c_void_p).value)

    def _dispatch(self, site: int, buffers: Any) -> None:
        if self.error is not None:
            return
        try:
            addresses = buffers[:self.slot_counts[site]]
            last = self._last[site]
            if last is None or last[0] != addresses:
                last = self._last[site] = (addresses, *self._arguments(site, addresses))
            self.kernels[site](*last[1], **last[2])
        except BaseException as e:  # noqa: BLE001 - re-raised by raise_pending
            self.error, self.error_site = e, site

    def _arguments(self, site_index: int, addresses: list[int | None]) -> tuple[list[Any], dict[str, Any]]:
        """The kernel's positional and keyword arguments for these buffer addresses."""
        site = self.sites[site_index]
        slot = 0
        inputs: list[Any] = []
        for spec in site["inputs"]:
            if spec is None:
                inputs.append(None)
                slot += 1
            elif isinstance(spec, list):
                inputs.append([_view(addresses[slot + i], s) for i, s in enumerate(spec)])
                slot += len(spec)
            else:
                inputs.append(_view(addresses[slot], spec))
                slot += 1
        outs = [_view(addresses[slot + i], s) for i, s in enumerate(site["outputs"])]
        # trailing absent optionals are simply not passed (the kernel's default)
        while inputs and inputs[-1] is None:
            inputs.pop()
        destination = outs if site["out_keyword"] == "outs" else outs[0]
        return inputs, {site["out_keyword"]: destination, **site["kwargs"]}

    def raise_pending(self) -> None:
        """Re-raise the first kernel failure of the last run, naming the site."""
        error, self.error = self.error, None
        if error is not None:
            site = self.sites[self.error_site]
            raise PyoccError(f"site {site['site']} ({site['op']}, kernel '{site['kernel']}') failed: "
                             f"{type(error).__name__}: {error}") from error


#: a weight is copied into the pool by pieces of this many bytes at most, and
#: `copied` told after each: a weight mapped from a file (VGG-19's fc6, 411 MB)
#: is then never resident twice, only one piece of it besides the pool
WEIGHT_COPY_BYTES = 32 << 20


def output_channel_blocks(weight: np.ndarray, block: int) -> np.ndarray:
    """A weight [outs, ...] in the layout [outs / block, ..., block]: for
    each block of `block` output channels, every other index in order, the
    block's channels innermost (a convolution's direct kernel then loads one
    tap's weights of a block as whole vectors; pyocc.lowering.native.conv)."""
    outs = weight.shape[0]
    if outs % block:
        raise PyoccError(f"a weight of {outs} output channels has no layout in blocks of {block}")
    blocked = weight.reshape(outs // block, block, *weight.shape[1:])
    return np.ascontiguousarray(np.moveaxis(blocked, 1, -1))


#: the layouts a native kernel may ask a weight in (an entry's "pack": {"layout": name, ...arguments})
WEIGHT_LAYOUTS: dict[str, Callable[..., np.ndarray]] = {"output_channel_blocks": output_channel_blocks}


def pack_weight_pool(meta: dict[str, Any], read_resource: Callable[[str, dict[str, Any]], bytes],
                     copied: Callable[[str, int], None] | None = None) -> np.ndarray:
    """The constant pool of a model: every weight at its planned offset.

    Splats are filled with np.full, inline values come from the table, and
    `read_resource(key, entry)` supplies the bytes of a `dense_resource` blob
    (the compiler reads pyocc's weight store; an AOT model ships the packed
    pool as a file instead). `copied(key, done)`, if given, is told each time
    another piece of a blob is in the pool, `done` its first bytes (the
    store then gives back the pages of weights it maps from a file, so they
    are not resident twice, WEIGHT_COPY_BYTES at a time). An entry with a
    "pack" is then permuted into that layout (WEIGHT_LAYOUTS): the only
    kernel reading it asked for it (pyocc.lowering.convert_dnn_to_llvm's
    select_kernels)."""
    layout = meta["weights"]
    pool = aligned_bytes(layout["bytes"], layout["alignment"])
    for entry in layout["entries"]:
        dtype = np.dtype(entry["dtype"])
        shape = tuple(entry["shape"])
        target = pool[entry["offset"]:entry["offset"] + entry["nbytes"]].view(dtype).reshape(shape)
        source = entry["source"]
        if "splat" in source:
            target[...] = np.full(shape, source["splat"], dtype=dtype)
        elif "values" in source:
            values = np.asarray(source["values"], dtype=dtype)
            # a dense splat (`dense<1.0> : tensor<4xf32>`) lists one value
            target[...] = values.reshape(shape) if values.size == target.size else values.reshape(-1)[0]
        else:
            data = read_resource(source["resource"], entry)
            if len(data) != entry["nbytes"]:
                raise PyoccError(f"weight '{source['resource']}' has {len(data)} bytes, its "
                                 f"{entry['dtype']}{list(shape)} type needs {entry['nbytes']}")
            elements = np.frombuffer(data, dtype=dtype.newbyteorder("<"))
            flat = target.reshape(-1)
            step = max(1, WEIGHT_COPY_BYTES // max(1, dtype.itemsize))
            for start in range(0, max(1, elements.size), step):
                stop = min(start + step, elements.size)
                flat[start:stop] = elements[start:stop]
                if copied is not None:
                    copied(source["resource"], stop * dtype.itemsize)
            del data, elements
        if "pack" in entry:  # a native kernel reads this weight in a layout of its own
            arguments = dict(entry["pack"])
            target.reshape(-1)[:] = WEIGHT_LAYOUTS[arguments.pop("layout")](target, **arguments).reshape(-1)
    return pool


@dataclass(frozen=True)
class AllocStats:
    """What the generated code allocated during the last run."""

    allocations: int
    """calls to the allocator (aligned_alloc)"""
    frees: int
    """calls to free"""
    peak_bytes: int
    """the most bytes allocated at once (the IR's sizes, not rounded)"""
    live_bytes: int
    """bytes still allocated at the end (0 unless the IR leaks)"""

    @classmethod
    def from_state(cls, state: Any) -> AllocStats:
        """The counters the generated code kept in its `state` array."""
        return cls(allocations=state[0], frees=state[1], live_bytes=state[2], peak_bytes=state[3])


def check_inputs(name: str, meta: dict[str, Any], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The graph inputs in argument order as contiguous arrays, after
    checking names, dtypes and shapes against the model's table."""
    expected = [spec["name"] for spec in meta["inputs"]]
    missing = [n for n in expected if n not in inputs]
    extra = [n for n in inputs if n not in expected]
    if missing or extra:
        raise PyoccError(f"{name}: inputs {sorted(inputs)} do not match the model's inputs {expected}"
                         + (f" (missing {missing})" if missing else "")
                         + (f" (unknown {extra})" if extra else ""))
    arrays = []
    for spec in meta["inputs"]:
        array = np.asarray(inputs[spec["name"]])
        if array.dtype != np.dtype(spec["dtype"]):
            raise PyoccError(f"{name}: input '{spec['name']}' has dtype {array.dtype}, "
                             f"the model takes {spec['dtype']} (cast it first)")
        if list(array.shape) != spec["shape"]:
            raise PyoccError(f"{name}: input '{spec['name']}' has shape {list(array.shape)}, "
                             f"the model takes {spec['shape']}")
        arrays.append(np.ascontiguousarray(array))
    return arrays


class ModelSignature:
    """What a compiled model's table says about its graph inputs and outputs
    (shared by the host and cuda runtimes)."""

    meta: dict[str, Any]

    @property
    def input_names(self) -> list[str]:
        """ONNX names of the graph inputs, in order."""
        return [spec["name"] for spec in self.meta["inputs"]]

    @property
    def output_names(self) -> list[str]:
        """ONNX names of the graph outputs, in order."""
        return [spec["name"] for spec in self.meta["outputs"]]

    @property
    def numpy_sites(self) -> int:
        """Compute sites that call back into the numpy kernels (the rest run
        native kernels compiled into the model; 0 for a cuda model)."""
        sites = self.meta.get("sites", [])
        return self.meta.get("numpy_sites", len(sites))

    @property
    def native_sites(self) -> int:
        """Compute sites that run native kernels compiled into the model."""
        return len(self.meta.get("sites", [])) - self.numpy_sites

    def expected_alloc_stats(self) -> dict[str, int]:
        """What the IR implies per run: allocator calls and peak bytes."""
        return dict(self.meta["memory"])

    def io_buffers(self, inputs: dict[str, np.ndarray]) -> tuple[list[np.ndarray], Any, Any]:
        """For one run: the output arrays to fill, and the C arrays of input
        and output data pointers (keep all three alive across the call)."""
        arrays = check_inputs(self.meta["name"], self.meta, inputs)
        outputs = [np.empty(spec["shape"], dtype=spec["dtype"]) for spec in self.meta["outputs"]]
        input_pointers = (ctypes.c_void_p * max(len(arrays), 1))(*[a.ctypes.data for a in arrays])
        output_pointers = (ctypes.c_void_p * max(len(outputs), 1))(*[a.ctypes.data for a in outputs])
        return outputs, input_pointers, output_pointers


class NativeModel(ModelSignature):
    """A compiled model behind the C ABI: `run(inputs) -> outputs`.

    `functions` maps "init", "run", "destroy" to their addresses; `keepalive`
    holds whatever owns that code (a JIT engine, a loaded library). A
    subclass may pass no `functions` and bind them later (`_bind`): its
    `_start` then does so on the first `run`."""

    def __init__(self, meta: dict[str, Any], weight_pool: np.ndarray, functions: dict[str, int] | None,
                 keepalive: Any = None):
        if meta.get("abi") != ABI_VERSION:
            raise PyoccError(f"the model uses ABI version {meta.get('abi')}; this runtime reads version {ABI_VERSION}")
        if weight_pool.nbytes != meta["weights"]["bytes"]:
            raise PyoccError(f"the weight pool has {weight_pool.nbytes} bytes; the model expects "
                             f"{meta['weights']['bytes']}")
        self.meta = meta
        self.name: str = meta["name"]
        self.weight_pool = weight_pool
        self._keepalive = keepalive
        self._bridge = KernelBridge(meta["sites"])
        self._run: Callable[..., int] | None = None
        self._destroy: Callable[[], None] | None = None
        self._stats = AllocStats(0, 0, 0, 0)
        if functions is not None:
            self._bind(functions, keepalive)

    def _bind(self, functions: dict[str, int], keepalive: Any) -> None:
        """Bind the model's init/run/destroy at their addresses (kept alive
        by `keepalive`) and call its init."""
        self._keepalive = keepalive
        self._run = _RUN(functions["run"])
        self._destroy = _DESTROY(functions["destroy"])
        _INIT(functions["init"])(ctypes.addressof(self._bridge.table))

    def _start(self) -> None:
        """Bind the model's code before its first run; a subclass that
        passed no `functions` overrides this."""
        raise PyoccError(f"{self.name}: the model has no code bound to run")

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the model on `inputs` (ONNX input name -> array of exactly the
        declared shape and dtype); returns ONNX output name -> a new array."""
        # named locals: the arrays must outlive the call
        outputs, input_pointers, output_pointers = self.io_buffers(inputs)
        if self._run is None:
            self._start()
        state = (ctypes.c_int64 * STATE_SLOTS)()
        status = self._run(ctypes.addressof(input_pointers), ctypes.addressof(output_pointers),
                           self.weight_pool.ctypes.data, ctypes.addressof(state))
        self._stats = AllocStats.from_state(state)
        self._bridge.raise_pending()
        if status == 1:
            raise PyoccError(f"{self.name}: out of memory (the allocator returned NULL); "
                             f"the model needs {self.meta['memory']['peak_bytes']} bytes of activations")
        if status != 0:
            raise PyoccError(f"{self.name}: the generated code returned status {status}")
        return dict(zip(self.output_names, outputs))

    def alloc_stats(self) -> AllocStats:
        """Allocator calls and bytes of the last `run` (counted in native code)."""
        return self._stats

    def close(self) -> None:
        """Forget the kernel callback in the generated code."""
        if self._destroy is not None:
            self._destroy()
            self._destroy = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

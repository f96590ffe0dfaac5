"""Run one native kernel emitter on numpy arrays, outside any model: emit it
into an llvmlite module, optimise for this CPU, JIT it, and call it with
the buffer table a compiled model would pass. Tests compare it with the
numpy kernel; bench/ times it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from collections.abc import Callable, Sequence
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from pyocc.runtime import blas

Emitter = Callable[[ir.Module, str, dict[str, Any]], None]
#: the libm functions LLVM's float intrinsics lower to
LIBM_SYMBOLS = ("expf", "logf", "tanhf", "powf", "exp2f", "log2f")

_ready = False


def _initialise() -> None:
    global _ready
    if not _ready:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        libm = ctypes.CDLL(ctypes.util.find_library("m"))
        for name in LIBM_SYMBOLS:
            llvm.add_symbol(name, ctypes.cast(getattr(libm, name), ctypes.c_void_p).value)
        for name, address in blas.symbols().items():
            llvm.add_symbol(name, address)
        _ready = True


def spec(array: np.ndarray | None) -> dict[str, Any] | None:
    """The site table's {"shape", "dtype"} of an array."""
    return None if array is None else {"shape": list(array.shape), "dtype": str(array.dtype)}


def site_for(kernel: str, inputs: Sequence[np.ndarray | None], out: np.ndarray, kwargs: dict[str, Any],
             workspace_bytes: int | None = None) -> dict[str, Any]:
    """A site table entry as convert-dnn-to-llvm writes it."""
    return {"site": 0, "op": f"dnn.{kernel}", "kernel": kernel, "inputs": [spec(a) for a in inputs],
            "outputs": [spec(out)], "out_keyword": "out", "kwargs": dict(kwargs),
            "workspace": None if workspace_bytes is None else {"shape": [workspace_bytes], "dtype": "int8"}}


class NativeKernel:
    """One emitted kernel, JIT-compiled for the host CPU with -O3."""

    def __init__(self, emit: Emitter, site: dict[str, Any]):
        _initialise()
        module = ir.Module(name="kernel")
        emit(module, "kernel", site)
        module.get_global("kernel").linkage = "external"  # emitters define it internal; we call it from outside
        self.llvm_ir = str(module)
        target = llvm.Target.from_default_triple()
        self.machine = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                                    features=llvm.get_host_cpu_features().flatten(), opt=3)
        parsed = llvm.parse_assembly(self.llvm_ir)
        parsed.triple = self.machine.triple
        parsed.data_layout = str(self.machine.target_data)
        parsed.verify()
        options = llvm.create_pipeline_tuning_options(speed_level=3)
        builder = llvm.create_pass_builder(self.machine, options)
        builder.getModulePassManager().run(parsed, builder)
        self.engine = llvm.create_mcjit_compiler(parsed, self.machine)
        self.engine.finalize_object()
        self.function = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))(
            self.engine.get_function_address("kernel"))
        self.site = site

    def __call__(self, inputs: Sequence[np.ndarray | None], out: np.ndarray,
                 workspace: np.ndarray | None = None) -> None:
        """Run on `inputs` (None for an absent optional one), writing `out`."""
        arrays = [*inputs, out] + ([workspace] if workspace is not None else [])
        for array in arrays:
            assert array is None or array.flags.c_contiguous
        table = (ctypes.c_void_p * len(arrays))(*[None if a is None else a.ctypes.data for a in arrays])
        self.function(table)


#: float32 elements behind the output and the workspace that a kernel must not touch
GUARD = 64
_SENTINEL = np.float32(-1234.5)


def _guarded(size: int, fill: float) -> np.ndarray:
    """A float32 buffer of `size` elements filled with `fill`, then GUARD sentinels."""
    buffer = np.full(size + GUARD, fill, dtype=np.float32)
    buffer[size:] = _SENTINEL
    return buffer


def run_native(emit: Emitter, kernel: str, inputs: Sequence[np.ndarray | None], out: np.ndarray,
               kwargs: dict[str, Any], workspace_bytes: int | None = None) -> None:
    """Emit, compile and run one kernel on these arrays, writing `out`
    (which may be one of the inputs, for in-place kernels). `workspace_bytes`:
    a scratch buffer of that size, filled with NaN so that reading it before
    writing shows. Raises AssertionError if the kernel writes past the end
    of `out` or of the workspace, or writes an input other than `out`."""
    site = site_for(kernel, inputs, out, kwargs, workspace_bytes)
    in_place = [a is out for a in inputs]
    staged = _guarded(out.size, np.nan)
    staged[:out.size] = out.reshape(-1)
    staged_out = staged[:out.size].reshape(out.shape)
    arguments = [staged_out if same else a for a, same in zip(inputs, in_place, strict=True)]
    before = [None if a is None or same else a.copy() for a, same in zip(inputs, in_place, strict=True)]
    workspace = None
    if workspace_bytes is not None:
        workspace = _guarded(max(1, math.ceil(workspace_bytes / 4)), np.nan)
    NativeKernel(emit, site)(arguments, staged_out, workspace)
    assert (staged[out.size:] == _SENTINEL).all(), f"{kernel} wrote past the end of its output"
    if workspace is not None:
        used = max(1, math.ceil(workspace_bytes / 4))  # type: ignore[operator]
        assert (workspace[used:] == _SENTINEL).all(), f"{kernel} wrote past the end of its workspace"
    for original, array in zip(before, inputs, strict=True):
        if original is not None:
            assert array is not None and np.array_equal(original, array, equal_nan=True), f"{kernel} wrote an input"
    out[...] = staged_out

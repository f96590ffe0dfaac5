"""Running a model lowered by `convert-dnn-to-llvm{target=cuda}`.

`CudaModel(llvm_ir, meta, weight_pool, symbols)` JIT-compiles the host code
with llvmlite, binds each CUDA runtime / cuDNN / cuBLAS function it declares
to the address `symbols` gives (NVIDIA's libraries from
`pyocc.runtime.cuda.CudaLibraries`, or the CPU stand-in
`pyocc.testing.fake_cuda.FakeCuda` in tests), calls `NAME_init` once (which
uploads the weights) and `NAME_run` per inference. Libraries that run the
generated kernels on the CPU (`register_host_kernels`) get their host twins. A failed library call
comes back as its number in the table's "calls" list, and is raised as one
line naming the call, the op it lowers and the library's status.

Like all of pyocc.runtime, this module never imports xDSL.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any

import numpy as np

from pyocc.errors import PyoccError
from pyocc.runtime.bridge import ABI_VERSION, AllocStats, ModelSignature
from pyocc.runtime.cuda_api import status_name
from pyocc.runtime.jit import CALLS_ONLY_SPEED_LEVEL, _llvm, jit_module

_INIT = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
_RUN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_DESTROY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
#: cudaMalloc calls, cudaFree calls, bytes allocated now, peak bytes, failed status
STATE_SLOTS = 5


class CudaModel(ModelSignature):
    """A cuda-target model in this process: `run(inputs) -> outputs`."""

    def __init__(self, llvm_ir: str, meta: dict[str, Any], weight_pool: np.ndarray, symbols: Mapping[str, int],
                 keepalive: Any = None):
        if meta.get("abi") != ABI_VERSION or meta.get("target") != "cuda":
            raise PyoccError(f"the model is for target {meta.get('target', 'host')} (ABI {meta.get('abi')}); "
                             f"this runtime reads target cuda, ABI {ABI_VERSION}")
        if weight_pool.nbytes != meta["weights"]["bytes"]:
            raise PyoccError(f"the weight pool has {weight_pool.nbytes} bytes; the model expects "
                             f"{meta['weights']['bytes']}")
        self.meta = meta
        self.name: str = meta["name"]
        self.llvm_ir = llvm_ir
        self.weight_pool = weight_pool
        self._keepalive = keepalive  # what owns the library functions (a FakeCuda, loaded libraries)

        def bind(module: Any) -> None:
            """Each external function to the address the libraries give."""
            for function in module.functions:
                if function.is_declaration and not function.name.startswith("llvm."):
                    if function.name not in symbols:
                        raise PyoccError(f"generated code calls '{function.name}', which the CUDA libraries "
                                         "given do not provide")
                    _llvm().add_symbol(function.name, symbols[function.name])

        # the host code calls the libraries one after another: compiled without optimising
        self._engine, _ = jit_module(llvm_ir, bind, speed_level=CALLS_ONLY_SPEED_LEVEL)
        self._twins = self._compile_kernel_twins(keepalive)
        address = self._engine.get_function_address
        self._init = _INIT(address(f"{self.name}_init"))
        self._run = _RUN(address(f"{self.name}_run"))
        self._destroy = _DESTROY(address(f"{self.name}_destroy"))
        self._stats = AllocStats(0, 0, 0, 0)
        self._live = False
        state = (ctypes.c_int64 * STATE_SLOTS)()
        self._check(self._init(self.weight_pool.ctypes.data, ctypes.addressof(state)), state, "init")
        self._live = True
        #: device bytes init allocated once: the weights, the convolution workspace
        #: and the planned pools (unless they are allocated per run)
        self.init_device_bytes: int = state[2]
        #: cudaMalloc calls init made (weights, workspace, pools)
        self.init_allocations: int = state[0]
        pools = meta.get("init_memory", {"allocations": 0, "bytes": 0})
        #: of those, the planned pools: (cudaMalloc calls, bytes); none when pools are allocated per run
        self.init_pool_allocations: int = pools["allocations"]
        self.init_pool_bytes: int = pools["bytes"]
        #: the workspace the chosen convolution algorithms need (at most meta's "workspace_limit")
        self.workspace_bytes: int = state[2] - meta["weights"]["bytes"] - self.init_pool_bytes

    def _compile_kernel_twins(self, libraries: Any) -> Any:
        """The generated kernels' host twins, for libraries that run kernels
        on the CPU (`register_host_kernels`, the fake); None otherwise."""
        register = getattr(libraries, "register_host_kernels", None)
        if not self.meta.get("kernels") or register is None:
            return None
        engine, _ = jit_module(self.meta["kernel_twins"])
        register({k["name"]: (engine.get_function_address(f"{k['name']}_host"), k["pointer_bytes"])
                  for k in self.meta["kernels"]})
        return engine

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Copy `inputs` to the device, run, copy the outputs back."""
        if not self._live:
            raise PyoccError(f"{self.name}: the model was closed")
        outputs, input_pointers, output_pointers = self.io_buffers(inputs)
        state = (ctypes.c_int64 * STATE_SLOTS)()
        status = self._run(ctypes.addressof(input_pointers), ctypes.addressof(output_pointers),
                           ctypes.addressof(state))
        self._stats = AllocStats.from_state(state)
        self._check(status, state, "run")
        return dict(zip(self.output_names, outputs))

    def _check(self, call: int, state: Any, phase: str) -> None:
        """Raise the failed call `call` (0: none failed) as one line."""
        if call == 0:
            return
        calls = self.meta["calls"]
        what = calls[call - 1] if 0 < call <= len(calls) else f"call {call}"
        function = what.split(" ", 1)[0]
        raise PyoccError(f"{self.name}: {phase}: {what} failed with {status_name(function, state[STATE_SLOTS - 1])}")

    def alloc_stats(self) -> AllocStats:
        """cudaMalloc / cudaFree calls and device bytes of the last `run`."""
        return self._stats

    def write_llvm_ir(self, path: str) -> None:
        """The host code as LLVM IR text (`.ll`)."""
        with open(path, "w") as f:
            f.write(self.llvm_ir)

    def write_object(self, path: str) -> None:
        """Not for target cuda: its library calls are bound when it is loaded."""
        raise PyoccError(f"{path}: target cuda writes LLVM IR (.ll) only; its library calls are bound when it is run")

    write_shared_library = write_object

    def close(self) -> None:
        """Release the device memory, descriptors and handles init created."""
        if self._live:
            self._live = False
            state = (ctypes.c_int64 * STATE_SLOTS)()
            self._check(self._destroy(ctypes.addressof(state)), state, "destroy")

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown, or a device already gone
            pass

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

The stand-in is a package, one module per library on a common core:
core (memory, objects, callbacks, shared checks), runtime (CUDA runtime and
driver API), cudnn, cublas. `FakeCuda` is all of them.
"""

from __future__ import annotations

from pyocc.testing.fake_cuda.core import HUGE_WORKSPACE, ContractViolation
from pyocc.testing.fake_cuda.cublas import Cublas
from pyocc.testing.fake_cuda.cudnn import Cudnn
from pyocc.testing.fake_cuda.runtime import CudaRuntime

__all__ = ["FakeCuda", "ContractViolation", "HUGE_WORKSPACE"]


class FakeCuda(CudaRuntime, Cudnn, Cublas):
    """A CPU stand-in for the CUDA runtime, cuDNN and cuBLAS functions that
    `target=cuda` code calls (pyocc.runtime.cuda_api.FUNCTIONS).

    Bind generated code's external symbols to `symbols()` and run it: device
    memory is numpy memory, kernels are numpy, every call is checked against
    its library's documented contract. After the run, `errors` says what went
    wrong (one line per failed call), `calls` counts calls per function,
    `live_bytes`/`peak_bytes` give device memory use and `leaks()` lists what was
    never freed or destroyed."""

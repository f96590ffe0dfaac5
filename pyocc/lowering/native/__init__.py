"""Native host kernels: LLVM IR written for each compute site of a model,
specialised to its static shapes, dtypes and keyword arguments, so that the
generated code computes without calling back into numpy.

`registry` maps a kernel name to its emitter (`@native_kernel("unary")`);
`loops` holds what emitters share (operands, loop nests, broadcasting, the
scalar math); the other modules hold the emitters by family, with exactly
the semantics of the numpy kernels of the same names
(pyocc.runtime.kernels). Importing this package registers them all; the
export to LLVM (pyocc.lowering.convert_dnn_to_llvm.to_llvmlite) asks
`native_kernel_for(site)` for each site and falls back to numpy for the rest.
"""

from pyocc.lowering.native import (  # noqa: F401 - registers
    conv,
    elementwise,
    linalg,
    normalization,
    pool,
    reduction,
    tensor,
)
from pyocc.lowering.native.registry import NATIVE_KERNELS, NativeKernel, native_kernel, native_kernel_for

__all__ = ["NATIVE_KERNELS", "NativeKernel", "native_kernel", "native_kernel_for"]

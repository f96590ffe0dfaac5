"""The cuda target of convert-dnn-to-llvm: buffer-form dnn -> host LLVM IR
whose NAME_init / NAME_run / NAME_destroy drive the CUDA runtime, cuDNN,
cuBLAS and kernels pyocc writes (pyocc.lowering.cuda_kernels).

`function` builds one function's ABI (checked calls, descriptors, the
memory ops); `registry` maps a dnn op class to its lowering
(`@cuda_lowering(d.ConvOp)`); the other modules hold the lowerings by op
family. Importing this package registers them all.
"""

from pyocc.lowering.cuda import (  # noqa: F401 - registers
    conv,
    data,
    gemm,
    normalization,
    pointwise,
    pool,
    reduction,
)
from pyocc.lowering.cuda.function import CudaFunctionLowering, declarations
from pyocc.lowering.cuda.registry import (
    CUDA_LOWERINGS,
    CudaLowering,
    cuda_lowering,
    cuda_lowering_for,
)

#: the dnn ops target=cuda lowers (the rest fail with a clear message)
CUDA_OPS: frozenset[str] = frozenset(cls.name for cls in CUDA_LOWERINGS)  # type: ignore[attr-defined]

__all__ = ["CUDA_LOWERINGS", "CUDA_OPS", "CudaFunctionLowering", "CudaLowering", "cuda_lowering",
           "cuda_lowering_for", "declarations"]

"""The slice of the CUDA runtime, cuDNN and cuBLAS that `target=cuda` code calls.

One table, three readers: the lowering declares each function with its llvm
signature, the runtime binds each symbol to the address it finds in NVIDIA's
libraries (pyocc.runtime.cuda), and the CPU stand-in that tests run without a
GPU (pyocc.testing.fake_cuda) implements exactly these functions. A function
the lowering calls that is not in this table is a bug the tests catch.

Parameter kinds: `ptr` (any pointer or handle), `i32` (int and every enum),
`u32`, `i64` (size_t, long long), `f64` (double, by value). Every function
returns a status code (i32): 0 is success.

The enum values below are those of the public headers (cudnn_graph.h /
cudnn_ops.h / cudnn_cnn.h of cuDNN 9, cublas_api.h, driver_types.h).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ApiFunction:
    """One C function: its library, parameter names and kinds."""

    name: str
    library: str  # "cudart", "cudnn", "cublas" or "cuda" (the driver)
    params: tuple[tuple[str, str], ...]

    @property
    def kinds(self) -> tuple[str, ...]:
        """The parameter kinds in order."""
        return tuple(kind for _, kind in self.params)

    def c_prototype(self) -> Any:
        """The ctypes function type of this C function (returns int32): to call
        an address as generated code does, or to implement it as a callback."""
        kinds = {"ptr": ctypes.c_void_p, "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
                 "f64": ctypes.c_double}
        return ctypes.CFUNCTYPE(ctypes.c_int32, *(kinds[kind] for kind in self.kinds))


def _fn(library: str, name: str, signature: str) -> ApiFunction:
    """`signature` lists "name:kind" pairs separated by commas."""
    params = tuple(tuple(p.strip().split(":")) for p in signature.split(",") if p.strip())
    return ApiFunction(name, library, params)  # type: ignore[arg-type]


FUNCTIONS: tuple[ApiFunction, ...] = (
    # -- CUDA runtime ---------------------------------------------------------
    _fn("cudart", "cudaMalloc", "devPtr:ptr, size:i64"),
    _fn("cudart", "cudaFree", "devPtr:ptr"),
    _fn("cudart", "cudaMemcpy", "dst:ptr, src:ptr, count:i64, kind:i32"),
    _fn("cudart", "cudaMemcpyAsync", "dst:ptr, src:ptr, count:i64, kind:i32, stream:ptr"),
    _fn("cudart", "cudaMemcpy2DAsync",
        "dst:ptr, dpitch:i64, src:ptr, spitch:i64, width:i64, height:i64, kind:i32, stream:ptr"),
    _fn("cudart", "cudaStreamCreate", "stream:ptr"),
    _fn("cudart", "cudaStreamSynchronize", "stream:ptr"),
    _fn("cudart", "cudaStreamDestroy", "stream:ptr"),
    # -- cuDNN: handle and descriptors ----------------------------------------
    _fn("cudnn", "cudnnCreate", "handle:ptr"),
    _fn("cudnn", "cudnnDestroy", "handle:ptr"),
    _fn("cudnn", "cudnnSetStream", "handle:ptr, stream:ptr"),
    _fn("cudnn", "cudnnCreateTensorDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnDestroyTensorDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnSetTensorNdDescriptor", "desc:ptr, dataType:i32, nbDims:i32, dimA:ptr, strideA:ptr"),
    _fn("cudnn", "cudnnCreateFilterDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnDestroyFilterDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnSetFilterNdDescriptor", "desc:ptr, dataType:i32, format:i32, nbDims:i32, filterDimA:ptr"),
    _fn("cudnn", "cudnnCreateConvolutionDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnDestroyConvolutionDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnSetConvolutionNdDescriptor",
        "desc:ptr, arrayLength:i32, padA:ptr, filterStrideA:ptr, dilationA:ptr, mode:i32, computeType:i32"),
    _fn("cudnn", "cudnnSetConvolutionGroupCount", "desc:ptr, groupCount:i32"),
    _fn("cudnn", "cudnnSetConvolutionMathType", "desc:ptr, mathType:i32"),
    _fn("cudnn", "cudnnGetConvolutionForwardAlgorithm_v7",
        "handle:ptr, xDesc:ptr, wDesc:ptr, convDesc:ptr, yDesc:ptr, requestedAlgoCount:i32, "
        "returnedAlgoCount:ptr, perfResults:ptr"),
    _fn("cudnn", "cudnnFindConvolutionForwardAlgorithm",
        "handle:ptr, xDesc:ptr, wDesc:ptr, convDesc:ptr, yDesc:ptr, requestedAlgoCount:i32, "
        "returnedAlgoCount:ptr, perfResults:ptr"),
    _fn("cudnn", "cudnnCreateActivationDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnDestroyActivationDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnSetActivationDescriptor", "desc:ptr, mode:i32, reluNanOpt:i32, coef:f64"),
    _fn("cudnn", "cudnnCreatePoolingDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnDestroyPoolingDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnSetPoolingNdDescriptor",
        "desc:ptr, mode:i32, maxpoolingNanOpt:i32, nbDims:i32, windowDimA:ptr, paddingA:ptr, strideA:ptr"),
    _fn("cudnn", "cudnnCreateOpTensorDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnDestroyOpTensorDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnSetOpTensorDescriptor", "desc:ptr, opTensorOp:i32, compType:i32, nanOpt:i32"),
    _fn("cudnn", "cudnnCreateLRNDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnDestroyLRNDescriptor", "desc:ptr"),
    _fn("cudnn", "cudnnSetLRNDescriptor", "desc:ptr, lrnN:u32, lrnAlpha:f64, lrnBeta:f64, lrnK:f64"),
    _fn("cudnn", "cudnnGetConvolutionBackwardDataAlgorithm_v7",
        "handle:ptr, wDesc:ptr, dyDesc:ptr, convDesc:ptr, dxDesc:ptr, requestedAlgoCount:i32, "
        "returnedAlgoCount:ptr, perfResults:ptr"),
    # -- cuDNN: compute ---------------------------------------------------------
    _fn("cudnn", "cudnnConvolutionForward",
        "handle:ptr, alpha:ptr, xDesc:ptr, x:ptr, wDesc:ptr, w:ptr, convDesc:ptr, algo:i32, "
        "workSpace:ptr, workSpaceSizeInBytes:i64, beta:ptr, yDesc:ptr, y:ptr"),
    _fn("cudnn", "cudnnConvolutionBiasActivationForward",
        "handle:ptr, alpha1:ptr, xDesc:ptr, x:ptr, wDesc:ptr, w:ptr, convDesc:ptr, algo:i32, "
        "workSpace:ptr, workSpaceSizeInBytes:i64, alpha2:ptr, zDesc:ptr, z:ptr, biasDesc:ptr, bias:ptr, "
        "activationDesc:ptr, yDesc:ptr, y:ptr"),
    _fn("cudnn", "cudnnAddTensor", "handle:ptr, alpha:ptr, aDesc:ptr, A:ptr, beta:ptr, cDesc:ptr, C:ptr"),
    _fn("cudnn", "cudnnOpTensor",
        "handle:ptr, opTensorDesc:ptr, alpha1:ptr, aDesc:ptr, A:ptr, alpha2:ptr, bDesc:ptr, B:ptr, "
        "beta:ptr, cDesc:ptr, C:ptr"),
    _fn("cudnn", "cudnnActivationForward",
        "handle:ptr, activationDesc:ptr, alpha:ptr, xDesc:ptr, x:ptr, beta:ptr, yDesc:ptr, y:ptr"),
    _fn("cudnn", "cudnnPoolingForward",
        "handle:ptr, poolingDesc:ptr, alpha:ptr, xDesc:ptr, x:ptr, beta:ptr, yDesc:ptr, y:ptr"),
    _fn("cudnn", "cudnnSoftmaxForward",
        "handle:ptr, algo:i32, mode:i32, alpha:ptr, xDesc:ptr, x:ptr, beta:ptr, yDesc:ptr, y:ptr"),
    _fn("cudnn", "cudnnLRNCrossChannelForward",
        "handle:ptr, normDesc:ptr, lrnMode:i32, alpha:ptr, xDesc:ptr, x:ptr, beta:ptr, yDesc:ptr, y:ptr"),
    _fn("cudnn", "cudnnTransformTensor", "handle:ptr, alpha:ptr, xDesc:ptr, x:ptr, beta:ptr, yDesc:ptr, y:ptr"),
    _fn("cudnn", "cudnnBatchNormalizationForwardInference",
        "handle:ptr, mode:i32, alpha:ptr, beta:ptr, xDesc:ptr, x:ptr, yDesc:ptr, y:ptr, "
        "bnScaleBiasMeanVarDesc:ptr, bnScale:ptr, bnBias:ptr, estimatedMean:ptr, estimatedVariance:ptr, "
        "epsilon:f64"),
    _fn("cudnn", "cudnnConvolutionBackwardData",
        "handle:ptr, alpha:ptr, wDesc:ptr, w:ptr, dyDesc:ptr, dy:ptr, convDesc:ptr, algo:i32, "
        "workSpace:ptr, workSpaceSizeInBytes:i64, beta:ptr, dxDesc:ptr, dx:ptr"),
    # -- cuBLAS ---------------------------------------------------------------------
    _fn("cublas", "cublasCreate_v2", "handle:ptr"),
    _fn("cublas", "cublasDestroy_v2", "handle:ptr"),
    _fn("cublas", "cublasSetStream_v2", "handle:ptr, stream:ptr"),
    _fn("cublas", "cublasSetMathMode", "handle:ptr, mode:i32"),
    _fn("cublas", "cublasSgemm_v2",
        "handle:ptr, transa:i32, transb:i32, m:i32, n:i32, k:i32, alpha:ptr, A:ptr, lda:i32, "
        "B:ptr, ldb:i32, beta:ptr, C:ptr, ldc:i32"),
    _fn("cublas", "cublasSgemmStridedBatched",
        "handle:ptr, transa:i32, transb:i32, m:i32, n:i32, k:i32, alpha:ptr, A:ptr, lda:i32, strideA:i64, "
        "B:ptr, ldb:i32, strideB:i64, beta:ptr, C:ptr, ldc:i32, strideC:i64, batchCount:i32"),
    # -- the driver API, for the kernels pyocc writes (pyocc.lowering.cuda_kernels) --
    _fn("cuda", "cuModuleLoadData", "module:ptr, image:ptr"),
    _fn("cuda", "cuModuleGetFunction", "hfunc:ptr, hmod:ptr, name:ptr"),
    _fn("cuda", "cuModuleUnload", "hmod:ptr"),
    _fn("cuda", "cuLaunchKernel",
        "f:ptr, gridDimX:u32, gridDimY:u32, gridDimZ:u32, blockDimX:u32, blockDimY:u32, blockDimZ:u32, "
        "sharedMemBytes:u32, hStream:ptr, kernelParams:ptr, extra:ptr"),
)

BY_NAME: dict[str, ApiFunction] = {f.name: f for f in FUNCTIONS}

#: the shared-library name of each library in NVIDIA's CUDA 12 wheels
LIBRARY_SONAMES: dict[str, str] = {"cudart": "libcudart.so.12", "cudnn": "libcudnn.so.9", "cublas": "libcublas.so.12",
                                   "cuda": "libcuda.so.1"}

# -- enums ------------------------------------------------------------------------

# cudaMemcpyKind
MEMCPY_HOST_TO_DEVICE, MEMCPY_DEVICE_TO_HOST, MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3
MEMCPY_KINDS: dict[str, int] = {"host_to_host": 0, "host_to_device": 1, "device_to_host": 2, "device_to_device": 3}

CUDNN_DATA_FLOAT = 0
CUDNN_TENSOR_NCHW = 0
CUDNN_CROSS_CORRELATION = 1
#: cudnnMathType_t: FMA only, no TF32 tensor cores (results within 1e-3 of fp32)
CUDNN_FMA_MATH = 3
CUDNN_NOT_PROPAGATE_NAN = 0
CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0
CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8
#: sizeof(cudnnConvolutionFwdAlgoPerf_t) and the offsets of its fields
CONV_PERF_SIZE, CONV_PERF_ALGO, CONV_PERF_STATUS, CONV_PERF_MEMORY = 48, 0, 4, 16
#: cudnnConvolutionBwdDataAlgo_t: ALGO_0 sums with atomics (non-deterministic), ALGO_1 does not;
#: cudnnConvolutionBwdDataAlgoPerf_t has the forward perf struct's layout (CONV_PERF_*)
CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 = 0, 1
CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT = 6

ACTIVATION_MODES: dict[str, int] = {"sigmoid": 0, "relu": 1, "tanh": 2, "clipped_relu": 3, "elu": 4, "identity": 5}
POOLING_MAX, POOLING_AVERAGE_INCLUDE_PAD, POOLING_AVERAGE_EXCLUDE_PAD = 0, 1, 2
OP_TENSOR_OPS: dict[str, int] = {"add": 0, "mul": 1, "min": 2, "max": 3}
SOFTMAX_ACCURATE, SOFTMAX_LOG = 1, 2
SOFTMAX_MODE_CHANNEL = 1
LRN_CROSS_CHANNEL_DIM1 = 0
BATCHNORM_SPATIAL = 1
#: cudnnTensor/Filter descriptors take at least this many dimensions
CUDNN_MIN_DIMS, CUDNN_MAX_DIMS = 4, 8

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
#: cublasMath_t: no TF32 for fp32 gemms
CUBLAS_PEDANTIC_MATH = 2

#: status names, for error messages
STATUS_NAMES: dict[str, dict[int, str]] = {
    "cudart": {1: "cudaErrorInvalidValue", 2: "cudaErrorMemoryAllocation", 3: "cudaErrorInitializationError",
               35: "cudaErrorInsufficientDriver", 100: "cudaErrorNoDevice", 700: "cudaErrorIllegalAddress"},
    "cudnn": {1000: "CUDNN_STATUS_NOT_INITIALIZED", 2000: "CUDNN_STATUS_BAD_PARAM",
              3000: "CUDNN_STATUS_NOT_SUPPORTED", 4000: "CUDNN_STATUS_INTERNAL_ERROR",
              5000: "CUDNN_STATUS_EXECUTION_FAILED"},
    "cuda": {1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 200: "CUDA_ERROR_INVALID_IMAGE",
             218: "CUDA_ERROR_INVALID_PTX", 500: "CUDA_ERROR_NOT_FOUND", 701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
    "cublas": {1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
               7: "CUBLAS_STATUS_INVALID_VALUE", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
               15: "CUBLAS_STATUS_NOT_SUPPORTED"},
}


def status_name(function: str, status: int) -> str:
    """A readable name for `function`'s status code (the code itself when unknown)."""
    library = BY_NAME[function].library if function in BY_NAME else ""
    known = STATUS_NAMES.get(library, {})
    if status in known:
        return f"{known[status]} ({status})"
    if library == "cudnn":  # cuDNN 9 codes are category * 1000 + detail
        category = known.get(status // 1000 * 1000)
        if category:
            return f"{category} ({status})"
    return f"status {status}"

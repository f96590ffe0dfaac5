"""The stand-in's cuDNN: handle, descriptors, algorithm ranking and the
routines target=cuda calls, computed with numpy (pyocc.testing.fake_cuda_math).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pyocc.runtime import cuda_api as api
from pyocc.testing import fake_cuda_math as fm
from pyocc.testing.fake_cuda.core import (
    _STATUS,
    ACTIVATION,
    CONVOLUTION,
    CUDNN_HANDLE,
    FILTER,
    FLOAT_BYTES,
    HUGE_WORKSPACE,
    LRN,
    OP_TENSOR,
    POISON_BYTE,
    POOLING,
    TENSOR,
    _check_at_most_5_dims,
    _check_broadcast,
    _Handle,
    _invalid,
    _Layout,
    _unsupported,
    FakeCudaBase,
)

# -- descriptor parameters and algorithms ---------------------------------------------


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


#: cudnnMathType_t -> the precision a float convolution's inputs get (on an Ampere-or-later GPU)
_CUDNN_MATH_PRECISION = {0: "tf32", 1: "tf32", 2: "fp16", api.CUDNN_FMA_MATH: "fp32"}
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
#: the order cudnnFindConvolutionForwardAlgorithm "times" them in (the fake runs
#: nothing): another order than the heuristics', so that a test sees which
#: query init's choice came from
_ALGO_TIMED = ((2, 0.04), (0, 0.06), (1, 0.07), (6, 0.09), (7, 0.5), (3, -1.0), (4, -1.0), (5, -1.0))

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


class Cudnn(FakeCudaBase):
    """cuDNN's handle, descriptors and routines."""

    # -- cuDNN: handle and descriptors ---------------------------------------------------

    def _cudnnCreate(self, handle: int) -> None:
        self._create(handle, CUDNN_HANDLE, _Handle())

    def _cudnnDestroy(self, handle: int) -> None:
        self._objects.destroy(handle, CUDNN_HANDLE, "handle")

    def _cudnnSetStream(self, handle: int, stream: int) -> None:
        self._set_stream(handle, CUDNN_HANDLE, stream)

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
        """cuDNN's heuristics rank the algorithms; the fake's in its `_ALGO_RANKING` order."""
        self._rank_forward(_ALGO_RANKING, handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount,
                           returnedAlgoCount, perfResults)

    def _cudnnFindConvolutionForwardAlgorithm(
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
        """cuDNN runs every algorithm on memory it allocates itself and ranks
        them by time, supported ones first; the fake ranks them in its
        `_ALGO_TIMED` order and runs none."""
        self._rank_forward(_ALGO_TIMED, handle, xDesc, wDesc, convDesc, yDesc, requestedAlgoCount,
                           returnedAlgoCount, perfResults)

    def _rank_forward(self, ranking: Sequence[tuple[int, float]], handle: int, xDesc: int, wDesc: int,
                      convDesc: int, yDesc: int, requested: int, returned: int, results: int) -> None:
        """Both forward-algorithm queries: the problem checked, `ranking` written (`_write_perf`)."""
        self._cudnn_handle(handle)
        problem = self._conv_problem(xDesc, wDesc, convDesc, yDesc)
        if requested < 1:
            raise _invalid(f"requestedAlgoCount {requested} < 1")
        self._write_perf(requested, returned, results, ranking, problem.workspace, lambda algo: 1,
                         problem.conv.math_type)

    def _write_perf(self, requested: int, returned: int, results: int, ranking: Sequence[tuple[int, float]],
                    needs: Callable[[int], int | None], determinism: Callable[[int], int], math_type: int) -> None:
        """Fill cudnnGet*Algorithm_v7's (or cudnnFind*Algorithm's) outputs: `ranking` with the supported
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

    # -- cuDNN: computing ---------------------------------------------------------------

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
        self.forward_algorithms[algo] += 1
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
        self.forward_algorithms[algo] += 1
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

"""The CPU stand-in for CUDA, cuDNN and cuBLAS (pyocc.testing.fake_cuda), driven the
way generated code drives it: through the callbacks' addresses, with ctypes.
Numerics against onnxruntime or plain numpy; contract checks by the errors reported."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from pyocc.runtime import cuda_api as api
from pyocc.testing.fake_cuda import HUGE_WORKSPACE, FakeCuda
from tests.runtime.test_host_kernels import ort_run

RNG = np.random.default_rng(20261129)
BAD_PARAM, NOT_SUPPORTED = 2000, 3000
CUBLAS_INVALID_VALUE = 7
H2D, D2H = api.MEMCPY_HOST_TO_DEVICE, api.MEMCPY_DEVICE_TO_HOST


class Cuda:
    """Calls the fake's functions through their addresses, as generated code does;
    keeps host-side argument buffers alive until the object goes."""

    def __init__(self) -> None:
        self.fake = FakeCuda()
        self._symbols = self.fake.symbols()
        self._keep: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return api.BY_NAME[name].c_prototype()(self._symbols[name])

    def host(self, value: Any) -> int:
        """The address of a ctypes object kept alive by this object."""
        self._keep.append(value)
        return ctypes.addressof(value)

    def f32(self, value: float) -> int:
        return self.host(ctypes.c_float(value))

    def ints(self, values: Sequence[int]) -> int:
        return self.host((ctypes.c_int32 * len(values))(*values))

    def check(self, status: int) -> None:
        assert status == 0, self.fake.errors

    def malloc(self, nbytes: int) -> int:
        out = ctypes.c_void_p()
        self.check(self.cudaMalloc(ctypes.addressof(out), nbytes))
        return out.value or 0

    def upload(self, array: np.ndarray) -> int:
        array = np.ascontiguousarray(array, dtype=np.float32)
        address = self.malloc(array.nbytes)
        self.check(self.cudaMemcpy(address, array.ctypes.data, array.nbytes, H2D))
        return address

    def download(self, address: int, shape: Sequence[int], count: int | None = None) -> np.ndarray:
        out = np.empty(shape if count is None else (count,), dtype=np.float32)
        self.check(self.cudaMemcpy(out.ctypes.data, address, out.nbytes, D2H))
        return out.reshape(shape)

    def create(self, function: str) -> int:
        out = ctypes.c_void_p()
        self.check(getattr(self, function)(ctypes.addressof(out)))
        return out.value or 0

    def tensor(self, dims: Sequence[int], strides: Sequence[int] | None = None) -> int:
        if strides is None:
            strides = [int(np.prod(dims[i + 1 :])) for i in range(len(dims))]
        desc = self.create("cudnnCreateTensorDescriptor")
        self.check(self.cudnnSetTensorNdDescriptor(desc, api.CUDNN_DATA_FLOAT, len(dims), self.ints(dims),
                                                   self.ints(strides)))
        return desc

    def filter(self, dims: Sequence[int]) -> int:
        desc = self.create("cudnnCreateFilterDescriptor")
        self.check(self.cudnnSetFilterNdDescriptor(desc, api.CUDNN_DATA_FLOAT, api.CUDNN_TENSOR_NCHW, len(dims),
                                                   self.ints(dims)))
        return desc

    def convolution(self, pads: Sequence[int], strides: Sequence[int], dilations: Sequence[int], groups: int) -> int:
        desc = self.create("cudnnCreateConvolutionDescriptor")
        self.check(self.cudnnSetConvolutionNdDescriptor(desc, len(pads), self.ints(pads), self.ints(strides),
                                                        self.ints(dilations), api.CUDNN_CROSS_CORRELATION,
                                                        api.CUDNN_DATA_FLOAT))
        self.check(self.cudnnSetConvolutionGroupCount(desc, groups))
        self.check(self.cudnnSetConvolutionMathType(desc, api.CUDNN_FMA_MATH))
        return desc


@pytest.fixture
def cuda() -> Cuda:
    return Cuda()


@pytest.fixture
def cudnn(cuda: Cuda) -> int:
    return cuda.create("cudnnCreate")


def random(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


# -- the symbol table -------------------------------------------------------------------


def test_every_api_function_has_a_distinct_callback() -> None:
    symbols = FakeCuda().symbols()
    assert set(symbols) == {function.name for function in api.FUNCTIONS}
    assert len(set(symbols.values())) == len(symbols) and all(symbols.values())


# -- convolution --------------------------------------------------------------------------


def _pick_algo(cuda: Cuda, cudnn: int, descs: tuple[int, int, int, int], limit: int) -> tuple[int, int]:
    """(algo, workspace bytes) of the first successful perf result that fits `limit`,
    reading the perf structs at cuda_api's offsets."""
    perf = ctypes.create_string_buffer(api.CONV_PERF_SIZE * api.CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
    returned = ctypes.c_int32()
    cuda.check(cuda.cudnnGetConvolutionForwardAlgorithm_v7(
        cudnn, *descs, api.CUDNN_CONVOLUTION_FWD_ALGO_COUNT, ctypes.addressof(returned), ctypes.addressof(perf)))
    raw = perf.raw
    for i in range(returned.value):
        base = i * api.CONV_PERF_SIZE
        algo = int.from_bytes(raw[base + api.CONV_PERF_ALGO : base + api.CONV_PERF_ALGO + 4], "little", signed=True)
        status = int.from_bytes(raw[base + api.CONV_PERF_STATUS : base + api.CONV_PERF_STATUS + 4], "little")
        memory = int.from_bytes(raw[base + api.CONV_PERF_MEMORY : base + api.CONV_PERF_MEMORY + 8], "little")
        if status == 0 and memory <= limit:
            return algo, memory
    raise AssertionError("no algorithm fits")


@pytest.mark.parametrize(
    ("shape", "kernel", "pads", "strides", "dilations", "groups"),
    [
        ((2, 4, 9, 8), (6, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1),
        ((1, 6, 11, 10), (4, 3, 3, 2), (2, 0), (2, 3), (2, 1), 2),
        ((2, 4, 7, 7), (4, 1, 3, 3), (1, 1), (2, 2), (1, 1), 4),
        ((1, 3, 8, 1), (5, 3, 3, 1), (1, 0), (2, 1), (1, 1), 1),  # a 1-d convolution, as cuDNN takes it
    ],
)
def test_convolution_forward_matches_onnxruntime(
    cuda: Cuda, cudnn: int, shape: tuple[int, ...], kernel: tuple[int, ...], pads: tuple[int, ...],
    strides: tuple[int, ...], dilations: tuple[int, ...], groups: int,
) -> None:
    x, w = random(*shape), random(*kernel)
    (expected,) = ort_run("Conv", {"x": x, "w": w},
                          {"pads": [*pads, *pads], "strides": strides, "dilations": dilations, "group": groups})
    descs = (cuda.tensor(shape), cuda.filter(kernel), cuda.convolution(pads, strides, dilations, groups),
             cuda.tensor(expected.shape))
    algo, memory = _pick_algo(cuda, cudnn, descs, limit=64 << 20)
    workspace = cuda.malloc(memory) if memory else 0
    x_dev, w_dev, y_dev = cuda.upload(x), cuda.upload(w), cuda.malloc(expected.nbytes)
    x_desc, w_desc, conv_desc, y_desc = descs
    # y is fresh (NaN-filled) device memory: beta == 0 must not read it
    cuda.check(cuda.cudnnConvolutionForward(cudnn, cuda.f32(1.0), x_desc, x_dev, w_desc, w_dev, conv_desc, algo,
                                            workspace, memory, cuda.f32(0.0), y_desc, y_dev))
    assert_close(cuda.download(y_dev, expected.shape), expected)
    # alpha/beta blend: y = 2 conv + 0.5 y
    cuda.check(cuda.cudnnConvolutionForward(cudnn, cuda.f32(2.0), x_desc, x_dev, w_desc, w_dev, conv_desc, algo,
                                            workspace, memory, cuda.f32(0.5), y_desc, y_dev))
    assert_close(cuda.download(y_dev, expected.shape), 2.5 * expected)
    assert cuda.fake.errors == [] and cuda.fake.uninitialised_reads == []


def _conv_setup(cuda: Cuda) -> tuple[tuple[int, int, int, int], dict[str, int], np.ndarray, np.ndarray]:
    x, w = random(1, 2, 5, 5), random(3, 2, 3, 3)
    descs = (cuda.tensor(x.shape), cuda.filter(w.shape), cuda.convolution((1, 1), (1, 1), (1, 1), 1),
             cuda.tensor((1, 3, 5, 5)))
    return descs, {"x": cuda.upload(x), "w": cuda.upload(w), "y": cuda.malloc(3 * 25 * 4)}, x, w


def test_beta_nonzero_reads_the_uninitialised_destination(cuda: Cuda, cudnn: int) -> None:
    (x_desc, w_desc, conv_desc, y_desc), dev, _, _ = _conv_setup(cuda)
    cuda.check(cuda.cudnnConvolutionForward(cudnn, cuda.f32(1.0), x_desc, dev["x"], w_desc, dev["w"], conv_desc, 0,
                                            0, 0, cuda.f32(1.0), y_desc, dev["y"]))
    assert np.isnan(cuda.download(dev["y"], (1, 3, 5, 5))).all()
    assert cuda.fake.uninitialised_reads == [
        "cudnnConvolutionForward: the destination (beta != 0) reads 75 of 75 elements never written since cudaMalloc"
    ]


def test_algorithm_whose_workspace_exceeds_the_given_size_fails(cuda: Cuda, cudnn: int) -> None:
    descs, dev, _, _ = _conv_setup(cuda)
    x_desc, w_desc, conv_desc, y_desc = descs
    # the heuristic's first choice is the fake's 1 GiB WINOGRAD_NONFUSED
    assert _pick_algo(cuda, cudnn, descs, limit=HUGE_WORKSPACE) == (7, HUGE_WORKSPACE)
    workspace = cuda.malloc(4096)
    status = cuda.cudnnConvolutionForward(cudnn, cuda.f32(1.0), x_desc, dev["x"], w_desc, dev["w"], conv_desc, 7,
                                          workspace, 4096, cuda.f32(0.0), y_desc, dev["y"])
    assert status == BAD_PARAM
    assert "algo 7 needs 1073741824 B of workspace; workSpaceSizeInBytes is 4096" in cuda.fake.errors[-1]
    # lying about the size does not help: the claimed workspace must exist
    status = cuda.cudnnConvolutionForward(cudnn, cuda.f32(1.0), x_desc, dev["x"], w_desc, dev["w"], conv_desc, 7,
                                          workspace, HUGE_WORKSPACE, cuda.f32(0.0), y_desc, dev["y"])
    assert status == BAD_PARAM and "workSpace" in cuda.fake.errors[-1]
    assert "not inside a live device allocation" in cuda.fake.errors[-1]


def test_output_dims_must_be_the_convolution_s(cuda: Cuda, cudnn: int) -> None:
    (x_desc, w_desc, conv_desc, _), dev, _, _ = _conv_setup(cuda)
    wrong_y = cuda.tensor((1, 3, 3, 3))
    status = cuda.cudnnConvolutionForward(cudnn, cuda.f32(1.0), x_desc, dev["x"], w_desc, dev["w"], conv_desc, 0,
                                          0, 0, cuda.f32(0.0), wrong_y, dev["y"])
    assert status == BAD_PARAM
    assert "yDesc dims [1, 3, 3, 3] differ from the convolution's output dims [1, 3, 5, 5]" in cuda.fake.errors[-1]


def test_tensor_core_math_is_visibly_less_precise(cuda: Cuda, cudnn: int) -> None:
    """Without CUDNN_FMA_MATH a float convolution runs in TF32 on recent GPUs: the fake
    rounds like it, so code that forgets the math type fails a 1e-4 comparison."""
    (x_desc, w_desc, conv_desc, y_desc), dev, x, w = _conv_setup(cuda)
    (expected,) = ort_run("Conv", {"x": x, "w": w}, {"pads": [1, 1, 1, 1]})
    cuda.check(cuda.cudnnSetConvolutionMathType(conv_desc, 0))  # CUDNN_DEFAULT_MATH
    cuda.check(cuda.cudnnConvolutionForward(cudnn, cuda.f32(1.0), x_desc, dev["x"], w_desc, dev["w"], conv_desc, 0,
                                            0, 0, cuda.f32(0.0), y_desc, dev["y"]))
    error = np.abs(cuda.download(dev["y"], expected.shape) - expected).max()
    assert 1e-4 < error < 1e-2


def test_conv_bias_activation_forward(cuda: Cuda, cudnn: int) -> None:
    (x_desc, w_desc, conv_desc, y_desc), dev, x, w = _conv_setup(cuda)
    bias, z = random(3), random(1, 3, 5, 5)
    (conv,) = ort_run("Conv", {"x": x, "w": w, "b": bias}, {"pads": [1, 1, 1, 1]})
    relu = cuda.create("cudnnCreateActivationDescriptor")
    cuda.check(cuda.cudnnSetActivationDescriptor(relu, 1, api.CUDNN_NOT_PROPAGATE_NAN, 0.0))
    bias_desc, bias_dev, z_dev = cuda.tensor((1, 3, 1, 1)), cuda.upload(bias), cuda.upload(z)
    cuda.check(cuda.cudnnConvolutionBiasActivationForward(
        cudnn, cuda.f32(1.0), x_desc, dev["x"], w_desc, dev["w"], conv_desc, 0, 0, 0, cuda.f32(0.5), y_desc, z_dev,
        bias_desc, bias_dev, relu, y_desc, dev["y"]))
    assert_close(cuda.download(dev["y"], conv.shape), np.maximum(conv + 0.5 * z, 0))
    # z may be y itself (a residual added in place)
    cuda.check(cuda.cudnnConvolutionBiasActivationForward(
        cudnn, cuda.f32(1.0), x_desc, dev["x"], w_desc, dev["w"], conv_desc, 0, 0, 0, cuda.f32(1.0), y_desc,
        dev["y"], bias_desc, bias_dev, relu, y_desc, dev["y"]))
    assert_close(cuda.download(dev["y"], conv.shape), np.maximum(conv + np.maximum(conv + 0.5 * z, 0), 0))
    # IDENTITY works with IMPLICIT_PRECOMP_GEMM only, as documented
    identity = cuda.create("cudnnCreateActivationDescriptor")
    cuda.check(cuda.cudnnSetActivationDescriptor(identity, 5, api.CUDNN_NOT_PROPAGATE_NAN, 0.0))
    status = cuda.cudnnConvolutionBiasActivationForward(
        cudnn, cuda.f32(1.0), x_desc, dev["x"], w_desc, dev["w"], conv_desc, 0, 0, 0, cuda.f32(0.0), y_desc,
        dev["y"], bias_desc, bias_dev, identity, y_desc, dev["y"])
    assert status == NOT_SUPPORTED and "IMPLICIT_PRECOMP_GEMM" in cuda.fake.errors[-1]


def test_output_overlapping_an_input_is_reported_but_disjoint_slices_are_not(cuda: Cuda, cudnn: int) -> None:
    """A channel slice of a concatenation buffer is interleaved with the other slices
    (N > 1) without sharing an element: that must pass; a shifted alias must not."""
    x = random(2, 2, 4, 4)
    relu = cuda.create("cudnnCreateActivationDescriptor")
    cuda.check(cuda.cudnnSetActivationDescriptor(relu, 1, api.CUDNN_NOT_PROPAGATE_NAN, 0.0))
    concat = cuda.upload(np.concatenate([x, np.zeros_like(x)], axis=1))  # (2, 4, 4, 4)
    slice_strides = (64, 16, 4, 1)
    first, second = cuda.tensor((2, 2, 4, 4), slice_strides), cuda.tensor((2, 2, 4, 4), slice_strides)
    cuda.check(cuda.cudnnActivationForward(cudnn, relu, cuda.f32(1.0), first, concat, cuda.f32(0.0), second,
                                           concat + 2 * 16 * 4))
    assert_close(cuda.download(concat, (2, 4, 4, 4))[:, 2:], np.maximum(x, 0))
    status = cuda.cudnnActivationForward(cudnn, relu, cuda.f32(1.0), first, concat, cuda.f32(0.0), second,
                                         concat + 4)
    assert status == BAD_PARAM and "output y overlaps input x" in cuda.fake.errors[-1]


# -- pooling, softmax, LRN, batch norm ---------------------------------------------------


@pytest.mark.parametrize(("onnx_op", "mode", "attrs"), [
    ("MaxPool", api.POOLING_MAX, {}),
    ("AveragePool", api.POOLING_AVERAGE_EXCLUDE_PAD, {"count_include_pad": 0}),
])
def test_pooling_with_asymmetric_pads_and_ceil_mode(
    cuda: Cuda, cudnn: int, onnx_op: str, mode: int, attrs: dict[str, int]
) -> None:
    """ONNX pads [begin 1, end 2] with ceil_mode map onto cuDNN's symmetric padding 1
    and a larger y: only n and c of x and y must agree."""
    x = random(2, 3, 7, 8)
    (expected,) = ort_run(onnx_op, {"x": x}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 2, 1],
                                             "ceil_mode": 1, **attrs})
    pool = cuda.create("cudnnCreatePoolingDescriptor")
    cuda.check(cuda.cudnnSetPoolingNdDescriptor(pool, mode, api.CUDNN_NOT_PROPAGATE_NAN, 2, cuda.ints([3, 3]),
                                                cuda.ints([1, 0]), cuda.ints([2, 2])))
    y = cuda.malloc(expected.nbytes)
    cuda.check(cuda.cudnnPoolingForward(cudnn, pool, cuda.f32(1.0), cuda.tensor(x.shape), cuda.upload(x),
                                        cuda.f32(0.0), cuda.tensor(expected.shape), y))
    assert_close(cuda.download(y, expected.shape), expected)


def test_average_pooling_including_padding(cuda: Cuda, cudnn: int) -> None:
    """ceil_mode adds a last window that runs past the padding: it divides by the
    cells inside [-pad, size + pad) only (2 x 2 at the corner, not 3 x 3)."""
    x = random(1, 2, 6, 6)
    (expected,) = ort_run("AveragePool", {"x": x}, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                                                    "pads": [1, 1, 1, 1], "count_include_pad": 1})
    assert expected.shape == (1, 2, 4, 4)
    pool = cuda.create("cudnnCreatePoolingDescriptor")
    cuda.check(cuda.cudnnSetPoolingNdDescriptor(pool, api.POOLING_AVERAGE_INCLUDE_PAD, 0, 2, cuda.ints([3, 3]),
                                                cuda.ints([1, 1]), cuda.ints([2, 2])))
    y = cuda.malloc(expected.nbytes)
    cuda.check(cuda.cudnnPoolingForward(cudnn, pool, cuda.f32(1.0), cuda.tensor(x.shape), cuda.upload(x),
                                        cuda.f32(0.0), cuda.tensor(expected.shape), y))
    assert_close(cuda.download(y, expected.shape), expected)


@pytest.mark.parametrize(("algo", "onnx_op"), [(api.SOFTMAX_ACCURATE, "Softmax"), (api.SOFTMAX_LOG, "LogSoftmax")])
def test_softmax_over_channels(cuda: Cuda, cudnn: int, algo: int, onnx_op: str) -> None:
    x = random(2, 5, 3, 1)
    (expected,) = ort_run(onnx_op, {"x": x}, {"axis": 1})
    desc, x_dev = cuda.tensor(x.shape), cuda.upload(x)
    # in place: y is x
    cuda.check(cuda.cudnnSoftmaxForward(cudnn, algo, api.SOFTMAX_MODE_CHANNEL, cuda.f32(1.0), desc, x_dev,
                                        cuda.f32(0.0), desc, x_dev))
    assert_close(cuda.download(x_dev, x.shape), expected)


def test_lrn_cross_channel(cuda: Cuda, cudnn: int) -> None:
    x = random(2, 7, 3, 3)
    (expected,) = ort_run("LRN", {"x": x}, {"size": 5, "alpha": 0.3, "beta": 0.75, "bias": 1.5})
    lrn = cuda.create("cudnnCreateLRNDescriptor")
    cuda.check(cuda.cudnnSetLRNDescriptor(lrn, 5, 0.3, 0.75, 1.5))
    y = cuda.malloc(x.nbytes)
    cuda.check(cuda.cudnnLRNCrossChannelForward(cudnn, lrn, api.LRN_CROSS_CHANNEL_DIM1, cuda.f32(1.0),
                                                cuda.tensor(x.shape), cuda.upload(x), cuda.f32(0.0),
                                                cuda.tensor(x.shape), y))
    assert_close(cuda.download(y, x.shape), expected)


def test_lrn_window_of_even_size(cuda: Cuda, cudnn: int) -> None:
    """cuDNN's window for channel c is [c - lookBehind, c + lookAhead] with lookBehind =
    floor((n-1)/2), lookAhead = n - lookBehind - 1 (onnxruntime takes odd sizes only)."""
    x, size, alpha, beta, k = random(1, 6, 2, 2), 4, 0.5, 0.75, 1.0
    expected = np.empty_like(x)
    for c in range(6):
        window = x[:, max(0, c - 1) : c + 3]  # lookBehind 1, lookAhead 2
        expected[:, c] = x[:, c] / (k + alpha / size * (window**2).sum(axis=1)) ** beta
    lrn = cuda.create("cudnnCreateLRNDescriptor")
    cuda.check(cuda.cudnnSetLRNDescriptor(lrn, size, alpha, beta, k))
    y = cuda.malloc(x.nbytes)
    cuda.check(cuda.cudnnLRNCrossChannelForward(cudnn, lrn, api.LRN_CROSS_CHANNEL_DIM1, cuda.f32(1.0),
                                                cuda.tensor(x.shape), cuda.upload(x), cuda.f32(0.0),
                                                cuda.tensor(x.shape), y))
    assert_close(cuda.download(y, x.shape), expected)


def test_batch_norm_inference(cuda: Cuda, cudnn: int) -> None:
    x, scale, bias, mean = random(2, 3, 4, 4), random(3), random(3), random(3)
    variance = RNG.uniform(0.5, 2.0, 3).astype(np.float32)
    (expected,) = ort_run("BatchNormalization", {"x": x, "s": scale, "b": bias, "m": mean, "v": variance},
                          {"epsilon": 1e-3})
    params = cuda.tensor((1, 3, 1, 1))
    y = cuda.malloc(x.nbytes)
    cuda.check(cuda.cudnnBatchNormalizationForwardInference(
        cudnn, api.BATCHNORM_SPATIAL, cuda.f32(1.0), cuda.f32(0.0), cuda.tensor(x.shape), cuda.upload(x),
        cuda.tensor(x.shape), y, params, cuda.upload(scale), cuda.upload(bias), cuda.upload(mean),
        cuda.upload(variance), 1e-3))
    assert_close(cuda.download(y, x.shape), expected)


def test_an_exception_inside_a_routine_becomes_an_error_status(
    cuda: Cuda, cudnn: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> np.ndarray:
        raise FloatingPointError("overflow")

    monkeypatch.setattr("pyocc.testing.fake_cuda.fm.softmax", broken)
    desc, x = cuda.tensor((1, 2, 1, 1)), cuda.upload(random(2))
    status = cuda.cudnnSoftmaxForward(cudnn, 1, 1, cuda.f32(1.0), desc, x, cuda.f32(0.0), desc, x)
    assert status == 5000  # CUDNN_STATUS_EXECUTION_FAILED
    assert cuda.fake.errors == [
        "cudnnSoftmaxForward: failed in the fake's computation (FloatingPointError: overflow)"
        " -> CUDNN_STATUS_EXECUTION_FAILED (5000)"
    ]


def test_identity_activation_is_rejected_by_activation_forward(cuda: Cuda, cudnn: int) -> None:
    identity = cuda.create("cudnnCreateActivationDescriptor")
    cuda.check(cuda.cudnnSetActivationDescriptor(identity, 5, 0, 0.0))
    desc, x = cuda.tensor((1, 2, 2, 2)), cuda.upload(random(1, 2, 2, 2))
    status = cuda.cudnnActivationForward(cudnn, identity, cuda.f32(1.0), desc, x, cuda.f32(0.0), desc, x)
    assert status == BAD_PARAM


# -- tensor arithmetic --------------------------------------------------------------------


def test_transform_tensor_transposes_through_strides(cuda: Cuda, cudnn: int) -> None:
    x = random(2, 3, 4, 5)
    y = cuda.malloc(x.nbytes)
    # y's dims are x's, its strides lay it out as (n, h, w, c): an NCHW -> NHWC transpose
    nhwc_strides = (4 * 5 * 3, 1, 5 * 3, 3)
    cuda.check(cuda.cudnnTransformTensor(cudnn, cuda.f32(1.0), cuda.tensor(x.shape), cuda.upload(x), cuda.f32(0.0),
                                         cuda.tensor(x.shape, nhwc_strides), y))
    np.testing.assert_array_equal(cuda.download(y, (2, 4, 5, 3)), x.transpose(0, 2, 3, 1))


@pytest.mark.parametrize(("op", "combine"), [("add", np.add), ("mul", np.multiply), ("max", np.maximum),
                                             ("min", np.minimum)])
def test_op_tensor_broadcasts_b_and_may_write_over_a(cuda: Cuda, cudnn: int, op: str, combine: Any) -> None:
    a, b = random(2, 3, 4, 5), random(1, 3, 1, 5)
    desc = cuda.create("cudnnCreateOpTensorDescriptor")
    cuda.check(cuda.cudnnSetOpTensorDescriptor(desc, api.OP_TENSOR_OPS[op], api.CUDNN_DATA_FLOAT, 0))
    a_desc, a_dev = cuda.tensor(a.shape), cuda.upload(a)
    cuda.check(cuda.cudnnOpTensor(cudnn, desc, cuda.f32(2.0), a_desc, a_dev, cuda.f32(-1.0), cuda.tensor(b.shape),
                                  cuda.upload(b), cuda.f32(0.0), a_desc, a_dev))
    assert_close(cuda.download(a_dev, a.shape), combine(2 * a, -b))


def test_add_tensor_broadcasts_a_bias(cuda: Cuda, cudnn: int) -> None:
    bias, c = random(1, 3, 1, 1), random(2, 3, 2, 2)
    c_dev = cuda.upload(c)
    cuda.check(cuda.cudnnAddTensor(cudnn, cuda.f32(1.0), cuda.tensor(bias.shape), cuda.upload(bias), cuda.f32(1.0),
                                   cuda.tensor(c.shape), c_dev))
    assert_close(cuda.download(c_dev, c.shape), c + bias)
    status = cuda.cudnnAddTensor(cudnn, cuda.f32(1.0), cuda.tensor((1, 2, 1, 1)), cuda.upload(random(2)),
                                 cuda.f32(1.0), cuda.tensor(c.shape), c_dev)
    assert status == BAD_PARAM and "do not broadcast" in cuda.fake.errors[-1]


# -- cuBLAS ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("transa", "transb"), [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_sgemm_is_column_major(cuda: Cuda, transa: int, transb: int) -> None:
    m, n, k = 5, 4, 3
    op_a, op_b, c = random(m, k), random(k, n), random(m, n)
    # column-major storage of A (m x k) is the row-major bytes of A^T; lda adds 2 rows of slack
    stored_a = op_a if transa else op_a.T  # row-major (cols, rows) of the stored matrix
    stored_b = op_b if transb else op_b.T
    lda, ldb, ldc = stored_a.shape[1] + 2, stored_b.shape[1] + 1, m + 3
    padded = [np.pad(s, [(0, 0), (0, ld - s.shape[1])]) for s, ld in ((stored_a, lda), (stored_b, ldb), (c.T, ldc))]
    handle = cuda.create("cublasCreate_v2")
    cuda.check(cuda.cublasSetMathMode(handle, api.CUBLAS_PEDANTIC_MATH))
    a_dev, b_dev, c_dev = (cuda.upload(p) for p in padded)
    cuda.check(cuda.cublasSgemm_v2(handle, transa, transb, m, n, k, cuda.f32(1.5), a_dev, lda, b_dev, ldb,
                                   cuda.f32(-1.0), c_dev, ldc))
    result = cuda.download(c_dev, (n, ldc))[:, :m].T
    assert_close(result, 1.5 * op_a @ op_b - c)
    status = cuda.cublasSgemm_v2(handle, transa, transb, m, n, k, cuda.f32(1.0), a_dev, lda, b_dev, ldb,
                                 cuda.f32(0.0), c_dev, m - 1)
    assert status == CUBLAS_INVALID_VALUE and "ldc" in cuda.fake.errors[-1]


def test_strided_batched_gemm_broadcasts_a_zero_stride(cuda: Cuda) -> None:
    batch, m, n, k = 3, 4, 2, 5
    a, b = random(m, k), random(batch, k, n)
    handle = cuda.create("cublasCreate_v2")
    # column-major A (m x k) is A^T row-major; B_i likewise; C_i (m x n) comes back as C_i^T
    a_dev, b_dev = cuda.upload(a.T), cuda.upload(b.transpose(0, 2, 1))
    c_dev = cuda.malloc(batch * m * n * 4)
    cuda.check(cuda.cublasSgemmStridedBatched(handle, 0, 0, m, n, k, cuda.f32(1.0), a_dev, m, 0, b_dev, k, k * n,
                                              cuda.f32(0.0), c_dev, m, m * n, batch))
    assert_close(cuda.download(c_dev, (batch, n, m)).transpose(0, 2, 1), a @ b)
    # every C_i written to one place is an overlapping output
    status = cuda.cublasSgemmStridedBatched(handle, 0, 0, m, n, k, cuda.f32(1.0), a_dev, m, 0, b_dev, k, k * n,
                                            cuda.f32(0.0), c_dev, m, 0, batch)
    assert status == CUBLAS_INVALID_VALUE and "overlap" in cuda.fake.errors[-1]


# -- memory and object contracts ---------------------------------------------------------------


def test_extent_one_byte_past_an_allocation_is_reported(cuda: Cuda, cudnn: int) -> None:
    desc = cuda.tensor((1, 1, 4, 256))  # 4096 B
    x = cuda.malloc(4096)
    y = cuda.malloc(4095)
    relu = cuda.create("cudnnCreateActivationDescriptor")
    cuda.check(cuda.cudnnSetActivationDescriptor(relu, 1, 0, 0.0))
    status = cuda.cudnnActivationForward(cudnn, relu, cuda.f32(1.0), desc, x, cuda.f32(0.0), desc, y)
    assert status == BAD_PARAM
    assert cuda.fake.errors[-1].startswith(
        f"cudnnActivationForward: y [{y:#x}, +4096 B) is not inside a live device allocation"
    )
    assert "runs 1 B past its end" in cuda.fake.errors[-1]


def test_use_after_free_is_reported(cuda: Cuda) -> None:
    data = random(64)
    address = cuda.upload(data)
    cuda.check(cuda.cudaFree(address))
    status = cuda.cudaMemcpy(data.ctypes.data, address, data.nbytes, D2H)
    assert status == 1 and "freed by cudaFree" in cuda.fake.errors[-1]
    assert cuda.cudaFree(address) == 1 and "already freed" in cuda.fake.errors[-1]


def test_copy_directions_are_checked(cuda: Cuda) -> None:
    data = random(16)
    address = cuda.upload(data)
    # a device pointer where the kind says host
    assert cuda.cudaMemcpy(address, data.ctypes.data, data.nbytes, D2H) == 1
    assert "where a host pointer is expected" in cuda.fake.errors[-1]
    rows = np.zeros((3, 4), dtype=np.float32)
    stream = cuda.create("cudaStreamCreate")
    # rows of 8 B out of a 16 B pitch: the first two floats of each group of four
    cuda.check(cuda.cudaMemcpy2DAsync(rows.ctypes.data, 16, address, 16, 8, 3, D2H, stream))
    cuda.check(cuda.cudaStreamSynchronize(stream))
    np.testing.assert_array_equal(rows[:, :2], data[:12].reshape(3, 4)[:, :2])
    np.testing.assert_array_equal(rows[:, 2:], 0)
    cuda.check(cuda.cudaStreamDestroy(stream))
    assert cuda.cudaStreamSynchronize(stream) == 1 and "destroyed stream" in cuda.fake.errors[-1]


def test_a_library_handle_must_not_outlive_its_stream(cuda: Cuda) -> None:
    stream, handle = cuda.create("cudaStreamCreate"), cuda.create("cublasCreate_v2")
    cuda.check(cuda.cublasSetStream_v2(handle, stream))
    cuda.check(cuda.cudaStreamDestroy(stream))
    c = cuda.malloc(16)
    status = cuda.cublasSgemm_v2(handle, 0, 0, 2, 2, 0, cuda.f32(1.0), 0, 2, 0, 2, cuda.f32(0.0), c, 2)
    assert status == 1 and "the handle's stream" in cuda.fake.errors[-1]  # CUBLAS_STATUS_NOT_INITIALIZED
    cuda.check(cuda.cublasSetStream_v2(handle, 0))
    cuda.check(cuda.cublasSgemm_v2(handle, 0, 0, 2, 2, 0, cuda.f32(1.0), 0, 2, 0, 2, cuda.f32(0.0), c, 2))
    np.testing.assert_array_equal(cuda.download(c, (4,)), 0)  # k == 0: C = beta C, A and B unread


def test_leaks_and_memory_counters(cuda: Cuda) -> None:
    assert cuda.fake.leaks() == []
    desc = cuda.create("cudnnCreateTensorDescriptor")
    address = cuda.malloc(1000)
    assert cuda.fake.live_bytes == cuda.fake.peak_bytes == 1000
    leaks = cuda.fake.leaks()
    assert len(leaks) == 2 and "1000 B" in leaks[0] and f"tensor descriptor {desc:#x}" in leaks[1]
    cuda.check(cuda.cudaFree(address))
    cuda.check(cuda.cudnnDestroyTensorDescriptor(desc))
    assert cuda.fake.leaks() == [] and cuda.fake.live_bytes == 0 and cuda.fake.peak_bytes == 1000
    assert cuda.fake.calls["cudaMalloc"] == 1
    cuda.fake.reset_counts()
    assert cuda.fake.calls == {} and cuda.fake.peak_bytes == 0


def test_descriptors_must_be_set_live_and_of_the_right_kind(cuda: Cuda, cudnn: int) -> None:
    unset = cuda.create("cudnnCreateTensorDescriptor")
    filter_desc = cuda.filter((1, 1, 1, 1))
    x = cuda.upload(random(4))
    for desc, message in ((unset, "never set"), (filter_desc, "is a filter descriptor, not a tensor descriptor")):
        status = cuda.cudnnTransformTensor(cudnn, cuda.f32(1.0), desc, x, cuda.f32(0.0), desc, x)
        assert status == BAD_PARAM and message in cuda.fake.errors[-1]
    cuda.check(cuda.cudnnDestroy(cudnn))
    desc = cuda.tensor((1, 1, 2, 2))
    assert cuda.cudnnTransformTensor(cudnn, cuda.f32(1.0), desc, x, cuda.f32(0.0), desc, x) == BAD_PARAM
    assert "destroyed cuDNN handle" in cuda.fake.errors[-1]
    # fewer than 3 dims: cuDNN rejects them
    assert cuda.cudnnSetTensorNdDescriptor(unset, 0, 2, cuda.ints([2, 2]), cuda.ints([2, 1])) == BAD_PARAM


# -- a whole network, the way generated code drives the libraries --------------------------


def _small_network() -> tuple[Any, dict[str, np.ndarray]]:
    """Conv(+bias) -> Relu -> MaxPool -> Flatten -> Gemm(transB) -> Softmax, random weights."""
    from onnx import helper, numpy_helper

    weights = {"w": random(4, 3, 3, 3), "b": random(4), "w2": random(10, 64), "b2": random(10)}
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", 1, (1, 3, 8, 8))],
        [helper.make_tensor_value_info("y", 1, (1, 10))],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model, weights


def test_a_small_network_in_one_pool_matches_onnxruntime(cuda: Cuda) -> None:
    """One cudaMalloc'd pool at 256-byte aligned offsets; cuDNN for the convolutional
    part; the row-major Gemm as the column-major product Y^T = W2 X^T (cuBLAS T, N)."""
    ort = pytest.importorskip("onnxruntime")
    model, weights = _small_network()
    x = random(1, 3, 8, 8)
    (expected,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    sizes = {"x": 192, "w": 108, "b": 4, "w2": 640, "b2": 10, "conv": 256, "pool": 64, "fc": 10}
    offsets, total = {}, 0
    for name, count in sizes.items():
        offsets[name], total = total, total + -(-count * 4 // 256) * 256
    pool = cuda.malloc(total)
    at = {name: pool + offset for name, offset in offsets.items()}
    for name, value in {"x": x, **weights}.items():
        cuda.check(cuda.cudaMemcpy(at[name], value.ctypes.data, value.nbytes, H2D))
    cudnn, cublas = cuda.create("cudnnCreate"), cuda.create("cublasCreate_v2")
    cuda.check(cuda.cublasSetMathMode(cublas, api.CUBLAS_PEDANTIC_MATH))
    x_desc, w_desc = cuda.tensor((1, 3, 8, 8)), cuda.filter((4, 3, 3, 3))
    conv_desc, conv_out = cuda.convolution((1, 1), (1, 1), (1, 1), 1), cuda.tensor((1, 4, 8, 8))
    bias_desc, relu = cuda.tensor((1, 4, 1, 1)), cuda.create("cudnnCreateActivationDescriptor")
    cuda.check(cuda.cudnnSetActivationDescriptor(relu, 1, api.CUDNN_NOT_PROPAGATE_NAN, 0.0))
    one, zero = cuda.f32(1.0), cuda.f32(0.0)
    cuda.check(cuda.cudnnConvolutionBiasActivationForward(
        cudnn, one, x_desc, at["x"], w_desc, at["w"], conv_desc, 0, 0, 0, zero, conv_out, at["conv"], bias_desc,
        at["b"], relu, conv_out, at["conv"]))
    pooling, pool_out = cuda.create("cudnnCreatePoolingDescriptor"), cuda.tensor((1, 4, 4, 4))
    cuda.check(cuda.cudnnSetPoolingNdDescriptor(pooling, api.POOLING_MAX, 0, 2, cuda.ints([2, 2]),
                                                cuda.ints([0, 0]), cuda.ints([2, 2])))
    cuda.check(cuda.cudnnPoolingForward(cudnn, pooling, one, conv_out, at["conv"], zero, pool_out, at["pool"]))
    cuda.check(cuda.cublasSgemm_v2(cublas, api.CUBLAS_OP_T, api.CUBLAS_OP_N, 10, 1, 64, one, at["w2"], 64,
                                   at["pool"], 64, zero, at["fc"], 10))
    fc_desc = cuda.tensor((1, 10, 1, 1))
    cuda.check(cuda.cudnnAddTensor(cudnn, one, fc_desc, at["b2"], one, fc_desc, at["fc"]))
    cuda.check(cuda.cudnnSoftmaxForward(cudnn, api.SOFTMAX_ACCURATE, api.SOFTMAX_MODE_CHANNEL, one, fc_desc,
                                        at["fc"], zero, fc_desc, at["fc"]))
    assert_close(cuda.download(at["fc"], (1, 10)), expected)
    assert cuda.fake.errors == [] and cuda.fake.uninitialised_reads == []
    assert cuda.fake.peak_bytes == total
    tensors = [("cudnnDestroyTensorDescriptor", d) for d in (x_desc, conv_out, bias_desc, pool_out, fc_desc)]
    for destroy, obj in tensors + [
        ("cudnnDestroyFilterDescriptor", w_desc), ("cudnnDestroyConvolutionDescriptor", conv_desc),
        ("cudnnDestroyActivationDescriptor", relu), ("cudnnDestroyPoolingDescriptor", pooling),
        ("cudnnDestroy", cudnn), ("cublasDestroy_v2", cublas), ("cudaFree", pool),
    ]:
        cuda.check(getattr(cuda, destroy)(obj))
    assert cuda.fake.leaks() == []


# -- backward data: what ONNX calls ConvTranspose ---------------------------------------------


def _ranked_backward_data_algos(cuda: Cuda, cudnn: int, descs: tuple[int, int, int, int]) -> list[tuple[int, int, int]]:
    """(algo, status, workspace bytes) of every perf result, best first, read at cuda_api's offsets
    (cudnnConvolutionBwdDataAlgoPerf_t has the forward struct's layout)."""
    count = api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
    perf = ctypes.create_string_buffer(api.CONV_PERF_SIZE * count)
    returned = ctypes.c_int32()
    cuda.check(cuda.cudnnGetConvolutionBackwardDataAlgorithm_v7(
        cudnn, *descs, count, ctypes.addressof(returned), ctypes.addressof(perf)))
    raw, results = perf.raw, []
    for i in range(returned.value):
        base = i * api.CONV_PERF_SIZE
        field = lambda offset, size: int.from_bytes(raw[base + offset : base + offset + size], "little")  # noqa: E731
        results.append((field(api.CONV_PERF_ALGO, 4), field(api.CONV_PERF_STATUS, 4), field(api.CONV_PERF_MEMORY, 8)))
    return results


@pytest.mark.parametrize(
    ("shape", "kernel", "attrs", "cudnn_pads"),
    [
        ((1, 4, 5, 5), (4, 3, 2, 2), {"strides": [2, 2]}, (0, 0)),
        # output_padding only grows dx: its forward output size is still dy's
        ((2, 4, 5, 4), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, (1, 1)),
        ((1, 4, 5, 4), (4, 2, 3, 3), {"strides": [2, 1], "dilations": [1, 2], "group": 2, "pads": [1, 1, 1, 1]},
         (1, 1)),
        # asymmetric pads [1, 0] + [0, 0] with stride 2: cuDNN pad 1 on a dx one cell shorter
        ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 0]}, (1, 0)),
        ((1, 3, 5, 5), (3, 4, 3, 3), {"pads": [1, 1, 1, 1]}, (1, 1)),  # WINOGRAD's case: 3x3, stride 1
    ],
)
def test_backward_data_is_onnx_conv_transpose(
    cuda: Cuda, cudnn: int, shape: tuple[int, ...], kernel: tuple[int, ...], attrs: dict[str, list[int]],
    cudnn_pads: tuple[int, int],
) -> None:
    """ConvTranspose(x, w) is the data gradient of the convolution from a y-shaped
    tensor to an x-shaped one: dy is x, dx is y, w keeps its layout."""
    x, w = random(*shape), random(*kernel)
    (expected,) = ort_run("ConvTranspose", {"x": x, "w": w}, attrs)
    spatial = len(shape) - 2
    conv = cuda.convolution(cudnn_pads, attrs.get("strides", [1] * spatial), attrs.get("dilations", [1] * spatial),
                            attrs.get("group", 1))
    w_desc, dy_desc, dx_desc = cuda.filter(kernel), cuda.tensor(shape), cuda.tensor(expected.shape)
    ranked = _ranked_backward_data_algos(cuda, cudnn, (w_desc, dy_desc, conv, dx_desc))
    usable = [(algo, memory) for algo, status, memory in ranked if status == 0]
    assert (api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, 0) in usable  # the fallback needs no workspace
    w_dev, dy_dev, dx_dev = cuda.upload(w), cuda.upload(x), cuda.malloc(expected.nbytes)
    for algo, memory in usable:
        if memory > 64 << 20:
            continue
        workspace = cuda.malloc(memory) if memory else 0
        # dx is NaN-filled the first time: beta == 0 must not read it
        cuda.check(cuda.cudnnConvolutionBackwardData(cudnn, cuda.f32(1.0), w_desc, w_dev, dy_desc, dy_dev, conv, algo,
                                                     workspace, memory, cuda.f32(0.0), dx_desc, dx_dev))
        assert_close(cuda.download(dx_dev, expected.shape), expected)
    cuda.check(cuda.cudnnConvolutionBackwardData(cudnn, cuda.f32(2.0), w_desc, w_dev, dy_desc, dy_dev, conv, 0, 0, 0,
                                                 cuda.f32(0.5), dx_desc, dx_dev))
    assert_close(cuda.download(dx_dev, expected.shape), 2.5 * expected)
    assert cuda.fake.errors == [] and cuda.fake.uninitialised_reads == []


def test_backward_data_checks_its_descriptors_workspace_and_overlap(cuda: Cuda, cudnn: int) -> None:
    x, w = random(1, 2, 3, 3), random(2, 3, 2, 2)
    conv = cuda.convolution((0, 0), (2, 2), (1, 1), 1)
    w_desc, dy_desc, dx_desc = cuda.filter(w.shape), cuda.tensor(x.shape), cuda.tensor((1, 3, 6, 6))
    w_dev, dy_dev, dx_dev = cuda.upload(w), cuda.upload(x), cuda.malloc(3 * 36 * 4)
    ranked = _ranked_backward_data_algos(cuda, cudnn, (w_desc, dy_desc, conv, dx_desc))
    assert ranked[0] == (5, 0, HUGE_WORKSPACE)  # the fake's 1 GiB WINOGRAD_NONFUSED comes first
    algo_1 = api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_1

    def call(dx_desc: int = dx_desc, dx: int = dx_dev, algo: int = 0, workspace: int = 0, size: int = 0) -> int:
        return cuda.cudnnConvolutionBackwardData(cudnn, cuda.f32(1.0), w_desc, w_dev, dy_desc, dy_dev, conv, algo,
                                                 workspace, size, cuda.f32(0.0), dx_desc, dx)

    assert call(dx_desc=cuda.tensor((1, 3, 8, 8)), dx=cuda.malloc(3 * 64 * 4)) == BAD_PARAM
    assert "dyDesc dims [1, 2, 3, 3] differ from the convolution's output dims [1, 2, 4, 4]" in cuda.fake.errors[-1]
    assert call(algo=algo_1) == BAD_PARAM
    assert "algo 1 needs 96 B of workspace; workSpaceSizeInBytes is 0" in cuda.fake.errors[-1]
    assert call(algo=2) == NOT_SUPPORTED  # FFT: its perf status said so
    assert call(algo=6) == BAD_PARAM and "not a cudnnConvolutionBwdDataAlgo_t" in cuda.fake.errors[-1]
    # dx written over dy: the fake reports what cuDNN leaves undefined
    overlapping = cuda.malloc(3 * 36 * 4)
    cuda.check(cuda.cudaMemcpy(overlapping, x.ctypes.data, x.nbytes, H2D))
    status = cuda.cudnnConvolutionBackwardData(cudnn, cuda.f32(1.0), w_desc, w_dev, dy_desc, overlapping, conv, 0,
                                               0, 0, cuda.f32(0.0), dx_desc, overlapping)
    assert status == BAD_PARAM and "output dx overlaps input dy" in cuda.fake.errors[-1]
    assert call(algo=algo_1, workspace=cuda.malloc(96), size=96) == 0

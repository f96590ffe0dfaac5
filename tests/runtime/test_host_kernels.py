"""Host kernels against onnxruntime, one single-node ONNX model per case.

Every kernel writes into an ``out`` pre-filled with garbage (NaN or random
values), so a kernel that reads ``out`` before writing it, or leaves part of
it unwritten, fails. In-place cases pass an input as ``out``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from pyocc.runtime import host_kernels as hk  # noqa: E402
from pyocc.runtime.kernels.elementwise import erf  # noqa: E402

F32 = np.float32
INT64_MAX = np.iinfo(np.int64).max


def ort_run(
    op_type: str,
    inputs: Mapping[str, np.ndarray | None],
    attrs: Mapping[str, object] | None = None,
    outputs: Mapping[str, type | np.dtype] | None = None,
    opset: int = 18,
) -> list[np.ndarray]:
    """Run one ONNX node in onnxruntime (CPU) and return its outputs.

    ``inputs`` maps names to arrays in the node's input order; None marks an
    absent optional input. ``outputs`` maps output names to dtypes (default:
    one float32 output ``y``); shapes are left to onnxruntime to infer.
    """
    outputs = dict(outputs or {"y": F32})
    inputs = {name: None if value is None else np.asarray(value) for name, value in inputs.items()}
    # Absent trailing inputs are left out rather than named "" (onnxruntime
    # crashes on some ops, e.g. LayerNormalization, given an empty trailing name).
    while inputs and list(inputs.values())[-1] is None:
        inputs.popitem()
    node = helper.make_node(
        op_type,
        [name if value is not None else "" for name, value in inputs.items()],
        list(outputs),
        **dict(attrs or {}),
    )
    graph = helper.make_graph(
        [node],
        f"single_{op_type}",
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
            for name, value in inputs.items()
            if value is not None
        ],
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None)
            for name, dtype in outputs.items()
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {name: value for name, value in inputs.items() if value is not None}
    return session.run(None, feeds)


def garbage(shape: Sequence[int], dtype: type | np.dtype) -> np.ndarray:
    """An ``out`` buffer full of stale-looking data: NaN for floats, noise otherwise."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.full(shape, np.nan, dtype=dtype)
    noise = np.random.default_rng(99).integers(-50, 50, size=shape)
    return noise.astype(dtype)


def assert_matches(got: np.ndarray, want: np.ndarray) -> None:
    """Close for floats, exact for ints and bools; shape and dtype must agree."""
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)


def run_kernel(kernel: Callable[..., None], want: np.ndarray, *args: object, **kwargs: object) -> np.ndarray:
    """Call ``kernel`` with a garbage ``out`` shaped like ``want`` and return it."""
    out = garbage(want.shape, want.dtype)
    result = kernel(*args, out=out, **kwargs)
    assert result is None, "kernels write into out and return nothing"
    return out


def randn(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Standard-normal float32 data."""
    return rng.standard_normal(shape).astype(F32)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(2024)


# ---------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------

CONV_CASES = [
    pytest.param((1, 8, 10, 10), (16, 8, 3, 3), dict(pads=[1, 1, 1, 1]), id="3x3-pad1"),
    pytest.param((2, 4, 11, 9), (6, 4, 3, 3), dict(strides=[2, 2], pads=[1, 0, 0, 1]), id="stride2-asym-pads"),
    pytest.param((1, 4, 12, 12), (5, 4, 3, 3), dict(dilations=[2, 2], pads=[2, 2, 2, 2]), id="dilated"),
    pytest.param((1, 8, 9, 9), (6, 4, 3, 3), dict(group=2, pads=[1, 1, 1, 1]), id="grouped"),
    pytest.param((1, 6, 9, 9), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1], strides=[2, 2]), id="depthwise-s2"),
    pytest.param((2, 4, 7, 7), (8, 1, 3, 3), dict(group=4, pads=[1, 1, 1, 1]), id="depthwise-multiplier2"),
    pytest.param((1, 5, 10, 9), (5, 1, 3, 2), dict(group=5, dilations=[2, 3], pads=[2, 0, 1, 3]), id="depthwise-dilated"),
    pytest.param((1, 3, 11, 10), (3, 1, 3, 3), dict(group=3, strides=[3, 2], pads=[4, 0, 2, 1]), id="depthwise-s3-bigpad"),
    pytest.param((2, 4, 15), (4, 1, 5), dict(group=4, strides=[2], pads=[2, 2]), id="depthwise-1d"),
    pytest.param((1, 2, 5, 6, 4), (2, 1, 3, 3, 2), dict(group=2, pads=[1, 1, 0, 1, 1, 1]), id="depthwise-3d"),
    pytest.param((2, 16, 7, 7), (8, 16, 1, 1), {}, id="pointwise"),
    pytest.param((1, 16, 8, 8), (8, 16, 1, 1), dict(strides=[2, 2]), id="pointwise-stride2"),
    pytest.param((1, 3, 32, 32), (8, 3, 7, 7), dict(strides=[2, 2], pads=[3, 3, 3, 3]), id="7x7-stride2"),
    pytest.param((2, 3, 20), (5, 3, 4), dict(strides=[2], pads=[1, 2]), id="1d"),
    pytest.param((1, 2, 5, 6, 7), (3, 2, 2, 3, 3), dict(pads=[0, 1, 1, 1, 1, 0]), id="3d"),
]


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("x_shape, w_shape, attrs", CONV_CASES)
def test_conv(rng: np.random.Generator, x_shape, w_shape, attrs, with_bias: bool) -> None:
    x, w = randn(rng, *x_shape), randn(rng, *w_shape)
    b = randn(rng, w_shape[0]) if with_bias else None
    (want,) = ort_run("Conv", {"x": x, "w": w, "b": b}, attrs)
    got = run_kernel(
        hk.conv,
        want,
        x,
        w,
        b,
        strides=attrs.get("strides"),
        pads=attrs.get("pads"),
        dilations=attrs.get("dilations"),
        group=attrs.get("group", 1),
    )
    assert_matches(got, want)


# Fused activation -> (ONNX op, attributes, extra inputs) for the reference.
ACTIVATION_CASES = [
    pytest.param("relu", None, None, "Relu", {}, {}, id="relu"),
    pytest.param("leaky_relu", 0.1, None, "LeakyRelu", {"alpha": 0.1}, {}, id="leaky_relu"),
    pytest.param("clip", -0.5, 1.5, "Clip", {}, {"min": F32(-0.5), "max": F32(1.5)}, id="clip"),
    pytest.param("clip", 0.0, 6.0, "Clip", {}, {"min": F32(0.0), "max": F32(6.0)}, id="relu6"),
    pytest.param("sigmoid", None, None, "Sigmoid", {}, {}, id="sigmoid"),
    pytest.param("tanh", None, None, "Tanh", {}, {}, id="tanh"),
    pytest.param("hard_swish", None, None, "HardSwish", {}, {}, id="hard_swish"),
    pytest.param("hard_sigmoid", 0.3, 0.4, "HardSigmoid", {"alpha": 0.3, "beta": 0.4}, {}, id="hard_sigmoid"),
]


def ort_activation(y: np.ndarray, op_type: str, attrs: dict, extra: dict) -> np.ndarray:
    """The activation applied by onnxruntime, as the fused-op reference."""
    inputs = {"x": y, **{name: np.asarray(value, dtype=F32) for name, value in extra.items()}}
    return ort_run(op_type, inputs, attrs)[0]


@pytest.mark.parametrize("activation, alpha, beta, op_type, op_attrs, extra", ACTIVATION_CASES)
def test_conv_fused_residual_activation(rng, activation, alpha, beta, op_type, op_attrs, extra) -> None:
    x, w, b = randn(rng, 1, 4, 8, 8), randn(rng, 6, 4, 3, 3), randn(rng, 6)
    residual = randn(rng, 1, 6, 8, 8)
    (conv_y,) = ort_run("Conv", {"x": x, "w": w, "b": b}, {"pads": [1, 1, 1, 1]})
    want = ort_activation(conv_y + residual, op_type, op_attrs, extra)
    got = run_kernel(
        hk.conv, want, x, w, b, residual, pads=[1, 1, 1, 1], activation=activation, alpha=alpha, beta=beta
    )
    assert_matches(got, want)


def test_conv_non_contiguous_out(rng: np.random.Generator) -> None:
    x, w = randn(rng, 1, 3, 6, 6), randn(rng, 4, 3, 3, 3)
    (want,) = ort_run("Conv", {"x": x, "w": w}, {})
    backing = garbage((1, 4, 4, 8), F32)
    out = backing[..., ::2]  # a strided view, as a pool view of a transposed buffer might be
    hk.conv(x, w, out=out)
    assert_matches(np.ascontiguousarray(out), want)


CONV_TRANSPOSE_CASES = [
    pytest.param((1, 4, 5, 5), (4, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]), id="s2-outpad"),
    pytest.param((2, 4, 4, 6), (4, 2, 3, 2), dict(group=2, strides=[1, 2], pads=[0, 1, 1, 0]), id="grouped"),
    pytest.param((1, 2, 5, 5), (2, 3, 3, 3), dict(dilations=[2, 2], pads=[1, 1, 1, 1]), id="dilated"),
    pytest.param((1, 3, 7), (3, 2, 4), dict(strides=[3], pads=[1, 0]), id="1d"),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", CONV_TRANSPOSE_CASES)
def test_conv_transpose(rng: np.random.Generator, x_shape, w_shape, attrs) -> None:
    x, w = randn(rng, *x_shape), randn(rng, *w_shape)
    b = randn(rng, w_shape[1] * attrs.get("group", 1))
    (want,) = ort_run("ConvTranspose", {"x": x, "w": w, "b": b}, attrs)
    got = run_kernel(hk.conv_transpose, want, x, w, b, **attrs)
    assert_matches(got, want)


# ---------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------

MAX_POOL_CASES = [
    pytest.param((1, 3, 9, 9), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), id="3x3-s2-p1"),
    pytest.param((2, 2, 8, 8), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), id="ceil"),
    pytest.param((1, 2, 10, 10), dict(kernel_shape=[2, 3], dilations=[2, 2], pads=[1, 0, 1, 2]), id="dilated"),
    pytest.param((1, 2, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1), id="1d"),
]


@pytest.mark.parametrize("x_shape, attrs", MAX_POOL_CASES)
def test_max_pool(rng: np.random.Generator, x_shape, attrs) -> None:
    x = randn(rng, *x_shape)
    (want,) = ort_run("MaxPool", {"x": x}, attrs)
    assert_matches(run_kernel(hk.max_pool, want, x, **attrs), want)


AVERAGE_POOL_CASES = [
    pytest.param((1, 3, 9, 9), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), id="pads"),
    pytest.param((1, 3, 9, 9), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1), id="include-pad"),
    pytest.param((2, 2, 8, 8), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), id="ceil"),
    pytest.param((1, 2, 8, 8), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0], ceil_mode=1, count_include_pad=1), id="ceil-include-pad"),
    pytest.param((1, 2, 7, 7), dict(kernel_shape=[7, 7]), id="global-like"),
    pytest.param((1, 2, 11), dict(kernel_shape=[4], strides=[3], pads=[2, 1]), id="1d"),
]


@pytest.mark.parametrize("x_shape, attrs", AVERAGE_POOL_CASES)
def test_average_pool(rng: np.random.Generator, x_shape, attrs) -> None:
    x = randn(rng, *x_shape)
    (want,) = ort_run("AveragePool", {"x": x}, attrs)
    assert_matches(run_kernel(hk.average_pool, want, x, **attrs), want)


@pytest.mark.parametrize(
    "kernel, op_type",
    [(hk.global_average_pool, "GlobalAveragePool"), (hk.global_max_pool, "GlobalMaxPool")],
    ids=["average", "max"],
)
@pytest.mark.parametrize("x_shape", [(2, 3, 5, 6), (1, 4, 9)], ids=["2d", "1d"])
def test_global_pool(rng: np.random.Generator, kernel, op_type, x_shape) -> None:
    x = randn(rng, *x_shape)
    (want,) = ort_run(op_type, {"x": x})
    assert_matches(run_kernel(kernel, want, x), want)


# ---------------------------------------------------------------------------
# Gemm and MatMul
# ---------------------------------------------------------------------------

GEMM_CASES = [
    pytest.param((3, 4), (4, 5), (5,), {}, id="bias-vector"),
    pytest.param((4, 3), (4, 5), (1, 5), dict(trans_a=1, alpha=0.5, beta=2.0), id="trans_a"),
    pytest.param((3, 4), (5, 4), (3, 5), dict(trans_b=1), id="trans_b-full-c"),
    pytest.param((4, 3), (5, 4), (), dict(trans_a=1, trans_b=1, beta=-1.0), id="both-scalar-c"),
    pytest.param((2, 6), (6, 3), (3, 1), dict(alpha=2.0), id="column-c"),
    pytest.param((2, 6), (6, 3), None, {}, id="no-c"),
]


@pytest.mark.parametrize("a_shape, b_shape, c_shape, attrs", GEMM_CASES)
def test_gemm(rng: np.random.Generator, a_shape, b_shape, c_shape, attrs) -> None:
    a, b = randn(rng, *a_shape), randn(rng, *b_shape)
    c = randn(rng, *c_shape) if c_shape is not None else None
    if c_shape == (3, 1):  # Gemm only broadcasts C unidirectionally to (M, N)
        c = randn(rng, 2, 1)
    onnx_attrs = {("transA" if k == "trans_a" else "transB" if k == "trans_b" else k): v for k, v in attrs.items()}
    (want,) = ort_run("Gemm", {"a": a, "b": b, "c": c}, onnx_attrs, opset=13)
    assert_matches(run_kernel(hk.gemm, want, a, b, c, **attrs), want)


def test_gemm_fused_relu(rng: np.random.Generator) -> None:
    a, b, c = randn(rng, 4, 8), randn(rng, 8, 5), randn(rng, 5)
    (linear,) = ort_run("Gemm", {"a": a, "b": b, "c": c}, {}, opset=13)
    (want,) = ort_run("Relu", {"x": linear})
    assert_matches(run_kernel(hk.gemm, want, a, b, c, activation="relu"), want)


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 6)), ((4,), (4,))],
    ids=["2d", "batched", "vec-mat", "mat-vec", "broadcast-batch", "dot"],
)
def test_matmul(rng: np.random.Generator, a_shape, b_shape) -> None:
    a, b = randn(rng, *a_shape), randn(rng, *b_shape)
    (want,) = ort_run("MatMul", {"a": a, "b": b})
    assert_matches(run_kernel(hk.matmul, want, a, b), want)


# ---------------------------------------------------------------------------
# Elementwise
# ---------------------------------------------------------------------------

# fn, kernel kwargs, ONNX op, ONNX attrs, extra ONNX inputs, input domain, opset
UNARY_CASES = [
    pytest.param("relu", {}, "Relu", {}, {}, "normal", 18, id="relu"),
    pytest.param("leaky_relu", dict(alpha=0.2), "LeakyRelu", {"alpha": 0.2}, {}, "normal", 18, id="leaky_relu"),
    pytest.param("leaky_relu", {}, "LeakyRelu", {}, {}, "normal", 18, id="leaky_relu-default"),
    pytest.param("sigmoid", {}, "Sigmoid", {}, {}, "wide", 18, id="sigmoid"),
    pytest.param("tanh", {}, "Tanh", {}, {}, "normal", 18, id="tanh"),
    pytest.param("exp", {}, "Exp", {}, {}, "normal", 18, id="exp"),
    pytest.param("log", {}, "Log", {}, {}, "positive", 18, id="log"),
    pytest.param("sqrt", {}, "Sqrt", {}, {}, "positive", 18, id="sqrt"),
    pytest.param("abs", {}, "Abs", {}, {}, "normal", 18, id="abs"),
    pytest.param("neg", {}, "Neg", {}, {}, "normal", 18, id="neg"),
    pytest.param("reciprocal", {}, "Reciprocal", {}, {}, "positive", 18, id="reciprocal"),
    pytest.param("erf", {}, "Erf", {}, {}, "wide", 18, id="erf"),
    pytest.param("gelu", {}, "Gelu", {}, {}, "wide", 20, id="gelu"),
    pytest.param("gelu", dict(approximate="tanh"), "Gelu", {"approximate": "tanh"}, {}, "wide", 20, id="gelu-tanh"),
    pytest.param("hard_sigmoid", {}, "HardSigmoid", {}, {}, "wide", 18, id="hard_sigmoid"),
    pytest.param("hard_swish", {}, "HardSwish", {}, {}, "wide", 18, id="hard_swish"),
    pytest.param("clip", dict(alpha=-0.5, beta=0.7), "Clip", {}, {"min": F32(-0.5), "max": F32(0.7)}, "normal", 18, id="clip"),
    pytest.param("clip", dict(alpha=-0.5), "Clip", {}, {"min": F32(-0.5), "max": None}, "normal", 18, id="clip-min-only"),
    pytest.param("clip", dict(beta=0.3), "Clip", {}, {"min": None, "max": F32(0.3)}, "normal", 18, id="clip-max-only"),
    pytest.param("not", {}, "Not", {}, {}, "bool", 18, id="not"),
    pytest.param("floor", {}, "Floor", {}, {}, "wide", 18, id="floor"),
    pytest.param("ceil", {}, "Ceil", {}, {}, "wide", 18, id="ceil"),
    pytest.param("identity", {}, "Identity", {}, {}, "normal", 18, id="identity"),
    pytest.param("abs", {}, "Abs", {}, {}, "int64", 18, id="abs-int64"),
]


def sample(rng: np.random.Generator, domain: str, shape: Sequence[int]) -> np.ndarray:
    """Random input data of a kind an operator accepts."""
    if domain == "normal":
        return rng.standard_normal(shape).astype(F32)
    if domain == "wide":
        return (rng.standard_normal(shape) * 4).astype(F32)
    if domain == "positive":
        return rng.uniform(0.1, 5.0, shape).astype(F32)
    if domain == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if domain == "int64":
        return rng.integers(-20, 20, shape).astype(np.int64)
    raise ValueError(domain)


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in-place"])
@pytest.mark.parametrize("fn, kwargs, op_type, attrs, extra, domain, opset", UNARY_CASES)
def test_unary(rng, fn, kwargs, op_type, attrs, extra, domain, opset, in_place: bool) -> None:
    x = sample(rng, domain, (3, 4, 5))
    (want,) = ort_run(op_type, {"x": x, **extra}, attrs, {"y": x.dtype}, opset=opset)
    if in_place:
        out = x.copy()
        hk.unary(out, out=out, fn=fn, **kwargs)
    else:
        out = run_kernel(hk.unary, want, x, fn=fn, **kwargs)
        assert np.array_equal(x, sample(np.random.default_rng(2024), domain, (3, 4, 5))), "input modified"
    assert_matches(out, want)


def test_erf_precision() -> None:
    x = np.linspace(-7.0, 7.0, 200_001)
    reference = np.array([math.erf(v) for v in x])
    assert np.max(np.abs(erf(x) - reference)) < 1e-6


# fn, ONNX op, dtype domain, ONNX attrs
BINARY_CASES = [
    pytest.param("add", "Add", "normal", {}, id="add"),
    pytest.param("sub", "Sub", "normal", {}, id="sub"),
    pytest.param("mul", "Mul", "normal", {}, id="mul"),
    pytest.param("div", "Div", "positive", {}, id="div"),
    pytest.param("div", "Div", "int64", {}, id="div-int64-truncates"),
    pytest.param("pow", "Pow", "positive", {}, id="pow"),
    pytest.param("max", "Max", "normal", {}, id="max"),
    pytest.param("min", "Min", "normal", {}, id="min"),
    pytest.param("equal", "Equal", "int64", {}, id="equal"),
    pytest.param("less", "Less", "normal", {}, id="less"),
    pytest.param("greater", "Greater", "normal", {}, id="greater"),
    pytest.param("less_or_equal", "LessOrEqual", "int64", {}, id="less_or_equal"),
    pytest.param("greater_or_equal", "GreaterOrEqual", "int64", {}, id="greater_or_equal"),
    pytest.param("and", "And", "bool", {}, id="and"),
    pytest.param("or", "Or", "bool", {}, id="or"),
    pytest.param("xor", "Xor", "bool", {}, id="xor"),
    pytest.param("mod", "Mod", "int64", {}, id="mod-int64"),
    pytest.param("mod", "Mod", "normal", {"fmod": 1}, id="fmod-float"),
    pytest.param("add", "Add", "int64", {}, id="add-int64"),
]

COMPARISONS = {"equal", "less", "greater", "less_or_equal", "greater_or_equal"}


@pytest.mark.parametrize("alias", ["none", "a", "b"])
@pytest.mark.parametrize("fn, op_type, domain, attrs", BINARY_CASES)
def test_binary(rng, fn, op_type, domain, attrs, alias: str) -> None:
    a, b = sample(rng, domain, (3, 4, 5)), sample(rng, domain, (4, 5))
    if domain == "int64" and fn in ("div", "mod"):
        b = np.where(b == 0, 7, b)
    if alias == "b":  # b must have the output shape to be reused as out
        a, b = b, sample(rng, domain, (3, 4, 5))
        if domain == "int64" and fn in ("div", "mod"):
            b = np.where(b == 0, -3, b)
    out_dtype = bool if fn in COMPARISONS else a.dtype
    (want,) = ort_run(op_type, {"a": a, "b": b}, attrs, {"y": out_dtype})
    fmod = attrs.get("fmod", 0)
    if alias == "none" or out_dtype is bool:
        got = run_kernel(hk.binary, want, a, b, fn=fn, fmod=fmod)
    else:
        a, b = a.copy(), b.copy()
        got = a if alias == "a" else b
        hk.binary(a, b, out=got, fn=fn, fmod=fmod)
    assert_matches(got, want)


@pytest.mark.parametrize("fn, op_type", [("sum", "Sum"), ("max", "Max"), ("min", "Min"), ("mean", "Mean")])
@pytest.mark.parametrize("count", [1, 3])
def test_variadic(rng: np.random.Generator, fn, op_type, count: int) -> None:
    shapes = [(2, 3, 4), (3, 1), (4,)][:count]
    inputs = {f"x{i}": randn(rng, *shape) for i, shape in enumerate(shapes)}
    (want,) = ort_run(op_type, inputs)
    assert_matches(run_kernel(hk.variadic, want, list(inputs.values()), fn=fn), want)


def test_where(rng: np.random.Generator) -> None:
    cond = rng.integers(0, 2, (3, 1, 5)).astype(bool)
    a, b = randn(rng, 4, 5), randn(rng, 3, 4, 1)
    (want,) = ort_run("Where", {"cond": cond, "a": a, "b": b})
    assert_matches(run_kernel(hk.where, want, cond, a, b), want)


@pytest.mark.parametrize(
    "domain, to",
    [("wide", np.int32), ("wide", np.int64), ("wide", bool), ("int64", F32), ("bool", F32), ("wide", np.float64)],
    ids=["f32-i32", "f32-i64", "f32-bool", "i64-f32", "bool-f32", "f32-f64"],
)
def test_cast(rng: np.random.Generator, domain: str, to) -> None:
    x = sample(rng, domain, (4, 6))
    x.flat[:3] = [0, -0, 1] if x.dtype != bool else [False, True, False]
    to_type = helper.np_dtype_to_tensor_dtype(np.dtype(to))
    (want,) = ort_run("Cast", {"x": x}, {"to": to_type}, {"y": to})
    assert_matches(run_kernel(hk.cast, want, x), want)


def test_copy(rng: np.random.Generator) -> None:
    x = randn(rng, 2, 3)
    (want,) = ort_run("Identity", {"x": x})
    assert_matches(run_kernel(hk.copy, want, x), want)


# ---------------------------------------------------------------------------
# Normalisation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in-place"])
@pytest.mark.parametrize("activation", [None, "relu"])
def test_channel_affine(rng: np.random.Generator, activation, in_place: bool) -> None:
    x, scale, shift = randn(rng, 2, 5, 4, 3), randn(rng, 5), randn(rng, 5)
    zeros, ones = np.zeros(5, F32), np.ones(5, F32)
    # BatchNormalization with mean 0, var 1, epsilon 0 is exactly x * scale + shift.
    (want,) = ort_run("BatchNormalization", {"x": x, "s": scale, "b": shift, "m": zeros, "v": ones}, {"epsilon": 0.0})
    if activation:
        (want,) = ort_run("Relu", {"x": want})
    out = x.copy() if in_place else garbage(x.shape, F32)
    hk.channel_affine(out if in_place else x, scale, shift, out=out, activation=activation)
    assert_matches(out, want)


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in-place"])
@pytest.mark.parametrize("x_shape", [(2, 4, 5, 5), (3, 4)], ids=["nchw", "nc"])
def test_batch_norm(rng: np.random.Generator, x_shape, in_place: bool) -> None:
    x = randn(rng, *x_shape)
    c = x_shape[1]
    scale, bias, mean = randn(rng, c), randn(rng, c), randn(rng, c)
    var = rng.uniform(0.5, 2.0, c).astype(F32)
    (want,) = ort_run("BatchNormalization", {"x": x, "s": scale, "b": bias, "m": mean, "v": var}, {"epsilon": 1e-3})
    if in_place:
        hk.batch_norm(x, scale, bias, mean, var, out=x, epsilon=1e-3)
        assert_matches(x, want)
    else:
        assert_matches(run_kernel(hk.batch_norm, want, x, scale, bias, mean, var, epsilon=1e-3), want)


@pytest.mark.parametrize("kernel, op_type", [(hk.softmax, "Softmax"), (hk.log_softmax, "LogSoftmax")], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("axis, in_place", [(-1, False), (1, False), (0, False), (1, True)])
def test_softmax(rng: np.random.Generator, kernel, op_type, axis: int, in_place: bool) -> None:
    x = randn(rng, 3, 4, 5) * 10
    (want,) = ort_run(op_type, {"x": x}, {"axis": axis}, opset=13)
    if in_place:
        kernel(x, out=x, axis=axis)
        assert_matches(x, want)
    else:
        assert_matches(run_kernel(kernel, want, x, axis=axis), want)


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in-place"])
@pytest.mark.parametrize("axis, with_bias", [(-1, True), (1, True), (-1, False), (2, True)])
def test_layer_norm(rng: np.random.Generator, axis: int, with_bias: bool, in_place: bool) -> None:
    x = randn(rng, 2, 3, 4, 5) * 3 + 1
    normalised = x.shape[axis % 4 :]
    scale = randn(rng, *normalised)
    bias = randn(rng, *normalised) if with_bias else None
    (want,) = ort_run("LayerNormalization", {"x": x, "s": scale, "b": bias}, {"axis": axis, "epsilon": 1e-3}, opset=17)
    if in_place:
        hk.layer_norm(x, scale, bias, out=x, axis=axis, epsilon=1e-3)
        assert_matches(x, want)
    else:
        assert_matches(run_kernel(hk.layer_norm, want, x, scale, bias, axis=axis, epsilon=1e-3), want)


@pytest.mark.parametrize("size", [1, 3, 4, 5])
def test_lrn(rng: np.random.Generator, size: int) -> None:
    x = randn(rng, 2, 7, 4, 3)
    attrs = {"size": size, "alpha": 0.01, "beta": 0.6, "bias": 1.5}
    if size % 2:
        (want,) = ort_run("LRN", {"x": x}, attrs)
    else:
        # onnxruntime rejects even sizes (and onnx.reference loops over the
        # batch instead of channels), so the spec's formula is spelled out.
        before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
        square_sum = np.stack(
            [np.sum(x[:, max(0, c - before) : c + after + 1] ** 2, axis=1) for c in range(x.shape[1])], axis=1
        )
        want = (x / (attrs["bias"] + attrs["alpha"] / size * square_sum) ** attrs["beta"]).astype(F32)
    assert_matches(run_kernel(hk.lrn, want, x, **attrs), want)


# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------

REDUCE_OPS = {
    "sum": "ReduceSum",
    "mean": "ReduceMean",
    "max": "ReduceMax",
    "min": "ReduceMin",
    "prod": "ReduceProd",
    "l1": "ReduceL1",
    "l2": "ReduceL2",
    "sum_square": "ReduceSumSquare",
    "log_sum": "ReduceLogSum",
    "log_sum_exp": "ReduceLogSumExp",
}


@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, -1], 0), (None, 1), (None, 0), ([2], 0)])
@pytest.mark.parametrize("fn", sorted(REDUCE_OPS))
def test_reduce(rng: np.random.Generator, fn: str, axes, keepdims: int) -> None:
    x = rng.uniform(0.5, 1.5, (3, 4, 5)).astype(F32)  # positive and near 1: log_sum and prod stay tame
    inputs = {"x": x, "axes": np.array(axes, dtype=np.int64) if axes is not None else None}
    (want,) = ort_run(REDUCE_OPS[fn], inputs, {"keepdims": keepdims})
    assert_matches(run_kernel(hk.reduce, want, x, fn=fn, axes=axes, keepdims=keepdims), want)


@pytest.mark.parametrize("kernel, op_type", [(hk.arg_max, "ArgMax"), (hk.arg_min, "ArgMin")], ids=["max", "min"])
@pytest.mark.parametrize("axis, keepdims, last", [(0, 1, 0), (1, 0, 0), (-1, 1, 1), (2, 0, 1)])
def test_arg_extreme(rng: np.random.Generator, kernel, op_type, axis, keepdims, last) -> None:
    x = rng.integers(0, 3, (3, 4, 5)).astype(F32)  # many ties, so the index rule matters
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
    (want,) = ort_run(op_type, {"x": x}, attrs, {"y": np.int64})
    assert_matches(run_kernel(kernel, want, x, **attrs), want)


# ---------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(rng: np.random.Generator, axis: int) -> None:
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for i, shape in enumerate(shapes):
        shape[axis] = i + 1
    inputs = {f"x{i}": randn(rng, *shape) for i, shape in enumerate(shapes)}
    (want,) = ort_run("Concat", inputs, {"axis": axis})
    assert_matches(run_kernel(hk.concat, want, list(inputs.values()), axis=axis), want)


@pytest.mark.parametrize("axis, sizes", [(1, [1, 2, 3]), (-1, [2, 2])])
def test_split(rng: np.random.Generator, axis: int, sizes) -> None:
    x = randn(rng, 2, 6, 4)
    names = {f"y{i}": F32 for i in range(len(sizes))}
    wants = ort_run("Split", {"x": x, "split": np.array(sizes, dtype=np.int64)}, {"axis": axis}, names)
    outs = [garbage(w.shape, F32) for w in wants]
    hk.split(x, outs=outs, axis=axis)
    for got, want in zip(outs, wants):
        assert_matches(got, want)


SLICE_CASES = [
    pytest.param([1, 0], [3, 4], None, None, id="basic"),
    pytest.param([-3], [INT64_MAX], [2], None, id="neg-start-int64max-end"),
    pytest.param([5, -1], [0, -INT64_MAX], [2, 1], [-2, -1], id="negative-steps"),
    pytest.param([0, 1, 10], [2, 100, -100], [0, 1, 2], [1, 2, -3], id="clamped"),
    pytest.param([-1], [-10], [-1], [-1], id="reverse-all"),
]


@pytest.mark.parametrize("starts, ends, axes, steps", SLICE_CASES)
def test_slice(rng: np.random.Generator, starts, ends, axes, steps) -> None:
    x = randn(rng, 3, 5, 7)
    i64 = lambda v: np.array(v, dtype=np.int64) if v is not None else None  # noqa: E731
    (want,) = ort_run("Slice", {"x": x, "starts": i64(starts), "ends": i64(ends), "axes": i64(axes), "steps": i64(steps)})
    assert_matches(run_kernel(hk.slice, want, x, starts=starts, ends=ends, axes=axes, steps=steps), want)


@pytest.mark.parametrize("perm", [[0, 2, 1], [2, 0, 1], None])
def test_transpose(rng: np.random.Generator, perm) -> None:
    x = randn(rng, 2, 3, 4)
    (want,) = ort_run("Transpose", {"x": x}, {"perm": perm} if perm else {})
    assert_matches(run_kernel(hk.transpose, want, x, perm=perm), want)


@pytest.mark.parametrize("axis, idx_shape", [(0, (2, 3)), (1, (4,)), (-1, ()), (2, (2, 2))])
def test_gather(rng: np.random.Generator, axis: int, idx_shape) -> None:
    x = randn(rng, 3, 4, 5)
    dim = x.shape[axis]
    indices = rng.integers(-dim, dim, idx_shape).astype(np.int64)
    (want,) = ort_run("Gather", {"x": x, "i": indices}, {"axis": axis})
    assert_matches(run_kernel(hk.gather, want, x, indices, axis=axis), want)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(rng: np.random.Generator, axis: int) -> None:
    x = randn(rng, 3, 4, 5)
    shape = list(x.shape)
    shape[axis] = 2
    dim = x.shape[axis]
    indices = rng.integers(-dim, dim, shape).astype(np.int64)
    (want,) = ort_run("GatherElements", {"x": x, "i": indices}, {"axis": axis})
    assert_matches(run_kernel(hk.gather_elements, want, x, indices, axis=axis), want)


@pytest.mark.parametrize(
    "idx_shape, batch_dims",
    [((2, 2), 0), ((3, 1), 0), ((2, 2, 3), 0), ((3, 2, 1), 1), ((3, 2), 1)],
)
def test_gather_nd(rng: np.random.Generator, idx_shape, batch_dims: int) -> None:
    x = randn(rng, 3, 4, 5)
    depth = idx_shape[-1]
    dims = np.array(x.shape[batch_dims : batch_dims + depth])
    indices = (rng.integers(0, 1000, idx_shape) % dims - dims * rng.integers(0, 2, idx_shape)).astype(np.int64)
    (want,) = ort_run("GatherND", {"x": x, "i": indices}, {"batch_dims": batch_dims})
    assert_matches(run_kernel(hk.gather_nd, want, x, indices, batch_dims=batch_dims), want)


@pytest.mark.parametrize("x_shape, shape", [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((2, 1, 3), (2, 5, 3))])
def test_expand(rng: np.random.Generator, x_shape, shape) -> None:
    x = randn(rng, *x_shape)
    (want,) = ort_run("Expand", {"x": x, "shape": np.array(shape, dtype=np.int64)})
    assert_matches(run_kernel(hk.expand, want, x), want)


@pytest.mark.parametrize("repeats", [[2, 1, 3], [1, 1, 1], [3, 2, 1]])
def test_tile(rng: np.random.Generator, repeats) -> None:
    x = randn(rng, 2, 3, 4)
    (want,) = ort_run("Tile", {"x": x, "r": np.array(repeats, dtype=np.int64)})
    assert_matches(run_kernel(hk.tile, want, x, repeats=repeats), want)


PAD_CASES = [
    pytest.param([0, 1, 2, 1, 0, 3], "constant", 1.5, id="constant"),
    pytest.param([1, 2, 0, 0, 2, 1], "reflect", 0.0, id="reflect"),
    pytest.param([1, 2, 3, 2, 1, 0], "edge", 0.0, id="edge"),
    pytest.param([0, -1, 2, 1, 0, -2], "constant", 0.0, id="negative-crops"),
]


@pytest.mark.parametrize("pads, mode, value", PAD_CASES)
def test_pad(rng: np.random.Generator, pads, mode: str, value: float) -> None:
    x = randn(rng, 2, 4, 5)
    inputs = {"x": x, "pads": np.array(pads, dtype=np.int64), "value": np.array(value, dtype=F32)}
    (want,) = ort_run("Pad", inputs, {"mode": mode})
    assert_matches(run_kernel(hk.pad, want, x, pads=pads, mode=mode, value=value), want)


@pytest.mark.parametrize(
    "start, limit, delta, dtype",
    [(0.5, 7.3, 0.3, F32), (10, -3, -2, np.int64), (-1.0, 1.0, 0.1, F32), (0, 5, 1, np.int32)],
)
def test_range(start, limit, delta, dtype) -> None:
    scalar = lambda v: np.array(v, dtype=dtype)  # noqa: E731
    (want,) = ort_run("Range", {"s": scalar(start), "l": scalar(limit), "d": scalar(delta)}, {}, {"y": dtype})
    assert_matches(run_kernel(hk.range, want, start=start, delta=delta), want)


@pytest.mark.parametrize("value, dtype", [(2.5, F32), (-7, np.int64), (0, F32)])
def test_constant_of_shape(value, dtype) -> None:
    tensor = helper.make_tensor("value", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [1], [value])
    shape = np.array([2, 3, 4], dtype=np.int64)
    (want,) = ort_run("ConstantOfShape", {"shape": shape}, {"value": tensor}, {"y": dtype})
    assert_matches(run_kernel(hk.constant_of_shape, want, value=value), want)


# ---------------------------------------------------------------------------
# Resize
# ---------------------------------------------------------------------------

# kernel attrs, then either scales or sizes for the (1, 2, 5, 6) input
RESIZE_CASES = [
    pytest.param(dict(mode="nearest"), [1, 1, 2.0, 2.0], None, id="nearest-x2"),
    pytest.param(dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"), [1, 1, 2.0, 3.0], None, id="nearest-asym-floor"),
    pytest.param(dict(mode="nearest", nearest_mode="round_prefer_ceil"), [1, 1, 0.5, 0.5], None, id="nearest-down-prefer-ceil"),
    pytest.param(dict(mode="nearest", nearest_mode="ceil", coordinate_transformation_mode="align_corners"), None, [1, 2, 7, 11], id="nearest-ceil-align"),
    pytest.param(dict(mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn"), [1, 1, 1.7, 2.4], None, id="nearest-tf-nn"),
    pytest.param(dict(mode="nearest"), None, [1, 2, 3, 4], id="nearest-sizes-down"),
    pytest.param(dict(mode="linear"), [1, 1, 2.0, 2.0], None, id="linear-half-pixel"),
    pytest.param(dict(mode="linear", coordinate_transformation_mode="align_corners"), None, [1, 2, 9, 13], id="linear-align"),
    pytest.param(dict(mode="linear", coordinate_transformation_mode="asymmetric"), [1, 1, 1.5, 0.5], None, id="linear-asym"),
    pytest.param(dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), None, [1, 2, 1, 8], id="linear-pytorch"),
    pytest.param(dict(mode="linear"), None, [1, 2, 3, 4], id="linear-down"),
    pytest.param(dict(mode="cubic"), [1, 1, 2.0, 2.0], None, id="cubic"),
    pytest.param(dict(mode="cubic", cubic_coeff_a=-0.5, coordinate_transformation_mode="align_corners"), None, [1, 2, 8, 9], id="cubic-align"),
    pytest.param(dict(mode="cubic", exclude_outside=1), [1, 1, 1.5, 0.7], None, id="cubic-exclude"),
]


@pytest.mark.parametrize("attrs, scales, sizes", RESIZE_CASES)
def test_resize(rng: np.random.Generator, attrs, scales, sizes) -> None:
    x = randn(rng, 1, 2, 5, 6)
    inputs = {
        "x": x,
        "roi": None,
        "scales": np.array(scales, dtype=F32) if scales else None,
        "sizes": np.array(sizes, dtype=np.int64) if sizes else None,
    }
    (want,) = ort_run("Resize", inputs, attrs)
    assert_matches(run_kernel(hk.resize, want, x, scales=scales, **attrs), want)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_tf_crop_and_resize(rng: np.random.Generator, mode: str) -> None:
    x = randn(rng, 1, 2, 5, 6)
    roi = [0, 0, -0.2, 0.1, 1, 1, 0.8, 1.3]
    attrs = dict(mode=mode, coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-9.0)
    inputs = {"x": x, "roi": np.array(roi, dtype=F32), "scales": None, "sizes": np.array([1, 2, 4, 7], dtype=np.int64)}
    (want,) = ort_run("Resize", inputs, attrs)
    assert_matches(run_kernel(hk.resize, want, x, roi=roi, **attrs), want)


@pytest.mark.parametrize("in_place", [False, True])
def test_insert_slice(rng: np.random.Generator, in_place: bool) -> None:
    dest = rng.standard_normal((1, 3, 7, 5)).astype(np.float32)
    x = rng.standard_normal((1, 3, 2, 5)).astype(np.float32)
    want = dest.copy()
    want[:, :, 4:6] = x
    out = dest if in_place else np.full_like(dest, np.nan)
    hk.insert_slice(dest, x, out=out, axis=2, offset=4)
    np.testing.assert_array_equal(out, want)


def test_empty_writes_nothing() -> None:
    out = np.full((2, 3), 7.0, np.float32)
    hk.empty(out=out)
    assert (out == 7.0).all()

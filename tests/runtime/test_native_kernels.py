"""Every native kernel against the numpy kernel of the same name, on random
data: odd, tiny (one element), padded/strided and broadcasting shapes.

Each case builds a site table entry (pyocc.testing.native_kernels.site_for),
compiles the native emitter alone and runs both kernels on the same inputs.
Stale data in `out` (77s) catches a kernel that reads its output first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyocc.lowering.native import NATIVE_KERNELS, native_kernel_for
from pyocc.runtime.kernels.tensor import onnx_axis_slice
from pyocc.testing.native_kernels import SiteInput, run_native, run_numpy, site_for

RNG = np.random.default_rng(16)


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    """Random data of `shape`: normal floats, small ints, or bools."""
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-9, 10, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def check(kernel: str, inputs: list[SiteInput], outputs: list[tuple[tuple[int, ...], str]], rtol: float = 1e-5,
          atol: float = 1e-6, out_keyword: str = "out", **kwargs: Any) -> None:
    """The native kernel's outputs equal the numpy kernel's (within tolerance)."""
    site = site_for(kernel, inputs, outputs, out_keyword=out_keyword, **kwargs)
    assert native_kernel_for(site) is not None, f"{kernel} {kwargs}: no native kernel takes this site"
    expected = run_numpy(site, inputs)
    got = run_native(site, inputs)
    for e, g in zip(expected, got, strict=True):
        assert g.dtype == e.dtype
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, e)


UNARY = ["relu", "leaky_relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "neg", "reciprocal", "erf",
         "hard_sigmoid", "hard_swish", "clip", "floor", "ceil", "identity", "gelu"]


@pytest.mark.parametrize("fn", UNARY)
@pytest.mark.parametrize("shape", [(1,), (3, 7), (2, 3, 5, 9)])
def test_unary(fn: str, shape: tuple[int, ...]) -> None:
    x = rand(*shape) * 3
    if fn in ("log", "sqrt"):
        x = np.abs(x) + 0.1
    check("unary", [x], [(shape, "float32")], fn=fn, alpha=None, beta=None)


@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_sin_and_cos(fn: str) -> None:
    """A LLaMA-style model's rotary tables, cos and sin of positions times
    frequencies, are computed at run time (folded they would be larger
    than the frequencies and positions): positions up to 512 radians."""
    x = np.concatenate([rand(3, 7).reshape(-1) * 3, np.arange(0, 512, 7, dtype=np.float32)])
    check("unary", [x], [(x.shape, "float32")], fn=fn, alpha=None, beta=None)


@pytest.mark.parametrize("fn", ["neg", "abs", "relu", "identity"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_unary_integer(fn: str, dtype: str) -> None:
    """T5's relative positions take Abs and Neg of int64 differences."""
    x = rand(3, 7, dtype=dtype)
    x.reshape(-1)[:2] = [np.iinfo(dtype).max, np.iinfo(dtype).min + 1]
    check("unary", [x], [((3, 7), dtype)], fn=fn)


@pytest.mark.parametrize("fn, alpha, beta", [("leaky_relu", 0.2, None), ("clip", -0.5, 0.7), ("clip", None, 0.3),
                                             ("clip", 0.1, None), ("hard_sigmoid", 0.3, 0.4)])
def test_unary_with_parameters(fn: str, alpha: float | None, beta: float | None) -> None:
    x = rand(4, 5)
    check("unary", [x], [((4, 5), "float32")], fn=fn, alpha=alpha, beta=beta)


def test_gelu_tanh_and_not() -> None:
    x = rand(6, 5) * 3
    check("unary", [x], [((6, 5), "float32")], fn="gelu", approximate="tanh")
    check("unary", [rand(7, dtype="bool")], [((7,), "bool")], fn="not")


@pytest.mark.parametrize("fn", ["isnan", "isinf", "isposinf", "isneginf"])
def test_float_predicates(fn: str) -> None:
    x = rand(4, 9)
    x.reshape(-1)[::4], x.reshape(-1)[1::6], x.reshape(-1)[2::5] = np.nan, np.inf, -np.inf
    check("unary", [x], [((4, 9), "bool")], fn=fn)


def test_unary_in_place() -> None:
    """out may be x itself."""
    x = rand(5, 6)
    site = site_for("unary", [x], [((5, 6), "float32")], fn="sigmoid")
    expected = run_numpy(site, [x.copy()])[0]
    run_native(site, [x], outputs=[x])
    np.testing.assert_allclose(x, expected, rtol=1e-6)


BROADCASTS = [((3, 4), (3, 4)), ((1,), (5,)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1, 1), (2, 3, 1)),
              ((2, 3, 5, 5), (1, 3, 1, 1)), ((), (3,))]


@pytest.mark.parametrize("fn", ["add", "sub", "mul", "div", "max", "min", "pow", "mod"])
@pytest.mark.parametrize("a_shape, b_shape", BROADCASTS)
def test_binary_float(fn: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    a, b = rand(*a_shape), rand(*b_shape)
    if fn == "pow":
        a = np.abs(a) + 0.5
    out_shape = np.broadcast_shapes(a_shape, b_shape)
    check("binary", [a, b], [(out_shape, "float32")], fn=fn)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_binary_mod(fmod: int, dtype: str) -> None:
    a, b = rand(4, 6, dtype=dtype) * 3, rand(6, dtype=dtype)
    b[b == 0] = 2
    check("binary", [a, b], [((4, 6), dtype)], fn="mod", fmod=fmod)


@pytest.mark.parametrize("fn", ["add", "sub", "mul", "div", "max", "min"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_binary_integer(fn: str, dtype: str) -> None:
    a, b = rand(3, 5, dtype=dtype), rand(5, dtype=dtype)
    b[b == 0] = 3
    check("binary", [a, b], [((3, 5), dtype)], fn=fn)


@pytest.mark.parametrize("fn", ["equal", "less", "greater", "less_or_equal", "greater_or_equal"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_comparisons(fn: str, dtype: str) -> None:
    a, b = rand(3, 4, dtype=dtype), rand(1, 4, dtype=dtype)
    a[0] = b[0]
    check("binary", [a, b], [((3, 4), "bool")], fn=fn)


@pytest.mark.parametrize("fn", ["and", "or", "xor"])
def test_logical(fn: str) -> None:
    check("binary", [rand(3, 4, dtype="bool"), rand(4, dtype="bool")], [((3, 4), "bool")], fn=fn)


@pytest.mark.parametrize("activation, alpha, beta", [("relu", None, None), ("clip", 0.0, 6.0),
                                                     ("leaky_relu", 0.1, None), ("sigmoid", None, None)])
def test_binary_fused_activation(activation: str, alpha: float | None, beta: float | None) -> None:
    a, b = rand(2, 3, 4), rand(3, 1)
    check("binary", [a, b], [((2, 3, 4), "float32")], fn="add", activation=activation, alpha=alpha, beta=beta)


@pytest.mark.parametrize("fn", ["sum", "mean", "max", "min"])
def test_variadic(fn: str) -> None:
    inputs = [rand(2, 3, 4), rand(4), rand(3, 1), rand(1)]
    check("variadic", [inputs], [((2, 3, 4), "float32")], fn=fn)
    check("variadic", [[rand(5)]], [((5,), "float32")], fn=fn)


def test_variadic_integer() -> None:
    check("variadic", [[rand(3, 4, dtype="int64"), rand(4, dtype="int64")]], [((3, 4), "int64")], fn="sum")


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_where(dtype: str) -> None:
    check("where", [rand(3, 1, dtype="bool"), rand(3, 4, dtype=dtype), rand(4, dtype=dtype)],
          [((3, 4), dtype)])


@pytest.mark.parametrize("source, target", [("float32", "int64"), ("float32", "int32"), ("int64", "float32"),
                                            ("float32", "bool"), ("bool", "float32"), ("int64", "int32"),
                                            ("int32", "int64"), ("float32", "float64"), ("float64", "float32"),
                                            ("uint8", "float32"), ("int8", "int64")])
def test_cast(source: str, target: str) -> None:
    x = rand(3, 5, dtype=source) * (3 if source.startswith("float") else 1)
    check("cast", [x], [((3, 5), target)])


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_copy(dtype: str) -> None:
    check("copy", [rand(2, 3, 4, dtype=dtype)], [((6, 4), dtype)])
    check("copy", [rand(1, dtype=dtype)], [((1,), dtype)])


def test_every_registered_kernel_is_tested() -> None:
    """A native kernel without a case in tests/runtime/test_native*.py fails this test."""
    text = "".join(path.read_text() for path in Path(__file__).parent.glob("test_native*.py"))
    untested = sorted(name for name in NATIVE_KERNELS if f'"{name}"' not in text)
    assert not untested, f"native kernels without a test: {untested}"


POOLS = [  # (x shape, kernel_shape, strides, pads, dilations)
    ((1, 2, 7, 7), [3, 3], [1, 1], [1, 1, 1, 1], None),
    ((2, 3, 9, 8), [3, 3], [2, 2], [0, 0, 1, 1], None),
    ((1, 1, 5, 6), [2, 3], [2, 1], [1, 0, 1, 2], None),
    ((1, 2, 1, 1), [1, 1], None, None, None),
    ((1, 3, 11), [4], [3], [2, 1], None),
    ((1, 2, 4, 5, 6), [2, 2, 3], [1, 2, 2], [0, 1, 1, 1, 0, 1], None),
    ((1, 1, 3, 2), [3, 3], [1, 1], [1, 1, 1, 1], None),  # no output column is clear of the padding
    ((1, 2, 5, 77), [3, 3], [2, 2], [1, 1, 1, 1], None),  # long rows: the vectorised interior and its tail
    ((1, 3, 14, 14), [3, 3], [1, 1], [1, 1, 1, 1], None),  # Inception's pools: interior rows and columns
    ((1, 2, 9, 2), [3, 3], [1, 1], [1, 1, 1, 1], None),  # interior rows, no interior column
    ((1, 1, 6, 7, 8), [3, 3, 3], [1, 1, 1], [1, 1, 1, 1, 1, 1], None),  # an interior along every axis of 3
    # edges of several outputs before and after the interior, in the one loop both edges of a dim share
    ((1, 2, 8, 9), [5, 5], [1, 1], [2, 3, 2, 1], None),
]


def _pool_out(shape: tuple[int, ...], kernel: list[int], strides: list[int] | None, pads: list[int] | None,
              dilations: list[int] | None, ceil: bool = False) -> tuple[int, ...]:
    rank = len(kernel)
    strides, dilations = strides or [1] * rank, dilations or [1] * rank
    pads = pads or [0] * (2 * rank)
    spatial = []
    for axis in range(rank):
        span = shape[2 + axis] + pads[axis] + pads[rank + axis] - (kernel[axis] - 1) * dilations[axis] - 1
        spatial.append((-(-span // strides[axis]) if ceil else span // strides[axis]) + 1)
    return (*shape[:2], *spatial)


@pytest.mark.parametrize("shape, kernel, strides, pads, dilations", POOLS)
def test_max_pool(shape: tuple[int, ...], kernel: list[int], strides: list[int] | None, pads: list[int] | None,
                  dilations: list[int] | None) -> None:
    x = rand(*shape)
    out = _pool_out(shape, kernel, strides, pads, dilations)
    check("max_pool", [x], [(out, "float32")], kernel_shape=kernel, strides=strides, pads=pads, ceil_mode=0)


def test_max_pool_dilated_and_ceil_mode() -> None:
    x = rand(1, 2, 9, 9)
    out = _pool_out(x.shape, [3, 3], [2, 2], [1, 1, 1, 1], [2, 2], ceil=True)
    check("max_pool", [x], [(out, "float32")], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
          dilations=[2, 2], ceil_mode=1)


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("shape, kernel, strides, pads, dilations", POOLS)
def test_average_pool(shape: tuple[int, ...], kernel: list[int], strides: list[int] | None,
                      pads: list[int] | None, dilations: list[int] | None, count_include_pad: int) -> None:
    x = rand(*shape)
    out = _pool_out(shape, kernel, strides, pads, dilations)
    check("average_pool", [x], [(out, "float32")], rtol=0, atol=0, kernel_shape=kernel, strides=strides,
          pads=pads, ceil_mode=0, count_include_pad=count_include_pad)


def test_average_pool_ceil_mode() -> None:
    x = rand(1, 2, 8, 8)
    out = _pool_out(x.shape, [3, 3], [2, 2], [0, 0, 0, 0], None, ceil=True)
    check("average_pool", [x], [(out, "float32")], rtol=0, atol=0, kernel_shape=[3, 3], strides=[2, 2],
          pads=[0, 0, 0, 0], ceil_mode=1, count_include_pad=0)


@pytest.mark.parametrize("shape", [(1, 3, 7, 7), (2, 5, 1, 1), (1, 4, 6), (1, 2, 3, 4, 5)])
def test_global_pools(shape: tuple[int, ...]) -> None:
    x = rand(*shape)
    out = (*shape[:2], *[1] * (len(shape) - 2))
    check("global_average_pool", [x], [(out, "float32")])
    check("global_max_pool", [x], [(out, "float32")])


@pytest.mark.parametrize("shape, axis", [((2, 3, 4, 5), 1), ((1, 7), 1), ((4, 3), 0), ((2, 3, 5), -1), ((1,), 0)])
@pytest.mark.parametrize("activation", [None, "relu", "clip"])
def test_channel_affine(shape: tuple[int, ...], axis: int, activation: str | None) -> None:
    channels = shape[axis]
    alpha, beta = (0.0, 1.0) if activation == "clip" else (None, None)
    check("channel_affine", [rand(*shape), rand(channels), rand(channels)], [(shape, "float32")], rtol=0, atol=0,
          axis=axis, activation=activation, alpha=alpha, beta=beta)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 4), (1, 1, 1, 1)])
def test_batch_norm(shape: tuple[int, ...]) -> None:
    c = shape[1]
    check("batch_norm", [rand(*shape), rand(c), rand(c), rand(c), np.abs(rand(c)) + 0.5], [(shape, "float32")],
          rtol=0, atol=0, epsilon=1e-3)


@pytest.mark.parametrize("kernel", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, axis", [((2, 10), -1), ((3, 4, 5), 1), ((1,), 0), ((2, 3, 4), 0), ((1, 1000), 1)])
def test_softmax(kernel: str, shape: tuple[int, ...], axis: int) -> None:
    check(kernel, [rand(*shape) * 4], [(shape, "float32")], axis=axis)


@pytest.mark.parametrize("shape, axis, scale_shape, with_bias", [
    ((2, 3, 8), -1, (8,), True), ((2, 3, 8), 1, (3, 8), False), ((4, 5), 0, (4, 5), True),
    ((2, 3, 4), -2, (1, 4), True), ((1, 1), -1, (1,), False)])
def test_layer_norm(shape: tuple[int, ...], axis: int, scale_shape: tuple[int, ...], with_bias: bool) -> None:
    inputs: list[SiteInput] = [rand(*shape), rand(*scale_shape)]
    if with_bias:
        inputs.append(rand(*scale_shape))
    check("layer_norm", inputs, [(shape, "float32")], rtol=1e-5, atol=1e-5, axis=axis, epsilon=1e-5)


@pytest.mark.parametrize("beta", [0.75, 0.5, 0.6])
@pytest.mark.parametrize("shape, size", [((1, 7, 3, 3), 5), ((2, 4, 5), 3), ((1, 2, 2, 2), 4), ((1, 1, 1, 1), 1)])
def test_lrn(shape: tuple[int, ...], size: int, beta: float) -> None:
    check("lrn", [rand(*shape)], [(shape, "float32")], rtol=2e-6, atol=1e-7, size=size, alpha=0.3, beta=beta,
          bias=2.0)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "uint8"])
@pytest.mark.parametrize("shape, perm", [((2, 3, 4), [2, 0, 1]), ((1, 4, 2, 3, 5), [0, 2, 1, 3, 4]), ((5,), None),
                                         ((3, 4), None), ((1, 1, 1), [2, 1, 0])])
def test_transpose(dtype: str, shape: tuple[int, ...], perm: list[int] | None) -> None:
    x = rand(*shape, dtype=dtype)
    out = np.transpose(x, perm).shape
    check("transpose", [x], [(out, dtype)], perm=perm)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_and_split(axis: int) -> None:
    lengths = {0: [2, 1, 3], 1: [3, 1, 2], -1: [4, 1, 2]}[axis]
    parts = [rand(*[n if d == axis % 3 else s for d, s in enumerate((2, 3, 4))]) for n in lengths]
    out = np.concatenate(parts, axis=axis).shape
    check("concat", [parts], [(out, "float32")], axis=axis)
    x = rand(*out)
    check("split", [x], [(p.shape, "float32") for p in parts], out_keyword="outs", axis=axis)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, 0], [3, 5], None, None), ([0], [-1], [2], None), ([-1], [-2**63], [1], [-1]),
    ([0, 4], [2**63 - 1, 0], [0, 2], [2, -2]), ([1], [2], [0], [1])])
def test_slice(starts: list[int], ends: list[int], axes: list[int] | None, steps: list[int] | None) -> None:
    x = rand(3, 5, 6)
    index = [slice(None)] * 3
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        axis = axes[i] if axes else i
        index[axis] = onnx_axis_slice(start, end, steps[i] if steps else 1, x.shape[axis])
    out = x[tuple(index)].shape
    check("slice", [x], [(out, "float32")], starts=starts, ends=ends, axes=axes, steps=steps)


@pytest.mark.parametrize("axis, index_dtype", [(0, "int64"), (1, "int32"), (2, "int64")])
def test_gather(axis: int, index_dtype: str) -> None:
    x = rand(4, 5, 3)
    indices = RNG.integers(-x.shape[axis], x.shape[axis], (2, 3)).astype(index_dtype)
    out = np.take(x, indices, axis=axis).shape
    check("gather", [x, indices], [(out, "float32")], axis=axis)
    scalar = np.asarray(1, dtype=index_dtype)
    check("gather", [x, scalar], [(np.take(x, scalar, axis=axis).shape, "float32")], axis=axis)


@pytest.mark.parametrize("shape, out", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 1, 3), (2, 4, 3))])
def test_expand(shape: tuple[int, ...], out: tuple[int, ...]) -> None:
    check("expand", [rand(*shape, dtype="int64")], [(out, "int64")])


@pytest.mark.parametrize("shape, repeats", [((2, 3), [2, 3]), ((1,), [4]), ((2, 1, 3), [1, 3, 2])])
def test_tile(shape: tuple[int, ...], repeats: list[int]) -> None:
    x = rand(*shape)
    check("tile", [x], [(np.tile(x, repeats).shape, "float32")], repeats=repeats)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[1, 2, 0, 1], [0, 0, 0, 0], [2, -1, 1, 3], [-1, 1, 1, -2]])
def test_pad(mode: str, pads: list[int]) -> None:
    x = rand(4, 5)
    rank = 2
    out = tuple(x.shape[a] + pads[a] + pads[rank + a] for a in range(rank))
    check("pad", [x], [(out, "float32")], pads=pads, mode=mode, value=1.5)


@pytest.mark.parametrize("mode, ctm, nearest_mode", [
    ("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_floor"),
    ("nearest", "align_corners", "round_prefer_ceil"), ("linear", "half_pixel", None),
    ("linear", "align_corners", None), ("cubic", "half_pixel", None), ("linear", "pytorch_half_pixel", None),
    ("linear", "tf_crop_and_resize", None)])
@pytest.mark.parametrize("out_shape", [(1, 2, 8, 10), (1, 2, 3, 2)])
def test_resize(mode: str, ctm: str, nearest_mode: str | None, out_shape: tuple[int, ...]) -> None:
    x = rand(1, 2, 4, 5)
    kwargs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": ctm}
    if nearest_mode:
        kwargs["nearest_mode"] = nearest_mode
    if ctm == "tf_crop_and_resize":
        kwargs["roi"] = [0, 0, 0.1, 0.2, 1, 1, 0.9, 1.2]
        kwargs["extrapolation_value"] = -3.0
    check("resize", [x], [(out_shape, "float32")], rtol=1e-6, atol=1e-6, **kwargs)


def test_resize_nearest_integers() -> None:
    check("resize", [rand(1, 1, 3, 3, dtype="int64")], [((1, 1, 6, 7), "int64")], mode="nearest")


@pytest.mark.parametrize("fn", ["sum", "mean", "max", "min", "prod", "l1", "l2", "sum_square", "log_sum",
                                "log_sum_exp"])
@pytest.mark.parametrize("shape, axes, keepdims", [((2, 3, 4), [1], 1), ((2, 3, 4), [0, 2], 0),
                                                   ((2, 3, 4), None, 1), ((5,), [-1], 0), ((1, 1), [0], 1)])
def test_reduce(fn: str, shape: tuple[int, ...], axes: list[int] | None, keepdims: int) -> None:
    x = rand(*shape)
    if fn == "log_sum":
        x = np.abs(x) + 0.1
    reduced = tuple(range(len(shape))) if axes is None else tuple(a % len(shape) for a in axes)
    out = np.sum(x, axis=reduced, keepdims=bool(keepdims)).shape
    check("reduce", [x], [(out, "float32")], rtol=2e-6, atol=1e-6, fn=fn, axes=axes, keepdims=keepdims)


def test_reduce_noop_with_empty_axes() -> None:
    x = rand(2, 3)
    check("reduce", [x], [((2, 3), "float32")], fn="sum", axes=[], keepdims=1, noop_with_empty_axes=1)


@pytest.mark.parametrize("kernel", ["arg_max", "arg_min"])
@pytest.mark.parametrize("axis, last", [(0, 0), (1, 1), (-1, 0), (2, 1)])
def test_arg_extremes(kernel: str, axis: int, last: int) -> None:
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)  # ties everywhere
    x[1, 2, 3] = np.nan
    out = list(x.shape)
    out[axis] = 1
    check(kernel, [x], [(tuple(out), "int64")], axis=axis, keepdims=1, select_last_index=last)


@pytest.mark.parametrize("axis, index_dtype", [(0, "int64"), (1, "int32"), (-1, "int64")])
def test_gather_elements(axis: int, index_dtype: str) -> None:
    x = rand(3, 4, 5)
    shape = [3, 4, 5]
    shape[axis] = 2
    indices = RNG.integers(-x.shape[axis], x.shape[axis], shape).astype(index_dtype)
    check("gather_elements", [x, indices], [(tuple(shape), "float32")], axis=axis)


@pytest.mark.parametrize("idx_shape, batch_dims",
                         [((2, 2), 0), ((3, 1), 0), ((2, 2, 3), 0), ((3, 2, 1), 1), ((3, 2), 1), ((3, 2, 2), 1)])
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_gather_nd(idx_shape: tuple[int, ...], batch_dims: int, index_dtype: str) -> None:
    """Negative indices too; batch_dims shares the leading dimensions."""
    x = rand(3, 4, 5)
    depth = idx_shape[-1]
    dims = np.array(x.shape[batch_dims:batch_dims + depth])
    indices = (RNG.integers(0, 1000, idx_shape) % dims - dims * RNG.integers(0, 2, idx_shape)).astype(index_dtype)
    out = x.shape[:batch_dims] + idx_shape[batch_dims:-1] + x.shape[batch_dims + depth:]
    check("gather_nd", [x, indices], [(out, "float32")], batch_dims=batch_dims)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_constant_of_shape(dtype: str) -> None:
    check("constant_of_shape", [], [((2, 3), dtype)], value=1.0)


@pytest.mark.parametrize("dtype, start, delta, n", [("float32", 0.1, 0.3, 17), ("int64", -3, 2, 5),
                                                    ("float32", 1.0, -0.7, 1), ("int32", 5, -1, 4)])
def test_range(dtype: str, start: float, delta: float, n: int) -> None:
    check("range", [], [((n,), dtype)], rtol=0, atol=0, start=start, delta=delta)

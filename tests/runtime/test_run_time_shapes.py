"""Native kernels with run-time shapes (pyocc.lowering.native.sizes): one
kernel, written once for dimensions that are polynomials in a symbol S,
run at several S against pyocc's numpy kernel on the same arrays; the
Size arithmetic the emitters rely on; and the sites that cannot take
run-time shapes saying so (pyocc.lowering.symbolic_native.emit_site)."""

from __future__ import annotations

import ctypes
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import llvmlite.ir as ir
import numpy as np
import pytest

from pyocc.lowering.native.sizes import Size, SizeContext, StaticSizeError
from pyocc.lowering import symbolic_native
from pyocc.lowering.symbolic_native import NotNativeProgram, emit_site
from pyocc.planning.symbolic import Poly
from pyocc.runtime.jit import _resolve_externals, jit_module
from pyocc.testing.native_kernels import run_numpy, site_for

RANGES = {"S": (1, 64)}
LENGTHS = (1, 2, 5, 17, 64)
S = Poly.symbol("S")

Dim = int | Poly
Spec = tuple[tuple[Dim, ...], str] | None


def _spec(spec: Spec | list[Spec]) -> Any:
    if isinstance(spec, list):
        return [_spec(one) for one in spec]
    return None if spec is None else {"shape": list(spec[0]), "dtype": spec[1]}


def _at(shape: tuple[Dim, ...], s: int) -> tuple[int, ...]:
    return tuple(d.evaluate({"S": s}) if isinstance(d, Poly) else d for d in shape)


def compile_site(kernel: str, inputs: list[Spec], outputs: list[Spec], workspace_bytes: int | None = None,
                 **kwargs: Any) -> Callable[..., None]:
    """The kernel of a site with symbolic dimensions (and a planned scratch
    of `workspace_bytes`), JIT-compiled: call(arrays, outputs, s) runs it at S = s."""
    module = ir.Module(name="run_time_shapes")
    site = {"kernel": kernel, "inputs": [_spec(x) for x in inputs], "outputs": [_spec(x) for x in outputs],
            "kwargs": kwargs,
            "workspace": None if workspace_bytes is None else {"shape": [workspace_bytes], "dtype": "int8"}}
    emit_site(module, "site", site, RANGES)
    entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), "entry")
    builder = ir.IRBuilder(entry.append_basic_block())
    builder.call(module.get_global("site"), [entry.args[0]])
    builder.ret_void()
    engine, _ = jit_module(str(module), _resolve_externals)
    function = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.get_function_address("entry"))

    scratch = [np.full(workspace_bytes, 255, np.uint8)] if workspace_bytes is not None else []

    def call(arrays: list[np.ndarray | None], outs: list[np.ndarray], s: int) -> None:
        flat = [a for x in arrays for a in (x if isinstance(x, list) else [x])]
        pointers = [None if a is None else a.ctypes.data for a in [*flat, *outs, *scratch]] + [s]
        table = (ctypes.c_void_p * len(pointers))(*pointers)
        function(ctypes.addressof(table))
        _ = engine  # the code lives as long as the engine

    return call


def check(kernel: str, inputs: list[Spec | list[Spec]], outputs: list[Spec],
          make: Callable[[tuple[int, ...], str, int], np.ndarray] | None = None, rtol: float = 1e-5,
          atol: float = 1e-6, workspace_bytes: int | None = None, out_keyword: str = "out", **kwargs: Any) -> None:
    """The run-time-shape kernel at every S of LENGTHS equals the numpy kernel on the same arrays."""
    run = compile_site(kernel, inputs, outputs, workspace_bytes, **kwargs)
    rng = np.random.default_rng(0)

    def array(spec: tuple[tuple[Dim, ...], str], index: int, s: int) -> np.ndarray:
        shape, dtype = _at(spec[0], s), spec[1]
        return make(shape, dtype, index) if make is not None else rng.standard_normal(shape).astype(dtype)

    for s in LENGTHS:
        arrays: list[Any] = []
        for index, spec in enumerate(inputs):
            if spec is None:
                arrays.append(None)
            elif isinstance(spec, list):
                arrays.append([array(one, index, s) for one in spec])
            else:
                arrays.append(array(spec, index, s))
        out_specs = [(_at(o[0], s), o[1]) for o in outputs if o is not None]
        got = [np.full(shape, 77, dtype=dtype) for shape, dtype in out_specs]
        run(arrays, got, s)
        static_kwargs = {k: [_at((v,), s)[0] if isinstance(v, Poly) else v for v in value]
                         if isinstance(value, list) else value for k, value in kwargs.items()}
        want = run_numpy(site_for(kernel, arrays, out_specs, out_keyword=out_keyword, **static_kwargs), arrays)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{kernel} at S={s}")


def test_gemm_rows_at_run_time() -> None:
    check("gemm", [((S, 32), "float32"), ((32, 16), "float32"), ((16,), "float32")], [((S, 16), "float32")],
          alpha=1.0, beta=1.0, trans_a=0, trans_b=0)
    check("gemm", [((S, 8), "float32"), ((12, 8), "float32"), ((12,), "float32")], [((S, 12), "float32")],
          alpha=0.5, beta=2.0, trans_a=0, trans_b=1, activation="tanh")


def test_matmul_with_run_time_depth_and_batch() -> None:
    check("matmul", [((1, 4, S, S), "float32"), ((1, 4, S, 8), "float32")], [((1, 4, S, 8), "float32")])
    check("matmul", [((S, 4, 3, 5), "float32"), ((S, 4, 5, 2), "float32")], [((S, 4, 3, 2), "float32")])
    check("matmul", [((1, S, 8), "float32"), ((8, 6), "float32")], [((1, S, 6), "float32")])


def test_attention_softmax_with_and_without_a_mask() -> None:
    q, k_t = ((1, 4, S, 8), "float32"), ((1, 4, 8, S), "float32")
    check("attention_softmax", [q, k_t, None], [((1, 4, S, S), "float32")], scale=0.35)
    check("attention_softmax", [q, k_t, ((1, 1, 1, S), "float32")], [((1, 4, S, S), "float32")], scale=0.35)


def test_elementwise_with_broadcasting() -> None:
    x = ((1, S, 32), "float32")
    check("unary", [x], [x], fn="erf")
    check("unary", [x], [x], fn="gelu", approximate="tanh")
    check("binary", [x, ((32,), "float32")], [x], fn="add", fmod=0)
    check("binary", [((1, 4, S, S), "float32"), ((1, 1, 1, S), "float32")], [((1, 4, S, S), "float32")],
          fn="mul", fmod=0)
    check("binary", [((), "float32"), ((1, 1, 1, S), "float32")], [((1, 1, 1, S), "float32")], fn="sub", fmod=0)
    check("cast", [((1, 1, 1, S), "int64")], [((1, 1, 1, S), "float32")],
          make=lambda shape, dtype, _: np.arange(math.prod(shape)).reshape(shape).astype(dtype) % 2)


def test_layer_norm_transpose_and_gather() -> None:
    check("layer_norm", [((1, S, 32), "float32"), ((32,), "float32"), ((32,), "float32")],
          [((1, S, 32), "float32")], axis=-1, epsilon=1e-5, rtol=1e-5, atol=1e-5)
    check("transpose", [((1, S, 4, 8), "float32")], [((1, 4, S, 8), "float32")], perm=[0, 2, 1, 3])
    check("transpose", [((1, S, 4, 8), "float32")], [((1, 4, 8, S), "float32")], perm=[0, 2, 3, 1])

    def ids(shape: tuple[int, ...], dtype: str, index: int) -> np.ndarray:
        rng = np.random.default_rng(index)
        return rng.integers(-50, 50, shape).astype(dtype) if index == 1 else rng.standard_normal(shape).astype(dtype)

    check("gather", [((50, 32), "float32"), ((1, S), "int64")], [((1, S, 32), "float32")], make=ids, axis=0)
    check("gather", [((1, S, 32), "float32"), ((), "int64")], [((1, 32), "float32")],
          make=lambda shape, dtype, index: np.zeros(shape, dtype) if index == 1
          else np.random.default_rng(0).standard_normal(shape).astype(dtype), axis=1)


def test_softmax_where_and_a_slice_up_to_the_length() -> None:
    """GPT-2's causal attention: a Slice of a [64, 64] mask up to S x S (its
    ends are the length), Where on it, Softmax."""
    scores = ((1, 4, S, S), "float32")
    check("softmax", [scores], [scores], axis=-1)
    check("slice", [((64, 64), "bool")], [((S, S), "bool")],
          make=lambda shape, dtype, _: np.tril(np.ones(shape, dtype)), starts=[0, 0], ends=[S, S], axes=[0, 1])
    check("slice", [((S, 8), "float32")], [((S, 5), "float32")], starts=[0, 2], ends=[S, 7], axes=[0, 1])
    check("where", [((S, S), "bool"), scores, ((), "float32")], [scores],
          make=lambda shape, dtype, i: (np.random.default_rng(i).random(shape) < 0.5).astype(dtype) if i == 0
          else np.random.default_rng(i).standard_normal(shape).astype(dtype))


def test_convolution_over_a_run_time_batch() -> None:
    """The ViT-style patch embedding: an im2col convolution on S images, with its planned scratch."""
    check("conv", [((S, 3, 32, 32), "float32"), ((32, 3, 8, 8), "float32"), ((32,), "float32"), None],
          [((S, 32, 4, 4), "float32")], workspace_bytes=12288, rtol=1e-5, atol=1e-5,
          strides=[8, 8], group=1, pads=[0, 0, 0, 0])


def test_concat_split_and_expand_with_run_time_sizes() -> None:
    check("concat", [[((S, 1, 8), "float32"), ((S, 16, 8), "float32")]], [((S, 17, 8), "float32")], axis=1)
    check("concat", [[((1, S, 8), "float32"), ((1, 3, 8), "float32"), ((1, S, 8), "float32")]],
          [((1, Poly.parse("2*S + 3"), 8), "float32")], axis=1)
    check("split", [((1, S, 8), "float32")], [((1, S, 3), "float32"), ((1, S, 5), "float32")], axis=2,
          out_keyword="outs")
    check("expand", [((1, 1, 8), "float32")], [((S, 1, 8), "float32")])


def test_nan_predicates_and_gather_elements_with_run_time_sizes() -> None:
    """The exporter's Where(IsNaN(scores), 0, scores) around attention, and
    GatherElements over a run-time sequence."""
    def special(shape: tuple[int, ...], dtype: str, index: int) -> np.ndarray:
        values = np.random.default_rng(index).standard_normal(shape).astype(dtype)
        flat = values.reshape(-1)
        flat[::3], flat[1::5], flat[2::7] = np.nan, np.inf, -np.inf
        return values

    scores = ((1, 4, S, S), "float32")
    for fn in ("isnan", "isinf", "isposinf", "isneginf"):
        check("unary", [scores], [((1, 4, S, S), "bool")], make=special, fn=fn)

    def indices(shape: tuple[int, ...], dtype: str, index: int) -> np.ndarray:
        rng = np.random.default_rng(index)
        return rng.integers(-8, 8, shape).astype(dtype) if index == 1 else rng.standard_normal(shape).astype(dtype)

    check("gather_elements", [((1, S, 8), "float32"), ((1, S, 8), "int64")], [((1, S, 8), "float32")],
          make=indices, axis=2)
    # along the sequence: indices in [-S, S) (numpy raises out of range)
    check("gather_elements", [((1, S, 8), "float32"), ((1, S, 8), "int32")], [((1, S, 8), "float32")],
          make=lambda shape, dtype, index: np.random.default_rng(index).integers(-shape[1], shape[1], shape).astype(
              dtype) if index == 1 else indices(shape, dtype, index), axis=1)


def test_gather_nd_with_run_time_rows() -> None:
    """The dynamo exporter's mask lookup: attention_mask[0, position] for
    every position, as GatherND of [1, S] by (0, i) pairs [1, 1, 1, S, 2]."""
    def pairs(shape: tuple[int, ...], dtype: str, index: int) -> np.ndarray:
        if index == 0:
            return np.random.default_rng(0).integers(0, 2, shape).astype(dtype)
        length = shape[3]
        rows = np.stack([np.zeros(length, np.int64), np.arange(length)[::-1] - length * (np.arange(length) % 2)], -1)
        return rows.reshape(shape).astype(dtype)

    check("gather_nd", [((1, S), "int64"), ((1, 1, 1, S, 2), "int64")], [((1, 1, 1, S), "int64")], make=pairs)
    check("gather_nd", [((S, 4, 8), "float32"), ((S, 3, 1), "int32")], [((S, 3, 8), "float32")],
          make=lambda shape, dtype, index: np.random.default_rng(index).integers(-4, 4, shape).astype(dtype)
          if index == 1 else np.random.default_rng(index).standard_normal(shape).astype(dtype), batch_dims=1)


F32 = "float32"
#: more kernels over a run-time batch or sequence: name -> check's arguments
MORE = {
    "variadic": ([[((1, S, 8), F32), ((8,), F32), ((1, S, 8), F32)]], [((1, S, 8), F32)], {"fn": "sum"}),
    "copy": ([((1, S, 8), F32)], [((S, 8), F32)], {}),
    "channel_affine": ([((S, 4, 3, 3), F32), ((4,), F32), ((4,), F32)], [((S, 4, 3, 3), F32)], {}),
    "log_softmax": ([((1, 4, S, S), F32)], [((1, 4, S, S), F32)], {"axis": -1, "atol": 1e-5}),
    "max_pool": ([((S, 4, 8, 8), F32)], [((S, 4, 4, 4), F32)],
                 {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 0, 0]}),
    "average_pool": ([((S, 4, 8, 8), F32)], [((S, 4, 4, 4), F32)],
                     {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 0, 0]}),
    "global_average_pool": ([((S, 4, 5, 5), F32)], [((S, 4, 1, 1), F32)], {}),
    "global_max_pool": ([((S, 4, 5, 5), F32)], [((S, 4, 1, 1), F32)], {}),
    "reduce": ([((1, S, 8), F32)], [((1, S, 1), F32)], {"fn": "mean", "axes": [-1], "keepdims": 1}),
}


@pytest.mark.parametrize("kernel", sorted(MORE))
def test_more_kernels_over_a_run_time_size(kernel: str) -> None:
    inputs, outputs, kwargs = MORE[kernel]
    check(kernel, inputs, outputs, **kwargs)


def test_batch_norm_and_a_sum_over_the_run_time_axis() -> None:
    def positive(shape: tuple[int, ...], dtype: str, index: int) -> np.ndarray:
        values = np.random.default_rng(index).standard_normal(shape).astype(dtype)
        return np.abs(values) + 1 if index == 4 else values  # the variance

    check("batch_norm", [((S, 4, 3, 3), F32), ((4,), F32), ((4,), F32), ((4,), F32), ((4,), F32)],
          [((S, 4, 3, 3), F32)], make=positive, epsilon=1e-5)
    check("reduce", [((1, S, 8), F32)], [((1, 1, 8), F32)], fn="sum", axes=[1], keepdims=1, atol=1e-5)


def test_a_kernel_without_run_time_shapes_says_so() -> None:
    module = ir.Module(name="m")
    site = {"kernel": "lrn", "inputs": [_spec(((1, 8, S), "float32"))], "outputs": [_spec(((1, 8, S), "float32"))],
            "kwargs": {"size": 3}}
    with pytest.raises(NotNativeProgram, match="^the native lrn kernel takes static shapes only$"):
        emit_site(module, "site", site, RANGES)


def test_a_mean_over_the_run_time_axis() -> None:
    """A mean divides by the count of the reduced axis: S, converted to a double at run time."""
    check("reduce", [((1, S, 8), F32)], [((1, 1, 8), F32)], fn="mean", axes=[1], keepdims=1)


def test_a_kernel_that_needs_a_static_size_says_so() -> None:
    """layer_norm divides by its row width as a float constant: a width of S cannot be one."""
    module = ir.Module(name="m")
    site = {"kernel": "layer_norm", "inputs": [_spec(((4, S), "float32")), _spec(((S,), "float32")), None],
            "outputs": [_spec(((4, S), "float32"))], "kwargs": {"axis": -1, "epsilon": 1e-5}}
    with pytest.raises(NotNativeProgram, match=r"^the native layer_norm kernel cannot take the run-time shapes "
                                               r"4xS, S, 4xS: a run-time size S used as a compile-time number$"):
        emit_site(module, "site", site, RANGES)


def test_size_arithmetic_and_comparisons() -> None:
    context = SizeContext(ir.Module(name="m"), "unused", 0, ["S"], RANGES)
    s = context.size(S)
    assert isinstance(s, Size) and context.size(Poly.constant(7)) == 7
    assert 32 * s == s * 32 and (s * 32).poly == Poly.parse("32*S")
    assert s - s == 0 and isinstance(s - s, int)
    assert math.prod([1, s, 4]) == 4 * s and (4 * s) // 2 == 2 * s and (4 * s) % 2 == 0
    assert s != 1 and s != 64 and not (s == 1)  # equal to no int: it is every value of the range
    assert s >= 1 and s <= 64 and s > 0 and not s > 1 and not s < 64 and not s <= 0
    assert (s + 1 > s) and not (s * s > s)  # S^2 == S at S = 1
    with pytest.raises(StaticSizeError, match="compile-time int"):
        range(s)
    with pytest.raises(StaticSizeError, match="written as a constant"):
        str(ir.Constant(ir.IntType(64), s))
    with pytest.raises(StaticSizeError, match="not divisible"):
        (3 * s) // 2
    quadratic = context.size(Poly.parse("S^2 - 5*S + 7"))  # 1 at S = 2 and 3, its least value
    assert quadratic >= 1 and not quadratic > 1
    huge = SizeContext(ir.Module(name="m"), "unused", 0, ["a", "b"], {"a": (1, 4096), "b": (1, 4096)})
    with pytest.raises(StaticSizeError, match="the sign of a\\*b is not checked"):
        huge.size(Poly.parse("a*b")) > 0  # noqa: B015 - the comparison raises

    with pytest.raises(StaticSizeError, match="combined with the float"):
        s * 0.5  # noqa: B018 - the product raises
    with pytest.raises(StaticSizeError, match="divided as a compile-time number"):
        s / 2  # noqa: B018 - the quotient raises


@pytest.mark.parametrize("error", [StaticSizeError("a run-time size S used as a compile-time int"),
                                   ValueError("an emitter bug")])
def test_only_a_static_size_error_falls_back(error: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    """An emitter that needs a static size (StaticSizeError) makes the site
    NotNativeProgram (the model falls back, saying why); any other exception
    from an emitter is a bug and propagates instead of a quiet fallback."""
    def emit(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
        raise error

    real = symbolic_native.native_kernel_for

    def kernel_for(site: dict[str, Any]) -> Any:
        return dataclasses.replace(real(site), emit=emit)

    monkeypatch.setattr(symbolic_native, "native_kernel_for", kernel_for)
    site = {"kernel": "layer_norm", "inputs": [_spec(((S, 4), "float32")), _spec(((4,), "float32")), None],
            "outputs": [_spec(((S, 4), "float32"))], "kwargs": {"axis": -1, "epsilon": 1e-5}}
    if isinstance(error, StaticSizeError):
        with pytest.raises(NotNativeProgram, match=r"cannot take the run-time shapes Sx4, 4, Sx4: a run-time size"):
            emit_site(ir.Module(name="m"), "site", site, RANGES)
    else:
        with pytest.raises(ValueError, match="an emitter bug"):
            emit_site(ir.Module(name="m"), "site", site, RANGES)

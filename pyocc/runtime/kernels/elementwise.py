"""Elementwise host kernels: unary, binary, variadic, where, cast and copy.

Every kernel writes into a caller-supplied ``out`` array. Unary and binary
kernels are correct when ``out`` is the very same array as an input (the
memory planner reuses a dying input's buffer for the result); the activations
fused into conv, gemm and channel_affine reuse the unary kernels in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "ACTIVATIONS",
    "apply_activation",
    "binary",
    "cast",
    "copy",
    "erf",
    "unary",
    "variadic",
    "where",
]


# ---------------------------------------------------------------------------
# erf without scipy
# ---------------------------------------------------------------------------

# Maclaurin series of erf(x) * sqrt(pi) / 2 in powers of x**2:
# sum_n (-1)^n x^(2n+1) / (n! (2n+1)). Twelve terms reach 1e-16 for |x| < 0.5.
_ERF_SERIES = [(-1.0) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(12)]

# Numerical Recipes' erfcc (Chebyshev fit): erfc(z) = t * exp(-z^2 + P(t)) with
# t = 1 / (1 + z/2), fractional error below 1.2e-7 for every z >= 0.
_ERFC_POLY = [
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
]

_SERIES_LIMIT = 0.5


def _horner(coefficients: Sequence[float], t: np.ndarray) -> np.ndarray:
    """Evaluate sum_i coefficients[i] * t**i with Horner's scheme."""
    result = np.full_like(t, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        result *= t
        result += c
    return result


def erf(x: np.ndarray) -> np.ndarray:
    """Return erf(x) in float64 with absolute error below 2.5e-7.

    Near zero a Maclaurin series keeps full relative precision (a plain
    erfc-based formula would cancel catastrophically there); elsewhere
    erf = 1 - erfc with Numerical Recipes' erfcc, whose fractional error bound
    1.2e-7 on erfc <= 1 bounds the absolute error on erf.
    """
    x = np.asarray(x, dtype=np.float64)
    magnitude = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * magnitude)
    with np.errstate(under="ignore"):
        erfc = t * np.exp(-magnitude * magnitude + _horner(_ERFC_POLY, t))
    result = np.copysign(1.0 - erfc, x)
    small = magnitude < _SERIES_LIMIT
    if np.any(small):
        xs = x[small]
        result[small] = (2.0 / math.sqrt(math.pi)) * xs * _horner(_ERF_SERIES, xs * xs)
    return result


# ---------------------------------------------------------------------------
# Unary kernels
# ---------------------------------------------------------------------------

# Each entry computes fn(x) into out and must stay correct when out is x:
# either a single ufunc call, or steps that read x only before out is written,
# or a temporary.
_UnaryImpl = Callable[[np.ndarray, np.ndarray, float | None, float | None], None]


def _relu(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    np.maximum(x, 0, out=out)


def _leaky_relu(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    slope = 0.01 if alpha is None else alpha
    # np.where evaluates both branches before writing, so out may be x.
    np.copyto(out, np.where(x >= 0, x, x * np.asarray(slope, dtype=x.dtype)))


def _sigmoid(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    # 1 / (1 + exp(-x)): exp overflows to inf for very negative x, which yields
    # the correct limit 0, so only the warning needs silencing.
    with np.errstate(over="ignore"):
        np.negative(x, out=out)
        np.exp(out, out=out)
        np.add(out, 1, out=out)
        np.reciprocal(out, out=out)


def _hard_sigmoid(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    np.multiply(x, 0.2 if alpha is None else alpha, out=out)
    np.add(out, 0.5 if beta is None else beta, out=out)
    np.clip(out, 0, 1, out=out)


def _hard_swish(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    # ONNX HardSwish is x * HardSigmoid(x; alpha=1/6, beta=0.5); x is needed
    # after the gate is computed, so the gate goes to a temporary.
    gate = np.empty_like(x)
    _hard_sigmoid(x, gate, 1.0 / 6.0, 0.5)
    np.multiply(x, gate, out=out)


def _clip(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    if alpha is None and beta is None:
        np.copyto(out, x)
    elif alpha is None:
        np.minimum(x, np.asarray(beta, dtype=x.dtype), out=out)
    elif beta is None:
        np.maximum(x, np.asarray(alpha, dtype=x.dtype), out=out)
    else:
        np.clip(x, np.asarray(alpha, dtype=x.dtype), np.asarray(beta, dtype=x.dtype), out=out)


def _erf(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    np.copyto(out, erf(x), casting="same_kind")


def _reciprocal(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    with np.errstate(divide="ignore"):
        np.reciprocal(x, out=out)


def _log(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    with np.errstate(divide="ignore", invalid="ignore"):
        np.log(x, out=out)


def _sqrt(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    with np.errstate(invalid="ignore"):
        np.sqrt(x, out=out)


def _exp(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
    with np.errstate(over="ignore"):
        np.exp(x, out=out)


def _temporary(compute: Callable[[np.ndarray, float | None, float | None], np.ndarray]) -> _UnaryImpl:
    """A unary fn computed into a temporary (float64 for floats) and rounded
    once into out: correct when out is x, and as exact as the formula."""

    def apply(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
        wide = x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            np.copyto(out, compute(wide, alpha, beta), casting="unsafe")

    return apply


def _elu(x: np.ndarray, alpha: float | None, beta: float | None) -> np.ndarray:
    a = 1.0 if alpha is None else alpha
    return np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0)))


def _selu(x: np.ndarray, alpha: float | None, beta: float | None) -> np.ndarray:
    # alpha and gamma (carried as beta) default to ONNX's float32 constants
    a = 1.67326319217681884765625 if alpha is None else alpha
    g = 1.05070102214813232421875 if beta is None else beta
    return g * np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))


def _celu(x: np.ndarray, alpha: float | None, beta: float | None) -> np.ndarray:
    a = 1.0 if alpha is None else alpha
    return np.maximum(x, 0) + np.minimum(0, a * np.expm1(x / a))


def _shrink(x: np.ndarray, alpha: float | None, beta: float | None) -> np.ndarray:
    # lambd is carried as alpha, bias as beta
    lambd = 0.5 if alpha is None else alpha
    bias = 0.0 if beta is None else beta
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


def _mish(x: np.ndarray, alpha: float | None, beta: float | None) -> np.ndarray:
    return x * np.tanh(np.logaddexp(0, x))


def _ufunc(ufunc: np.ufunc) -> _UnaryImpl:
    """Adapt a one-argument ufunc to the unary kernel calling convention."""

    def apply(x: np.ndarray, out: np.ndarray, alpha: float | None, beta: float | None) -> None:
        ufunc(x, out=out)

    return apply


_UNARY: dict[str, _UnaryImpl] = {
    "relu": _relu,
    "leaky_relu": _leaky_relu,
    "sigmoid": _sigmoid,
    "tanh": _ufunc(np.tanh),
    "exp": _exp,
    "log": _log,
    "sqrt": _sqrt,
    "abs": _ufunc(np.abs),
    "neg": _ufunc(np.negative),
    "reciprocal": _reciprocal,
    "erf": _erf,
    "hard_sigmoid": _hard_sigmoid,
    "hard_swish": _hard_swish,
    "clip": _clip,
    "not": _ufunc(np.logical_not),
    "floor": _ufunc(np.floor),
    "ceil": _ufunc(np.ceil),
    "identity": lambda x, out, alpha, beta: np.copyto(out, x),
    # predicates: a bool out
    "isnan": _ufunc(np.isnan),
    "isinf": _ufunc(np.isinf),
    "isposinf": _ufunc(np.isposinf),
    "isneginf": _ufunc(np.isneginf),
    # trigonometric and hyperbolic
    "sin": _temporary(lambda x, a, b: np.sin(x)),
    "cos": _temporary(lambda x, a, b: np.cos(x)),
    "tan": _temporary(lambda x, a, b: np.tan(x)),
    "asin": _temporary(lambda x, a, b: np.arcsin(x)),
    "acos": _temporary(lambda x, a, b: np.arccos(x)),
    "atan": _temporary(lambda x, a, b: np.arctan(x)),
    "sinh": _temporary(lambda x, a, b: np.sinh(x)),
    "cosh": _temporary(lambda x, a, b: np.cosh(x)),
    "asinh": _temporary(lambda x, a, b: np.arcsinh(x)),
    "acosh": _temporary(lambda x, a, b: np.arccosh(x)),
    "atanh": _temporary(lambda x, a, b: np.arctanh(x)),
    "sign": _ufunc(np.sign),
    "round": _ufunc(np.round),  # half to even, as ONNX Round
    # activations
    "softplus": _temporary(lambda x, a, b: np.logaddexp(0, x)),
    "softsign": _temporary(lambda x, a, b: x / (1 + np.abs(x))),
    "elu": _temporary(_elu),
    "selu": _temporary(_selu),
    "celu": _temporary(_celu),
    "thresholded_relu": _temporary(lambda x, a, b: np.where(x > (1.0 if a is None else a), x, 0)),
    "mish": _temporary(_mish),
    "shrink": _temporary(_shrink),
}

#: Activations that conv, gemm and channel_affine can apply to their result.
ACTIVATIONS = frozenset(
    {"relu", "leaky_relu", "clip", "sigmoid", "tanh", "hard_swish", "hard_sigmoid"}
)


def _gelu(x: np.ndarray, out: np.ndarray, approximate: str) -> None:
    """ONNX Gelu (opset 20), computed in float64 and rounded once into out."""
    x64 = x.astype(np.float64)
    if approximate == "none":
        gate = 0.5 * (1.0 + erf(x64 / math.sqrt(2.0)))
    elif approximate == "tanh":
        gate = 0.5 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)))
    else:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    np.copyto(out, x64 * gate, casting="same_kind")


def unary(
    x: np.ndarray,
    *,
    out: np.ndarray,
    fn: str,
    alpha: float | None = None,
    beta: float | None = None,
    approximate: str = "none",
) -> None:
    """Compute ``out = fn(x)`` elementwise; ``out`` may be ``x`` itself.

    ``fn`` is one of relu, leaky_relu (alpha, default 0.01), sigmoid, tanh,
    exp, log, sqrt, abs, neg, reciprocal, erf, gelu (``approximate`` "none" or
    "tanh"), hard_sigmoid (alpha default 0.2, beta default 0.5), hard_swish,
    clip (alpha = min, beta = max, None = unbounded), not (bool), floor, ceil,
    identity; the predicates isnan, isinf, isposinf, isneginf (a bool
    ``out``); sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh,
    atanh, sign, round (half to even); softplus, softsign, elu (alpha),
    selu (alpha, beta = gamma), celu (alpha), thresholded_relu (alpha), mish
    and shrink (alpha = lambd, beta = bias). ``None`` for alpha/beta means
    the ONNX default of ``fn``.
    """
    if fn == "gelu":
        _gelu(x, out, approximate)
        return
    try:
        impl = _UNARY[fn]
    except KeyError:
        raise ValueError(f"unary: unknown fn {fn!r}; expected one of {sorted(_UNARY)} or 'gelu'") from None
    impl(x, out, alpha, beta)


def apply_activation(
    y: np.ndarray, activation: str | None, alpha: float | None = None, beta: float | None = None
) -> None:
    """Apply a fused activation to ``y`` in place (no-op for ``None``)."""
    if activation is None:
        return
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown fused activation {activation!r}; expected one of {sorted(ACTIVATIONS)}")
    _UNARY[activation](y, y, alpha, beta)


# ---------------------------------------------------------------------------
# Binary kernels
# ---------------------------------------------------------------------------

_BINARY_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "equal": np.equal,
    "less": np.less,
    "greater": np.greater,
    "less_or_equal": np.less_equal,
    "greater_or_equal": np.greater_equal,
    "and": np.logical_and,
    "or": np.logical_or,
    "xor": np.logical_xor,
}


def _divide(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """ONNX Div: true division for floats, truncation toward zero for integers.

    onnxruntime divides integers with C++ ``/``, which truncates; numpy's
    ``//`` floors. ``a - fmod(a, b)`` is an exact multiple of ``b`` whose
    quotient is the truncated one, so no float round trip is needed.
    """
    if np.issubdtype(out.dtype, np.integer):
        exact_multiple = np.subtract(a, np.fmod(a, b))
        np.floor_divide(exact_multiple, b, out=out)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(a, b, out=out)


def binary(
    a: np.ndarray,
    b: np.ndarray,
    *,
    out: np.ndarray,
    fn: str,
    fmod: int = 0,
    activation: str | None = None,
    alpha: float | None = None,
    beta: float | None = None,
) -> None:
    """Compute ``out = fn(a, b)`` with numpy (= ONNX multidirectional) broadcasting,
    then an optional fused activation on ``out`` (see ``apply_activation``).

    ``fn`` is one of add, sub, mul, div, pow, max, min, equal, less, greater,
    less_or_equal, greater_or_equal, and, or, xor, mod. Comparisons and logical
    ops write a bool ``out``. Integer div truncates toward zero like
    onnxruntime; mod follows ONNX Mod (``fmod=0``: sign of the divisor,
    ``fmod=1``: C fmod). ``out`` may be ``a`` or ``b`` itself when it has that
    operand's shape: every step is an elementwise ufunc, and numpy copes with
    exact overlap.
    """
    if fn in _BINARY_UFUNCS:
        _BINARY_UFUNCS[fn](a, b, out=out)
    elif fn == "div":
        _divide(a, b, out)
    elif fn == "pow":
        # ONNX lets the exponent have another type than the base; the result
        # has the base's type, hence the unsafe cast back into out.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            np.power(a, b, out=out, casting="unsafe")
    elif fn == "mod":
        with np.errstate(divide="ignore", invalid="ignore"):
            (np.fmod if fmod else np.mod)(a, b, out=out)
    else:
        known = sorted([*_BINARY_UFUNCS, "div", "pow", "mod"])
        raise ValueError(f"binary: unknown fn {fn!r}; expected one of {known}")
    apply_activation(out, activation, alpha, beta)


_VARIADIC_UFUNCS: dict[str, np.ufunc] = {
    "sum": np.add,
    "mean": np.add,
    "max": np.maximum,
    "min": np.minimum,
}


def variadic(inputs: Sequence[np.ndarray], *, out: np.ndarray, fn: str) -> None:
    """ONNX Sum / Mean / Max / Min over N broadcast inputs into ``out``.

    ``out`` must not overlap any input except the first (it is folded left to
    right, so a later input would be read after being overwritten).
    """
    if fn not in _VARIADIC_UFUNCS:
        raise ValueError(f"variadic: unknown fn {fn!r}; expected one of {sorted(_VARIADIC_UFUNCS)}")
    if not inputs:
        raise ValueError("variadic: needs at least one input")
    ufunc = _VARIADIC_UFUNCS[fn]
    if len(inputs) == 1:
        np.copyto(out, inputs[0])
    else:
        ufunc(inputs[0], inputs[1], out=out)
        for operand in inputs[2:]:
            ufunc(out, operand, out=out)
    if fn == "mean":
        np.divide(out, len(inputs), out=out, casting="unsafe")


def where(cond: np.ndarray, a: np.ndarray, b: np.ndarray, *, out: np.ndarray) -> None:
    """ONNX Where: ``out = a if cond else b`` with broadcasting; no aliasing."""
    # Two masked copies instead of np.where avoid a full-size temporary.
    np.copyto(out, b)
    np.copyto(out, a, where=np.asarray(cond, dtype=bool))


def cast(x: np.ndarray, *, out: np.ndarray) -> None:
    """ONNX Cast to ``out.dtype``; float to int truncates toward zero like
    onnxruntime's ``static_cast``, anything to bool is ``x != 0``."""
    # NaN/inf to int is undefined in ONNX too; numpy would only warn about it.
    with np.errstate(invalid="ignore"):
        np.copyto(out, x, casting="unsafe")


def copy(x: np.ndarray, *, out: np.ndarray) -> None:
    """Copy ``x`` into ``out`` (Identity; also Reshape/Flatten/Squeeze when the
    compiler materialises them, hence the reshape when sizes agree)."""
    np.copyto(out, x.reshape(out.shape) if x.shape != out.shape and x.size == out.size else x)

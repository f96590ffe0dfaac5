"""Native elementwise kernels: unary, binary, variadic, where, cast, copy.

Each is one loop nest over the output, the inputs broadcast into it
(numpy rules, KernelBuilder.broadcast_loop); an element is read before the
same element is written, so `out` may be an input of its own shape (the
in-place reuse pyocc.runtime.host_kernels documents). Float arithmetic is
float32 except where the numpy kernel computes in float64 (gelu).
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from pyocc.lowering.llvm_math import (
    BINARY_FUNCTIONS,
    COMPARISONS,
    HOST_UNARY_FUNCTIONS,
    INTEGER_FUNCTIONS,
    UNARY_FUNCTIONS,
    binary_expression,
    integer_expression,
    unary_expression,
)
from pyocc.lowering.native.loops import (
    F32,
    F64,
    FLOATS,
    SIGNED,
    UNSIGNED,
    KernelBuilder,
    all_dtypes_in,
    element_type,
)
from pyocc.lowering.native.registry import native_kernel

#: what the binary kernel computes on ints (floats: BINARY_FUNCTIONS, mod)
_INTEGER_BINARY = (INTEGER_FUNCTIONS - {"neg", "abs", "relu", "identity"}) | {"mod"}
#: dtypes the elementwise arithmetic handles
_NUMBERS = frozenset({"float32", "int32", "int64"})
_LOGICAL_BINARY = {"and", "or", "xor"}
#: what the unary kernel computes on ints (T5's relative positions: Abs, Neg)
_INTEGER_UNARY = frozenset({"neg", "abs", "relu", "identity"})
#: float32 predicates of the unary kernel (a bool out): what each asks of x
_PREDICATES = {"isnan": "nan", "isinf": "inf", "isposinf": "+inf", "isneginf": "-inf"}


def _spec(site: dict[str, Any], index: int) -> dict[str, Any]:
    return site["inputs"][index]


# ---------------------------------------------------------------------------
# unary
# ---------------------------------------------------------------------------


def _supports_unary(site: dict[str, Any]) -> bool:
    fn = site["kwargs"].get("fn")
    dtype = _spec(site, 0)["dtype"]
    if fn == "not":
        return dtype == "bool" and site["outputs"][0]["dtype"] == "bool"
    if fn in _PREDICATES:
        return dtype == "float32" and site["outputs"][0]["dtype"] == "bool"
    if fn == "gelu" and site["kwargs"].get("approximate", "none") not in ("none", "tanh"):
        return False
    if dtype in ("int32", "int64"):
        return site["outputs"][0]["dtype"] == dtype and fn in _INTEGER_UNARY
    return dtype == "float32" and site["outputs"][0]["dtype"] == "float32" and \
        (fn in UNARY_FUNCTIONS or fn in HOST_UNARY_FUNCTIONS)


def _gelu(k: KernelBuilder, x: ir.Value, approximate: str) -> ir.Value:
    """ONNX Gelu in float64, rounded once (as the numpy kernel computes it)."""
    b = k.b
    x64 = b.fpext(x, F64)

    def c(value: float) -> ir.Constant:
        return ir.Constant(F64, value)

    def call(name: str, value: ir.Value) -> ir.Value:
        return b.call(k.module.declare_intrinsic(name, [F64]), [value])

    if approximate == "tanh":
        cube = b.fmul(b.fmul(x64, x64), x64)
        inner = b.fmul(c(math.sqrt(2.0 / math.pi)), b.fadd(x64, b.fmul(c(0.044715), cube)))
        gate = b.fmul(c(0.5), b.fadd(c(1.0), call("llvm.tanh", inner)))
    else:
        erf = k.module.globals.get("erf") or ir.Function(k.module, ir.FunctionType(F64, [F64]), "erf")
        gate = b.fmul(c(0.5), b.fadd(c(1.0), b.call(erf, [b.fdiv(x64, c(math.sqrt(2.0)))])))
    return b.fptrunc(b.fmul(x64, gate), F32)


def _predicate(k: KernelBuilder, kind: str, x: ir.Value) -> ir.Value:
    """Whether float32 `x` is NaN, infinite, +inf or -inf (an i1)."""
    if kind == "nan":
        return k.b.fcmp_unordered("uno", x, x)
    if kind == "inf":
        return k.b.fcmp_ordered("==", k.math.fabs(x), ir.Constant(F32, math.inf))
    return k.b.fcmp_ordered("==", x, ir.Constant(F32, math.inf if kind == "+inf" else -math.inf))


@native_kernel("unary", supports=_supports_unary, run_time_shapes=True)
def emit_unary(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """out = fn(x) elementwise (host_kernels.unary); out may be x."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    kw = k.kwargs
    fn = kw["fn"]

    def element(i: ir.Value) -> None:
        value = k.load(x, i)
        if fn == "not":
            result = k.b.zext(k.b.icmp_unsigned("==", value, ir.Constant(value.type, 0)), value.type)
        elif fn in _PREDICATES:
            result = k.b.zext(_predicate(k, _PREDICATES[fn], value), ir.IntType(8))
        elif fn == "gelu":
            result = _gelu(k, value, kw.get("approximate", "none"))
        elif fn in _INTEGER_UNARY and isinstance(value.type, ir.IntType):
            result = integer_expression(k.math, fn, [value])
        else:
            result = unary_expression(k.math, fn, value, kw.get("alpha"), kw.get("beta"), "none")
        k.store(result, out, i)

    k.loop(out.size, element, parallel=True)
    k.finish()


# ---------------------------------------------------------------------------
# binary
# ---------------------------------------------------------------------------


def _supports_binary(site: dict[str, Any]) -> bool:
    fn = site["kwargs"]["fn"]
    a, b = _spec(site, 0)["dtype"], _spec(site, 1)["dtype"]
    out = site["outputs"][0]["dtype"]
    if site["kwargs"].get("activation") is not None and out != "float32":
        return False
    if fn in COMPARISONS:
        return a == b and a in _NUMBERS and out == "bool"
    if fn in _LOGICAL_BINARY:
        return a == b == out == "bool"
    if a != b or a != out:
        return False
    if a == "float32":
        return fn in BINARY_FUNCTIONS or fn == "mod"
    return a in ("int32", "int64") and fn in _INTEGER_BINARY


def _float_mod(k: KernelBuilder, a: ir.Value, c: ir.Value, fmod: int) -> ir.Value:
    """ONNX Mod on floats: C fmod, or (fmod=0) numpy's mod (the sign of the divisor)."""
    b = k.b
    remainder = b.frem(a, c)
    if fmod:
        return remainder
    zero = ir.Constant(a.type, 0.0)
    differ = b.xor(b.fcmp_ordered("<", remainder, zero), b.fcmp_ordered("<", c, zero))
    adjust = b.and_(b.fcmp_ordered("!=", remainder, zero), differ)
    # numpy: a zero remainder takes the divisor's sign
    signed_zero = k.math.intrinsic("llvm.copysign.f32", zero, c)
    fixed = b.select(adjust, b.fadd(remainder, c), remainder)
    return b.select(b.fcmp_ordered("==", remainder, zero), signed_zero, fixed)


def _integer_mod(k: KernelBuilder, a: ir.Value, c: ir.Value, fmod: int) -> ir.Value:
    """ONNX Mod on ints: C's % (fmod=1) or the divisor's sign (numpy's mod)."""
    b = k.b
    zero = ir.Constant(a.type, 0)
    # numpy gives 0 for a zero divisor; srem would trap
    safe = b.select(b.icmp_signed("==", c, zero), ir.Constant(a.type, 1), c)
    remainder = b.srem(a, safe)
    if not fmod:
        differ = b.xor(b.icmp_signed("<", remainder, zero), b.icmp_signed("<", safe, zero))
        adjust = b.and_(b.icmp_signed("!=", remainder, zero), differ)
        remainder = b.select(adjust, b.add(remainder, safe), remainder)
    return b.select(b.icmp_signed("==", c, zero), zero, remainder)


def binary_value(k: KernelBuilder, fn: str, a: ir.Value, c: ir.Value, dtype: str, fmod: int = 0) -> ir.Value:
    """fn(a, c) for two values of `dtype` (the binary kernel's functions)."""
    b = k.b
    if fn in COMPARISONS:
        op = COMPARISONS[fn]
        truth = b.fcmp_ordered(op, a, c) if dtype in FLOATS else b.icmp_signed(op, a, c)
        return b.zext(truth, element_type("bool"))
    if fn in _LOGICAL_BINARY:
        zero = ir.Constant(a.type, 0)
        truths = [b.icmp_unsigned("!=", v, zero) for v in (a, c)]
        combined = {"and": b.and_, "or": b.or_, "xor": b.xor}[fn](*truths)
        return b.zext(combined, element_type("bool"))
    if fn == "mod":
        return _float_mod(k, a, c, fmod) if dtype in FLOATS else _integer_mod(k, a, c, fmod)
    if dtype in FLOATS:
        return binary_expression(k.math, fn, a, c)
    if fn == "div":
        # numpy's kernel gives 0 for a zero divisor; sdiv would trap
        zero = ir.Constant(a.type, 0)
        safe = b.select(b.icmp_signed("==", c, zero), ir.Constant(a.type, 1), c)
        return b.select(b.icmp_signed("==", c, zero), zero, b.sdiv(a, safe))
    return integer_expression(k.math, fn, [a, c])


@native_kernel("binary", supports=_supports_binary, run_time_shapes=True)
def emit_binary(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """out = act(fn(a, b)) with broadcasting (host_kernels.binary)."""
    k = KernelBuilder(module, symbol, site)
    a, c, out = k.input(0), k.input(1), k.outputs[0]
    kw = k.kwargs
    fn, dtype = kw["fn"], a.dtype

    def element(offsets: list[ir.Value], at: ir.Value) -> None:
        value = binary_value(k, fn, k.load(a, offsets[0]), k.load(c, offsets[1]), dtype, kw.get("fmod", 0))
        k.store(k.activation(value, kw.get("activation"), kw.get("alpha"), kw.get("beta")), out, at)

    k.broadcast_loop([a, c], out, element)
    k.finish()


# ---------------------------------------------------------------------------
# variadic, where
# ---------------------------------------------------------------------------


def _supports_variadic(site: dict[str, Any]) -> bool:
    fn = site["kwargs"]["fn"]
    dtypes = {s["dtype"] for s in site["inputs"][0]} | {site["outputs"][0]["dtype"]}
    if len(dtypes) != 1 or not site["inputs"][0]:
        return False
    (dtype,) = dtypes
    return fn in ("sum", "mean", "max", "min") and (dtype == "float32" or (dtype in ("int32", "int64")
                                                                           and fn != "mean"))


@native_kernel("variadic", supports=_supports_variadic, run_time_shapes=True)
def emit_variadic(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Sum / Mean / Max / Min, folded left to right (host_kernels.variadic)."""
    k = KernelBuilder(module, symbol, site)
    inputs = k.inputs[0]
    assert isinstance(inputs, list)
    out = k.outputs[0]
    fn = k.kwargs["fn"]
    step = {"sum": "add", "mean": "add", "max": "max", "min": "min"}[fn]

    def element(offsets: list[ir.Value], at: ir.Value) -> None:
        value = k.load(inputs[0], offsets[0])
        for operand, offset in zip(inputs[1:], offsets[1:], strict=True):
            value = binary_value(k, step, value, k.load(operand, offset), out.dtype)
        if fn == "mean":
            value = k.b.fdiv(value, ir.Constant(F32, float(len(inputs))))
        k.store(value, out, at)

    k.broadcast_loop(inputs, out, element)
    k.finish()


def _supports_where(site: dict[str, Any]) -> bool:
    cond, a, b = (s["dtype"] for s in site["inputs"])
    return cond == "bool" and a == b == site["outputs"][0]["dtype"] and a in FLOATS | SIGNED | UNSIGNED


@native_kernel("where", supports=_supports_where, run_time_shapes=True)
def emit_where(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """out = a if cond else b, broadcast (host_kernels.where); out may be b."""
    k = KernelBuilder(module, symbol, site)
    cond, a, c, out = k.input(0), k.input(1), k.input(2), k.outputs[0]

    def element(offsets: list[ir.Value], at: ir.Value) -> None:
        truth = k.b.icmp_unsigned("!=", k.load(cond, offsets[0]), ir.Constant(element_type("bool"), 0))
        k.store(k.b.select(truth, k.load(a, offsets[1]), k.load(c, offsets[2])), out, at)

    k.broadcast_loop([cond, a, c], out, element)
    k.finish()


# ---------------------------------------------------------------------------
# cast, copy
# ---------------------------------------------------------------------------

_CASTABLE = FLOATS | SIGNED | UNSIGNED


def cast_value(k: KernelBuilder, value: ir.Value, source: str, target: str) -> ir.Value:
    """numpy's unsafe cast of one element: floats truncate toward zero,
    anything to bool is `!= 0` (NaN is true), bool is 0 or 1."""
    b = k.b
    to = element_type(target)
    if target == "bool":
        if source in FLOATS:
            truth = b.fcmp_unordered("!=", value, ir.Constant(value.type, 0.0))
        else:
            truth = b.icmp_unsigned("!=", value, ir.Constant(value.type, 0))
        return b.zext(truth, to)
    if source in FLOATS and target in FLOATS:
        if value.type == to:
            return value
        return b.fpext(value, to) if to == F64 else b.fptrunc(value, to)
    if source in FLOATS:
        return b.fptoui(value, to) if target in UNSIGNED else b.fptosi(value, to)
    if target in FLOATS:
        return b.uitofp(value, to) if source in UNSIGNED else b.sitofp(value, to)
    if value.type.width < to.width:
        return b.zext(value, to) if source in UNSIGNED else b.sext(value, to)
    if value.type.width > to.width:
        return b.trunc(value, to)
    return value


@native_kernel("cast", supports=lambda site: all_dtypes_in(site, _CASTABLE), run_time_shapes=True)
def emit_cast(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Cast to out's dtype (host_kernels.cast)."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    k.loop(out.size, lambda i: k.store(cast_value(k, k.load(x, i), x.dtype, out.dtype), out, i), parallel=True)
    k.finish()


def _supports_copy(site: dict[str, Any]) -> bool:
    x, out = _spec(site, 0), site["outputs"][0]
    return x["dtype"] == out["dtype"] and math.prod(x["shape"]) == math.prod(out["shape"]) \
        and x["dtype"] in _CASTABLE


@native_kernel("copy", supports=_supports_copy, run_time_shapes=True)
def emit_copy(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """out = x, reshaped when the sizes agree (host_kernels.copy)."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    k.memmove(out.pointer, x.pointer, out.nbytes)
    k.finish()

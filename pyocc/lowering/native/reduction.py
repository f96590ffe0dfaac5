"""Native reductions: the ONNX Reduce family (reduce) and arg_max / arg_min
(float32 input).

An output element loops over its reduced elements in row-major order.
Sums accumulate in float64 and are rounded once (numpy sums float32
pairwise: both stay within a few ulp of the exact sum); max, min and prod
run in float32 like numpy's.
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from pyocc.lowering.native.loops import F32, F64, KernelBuilder, all_dtypes_in
from pyocc.lowering.native.registry import native_kernel
from pyocc.lowering.native.sizes import Size

_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod", "l1", "l2", "sum_square", "log_sum", "log_sum_exp"})


def _reduced_axes(site: dict[str, Any]) -> tuple[int, ...] | None:
    """The reduced axes (sorted), or None for noop_with_empty_axes' copy."""
    kw = site["kwargs"]
    rank = len(site["inputs"][0]["shape"])
    axes = kw.get("axes")
    if not axes:
        if axes is not None and kw.get("noop_with_empty_axes", 0):
            return None
        return tuple(range(rank))
    return tuple(sorted({a % rank for a in axes}))


def _supports_reduce(site: dict[str, Any]) -> bool:
    return (site["kwargs"].get("fn") in _REDUCTIONS and all_dtypes_in(site, ("float32",))
            and len(site["inputs"]) == 1)


@native_kernel("reduce", supports=_supports_reduce, run_time_shapes=True)
def emit_reduce(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Reduce<fn> over `axes` (host_kernels.reduce); keepdims is out's shape."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    b, m = k.b, k.math
    fn = k.kwargs["fn"]
    axes = _reduced_axes(site)
    if axes is None:
        k.memmove(out.pointer, x.pointer, out.nbytes)
        k.finish()
        return
    kept = [a for a in range(len(x.shape)) if a not in axes]
    kept_shape = [x.shape[a] for a in kept]
    reduced_shape = [x.shape[a] for a in axes]
    count = math.prod(reduced_shape)
    strides = x.strides

    def over_reduced(base: ir.Value, initial: ir.Value, step: Any) -> ir.Value:
        """Fold step(acc, element) over the reduced elements from `base`."""
        # a loop nest has no accumulator: carry it through a stack slot
        slot = _slot(k, initial.type)
        b.store(initial, slot)

        def update(indices: list[ir.Value]) -> None:
            value = k.load(x, k.offset(indices, [strides[a] for a in axes], base))
            b.store(step(b.load(slot, typ=initial.type), value), slot)

        k.loop_nest(reduced_shape, update)
        return b.load(slot, typ=initial.type)

    def wide_sum(base: ir.Value, term: Any) -> ir.Value:
        return over_reduced(base, ir.Constant(F64, 0.0), lambda acc, v: b.fadd(acc, b.fpext(term(v), F64)))

    def output(indices: list[ir.Value]) -> None:
        base = k.offset(indices, [strides[a] for a in kept])
        at = k.offset(indices, [math.prod(kept_shape[i + 1:]) for i in range(len(kept_shape))])
        if fn in ("max", "min"):
            better = ">" if fn == "max" else "<"
            start = ir.Constant(F32, float("-inf") if fn == "max" else float("inf"))
            result = over_reduced(base, start, lambda acc, v: b.select(b.fcmp_unordered(better, v, acc), v, acc))
        elif fn == "prod":
            result = over_reduced(base, ir.Constant(F32, 1.0), b.fmul)
        elif fn == "log_sum_exp":
            peak = over_reduced(base, ir.Constant(F32, float("-inf")),
                                lambda acc, v: b.select(b.fcmp_unordered(">", v, acc), v, acc))
            finite = b.fcmp_ordered("<", m.fabs(peak), ir.Constant(F32, float("inf")))
            shift = b.select(finite, peak, ir.Constant(F32, 0.0))
            total = b.fptrunc(wide_sum(base, lambda v: m.exp(b.fsub(v, shift))), F32)
            result = b.fadd(m.log(total), shift)
        else:
            terms = {"sum": lambda v: v, "mean": lambda v: v, "log_sum": lambda v: v, "l1": m.fabs,
                     "l2": lambda v: b.fmul(v, v), "sum_square": lambda v: b.fmul(v, v)}
            total = wide_sum(base, terms[fn])
            if fn == "mean":
                # a run-time count (a mean over a symbolic axis) becomes a double at run time, exactly
                divisor = b.sitofp(count.value(), F64) if isinstance(count, Size) else ir.Constant(F64, float(count))
                total = b.fdiv(total, divisor)
            result = b.fptrunc(total, F32)
            if fn == "l2":
                result = m.sqrt(result)
            elif fn == "log_sum":
                result = m.log(result)
        k.store(result, out, at)

    k.loop_nest(kept_shape, output)
    k.finish()


def _slot(k: KernelBuilder, type: ir.Type) -> ir.Value:
    """A stack slot in the entry block (so LLVM promotes it to a register)."""
    entry = k.function.entry_basic_block
    saved = k.b.block
    builder = ir.IRBuilder(entry)
    builder.position_at_start(entry)
    slot = builder.alloca(type)
    k.b.position_at_end(saved)
    return slot


def _supports_arg(site: dict[str, Any]) -> bool:
    return site["inputs"][0]["dtype"] == "float32" and site["outputs"][0]["dtype"] == "int64"


def _emit_arg(module: ir.Module, symbol: str, site: dict[str, Any], larger: bool) -> None:
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    b = k.b
    axis = k.kwargs.get("axis", 0) % len(x.shape)
    last = bool(k.kwargs.get("select_last_index", 0))
    outer, length, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:])
    comparison = ">" if larger else "<"

    def per_outer(o: ir.Value) -> None:
        def per_inner(i: ir.Value) -> None:
            base = b.add(b.mul(o, k.i64(length * inner)), i)
            best_value = _slot(k, F32)
            best_index = _slot(k, ir.IntType(64))
            b.store(k.load(x, base), best_value)
            b.store(k.i64(0), best_index)

            def step(j: ir.Value) -> None:
                value = k.load(x, b.add(base, b.mul(j, k.i64(inner))))
                current = b.load(best_value, typ=F32)
                value_nan = b.fcmp_unordered("uno", value, value)
                current_nan = b.fcmp_unordered("uno", current, current)
                if last:
                    # numpy searches the flipped axis: the last extreme, the last NaN
                    wins = b.or_(value_nan, b.fcmp_ordered(comparison + "=", value, current))
                else:
                    wins = b.or_(b.fcmp_ordered(comparison, value, current),
                                 b.and_(value_nan, b.not_(current_nan)))
                b.store(b.select(wins, value, current), best_value)
                b.store(b.select(wins, j, b.load(best_index, typ=ir.IntType(64))), best_index)

            k.loop(length - 1, lambda j: step(b.add(j, k.i64(1))))
            k.store(b.load(best_index, typ=ir.IntType(64)), out, b.add(b.mul(o, k.i64(inner)), i))

        k.loop(inner, per_inner)

    k.loop(outer, per_outer)
    k.finish()


@native_kernel("arg_max", supports=_supports_arg)
def emit_arg_max(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX ArgMax into int64 (host_kernels.arg_max)."""
    _emit_arg(module, symbol, site, larger=True)


@native_kernel("arg_min", supports=_supports_arg)
def emit_arg_min(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX ArgMin into int64 (host_kernels.arg_min)."""
    _emit_arg(module, symbol, site, larger=False)

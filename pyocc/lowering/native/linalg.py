"""Native matrix products: gemm, matmul and attention_softmax as BLAS sgemm
calls plus generated loops for what BLAS does not do (broadcasting C,
fused activations, the mask and the softmax).

Each `emit_*` defines `void symbol(i8 **buffers)` for one site (see
pyocc.lowering.convert_dnn_to_llvm for the site table and the buffer
order) with exactly the semantics of the numpy kernel of the same name in
pyocc.runtime.kernels (up to float rounding order). They need no scratch:
OpenBLAS packs its operands in its own buffers (allocated once, when the
library loads; see docs/performance.md).
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from pyocc.lowering.native.dense_ir import (
    F32,
    Kernel,
    NotNative,
    all_float32,
    broadcast_strides,
    flat_offset,
    require_float32,
)
from pyocc.lowering.native.registry import native_kernel
from pyocc.lowering.native.sizes import Size

__all__ = ["emit_attention_softmax", "emit_gemm", "emit_matmul"]


@native_kernel("gemm", supports=all_float32, run_time_shapes=True)
def emit_gemm(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Gemm: out = act(alpha * A' @ B' + beta * C), C broadcast to out."""
    require_float32(site)
    a_spec, b_spec, c_spec = site["inputs"]
    kwargs = site["kwargs"]
    m, n = site["outputs"][0]["shape"]
    trans_a, trans_b = bool(kwargs.get("trans_a") or 0), bool(kwargs.get("trans_b") or 0)
    alpha = kwargs.get("alpha", 1.0)
    beta = kwargs.get("beta", 1.0)
    alpha = 1.0 if alpha is None else alpha
    beta = 1.0 if beta is None else beta
    a_shape, b_shape = a_spec["shape"], b_spec["shape"]
    depth = a_shape[0] if trans_a else a_shape[1]

    k = Kernel(module, symbol)
    a, b, out = k.buffer(0), k.buffer(1), k.buffer(3)
    blas_beta = 0.0
    if c_spec is not None and beta != 0.0:
        # out = C (broadcast), then sgemm accumulates alpha * A'B' + beta * out
        c = k.buffer(2)
        row_stride, column_stride = broadcast_strides(c_spec["shape"], [m, n])
        with k.loop(0, m) as i:
            with k.loop(0, n) as j:
                source = k.add(k.mul(i, row_stride), k.mul(j, column_stride))
                k.store(k.load(c, source), out, k.add(k.mul(i, n), j))
        blas_beta = beta
    k.sgemm(m, n, depth, a, a_shape[1], b, b_shape[1], out, n, alpha=alpha, beta=blas_beta,
            trans_a=trans_a, trans_b=trans_b)
    _activate_in_place(k, out, m * n, kwargs.get("activation"), kwargs.get("activation_alpha"),
                       kwargs.get("activation_beta"))
    k.finish()


def _activate_in_place(k: Kernel, buffer: ir.Value, count: int, activation: str | None,
                       alpha: float | None, beta: float | None) -> None:
    """buffer[i] = act(buffer[i]) for i < count (nothing without an activation)."""
    if activation is None:
        return
    with k.loop(0, count) as i:
        k.store(k.activation(k.load(buffer, i), activation, alpha, beta), buffer, i)


def _batched_products(k: Kernel, a_shape: list[int], b_shape: list[int], a: ir.Value, b: ir.Value,
                      out: ir.Value, alpha: float = 1.0) -> list[int]:
    """numpy matmul of a and b into out (1-D operands promoted, batch dims
    broadcast), one sgemm per batch entry, or one for the whole batch when B
    is shared and A is not broadcast. Returns out's shape as (batch..., M, N)."""
    a2 = [1, a_shape[0]] if len(a_shape) == 1 else list(a_shape)
    b2 = [b_shape[0], 1] if len(b_shape) == 1 else list(b_shape)
    m, depth = a2[-2:]
    n = b2[-1]
    if b2[-2] != depth:
        raise NotNative(f"matmul: inner dimensions {depth} and {b2[-2]} differ")
    rank = max(len(a2), len(b2)) - 2
    a_batch = [1] * (rank - len(a2) + 2) + a2[:-2]
    b_batch = [1] * (rank - len(b2) + 2) + b2[:-2]
    if any(isinstance(d, Size) for d in (*a_batch, *b_batch)):
        # run-time batch dimensions: the same on both sides (or 1 on one), no broadcast guessed
        if any(x != y and 1 not in (x, y) for x, y in zip(a_batch, b_batch, strict=True)):
            raise NotNative("matmul: batch dimensions known only at run time that differ")
        batch = [y if x == 1 else x for x, y in zip(a_batch, b_batch, strict=True)]
    else:
        batch = [max(x, y) for x, y in zip(a_batch, b_batch, strict=True)]
    batches = math.prod(batch)
    a_strides = [s * m * depth for s in broadcast_strides(a_batch, batch)]
    b_strides = [s * depth * n for s in broadcast_strides(b_batch, batch)]
    if batches == 0 or m == 0 or n == 0:
        return [*batch, m, n]
    if batches == 1 or (not any(b_strides) and a_batch == batch):
        # one product: B shared by every batch entry, A's rows stacked
        k.sgemm(batches * m, n, depth, a, depth, b, n, out, n, alpha=alpha)
        return [*batch, m, n]
    with k.loop(0, batches) as entry:
        a_entry = k.element(a, flat_offset(k, entry, batch, a_strides))
        b_entry = k.element(b, flat_offset(k, entry, batch, b_strides))
        k.sgemm(m, n, depth, a_entry, depth, b_entry, n, k.element(out, k.mul(entry, m * n)), n, alpha=alpha)
    return [*batch, m, n]


@native_kernel("matmul", supports=all_float32, run_time_shapes=True)
def emit_matmul(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX MatMul = numpy matmul (batch broadcasting, 1-D operands)."""
    require_float32(site)
    a_spec, b_spec = site["inputs"]
    k = Kernel(module, symbol)
    _batched_products(k, a_spec["shape"], b_spec["shape"], k.buffer(0), k.buffer(1), k.buffer(2))
    k.finish()


@native_kernel("attention_softmax", supports=all_float32, run_time_shapes=True)
def emit_attention_softmax(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """softmax(scale * (a @ b) + mask) along the last axis, mask broadcast."""
    require_float32(site)
    a_spec, b_spec, mask_spec = site["inputs"]
    out_shape = site["outputs"][0]["shape"]
    scale = site["kwargs"].get("scale")
    scale = 1.0 if scale is None else scale
    k = Kernel(module, symbol)
    a, b, out = k.buffer(0), k.buffer(1), k.buffer(3)
    _batched_products(k, a_spec["shape"], b_spec["shape"], a, b, out, alpha=scale)
    if not out_shape or math.prod(out_shape) == 0:
        k.finish()
        return
    length = out_shape[-1]
    rows = math.prod(out_shape[:-1])
    mask = k.buffer(2) if mask_spec is not None else None
    mask_strides = broadcast_strides(mask_spec["shape"], out_shape) if mask_spec is not None else []
    bld = k.builder
    largest = k.scalar(-math.inf)
    total = k.scalar(0.0)
    with k.loop(0, rows) as row:
        base = k.element(out, k.mul(row, length))
        bld.store(F32(-math.inf), largest)
        if mask is not None:
            mask_row = k.element(mask, flat_offset(k, row, out_shape[:-1], mask_strides[:-1]))
            with k.loop(0, length) as i:
                value = bld.fadd(k.load(base, i), k.load(mask_row, k.mul(i, mask_strides[-1])))
                k.store(value, base, i)
        with k.loop(0, length) as i:
            value, current = k.load(base, i), bld.load(largest, typ=F32)
            bld.store(k.math.max(value, current), largest)
        shift = bld.load(largest, typ=F32)
        bld.store(F32(0.0), total)
        with k.loop(0, length) as i:
            value = k.math.exp(bld.fsub(k.load(base, i), shift))
            k.store(value, base, i)
            bld.store(bld.fadd(bld.load(total, typ=F32), value), total)
        denominator = bld.load(total, typ=F32)
        with k.loop(0, length) as i:
            k.store(bld.fdiv(k.load(base, i), denominator), base, i)
    k.finish()

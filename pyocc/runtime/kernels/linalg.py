"""Matrix-product host kernels: ONNX Gemm and MatMul, both through BLAS.

``out`` must not overlap any input.
"""

from __future__ import annotations

import numpy as np

from pyocc.runtime.kernels.elementwise import apply_activation

__all__ = ["gemm", "matmul"]


def gemm(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    *,
    out: np.ndarray,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: int = 0,
    trans_b: int = 0,
    activation: str | None = None,
    activation_alpha: float | None = None,
    activation_beta: float | None = None,
) -> None:
    """ONNX Gemm: ``out = alpha * A' @ B' + beta * C`` (C broadcast to out),
    then an optional fused activation.

    Gemm's own ``alpha``/``beta`` are taken, so the activation's parameters
    are ``activation_alpha``/``activation_beta`` (see ``unary``).
    """
    np.matmul(a.T if trans_a else a, b.T if trans_b else b, out=out)
    if alpha != 1.0:
        out *= alpha
    if c is not None and beta != 0.0:
        out += c if beta == 1.0 else beta * c
    apply_activation(out, activation, activation_alpha, activation_beta)


def matmul(a: np.ndarray, b: np.ndarray, *, out: np.ndarray) -> None:
    """ONNX MatMul = numpy matmul: batch broadcasting, 1-D operands promoted and
    their unit dim dropped."""
    np.matmul(a, b, out=out)

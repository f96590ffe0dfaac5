"""The stand-in's cuBLAS: handle, math mode and the sgemm routines
(column-major, with leading dimensions and batch strides checked).
"""

from __future__ import annotations

import numpy as np

from pyocc.runtime import cuda_api as api
from pyocc.testing import fake_cuda_math as fm
from pyocc.testing.fake_cuda.core import (
    CUBLAS_HANDLE,
    _Handle,
    _invalid,
    _Layout,
    FakeCudaBase,
)

#: cublasMath_t (low bits) -> the precision sgemm's inputs get
_CUBLAS_MATH_PRECISION = {0: "fp32", 1: "fp16", api.CUBLAS_PEDANTIC_MATH: "fp32", 3: "tf32"}


class Cublas(FakeCudaBase):
    """cuBLAS's handle, math mode and single-precision products."""

    # -- cuBLAS ------------------------------------------------------------------------

    def _cublasCreate_v2(self, handle: int) -> None:
        self._create(handle, CUBLAS_HANDLE, _Handle())

    def _cublasDestroy_v2(self, handle: int) -> None:
        self._objects.destroy(handle, CUBLAS_HANDLE, "handle")

    def _cublasSetStream_v2(self, handle: int, stream: int) -> None:
        self._set_stream(handle, CUBLAS_HANDLE, stream)

    def _cublasSetMathMode(self, handle: int, mode: int) -> None:
        state = self._cublas_handle(handle)
        # the low bits are the mode; CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (16) may be or-ed in
        if mode & ~16 not in _CUBLAS_MATH_PRECISION:
            raise _invalid(f"mode {mode} is not a cublasMath_t")
        state.math_mode = mode & ~16

    def _cublasSgemm_v2(
        self,
        handle: int,
        transa: int,
        transb: int,
        m: int,
        n: int,
        k: int,
        alpha: int,
        A: int,
        lda: int,
        B: int,
        ldb: int,
        beta: int,
        C: int,
        ldc: int,
    ) -> None:
        self._gemm(handle, transa, transb, m, n, k, alpha, (A, lda, 0), (B, ldb, 0), beta, (C, ldc, 0), 1)

    def _cublasSgemmStridedBatched(
        self,
        handle: int,
        transa: int,
        transb: int,
        m: int,
        n: int,
        k: int,
        alpha: int,
        A: int,
        lda: int,
        strideA: int,
        B: int,
        ldb: int,
        strideB: int,
        beta: int,
        C: int,
        ldc: int,
        strideC: int,
        batchCount: int,
    ) -> None:
        self._gemm(
            handle, transa, transb, m, n, k, alpha,
            (A, lda, strideA), (B, ldb, strideB), beta, (C, ldc, strideC), batchCount,
        )

    def _gemm(
        self,
        handle: int,
        transa: int,
        transb: int,
        m: int,
        n: int,
        k: int,
        alpha: int,
        a: tuple[int, int, int],
        b: tuple[int, int, int],
        beta: int,
        c: tuple[int, int, int],
        batch: int,
    ) -> None:
        """C_i (m x n) = alpha op(A_i) op(B_i) + beta C_i for i < batch, column-major,
        each operand given as (pointer, leading dimension, batch stride in elements)."""
        state = self._cublas_handle(handle)
        if transa not in (0, 1, 2) or transb not in (0, 1, 2):
            raise _invalid(f"transa {transa} or transb {transb} is not a cublasOperation_t")
        if min(m, n, k, batch) < 0:
            raise _invalid(f"m {m}, n {n}, k {k} or batchCount {batch} is negative")
        a_rows, a_cols = (m, k) if transa == api.CUBLAS_OP_N else (k, m)
        b_rows, b_cols = (k, n) if transb == api.CUBLAS_OP_N else (n, k)
        for name, rows, ld in (("lda", a_rows, a[1]), ("ldb", b_rows, b[1]), ("ldc", m, c[1])):
            if ld < max(1, rows):
                raise _invalid(f"{name} {ld} < max(1, {rows}), the rows of the stored matrix")
        if min(a[2], b[2], c[2]) < 0:
            raise _invalid("a negative batch stride")
        scale, blend = self._read_scalar(alpha, "alpha"), self._read_scalar(beta, "beta")
        if m == 0 or n == 0 or batch == 0:
            return
        c_view = self._matrices(c, m, n, batch, "C")
        inputs: dict[str, np.ndarray] = {}
        if scale != 0.0 and k > 0:
            inputs = {
                "A": self._matrices(a, a_rows, a_cols, batch, "A"),
                "B": self._matrices(b, b_rows, b_cols, batch, "B"),
            }
        self._outputs_clear({"C": c_view}, inputs)
        if not inputs:
            self._store(c_view, np.zeros(c_view.shape, np.float32), 1.0, blend)
            return
        precision = _CUBLAS_MATH_PRECISION[state.math_mode]
        op_a = fm.reduce_precision(inputs["A"], precision)
        op_b = fm.reduce_precision(inputs["B"], precision)
        op_a = op_a if transa == api.CUBLAS_OP_N else op_a.transpose(0, 2, 1)
        op_b = op_b if transb == api.CUBLAS_OP_N else op_b.transpose(0, 2, 1)
        self._store(c_view, np.matmul(op_a, op_b), scale, blend)

    def _matrices(self, operand: tuple[int, int, int], rows: int, cols: int, batch: int, what: str) -> np.ndarray:
        """A (batch, rows, cols) view of column-major matrices with leading dimension ld."""
        address, ld, stride = operand
        return self._view(address, _Layout((batch, rows, cols), (stride, 1, ld)), what)

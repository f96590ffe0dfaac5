"""target=cuda: matrix products with cuBLAS (gemm, batched matmul) and
Resize as per-axis interpolation matrices multiplied by cuBLAS.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

import pyocc.dialects.dnn.ops as d
from pyocc.lowering.cuda.function import CudaFunctionLowering, broadcast_shape
from pyocc.lowering.cuda.registry import cuda_lowering
from pyocc.lowering.llvm_common import cannot_lower
from pyocc.runtime import cuda_api as api
from pyocc.runtime.kernels.resize import resize


@cuda_lowering(d.GemmOp)
def _lower_gemm(lw: CudaFunctionLowering, op: d.GemmOp) -> None:
    """out = act(alpha * op(a) @ op(b) + beta * c): c broadcast into out by
    cudnnAddTensor, then one cublasSgemm accumulating onto it."""
    run = lw.run
    lw.uses_cublas = True
    trans_a, trans_b = op.kernel_kwargs()["trans_a"], op.kernel_kwargs()["trans_b"]
    a_shape, b_shape = lw.shape(op.a), lw.shape(op.b)
    m, k = (a_shape[1], a_shape[0]) if trans_a else (a_shape[0], a_shape[1])
    n = b_shape[0] if trans_b else b_shape[1]
    alpha = op.kernel_kwargs().get("alpha")
    beta = op.kernel_kwargs().get("beta")
    alpha = 1.0 if alpha is None else alpha
    beta = 1.0 if beta is None else beta
    y = lw.device_pointer(op, op.out)
    accumulate = 0.0
    if op.c is not None and beta != 0.0:
        c_dims = [1, 1, *broadcast_shape(lw.shape(op.c), 2)]
        y_desc = lw.use(run, lw.tensor_descriptor([1, 1, m, n]))
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), lw.scalar(run, beta), lw.use(run, lw.tensor_descriptor(c_dims)),
                lw.device_pointer(op, op.c), lw.scalar(run, 0.0), y_desc, y)
        accumulate = 1.0
    _sgemm(lw, op, trans_a, trans_b, m, n, k, alpha, lw.device_pointer(op, op.a), lw.device_pointer(op, op.b), accumulate, y)
    lw.apply_activation(op, op.kernel_kwargs().get("activation"), op.kernel_kwargs().get("activation_alpha"),
                         op.kernel_kwargs().get("activation_beta"), op.out)


def _sgemm(lw: CudaFunctionLowering, op: Operation, trans_a: int, trans_b: int, m: int, n: int, k: int,
           alpha: float, a: SSAValue, b: SSAValue, beta: float, y: SSAValue,
           batch: tuple[int, int, int, int] | None = None) -> None:
    """Row-major Y[m, n] = alpha * op(A) @ op(B) + beta * Y, as the
    column-major Y^T = op(B)^T @ op(A)^T; `batch` = (count, strideA,
    strideB, strideY) in elements for cublasSgemmStridedBatched."""
    run = lw.run
    handle = lw.load_global(run, lw.cublas)
    op_b = api.CUBLAS_OP_T if trans_b else api.CUBLAS_OP_N
    op_a = api.CUBLAS_OP_T if trans_a else api.CUBLAS_OP_N
    ldb = k if trans_b else n
    lda = m if trans_a else k
    alpha_ptr, beta_ptr = lw.scalar(run, alpha), lw.scalar(run, beta)
    if batch is None:
        lw.library_call("cublasSgemm_v2", handle, op_b, op_a, n, m, k, alpha_ptr, b, ldb, a, lda, beta_ptr, y, n)
    else:
        count, stride_a, stride_b, stride_y = batch
        lw.library_call("cublasSgemmStridedBatched", handle, op_b, op_a, n, m, k, alpha_ptr, b, ldb, stride_b,
                a, lda, stride_a, beta_ptr, y, n, stride_y, count)


@cuda_lowering(d.MatMulOp)
def _lower_matmul(lw: CudaFunctionLowering, op: d.MatMulOp) -> None:
    """Batched a @ b: one strided-batched gemm; a side whose batch is a
    single matrix is broadcast with stride 0."""
    lw.uses_cublas = True
    a_shape, b_shape, y_shape = lw.shape(op.a), lw.shape(op.b), lw.shape(op.out)
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise cannot_lower(op, "a matrix-vector product has no cuBLAS lowering yet")
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    batch = math.prod(y_shape[:-2])
    a_batch, b_batch = math.prod(a_shape[:-2]), math.prod(b_shape[:-2])
    for side, count in (("a", a_batch), ("b", b_batch)):
        if count not in (1, batch):
            raise cannot_lower(op, f"{side} broadcasts over part of the batch, which has no cuBLAS lowering yet "
                                   "(a whole batch or a single matrix has)")
    a, b, y = lw.device_pointer(op, op.a), lw.device_pointer(op, op.b), lw.device_pointer(op, op.out)
    if batch == 1:
        _sgemm(lw, op, 0, 0, m, n, k, 1.0, a, b, 0.0, y)
    elif b_batch == 1:  # rows of all a matrices times one b: a single gemm
        _sgemm(lw, op, 0, 0, batch * m, n, k, 1.0, a, b, 0.0, y)
    else:
        _sgemm(lw, op, 0, 0, m, n, k, 1.0, a, b, 0.0, y,
               batch=(batch, m * k if a_batch > 1 else 0, k * n, m * n))



RESIZE_MATRIX_LIMIT = 1 << 20


def _resize_matrix(op: d.ResizeOp, in_size: int, out_size: int, scale: float | None) -> Any:
    """The (in_size, out_size) matrix of one axis of a resize: column o holds
    the weight of every input cell in output cell o. Every ONNX Resize mode
    (nearest, linear, cubic) is a linear map per axis, so resizing an
    identity with the host kernel gives exactly its matrix."""
    kwargs = {name: value for name in ("mode", "coordinate_transformation_mode", "nearest_mode")
              if (value := op.kernel_kwargs().get(name)) is not None}
    if (coeff := op.kernel_kwargs().get("cubic_coeff_a")) is not None:
        kwargs["cubic_coeff_a"] = coeff
    kwargs["exclude_outside"] = op.kernel_kwargs()["exclude_outside"]
    matrix = np.empty((in_size, out_size), dtype=np.float32)
    resize(np.eye(in_size, dtype=np.float32), out=matrix, scales=None if scale is None else [1.0, scale], **kwargs)
    return matrix


@cuda_lowering(d.ResizeOp)
def _lower_resize(lw: CudaFunctionLowering, op: d.ResizeOp) -> None:
    """Resize of the last two axes as matrix products with cuBLAS: with Aw
    and Ah the per-axis interpolation matrices (computed here, stored with
    the weights), each (H, W) plane X becomes Ah^T X Aw, the width pass one
    gemm over all rows into the workspace, the height pass one strided
    batched gemm sharing Ah (stride 0). An axis that keeps its size and
    scale is skipped. Nearest mode is exact (weights 1 and 0) except that an
    inf or NaN input spreads along its row and column (0 * inf is NaN)."""
    x_shape, y_shape = lw.shape(op.x), lw.shape(op.out)
    rank = len(x_shape)
    scales = op.kernel_kwargs().get("scales", [])
    if op.kernel_kwargs().get("coordinate_transformation_mode") == "tf_crop_and_resize":
        raise cannot_lower(op, "tf_crop_and_resize has no cuBLAS lowering (use target=host)")
    resized = [axis for axis in range(rank)
               if x_shape[axis] != y_shape[axis] or (scales and float(scales[axis]) != 1.0)]
    if not resized:
        lw.copy(op, op.x, op.out)
        return
    if min(resized) < rank - 2:
        raise cannot_lower(op, f"it resizes axis {min(resized)}, which has no cuBLAS lowering (the last two axes "
                               "have; use target=host)")
    if rank == 1:
        x_shape, y_shape, resized, scales = [1, *x_shape], [1, *y_shape], [1], [1.0, *scales]
        rank = 2
    lw.uses_cublas = True
    outer = math.prod(x_shape[:-2])
    (h, w), (h2, w2) = x_shape[-2:], y_shape[-2:]
    matrix_bytes = 4 * ((h * h2 if rank - 2 in resized else 0) + (w * w2 if rank - 1 in resized else 0))
    if matrix_bytes > RESIZE_MATRIX_LIMIT:
        raise cannot_lower(op, f"no cuBLAS lowering with interpolation matrices of {matrix_bytes} bytes (the "
                               f"limit is {RESIZE_MATRIX_LIMIT}); use target=host")
    scale = lambda axis: float(scales[axis]) if scales else None  # noqa: E731
    x, y = lw.device_pointer(op, op.x), lw.device_pointer(op, op.out)
    if rank - 1 in resized:  # width: rows (outer * h, w) @ Aw (w, w2)
        a_w = lw.constant(_resize_matrix(op, w, w2, scale(rank - 1)))
        target = y
        if rank - 2 in resized:  # the height pass reads it from the workspace
            lw.workspace_floor = max(lw.workspace_floor, 4 * outer * h * w2)
            target = lw.load_global(lw.run, lw.workspace)
        _sgemm(lw, op, 0, 0, outer * h, w2, w, 1.0, x, a_w, 0.0, target)
        x = target
    if rank - 2 in resized:  # height: Ah^T (h2, h) @ each plane (h, w2)
        a_h = lw.constant(_resize_matrix(op, h, h2, scale(rank - 2)).T)
        batch = None if outer == 1 else (outer, 0, h * w2, h2 * w2)
        _sgemm(lw, op, 0, 0, h2, w2, h, 1.0, a_h, x, 0.0, y, batch=batch)

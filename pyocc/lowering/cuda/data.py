"""target=cuda: data movement: copies, transpose, concat and split as
device-to-device copies, and gather, cast, expand and slice as generated
kernels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import i8
from xdsl.ir import Operation, SSAValue

import pyocc.dialects.dnn.ops as d
from pyocc.lowering.cuda.function import CudaFunctionLowering
from pyocc.lowering.cuda.registry import cuda_lowering
from pyocc.lowering.cuda_kernels import (
    DTYPES,
    CastKernel,
    GatherKernel,
    PointwiseKernel,
    row_major_strides,
)
from pyocc.lowering.llvm_common import numpy_dtype_name
from pyocc.runtime import cuda_api as api


def _integer_indices(op: d.GatherOp, value: SSAValue) -> bool:
    """gather's indices may be int32 or int64."""
    return value is op.indices and numpy_dtype_name(value.type.get_element_type()) in ("int32", "int64")  # type: ignore[attr-defined]


def _any_dtype(op: Operation, value: SSAValue) -> bool:
    """cast, expand and slice copy any dtype their kernels know."""
    return numpy_dtype_name(value.type.get_element_type()) in DTYPES  # type: ignore[attr-defined]



@cuda_lowering(d.GatherOp, other_dtypes=_integer_indices)
def _lower_gather(lw: CudaFunctionLowering, op: d.GatherOp) -> None:
    shape = lw.shape(op.x)
    axis = op.kernel_kwargs()["axis"] % len(shape)
    indices_type = op.indices.type
    kernel = GatherKernel(name="", x_shape=tuple(shape), axis=axis, index_count=math.prod(lw.shape(op.indices)),
                          index_dtype=numpy_dtype_name(indices_type.get_element_type()))  # type: ignore[attr-defined]
    lw.launch(op, kernel, op.out, [op.x, op.indices])


@cuda_lowering(d.CastOp, other_dtypes=_any_dtype)
def _lower_cast(lw: CudaFunctionLowering, op: d.CastOp) -> None:
    source = numpy_dtype_name(op.x.type.get_element_type())  # type: ignore[attr-defined]
    target = numpy_dtype_name(op.out.type.get_element_type())  # type: ignore[attr-defined]
    if source == target:
        lw.copy(op, op.x, op.out)
        return
    lw.launch(op, CastKernel(name="", count=math.prod(lw.shape(op.x)), source=source, target=target),
              op.out, [op.x])


@cuda_lowering(d.ExpandOp, other_dtypes=_any_dtype)
def _lower_expand(lw: CudaFunctionLowering, op: d.ExpandOp) -> None:
    """numpy broadcasting as a copy kernel (stride 0 along broadcast axes)."""
    lw.pointwise(op, "identity", op.out, [op.x])


@cuda_lowering(d.SliceOp, other_dtypes=_any_dtype)
def _lower_slice(lw: CudaFunctionLowering, op: d.SliceOp) -> None:
    """A slice is a strided copy: each axis starts at its start and steps by
    its step (negative steps too), as a copy kernel with an input offset."""
    shape = lw.shape(op.x)
    starts, ends = op.kernel_kwargs().get("starts", []), op.kernel_kwargs().get("ends", [])
    axes = op.kernel_kwargs().get("axes", list(range(len(starts))))
    steps = op.kernel_kwargs().get("steps", [1] * len(starts))
    row_major = row_major_strides(shape)
    strides, offset = list(row_major), 0
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis %= len(shape)
        first, _, _ = slice(start, end, step).indices(shape[axis])
        strides[axis] = row_major[axis] * step
        offset += first * row_major[axis]
    dtype = numpy_dtype_name(op.x.type.get_element_type())  # type: ignore[attr-defined]
    if math.prod(lw.shape(op.out)) == 0:
        return
    kernel = PointwiseKernel(name="", fn="identity", shape=tuple(lw.shape(op.out)), input_strides=(tuple(strides),),
                             input_dtype=dtype, input_offsets=(offset,))
    lw.launch(op, kernel, op.out, [op.x])



@cuda_lowering(d.CopyOp)
def _lower_copy(lw: CudaFunctionLowering, op: d.CopyOp) -> None:
    lw.copy(op, op.x, op.out)



@cuda_lowering(d.TransposeOp)
def _lower_transpose(lw: CudaFunctionLowering, op: d.TransposeOp) -> None:
    """A permutation is a strided copy: read x with its strides permuted."""
    x_shape, y_shape = lw.shape(op.x), lw.shape(op.out)
    perm = op.kernel_kwargs().get("perm", list(reversed(range(len(x_shape)))))
    x_strides = row_major_strides(x_shape)
    run = lw.run
    lw.library_call("cudnnTransformTensor", lw.cudnn_handle(), lw.scalar(run, 1.0),
            lw.use(run, lw.tensor_descriptor(y_shape, [x_strides[p] for p in perm])), lw.device_pointer(op, op.x),
            lw.scalar(run, 0.0), lw.use(run, lw.tensor_descriptor(y_shape)), lw.device_pointer(op, op.out))


def _band_copies(lw: CudaFunctionLowering, op: Operation, whole: SSAValue, parts: Sequence[SSAValue], axis: int,
                 into_whole: bool) -> None:
    """Concat (into_whole) or split along `axis`: each part is `outer` rows
    of a contiguous band of the whole, one cudaMemcpy2DAsync per part."""
    shape = lw.shape(whole)
    axis %= len(shape)
    outer = math.prod(shape[:axis])
    row = d.type_bytes(whole.type) // max(outer, 1)
    offset = 0
    run = lw.run
    base = lw.device_pointer(op, whole)
    for part in parts:
        width = d.type_bytes(part.type) // max(outer, 1)
        band = run.b.gep(base, offset, i8)
        source, target = (lw.device_pointer(op, part), band) if into_whole else (band, lw.device_pointer(op, part))
        spitch, dpitch = (width, row) if into_whole else (row, width)
        lw.library_call("cudaMemcpy2DAsync", target, dpitch, source, spitch, width, outer, api.MEMCPY_DEVICE_TO_DEVICE,
                lw.load_global(run, lw.stream))
        offset += width


@cuda_lowering(d.ConcatOp)
def _lower_concat(lw: CudaFunctionLowering, op: d.ConcatOp) -> None:
    _band_copies(lw, op, op.out, list(op.inputs), op.axis.value.data, into_whole=True)


@cuda_lowering(d.SplitOp)
def _lower_split(lw: CudaFunctionLowering, op: d.SplitOp) -> None:
    _band_copies(lw, op, op.x, list(op.outs), op.kernel_kwargs()["axis"], into_whole=False)

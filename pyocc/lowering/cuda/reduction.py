"""target=cuda: reductions and arg-max with a generated kernel.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

import pyocc.dialects.dnn.ops as d
from pyocc.lowering.cuda.function import CudaFunctionLowering
from pyocc.lowering.cuda.registry import cuda_lowering
from pyocc.lowering.cuda_kernels import (
    REDUCTIONS,
    ReduceKernel,
)
from pyocc.lowering.llvm_common import cannot_lower, numpy_dtype_name


def _arg_max_index(op: d.ReduceOp | d.ArgMaxOp, value: SSAValue) -> bool:
    """arg-max writes int64 indices."""
    return isinstance(op, d.ArgMaxOp) and value is op.out and \
        numpy_dtype_name(value.type.get_element_type()) == "int64"  # type: ignore[attr-defined]


@cuda_lowering(d.ReduceOp, d.ArgMaxOp, other_dtypes=_arg_max_index)
def _lower_reduce(lw: CudaFunctionLowering, op: d.ReduceOp | d.ArgMaxOp) -> None:
    """Reduce<fn> (and ArgMax) with a kernel: a thread per output element."""
    shape = lw.shape(op.x)
    if isinstance(op, d.ArgMaxOp):
        fn, axes = "arg_max", [op.kernel_kwargs()["axis"] % len(shape)]
    else:
        fn, axes = op.fn.data, op.kernel_kwargs().get("axes", [])
        if not axes:
            if op.axes is not None and op.kernel_kwargs().get("noop_with_empty_axes", 0):
                lw.copy(op, op.x, op.out)
                return
            axes = list(range(len(shape)))
    axes = sorted({axis % len(shape) for axis in axes})
    if fn not in REDUCTIONS or any(shape[axis] == 0 for axis in axes):
        raise cannot_lower(op, f"reduce {fn} (over an empty axis?) has no kernel yet")
    kernel = ReduceKernel(name="", fn=fn, shape=tuple(shape), axes=tuple(axes),
                          select_last_index=bool(op.kernel_kwargs().get("select_last_index", 0)))
    lw.launch(op, kernel, op.out, [op.x])

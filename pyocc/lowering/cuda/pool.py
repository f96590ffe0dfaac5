"""target=cuda: max, average and global pooling with cuDNN.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

import pyocc.dialects.dnn.ops as d
from pyocc.lowering.cuda.function import CudaFunctionLowering
from pyocc.lowering.cuda.registry import cuda_lowering
from pyocc.lowering.llvm_common import cannot_lower
from pyocc.runtime import cuda_api as api


@cuda_lowering(d.MaxPoolOp, d.AveragePoolOp, d.GlobalAveragePoolOp, d.GlobalMaxPoolOp)
def _lower_pool(lw: CudaFunctionLowering, op: d.DnnComputeOp) -> None:
    """Max / average / global pooling. cuDNN checks only N and C of the
    output against the input, so ONNX's asymmetric pads and ceil_mode map
    onto pad = the leading pad and the output shape ONNX computed."""
    x_shape, y_shape = lw.shape(op.x), lw.shape(op.out)  # type: ignore[attr-defined]
    spatial = len(x_shape) - 2
    if spatial < 1:
        raise cannot_lower(op, "pooling needs at least one spatial dimension")
    if isinstance(op, d.GlobalAveragePoolOp | d.GlobalMaxPoolOp):
        window, pads, strides = x_shape[2:], [0] * spatial, x_shape[2:]
        mode = api.POOLING_MAX if isinstance(op, d.GlobalMaxPoolOp) else api.POOLING_AVERAGE_EXCLUDE_PAD
    else:
        window = op.kernel_kwargs().get("kernel_shape", [])
        strides = op.kernel_kwargs().get("strides", [1] * spatial)
        all_pads = op.kernel_kwargs().get("pads", [0] * (2 * spatial))
        pads = all_pads[:spatial]
        if any(dl != 1 for dl in op.kernel_kwargs().get("dilations", [1] * spatial)):
            raise cannot_lower(op, "dilated pooling has no cuDNN lowering")
        if isinstance(op, d.MaxPoolOp):
            mode = api.POOLING_MAX
        elif op.kernel_kwargs()["count_include_pad"]:
            if all_pads[spatial:] != pads or op.kernel_kwargs()["ceil_mode"]:
                raise cannot_lower(op, "count_include_pad with asymmetric pads or ceil_mode has no cuDNN lowering")
            mode = api.POOLING_AVERAGE_INCLUDE_PAD
        else:
            mode = api.POOLING_AVERAGE_EXCLUDE_PAD
    if spatial == 1:
        x_shape, y_shape = x_shape + [1], y_shape + [1]
        window, pads, strides = list(window) + [1], list(pads) + [0], list(strides) + [1]
    key = (mode, tuple(window), tuple(pads), tuple(strides))

    def configure(desc: SSAValue) -> None:
        lw.checked_call(lw.init, "cudnnSetPoolingNdDescriptor", desc, mode, api.CUDNN_NOT_PROPAGATE_NAN, len(window),
                 lw.int_array(lw.init, window), lw.int_array(lw.init, pads), lw.int_array(lw.init, strides),
                 what="pooling descriptor")

    pooling = lw.descriptor("Pooling", key, configure)
    run = lw.run
    lw.library_call("cudnnPoolingForward", lw.cudnn_handle(), lw.use(run, pooling), lw.scalar(run, 1.0),
            lw.use(run, lw.tensor_descriptor(x_shape)), lw.device_pointer(op, op.x), lw.scalar(run, 0.0),  # type: ignore[attr-defined]
            lw.use(run, lw.tensor_descriptor(y_shape)), lw.device_pointer(op, op.out))  # type: ignore[attr-defined]

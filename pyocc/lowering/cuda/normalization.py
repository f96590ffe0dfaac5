"""target=cuda: softmax, LRN, batch norm and channel affine with cuDNN, layer
norm with a generated kernel.
"""

from __future__ import annotations

import math

from xdsl.ir import SSAValue

import pyocc.dialects.dnn.ops as d
from pyocc.lowering.cuda.function import CudaFunctionLowering
from pyocc.lowering.cuda.pointwise import op_tensor_descriptor
from pyocc.lowering.cuda.registry import cuda_lowering
from pyocc.lowering.cuda_kernels import (
    LayerNormKernel,
)
from pyocc.lowering.llvm_common import cannot_lower
from pyocc.runtime import cuda_api as api


@cuda_lowering(d.SoftmaxOp, d.LogSoftmaxOp)
def _lower_softmax(lw: CudaFunctionLowering, op: d.SoftmaxOp | d.LogSoftmaxOp) -> None:
    """Softmax along one axis: the shape viewed as (before, axis, after, 1),
    cuDNN's per-channel mode."""
    shape = lw.shape(op.x)
    axis = op.kernel_kwargs()["axis"] % len(shape)
    dims = [math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:]), 1]
    algo = api.SOFTMAX_LOG if isinstance(op, d.LogSoftmaxOp) else api.SOFTMAX_ACCURATE
    run = lw.run
    desc = lw.use(run, lw.tensor_descriptor(dims))
    lw.library_call("cudnnSoftmaxForward", lw.cudnn_handle(), algo, api.SOFTMAX_MODE_CHANNEL, lw.scalar(run, 1.0), desc,
            lw.device_pointer(op, op.x), lw.scalar(run, 0.0), desc, lw.device_pointer(op, op.out))


@cuda_lowering(d.LRNOp)
def _lower_lrn(lw: CudaFunctionLowering, op: d.LRNOp) -> None:
    """ONNX LRN is cuDNN's cross-channel LRN: x / (k + alpha/n * sum x^2)^beta."""
    size = op.size.value.data
    alpha, beta, bias = (op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.kernel_kwargs().get("bias"))
    alpha = 1e-4 if alpha is None else alpha
    beta = 0.75 if beta is None else beta
    bias = 1.0 if bias is None else bias
    if not 1 <= size <= 16:
        raise cannot_lower(op, f"cuDNN's LRN takes a window of 1 to 16 channels, not {size}")

    def configure(desc: SSAValue) -> None:
        lw.checked_call(lw.init, "cudnnSetLRNDescriptor", desc, size, alpha, beta, bias, what="LRN descriptor")

    lrn = lw.descriptor("LRN", (size, alpha, beta, bias), configure)
    run = lw.run
    desc = lw.use(run, lw.tensor_descriptor(lw.shape(op.x)))
    lw.library_call("cudnnLRNCrossChannelForward", lw.cudnn_handle(), lw.use(run, lrn), api.LRN_CROSS_CHANNEL_DIM1,
            lw.scalar(run, 1.0), desc, lw.device_pointer(op, op.x), lw.scalar(run, 0.0), desc, lw.device_pointer(op, op.out))



@cuda_lowering(d.ChannelAffineOp)
def _lower_channel_affine(lw: CudaFunctionLowering, op: d.ChannelAffineOp) -> None:
    """out = act(x * scale[c] + shift[c]): an op-tensor multiply by the
    broadcast scale, an add of the broadcast shift, the activation."""
    shape = lw.shape(op.x)
    if op.kernel_kwargs()["axis"] % len(shape) != 1:
        raise cannot_lower(op, "a channel affine along an axis other than 1 has no cuDNN lowering yet")
    run = lw.run
    vector = lw.use(run, lw.tensor_descriptor([1, shape[1]] + [1] * (len(shape) - 2)))
    desc = lw.use(run, lw.tensor_descriptor(shape))
    y = lw.device_pointer(op, op.out)
    one, zero = lw.scalar(run, 1.0), lw.scalar(run, 0.0)
    lw.library_call("cudnnOpTensor", lw.cudnn_handle(), lw.use(run, op_tensor_descriptor(lw, "mul")), one, desc, lw.device_pointer(op, op.x),
            one, vector, lw.device_pointer(op, op.scale), zero, desc, y)
    lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, vector, lw.device_pointer(op, op.shift), one, desc, y)
    lw.apply_activation(op, op.kernel_kwargs().get("activation"), op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"),
                         op.out)


@cuda_lowering(d.BatchNormOp)
def _lower_batch_norm(lw: CudaFunctionLowering, op: d.BatchNormOp) -> None:
    shape = lw.shape(op.x)
    run = lw.run
    desc = lw.use(run, lw.tensor_descriptor(shape))
    vector = lw.use(run, lw.tensor_descriptor([1, shape[1]] + [1] * (len(shape) - 2)))
    epsilon = op.kernel_kwargs().get("epsilon")
    lw.library_call("cudnnBatchNormalizationForwardInference", lw.cudnn_handle(), api.BATCHNORM_SPATIAL, lw.scalar(run, 1.0),
            lw.scalar(run, 0.0), desc, lw.device_pointer(op, op.x), desc, lw.device_pointer(op, op.out), vector,
            lw.device_pointer(op, op.scale), lw.device_pointer(op, op.bias), lw.device_pointer(op, op.mean), lw.device_pointer(op, op.var),
            1e-5 if epsilon is None else epsilon)



@cuda_lowering(d.LayerNormOp)
def _lower_layer_norm(lw: CudaFunctionLowering, op: d.LayerNormOp) -> None:
    shape = lw.shape(op.x)
    axis = op.kernel_kwargs()["axis"] % len(shape)
    width = math.prod(shape[axis:])
    for name, value in (("scale", op.scale), ("bias", op.bias)):
        if value is not None and math.prod(lw.shape(value)) != width:
            raise cannot_lower(op, f"a {name} that broadcasts within the normalised axes has no kernel yet")
    epsilon = op.kernel_kwargs().get("epsilon")
    kernel = LayerNormKernel(name="", rows=math.prod(shape[:axis]), width=width,
                             epsilon=1e-5 if epsilon is None else epsilon, has_bias=op.bias is not None)
    lw.launch(op, kernel, op.out, [op.x, op.scale] + ([op.bias] if op.bias is not None else []))

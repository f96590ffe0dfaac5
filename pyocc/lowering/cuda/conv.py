"""target=cuda: convolutions (cuDNN forward, fused bias and activation;
DenseNet's pre-activation through a generated kernel into planned scratch;
the transpose as cuDNN's backward data) and the choice of each one's
algorithm in NAME_init.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr, i8, i32, i64
from xdsl.ir import Attribute, Operation, SSAValue

import pyocc.dialects.dnn.ops as d
from pyocc.lowering.cuda.function import CudaFunctionLowering
from pyocc.lowering.cuda.registry import cuda_lowering
from pyocc.lowering.cuda_kernels import (
    ChannelAffineKernel,
)
from pyocc.lowering.cuda_scratch import ScratchLayout, preact_block, preact_in_place
from pyocc.lowering.llvm_common import cannot_lower
from pyocc.runtime import cuda_api as api


def _symmetric_pads(lw: CudaFunctionLowering, op: Operation, spatial: int) -> list[int]:
    pads = op.kernel_kwargs().get("pads", [0] * (2 * spatial))
    begin, end = pads[:spatial], pads[spatial:]
    if begin != end:
        raise cannot_lower(op, f"asymmetric pads {pads}: cuDNN convolution pads both sides alike")
    return begin


@cuda_lowering(d.ConvOp)
def _lower_conv(lw: CudaFunctionLowering, op: d.ConvOp) -> None:
    """out = act(conv(x, w) + bias + residual), the Occamy Conv+ReLU fusion."""
    _convolution(lw, op, lw.device_pointer(op, op.x), _scratch(lw, op))


@cuda_lowering(d.PreActConvOp)
def _lower_preact_conv(lw: CudaFunctionLowering, op: d.PreActConvOp) -> None:
    """DenseNet's pre-activation convolution, out = act(conv(pre_act(x *
    pre_scale[c] + pre_shift[c]), w) + bias + residual): a generated kernel
    writes the pre-activated input in place when x dies here, else into the
    op's planned scratch buffer (dnn-cuda-scratch), by blocks of input
    channels for a 1x1 convolution (then multiplied by cuBLAS), whole for
    another (then convolved by cuDNN)."""
    scratch = _scratch(lw, op)
    kernel = ChannelAffineKernel(name="", shape=tuple(lw.shape(op.x)), activation=op.kernel_kwargs().get("pre_activation"))
    if preact_in_place(op):
        lw.launch(op, kernel, op.x, [op.x, op.pre_scale, op.pre_shift])
        _convolution(lw, op, lw.device_pointer(op, op.x), scratch)
        return
    if scratch is None:
        raise cannot_lower(op, "its pre-activated input needs a scratch buffer on target=cuda; "
                               "run dnn-cuda-scratch first")
    block = preact_block(op)
    if block is not None:
        _pointwise_preact_conv(lw, op, block, scratch[1])
        return
    lw.launch(op, kernel, op.workspace, [op.x, op.pre_scale, op.pre_shift])
    _convolution(lw, op, lw.device_pointer(op, op.workspace), scratch)


def _pointwise_preact_conv(lw: CudaFunctionLowering, op: d.PreActConvOp, block: int, scratch: SSAValue) -> None:
    """A 1x1 preact_conv as a sum over blocks of `block` input channels:
    y = sum_b W[:, b] @ act(x[b] * s[b] + t[b]), each block pre-activated by a
    generated kernel into `scratch` and multiplied by cuBLAS, which reads the
    weights' columns of the block in place (leading dimension C), onto y
    (beta 1 after the first block, or from the first when the residual is
    already in y); then bias, residual and activation as for a convolution.
    The first block and a last partial one are emitted as they are, the
    full blocks between them as one loop (DenseNet's widest have 16 blocks:
    unrolled, they were a quarter of its compile)."""
    run, b = lw.run, lw.run.b
    lw.uses_cublas = True
    shape = lw.shape(op.x)
    batch, channels, positions = shape[0], shape[1], math.prod(shape[2:])
    filters = lw.shape(op.w)[0]
    x, w, y = lw.device_pointer(op, op.x), lw.device_pointer(op, op.w), lw.device_pointer(op, op.out)
    scale, shift = lw.device_pointer(op, op.pre_scale), lw.device_pointer(op, op.pre_shift)
    in_place = op.residual is not None and op.residual is op.out
    handle = lw.load_global(run, lw.cublas)
    activation = op.kernel_kwargs().get("pre_activation")

    def channel(base: SSAValue, start: int | SSAValue, channel_bytes: int) -> SSAValue:
        """&base[start], `start` a channel (a constant, or the loop's block number times the block)."""
        if isinstance(start, int):
            return b.gep(base, channel_bytes * start, i8)
        offset = b.add(llvm.MulOp(start, b.const(channel_bytes))).results[0]
        return b.add(llvm.GEPOp(base, [llvm.GEP_USE_SSA_VAL], i8, ssa_indices=[offset])).results[0]

    def multiply_block(start: int | SSAValue, size: int, first: bool) -> None:
        """Pre-activate channels [start, start + size) into scratch and add W[:, block] @ them onto y."""
        kernel = ChannelAffineKernel(name="", shape=(batch, size, positions), activation=activation,
                                     batch_stride=channels * positions)
        lw.launch_on(kernel, [scratch, channel(x, start, 4 * positions), channel(scale, start, 4),
                              channel(shift, start, 4)])
        beta = lw.scalar(run, 0.0 if first and not in_place else 1.0)
        # row-major Y[n] (K, P) += W[:, block] (K, size; row stride C) @ S[n] (size, P), as the
        # column-major Y^T = S^T W^T: m = P, n = K, k = size
        a_block, one = channel(w, start, 4), lw.scalar(run, 1.0)
        if batch == 1:
            lw.library_call("cublasSgemm_v2", handle, api.CUBLAS_OP_N, api.CUBLAS_OP_N, positions, filters, size,
                            one, scratch, positions, a_block, channels, beta, y, positions)
        else:
            lw.library_call("cublasSgemmStridedBatched", handle, api.CUBLAS_OP_N, api.CUBLAS_OP_N, positions,
                            filters, size, one, scratch, positions, size * positions, a_block, channels, 0, beta,
                            y, positions, filters * positions, batch)

    full, rest = divmod(channels, block)
    multiply_block(0, block, first=True)
    run.counted_loop(1, full, lambda k: multiply_block(b.add(llvm.MulOp(k, b.const(block))).results[0], block,
                                                       first=False))
    if rest:
        multiply_block(full * block, rest, first=False)
    y_desc = lw.tensor_descriptor(lw.shape(op.out))
    one = lw.scalar(run, 1.0)
    if op.bias is not None:
        bias_desc = lw.tensor_descriptor([1, filters] + [1] * (len(shape) - 2))
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, lw.use(run, bias_desc),
                        lw.device_pointer(op, op.bias), one, lw.use(run, y_desc), y)
    if op.residual is not None and not in_place:
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, lw.use(run, y_desc),
                        lw.device_pointer(op, op.residual), one, lw.use(run, y_desc), y)
    lw.apply_activation(op, op.kernel_kwargs().get("activation"), op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.out)


def _scratch(lw: CudaFunctionLowering, op: d.ConvOp | d.PreActConvOp) -> tuple[ScratchLayout, SSAValue] | None:
    """The op's planned scratch buffer (dnn-cuda-scratch): how it is laid
    out and its device pointer; None when it has none."""
    if op.workspace is None:
        return None
    layout = ScratchLayout.of_buffer(_preact_bytes(op), d.type_bytes(op.workspace.type))
    return layout, lw.device_pointer(op, op.workspace)


def _preact_bytes(op: d.ConvOp | d.PreActConvOp) -> int:
    """Bytes of the op's scratch that hold its pre-activated input (before
    the cuDNN workspace): the whole input unless it is pre-activated in
    place or by blocks (whose scratch is only that), none for a plain conv."""
    if not isinstance(op, d.PreActConvOp) or preact_in_place(op):
        return 0
    return d.type_bytes(op.x.type)


def _convolution(lw: CudaFunctionLowering, op: d.ConvOp | d.PreActConvOp, x: SSAValue,
                 scratch: tuple[ScratchLayout, SSAValue] | None) -> None:
    """out = act(conv(x, w) + bias + residual), x the device pointer of the
    input: one cudnnConvolutionBiasActivationForward when the activation is
    relu and a bias is given, else convolution, bias add, residual add,
    activation. The cuDNN workspace is the planned one in `scratch` (the
    algorithm chosen in init fits it), else init's shared workspace."""
    run = lw.run
    x_shape, w_shape, y_shape = lw.shape(op.x), lw.shape(op.w), lw.shape(op.out)
    spatial = len(x_shape) - 2
    if spatial < 1:
        raise cannot_lower(op, "a convolution needs at least one spatial dimension")
    if op.kernel_kwargs().get("shuffle", 1) != 1:
        raise cannot_lower(op, "a channel shuffle folded into the convolution runs on target=host only "
                               "(dnn-fuse folds it only there)")
    pads = _symmetric_pads(lw, op, spatial)
    strides = op.kernel_kwargs().get("strides", [1] * spatial)
    dilations = op.kernel_kwargs().get("dilations", [1] * spatial)
    group = op.kernel_kwargs()["group"]
    # cuDNN convolves at least two spatial dimensions: a 1-D conv is 2-D with width 1
    if spatial == 1:
        x_shape, w_shape, y_shape = x_shape + [1], w_shape + [1], y_shape + [1]
        pads, strides, dilations = pads + [0], strides + [1], dilations + [1]
    conv = _convolution_descriptor(lw, pads, strides, dilations, group)
    x_desc, w_desc, y_desc = lw.tensor_descriptor(x_shape), lw.filter_descriptor(w_shape), lw.tensor_descriptor(y_shape)
    algo = _choose_algorithm(lw, conv, x_desc, w_desc, y_desc, query=FORWARD_QUERIES[lw.conv_search],
                             planned=None if scratch is None else scratch[0].cudnn_bytes)

    h = lw.cudnn_handle()
    w, y = lw.device_pointer(op, op.w), lw.device_pointer(op, op.out)
    algo_value = run.b.load(lw.address(run, algo), i32)
    workspace: SSAValue | int
    workspace_bytes: SSAValue | int
    if scratch is None:
        workspace = lw.load_global(run, lw.workspace)
        workspace_bytes = run.b.load(lw.address(run, lw.workspace_size), i64)
    elif scratch[0].cudnn_bytes:
        workspace = run.b.gep(scratch[1], scratch[0].cudnn_offset, i8)
        workspace_bytes = run.b.const(scratch[0].cudnn_bytes)
    else:  # no workspace allowed: implicit GEMM needs none
        workspace, workspace_bytes = 0, 0
    one, zero = lw.scalar(run, 1.0), lw.scalar(run, 0.0)
    activation = op.kernel_kwargs().get("activation")
    bias_desc = lw.tensor_descriptor([1, y_shape[1]] + [1] * (len(y_shape) - 2)) if op.bias is not None else None
    use = lambda symbol: lw.use(run, symbol)  # noqa: E731 - a local shorthand

    if activation == "relu" and op.bias is not None:
        z = lw.device_pointer(op, op.residual) if op.residual is not None else y
        alpha2 = one if op.residual is not None else zero
        lw.library_call("cudnnConvolutionBiasActivationForward", h, one, use(x_desc), x, use(w_desc), w, use(conv),
                algo_value, workspace, workspace_bytes, alpha2, use(y_desc), z, use(bias_desc),
                lw.device_pointer(op, op.bias), use(lw.activation_descriptor("relu")), use(y_desc), y)
        return
    # the residual is already in y when dnn-coalesce wrote the result in place
    in_place = op.residual is not None and op.residual is op.out
    lw.library_call("cudnnConvolutionForward", h, one, use(x_desc), x, use(w_desc), w, use(conv), algo_value, workspace,
            workspace_bytes, one if in_place else zero, use(y_desc), y)
    if op.bias is not None:
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, use(bias_desc), lw.device_pointer(op, op.bias), one, use(y_desc), y)
    if op.residual is not None and not in_place:
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, use(y_desc), lw.device_pointer(op, op.residual), one,
                use(y_desc), y)
    lw.apply_activation(op, activation, op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.out)


def _convolution_descriptor(lw: CudaFunctionLowering, pads: Sequence[int], strides: Sequence[int],
                            dilations: Sequence[int], group: int) -> str:
    """The convolution descriptor (cross-correlation, fp32 FMA math, groups),
    shared by convolution and its transpose (backward data)."""

    def configure(desc: SSAValue) -> None:
        lw.checked_call(lw.init, "cudnnSetConvolutionNdDescriptor", desc, len(pads), lw.int_array(lw.init, pads),
                        lw.int_array(lw.init, strides), lw.int_array(lw.init, dilations),
                        api.CUDNN_CROSS_CORRELATION, api.CUDNN_DATA_FLOAT, what="convolution descriptor")
        lw.checked_call(lw.init, "cudnnSetConvolutionGroupCount", desc, group, what="convolution groups")
        lw.checked_call(lw.init, "cudnnSetConvolutionMathType", desc, api.CUDNN_FMA_MATH,
                        what="convolution fp32 math")

    return lw.descriptor("Convolution", (tuple(pads), tuple(strides), tuple(dilations), group), configure)


#: how init ranks a convolution's forward algorithms, per conv_search (both
#: take the same arguments and fill the same cudnnConvolutionFwdAlgoPerf_t
#: array, best first): cuDNN's heuristics, or each algorithm run and timed
FORWARD_QUERIES = {"ranked": "cudnnGetConvolutionForwardAlgorithm_v7", "timed": "cudnnFindConvolutionForwardAlgorithm"}


def _choose_algorithm(lw: CudaFunctionLowering, conv: str, x: str, w: str, y: str,
                      query: str = FORWARD_QUERIES["ranked"],
                      count: int = api.CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                      fallback: int = api.CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                      planned: int | None = None) -> str:
    """In init: ask cuDNN for its ranked forward algorithms and keep the first
    that succeeded and whose workspace fits the limit (else implicit GEMM,
    which needs none). The limit is `planned`, the bytes of the op's planned
    workspace buffer; without one (None) it is the pass's workspace bound,
    and init's shared workspace is raised to what the choice needs.
    Returns the i32 global holding the choice. `query`, `count` and
    `fallback` select another family (backward data, whose query takes
    w, dy, conv, dx: pass them as x, w, conv, y)."""
    init = lw.init
    b = init.b
    lw.algorithms += 1
    symbol = lw.global_slot(f"algo{lw.algorithms - 1}", i32)
    limit = lw.workspace_bytes if planned is None else planned
    returned = b.add(llvm.AllocaOp(b.const(1), i32, alignment=4)).results[0]
    results = b.add(llvm.AllocaOp(b.const(count * api.CONV_PERF_SIZE // 8), i64, alignment=8)).results[0]

    def field(entry: SSAValue, offset: int, type: Attribute) -> SSAValue:
        """&results[entry].<the field at byte offset>, typed as `type` (entry an i64)."""
        size = 8 if type == i64 else 4
        first = b.add(llvm.MulOp(entry, b.const(api.CONV_PERF_SIZE // size))).results[0]
        index = b.add(llvm.AddOp(first, b.const(offset // size))).results[0]
        return b.add(llvm.GEPOp(results, [llvm.GEP_USE_SSA_VAL], type, ssa_indices=[index], inbounds=True)).results[0]

    # an entry cuDNN does not fill must not look successful
    init.counted_loop(0, count, lambda i: b.store(b.const(1, i32), field(i, api.CONV_PERF_STATUS, i32)))
    b.store(b.const(0, i32), returned)
    lw.checked_call(init, query, lw.load_global(init, lw.cudnn),
             lw.load_global(init, x), lw.load_global(init, w), lw.load_global(init, conv),
             lw.load_global(init, y), count, returned, results, what="convolution algorithm")
    n = b.add(llvm.SExtOp(b.load(returned, i32), i64)).results[0]
    chosen = b.add(llvm.AllocaOp(b.const(1), i32, alignment=4)).results[0]
    needed = b.add(llvm.AllocaOp(b.const(1), i64, alignment=8)).results[0]
    b.store(b.const(fallback, i32), chosen)
    b.store(b.const(0), needed)
    flag = lambda pred: IntegerAttr(pred.to_int(), i64)  # noqa: E731

    def consider(k: SSAValue) -> None:
        """Entry count - 1 - k replaces the choice if it is usable: ranked,
        successful and within the limit. Best-ranked last, so that it wins."""
        i = b.add(llvm.SubOp(b.const(count - 1), k)).results[0]
        algo = b.load(field(i, api.CONV_PERF_ALGO, i32), i32)
        status = b.load(field(i, api.CONV_PERF_STATUS, i32), i32)
        memory = b.load(field(i, api.CONV_PERF_MEMORY, i64), i64)
        ranked = b.add(llvm.ICmpOp(i, n, flag(llvm.ICmpPredicateFlag.SLT))).results[0]
        ok = b.add(llvm.ICmpOp(status, b.const(0, i32), flag(llvm.ICmpPredicateFlag.EQ))).results[0]
        fits = b.add(llvm.ICmpOp(memory, b.const(limit), flag(llvm.ICmpPredicateFlag.ULE))).results[0]
        usable = b.add(llvm.AndOp(b.add(llvm.AndOp(ranked, ok)).results[0], fits)).results[0]
        b.store(b.add(llvm.SelectOp(usable, algo, b.load(chosen, i32))).results[0], chosen)
        b.store(b.add(llvm.SelectOp(usable, memory, b.load(needed, i64))).results[0], needed)

    init.counted_loop(0, count, consider)
    choice = b.load(chosen, i32)
    needs = b.load(needed, i64)
    b.store(choice, lw.address(init, symbol))
    if planned is not None:
        return symbol
    lw.shared_workspace_users += 1
    size_ptr = lw.address(init, lw.workspace_size)
    size = b.load(size_ptr, i64)
    larger = b.add(llvm.ICmpOp(needs, size, flag(llvm.ICmpPredicateFlag.UGT))).results[0]
    b.store(b.add(llvm.SelectOp(larger, needs, size)).results[0], size_ptr)
    return symbol


@cuda_lowering(d.ConvTransposeOp)
def _lower_conv_transpose(lw: CudaFunctionLowering, op: d.ConvTransposeOp) -> None:
    """ONNX ConvTranspose is cuDNN's backward data: y = conv_transpose(x, w) is
    the gradient dx of a forward convolution from a y-shaped tensor to an
    x-shaped one with filter w ([C_in, C_out/group, k...] is that forward
    convolution's [K, C/group, k...]). So x is dy, y is dx, and the bias is a
    cudnnAddTensor afterwards.

    cuDNN pads each dim alike at both ends and requires dy to be the forward
    convolution's output of dx; ONNX crops pads_begin cells at the start of
    the uncropped output and whatever is left over at the end. Padding by
    pads_begin and giving dx y's shape therefore covers output_padding,
    output_shape and asymmetric pads whenever the forward output size of y,
    floor((out + 2 pads_begin - d(k-1) - 1) / s) + 1, is x's size (else the
    op fails to lower). The algorithm is chosen in init as for Conv, from
    cudnnGetConvolutionBackwardDataAlgorithm_v7's ranking, within the
    workspace limit, else ALGO_0, the implicit-GEMM analogue (it adds with
    atomics, so its sums are not bitwise reproducible; should it need
    workspace too, the call fails and is named)."""
    run = lw.run
    x_shape, w_shape, y_shape = lw.shape(op.x), lw.shape(op.w), lw.shape(op.out)
    spatial = len(x_shape) - 2
    if spatial < 1:
        raise cannot_lower(op, "a transposed convolution needs at least one spatial dimension")
    pads = op.kernel_kwargs().get("pads", [0] * (2 * spatial))[:spatial]
    strides = op.kernel_kwargs().get("strides", [1] * spatial)
    dilations = op.kernel_kwargs().get("dilations", [1] * spatial)
    group = op.kernel_kwargs()["group"]
    forward = [(out + 2 * p - d * (k - 1) - 1) // s + 1
               for out, p, d, k, s in zip(y_shape[2:], pads, dilations, w_shape[2:], strides)]
    if forward != x_shape[2:]:
        all_pads = op.kernel_kwargs().get("pads", [0] * (2 * spatial))
        raise cannot_lower(op, f"pads {all_pads} with output size {y_shape[2:]}: cuDNN cannot pad the two ends "
                               f"differently here (the leading pads at both give a convolution from {y_shape[2:]} "
                               f"to {forward}, not {x_shape[2:]}); use target=host")
    if spatial == 1:  # cuDNN convolves at least two spatial dimensions
        x_shape, w_shape, y_shape = x_shape + [1], w_shape + [1], y_shape + [1]
        pads, strides, dilations = pads + [0], strides + [1], dilations + [1]
    conv = _convolution_descriptor(lw, pads, strides, dilations, group)
    w_desc = lw.filter_descriptor(w_shape)
    dy_desc, dx_desc = lw.tensor_descriptor(x_shape), lw.tensor_descriptor(y_shape)
    algo = _choose_algorithm(lw, conv, w_desc, dy_desc, dx_desc, query="cudnnGetConvolutionBackwardDataAlgorithm_v7",
                             count=api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                             fallback=api.CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)
    use = lambda symbol: lw.use(run, symbol)  # noqa: E731 - a local shorthand
    y = lw.device_pointer(op, op.out)
    one, zero = lw.scalar(run, 1.0), lw.scalar(run, 0.0)
    lw.library_call("cudnnConvolutionBackwardData", lw.cudnn_handle(), one, use(w_desc), lw.device_pointer(op, op.w),
                    use(dy_desc), lw.device_pointer(op, op.x), use(conv), run.b.load(lw.address(run, algo), i32),
                    lw.load_global(run, lw.workspace), run.b.load(lw.address(run, lw.workspace_size), i64), zero,
                    use(dx_desc), y)
    if op.bias is not None:
        bias_desc = lw.tensor_descriptor([1, y_shape[1]] + [1] * (len(y_shape) - 2))
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), one, use(bias_desc), lw.device_pointer(op, op.bias), one,
                        use(dx_desc), y)

"""target=cuda: elementwise ops: cuDNN's op-tensor and activations where they
compute the op, a generated pointwise kernel for the rest (integer and
boolean functions, comparisons, where).
"""

from __future__ import annotations

from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Operation, SSAValue

import pyocc.dialects.dnn.ops as d
from pyocc.lowering.cuda.function import CudaFunctionLowering, broadcast_shape
from pyocc.lowering.cuda.registry import cuda_lowering
from pyocc.lowering.cuda_kernels import (
    COMPARISONS,
    LOGICAL,
)
from pyocc.lowering.llvm_common import cannot_lower, numpy_dtype_name
from pyocc.lowering.llvm_math import INTEGER_FUNCTIONS
from pyocc.runtime import cuda_api as api


def _integer_or_boolean_function(op: d.BinaryOp | d.UnaryOp, value: SSAValue) -> bool:
    """Which operands may be other than float32: integer arithmetic (a binary
    one without a fused activation), a comparison's integer inputs and bool
    result, boolean logic."""
    dtype = numpy_dtype_name(value.type.get_element_type())  # type: ignore[attr-defined]
    integer = dtype in ("int32", "int64")
    if op.fn.data in INTEGER_FUNCTIONS and integer:
        return op.activation is None if isinstance(op, d.BinaryOp) else True
    if isinstance(op, d.BinaryOp) and op.fn.data in COMPARISONS:
        return dtype == "bool" if value is op.out else integer
    if op.fn.data in LOGICAL:
        return dtype == "bool"
    return False


def _where_dtypes(op: d.WhereOp, value: SSAValue) -> bool:
    """where's condition is bool; its data may be integers."""
    dtype = numpy_dtype_name(value.type.get_element_type())  # type: ignore[attr-defined]
    return dtype == "bool" if value is op.cond else dtype in ("int32", "int64")


def op_tensor_descriptor(lw: CudaFunctionLowering, fn: str) -> str:
    """The global holding the op-tensor descriptor of `fn` (add, mul, min, max)."""

    def configure(desc: SSAValue) -> None:
        lw.checked_call(lw.init, "cudnnSetOpTensorDescriptor", desc, api.OP_TENSOR_OPS[fn], api.CUDNN_DATA_FLOAT,
                 api.CUDNN_NOT_PROPAGATE_NAN, what=f"op-tensor {fn}")

    return lw.descriptor("OpTensor", (fn,), configure)


_SWAPPABLE = frozenset({"add", "sub", "mul", "min", "max"})


def _elementwise(lw: CudaFunctionLowering, op: Operation, fn: str, a: SSAValue, b: SSAValue,
                 out: SSAValue) -> None:
    """out = fn(a, b) with cudnnOpTensor, C = op(alpha1 * A, alpha2 * B).
    A must have out's shape while B broadcasts, and cuDNN writes in place
    only over A; so a broadcast `a`, or an out that is b's buffer, swaps the
    sides (sub becomes -b + a)."""
    out_shape = lw.shape(out)
    alpha1, alpha2 = 1.0, 1.0
    if lw.overlaps(a, b) and lw.overlaps(out, a):
        _self_elementwise(lw, op, fn, a, b, out)
        return
    a_fits = lw.shape(a) == out_shape and not (lw.overlaps(out, b) and not lw.overlaps(out, a))
    if not a_fits:
        if lw.shape(b) != out_shape:
            raise cannot_lower(op, "both operands broadcast; cuDNN's op-tensor needs one of out's shape")
        if fn not in _SWAPPABLE:
            raise cannot_lower(op, f"{fn} with a broadcast or overwritten first operand has no cuDNN lowering")
        a, b = b, a
        if fn == "sub":
            alpha1 = -1.0
    elif fn == "sub":
        alpha2 = -1.0
    _op_tensor_call(lw, op, fn, (alpha1, a), (alpha2, b), out)


def _self_elementwise(lw: CudaFunctionLowering, op: Operation, fn: str, a: SSAValue, b: SSAValue,
                      out: SSAValue) -> None:
    """fn(a, a) written over a itself (dnn-coalesce's in-place Add(a, a)):
    cuDNN lets only A alias C, so add / sub become C = +-1 * A + 1 * C."""
    if not (a is b and out is a) and not (lw.locations[a] == lw.locations[b] == lw.locations[out]):
        raise cannot_lower(op, "its operands partly overlap its output; cuDNN cannot compute that in place")
    if fn in ("min", "max"):
        return  # fn(a, a) = a, already there
    if fn not in ("add", "sub"):
        raise cannot_lower(op, f"{fn}(a, a) in place has no cuDNN lowering yet")
    run = lw.run
    desc = lw.use(run, lw.tensor_descriptor(lw.shape(out)))
    lw.library_call("cudnnAddTensor", lw.cudnn_handle(), lw.scalar(run, 1.0 if fn == "add" else -1.0), desc,
            lw.device_pointer(op, a), lw.scalar(run, 1.0), desc, lw.device_pointer(op, out))


def _op_tensor_call(lw: CudaFunctionLowering, op: Operation, fn: str, a: tuple[float, SSAValue],
                    b: tuple[float, SSAValue], out: SSAValue) -> None:
    """One cudnnOpTensor: out = fn(alpha1 * A, alpha2 * B), B broadcast; sub is
    add (the caller negated its alpha)."""
    op_fn = "add" if fn == "sub" else fn
    if op_fn not in api.OP_TENSOR_OPS:
        raise cannot_lower(op, f"{fn} has no cuDNN op-tensor lowering yet (add, sub, mul, min, max do)")
    run = lw.run
    out_shape = lw.shape(out)
    c_desc = lw.use(run, lw.tensor_descriptor(out_shape))
    b_dims = broadcast_shape(lw.shape(b[1]), len(out_shape))
    lw.library_call("cudnnOpTensor", lw.cudnn_handle(), lw.use(run, op_tensor_descriptor(lw, op_fn)), lw.scalar(run, a[0]), c_desc,
            lw.device_pointer(op, a[1]), lw.scalar(run, b[0]), lw.use(run, lw.tensor_descriptor(b_dims)), lw.device_pointer(op, b[1]),
            lw.scalar(run, 0.0), c_desc, lw.device_pointer(op, out))


@cuda_lowering(d.BinaryOp, other_dtypes=_integer_or_boolean_function)
def _lower_binary(lw: CudaFunctionLowering, op: d.BinaryOp) -> None:
    """cudnnOpTensor where it computes the op (then the activation), else
    one generated kernel with the activation fused in."""
    fn, activation = op.fn.data, op.kernel_kwargs().get("activation")
    out_shape = lw.shape(op.out)
    one_full = out_shape in (lw.shape(op.a), lw.shape(op.b))
    self_in_place = lw.overlaps(op.a, op.b) and lw.overlaps(op.out, op.a)
    floating = isinstance(op.out.type.get_element_type(), Float32Type)  # type: ignore[union-attr]
    if fn in _SWAPPABLE and one_full and floating and not (self_in_place and fn == "mul"):
        _elementwise(lw, op, fn, op.a, op.b, op.out)
        lw.apply_activation(op, activation, op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.out)
        return
    lw.pointwise(op, fn, op.out, [op.a, op.b], activation=activation, activation_alpha=op.kernel_kwargs().get("alpha"),
                 activation_beta=op.kernel_kwargs().get("beta"))



@cuda_lowering(d.WhereOp, other_dtypes=_where_dtypes)
def _lower_where(lw: CudaFunctionLowering, op: d.WhereOp) -> None:
    lw.pointwise(op, "where", op.out, [op.cond, op.a, op.b])


@cuda_lowering(d.VariadicOp)
def _lower_variadic(lw: CudaFunctionLowering, op: d.VariadicOp) -> None:
    """sum / mean / max / min of n inputs: n - 1 op-tensor calls
    accumulating in out (mean then scales it by 1/n in place)."""
    fn = {"sum": "add", "mean": "add", "max": "max", "min": "min"}.get(op.fn.data)
    inputs = list(op.inputs)
    if fn is None:
        raise cannot_lower(op, f"{op.fn.data} of several inputs has no cuDNN lowering yet (sum, mean, max, min do)")
    if len(inputs) == 1:
        lw.copy(op, inputs[0], op.out)
        return
    _elementwise(lw, op, fn, inputs[0], inputs[1], op.out)
    for value in inputs[2:]:
        _elementwise(lw, op, fn, op.out, value, op.out)
    if op.fn.data == "mean":  # out = (1/n) * out, A being C: cuDNN's in-place add
        run = lw.run
        desc = lw.use(run, lw.tensor_descriptor(lw.shape(op.out)))
        out = lw.device_pointer(op, op.out)
        lw.library_call("cudnnAddTensor", lw.cudnn_handle(), lw.scalar(run, 1.0 / len(inputs)), desc, out,
                        lw.scalar(run, 0.0), desc, out)


@cuda_lowering(d.UnaryOp, other_dtypes=_integer_or_boolean_function)
def _lower_unary(lw: CudaFunctionLowering, op: d.UnaryOp) -> None:
    fn = op.fn.data
    if fn == "identity":
        lw.copy(op, op.x, op.out)
        return
    lw.apply_activation(op, fn, op.kernel_kwargs().get("alpha"), op.kernel_kwargs().get("beta"), op.out, source=op.x)

"""`dnn-cuda-scratch`: the device scratch memory target=cuda needs, as planned buffers.

Two things the cuda lowering needs besides an op's operands are buffers of
the plan, so the pool is the whole device activation memory:

- cuDNN's convolution workspace. Its size is known only on the GPU
  (cudnnGetConvolutionForwardAlgorithm_v7 ranks the algorithms with what
  each needs), so it is planned with a bound chosen at compile time,
  `workspace` bytes, and init picks, per convolution, the fastest algorithm
  whose workspace fits that bound;
- `dnn.preact_conv`'s pre-activated input, which cuDNN cannot compute inside
  the convolution: a generated kernel writes act(x * scale[c] + shift[c])
  there, then the convolution reads it. A pointwise one (DenseNet's 1x1
  bottleneck convolutions, whose input is the block's whole concatenation)
  does it one block of `PREACT_BLOCK` input channels at a time, as the
  host's kernel does, so only a block is scratch; one whose input dies
  there does it in place and needs none.

Each such op gets one `workspace` buffer holding both (the pre-activated
input first, then cuDNN's part; `scratch_layout`): a `dnn.malloc` right
before the op and a `dnn.dealloc` right after it, so the pool planner
places it like any other buffer, live only while the op runs. In eager mode
one buffer of the largest size is allocated at entry and shared, as eager
mode allocates everything at entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, i8
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

import pyocc.dialects.dnn.ops as d
from pyocc.analysis.ir_form import require_form
from pyocc.lowering.limits import CUDA_WORKSPACE

#: the alignment of cuDNN's part of a scratch buffer, after the pre-activated input (bytes)
SCRATCH_ALIGNMENT = 256
#: input channels a pointwise dnn.preact_conv pre-activates at a time (as the host kernel does)
PREACT_BLOCK = 64


@dataclass(frozen=True)
class ScratchLayout:
    """One op's scratch buffer: the pre-activated input at offset 0
    (`preact_bytes`, 0 when the op has none), then cuDNN's workspace
    (`cudnn_bytes` at `cudnn_offset`)."""

    preact_bytes: int
    cudnn_bytes: int

    @classmethod
    def of_buffer(cls, preact_bytes: int, total_bytes: int) -> ScratchLayout:
        """The layout of a scratch buffer of `total_bytes` for an op whose
        pre-activated input takes `preact_bytes` (0: none): what is left
        after it is cuDNN's."""
        offset = cls(preact_bytes, 0).cudnn_offset
        return cls(preact_bytes, max(total_bytes - offset, 0))

    @property
    def cudnn_offset(self) -> int:
        """Where cuDNN's workspace starts in the buffer."""
        return -(-self.preact_bytes // SCRATCH_ALIGNMENT) * SCRATCH_ALIGNMENT

    @property
    def total_bytes(self) -> int:
        """The whole buffer."""
        return self.cudnn_offset + self.cudnn_bytes if self.cudnn_bytes else self.preact_bytes


def _ints(op: Operation, name: str) -> list[int] | None:
    attr = op.properties.get(name)
    return None if attr is None else list(attr.get_values())  # type: ignore[attr-defined]


def preact_block(op: d.PreActConvOp) -> int | None:
    """Input channels per block when `op` is a pointwise convolution (1x1,
    stride 1, no padding, one group): then the cuda lowering pre-activates
    and multiplies one block of input channels at a time (cuBLAS reads the
    weights' columns of the block in place), so its scratch holds a block,
    not the whole input. None for other convolutions."""
    kernel = op.w.type.get_shape()[2:]  # type: ignore[attr-defined]
    spatial = len(kernel)
    group = op.properties.get("group")
    pointwise = (all(k == 1 for k in kernel)
                 and _ints(op, "strides") in (None, [1] * spatial)
                 and _ints(op, "dilations") in (None, [1] * spatial)
                 and _ints(op, "pads") in (None, [0] * (2 * spatial))
                 and (group is None or group.value.data == 1))  # type: ignore[attr-defined]
    return min(op.x.type.get_shape()[1], PREACT_BLOCK) if pointwise else None  # type: ignore[attr-defined]


def _read_after(value: SSAValue, op: Operation) -> bool:
    """Whether anything after `op` in its block reads `value` or a view of
    it (a dealloc or pool release is not a read)."""
    watched = {value}
    pending = [value]
    while pending:  # the views of value, transitively
        for use in pending.pop().uses:
            if isinstance(use.operation, d.ALIAS_OPS):
                watched.add(use.operation.results[0])
                pending.append(use.operation.results[0])
    later = op.next_op
    while later is not None:
        if (not isinstance(later, (d.DeallocOp, d.PoolReleaseOp, *d.ALIAS_OPS))
                and any(operand in watched for operand in later.operands)):
            return True
        later = later.next_op
    return False


def preact_in_place(op: d.PreActConvOp) -> bool:
    """Whether `op` may pre-activate its input in place: x is a buffer of its
    own (a dnn.malloc or a pool offset, not a view or band of another one,
    nor a graph argument), no other operand is x, and nothing reads x after
    op (DenseNet's second pre-activation, of the bottleneck's output). Then
    the pre-activated input needs no scratch, as when dnn-coalesce runs the
    unfused batch norm in place."""
    if not isinstance(op.x.owner, (d.MallocOp, d.MemOffsetOp)):
        return False
    if sum(1 for operand in op.operands if operand is op.x) != 1:
        return False
    return not _read_after(op.x, op)


def scratch_layout(op: Operation, workspace: int) -> ScratchLayout | None:
    """The scratch buffer the cuda lowering of `op` uses with cuDNN
    workspace bound `workspace`; None when it uses none (an op cuDNN does not
    convolve, or a convolution with no workspace allowed: implicit GEMM).
    A pointwise dnn.preact_conv needs one block of its pre-activated input
    and no cuDNN workspace (it is a cuBLAS product); another one its whole
    pre-activated input and the workspace; one that pre-activates in place
    (`preact_in_place`) only the workspace."""
    if isinstance(op, d.PreActConvOp) and preact_in_place(op):
        return ScratchLayout(0, workspace) if workspace > 0 else None
    if isinstance(op, d.PreActConvOp):
        block = preact_block(op)
        if block is not None:
            shape = op.x.type.get_shape()  # type: ignore[attr-defined]
            return ScratchLayout(4 * shape[0] * block * math.prod(shape[2:]), 0)
        return ScratchLayout(d.type_bytes(op.x.type), workspace)
    if isinstance(op, d.ConvOp) and workspace > 0:
        return ScratchLayout(0, workspace)
    return None


def _with_workspace(op: d.DnnComputeOp, buffer: SSAValue) -> d.DnnComputeOp:
    """`op` with `buffer` as its workspace operand."""
    operands = {name: getattr(op, name) for name, _ in op.get_irdl_definition().operands}
    operands["workspace"] = buffer
    return type(op).build(operands, [], op.properties, op.attributes)


@dataclass(frozen=True)
class DnnCudaScratchPass(ModulePass):
    """Give every buffer-form op whose cuda lowering needs scratch memory
    (convolutions: cuDNN's workspace; dnn.preact_conv: its pre-activated
    input too) a planned `workspace` buffer."""

    name = "dnn-cuda-scratch"

    workspace: int = CUDA_WORKSPACE
    """Bytes of cuDNN workspace each convolution may use (0: none, every
    convolution runs implicit GEMM)."""

    mode: str = "lazy"
    """lazy: a buffer allocated right before each op and freed right after
    it; eager: one buffer, allocated at entry and shared by all."""

    alignment: int = 64
    """Byte alignment of each buffer."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "buffers")
        if self.workspace < 0:
            raise PassFailedException(f"dnn-cuda-scratch: workspace must be >= 0 bytes, got {self.workspace}")
        if self.mode not in ("eager", "lazy"):
            raise PassFailedException(f"dnn-cuda-scratch: mode must be eager or lazy, got '{self.mode}'")
        for function in op.walk():
            if isinstance(function, func.FuncOp) and function.body.blocks:
                self._plan_function(function)

    def _plan_function(self, function: func.FuncOp) -> None:
        block = function.body.block
        needy = [(o, layout) for o in list(block.ops)
                 if isinstance(o, d.DnnComputeOp) and o.on_buffers and getattr(o, "workspace", False) is None
                 and (layout := scratch_layout(o, self.workspace)) is not None]
        if not needy:
            return
        if self.mode == "eager":
            size = max(layout.total_bytes for _, layout in needy)
            shared = d.MallocOp(MemRefType(i8, [size]), self.alignment)
            shared.result.name_hint = "scratch"
            Rewriter.insert_op(shared, InsertPoint.at_start(block))
            for o, _ in needy:
                Rewriter.replace_op(o, _with_workspace(o, shared.result))
            last = block.last_op
            assert isinstance(last, func.ReturnOp)
            Rewriter.insert_op(d.DeallocOp(shared.result), InsertPoint.before(last))
            return
        for o, layout in needy:
            buffer = d.MallocOp(MemRefType(i8, [layout.total_bytes]), self.alignment)
            buffer.result.name_hint = "scratch"
            Rewriter.insert_op(buffer, InsertPoint.before(o))
            replacement = _with_workspace(o, buffer.result)
            Rewriter.replace_op(o, replacement)
            Rewriter.insert_op(d.DeallocOp(buffer.result), InsertPoint.after(replacement))

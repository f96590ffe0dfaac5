"""The registry of target=cuda lowerings: dnn op class -> the function that
turns one buffer-form op of that class into library calls and kernel
launches in NAME_run (and what it needs set up in NAME_init).

A lowering `lower(lw, op)` gets the function's `CudaFunctionLowering` (the
ABI builder: checked library calls, descriptors, launches) and the op. It
registers with `@cuda_lowering(d.ConvOp, ...)`; `other_dtypes(op, value)`
says which operands may be other than float32 (every operand of an op
registered without it must be float32). An op class registered here is one
whose `Targets` trait names "cuda" (tests/dialects check the two agree).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.ir import Operation, SSAValue

#: lower(lw, op): emit the op's calls into the run function of lw, the
#: function's pyocc.lowering.cuda.function.CudaFunctionLowering (typed Any:
#: the registry sits below the ABI builder, which looks lowerings up here)
Lower = Callable[[Any, Any], None]
#: other_dtypes(op, value): whether this operand may be other than float32
OtherDtypes = Callable[[Any, SSAValue], bool]


def _float32_only(op: Operation, value: SSAValue) -> bool:
    return False


@dataclass(frozen=True)
class CudaLowering:
    """One registered target=cuda lowering."""

    op_class: type[Operation]
    """the dnn op class it lowers"""
    lower: Lower
    """emits the op's calls"""
    other_dtypes: OtherDtypes
    """which operands may be other than float32"""


#: dnn op class -> its cuda lowering
CUDA_LOWERINGS: dict[type[Operation], CudaLowering] = {}


def cuda_lowering(*op_classes: type[Operation], other_dtypes: OtherDtypes | None = None) -> Callable[[Lower], Lower]:
    """Register the decorated function as the cuda lowering of every class
    in `op_classes`; with `other_dtypes`, those operands may be other than
    float32."""

    def register(lower: Lower) -> Lower:
        for op_class in op_classes:
            if op_class in CUDA_LOWERINGS:
                raise ValueError(f"{op_class.__name__} has two cuda lowerings")
            CUDA_LOWERINGS[op_class] = CudaLowering(op_class, lower, other_dtypes or _float32_only)
        return lower

    return register


def cuda_lowering_for(op: Operation) -> CudaLowering | None:
    """The lowering of `op`'s class, or None (target=cuda cannot run it)."""
    return CUDA_LOWERINGS.get(type(op))

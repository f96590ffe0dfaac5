"""The targets of convert-dnn-to-llvm: target name -> how one function is
lowered for it and which external functions its code declares.

The pass (pyocc.lowering.convert_dnn_to_llvm) reads this table; the target
lowerings (convert_dnn_to_host, convert_dnn_to_cuda) share only
pyocc.lowering.llvm_common, so no lowering imports another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.ir import Operation

from pyocc.lowering.convert_dnn_to_cuda import CudaFunctionLowering, declarations
from pyocc.lowering.convert_dnn_to_host import HostFunctionLowering, host_declarations


@dataclass(frozen=True)
class LoweringTarget:
    """How convert-dnn-to-llvm lowers for one target."""

    lower_function: Callable[[func.FuncOp, int], list[Operation]]
    """(function, workspace bytes) -> the llvm functions and globals of its ABI"""
    declarations: Callable[[], list[Operation]]
    """the external functions the target's code calls"""


TARGETS: dict[str, LoweringTarget] = {
    "host": LoweringTarget(lambda f, workspace: HostFunctionLowering(f).lower(), host_declarations),
    "cuda": LoweringTarget(lambda f, workspace: CudaFunctionLowering(f, workspace_bytes=workspace).lower(),
                           declarations),
}

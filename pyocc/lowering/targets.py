"""The targets of convert-dnn-to-llvm: target name -> how one function is
lowered for it and which external functions its code declares.

The pass (pyocc.lowering.convert_dnn_to_llvm) reads this table; the target
lowerings (convert_dnn_to_host, the cuda package) share only
pyocc.lowering.llvm_common, so no lowering imports another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.ir import Operation

from pyocc.lowering.cuda import CudaFunctionLowering, declarations
from pyocc.lowering.convert_dnn_to_host import HostFunctionLowering, host_declarations


@dataclass(frozen=True)
class LoweringTarget:
    """How convert-dnn-to-llvm lowers for one target."""

    lower_function: Callable[[func.FuncOp, int, str, str, int], list[Operation]]
    """(function, workspace bytes, pool allocation, conv search, run part
    ops) -> the llvm functions and globals of its ABI (the host ignores the
    three target=cuda options, cuda the host's run_part_ops)"""
    declarations: Callable[[list[Operation]], list[Operation]]
    """the lowered functions -> the external functions their code calls
    (and the helpers it defines once per module)"""


TARGETS: dict[str, LoweringTarget] = {
    "host": LoweringTarget(lambda f, workspace, pool_allocation, conv_search, run_part_ops: HostFunctionLowering(
        f, run_part_ops=run_part_ops).lower(), host_declarations),
    "cuda": LoweringTarget(lambda f, workspace, pool_allocation, conv_search, run_part_ops: CudaFunctionLowering(
        f, workspace_bytes=workspace, pool_allocation=pool_allocation, conv_search=conv_search).lower(),
        declarations),
}

"""The scratchpad (NPU) part of a memory report: running the scheduler and
simulator of pyocc.planning.scratchpad on a tensor-form function, and the
text summary in the manner of Arm Vela's (SRAM used, bytes per memory,
cycles against the bound, the no-prefetch baseline)."""

from __future__ import annotations

from typing import Any

from xdsl.dialects import func

from pyocc.analysis.npu_program import npu_program
from pyocc.errors import PyoccError
from pyocc.planning import PlanningError
from pyocc.planning.npu_simulator import NpuCost, ScheduleError
from pyocc.planning.pools import parse_size
from pyocc.planning.scratchpad import run_scratchpad


def parse_scratchpad(size: int | str, cost: str | None) -> tuple[int, NpuCost]:
    """The SRAM bytes (`1MiB`, `262144`) and the cost model from the user's
    text; one-line `PyoccError`s naming the option."""
    try:
        nbytes = size if isinstance(size, int) else parse_size(size)
    except PlanningError as e:
        raise PyoccError(f"--scratchpad: {e}") from None
    if nbytes <= 0:
        raise PyoccError(f"--scratchpad: the SRAM size must be positive, got {nbytes}")
    try:
        model = NpuCost.parse(cost or "")
    except PlanningError as e:
        raise PyoccError("--npu-cost" + str(e).removeprefix("npu cost")) from None
    return nbytes, model


def npu_report(function: func.FuncOp, sram_size: int, cost: NpuCost) -> dict[str, Any]:
    """Schedule and simulate `function` (tensor form) for the scratchpad;
    the report's `npu` object. A program the SRAM cannot hold is one line."""
    try:
        return run_scratchpad(npu_program(function), sram_size, cost).as_json()
    except PlanningError as e:
        raise PyoccError(str(e)) from None
    except ScheduleError as e:  # the simulator caught the scheduler: a bug, said plainly
        raise PyoccError(f"scratchpad: internal error, the schedule breaks a rule: {e}") from None


def npu_summary(npu: dict[str, Any]) -> str:
    """A Vela-style text summary of the report's `npu` object."""
    cost = npu["cost"]
    base = npu["baseline_no_prefetch"]

    def ratio(a: int, b: int) -> str:
        return f"{a / b:.3f}" if b else "-"

    lines = [
        f"npu scratchpad   {npu['sram_size']:,d} B SRAM (macs/cycle {cost['macs_per_cycle']}, "
        f"SRAM B/cycle {cost['sram_bytes_per_cycle']}, DRAM B/cycle {cost['dram_bytes_per_cycle']})",
        f"  SRAM used      {npu['sram_bytes']:>14,d} B  (peak planned)",
        f"  DRAM traffic   {npu['dram_bytes']:>14,d} B  (lower bound {npu['dram_lower_bound_bytes']:,d} B: "
        f"weights once + graph I/O; x{ratio(npu['dram_bytes'], npu['dram_lower_bound_bytes'])})",
        f"  cycles         {npu['cycles']:>14,d}    (bound {npu['bound_cycles']:,d}; "
        f"x{ratio(npu['cycles'], npu['bound_cycles'])})",
        f"  compute        {npu['compute_cycles']:>14,d}    ({npu['macs']:,d} MACs)",
        f"  stalls         {npu['stall_cycles']:>14,d}    (waiting for DMA)",
        f"  DMA transfers  {npu['dma_transfers']:>14,d}    ({len(npu['tiled_ops'])} ops tiled or cascaded)",
        f"  no prefetch    {base['cycles']:>14,d}    cycles, {base['dram_bytes']:,d} B DRAM "
        f"(copy in, compute, copy out; x{ratio(base['cycles'], npu['bound_cycles'])})",
    ]
    return "\n".join(lines)

"""The NPU scheduler's view of a tensor-form dnn function (facts, no rewriting).

`npu_program` lists the compute ops in order with the tensors each reads and
writes (weights apart), their MACs (`op.macs()`), and the facts tiling needs,
all read from the op definitions: an op whose `splits_by_rows()` holds may
be split by rows (a `RowLocal` window's kernel rows and stride give the halo), an op
that reads a weight by output channels. Views share their source's
tensor. The result is plain data for pyocc.planning.scratchpad.

`npu_report` runs the scheduler and simulator on it for `--scratchpad`, and
`npu_summary` writes the report's text block in the manner of Arm Vela's
summary (SRAM used, bytes per memory, cycles against the bound, the
no-prefetch baseline).
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import func
from xdsl.ir import SSAValue

from pyocc.dialects.dnn import ops as d
from pyocc.errors import PyoccError
from pyocc.planning import PlanningError
from pyocc.planning.npu_simulator import NpuCost, ScheduleError
from pyocc.planning.pools import parse_size
from pyocc.planning.scratchpad import NpuOp, NpuProgram, NpuTensor, run_scratchpad


def _rows(value: SSAValue) -> int:
    """Rows of an NCHW tensor (its axis 2; the second to last of a higher
    rank); 1 below rank 4."""
    shape = value.type.get_shape()  # type: ignore[attr-defined]
    return int(shape[-2]) if len(shape) >= 4 else 1


def _halo_rows(op: d.DnnComputeOp) -> int:
    """Input rows a band needs beyond its share: the window's extent (its
    `kernel_shape`, or the rows of a 4-d weight `w`) minus its stride."""
    kernel = getattr(op, "kernel_shape", None)
    if kernel is not None:
        k = int(kernel.get_values()[0])
    elif getattr(op, "w", None) is not None and len(op.w.type.get_shape()) == 4:
        k = int(op.w.type.get_shape()[2])
    else:
        return 0
    dilations = getattr(op, "dilations", None)
    k = (k - 1) * (int(dilations.get_values()[0]) if dilations else 1) + 1
    strides = getattr(op, "strides", None)
    stride = int(strides.get_values()[0]) if strides else 1
    return max(0, k - stride)


def npu_program(function: func.FuncOp) -> NpuProgram:
    """The program of a tensor-form function: graph inputs and outputs,
    weights, and every compute op in block order."""
    names: dict[SSAValue, str] = {}
    tensors: dict[str, NpuTensor] = {}
    outputs = set()
    ret = function.body.block.last_op
    if isinstance(ret, func.ReturnOp):
        outputs = set(ret.operands)

    def name_of(value: SSAValue) -> str:
        while (source := d.aliased_value(value.owner)) is not None:
            value = source
        if value not in names:
            base = value.name_hint or "t"
            name, n = base, 1
            while name in tensors:
                n += 1
                name = f"{base}_{n}"
            names[value] = name
        return names[value]

    def add(value: SSAValue, kind: str) -> str:
        name = name_of(value)
        if name not in tensors:
            tensors[name] = NpuTensor(name, d.type_bytes(value.type), kind, _rows(value))
        return name

    for arg in function.body.block.args:
        add(arg, "input")
    ops: list[NpuOp] = []
    for op in function.body.block.ops:
        if isinstance(op, d.WeightOp):
            add(op.results[0], "weight")
            continue
        if not isinstance(op, d.DnnComputeOp):
            continue
        reads: list[str] = []
        weights: list[str] = []
        for value in op.operands:
            name = name_of(value)
            if name not in tensors:
                add(value, "activation")
            (weights if tensors[name].kind == "weight" else reads).append(name)
        writes = []
        for result in op.results:
            returned = result in outputs or any(use.operation is ret for use in result.uses)
            if d.type_bytes(result.type) == 0:
                continue
            writes.append(add(result, "output" if returned else "activation"))
        if not writes:
            continue
        first = op.results[0]
        shape = first.type.get_shape()  # type: ignore[attr-defined]
        row_local = op.splits_by_rows() and len(shape) >= 4
        channels = int(shape[1] if len(shape) >= 4 else shape[-1]) if weights and shape else 1
        ops.append(NpuOp(
            writes[0], op.macs(), tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(weights)), tuple(writes),
            _rows(first) if row_local else 1, _halo_rows(op) if row_local else 0, channels,
        ))
    # a returned view of an activation makes that activation a graph output
    for value in outputs:
        name = name_of(value)
        if tensors[name].kind == "activation":
            t = tensors[name]
            tensors[name] = NpuTensor(t.name, t.size, "output", t.rows)
    used = {n for op in ops for n in (*op.inputs, *op.weights, *op.outputs)}
    return NpuProgram(tuple(t for t in tensors.values() if t.name in used and t.size > 0), tuple(ops))


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

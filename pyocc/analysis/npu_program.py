"""The NPU scheduler's view of a tensor-form dnn function (facts, no rewriting).

`npu_program` lists the compute ops in order with the tensors each reads and
writes (weights apart), their MACs (`op.macs()`), and the facts tiling needs,
all read from the op definitions: an op whose `splits_by_rows()` holds may
be split by rows (a `RowLocal` window's kernel rows and stride give the halo), an op
that reads a weight by output channels. Views share their source's
tensor. The result is plain data for pyocc.planning.scratchpad.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import SSAValue

from pyocc.dialects.dnn import ops as d
from pyocc.planning.scratchpad import NpuOp, NpuProgram, NpuTensor


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

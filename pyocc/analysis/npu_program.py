"""The NPU scheduler's view of a tensor-form dnn function (facts, no rewriting).

`npu_program` lists the compute ops in order with the tensors each reads and
writes (weights apart), their MACs (`op.macs()`), and the facts tiling needs,
all read from the op definitions: an op whose `splits_by_rows()` holds may
be split by rows (a `RowLocal` window's kernel rows and stride give the halo), an op
whose `channel_split()` says how may be split by output channels (its
weights read by blocks, but those it reads whole; without weights, its
input's channel blocks), an op whose `reduction_split()` says how may sum
over blocks of its input channels. Views share their source's
tensor. The result is plain data for pyocc.planning.scratchpad.

`npu_run` runs the scheduler and simulator on it for `--scratchpad` (the
schedule that runs: `pyocc plan` reports it, `pyocc run` runs it), and
`npu_summary` writes the report's text block in the manner of Arm Vela's
summary (SRAM used, bytes per memory, cycles against the bound, the
no-prefetch baseline, the ops that waited longest for DMA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from collections.abc import Callable
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, StringAttr, TensorType, i64
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue

from pyocc.dialects.dnn import ops as d
from pyocc.dialects.dnn.dma import DmaStartOp, DmaWaitOp
from pyocc.errors import PyoccError
from pyocc.planning import PlanningError
from pyocc.planning.npu_simulator import (
    Alloc,
    Compute,
    Free,
    Instruction,
    Load,
    NpuCost,
    Piece,
    ScheduleError,
    SramBuffer,
    Store,
    Wait,
)
from pyocc.planning.pools import parse_size
from pyocc.planning.scratchpad import NpuOp, NpuProgram, NpuResult, NpuTensor, copy_rows, fits_tiled, run_scratchpad
from pyocc.units import plural


def _rows(value: SSAValue) -> int:
    """Rows of an NCHW tensor (its axis 2; the second to last of a higher
    rank); 1 below rank 4."""
    shape = value.type.get_shape()  # type: ignore[attr-defined]
    return int(shape[-2]) if len(shape) >= 4 else 1


def _cols(value: SSAValue) -> int:
    """Columns of an NCHW tensor (its last axis); 1 below rank 4."""
    shape = value.type.get_shape()  # type: ignore[attr-defined]
    return int(shape[-1]) if len(shape) >= 4 else 1


def _nchw(value: SSAValue) -> bool:
    """One image of NCHW (rank 4, N = 1), or a [1, K] vector (`NpuTensor.nchw`)."""
    shape = value.type.get_shape()  # type: ignore[attr-defined]
    return len(shape) in (2, 4) and shape[0] == 1


def _images(value: SSAValue) -> int:
    """Images of an NCHW tensor (its axis 0; the axes before its last three
    at a higher rank); 1 below rank 4."""
    shape = value.type.get_shape()  # type: ignore[attr-defined]
    return math.prod(int(n) for n in shape[:-3]) if len(shape) >= 4 else 1


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


def _windows(op: d.DnnComputeOp, name_of: Callable[[SSAValue], str], axis: int) -> tuple[tuple[str, int, int, int], ...]:
    """`NpuOp.row_windows` (axis -2) or `col_windows` (axis -1) from the
    op's `axis_windows` (operand fields -> tensor names); empty when the op
    cannot run on bands, or reads one tensor through two different windows."""
    windows = op.axis_windows(axis)
    if not windows:
        return ()
    found: dict[str, tuple[int, int, int]] = {}
    for field, window in windows.items():
        value = getattr(op, field)
        for v in list(value) if isinstance(value, tuple | list) else [value]:
            if found.setdefault(name_of(v), window) != window:
                return ()
    return tuple((name, *window) for name, window in found.items())


def _groups(op: d.DnnComputeOp) -> int:
    """The op's `group` property (a grouped convolution's), 1 without one."""
    group = getattr(op, "group", None)
    return group.value.data if isinstance(group, IntegerAttr) else 1


def npu_program(function: func.FuncOp) -> NpuProgram:
    """The program of a tensor-form function: graph inputs and outputs,
    weights, and every compute op in block order."""
    return npu_program_of(function).program


@dataclass
class NpuProgramOf:
    """A tensor-form function's program and where each of its names comes
    from in the IR (what dnn-npu-schedule needs to write the schedule as IR)."""

    program: NpuProgram
    ops: dict[str, d.DnnComputeOp]
    """NpuOp name -> the compute op."""
    tensor_of: dict[SSAValue, str]
    """Every value seen (views included) -> the name of the tensor it shares."""
    roots: dict[str, SSAValue]
    """Tensor name -> the value that owns its bytes (views resolved)."""


def npu_program_of(function: func.FuncOp) -> NpuProgramOf:
    """`npu_program` with the IR each name stands for."""
    names: dict[SSAValue, str] = {}
    seen: dict[SSAValue, str] = {}
    compute: dict[str, d.DnnComputeOp] = {}
    tensors: dict[str, NpuTensor] = {}
    outputs = set()
    ret = function.body.block.last_op
    if isinstance(ret, func.ReturnOp):
        outputs = set(ret.operands)

    def name_of(value: SSAValue) -> str:
        given = value
        while (source := d.aliased_value(value.owner)) is not None:
            value = source
        if value not in names:
            base = value.name_hint or "t"
            name, n = base, 1
            while name in tensors:
                n += 1
                name = f"{base}_{n}"
            names[value] = name
        seen[given] = names[value]
        return names[value]

    def add(value: SSAValue, kind: str) -> str:
        name = name_of(value)
        if name not in tensors:
            tensors[name] = NpuTensor(name, d.type_bytes(value.type), kind, _rows(value), _images(value), _cols(value),
                                      _nchw(value))
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
        col_local = op.splits_along(-1) and len(shape) >= 4 and len(op.results) == 1
        split = op.channel_split() if shape else None
        channels = split[0] if split is not None else 1
        split_values = {getattr(op, field) for field in (split[1] if split else ())} - {None}
        whole = tuple(dict.fromkeys(w for w in weights
                                    if not any(name_of(v) == w for v in split_values)))
        compute[writes[0]] = op
        joined = op.joined_channels()
        # an in-place concat: distinct activations, one band each (a weight or a repeated input cannot be)
        joins = joined if (joined is not None and not weights and len(reads) == len(set(reads)) == len(joined)
                           and len(writes) == 1) else ()
        blocked = _channel_inputs(op, split, reads, name_of, tensors) if channels > 1 else ()
        ops.append(NpuOp(
            writes[0], op.macs(), tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(weights)), tuple(writes),
            _rows(first) if row_local else 1, _halo_rows(op) if row_local else 0, channels,
            whole if channels > 1 else (), _windows(op, name_of, -2) if row_local and len(op.results) == 1 else (),
            _groups(op) if channels > 1 else 1, joins, blocked,
            *_reduction(op, reads, weights, name_of, tensors),
            col_windows=_windows(op, name_of, -1) if col_local else (),
        ))
    # a returned view of an activation makes that activation a graph output
    for value in outputs:
        name = name_of(value)
        if tensors[name].kind == "activation":
            tensors[name] = replace(tensors[name], kind="output")
    used = {n for op in ops for n in (*op.inputs, *op.weights, *op.outputs)}
    program = NpuProgram(tuple(t for t in tensors.values() if t.name in used and t.size > 0), tuple(ops))
    return NpuProgramOf(program, compute, seen, {name: value for value, name in names.items()})


def _channel_inputs(op: d.DnnComputeOp, split: tuple[int, dict[str, int]], reads: list[str],
                    name_of: Callable[[SSAValue], str], tensors: dict[str, NpuTensor]) -> tuple[str, ...]:
    """The activations `op` reads that its `channel_split` slices with the
    output channels (a residual), each a contiguous slice of its tensor per
    block: every axis before the split one is 1, the split axis has one
    entry per output channel, and the operand is the whole tensor (not a
    view of part of it), and no other operand of `op` reads it whole (a
    1x1 convolution whose residual is its own input needs every channel of
    it for each block)."""
    channels, axes = split
    whole = {name_of(value) for field, _ in op.get_irdl_definition().operands if field not in axes
             if isinstance(value := getattr(op, field, None), SSAValue)}
    found = []
    for field, axis in axes.items():
        value = getattr(op, field, None)
        if value is None or not isinstance(value, SSAValue) or name_of(value) not in reads or name_of(value) in whole:
            continue
        shape = value.type.get_shape()  # type: ignore[attr-defined]
        if (len(shape) > axis and shape[axis] == channels and all(n == 1 for n in shape[:axis])
                and d.type_bytes(value.type) == tensors[name_of(value)].size):
            found.append(name_of(value))
    return tuple(dict.fromkeys(found))


def _reduction(op: d.DnnComputeOp, reads: list[str], weights: list[str], name_of: Callable[[SSAValue], str],
               tensors: dict[str, NpuTensor]) -> tuple[int, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(`NpuOp.in_channels`, `reduced_inputs`, `reduced_weights`,
    `first_only`) from the op's `reduction_split` and `reduction_block`:
    the activations sliced along the reduced axis (each block a contiguous
    slice: every axis before it of extent 1, the whole tensor), the weights
    of more than one axis sliced along it (strided: a filter's input
    channels), and what only the first block reads (a bias, a residual).
    (1, (), (), ()) when the op cannot sum block by block."""
    split = op.reduction_split()
    block = op.reduction_block(0, 1, False, True) if split is not None else None
    if split is None or block is None or split[0] <= 1:
        return 1, (), (), ()
    length, axes = split
    inputs: list[str] = []
    blocked: list[str] = []
    for field, axis in axes.items():
        value = getattr(op, field, None)
        if not isinstance(value, SSAValue):
            continue
        name, shape = name_of(value), value.type.get_shape()  # type: ignore[attr-defined]
        if shape[axis] != length or d.type_bytes(value.type) != tensors[name].size:
            return 1, (), (), ()  # a view of part of a tensor, or a broadcast: not sliced by blocks
        if name in reads:
            if any(n != 1 for n in shape[:axis]):
                return 1, (), (), ()
            inputs.append(name)
        elif name in weights and len(shape) > 1:
            blocked.append(name)
    if not blocked or any(name_of(v) in (*inputs, *blocked) for v in op.operands if v is not None
                          and not any(getattr(op, f, None) is v for f in axes)):
        return 1, (), (), ()  # no weights in blocks, or a sliced tensor read twice
    _, _, running, dropped = block
    first = [name_of(v) for f in (*dropped, running) if isinstance(v := getattr(op, f, None), SSAValue)]
    return length, tuple(dict.fromkeys(inputs)), tuple(dict.fromkeys(blocked)), tuple(dict.fromkeys(first))


def _piece(attr: Attribute | None, op: Operation) -> tuple[Piece, int]:
    """The (piece, tensor bytes) an `npu.piece` entry names."""
    if not (isinstance(attr, ArrayAttr) and len(attr.data) == 4):
        raise ScheduleError(f"{op.name} carries no npu piece [tensor, part, bytes, tensor bytes]")
    tensor, part, nbytes, total = attr.data
    assert isinstance(tensor, StringAttr) and isinstance(part, StringAttr)
    assert isinstance(nbytes, IntegerAttr) and isinstance(total, IntegerAttr)
    return Piece(tensor.data, part.data, nbytes.value.data), total.value.data


def _root(value: SSAValue) -> SSAValue:
    while (source := d.aliased_value(value.owner)) is not None:
        value = source
    return value


def npu_instructions(function: func.FuncOp) -> tuple[list[Instruction], dict[str, Any]]:
    """The simulator's instructions of a function dnn-npu-schedule wrote, read
    back from the IR, and the keyword arguments `simulate` needs (tensor
    sizes, what DRAM holds from the start, the graph outputs, the spill
    offsets), all from the IR: SRAM buffers are `dnn.mem_offset`s of the
    pool named "sram", each freed right after its last use; each transfer a
    Load or Store; each compute op a Compute on the buffers it reads and
    writes, and each `dnn.memcpy` that carries `npu.reads` (rows copied
    from one SRAM buffer into another) a Compute of no MACs touching the
    bytes it reads and writes. Raises `ScheduleError` on IR that is not of
    that form."""
    block = function.body.block
    pools = {o.pool: o.pool_name.data for o in block.ops
             if isinstance(o, d.PoolInitOp) and o.pool_name is not None}
    outputs_args = set()
    for index, arg in enumerate(block.args):
        attrs = function.arg_attrs.data[index].data if function.arg_attrs is not None else {}
        if "dnn.output" in attrs:
            outputs_args.add(arg)
    ops = list(block.ops)
    buffers: dict[SSAValue, SramBuffer] = {}
    last: dict[SSAValue, int] = {}
    for index, op in enumerate(ops):
        if isinstance(op, d.MemOffsetOp) and pools.get(op.pool) == "sram":
            name = op.attributes.get("npu.buffer")
            label = name.data if isinstance(name, StringAttr) else (op.result.name_hint or f"b{index}")
            buffers[op.result] = SramBuffer(label, op.offset.value.data, op.size.value.data)
        used = list(op.operands)
        if isinstance(op, DmaWaitOp):
            used = list(op.token.owner.operands)  # type: ignore[union-attr]
        for value in used:
            root = _root(value)
            if root in buffers:
                last[root] = index
    frees: dict[int, list[SramBuffer]] = {}
    for root, index in last.items():
        frees.setdefault(index, []).append(buffers[root])
    out: list[Instruction] = []
    tokens: dict[SSAValue, int] = {}
    sizes: dict[str, int] = {}
    dram_resident: set[str] = set()
    outputs: set[str] = set()
    dram_offsets: dict[str, int] = {}

    def sram(op: Operation, value: SSAValue) -> SramBuffer:
        root = _root(value)
        if root not in buffers:
            raise ScheduleError(f"{op.name} uses {value.name_hint or '?'}, which is not an SRAM buffer")
        return buffers[root]

    for index, op in enumerate(ops):
        if isinstance(op, d.MemOffsetOp) and op.result in buffers:
            out.append(Alloc(buffers[op.result]))
        elif isinstance(op, DmaStartOp):
            piece, total = _piece(op.attributes.get("npu.piece"), op)
            sizes[piece.tensor] = total
            load = op.direction.data == "dram_to_sram"
            dram = _root(op.source if load else op.target)
            owner = dram.owner
            if isinstance(owner, d.MemOffsetOp) and pools.get(owner.pool) == "dram":
                dram_offsets[piece.tensor] = owner.offset.value.data
            elif load and (isinstance(owner, d.WeightOp) or (isinstance(dram, BlockArgument) and dram not in outputs_args)):
                dram_resident.add(piece.tensor)
            elif dram in outputs_args:  # a graph output, stored (and read back by a later op's band)
                outputs.add(piece.tensor)
            else:
                raise ScheduleError(f"transfer of {piece.tensor}:{piece.part} has no DRAM side "
                                    "(a weight, an argument or the dram pool)")
            tokens[op.token] = len(tokens) + 1
            buffer = sram(op, op.target if load else op.source)
            out.append((Load if load else Store)(tokens[op.token], buffer, piece))
        elif isinstance(op, DmaWaitOp):
            out.append(Wait(tokens[op.token]))
        elif isinstance(op, d.MemcpyOp) and "npu.reads" in op.attributes:  # rows copied in SRAM
            (read, _), = [_piece(a, op) for a in op.attributes["npu.reads"].data]  # type: ignore[attr-defined]
            (written, total), = [_piece(a, op) for a in op.attributes["npu.writes"].data]  # type: ignore[attr-defined]
            sizes[written.tensor] = total
            name = op.attributes.get("npu.op")
            made = ((sram(op, op.target), written),)
            at = len(out) - 1
            while at >= 0 and isinstance(out[at], Free):  # the band before, freed once its rows were copied
                at -= 1
            last = out[at] if at >= 0 else None
            if (isinstance(last, Compute) and last.macs == 0 and last.writes == made
                    and copy_rows(written.part) is not None):  # a rolled chain's second band into the same copy
                out[at] = replace(last, reads=(*last.reads, (sram(op, op.source), read)))
            else:
                out.append(Compute(name.data if isinstance(name, StringAttr) else op.name, 0, 2 * written.bytes,
                                   ((sram(op, op.source), read),), made))
        elif isinstance(op, d.DnnComputeOp):
            reads = [_piece(a, op) for a in op.attributes.get("npu.reads", ArrayAttr([])).data]  # type: ignore[union-attr]
            writes = [_piece(a, op) for a in op.attributes.get("npu.writes", ArrayAttr([])).data]  # type: ignore[union-attr]
            values, destinations = op.read_values(), op.destinations()
            if len(reads) != len(values) or len(writes) != len(destinations):
                raise ScheduleError(f"{op.name} names {len(reads)} read and {len(writes)} written pieces "
                                    f"for {len(values)} operands and {len(destinations)} results")
            for piece, total in (*reads, *writes):
                sizes[piece.tensor] = total
            macs = op.attributes.get("npu.macs")
            out.append(Compute(
                writes[0][0].tensor if writes else op.name,
                macs.value.data if isinstance(macs, IntegerAttr) else op.macs(),
                sum(p.bytes for p, _ in dict.fromkeys((*reads, *writes))),
                tuple(dict.fromkeys((sram(op, v), p) for v, (p, _) in zip(values, reads, strict=True))),
                tuple((sram(op, v), p) for v, (p, _) in zip(destinations, writes, strict=True)),
            ))
        for buffer in frees.get(index, []):
            out.append(Free(buffer))
    return out, {"tensor_bytes": sizes, "dram_resident": dram_resident, "outputs": outputs,
                 "dram_offsets": dram_offsets}


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


def unfold_untileable_shuffles(function: func.FuncOp, sram_size: int, cost: NpuCost) -> int:
    """Give back its channel shuffle as view, transpose, view (what dnn-fuse
    folded into it) to each shuffled conv (ConvOp.shuffle) of tensor-form
    `function` that no tiling fits in `sram_size`: its output channels are
    not stored together, so the scheduler cannot split it by them (stream
    its weights a block at a time), and row bands alone may need more than
    the SRAM. The plain conv then can be split, and the transpose copies
    row bands. Returns how many it unfolded (without a shuffled conv, at
    the cost of one walk: no program is made)."""
    if not any(isinstance(op, d.ConvOp) and op.shuffles() > 1 for op in function.walk()):
        return 0
    facts = npu_program_of(function)
    ops = {op.name: op for op in facts.program.ops}
    unfit = [conv for name, conv in facts.ops.items() if isinstance(conv, d.ConvOp) and conv.shuffles() > 1
             and not fits_tiled(ops[name], facts.program, sram_size, cost)]
    for conv in unfit:
        _unfold_shuffle(conv)
    return len(unfit)


def _unfold_shuffle(conv: d.ConvOp) -> None:
    """conv{shuffle=s}(x)  =>  view(transpose{perm=0,2,1,...}(view(conv(x), N x s x M/s x ...)))."""
    shuffle, out_type = conv.shuffles(), conv.results[0].type
    batch, channels, *spatial = out_type.get_shape()

    def typed(*shape: int) -> TensorType:
        return TensorType(out_type.element_type, list(shape))

    plain = conv.clone()
    del plain.properties["shuffle"]
    split = d.ViewOp.create(operands=[plain.results[0]], result_types=[typed(batch, shuffle, channels // shuffle,
                                                                               *spatial)])
    perm = DenseArrayBase.from_list(i64, [0, 2, 1, *range(3, len(spatial) + 3)])
    swapped = d.TransposeOp.build({"x": split.result}, [typed(batch, channels // shuffle, shuffle, *spatial)],
                                  {"perm": perm})
    merged = d.ViewOp.create(operands=[swapped.results[0]], result_types=[out_type])
    hint = conv.results[0].name_hint or "conv"
    for op, suffix in ((plain, ""), (split, "_split"), (swapped, "_shuffled"), (merged, "_merged")):
        op.results[0].name_hint = hint + suffix
    block = conv.parent_block()
    assert block is not None
    block.insert_ops_before([plain, split, swapped, merged], conv)
    conv.results[0].replace_all_uses_with(merged.results[0])
    block.erase_op(conv)


def npu_run(function: func.FuncOp, sram_size: int, cost: NpuCost) -> NpuResult:
    """Schedule and simulate `function` (tensor form) for the scratchpad:
    the schedule that `pyocc run --scratchpad` runs, without the
    scheduler's byte-share cascades, which the IR does not run (its
    `as_json()` is the report's `npu` object; the picture draws it). A
    program the SRAM cannot hold is one line (a PyoccError).
    Shuffled convs that cannot be tiled are unfolded first
    (`unfold_untileable_shuffles`)."""
    try:
        unfold_untileable_shuffles(function, sram_size, cost)
        return run_scratchpad(npu_program(function), sram_size, cost)
    except PlanningError as e:
        raise PyoccError(str(e)) from None
    except ScheduleError as e:  # the simulator caught the scheduler: a bug, said plainly
        raise PyoccError(f"scratchpad: internal error, the schedule breaks a rule: {e}") from None


STALLED_OPS = 3
"""How many of the ops that waited longest for DMA the text summary names
(the report's `npu.ops` has every op)."""


def npu_summary(npu: dict[str, Any]) -> str:
    """A Vela-style text summary of the report's `npu` object, with the ops
    that waited longest for DMA (`STALLED_OPS`), where to look first (the
    last op's wait counts the stores drained after it too, `op_costs`)."""
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
        f"  floor          {npu['floor_cycles']:>14,d}    (no schedule is faster: "
        f"x{ratio(npu['floor_cycles'], npu['bound_cycles'])} the bound; this one x"
        f"{ratio(npu['cycles'], npu['floor_cycles'])} the floor)",
        f"  compute        {npu['compute_cycles']:>14,d}    ({npu['macs']:,d} MACs)",
        f"  stalls         {npu['stall_cycles']:>14,d}    (waiting for DMA)",
        f"    port-bound   {npu['stall_port_bound_cycles']:>14,d}    (the DRAM port busy since the stall before: "
        "fewer bytes would shorten these)",
        f"    late         {npu['stall_cycles'] - npu['stall_port_bound_cycles']:>14,d}    "
        "(the port idled since: transfers started then would, data and SRAM room allowing)",
        f"  DMA transfers  {npu['dma_transfers']:>14,d}    ({len(npu['tiled_ops'])} ops tiled or cascaded)",
        f"  no prefetch    {base['cycles']:>14,d}    cycles, {base['dram_bytes']:,d} B DRAM "
        f"(copy in, compute, copy out; x{ratio(base['cycles'], npu['bound_cycles'])})",
    ]
    stalled = sorted((op for op in npu["ops"] if op["stall_cycles"]), key=lambda op: -op["stall_cycles"])
    for rank, op in enumerate(stalled[:STALLED_OPS]):
        loaded = op["weight_load_bytes"] + op["input_load_bytes"]
        lines.append(f"  {'stalled most' if rank == 0 else '':12s} {op['stall_cycles']:>16,d}    op {op['op']} "
                     f"({op['port_bound_stall_cycles']:,d} port-bound; {plural(op['tiles'], 'compute')}, "
                     f"{loaded:,d} B loaded for it, {op['output_store_bytes']:,d} B stored)")
    return "\n".join(lines)

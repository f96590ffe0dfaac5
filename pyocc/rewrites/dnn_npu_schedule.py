"""`dnn-npu-schedule{sram=1MiB cost=...}`: write the scratchpad schedule as IR.

pyocc.planning.scratchpad schedules a tensor-form program for an NPU whose
compute reads and writes only an SRAM scratchpad (prefetch, Belady
eviction, write-backs, tiling) and its simulator checks the schedule. This
pass writes that checked schedule, instruction by instruction, as
buffer-form dnn, so what runs is what was simulated:

    Alloc b (offset o, n bytes)  =>  %b = dnn.mem_offset %sram {offset = o, size = n}
    Load  t: piece -> b          =>  %t = dnn.dma_start ins(DRAM) outs(%b) {direction = "dram_to_sram"}
    Store t: b -> piece          =>  %t = dnn.dma_start ins(%b) outs(DRAM) {direction = "sram_to_dram"}
    Wait  t                      =>  dnn.dma_wait %t
    Compute op                   =>  the op in buffer form on the SRAM buffers
    Free  b                      =>  (nothing: the buffer's last use ends it)

`%sram` is `dnn.pool_init {pool_name = "sram"}` of the scratchpad's size;
DRAM is the weights, the graph's arguments (inputs, and outputs as
destination arguments, as dnn-insert-memory-ops makes them) and, for
activations written back, `dnn.pool_init {pool_name = "dram"}` at the
offsets the scheduler planned. Each transfer carries `npu.piece` (tensor,
part, bytes, tensor bytes) and each compute `npu.reads`/`npu.writes`, so
pyocc.analysis.npu_program.npu_instructions reads the instructions back and
the simulator checks the IR itself (`check=true`, the default, does so and
fails the pass if the IR breaks a rule of the machine).

Runs on tensor form (after the tensor rewrites), instead of
dnn-insert-memory-ops and the pool passes; dnn-dma-to-memcpy then makes
the transfers host copies. Whole tensors and blocks of output channels run:
a block reads `dnn.subview`s (a weight block's own buffer is loaded from a
subview of the weight) and writes its channels of the output, with the
slices and properties the op's `channel_block` gives. A schedule that runs
an op on row bands (row tiling, cascades) is refused in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i8,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import function_bodies
from pyocc.analysis.npu_program import NpuProgramOf, npu_instructions, npu_program_of
from pyocc.dialects.dnn import ops as d
from pyocc.dialects.dnn.dma import DmaStartOp, DmaWaitOp
from pyocc.planning import PlanningError, parse_size
from pyocc.planning.npu_simulator import (
    Alloc,
    Compute,
    Free,
    Load,
    NpuCost,
    Piece,
    ScheduleError,
    SimulationResult,
    SramBuffer,
    Store,
    Wait,
    simulate,
)
from pyocc.planning.scratchpad import NpuSchedule, channel_range, schedule_scratchpad
from pyocc.rewrites.dnn_insert_memory_ops import replace_function, to_buffer_type

SRAM_POOL, DRAM_POOL = "sram", "dram"


def piece_attr(piece: Piece, tensor_bytes: int) -> ArrayAttr:
    """`npu.piece`: [tensor, part, bytes, the whole tensor's bytes]."""
    return ArrayAttr([StringAttr(piece.tensor), StringAttr(piece.part),
                      IntegerAttr(piece.bytes, i64), IntegerAttr(tensor_bytes, i64)])


def _refuse(what: str) -> PassFailedException:
    """The one line for a schedule the IR cannot run yet."""
    return PassFailedException(f"dnn-npu-schedule: {what}; the IR runs whole tensors and output-channel "
                               "blocks so far: give a larger --scratchpad")


class _Emitter:
    """Writes one schedule of one function as a new buffer-form block."""

    def __init__(self, function: func.FuncOp, facts: NpuProgramOf, schedule: NpuSchedule, sram_size: int):
        self.facts = facts
        self.schedule = schedule
        self.npu_ops = {o.name: o for o in facts.program.ops}
        self.tensors = facts.program.by_name()
        block = function.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        self.returned = list(ret.arguments)
        in_types = [to_buffer_type(a.type) for a in block.args]
        out_types = [to_buffer_type(v.type) for v in self.returned]
        self.block = Block(arg_types=[*in_types, *out_types])
        self.n_inputs = len(in_types)
        self.ops: list[Operation] = []
        # DRAM: inputs, weights, outputs (destination arguments), spills
        self.dram: dict[str, SSAValue] = {}
        for old, new in zip(block.args, self.block.args[:self.n_inputs], strict=True):
            new.name_hint = old.name_hint
            if old in facts.tensor_of:
                self.dram[facts.tensor_of[old]] = new
        for value, arg in zip(self.returned, self.block.args[self.n_inputs:], strict=True):
            arg.name_hint = f"{value.name_hint}_out" if value.name_hint else "out"
            name = facts.tensor_of.get(value)
            if name is None or self.tensors[name].kind != "output" or name in self.dram:
                raise PassFailedException(
                    f"dnn-npu-schedule: output {value.name_hint or '?'} is not computed by an op of its own "
                    "(a returned input or weight, or a value returned twice); the scratchpad schedule "
                    "needs every output computed once")
            self.dram[name] = arg
        for op in block.ops:
            if isinstance(op, d.WeightOp):
                new_op = op.__class__.create(result_types=[to_buffer_type(op.results[0].type)],
                                             properties=dict(op.properties), attributes=dict(op.attributes))
                new_op.results[0].name_hint = op.results[0].name_hint
                self.ops.append(new_op)
                self.dram[facts.tensor_of[op.results[0]]] = new_op.results[0]
            elif not isinstance(op, d.DnnComputeOp | d.ViewOp | func.ReturnOp):
                raise PassFailedException(f"dnn-npu-schedule: cannot schedule {op.name}; "
                                          "run it on tensor-form dnn from convert-onnx-to-dnn")
        self.sram = self._pool(SRAM_POOL, sram_size)
        spill = max((off + self.tensors[n].size for n, off in schedule.dram_offsets.items()), default=0)
        self.spill = self._pool(DRAM_POOL, spill) if spill else None
        self.buffers: dict[str, SSAValue] = {}
        self.tokens: dict[int, SSAValue] = {}

    def _pool(self, name: str, size: int) -> SSAValue:
        init = d.PoolInitOp.create(result_types=[MemRefType(i8, [size])], properties={
            "size": IntegerAttr(size, i64), "alignment": IntegerAttr(64, i64), "pool_name": StringAttr(name)})
        init.pool.name_hint = f"mempool_{name}"
        self.ops.append(init)
        return init.pool

    def _typed(self, value: SSAValue, type_: Attribute) -> SSAValue:
        """`value` seen with `type_` (same bytes): itself or a dnn.view."""
        if value.type == type_:
            return value
        view = d.ViewOp.create(operands=[value], result_types=[type_])
        self.ops.append(view)
        return view.result

    def _root_type(self, tensor: str) -> Attribute:
        return to_buffer_type(self.facts.roots[tensor].type)

    def _dram(self, piece: Piece) -> SSAValue:
        """Where `piece` lives in DRAM, seen with its own type."""
        tensor = self.tensors[piece.tensor]
        if tensor.kind == "activation":
            assert self.spill is not None
            offset = self.schedule.dram_offsets[piece.tensor]
            view = d.MemOffsetOp.create(operands=[self.spill], result_types=[self._root_type(piece.tensor)],
                                        properties={"offset": IntegerAttr(offset, i64),
                                                    "size": IntegerAttr(tensor.size, i64)})
            view.result.name_hint = f"{piece.tensor}_dram"
            self.ops.append(view)
            whole = view.result
        else:
            whole = self._typed(self.dram[piece.tensor], self._root_type(piece.tensor))
        if piece.part == "all":
            return whole
        return self._slice(whole, self._root_type(piece.tensor), self._cut(piece))  # type: ignore[arg-type]

    def _cut(self, piece: Piece) -> tuple[int, int, int]:
        if (piece.tensor, piece.part) not in self.cuts:
            raise _refuse(f"the schedule moves part {piece.part!r} of {piece.tensor!r}, which no op reads as a block")
        return self.cuts[(piece.tensor, piece.part)]

    def _alloc(self, buffer: SramBuffer, first: Piece) -> None:
        type_ = self._root_type(first.tensor)
        if first.part != "all" and buffer.size < self.tensors[first.tensor].size:
            axis, start, stop = self._cut(first)
            shape = list(type_.get_shape())  # type: ignore[attr-defined]
            shape[axis] = stop - start
            type_ = MemRefType(type_.get_element_type(), shape)  # type: ignore[attr-defined]
        view = d.MemOffsetOp.create(operands=[self.sram], result_types=[type_],
                                    properties={"offset": IntegerAttr(buffer.offset, i64),
                                                "size": IntegerAttr(buffer.size, i64)})
        view.result.name_hint = f"{first.tensor}_sram"
        view.attributes["npu.buffer"] = StringAttr(buffer.name)
        self.ops.append(view)
        self.buffers[buffer.name] = view.result

    def _transfer(self, ins: Load | Store) -> None:
        sram = self.buffers[ins.buffer.name]
        dram = self._dram(ins.piece)
        if isinstance(ins, Store) and self.tensors[ins.piece.tensor].kind == "output" and ins.piece.part == "all":
            # the destination argument may be a view's type (a returned reshape)
            dram = self.dram[ins.piece.tensor]
            sram = self._typed(sram, dram.type)
        source, target = (dram, sram) if isinstance(ins, Load) else (sram, dram)
        start = DmaStartOp(source, target, "dram_to_sram" if isinstance(ins, Load) else "sram_to_dram")
        start.attributes["npu.piece"] = piece_attr(ins.piece, self.tensors[ins.piece.tensor].size)
        start.token.name_hint = f"{ins.piece.tensor}_{'in' if isinstance(ins, Load) else 'out'}"
        self.ops.append(start)
        self.tokens[ins.id] = start.token

    def _block(self, ins: Compute) -> tuple[dict[str, tuple[int, int, int]], dict[str, Attribute]]:
        """The slices and properties of the op of `ins` on its channel block
        (its whole self when the unit is not a block)."""
        op = self.facts.ops[ins.op]
        parts = {piece.part for _, piece in (*ins.reads, *ins.writes)} - {"all"}
        tiled = [p for p in parts if p.startswith(("block", "tile"))]
        if len(tiled) != len(parts):
            raise _refuse(f"the schedule runs op {ins.op!r} on {sorted(parts - set(tiled))[0]!r} (rows of a tensor)")
        if not tiled:
            return {}, dict(op.properties)
        lo, hi, rows = channel_range(self.npu_ops[ins.op], tiled[0])
        if rows:
            raise _refuse(f"the schedule runs op {ins.op!r} on {tiled[0]!r} (rows of a tensor)")
        block = op.channel_block(lo, hi)
        if block is None:
            raise _refuse(f"op {ins.op!r} cannot run on its output channels [{lo}, {hi})")
        slices, properties = block
        for result in op.results:
            slices[f"result:{self.facts.tensor_of[result]}"] = (1, lo, hi)
        return slices, properties

    def _slice(self, value: SSAValue, type_: MemRefType, cut: tuple[int, int, int]) -> SSAValue:
        """The contiguous slice `cut` (axis, start, stop) of `value` (of `type_`)."""
        axis, start, stop = cut
        shape = list(type_.get_shape())
        if any(n != 1 for n in shape[:axis]):
            raise _refuse(f"a slice along axis {axis} of {type_} is not contiguous")
        inner = d.type_bytes(type_) // math.prod(shape[:axis + 1])
        shape[axis] = stop - start
        view = d.SubviewOp(self._typed(value, type_), start * inner, MemRefType(type_.get_element_type(), shape))
        self.ops.append(view)
        return view.result

    def _operand(self, value: SSAValue, cut: tuple[int, int, int] | None, held: dict[str, SSAValue],
                 pieces: dict[str, Piece]) -> SSAValue:
        """The SRAM buffer an op operand (or result) `value` reads (writes)."""
        tensor = self.facts.tensor_of[value]
        type_ = to_buffer_type(value.type)
        if cut is None:
            return self._typed(held[tensor], type_)
        if pieces[tensor].part != "all" and d.type_bytes(held[tensor].type) < self.tensors[tensor].size:
            return held[tensor]  # the block's own buffer, typed for it at its allocation
        return self._slice(held[tensor], type_, cut)  # type: ignore[arg-type]

    def _compute(self, ins: Compute) -> None:
        op = self.facts.ops[ins.op]
        held = {piece.tensor: self.buffers[b.name] for b, piece in (*ins.reads, *ins.writes)}
        pieces = {piece.tensor: piece for _, piece in (*ins.reads, *ins.writes)}
        slices, properties = self._blocks[id(ins)]
        operands: dict[str, list[SSAValue]] = {}
        for name, _ in op.get_irdl_definition().operands:
            value = getattr(op, name)
            group = list(value) if isinstance(value, tuple | list) else ([] if value is None else [value])
            if name in ("out", "outs"):
                group = list(op.results)
                operands[name] = [self._operand(r, slices.get(f"result:{self.facts.tensor_of[r]}"), held, pieces)
                                  for r in group]
            else:
                operands[name] = [self._operand(v, slices.get(name), held, pieces) for v in group]
        new_op = type(op).build(operands, [], properties, op.attributes)
        # aligned with the new op's read_values() and destinations()
        reads = [pieces[self.facts.tensor_of[v]] for v in op.read_values()]
        writes = [pieces[self.facts.tensor_of[r]] for r in op.results]
        new_op.attributes["npu.reads"] = ArrayAttr([piece_attr(p, self.tensors[p.tensor].size) for p in reads])
        new_op.attributes["npu.writes"] = ArrayAttr([piece_attr(p, self.tensors[p.tensor].size) for p in writes])
        new_op.attributes["npu.macs"] = IntegerAttr(ins.macs, i64)
        self.ops.append(new_op)

    def emit(self) -> Block:
        self._blocks: dict[int, tuple[dict[str, tuple[int, int, int]], dict[str, Attribute]]] = {}
        self.cuts: dict[tuple[str, str], tuple[int, int, int]] = {}
        for ins in self.schedule.instructions:
            if isinstance(ins, Compute):
                slices, properties = self._blocks[id(ins)] = self._block(ins)
                op = self.facts.ops[ins.op]
                fields = {**{name: getattr(op, name) for name, _ in op.get_irdl_definition().operands},
                          **{f"result:{self.facts.tensor_of[r]}": r for r in op.results}}
                for _, piece in (*ins.reads, *ins.writes):
                    if piece.part == "all":
                        continue
                    for name, cut in slices.items():
                        if isinstance(fields.get(name), SSAValue) and self.facts.tensor_of[fields[name]] == piece.tensor:
                            self.cuts[(piece.tensor, piece.part)] = cut
        first: dict[str, Piece] = {}
        for ins in self.schedule.instructions:
            if isinstance(ins, Load | Store):
                first.setdefault(ins.buffer.name, ins.piece)
            elif isinstance(ins, Compute):
                for buffer, piece in (*ins.reads, *ins.writes):
                    first.setdefault(buffer.name, piece)
        for ins in self.schedule.instructions:
            if isinstance(ins, Alloc):
                self._alloc(ins.buffer, first[ins.buffer.name])
            elif isinstance(ins, Load | Store):
                self._transfer(ins)
            elif isinstance(ins, Wait):
                self.ops.append(DmaWaitOp(self.tokens[ins.id]))
            elif isinstance(ins, Compute):
                self._compute(ins)
            else:
                assert isinstance(ins, Free)  # a buffer's last use ends it
        pools = [self.sram] if self.spill is None else [self.sram, self.spill]
        releases = [d.PoolReleaseOp.create(operands=[pool]) for pool in reversed(pools)]
        self.block.add_ops([*self.ops, *releases, func.ReturnOp()])
        return self.block


def schedule_function(
    function: func.FuncOp, sram_size: int, cost: NpuCost, check: bool = True, schedule: NpuSchedule | None = None,
) -> tuple[NpuSchedule, SimulationResult | None]:
    """Replace tensor-form `function` by its scratchpad schedule (`schedule`,
    or the scheduler's) in buffer form; returns the schedule and, with
    `check`, the simulation of the new IR (the simulator run on the
    instructions read back from it)."""
    facts = npu_program_of(function)
    if schedule is None:
        try:
            schedule = schedule_scratchpad(facts.program, sram_size, cost)
        except PlanningError as e:
            raise PassFailedException(f"dnn-npu-schedule: {e}") from None
    block = _Emitter(function, facts, schedule, sram_size).emit()
    n_inputs = len(function.body.block.args)
    n_outputs = len(block.args) - n_inputs
    arg_attrs = list(function.arg_attrs.data) if function.arg_attrs is not None else [DictionaryAttr({})] * n_inputs
    res_attrs = list(function.res_attrs.data) if function.res_attrs is not None else [DictionaryAttr({})] * n_outputs
    out_attrs = [DictionaryAttr({**r.data, "dnn.output": UnitAttr()}) for r in res_attrs]
    new_function = func.FuncOp(function.sym_name.data, ([a.type for a in block.args], []), Region(block),
                               arg_attrs=ArrayAttr([*arg_attrs, *out_attrs]))
    new_function.attributes["dnn.planner"] = StringAttr("npu-schedule")
    replace_function(function, new_function)
    if not check:
        return schedule, None
    try:
        instructions, machine = npu_instructions(new_function)
        return schedule, simulate(instructions, sram_size=sram_size, cost=cost, **machine)
    except ScheduleError as e:
        raise PassFailedException(f"dnn-npu-schedule: the emitted IR breaks a rule of the machine: {e}") from None


@dataclass(frozen=True)
class DnnNpuSchedulePass(ModulePass):
    """Tensor-form dnn -> the scratchpad schedule as buffer-form dnn with
    DMA (see the module docstring)."""

    name = "dnn-npu-schedule"

    sram: str = "1MiB"
    """The scratchpad's size (bytes, or with a unit: 256KiB, 1MiB)."""

    cost: str = ""
    """The cost model that steers tiling, as --npu-cost takes it (empty: the defaults)."""

    check: bool = True
    """Simulate the emitted IR and fail when it breaks a rule of the machine."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "tensors")
        try:
            sram_size, cost = parse_size(self.sram), NpuCost.parse(self.cost)
        except PlanningError as e:
            raise PassFailedException(f"dnn-npu-schedule: {e}") from None
        for function in function_bodies(op):
            schedule_function(function, sram_size, cost, self.check)

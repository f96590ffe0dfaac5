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
the transfers host copies. Only whole tensors move so far: a schedule that
tiles an op (row bands, channel blocks, cascades) is refused in one line.
"""

from __future__ import annotations

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
    SramBuffer,
    Store,
    Wait,
    simulate,
)
from pyocc.planning.scratchpad import NpuSchedule, schedule_scratchpad
from pyocc.rewrites.dnn_insert_memory_ops import buffer_form, to_buffer_type

SRAM_POOL, DRAM_POOL = "sram", "dram"


def piece_attr(piece: Piece, tensor_bytes: int) -> ArrayAttr:
    """`npu.piece`: [tensor, part, bytes, the whole tensor's bytes]."""
    return ArrayAttr([StringAttr(piece.tensor), StringAttr(piece.part),
                      IntegerAttr(piece.bytes, i64), IntegerAttr(tensor_bytes, i64)])


class _Emitter:
    """Writes one schedule of one function as a new buffer-form block."""

    def __init__(self, function: func.FuncOp, facts: NpuProgramOf, schedule: NpuSchedule, sram_size: int):
        self.facts = facts
        self.schedule = schedule
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
        for old, new in zip(block.args, self.block.args, strict=False):
            new.name_hint = old.name_hint
            if old in facts.tensor_of:
                self.dram[facts.tensor_of[old]] = new
        for value, arg in zip(self.returned, self.block.args[self.n_inputs:], strict=True):
            arg.name_hint = f"{value.name_hint}_out" if value.name_hint else "out"
            name = facts.tensor_of.get(value)
            if name is None or self.tensors[name].kind != "output" or name in self.dram:
                raise PassFailedException(
                    f"dnn-npu-schedule: output {value.name_hint or '?'} is not computed by an op "
                    "(a returned input or weight); the scratchpad schedule needs every output computed")
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
        """Where `piece` lives in DRAM, seen with its tensor's type."""
        if piece.part != "all":
            raise PassFailedException(
                f"dnn-npu-schedule: the schedule moves part {piece.part!r} of {piece.tensor!r} (a tiled op); "
                "only whole tensors run so far: give a larger --scratchpad")
        tensor = self.tensors[piece.tensor]
        if tensor.kind == "activation":
            assert self.spill is not None
            offset = self.schedule.dram_offsets[piece.tensor]
            view = d.MemOffsetOp.create(operands=[self.spill], result_types=[self._root_type(piece.tensor)],
                                        properties={"offset": IntegerAttr(offset, i64),
                                                    "size": IntegerAttr(tensor.size, i64)})
            view.result.name_hint = f"{piece.tensor}_dram"
            self.ops.append(view)
            return view.result
        return self._typed(self.dram[piece.tensor], self._root_type(piece.tensor))

    def _alloc(self, buffer: SramBuffer, first: Piece) -> None:
        if first.part != "all":
            raise PassFailedException(
                f"dnn-npu-schedule: the schedule holds part {first.part!r} of {first.tensor!r} in SRAM (a tiled op); "
                "only whole tensors run so far: give a larger --scratchpad")
        view = d.MemOffsetOp.create(operands=[self.sram], result_types=[self._root_type(first.tensor)],
                                    properties={"offset": IntegerAttr(buffer.offset, i64),
                                                "size": IntegerAttr(buffer.size, i64)})
        view.result.name_hint = f"{first.tensor}_sram"
        view.attributes["npu.buffer"] = StringAttr(buffer.name)
        self.ops.append(view)
        self.buffers[buffer.name] = view.result

    def _transfer(self, ins: Load | Store) -> None:
        sram = self.buffers[ins.buffer.name]
        dram = self._dram(ins.piece)
        if isinstance(ins, Store) and self.tensors[ins.piece.tensor].kind == "output":
            # the destination argument may be a view's type (a returned reshape)
            dram = self.dram[ins.piece.tensor]
            sram = self._typed(sram, dram.type)
        source, target = (dram, sram) if isinstance(ins, Load) else (sram, dram)
        start = DmaStartOp(source, target, "dram_to_sram" if isinstance(ins, Load) else "sram_to_dram")
        start.attributes["npu.piece"] = piece_attr(ins.piece, self.tensors[ins.piece.tensor].size)
        start.token.name_hint = f"{ins.piece.tensor}_{'in' if isinstance(ins, Load) else 'out'}"
        self.ops.append(start)
        self.tokens[ins.id] = start.token

    def _compute(self, ins: Compute) -> None:
        op = self.facts.ops[ins.op]
        held = {piece.tensor: self.buffers[b.name] for b, piece in (*ins.reads, *ins.writes)}
        pieces = {piece.tensor: piece for _, piece in (*ins.reads, *ins.writes)}
        mapping: dict[SSAValue, SSAValue] = {}
        for value in op.operands:
            mapping[value] = self._typed(held[self.facts.tensor_of[value]], to_buffer_type(value.type))
        destinations = [self._typed(held[self.facts.tensor_of[r]], to_buffer_type(r.type)) for r in op.results]
        new_op = buffer_form(op, mapping, destinations)
        # aligned with the new op's read_values() and destinations()
        reads = [pieces[self.facts.tensor_of[v]] for v in op.read_values()]
        writes = [pieces[self.facts.tensor_of[r]] for r in op.results]
        new_op.attributes["npu.reads"] = ArrayAttr([piece_attr(p, self.tensors[p.tensor].size) for p in reads])
        new_op.attributes["npu.writes"] = ArrayAttr([piece_attr(p, self.tensors[p.tensor].size) for p in writes])
        self.ops.append(new_op)

    def emit(self) -> Block:
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


def schedule_function(function: func.FuncOp, sram_size: int, cost: NpuCost, check: bool = True) -> NpuSchedule:
    """Replace tensor-form `function` by its scratchpad schedule in buffer
    form; returns the schedule. With `check`, the simulator runs the new IR."""
    facts = npu_program_of(function)
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
    parent = function.parent_block()
    assert parent is not None
    parent.insert_op_before(new_function, function)
    function.detach()
    for old in reversed(list(function.body.block.ops)):
        old.drop_all_references()
    function.erase(safe_erase=False)
    if check:
        try:
            instructions, machine = npu_instructions(new_function)
            simulate(instructions, sram_size=sram_size, cost=cost, **machine)
        except ScheduleError as e:
            raise PassFailedException(f"dnn-npu-schedule: the emitted IR breaks a rule of the machine: {e}") from None
    return schedule


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

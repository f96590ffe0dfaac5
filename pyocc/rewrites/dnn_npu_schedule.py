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
the transfers host copies. Whole tensors, blocks of output channels and
bands of output rows run:

- a channel block reads `dnn.subview`s (a weight block's own buffer is
  loaded from a subview of the weight) and writes its channels of the
  output, with the slices and properties the op's `channel_block` gives;
- a row band (row tiling, `rows{lo}:{hi}` inputs and `tile{i}.{j}/{r}x{c}`
  outputs) reads each banded input from its own SRAM buffer, loaded by a
  `dnn.dma_start` with `rows = [lo, hi)` (the band's rows and its halo, a
  strided copy), and writes its own output buffer, written back the same
  way; the rows and the pads (top pad on the first band only, bottom on the
  last) are the op's `row_band`. A band may be a channel block too;
- a block of input channels (an op the scheduler sums block by block,
  `in{lo}:{hi}/{channels}` pieces) reads its slices of the input
  (`dnn.subview`, or a strided band `rows{a}:{b}|in{lo}:{hi}/{channels}`;
  of an input that is an in-place concat's output, the tensor living in
  those channels, where it is) and of the filters (their input channels: a
  strided copy of a view with them as rows), as the op's `reduction_block`
  gives; after the first block, the op adds the partial sums of the blocks
  before it (`acc{m-1}/{blocks}|{tile}`, an SRAM buffer, as its `residual`
  or `c`), and only the last block applies the activation.

A concat run in place (pyocc.planning.scratchpad.program `_homes`) is not
written: its inputs' pieces are channel bands of its output
(`ch{lo}:{hi}/{channels}`, `|{part}` for a part of one), so a producer
writes a `dnn.subview` of the output's SRAM buffer (or of its band of
rows), and a band goes to or comes from its `dnn.subview` of the output's
DRAM home.

Chain cascades run (`chains=true`, the default): consecutive ops, each
writing one activation only later ops of the chain read by windows, run
band by band; each op writes the rows `rows{lo}:{hi}` its readers' bands
read (its halo computed again by the neighbouring band) into an SRAM
buffer, which each reader reads whole, so the tensors in between never
reach DRAM. Rows a later op of a chain reads out of a larger band
already in SRAM (a residual's, loaded by an earlier op; with wide chains
an inner tensor's, computed once for its widest reader) are copied into
their own SRAM buffer by a strided `dnn.memcpy` carrying `npu.reads`,
`npu.writes` and `npu.op` (the reader), which the simulator runs as a
compute. So is a band of rows copied into its rows of the whole tensor's
SRAM buffer (`rows{lo}:{hi}|assembled`, a chunk per channel; a tile's
`rows{lo}:{hi}|ch{first}:{end}|assembled`, a chunk per channel of its
block), where a later op reads that tensor whole. The
scheduler's simulated cascades (bands that are byte shares of a tensor,
several read per band) are refused in one line: by default
(`cascades=false`) the pass schedules without them.
"""

from __future__ import annotations

import functools
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

from pyocc import progress
from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import function_bodies
from pyocc.analysis.npu_program import NpuProgramOf, npu_instructions, npu_program_of, unfold_untileable_shuffles
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
    channel_band,
    simulate,
    without_gc,
)
from pyocc.planning.scratchpad import (
    NpuSchedule,
    assembled_channels,
    assembled_rows,
    band_rows,
    channel_range,
    copy_rows,
    input_block,
    schedule_scratchpad,
    tile_rows,
)
from pyocc.rewrites.dnn_insert_memory_ops import replace_function, to_buffer_type
from pyocc.units import plural

SRAM_POOL, DRAM_POOL = "sram", "dram"


@functools.lru_cache(maxsize=1 << 16)
def piece_attr(piece: Piece, tensor_bytes: int) -> ArrayAttr:
    """`npu.piece`: [tensor, part, bytes, the whole tensor's bytes], made once
    per piece (a piece moves and is read many times; attributes are immutable)."""
    return ArrayAttr([StringAttr(piece.tensor), StringAttr(piece.part), d.i64_attr(piece.bytes), d.i64_attr(tensor_bytes)])


def _refuse(what: str) -> PassFailedException:
    """The one line for a schedule the IR cannot run yet."""
    return PassFailedException(f"dnn-npu-schedule: {what}; the IR runs whole tensors, output-channel "
                               "blocks and row bands so far: schedule without cascades or give a larger --scratchpad")


@functools.lru_cache(maxsize=4096)
def _memref(element: Attribute, shape: tuple[int, ...]) -> MemRefType:
    """memref<shape x element>, made once: xDSL checks a type's parameters
    against their constraints on every construction (a millisecond), and a
    scheduled program asks for the same few types thousands of times (a
    third of SqueezeNet's schedule at 1 MiB went there)."""
    return MemRefType(element, shape)


def _rows_of(buffer: SSAValue) -> tuple[int, int]:
    """(bytes of one row of one channel, channels) of a buffer of rows of
    every channel (its shape ends in channels, rows, columns)."""
    shape = buffer.type.get_shape()  # type: ignore[attr-defined]
    return d.type_bytes(buffer.type) // math.prod(shape[:-1]), math.prod(shape[:-2])


def _with_rows(type_: MemRefType, rows: int) -> MemRefType:
    """`type_` with `rows` rows (its second-to-last axis)."""
    shape = list(type_.get_shape())
    shape[-2] = rows
    return _memref(type_.get_element_type(), tuple(shape))


Cut = tuple[tuple[int, int, int] | None, tuple[int, int] | None]
"""How a piece sits in its tensor: (axis, start, stop) of a channel block,
and the rows [lo, hi) of a band (each None when not cut that way)."""


@dataclass
class _Unit:
    """What one compute of the schedule runs: the op's channel-block slices
    (operand field or `result:NAME` -> (axis, start, stop)), the rows of a
    band (operand field or `result:NAME` -> [lo, hi)) and its properties."""

    slices: dict[str, tuple[int, int, int]]
    rows: dict[str, tuple[int, int]]
    properties: dict[str, Attribute]
    in_slices: dict[str, tuple[int, int, int]] | None = None
    """A block of input channels: operand field -> its slice (`reduction_block`)."""
    running: str = ""
    """A block of input channels: the operand that takes the partial sums."""
    dropped: tuple[str, ...] = ()
    """A block of input channels: the operands it leaves out."""


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
        self.local_of = {(home, first, end): name for name, (home, first, end) in schedule.homes.items()}
        """(home tensor, first, end channel) -> the in-place concat input that lives there."""
        self.whole_home: set[str] = set()
        """SRAM buffers that hold a whole in-place concat output (its inputs are channel slices of it)."""

    def _local(self, piece: Piece) -> Piece:
        """`piece` named by the tensor of the IR: a part of a channel band
        of an in-place concat's output is that part of the concat input
        living there (the band whole: `all`)."""
        band = channel_band(piece.part)
        if band is None:
            return piece
        return Piece(self.local_of[(piece.tensor, band[0], band[1])], band[3], piece.bytes)

    def _local_compute(self, ins: Compute) -> Compute:
        """`ins` with its pieces named by the tensors of the IR (`_local`)."""
        return Compute(ins.op, ins.macs, ins.sram_bytes, tuple((b, self._local(p)) for b, p in ins.reads),
                       tuple((b, self._local(p)) for b, p in ins.writes))

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

    def _dram(self, piece: Piece) -> tuple[SSAValue, tuple[int, int] | None]:
        """Where `piece` lives in DRAM, seen with its own type (a band: the
        whole tensor, or its channel block, and the band's rows)."""
        tensor = self.tensors[piece.tensor]
        if tensor.kind == "activation":
            assert self.spill is not None
            offset = self.schedule.dram_offsets[piece.tensor]
            view = d.MemOffsetOp.create(operands=[self.spill], result_types=[self._root_type(piece.tensor)],
                                        properties={"offset": d.i64_attr(offset), "size": d.i64_attr(tensor.size)})
            view.result.name_hint = f"{piece.tensor}_dram"
            self.ops.append(view)
            whole = view.result
        else:
            whole = self._typed(self.dram[piece.tensor], self._root_type(piece.tensor))
        band = channel_band(piece.part)
        if band is not None:  # a part of an in-place concat input: in its channel band of the output
            whole = self._slice(whole, self._root_type(piece.tensor), (1, band[0], band[1]))  # type: ignore[arg-type]
            piece = self._local(piece)
            whole = self._typed(whole, self._root_type(piece.tensor))
        if piece.part == "all":
            return whole, None
        cut, rows = self._cut(piece)
        if cut is not None:
            whole = self._slice(whole, self._cut_type(piece), cut)  # type: ignore[arg-type]
        view = self.row_views.get((piece.tensor, piece.part))
        if view is not None:  # a filter's input channels: the rows of a view of it
            whole = self._typed(whole, view)
        return whole, rows

    def _cut_type(self, piece: Piece) -> Attribute:
        """The type a piece's channel cut refers to: the operand's that reads
        it as a block (a view's shape may differ from the tensor's)."""
        return self.cut_types.get((piece.tensor, piece.part)) or self._root_type(piece.tensor)

    def _cut(self, piece: Piece) -> Cut:
        if piece.bytes == self.tensors[piece.tensor].size and piece.part.endswith(("/1", "/1x1")):
            return None, None  # the one block of a weight streamed whole by a band; the one tile of an output
        if (piece.tensor, piece.part) not in self.cuts:
            raise _refuse(f"the schedule moves part {piece.part!r} of {piece.tensor!r}, which no op reads as a "
                          "block or a band")
        return self.cuts[(piece.tensor, piece.part)]

    def _alloc(self, buffer: SramBuffer, first: Piece) -> None:
        band = channel_band(first.part)
        if band is not None:
            if buffer.size >= self.tensors[first.tensor].size:  # the whole output, its inputs written into it
                self.whole_home.add(buffer.name)
                first = Piece(first.tensor, "all", buffer.size)
            elif band[3].startswith("rows") and buffer.size > first.bytes:  # those rows of every channel
                self.whole_home.add(buffer.name)
                first = Piece(first.tensor, band[3], buffer.size)
            else:
                first = self._local(first)
        type_ = self._root_type(first.tensor)
        if first.part != "all" and buffer.size < self.tensors[first.tensor].size:
            cut, rows = self._cut(first)
            if cut is not None:
                type_ = self._cut_type(first)
            shape = list(type_.get_shape())  # type: ignore[attr-defined]
            if cut is not None:
                shape[cut[0]] = cut[2] - cut[1]
            if rows is not None:
                shape[-2] = rows[1] - rows[0]
            type_ = _memref(type_.get_element_type(), tuple(shape))  # type: ignore[attr-defined]
            view = self.row_views.get((first.tensor, first.part))
            if view is not None and rows is not None:  # a filter's input channels, seen as rows
                type_ = _with_rows(view, rows[1] - rows[0])  # type: ignore[arg-type]
            if d.type_bytes(type_) != first.bytes:
                raise PassFailedException(f"dnn-npu-schedule: internal error: {first.tensor}:{first.part} has "
                                          f"{first.bytes} bytes but its buffer type {type_} has {d.type_bytes(type_)}")
        view = d.MemOffsetOp.create(operands=[self.sram], result_types=[type_],
                                    properties={"offset": d.i64_attr(buffer.offset), "size": d.i64_attr(buffer.size)})
        view.result.name_hint = f"{first.tensor}_sram"
        view.attributes["npu.buffer"] = StringAttr(buffer.name)
        self.ops.append(view)
        self.buffers[buffer.name] = view.result

    def _transfer(self, ins: Load | Store) -> None:
        sram = self.buffers[ins.buffer.name]
        dram, rows = self._dram(ins.piece)
        if isinstance(ins, Store) and self.tensors[ins.piece.tensor].kind == "output" and ins.piece.part == "all":
            # the destination argument may be a view's type (a returned reshape)
            dram = self.dram[ins.piece.tensor]
            sram = self._typed(sram, dram.type)
        source, target = (dram, sram) if isinstance(ins, Load) else (sram, dram)
        start = DmaStartOp(source, target, "dram_to_sram" if isinstance(ins, Load) else "sram_to_dram", rows)
        start.attributes["npu.piece"] = piece_attr(ins.piece, self.tensors[ins.piece.tensor].size)
        start.token.name_hint = f"{ins.piece.tensor}_{'in' if isinstance(ins, Load) else 'out'}"
        self.ops.append(start)
        self.tokens[ins.id] = start.token

    def _block(self, ins: Compute) -> _Unit:
        """What the op of `ins` runs on: its channel block and its band of
        rows (its whole self when the unit is neither)."""
        op = self.facts.ops[ins.op]
        npu_op = self.npu_ops[ins.op]
        if ins.op in self.schedule.input_blocks:
            return self._reduction_block(ins)
        parts = {piece.part for _, piece in (*ins.reads, *ins.writes)} - {"all"}
        tiled = [p for p in parts if p.startswith(("block", "tile", "rows"))]
        if len(tiled) != len(parts):
            raise _refuse(f"the schedule runs op {ins.op!r} on {sorted(parts - set(tiled))[0]!r} (a cascade's band)")
        if not tiled:
            return _Unit({}, {}, dict(op.properties))
        slices: dict[str, tuple[int, int, int]] = {}
        properties = dict(op.properties)
        channel_part = next((p for p in sorted(tiled) if p.startswith(("block", "tile"))), None)
        if channel_part is not None:
            lo, hi, _ = channel_range(npu_op, channel_part)
            if (lo, hi) != (0, npu_op.channels):
                block = op.channel_block(lo, hi)
                if block is None:
                    raise _refuse(f"op {ins.op!r} cannot run on its output channels [{lo}, {hi})")
                slices, properties = block
                for result in op.results:
                    slices[f"result:{self.facts.tensor_of[result]}"] = (1, lo, hi)
        rows: dict[str, tuple[int, int]] = {}
        # a chain cascade's op writes its rows as `rows{lo}:{hi}` (the next op reads that band);
        # a row tile as `tile{i}.{j}/{r}x{c}`
        band = next((b for _, piece in ins.writes if (b := band_rows(piece.part)) is not None), None)
        if band is None:
            band = next((b for p in sorted(tiled) if (b := tile_rows(npu_op, p)) is not None), None)
        if band is not None:
            rows = self._band(ins, band, properties)
        return _Unit(slices, rows, properties)

    def _band(self, ins: Compute, band: tuple[int, int], properties: dict[str, Attribute]) -> dict[str, tuple[int, int]]:
        """The rows each operand of the op of `ins` is read or written in
        when it computes its output rows `band`; the band's own pads and
        ceil_mode go into `properties`."""
        op = self.facts.ops[ins.op]
        found = op.row_band(*band)
        if found is None:
            raise _refuse(f"op {ins.op!r} cannot run on its output rows [{band[0]}, {band[1]})")
        rows, band_properties = found
        for key in ("pads", "ceil_mode"):
            if key in band_properties:
                properties[key] = band_properties[key]
        for result in op.results:
            rows[f"result:{self.facts.tensor_of[result]}"] = band
        return rows

    def _reduction_block(self, ins: Compute) -> _Unit:
        """What a unit of an op summed over blocks of its input channels
        runs on: its output tile (its channel block and band of rows, from
        the tile it writes) and its block of input channels."""
        op = self.facts.ops[ins.op]
        npu_op = self.npu_ops[ins.op]
        (_, written), = ins.writes
        tile = written.part.partition("|")[2] if written.part.startswith("acc") else written.part
        lo, hi, channels = next(b for _, p in ins.reads if (b := input_block(p.part)) is not None)
        found = op.reduction_block(lo, hi, lo == 0, hi == channels)
        if found is None:
            raise _refuse(f"op {ins.op!r} cannot run on its input channels [{lo}, {hi})")
        in_slices, properties, running, dropped = found
        slices: dict[str, tuple[int, int, int]] = {}
        rows: dict[str, tuple[int, int]] = {}
        if tile.startswith("tile"):
            first, end, _ = channel_range(npu_op, tile)
            if (first, end) != (0, npu_op.channels):
                block = op.channel_block(first, end)
                if block is None:
                    raise _refuse(f"op {ins.op!r} cannot run on its output channels [{first}, {end})")
                slices = block[0]
                for result in op.results:
                    slices[f"result:{self.facts.tensor_of[result]}"] = (1, first, end)
            band = tile_rows(npu_op, tile)
            if band is not None:
                rows = self._band(ins, band, properties)
        return _Unit(slices, rows, properties, in_slices, running, dropped)

    def _block_type(self, value: SSAValue, unit: _Unit, name: str) -> MemRefType:
        """The type of operand `name` (`value`) sliced as the unit reads it:
        its channel block and its block of input channels."""
        shape = list(to_buffer_type(value.type).get_shape())  # type: ignore[attr-defined]
        for cut in (unit.slices.get(name), (unit.in_slices or {}).get(name)):
            if cut is not None:
                shape[cut[0]] = cut[2] - cut[1]
        return _memref(value.type.get_element_type(), tuple(shape))  # type: ignore[attr-defined]

    def _compute_reduction(self, ins: Compute) -> None:
        """A unit of an op summed over blocks of its input channels (see
        `_reduction_block`): the partial sums it reads come in as the
        operand `reduction_block` names, the operands it leaves out are
        absent."""
        op = self.facts.ops[ins.op]
        unit = self._blocks[id(ins)]
        assert unit.in_slices is not None
        (_, written), = ins.writes
        partial = next(((b, p) for b, p in ins.reads if p.part.startswith("acc")), None)
        reads = [(b, p) for b, p in ins.reads if not p.part.startswith("acc")]
        held = {self._local(p).tensor: self._held(b, p) for b, p in reads}
        pieces = {self._local(p).tensor: self._local(p) for _, p in reads}
        raw = {self._local(p).tensor: p for _, p in reads}
        operand_tensors = {self.facts.tensor_of[v] for v in op.operands}
        # the block of an input living in an in-place concat's output: the tensor written in those channels
        leaf = next((t for t in pieces if t not in operand_tensors), None)
        out_held = {self._local(written).tensor: self._held(ins.writes[0][0], written)}
        out_pieces = {self._local(written).tensor: self._local(written)}
        operands: dict[str, list[SSAValue]] = {}
        read_pieces: list[Piece] = []
        for name, _ in op.get_irdl_definition().operands:
            value = getattr(op, name)
            group = list(value) if isinstance(value, tuple | list) else ([] if value is None else [value])
            if name in ("out", "outs"):
                operands[name] = [self._operand(r, unit.slices.get(f"result:{self.facts.tensor_of[r]}"),
                                                unit.rows.get(f"result:{self.facts.tensor_of[r]}"), out_held,
                                                out_pieces) for r in op.results]
                continue
            if name in unit.dropped:
                operands[name] = []
                continue
            if name == unit.running and partial is not None:
                result = op.results[0]
                tile_type = self._block_type(result, unit, f"result:{self.facts.tensor_of[result]}")
                rows = unit.rows.get(f"result:{self.facts.tensor_of[result]}")
                if rows is not None:
                    tile_type = _with_rows(tile_type, rows[1] - rows[0])
                operands[name] = [self._typed(self.buffers[partial[0].name], tile_type)]
                read_pieces.append(partial[1])
                continue
            values = []
            for v in group:
                tensor = self.facts.tensor_of[v]
                if tensor in self.npu_ops[ins.op].reduced_weights:  # its block's own buffer
                    values.append(self._typed(held[tensor], self._block_type(v, unit, name)))
                elif tensor not in held and leaf is not None and name in unit.in_slices:
                    type_ = self._root_type(leaf)
                    rows = band_rows(pieces[leaf].part)
                    if rows is not None:
                        type_ = _with_rows(type_, rows[1] - rows[0])  # type: ignore[arg-type]
                    values.append(self._typed(held[leaf], type_))
                    tensor = leaf
                else:
                    cut = unit.in_slices.get(name) or unit.slices.get(name)
                    values.append(self._operand(v, cut, unit.rows.get(name), held, pieces))
                if name not in d.DnnComputeOp.NOT_INPUTS:
                    read_pieces.append(raw[tensor])
            operands[name] = values
        new_op = type(op).build(operands, [], unit.properties, op.attributes)
        new_op.attributes["npu.reads"] = ArrayAttr([piece_attr(p, self.tensors[p.tensor].size) for p in read_pieces])
        new_op.attributes["npu.writes"] = ArrayAttr([piece_attr(written, self.tensors[written.tensor].size)])
        new_op.attributes["npu.macs"] = d.i64_attr(ins.macs)
        self.ops.append(new_op)

    def _slice(self, value: SSAValue, type_: MemRefType, cut: tuple[int, int, int]) -> SSAValue:
        """The contiguous slice `cut` (axis, start, stop) of `value` (of `type_`)."""
        axis, start, stop = cut
        shape = list(type_.get_shape())
        if any(n != 1 for n in shape[:axis]):
            raise _refuse(f"a slice along axis {axis} of {type_} is not contiguous")
        inner = d.type_bytes(type_) // math.prod(shape[:axis + 1])
        shape[axis] = stop - start
        view = d.SubviewOp(self._typed(value, type_), start * inner, _memref(type_.get_element_type(), tuple(shape)))
        self.ops.append(view)
        return view.result

    def _operand(self, value: SSAValue, cut: tuple[int, int, int] | None, rows: tuple[int, int] | None,
                 held: dict[str, SSAValue], pieces: dict[str, Piece]) -> SSAValue:
        """The SRAM buffer an op operand (or result) `value` reads (writes)."""
        tensor = self.facts.tensor_of[value]
        type_ = to_buffer_type(value.type)
        if rows is not None:  # a band: its own buffer, of every channel (an output: of its block)
            if pieces[tensor].part == "all":
                raise _refuse(f"a band of {tensor!r} would be read from the whole tensor in SRAM (strided)")
            held_rows = band_rows(pieces[tensor].part)
            if held_rows is not None and held_rows != rows:
                raise PassFailedException(f"dnn-npu-schedule: internal error: op reads rows {list(rows)} of "
                                          f"{tensor!r} from its band {pieces[tensor].part!r}")
            if type_.get_shape()[-2] != self._root_type(tensor).get_shape()[-2]:  # type: ignore[attr-defined]
                raise _refuse(f"{tensor!r} is banded through a view with other rows")
            band = _with_rows(type_, rows[1] - rows[0])
            if cut is None:
                return self._typed(held[tensor], band)
            if pieces[tensor].part.startswith(("tile", "acc")) or "|in" in pieces[tensor].part:  # the block's own buffer
                shape = list(band.get_shape())
                shape[cut[0]] = cut[2] - cut[1]
                return self._typed(held[tensor], _memref(band.get_element_type(), tuple(shape)))
            return self._slice(self._typed(held[tensor], band), band, cut)
        if cut is None:
            return self._typed(held[tensor], type_)
        if pieces[tensor].part != "all" and d.type_bytes(held[tensor].type) < self.tensors[tensor].size:
            return held[tensor]  # the block's own buffer, typed for it at its allocation
        return self._slice(held[tensor], type_, cut)  # type: ignore[arg-type]

    def _held(self, buffer: SramBuffer, piece: Piece) -> SSAValue:
        """The SRAM value `piece` is read from or written to in `buffer`:
        the buffer, or the channel slice of a whole in-place concat output
        (of a band of its rows, in a chain cascade) that is the concat
        input `piece` is a part of."""
        value = self.buffers[buffer.name]
        band = channel_band(piece.part)
        if band is None or buffer.name not in self.whole_home:
            return value
        root = self._root_type(piece.tensor)
        local = self._local(piece)
        rows = band_rows(band[3])
        if rows is not None:  # rows of the concat input, in the buffer of those rows of every channel
            root = _with_rows(root, rows[1] - rows[0])  # type: ignore[arg-type]
            return self._typed(self._slice(value, root, (1, band[0], band[1])),
                               _with_rows(self._root_type(local.tensor), rows[1] - rows[0]))  # type: ignore[arg-type]
        return self._typed(self._slice(value, root, (1, band[0], band[1])),  # type: ignore[arg-type]
                           self._root_type(local.tensor))

    def _copy(self, ins: Compute) -> None:
        """A copy unit (pyocc.planning.scratchpad: chains `_chain_units`, units `_assembled`):
        rows [lo, hi) of a band of rows [a, b) in SRAM, or of the whole
        tensor's SRAM buffer, into their own SRAM buffer (`_rows_copy`); in
        a rolled chain, of two bands, the rows of each at theirs."""
        ((target, rows),) = ins.writes
        lo, hi = copy_rows(rows.part)  # type: ignore[misc]
        for source, band in ins.reads:
            held = self.buffers[source.name]
            row, count = _rows_of(held)
            a, b = band_rows(band.part) or (0, held.type.get_shape()[-2])  # type: ignore[attr-defined]
            first, end = max(lo, a), min(hi, b)
            view = d.SubviewOp(held, (first - a) * row, _memref(i8, (d.type_bytes(held.type) - (first - a) * row,)))
            into = self.buffers[target.name]
            if first > lo:  # this band's rows go after the band before's, in each channel's chunk
                at = d.SubviewOp(into, (first - lo) * row, _memref(i8, (d.type_bytes(into.type) - (first - lo) * row,)))
                self.ops.append(at)
                into = at.result
            self._rows_copy(ins, view, view.result, into, count, (end - first) * row, (b - a) * row, (hi - lo) * row,
                            band)

    def _assemble(self, ins: Compute) -> None:
        """An assembling unit (pyocc.planning.scratchpad.units `_assembled`): the
        buffer of a band of rows [lo, hi) of every channel (of a tile: of
        its channels) into those rows of the whole tensor's SRAM buffer
        (`_rows_copy`)."""
        ((source, _),), ((target, rows),) = ins.reads, ins.writes
        lo, hi = assembled_rows(rows.part)  # type: ignore[misc]
        whole = self.buffers[target.name]
        row, count = _rows_of(whole)
        height = whole.type.get_shape()[-2]  # type: ignore[attr-defined]
        first, end = assembled_channels(rows.part) or (0, count)  # a tile's channels: of one image
        offset = (first * height + lo) * row
        view = d.SubviewOp(whole, offset, _memref(i8, (d.type_bytes(whole.type) - offset,)))
        self._rows_copy(ins, view, self.buffers[source.name], view.result, end - first, (hi - lo) * row,
                        (hi - lo) * row, height * row)

    def _rows_copy(self, ins: Compute, view: d.SubviewOp, source: SSAValue, target: SSAValue, count: int, size: int,
                   source_stride: int, target_stride: int, read: Piece | None = None) -> None:
        """Rows of every channel (of a block of channels) copied from
        `source` into `target`, SRAM to SRAM: one strided `dnn.memcpy` of
        `count` chunks of `size` bytes (a channel's rows each), after `view`
        (the byte offset into one of them). It carries `ins`' pieces (of its
        reads: `read`, else its one) and op as `npu.*` attributes: the
        simulator runs it as a compute, and the copies of one unit out of
        two bands as one."""
        if read is None:
            ((_, read),) = ins.reads
        ((_, written),) = ins.writes
        copy = d.MemcpyOp.create(operands=[source, target], properties={
            "kind": StringAttr("host_to_host"), "size": d.i64_attr(size), "count": d.i64_attr(count),
            "source_stride": d.i64_attr(source_stride), "target_stride": d.i64_attr(target_stride)})
        copy.attributes["npu.reads"] = ArrayAttr([piece_attr(read, self.tensors[read.tensor].size)])
        copy.attributes["npu.writes"] = ArrayAttr([piece_attr(written, self.tensors[written.tensor].size)])
        copy.attributes["npu.op"] = StringAttr(ins.op)
        self.ops += [view, copy]

    def _compute(self, ins: Compute) -> None:
        if copy_rows(ins.writes[0][1].part) is not None:
            return self._copy(ins)
        if assembled_rows(ins.writes[0][1].part) is not None:
            return self._assemble(ins)
        if ins.op in self.schedule.input_blocks:
            return self._compute_reduction(ins)
        op = self.facts.ops[ins.op]
        held = {self._local(piece).tensor: self._held(b, piece) for b, piece in (*ins.reads, *ins.writes)}
        homes = {self._local(piece).tensor: piece for _, piece in (*ins.reads, *ins.writes)}
        pieces = {self._local(piece).tensor: self._local(piece) for _, piece in (*ins.reads, *ins.writes)}
        unit = self._blocks[id(ins)]
        slices, rows = unit.slices, unit.rows
        operands: dict[str, list[SSAValue]] = {}
        for name, _ in op.get_irdl_definition().operands:
            value = getattr(op, name)
            group = list(value) if isinstance(value, tuple | list) else ([] if value is None else [value])
            if name in ("out", "outs"):
                group = list(op.results)
                operands[name] = [self._operand(r, slices.get(f"result:{self.facts.tensor_of[r]}"),
                                                rows.get(f"result:{self.facts.tensor_of[r]}"), held, pieces)
                                  for r in group]
            else:
                operands[name] = [self._operand(v, slices.get(name), rows.get(name), held, pieces) for v in group]
        new_op = type(op).build(operands, [], unit.properties, op.attributes)
        # aligned with the new op's read_values() and destinations()
        reads = [homes[self.facts.tensor_of[v]] for v in op.read_values()]
        writes = [homes[self.facts.tensor_of[r]] for r in op.results]
        new_op.attributes["npu.reads"] = ArrayAttr([piece_attr(p, self.tensors[p.tensor].size) for p in reads])
        new_op.attributes["npu.writes"] = ArrayAttr([piece_attr(p, self.tensors[p.tensor].size) for p in writes])
        new_op.attributes["npu.macs"] = d.i64_attr(ins.macs)
        self.ops.append(new_op)

    def _reduction_cut(self, npu_name: str, unit: _Unit, fields: dict[str, list[SSAValue]], piece: Piece) -> bool:
        """Record how a piece of a block of input channels sits in its tensor
        (False: not such a piece): an input's block (and band of rows) is a
        contiguous slice (of a strided band); a weight's is its channel
        block's input channels, the rows of a view whose second to last axis
        they are (one strided copy)."""
        if input_block(piece.part) is None:
            if band_rows(piece.part) is not None and not any(
                    self.facts.tensor_of[v] == piece.tensor for vs in fields.values() for v in vs):
                # rows of the tensor living in a block of channels of an in-place concat's output
                self.cuts[(piece.tensor, piece.part)] = (None, band_rows(piece.part))
                self.cut_types[(piece.tensor, piece.part)] = self._root_type(piece.tensor)
                return True
            return False
        assert unit.in_slices is not None
        name = next((n for n in unit.in_slices if any(self.facts.tensor_of[v] == piece.tensor for v in fields.get(n, []))),
                    None)
        if name is None:
            return False
        value = next(v for v in fields[name] if self.facts.tensor_of[v] == piece.tensor)
        axis, lo, hi = unit.in_slices[name]
        type_ = to_buffer_type(value.type)
        self.cut_types[(piece.tensor, piece.part)] = type_
        if piece.tensor not in self.npu_ops[npu_name].reduced_weights:
            self.cuts[(piece.tensor, piece.part)] = (unit.in_slices[name], band_rows(piece.part))
            return True
        block = unit.slices.get(name)
        shape = list(type_.get_shape())  # type: ignore[attr-defined]
        if block is not None:
            shape[block[0]] = block[2] - block[1]
        if block is not None and block[0] >= axis:
            raise _refuse(f"the filters of {piece.tensor!r} cannot be cut into blocks of input channels")
        view = shape[:axis + 1] + [math.prod(shape[axis + 1:])]
        self.row_views[(piece.tensor, piece.part)] = _memref(type_.get_element_type(), tuple(view))  # type: ignore[attr-defined]
        self.cuts[(piece.tensor, piece.part)] = (block, (lo, hi))
        return True

    def emit(self) -> Block:
        self._blocks: dict[int, _Unit] = {}
        self.cuts: dict[tuple[str, str], Cut] = {}
        self.cut_types: dict[tuple[str, str], Attribute] = {}
        self.row_views: dict[tuple[str, str], MemRefType] = {}
        """(weight, part) -> the view of its (channel block's) DRAM bytes whose rows are its input channels."""
        for ins in self.schedule.instructions:
            if not isinstance(ins, Compute) or assembled_rows(ins.writes[0][1].part) is not None:
                continue
            if copy_rows(ins.writes[0][1].part) is not None:
                # a band only copies read (an in-place concat's output in a rolled chain): rows of every
                # channel, unless an op reads it as something else (its cut, set below, wins)
                for _, piece in ins.reads:
                    if (rows := band_rows(piece.part)) is not None:
                        self.cuts.setdefault((piece.tensor, piece.part), (None, rows))
                continue
            local = self._local_compute(ins)
            unit = self._blocks[id(ins)] = self._block(local)
            op = self.facts.ops[ins.op]
            fields: dict[str, list[SSAValue]] = {}
            for name, _ in op.get_irdl_definition().operands:
                value = getattr(op, name)
                fields[name] = list(value) if isinstance(value, tuple | list) else ([] if value is None else [value])
            for r in op.results:
                fields[f"result:{self.facts.tensor_of[r]}"] = [r]
            for _, piece in (*local.reads, *local.writes):
                if piece.part == "all":
                    continue
                if unit.in_slices is not None and self._reduction_cut(ins.op, unit, fields, piece):
                    continue
                for name in (*unit.slices, *unit.rows):
                    if any(self.facts.tensor_of[v] == piece.tensor for v in fields.get(name, [])):
                        # an input band moves every channel (of its block: a pool's `|in` band); an
                        # output tile only its block
                        rows = band_rows(piece.part)
                        self.cuts[(piece.tensor, piece.part)] = (
                            ((unit.slices.get(name) if "|in" in piece.part else None), rows) if rows is not None
                            else (unit.slices.get(name), unit.rows.get(name)))
                        value = next(v for v in fields[name] if self.facts.tensor_of[v] == piece.tensor)
                        self.cut_types[(piece.tensor, piece.part)] = to_buffer_type(value.type)
        first: dict[str, Piece] = {}
        for ins in self.schedule.instructions:
            if isinstance(ins, Load | Store):
                first.setdefault(ins.buffer.name, ins.piece)
            elif isinstance(ins, Compute):
                for buffer, piece in (*ins.reads, *ins.writes):
                    first.setdefault(buffer.name, piece)
        instructions = self.schedule.instructions
        with progress.steps(f"writing {plural(len(instructions), 'scheduled instruction')} as IR",
                            len(instructions)) as step:
            for ins in instructions:
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
                step()
        pools = [self.sram] if self.spill is None else [self.sram, self.spill]
        releases = [d.PoolReleaseOp.create(operands=[pool]) for pool in reversed(pools)]
        self.block.add_ops([*self.ops, *releases, func.ReturnOp()])
        return self.block


@without_gc  # hundreds of thousands of ops at 256 KiB, all kept: the collector would walk them again and again
def schedule_function(
    function: func.FuncOp, sram_size: int, cost: NpuCost, check: bool = True, schedule: NpuSchedule | None = None,
    cascades: bool = False, chains: bool = True,
) -> tuple[NpuSchedule, SimulationResult | None]:
    """Replace tensor-form `function` by its scratchpad schedule (`schedule`,
    or the scheduler's, with `cascades` or not, with `chains` or not) in buffer form; returns the
    schedule and, with `check`, the simulation of the new IR (the simulator
    run on the instructions read back from it). Shuffled convs that cannot
    be tiled are unfolded first (`unfold_untileable_shuffles`)."""
    unfold_untileable_shuffles(function, sram_size, cost)
    facts = npu_program_of(function)
    if schedule is None:
        try:
            schedule = schedule_scratchpad(facts.program, sram_size, cost, cascades, chains)
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

    cascades: bool = False
    """Let the scheduler cascade ops band by band (simulated, not yet run as
    IR: a schedule with a cascade is refused in one line)."""

    chains: bool = True
    """Run chains of ops as chain cascades (band by band, each op computing
    the rows its readers' bands read into an SRAM buffer they read whole;
    see pyocc.planning.scratchpad.chains._chains); false: each op tiled on its own."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "tensors")
        try:
            sram_size, cost = parse_size(self.sram), NpuCost.parse(self.cost)
        except PlanningError as e:
            raise PassFailedException(f"dnn-npu-schedule: {e}") from None
        for function in function_bodies(op):
            schedule_function(function, sram_size, cost, self.check, cascades=self.cascades, chains=self.chains)

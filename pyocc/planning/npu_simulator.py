"""A cycle simulator for a two-level (SRAM scratchpad + DRAM) NPU program.

The program is a straight line of instructions over plain data: `Alloc` and
`Free` of SRAM buffers, `Load` (DRAM -> SRAM) and `Store` (SRAM -> DRAM)
DMA starts, `Wait` on a transfer, and `Compute` of one op or one tile of it.
The simulator runs it under an `NpuCost` and checks, as it goes, that

- every byte a compute reads is resident in SRAM: the buffer is live, holds
  that piece of that tensor, and the load that brought it in was waited on;
- nothing overlaps in SRAM at any time (a buffer is allocated only where no
  live buffer is, and inside the scratchpad), and no transfer is pending on
  a buffer when it is freed or overwritten;
- a load reads DRAM bytes that hold data: a weight, a graph input, or an
  activation whose store was issued before it. The DRAM port is in order,
  so a store issued earlier has written its bytes before the load reads
  them: the load need not wait for it (a load of other channels or rows
  does not either). A load issued before the store of its bytes is refused.
  Spilled activations' DRAM regions never overlap while both hold data;
  every graph output ends in DRAM.

Timing: the control processor issues instructions in order; a compute takes
max(MACs / macs_per_cycle, SRAM bytes touched / sram_bytes_per_cycle) cycles
and blocks it; transfers queue on one DRAM port (FIFO, dram_bytes_per_cycle)
and run concurrently with compute; a `Wait` blocks until its transfer ends
(those cycles are stall cycles). The stall before each compute (all the
waits since the compute before it) is split in two: *late*, at most the
cycles the DRAM port idled since the control processor last stopped
waiting (a transfer started in that idle time would have shortened it,
where its data existed by then, a store's once computed, and the SRAM had
room for it), and the rest, *port-bound*: the port was busy all the
rest of that time, so starting those transfers earlier since then would
not shorten it; moving fewer bytes would. No IR here: pyocc's planning
layer.
"""

from __future__ import annotations

import bisect
import functools
import gc
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from .problem import PlanningError

_P = ParamSpec("_P")
_R = TypeVar("_R")


def without_gc(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """`function` run with Python's cyclic garbage collector paused (and
    resumed after, unless it was off already). Scheduling and simulating
    make hundreds of thousands of small objects that all live until the
    end (ResNet-50 at 256 KiB: 550,000 instructions); each collection
    walks all of them, which took 40% of the time. Nothing they make
    needs the collector: reference counting frees it; a cycle made
    meanwhile is collected after."""

    @functools.wraps(function)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        if not gc.isenabled():
            return function(*args, **kwargs)
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            gc.enable()

    return paused


class ScheduleError(Exception):
    """A schedule that breaks a rule of the machine (found by the simulator);
    the message names the instruction and the rule."""


@dataclass(frozen=True)
class NpuCost:
    """The machine's throughputs (the cost model of docs/guide.md)."""

    macs_per_cycle: int = 256
    sram_bytes_per_cycle: int = 64
    dram_bytes_per_cycle: int = 8

    @classmethod
    def parse(cls, text: str) -> NpuCost:
        """The cost model from ``"macs_per_cycle=256,sram_bytes_per_cycle=64,dram_bytes_per_cycle=8"``;
        keys left out keep their default. Raises `PlanningError` with one line."""
        values: dict[str, int] = {}
        known = ("macs_per_cycle", "sram_bytes_per_cycle", "dram_bytes_per_cycle")
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            key, sep, value = (s.strip() for s in part.partition("="))
            if key not in known:
                raise PlanningError(f"npu cost: unknown key {key!r}; the keys are {', '.join(known)}")
            if not sep or not value.isdigit() or int(value) <= 0:
                raise PlanningError(f"npu cost: {key} needs a positive whole number, e.g. {key}=8")
            values[key] = int(value)
        return cls(**values)

    def compute_cycles(self, macs: int, sram_bytes: int) -> int:
        """Cycles of one compute: the slower of its MACs and its SRAM traffic."""
        return max(math.ceil(macs / self.macs_per_cycle), math.ceil(sram_bytes / self.sram_bytes_per_cycle))

    def dma_cycles(self, nbytes: int) -> int:
        """Cycles one transfer holds the DRAM port."""
        return math.ceil(nbytes / self.dram_bytes_per_cycle)


@dataclass(frozen=True)
class SramBuffer:
    """A region of the scratchpad: `size` bytes at `offset`."""

    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class Piece:
    """A part of a tensor: `part` names it (``all`` is the whole tensor)."""

    tensor: str
    part: str
    bytes: int


@dataclass(frozen=True)
class Alloc:
    """A buffer becomes live (holding nothing yet)."""

    buffer: SramBuffer


@dataclass(frozen=True)
class Free:
    """A buffer's bytes become free: no transfer may be pending on it."""

    buffer: SramBuffer


@dataclass(frozen=True)
class Load:
    """Start a DMA of `piece` from DRAM into `buffer` (dnn.dma_start dram_to_sram)."""

    id: int
    buffer: SramBuffer
    piece: Piece


@dataclass(frozen=True)
class Store:
    """Start a DMA of `piece` from `buffer` to DRAM (dnn.dma_start sram_to_dram)."""

    id: int
    buffer: SramBuffer
    piece: Piece


@dataclass(frozen=True)
class Wait:
    """Block until transfer `id` is done (dnn.dma_wait)."""

    id: int


@dataclass(frozen=True)
class Compute:
    """One op, or one tile of it: reads and writes pieces in SRAM buffers."""

    op: str
    macs: int
    sram_bytes: int
    """Bytes the compute touches in SRAM (reads plus writes): its SRAM cost."""
    reads: tuple[tuple[SramBuffer, Piece], ...]
    writes: tuple[tuple[SramBuffer, Piece], ...]


Instruction = Alloc | Free | Load | Store | Wait | Compute


class Clock:
    """The timing rules of the module docstring, one instruction at a time:
    the control processor's time (`now`), when the DRAM port is next free
    (`port`), when each transfer ends (`ends`, by id) and the bytes moved
    over the port (`moved`). `simulate` keeps time with it, and so does the
    scheduler as it emits instructions (it ranks a schedule by the clock
    after the last one, without simulating it again), so the two cannot
    time a schedule differently. Alloc and Free take no time."""

    def __init__(self, cost: NpuCost) -> None:
        self.cost = cost
        self.now = 0
        self.port = 0
        self.moved = 0
        self.ends: dict[int, int] = {}

    def would_end(self, nbytes: int) -> int:
        """When a transfer of `nbytes` issued now would end: queued on the
        port behind the transfers before it, and not started before now."""
        return max(self.now, self.port) + self.cost.dma_cycles(nbytes)

    def transfer(self, transfer: int, nbytes: int) -> int:
        """Queue transfer `transfer` of `nbytes` on the port (`would_end`);
        the cycle it starts. It ends at `ends[transfer]`."""
        start = max(self.now, self.port)
        self.port = self.would_end(nbytes)
        self.ends[transfer] = self.port
        self.moved += nbytes
        return start

    def wait(self, transfer: int) -> int:
        """Block until `transfer` ends; the cycles stalled."""
        stalled = max(0, self.ends[transfer] - self.now)
        self.now += stalled
        return stalled

    def compute(self, macs: int, sram_bytes: int) -> int:
        """Run a compute of `macs` touching `sram_bytes` of SRAM; its cycles."""
        cycles = self.cost.compute_cycles(macs, sram_bytes)
        self.now += cycles
        return cycles

    def issue(self, instruction: Instruction) -> None:
        """Advance the times past `instruction`."""
        if isinstance(instruction, (Load, Store)):
            self.transfer(instruction.id, instruction.piece.bytes)
        elif isinstance(instruction, Wait):
            self.wait(instruction.id)
        elif isinstance(instruction, Compute):
            self.compute(instruction.macs, instruction.sram_bytes)

    def done(self, transfer: int) -> bool:
        """True when `transfer` has ended by now (waiting on it costs nothing)."""
        return self.ends[transfer] <= self.now


@dataclass
class SimulationResult:
    """What a run of the schedule cost."""

    cycles: int
    compute_cycles: int
    stall_cycles: int
    dram_bytes: int
    """Bytes moved over the DRAM port, both directions."""
    dram_read_bytes: int
    dram_write_bytes: int
    sram_peak_bytes: int
    """The highest byte of SRAM ever allocated."""
    transfers: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    """(direction, tensor:part, bytes, start cycle, end cycle) per DMA, for pictures."""
    issued: list[int] = field(default_factory=list)
    """The cycle each instruction is issued at (a wait: when it returns), for pictures."""
    computes: list[tuple[str, int, int]] = field(default_factory=list)
    """(op, start cycle, end cycle) per compute, for pictures."""
    port_bound_stalls: list[int] = field(default_factory=list)
    """Per compute, the port-bound cycles of the stall just before it (see
    the module docstring), then those of the waits after the last compute."""

    @property
    def stall_port_bound_cycles(self) -> int:
        """Of `stall_cycles`, the port-bound ones: the DRAM port was busy
        throughout since the stall before, but for the cycles the late rest
        of the stall could have used (see the module docstring)."""
        return sum(self.port_bound_stalls)


@dataclass
class _Resident:
    buffer: SramBuffer
    content: dict[str, dict[str, int]] = field(default_factory=dict)
    """tensor -> {part: bytes} of valid data."""
    pending: set[int] = field(default_factory=set)


@functools.lru_cache(maxsize=1 << 16)  # pure; `covers` parses every part held, again and again (DenseNet-121)
def channel_band(part: str) -> tuple[int, int, int, str] | None:
    """(first, end, channels, inner part) of a part that is a band of
    channels of its tensor, `ch{first}:{end}/{channels}` (the band whole:
    inner part `all`) or `ch{first}:{end}/{channels}|{inner}` (a part of
    the band: its rows, a tile); None for any other part. An in-place
    concat's inputs are such bands of its output."""
    if not part.startswith("ch"):
        return None
    band, _, inner = part.partition("|")
    span, _, total = band[2:].partition("/")
    first, _, end = span.partition(":")
    return int(first), int(end), int(total), inner or "all"


def band_part(first: int, end: int, channels: int, inner: str = "all") -> str:
    """The name of channels [first, end) of `channels` (`inner`: a part of that band)."""
    band = f"ch{first}:{end}/{channels}"
    return band if inner == "all" else f"{band}|{inner}"


def extent_bytes(piece: Piece, tensor_bytes: int) -> int:
    """Bytes of what `piece` is a part of: its channel band, or its tensor
    (rows of a channel band: those rows of every channel)."""
    band = channel_band(piece.part)
    if band is None:
        return tensor_bytes
    if band[3].startswith("rows"):
        return piece.bytes * band[2] // (band[1] - band[0])
    return tensor_bytes // band[2] * (band[1] - band[0])


def covers(parts: dict[str, int], part: str, tensor_bytes: int) -> bool:
    """True when the parts held (part -> bytes, of one tensor) hold `part`:
    it is one of them, the whole tensor is (whole, or its parts add up to
    it: tiles written one by one), or `part` is a band of channels (or a
    part of one) and whole bands held cover it (a band is whole when held
    so or when its parts add up to it)."""
    if part in parts or "all" in parts or sum(parts.values()) >= tensor_bytes:
        return True
    want = channel_band(part)
    if want is None:  # a part of every channel: held when bands of that part cover every channel
        found = [b for b in map(channel_band, parts) if b is not None and b[3] == part]
        if not found:
            return False
        want = (0, found[0][2], found[0][2], part)
        parts = {name: nbytes for name, nbytes in parts.items() if name.endswith("|" + part)}
    held: dict[tuple[int, int], int] = {}
    whole: set[tuple[int, int]] = set()
    for name, nbytes in parts.items():
        band = channel_band(name)
        if band is None:
            continue
        key = band[:2]
        held[key] = held.get(key, 0) + nbytes
        if band[3] in ("all", want[3]) or held[key] >= tensor_bytes // band[2] * (band[1] - band[0]):
            whole.add(key)
    reach = want[0]
    for first, end in sorted(whole):
        if first > reach:
            break
        reach = max(reach, end)
    return reach >= want[1]


def _holds(resident: _Resident, piece: Piece, tensor_bytes: dict[str, int]) -> bool:
    return covers(resident.content.get(piece.tensor, {}), piece.part, tensor_bytes[piece.tensor])


@without_gc
def simulate(
    instructions: list[Instruction],
    *,
    sram_size: int,
    tensor_bytes: dict[str, int],
    dram_resident: set[str],
    outputs: set[str],
    dram_offsets: dict[str, int] | None = None,
    cost: NpuCost = NpuCost(),
) -> SimulationResult:
    """Run `instructions` under `cost`, checking residency and overlaps.

    `tensor_bytes` gives every tensor's size; `dram_resident` the tensors in
    DRAM from the start (weights, graph inputs); `outputs` the tensors that
    must be in DRAM at the end; `dram_offsets` where spilled activations live
    in the DRAM spill area (checked for overlaps in time). Raises
    `ScheduleError` naming the first instruction that breaks a rule.
    """
    dram_offsets = dram_offsets or {}
    live: dict[str, _Resident] = {}
    order: list[tuple[int, str]] = []  # (offset, name) of the live buffers, sorted: neighbours tell overlaps
    pending: dict[int, tuple[str, _Resident, Piece]] = {}
    dram_parts: dict[str, dict[str, int]] = {t: {"all": tensor_bytes[t]} for t in dram_resident}
    spill_span: dict[str, list[int]] = {}
    clock = Clock(cost)
    compute = stall = read = written = peak = 0
    transfers: list[tuple[str, str, int, int, int]] = []
    issued: list[int] = []
    computes: list[tuple[str, int, int]] = []
    idle = 0  # cycles the port idled since the control processor last stopped waiting
    waited = 0  # stall cycles since the last compute
    port_bound_stalls: list[int] = []

    def fail(index: int, message: str) -> ScheduleError:
        return ScheduleError(f"instruction {index} ({type(instructions[index]).__name__}): {message}")

    def resident(index: int, buffer: SramBuffer) -> _Resident:
        if buffer.name not in live or live[buffer.name].buffer != buffer:
            raise fail(index, f"buffer {buffer.name!r} is not live in SRAM")
        return live[buffer.name]

    def in_dram(piece: Piece) -> bool:
        return covers(dram_parts.get(piece.tensor, {}), piece.part, tensor_bytes[piece.tensor])

    for index, ins in enumerate(instructions):
        if isinstance(ins, Alloc):
            b = ins.buffer
            if b.offset < 0 or b.size <= 0 or b.offset + b.size > sram_size:
                raise fail(index, f"buffer {b.name!r} [{b.offset}, {b.offset + b.size}) is outside the {sram_size}-byte SRAM")
            if b.name in live:
                raise fail(index, f"buffer {b.name!r} is already live")
            at = bisect.bisect_left(order, (b.offset, b.name))
            for o in (live[n].buffer for _, n in order[max(0, at - 1):at + 1]):
                if b.offset < o.offset + o.size and o.offset < b.offset + b.size:
                    raise fail(index, f"buffer {b.name!r} overlaps live buffer {o.name!r} in SRAM")
            live[b.name] = _Resident(b)
            order.insert(at, (b.offset, b.name))
            peak = max(peak, b.offset + b.size)
        elif isinstance(ins, Free):
            r = resident(index, ins.buffer)
            if r.pending:
                raise fail(index, f"buffer {ins.buffer.name!r} is freed with transfer {min(r.pending)} still pending")
            del live[ins.buffer.name]
            order.remove((ins.buffer.offset, ins.buffer.name))
        elif isinstance(ins, (Load, Store)):
            r = resident(index, ins.buffer)
            if r.pending:
                raise fail(index, f"buffer {ins.buffer.name!r} already has transfer {min(r.pending)} pending")
            if ins.piece.bytes > ins.buffer.size:
                raise fail(index, f"{ins.piece.tensor}:{ins.piece.part} ({ins.piece.bytes} B) does not fit buffer {ins.buffer.name!r}")
            if ins.id in pending:
                raise fail(index, f"transfer id {ins.id} is already pending")
            if isinstance(ins, Load):
                if not in_dram(ins.piece):
                    raise fail(index, f"{ins.piece.tensor}:{ins.piece.part} is not in DRAM (no store issued before, not a weight or input)")
                r.content = {}
                read += ins.piece.bytes
                direction = "load"
            else:
                if not _holds(r, ins.piece, tensor_bytes):
                    raise fail(index, f"buffer {ins.buffer.name!r} does not hold {ins.piece.tensor}:{ins.piece.part}")
                written += ins.piece.bytes
                # the port is in order: every load issued from now on starts after this store ends
                dram_parts.setdefault(ins.piece.tensor, {})[ins.piece.part] = ins.piece.bytes
                if ins.piece.tensor not in dram_resident and ins.piece.tensor not in outputs:
                    spill_span.setdefault(ins.piece.tensor, [index, index])[1] = index
                direction = "store"
            free = clock.port
            start = clock.transfer(ins.id, ins.piece.bytes)
            idle += start - free  # the port idled since its last transfer ended
            r.pending.add(ins.id)
            pending[ins.id] = (direction, r, ins.piece)
            transfers.append((direction, f"{ins.piece.tensor}:{ins.piece.part}", ins.piece.bytes, start, clock.port))
            if direction == "load" and ins.piece.tensor in spill_span:
                spill_span[ins.piece.tensor][1] = index
        elif isinstance(ins, Wait):
            if ins.id not in pending:
                raise fail(index, f"transfer {ins.id} is not pending")
            direction, r, piece = pending.pop(ins.id)
            r.pending.discard(ins.id)
            stalled = clock.wait(ins.id)
            stall += stalled
            waited += stalled
            if direction == "load":
                r.content.setdefault(piece.tensor, {})[piece.part] = piece.bytes
        elif isinstance(ins, Compute):
            for buffer, piece in ins.reads:
                r = resident(index, buffer)
                loading = any(pending[i][0] == "load" for i in r.pending)
                if loading or not _holds(r, piece, tensor_bytes):
                    raise fail(index, f"{ins.op} reads {piece.tensor}:{piece.part}, which is not resident in {buffer.name!r}")
            for buffer, piece in ins.writes:
                r = resident(index, buffer)
                if r.pending:
                    raise fail(index, f"{ins.op} writes {buffer.name!r} while a transfer on it is pending")
                if any(t != piece.tensor for t in r.content) or buffer.size < extent_bytes(piece, tensor_bytes[piece.tensor]):
                    r.content = {}  # a buffer smaller than the tensor (its band) holds one part at a time
                r.content.setdefault(piece.tensor, {})[piece.part] = piece.bytes
            start = clock.now
            cycles = clock.compute(ins.macs, ins.sram_bytes)
            compute += cycles
            computes.append((ins.op, start, clock.now))
            port_bound_stalls.append(waited - min(waited, idle))
            if waited:  # the control processor stopped waiting: the port's idle cycles count from here
                idle = waited = 0
        else:  # pragma: no cover - the union is closed
            raise fail(index, f"unknown instruction {ins!r}")
        issued.append(clock.now if not isinstance(ins, Compute) else start)

    if pending:
        raise ScheduleError(f"transfers {sorted(pending)} are never waited on")
    for tensor in sorted(outputs):
        if not in_dram(Piece(tensor, "all", tensor_bytes[tensor])):
            raise ScheduleError(f"graph output {tensor!r} is not in DRAM at the end")
    _check_spill_overlaps(spill_span, dram_offsets, tensor_bytes)
    port_bound_stalls.append(waited - min(waited, idle))
    return SimulationResult(clock.now, compute, stall, read + written, read, written, peak, transfers, issued, computes,
                            port_bound_stalls)


def _check_spill_overlaps(span: dict[str, list[int]], offsets: dict[str, int], tensor_bytes: dict[str, int]) -> None:
    """Spilled tensors whose DRAM lives (first store to last load) overlap
    must not share a byte of the spill area."""
    names = sorted(span)
    for name in names:
        if name not in offsets:
            raise ScheduleError(f"spilled tensor {name!r} has no DRAM offset")
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if span[a][0] <= span[b][1] and span[b][0] <= span[a][1]:
                ao, bo = offsets[a], offsets[b]
                if ao < bo + tensor_bytes[b] and bo < ao + tensor_bytes[a]:
                    raise ScheduleError(f"spilled tensors {a!r} and {b!r} overlap in DRAM while both hold data")

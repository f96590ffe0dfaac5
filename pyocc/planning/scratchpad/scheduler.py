"""One way of scheduling units: residency and prefetch (steps 2 and 3 of the package's docstring).

`_Scheduler.run` walks the units in order and emits the simulator's
instructions: it places each piece in SRAM (`_Allocator`; first fit, or
best fit), evicts what is read latest when space runs out
(`_cheapest_hole`), stores what DRAM lacks, frees the dead, and before
each compute starts the loads of the units after it (`prefetch`), keeping
the simulator's clock (`Clock`) as it goes. Its options (the reserve a
prefetch leaves, deadlines, placements) are the ways search.py tries.
"""

from __future__ import annotations

import bisect
import collections
import functools
import itertools
import math
from dataclasses import dataclass

from ..npu_simulator import (
    Alloc,
    Clock,
    Compute,
    Free,
    Instruction,
    Load,
    NpuCost,
    Piece,
    SramBuffer,
    Store,
    Wait,
    band_part,
    channel_band,
    covers,
    extent_bytes,
)
from ..problem import PlanningError
from . import tuning
from .program import (
    ALIGN,
    INTO,
    KEEP_STORE,
    STREAM,
    WHOLE,
    _Make,
    NpuProgram,
    NpuTensor,
    _Unit,
    copy_rows,
    _own_buffer,
    _own_part,
)


class _Allocator:
    """Placement of SRAM buffers: first fit from the bottom (with
    `best_fit`, in the smallest hole that fits), or, for the scheduler's
    weight blocks, from the top (`find`)."""

    def __init__(self, size: int, best_fit: bool = False):
        self.size = size
        self.best_fit = best_fit
        """Whether `find` takes the smallest hole (the lowest of those as
        small) instead of the lowest."""
        self.live: dict[str, SramBuffer] = {}
        self.used = 0
        """Bytes of the live buffers."""
        self.order: list[tuple[int, str, int]] = []
        """(offset, name, aligned end) of the live buffers, sorted: `find`
        walks it for every allocation and reads nothing else."""

    def add(self, buffer: SramBuffer) -> None:
        """Mark `buffer` live."""
        self.live[buffer.name] = buffer
        self.used += buffer.size
        bisect.insort(self.order, (buffer.offset, buffer.name, -(-(buffer.offset + buffer.size) // ALIGN) * ALIGN))

    def remove(self, buffer: SramBuffer) -> None:
        """Mark `buffer` free."""
        del self.live[buffer.name]
        self.used -= buffer.size
        self.order.pop(bisect.bisect_left(self.order, (buffer.offset, buffer.name)))

    def find(self, nbytes: int, top: bool = False) -> int | None:
        """The lowest aligned offset where `nbytes` fit (with `best_fit`,
        the start of the smallest hole they fit), or None; with `top`, the
        highest."""
        if self.best_fit and not top:
            offset, best = 0, None  # best: (hole's bytes, its start)
            for start, _, end in (*self.order, (self.size, "", self.size)):
                if start - offset >= nbytes and (best is None or start - offset < best[0]):
                    best = (start - offset, offset)
                offset = max(offset, end)
            return None if best is None else best[1]
        offset = 0
        found = None
        for start, _, end in self.order:
            if start - offset >= nbytes:
                if not top:
                    return offset
                found = (start - nbytes) // ALIGN * ALIGN
            if end > offset:
                offset = end
        if self.size - offset >= nbytes:
            return (self.size - nbytes) // ALIGN * ALIGN if top else offset
        return found


@dataclass
class _Entry:
    buffer: SramBuffer
    dirty: bool
    load: int | None = None
    store: int | None = None


@dataclass(frozen=True)
class _UnitFacts:
    """What a list of units says about itself, whichever way it is
    scheduled: `_fastest_scheduler` makes them once for all its ways (each
    `_Scheduler` making its own was 7% of the search)."""

    cycles: list[int]
    """Per unit, the cycles of its compute (the prefetch's look-ahead adds them up)."""
    uses: dict[tuple[str, str], list[int]]
    """Piece -> the units that read it (a whole tensor: also those reading
    a part of it that is no band of rows in its own buffer)."""
    band_uses: dict[str, list[int]]
    """Tensor -> the units that read a band of its rows (from DRAM)."""
    last_use: dict[tuple[str, str], int]
    """Piece -> the last unit that reads it (`uses`' last)."""
    band_reads: dict[str, list[tuple[int, str]]]
    """Tensor -> (unit, part) of every read of a channel band of it (an
    in-place concat's output): a band's buffer whose data a later read
    of other channels needs is stored to DRAM first."""
    last_into: dict[tuple[str, str], int]
    """Tensor assembled `into` -> the last unit writing a band into it."""

    @classmethod
    def of(cls, units: list[_Unit], cost: NpuCost) -> _UnitFacts:
        """The facts of `units` under `cost`."""
        uses: dict[tuple[str, str], list[int]] = {}
        band_uses: dict[str, list[int]] = {}
        for index, unit in enumerate(units):
            for need in unit.reads:
                uses.setdefault((need.piece.tensor, need.piece.part), []).append(index)
                if _loaded_band(need.piece):
                    band_uses.setdefault(need.piece.tensor, []).append(index)
                elif not _own_buffer(need.piece):  # the whole tensor serves any other part of it
                    uses.setdefault((need.piece.tensor, "all"), []).append(index)
        band_reads: dict[str, list[tuple[int, str]]] = {}
        last_into: dict[tuple[str, str], int] = {}
        banded = {p.tensor for unit in units for p in (*(n.piece for n in unit.reads), *(m.piece for m in unit.writes))
                  if channel_band(p.part) is not None}
        for index, unit in enumerate(units):
            for need in unit.reads:
                if need.piece.tensor in banded:
                    band_reads.setdefault(need.piece.tensor, []).append((index, need.piece.part))
            for make in unit.writes:
                if make.mode == INTO:
                    last_into[_container(make)] = index
        return cls([cost.compute_cycles(unit.macs, unit.sram_bytes) for unit in units], uses, band_uses,
                   {key: found[-1] for key, found in uses.items()}, band_reads, last_into)


class _Scheduler:
    """The cache-managing, prefetching scheduler of the module docstring."""

    def __init__(self, program: NpuProgram, sram: int, units: list[_Unit], cost: NpuCost = NpuCost(),
                 reserve: str | None = None, best_fit: bool = False, deadlines: bool = False,
                 facts: _UnitFacts | None = None, clear: bool = False):
        self.tensors = program.by_name()
        self.reserve = tuning.RESERVES[0] if reserve is None else reserve
        """What a prefetch beyond the next unit leaves room for: one of
        `RESERVES` (see `prefetch`; None: the first); `best_fit`: the allocator's placement
        (`_Allocator`); `deadlines`: whether the prefetch looks as far ahead
        as weights are due (`_load_deadlines`); `facts`: those of `units`
        (`_UnitFacts`), made here where not given; `clear`: whether a
        prefetch keeps clear of the output of the unit that reads it
        (`_clear_of_outputs`: placed from the top where first fit would
        leave that output no hole, not started where neither would)."""
        self.clear = clear
        self.sram = sram
        self.units = units
        self.cost = cost
        if facts is None:
            facts = _UnitFacts.of(units, cost)
        self.cycles, self.uses, self.last_use = facts.cycles, facts.uses, facts.last_use
        self.band_uses, self.band_reads, self.last_into = facts.band_uses, facts.band_reads, facts.last_into
        self.alloc = _Allocator(sram, best_fit)
        self.out: list[Instruction] = []
        self.clock = Clock(cost)
        """The simulator's timing of what was emitted so far: which stores
        have ended, so their buffers are freed without a stall."""
        self.resident: dict[tuple[str, str], _Entry] = {}
        self.draining: dict[str, tuple[SramBuffer, int]] = {}
        self.pending_stores: dict[str, set[int]] = {}
        self.dram_parts: dict[str, dict[str, int]] = {
            t.name: {"all": t.size} for t in program.tensors if t.kind in ("weight", "input")}
        self.next_id = 0
        self.buffers = 0
        self.now = 0
        self.waited: set[int] = set()
        self.pinned: set[tuple[str, str]] = set()
        """The outputs the current unit is about to write: never evicted."""
        self.assembling: set[tuple[str, str]] = set()
        """Whole tensors being written part by part: not evicted half-written."""
        self.starts, self.latest = _load_deadlines(self.tensors, units, cost) if deadlines else ([], [])
        """With `deadlines`, per unit: when it starts, by compute alone, and
        the latest such cycle its weights may start loading
        (`_load_deadlines`); empty without."""

    def lookup(self, piece: Piece) -> _Entry | None:
        """The resident entry holding `piece`: its own, or the whole tensor's
        (but a band of rows, strided in the whole, has its own buffer)."""
        own = self.resident.get((piece.tensor, piece.part))
        if own is not None or _own_buffer(piece):
            return own
        band = channel_band(piece.part)
        if band is not None and band[3] != "all":  # a tile of a channel band, in the band's buffer
            own = self.resident.get((piece.tensor, band_part(*band[:3])))
            if own is not None:
                return own
        return self.resident.get((piece.tensor, "all"))

    def overlap_later(self, key: tuple[str, str], first: int) -> bool:
        """True when unit `first` or a later one reads channels of `key`'s
        tensor that `key` holds (some of), as another part: from DRAM."""
        if channel_band(key[1]) is None:  # a whole tensor, or a band of rows of every channel
            return False
        return any(i >= first and part != key[1] and _overlap(part, key[1])
                   for i, part in self.band_reads.get(key[0], ()))

    def flush_overlaps(self, piece: Piece) -> None:
        """Store the dirty channel bands in SRAM that `piece` (another part
        of their tensor, about to be loaded) needs from DRAM."""
        for key, entry in list(self.resident.items()):
            if (key[0] == piece.tensor and key[1] != piece.part and entry.dirty and entry.store is None
                    and key not in self.assembling and channel_band(key[1]) is not None
                    and _overlap(key[1], piece.part)):
                self.write_back(key)

    def banded_later(self, tensor: str) -> bool:
        """True when a later unit reads a band of `tensor`'s rows from DRAM."""
        uses = self.band_uses.get(tensor, [])
        return bisect.bisect_right(uses, self.now) < len(uses)

    def write_back(self, key: tuple[str, str]) -> None:
        """Start storing a dirty resident whole tensor (its bands are read
        from DRAM); it stays resident."""
        entry = self.resident[key]
        store = self._id()
        self.emit(Store(store, entry.buffer, Piece(key[0], key[1], entry.buffer.size)))
        entry.store, entry.dirty = store, False
        self.pending_stores.setdefault(key[0], set()).add(store)
        self.dram_parts.setdefault(key[0], {})[key[1]] = entry.buffer.size

    def next_use(self, key: tuple[str, str]) -> float:
        """The first unit after the current one that reads `key`."""
        if self.last_use.get(key, -1) <= self.now:
            return math.inf
        uses = self.uses[key]
        return uses[bisect.bisect_right(uses, self.now)]

    def needed(self, key: tuple[str, str]) -> bool:
        """True when the current unit or a later one reads `key` (the
        current unit's own input may be evicted when SRAM is fragmented,
        and is loaded again: it must be written back first)."""
        uses = self.uses.get(key, [])
        return bisect.bisect_left(uses, self.now) < len(uses)

    def emit(self, instruction: Instruction) -> None:
        """Append `instruction` to the schedule, timing it."""
        self.out.append(instruction)
        self.clock.issue(instruction)

    def _wait(self, transfer: int) -> None:
        """Wait for a transfer once (later waits on it are no-ops)."""
        if transfer not in self.waited:
            self.waited.add(transfer)
            self.emit(Wait(transfer))

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _new_buffer(self, offset: int, nbytes: int, label: str) -> SramBuffer:
        self.buffers += 1
        return SramBuffer(f"b{self.buffers}:{label}", offset, nbytes)

    def _drain(self, name: str) -> None:
        buffer, store = self.draining.pop(name)
        self._wait_store(buffer, store)
        self.alloc.remove(buffer)
        self.emit(Free(buffer))

    def make_room(self, nbytes: int, use: int, protected: set[tuple[str, str]]) -> bool:
        """Evict, for a prefetch that unit `use` reads, clean pieces (DRAM
        holds them) next read more than `EVICT_MARGIN` units after `use`
        (none still loading): those in the window of `nbytes` whose
        earliest next read is the latest (`_cheapest_hole`); True if it
        found one."""
        found: list[tuple[tuple[str, str], float]] = []
        for k, e in self.resident.items():
            if (k not in protected and k not in self.assembling and k not in self.pinned and e.load is None
                    and not e.dirty and (e.store is None or self.clock.done(e.store))):
                after = self.next_use(k)
                if after > use + tuning.EVICT_MARGIN:
                    found.append((k, after))
        given_up = {self.resident[k].buffer.name: (after,) for k, after in found}
        window = _cheapest_hole(self.alloc.order, self.sram, nbytes, given_up)
        if window is None:
            return False
        keys = {self.resident[k].buffer.name: k for k, _ in found}
        for name in sorted(window, key=given_up.__getitem__, reverse=True):
            self.evict(keys[name])
        return True

    def drain_ended(self) -> None:
        """Free the buffers of streamed-out results whose store has ended
        (by the clock: waiting on it costs nothing), so prefetches find
        their space, and wait on every other ended store (a load of what
        it wrote need not: the port is in order)."""
        for name in [n for n, (_, store) in self.draining.items() if self.clock.done(store)]:
            self._drain(name)
        for ids in self.pending_stores.values():
            if not ids:
                continue
            for store in sorted(s for s in ids if self.clock.done(s)):
                self._wait(store)
                ids.discard(store)

    def _wait_store(self, buffer: SramBuffer, store: int) -> None:
        self._wait(store)
        for ids in self.pending_stores.values():
            ids.discard(store)

    def allocate(self, nbytes: int, label: str, protected: set[tuple[str, str]], evict: bool,
                 top: bool = False) -> SramBuffer | None:
        """A buffer of `nbytes` (placed as high as it fits with `top`);
        without `evict`, only from free space. Where no hole fits, the
        buffers of one window of `nbytes` go (`_cheapest_hole`): streamed-out
        results whose store is in flight the first, then the pieces read
        furthest ahead (not loading, clean); the pieces outside the window
        stay, even those read later than the ones in it."""
        offset = self.alloc.find(nbytes, top)
        if offset is None and evict:
            draining = {buffer.name: (1,) for buffer, _ in self.draining.values()}
            window = None
            for victims in ([k for k in self.resident if k not in protected and k not in self.assembling],
                            # the unit's own inputs, reloaded by `run`
                            [k for k in self.resident if k not in self.assembling and k not in self.pinned]):
                given_up = draining | {
                    self.resident[k].buffer.name: (0, self.next_use(k), self.resident[k].load is None,
                                                   not self.resident[k].dirty) for k in victims}
                window = _cheapest_hole(self.alloc.order, self.sram, nbytes, given_up, top)
                if window is not None:
                    break
            if window is None:
                raise PlanningError(
                    f"scratchpad: {nbytes} bytes for {label} do not fit in {self.sram} bytes of SRAM; give a larger --scratchpad"
                )
            keys = {e.buffer.name: k for k, e in self.resident.items()}
            for name in sorted(window, key=given_up.__getitem__, reverse=True):
                if name in self.draining:
                    self._drain(name)
                else:
                    self.evict(keys[name])
            offset = self.alloc.find(nbytes, top)
            assert offset is not None
        if offset is None:
            return None
        buffer = self._new_buffer(offset, nbytes, label)
        self.alloc.add(buffer)
        self.emit(Alloc(buffer))
        return buffer

    def evict(self, key: tuple[str, str]) -> None:
        """Drop a piece from SRAM, writing it back first if DRAM lacks it."""
        entry = self.resident.pop(key)
        if entry.load is not None:  # a prefetch given up: its buffer is free once it lands
            self._wait(entry.load)
        if entry.store is not None:
            self._wait_store(entry.buffer, entry.store)
        elif entry.dirty and (self.needed(key) or self.banded_later(key[0]) or self.overlap_later(key, self.now)):
            store = self._id()
            self.emit(Store(store, entry.buffer, Piece(key[0], key[1], entry.buffer.size)))
            self.pending_stores.setdefault(key[0], set()).add(store)
            self._wait_store(entry.buffer, store)
            self.dram_parts.setdefault(key[0], {})[key[1]] = entry.buffer.size
        self.alloc.remove(entry.buffer)
        self.emit(Free(entry.buffer))

    def loadable(self, piece: Piece) -> bool:
        """True when DRAM holds `piece`, counting stores still in flight: the
        port is in order, so a load issued after them reads what they wrote
        (rows a copy unit makes come from it, unless stored as such)."""
        if copy_rows(piece.part) is not None and piece.part not in self.dram_parts.get(piece.tensor, {}):
            return False
        return covers(self.dram_parts.get(piece.tensor, {}), piece.part, self.tensors[piece.tensor].size)

    def load(self, piece: Piece, protected: set[tuple[str, str]], evict: bool, top: bool = False) -> bool:
        """Start loading `piece` into a buffer of its own (placed as high as
        it fits with `top`); without `evict`, only into free space. False
        where it found none (or DRAM does not hold `piece` yet)."""
        if evict and piece.tensor in self.band_reads:
            self.flush_overlaps(piece)
        if not self.loadable(piece):
            if evict:
                raise PlanningError(f"scratchpad: {piece.tensor!r} is read before it is written")
            return False
        # a block of a weight streams through a double buffer and is freed once its tiles end: placed
        # from the top, the holes it leaves stay out of the bottom, where what stays longer goes (input
        # bands that every channel block reads again, whole tensors that later ops read), so that the
        # next blocks do not find the free bytes cut into holes too small for them
        top = top or _streamed_weight(self.tensors[piece.tensor], piece)
        buffer = self.allocate(piece.bytes, f"{piece.tensor}:{piece.part}", protected, evict, top)
        if buffer is None:
            return False
        load = self._id()
        self.emit(Load(load, buffer, piece))
        self.resident[(piece.tensor, piece.part)] = _Entry(buffer, False, load)
        return True

    def _clear_of_outputs(self, piece: Piece, later: int) -> bool | None:
        """Where a prefetch of `piece`, which unit `later` reads, leaves room
        for the largest buffer `later` allocates for its outputs: False
        placed first fit (the allocator's way; also where `later` allocates
        none), True only placed from the top (where a weight block goes
        anyway, `load`), None neither.

        The holes are those when `later` starts, as far as known now: the
        buffers of pieces read by `later` or after it (or loading, or being
        assembled) stay; the others (pieces no unit from `later` on reads,
        results streaming out) are gone by then. Where the output finds no
        hole, `later` evicts pieces read after it to place its output, or,
        where no window spares its own inputs, the piece it reads, and
        loads that again (Inception v1's stem at 1 MiB: a band of the image
        loaded ahead into the middle of the SRAM, where the first
        convolution's 544,768-byte output band goes: loaded twice in four
        of six bands). Where no hole holds the piece now, False: `prefetch`
        then makes room for it as without `clear` (`make_room`)."""
        outputs = [size for key, size in map(self._output_buffer, self.units[later].writes) if key not in self.resident]
        if not outputs:
            return False
        nbytes = piece.bytes
        first, top = self.alloc.find(nbytes), self.alloc.find(nbytes, top=True)
        if top is None:  # no hole holds it now: `make_room` may make one, as without `clear`
            return False
        stay = {e.buffer.name for k, e in self.resident.items()
                if e.load is not None or self.last_use.get(k, -1) >= later or k in self.assembling}
        kept = [(start, end) for start, name, end in self.alloc.order if name in stay]

        def hole(offset: int) -> int:
            spans = sorted((*kept, (offset, -(-(offset + nbytes) // ALIGN) * ALIGN)))
            largest, at = 0, 0
            for start, end in (*spans, (self.sram, self.sram)):
                largest, at = max(largest, start - at), max(at, end)
            return largest

        need = max(outputs)
        if not _streamed_weight(self.tensors[piece.tensor], piece) and hole(first) >= need:
            return False
        return True if hole(top) >= need else None

    def _missing(self, piece: Piece, held: set[tuple[str, str]]) -> bool:
        """True when no buffer holds `piece`: none is found for it, or it
        was in a buffer of its own during the current unit (`held`), and
        room made for the unit (an output's buffer, another input loaded
        again) evicted it. The whole tensor's buffer that `lookup` then
        finds is no stand-in for it: the tensor may be being assembled there
        (a band copied into its rows of the whole by the unit reading it,
        `_assembled`), the piece not copied in yet. Loaded again even where
        the whole holds it."""
        key = (piece.tensor, piece.part)
        return self.lookup(piece) is None or key in held and key not in self.resident

    def _unplace(self, placed: dict[_Make, SramBuffer], stream_outs: list[tuple[SramBuffer, Piece]],
                 kept_stores: list[tuple[SramBuffer, Piece]]) -> None:
        """Take back the output buffers the current unit allocated (nothing
        was written to them yet): their Alloc goes, their space is free."""
        for make, buffer in list(placed.items()):
            key, _ = self._output_buffer(make)
            entry = self.resident.get(key)
            if entry is None or entry.buffer != buffer or buffer.name not in self.fresh:
                continue  # a whole tensor assembled by earlier units stays
            del self.resident[key]
            self.assembling.discard(key)
            self.pinned.discard(key)
            stream_outs[:] = [(b, p) for b, p in stream_outs if b != buffer]
            kept_stores[:] = [(b, p) for b, p in kept_stores if b != buffer]
            self.alloc.remove(buffer)
            at = next(i for i in range(len(self.out) - 1, -1, -1)
                      if isinstance(self.out[i], Alloc) and self.out[i].buffer == buffer)
            del self.out[at]
            del placed[make]

    def _output_buffer(self, make: _Make) -> tuple[tuple[str, str], int]:
        """The resident key of the buffer `make` writes into, and its bytes:
        the piece's own, or for a whole tensor (`WHOLE`, `INTO`) its
        container's."""
        if make.mode not in (WHOLE, INTO):
            return (make.piece.tensor, make.piece.part), make.piece.bytes
        key = _container(make)
        t = self.tensors[key[0]]
        if key[1] == "all":
            return key, t.size
        if make.mode == INTO:  # those rows of every channel
            band = channel_band(make.piece.part)
            assert band is not None
            return key, make.piece.bytes * band[2] // (band[1] - band[0])
        return key, extent_bytes(make.piece, t.size)

    def _place(self, make: _Make, protected: set[tuple[str, str]],
               stream_outs: list[tuple[SramBuffer, Piece]], kept_stores: list[tuple[SramBuffer, Piece]]) -> SramBuffer:
        """The buffer an output piece is written into, allocated if need be."""
        t = self.tensors[make.piece.tensor]
        key, size = self._output_buffer(make)
        if make.mode not in (WHOLE, INTO):
            buffer = self.allocate(size, f"{t.name}:{key[1]}", protected, evict=True)
            self.fresh.add(buffer.name)
            if make.mode == STREAM:
                stream_outs.append((buffer, make.piece))
            else:
                self.resident[key] = _Entry(buffer, True)
                protected.add(key)
                self.pinned.add(key)
                if make.piece.part.startswith("acc"):  # partial sums: in SRAM until the next block adds to them
                    self.assembling.add(key)
                if make.mode == KEEP_STORE:
                    kept_stores.append((buffer, make.piece))
            return buffer
        if key not in self.resident:
            buffer = self.allocate(size, f"{t.name}:{key[1]}", protected, evict=True)
            self.fresh.add(buffer.name)
            self.resident[key] = _Entry(buffer, True)
            self.assembling.add(key)
        return self.resident[key].buffer

    def run(self) -> list[Instruction]:
        for index, unit in enumerate(self.units):
            self.now = index
            keys = {(n.piece.tensor, n.piece.part) for n in unit.reads}
            whole_outs = {_container(m) for m in unit.writes if m.mode in (WHOLE, INTO)}
            keys |= {(n.piece.tensor, "all") for n in unit.reads}
            order = {(n.piece.tensor, n.piece.part): i for i, n in enumerate(unit.reads)}
            protected = keys | whole_outs
            stream_outs: list[tuple[SramBuffer, Piece]] = []
            kept_stores: list[tuple[SramBuffer, Piece]] = []
            placed: dict[_Make, SramBuffer] = {}
            self.pinned = set()
            self.fresh: set[str] = set()
            """Output buffers this unit allocated (empty until it computes)."""
            # an output's buffer may evict an input of this unit (when the SRAM is
            # fragmented): load what is missing again, a few times at most
            held: set[tuple[str, str]] = set()  # inputs in buffers of their own during this unit
            for attempt in range(8):
                if attempt:  # an output's buffer evicted an input: place the outputs after the inputs
                    self._unplace(placed, stream_outs, kept_stores)
                for need in sorted(unit.reads, key=lambda n: -n.piece.bytes):
                    whole = self.resident.get((need.piece.tensor, "all"))
                    if (_loaded_band(need.piece) and whole is not None and whole.dirty and whole.store is None
                            and (need.piece.tensor, "all") not in self.assembling):
                        self.write_back((need.piece.tensor, "all"))
                    if self._missing(need.piece, held):
                        self.load(need.piece, protected, evict=True)
                held |= {k for n in unit.reads if (k := (n.piece.tensor, n.piece.part)) in self.resident}
                for make in unit.writes:
                    if make not in placed:
                        placed[make] = self._place(make, protected, stream_outs, kept_stores)
                if not any(self._missing(n.piece, held) for n in unit.reads):
                    break
            else:
                raise PlanningError(
                    f"scratchpad: op {unit.op!r} does not fit in {self.sram} bytes of SRAM; give a larger --scratchpad"
                )
            writes = [(placed[m], m.piece) for m in unit.writes]
            # in the unit's order: a set's order changes from run to run (string hashing)
            for key in sorted(keys, key=lambda k: order.get(k, len(order))):
                entry = self.resident.get(key)
                if entry is not None and entry.load is not None:
                    self._wait(entry.load)
                    entry.load = None
            self.prefetch(index, protected)
            reads = tuple((self.lookup(n.piece).buffer, n.piece) for n in unit.reads)
            self.emit(Compute(unit.op, unit.macs, unit.sram_bytes, reads, tuple(writes)))
            for buffer, piece in stream_outs:
                store = self._id()
                self.emit(Store(store, buffer, piece))
                self.draining[buffer.name] = (buffer, store)
                self.pending_stores.setdefault(piece.tensor, set()).add(store)
                self.dram_parts.setdefault(piece.tensor, {})[piece.part] = piece.bytes
            for buffer, piece in kept_stores:
                store = self._id()
                self.emit(Store(store, buffer, piece))
                entry = self.resident[(piece.tensor, piece.part)]
                entry.store, entry.dirty = store, False
                self.pending_stores.setdefault(piece.tensor, set()).add(store)
                self.dram_parts.setdefault(piece.tensor, {})[piece.part] = piece.bytes
            # a tensor assembled `into` from the bands its producers write is whole after the last one
            self.assembling -= {k for k in whole_outs if self.last_into.get(k, index) == index
                                and (unit.last_of_op or k in self.last_into)}
            if unit.last_of_op:
                for make in unit.writes:
                    t = self.tensors[make.piece.tensor]
                    if make.mode != WHOLE or t.kind != "output":
                        continue
                    entry = self.resident[(t.name, "all")]
                    store = self._id()
                    self.emit(Store(store, entry.buffer, Piece(t.name, "all", t.size)))
                    entry.store, entry.dirty = store, False
                    self.pending_stores.setdefault(t.name, set()).add(store)
                    self.dram_parts.setdefault(t.name, {})["all"] = t.size
            self.now = index
            last_use = self.last_use
            for key in [k for k, e in self.resident.items() if last_use.get(k, -1) <= index and e.load is None]:
                # a tensor still being written tile by tile (band by band); the units of an op summing
                # over input-channel blocks put units writing partial sums between those writing its
                # tiles, so a tile's container stays until the op's last unit (its partial sums go)
                if (key in whole_outs and not unit.last_of_op
                        or key in self.assembling and (key in self.last_into or not key[1].startswith("acc"))):
                    continue
                if key[1] == "all" and self.resident[key].dirty and self.banded_later(key[0]):
                    self.write_back(key)
                elif self.resident[key].dirty and self.resident[key].store is None and self.overlap_later(key, index + 1):
                    self.write_back(key)  # a channel band a later read of more channels needs in DRAM
                entry = self.resident.pop(key)
                if key[1].startswith("acc"):
                    self.assembling.discard(key)
                if entry.store is not None:
                    self.draining[entry.buffer.name] = (entry.buffer, entry.store)
                else:
                    self.alloc.remove(entry.buffer)
                    self.emit(Free(entry.buffer))
        for name in list(self.draining):
            self._drain(name)
        for key in list(self.resident):
            self.evict(key)
        return self.out

    def output_bytes(self, unit: _Unit, counted: set[tuple[str, str]]) -> int:
        """Bytes the buffers of `unit`'s outputs will take that are not in
        SRAM yet (a whole tensor's buffer once: `counted` holds those
        counted so far; a band's container counted at the band's bytes,
        not at its buffer's as `_output_buffer` sizes it)."""
        nbytes = 0
        for make in unit.writes:
            key, _ = self._output_buffer(make)
            if key not in counted and key not in self.resident:
                counted.add(key)
                nbytes += self.tensors[key[0]].size if key[1] == "all" else make.piece.bytes
        return nbytes

    def new_bytes(self, unit: _Unit) -> int:
        """Bytes the buffers of `unit`'s outputs and of its inputs not in
        SRAM now will take (`output_bytes`; an input made in between
        counted as not in SRAM)."""
        return self.output_bytes(unit, set()) + sum(n.piece.bytes for n in unit.reads if self.lookup(n.piece) is None)

    def prefetch(self, index: int, protected: set[tuple[str, str]]) -> None:
        """Start the loads of the next units, in the order they are needed,
        that fit in free SRAM (once the buffers of ended stores are freed)
        or in room made by evicting clean pieces read much later; stop at
        the first that does not fit, and at the first unit after the next
        that starts before the DRAM port would be free (by the clock: its
        loads would not start earlier, and a store the current unit issues
        may go first). Where the next unit loads a piece at its start (one
        DRAM does not hold yet: the current unit streams it out), a load for
        a later unit that would end after the current compute is not
        started: the port is first come, first served, and the next unit's
        load would wait behind it. Beyond the next unit, with `reserve`
        "between", a load also leaves the free bytes the outputs of the
        units before its own will take (with "own", of its own too; with
        "largest", the default, the most one of those units adds,
        `new_bytes`; with "none", nothing): where it took them, the first of
        those outputs evicted it, waiting for its load, and it was loaded
        again. With `deadlines`, the units whose weights are due to start
        loading by the end of the current compute (`_load_deadlines`) are
        prefetched for whatever the port holds and however far ahead (up
        to `DEADLINE_UNITS`): their loads queue behind those of the units
        before them, and the port is behind if they wait. With `clear`, a
        load goes where it leaves the unit that reads it a hole for its
        output (`_clear_of_outputs`: first fit, else from the top); where
        neither would, and that unit is not the next, it and those after it
        wait (loaded now, that unit would evict it, or pieces read after it,
        to place its output)."""
        self.drain_ended()
        ahead = 0
        until = 0  # estimated cycles from now until unit `later` starts
        behind = False  # the next unit loads a piece at its start, queued behind what the port holds then
        computed = self.clock.now + self.cycles[index]
        outputs = 0  # bytes the units between the current one and `later` still need (`reserve`)
        counted: set[tuple[str, str]] = set()
        due = 0  # the units before this one are due to load now (`deadlines`)
        if self.latest and index + 1 < len(self.units):
            due = min(bisect.bisect_right(self.latest, self.starts[index + 1]), index + 1 + tuning.DEADLINE_UNITS)
        for later in range(index + 1, min(len(self.units), max(index + 1 + tuning.PREFETCH_UNITS, due))):
            until += self.cycles[later - 1]
            if later > index + 1 and self.clock.port - self.clock.now > until and later >= due:
                return  # the port is busy past that unit's start: its loads can wait
            if later - 1 > index and self.reserve != "none":
                if self.reserve == "largest":
                    outputs = max(outputs, self.new_bytes(self.units[later - 1]))
                else:
                    outputs += self.output_bytes(self.units[later - 1], counted)
            if self.reserve == "own":  # a unit counted here is not counted again as `later - 1`
                outputs += self.output_bytes(self.units[later], counted)
            for need in self.units[later].reads:
                if self.lookup(need.piece) is not None:
                    continue
                if later > index + 1 and outputs and self.sram - self.alloc.used - need.piece.bytes < outputs:
                    return  # the units before it would evict it (waiting for its load) to place their outputs
                if not self.loadable(need.piece):
                    behind |= later == index + 1
                    continue
                if ahead and ahead + need.piece.bytes > self.sram * tuning.PREFETCH_SHARE // 8 and later >= due:
                    return
                if (behind and later > index + 1
                        and self.clock.would_end(need.piece.bytes) > computed):
                    return  # it would end after the current compute: the next unit's load would wait behind it
                top = self._clear_of_outputs(need.piece, later) if self.clear else False
                if top is None and later > index + 1:
                    return  # loaded now, room for `later`'s output would evict it or others: load it once there is
                if not self.load(need.piece, protected, evict=False, top=bool(top)) and not (
                        self.make_room(need.piece.bytes, later, protected)
                        and self.load(need.piece, protected, evict=False)):
                    return
                ahead += need.piece.bytes


def _load_deadlines(tensors: dict[str, NpuTensor], units: list[_Unit], cost: NpuCost
                    ) -> tuple[list[int], list[float]]:
    """Per unit, the cycle it starts counting compute alone (no stalls),
    and the latest such cycle at which its weights must start loading for
    each unit's to end before it starts, the DRAM port loading every later
    unit's weights behind them in order: as late as possible, backwards
    from the last unit (the second list does not decrease). Where the
    weights ahead take the port longer than the units before them compute
    (a weight-heavy tail), that cycle comes units before the first that
    needs them."""
    starts = list(itertools.accumulate((cost.compute_cycles(u.macs, u.sram_bytes) for u in units), initial=0))
    seen: set[tuple[str, str]] = set()
    first_reads = [0] * len(units)  # the bytes of weights each unit reads first
    for index, unit in enumerate(units):
        for need in unit.reads:
            key = (need.piece.tensor, need.piece.part)
            if tensors[key[0]].kind == "weight" and key not in seen:
                seen.add(key)
                first_reads[index] += need.piece.bytes
    latest: list[float] = [0.0] * len(units)
    t = math.inf
    for index in range(len(units) - 1, -1, -1):
        t = min(t, starts[index]) - cost.dma_cycles(first_reads[index])
        latest[index] = t
    return starts, latest


def _cheapest_hole(order: list[tuple[int, str, int]], size: int, nbytes: int, given_up: dict[str, tuple],
                   top: bool = False) -> list[str] | None:
    """The buffers of `order` (as `_Allocator.order`) to free for a hole of
    `nbytes` in an SRAM of `size` bytes, or None. `given_up` ranks the
    buffers that may go (the higher, the more willingly); the others stay.
    The windows tried start at the SRAM's start or where a buffer ends, or
    end at the SRAM's end or where a buffer starts; of those overlapping
    only buffers that may go, the one whose least willingly given up buffer
    ranks highest is taken (on a tie, the fewest bytes freed, then the
    lowest window; with `top`, the highest). Asked where no hole fits: a
    window over free bytes only is not one of them.

    A window overlaps no buffer that stays: it lies in a gap between two of
    them, so only the windows in gaps of `nbytes` or more are tried (none:
    no window; most calls that find none). One sweep over those from the
    lowest: live buffers do not overlap, so those a window overlaps are a
    run of `order` whose both ends only move up; counts of the buffers that
    stay and of the bytes before each buffer give a run's at once, and a
    queue of rising ranks its least."""
    if not given_up:
        return None
    gaps: list[tuple[int, int]] = []  # [end of a buffer that stays (or 0), start of the next (or size))
    reach = 0
    for start, name, end in order:
        if name not in given_up:
            if start - reach >= nbytes:
                gaps.append((reach, start))
            reach = max(reach, end)
    if size - reach >= nbytes:
        gaps.append((reach, size))
    if not gaps:
        return None
    lows = [low for low, _ in gaps]

    def in_a_gap(offset: int) -> bool:
        k = bisect.bisect_right(lows, offset) - 1
        return k >= 0 and offset + nbytes <= gaps[k][1]

    windows = sorted({offset for offset in (0, (size - nbytes) // ALIGN * ALIGN,
                                            *(end for _, _, end in order),
                                            *((start - nbytes) // ALIGN * ALIGN for start, _, _ in order))
                      if 0 <= offset <= size - nbytes and in_a_gap(offset)})
    ranks = [given_up.get(name) for _, name, _ in order]
    stays = list(itertools.accumulate((rank is None for rank in ranks), initial=0))
    before = list(itertools.accumulate((end - start for start, _, end in order), initial=0))
    least: collections.deque[int] = collections.deque()  # buffers of the run that may go, their ranks rising
    best: tuple | None = None
    chosen = (0, 0)
    first = last = 0  # the window overlaps order[first:last]
    for offset in windows:
        while last < len(order) and order[last][0] < offset + nbytes:
            rank = ranks[last]
            if rank is not None:
                while least and ranks[least[-1]] >= rank:
                    least.pop()
                least.append(last)
            last += 1
        while first < last and order[first][2] <= offset:
            first += 1
        while least and least[0] < first:
            least.popleft()
        if first == last or stays[last] != stays[first]:
            continue
        key = (ranks[least[0]], before[first] - before[last], offset if top else -offset)
        if best is None or key > best:
            best, chosen = key, (first, last)
    return None if best is None else [order[k][1] for k in range(chosen[1] - 1, chosen[0] - 1, -1)]


def _streamed_weight(tensor: NpuTensor, piece: Piece) -> bool:
    """True when `piece` is a block of weight `tensor` (not the whole): it
    streams through a double buffer placed from the top (`_Scheduler.load`)."""
    return tensor.kind == "weight" and piece.part != "all"


def _loaded_band(piece: Piece) -> bool:
    """True for a band of rows in its own buffer that comes from DRAM (not
    rows a copy unit makes in SRAM, `rows{lo}:{hi}|copy`)."""
    return _loaded_part(piece.part)


@functools.lru_cache(maxsize=1 << 16)  # pure, and asked of every piece each scheduler reads
def _loaded_part(part: str) -> bool:
    """`_loaded_band` of a piece that is `part`."""
    return _own_part(part) and copy_rows(part) is None


def _container(make: _Make) -> tuple[str, str]:
    """The resident key of the buffer a `whole` or `into` write goes into:
    the whole tensor's, (`whole` of a part of a channel band) the band's, or
    (`into`, rows of a channel band: a concat in a chain cascade) the
    buffer of those rows of every channel."""
    band = channel_band(make.piece.part)
    if band is None:
        return make.piece.tensor, "all"
    if make.mode == INTO:
        return make.piece.tensor, band[3] if band[3].startswith("rows") else "all"
    return make.piece.tensor, band_part(*band[:3])


def _overlap(a: str, b: str) -> bool:
    """True when parts `a` and `b` of one tensor share channels (a part
    that is no channel band is all of them)."""
    x, y = channel_band(a), channel_band(b)
    return x is None or y is None or (x[0] < y[1] and y[0] < x[1])

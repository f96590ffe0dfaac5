"""Chain cascades: consecutive ops run band by band, their tensors in between never in DRAM.

`_chains` finds them (the ops and the bands of the chains estimated to
save the most cycles); `_chain_units` writes one as units: band by band, each op computes
the rows its readers' bands read, into a buffer they read whole. A chain
that *rolls* computes each row once, the halo rows its readers need copied
in SRAM out of the band before (`_rolled_ranges`, `_roll_flags`).
`_chain_joins` runs a concat inside a chain in place.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator

from ..npu_simulator import NpuCost, Piece, band_part
from . import tuning
from .program import (
    INTO,
    KEEP,
    STREAM,
    _Home,
    _Make,
    _Need,
    NpuOp,
    NpuProgram,
    NpuTensor,
    _Unit,
    band_rows,
    _copy_of,
    _copy_unit,
    _homes,
    row_bytes,
)
from .tiling import _candidates


def _chain_ranges(program: NpuProgram, start: int, stop: int, bands: int,
                  index: int, wide: bool = False) -> list[list[tuple[int, int]]] | None:
    """For band `index` of `bands` of the last op's output, the output rows
    [first, end) each op start..stop computes, once per distinct range its
    readers in the chain read (a 1x1 and a 3x3 reader of one tensor read
    different rows: the op runs once for each, so every reader reads a
    buffer whole; with `wide`, once where one range holds the others,
    which are copied out of it, see `_chain_units`); the halo rows are
    computed again by the neighbouring band. None when a band would be
    empty."""
    ops = program.ops
    tensors = program.by_name()
    producer = {ops[k].outputs[0]: k for k in range(start, stop)}
    need: list[list[tuple[int, int]]] = [[] for _ in range(start, stop)]
    need[-1].append(ops[stop - 1].out_band(bands, index))
    for k in range(stop - 1, start - 1, -1):
        ranges = list(dict.fromkeys(need[k - start]))
        if not ranges or any(first >= end for first, end in ranges):
            return None
        widest = (min(first for first, _ in ranges), max(end for _, end in ranges))
        if wide and widest in ranges:
            ranges = [widest]
        need[k - start] = ranges
        for first, end in ranges:
            for n in dict.fromkeys(ops[k].inputs):
                if n in producer and producer[n] < k:
                    need[producer[n] - start].append(ops[k].in_rows(tensors[n], first, end))
    return need


def _rolled_ranges(program: NpuProgram, start: int, stop: int, bands: int, cost: NpuCost
                   ) -> list[list[tuple[int, int]]] | None:
    """Band by band of the last op's output, the output rows [first, end)
    each op start..stop computes in a rolled chain (`_chains`' `rolled`):
    an op that rolls (`_roll_flags`) the rows its readers in the chain read
    this band that no band before computed, another the rows its readers
    read this band (its halo rows computed again, as `_chain_ranges`
    does). A reader's rows that the band before of a rolling op computed
    are copied in SRAM out of that band's buffer, beside the new ones
    (`_chain_units`): a halo row costs a copy, not its MACs again. None
    where some op would compute no row in a band, or a reader would read
    rows older than its producer's band before (a halo taller than a band).
    Worked out once per program (`NpuProgram.memo`)."""
    memo = program.memo("rolled_ranges")
    key = (start, stop, bands, cost)
    if key not in memo:
        memo[key] = _rolled_ranges_of(program, start, stop, bands, _roll_flags(program, start, stop, bands, cost))
    return memo[key]


def _roll_flags(program: NpuProgram, start: int, stop: int, bands: int, cost: NpuCost) -> tuple[bool, ...]:
    """Per op of the rolled chain start..stop in `bands` bands, whether it
    rolls (computes each row once, its readers' halo rows copied out of its
    band before) or computes its halo rows again. A copy moves every row
    its reader reads, the new ones too, twice through the SRAM: an op that
    makes a row cheaply (a convolution over few input channels, a pooling)
    is better computing its halo again (ShuffleNet's stem: its 3x3 over
    the image costs 284 cycles a row, a copy of that row 336). Greedy, the
    last op first: an op stops rolling where that makes the first
    `ROLL_BANDS` band steps compute in fewer cycles (`_rolled_cycles`).
    Worked out once per program (`NpuProgram.memo`)."""
    memo = program.memo("roll_flags")
    key = (start, stop, bands, cost)
    if key not in memo:
        flags = [True] * (stop - start - 1) + [False]
        few = min(bands, tuning.ROLL_BANDS)
        best = _rolled_cycles(program, start, stop, _rolled_ranges_of(program, start, stop, bands, tuple(flags), few),
                              cost)
        for j in range(stop - start - 2, -1, -1):
            flags[j] = False
            cycles = _rolled_cycles(program, start, stop,
                                    _rolled_ranges_of(program, start, stop, bands, tuple(flags), few), cost)
            if cycles < best:
                best = cycles
            else:
                flags[j] = True
        memo[key] = tuple(flags)
    return memo[key]


def _rolled_cycles(program: NpuProgram, start: int, stop: int, every: list[list[tuple[int, int]]] | None,
                   cost: NpuCost) -> float:
    """The cycles the band steps `every` of a rolled chain
    (`_rolled_ranges_of`) cost: each op's compute on its rows, the copies
    its readers read (`_rolled_step`'s "copy" and "two bands"), and the DMA
    of the rows of outside inputs that the band before loaded too (a halo
    computed again reads its input's rows again); inf for None."""
    if every is None:
        return math.inf
    tensors = program.by_name()
    loaded: dict[str, int] = {}  # outside input -> the end of the rows the band before loaded
    cycles = 0
    for i, ranges in enumerate(every):
        ends: dict[str, int] = {}
        first_rows = _first_reads(program, start, stop, every[i - 1]) if i else {}
        for _, op, (first, end), reads in _rolled_step(program, start, stop, ranges, first_rows):
            nbytes = row_bytes(tensors[op.outputs[0]], end - first)
            for t, lo, hi, how, read in reads:
                nbytes += read
                if how == "outside":
                    cycles += cost.dma_cycles(row_bytes(t, max(0, min(hi, loaded.get(t.name, 0)) - lo)))
                    ends[t.name] = max(ends.get(t.name, 0), hi)
                elif how in ("copy", "two bands"):
                    cycles += cost.compute_cycles(0, 2 * read)
            cycles += cost.compute_cycles(math.ceil(op.macs * (end - first) / op.out_rows), nbytes)
        loaded = ends
    return cycles


def _rolled_step(program: NpuProgram, start: int, stop: int, ranges: list[tuple[int, int]],
                 first_rows: dict[str, tuple[int, int]] | None = None
                 ) -> Iterator[tuple[int, NpuOp, tuple[int, int], list[tuple[NpuTensor, int, int, str, int]]]]:
    """Op by op of one band step of the rolled chain start..stop whose ops
    compute the rows `ranges` (`_rolled_ranges_of`; `first_rows`: the band
    its first reader loaded of each outside input the step before,
    `_first_reads`, none for the first step): (its index in the chain, the op,
    its rows, what it reads: (tensor, rows lo, hi, how, bytes)), as
    `_chain_units` serves it. How: "whole" (no window), "outside" (a band
    of an input from outside the chain, loaded with its halo), "copy" (the
    first reader of rows of an inner tensor other than its producer's band,
    or of an outside input's rows inside a band loaded this step), "two
    bands" (the first reader of an outside input's rows out of the band its
    first reader loaded the step before and one loaded this step,
    `_outside_rolled`: a copy, the band before held until then) or "inside"
    (its producer's band itself, a band loaded this step read again, or
    rows another reader's copy made). Nothing of an input that may live in
    an in-place concat's output (`_homes`) is copied: `_chain_units` copies
    none of those (`kept`)."""
    ops = program.ops[start:stop]
    tensors = program.by_name()
    inner = {op.outputs[0]: j for j, op in enumerate(ops[:-1])}  # -> its producer in the chain
    homed = _homed(program)
    first_rows = first_rows or {}
    copies: set[tuple[str, int, int]] = set()
    loaded: dict[str, list[tuple[int, int]]] = {}  # outside input -> the bands loaded this step
    for j, (op, rows) in enumerate(zip(ops, ranges, strict=True)):
        reads: list[tuple[NpuTensor, int, int, str, int]] = []
        for n in dict.fromkeys(op.inputs):
            t = tensors[n]
            if op.window(n) is None:  # read whole (an inner tensor never is: `_chains`)
                reads.append((t, 0, t.rows, "whole", t.size))
                continue
            lo, hi = op.in_rows(t, *rows)
            if n in inner:
                how = "copy" if (lo, hi) != ranges[inner[n]] and (n, lo, hi) not in copies else "inside"
            else:
                here = loaded.setdefault(n, [])
                how = ("inside" if (lo, hi) in here or (n, lo, hi) in copies
                       else "outside" if n in homed
                       else "copy" if any(a <= lo and hi <= b for a, b in here)
                       else "two bands" if n in first_rows and _outside_rolled(first_rows[n], here, lo, hi)
                       else "outside")
                if how == "outside":
                    here.append((lo, hi))
            if how in ("copy", "two bands"):
                copies.add((n, lo, hi))
            reads.append((t, lo, hi, how, row_bytes(t, hi - lo)))
        yield j, op, rows, reads


def _first_reads(program: NpuProgram, start: int, stop: int, ranges: list[tuple[int, int]]
                 ) -> dict[str, tuple[int, int]]:
    """Each input from outside the rolled chain start..stop that an op of
    it reads by a window -> the rows its first reader reads in the band
    step whose ops compute `ranges` (the band that reader loads)."""
    ops = program.ops[start:stop]
    tensors = program.by_name()
    inner = {op.outputs[0] for op in ops[:-1]}
    first: dict[str, tuple[int, int]] = {}
    for op, rows in zip(ops, ranges, strict=True):
        for n in dict.fromkeys(op.inputs):
            if n not in inner and n not in first and op.window(n) is not None:
                first[n] = op.in_rows(tensors[n], *rows)
    return first


def _homed(program: NpuProgram) -> frozenset[str]:
    """The tensors that live in an in-place concat's output where every
    concat that can runs in place (`_homes`): its inputs and its output."""
    memo = program.memo("homed")
    if not memo:
        homes = _homes(program, set())[0]
        memo[None] = frozenset({*homes, *(home.tensor for home in homes.values())})
    return memo[None]


def _rolled_ranges_of(program: NpuProgram, start: int, stop: int, bands: int, roll: tuple[bool, ...],
                      first_bands: int | None = None) -> list[list[tuple[int, int]]] | None:
    """`_rolled_ranges` with the ops that `roll` says roll, worked out (for
    the first `first_bands` band steps only, where given)."""
    ops = program.ops
    tensors = program.by_name()
    count = stop - start
    producer = {ops[k].outputs[0]: k - start for k in range(start, stop - 1)}
    before: list[tuple[int, int]] = [(0, 0)] * count  # each op's range in the band before
    out: list[list[tuple[int, int]]] = []
    for i in range(bands if first_bands is None else first_bands):
        ranges = [(0, 0)] * count
        ranges[-1] = ops[stop - 1].out_band(bands, i)
        lowest, highest = [math.inf] * count, [0] * count  # the rows each op's readers read this band
        for j in range(count - 1, -1, -1):
            if j < count - 1 and roll[j]:
                if highest[j] <= before[j][1] or lowest[j] < before[j][0]:
                    return None
                ranges[j] = (before[j][1], int(highest[j]))
            elif j < count - 1:
                ranges[j] = (int(lowest[j]), int(highest[j]))
            first, end = ranges[j]
            if first >= end:
                return None
            for n in dict.fromkeys(ops[start + j].inputs):
                if n in producer and producer[n] < j:
                    lo, hi = ops[start + j].in_rows(tensors[n], first, end)
                    lowest[producer[n]] = min(lowest[producer[n]], lo)
                    highest[producer[n]] = max(highest[producer[n]], hi)
        out.append(ranges)
        before = ranges
    return out


def _chain_cost(program: NpuProgram, start: int, stop: int, bands: int, tight: bool = False, wide: bool = False,
                limit: int | None = None, rolled: bool = False, cost: NpuCost = NpuCost()
                ) -> tuple[int, int, int, int] | None:
    """(the largest SRAM footprint of one band step, the MACs the bands
    compute in all, the bytes of outside inputs the bands read, the bytes
    rolled bands copy in SRAM) of the chain start..stop in `bands` bands,
    or None. The footprint counts every op's inputs and outputs, so an
    inner band twice (its producer's output, its reader's input): room
    left for the next units' prefetch; with `tight`, each band once (fewer,
    larger bands: see `_chains`); with `wide` (ranges as `_chain_ranges`
    makes them so), the most bytes live at once as the step's units run
    (`_step_peak`): fewer, larger bands still; with `rolled` (ranges as
    `_rolled_ranges` makes them), each op's rows, the band before of each
    op that rolls (until its readers' copies) and the copies; with `rolled`
    and `wide`, the most bytes live at once as the chain's units run
    (`_chain_units`, `_units_peak`). With `limit`, None as soon
    as one band step's footprint is above it (the chain search asks only
    what fits). Worked out once per program (`NpuProgram.memo`): the search
    asks the same again for every way of counting and every share of the
    weights."""
    memo = program.memo("chain_cost")
    key = (start, stop, bands, tight, wide, limit, rolled, cost)
    if key not in memo:
        memo[key] = (_rolled_cost_of(program, start, stop, bands, limit, cost, wide) if rolled
                     else _chain_cost_of(program, start, stop, bands, tight, wide, limit))
    return memo[key]


def _rolled_cost_of(program: NpuProgram, start: int, stop: int, bands: int,
                    limit: int | None, cost: NpuCost, peak: bool = False) -> tuple[int, int, int, int] | None:
    """`_chain_cost` of a rolled chain, worked out (with `peak`, its
    footprint the most bytes live at once, `_units_peak`)."""
    tensors = program.by_name()
    weights = sum(tensors[w].size for w in {w for op in program.ops[start:stop] for w in op.weights})
    every = _rolled_ranges(program, start, stop, bands, cost)
    if every is None:
        return None
    roll = _roll_flags(program, start, stop, bands, cost)
    foot = macs = outside = copied = 0
    for i, ranges in enumerate(every):
        step = 0
        held: set[str] = set()  # outside inputs whose band before stays for a copy out of two bands
        first_rows = _first_reads(program, start, stop, every[i - 1]) if i else {}
        for j, op, (first, end), reads in _rolled_step(program, start, stop, ranges, first_rows):
            out = tensors[op.outputs[0]]
            step += row_bytes(out, end - first) + (row_bytes(out, every[i - 1][j][1] - every[i - 1][j][0])
                                                   if i and roll[j] else 0)
            macs += math.ceil(op.macs * (end - first) / op.out_rows)
            for t, _, _, how, nbytes in reads:
                if how in ("whole", "outside"):  # loaded: the whole tensor, or a band with its halo
                    step += nbytes
                    outside += nbytes
                elif how in ("copy", "two bands"):
                    step += nbytes
                    copied += nbytes
                if how == "two bands" and t.name not in held:  # and the band before it copies out of
                    held.add(t.name)
                    a, b = first_rows[t.name]
                    step += row_bytes(t, b - a)
        foot = max(foot, weights + step)
        if limit is not None and foot > limit and not peak:
            return None
    if peak:  # (`_chain_units` takes an SRAM size only for the signature it shares with `_cascade_units`)
        foot = _units_peak(_chain_units(program, start, stop, bands, 0, rolled=True, cost=cost))
        if limit is not None and foot > limit:
            return None
    return foot, macs, outside, copied


def _units_peak(units: list[_Unit]) -> int:
    """The most bytes live at once as `units` run in order: each piece
    (weights, bands, copies) from the first unit that reads or writes it to
    the last, as the scheduler frees it (a weight read by every band of a
    chain lives throughout)."""
    first: dict[tuple[str, str], int] = {}
    last: dict[tuple[str, str], tuple[int, int]] = {}
    for at, unit in enumerate(units):
        for piece in (*(n.piece for n in unit.reads), *(m.piece for m in unit.writes)):
            first.setdefault((piece.tensor, piece.part), at)
            last[(piece.tensor, piece.part)] = (at, piece.bytes)
    change = [0] * (len(units) + 1)
    for key, at in first.items():
        end, nbytes = last[key]
        change[at] += nbytes
        change[end + 1] -= nbytes
    return max(itertools.accumulate(change), default=0)


def _chain_cost_of(program: NpuProgram, start: int, stop: int, bands: int,
                   tight: bool, wide: bool, limit: int | None) -> tuple[int, int, int, int] | None:
    """`_chain_cost`, worked out."""
    ops = program.ops
    tensors = program.by_name()
    inner = {ops[k].outputs[0] for k in range(start, stop - 1)}
    weights = sum(tensors[w].size for w in {w for op in ops[start:stop] for w in op.weights})
    foot = macs = outside = 0
    for i in range(bands):
        ranges = _chain_ranges(program, start, stop, bands, i, wide)
        if ranges is None:
            return None
        step = 0
        for op, op_ranges in zip(ops[start:stop], ranges, strict=True):
            for first, end in op_ranges:
                for n in dict.fromkeys(op.inputs):
                    t = tensors[n]
                    if op.window(n) is not None:
                        lo, hi = op.in_rows(t, first, end)
                        nbytes = row_bytes(t, hi - lo)
                    else:
                        nbytes = t.size
                    if n not in inner:
                        step += nbytes
                        outside += nbytes
                    elif not tight:
                        step += nbytes
                step += row_bytes(tensors[op.outputs[0]], end - first)
                macs += math.ceil(op.macs * (end - first) / op.out_rows)
        foot = max(foot, weights + (_step_peak(program, start, stop, ranges) if wide else step))
        if limit is not None and foot > limit:
            return None
    return foot, macs, outside, 0


def _step_peak(program: NpuProgram, start: int, stop: int, ranges: list[list[tuple[int, int]]]) -> int:
    """The most bytes of bands (and whole inputs) live at once in one band
    step of the chain start..stop whose ops compute `ranges`
    (`_chain_ranges`), its units run in order: a band of an outside input
    from its first reader to its last, an op's output band from the op to
    its last reader, rows copied out of a larger band (`_chain_units`) at
    their reader, the larger band until then."""
    ops = program.ops[start:stop]
    tensors = program.by_name()
    life: dict[tuple[str, int, int, bool], list[int]] = {}  # piece (copy or not) -> [bytes, first unit, last unit]
    at = 0
    for op, op_ranges in zip(ops, ranges, strict=True):
        for first, end in op_ranges:
            for n in dict.fromkeys(op.inputs):
                t = tensors[n]
                lo, hi = op.in_rows(t, first, end) if op.window(n) is not None else (0, t.rows)
                held = next((key for key in life if key[0] == n and not key[3] and key[1] <= lo and hi <= key[2]), None)
                if held is None:
                    life[(n, lo, hi, False)] = [row_bytes(t, hi - lo), at, at]
                    continue
                life[held][2] = at
                if held[1:3] != (lo, hi):
                    life[(n, lo, hi, True)] = [row_bytes(t, hi - lo), at, at]
            life[(op.outputs[0], first, end, False)] = [row_bytes(tensors[op.outputs[0]], end - first), at, at]
            at += 1
    return max(sum(nbytes for nbytes, first, last in life.values() if first <= u <= last) for u in range(at))


def _chains(program: NpuProgram, sram: int, cost: NpuCost, outside: frozenset[int] = frozenset(),
            tight: bool = False, wide: bool = False, weights: int | None = None,
            concat_starts: bool = True, rolled: bool = False) -> list[tuple[int, int, int]]:
    """(first op, op after the last, row bands) of each chain cascade that
    runs as IR: consecutive ops that each run on a band of output rows,
    each (but the last) writing one activation that only later ops of the
    chain read, each by a window. Band by band, every op computes the rows
    its readers' bands read (`_chain_ranges`; the halo computed again by
    the neighbouring band) in its own SRAM buffer that the reader reads
    whole (or a copy of its rows, `_chain_units`): the tensors in between
    never go to DRAM. A
    chain is kept when the DRAM traffic its inner tensors would cost
    streamed (above a quarter of the SRAM: out and back in) takes more
    cycles than the halo rows read and the MACs computed again. No chain
    holds an op whose index is in `outside` (a concat run in place). A
    chain takes the fewest bands whose step fits `CHAIN_SHARE` of the
    SRAM, its footprint as `_chain_cost` counts it (`tight`, `wide` or
    neither). From each op on, the chain that saves the most is taken, the
    next looked for from its end; with `wide` (each op once per band step,
    the rows its other readers read copied out: `_chain_ranges`), the
    chains that save the most in all. The weights of a chain's ops take
    at most `weights` eighths of the SRAM (None: the first of
    `CHAIN_WEIGHTS`). Without
    `concat_starts`, no chain starts at a concat whose output, in place, is
    assembled in SRAM (`_homes`; its home within `HOME_SHARE` of the SRAM):
    in place it costs nothing, where a chain starting at it copies its
    inputs band by band, loaded back from DRAM, for a gain counted as if
    its output went to DRAM (SqueezeNet's fire8 concat at 1 MiB); such a
    chain can still be the faster (DenseNet-121's second block at 4 MiB),
    so `schedule_scratchpad` tries both. With `rolled`, the ops of a chain
    that roll compute each row once (`_rolled_ranges`, `_roll_flags`), their
    readers' halo rows copied in SRAM out of their band before: a chain's
    gain counts those copies where it counted the MACs computed again, so
    chains of ops with many MACs per row and thin halos (a 1x1 convolution
    feeding a 3x3 one, DenseNet-121's layers) save more; with `rolled` and
    `wide`, the footprint of a band step is the most bytes live at once as
    the chain's units run (`_units_peak`)."""
    if weights is None:
        weights = tuning.CHAIN_WEIGHTS[0]
    ops = program.ops
    tensors = program.by_name()
    no_start: set[int] = set()  # the concats no chain starts at
    if not concat_starts:
        homes, joined = _homes(program, set())
        no_start = {k for k in joined if tensors[homes[ops[k].inputs[0]].tensor].size <= sram * tuning.HOME_SHARE // 8}
    readers: dict[str, list[int]] = {}
    for k, op in enumerate(ops):
        for n in dict.fromkeys(op.inputs):
            readers.setdefault(n, []).append(k)

    def bandable(op: NpuOp) -> bool:
        return op.out_rows > 1 and bool(op.row_windows) and len(op.outputs) == 1

    def options(start: int) -> list[tuple[int, int, int]]:
        """(op after the last, bands, estimated cycles saved) of each chain from `start` worth running."""
        found: list[tuple[int, int, int]] = []
        stop = start + 1
        while (bandable(ops[start]) and start not in outside and start not in no_start
               and stop < min(len(ops), start + tuning.CHAIN_OPS)):
            stop += 1
            if not bandable(ops[stop - 1]) or stop - 1 in outside:
                break
            if sum(tensors[w].size for w in {w for op in ops[start:stop] for w in op.weights}) > sram * weights // 8:
                break
            # the tensors of ops start..stop-1 (but the last) may be read only inside, by windows
            closed = True
            for k in range(start, stop - 1):
                t = tensors[ops[k].outputs[0]]
                later = readers.get(t.name, [])
                if t.kind != "activation" or not later or any(ops[r].window(t.name) is None for r in later if r < stop):
                    closed = None  # never closes
                    break
                if max(later) >= stop:
                    closed = False
            if closed is None:
                break
            if not closed:
                continue
            fits = None
            for bands in _candidates(ops[stop - 1].out_rows):
                found_cost = _chain_cost(program, start, stop, bands, tight, wide, limit=sram * tuning.CHAIN_SHARE // 8,
                                         rolled=rolled, cost=cost)
                if found_cost is not None:
                    fits = (bands, *found_cost[1:])
                    break
            if fits is None:
                continue
            inner = sum(2 * tensors[ops[k].outputs[0]].size for k in range(start, stop - 1)
                        if tensors[ops[k].outputs[0]].size > sram // 4)
            # outside inputs read again for the halos, MACs computed again
            reread = fits[2] - sum(tensors[n].size for k in range(start, stop) for n in dict.fromkeys(ops[k].inputs)
                                   if n not in {ops[j].outputs[0] for j in range(start, stop - 1)})
            extra = max(0, fits[1] - sum(op.macs for op in ops[start:stop]))
            gain = (cost.dma_cycles(inner) - cost.dma_cycles(max(0, reread)) - math.ceil(extra / cost.macs_per_cycle)
                    - cost.compute_cycles(0, 2 * fits[3]))
            if inner and gain > 0:
                found.append((stop, fits[0], gain))
        return found

    found: list[tuple[int, int, int]] = []
    if wide:  # the chains that save the most in all: the best from each op on, the last op first
        best: list[tuple[int, tuple[int, int, int] | None]] = [(0, None)] * (len(ops) + 1)
        for start in range(len(ops) - 1, -1, -1):
            best[start] = max([(best[start + 1][0], None)] + [(gain + best[stop][0], (start, stop, bands))
                                                             for stop, bands, gain in options(start)],
                              key=lambda b: b[0])
        start = 0
        while start < len(ops):
            chain = best[start][1]
            if chain is None:
                start += 1
            else:
                found.append(chain)
                start = chain[1]
        return found
    start = 0
    while start < len(ops):  # from each op on, the chain that saves the most, then on from its end
        chain = max(options(start), key=lambda o: o[2], default=None)
        if chain is not None:
            found.append((start, chain[0], chain[1]))
            start = chain[0]
        else:
            start += 1
    return found


def _chain_joins(program: NpuProgram, start: int, stop: int, units: list[_Unit],
                 homes: dict[str, _Home]) -> list[_Unit]:
    """The units of the chain start..stop with each concat in it run in
    place: an op of the chain (not the last) joining its inputs along the
    channels (`NpuOp.joins`), each input written by an op of the chain and
    read by the concat alone. The concat's units go; each input's band of
    rows is written `into` the concat's band buffer of the same rows, at
    its channels (`ch{first}:{end}/{channels}|rows{lo}:{hi}`), which the
    concat's readers read as before. Each input's home goes into `homes`."""
    ops = program.ops
    readers = program.reader_counts()
    inside = {n for op in ops[start:stop] for n in op.outputs}
    joined: dict[str, str] = {}
    renamed: dict[str, tuple[str, int, int, int]] = {}
    for k in range(start, stop - 1):
        op = ops[k]
        if not op.joins or any(n not in inside or readers.get(n) != 1 or n in joined for n in op.inputs):
            continue
        at, total = 0, sum(op.joins)
        for n, c in zip(op.inputs, op.joins, strict=True):
            renamed[n] = (op.outputs[0], at, at + c, total)
            homes[n] = _Home(op.outputs[0], at, at + c, total)
            at += c
        joined[op.name] = op.outputs[0]
    if not joined:
        return units
    out = []
    for unit in units:
        if unit.op in joined:
            continue
        writes = []
        for m in unit.writes:
            home = renamed.get(m.piece.tensor)
            if home is None:
                writes.append(m)
                continue
            part = band_part(home[1], home[2], home[3], m.piece.part)
            writes.append(_Make(Piece(home[0], part, m.piece.bytes), INTO))
        out.append(_Unit(unit.op, unit.macs, unit.reads, tuple(writes), unit.last_of_op, unit.touched))
    return out


def _chain_units(program: NpuProgram, start: int, stop: int, bands: int, sram: int,
                 kept: frozenset[str] = frozenset(), wide: bool = False, rolled: bool = False,
                 cost: NpuCost = NpuCost()) -> list[_Unit]:
    """The chain start..stop (see `_chains`) band by band: each op on each
    row range `_chain_ranges` gives, reading its outside inputs by rows
    from DRAM (`rows{lo}:{hi}`) and its inner inputs from SRAM (kept: the
    same `rows{lo}:{hi}` piece its producer wrote), the last op's band
    streamed out as a row tile. An outside input that a later op of the
    band step reads fewer rows of than an earlier op loaded (a residual
    unit's input: with the halo for its first convolution, without it for
    the residual added by its last) is not loaded again: right after the
    earlier op, a copy unit (`copy_rows`) copies those rows out of the
    loaded band, in SRAM, into a buffer of their own that the later op
    reads whole (rows a band loaded this step holds exactly: that band, as
    it is). Not for the tensors in `kept` (those living in an
    in-place concat's output, whose pieces are channel bands). With `wide`
    (`_chain_ranges`), an inner tensor's rows that a reader reads out of
    the larger range its producer computed are copied the same way. With
    `rolled` (`_rolled_ranges`), each op computes its new rows only, and a
    reader of other rows reads a copy made right before it, of those rows
    out of its producer's band before and this band (one copy unit reading
    both: `rows{lo}:{hi}|copy`); so does a later reader of an outside
    input whose rows lie in the band its first reader loaded the step
    before and one loaded this step (`_outside_rolled`: a residual read one
    row behind the unit's first convolution, for the halo of a 3x3 between
    them), which is loaded once."""
    tensors = program.by_name()
    ops = program.ops[start:stop]
    producer = {op.outputs[0]: k for k, op in enumerate(ops[:-1])}
    units: list[_Unit] = []
    made: set[tuple[int, int, int]] = set()
    every = _rolled_ranges(program, start, stop, bands, cost) if rolled else None
    loaded: dict[str, list[tuple[int, int, int]]] = {}
    for i in range(bands):
        ranges = [[r] for r in every[i]] if every is not None else _chain_ranges(program, start, stop, bands, i, wide)
        assert ranges is not None
        # each unit of the band step, then the copies made right after it (first: those made before it)
        step: list[list[_Unit]] = [[]]
        # outside input -> the rows its first reader loaded in the band step before (rolled: they stay for a copy)
        before = {n: (a, b) for n, ((a, b, _), *_) in loaded.items()} if every is not None else {}
        loaded = {}  # outside input -> (lo, hi, unit in the step)
        copies: set[Piece] = set()
        for k, (op, op_ranges) in enumerate(zip(ops, ranges, strict=True)):
            for first, end in op_ranges:
                if (k, first, end) in made:  # an earlier band made these rows: its buffer serves again
                    continue
                made.add((k, first, end))
                reads: list[_Need] = []
                for n in dict.fromkeys(op.inputs):
                    t = tensors[n]
                    if op.window(n) is None:
                        reads.append(_Need(Piece(n, "all", t.size), False))
                        continue
                    lo, hi = op.in_rows(t, first, end)
                    piece = Piece(n, f"rows{lo}:{hi}", row_bytes(t, hi - lo))
                    if every is not None and n in producer:
                        reads.append(_Need(_rolled_read(every, i, producer[n], piece, step, copies, op.name), True))
                        continue
                    if n in producer:  # the rows its producer computes in this band step, or a larger range
                        a, b = (lo, hi) if (lo, hi) in ranges[producer[n]] else next(
                            (a, b) for a, b in ranges[producer[n]] if a <= lo and hi <= b)
                        source = (a, b, len(step) - 1) if (a, b) != (lo, hi) else None
                    else:
                        here = [(a, b) for a, b, _ in loaded.get(n, ())]
                        # a band loaded this step read again as it is; rows inside one copied out of it
                        source = None if (lo, hi) in here else next(
                            ((a, b, at) for a, b, at in loaded.get(n, ()) if a <= lo and hi <= b), None)
                        if (source is None and (lo, hi) not in here and n in before and n not in kept
                                and (bands_of := _outside_rolled(before[n], here, lo, hi)) is not None):
                            # rows of the band before and this one (a residual read one row behind its
                            # unit's first convolution): copied out of both, loaded once
                            reads.append(_Need(_copy_out_of(piece, bands_of, step, copies, op.name), True))
                            continue
                    if source is not None and n not in kept:
                        a, b, at = source
                        copy = _copy_of(piece)
                        if copy not in copies:  # two readers of the same rows share one copy
                            copies.add(copy)
                            band = Piece(n, f"rows{a}:{b}", row_bytes(t, b - a))
                            step[at].append(_copy_unit(op.name, _Need(band, True), _Make(copy, KEEP)))
                        piece = copy
                    elif n not in producer:
                        loaded.setdefault(n, []).append((lo, hi, len(step)))
                    reads.append(_Need(piece, True))
                reads += [_Need(Piece(w, "all", tensors[w].size), False) for w in dict.fromkeys(op.weights)]
                out = tensors[op.outputs[0]]
                if k < len(ops) - 1:
                    write = _Make(Piece(out.name, f"rows{first}:{end}", row_bytes(out, end - first)), KEEP)
                else:
                    write = _Make(Piece(out.name, f"tile{i}.0/{bands}x1", row_bytes(out, end - first)), STREAM)
                step.append([_Unit(op.name, math.ceil(op.macs * (end - first) / op.out_rows), tuple(reads), (write,),
                                   i == bands - 1 and (first, end) == op_ranges[-1])])
        units += [unit for group in step for unit in group]
    return units


def _outside_rolled(before: tuple[int, int], loaded: Iterable[tuple[int, int]], lo: int, hi: int
                    ) -> list[tuple[int, int]] | None:
    """The bands of an outside input of a rolled chain that hold the rows
    [lo, hi) a reader reads, where two do: `before` (the rows its first
    reader loaded the band step before) and, right after it, one of the
    bands `loaded` this step, [lo, hi) in neither alone; else None."""
    a, b = before
    for first, end in loaded:
        if a <= lo < first == b < hi <= end:
            return [(a, b), (first, end)]
    return None


def _copy_out_of(piece: Piece, bands: list[tuple[int, int]], step: list[list[_Unit]], copies: set[Piece],
                 op: str) -> Piece:
    """The copy of `piece` (rows of a tensor) made right before its reader
    (a unit of `op`, the last group of `step`) out of the `bands` of that
    tensor in SRAM that hold its rows, each at its rows (one copy unit: a
    rolled reader's rows out of its producer's band before and this one,
    `_rolled_read`; an outside input's out of two loaded bands); two
    readers of the same rows share one copy."""
    copy = _copy_of(piece)
    if copy not in copies:
        copies.add(copy)
        lo, hi = band_rows(piece.part)  # type: ignore[misc]
        per_row = piece.bytes // (hi - lo)
        sources = tuple(_Need(Piece(piece.tensor, f"rows{a}:{b}", per_row * (b - a)), True)
                        for a, b in bands if a < hi and lo < b)
        step[-1].append(_Unit(op, 0, sources, (_Make(copy, KEEP),), False, 2 * copy.bytes))
    return copy


def _rolled_read(every: list[list[tuple[int, int]]], band: int, made_by: int, piece: Piece,
                 step: list[list[_Unit]], copies: set[Piece], op: str) -> Piece:
    """What a reader in a rolled chain (`_chain_units`) reads for `piece`,
    rows of a tensor its producer (`made_by` in the chain) computes band by
    band (`every`: `_rolled_ranges`): the producer's band itself, or a copy
    of those rows out of it and the producer's band before, made by a copy
    unit of `op` right before the reader (the last group of `step`)."""
    lo, hi = band_rows(piece.part)  # type: ignore[misc]
    a, b = every[band][made_by]
    if (lo, hi) == (a, b):
        return Piece(piece.tensor, f"rows{a}:{b}", piece.bytes)
    # the producer's band before and this (this alone where it holds them: a producer that does not roll)
    return _copy_out_of(piece, ([every[band - 1][made_by]] if band and lo < a else []) + [(a, b)], step, copies, op)

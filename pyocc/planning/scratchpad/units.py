"""The program as units of work (`_units`), the input of the scheduler.

Each op is one unit, or its tiles (tiling.py), or part of a chain
(chains.py) or a byte-share cascade (cascades.py); concats run in place
where their output's home fits (`_rehome`); a reader of an op's tiles may
run on the same blocks beside them (`_channel_chains`, `_row_chains`);
sibling readers of one input share its bands (`_sibling_bands`); and
outputs that a later unit reads whole are assembled in SRAM
(`_assembled`) instead of going out to DRAM and back.
"""

from __future__ import annotations

import dataclasses

from ..npu_simulator import NpuCost, Piece, band_part
from ..problem import PlanningError
from . import tuning
from .cascades import _cascade_units, _cascades
from .chains import _chain_joins, _chain_units, _chains
from .program import (
    ASSEMBLED,
    INTO,
    KEEP,
    KEEP_STORE,
    STREAM,
    WHOLE,
    _Home,
    _Make,
    _Need,
    NpuOp,
    NpuProgram,
    NpuTensor,
    _Unit,
    band_rows,
    _block_bytes,
    channel_range,
    _copy_of,
    _copy_unit,
    _homes,
    _own_buffer,
    partial_sums,
    row_bytes,
    _split,
    split_range,
    tile_rows,
)
from .tiling import _banded_block, _blocks_alone, _choose_tiling


def _units(program: NpuProgram, sram: int, cost: NpuCost, cascades_too: bool = True,
           chains: bool = True, joins_first: bool = False, home_fit: int = 0, in_place: bool = True,
           sum_bands: bool = False, tight_chains: bool = False, wide_chains: bool = False,
           rolled_chains: bool = False, chain_weights: int | None = None, concat_starts: bool = True,
           channel_chains: bool = True, stream_weights: bool = True,
           streamed: frozenset[str] = frozenset(), join_siblings: bool = False, exact_tiles: bool = False,
           split: frozenset[str] = frozenset(),
           ) -> tuple[list[_Unit], dict[str, tuple[int, int]], dict[str, _Home]]:
    """Each op as one unit, or as its tiles when it does not fit; runs of
    row-splittable ops with a tensor too big for SRAM as cascades (unless
    not `cascades_too`: then chains of ops as chain cascades, see
    `_chains`, unless not `chains`, and concats in place, see `_homes`:
    those outside the chains, or with `joins_first` every concat that can,
    the chains then found around them; `home_fit`: see `_rehome`'s `fit`;
    none without `in_place`); with `sum_bands`, an op that reads a concat's
    output in place sums over its bands when that fits (`_band_blocks`);
    `tight_chains`, `wide_chains`, `rolled_chains`, `chain_weights`,
    `concat_starts`: the chains as `_chains`' `tight`, `wide`, `rolled`,
    `weights`, `concat_starts`; without
    cascades, an op's reader runs on its blocks of output channels or its
    bands of rows beside it where it can (`_channel_chains`, `_row_chains`),
    unless not `channel_chains` (an op whose reader reads it channel for
    channel is then tiled by channel blocks alone for that, where its estimate
    is no worse: `_blocks_alone`); an op whose weights take more than
    `STREAM_WEIGHTS_SHARE` of the SRAM, or more than
    `STREAM_SLOW_WEIGHTS_SHARE` and load slower than it computes, is
    tiled (its weights streamed in blocks) even where it fits whole,
    unless not `stream_weights`, and so is every op named in `streamed`
    that can be split by channels (`_stream_stalled`), and so is every op
    named in `split`, on its best tiling whose weights load in blocks
    (`_split_late`; an op whose weights cannot stream, or that does not fit
    whole, runs as without); with
    `join_siblings`, an op that fits whole runs on the bands of rows of an
    earlier reader of its input where `_sibling_rows` finds one;
    `exact_tiles`: the tilings chosen as `_chosen_tiling`'s `exact`; also
    returns the op tilings and the in-place concats' homes."""
    tensors = program.by_name()
    units: list[_Unit] = []
    tiling: dict[str, tuple[int, int]] = {}
    homes: dict[str, _Home] = {}
    chain_homes: dict[str, _Home] = {}
    joined: set[int] = set()
    if cascades_too:
        cascades = {start: (stop, bands, _cascade_units) for start, stop, bands in _cascades(program, sram)}
    else:
        if not in_place:
            found = _chains(program, sram, cost, tight=tight_chains, wide=wide_chains, weights=chain_weights,
                            concat_starts=concat_starts, rolled=rolled_chains) if chains else []
        elif joins_first:
            homes, joined = _homes(program, set())
            found = _chains(program, sram, cost, frozenset(joined), tight_chains, wide_chains,
                            chain_weights, concat_starts=concat_starts, rolled=rolled_chains) if chains else []
        else:
            found = _chains(program, sram, cost, tight=tight_chains, wide=wide_chains, weights=chain_weights,
                            concat_starts=concat_starts, rolled=rolled_chains) if chains else []
            # concats in place (not inside a chain cascade, whose bands are rows)
            homes, joined = _homes(program, {k for start, stop, _ in found for k in range(start, stop)})
        cascades = {start: (stop, bands, _chain_units) for start, stop, bands in found}
    homed = {*homes, *(h.tensor for h in homes.values())}
    joined_outputs = {program.ops[k].outputs[0] for k in joined}
    readers = program.reader_counts()
    # ops whose reader may run on their blocks of output channels (`_channel_chains`): see `_blocks_alone`
    block_fed = ({before.name for before, after in zip(program.ops, program.ops[1:], strict=False)
                  if _channelwise_reader(before, after, tensors, readers, homed)}
                 if not cascades_too and channel_chains else set())
    index = 0
    while index < len(program.ops):
        if index in joined:  # an in-place concat: its inputs' producers wrote its bands
            index += 1
            continue
        if index in cascades:
            stop, bands, make = cascades[index]
            made = (make(program, index, stop, bands, sram, frozenset(homed), wide_chains, rolled_chains, cost)
                    if make is _chain_units
                    else make(program, index, stop, bands, sram))
            units += _chain_joins(program, index, stop, made, chain_homes) if make is _chain_units and in_place else made
            for op in program.ops[index:stop]:
                tiling[op.name] = (bands, 1)
            index = stop
            continue
        op = program.ops[index]
        index += 1
        names = list(dict.fromkeys((*op.inputs, *op.weights, *op.outputs)))
        whole = _Unit(
            op.name, op.macs,
            tuple(_Need(Piece(n, "all", tensors[n].size), False) for n in dict.fromkeys((*op.inputs, *op.weights))),
            tuple(_Make(Piece(n, "all", tensors[n].size), WHOLE) for n in dict.fromkeys(op.outputs)),
            True,
        )
        share = tuning.WHOLE_SHARE_CASCADED if cascades_too else tuning.WHOLE_SHARE
        fits = sum(tensors[n].size for n in names) <= sram * share // 8
        # its weights stream in blocks of output channels even when it fits whole: above `STREAM_WEIGHTS_SHARE`,
        # or above `STREAM_SLOW_WEIGHTS_SHARE` when they take longer to load than the op computes
        weight_bytes = sum(tensors[n].size for n in dict.fromkeys(op.weights))
        streams = (fits and stream_weights and not cascades_too and op.channels > 1
                   and (op.name in streamed or op.name in split
                        or weight_bytes > sram * tuning.STREAM_WEIGHTS_SHARE // 8
                        or weight_bytes > sram * tuning.STREAM_SLOW_WEIGHTS_SHARE // 8 and cost.dma_cycles(weight_bytes)
                        > cost.compute_cycles(op.macs, sum(tensors[n].size for n in names))))
        sibling = _sibling_rows(program, index - 1, tiling, sram) if fits and not streams and join_siblings else None
        if fits and not streams and sibling is None:
            units.append(whole)
            continue
        in_bands = None
        if any(n in homed for n in op.reduced_inputs):  # parts of it are channel bands: blocks of those bands
            in_bands = _band_blocks(op, homes, joined_outputs) if sum_bands else None
            if in_bands is None:
                op = dataclasses.replace(op, in_channels=1)
        if any(n in homed for n in op.channel_inputs):
            op = dataclasses.replace(op, channel_inputs=tuple(n for n in op.channel_inputs if n not in homed))
        if sibling is not None:  # its sibling's bands, its outputs streamed
            r, c, rows_outer, big, blocks = sibling, 1, True, 0, 1
        else:
            try:
                r, c, rows_outer, big, blocks = _choose_tiling(op, tensors, sram, cost, in_bands, exact_tiles,
                                                               op.name in split)
            except PlanningError:
                if not streams:
                    raise
                units.append(whole)  # no tiling of its weights fits beside the rest: whole after all
                continue
            if streams and r * c * blocks == 1:  # the best tiling is one tile: whole, as before
                units.append(whole)
                continue
        if r > 1 and op.name in block_fed:
            r, c, rows_outer, big, blocks = _blocks_alone(op, tensors, sram, cost, in_bands,
                                                          (r, c, rows_outer, big, blocks), op.name in split)
        tiling[op.name] = (r, c)
        ranges = ([(lo, hi) for lo, hi, _ in in_bands] if in_bands is not None and blocks == len(in_bands)
                  else [split_range(op.in_channels, blocks, m) for m in range(blocks)])
        leaves = [n for _, _, n in in_bands] if in_bands is not None and blocks == len(in_bands) else None
        order = [(i, j) for i in range(r) for j in range(c)] if rows_outer else [(i, j) for j in range(c) for i in range(r)]
        for k, (i, j) in enumerate(order):
            reads: list[_Need] = []
            for n in dict.fromkeys(op.inputs):
                t = tensors[n]
                if _banded_block(op, n, r, c) and n not in homed:
                    lo, hi = op.in_band(t, r, i)
                    first, end = split_range(op.channels, c, j)
                    reads.append(_Need(Piece(n, f"rows{lo}:{hi}|in{first}:{end}/{op.channels}",
                                             _block_bytes(row_bytes(t, hi - lo), op.channels, c, j)), True))
                elif r > 1 and op.window(n) is not None:
                    lo, hi = op.in_band(t, r, i)
                    # named by its rows: two ops (or bands) that read the same rows share it
                    reads.append(_Need(Piece(n, f"rows{lo}:{hi}", row_bytes(t, hi - lo)), True))
                elif r == 1 and c > 1 and n in op.channel_inputs and t.size > big and n not in homed:
                    # its block (or the whole); not a concat's band or output in place, whose parts are channel bands
                    reads.append(_Need(Piece(n, f"block{j}/{c}", _block_bytes(t.size, op.channels, c, j)), True))
                else:
                    reads.append(_Need(Piece(n, "all", t.size), False))
            for n in dict.fromkeys(op.weights):
                w = tensors[n]
                if c == 1 or n in op.whole_weights:
                    reads.append(_Need(Piece(n, "all", w.size), False))
                else:
                    reads.append(_Need(Piece(n, f"block{j}/{c}", _block_bytes(w.size, op.channels, c, j)), True))
            writes = tuple(
                _Make(Piece(n, f"tile{i}.{j}/{r}x{c}",
                            _block_bytes(tensors[n].size, op.channels, c, j) if r == 1
                            else _block_bytes(row_bytes(tensors[n], op.out_band(r, i)[1] - op.out_band(r, i)[0]),
                                              op.channels, c, j)),
                      STREAM if tensors[n].size > big else WHOLE)
                for n in dict.fromkeys(op.outputs)
            )
            unit = _Unit(op.name, _split(op.macs, r * c, k), tuple(reads), writes, k == len(order) - 1)
            units += _reduction_units(op, unit, tensors, ranges, big, leaves) if blocks > 1 else [unit]
    if not cascades_too and channel_chains:
        units = _channel_chains(program, units, tiling, homed, sram)
        units = _row_chains(program, units, tiling, homed)
    return _rehome(units, homes, tensors, sram, home_fit), tiling, {**homes, **chain_homes}


def _channelwise_reader(before: NpuOp, op: NpuOp, tensors: dict[str, NpuTensor], readers: dict[str, int],
                        homed: set[str]) -> bool:
    """True when `op` reads only the one output of `before` (the op just
    before it), channel for channel (no weights, the same channels, not
    grouped: a pooling), nothing else reads that output, and neither it
    nor `op`'s output lives in an in-place concat (`homed`): then `op` may
    run on `before`'s blocks of output channels (`_channel_chains`).
    `readers`: `NpuProgram.reader_counts`."""
    made = before.outputs[0] if len(before.outputs) == 1 else None
    return (made is not None and op.inputs == (made,) and len(op.outputs) == 1 and not op.weights
            and made in op.channel_inputs and op.channels == before.channels and op.channel_groups == 1
            and readers.get(made) == 1 and tensors[made].kind == "activation" and made not in homed
            and op.outputs[0] not in homed)


def _channel_chains(program: NpuProgram, units: list[_Unit], tiling: dict[str, tuple[int, int]],
                    homed: set[str], sram: int) -> list[_Unit]:
    """`units` with the op right after an op tiled by blocks of output
    channels run block by block beside it, each block right after the tile
    that makes it, when it reads nothing else of the producer's output: a
    reader channel by channel (`_channelwise_reader`: a global pool after
    the last convolution, a max pool), until then run whole or in blocks
    of its own, runs on the same blocks (`_units` tiles the producer by
    channel blocks alone for it where that is no slower: `_blocks_alone`);
    a reader summing over
    its input channels (a 1x1 convolution after a residual block), until
    then in one output tile, sums over the producer's blocks (`_reduction_units`,
    its partial sums kept in SRAM) when those sums, two blocks of its
    filters and a tile fit in `REDUCTION_CHAIN_SHARE` of the SRAM, and,
    beside the producer's tile and the next block it streams, in
    `WHOLE_SHARE` of it (Inception v2 at 256 KiB found no room for a whole
    input of the producer's without that). The tile
    stays in SRAM until that block read it (`keep`; stored too when later
    ops read it: `keep+store`) instead of going out to DRAM and coming back.
    A channelwise reader's output is made whole in SRAM, or streamed out
    block by block when above an eighth of the SRAM. `tiling` records the
    channelwise reader's blocks."""
    tensors = program.by_name()
    readers = program.reader_counts()
    for before, op in zip(program.ops, program.ops[1:], strict=False):
        made = before.outputs[0] if len(before.outputs) == 1 else None
        rows, blocks = tiling.get(before.name, (1, 1))
        own = tiling.get(op.name, (1, 1))  # the reader's own tiling: whole, or (a pooling) blocks of channels
        if (made is None or rows != 1 or blocks == 1 or own[0] != 1 or op.inputs != (made,)
                or len(op.outputs) != 1 or tensors[made].kind != "activation" or made in homed
                or op.outputs[0] in homed):
            continue
        channelwise = _channelwise_reader(before, op, tensors, readers, homed)
        summed = own == (1, 1) and op.reduced_inputs == (made,) and op.in_channels == before.channels
        parts = [f"tile0.{j}/1x{blocks}" for j in range(blocks)]
        found = _reader_after_tiles(units, before, op, made, parts) if channelwise or summed else None
        if found is None:
            continue
        reader, tile_units = found
        result = tensors[op.outputs[0]]
        if channelwise:
            mode = STREAM if result.size > sram // 8 else WHOLE
            parts = [Piece(result.name, f"tile0.{j}/1x{blocks}", _block_bytes(result.size, op.channels, blocks, j))
                     for j in range(blocks)]
            made_units = [_Unit(op.name, _split(op.macs, blocks, j), (), (_Make(parts[j], mode),), j == blocks - 1)
                          for j in range(blocks)]
        else:
            (final,) = units[reader[-1]].writes
            whole = _Unit(op.name, op.macs,
                          (_Need(Piece(made, "all", tensors[made].size), True),
                           *(_Need(Piece(w, "all", tensors[w].size), False) for w in dict.fromkeys(op.weights))),
                          (_Make(Piece(result.name, "tile0.0/1x1", result.size), final.mode),), True)
            ranges = [split_range(before.channels, blocks, j) for j in range(blocks)]
            made_units = _reduction_units(op, whole, tensors, ranges, 0)
            filters = max(sum(n.piece.bytes for n in u.reads if n.piece.tensor in op.weights) for u in made_units)
            tile = max(_block_bytes(tensors[made].size, before.channels, blocks, j) for j in range(blocks))
            # the producer's tile beside them: its own operands, and the next block of what it streams
            producing = max(units[k].sram_bytes + max((n.piece.bytes for n in units[k].reads if n.stream), default=0)
                            for k in tile_units)
            if (result.size + 2 * filters + tile > sram * tuning.REDUCTION_CHAIN_SHARE // 8
                    or producing + result.size + 2 * filters > sram * tuning.WHOLE_SHARE // 8):
                continue
        units = _beside(units, reader, made, tile_units, made_units,
                        KEEP if readers.get(made) == 1 else KEEP_STORE)
        if channelwise:
            tiling[op.name] = (1, blocks)
    return units


def _row_chains(program: NpuProgram, units: list[_Unit], tiling: dict[str, tuple[int, int]],
                homed: set[str]) -> list[_Unit]:
    """`units` with the op right after an op tiled by bands of rows alone
    run band by band beside it, each band right after the tile that makes
    it, when it reads nothing else of the producer's output and reads it
    row for row (a 1x1 window of stride 1: a 1x1 convolution), tiled by
    rows alone too: it takes the producer's bands, reads each tile where it
    was written (`keep`; stored too when later ops read the tensor:
    `keep+store`) instead of loading it back from DRAM."""
    tensors = program.by_name()
    readers = program.reader_counts()
    for before, op in zip(program.ops, program.ops[1:], strict=False):
        made = before.outputs[0] if len(before.outputs) == 1 else None
        rows, blocks = tiling.get(before.name, (1, 1))
        own = tiling.get(op.name, (1, 1))
        if (made is None or rows == 1 or blocks != 1 or own[1] != 1 or op.inputs != (made,) or len(op.outputs) != 1
                or op.window(made) != (1, 1, 0) or op.out_rows != tensors[made].rows
                or tensors[made].kind != "activation" or made in homed or op.outputs[0] in homed):
            continue
        found = _reader_after_tiles(units, before, op, made, [f"tile{i}.0/{rows}x1" for i in range(rows)])
        if found is None or len(found[0]) != own[0]:
            continue
        reader, tile_units = found
        (first_write,) = units[reader[0]].writes
        if first_write.mode != STREAM:  # a band of rows is no contiguous part of a whole tensor's buffer
            continue
        result = tensors[op.outputs[0]]
        others = tuple(n for n in units[reader[0]].reads if n.piece.tensor != made)  # its weights, whole
        bands = [op.out_band(rows, i) for i in range(rows)]
        reading = [_Unit(op.name, _split(op.macs, rows, i), others,
                         (_Make(Piece(result.name, f"tile{i}.0/{rows}x1", row_bytes(result, end - first)), STREAM),),
                         i == rows - 1)
                   for i, (first, end) in enumerate(bands)]
        units = _beside(units, reader, made, tile_units, reading,
                        KEEP if readers.get(made) == 1 else KEEP_STORE)
        tiling[op.name] = (rows, 1)
    return units


def _sibling_rows(program: NpuProgram, k: int, tiling: dict[str, tuple[int, int]], sram: int) -> int | None:
    """The bands of rows of an earlier op that reads an input of op `k`
    through the same window and is tiled by bands of rows alone, where
    that input takes more than `SIBLING_JOIN_SHARE` eighths of the SRAM
    and op `k` has as many output rows and can run on bands of rows: op
    `k`, which fits whole, may then run on the same bands beside it
    (`_sibling_bands`) instead of loading that input whole again. None
    where there is no such op."""
    op = program.ops[k]
    tensors = program.by_name()
    if op.out_rows <= 1 or not op.row_windows:
        return None
    for earlier in reversed(program.ops[:k]):
        rows, blocks = tiling.get(earlier.name, (1, 1))
        if rows > 1 and blocks == 1 and earlier.out_rows == op.out_rows and any(
                op.window(n) is not None and earlier.window(n) == op.window(n)
                and tensors[n].size > sram * tuning.SIBLING_JOIN_SHARE // 8 for n in op.inputs):
            return rows
    return None


def _sibling_bands(program: NpuProgram, units: list[_Unit], tiling: dict[str, tuple[int, int]], sram: int
                   ) -> list[_Unit]:
    """`units` with the bands of rows of sibling readers interleaved, or
    `units` itself where there are none: ops tiled by bands of rows alone
    whose band i reads the same pieces of activations (Inception's 1x1
    convolutions of a module's input, band by band), so that each band is
    loaded once for all of them instead of once per op. A later sibling
    moves up beside the first where all it reads was made before the
    first; each of them reads nothing else but its weights, whole, and
    streams out one output tile per band; and their weights, a band
    (double-buffered) and their output tiles (double-buffered) fit in
    `SIBLING_SHARE` eighths of the SRAM."""
    tensors = program.by_name()
    made_at = {n: k for k, op in enumerate(program.ops) for n in op.outputs}
    at = {op.name: k for k, op in enumerate(program.ops)}
    by_op: dict[str, list[int]] = {}
    for k, unit in enumerate(units):
        by_op.setdefault(unit.op, []).append(k)

    def band_reads(op: NpuOp) -> tuple[frozenset[tuple[str, str]], ...] | None:
        """Per unit of `op`, the activation pieces it reads, when its units
        are its bands of rows, one after the other, each reading bands of
        rows and its weights whole and streaming out one tile."""
        rows, blocks = tiling.get(op.name, (1, 1))
        ks = by_op.get(op.name, [])
        if rows == 1 or blocks != 1 or len(ks) != rows or ks != list(range(ks[0], ks[0] + rows)):
            return None
        found = []
        for k in ks:
            unit = units[k]
            pieces = frozenset((n.piece.tensor, n.piece.part) for n in unit.reads if n.piece.tensor not in op.weights)
            if (len(unit.writes) != 1 or unit.writes[0].mode != STREAM or not pieces
                    or any(band_rows(part.rpartition("|")[2]) is None for _, part in pieces)
                    or any(n.piece.part != "all" for n in unit.reads if n.piece.tensor in op.weights)):
                return None
            found.append(pieces)
        return tuple(found)

    def footprint(group: list[NpuOp]) -> int:
        band = max(sum(n.piece.bytes for n in units[k].reads if n.piece.part != "all") for k in by_op[group[0].name])
        return 2 * band + sum(2 * max(units[k].writes[0].piece.bytes for k in by_op[op.name])
                              + sum(tensors[w].size for w in dict.fromkeys(op.weights)) for op in group)

    reads = {op.name: found for op in program.ops if (found := band_reads(op)) is not None}
    readers: dict[tuple[frozenset[tuple[str, str]], ...], list[NpuOp]] = {}
    for op in program.ops:
        if op.name in reads:
            readers.setdefault(reads[op.name], []).append(op)
    taken: set[str] = set()
    groups: list[list[NpuOp]] = []
    for op in program.ops:
        if op.name not in reads or op.name in taken:
            continue
        k = at[op.name]
        group = [op]
        for later in readers[reads[op.name]]:
            if (at[later.name] > k and later.name not in taken and all(made_at.get(n, -1) < k for n in later.inputs)
                    and footprint([*group, later]) <= sram * tuning.SIBLING_SHARE // 8):
                group.append(later)
        if len(group) > 1:
            taken |= {g.name for g in group}
            groups.append(group)
    if not groups:
        return units
    moved: dict[int, list[_Unit]] = {}  # the first sibling's first unit -> the group's units, interleaved
    dropped: set[int] = set()
    for group in groups:
        ks = [by_op[g.name] for g in group]
        moved[ks[0][0]] = [units[each[i]] for i in range(len(ks[0])) for each in ks]
        dropped |= {k for each in ks for k in each}
    out: list[_Unit] = []
    for k, unit in enumerate(units):
        if k in moved:
            out += moved[k]
        elif k not in dropped:
            out.append(unit)
    return out


def _assembled(program: NpuProgram, units: list[_Unit], sram: int, slices: bool = True, tiles: bool = False
               ) -> list[_Unit]:
    """`units` with the output of each op run on bands of rows (tiled, or the
    last op of a chain cascade; with `tiles`, also an op run on tiles, each a
    band of rows of a block of channels of one image, and an op summing its
    tiles over blocks of its input channels, whose last sum is the tile) that
    a later unit reads whole assembled in SRAM instead of streamed out, where
    it is an activation of `ASSEMBLE_SHARE` eighths of the SRAM at most: each
    band goes into a buffer of its own (`keep`), and right after it an
    assembling unit copies it (SRAM to SRAM, one strided copy: each byte read
    and written) into its rows of the whole tensor's buffer
    (`rows{lo}:{hi}|assembled`, `whole`; a tile's
    `rows{lo}:{hi}|ch{first}:{end}|assembled`, those rows of its channels). A
    band of rows is no contiguous part of the whole tensor, so the op cannot
    write it there itself; streamed out, it was loaded back whole by its
    reader once the last band's store had ended, the reader waiting for it
    (AlexNet's max pools; Inception v2's 1x1 reduces, run on the bands of
    their module's input; DenseNet-121's 1x1 convolutions in its blocks 3 and
    4, run on tiles summed over blocks of their input channels, whose 3x3
    reads them whole).

    With `slices`, also such an output of bands of every channel that every
    later unit reads by bands of rows of its own (another tiling, halos: a
    chain after the chain that made it): before the first unit reading each
    band, a copy unit copies those rows out of the whole tensor's buffer into
    their own (`rows{lo}:{hi}|copy`, SRAM to SRAM), which every unit reading
    them reads. Streamed out, each band was loaded back, halos twice, once the
    producer's last band was stored (SqueezeNet's fire modules at 1 MiB: their
    input stored once and loaded 3 to 4 times). `units` itself where there is
    none."""
    tensors = program.by_name()
    ops = {op.name: op for op in program.ops}
    # tensor -> (unit, rows, channels: None for every one) streaming out its bands
    bands_of: dict[str, list[tuple[int, tuple[int, int], tuple[int, int] | None]]] = {}
    other: set[str] = set()  # tensors written any other way
    reads_of: dict[str, list[tuple[int, Piece]]] = {}  # tensor -> (unit, piece) of each read of it
    for index, unit in enumerate(units):
        for need in unit.reads:
            reads_of.setdefault(need.piece.tensor, []).append((index, need.piece))
        for make in unit.writes:
            op, part = ops[unit.op], make.piece.part
            rows = tile_rows(op, part) if make.mode == STREAM and len(unit.writes) == 1 else None
            channels = None  # every channel
            if rows is not None:
                first, end, _ = channel_range(op, part)
                channels = None if (first, end) == (0, op.channels) else (first, end)
            if rows is not None and (channels is None or tiles and tensors[make.piece.tensor].images == 1):
                bands_of.setdefault(make.piece.tensor, []).append((index, rows, channels))
            elif partial_sums(part) is None or not tiles:  # partial sums: their last sum is a tile
                other.add(make.piece.tensor)
    chosen: dict[int, tuple[int, int, tuple[int, int] | None, bool]] = {}  # unit -> its band, whether the last
    sliced: set[str] = set()  # tensors whose later readers read bands of their rows: copied out of the whole
    for name, at in bands_of.items():
        t = tensors[name]
        whole = Piece(name, "all", t.size)
        last = at[-1][0]
        if (name in other or t.kind != "activation" or t.size > sram * tuning.ASSEMBLE_SHARE // 8
                or sum(units[i].writes[0].piece.bytes for i, *_ in at) != t.size):
            continue
        reads = reads_of.get(name, [])
        read_whole = any(piece == whole and index > last for index, piece in reads)
        sliceable = slices and reads and all(index > last and _plain_rows(piece.part) for index, piece in reads)
        if read_whole or sliceable and all(channels is None for *_, channels in at):
            chosen |= {index: (*rows, channels, index == last) for index, rows, channels in at}
            if not read_whole:
                sliced.add(name)
    if not chosen:
        return units
    out: list[_Unit] = []
    copies: set[Piece] = set()
    for index, unit in enumerate(units):
        if any(n.piece.tensor in sliced for n in unit.reads):
            reads = []
            for need in unit.reads:
                if need.piece.tensor in sliced:
                    t = tensors[need.piece.tensor]
                    copy = _copy_of(need.piece)
                    if copy not in copies:  # two readers of the same rows share one copy
                        copies.add(copy)
                        out.append(_copy_unit(unit.op, _Need(Piece(t.name, "all", t.size), False), _Make(copy, KEEP)))
                    need = _Need(copy, True)
                reads.append(need)
            unit = dataclasses.replace(unit, reads=tuple(reads))
        if index not in chosen:
            out.append(unit)
            continue
        first, end, channels, last = chosen[index]
        band = unit.writes[0].piece
        out.append(_Unit(unit.op, unit.macs, unit.reads, (_Make(band, KEEP),), False, unit.touched))
        block = "" if channels is None else f"|ch{channels[0]}:{channels[1]}"
        rows = Piece(band.tensor, f"rows{first}:{end}{block}|{ASSEMBLED}", band.bytes)
        out.append(_copy_unit(unit.op, _Need(band, True), _Make(rows, WHOLE), last))
    return out


def _plain_rows(part: str) -> bool:
    """True for a band of rows of every channel, `rows{lo}:{hi}` and no more."""
    rows = band_rows(part)
    return rows is not None and part == f"rows{rows[0]}:{rows[1]}"


def _reader_after_tiles(units: list[_Unit], before: NpuOp, op: NpuOp, made: str, parts: list[str]
                        ) -> tuple[list[int], list[int]] | None:
    """(the indices of `op`'s units, the indices of the units of `before`
    that write `parts` of `made`, in that order) when `before` streams out
    exactly those tiles of `made` and `op`'s units follow them at once, one
    after the other; else None."""
    reader = [k for k, u in enumerate(units) if u.op == op.name]
    tiles = {m.piece.part: k for k, u in enumerate(units) if u.op == before.name
             for m in u.writes if m.piece.tensor == made and m.mode == STREAM}
    if (not reader or reader != list(range(reader[0], reader[-1] + 1))
            or reader[0] != max(tiles.values(), default=-2) + 1 or set(tiles) != set(parts)):
        return None
    return reader, [tiles[part] for part in parts]


def _beside(units: list[_Unit], reader: list[int], made: str, producing: list[int], reading: list[_Unit],
            keep: str) -> list[_Unit]:
    """`units` with the reader's units (at the indices `reader`) replaced
    by `reading`, unit m right after unit `producing[m]`, the producer's
    unit that writes the tile of `made` unit m reads: that tile stays in
    SRAM (`keep`: `KEEP`, or `KEEP_STORE` when later ops read `made` too),
    and unit m reads it where it was written."""
    units = list(units)
    after: dict[int, _Unit] = {}
    for k, unit in zip(producing, reading, strict=True):
        (tile_make,) = [m for m in units[k].writes if m.piece.tensor == made]
        units[k] = dataclasses.replace(units[k], writes=tuple(
            _Make(m.piece, keep) if m is tile_make else m for m in units[k].writes))
        reads = tuple(n for n in unit.reads if n.piece.tensor != made)
        after[k] = dataclasses.replace(unit, reads=(_Need(tile_make.piece, True), *reads))
    skipped = set(reader)
    interleaved: list[_Unit] = []
    for k, unit in enumerate(units):
        if k not in skipped:
            interleaved += [unit, after[k]] if k in after else [unit]
    return interleaved


def _reduction_units(op: NpuOp, unit: _Unit, tensors: dict[str, NpuTensor], ranges: list[tuple[int, int]], big: int,
                     leaves: list[str] | None = None) -> list[_Unit]:
    """The tile `unit` of `op` summed over blocks of its input channels,
    the channel `ranges` [lo, hi): unit m reads block m of the reduced
    inputs (`in{lo}:{hi}/{channels}`, of its band of rows:
    `rows{a}:{b}|in{lo}:{hi}/{channels}`; a reduced input not streamed is
    read whole; with `leaves`, the reduced input is an in-place concat's
    output and block m is the tensor `leaves[m]` living in its channels)
    and of the reduced weights (`in{lo}:{hi}/{channels}`, of a channel
    block: `in{lo}:{hi}/{channels}|block{j}/{c}`), and, after the first,
    the partial sums `acc{m-1}/{blocks}|{tile}` the unit before it wrote;
    it writes the partial sums `acc{m}/{blocks}|{tile}` (kept in SRAM), the
    last unit the tile itself. What the op adds once (`first_only`: a bias,
    a residual) only the first unit reads."""
    (out,) = unit.writes
    blocks = len(ranges)
    out_units = []
    for m, (lo, hi) in enumerate(ranges):
        name = f"in{lo}:{hi}/{op.in_channels}"

        def sliced(piece: Piece) -> Piece:
            t = tensors[piece.tensor]
            share = piece.bytes // op.in_channels * (hi - lo)
            if piece.tensor in op.reduced_weights:
                return Piece(piece.tensor, name if piece.part == "all" else f"{name}|{piece.part}", share)
            if piece.tensor not in op.reduced_inputs:
                return piece
            if leaves is not None:  # the concat input living in these channels: its piece, moved by `_rehome`
                leaf = tensors[leaves[m]]
                rows = band_rows(piece.part)
                return Piece(leaf.name, "all", leaf.size) if rows is None else Piece(
                    leaf.name, f"rows{rows[0]}:{rows[1]}", row_bytes(leaf, rows[1] - rows[0]))
            if piece.part == "all" and t.size <= big:
                return piece  # read whole: its block is a slice of it in SRAM
            return Piece(piece.tensor, name if piece.part == "all" else f"{piece.part}|{name}", share)

        reads = [_Need(sliced(n.piece), n.stream or n.piece.tensor in op.reduced_weights)
                 for n in unit.reads if m == 0 or n.piece.tensor not in op.first_only]
        if m > 0:
            reads.append(_Need(Piece(out.piece.tensor, f"acc{m - 1}/{blocks}|{out.piece.part}", out.piece.bytes), True))
        last = m == blocks - 1
        write = out if last else _Make(Piece(out.piece.tensor, f"acc{m}/{blocks}|{out.piece.part}", out.piece.bytes), KEEP)
        out_units.append(_Unit(op.name, _split(unit.macs, blocks, m), tuple(reads), (write,),
                               unit.last_of_op and last))
    return out_units


def _band_blocks(op: NpuOp, homes: dict[str, _Home], joined_outputs: set[str]) -> list[tuple[int, int, str]] | None:
    """The input channel blocks of `op` whose one reduced input lives in an
    in-place concat's output: [lo, hi) of the input and the tensor written
    there (a concat input that is no concat's output: DenseNet's block
    input and each layer's 32 channels), in order; None unless they cover
    the input's channels exactly."""
    if len(op.reduced_inputs) != 1:
        return None
    (x,) = op.reduced_inputs
    home = homes.get(x)
    root, first, end = (home.tensor, home.first, home.end) if home is not None else (x, 0, op.in_channels)
    found = sorted((h.first - first, h.end - first, n) for n, h in homes.items()
                   if h.tensor == root and n not in joined_outputs and first <= h.first and h.end <= end)
    at = 0
    for lo, hi, _ in found:
        if lo != at:
            return None
        at = hi
    return found if at == end - first == op.in_channels and len(found) > 1 else None


def _input_blocks(units: list[_Unit]) -> dict[str, int]:
    """op -> its input channel blocks, for each op whose units sum block by
    block (`_reduction_units`: they write partial sums)."""
    return {u.op: block[1] for u in units for m in u.writes
            if (block := partial_sums(m.piece.part)) is not None}


def _rehome(units: list[_Unit], homes: dict[str, _Home], tensors: dict[str, NpuTensor], sram: int,
            fit: int) -> list[_Unit]:
    """`units` with every piece of a tensor that lives in an in-place
    concat's output renamed as that part of its channel band of the home
    tensor (`ch{first}:{end}/{channels}`, `|{part}` for a part of it). A
    home whose bands are all written whole (no band streamed out tile by
    tile), never read by rows, that fits `HOME_SHARE` eighths of the SRAM,
    and beside which every unit from its first band's write to its last
    fits in `fit` bytes, is assembled in SRAM: its bands are
    written `into` its whole buffer. Any
    other home keeps each band in a buffer of its own, stored to its place
    in the home's DRAM when a read of more channels needs it there."""
    if not homes:
        return units

    def moved(piece: Piece) -> Piece:
        home = homes.get(piece.tensor)
        if home is None or piece.part.startswith("acc"):  # partial sums: a buffer of their own, never stored
            return piece
        return Piece(home.tensor, band_part(home.first, home.end, home.channels, piece.part), piece.bytes)

    roots = {h.tensor for h in homes.values()}
    assembled = set()
    for root in roots:
        names = {n for n, h in homes.items() if h.tensor == root} | {root}
        writes_whole = all(m.mode == WHOLE for u in units for m in u.writes
                           if m.piece.tensor in names and not m.piece.part.startswith("acc"))
        banded = any(_own_buffer(n.piece) for u in units for n in u.reads if n.piece.tensor in names)
        size = tensors[root].size
        if not writes_whole or banded or size > sram * tuning.HOME_SHARE // 8:
            continue
        # pinned from its first band's write to its last: every unit in between must fit beside it
        span = [i for i, u in enumerate(units) if any(m.piece.tensor in names for m in u.writes)]
        if all(size + sum(p.bytes for p in (*(n.piece for n in u.reads), *(m.piece for m in u.writes))
                          if p.tensor not in names) <= fit
               for u in units[span[0]:span[-1] + 1]):
            assembled.add(root)
    out = []
    for unit in units:
        reads = tuple(_Need(moved(n.piece), n.stream) for n in unit.reads)
        writes = []
        for m in unit.writes:
            piece = moved(m.piece)
            writes.append(_Make(piece, INTO if piece.tensor in assembled and m.piece.tensor in homes else m.mode))
        out.append(_Unit(unit.op, unit.macs, reads, tuple(writes), unit.last_of_op, unit.touched))
    return out

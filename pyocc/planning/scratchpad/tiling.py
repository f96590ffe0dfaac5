"""How one op that does not fit in the SRAM is split (step 1 of the package's docstring).

`_choose_tiling` picks, for one op, the bands of output rows and blocks of
output channels (or, `_reduction_tiling`, blocks of input channels summed
in SRAM) with the fewest estimated cycles whose double-buffered tile fits
a share of the SRAM (`tuning.TILE_SHARES`).
"""

from __future__ import annotations

import dataclasses
import functools
import math

from ..npu_simulator import NpuCost
from ..problem import PlanningError
from . import tuning
from .program import NpuOp, NpuProgram, NpuTensor, row_bytes


@functools.lru_cache(maxsize=1 << 16)
def _band_bytes(tensor: NpuTensor, op: NpuOp, bands: int) -> int:
    """Bytes of the largest input band: its share of the rows plus the halo
    (exact for an input the op reads by bands)."""
    if bands == 1 or tensor.rows <= 1:
        return tensor.size
    if op.window(tensor.name) is not None:
        return max(row_bytes(tensor, hi - lo) for lo, hi in (op.in_band(tensor, bands, i) for i in range(bands)))
    out_rows = math.ceil(op.out_rows / bands)
    rows = min(tensor.rows, math.ceil(out_rows * tensor.rows / op.out_rows) + op.halo_rows)
    return math.ceil(tensor.size * rows / tensor.rows)


def _tile_bytes(tensor: NpuTensor, op: NpuOp, bands: int, blocks: int) -> int:
    """Bytes of the largest tile of output `tensor` when `op` runs on `bands`
    bands of rows and `blocks` blocks of channels (`NpuOp.out_band`,
    `_block_bytes`: near-equal shares, some a row or a channel more)."""
    rows, channels = max(op.out_rows, 1), max(op.channels, 1)
    return math.ceil(tensor.size * math.ceil(rows / bands) * math.ceil(channels / blocks) / (rows * channels))


def fits_tiled(op: NpuOp, program: NpuProgram, sram: int, cost: NpuCost) -> bool:
    """Whether some tiling of `op` fits `sram` bytes (`_choose_tiling` finds one)."""
    try:
        _choose_tiling(op, program.by_name(), sram, cost)
    except PlanningError:
        return False
    return True


def _choose_tiling(op: NpuOp, tensors: dict[str, NpuTensor], sram: int, cost: NpuCost,
                   bands: list[tuple[int, int, str]] | None = None, exact: bool = False, split: bool = False
                   ) -> tuple[int, int, bool, int, int]:
    """`_chosen_tiling` of `op` over its operands in `tensors`: the same op
    (an op of the same name, tensors and facts) in every `_units` call of a
    schedule (up to 8 of them) searches once."""
    operands = tuple(tensors[n] for n in dict.fromkeys((*op.inputs, *op.weights, *op.outputs)))
    return _chosen_tiling(op, operands, sram, cost, None if bands is None else tuple(bands), exact, split)


@functools.lru_cache(maxsize=1 << 12)
def _chosen_tiling(op: NpuOp, operands: tuple[NpuTensor, ...], sram: int, cost: NpuCost,
                   bands: tuple[tuple[int, int, str], ...] | None, exact: bool = False, split: bool = False
                   ) -> tuple[int, int, bool, int, int]:
    """(row bands, channel blocks, rows outer, streaming threshold, input
    channel blocks) of the tiling with the fewest estimated cycles (the
    slower of its compute and its DRAM traffic under `cost`), then the
    least traffic, then one without partial sums, whose double-buffered
    tile fits in half the SRAM. A tile
    of up to 5/8, 6/8 or 7/8 of the SRAM (`TILE_SHARES`) is taken instead
    when its estimate is below 1/`TILE_GAIN` of the best smaller one: fewer,
    larger tiles touch their operands in SRAM fewer times (a thin weight
    block re-reads the whole input) and re-read fewer weight blocks, while
    a smaller tile leaves room to prefetch the next op. Operands above the
    threshold stream through DRAM. A tile summed over blocks of its input
    channels (`_reduction_tiling`) competes when `REDUCTION_COMPETES`, and
    is the way out when no other tiling fits. With `bands` (the op's input
    lives in an in-place concat's output) a tiling summed over those bands
    is taken first when one fits: each band is read where it is, often
    still in SRAM, instead of the whole input from DRAM. `operands`: the
    tensors `op` names (pure in its arguments, hence cached); `exact`: as
    `_reduction_tiling`'s; with `split`, only tilings whose weights load in
    blocks: of two blocks of output channels or more, or summed over blocks
    of input channels (`_split_late`)."""
    tensors = {t.name: t for t in operands}
    best: tuple[int, int, int, int, int, bool, int, int] | None = None
    bigs = (sram // 4, sram // 8, sram // 16, sram // 32, 0)
    most = sram * max(tuning.TILE_SHARES) // 8  # each search once, for the largest share; each share keeps what fits it
    if bands is not None:
        options = [(_reduction_tiling(op, tensors, most, big, cost, bands, exact), big) for big in bigs]
        for share in tuning.TILE_SHARES:
            found = [(*key, big) for keys, big in options if (key := _within(keys, sram * share // 8)) is not None]
            if found:
                best = min(found)
                return best[3], best[4], best[5], best[7], best[6]
    plain = [(_tiling_with(op, tensors, most, big, cost), big) for big in bigs]
    if split:  # a tiling summed over input channel blocks loads its filters block by block anyway
        plain = [([(key, foot) for key, foot in keys if key[4] > 1], big) for keys, big in plain]
    reduced: list[tuple[list[tuple[_TilingKey, int]], int]] | None = None
    for share in tuning.TILE_SHARES:
        limit = sram * share // 8
        found = [(*key, big) for keys, big in plain if (key := _within(keys, limit)) is not None]
        if not found or tuning.REDUCTION_COMPETES:
            if reduced is None:
                reduced = [(_reduction_tiling(op, tensors, most, big, cost, exact=exact), big) for big in bigs]
            found += [(*key, big) for keys, big in reduced if (key := _within(keys, limit)) is not None]
        if found:
            # on equal cycles and traffic, a tiling without partial sums (one input channel block) first
            first = min(found, key=lambda f: (f[0], f[1], f[6] > 1, f))
            if best is None or first[0] * tuning.TILE_GAIN < best[0]:
                best = first
    if best is not None:
        return best[3], best[4], best[5], best[7], best[6]
    raise PlanningError(
        f"scratchpad: op {op.name!r} does not fit in {sram} bytes of SRAM even tiled; give a larger --scratchpad"
    )


def _tiling_space(
    op: NpuOp, tensors: dict[str, NpuTensor], big: int
) -> tuple[list[NpuTensor], list[NpuTensor], list[NpuTensor], list[int], list[int]]:
    """`op`'s inputs, weights and outputs (each tensor once) and the counts
    of row bands and channel blocks a tiling of it may use (operands above
    `big` bytes stream)."""
    reads = [tensors[n] for n in dict.fromkeys(op.inputs)]
    weights = [tensors[n] for n in dict.fromkeys(op.weights)]
    outs = [tensors[n] for n in dict.fromkeys(op.outputs)]
    return reads, weights, outs, _row_candidates(op, reads, outs, big), _channel_candidates(op, weights)


_TilingKey = tuple[int, int, int, int, int, bool, int]
"""(estimated cycles, traffic, tiles, row bands, channel blocks, rows
outer, input channel blocks) of a tiling: the least is the best."""


def _within(keys: list[tuple[_TilingKey, int]], limit: int) -> _TilingKey | None:
    """The best tiling of `keys` (sorted (key, footprint) pairs) whose
    footprint fits in `limit` bytes, or None."""
    return next((key for key, foot in keys if foot <= limit), None)


def _tiling_with(
    op: NpuOp, tensors: dict[str, NpuTensor], limit: int, big: int, cost: NpuCost
) -> list[tuple[_TilingKey, int]]:
    """(key, footprint) of every tiling (split by rows and output channels
    only: input channel blocks 1) whose tile fits in `limit` bytes when
    operands above `big` bytes stream, sorted: `_within` picks the best
    under a smaller limit. A tile touches its input bands (whole inputs
    not streamed), its block of each weight and its output tile. Rows
    outer, a streamed input band serves one band's tiles: double-buffered,
    loaded once, and the weight blocks load once per band. Channel blocks
    outer (split both ways), every channel block reads every band again:
    the scheduler keeps the bands where they fit (all of them in the
    footprint, loaded once), else loads them again per channel block (two
    in the footprint); the weight blocks load once. Counting kept bands as
    two streamed ones left ResNet-50's r149 (a 1x1 stride-2 convolution,
    7 bands kept, 8 MiB of weights) no room for a second weight block:
    each block loaded after the one before was freed."""
    reads, weights, outs, rows, channels = _tiling_space(op, tensors, big)
    options: list[tuple[_TilingKey, int]] = []
    for r in rows:
        for c in channels:
            n = r * c
            # streamed like a weight: a block of it per channel block
            blocked = [t for t in reads if r == 1 and c > 1 and t.name in op.channel_inputs and t.size > big]
            blocked += [t for t in reads if _banded_block(op, t.name, r, c)]
            banded = [t for t in reads if t.size > big and t not in blocked]
            whole_reads = sum(t.size for t in reads if t.size <= big and t not in blocked)
            band = sum(_band_bytes(t, op, r) for t in banded)
            in_stream = band * r
            blocked_bytes = sum(t.size if r == 1 else _band_bytes(t, op, r) * r for t in blocked)
            w_tile = sum(w.size if c == 1 or w.name in op.whole_weights else math.ceil(w.size / c) for w in weights)
            w_foot = sum(w.size if c == 1 or w.name in op.whole_weights else 2 * math.ceil(w.size / c)
                         for w in weights)
            w_bytes = sum(w.size for w in weights) + blocked_bytes
            out_foot = sum(2 * math.ceil(t.size / n) if t.size > big else t.size for t in outs)
            common = whole_reads + 2 * math.ceil(blocked_bytes / n) + w_foot + out_foot
            touched = (band + whole_reads + w_tile + math.ceil(blocked_bytes / n)
                       + math.ceil(sum(t.size for t in outs) / n))
            compute = n * cost.compute_cycles(math.ceil(op.macs / n), touched)
            traffic_out = sum(t.size for t in outs if t.size > big)
            ways = [(True, common + (2 if r > 1 else 1) * band,
                     traffic_out + in_stream + (w_bytes * r if r > 1 and c > 1 else w_bytes))]
            if r > 1 and c > 1:  # channel blocks outer: every band kept, or loaded again per channel block
                ways += [(False, common + in_stream, traffic_out + in_stream + w_bytes),
                         (False, common + 2 * band, traffic_out + in_stream * c + w_bytes)]
            for rows_outer, foot, traffic in ways:
                if foot <= limit:
                    options.append(((max(compute, cost.dma_cycles(traffic)), traffic, n, r, c, rows_outer, 1), foot))
    return sorted(options)


def _banded_block(op: NpuOp, tensor: str, bands: int, blocks: int) -> bool:
    """True when a tile of `op` (split by rows and channels) reads only its
    channel block of its band of input `tensor` (`rows{lo}:{hi}|in{a}:{b}/{channels}`):
    an op without weights whose channel blocks read the same channels of
    that input (a pooling)."""
    return (bands > 1 and blocks > 1 and not op.weights and tensor in op.channel_inputs
            and op.window(tensor) is not None)


def _row_candidates(op: NpuOp, reads: list[NpuTensor], outs: list[NpuTensor], big: int) -> list[int]:
    """Row band counts to try: a band reads its input bands and writes its
    output tiles in their own buffers (strided DMA from and to DRAM), so
    every banded operand must stream (be above `big`)."""
    row_ok = (op.out_rows > 1 and bool(op.row_windows) and all(t.size > big for t in outs)
              and all(t.size > big for t in reads if op.window(t.name) is not None))
    return _candidates(op.out_rows) if row_ok else [1]


def _channel_candidates(op: NpuOp, weights: list[NpuTensor]) -> list[int]:
    """Output channel block counts to try: a channel block streams blocks
    of the weights, or (no weights: a pooling) of the inputs."""
    if not (weights or op.channel_inputs) or op.channels <= 1:
        return [1]
    return [c for c in _candidates(op.channels) if op.blocks_run(c)]


def _reduction_tiling(
    op: NpuOp, tensors: dict[str, NpuTensor], limit: int, big: int, cost: NpuCost,
    bands: tuple[tuple[int, int, str], ...] | None = None, exact: bool = False,
) -> list[tuple[_TilingKey, int]]:
    """(key, footprint) of every tiling that also sums each output tile
    over blocks of the op's input channels (`NpuOp.in_channels`) whose
    units fit in `limit` bytes when operands above `big` bytes stream,
    sorted (none when the op cannot sum block by block). A unit reads its
    block of the input band (double-buffered when streamed, else the whole
    input stays) and of the weights (always streamed, double-buffered), the
    partial sums of the blocks before it, and writes the partial sums with
    its block added (the output tile twice), the last unit the output tile
    itself. Units run tile by tile, the input blocks innermost; the input
    is read again per output channel block, the weights per row band.
    With `bands`, the blocks are those channel ranges (the widest sets the
    footprint) and only their count is tried. The partial sums are counted
    at the mean tile, or with `exact` at the largest (`_tile_bytes`): a row
    band or a channel block may be one row or channel more, and the mean
    lets through tilings whose units the scheduler then places where it
    finds room, often better ones, but not always (`schedule_scratchpad`)."""
    if op.in_channels <= 1:
        return []
    reads, weights, outs, rows, channels = _tiling_space(op, tensors, big)
    options: list[tuple[_TilingKey, int]] = []
    for r in rows:
        for c in channels:
            n = r * c
            tile = sum(_tile_bytes(t, op, r, c) for t in outs) if exact else math.ceil(sum(t.size for t in outs) / n)
            for k in _candidates(op.in_channels)[1:] if bands is None else [len(bands)]:
                widest = k if bands is None else op.in_channels / max(hi - lo for lo, hi, _ in bands)
                foot = 0
                touched = 0
                for t in reads:
                    if t.name in op.reduced_inputs:
                        part = math.ceil(_band_bytes(t, op, r) / widest)
                        foot += 2 * part if t.size > big else t.size
                        touched += part
                    elif r == 1 and c > 1 and t.name in op.channel_inputs and t.size > big:
                        foot += math.ceil(t.size / c)
                    else:
                        foot += _band_bytes(t, op, r) if t.size > big else t.size
                for w in weights:
                    if w.name in op.reduced_weights:
                        part = math.ceil(w.size / (c * widest))
                        foot += 2 * part
                        touched += part
                    else:
                        foot += w.size if c == 1 or w.name in op.whole_weights else 2 * math.ceil(w.size / c)
                for t in outs:
                    foot += 2 * tile + (2 * math.ceil(t.size / n) if t.size > big else t.size)
                if foot > limit:
                    continue
                touched += 2 * tile
                in_stream = sum(_band_bytes(t, op, r) * r for t in reads if t.size > big)
                w_bytes = sum(w.size for w in weights)
                traffic = (sum(t.size for t in outs if t.size > big) + in_stream * c
                           + (w_bytes * r if r > 1 else w_bytes))
                compute = n * k * cost.compute_cycles(math.ceil(op.macs / (n * k)), touched)
                options.append(((max(compute, cost.dma_cycles(traffic)), traffic, n * k, r, c, True, k), foot))
    return sorted(options)


def _candidates(extent: int) -> list[int]:
    """Split counts worth trying: 1, 2, 3, 4, 6, 8, ... up to `extent`."""
    out, n = [], 1
    while n <= extent:
        out.append(n)
        n = n + 1 if n < 4 else int(n * 1.5)
    if extent not in out:
        out.append(extent)
    return out


def _blocks_alone(op: NpuOp, tensors: dict[str, NpuTensor], sram: int, cost: NpuCost,
                  bands: list[tuple[int, int, str]] | None, chosen: tuple[int, int, bool, int, int],
                  split: bool = False) -> tuple[int, int, bool, int, int]:
    """`chosen` (`_choose_tiling`'s tiling of `op`, split by rows), or
    the tiling of `op` by blocks of output channels alone (every row in
    each tile) when it is estimated faster, or as fast and moving no more
    DRAM bytes once the store and the load again of `op`'s output that it
    saves are taken off: `op`'s reader reads it channel for channel
    (`_channelwise_reader`), so it runs on those tiles where they were
    written (`_channel_chains`). Inception v2's 3x3 convolution at 56x56
    (2.3 MB out, then a max pool) at 1 MiB: 4 bands of 42 blocks, or 63
    blocks alone at the same estimated cycles. `split`: as `_chosen_tiling`'s."""
    flat = dataclasses.replace(op, row_windows=())  # an op no tiling splits by rows (`_row_candidates`)
    try:
        alone = _choose_tiling(flat, tensors, sram, cost, bands, split=split)
    except PlanningError:
        return chosen
    was, now = _tiling_estimate(op, tensors, sram, cost, chosen), _tiling_estimate(flat, tensors, sram, cost, alone)
    if was is None or now is None:
        return chosen
    saved = 2 * sum(tensors[n].size for n in dict.fromkeys(op.outputs))
    return alone if (now[0], now[1] - saved) <= was else chosen


def _tiling_estimate(op: NpuOp, tensors: dict[str, NpuTensor], sram: int, cost: NpuCost,
                     tiling: tuple[int, int, bool, int, int]) -> tuple[int, int] | None:
    """(estimated cycles, DRAM bytes) of `tiling` of `op` (as
    `_choose_tiling` returns it), as `_tiling_with` and `_reduction_tiling`
    estimate it when they offer it; None for one summed over the bands of
    an in-place concat (estimated apart)."""
    rows, blocks, rows_outer, big, in_blocks = tiling
    most = sram * max(tuning.TILE_SHARES) // 8
    keys = _tiling_with(op, tensors, most, big, cost) + _reduction_tiling(op, tensors, most, big, cost)
    return min((key[:2] for key, _ in keys if key[3:7] == (rows, blocks, rows_outer, in_blocks)), default=None)

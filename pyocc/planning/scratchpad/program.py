"""What the scratchpad scheduler schedules, and the vocabulary of its units of work.

An `NpuProgram` is plain data (pyocc/analysis/npu_program.py builds it
from a function): ops in order (`NpuOp`: the tensors each reads and writes,
its MACs, how its rows and channels may split) and tensors (`NpuTensor`).
A schedule moves *pieces* of tensors, each named by a part: `all`, a band
of rows `rows{lo}:{hi}`, a block of channels, a channel band
`ch{lo}:{hi}/{channels}` of a concat run in place, a copy
(`rows{lo}:{hi}|copy`), rows assembled into a whole tensor's buffer
(`|assembled`); the functions here read and write those names. A *unit*
(`_Unit`) is one compute of the schedule: the pieces it needs (`_Need`)
and those it makes (`_Make`, with how its buffer lives: `WHOLE`,
`STREAM`, `KEEP`, `KEEP_STORE`, `INTO`). `_homes` says which concats can
run in place, their inputs written into their output.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..npu_simulator import NpuCost, Piece, channel_band

ALIGN = 64
"""SRAM buffers start at multiples of this many bytes."""

KINDS = ("weight", "input", "output", "activation")


@dataclass(frozen=True)
class NpuTensor:
    """A tensor of the program: its bytes, its kind and its row count."""

    name: str
    size: int
    kind: str
    """`weight`, `input` (graph input), `output` (graph output) or `activation`."""
    rows: int = 1
    """Rows a row tiling splits (the height of an NCHW tensor); 1: not split."""
    images: int = 1
    """Images of an NCHW tensor (its batch): a band of rows of a block of
    channels is rows of one run of channels only in a tensor of one image."""
    cols: int = 1
    """Columns of an NCHW tensor (its width); 1: below rank 4."""
    nchw: bool = False
    """True for one image of NCHW (rank 4, N = 1) and for a [1, K] vector
    (as [1, K, 1, 1]): the tensors whose elements `cones` places by row,
    column and channel (a rank-3 sequence's are not: a floor could not
    tell its positions from its channels)."""


@dataclass(frozen=True)
class NpuOp:
    """One compute op: what it reads and writes, its MACs and tiling facts."""

    name: str
    macs: int
    inputs: tuple[str, ...]
    """Activations and graph inputs read."""
    weights: tuple[str, ...]
    """Weights read (split into blocks by output channel)."""
    outputs: tuple[str, ...]
    out_rows: int = 1
    """Output rows (1: the op cannot be split by rows)."""
    halo_rows: int = 0
    """Extra input rows a band needs beyond its share (kernel minus stride)."""
    channels: int = 1
    """Output channels (1: the op cannot be split by channels)."""
    whole_weights: tuple[str, ...] = ()
    """Weights every channel block reads whole (per input channel: a
    pre-activation's scale); the others are split with the output channels."""
    row_windows: tuple[tuple[str, int, int, int], ...] = ()
    """(input, extent, stride, pad_top) per input a band of output rows
    reads a band of (the op's `row_windows`): output row o reads its rows
    [o * stride - pad_top, + extent). Empty: row tiling cannot run the op
    (a cascade still may, in simulation)."""

    channel_groups: int = 1
    """Groups of a grouped convolution: a channel block must lie inside
    one group or be whole groups."""
    joins: tuple[int, ...] = ()
    """The channel count of each input (in `inputs`' order) when the op
    lays its inputs side by side along the channels of its output (a
    concat, `joined_channels`): the inputs' producers may write their band
    of the output in place and the op then costs nothing (`_homes`). Empty:
    an ordinary op."""
    channel_inputs: tuple[str, ...] = ()
    """Inputs a channel block reads only its output channels of (a
    convolution's residual: contiguous slices, like a weight block's):
    channel blocks not split by rows load just their block of them."""

    in_channels: int = 1
    """The length of the axis the op sums over that it can split into
    blocks (a convolution's input channels, `reduction_split`); 1: it
    cannot. A block of it reads its slice of `reduced_inputs` and of
    `reduced_weights` and adds to the partial sums of the blocks before it,
    which stay in SRAM."""
    reduced_inputs: tuple[str, ...] = ()
    """Activations a reduction block reads its slice of (contiguous)."""
    reduced_weights: tuple[str, ...] = ()
    """Weights a reduction block reads its slice of (a filter's input
    channels: strided, one chunk per output channel)."""
    first_only: tuple[str, ...] = ()
    """What only the first reduction block reads (a bias, a residual: added once)."""
    col_windows: tuple[tuple[str, int, int, int], ...] = ()
    """As `row_windows`, along the columns: (input, extent, stride,
    pad_left). Only the floor for every schedule reads it (`cones`); no
    schedule splits columns."""
    _windows: dict[str, tuple[int, int, int]] = field(init=False, repr=False, compare=False)
    """`row_windows` by input (a tensor's first): `window` is asked millions
    of times by the chain search."""

    def __post_init__(self) -> None:
        """The table `window` reads, made with the op (frozen: it stays true)."""
        object.__setattr__(self, "_windows", {n: (e, s, p) for n, e, s, p in reversed(self.row_windows)})

    def blocks_run(self, blocks: int) -> bool:
        """True when every one of `blocks` near-equal channel blocks lies
        inside one group or is made of whole groups."""
        if self.channel_groups <= 1:
            return True
        per = self.channels // self.channel_groups
        lo = 0
        for j in range(blocks):
            hi = lo + _split(self.channels, blocks, j)
            if lo // per != (hi - 1) // per and (lo % per or hi % per):
                return False
            lo = hi
        return True

    def window(self, tensor: str) -> tuple[int, int, int] | None:
        """(extent, stride, pad_top) of input `tensor`'s band, or None (read whole)."""
        return self._windows.get(tensor)

    def in_rows(self, tensor: NpuTensor, first: int, end: int) -> tuple[int, int]:
        """Rows [lo, hi) of input `tensor` (read by a window) that the op's
        output rows [first, end) read."""
        window = self.window(tensor.name)
        assert window is not None, f"{tensor.name} is not read by bands"
        extent, stride, pad_top = window
        return max(0, first * stride - pad_top), min(tensor.rows, (end - 1) * stride - pad_top + extent)

    def out_band(self, bands: int, index: int) -> tuple[int, int]:
        """Output rows [first, end) of band `index` of `bands` (near-equal)."""
        return index * self.out_rows // bands, (index + 1) * self.out_rows // bands

    def in_band(self, tensor: NpuTensor, bands: int, index: int) -> tuple[int, int]:
        """Rows [lo, hi) of input `tensor` that output band `index` of `bands` reads."""
        window = self.window(tensor.name)
        assert window is not None, f"{tensor.name} is not read by bands"
        extent, stride, pad_top = window
        first, end = self.out_band(bands, index)
        return max(0, first * stride - pad_top), min(tensor.rows, (end - 1) * stride - pad_top + extent)


@dataclass(frozen=True)
class NpuProgram:
    """Ops in execution order over named tensors."""

    tensors: tuple[NpuTensor, ...]
    ops: tuple[NpuOp, ...]
    _by_name: dict[str, NpuTensor] = field(init=False, repr=False, compare=False)
    _memos: dict[str, dict[Any, Any]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """The table `by_name` reads, made with the program (frozen: it stays true)."""
        object.__setattr__(self, "_by_name", {t.name: t for t in self.tensors})

    def by_name(self) -> dict[str, NpuTensor]:
        """Tensors keyed by name: built with the program (the chain search
        asks for it in every cost estimate), so read it, never change it."""
        return self._by_name

    def memo(self, name: str) -> dict[Any, Any]:
        """A dict kept with the program under `name`, for what a search
        works out about it again and again (`_chain_cost`): the program is
        frozen, so what was found about it stays true."""
        return self._memos.setdefault(name, {})

    def dram_lower_bound_bytes(self) -> int:
        """Bytes any schedule moves: every weight once, graph inputs in, outputs out."""
        return sum(t.size for t in self.tensors if t.kind in ("weight", "input", "output"))

    def macs(self) -> int:
        """Total multiply-accumulates."""
        return sum(op.macs for op in self.ops)

    def bound_cycles(self, cost: NpuCost) -> int:
        """max(MACs / macs_per_cycle, the DRAM lower bound's cycles on the
        port): no schedule is faster than its MACs or its bytes alone."""
        return max(math.ceil(self.macs() / cost.macs_per_cycle), cost.dma_cycles(self.dram_lower_bound_bytes()))

    def reader_counts(self) -> dict[str, int]:
        """Tensor -> how many ops read it (as an input)."""
        readers: dict[str, int] = {}
        for op in self.ops:
            for n in dict.fromkeys(op.inputs):
                readers[n] = readers.get(n, 0) + 1
        return readers

    def op_floor_cycles(self, cost: NpuCost) -> list[int]:
        """Each op's compute floor, in program order: max(MACs /
        macs_per_cycle, the bytes the whole op reads and writes /
        sram_bytes_per_cycle); 0 for a concat that can run in place
        (`_homes`). No schedule computes an op in fewer cycles: a tile
        touches at least its share of the op's bytes."""
        tensors = self.by_name()
        joined = _homes(self, set())[1]
        return [0 if k in joined else cost.compute_cycles(
                    op.macs, sum(tensors[n].size for n in dict.fromkeys((*op.inputs, *op.weights)))
                    + sum(tensors[n].size for n in dict.fromkeys(op.outputs)))
                for k, op in enumerate(self.ops)]

    def compute_floor_cycles(self, cost: NpuCost) -> int:
        """Cycles of compute alone with every tensor resident in SRAM (no
        DMA, no tiling): the sum of the ops' compute floors
        (`op_floor_cycles`). No schedule's compute is shorter: the ops run
        one after another."""
        return sum(self.op_floor_cycles(cost))

    def weight_stream_floor_cycles(self, cost: NpuCost, sram_size: int, cuts: Iterable[int] | None = None) -> int:
        """Cycles no schedule beats that runs the ops in program order and
        interleaves no two ops across a cut, when the SRAM holds
        `sram_size` bytes. `cuts`: the op indices k where such a schedule
        starts op k only after every op before k ended (`schedule_cuts`
        gives a schedule's own); None: every index (no op interleaves).

        The argument, for a run of ops k..k' between two cuts: the bytes it
        reads from outside (its weights and graph inputs, and the
        activations made before op k), each counted once, are in DRAM or
        in SRAM when op k starts, at most `sram_size` bytes of them in
        SRAM; the rest crosses the DRAM port before op k' starts, and the
        run's ops compute at least their compute floors (as
        `compute_floor_cycles`) in that span too. So op k' starts at least
        max(those floors, that DMA) after op k, and the floor is the
        longest such path from the first op to the end over every way of
        cutting the program at `cuts` (dynamic programming). One op per run
        gives the per-op floor (an op's weights beyond the SRAM stream while
        it runs); one cut before the weight-heavy tail of a network
        (ShuffleNet's last stage, VGG-19's fully connected layers) says that
        the tail's weights beyond the SRAM, less the activations it reads,
        cross the port after everything before it computed. The inputs and
        output of a concat that can run in place (`_homes`) are left out of
        the activations (a weaker floor: their bytes are shared), and the
        concat costs nothing.

        It is no floor for every schedule: a cascade through a weight-heavy
        op (VGG-19's fc6 summing pool5 row band by row band, its weights
        streaming while later rows of the convolutions before it compute,
        those convolutions' weights loaded again per band) hides those loads
        under other ops' compute; docs/scratchpad.md ("weight-stream floor")
        gives a bound for any schedule."""
        tensors = self.by_name()
        homes = _homes(self, set())[0]
        shared = set(homes) | {home.tensor for home in homes.values()}
        floors = self.op_floor_cycles(cost)
        producer: dict[str, int] = {}
        for k, op in enumerate(self.ops):
            for n in op.outputs:
                producer.setdefault(n, k)
        ends = sorted({k for k in (range(1, len(self.ops)) if cuts is None else cuts) if 0 < k < len(self.ops)})
        ends.append(len(self.ops))
        start = {0: 0}  # a cut -> the least cycles before its op starts
        for first in [0, *ends[:-1]]:
            outside: set[str] = set()  # what the run from `first` reads from outside it
            compute = outside_bytes = 0
            stop = first
            for end in ends[bisect.bisect_right(ends, first):]:
                for op in self.ops[stop:end]:
                    new = {n for n in (*op.weights, *op.inputs) if n not in outside and (
                        tensors[n].kind != "activation" or (producer.get(n, first) < first and n not in shared))}
                    outside |= new
                    outside_bytes += sum(tensors[n].size for n in new)
                compute += sum(floors[stop:end])
                stop = end
                streamed = cost.dma_cycles(max(0, outside_bytes - sram_size))
                start[end] = max(start.get(end, 0), start[first] + max(compute, streamed))
        return start[len(self.ops)]

    def spill_floor_bytes(self, sram_size: int) -> int:
        """DRAM bytes any schedule without cascades moves beyond
        `dram_lower_bound_bytes` because activations do not fit in SRAM.

        Without cascades each op finishes before the next starts, so between
        two ops at most `sram_size` bytes of the activations still to be read
        are in SRAM; the rest was stored to DRAM and will be loaded back:
        twice its bytes. Two counts of that, each a floor, the larger kept:
        per tensor, right after its producer (sum over activations of
        2 * max(0, size - sram_size)); and at the worst boundary between two
        ops (2 * max(0, live activation bytes - sram_size)). Graph inputs
        and outputs, in DRAM anyway, are left out of both (a weaker floor).
        Every concat that can run in place (`_homes`) is taken as in place:
        its inputs' bytes are its output's, live until the last read of any
        channels of them, and the concat is no op; that counts no more bytes
        at any boundary than a schedule running some of those concats (a
        concat's output then has bytes of its own), so the floor holds for
        every schedule without cascades."""
        tensors = self.by_name()
        homes, joined = _homes(self, set())
        ops = [op for k, op in enumerate(self.ops) if k not in joined]
        produced: dict[str, int] = {}
        last_read: dict[str, int] = {}
        made = {n for op in ops for n in op.outputs}
        bands: dict[str, list[tuple[str, int, int]]] = {}
        for n, home in homes.items():
            if n in made:  # an input written by an op: its bytes, in its band
                bands.setdefault(home.tensor, []).append((n, home.first, home.end))
        for k, op in enumerate(ops):
            for n in op.inputs:
                if n in homes or n in bands:  # channels of a concat output in place: the bands they cover
                    root, lo, hi = (homes[n].tensor, homes[n].first, homes[n].end) if n in homes else (n, 0, math.inf)
                    for band, first, end in bands.get(root, ()):
                        if first < hi and lo < end:
                            last_read[band] = k
                if n not in homes:
                    last_read[n] = k
            for n in op.outputs:
                produced.setdefault(n, k)
        spilled = [n for n, t in tensors.items() if t.kind == "activation" and n in produced and n in last_read
                   and last_read[n] > produced[n]]
        per_tensor = sum(2 * max(0, tensors[n].size - sram_size) for n in spilled)
        change = [0] * (len(ops) + 1)
        for n in spilled:  # live across boundary k (before op k) for produced[n] < k <= last_read[n]
            change[produced[n] + 1] += tensors[n].size
            change[last_read[n] + 1] -= tensors[n].size
        live = worst = 0
        for k in range(len(ops)):
            live += change[k]
            worst = max(worst, live)
        return max(per_tensor, 2 * max(0, worst - sram_size))


@dataclass(frozen=True)
class _Need:
    piece: Piece
    stream: bool
    """True: a band or block, loaded for this tile; False: the whole tensor."""


WHOLE, STREAM, KEEP, KEEP_STORE, INTO = "whole", "stream", "keep", "keep+store", "into"


@dataclass(frozen=True)
class _Make:
    piece: Piece
    mode: str
    """`whole`: a part of the whole tensor's buffer (of its channel band's
    buffer, for a band of an in-place concat's output); `stream`: its own
    buffer, stored to DRAM at once and freed; `keep`: its own buffer, kept
    while later units read it (a cascade's band); `keep+store`: both;
    `into`: a channel band written into the whole tensor's buffer, which
    its other bands' producers fill too (an in-place concat assembled in
    SRAM)."""


@dataclass(frozen=True)
class _Unit:
    op: str
    macs: int
    reads: tuple[_Need, ...]
    writes: tuple[_Make, ...]
    last_of_op: bool
    touched: int | None = None
    """SRAM bytes the compute touches, when not all of its pieces (a band
    reads only the halo rows of its neighbours)."""

    @functools.cached_property  # read at every prefetch look-ahead: summed once
    def sram_bytes(self) -> int:
        """SRAM bytes the unit's compute touches: `touched`, or every piece it reads and writes."""
        if self.touched is not None:
            return self.touched
        return sum(n.piece.bytes for n in self.reads) + sum(m.piece.bytes for m in self.writes)


def _split(total: int, parts: int, index: int) -> int:
    """The `index`-th of `parts` near-equal shares of `total` (they add up to it)."""
    return total // parts + (1 if index < total % parts else 0)


def _block_bytes(size: int, channels: int, blocks: int, index: int) -> int:
    """Bytes of channel block `index` of `blocks` of a tensor of `size`
    bytes over `channels` channels: whole channels, so a block is a slice
    of the tensor (the near-equal byte share when channels do not divide it)."""
    if channels > 1 and size % channels == 0:
        return size // channels * _split(channels, blocks, index)
    return _split(size, blocks, index)


def channel_range(op: NpuOp, part: str) -> tuple[int, int, bool]:
    """(first, end, split by rows too) of the output channels a unit of `op`
    computes, from the name of a part it reads or writes (`block{j}/{c}`
    of a weight, `tile{i}.{j}/{r}x{c}` of its output)."""
    if part.startswith("block"):
        j, c = (int(n) for n in part.removeprefix("block").split("/"))
        rows = False
    else:
        index, counts = part.removeprefix("tile").split("/")
        j = int(index.split(".")[1])
        r, c = (int(n) for n in counts.split("x"))
        rows = r > 1
    return (*split_range(op.channels, c, j), rows)


def split_range(total: int, parts: int, index: int) -> tuple[int, int]:
    """[first, end) of the `index`-th of `parts` near-equal shares of `total`."""
    # the shares before it: `index` of total // parts, one more each for the first total % parts
    # (in closed form: VGG-19's fc6 at 256 KiB sums 25,088 input channels in blocks)
    first = index * (total // parts) + min(index, total % parts)
    return first, first + _split(total, parts, index)


def row_bytes(tensor: NpuTensor, rows: int) -> int:
    """Bytes of `rows` rows of `tensor` (all its channels)."""
    return tensor.size // tensor.rows * rows


def tile_rows(op: NpuOp, part: str) -> tuple[int, int] | None:
    """Output rows [first, end) a unit of `op` computes, from the name of the
    part of its output it writes (`tile{i}.{j}/{r}x{c}`); None when not
    split by rows."""
    if not part.startswith("tile"):
        return None
    index, counts = part.removeprefix("tile").split("/")
    i, r = int(index.split(".")[0]), int(counts.split("x")[0])
    return op.out_band(r, i) if r > 1 else None


def band_rows(part: str) -> tuple[int, int] | None:
    """The rows [lo, hi) an input band `rows{lo}:{hi}` holds, None for another part."""
    if not part.startswith("rows"):
        return None
    lo, hi = part.partition("|")[0].removeprefix("rows").split(":")
    return int(lo), int(hi)


def _copy_unit(op: str, source: _Need, made: _Make, last_of_op: bool = False) -> _Unit:
    """A unit of `op` that copies rows of every channel (an assembling unit
    of a tile: of its block of channels) SRAM to SRAM (a chain's copy unit,
    an assembling unit, a band copied out of the whole):
    no MACs, each byte it makes read and written once."""
    return _Unit(op, 0, (source,), (made,), last_of_op, 2 * made.piece.bytes)


def partial_sums(part: str) -> tuple[int, int] | None:
    """(m, blocks) of the partial sums of input channel blocks 0..m of
    `blocks` (`acc{m}/{blocks}|{tile}`); None for any other part."""
    if not part.startswith("acc"):
        return None
    m, _, blocks = part.partition("|")[0].removeprefix("acc").partition("/")
    return int(m), int(blocks)


def input_block(part: str) -> tuple[int, int, int] | None:
    """(lo, hi, channels) of a piece of input channels [lo, hi) of
    `channels` (`in{lo}:{hi}/{channels}`, `rows{a}:{b}|in{lo}:{hi}/{channels}`,
    `in{lo}:{hi}/{channels}|block{j}/{c}`); None for any other part."""
    for name in part.split("|"):
        if name.startswith("in") and ":" in name and "/" in name:
            span, _, channels = name.removeprefix("in").partition("/")
            lo, _, hi = span.partition(":")
            return int(lo), int(hi), int(channels)
    return None


@dataclass(frozen=True)
class _Home:
    """Where a tensor lives when it is an input of an in-place concat: the
    channels [first, end) of `tensor` (the outermost concat's output, of
    `channels` channels)."""

    tensor: str
    first: int
    end: int
    channels: int


def _homes(program: NpuProgram, skip: set[int]) -> tuple[dict[str, _Home], set[int]]:
    """(tensor -> its home, the indices of the concats run in place): each
    op that joins its inputs along the channels (`NpuOp.joins`), unless its
    index is in `skip`, whose output is an activation and whose inputs are
    activations written by earlier ops and joined by no other such concat.
    Its inputs then live in their channel bands of its output (of the
    output's own home, for a concat of concats: DenseNet's blocks are one
    tensor each), written there by their producers; the concat costs
    nothing. Latest first, so an input of two concats joins the later."""
    tensors = program.by_name()
    producer: dict[str, int] = {}
    for k, op in enumerate(program.ops):
        for n in op.outputs:
            producer.setdefault(n, k)
    homes: dict[str, _Home] = {}
    joined: set[int] = set()
    for k in range(len(program.ops) - 1, -1, -1):
        op = program.ops[k]
        if not op.joins or k in skip or tensors[op.outputs[0]].kind != "activation":
            continue
        if any(n in homes or tensors[n].kind != "activation" or producer.get(n, k) >= k for n in op.inputs):
            continue
        out = op.outputs[0]
        base = homes.get(out, _Home(out, 0, sum(op.joins), sum(op.joins)))
        at = base.first
        for n, c in zip(op.inputs, op.joins, strict=True):
            homes[n] = _Home(base.tensor, at, at + c, base.channels)
            at += c
        joined.add(k)
    return homes, joined


COPY = "copy"
"""The last name of a part a copy unit writes: `rows{lo}:{hi}|copy`, rows
copied in SRAM out of a larger band of the same tensor (`_chain_units`) or
out of the whole tensor's buffer (`_assembled`)."""


def _copy_of(band: Piece) -> Piece:
    """The copy of `band` (rows `rows{lo}:{hi}` of every channel) that a
    copy unit makes in SRAM: `rows{lo}:{hi}|copy`."""
    return Piece(band.tensor, f"{band.part}|{COPY}", band.bytes)


def copy_rows(part: str) -> tuple[int, int] | None:
    """The rows [lo, hi) of a part that a copy unit writes
    (`rows{lo}:{hi}|copy`), None for any other part."""
    return band_rows(part) if part.endswith("|" + COPY) else None


ASSEMBLED = "assembled"
"""The last name of a part an assembling unit writes (`_assembled`):
`rows{lo}:{hi}|assembled`, rows of a tensor copied from the buffer of the
band its producer wrote into their place in the whole tensor's buffer
(`rows{lo}:{hi}|ch{first}:{end}|assembled`: those rows of channels
[first, end), from the buffer of a tile)."""


def assembled_rows(part: str) -> tuple[int, int] | None:
    """The rows [lo, hi) of a part that an assembling unit writes
    (`rows{lo}:{hi}|assembled`, `rows{lo}:{hi}|ch{first}:{end}|assembled`),
    None for any other part."""
    return band_rows(part) if part.endswith("|" + ASSEMBLED) else None


def assembled_channels(part: str) -> tuple[int, int] | None:
    """The channels [first, end) of a part an assembling unit writes from a
    tile (`rows{lo}:{hi}|ch{first}:{end}|assembled`); None for rows of
    every channel, or any other part."""
    names = part.split("|")
    if len(names) != 3 or names[2] != ASSEMBLED or not names[1].startswith("ch"):
        return None
    first, _, end = names[1].removeprefix("ch").partition(":")
    return int(first), int(end)


def _own_buffer(piece: Piece) -> bool:
    """True for a band of rows of a tiled op's input (of a channel band):
    always its own buffer (loaded from DRAM), never a view of the whole
    tensor in SRAM."""
    return _own_part(piece.part)


@functools.lru_cache(maxsize=1 << 16)  # pure, and asked of the same parts at every lookup
def _own_part(part: str) -> bool:
    """`_own_buffer` of a piece that is `part`."""
    band = channel_band(part)
    return (part if band is None else band[3]).startswith("rows")

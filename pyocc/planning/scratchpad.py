"""Scheduling a program for a two-level NPU: an SRAM scratchpad and DRAM.

Compute reads and writes only SRAM of `sram_size` bytes; weights, graph
inputs and outputs, and whatever does not fit live in DRAM and move by DMA.
`schedule_scratchpad` turns a program (ops in order, the tensors they read
and write, their MACs) into the straight-line instructions of
npu_simulator.py:

1. **Tiling.** An op whose operands do not fit in half the SRAM is split
   into row bands (of its output, input bands with their halo) and/or
   output-channel blocks (weight blocks, and the blocks of a residual),
   choosing the split with the fewest estimated cycles whose tile,
   double-buffered, fits (in half the SRAM, or up to 7/8 when that is
   clearly faster: `_choose_tiling`); without cascades, so is an op whose
   weights take more than `STREAM_WEIGHTS_SHARE` of the SRAM, to stream
   them while it computes, and, where that runs faster, one whose compute
   waited for its weights (`_stream_stalled`; one that still runs whole,
   its wait late in part, on a tiling whose weights load in blocks:
   `_split_late`).
   An op without weights (a pooling)
   splits its channels by reading its input's channel blocks. A
   convolution or fully connected layer may also sum each output tile over
   blocks of its input channels (`_reduction_tiling`, `_reduction_units`):
   the partial sums stay in SRAM while the input's and the filters' blocks
   stream through. That competes with the other splits on its estimate,
   and is the way out when no other tile fits (its input band and filters
   still hold every input channel). Tensors above a quarter
   of the SRAM that such an op reads or writes stream through DRAM tile by
   tile; smaller ones stay whole in SRAM. Runs of row-local ops with a
   tensor too big for SRAM may be *cascaded* band by band (`_cascades`,
   bands that are byte shares: simulated only). Without those (what runs
   as IR), *chains* of ops, each writing one activation only later ops of
   the chain read by windows, run band by band (`_chains`): each op
   computes the rows its readers' bands read (the halo again in the
   neighbouring band) into an SRAM buffer each reader reads whole; rows
   of a chain's input that a later op reads out of a band an earlier op
   loaded are copied in SRAM (a copy unit), not loaded again. The bands of
   rows an op writes (a band of every channel, no contiguous part of the
   whole tensor) stream out, or, for a reader of the whole tensor, are
   copied into its SRAM buffer in the same way (`_assembled`); readers of
   bands of other rows then copy theirs out of it.
   A concat along the channels whose inputs are written by earlier ops
   runs *in place* (`_homes`, `_rehome`, `_chain_joins`): its inputs are
   channel bands `ch{lo}:{hi}/{channels}` of its output, written there by
   their producers (one SRAM buffer of the whole output, a buffer per band
   stored to its place in the output's DRAM home, or, in a chain, the
   concat's band of rows), and the concat costs nothing.
2. **Residency.** SRAM is a cache managed with knowledge of the future:
   a piece is loaded before its first use; when space runs out, the pieces
   in one window of the bytes needed are evicted (written back first if
   DRAM lacks them): of the windows, the one whose piece read soonest is
   read the latest (`_cheapest_hole`); dead pieces are freed at once. Buffers go
   first-fit from the bottom, but weight blocks from the top, so that
   their double buffers do not cut the space of what stays into holes (or
   best fit, where that schedule runs faster: `BEST_FIT_RESERVES`).
3. **Prefetch.** Before each compute, the loads of the next units are
   started, in the order they are needed, as long as they fit in free SRAM:
   while one weight block computes, the next one streams in, which is
   double buffering. The scheduler keeps the simulator's clock as it emits
   (`Clock`), so it knows which DMA has ended: the buffers of results
   whose store has ended are freed for the prefetch at no stall
   (`drain_ended`); a prefetch may evict clean pieces read much later
   (`make_room`, `EVICT_MARGIN`); and beyond the next unit it stops where
   the DRAM port is busy past the start of the unit it would load for (that
   load would not start earlier, and its space would sit idle or be
   evicted before use), or, where the next unit loads a piece only at its
   start, where a later unit's load would still hold the port then; and
   it leaves the bytes of the outputs of the units in between free. The
   final units are also scheduled with each prefetch kept clear of the
   output of the unit that reads it (`CLEAR_WAYS`): placed where that
   output still finds a hole, or not started yet, rather than evicted to
   place it and loaded again.

Spilled activations get DRAM offsets from `plan_memory` (verified), and
`run_scratchpad` simulates the schedule, which checks residency and overlaps.
`schedule_no_prefetch` is the baseline: per op, copy in, compute, copy out.
No IR here: pyocc's planning layer.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pyocc import progress
from pyocc.units import format_bytes, plural

from .npu_simulator import (
    Alloc,
    Clock,
    Compute,
    Free,
    Instruction,
    Load,
    NpuCost,
    Piece,
    SimulationResult,
    SramBuffer,
    Store,
    Wait,
    band_part,
    channel_band,
    covers,
    extent_bytes,
    simulate,
    without_gc,
)
from .planner import plan_memory
from .problem import Buffer, PlanningError, Problem
from .verify import verify_plan

ALIGN = 64
"""SRAM buffers start at multiples of this many bytes."""
PREFETCH_UNITS = 16
"""How many units ahead prefetch looks."""
PREFETCH_SHARE = 4
"""Eighths of the SRAM one prefetch may fill ahead of its units (a piece
above that is still prefetched when it is the first: a large weight would
otherwise never load ahead of its op)."""
DEADLINES = True
"""Whether `_fastest_scheduler` also tries a prefetch that looks further
ahead where weights are due (`_load_deadlines`): with the first
`DEADLINE_WAYS` reserves and placements, and with the reserve "none",
kept where faster. At 4 MiB, what runs: ShuffleNet 1.544 -> 1.378
cycles/bound (the weights of its last 18 ops, 4.0 of its 5.5 MB, start
loading while its first stages compute: its stalls in those 18 ops
0.304 -> 0.138 of the bound), the geomean over the nine light models
1.330 -> 1.313; at 1 MiB Inception v1 1.624 -> 1.619, the others
unchanged (the reserve stops their prefetch first: the SRAM is full)."""
DEADLINE_UNITS = 64
"""How many units ahead a prefetch with deadlines looks at most (the
weights of AlexNet's fc6 are due from its first unit on: looking 1,000
units ahead at each unit would cost time and find no room)."""
DEADLINE_WAYS = 3
"""With how many of the reserves and placements that rank first
`_fastest_scheduler` also tries deadlines (and with the reserve "none"):
with the first alone, Inception v2's cascaded schedule at 4 MiB got 1.329
cycles/bound once "largest" ranked first, against 1.305 with "between"
and deadlines. Three since stop 56: at 1 MiB, what runs, Inception v1
1.619 / 1.805 -> 1.603 / 1.791 cycles/bound / DRAM/bound (the reserve
"between", first fit, ranks third and gains the most from deadlines:
1.623 -> 1.603, against 1.619 for "largest"), the geomean of the nine
1.4387 / 1.4181 -> 1.4371 / 1.4169; at 4 MiB and 256 KiB no change; with
every way (six), the same as with three. Since stop 61 (chains rolled
through concats) it moves only AlexNet at 1 MiB (1.0427 -> 1.0424), at no
measurable cost in time."""
CLEAR_WAYS = 2
"""How many of the ways that rank first `_fastest_scheduler` schedules once
more with each prefetch kept clear of the output of the unit that reads it
(`_Scheduler`'s `clear`, `_clear_of_outputs`), kept where faster. Not the
default: at 256 KiB DenseNet-121 took 2.770 -> 2.926 cycles/bound (DRAM
6.834 -> 6.569) with it in every schedule the search makes. At 1 MiB,
what runs, over the nine light models, geomean cycles / DRAM over the
bounds 1.4025 / 1.3530 -> 1.3989 / 1.3476 with one way, 1.3973 / 1.3466
with two, and 1.3972 / 1.3466 with all (up to nine, ResNet-50's and
VGG-19's scheduling about 1.5 times as long); with two, since a prefetch
that no hole holds may make room as without `clear`, 1.3970 / 1.3464."""
EVICT_MARGIN = 16
"""A prefetch may evict a clean piece whose next read comes more than this
many units after the prefetched piece's (16: at 1 MiB over the nine light
models, geomean cycles/bound and DRAM/bound of what runs 1.636 and 1.752,
against 1.635 and 1.767 at 4, and 1.687 and 1.738 never evicting)."""
WHOLE_SHARE = 7
"""Without the (simulated) cascades, an op runs whole (untiled) when its
operands fit in this many eighths of the SRAM (7: measured best at 1 MiB
over the light models for what runs, against 4, 6 and 8; the rest is room
for the next unit's loads)."""
WHOLE_SHARE_CASCADED = 4
"""The same with cascades (4, half the SRAM: 7 made SqueezeNet's and
Inception v2's cascaded schedules slower at 1 MiB)."""
TILE_SHARES = (4, 5, 6, 7)
"""Eighths of the SRAM a tiled op's double-buffered tile may take: the
smallest first (`_choose_tiling`)."""
TILE_GAIN = 1.05
"""A larger tile share is taken only when its estimated cycles are below
the best smaller share's by this factor (1.05: at 1 MiB over the light
models, what runs: geomean cycles/bound 1.805 against 1.806 at 1.1, 1.811
at 1.2 and 1.865 taking the least estimate whatever the share; ResNet-50
2.804 -> 2.227 against the half-SRAM tiles)."""
REDUCTION_COMPETES = True
"""Whether a tiling summed over input channel blocks competes with the
others on its estimate (True), or is taken only for an op no other tiling
fits (False). True: at 1 MiB over the nine light models, what runs:
geomean cycles/bound 1.599 against 1.619, DRAM/bound 1.699 against 1.740
(ResNet-50 1.841 -> 1.738: its 1x1 convolutions of 1024 input channels
on 14x14, in 28 blocks of output channels, each re-read the whole input
in SRAM, 1.8 times their MACs' cycles; summed over 28 blocks of input
channels, 1.02 times; VGG-19 1.955 -> 1.879 and DRAM 1.718 -> 1.408;
DenseNet-121 1.590 -> 1.592 the one slower)."""
CASCADE_SHARE = 3
CHAIN_SHARE = 6
"""A chain cascade's band step (its bands and weights) may take this many
eighths of the SRAM (6: measured better than 4 at 1 MiB)."""
CHAIN_WEIGHTS = (2, 4)
"""The eighths of the SRAM that the weights of one chain cascade's ops may
take: the first when the units are chosen; each other one is tried on the
fastest of them and kept where the simulation runs it faster (a quarter
kept ResNet-50's bottleneck blocks out of chains at 1 MiB; half of it lets
some in, with fewer or narrower bands beside their weights)."""
"""A cascade's bands and weights may take this many quarters of the SRAM."""
RESERVES = ("largest", "none", "between", "own")
"""What a prefetch for a unit after the next one leaves free bytes for
(`_Scheduler.prefetch`): the most bytes one unit before that unit adds to
SRAM, its outputs and its inputs not in SRAM (`largest`: outputs freed by
their last reader in between take no room twice; ShuffleNet at 1 MiB,
what runs: 1.963 / 1.371 -> 1.924 / 1.346 cycles/bound / DRAM/bound),
nothing (`none`, the rule before npu12), the outputs of the units before
that unit (`between`), or of that unit too (`own`). No one of them is
faster everywhere (what runs: at 1 MiB, SqueezeNet 1.486, 1.517 and
1.476 cycles/bound with none, between and own, ShuffleNet 2.104, 2.006
and 2.068; at 4 MiB, SqueezeNet 1.313 with none), so `schedule_scratchpad`
ranks the units of its search by a schedule with the first, and keeps the
fastest simulated of all of them on the units it chose
(`_fastest_scheduler`). The first was "none" until stop 56; ranking by
"largest", what runs over the nine light models went 1.3078 / 1.1037 ->
1.3026 / 1.0932 at 4 MiB (DenseNet-121 1.365 / 1.670 -> 1.357 / 1.527,
ResNet-50 1.521 -> 1.484), 1.4433 / 1.4162 -> 1.4387 / 1.4181 at 1 MiB
(SqueezeNet 1.299 -> 1.262, Inception v1's DRAM 1.751 -> 1.805) and
2.1481 / 2.6813 -> 2.1480 / 2.6785 at 256 KiB (eight, no VGG-19)."""
BEST_FIT_RESERVES = ("between", "own")
"""The reserves that `_fastest_scheduler` also tries with the allocator
placing each buffer in the smallest hole it fits (best fit) instead of the
lowest (first fit, `_Allocator`). Which holes a schedule leaves decides
which prefetches find room: in Inception v1 at 1 MiB, the 4b module's 1x1
filters (320 KB) did not load while the unit before them computed, 544 KB
free but cut into holes of 42, 274 and 227 KB by a 316 KB band placed
first fit. No placement is faster everywhere (the whole search best fit, at
1 MiB: ResNet-50 1.564 -> 1.536 cycles/bound, Inception v1 1.632 -> 1.663),
so best fit is tried on the fastest units only and kept where faster: at 1
MiB, what runs, ResNet-50 1.564 -> 1.533, Inception v1 1.632 -> 1.624,
ShuffleNet 1.976 -> 1.968, no model slower; with the reserve "none" too, no
schedule faster."""
HOME_SHARE = 4
"""An in-place concat's output is assembled in one SRAM buffer (its
inputs' producers write their channel bands into it) when it fits this
many eighths of the SRAM; otherwise each band has a buffer of its own and
goes to its place in the output's DRAM home (see `_rehome`)."""

STREAM_WEIGHTS_SHARE = 3
"""Without the (simulated) cascades, an op whose weights take more than
this many eighths of the SRAM is tiled by blocks of output channels even
where it fits whole (`_units`): its compute starts once the first block
of its weights is in, the next blocks streaming while it computes, instead
of waiting for all of them (a stall that prefetch hid only where the SRAM
had room and the DRAM port time ahead of it). 3: at 1 MiB over the nine
light models, what runs: geomean cycles/bound 1.475 against 1.501 never,
1.471 at 2 (but DRAM/bound 1.513 against 1.491; Inception v1 1.786 ->
1.898); at 4 Inception v2's schedule did not fit in the SRAM (now it falls
back to one without, `_scheduled_units`)."""
STREAM_SLOW_WEIGHTS_SHARE = 1
"""The same for an op whose weights take more than this many eighths of
the SRAM and take longer to load than the op computes (its compute floor):
its load is the op's time, so the blocks after the first hide under it.
1: at 1 MiB, what runs: ShuffleNet 2.025 -> 1.976 (its fourth stage's
convolutions, 0.28 MiB of filters each), geomean 1.475 -> 1.471, DRAM
unchanged; at 4 MiB Inception v2 1.359 -> 1.334; 2 the same at 1 MiB,
1.353 for Inception v2 at 4 MiB; 256 KiB unchanged either way."""

STREAM_SINGLES = 8
"""How many of the ops that stalled `_stream_stalled` tries one by one,
where streaming the weights of all of them is no faster (8: at 1 MiB,
what runs; 4: Inception v2 1.570 -> 1.579 cycles/bound)."""

SIBLING_SHARE = 6
"""Ops whose bands of rows are interleaved (`_sibling_bands`) keep their
weights, a band and their output tiles in this many eighths of the SRAM."""

SIBLING_JOIN_SHARE = 4
"""An op that fits whole runs on the bands of rows of an earlier reader of
its input (`_sibling_rows`) where that input takes more than this many
eighths of the SRAM, and the simulation runs it faster so."""

ASSEMBLE_SHARE = 4
"""The output of an op run on bands of rows that later units read whole, or
by bands of rows of their own, is assembled in SRAM (`_assembled`, where
that schedule ranks first) when it fits this many eighths of the SRAM (6:
the same schedules at 1 MiB; 2: Inception v1's DRAM 1.751 -> 1.768)."""

DRAM_WEIGHT = 0.25
"""How much the DRAM bytes a schedule moves count against its cycles when
`schedule_scratchpad` keeps one of two (`_key`): the least cycles times
DRAM bytes to this power. At 0.25, 1% more cycles is worth 4% fewer DRAM
bytes (issue 22 grades both: cycles and DRAM bytes over their bounds).
SqueezeNet at 1 MiB keeps its bands of rows assembled in SRAM and copied
out by rows: 1.285 -> 1.299 cycles/bound, 1.630 -> 1.150 DRAM/bound. At 1,
Inception v2 kept a schedule 2.5% slower for 2% fewer bytes, at 0.5 one
0.4% slower for 0.9% fewer; at 0 (cycles first, then DRAM: the rule before
stop 54) SqueezeNet kept 1.285 / 1.630."""

REDUCTION_CHAIN_SHARE = 4
"""A reader summing over its producer's blocks of output channels
(`_channel_chains`) does so when its partial sums, two blocks of its
filters and one tile fit in this many eighths of the SRAM."""

PATH_MARGIN = 0.03
"""How near (in `_key`'s first term, a log: 3%) the fastest schedule with
rolled chains and the fastest without must be for `schedule_scratchpad` to
finish both (`_finished`: stalled weights streamed, sibling bands, the
other reserves, outputs assembled) and keep the faster; further apart, only
the faster is finished. Over the nine at 1 and 4 MiB those steps gained
up to 0.15 on one way, but turned the order only at near ties (at 4 MiB
Inception v1, 0.008 apart, and AlexNet, 0.00004; since stop 61, with
concats in rolled chains, SqueezeNet, 0.028 apart: rolled it ends 1.170 /
1.011 cycles / DRAM over the bound, the other way 1.123 / 1.002); finishing
both always cost 1.7x the time to schedule at 1 MiB (stop 60: VGG-19, 34
-> 62 s) for no other change. Two ways that found the same units are
finished once (since stop 62: VGG-19 at 1 MiB, 40 -> 23 s)."""

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


@dataclass
class NpuSchedule:
    """A schedule and what it was built from."""

    instructions: list[Instruction]
    dram_offsets: dict[str, int]
    tiling: dict[str, tuple[int, int]] = field(default_factory=dict)
    """op -> (row bands, channel blocks) for every tiled op."""
    homes: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    """Tensor -> (home tensor, first, end channel) for each input of an
    in-place concat: its pieces are parts of that channel band of the home."""
    input_blocks: dict[str, int] = field(default_factory=dict)
    """op -> its input channel blocks, for every op summed block by block."""


@dataclass
class NpuResult:
    """The scratchpad run of one program (the report's `npu` section)."""

    sram_size: int
    cost: NpuCost
    cycles: int
    compute_cycles: int
    stall_cycles: int
    dram_bytes: int
    dram_lower_bound_bytes: int
    bound_cycles: int
    sram_bytes: int
    macs: int
    tiled_ops: dict[str, tuple[int, int]]
    baseline: SimulationResult
    simulation: SimulationResult
    schedule: NpuSchedule | None = None
    """The schedule simulated (what dnn-npu-schedule writes as IR)."""
    kinds: dict[str, str] = field(default_factory=dict)
    """Tensor -> its kind (weight, input, output, activation), for pictures."""
    sizes: dict[str, int] = field(default_factory=dict)
    """Tensor -> its bytes, for pictures."""
    cascades: bool = False
    """Whether the scheduler could cascade by byte shares (False: chain
    cascades only, what `pyocc plan --scratchpad` reports and `pyocc run
    --scratchpad` runs)."""
    ops: list[NpuOpCost] = field(default_factory=list)
    """Where the cycles and DRAM bytes went, op by op (`op_costs`)."""

    def as_json(self) -> dict:
        """The JSON form (the report's `npu` object)."""
        return {
            "sram_size": self.sram_size,
            "cascades": self.cascades,
            "cost": {"macs_per_cycle": self.cost.macs_per_cycle,
                     "sram_bytes_per_cycle": self.cost.sram_bytes_per_cycle,
                     "dram_bytes_per_cycle": self.cost.dram_bytes_per_cycle},
            "cycles": self.cycles,
            "compute_cycles": self.compute_cycles,
            "stall_cycles": self.stall_cycles,
            "stall_port_bound_cycles": self.simulation.stall_port_bound_cycles,
            "dram_bytes": self.dram_bytes,
            "dram_lower_bound_bytes": self.dram_lower_bound_bytes,
            "bound_cycles": self.bound_cycles,
            "sram_bytes": self.sram_bytes,
            "macs": self.macs,
            "tiled_ops": {op: {"row_bands": r, "channel_blocks": c,
                               **({"input_channel_blocks": self.schedule.input_blocks[op]}
                                  if self.schedule is not None and op in self.schedule.input_blocks else {})}
                          for op, (r, c) in self.tiled_ops.items()},
            "dma_transfers": len(self.simulation.transfers),
            "baseline_no_prefetch": {"cycles": self.baseline.cycles,
                                     "stall_cycles": self.baseline.stall_cycles,
                                     "dram_bytes": self.baseline.dram_bytes,
                                     "sram_bytes": self.baseline.sram_peak_bytes},
            "ops": [dataclasses.asdict(op) for op in self.ops],
        }


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
    most = sram * max(TILE_SHARES) // 8  # each search once, for the largest share; each share keeps what fits it
    if bands is not None:
        options = [(_reduction_tiling(op, tensors, most, big, cost, bands, exact), big) for big in bigs]
        for share in TILE_SHARES:
            found = [(*key, big) for keys, big in options if (key := _within(keys, sram * share // 8)) is not None]
            if found:
                best = min(found)
                return best[3], best[4], best[5], best[7], best[6]
    plain = [(_tiling_with(op, tensors, most, big, cost), big) for big in bigs]
    if split:  # a tiling summed over input channel blocks loads its filters block by block anyway
        plain = [([(key, foot) for key, foot in keys if key[4] > 1], big) for keys, big in plain]
    reduced: list[tuple[list[tuple[_TilingKey, int]], int]] | None = None
    for share in TILE_SHARES:
        limit = sram * share // 8
        found = [(*key, big) for keys, big in plain if (key := _within(keys, limit)) is not None]
        if not found or REDUCTION_COMPETES:
            if reduced is None:
                reduced = [(_reduction_tiling(op, tensors, most, big, cost, exact=exact), big) for big in bigs]
            found += [(*key, big) for keys, big in reduced if (key := _within(keys, limit)) is not None]
        if found:
            # on equal cycles and traffic, a tiling without partial sums (one input channel block) first
            first = min(found, key=lambda f: (f[0], f[1], f[6] > 1, f))
            if best is None or first[0] * TILE_GAIN < best[0]:
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


def _units(program: NpuProgram, sram: int, cost: NpuCost, cascades_too: bool = True,
           chains: bool = True, joins_first: bool = False, home_fit: int = 0, in_place: bool = True,
           sum_bands: bool = False, tight_chains: bool = False, wide_chains: bool = False,
           rolled_chains: bool = False, chain_weights: int = CHAIN_WEIGHTS[0], concat_starts: bool = True,
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
        fits = sum(tensors[n].size for n in names) <= sram * (WHOLE_SHARE_CASCADED if cascades_too else WHOLE_SHARE) // 8
        # its weights stream in blocks of output channels even when it fits whole: above `STREAM_WEIGHTS_SHARE`,
        # or above `STREAM_SLOW_WEIGHTS_SHARE` when they take longer to load than the op computes
        weight_bytes = sum(tensors[n].size for n in dict.fromkeys(op.weights))
        streams = (fits and stream_weights and not cascades_too and op.channels > 1
                   and (op.name in streamed or op.name in split or weight_bytes > sram * STREAM_WEIGHTS_SHARE // 8
                        or weight_bytes > sram * STREAM_SLOW_WEIGHTS_SHARE // 8 and cost.dma_cycles(weight_bytes)
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
    most = sram * max(TILE_SHARES) // 8
    keys = _tiling_with(op, tensors, most, big, cost) + _reduction_tiling(op, tensors, most, big, cost)
    return min((key[:2] for key, _ in keys if key[3:7] == (rows, blocks, rows_outer, in_blocks)), default=None)


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
            if (result.size + 2 * filters + tile > sram * REDUCTION_CHAIN_SHARE // 8
                    or producing + result.size + 2 * filters > sram * WHOLE_SHARE // 8):
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
                and tensors[n].size > sram * SIBLING_JOIN_SHARE // 8 for n in op.inputs):
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
                    and footprint([*group, later]) <= sram * SIBLING_SHARE // 8):
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
        if (name in other or t.kind != "activation" or t.size > sram * ASSEMBLE_SHARE // 8
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


def _copy_unit(op: str, source: _Need, made: _Make, last_of_op: bool = False) -> _Unit:
    """A unit of `op` that copies rows of every channel (an assembling unit
    of a tile: of its block of channels) SRAM to SRAM (a chain's copy unit,
    an assembling unit, a band copied out of the whole):
    no MACs, each byte it makes read and written once."""
    return _Unit(op, 0, (source,), (made,), last_of_op, 2 * made.piece.bytes)


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
        if not writes_whole or banded or size > sram * HOME_SHARE // 8:
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


CHAIN_OPS = 12
"""The most ops one chain cascade may hold."""


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


ROLL_BANDS = 3
"""Band steps of a rolled chain whose compute `_roll_flags` weighs: the
first (no band before) and the steady ones after it (2: the same schedules
at 1 MiB; 6: Inception v1 1.607 / 1.659 -> 1.621 / 1.685 cycles / DRAM
over the bound)."""


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
        few = min(bands, ROLL_BANDS)
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
            tight: bool = False, wide: bool = False, weights: int = CHAIN_WEIGHTS[0],
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
    at most `weights` eighths of the SRAM (`CHAIN_WEIGHTS`). Without
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
    ops = program.ops
    tensors = program.by_name()
    no_start: set[int] = set()  # the concats no chain starts at
    if not concat_starts:
        homes, joined = _homes(program, set())
        no_start = {k for k in joined if tensors[homes[ops[k].inputs[0]].tensor].size <= sram * HOME_SHARE // 8}
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
               and stop < min(len(ops), start + CHAIN_OPS)):
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
                found_cost = _chain_cost(program, start, stop, bands, tight, wide, limit=sram * CHAIN_SHARE // 8,
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


def _cascade_tensors(program: NpuProgram, start: int, stop: int) -> tuple[set[str], set[str], set[str]]:
    """(produced inside, read inside, needed after) the ops start..stop."""
    produced = {n for op in program.ops[start:stop] for n in op.outputs}
    read_inside = {n for op in program.ops[start:stop] for n in op.inputs}
    tensors = program.by_name()
    after = {n for op in program.ops[stop:] for n in op.inputs} | {n for n in produced if tensors[n].kind == "output"}
    return produced, read_inside, after


def _cascade_footprint(program: NpuProgram, start: int, stop: int, bands: int, sram: int) -> int | None:
    """SRAM a cascade of ops start..stop in `bands` row bands needs (its
    weights whole, about four bands of each tensor in flight), or None when
    a band would be thinner than a halo."""
    tensors = program.by_name()
    ops = program.ops[start:stop]
    produced, read_inside, after = _cascade_tensors(program, start, stop)
    small = sram // 8
    foot = sum(tensors[w].size for w in {w for op in ops for w in op.weights})
    names = {n for op in ops for n in (*op.inputs, *op.outputs)}
    reach: dict[str, int] = {}
    for op in ops:
        for n in op.inputs:
            if tensors[n].rows < bands:
                return None
            reach[n] = max(reach.get(n, 0), _reach(op, tensors[n], bands))
        if op.out_rows < bands:
            return None
    for n in names:
        t = tensors[n]
        band = math.ceil(t.size / bands)
        in_flight = (2 * reach.get(n, 0) + 2) * band
        if n in produced and n not in after:
            foot += in_flight
        else:
            foot += t.size if t.size <= small else in_flight
    return foot


def _reach(op: NpuOp, tensor: NpuTensor, bands: int) -> int:
    """How many neighbouring bands on each side a band of `op` reads of
    `tensor`: enough rows to cover the halo."""
    if not op.halo_rows:
        return 0
    return math.ceil(op.halo_rows / max(1, tensor.rows // bands))


def _cascades(program: NpuProgram, sram: int) -> list[tuple[int, int, int]]:
    """(first op, op after the last, row bands) of each cascade: a maximal
    run of consecutive row-splittable ops whose weights fit a quarter of the
    SRAM and whose bands fit half of it, kept when a tensor of it is too big
    to stay whole in SRAM."""
    tensors = program.by_name()
    ops = program.ops
    found: list[tuple[int, int, int]] = []
    start = 0
    while start < len(ops):
        best: tuple[int, int] | None = None
        stop = start
        weights: set[str] = set()
        fitting: list[tuple[int, int]] = []
        while stop < len(ops) and ops[stop].out_rows > 1:
            weights |= set(ops[stop].weights)
            if sum(tensors[w].size for w in weights) > sram // 4:
                break
            fits = next((b for b in _candidates(min(op.out_rows for op in ops[start:stop + 1]))
                         if (f := _cascade_footprint(program, start, stop + 1, b, sram)) is not None
                         and f <= sram * CASCADE_SHARE // 4),
                        None)
            if fits is None:
                break
            best = (stop + 1, fits)
            fitting.append(best)
            stop += 1
        if best:
            # end where the least data crosses to later ops (it goes through DRAM when big)
            stops = {stop: bands for stop, bands in fitting}
            cut = min(stops, key=lambda stop: (_crossing_bytes(program, start, stop, sram), -stop))
            best = (cut, stops[cut])
        names = {n for op in ops[start:best[0]] for n in (*op.inputs, *op.outputs)} if best else set()
        if best and best[1] > 1 and any(tensors[n].size > sram // 4 for n in names):
            found.append((start, best[0], best[1]))
            start = best[0]
        else:
            start += 1
    return found


def _crossing_bytes(program: NpuProgram, start: int, stop: int, sram: int) -> int:
    """Bytes of the big tensors ops start..stop leave to later ops: what a
    cascade ending there sends through DRAM."""
    produced, _, after = _cascade_tensors(program, start, stop)
    tensors = program.by_name()
    return sum(tensors[n].size for n in produced & after if tensors[n].size > sram // 8)


def _cascade_units(program: NpuProgram, start: int, stop: int, bands: int, sram: int) -> list[_Unit]:
    """The ops start..stop band by band: op k computes band i once its
    producers inside the cascade computed band i + 1 (its halo below), so
    a band of each tensor lives only while its consumers need it."""
    tensors = program.by_name()
    ops = program.ops[start:stop]
    produced, _, after = _cascade_tensors(program, start, stop)
    producer = {n: k for k, op in enumerate(ops) for n in op.outputs}
    small = sram // 8
    skew: list[int] = []
    for op in ops:
        lag = [skew[producer[n]] + _reach(op, tensors[n], bands) for n in op.inputs if n in producer]
        skew.append(max(lag, default=0))
    units: list[_Unit] = []
    for step in range(bands + max(skew)):
        for k, op in enumerate(ops):
            i = step - skew[k]
            if not 0 <= i < bands:
                continue
            reads: list[_Need] = []
            touched = 0
            for n in dict.fromkeys(op.inputs):
                t = tensors[n]
                band = _split(t.size, bands, i)
                halo = math.ceil(t.size * op.halo_rows / max(1, t.rows))
                touched += band + 2 * halo
                if t.size <= small and n not in produced:
                    reads.append(_Need(Piece(n, "all", t.size), False))
                    continue
                r = _reach(op, t, bands)
                near = [j for j in range(i - r, i + r + 1) if 0 <= j < bands]
                reads += [_Need(Piece(n, f"band{j}/{bands}", _split(t.size, bands, j)), True) for j in near]
            for w in dict.fromkeys(op.weights):
                reads.append(_Need(Piece(w, "all", tensors[w].size), False))
                touched += tensors[w].size
            writes = []
            for n in dict.fromkeys(op.outputs):
                t = tensors[n]
                piece = Piece(n, f"band{i}/{bands}", _split(t.size, bands, i))
                touched += piece.bytes
                if n not in after:
                    writes.append(_Make(piece, KEEP))
                elif t.size <= small:
                    writes.append(_Make(piece, WHOLE))
                else:
                    writes.append(_Make(piece, KEEP_STORE))
            units.append(_Unit(op.name, _split(op.macs, bands, i), tuple(reads), tuple(writes), i == bands - 1, touched))
    return units


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
                 reserve: str = RESERVES[0], best_fit: bool = False, deadlines: bool = False,
                 facts: _UnitFacts | None = None, clear: bool = False):
        self.tensors = program.by_name()
        self.reserve = reserve
        """What a prefetch beyond the next unit leaves room for: one of
        `RESERVES` (see `prefetch`); `best_fit`: the allocator's placement
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
                if after > use + EVICT_MARGIN:
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
            due = min(bisect.bisect_right(self.latest, self.starts[index + 1]), index + 1 + DEADLINE_UNITS)
        for later in range(index + 1, min(len(self.units), max(index + 1 + PREFETCH_UNITS, due))):
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
                if ahead and ahead + need.piece.bytes > self.sram * PREFETCH_SHARE // 8 and later >= due:
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


def _plan_spills(instructions: list[Instruction], tensors: dict[str, NpuTensor]) -> dict[str, int]:
    """DRAM offsets for activations written back, planned over their DRAM lives."""
    span: dict[str, list[int]] = {}
    for index, ins in enumerate(instructions):
        if isinstance(ins, (Load, Store)) and tensors[ins.piece.tensor].kind == "activation":
            span.setdefault(ins.piece.tensor, [index, index])[1] = index
    if not span:
        return {}
    problem = Problem(tuple(Buffer(name, tensors[name].size, first, last, ALIGN) for name, (first, last) in span.items()))
    plan = plan_memory(problem)
    verify_plan(problem, plan)
    return dict(plan.offsets)


_Key = tuple[float, int, int]
"""A schedule's rank (`_key`)."""


class _Scheduled(NamedTuple):
    """One way of scheduling a program, as the search ranks it."""

    key: _Key
    """Its rank (`_key`)."""
    schedule: NpuSchedule
    units: list[_Unit]
    """The units `schedule` runs."""
    reserve: str
    """The one of `RESERVES` its `_Scheduler` left room with."""


@without_gc
def schedule_scratchpad(program: NpuProgram, sram_size: int, cost: NpuCost = NpuCost(),
                        cascades: bool = False, chains: bool = True) -> NpuSchedule:
    """The prefetching schedule of `program` for an SRAM of `sram_size` bytes
    (`_schedule_scratchpad`); where no way of it fits, the same search again
    with each tiling summed over input channel blocks counted at its largest
    tile (`_reduction_tiling`'s `exact`). Counted at the mean, such a
    tiling can leave a unit no hole the size it needs (VGG-19's conv1_2 at
    256 KiB: 141 bands of 224 rows, most of them two rows); counted at the
    largest everywhere, the tilings of schedules that fit change too, and
    some run slower (DenseNet-121 at 256 KiB, 2.770 -> 2.918 cycles/bound)."""
    try:
        return _schedule_scratchpad(program, sram_size, cost, cascades, chains, exact_tiles=False)
    except PlanningError:
        return _schedule_scratchpad(program, sram_size, cost, cascades, chains, exact_tiles=True)


def _schedule_scratchpad(program: NpuProgram, sram_size: int, cost: NpuCost, cascades: bool, chains: bool,
                         exact_tiles: bool) -> NpuSchedule:
    """The prefetching schedule of `program` for an SRAM of `sram_size` bytes
    (`cost` steers the choice of tilings; without `cascades`, what the IR
    runs: chain cascades (unless not `chains`), other ops tiled one by one,
    and concats in place: the fastest simulated of the concats in place
    outside the chains, before them, and none; each with the chains found
    counted with a margin, tight, wide, rolled and rolled by the most bytes
    live at once (`_chains`), where they find different chains; then, on
    the fastest placement of the concats, the chains whose weights may take
    more of the SRAM (`CHAIN_WEIGHTS`) and those that start at no concat
    assembled in SRAM (`_chains`' `concat_starts`), kept where they run
    faster; then the fastest with rolled chains and the fastest without,
    each finished apart where near (`_finished`, `PATH_MARGIN`): the
    weights of the ops that stalled streamed where that runs faster,
    `_stream_stalled`; then the ops still whole whose loads came late on
    tilings whose weights load in blocks, where that runs faster, the rest
    finished with them and without (`_split_late`); then ops that fit whole on the bands of
    rows of a sibling reader of their input, `_sibling_rows`, where that
    runs faster; then the fastest units
    scheduled with the other `RESERVES` and best fit, `_fastest_scheduler`;
    last, the same with bands of rows assembled in SRAM, `_assembled`, and
    with tiles of rows and channels assembled too, each kept where that runs
    faster; the faster of the two kept). "Faster"
    everywhere here: first by `_key`, the simulated cycles with the DRAM
    bytes weighed in (`DRAM_WEIGHT`). `exact_tiles`: as `_units`'."""
    _check_program(program)
    joins = any(op.joins for op in program.ops)
    # a chain's band step counted with every inner band twice leaves room for the next units'
    # prefetch; counted tight, it takes fewer, larger bands, whose halos load and compute less:
    # neither is faster everywhere (at 1 MiB, what runs: ShuffleNet 2.629 -> 2.481 cycles/bound
    # tight, its residuals loaded per band again less often; SqueezeNet 1.454 -> 1.787)
    # and counted as the most bytes live at once, each op once per band step (the rows its other
    # readers read copied out), the chains chosen for the most saved in all: ShuffleNet at 1 MiB
    # 2.317 -> 2.180 cycles/bound, DRAM 1.853 -> 1.693: two residual units in a chain, the first's
    # output never in DRAM; rolled, counted either way (the most bytes live at once: `_units_peak`):
    # ShuffleNet at 1 MiB 1.827 -> 1.700 cycles/bound, its units' concats inside rolled chains
    counts: list[tuple[bool, bool, bool]] = []
    found: list[list[tuple[int, int, int]]] = []
    for count in (((False, False, False), (True, False, False), (True, True, False), (False, False, True),
                   (False, True, True))
                  if not cascades and chains else ((False, False, False),)):
        chained = _chains(program, sram_size, cost, tight=count[0], wide=count[1], rolled=count[2]) if chains else []
        # the same chains rolled run other units
        if not any(other == chained and (done[2] == count[2] or not chained) for done, other in zip(counts, found)):
            counts.append(count)
            found.append(chained)
    # the chain counts whose chains differ where their weights may take more of the SRAM (`CHAIN_WEIGHTS`),
    # or where none starts at a concat assembled in SRAM in place (`_chains`' `concat_starts`)
    more_chains: list[tuple[tuple[bool, bool, bool], int, bool]] = []
    for count, chained_ops in zip(counts, found, strict=True):
        seen = [chained_ops]
        for share, starts in itertools.product(CHAIN_WEIGHTS, (True, False)) if chains and not cascades else ():
            other_chains = _chains(program, sram_size, cost, tight=count[0], wide=count[1], weights=share,
                                   concat_starts=starts, rolled=count[2])
            if other_chains not in seen:
                seen.append(other_chains)
                more_chains.append((count, share, starts))
    if cascades:
        units, tiling, _, instructions, key, reserve = _scheduled_units(program, sram_size, cost, cascades, chains,
                                                                        exact_tiles=exact_tiles)
        schedule = NpuSchedule(instructions, _plan_spills(instructions, program.by_name()), tiling,
                               input_blocks=_input_blocks(units))
        return _fastest_scheduler(program, sram_size, cost, _Scheduled(key, schedule, units, reserve))[1]

    def scheduled(*choices: Any, streamed: frozenset[str] = frozenset(), join_siblings: bool = False,
                  assemble: bool = False, slices: bool = True, tiles: bool = False,
                  split: frozenset[str] = frozenset()) -> _Scheduled:
        """The units that `_units(program, sram_size, cost, cascades,
        chains, *choices, streamed=streamed, join_siblings=join_siblings,
        exact_tiles=exact_tiles, split=split)` makes, scheduled
        (`_scheduled_units`, with `assemble`, `slices` and `tiles`)."""
        units, tiling, homes, instructions, key, reserve = _scheduled_units(
            program, sram_size, cost, cascades, chains, *choices, streamed=streamed, join_siblings=join_siblings,
            assemble=assemble, slices=slices, tiles=tiles, exact_tiles=exact_tiles, split=split)
        schedule = NpuSchedule(instructions, _plan_spills(instructions, program.by_name()), tiling,
                               {n: (h.tensor, h.first, h.end) for n, h in homes.items()}, _input_blocks(units))
        return _Scheduled(key, schedule, units, reserve)

    failed: PlanningError | None = None
    # concats in place where chains leave them, or first (the chains around them), or none (an
    # output assembled in SRAM holds its space while all its inputs are computed, which can cost
    # more than the copy saves: Inception at 4 MiB): the fastest; outputs assembled in SRAM where
    # the units beside them fit it (the allocator may still find the SRAM too fragmented: then
    # within 7/8 of it, then none)
    # and each of those in place with and without summing the readers of a concat's output over its
    # bands (DenseNet-121 at 1 MiB: 1.792 -> 1.637 cycles/bound; SqueezeNet 1.543 -> 1.716 with them)
    variants = ((False, True, False), (True, True, False), (False, False, False), (False, True, True),
                (True, True, True)) if joins else ((False, True, False),)
    # the fastest so far, its concats' placement and its choices, per way of running chains: computing
    # halos again, or rolled; each within `PATH_MARGIN` of the faster is finished apart and the
    # faster kept (at near ties the later steps can turn the order: Inception v1 at 4 MiB, rolled
    # first by 0.8% after these steps, ended 1.345 / 1.037 cycles / DRAM over the bound where the
    # other ends 1.338 / 1.009)
    paths: dict[bool, tuple[_Scheduled, tuple[bool, int, bool, bool], tuple[Any, ...]]] = {}

    def holds_a_concat(chained_ops: list[tuple[int, int, int]]) -> bool:
        return any(program.ops[k].joins for start, stop, _ in chained_ops for k in range(start, stop))

    # with no chain holding a concat, both ways of placing them give the same units: once is enough
    tried = [(count, variant) for count, chained_ops in zip(counts, found, strict=True) for variant in variants
             if not variant[0] or holds_a_concat(chained_ops)]
    with progress.steps(f"scheduling {plural(len(program.ops), 'op')} for {format_bytes(sram_size)} of SRAM",
                        len(tried) + len(more_chains) + 1) as step:
        for (tight, wide, rolled), (joins_first, in_place, sum_bands) in tried:
            for fit in (sram_size, sram_size * WHOLE_SHARE // 8, 0) if in_place and joins else (0,):
                try:
                    found_best = scheduled(joins_first, fit, in_place, sum_bands, tight, wide, rolled)
                except PlanningError as e:
                    failed = e  # the last: the schedule without concats in place says why it does not fit
                    continue
                if rolled not in paths or found_best.key < paths[rolled][0].key:
                    placement = (joins_first, fit, in_place, sum_bands)
                    paths[rolled] = found_best, placement, (*placement, tight, wide, rolled)
                break
            step()
        if not paths:
            assert failed is not None
            raise failed
        # then chains whose weights take more of the SRAM (`CHAIN_WEIGHTS`), or that start at no concat
        # assembled in SRAM, each way of counting them, on the fastest placement of the concats; kept
        # only when faster (a tie keeps the first)
        for (tight, wide, rolled), share, starts in more_chains:
            try:
                if rolled in paths:
                    best, placement, _ = paths[rolled]
                    other = scheduled(*placement, tight, wide, rolled, share, starts)
                    if other.key < best.key:
                        paths[rolled] = other, placement, (*placement, tight, wide, rolled, share, starts)
            except PlanningError:
                continue
            finally:
                step()
    first = min(best.key for best, _, _ in paths.values())
    near: list[tuple[_Scheduled, tuple[Any, ...]]] = []
    for best, _, choices in paths.values():
        # a way whose units are those of a way before it finishes to the same schedule: once is enough (VGG-19
        # at 1 MiB, whose rolled way finds the other's units: 40 -> 23 s)
        if best.key[0] <= first[0] + PATH_MARGIN and all(best.units != other.units for other, _ in near):
            near.append((best, choices))
    return min((_finished(program, sram_size, cost, best, choices, scheduled) for best, choices in near),
               key=lambda found: found[0])[1]


def _finished(program: NpuProgram, sram_size: int, cost: NpuCost, best: _Scheduled, choices: tuple[Any, ...],
              scheduled: Callable[..., _Scheduled]) -> tuple[_Key, NpuSchedule]:
    """The last steps of `_schedule_scratchpad` on `best`, made by
    `scheduled(*choices)`: (its key, the fastest schedule found)."""
    # the weights of the ops that stalled streamed, where that runs faster
    best, streamed = _stream_stalled(program, sram_size, cost, best,
                                     lambda streamed: scheduled(*choices, streamed=streamed))
    # then the ops still whole whose loads came late split, where that runs faster; both finished, the
    # faster kept (the unsplit one on a tie): the steps after can turn the order
    split_best, split = _split_late(program, sram_size, cost, best,
                                    lambda split: scheduled(*choices, streamed=streamed, split=split))
    return min([_finish(program, sram_size, cost, best, choices, scheduled, streamed, frozenset())]
               + ([_finish(program, sram_size, cost, split_best, choices, scheduled, streamed, split)] if split else []),
               key=lambda found: found[0])


def _finish(program: NpuProgram, sram_size: int, cost: NpuCost, best: _Scheduled, choices: tuple[Any, ...],
            scheduled: Callable[..., _Scheduled], streamed: frozenset[str], split: frozenset[str]
            ) -> tuple[_Key, NpuSchedule]:
    """The steps of `_finished` after the weights streamed (`streamed`) and
    the ops split (`split`), on `best`: siblings' bands, every way
    (`_fastest_scheduler`), outputs assembled in SRAM."""
    # ops that fit whole on the bands of their sibling readers, where that runs faster
    join_siblings = False
    try:
        joined = scheduled(*choices, streamed=streamed, join_siblings=True, split=split)
        if joined.key < best.key:
            best, join_siblings = joined, True
    except PlanningError:
        pass  # the siblings' weights and bands do not fit beside what stays in SRAM
    # the other ways of leaving room for outputs (`RESERVES`) on the fastest units only (on every
    # variant too they cost 1.9x the scheduling time; at 1 MiB only SqueezeNet gained by it, 1.486 ->
    # 1.476 against 1.486 -> 1.517 here), and best fit (`BEST_FIT_RESERVES`)
    fastest = _fastest_scheduler(program, sram_size, cost, best)
    # last, the same with the outputs of ops on bands of rows assembled in SRAM (`_assembled`), kept
    # where faster: compared before `_fastest_scheduler`, SqueezeNet at 1 MiB kept it and ran slower
    # after (1.285 -> 1.298 cycles/bound). With the bands that later units read by rows copied out of
    # the whole (`slices`) and without: the first may take the SRAM a better schedule of the second
    # needs (Inception v1 at 256 KiB); each of those also with the tiles of ops run on bands of rows of
    # blocks of channels assembled (`tiles`), and without: assembling one output more can cost the
    # others their room (a dense block of three layers at 64 KiB, its last 1x1's tiles assembled
    # beside its 3x3s' outputs: 85,598 -> 87,899 cycles)
    tried_units: list[list[_Unit]] = []
    for tiles, slices in itertools.product((False, True), (True, False)):
        units = _assembled(program, best.units, sram_size, slices, tiles)
        if units is best.units or units in tried_units:
            continue
        tried_units.append(units)
        try:
            assembled = scheduled(*choices, streamed=streamed, join_siblings=join_siblings, assemble=True,
                                  slices=slices, tiles=tiles, split=split)
        except PlanningError:
            continue  # the whole outputs do not fit beside what stays in SRAM
        fastest = min(fastest, _fastest_scheduler(program, sram_size, cost, assembled), key=lambda found: found[0])
    return fastest


def _stream_stalled(program: NpuProgram, sram_size: int, cost: NpuCost, best: _Scheduled,
                    scheduled: Callable[[frozenset[str]], _Scheduled]) -> tuple[_Scheduled, frozenset[str]]:
    """The fastest simulated of `best` and the schedules `scheduled(streamed)`
    makes with the weights of some of its stalled ops streamed (`_units`'
    `streamed`): the ops that ran whole, can be split by output channels,
    have more than `STREAM_SLOW_WEIGHTS_SHARE` eighths of the SRAM of
    weights, and whose compute waited for DMA. All of them at once first;
    where that is no faster, each of the `STREAM_SINGLES` that stalled
    longest alone, keeping every one that is faster. The rules of `_units`
    stream an op's weights by its size alone; whether streaming them pays
    depends on what the SRAM holds around it, which the simulation knows
    (DenseNet-121 at 1 MiB: 1.478 -> 1.418 cycles/bound, its 1x1
    convolutions over the growing concatenations; streaming every op
    above the share instead: 1.416, but Inception v1 1.671 -> 1.691).
    Also returns the ops whose weights the schedule kept streams."""
    stalled = _waited_whole(program, sram_size, cost, best, lambda c: c.stall_cycles)
    if not stalled:
        return best, frozenset()
    return _kept_trials(best, [c.op for c in stalled], [c.op for c in stalled[:STREAM_SINGLES]], scheduled,
                        f"streaming the weights of {plural(len(stalled), 'op')} that stalled")


def _waited_whole(program: NpuProgram, sram_size: int, cost: NpuCost, best: _Scheduled,
                  waited: Callable[[NpuOpCost], int]) -> list[NpuOpCost]:
    """The ops of `best`'s simulated schedule that ran whole (one tile), can
    be split by output channels, have more than `STREAM_SLOW_WEIGHTS_SHARE`
    eighths of the SRAM of weights, and `waited` (their stall, or a part of
    it) more than 0 cycles, the longest first: the candidates of
    `_stream_stalled` and `_split_late`."""
    ops = {op.name: op for op in program.ops}
    simulated = _simulate(best.schedule, program, sram_size, cost)
    return sorted((c for c in op_costs(program, best.schedule.instructions, simulated, cost)
                   if waited(c) > 0 and c.tiles == 1 and ops[c.op].channels > 1
                   and c.weight_bytes > sram_size * STREAM_SLOW_WEIGHTS_SHARE // 8),
                  key=lambda c: -waited(c))


def _kept_trials(best: _Scheduled, every: list[str], singles: list[str],
                 scheduled: Callable[[frozenset[str]], _Scheduled], what: str) -> tuple[_Scheduled, frozenset[str]]:
    """`best`, or faster, `scheduled(ops)` for the ops kept: all of `every`
    at once first; where that is no faster (and `every` holds more than
    one), each of `singles` alone, keeping each that is faster by `_key`
    (a progress block of `what`). Also returns the ops kept."""
    kept: frozenset[str] = frozenset()
    trials = [frozenset(every)] + ([frozenset([op]) for op in singles] if len(every) > 1 else [])
    with progress.steps(what, len(trials)) as step:
        for trial in trials:
            try:
                other = scheduled(kept | trial)
            except PlanningError:
                continue
            finally:
                step()
            if other.key < best.key:
                best, kept = other, kept | trial
                if trial == trials[0]:
                    break
    return best, kept


def _split_late(program: NpuProgram, sram_size: int, cost: NpuCost, best: _Scheduled,
                scheduled: Callable[[frozenset[str]], _Scheduled]) -> tuple[_Scheduled, frozenset[str]]:
    """The fastest simulated of `best` and the schedules `scheduled(split)`
    makes with some of its ops on their best tiling whose weights load in
    blocks (`_units`' `split`): the ops that ran whole, can be split by
    output channels, have more than `STREAM_SLOW_WEIGHTS_SHARE` eighths of
    the SRAM of weights, and whose stall was late in part (any cycle of it:
    the stall less its port-bound part, `NpuOpCost.port_bound_stall_cycles`;
    the port had idled before it, so loads started then would have
    shortened it, given room). The `STREAM_SINGLES` with the most late
    cycles all at once first; where that is no faster, each alone, keeping
    every one that is faster. Such an op's best tiling is one tile, so
    `_stream_stalled` leaves it whole; split, its first weight block is
    smaller than its weights, finds room sooner and loads sooner, and the
    next ones load while it computes (SqueezeNet's fire7 expand, 332,544
    bytes of weights, at 1 MiB). Also returns the ops split."""
    late = _waited_whole(program, sram_size, cost, best,
                         lambda c: c.stall_cycles - c.port_bound_stall_cycles)[:STREAM_SINGLES]
    if not late:
        return best, frozenset()
    return _kept_trials(best, [c.op for c in late], [c.op for c in late], scheduled,
                        f"splitting {plural(len(late), 'op')} whose loads came late")


def _scheduled_units(program: NpuProgram, sram_size: int, cost: NpuCost, *choices: Any,
                     streamed: frozenset[str] = frozenset(), join_siblings: bool = False, assemble: bool = False,
                     slices: bool = True, tiles: bool = False, exact_tiles: bool = False,
                     split: frozenset[str] = frozenset(),
                     ) -> tuple[list[_Unit], dict[str, tuple[int, int]], dict[str, _Home], list[Instruction], _Key,
                                str]:
    """What `_units(program, sram_size, cost, *choices, streamed=streamed,
    join_siblings=join_siblings, split=split)` returns, with the bands of sibling readers interleaved
    (`_sibling_bands`; with `assemble`, bands of rows assembled in SRAM,
    `_assembled` with `slices` and `tiles`, scheduled with each of `RESERVES` until one
    fits), the units' instructions (`_Scheduler`), their rank (`_ran`) and
    the reserve they were scheduled with (the first of `RESERVES`, or with
    `assemble` the first that fits); where
    the SRAM cannot hold those, without the siblings interleaved; then made
    again without the readers on their producer's tiles
    (`_channel_chains`, `_row_chains`) and without weights streamed by ops
    that fit whole (`STREAM_WEIGHTS_SHARE`, `streamed`). `exact_tiles`: as
    `_units`'."""
    units, tiling, homes = _units(program, sram_size, cost, *choices, streamed=streamed, join_siblings=join_siblings,
                                  exact_tiles=exact_tiles, split=split)
    siblings = _sibling_bands(program, units, tiling, sram_size)
    tries = ([siblings] if siblings is not units else []) + [units]
    if assemble:
        tries = [_assembled(program, units, sram_size, slices, tiles) for units in tries]
    for tried in tries:
        # assembled, the SRAM holds more for longer: where the first reserve finds it too full, another may
        # not (ShuffleNet at 1 MiB; retrying every schedule so: Inception v1 1.624 -> 1.659 cycles/bound)
        for reserve in RESERVES if assemble else RESERVES[:1]:
            try:
                return tried, tiling, homes, *_ran(_Scheduler(program, sram_size, tried, cost, reserve)), reserve
            except PlanningError as e:
                failed = e
    plain, tiling, homes = _units(program, sram_size, cost, *choices, channel_chains=False, stream_weights=False,
                                  exact_tiles=exact_tiles)
    if plain == units:
        raise failed
    return plain, tiling, homes, *_ran(_Scheduler(program, sram_size, plain, cost)), RESERVES[0]


def _ran(scheduler: _Scheduler) -> tuple[list[Instruction], _Key]:
    """The instructions `scheduler` emits and their rank (`_key`) by its
    clock (`Clock`), which times them as the simulator does: the search
    ranks its schedules without simulating each (that was a sixth of
    ResNet-50's at 1 MiB). Raises what `scheduler.run` raises."""
    instructions = scheduler.run()
    return instructions, _key(scheduler.clock.now, scheduler.clock.moved)


def _key(cycles: int, dram_bytes: int) -> _Key:
    """How a schedule that takes `cycles` and moves `dram_bytes` is ranked
    (the least first): cycles times DRAM bytes to the power `DRAM_WEIGHT`
    (as logs), then cycles, then DRAM bytes."""
    return math.log(cycles) + DRAM_WEIGHT * math.log(max(dram_bytes, 1)), cycles, dram_bytes


def _fastest_scheduler(program: NpuProgram, sram_size: int, cost: NpuCost, found: _Scheduled
                       ) -> tuple[_Key, NpuSchedule]:
    """(rank, schedule) of the first by `_key` (the fastest simulated, DRAM
    bytes weighed by `DRAM_WEIGHT`) of `found` (made first fit, with its
    reserve) and its units scheduled with each other reserve, and with each of
    `BEST_FIT_RESERVES` best fit (which may not fit: their prefetches and
    placements leave other holes); then, with `DEADLINES`, the first
    `DEADLINE_WAYS` of those and the reserve "none" with deadlines
    (`_Scheduler`'s); then the first `CLEAR_WAYS` of all those with their
    prefetches kept clear of their readers' outputs (`_Scheduler`'s
    `clear`). Each way is ranked by its scheduler's clock (`_ran`), and
    only the first gets its spills planned."""
    units, schedule = found.units, found.schedule
    facts = _UnitFacts.of(units, cost)
    # (rank, way, instructions) of each reserve and placement that fits
    ranked = [(found.key, (found.reserve, False), schedule.instructions)]
    others = [(reserve, False) for reserve in RESERVES if reserve != found.reserve]
    for way in others + [(reserve, True) for reserve in BEST_FIT_RESERVES]:
        tried = _try_scheduler(program, sram_size, cost, units, facts, *way)
        if tried is not None:
            ranked.append((tried[0], way, tried[1]))
    # with deadlines, every way cost 1.28 times the scheduling time at 1 MiB, the first and "none" 1.17, with the
    # same schedules; the first `DEADLINE_WAYS`: the way that ranks first gains the least from them at times
    ways = [way for _, way, _ in sorted(ranked, key=lambda r: r[:2])[:DEADLINE_WAYS]] + [("none", False)]
    every = [(key, tried, (*way, False)) for key, way, tried in ranked]  # (rank, instructions, (*way, deadlines))
    for way in (dict.fromkeys(ways) if DEADLINES else ()):
        tried = _try_scheduler(program, sram_size, cost, units, facts, *way, deadlines=True)
        if tried is not None:
            every.append((*tried, (*way, True)))
    firsts: dict[_Key, tuple[str, bool, bool]] = {}  # the first way of each rank (ties are often one schedule)
    for key, _, way in sorted(every, key=lambda r: r[0]):
        firsts.setdefault(key, way)
    for way in list(firsts.values())[:CLEAR_WAYS]:
        tried = _try_scheduler(program, sram_size, cost, units, facts, *way, clear=True)
        if tried is not None:
            every.append((*tried, way))
    key, instructions, _ = min(every, key=lambda r: r[0])  # the first of the least
    if instructions is schedule.instructions:
        return key, schedule
    return key, dataclasses.replace(schedule, instructions=instructions,
                                    dram_offsets=_plan_spills(instructions, program.by_name()))


def _try_scheduler(program: NpuProgram, sram_size: int, cost: NpuCost, units: list[_Unit], facts: _UnitFacts,
                   reserve: str, best_fit: bool, deadlines: bool = False, clear: bool = False
                   ) -> tuple[_Key, list[Instruction]] | None:
    """(rank, instructions) of `units` (whose `facts` those are) scheduled
    by a `_Scheduler` with `reserve`, `best_fit`, `deadlines` and `clear`
    (`_ran`), or None where it does not fit."""
    try:
        instructions, key = _ran(_Scheduler(program, sram_size, units, cost, reserve, best_fit, deadlines, facts, clear))
    except PlanningError:
        return None
    return key, instructions


@without_gc
def schedule_no_prefetch(program: NpuProgram, sram_size: int, cost: NpuCost = NpuCost(),
                         cascades: bool = False, chains: bool = True) -> NpuSchedule:
    """The baseline: per unit, load every operand, compute, store every
    result, all serially; nothing stays in SRAM between units."""
    _check_program(program)
    try:
        units, tiling, homes = _units(program, sram_size, cost, cascades, chains)
    except PlanningError:  # an op that fits only in channel blocks of a concat's output: not in place
        units, tiling, homes = _units(program, sram_size, cost, cascades, chains, in_place=False)
    tensors = program.by_name()
    out: list[Instruction] = []
    ids = 0
    for unit in units:
        offset = 0
        buffers: list[SramBuffer] = []

        def take(nbytes: int, label: str) -> SramBuffer:
            nonlocal offset
            buffer = SramBuffer(f"u{len(out)}:{label}", offset, nbytes)
            offset = math.ceil((offset + nbytes) / ALIGN) * ALIGN
            out.append(Alloc(buffer))
            buffers.append(buffer)
            return buffer

        reads = []
        for need in unit.reads:
            ids += 1
            buffer = take(need.piece.bytes, f"{need.piece.tensor}:{need.piece.part}")
            out.append(Load(ids, buffer, need.piece))
            out.append(Wait(ids))
            reads.append((buffer, need.piece))
        writes = [(take(m.piece.bytes, f"{m.piece.tensor}:{m.piece.part}"), m.piece) for m in unit.writes]
        out.append(Compute(unit.op, unit.macs, unit.sram_bytes, tuple(reads), tuple(writes)))
        for buffer, piece in writes:
            ids += 1
            out.append(Store(ids, buffer, piece))
            out.append(Wait(ids))
        for buffer in buffers:
            out.append(Free(buffer))
    return NpuSchedule(out, _plan_spills(out, tensors), tiling, {n: (h.tensor, h.first, h.end) for n, h in homes.items()},
                       _input_blocks(units))


def _check_program(program: NpuProgram) -> None:
    """Raise `PlanningError` for unknown tensor names or kinds."""
    tensors = program.by_name()
    for t in program.tensors:
        if t.kind not in KINDS:
            raise PlanningError(f"scratchpad: tensor {t.name!r} has kind {t.kind!r}; expected one of {', '.join(KINDS)}")
    for op in program.ops:
        for name in (*op.inputs, *op.weights, *op.outputs):
            if name not in tensors:
                raise PlanningError(f"scratchpad: op {op.name!r} names unknown tensor {name!r}")


def _simulate(schedule: NpuSchedule, program: NpuProgram, sram_size: int, cost: NpuCost) -> SimulationResult:
    tensors = program.by_name()
    return simulate(
        schedule.instructions,
        sram_size=sram_size,
        tensor_bytes={t.name: t.size for t in program.tensors},
        dram_resident={t.name for t in program.tensors if t.kind in ("weight", "input")},
        outputs={n for n, t in tensors.items() if t.kind == "output"},
        dram_offsets=schedule.dram_offsets,
        cost=cost,
    )


@without_gc
def run_scratchpad(program: NpuProgram, sram_size: int, cost: NpuCost = NpuCost(), cascades: bool = False,
                   chains: bool = True) -> NpuResult:
    """Schedule `program` for the scratchpad, simulate it and the no-prefetch
    baseline, and report both against the bounds, with the schedule's cost
    op by op (`op_costs`; `cascades`, `chains`: as `schedule_scratchpad`).
    The defaults give the schedule `pyocc run --scratchpad` runs; with
    `cascades`, one the IR does not run (simulated only)."""
    schedule = schedule_scratchpad(program, sram_size, cost, cascades, chains)
    result = _simulate(schedule, program, sram_size, cost)
    baseline = _simulate(schedule_no_prefetch(program, sram_size, cost, cascades, chains), program, sram_size, cost)
    lower = program.dram_lower_bound_bytes()
    macs = program.macs()
    bound = max(math.ceil(macs / cost.macs_per_cycle), math.ceil(lower / cost.dram_bytes_per_cycle))
    return NpuResult(
        sram_size, cost, result.cycles, result.compute_cycles, result.stall_cycles, result.dram_bytes,
        lower, bound, result.sram_peak_bytes, macs, schedule.tiling, baseline, result, schedule,
        {t.name: t.kind for t in program.tensors}, {t.name: t.size for t in program.tensors}, cascades,
        op_costs(program, schedule.instructions, result, cost),
    )


def schedule_cuts(program: NpuProgram, instructions: list[Instruction]) -> set[int]:
    """The op indices k at which `instructions`, a schedule of `program`,
    can be cut: every compute of the ops before k comes before every
    compute of op k and the ops after it (no chain or cascade runs across
    k). `NpuProgram.weight_stream_floor_cycles(cost, size, cuts)` is then a
    floor for this schedule and every other that cuts there."""
    index = {op.name: k for k, op in enumerate(program.ops)}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for at, ins in enumerate(instructions):
        if isinstance(ins, Compute):
            k = index[ins.op]
            first.setdefault(k, at)
            last[k] = at
    cuts: set[int] = set()
    ended = -1  # the last compute of the ops before k
    starts = [math.inf] * (len(program.ops) + 1)  # the first compute of op k or after it
    for k in reversed(range(len(program.ops))):
        starts[k] = min(starts[k + 1], first.get(k, math.inf))
    for k in range(1, len(program.ops)):
        ended = max(ended, last.get(k - 1, -1))
        if ended < starts[k]:
            cuts.add(k)
    return cuts


@dataclass(frozen=True)
class NpuOpCost:
    """Where one op's cycles and DRAM bytes went in a simulated schedule
    (`op_costs`): the per-op breakdown of the report's totals."""

    op: str
    tiles: int
    """Computes (tiles, or bands of a chain) the op ran as, with the copies
    in SRAM of rows it reads (`_chain_units`)."""
    floor_cycles: int
    """max(MACs / macs_per_cycle, bytes of the whole op / sram_bytes_per_cycle):
    the op whole and resident (`NpuProgram.op_floor_cycles`; 0
    for a concat that can run in place)."""
    compute_cycles: int
    """Its tiles' compute, as the simulator charged it."""
    stall_cycles: int
    """Cycles the control processor waited for DMA just before its tiles."""
    port_bound_stall_cycles: int
    """Of those, the port-bound ones: the DRAM port was busy throughout since
    the wait before (`SimulationResult.port_bound_stalls`)."""
    weight_bytes: int
    """Its weights' size (what the DRAM bound counts once)."""
    weight_load_bytes: int
    """Weight bytes loaded for its tiles."""
    input_load_bytes: int
    """Activation and graph-input bytes loaded for its tiles."""
    output_store_bytes: int
    """Bytes of its outputs stored to DRAM (spills and graph outputs)."""
    reread_bytes: int
    """Of the loads above, bytes loaded again: a piece (weight block, band
    of rows, whole tensor) loaded earlier in the schedule, loaded again."""


def op_costs(program: NpuProgram, instructions: list[Instruction], simulation: SimulationResult,
             cost: NpuCost) -> list[NpuOpCost]:
    """The per-op breakdown of `simulation`, the run of `instructions` (a
    schedule of `program`) under `cost`, in program order (what
    `run_scratchpad` keeps as its result's `ops`). A load is the op's that
    next reads the piece (of that tensor: the whole tensor serves any
    part); a store is
    the op's that produces the tensor; a stall is the op's whose compute
    the wait delayed (the last op's, the waits after the last compute).
    Compute, stall and port-bound stall cycles add up to the simulation's,
    loads and stores to its DRAM bytes."""
    tensors = program.by_name()
    producer = {n: op.name for op in program.ops for n in op.outputs}
    reader_at: dict[str, list[int]] = {}
    for index, ins in enumerate(instructions):
        if isinstance(ins, Compute):
            for _, piece in ins.reads:
                reader_at.setdefault(piece.tensor, []).append(index)
    fields = {op.name: dict.fromkeys(("tiles", "compute", "stall", "port_bound", "weights", "inputs", "outputs",
                                      "reread"), 0)
              for op in program.ops}
    assert len(simulation.port_bound_stalls) == sum(isinstance(i, Compute) for i in instructions) + 1, \
        "the simulation is of other instructions"
    computes = 0  # so far: the index of the next compute's entry in `simulation.port_bound_stalls`
    seen: set[tuple[str, str]] = set()
    end = 0  # when the previous compute ended
    for index, ins in enumerate(instructions):
        if isinstance(ins, Compute):
            f = fields[ins.op]
            start = simulation.issued[index]
            cycles = cost.compute_cycles(ins.macs, ins.sram_bytes)
            f["tiles"] += 1
            f["compute"] += cycles
            f["stall"] += start - end
            f["port_bound"] += simulation.port_bound_stalls[computes]
            computes += 1
            end = start + cycles
        elif isinstance(ins, Load):
            uses = reader_at.get(ins.piece.tensor, [])
            at = bisect.bisect_right(uses, index)
            f = fields[instructions[uses[at]].op if at < len(uses) else instructions[uses[-1]].op]
            f["weights" if tensors[ins.piece.tensor].kind == "weight" else "inputs"] += ins.piece.bytes
            key = (ins.piece.tensor, ins.piece.part)
            if key in seen:
                f["reread"] += ins.piece.bytes
            seen.add(key)
        elif isinstance(ins, Store):
            fields[producer[ins.piece.tensor]]["outputs"] += ins.piece.bytes
    last = next((ins.op for ins in reversed(instructions) if isinstance(ins, Compute)), None)
    if last is not None:  # the stores drained after the last compute
        fields[last]["stall"] += simulation.cycles - end
        fields[last]["port_bound"] += simulation.port_bound_stalls[computes]
    out = []
    for op, floor in zip(program.ops, program.op_floor_cycles(cost), strict=True):
        f = fields[op.name]
        out.append(NpuOpCost(op.name, f["tiles"], floor, f["compute"], f["stall"], f["port_bound"],
                             sum(tensors[w].size for w in dict.fromkeys(op.weights)), f["weights"], f["inputs"],
                             f["outputs"], f["reread"]))
    return out

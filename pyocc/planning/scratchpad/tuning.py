"""The numbers the scratchpad scheduler was tuned with.

Each constant says what it bounds and, where it was measured, what the
value chosen does against the others tried (over the nine light models,
mostly at 1 MiB; docs/scratchpad.md has the record). The other modules
read them as `tuning.NAME`, never by a name of their own, so that setting
one here (a test's monkeypatch, an experiment) reaches every reader.
Shares are eighths of the SRAM unless a docstring says otherwise.
"""

from __future__ import annotations

# How one op is split: whole, tiled, its weights streamed (tiling.py, units.py)

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
REDUCTION_CHAIN_SHARE = 4
"""A reader summing over its producer's blocks of output channels
(`_channel_chains`) does so when its partial sums, two blocks of its
filters and one tile fit in this many eighths of the SRAM."""

# Ops run together: cascades, chains, concats in place, siblings, outputs assembled (cascades.py, chains.py, units.py)

CASCADE_SHARE = 3
"""A cascade's bands and weights may take this many quarters of the SRAM."""
CHAIN_SHARE = 6
"""A chain cascade's band step (its bands and weights) may take this many
eighths of the SRAM (6: measured better than 4 at 1 MiB)."""
CHAIN_WEIGHTS = (2, 4)
"""The eighths of the SRAM that the weights of one chain cascade's ops may
take: the first when the units are chosen; each other one is tried on the
fastest of them and kept where the simulation runs it faster (a quarter
kept ResNet-50's bottleneck blocks out of chains at 1 MiB; half of it lets
some in, with fewer or narrower bands beside their weights)."""
CHAIN_OPS = 12
"""The most ops one chain cascade may hold."""
ROLL_BANDS = 3
"""Band steps of a rolled chain whose compute `_roll_flags` weighs: the
first (no band before) and the steady ones after it (2: the same schedules
at 1 MiB; 6: Inception v1 1.607 / 1.659 -> 1.621 / 1.685 cycles / DRAM
over the bound)."""
HOME_SHARE = 4
"""An in-place concat's output is assembled in one SRAM buffer (its
inputs' producers write their channel bands into it) when it fits this
many eighths of the SRAM; otherwise each band has a buffer of its own and
goes to its place in the output's DRAM home (see `_rehome`)."""
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

# Residency and prefetch (scheduler.py)

PREFETCH_UNITS = 16
"""How many units ahead prefetch looks."""
PREFETCH_SHARE = 4
"""Eighths of the SRAM one prefetch may fill ahead of its units (a piece
above that is still prefetched when it is the first: a large weight would
otherwise never load ahead of its op)."""
DEADLINE_UNITS = 64
"""How many units ahead a prefetch with deadlines looks at most (the
weights of AlexNet's fc6 are due from its first unit on: looking 1,000
units ahead at each unit would cost time and find no room)."""
EVICT_MARGIN = 16
"""A prefetch may evict a clean piece whose next read comes more than this
many units after the prefetched piece's (16: at 1 MiB over the nine light
models, geomean cycles/bound and DRAM/bound of what runs 1.636 and 1.752,
against 1.635 and 1.767 at 4, and 1.687 and 1.738 never evicting)."""
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

# The search over ways (search.py)

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
STREAM_SINGLES = 8
"""How many of the ops that stalled `_stream_stalled` tries one by one,
where streaming the weights of all of them is no faster (8: at 1 MiB,
what runs; 4: Inception v2 1.570 -> 1.579 cycles/bound)."""
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

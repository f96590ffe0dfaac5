"""The search over ways to schedule, and what it returns.

`schedule_scratchpad` tries the ways to cut a program into units (units.py)
and to schedule them (scheduler.py; `_fastest_scheduler` tries its
reserves, placements, deadlines), ranks them by `_key` (cycles times DRAM
bytes to a small power) and finishes the fastest (`_finished`): stalled
weights streamed (`_stream_stalled`, `_split_late`), sibling bands,
outputs assembled (`_finish`). It returns an `NpuSchedule`: the
instructions, and the DRAM offsets of the spills (`_plan_spills`).
`schedule_no_prefetch` is the baseline; `run_scratchpad` schedules and
simulates (`NpuResult`, the report's `npu` section); `op_costs` says
where a schedule spends its cycles and bytes, op by op, and
`schedule_cuts` where it interleaves no two ops.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pyocc import progress
from pyocc.units import format_bytes, plural

from ..npu_simulator import (
    Alloc,
    Compute,
    Free,
    Instruction,
    Load,
    NpuCost,
    SimulationResult,
    SramBuffer,
    Store,
    Wait,
    simulate,
    without_gc,
)
from ..planner import plan_memory
from ..problem import Buffer, PlanningError, Problem
from ..verify import verify_plan
from . import tuning
from .chains import _chains
from .cones import cone_floor
from .program import ALIGN, KINDS, _Home, NpuProgram, NpuTensor, _Unit
from .scheduler import _Scheduler, _UnitFacts
from .units import _assembled, _input_blocks, _sibling_bands, _units


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
    floor_cycles: int = 0
    """No schedule of the program is faster (`floor_cycles`): the bound,
    the ops' compute floors, or the cone floor, whichever is largest."""

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
            "floor_cycles": self.floor_cycles,
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
        for share, starts in itertools.product(tuning.CHAIN_WEIGHTS, (True, False)) if chains and not cascades else ():
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
            for fit in (sram_size, sram_size * tuning.WHOLE_SHARE // 8, 0) if in_place and joins else (0,):
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
        if best.key[0] <= first[0] + tuning.PATH_MARGIN and all(best.units != other.units for other, _ in near):
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
    return _kept_trials(best, [c.op for c in stalled], [c.op for c in stalled[:tuning.STREAM_SINGLES]], scheduled,
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
                   and c.weight_bytes > sram_size * tuning.STREAM_SLOW_WEIGHTS_SHARE // 8),
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
                         lambda c: c.stall_cycles - c.port_bound_stall_cycles)[:tuning.STREAM_SINGLES]
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
        for reserve in tuning.RESERVES if assemble else tuning.RESERVES[:1]:
            try:
                return tried, tiling, homes, *_ran(_Scheduler(program, sram_size, tried, cost, reserve)), reserve
            except PlanningError as e:
                failed = e
    plain, tiling, homes = _units(program, sram_size, cost, *choices, channel_chains=False, stream_weights=False,
                                  exact_tiles=exact_tiles)
    if plain == units:
        raise failed
    return plain, tiling, homes, *_ran(_Scheduler(program, sram_size, plain, cost)), tuning.RESERVES[0]


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
    return math.log(cycles) + tuning.DRAM_WEIGHT * math.log(max(dram_bytes, 1)), cycles, dram_bytes


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
    others = [(reserve, False) for reserve in tuning.RESERVES if reserve != found.reserve]
    for way in others + [(reserve, True) for reserve in tuning.BEST_FIT_RESERVES]:
        tried = _try_scheduler(program, sram_size, cost, units, facts, *way)
        if tried is not None:
            ranked.append((tried[0], way, tried[1]))
    # with deadlines, every way cost 1.28 times the scheduling time at 1 MiB, the first and "none" 1.17, with the
    # same schedules; the first `DEADLINE_WAYS`: the way that ranks first gains the least from them at times
    ways = [way for _, way, _ in sorted(ranked, key=lambda r: r[:2])[:tuning.DEADLINE_WAYS]] + [("none", False)]
    every = [(key, tried, (*way, False)) for key, way, tried in ranked]  # (rank, instructions, (*way, deadlines))
    for way in (dict.fromkeys(ways) if tuning.DEADLINES else ()):
        tried = _try_scheduler(program, sram_size, cost, units, facts, *way, deadlines=True)
        if tried is not None:
            every.append((*tried, (*way, True)))
    firsts: dict[_Key, tuple[str, bool, bool]] = {}  # the first way of each rank (ties are often one schedule)
    for key, _, way in sorted(every, key=lambda r: r[0]):
        firsts.setdefault(key, way)
    for way in list(firsts.values())[:tuning.CLEAR_WAYS]:
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
    return NpuResult(
        sram_size, cost, result.cycles, result.compute_cycles, result.stall_cycles, result.dram_bytes,
        program.dram_lower_bound_bytes(), program.bound_cycles(cost), result.sram_peak_bytes, program.macs(), schedule.tiling, baseline, result, schedule,
        {t.name: t.kind for t in program.tensors}, {t.name: t.size for t in program.tensors}, cascades,
        op_costs(program, schedule.instructions, result, cost), floor_cycles(program, sram_size, cost),
    )


def floor_cycles(program: NpuProgram, sram_size: int, cost: NpuCost) -> int:
    """Cycles no schedule of `program` beats at `sram_size` bytes of SRAM:
    the larger of its bound (`NpuProgram.bound_cycles`), the sum of its ops' compute floors
    (`NpuProgram.compute_floor_cycles`: the computes run one at a time) and
    the cone floor (`cone_floor`: a fully connected layer's weights wait
    on its input's cones)."""
    cone = cone_floor(program, cost, sram_size)
    return max(program.bound_cycles(cost), program.compute_floor_cycles(cost), cone.cycles if cone is not None else 0)


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

"""Scheduling a program for a two-level NPU: an SRAM scratchpad and DRAM.

Compute reads and writes only SRAM of `sram_size` bytes; weights, graph
inputs and outputs, and whatever does not fit live in DRAM and move by DMA.
`schedule_scratchpad` turns a program (ops in order, the tensors they read
and write, their MACs) into the straight-line instructions of
pyocc/planning/npu_simulator.py:

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

The modules, each importing only those above it in this list:

- `tuning`: every number the scheduler was tuned with, and what it was
  measured to do;
- `program`: what is scheduled (`NpuProgram`: ops, tensors) and the
  vocabulary of the units of work: the parts of a tensor (`rows{lo}:{hi}`,
  `ch{lo}:{hi}/{channels}`, copies), the units (`_Unit`: the pieces one
  compute reads, `_Need`, and writes, `_Make`), and the concats that can
  run in place (`_homes`);
- `tiling`: how one op that does not fit is split (step 1);
- `chains`: the chain cascades (`_chains`, `_chain_units`), rolled or not;
- `cascades`: the byte-share cascades (simulated only);
- `units`: the program as units (`_units`): tiles, chains, cascades,
  concats in place, sibling bands, outputs assembled in SRAM;
- `scheduler`: one way of scheduling units, residency and prefetch
  (`_Scheduler`, steps 2 and 3);
- `cones`: a floor for every schedule (`cone_floor`): a fully connected
  layer's weights wait on the cones of its input;
- `search`: the ways tried and the fastest kept (`schedule_scratchpad`),
  the schedule (`NpuSchedule`) and its spills' DRAM offsets, the baseline,
  `run_scratchpad` (`NpuResult`, with the cycles no schedule beats:
  `floor_cycles`), and where a schedule spends its cycles and bytes
  (`op_costs`, `schedule_cuts`).
"""

from __future__ import annotations

from .cones import ConeFloor, cone_floor
from .program import (
    ALIGN,
    INTO,
    KEEP,
    KEEP_STORE,
    KINDS,
    STREAM,
    WHOLE,
    NpuOp,
    NpuProgram,
    NpuTensor,
    assembled_channels,
    assembled_rows,
    band_rows,
    channel_range,
    copy_rows,
    input_block,
    partial_sums,
    row_bytes,
    split_range,
    tile_rows,
)
from .search import (
    NpuOpCost,
    NpuResult,
    NpuSchedule,
    floor_cycles,
    op_costs,
    run_scratchpad,
    schedule_cuts,
    schedule_no_prefetch,
    schedule_scratchpad,
)
from .tiling import fits_tiled

__all__ = [
    "ALIGN",
    "ConeFloor",
    "INTO",
    "KEEP",
    "KEEP_STORE",
    "KINDS",
    "STREAM",
    "WHOLE",
    "NpuOp",
    "NpuOpCost",
    "NpuProgram",
    "NpuResult",
    "NpuSchedule",
    "NpuTensor",
    "assembled_channels",
    "assembled_rows",
    "band_rows",
    "channel_range",
    "cone_floor",
    "copy_rows",
    "fits_tiled",
    "floor_cycles",
    "input_block",
    "op_costs",
    "partial_sums",
    "row_bytes",
    "run_scratchpad",
    "schedule_cuts",
    "schedule_no_prefetch",
    "schedule_scratchpad",
    "split_range",
    "tile_rows",
]

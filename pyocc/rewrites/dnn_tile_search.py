"""The automatic choice behind `--memory-limit`: when the program as given
needs more activation memory than the limit, try patch-based execution of
its stem (dnn-tile) with regions and patch counts in order of extra MACs,
planning each candidate for real, and take the first that fits; `min` takes
the smallest plan within a budget of extra MACs.

The candidates: the regions from the graph input (dnn_tile.regions: chains
or branching blocks with one output) up to the rows shrunk at most 16
times and at most 64 ops, each with 2, 4, 8 or 16 patches.

The caller (pyocc.api) passes the compile step in as `plan`, so this module
needs no pipeline: it only chooses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import func

from pyocc.analysis.liveness import analyze_function
from pyocc.dialects.dnn import ops as d
from pyocc.rewrites.dnn_tile import Region, patch_bounds, patch_rows, regions

PATCH_COUNTS = (2, 4, 8, 16)
MAX_REGION_OPS = 64
MAX_DOWNSAMPLING = 16


@dataclass(frozen=True)
class Candidate:
    """One tiling to try: the first `region` ops in `patches` patches."""

    region: int
    patches: int
    extra_macs: int
    """MACs the halo recomputation adds to one run."""


@dataclass(frozen=True)
class Choice:
    """What the search settled on (region 0: the program as given)."""

    region: int
    patches: int
    activation_bytes: int


def candidates(function: func.FuncOp) -> list[Candidate]:
    """Every (region, patches) worth planning, least extra MACs first."""
    found: list[Candidate] = []
    for region in regions(function):
        if len(region.ops) > MAX_REGION_OPS or region.rows_in() > MAX_DOWNSAMPLING * region.rows_out():
            break
        for patches in PATCH_COUNTS:
            if patches > region.rows_out():
                break
            found.append(Candidate(len(region.ops), patches, extra_macs(region, patches)))
    return sorted(found, key=lambda c: (c.extra_macs, c.patches, c.region))


def extra_macs(region: Region, patches: int) -> int:
    """The MACs the patches compute beyond the untiled ops: each op's cost
    grows with the rows it computes, halo rows counted once per patch."""
    rows = [0] * len(region.ops)
    for first, end in patch_bounds(region.rows_out(), patches):
        bands = patch_rows(region, first, end).bands
        for i, op in enumerate(region.ops):
            lo, hi = bands[op.results[0]]
            rows[i] += hi - lo
    return sum(math.ceil(op.macs() * (r / op.results[0].type.get_shape()[2] - 1))  # type: ignore[attr-defined]
               for op, r in zip(region.ops, rows, strict=True))


Plan = Callable[[int, int], func.FuncOp]
"""(region, patches) -> the tensor-form function compiled to planned buffer
form with that tiling (region 0: untiled), on a copy."""


def region_floors(tensor_function: func.FuncOp, planned: func.FuncOp, found: list[Region]) -> dict[int, int]:
    """Region length k -> the most bytes live at once in the planned untiled
    function from the first compute op after the region on. Tiling leaves those steps as they
    are, so no tiling of k ops can plan below it. Only for the regions whose
    compute ops (and those before them) pair up across the two forms."""
    tensor_ops = [op for op in tensor_function.body.block.ops if isinstance(op, d.DnnComputeOp)]
    steps = [(i, op) for i, op in enumerate(planned.body.block.ops)
             if isinstance(op, d.DnnComputeOp) and not isinstance(op, d.SanitizeOp)]
    liveness = analyze_function(planned)
    events = [0] * (liveness.steps + 2)
    for b in liveness.intermediates:
        events[b.first] += b.bytes
        events[b.last + 1] -= b.bytes
    live, running = [], 0
    for delta in events:
        running += delta
        live.append(running)
    after = [0] * (len(live) + 1)  # after[i]: the most live bytes at steps >= i
    for i in range(len(live) - 1, -1, -1):
        after[i] = max(live[i], after[i + 1])
    floors: dict[int, int] = {}
    for region in found:
        count, op = len(region.ops), region.ops[-1]
        # the ops up to the region's end must pair up (a removed copy or
        # concat before it would shift the steps)
        position = tensor_ops.index(op)
        if position >= len(steps) or any(t.name != b.name for t, (_, b) in
                                         zip(tensor_ops[:position + 1], steps[:position + 1], strict=True)):
            break
        # from the next compute op on: the probes dnn-sanitize puts right
        # after the region still read the region's own buffers
        floors[count] = after[steps[position + 1][0]] if position + 1 < len(steps) else 0
    return floors


def function_activation_bytes(function: func.FuncOp, memory: str) -> int:
    """A buffer-form function's activation memory in its memory mode: the
    pools (pool), the max-live buffers (lazy) or all buffers (eager)."""
    if memory == "pool":
        return sum(o.size.value.data for o in function.body.block.ops if isinstance(o, d.PoolInitOp))
    liveness = analyze_function(function)
    return liveness.lower_bound if memory == "lazy" else liveness.naive_bytes


def choose_tiling(function: func.FuncOp, plan: Plan, memory: str, limit: int | str,
                  max_extra_macs: float, base_macs: int) -> Choice:
    """The tiling `--memory-limit` asks for: with a byte limit the first
    candidate (least extra MACs, the program as given first) that fits, with
    "min" the smallest activation memory within `max_extra_macs` (a ratio
    of the untiled MACs). When nothing fits, the smallest plan found (the
    caller's MemoryReport.check_limit then says so). `function` is the
    tensor form, `memory` the memory mode."""
    planned = plan(0, 0)
    untiled = function_activation_bytes(planned, memory)
    best = Choice(0, 0, untiled)
    if limit != "min" and untiled <= int(limit):
        return best
    # eager's footprint is the sum of all buffers, not a peak: no floor applies
    floors = region_floors(function, planned, regions(function)) if memory != "eager" else {}
    no_gain: set[int] = set()  # regions whose fewest patches saved nothing: more will not either
    for candidate in candidates(function):
        if limit == "min" and candidate.extra_macs > max_extra_macs * base_macs:
            break
        if candidate.region in no_gain or floors.get(candidate.region, 0) >= best.activation_bytes:
            continue
        size = function_activation_bytes(plan(candidate.region, candidate.patches), memory)
        if size >= untiled:
            no_gain.add(candidate.region)
        if size < best.activation_bytes:
            best = Choice(candidate.region, candidate.patches, size)
        if limit != "min" and size <= int(limit):
            return best
    return best

"""The automatic choice behind `--memory-limit`: when the program as given
needs more activation memory than the limit, try patch-based execution of
its stem (dnn-tile) with regions, patch counts and halo handling in order
of extra MACs, and take the first that fits; `min` takes the smallest plan
within a budget of extra MACs. Every candidate is estimated (patch_peak and
the floor after its region); the best few are planned for real.

The candidates: the regions from the graph input (dnn_tile.regions: chains
or branching blocks with one output) up to the rows shrunk at most 16
times and at most 64 ops, at most 640 ops and 64 concats in all patches,
each with 2, 4, 8, 16 or 32 patches (or one per output row), the halos
recomputed or cached (dnn-tile's halo=cache: no extra MACs, a small cache
of overlap rows).

The caller (pyocc.api) passes the compile step in as `plan`, so this module
needs no pipeline: it only chooses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from pyocc.analysis.liveness import analyze_function
from pyocc.dialects.dnn import ops as d
from pyocc.rewrites.dnn_tile import ROWS, Region, cached_patches, high_rows, patch_bounds, patch_rows, regions

PATCH_COUNTS = (2, 4, 8, 16, 32)
MAX_REGION_OPS = 64
MAX_DOWNSAMPLING = 16
MAX_PATCH_OPS = 640
"""At most this many ops in all patches (planning time)."""
MAX_PATCH_CONCATS = 64
"""At most this many channel concats in all patches: dnn-coalesce's choice
of concat bands grows faster than linearly with them (DenseNet's first
dense block in 28 patches took minutes before the choice costed one band
more or less incrementally; raising the limit would change the choices)."""
REAL_PLANS = 3
"""How many of the best-estimated candidates the search plans for real."""
ESTIMATE_SLACK = 1.25
"""A byte limit plans the candidates estimated at up to this much over it."""


@dataclass(frozen=True)
class Candidate:
    """One tiling to try: the first `region` ops in `patches` patches, the
    halo rows recomputed or cached (`halo`)."""

    region: int
    patches: int
    extra_macs: int
    """MACs the halo recomputation adds to one run (0 when cached)."""
    halo: str = "recompute"


@dataclass(frozen=True)
class Choice:
    """What the search settled on (region 0: the program as given)."""

    region: int
    patches: int
    activation_bytes: int
    halo: str = "recompute"
    extra_macs: int = 0
    """MACs the tiling adds to one run (its halo rows recomputed; 0 cached)."""


def candidates(function: func.FuncOp) -> list[Candidate]:
    """Every (region, patches) worth planning, least extra MACs first."""
    found: list[Candidate] = []
    for region in regions(function):
        if len(region.ops) > MAX_REGION_OPS or region.rows_in() > MAX_DOWNSAMPLING * region.rows_out():
            break
        rows = region.rows_out()
        for patches in [c for c in PATCH_COUNTS if c < rows] + ([rows] if rows <= PATCH_COUNTS[-1] else []):
            concats = sum(isinstance(op, d.ConcatOp) for op in region.ops)
            if patches * len(region.ops) > MAX_PATCH_OPS or patches * concats > MAX_PATCH_CONCATS:
                break
            found.append(Candidate(len(region.ops), patches, extra_macs(region, patches)))
            found.append(Candidate(len(region.ops), patches, 0, "cache"))
    # least extra MACs first; at equal MACs recomputation first (no cache
    # buffers, no copies into them), then fewer patches
    return sorted(found, key=lambda c: (c.extra_macs, c.halo == "cache", c.patches, c.region))


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


Plan = Callable[[int, int, str], func.FuncOp]
"""(region, patches, halo) -> the tensor-form function compiled to planned
buffer form with that tiling (region 0: untiled), on a copy."""


def region_floors(tensor_function: func.FuncOp, planned: func.FuncOp, found: list[Region]) -> dict[int, int]:
    """Region length k -> the most bytes live at once in the planned untiled
    function from the first compute op after the region on. Tiling leaves those steps as they
    are, so no tiling of k ops can plan below it. Only for the regions whose
    compute ops (and those before them) pair up across the two forms (a
    concat dnn-coalesce removed pairs with the step before it)."""
    tensor_ops = [op for op in tensor_function.body.block.ops if isinstance(op, d.DnnComputeOp)]
    steps = [(i, op) for i, op in enumerate(planned.body.block.ops)
             if isinstance(op, d.DnnComputeOp) and not isinstance(op, d.SanitizeOp)]
    liveness = analyze_function(planned)
    live = liveness.live_bytes
    after = [0] * (len(live) + 1)  # after[i]: the most live bytes at steps >= i
    for i in range(len(live) - 1, -1, -1):
        after[i] = max(live[i], after[i + 1])
    paired = pair_compute_ops(tensor_ops, [op for _, op in steps])
    floors: dict[int, int] = {}
    for region in found:
        count, op = len(region.ops), region.ops[-1]
        if op not in paired:
            break
        # from the next compute op on: the probes dnn-sanitize puts right
        # after the region still read the region's own buffers
        position = paired[op]
        floors[count] = after[steps[position + 1][0]] if position + 1 < len(steps) else 0
    return floors


def pair_compute_ops(tensor_ops: list[Operation], planned_ops: list[Operation]) -> dict[Operation, int]:
    """Each tensor-form compute op (in block order) -> the index in
    `planned_ops` (the planned function's compute ops, in block order) of
    the op that does its work, as far as they pair up. dnn-coalesce may have
    removed a concat (its inputs written into their bands: paired with the
    op before) or left copies in its place."""
    paired: dict[Operation, int] = {}
    j = 0
    for t in tensor_ops:
        if j < len(planned_ops) and planned_ops[j].name == t.name:
            paired[t] = j
            j += 1
        elif isinstance(t, d.ConcatOp):
            while j < len(planned_ops) and isinstance(planned_ops[j], d.CopyOp):
                j += 1
            paired[t] = j - 1
        else:
            break
    return paired


def function_activation_bytes(function: func.FuncOp, memory: str) -> int:
    """A buffer-form function's activation memory in its memory mode: the
    pools (pool), the max-live buffers (lazy) or all buffers (eager)."""
    if memory == "pool":
        return sum(o.size.value.data for o in function.body.block.ops if isinstance(o, d.PoolInitOp))
    liveness = analyze_function(function)
    return liveness.lower_bound if memory == "lazy" else liveness.naive_bytes


def patch_peak(region: Region, patches: int, halo: str) -> int:
    """An estimate of the most bytes live while the patches run, before any
    planning: in each patch every region value's rows (what the patch holds
    of it) live from the op that makes it to its last reader in the region,
    plus the region output (whole from the first patch's end on) and, with
    halos cached, every cached band through the patch. The graph input is
    the caller's; the copies of its rows are counted. In-place writes and
    the slices the planner would overlap are not modelled: the real plan
    decides between the best few."""
    ops = region.ops
    index = {op.results[0]: i for i, op in enumerate(ops)}
    index[region.input] = -1
    last_read: dict[SSAValue, int] = {}
    for i, windows in enumerate(region.windows):
        for k in windows:
            last_read[ops[i].operands[k]] = i
    values = [region.input, *(op.results[0] for op in ops[:-1])]
    row_bytes = {v: d.type_bytes(v.type) // v.type.get_shape()[ROWS] for v in [*values, region.output]}  # type: ignore[attr-defined]
    bounds = patch_bounds(region.rows_out(), patches)
    held_rows: list[dict[SSAValue, int]] = []
    cached: list[int] = []
    if halo == "cache":
        plan = cached_patches(region, patches)
        for p, (patch, (_, end)) in enumerate(zip(plan, bounds, strict=True)):
            high = high_rows(region, end)
            held_rows.append({v: max(0, high.get(v, 0) - patch.low[v]) for v in values if v in patch.low})
            following = plan[p + 1] if p + 1 < len(plan) else None
            cached.append(0 if following is None else sum(
                row_bytes[v] * max(0, high.get(v, 0) - following.low[v]) for v in values if v in following.low))
    else:
        for first, end in bounds:
            bands = patch_rows(region, first, end).bands
            held_rows.append({v: bands[v][1] - bands[v][0] for v in values if v in bands})
            cached.append(0)
    peak = 0
    for p, ((first, end), rows) in enumerate(zip(bounds, held_rows, strict=True)):
        events = [0] * (len(ops) + 2)
        for v, count in rows.items():
            events[index[v] + 1] += row_bytes[v] * count
            events[last_read.get(v, index[v]) + 2] -= row_bytes[v] * count
        live = cached[p] + (d.type_bytes(region.output.type) if p else row_bytes[region.output] * (end - first))
        for delta in events:
            live += delta
            peak = max(peak, live)
    return peak


def choose_tiling(function: func.FuncOp, plan: Plan, memory: str, limit: int | str,
                  max_extra_macs: float, base_macs: int) -> Choice:
    """The tiling `--memory-limit` asks for: with a byte limit the first
    candidate (least extra MACs, the program as given first) that fits, with
    "min" the smallest activation memory within `max_extra_macs` (a ratio
    of the untiled MACs). When nothing fits, the smallest plan found (the
    caller's MemoryReport.check_limit then says so). `function` is the
    tensor form, `memory` the memory mode.

    Planning a tiled program takes seconds, so outside eager mode the
    candidates are first ranked by an estimate (the larger of patch_peak
    and the floor after the region), and only the best REAL_PLANS of them
    are planned (min); with a byte limit, the first REAL_PLANS the estimate
    says may fit, then the REAL_PLANS smallest estimates."""
    planned = plan(0, 0, "recompute")
    untiled = function_activation_bytes(planned, memory)
    best = Choice(0, 0, untiled)
    if limit != "min" and untiled <= int(limit):
        return best
    found = regions(function)
    by_length = {len(r.ops): r for r in found}
    every = candidates(function)
    if limit == "min":
        every = [c for c in every if c.extra_macs <= max_extra_macs * base_macs]
    if memory == "eager":  # eager's footprint is the sum of all buffers, not a peak: plan every one
        ranked = [(0, c) for c in every]
    else:
        floors = region_floors(function, planned, found)
        peaks = {c: patch_peak(by_length[c.region], c.patches, c.halo) for c in every}
        ranked = [(max(floors.get(c.region, 0), peaks[c]), c) for c in every]
        ranked = [(e, c) for e, c in ranked if e < untiled]
        if limit == "min":
            # on a tie (the floor after the region) the lower patch peak: the estimate is below the plan
            ranked.sort(key=lambda ec: (ec[0], peaks[ec[1]], ec[1].extra_macs, ec[1].patches))
            ranked = ranked[:REAL_PLANS]
        else:
            # the cheapest candidates (fewest extra MACs) the estimate says may fit, then, should
            # none of them fit once planned, the smallest estimates: they fit when anything does
            # (and name the smallest size reached when nothing does)
            fitting = [(e, c) for e, c in ranked if e <= int(limit) * ESTIMATE_SLACK][:REAL_PLANS]
            smallest = sorted(ranked, key=lambda ec: (ec[0], peaks[ec[1]], ec[1].extra_macs))[:REAL_PLANS]
            ranked = fitting + [ec for ec in smallest if ec not in fitting]
    for _, candidate in ranked:
        size = function_activation_bytes(plan(candidate.region, candidate.patches, candidate.halo), memory)
        if size < best.activation_bytes:
            best = Choice(candidate.region, candidate.patches, size, candidate.halo, candidate.extra_macs)
        if limit != "min" and size <= int(limit):
            return best
    return best

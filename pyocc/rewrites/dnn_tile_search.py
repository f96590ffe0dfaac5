"""The automatic choice behind `--memory-limit`: when the program as given
needs more activation memory than the limit, try patch-based execution of
its stem (dnn-tile) with regions and patch counts in order of extra MACs,
planning each candidate for real, and take the first that fits; `min` takes
the smallest plan within a budget of extra MACs.

The candidates: the prefixes of the row-local chain from the graph input up
to the first downsampling stages (the rows shrunk at most 8 times, at most
12 ops), each with 2, 4, 8 or 16 patches.

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
from pyocc.rewrites.dnn_tile import RowWindow, patch_bounds, region_chain

PATCH_COUNTS = (2, 4, 8, 16)
MAX_REGION_OPS = 12
MAX_DOWNSAMPLING = 8


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
    chain = region_chain(function)
    rows_in = chain[0][2].rows_in if chain else 0
    found: list[Candidate] = []
    for count in range(1, min(len(chain), MAX_REGION_OPS) + 1):
        windows = [w for _, _, w in chain[:count]]
        if rows_in > MAX_DOWNSAMPLING * windows[-1].rows_out:
            break
        macs = [op.macs() for op, _, _ in chain[:count]]  # type: ignore[attr-defined]
        for patches in PATCH_COUNTS:
            if patches > windows[-1].rows_out:
                break
            found.append(Candidate(count, patches, _extra_macs(windows, macs, patches)))
    return sorted(found, key=lambda c: (c.extra_macs, c.patches, c.region))


def _extra_macs(windows: list[RowWindow], macs: list[int], patches: int) -> int:
    """The MACs the patches compute beyond the untiled ops: each op's cost
    grows with the rows it computes, halo rows counted once per patch."""
    rows = [0] * len(windows)
    for first, end in patch_bounds(windows[-1].rows_out, patches):
        band = (first, end)
        for i in range(len(windows) - 1, -1, -1):
            rows[i] += band[1] - band[0]
            lo, hi, _, _ = windows[i].needs(*band)
            band = (lo, hi)
    return sum(math.ceil(m * (r / w.rows_out - 1)) for m, r, w in zip(macs, rows, windows, strict=True))


Plan = Callable[[int, int], func.FuncOp]
"""(region, patches) -> the tensor-form function compiled to planned buffer
form with that tiling (region 0: untiled), on a copy."""


def region_floors(tensor_function: func.FuncOp, planned: func.FuncOp,
                  chain: list[tuple[Operation, SSAValue, RowWindow]]) -> dict[int, int]:
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
    for count, (op, _, _) in enumerate(chain, 1):
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
    floors = region_floors(function, planned, region_chain(function)) if memory != "eager" else {}
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

"""The recomputation half of `--memory-limit`: which cheap values to compute
again at their late readers (dnn-recompute) so the planned pool goes down.

The candidates are the values dnn_recompute.recompute_site finds a site
for (a Recomputable producer, two readers apart) whose gap, between the
last early reader and the first late one, holds an op at the peak of the
planned program as given (only those can lower that peak), and whose clones
keep fewer bytes alive longer than the value frees (an add of two tensors
that die at it never pays). Each is ranked by the
work its clones add (element operations, then MACs). Few candidates
(at most EXACT_CANDIDATES) are searched exactly: every subset is planned for
real and the smallest pool wins (on a tie, the least work). More are chosen
greedily in order of least work: a candidate stays when the planned pool
goes down with it. A byte limit stops at the first plan that fits.

The caller (pyocc.api) passes the compile step in as `plan`, so this
module needs no pipeline: it only chooses.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.ir import Operation

from pyocc.analysis.liveness import analyze_function
from pyocc.dialects.dnn import ops as d
from pyocc.rewrites.dnn_recompute import RecomputeSite, printed_names, recompute_site
from pyocc.rewrites.dnn_tile_search import function_activation_bytes, pair_compute_ops

EXACT_CANDIDATES = 4
"""Up to this many candidates every subset is planned (2^4 - 1 plans)."""
MAX_CANDIDATES = 8
"""At most this many candidates are planned greedily (planning time)."""
PEAK_SHARE = 0.9
"""A step with at least this share of the most live bytes counts as the peak."""


@dataclass(frozen=True)
class RecomputeCandidate:
    """One value worth recomputing: its printed `name`, the element
    operations (`ops`) and MACs its clones add to one run."""

    name: str
    ops: int
    macs: int


@dataclass(frozen=True)
class RecomputeChoice:
    """What the search settled on: the values to recompute (in the order
    dnn-recompute applies them), the activation memory planned with them,
    and the work their clones add."""

    values: tuple[str, ...]
    activation_bytes: int
    ops: int = 0
    macs: int = 0


Plan = Callable[[tuple[str, ...]], func.FuncOp]
"""values -> the tensor-form function compiled to planned buffer form with
those values recomputed (none: as given), on a copy."""


def peak_positions(tensor_function: func.FuncOp, planned: func.FuncOp) -> set[int]:
    """The block positions, in the tensor-form function, of the compute ops
    at whose planned steps (in `planned`, the same program compiled and
    planned) at least PEAK_SHARE of the most buffer bytes are live: with
    concat bands and in-place writes the peak is often a plateau. Steps
    whose ops do not pair up across the two forms are left out."""
    tensor_ops = [op for op in tensor_function.body.block.ops if isinstance(op, d.DnnComputeOp)]
    planned_block = list(planned.body.block.ops)
    steps = [i for i, op in enumerate(planned_block)
             if isinstance(op, d.DnnComputeOp) and not isinstance(op, d.SanitizeOp)]
    liveness = analyze_function(planned)
    live = liveness.live_bytes
    high = {step for step, bytes_live in enumerate(live) if bytes_live >= PEAK_SHARE * max(live)}
    block = tensor_function.body.block
    # each high step belongs to the tensor op whose planned op runs last at or before it
    paired = sorted((steps[j], block.get_operation_index(t))
                    for t, j in pair_compute_ops(tensor_ops, [planned_block[i] for i in steps]).items())
    found: set[int] = set()
    for step in high:
        before = [position for planned_step, position in paired if planned_step <= step]
        if before:
            found.add(before[-1])
    return found


def candidates(function: func.FuncOp, peaks: set[int]) -> list[RecomputeCandidate]:
    """The values of the tensor-form `function` whose recomputation spans
    one of its ops at block positions `peaks` (the peak of the planned
    program), least work first."""
    block = function.body.block
    found: list[RecomputeCandidate] = []
    for name, value in printed_names(function).items():
        if not isinstance(value.owner, Operation):
            continue
        site: RecomputeSite | None = recompute_site(value)
        if site is None:
            continue
        early = max(block.get_operation_index(u.operation) for u in value.uses if u.operation not in site.late)
        if site.extended_bytes() >= d.type_bytes(value.type):
            continue  # the clones would keep at least as many bytes alive as they free
        if any(early < peak < block.get_operation_index(site.late[0]) for peak in peaks):
            found.append(RecomputeCandidate(name, site.ops(), site.macs()))
    return sorted(found, key=lambda c: (c.ops, c.macs, c.name))


def choose_recompute(function: func.FuncOp, plan: Plan, memory: str, limit: int | str,
                     max_extra: float) -> RecomputeChoice:
    """The values `--memory-limit` recomputes: none when the program as
    given fits a byte limit; else the candidates (see `candidates`) within
    `max_extra` extra work (element operations plus MACs, as a count of
    operations), exactly when few, greedily otherwise, keeping only what
    lowers the planned pool. `function` is the tensor form, `memory` the
    memory mode."""
    planned = plan(())
    best = RecomputeChoice((), function_activation_bytes(planned, memory))
    if limit != "min" and best.activation_bytes <= int(limit):
        return best
    found = [c for c in candidates(function, peak_positions(function, planned)) if c.ops + c.macs <= max_extra][:MAX_CANDIDATES]

    def cost(chosen: tuple[RecomputeCandidate, ...]) -> tuple[int, int]:
        return sum(c.ops for c in chosen), sum(c.macs for c in chosen)

    if len(found) <= EXACT_CANDIDATES:
        subsets = [chosen for size in range(1, len(found) + 1) for chosen in itertools.combinations(found, size)
                   if sum(cost(chosen)) <= max_extra]
        for chosen in sorted(subsets, key=lambda s: (sum(cost(s)), len(s))):  # least work first
            ops, macs = cost(chosen)
            planned = function_activation_bytes(plan(tuple(c.name for c in chosen)), memory)
            if planned < best.activation_bytes:
                best = RecomputeChoice(tuple(c.name for c in chosen), planned, ops, macs)
            if limit != "min" and planned <= int(limit):
                return best
        return best
    kept: list[RecomputeCandidate] = []
    for candidate in found:
        trial = (*kept, candidate)
        ops, macs = cost(trial)
        if ops + macs > max_extra:
            continue
        planned = function_activation_bytes(plan(tuple(c.name for c in trial)), memory)
        if planned < best.activation_bytes:
            kept.append(candidate)
            best = RecomputeChoice(tuple(c.name for c in kept), planned, ops, macs)
            if limit != "min" and planned <= int(limit):
                break
    return best

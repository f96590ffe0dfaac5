"""What dnn-coalesce may do, decided on buffer-form dnn: facts, no rewriting.

- in place: may an op write its result over an input (`InPlaceFacts`), from
  the op's `WritesInPlace` trait and the liveness analysis (the input's
  buffer dies at that op, through every alias);
- concat bands: which concat inputs to write straight into their band of
  the output (`BandChoice`, chosen by the max-live bound);
- returned views: which buffers may live in the graph output they are
  copied into (`returned_view_candidates`).

The rewrites that apply these facts are the patterns of
pyocc/rewrites/dnn_coalesce.py.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Block, Operation, SSAValue

from pyocc.analysis.liveness import Liveness, analyze_function, root_buffer
from pyocc.dialects.dnn import ops as d

#: Above this many inputs a concat's subsets are not all tried (one by one instead).
MAX_SUBSET_INPUTS = 6


def is_malloc(value: SSAValue) -> bool:
    """`value` is a buffer of its own (a dnn.malloc result)."""
    return isinstance(value.owner, d.MallocOp)


def contiguous_band(shape: tuple[int, ...] | list[int], axis: int) -> bool:
    """A range along `axis` is one contiguous run of bytes when every dim
    before it is 1 (batch 1 along the channels)."""
    return math.prod(shape[:axis]) == 1


def written_values(op: Operation) -> list[SSAValue]:
    """The buffers an op writes."""
    if isinstance(op, d.DnnComputeOp):
        return op.destinations()
    if isinstance(op, d.MemcpyOp):
        return [op.target]
    return []


# ---------------------------------------------------------------------------
# In place
# ---------------------------------------------------------------------------


@dataclass
class InPlaceFacts:
    """Each op's step and each buffer's last step (through its aliases), as
    the liveness analysis found them before any in-place rewrite; `merge`
    keeps them true as results move into inputs."""

    step: dict[Operation, int]
    last: dict[SSAValue, int]

    @classmethod
    def of(cls, function: func.FuncOp) -> InPlaceFacts:
        """The facts of one buffer-form function."""
        liveness = analyze_function(function)
        return cls({op: i for i, op in enumerate(function.body.block.ops)},
                   {b.value: b.last for b in liveness.buffers})

    def can_overwrite(self, op: d.DnnComputeOp, x: SSAValue, out: SSAValue) -> bool:
        """May `op` write its result `out` over input `x`?"""
        root = root_buffer(x)
        if not is_malloc(root):
            return False  # a graph input or output, a weight: never overwritten
        if x.type != out.type:
            return False  # different shape, size or dtype
        if self.last.get(root) != self.step[op]:
            return False  # read later, through x or any alias of its buffer
        reads = op.read_values()
        if any(root_buffer(v) is root and v is not x for v in reads):
            return False  # another (partial) alias of the same bytes is read too
        if not isinstance(op, d.BinaryOp) and sum(v is x for v in reads) > 1:
            return False
        return True

    def merge(self, x: SSAValue, out: SSAValue, op: Operation) -> None:
        """`out` now lives in `x`'s buffer: that buffer lives as long as both."""
        root = root_buffer(x)
        self.last[root] = max(self.last[root], self.last.get(out, self.step[op]))


# ---------------------------------------------------------------------------
# Concat bands, chosen by the liveness-based peak
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ConcatBand:
    """One concat input that may be written into its band of the output."""

    concat: d.ConcatOp
    step: int
    output: SSAValue
    root: SSAValue
    offset: int


@dataclass
class _Buffer:
    """What the choice needs to know of one buffer: its bytes, the steps it
    is live, the steps at which it is written, and whether the pool holds it
    (a graph output does not)."""

    bytes: int
    first: int
    last: int
    writes: list[int] = field(default_factory=list)
    counted: bool = True


class BandChoice:
    """Which concat inputs to write into their band: the live-bytes profile
    and legality of any set of bands, and a search for a good set.

    A set of bands merges each input's buffer (with everything already
    merged into it) into its concat output. The merged buffer lives from the
    first step of any member to the last, so the peak can rise; the cost is
    the max-live bound (lazy) or the sum of buffers (eager)."""

    def __init__(self, liveness: Liveness, ops: list[Operation], eager: bool):
        self.eager = eager
        self.buffers: dict[SSAValue, _Buffer] = {}
        for b in liveness.buffers:
            if b.kind == "output" or (b.kind == "intermediate" and is_malloc(b.value)):
                # a kernel's scratch counts at its least (dnn-memory-pool sizes it to the slack)
                least = getattr(b.value.owner, "min_size", None) if b.kind == "intermediate" else None
                self.buffers[b.value] = _Buffer(least.value.data if least is not None else b.bytes, b.first, b.last,
                                                counted=b.kind == "intermediate")
        for i, op in enumerate(ops):
            for value in written_values(op):
                buffer = self.buffers.get(root_buffer(value))
                if buffer is not None:
                    buffer.writes.append(i)
        self.base = np.zeros(liveness.steps + 1, dtype=np.int64)
        for b in self.buffers.values():
            if b.counted:
                self.base[b.first:b.last + 1] += b.bytes
        self.base_sum = sum(b.bytes for b in self.buffers.values() if b.counted)

    def cost(self, bands: list[ConcatBand]) -> int | None:
        """The cost with `bands` merged, or None when the set is illegal: a
        band's bytes must be written only before its concat, and its output
        not overwritten while the band is still read."""
        parent = {band.root: band for band in bands}
        if len(parent) < len(bands):
            return None  # one buffer cannot be a band of two outputs
        members: dict[SSAValue, list[SSAValue]] = {}
        for value in {*parent, *(band.output for band in bands)}:
            top = value
            while top in parent:
                top = parent[top].output
            members.setdefault(top, []).append(value)
        children: dict[SSAValue, list[SSAValue]] = {}
        for band in bands:
            children.setdefault(band.output, []).append(band.root)
        for band in bands:
            group = [band.root, *self._merged_into(band.root, children)]
            if any(w >= band.step for m in group for w in self.buffers[m].writes):
                return None
            group_last = max(self.buffers[m].last for m in group)
            if any(w != band.step and w <= group_last for w in self.buffers[band.output].writes):
                return None
        if self.eager:
            return self.base_sum - sum(self.buffers[band.root].bytes for band in bands)
        profile = self.base.copy()
        for top, group in members.items():
            for m in group:
                b = self.buffers[m]
                if b.counted:
                    profile[b.first:b.last + 1] -= b.bytes
            head = self.buffers[top]
            if head.counted:
                first = min(self.buffers[m].first for m in group)
                last = max(self.buffers[m].last for m in group)
                profile[first:last + 1] += head.bytes
        return int(profile.max()) if len(profile) else 0

    @staticmethod
    def _merged_into(value: SSAValue, children: dict[SSAValue, list[SSAValue]]) -> list[SSAValue]:
        """Every buffer merged (transitively) into `value`."""
        found, frontier = [], [value]
        while frontier:
            for child in children.get(frontier.pop(), []):
                found.append(child)
                frontier.append(child)
        return found

    def choose(self, concats: list[list[ConcatBand]]) -> list[ConcatBand]:
        """Greedy over the concats (per concat, the subset of its inputs
        with the lowest cost, ties to more bands), then local search: drop a
        band or add one while that lowers the cost (adding: or keeps it).
        Greedy runs both in program order and backwards (one band can tie
        the peak early and block a chain later), and the better result wins."""
        candidates = [b for bands in concats for b in bands]
        results = []
        for order in (concats, concats[::-1]):
            chosen: list[ConcatBand] = []
            for bands in order:
                chosen = self._best_extension(chosen, bands)
            chosen = self._improve(chosen, candidates)
            results.append((self.cost(chosen), -len(chosen), chosen))
        return min(results, key=lambda r: r[:2])[2]

    def _best_extension(self, chosen: list[ConcatBand], bands: list[ConcatBand]) -> list[ConcatBand]:
        best, best_cost = chosen, self.cost(chosen)
        assert best_cost is not None
        if len(bands) <= MAX_SUBSET_INPUTS:
            subsets = (list(s) for n in range(1, len(bands) + 1) for s in itertools.combinations(bands, n))
        else:  # too many subsets: grow one input at a time
            subsets = (bands[:n] for n in range(1, len(bands) + 1))
        for subset in subsets:
            cost = self.cost([*chosen, *subset])
            if cost is not None and (cost < best_cost or (cost == best_cost and len(subset) + len(chosen) > len(best))):
                best, best_cost = [*chosen, *subset], cost
        return best

    def _improve(self, chosen: list[ConcatBand], candidates: list[ConcatBand]) -> list[ConcatBand]:
        cost = self.cost(chosen)
        assert cost is not None
        improved = True
        while improved:
            improved = False
            for band in list(chosen):
                trial = [b for b in chosen if b is not band]
                new = self.cost(trial)
                if new is not None and new < cost:
                    chosen, cost, improved = trial, new, True
            for band in candidates:
                if band in chosen or any(b.root is band.root for b in chosen):
                    continue
                new = self.cost([*chosen, band])
                if new is not None and new <= cost:
                    chosen, cost, improved = [*chosen, band], new, new < cost or improved
        return chosen


def concat_bands(concat: d.ConcatOp, step: int) -> list[ConcatBand]:
    """The inputs of a concat that could be written into its output, with
    their byte offsets (empty when the bands are not contiguous)."""
    out = concat.out
    if out is None or not (is_malloc(out) or isinstance(out.owner, Block)):
        return []
    shape = out.type.get_shape()
    if not contiguous_band(shape, concat.axis.value.data % len(shape)):
        return []
    inputs = list(concat.inputs)
    roots = [root_buffer(v) for v in inputs]
    bands, offset = [], 0
    for value, root in zip(inputs, roots, strict=True):
        if is_malloc(root) and roots.count(root) == 1 and root is not out and _whole(value):
            bands.append(ConcatBand(concat, step, out, root, offset))
        offset += d.type_bytes(value.type)
    return bands


def _whole(value: SSAValue) -> bool:
    """`value` is all of its buffer (itself or reshaped views), not a band."""
    while isinstance(value.owner, d.ViewOp):
        value = value.owner.source
    return is_malloc(value)


def choose_concat_bands(function: func.FuncOp, eager: bool) -> list[ConcatBand]:
    """The concat inputs to write into their bands of the output (those that
    do not raise the peak), in program order of their concats."""
    ops = list(function.body.block.ops)
    choice = BandChoice(analyze_function(function), ops, eager=eager)
    concats = [concat_bands(op, step) for step, op in enumerate(ops)
               if isinstance(op, d.ConcatOp) and op.on_buffers]
    chosen = choice.choose([bands for bands in concats if bands])
    return sorted(chosen, key=lambda band: band.step)


# ---------------------------------------------------------------------------
# Returned views
# ---------------------------------------------------------------------------


def returned_view_candidates(block: Block) -> dict[d.CopyOp, SSAValue]:
    """Copy into a graph output -> the malloc'd buffer it copies, for the
    buffers copied into a graph output exactly once (program order)."""
    copies: dict[SSAValue, list[d.CopyOp]] = {}
    for op in block.ops:
        if isinstance(op, d.CopyOp) and isinstance(op.out.owner, Block):
            copies.setdefault(root_buffer(op.x), []).append(op)
    return {ops[0]: root for root, ops in copies.items() if len(ops) == 1 and is_malloc(root)}


def write_steps(block: Block, root: SSAValue) -> list[int]:
    """The steps of the ops that write `root` or any alias of it."""
    return [i for i, op in enumerate(block.ops) if any(root_buffer(v) is root for v in written_values(op))]

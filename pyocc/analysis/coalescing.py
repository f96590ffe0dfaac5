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


@dataclass
class _SetState:
    """One legal set of bands as BandChoice sees it (buffers as integers)."""

    numbers: frozenset[int]
    parent: dict[int, tuple[int, int]]
    """Band root -> (its output, the concat's step)."""
    merged_write: dict[int, int]
    """Buffer -> the last write of anything merged into it."""
    merged_last: dict[int, int]
    """Buffer -> the last step of anything merged into it."""
    top: dict[int, int] = field(default_factory=dict)
    """Band root -> the head of its merged group."""
    group_first: dict[int, int] = field(default_factory=dict)
    group_last: dict[int, int] = field(default_factory=dict)
    """Group head -> the first and last step of the group."""
    profile: np.ndarray | None = None
    cost: int | None = None
    members: dict[int, list[int]] | None = None
    """Group head -> its buffers (made on first need)."""
    children: dict[int, list[int]] | None = None
    """Band output -> the roots merged into it (made on first need)."""


class BandChoice:
    """Which concat inputs to write into their band: the live-bytes profile
    and legality of any set of bands, and a search for a good set.

    A set of bands merges each input's buffer (with everything already
    merged into it) into its concat output. The merged buffer lives from the
    first step of any member to the last, so the peak can rise; the cost is
    the max-live bound (lazy) or the sum of buffers (eager).

    The search evaluates thousands of sets (DenseNet-121 in patches), so
    internally buffers and bands are integers, a set's profile is one
    vectorised difference array, a set with one band more than a legal set
    gets its state from that set's (`_SetState`, `_extend`), one with a band
    less its cost (`_cost_minus`), and each set's cost is computed once."""

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
        self.steps = liveness.steps + 1
        self.base = np.zeros(self.steps, dtype=np.int64)
        for b in self.buffers.values():
            if b.counted:
                self.base[b.first:b.last + 1] += b.bytes
        self.base_sum = sum(b.bytes for b in self.buffers.values() if b.counted)
        # buffers as integers (SSAValue hashes are Python-level and slow)
        self._index = {value: i for i, value in enumerate(self.buffers)}
        table = list(self.buffers.values())
        self._bytes = [b.bytes for b in table]
        self._first = [b.first for b in table]
        self._last = [b.last for b in table]
        self._counted = [b.counted for b in table]
        self._max_write = [max(b.writes, default=-1) for b in table]
        self._writes = [b.writes for b in table]
        self._bands: list[tuple[int, int, int]] = []  # (root, output, step) per band number
        self._band_number: dict[int, int] = {}  # id(ConcatBand) -> band number
        self._band_objects: list[ConcatBand] = []
        self._memo: dict[frozenset[int], int | None] = {}

    def _number(self, band: ConcatBand) -> int:
        """The band's number (registered on first sight)."""
        number = self._band_number.get(id(band))
        if number is None or self._band_objects[number] is not band:
            number = len(self._bands)
            self._bands.append((self._index[band.root], self._index[band.output], band.step))
            self._band_number[id(band)] = number
            self._band_objects.append(band)
        return number

    def cost(self, bands: list[ConcatBand]) -> int | None:
        """The cost with `bands` merged, or None when the set is illegal: a
        band's bytes must be written only before its concat, and its output
        not overwritten while the band is still read."""
        return self._cost([self._number(band) for band in bands])

    def _cost(self, numbers: list[int]) -> int | None:
        """`cost` of the bands with these numbers (memoised per set)."""
        key = frozenset(numbers)
        if len(key) < len(numbers):
            return None  # the same band twice: one buffer cannot be a band of two outputs
        if key in self._memo:
            return self._memo[key]
        result = self._compute(numbers)
        self._memo[key] = result
        return result

    def _compute(self, numbers: list[int]) -> int | None:
        """`cost` of the bands with these numbers, computed."""
        state = self._state(numbers)
        return None if state is None else state.cost

    def _state(self, numbers: list[int]) -> _SetState | None:
        """The merged groups, the facts legality needs and the live-bytes
        profile of a set of bands; None when the set is illegal.

        Legality in order of the concats' steps: a band merged into another
        one's root is written by its concat, which (in a legal set) comes
        before the other one's concat, so what is merged into a root is
        known when its band is checked; a merged band whose concat comes
        later writes the root at or after the step, which is illegal anyway."""
        bands = sorted((self._bands[n] for n in numbers), key=lambda band: band[2])
        parent = {root: (output, step) for root, output, step in bands}
        if len(parent) < len(bands):
            return None  # one buffer cannot be a band of two outputs
        # per buffer, over everything merged into it: the last write and the last step
        merged_write: dict[int, int] = {}
        merged_last: dict[int, int] = {}
        for root, output, step in bands:
            write = max(self._max_write[root], merged_write.get(root, -1))
            if write >= step:
                return None
            last = max(self._last[root], merged_last.get(root, -1))
            if any(w != step and w <= last for w in self._writes[output]):
                return None
            merged_write[output] = max(merged_write.get(output, -1), write)
            merged_last[output] = max(merged_last.get(output, -1), last)
        state = _SetState(frozenset(numbers), parent, merged_write, merged_last)
        if self.eager:
            state.cost = self.base_sum - sum(self._bytes[root] for root, _, _ in bands)
            return state
        if not self.steps:
            state.cost = 0
            return state
        top, group_first, group_last = state.top, state.group_first, state.group_last
        starts: list[int] = []
        ends: list[int] = []
        amounts: list[int] = []
        for value in {*parent, *(output for _, output, _ in bands)}:
            path, head = [], value
            while head in parent and head not in top:
                path.append(head)
                head = parent[head][0]
            head = top.get(head, head)
            for v in path:
                top[v] = head
            group_first[head] = min(group_first.get(head, self._first[value]), self._first[value])
            group_last[head] = max(group_last.get(head, self._last[value]), self._last[value])
            if self._counted[value]:
                starts.append(self._first[value])
                ends.append(self._last[value] + 1)
                amounts.append(-self._bytes[value])
        for head, first in group_first.items():
            if self._counted[head]:
                starts.append(first)
                ends.append(group_last[head] + 1)
                amounts.append(self._bytes[head])
        delta = np.zeros(self.steps + 1, dtype=np.int64)
        values = np.array(amounts, dtype=np.int64)
        np.add.at(delta, np.array(starts, dtype=np.int64), values)
        np.add.at(delta, np.array(ends, dtype=np.int64), -values)
        state.profile = self.base + np.cumsum(delta[:-1])
        state.cost = int(state.profile.max())
        return state

    def _legal_with(self, state: _SetState, root: int, output: int, step: int) -> bool:
        """Is the legal set `state` plus the band root -> output (its
        concat at `step`) legal? The band itself, and the bands above the
        output, whose roots now hold more."""
        if root in state.parent:
            return False  # one buffer cannot be a band of two outputs
        write = max(self._max_write[root], state.merged_write.get(root, -1))
        last = max(self._last[root], state.merged_last.get(root, -1))
        if write >= step or any(w != step and w <= last for w in self._writes[output]):
            return False
        value = output
        write = max(write, state.merged_write.get(value, -1))
        last = max(last, state.merged_last.get(value, -1))
        while value in state.parent:
            above, above_step = state.parent[value]
            write = max(self._max_write[value], write)
            last = max(self._last[value], last)
            if write >= above_step or any(w != above_step and w <= last for w in self._writes[above]):
                return False
            value = above
            write = max(write, state.merged_write.get(value, -1))
            last = max(last, state.merged_last.get(value, -1))
        return True

    def _extend(self, state: _SetState, number: int) -> _SetState | None:
        """The state `_state` makes of the legal set `state` plus one band
        (None when that set is illegal), made from `state`: only the bands
        above the band's output are checked again (`_legal_with`), and the
        root's group joins the output's (the root's buffer is gone, the
        group's head lives over both groups' steps)."""
        root, output, step = self._bands[number]
        if number in state.numbers or not self._legal_with(state, root, output, step):
            return None
        # the output and every band above it now hold the root and what is merged into it
        write = max(self._max_write[root], state.merged_write.get(root, -1))
        last = max(self._last[root], state.merged_last.get(root, -1))
        merged_write, merged_last = dict(state.merged_write), dict(state.merged_last)
        value: int | None = output
        while value is not None:
            merged_write[value] = max(merged_write.get(value, -1), write)
            merged_last[value] = max(merged_last.get(value, -1), last)
            above = state.parent.get(value)
            value = None if above is None else above[0]
        new = _SetState(state.numbers | {number}, {**state.parent, root: (output, step)}, merged_write, merged_last)
        if self.eager:
            assert state.cost is not None
            new.cost = state.cost - self._bytes[root]
            return new
        if not self.steps:
            new.cost = 0
            return new
        head = state.top.get(output, output)
        if head == root:
            return None  # a cycle (already illegal above)
        new.top = {member: head if top == root else top for member, top in state.top.items()}
        new.top[root] = head
        new.group_first, new.group_last = dict(state.group_first), dict(state.group_last)
        root_first = new.group_first.pop(root, self._first[root])
        root_last = new.group_last.pop(root, self._last[root])
        head_first = new.group_first.get(head, self._first[head])
        head_last = new.group_last.get(head, self._last[head])
        new.group_first[head] = min(head_first, root_first)
        new.group_last[head] = max(head_last, root_last)
        assert state.profile is not None
        new.profile = state.profile.copy()
        if self._counted[root]:
            new.profile[root_first:root_last + 1] -= self._bytes[root]
        if self._counted[head]:
            new.profile[head_first:head_last + 1] -= self._bytes[head]
            new.profile[new.group_first[head]:new.group_last[head] + 1] += self._bytes[head]
        new.cost = int(new.profile.max())
        return new

    def _cost_minus(self, state: _SetState, number: int) -> int | None:
        """`cost` of the legal set `state` less one of its bands, from the
        state (a subset of a legal set is legal: less is merged into each
        root): the root's subtree leaves its group."""
        key = state.numbers - {number}
        if key in self._memo:
            return self._memo[key]
        result = self._minus(state, *self._bands[number])
        self._memo[key] = result
        return result

    def _minus(self, state: _SetState, root: int, output: int, step: int) -> int:
        if self.eager:
            assert state.cost is not None
            return state.cost + self._bytes[root]
        if not self.steps:
            return 0
        assert state.profile is not None
        if state.members is None or state.children is None:
            state.members, state.children = {}, {}
            for value, (above, _) in state.parent.items():
                state.members.setdefault(state.top.get(value, value), []).append(value)
                state.children.setdefault(above, []).append(value)
            for head in state.members:
                state.members[head].append(head)
        head = state.top[root]
        subtree, frontier = {root}, [root]
        while frontier:
            for child in state.children.get(frontier.pop(), []):
                subtree.add(child)
                frontier.append(child)
        rest = [m for m in state.members[head] if m not in subtree]
        profile = state.profile.copy()
        if self._counted[head]:
            profile[state.group_first[head]:state.group_last[head] + 1] -= self._bytes[head]
            profile[min(self._first[m] for m in rest):max(self._last[m] for m in rest) + 1] += self._bytes[head]
        if self._counted[root]:
            profile[min(self._first[m] for m in subtree):max(self._last[m] for m in subtree) + 1] += self._bytes[root]
        return int(profile.max())

    def choose(self, concats: list[list[ConcatBand]]) -> list[ConcatBand]:
        """Greedy over the concats (per concat, the subset of its inputs
        with the lowest cost, ties to more bands), then local search: drop a
        band or add one while that lowers the cost (adding: or keeps it).
        Greedy runs both in program order and backwards (one band can tie
        the peak early and block a chain later), and the better result wins."""
        numbered = [[self._number(b) for b in bands] for bands in concats]
        candidates = [n for bands in numbered for n in bands]
        results = []
        for order in (numbered, numbered[::-1]):
            chosen: list[int] = []
            state = self._state(chosen)
            assert state is not None
            for bands in order:
                chosen, state = self._best_extension(chosen, state, bands)
            chosen, state = self._improve(chosen, state, candidates)
            results.append((state.cost, -len(chosen), chosen))
        return [self._band_objects[n] for n in min(results, key=lambda r: r[:2])[2]]

    def _best_extension(self, chosen: list[int], start: _SetState,
                        bands: list[int]) -> tuple[list[int], _SetState]:
        """`chosen` (whose state is `start`) plus the subset of `bands` with
        the lowest cost, and its state."""
        if len(bands) <= MAX_SUBSET_INPUTS:
            subsets = (s for n in range(1, len(bands) + 1) for s in itertools.combinations(bands, n))
        else:  # too many subsets: grow one input at a time
            subsets = (tuple(bands[:n]) for n in range(1, len(bands) + 1))
        assert start.cost is not None
        best, best_state = chosen, start
        # each subset's state is its prefix's (tried before it) plus its last band
        states: dict[tuple[int, ...], _SetState | None] = {(): start}
        for subset in subsets:
            prefix = states[subset[:-1]]
            state = states[subset] = None if prefix is None else self._extend(prefix, subset[-1])
            if state is None:
                continue
            cost, best_cost = state.cost, best_state.cost
            assert cost is not None and best_cost is not None
            if cost < best_cost or (cost == best_cost and len(subset) + len(chosen) > len(best)):
                best, best_state = [*chosen, *subset], state
        return best, best_state

    def _improve(self, chosen: list[int], state: _SetState, candidates: list[int]) -> tuple[list[int], _SetState]:
        """Local search from `chosen` (whose state is `state`): drop a band
        or add one while that lowers the cost (adding: or keeps it); the
        set reached and its state."""
        cost = state.cost
        assert cost is not None
        improved = True
        while improved:
            improved = False
            for band in list(chosen):
                trial = [b for b in chosen if b != band]
                new = self._cost_minus(state, band)
                if new < cost:
                    chosen, cost, improved = trial, new, True
                    smaller = self._state(chosen)
                    assert smaller is not None
                    state = smaller
            for band in candidates:
                root = self._bands[band][0]
                if band in chosen or any(self._bands[b][0] == root for b in chosen):
                    continue
                extended = self._extend(state, band)
                if extended is not None and extended.cost is not None and extended.cost <= cost:
                    chosen, cost, improved = [*chosen, band], extended.cost, extended.cost < cost or improved
                    state = extended
        return chosen, state


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

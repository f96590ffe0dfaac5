"""Memory-aware scheduling: the op order with the smallest peak of live bytes.

The order in which independent operators run decides which tensors are alive
together, so the max-live lower bound of one order is not the lower bound of
the model. This module picks the order. It is plain Python over a plain DAG
(no IR): nodes are operators in their given order, tensors have a producer,
a byte size and a set of consumer nodes.

**The cost model** is the liveness analysis's (pyocc/analysis/liveness.py):
a tensor is live from its producer's step to its last consumer's step,
inclusive. Graph inputs, outputs and weights are simply not tensors here (or
have zero bytes). With S the set of nodes already run, the live memory

    mem(S) = bytes of tensors produced in S that some node outside S reads

depends on the *set* S only, not on the order inside it; running node v next
costs `mem(S) + out(v)` at its step, where out(v) are v's result bytes. The
peak of an order is the largest step cost. Optionally (`in_place`) a node
may write its result over an input that dies at its step (as dnn-coalesce
does); that step then costs `mem(S)`, so the order also decides which
reader of a tensor runs last.

**Strategies** (`schedule`):

- `exact`: Serenity-style dynamic programming over scheduled sets
  (MLSys 2020). Each set keeps the smallest peak any order reaches it with;
  sets are expanded cheapest first, so the first complete set is optimal,
  and sets whose peak already reaches the best known schedule are pruned. Three
  things keep real graphs small:
  * divide and conquer at *cuts*: a node that is an ancestor or a descendant
    of every other node runs at a moment when the scheduled set is fixed
    (its ancestors), so the regions between consecutive cuts are solved
    independently and the peak is the largest region peak;
  * a region whose peak is already under the lower bound of another
    region cannot lower the function's peak and keeps its order;
  * free moves: a ready node that does not raise live memory and whose step
    stays under the region's lower bound can always run at once (moving it
    to the front of any order never raises a later step), so such nodes are
    scheduled without branching.
  When it finishes, the result is proven optimal.
- `greedy`: beam search over the same states, keeping the `beam_width`
  states of each size with the smallest (peak, live memory) -- "allocate
  least, free most", with look-ahead through the beam.
- `auto`: per region (smallest first), the beam's order as a first
  bound, then exact search while the time budget lasts; in each region the given order is kept unless something is
  strictly better, so auto is never worse than the given order.
- `given`: the given order.

`keep_given` (any strategy but given) then moves each region's order back
toward the given one, node by node, wherever that keeps the region's peak
(`_toward_given`); `least_worst` compares orders on the same DAG with other
tensor sizes (what dnn-reorder{symbol_dim} does for a symbolic compile).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

STRATEGIES = ("auto", "exact", "greedy", "given")


class ScheduleTimeout(Exception):
    """`exact` did not finish within its time budget."""


@dataclass(frozen=True)
class Tensor:
    """A tensor: `bytes` written by node `producer`, read by `consumers`."""

    bytes: int
    producer: int
    consumers: frozenset[int] = frozenset()


@dataclass(frozen=True)
class ScheduleGraph:
    """A DAG of `len(names)` nodes whose given order is 0, 1, 2, ...

    Edges come from tensors (producer before consumers) and from `after`:
    `after[v]` are extra nodes that must run before v (order constraints
    that carry no bytes, e.g. around an op with side effects).

    `in_place[v]` are tensors (indices into `tensors`) that node v may write
    its one result over when the tensor dies at v (v is its last reader
    to run); each has the result's byte size. Then v's step needs no new
    bytes."""

    names: tuple[str, ...]
    tensors: tuple[Tensor, ...]
    after: tuple[frozenset[int], ...] = ()
    in_place: tuple[frozenset[int], ...] = ()

    def __post_init__(self) -> None:
        n = len(self.names)
        if self.after and len(self.after) != n:
            raise ValueError("after must have one entry per node")
        for t in self.tensors:
            if not 0 <= t.producer < n or t.bytes < 0:
                raise ValueError(f"bad tensor {t}")
            if any(not t.producer < c < n for c in t.consumers):
                raise ValueError(f"tensor of node {t.producer}: consumers must come after it in the given order")
        for v, preds in enumerate(self.after):
            if any(not 0 <= p < v for p in preds):
                raise ValueError(f"node {v}: nodes it runs after must come before it in the given order")
        if self.in_place and len(self.in_place) != n:
            raise ValueError("in_place must have one entry per node")
        results: list[list[Tensor]] = [[] for _ in range(n)]
        for t in self.tensors:
            results[t.producer].append(t)
        for v, candidates in enumerate(self.in_place):
            for i in candidates:
                own = results[v]
                if len(own) != 1 or v not in self.tensors[i].consumers or \
                        self.tensors[i].bytes != own[0].bytes or not own[0].bytes:
                    raise ValueError(f"node {v}: may only write its one result over an input of the same size")

    @property
    def size(self) -> int:
        """The number of nodes."""
        return len(self.names)

    def predecessors(self, v: int) -> frozenset[int]:
        """The nodes that must run before node v."""
        preds = {t.producer for t in self.tensors if v in t.consumers}
        if self.after:
            preds |= self.after[v]
        return frozenset(preds)


@dataclass
class Schedule:
    """The chosen order and what it costs."""

    order: list[int]
    peak: int
    given_peak: int
    strategy: str
    proven_optimal: bool
    """True when the peak is proven the smallest of any order: every region
    was solved exactly, meets its lower bound, or is under the function's."""
    searched: list[int] = field(default_factory=list)
    """With `keep_given`: the order the search found, before it was moved
    back toward the given one (`order`)."""
    regions: int = 0
    exact_regions: int = 0
    """Regions settled that way."""
    ms: float = 0.0
    region_sizes: list[int] = field(default_factory=list)


class _Compiled:
    """The graph as bit masks, for fast state updates (bit v = node v)."""

    def __init__(self, graph: ScheduleGraph):
        n = graph.size
        self.n = n
        self.pred_mask = [0] * n
        self.inputs: list[list[int]] = [[] for _ in range(n)]
        self.out_all = [0] * n
        self.out_live = [0] * n
        self.t_bytes = [t.bytes for t in graph.tensors]
        self.t_consumers = [0] * len(graph.tensors)
        for i, t in enumerate(graph.tensors):
            self.out_all[t.producer] += t.bytes
            if t.consumers:
                self.out_live[t.producer] += t.bytes
            for c in t.consumers:
                self.t_consumers[i] |= 1 << c
                self.pred_mask[c] |= 1 << t.producer
                self.inputs[c].append(i)
        if graph.after:
            for v, preds in enumerate(graph.after):
                for p in preds:
                    self.pred_mask[v] |= 1 << p
        self.succs: list[list[int]] = [[] for _ in range(n)]
        for v, preds in enumerate(_predecessor_lists(graph)):
            for p in preds:
                self.succs[p].append(v)
        self.in_place = [tuple(graph.in_place[v]) if graph.in_place else () for v in range(n)]
        # A node that writes more than it could ever free is never a free move.
        self.may_free = [self.out_live[v] <= self.in_bytes(v) for v in range(n)]

    def step(self, scheduled: int, mem: int, v: int) -> tuple[int, int]:
        """Run v after the set `scheduled` with live memory `mem`: the step's
        cost and the live memory afterwards."""
        after = scheduled | (1 << v)
        freed = 0
        for t in self.inputs[v]:
            if self.t_consumers[t] & ~after == 0:
                freed += self.t_bytes[t]
        cost = mem + self.out_all[v]
        for t in self.in_place[v]:
            if self.t_consumers[t] & ~after == 0:
                cost -= self.out_all[v]  # the result takes the dying input's bytes
                break
        return cost, mem + self.out_live[v] - freed

    def least_step(self, v: int) -> int:
        """Bytes live at v's step in every order: its inputs and results
        (less the result when it may take an input's bytes)."""
        return self.in_bytes(v) + (0 if self.in_place[v] else self.out_all[v])

    def in_bytes(self, v: int) -> int:
        """Bytes of the tensors node v reads (all live at its step)."""
        return sum(self.t_bytes[t] for t in self.inputs[v])


def peak_of(graph: ScheduleGraph, order: Sequence[int]) -> int:
    """The largest live bytes of any step when the nodes run in `order`."""
    c = _Compiled(graph)
    scheduled = mem = peak = 0
    for v in order:
        cost, mem = c.step(scheduled, mem, v)
        scheduled |= 1 << v
        peak = max(peak, cost)
    return peak


def is_topological(graph: ScheduleGraph, order: Sequence[int]) -> bool:
    """True when `order` runs every node once, each after its predecessors."""
    if sorted(order) != list(range(graph.size)):
        return False
    c = _Compiled(graph)
    scheduled = 0
    for v in order:
        if c.pred_mask[v] & ~scheduled:
            return False
        scheduled |= 1 << v
    return True


def find_cuts(graph: ScheduleGraph) -> list[int]:
    """Nodes that are an ancestor or a descendant of every other node, in
    the given order (which they split into independent regions).

    Node p (its position in the given order) is one exactly when every node
    before it has a successor at or before p (following such successors
    climbs to p: all are ancestors) and every node after it has a
    predecessor at or after p (all are descendants). Linear time."""
    n = graph.size
    preds = _predecessor_lists(graph)
    first_succ = [n] * n
    for w in range(n):
        for u in preds[w]:
            first_succ[u] = min(first_succ[u], w)
    last_pred = [max(ps, default=-1) for ps in preds]
    before_ok = [False] * n  # every node before p has a successor at or before p
    reach = -1
    for p in range(n):
        before_ok[p] = reach <= p
        reach = max(reach, first_succ[p])
    cuts = []
    back = n
    for p in reversed(range(n)):
        if before_ok[p] and back >= p:
            cuts.append(p)
        back = min(back, last_pred[p])
    return cuts[::-1]


def _predecessor_lists(graph: ScheduleGraph) -> list[list[int]]:
    """For each node, the nodes that must run before it."""
    preds: list[set[int]] = [set() for _ in range(graph.size)]
    for t in graph.tensors:
        for c in t.consumers:
            preds[c].add(t.producer)
    for v, extra in enumerate(graph.after):
        preds[v] |= extra
    return [sorted(p) for p in preds]


@dataclass
class _Region:
    """Given positions [start, stop) between two cuts, and the state before."""

    start: int
    stop: int
    scheduled: int
    mem: int
    lower_bound: int = 0
    order: list[int] = field(default_factory=list)
    peak: int = 0
    proven: bool = False

    @property
    def nodes(self) -> list[int]:
        """The region's nodes."""
        return list(range(self.start, self.stop))

    @property
    def full(self) -> int:
        """The scheduled set once the region has run."""
        return self.scheduled | (((1 << self.stop) - 1) ^ ((1 << self.start) - 1))


def _regions(graph: ScheduleGraph, c: _Compiled) -> list[_Region]:
    """Split the given order at cuts; each region ends with its cut."""
    cuts = find_cuts(graph)
    bounds = [0]
    for cut in cuts:
        if cut + 1 > bounds[-1]:
            bounds.append(cut + 1)
    if bounds[-1] != c.n:
        bounds.append(c.n)
    regions = []
    scheduled = mem = 0
    for start, stop in zip(bounds, bounds[1:]):
        region = _Region(start, stop, scheduled, mem)
        peak = 0
        for v in range(start, stop):
            cost, mem = c.step(scheduled, mem, v)
            scheduled |= 1 << v
            peak = max(peak, cost)
            # Every order runs v with its inputs and outputs live.
            region.lower_bound = max(region.lower_bound, c.least_step(v))
        region.order, region.peak = list(range(start, stop)), peak
        # What is live when the region starts is live at its first step.
        region.lower_bound = max(region.lower_bound, region.mem)
        regions.append(region)
    return regions


@dataclass(frozen=True)
class _State:
    """A search state: the scheduled set, its live memory, the peak of the
    order that reached it, and the region's nodes that may run next."""

    scheduled: int
    mem: int
    peak: int
    ready: tuple[int, ...]


class _Search:
    """Moves between states of one region (shared by beam and exact search)."""

    def __init__(self, c: _Compiled, region: _Region):
        self.c = c
        self.region = region
        self.mask = region.full ^ region.scheduled
        self.full = region.full

    def start(self) -> tuple[_State, list[int]]:
        """The region's first state, after its free moves."""
        c, scheduled = self.c, self.region.scheduled
        ready = tuple(v for v in self.region.nodes if c.pred_mask[v] & ~scheduled == 0)
        return self.free_moves(_State(scheduled, self.region.mem, 0, ready))

    def run(self, state: _State, v: int, cost: int, mem: int) -> _State:
        """Run ready node v, whose step costs `cost` and leaves `mem` live."""
        c = self.c
        scheduled = state.scheduled | (1 << v)
        ready = [u for u in state.ready if u != v]
        for s in c.succs[v]:
            if self.mask >> s & 1 and c.pred_mask[s] & ~scheduled == 0:
                ready.append(s)
        return _State(scheduled, mem, max(state.peak, cost), tuple(ready))

    def free_moves(self, state: _State) -> tuple[_State, list[int]]:
        """Run, one after another, ready nodes that do not raise live memory
        and whose step costs at most max(peak, region lower bound) (safe: see
        the module docstring)."""
        c, bound = self.c, self.region.lower_bound
        moves: list[int] = []
        progress = True
        while progress:
            progress = False
            limit = max(state.peak, bound)
            for v in state.ready:
                if not c.may_free[v]:
                    continue
                cost, after = c.step(state.scheduled, state.mem, v)
                if after <= state.mem and cost <= limit:
                    state = self.run(state, v, cost, after)
                    moves.append(v)
                    progress = True
                    break
        return state, moves

    def children(self, state: _State, bound: int | None = None) -> list[tuple[_State, list[int]]]:
        """Every state one choice (plus its free moves) away, skipping those
        whose peak reaches `bound`."""
        out = []
        for v in state.ready:
            cost, mem = self.c.step(state.scheduled, state.mem, v)
            if bound is not None and max(state.peak, cost) >= bound:
                continue
            child, moves = self.free_moves(self.run(state, v, cost, mem))
            if bound is None or child.peak < bound:
                out.append((child, [v, *moves]))
        return out


def _path(parents: dict[int, tuple[int | None, list[int]]], scheduled: int) -> list[int]:
    """The order that reached the state `scheduled`."""
    pieces = []
    key: int | None = scheduled
    while key is not None:
        parent, moves = parents[key]
        pieces.append(moves)
        key = parent
    return [v for moves in reversed(pieces) for v in moves]


def _beam(c: _Compiled, region: _Region, width: int) -> tuple[list[int], int]:
    """Beam search: per number of scheduled nodes keep the `width` states
    with the smallest (peak, live memory)."""
    search = _Search(c, region)
    start, moves = search.start()
    parents: dict[int, tuple[int | None, list[int]]] = {start.scheduled: (None, moves)}
    states = {start.scheduled: start}
    buckets: dict[int, set[int]] = {start.scheduled.bit_count(): {start.scheduled}}
    best: _State | None = None
    while buckets:
        size = min(buckets)
        layer = sorted((states[k] for k in buckets.pop(size)), key=lambda s: (s.peak, s.mem))[:width]
        for state in layer:
            if state.scheduled == search.full:
                if best is None or state.peak < best.peak:
                    best = state
                continue
            for child, moves in search.children(state):
                key = child.scheduled
                if key not in states or (child.peak, child.mem) < (states[key].peak, states[key].mem):
                    states[key] = child
                    parents[key] = (state.scheduled, moves)
                    buckets.setdefault(key.bit_count(), set()).add(key)
    assert best is not None
    return _path(parents, best.scheduled), best.peak


def _exact(c: _Compiled, region: _Region, deadline: float) -> tuple[list[int], int] | None:
    """Dynamic programming over scheduled sets, best first: sets are
    expanded in order of the peak that reached them (a peak never drops
    along an order), so the first complete set taken is optimal. Sets whose
    peak reaches the region's best known peak are pruned. Returns a
    strictly better order, or None when none exists (the region's order is
    then optimal). Raises ScheduleTimeout."""
    search = _Search(c, region)
    bound = region.peak
    start, moves = search.start()
    parents: dict[int, tuple[int | None, list[int]]] = {start.scheduled: (None, moves)}
    states = {start.scheduled: start}
    # Among equal peaks, fuller sets first: they reach the end sooner.
    heap = [(start.peak, -start.scheduled.bit_count(), start.scheduled)]
    work = 0
    while heap:
        peak, _, key = heapq.heappop(heap)
        state = states[key]
        if peak > state.peak:
            continue  # reached more cheaply since it was queued
        if peak >= bound:
            return None
        if key == search.full:
            return _path(parents, key), peak
        work += 1
        if work & 255 == 0 and time.perf_counter() > deadline:
            raise ScheduleTimeout()
        for child, moves in search.children(state, bound):
            nxt = child.scheduled
            known = states.get(nxt)
            if known is not None and known.peak <= child.peak:
                continue
            states[nxt] = child
            parents[nxt] = (key, moves)
            heapq.heappush(heap, (child.peak, -nxt.bit_count(), nxt))
    return None


def _improve(region: _Region, order: list[int], peak: int) -> None:
    """Take `order` for the region when it is strictly better."""
    if peak < region.peak:
        region.order, region.peak = order, peak


def _toward_given(c: _Compiled, region: _Region) -> tuple[list[int], int]:
    """The region's order moved back toward the given order without raising
    its peak, and that peak: a list schedule that runs, at each step, the
    ready node earliest in the given order whose step, followed by the rest
    of the current order, stays within the region's peak. The current
    order's next node always does (that is the current order), so the
    schedule completes; when nothing else constrains it, it is the given
    order. A search for the peak chooses freely where the peak does not
    depend on the order; this keeps the model's own order there (what a
    symbolic compile wants: its order is chosen at the largest sizes, and
    choices free there are not free at small ones)."""
    limit = region.peak
    rest = list(region.order)
    scheduled, mem, peak = region.scheduled, region.mem, 0
    result: list[int] = []
    while rest:
        ready = sorted((v, j) for j, v in enumerate(rest) if c.pred_mask[v] & ~scheduled == 0)
        for v, j in ready:
            # v first, then rest[:j]: from there on the current order's steps are unchanged
            trial_scheduled, trial_mem = scheduled, mem
            fits = True
            for u in (v, *rest[:j]):
                cost, trial_mem = c.step(trial_scheduled, trial_mem, u)
                trial_scheduled |= 1 << u
                if cost > limit:
                    fits = False
                    break
            if fits:
                break
        cost, mem = c.step(scheduled, mem, v)
        scheduled |= 1 << v
        peak = max(peak, cost)
        result.append(v)
        rest.pop(j)
    return result, peak


def schedule(graph: ScheduleGraph, strategy: str = "auto", budget_ms: float = 500.0,
             beam_width: int = 8, keep_given: bool = False) -> Schedule:
    """An order of `graph`'s nodes with a small (auto, greedy) or the
    smallest (exact) peak of live bytes; see the module docstring.
    `exact` raises ScheduleTimeout when it does not finish in `budget_ms`.
    `keep_given` then moves every region's order back toward the given one
    wherever that keeps the region's peak (`_toward_given`)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy '{strategy}' (choose from {', '.join(STRATEGIES)})")
    began = time.perf_counter()
    deadline = began + budget_ms / 1000
    c = _Compiled(graph)
    regions = _regions(graph, c)
    given_peak = max((r.peak for r in regions), default=0)
    # No order of the function peaks below its largest region lower bound, so
    # a region already under it cannot lower the peak: it keeps its order.
    floor = max((r.lower_bound for r in regions), default=0)
    for region in regions:
        region.proven = region.peak <= max(region.lower_bound, floor) or region.stop - region.start == 1
    for region in sorted(regions, key=lambda r: r.stop - r.start):
        if strategy == "given" or region.proven:
            continue
        if strategy == "greedy":
            region.order, region.peak = _beam(c, region, beam_width)
            region.proven = region.peak <= region.lower_bound
            continue
        # The beam's order is a first bound that sharpens exact search's pruning.
        _improve(region, *_beam(c, region, beam_width))
        if region.peak <= max(region.lower_bound, floor):
            region.proven = True
            continue
        try:
            better = _exact(c, region, deadline)
        except ScheduleTimeout:
            if strategy == "exact":
                raise
            continue
        if better is not None:
            _improve(region, *better)
        region.proven = True
    searched = [v for region in regions for v in region.order] if keep_given else []
    if keep_given:
        for region in regions:
            if region.order != region.nodes:
                region.order, region.peak = _toward_given(c, region)
    order = [v for region in regions for v in region.order]
    return Schedule(
        order=order,
        peak=max((r.peak for r in regions), default=0),
        given_peak=given_peak,
        strategy=strategy,
        searched=searched,
        proven_optimal=all(r.proven for r in regions),
        regions=len(regions),
        exact_regions=sum(r.proven for r in regions),
        ms=(time.perf_counter() - began) * 1000,
        region_sizes=[r.stop - r.start for r in regions],
    )


def least_worst(orders: Sequence[Sequence[int]], graphs: Sequence[ScheduleGraph]) -> int:
    """The index of the order whose worst peak relative to the best of
    `orders`, over `graphs` (one DAG with other tensor sizes each), is
    smallest; the first on ties."""
    peaks = [[peak_of(graph, order) for order in orders] for graph in graphs]
    worst = [max((row[k] / max(min(row), 1) for row in peaks), default=1.0) for k in range(len(orders))]
    return min(range(len(orders)), key=lambda k: (worst[k], k))

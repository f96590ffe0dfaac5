"""Several named memory pools (TVM USMP style): which buffer goes where.

Edge devices have a small fast memory (on-chip SRAM, TCM) and a large slow
one (DRAM). A ``MemoryPool`` names one of them: a size limit (or none), an
alignment, the targets that can reach it, read-write or read-only. Every
buffer has an ordered list of candidate pools (``Buffer.pools``; empty means
every read-write pool, in pool order), and ``plan_pools`` decides, pool by
pool in the given order, which of the buffers still unplaced it keeps:

* an **unbounded** pool keeps every buffer offered to it and is planned by
  ``plan_memory`` (so with one unbounded pool the plan is exactly the
  single-pool plan);
* a **bounded** pool keeps the buffers that serve the most traffic. The
  *policy* ``traffic`` ranks the candidates by traffic density, bytes read
  plus written per byte of footprint-time (``traffic / (size * steps)``:
  often-used and short-lived first, the larger first on ties), and also by
  plain orders (most traffic, most traffic per byte, smallest first, program
  order). For each ranking it builds two selections: *online*, placing the
  buffers one by one at the lowest free gap and keeping each whose end stays
  within the limit; and *by capacity*, keeping each buffer while the bytes
  live at every step stay within the limit, then planning the kept set with
  ``plan_memory``'s fast heuristics (shrinking the capacity by the overshoot
  while the plan does not fit) and filling the holes online. The selection
  that serves the most traffic wins (so never less than the baseline); its
  buffers are re-planned and what that frees is filled once more. Inner
  plans use no clock-bound search, so the choice is reproducible. The policy
  ``first-fit`` is the simple baseline: program order, online, no ranking;
* what a pool does not keep **spills** to the buffer's next candidate. A
  buffer that no candidate keeps is an error (``PoolOverflowError``) naming
  the buffer, its last candidate pool and how many bytes that pool lacks.

A buffer whose size is unknown at compile time (``size=None``) is not
planned: it is left to the runtime allocator and listed apart
(``PoolsPlan.dynamic``), the USMP rule. Every pool's plan passes
``verify_plan`` (and its size limit) before ``plan_pools`` returns.

``parse_memory_pools`` reads the command-line form, e.g.
``"sram:size=512KiB,dram"``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .algorithms import HEURISTICS
from .placement import choose_gap
from .planner import plan_memory
from .problem import Buffer, Plan, PlanError, PlanningError, Problem, _is_int
from .verify import verify_plan

POLICIES = ("traffic", "first-fit")
"""How a bounded pool chooses the buffers it keeps (see the module docstring)."""


class PoolOverflowError(PlanningError):
    """No candidate pool can hold a buffer; the message names the buffer, the
    pool and the missing bytes."""


@dataclass(frozen=True)
class MemoryPool:
    """One named memory: where buffers may live."""

    name: str
    size: int | None = None
    """Byte limit; ``None``: unbounded."""
    alignment: int = 1
    """Every offset in the pool is a multiple of this (and of the buffer's own)."""
    targets: tuple[str, ...] = ()
    """The targets that can reach the pool; empty: every target."""
    read_only: bool = False
    """Read-only pools (flash, ROM) hold constants, never activations."""

    def __post_init__(self) -> None:
        """Validate the fields (``PlanningError`` with one line)."""
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise PlanningError(f"pool name {self.name!r} must be a letter or '_' followed by letters, digits, '_', '-' or '.'")
        if self.size is not None and (not _is_int(self.size) or self.size < 0):
            raise PlanningError(f"pool {self.name!r}: size must be None or a non-negative integer, got {self.size!r}")
        if not _is_int(self.alignment) or self.alignment < 1:
            raise PlanningError(f"pool {self.name!r}: alignment must be an integer >= 1, got {self.alignment!r}")
        if not isinstance(self.targets, tuple):
            object.__setattr__(self, "targets", tuple(self.targets))

    def accessible_from(self, target: str) -> bool:
        """True when code running on ``target`` can reach this pool."""
        return not self.targets or target in self.targets

    def to_json(self) -> dict:
        """The pool as a JSON-ready dict (the problem format's ``pools`` entry)."""
        return {"name": self.name, "size": self.size, "alignment": self.alignment,
                "targets": list(self.targets), "access": "ro" if self.read_only else "rw"}

    def describe(self) -> str:
        """Short text: ``sram (1,048,576 B, rw)``."""
        limit = "unbounded" if self.size is None else f"{self.size:,d} B"
        return f"{self.name} ({limit}, {'ro' if self.read_only else 'rw'})"


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_SIZE = re.compile(r"(\d+)\s*([A-Za-z]*)")


def parse_size(text: str) -> int:
    """Bytes from ``512KiB``, ``1MiB``, ``2GiB``, ``4096`` or ``4096B``."""
    match = _SIZE.fullmatch(text.strip())
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise PlanningError(f"size {text!r} must be a number of bytes, optionally with KiB, MiB or GiB (e.g. 512KiB)")
    return int(match.group(1)) * _UNITS[unit]


def parse_memory_pools(spec: str, default_alignment: int = 1) -> tuple[MemoryPool, ...]:
    """Pools from the command-line form, tried in the order given.

    ``spec`` is ``POOL[,POOL...]``; a POOL is ``NAME[:OPTION[:OPTION...]]``
    with OPTIONs ``size=512KiB`` (KiB, MiB, GiB or plain bytes; no size:
    unbounded), ``align=N``, ``targets=host+cuda``, ``ro`` or ``rw``
    (default). Example: ``"sram:size=512KiB,dram,flash:ro"``. Raises
    ``PlanningError`` with one line for a malformed spec, a duplicate name or
    no read-write pool.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise PlanningError("memory pools: the spec is empty; write e.g. 'sram:size=512KiB,dram'")
    pools: list[MemoryPool] = []
    for part in spec.split(","):
        name, *options = [piece.strip() for piece in part.split(":")]
        if not name:
            raise PlanningError(f"memory pools: {part.strip()!r} has no pool name; write NAME[:size=...]")
        if not _NAME.fullmatch(name):
            raise PlanningError(f"memory pools: pool name {name!r} must start with a letter or '_' (letters, digits, _ - . follow)")
        fields: dict = {"name": name, "alignment": default_alignment}
        for option in options:
            key, sep, value = option.partition("=")
            key = key.strip().lower()
            if not sep and key in ("ro", "rw"):
                fields["read_only"] = key == "ro"
            elif sep and key == "size":
                try:
                    fields["size"] = parse_size(value)
                except PlanningError as e:
                    raise PlanningError(f"memory pools: pool {name!r}: {e}") from None
                if fields["size"] == 0:
                    raise PlanningError(f"memory pools: pool {name!r} has size 0; give a positive size or none (unbounded)")
            elif sep and key in ("align", "alignment"):
                if not value.strip().isdigit() or int(value) < 1:
                    raise PlanningError(f"memory pools: pool {name!r}: align={value!r} must be a positive integer")
                fields["alignment"] = int(value)
            elif sep and key == "targets":
                targets = tuple(t.strip() for t in value.split("+"))
                if not all(targets):
                    raise PlanningError(f"memory pools: pool {name!r}: targets={value!r} must be names joined by '+'")
                fields["targets"] = targets
            else:
                raise PlanningError(
                    f"memory pools: pool {name!r}: unknown option {option!r} (known: size=, align=, targets=, ro, rw)")
        if any(p.name == name for p in pools):
            raise PlanningError(f"memory pools: pool {name!r} is named twice")
        pools.append(MemoryPool(**fields))
    if all(p.read_only for p in pools):
        raise PlanningError("memory pools: every pool is read-only; activations need at least one read-write pool")
    return tuple(pools)


def parse_pool_candidates(spec: str, pools: Sequence[MemoryPool]) -> dict[str, tuple[str, ...]]:
    """Per-kind candidate pools from ``KIND=POOL[+POOL...][,KIND=...]``, e.g.
    ``"concat=dram,conv=sram+dram"``: buffers of that kind (for a compiler:
    the kind of op that writes them) try only those pools, in that order.
    ``PlanningError`` for a malformed entry, an unknown pool or a kind named
    twice. An empty spec gives no overrides."""
    known = {p.name for p in pools}
    result: dict[str, tuple[str, ...]] = {}
    if not spec.strip():
        return result
    for entry in spec.split(","):
        kind, sep, names = (piece.strip() for piece in entry.partition("="))
        if not sep or not kind or not names:
            raise PlanningError(f"pool candidates: {entry.strip()!r} must look like KIND=POOL[+POOL...], e.g. conv=sram+dram")
        chosen = tuple(name.strip() for name in names.split("+"))
        for name in chosen:
            if name not in known:
                raise PlanningError(f"pool candidates: {kind}: unknown pool {name!r} (pools: {', '.join(p.name for p in pools)})")
        if kind in result:
            raise PlanningError(f"pool candidates: kind {kind!r} is named twice")
        result[kind] = chosen
    return result


@dataclass(frozen=True)
class PoolsPlan:
    """Where every buffer lives: a pool and an offset in it."""

    pools: tuple[MemoryPool, ...]
    """The pools, in the order they were tried."""
    plans: dict[str, Plan]
    """Pool name -> the plan of the buffers it holds (every pool, maybe empty)."""
    assignment: dict[str, str]
    """Buffer name -> pool name, for every static buffer."""
    dynamic: tuple[str, ...]
    """Buffers with no static size, left to the runtime allocator."""
    traffic: dict[str, int]
    """Pool name -> bytes of traffic (read + written) its buffers serve."""
    dynamic_traffic: int
    """Traffic of the dynamic buffers (served by the runtime allocator)."""
    policy: str
    plan_ms: float = field(default=0.0, compare=False)

    def pool_sizes(self) -> dict[str, int]:
        """Pool name -> planned bytes."""
        return {name: plan.pool_size for name, plan in self.plans.items()}

    def total_bytes(self) -> int:
        """The planned bytes of all pools together."""
        return sum(plan.pool_size for plan in self.plans.values())

    def total_traffic(self) -> int:
        """All the traffic, every pool and the dynamic buffers."""
        return sum(self.traffic.values()) + self.dynamic_traffic

    def traffic_fraction(self, pool: str) -> float:
        """The share of all traffic that pool ``pool`` serves (0 when there is none)."""
        total = self.total_traffic()
        return self.traffic[pool] / total if total else 0.0


# ----------------------------------------------------------------- candidates


def candidate_pools(buffer: Buffer, pools: Sequence[MemoryPool]) -> list[str]:
    """The buffer's candidate pool names, checked: its own list, or every
    read-write pool in order. The list must follow the pool order (pools are
    planned in that order, so a buffer cannot go back to an earlier one)."""
    order = {p.name: i for i, p in enumerate(pools)}
    if not buffer.pools:
        return [p.name for p in pools if not p.read_only]
    for name in buffer.pools:
        if name not in order:
            raise PlanningError(f"buffer {buffer.name!r}: unknown pool {name!r} (pools: {', '.join(order)})")
    positions = [order[name] for name in buffer.pools]
    if positions != sorted(set(positions)):
        raise PlanningError(
            f"buffer {buffer.name!r}: candidate pools {list(buffer.pools)} must follow the pool order "
            f"({', '.join(order)}) without repeats")
    return list(buffer.pools)


def _in_pool(buffer: Buffer, pool: MemoryPool) -> Buffer:
    """The buffer as the pool sees it: alignment raised to the pool's."""
    alignment = math.lcm(buffer.alignment, pool.alignment)
    return Buffer(buffer.name, buffer.size, buffer.first, buffer.last, alignment, (pool.name,), buffer.traffic)


# ----------------------------------------------------------------- selection


class _Packer:
    """Online first fit under a limit: place buffers one at a time at the
    lowest gap among the placed buffers they overlap; refuse a buffer whose
    end would pass the limit."""

    def __init__(self, limit: int | None) -> None:
        """An empty pool of ``limit`` bytes (``None``: unbounded)."""
        self.limit = limit
        self.placed: list[tuple[Buffer, int]] = []

    def where(self, buffer: Buffer) -> int:
        """The offset first fit would give ``buffer`` (limit not checked)."""
        busy = [(offset, offset + other.size) for other, offset in self.placed
                if other.size and other.overlaps(buffer)]
        return choose_gap(busy, buffer.size, buffer.alignment, False) if buffer.size else 0

    def try_place(self, buffer: Buffer) -> bool:
        """Place ``buffer`` if it fits within the limit; True when placed."""
        offset = self.where(buffer)
        if self.limit is not None and offset + buffer.size > self.limit:
            return False
        self.placed.append((buffer, offset))
        return True

    def offsets(self) -> dict[str, int]:
        """Buffer name -> offset of everything placed."""
        return {b.name: offset for b, offset in self.placed}


def _rankings(buffers: list[Buffer], policy: str) -> list[list[Buffer]]:
    """The orders a bounded pool tries (see the module docstring)."""
    program = sorted(buffers, key=lambda b: b.first)  # stable: problem order on ties
    if policy == "first-fit":
        return [program]

    def density(b: Buffer) -> float:
        return b.traffic_bytes() / (max(b.size, 1) * (b.last - b.first + 1))

    by_density = sorted(buffers, key=lambda b: (density(b), b.size), reverse=True)
    by_traffic = sorted(buffers, key=lambda b: (b.traffic_bytes(), -b.size), reverse=True)
    by_uses = sorted(buffers, key=lambda b: (b.traffic_bytes() / max(b.size, 1), -b.size), reverse=True)
    by_small = sorted(buffers, key=lambda b: b.size)
    return [by_density, by_traffic, program, by_uses, by_small]


def _fill(packer: _Packer, order: Iterable[Buffer]) -> int:
    """Offer ``order`` to ``packer``; the traffic of what it kept."""
    return sum(b.traffic_bytes() for b in order if packer.try_place(b))


def _capacity_greedy(order: list[Buffer], capacity: int) -> list[Buffer]:
    """The buffers of ``order`` kept, in turn, while the bytes live at every
    step stay within ``capacity`` (offsets ignored: a necessary condition)."""
    if not order:
        return []
    start = min(b.first for b in order)
    usage = [0] * (max(b.last for b in order) - start + 1)
    kept = []
    for b in order:
        size = -(-b.size // b.alignment) * b.alignment
        span = range(b.first - start, b.last - start + 1)
        if max(usage[i] for i in span) + size <= capacity:
            for i in span:
                usage[i] += size
            kept.append(b)
    return kept


CAPACITY_ATTEMPTS = 6
"""How many times the capacity strategy shrinks its step capacity before giving up."""


def _by_capacity(order: list[Buffer], limit: int, algorithm: str) -> _Packer | None:
    """Choose by step capacity, then plan the chosen set offline (tighter
    than placing one by one); shrink the capacity by the overshoot while the
    plan passes the limit. The plan's holes are then filled first fit."""
    capacity = limit
    for _ in range(CAPACITY_ATTEMPTS):
        chosen = _capacity_greedy(order, capacity)
        if not chosen:
            return None
        # no time budget: only auto's fast heuristics, so the choice never depends on the clock
        plan = plan_memory(Problem(tuple(chosen)), algorithm, time_budget_ms=0)
        if plan.pool_size <= limit:
            packer = _Packer(limit)
            packer.placed = [(b, plan.offsets[b.name]) for b in chosen]
            names = {b.name for b in chosen}
            _fill(packer, [b for b in order if b.name not in names])
            return packer
        capacity -= plan.pool_size - limit
    return None


def _select_for_bounded(buffers: list[Buffer], pool: MemoryPool, policy: str,
                        algorithm: str) -> tuple[Problem, Plan]:
    """The buffers a bounded pool keeps, and their verified plan within the
    limit. Inner plans use ``algorithm`` when it is a fast heuristic, else
    auto's heuristics (no clock-bound search: the choice is reproducible)."""
    assert pool.size is not None
    if algorithm not in HEURISTICS:
        algorithm = "auto"
    candidates: list[tuple[_Packer, list[Buffer], str]] = []
    for order in _rankings(buffers, policy):
        packer = _Packer(pool.size)
        _fill(packer, order)
        candidates.append((packer, order, f"{policy}:first-fit"))
    if policy == "traffic":
        orders = _rankings(buffers, policy)
        for order in orders:
            packer = _by_capacity(order, pool.size, algorithm)
            if packer is not None:
                candidates.append((packer, order, "traffic:capacity"))

    def served(packer: _Packer) -> int:
        return sum(b.traffic_bytes() for b, _ in packer.placed)

    best, best_order, name = max(candidates, key=lambda c: served(c[0]))  # first on ties
    kept = [b for b, _ in best.placed]
    offsets = best.offsets()
    if policy == "traffic" and kept:
        # a tighter plan of the same buffers may leave room for more of the rest
        replanned = plan_memory(Problem(tuple(kept)), algorithm, time_budget_ms=0)
        if replanned.pool_size < max(offsets[b.name] + b.size for b in kept):
            packer = _Packer(pool.size)
            packer.placed = [(b, replanned.offsets[b.name]) for b in kept]
            chosen = {b.name for b in kept}
            _fill(packer, [b for b in best_order if b.name not in chosen])
            kept = [b for b, _ in packer.placed]
            offsets = packer.offsets()
            name = f"{name}+{replanned.algorithm}"
    problem = Problem(tuple(sorted(kept, key=lambda b: (b.first, b.name))))
    size = max((offsets[b.name] + b.size for b in problem.buffers), default=0)
    return problem, Plan(offsets, size, name, False, 0.0)


def _missing_bytes(buffer: Buffer, pool: MemoryPool, problem: Problem, plan: Plan) -> int:
    """How many bytes pool ``pool`` lacks to hold ``buffer`` next to what it keeps."""
    packer = _Packer(None)
    packer.placed = [(b, plan.offsets[b.name]) for b in problem.buffers]
    assert pool.size is not None
    return packer.where(buffer) + buffer.size - pool.size


# ----------------------------------------------------------------- the planner


def plan_pools(problem: Problem, pools: Sequence[MemoryPool], *, policy: str = "traffic",
               algorithm: str = "auto", time_budget_ms: float = 200.0) -> PoolsPlan:
    """Place every static buffer of ``problem`` in one of ``pools`` (see the
    module docstring); dynamic buffers are listed apart.

    Raises ``PlanningError`` for bad pools, candidates or policy and
    ``PoolOverflowError`` when no candidate pool can hold a buffer. Every
    pool's plan is verified (``verify_plan``) and within its limit.
    """
    start = time.perf_counter()
    pools = tuple(pools)
    if not pools:
        raise PlanningError("plan_pools needs at least one pool")
    if policy not in POLICIES:
        raise PlanningError(f"unknown pool policy {policy!r} (known: {', '.join(POLICIES)})")
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        raise PlanningError(f"pool names must be unique, got {names}")
    candidates = {b.name: candidate_pools(b, pools) for b in problem.buffers}
    for b in problem.buffers:
        if not candidates[b.name]:
            raise PlanningError(f"buffer {b.name!r} has no candidate pool (every pool is read-only)")
    unplaced = [b for b in problem.buffers if b.size is not None]
    plans: dict[str, Plan] = {}
    kept_by_pool: dict[str, Problem] = {}
    assignment: dict[str, str] = {}
    for pool in pools:
        offered = [_in_pool(b, pool) for b in unplaced if pool.name in candidates[b.name]]
        if pool.size is None:
            kept = Problem(tuple(offered))
            plan = plan_memory(kept, algorithm, time_budget_ms=time_budget_ms)
        else:
            kept, plan = _select_for_bounded(offered, pool, policy, algorithm)
            verify_plan(kept, plan)
            if plan.pool_size > pool.size:
                raise PlanError(f"pool {pool.name!r}: plan of {plan.pool_size} bytes passes the limit {pool.size}")
        plans[pool.name], kept_by_pool[pool.name] = plan, kept
        taken = {b.name for b in kept.buffers}
        assignment.update((name, pool.name) for name in taken)
        unplaced = [b for b in unplaced if b.name not in taken]
        for b in unplaced:
            if candidates[b.name][-1] == pool.name:
                missing = _missing_bytes(_in_pool(b, pool), pool, kept, plan)
                raise PoolOverflowError(
                    f"buffer {b.name!r} ({b.size:,d} bytes) fits in no pool: its last candidate, pool "
                    f"{pool.name!r} ({pool.size:,d} bytes), lacks {max(missing, 1):,d} bytes; "
                    f"make {pool.name!r} larger or add a pool after it")
    by_name = problem.by_name()
    traffic = {p.name: sum(by_name[b.name].traffic_bytes() for b in kept_by_pool[p.name].buffers) for p in pools}
    dynamic = problem.dynamic
    return PoolsPlan(
        pools=pools, plans=plans, assignment=assignment,
        dynamic=tuple(b.name for b in dynamic),
        traffic=traffic, dynamic_traffic=sum(b.traffic_bytes() for b in dynamic),
        policy=policy, plan_ms=(time.perf_counter() - start) * 1000.0,
    )


def verify_pools_plan(problem: Problem, result: PoolsPlan) -> None:
    """Raise ``PlanError`` unless every static buffer is in exactly one of its
    candidate pools, every pool's plan is valid and within its limit, and the
    dynamic buffers are exactly those without a size."""
    pools = {p.name: p for p in result.pools}
    static = [b for b in problem.buffers if b.size is not None]
    if {b.name for b in problem.dynamic} != set(result.dynamic):
        raise PlanError("the dynamic buffers of the plan differ from the problem's")
    for b in static:
        pool = result.assignment.get(b.name)
        if pool is None:
            raise PlanError(f"buffer {b.name!r} is in no pool")
        if pool not in candidate_pools(b, result.pools):
            raise PlanError(f"buffer {b.name!r} is in pool {pool!r}, not one of its candidates")
    for name, pool in pools.items():
        members = Problem(tuple(_in_pool(b, pool) for b in static if result.assignment[b.name] == name))
        plan = result.plans[name]
        verify_plan(members, plan)
        if pool.size is not None and plan.pool_size > pool.size:
            raise PlanError(f"pool {name!r}: {plan.pool_size} bytes planned, limit {pool.size}")

"""The planner's tool-agnostic JSON formats (in the spirit of TVM USMP's
BufferInfo / PoolAllocation), so any compiler can hand pyocc a problem file.

Problem::

    {"format": "pyocc-plan-problem", "version": 1,
     "buffers": [{"name": "conv1", "size": 4096, "first": 0, "last": 3,
                  "alignment": 64, "pools": ["sram"]}, ...],
     "pools": [{"name": "sram", "size": 262144}]}

``name``, ``size`` (bytes, >= 0; null for a dynamic buffer, which
``plan_pools`` leaves to the runtime allocator), ``first`` and ``last``
(inclusive steps, ``last >= first``) are required; ``alignment`` (>= 1,
default 1), ``pools`` (ordered candidate pool names, default []: every
read-write pool) and ``traffic`` (bytes read + written, default 2 * size)
are optional. The top-level ``pools`` is optional: each has a ``name`` and
``size`` (null for unbounded) and optionally ``alignment`` (default 1),
``targets`` (default []: all) and ``access`` ("rw" default, or "ro");
``pools_from_json`` turns them into ``MemoryPool``s for ``plan_pools``.
Single-pool planning ignores them. Unknown keys are errors (they are usually
typos).

Multi-pool solution (``pools_plan_to_json``)::

    {"format": "pyocc-pools-solution", "version": 1, "policy": "traffic",
     "pools": [{"name": "sram", "size": 262144, "alignment": 64,
                "targets": [], "access": "rw", "pool_size": 196608,
                "traffic": 1048576, "algorithm": "traffic:first-fit",
                "allocations": [{"name": "conv1", "offset": 0, ...}, ...]}, ...],
     "dynamic": ["reshape3"], "dynamic_traffic": 0, "plan_ms": 1.2}

Solution::

    {"format": "pyocc-plan-solution", "version": 1,
     "algorithm": "auto:greedy-by-size", "pool_size": 8192,
     "lower_bound": 8192, "naive": 12288, "optimal": true, "plan_ms": 0.4,
     "allocations": [{"name": "conv1", "offset": 0, "size": 4096,
                      "first": 0, "last": 3}, ...]}

Symbolic problem (``symbolic_problem_from_json``; one plan for every value
of the symbols, see symbolic.py): the problem format with a top-level
``"symbols": {"S": [1, 512]}`` (inclusive ranges) and sizes that may be
polynomials in them, ``"size": "48*S^2 + 3072*S"``; ``pools`` and
``traffic`` are not taken. A buffer's ``alignment`` is the most it gets:
at a value where its size is smaller, the next power of two of the size
(``fitted_alignment``). Its solution::

    {"format": "pyocc-symbolic-solution", "version": 1,
     "symbols": {"S": [1, 512]}, "pool_size_expr": "max(end(x), end(y))",
     "pool_size": 18874368, "order": ["s0", ...],
     "pieces": [{"symbols": {"S": [1, 512]}, "pool_size_expr": "max(end(x), end(y))",
                 "order": ["s0", ...]}],
     "buffers": [{"name": "x", "size_expr": "3072*S",
                  "offset_expr": "align(max(end(s0), end(f0)), 64)",
                  "offset": 12582912}, ...],
     "verified_points": 512, "plan_ms": 450.0}

``pool_size``, every ``offset`` and ``order`` are those at the symbols'
maximum; ``end(b)`` is ``b``'s offset plus its size. A plan cut into pieces
(one layout per sub-range of one symbol, see symbolic.py) lists each piece's
range, pool formula and order in ``pieces``, and its formulas are piecewise
where the pieces differ: ``"S <= 23: align(end(a), 64); else: 0"`` (the
first piece whose bound holds).

Readers raise ``PlanningError`` with one precise line, e.g.
``buffer 3 ('conv1'): 'size' must be a non-negative integer``.
"""

from __future__ import annotations

from typing import Any

from .bounds import lower_bound, naive_bytes
from .pools import MemoryPool, PoolsPlan
from .problem import Buffer, Plan, PlanningError, Problem, _is_int
from .symbolic import Poly, SymbolicBuffer, SymbolicPlan, SymbolicProblem

PROBLEM_FORMAT = "pyocc-plan-problem"
SOLUTION_FORMAT = "pyocc-plan-solution"
VERSION = 1

POOLS_SOLUTION_FORMAT = "pyocc-pools-solution"
SYMBOLIC_SOLUTION_FORMAT = "pyocc-symbolic-solution"

_BUFFER_KEYS = {"name", "size", "first", "last", "alignment", "pools", "traffic"}
_POOL_KEYS = {"name", "size", "alignment", "targets", "access"}
_SYMBOLIC_BUFFER_KEYS = {"name", "size", "first", "last", "alignment"}


def _check_header(data: Any, expected_format: str) -> None:
    """The document is an object with the right ``format`` and ``version``."""
    if not isinstance(data, dict):
        raise PlanningError(f"expected a JSON object, got {type(data).__name__}")
    if data.get("format") != expected_format:
        raise PlanningError(f"'format' must be {expected_format!r}, got {data.get('format')!r}")
    if data.get("version") != VERSION:
        raise PlanningError(f"unsupported 'version' {data.get('version')!r} (this reader knows {VERSION})")


def _read_buffer(index: int, entry: Any) -> Buffer:
    """One entry of ``buffers``, checked field by field."""
    if not isinstance(entry, dict):
        raise PlanningError(f"buffer {index}: expected an object, got {type(entry).__name__}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise PlanningError(f"buffer {index}: 'name' must be a non-empty string")
    where = f"buffer {index} ({name!r})"
    unknown = sorted(set(entry) - _BUFFER_KEYS)
    if unknown:
        raise PlanningError(f"{where}: unknown key {unknown[0]!r}")
    for key in ("size", "first", "last"):
        if key not in entry:
            raise PlanningError(f"{where}: missing {key!r}")
    size = entry["size"]
    if size is not None and (not _is_int(size) or size < 0):
        raise PlanningError(f"{where}: 'size' must be a non-negative integer")
    for key in ("first", "last"):
        if not _is_int(entry[key]):
            raise PlanningError(f"{where}: {key!r} must be an integer")
    if entry["last"] < entry["first"]:
        raise PlanningError(f"{where}: 'last' ({entry['last']}) is before 'first' ({entry['first']})")
    alignment = entry.get("alignment", 1)
    if not _is_int(alignment) or alignment < 1:
        raise PlanningError(f"{where}: 'alignment' must be an integer >= 1")
    pools = entry.get("pools", [])
    if not isinstance(pools, list) or not all(isinstance(p, str) for p in pools):
        raise PlanningError(f"{where}: 'pools' must be a list of pool names")
    traffic = entry.get("traffic")
    if traffic is not None and (not _is_int(traffic) or traffic < 0):
        raise PlanningError(f"{where}: 'traffic' must be a non-negative integer")
    return Buffer(name, size, entry["first"], entry["last"], alignment, tuple(pools), traffic)


def _read_pool(index: int, entry: Any) -> dict:
    """One entry of the optional top-level ``pools``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise PlanningError(f"pool {index}: expected an object with a string 'name'")
    unknown = sorted(set(entry) - _POOL_KEYS)
    if unknown:
        raise PlanningError(f"pool {index} ({entry['name']!r}): unknown key {unknown[0]!r}")
    size = entry.get("size")
    if size is not None and (not _is_int(size) or size < 0):
        raise PlanningError(f"pool {index} ({entry['name']!r}): 'size' must be null or a non-negative integer")
    pool = {"name": entry["name"], "size": size}
    where = f"pool {index} ({entry['name']!r})"
    if "alignment" in entry:
        if not _is_int(entry["alignment"]) or entry["alignment"] < 1:
            raise PlanningError(f"{where}: 'alignment' must be an integer >= 1")
        pool["alignment"] = entry["alignment"]
    if "targets" in entry:
        if not isinstance(entry["targets"], list) or not all(isinstance(t, str) for t in entry["targets"]):
            raise PlanningError(f"{where}: 'targets' must be a list of target names")
        pool["targets"] = list(entry["targets"])
    if "access" in entry:
        if entry["access"] not in ("rw", "ro"):
            raise PlanningError(f"{where}: 'access' must be \"rw\" or \"ro\"")
        pool["access"] = entry["access"]
    return pool


def problem_from_json(data: dict) -> Problem:
    """Read a problem document (see module docstring); ``PlanningError`` if invalid."""
    _check_header(data, PROBLEM_FORMAT)
    buffers = data.get("buffers")
    if not isinstance(buffers, list):
        raise PlanningError("'buffers' must be a list")
    pools = data.get("pools", [])
    if not isinstance(pools, list):
        raise PlanningError("'pools' must be a list")
    return Problem(
        tuple(_read_buffer(i, entry) for i, entry in enumerate(buffers)),
        tuple(_read_pool(i, entry) for i, entry in enumerate(pools)),
    )


def problem_to_json(problem: Problem) -> dict:
    """The problem as a JSON-ready dict (see module docstring)."""
    data: dict[str, Any] = {
        "format": PROBLEM_FORMAT,
        "version": VERSION,
        "buffers": [
            {
                "name": b.name,
                "size": b.size,
                "first": b.first,
                "last": b.last,
                "alignment": b.alignment,
                "pools": list(b.pools),
                **({"traffic": b.traffic} if b.traffic is not None else {}),
            }
            for b in problem.buffers
        ],
    }
    if problem.pools:
        data["pools"] = [dict(pool) for pool in problem.pools]
    return data


def plan_to_json(problem: Problem, plan: Plan) -> dict:
    """The solution document for ``plan`` (allocations in problem order)."""
    return {
        "format": SOLUTION_FORMAT,
        "version": VERSION,
        "algorithm": plan.algorithm,
        "pool_size": plan.pool_size,
        "lower_bound": lower_bound(problem),
        "naive": naive_bytes(problem),
        "optimal": plan.optimal,
        "plan_ms": round(plan.plan_ms, 3),
        "allocations": [
            {"name": b.name, "offset": plan.offsets[b.name], "size": b.size, "first": b.first, "last": b.last}
            for b in problem.buffers
        ],
    }


def plan_from_json(data: dict) -> Plan:
    """Read a solution document back into a ``Plan``; ``PlanningError`` if invalid."""
    _check_header(data, SOLUTION_FORMAT)
    if not isinstance(data.get("algorithm"), str):
        raise PlanningError("'algorithm' must be a string")
    if not _is_int(data.get("pool_size")) or data["pool_size"] < 0:
        raise PlanningError("'pool_size' must be a non-negative integer")
    if not isinstance(data.get("optimal"), bool):
        raise PlanningError("'optimal' must be true or false")
    plan_ms = data.get("plan_ms", 0.0)
    if not isinstance(plan_ms, (int, float)) or isinstance(plan_ms, bool):
        raise PlanningError("'plan_ms' must be a number")
    allocations = data.get("allocations")
    if not isinstance(allocations, list):
        raise PlanningError("'allocations' must be a list")
    offsets: dict[str, int] = {}
    for index, entry in enumerate(allocations):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise PlanningError(f"allocation {index}: expected an object with a string 'name'")
        offset = entry.get("offset")
        if not _is_int(offset) or offset < 0:
            raise PlanningError(f"allocation {index} ({entry['name']!r}): 'offset' must be a non-negative integer")
        if entry["name"] in offsets:
            raise PlanningError(f"allocation {index}: duplicate name {entry['name']!r}")
        offsets[entry["name"]] = offset
    return Plan(offsets, data["pool_size"], data["algorithm"], data["optimal"], float(plan_ms))


def pools_from_json(problem: Problem) -> tuple[MemoryPool, ...]:
    """The problem's top-level ``pools`` as ``MemoryPool``s (``PlanningError`` if invalid)."""
    return tuple(
        MemoryPool(p["name"], p.get("size"), p.get("alignment", 1), tuple(p.get("targets", ())),
                   p.get("access", "rw") == "ro")
        for p in problem.pools
    )


def pools_plan_to_json(problem: Problem, result: PoolsPlan) -> dict:
    """The multi-pool solution document (see module docstring)."""
    by_name = problem.by_name()
    pools = []
    for pool in result.pools:
        plan = result.plans[pool.name]
        pools.append({
            **pool.to_json(),
            "pool_size": plan.pool_size,
            "traffic": result.traffic[pool.name],
            "algorithm": plan.algorithm,
            "allocations": [
                {"name": b.name, "offset": plan.offsets[b.name], "size": b.size, "first": b.first, "last": b.last}
                for b in problem.buffers if result.assignment.get(b.name) == pool.name
            ],
        })
    return {
        "format": POOLS_SOLUTION_FORMAT,
        "version": VERSION,
        "policy": result.policy,
        "pools": pools,
        "dynamic": [{"name": name, "first": by_name[name].first, "last": by_name[name].last}
                    for name in result.dynamic],
        "dynamic_traffic": result.dynamic_traffic,
        "plan_ms": round(result.plan_ms, 3),
    }


def symbolic_problem_from_json(data: Any) -> SymbolicProblem:
    """Read a symbolic problem document (see module docstring); ``PlanningError`` if invalid."""
    _check_header(data, PROBLEM_FORMAT)
    symbols = data.get("symbols")
    if not isinstance(symbols, dict) or not symbols:
        raise PlanningError("'symbols' must be an object of ranges, e.g. {\"S\": [1, 512]}")
    ranges: dict[str, tuple[int, int]] = {}
    for name, bounds in symbols.items():
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(_is_int(v) for v in bounds)):
            raise PlanningError(f"symbol {name!r}: its range must be [low, high], got {bounds!r}")
        ranges[name] = (bounds[0], bounds[1])
    unknown = sorted(set(data) - {"format", "version", "symbols", "buffers"})
    if unknown:
        raise PlanningError(f"unknown key {unknown[0]!r} in a symbolic problem")
    buffers = data.get("buffers")
    if not isinstance(buffers, list):
        raise PlanningError("'buffers' must be a list")
    return SymbolicProblem(tuple(_read_symbolic_buffer(i, entry) for i, entry in enumerate(buffers)), ranges)


def _read_symbolic_buffer(index: int, entry: Any) -> SymbolicBuffer:
    """One entry of a symbolic problem's ``buffers``: a static buffer's
    fields, the size an integer or a polynomial."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise PlanningError(f"buffer {index}: expected an object with a non-empty string 'name'")
    where = f"buffer {index} ({entry['name']!r})"
    unknown = sorted(set(entry) - _SYMBOLIC_BUFFER_KEYS)
    if unknown:
        raise PlanningError(f"{where}: unknown key {unknown[0]!r} (a symbolic problem takes {sorted(_SYMBOLIC_BUFFER_KEYS)})")
    for key in ("size", "first", "last"):
        if key not in entry:
            raise PlanningError(f"{where}: missing {key!r}")
    size = entry["size"]
    if isinstance(size, str):
        poly = Poly.parse(size)
    elif _is_int(size) and size >= 0:
        poly = Poly.constant(size)
    else:
        raise PlanningError(f"{where}: 'size' must be a non-negative integer or a polynomial like \"48*S^2\"")
    for key in ("first", "last"):
        if not _is_int(entry[key]):
            raise PlanningError(f"{where}: {key!r} must be an integer")
    alignment = entry.get("alignment", 1)
    if not _is_int(alignment) or alignment < 1:
        raise PlanningError(f"{where}: 'alignment' must be an integer >= 1")
    return SymbolicBuffer(entry["name"], poly, entry["first"], entry["last"], alignment)


def symbolic_plan_to_json(plan: SymbolicPlan) -> dict[str, Any]:
    """The solution document of a symbolic plan: offsets and the pool as
    formulas, and their values at the symbols' maximum."""
    problem = plan.problem
    maximum = problem.maximum()
    at_max = plan.offsets(maximum)
    return {
        "format": SYMBOLIC_SOLUTION_FORMAT,
        "version": VERSION,
        "symbols": {name: list(bounds) for name, bounds in problem.ranges.items()},
        "pool_size_expr": plan.pool_expr(),
        "pool_size": plan.pool_bytes(maximum),
        "order": [problem.buffers[i].name for i in plan.pieces[plan.piece_index(maximum)].order],
        "pieces": [
            {"symbols": {name: list(bounds) for name, bounds in piece.ranges.items()},
             "pool_size_expr": plan.piece_pool_expr(k), "order": [problem.buffers[i].name for i in piece.order]}
            for k, piece in enumerate(plan.pieces)
        ],
        "buffers": [
            {"name": b.name, "size_expr": str(b.size), "offset_expr": plan.offset_expr(i), "offset": at_max[b.name]}
            for i, b in enumerate(problem.buffers)
        ],
        "verified_points": sum(len(plan.piece_problem(k).check_points()) for k in range(len(plan.pieces))),
        "plan_ms": round(plan.plan_ms, 3),
    }

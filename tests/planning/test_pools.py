"""Named memory pools: the spec parser, planning across pools (fit, spill,
overflow, candidates, dynamic buffers, the traffic policy against the
first-fit baseline) and the JSON formats that carry pools."""

from __future__ import annotations

import random

import pytest

from pyocc.planning import (
    Buffer,
    MemoryPool,
    PlanError,
    PlanningError,
    PoolOverflowError,
    Problem,
    plan_memory,
    plan_pools,
    pools_from_json,
    pools_plan_to_json,
    problem_from_json,
    problem_to_json,
    verify_pools_plan,
)
from pyocc.planning.pools import parse_memory_pools, parse_pool_candidates, parse_size

KIB = 1024

# ----------------------------------------------------------------- the spec


def test_spec_with_sizes_options_and_order() -> None:
    pools = parse_memory_pools("sram:size=512KiB, dram ,flash:ro:size=2MiB:align=128,tcm:size=4096:targets=host+npu", 64)
    assert [p.name for p in pools] == ["sram", "dram", "flash", "tcm"]
    assert pools[0] == MemoryPool("sram", 512 * KIB, 64)
    assert pools[1] == MemoryPool("dram", None, 64)
    assert pools[2] == MemoryPool("flash", 2 * 2**20, 128, read_only=True)
    assert pools[3].size == 4096 and pools[3].targets == ("host", "npu")
    assert pools[3].accessible_from("npu") and not pools[3].accessible_from("cuda")
    assert pools[1].accessible_from("anything")


@pytest.mark.parametrize("text, expected", [("1GiB", 2**30), ("3mib", 3 * 2**20), ("7", 7), ("64B", 64)])
def test_sizes(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "spec, message",
    [
        ("", "memory pools: the spec is empty; write e.g. 'sram:size=512KiB,dram'"),
        ("sram:size=12KB", "memory pools: pool 'sram': size '12KB' must be a number of bytes, optionally with KiB, MiB or GiB (e.g. 512KiB)"),
        ("sram:size=-1", "memory pools: pool 'sram': size '-1' must be a number of bytes, optionally with KiB, MiB or GiB (e.g. 512KiB)"),
        (":size=1KiB", "memory pools: ':size=1KiB' has no pool name; write NAME[:size=...]"),
        ("sram,,dram", "memory pools: '' has no pool name; write NAME[:size=...]"),
        ("sram,sram", "memory pools: pool 'sram' is named twice"),
        ("sram:fast", "memory pools: pool 'sram': unknown option 'fast' (known: size=, align=, targets=, ro, rw)"),
        ("sram:size=0", "memory pools: pool 'sram' has size 0; give a positive size or none (unbounded)"),
        ("sram:align=0", "memory pools: pool 'sram': align='0' must be a positive integer"),
        ("9ram", "memory pools: pool name '9ram' must start with a letter or '_' (letters, digits, _ - . follow)"),
        ("flash:ro", "memory pools: every pool is read-only; activations need at least one read-write pool"),
    ],
)
def test_bad_specs_give_one_precise_line(spec: str, message: str) -> None:
    with pytest.raises(PlanningError) as error:
        parse_memory_pools(spec)
    assert str(error.value) == message
    assert "\n" not in str(error.value)


def test_pool_candidates_by_kind() -> None:
    pools = parse_memory_pools("sram:size=1KiB,dram")
    assert parse_pool_candidates("concat=dram, conv=sram+dram", pools) == {"concat": ("dram",), "conv": ("sram", "dram")}
    assert parse_pool_candidates("", pools) == {}
    for spec, message in [("conv", "pool candidates: 'conv' must look like KIND=POOL[+POOL...], e.g. conv=sram+dram"),
                          ("conv=tcm", "pool candidates: conv: unknown pool 'tcm' (pools: sram, dram)"),
                          ("conv=dram,conv=sram", "pool candidates: kind 'conv' is named twice")]:
        with pytest.raises(PlanningError) as error:
            parse_pool_candidates(spec, pools)
        assert str(error.value) == message


# ----------------------------------------------------------------- planning


def chain(sizes: list[int], traffic: list[int] | None = None) -> Problem:
    """Buffers live two steps each, one after another: i and i+1 overlap."""
    return Problem(tuple(
        Buffer(f"b{i}", size, i, i + 1, 64, traffic=None if traffic is None else traffic[i])
        for i, size in enumerate(sizes)))


def test_everything_fits_in_the_fast_pool() -> None:
    problem = chain([4 * KIB] * 4)
    result = plan_pools(problem, [MemoryPool("sram", 8 * KIB, 64), MemoryPool("dram", None, 64)])
    verify_pools_plan(problem, result)
    assert set(result.assignment.values()) == {"sram"}
    assert result.pool_sizes() == {"sram": 8 * KIB, "dram": 0}
    assert result.traffic_fraction("sram") == 1.0


def test_what_does_not_fit_spills_to_the_next_pool() -> None:
    # three buffers live at step 1..2 together: 12 KiB at once, the SRAM holds 8
    problem = Problem((Buffer("a", 4 * KIB, 0, 2, traffic=100), Buffer("b", 4 * KIB, 1, 2, traffic=900),
                       Buffer("c", 4 * KIB, 1, 3, traffic=500)))
    result = plan_pools(problem, [MemoryPool("sram", 8 * KIB), MemoryPool("dram")])
    verify_pools_plan(problem, result)
    assert result.assignment == {"b": "sram", "c": "sram", "a": "dram"}  # the least traffic spills
    assert result.traffic == {"sram": 1400, "dram": 100}
    assert result.traffic_fraction("sram") == pytest.approx(1400 / 1500)


def test_dense_traffic_goes_first_not_program_order() -> None:
    # a long-lived, rarely used buffer first in program order would block the
    # short, busy ones under first fit; the traffic policy keeps the busy ones
    lazy = Buffer("lazy", 8 * KIB, 0, 9, traffic=16 * KIB)
    busy = [Buffer(f"busy{i}", 8 * KIB, i, i, traffic=80 * KIB) for i in range(1, 9)]
    problem = Problem((lazy, *busy))
    pools = [MemoryPool("sram", 8 * KIB), MemoryPool("dram")]
    smart = plan_pools(problem, pools)
    baseline = plan_pools(problem, pools, policy="first-fit")
    verify_pools_plan(problem, smart)
    verify_pools_plan(problem, baseline)
    assert baseline.assignment["lazy"] == "sram" and baseline.traffic["sram"] == 16 * KIB
    assert smart.assignment["lazy"] == "dram" and smart.traffic["sram"] == 8 * 80 * KIB


def test_traffic_policy_never_serves_less_than_first_fit() -> None:
    rng = random.Random(7)
    for trial in range(30):
        buffers = []
        for i in range(40):
            first = rng.randrange(30)
            size = rng.choice([1, 2, 4, 8, 16]) * KIB
            buffers.append(Buffer(f"t{i}", size, first, first + rng.randrange(6), 64,
                                  traffic=size * rng.randrange(1, 6)))
        problem = Problem(tuple(buffers))
        pools = [MemoryPool("sram", rng.choice([16, 32, 64]) * KIB, 64), MemoryPool("dram", None, 64)]
        smart = plan_pools(problem, pools)
        baseline = plan_pools(problem, pools, policy="first-fit")
        verify_pools_plan(problem, smart)
        verify_pools_plan(problem, baseline)
        assert smart.traffic["sram"] >= baseline.traffic["sram"], trial


def test_unbounded_fast_pool_costs_no_more_than_one_pool() -> None:
    rng = random.Random(3)
    buffers = []
    for i in range(60):
        first = rng.randrange(40)
        buffers.append(Buffer(f"t{i}", rng.randrange(1, 50_000), first, first + rng.randrange(8), 64))
    problem = Problem(tuple(buffers))
    # a deterministic algorithm: auto's improving searches depend on the clock
    single = plan_memory(problem, "greedy-by-size")
    result = plan_pools(problem, [MemoryPool("sram", None, 64), MemoryPool("dram", None, 64)],
                        algorithm="greedy-by-size")
    verify_pools_plan(problem, result)
    assert result.total_bytes() <= single.pool_size + 64
    assert result.pool_sizes()["dram"] == 0


def test_overflow_names_buffer_pool_and_missing_bytes() -> None:
    problem = chain([4 * KIB, 6 * KIB, 4 * KIB])
    with pytest.raises(PoolOverflowError) as error:
        plan_pools(problem, [MemoryPool("sram", 4 * KIB, 64), MemoryPool("dram", 5 * KIB, 64)])
    # sram keeps b0 and b2 (they never overlap); b1 alone needs 6 KiB of dram's 5
    assert str(error.value) == (
        "buffer 'b1' (6,144 bytes) fits in no pool: its last candidate, pool 'dram' (5,120 bytes), "
        "lacks 1,024 bytes; make 'dram' larger or add a pool after it")


def test_per_buffer_candidates() -> None:
    problem = Problem((Buffer("pinned", 1 * KIB, 0, 1, pools=("dram",)), Buffer("free", 1 * KIB, 0, 1),
                       Buffer("only_sram", 1 * KIB, 0, 1, pools=("sram",))))
    pools = [MemoryPool("sram", 2 * KIB), MemoryPool("dram")]
    result = plan_pools(problem, pools)
    verify_pools_plan(problem, result)
    assert result.assignment == {"free": "sram", "only_sram": "sram", "pinned": "dram"}
    with pytest.raises(PlanningError, match="candidate pools \\['dram', 'sram'\\] must follow the pool order"):
        plan_pools(Problem((Buffer("x", 1, 0, 0, pools=("dram", "sram")),)), pools)
    with pytest.raises(PlanningError, match="unknown pool 'tcm'"):
        plan_pools(Problem((Buffer("x", 1, 0, 0, pools=("tcm",)),)), pools)


def test_read_only_pools_take_no_activations() -> None:
    problem = chain([1 * KIB] * 3)
    result = plan_pools(problem, [MemoryPool("flash", None, read_only=True), MemoryPool("dram")])
    assert set(result.assignment.values()) == {"dram"}


def test_dynamic_buffers_are_left_to_the_runtime() -> None:
    problem = Problem((Buffer("a", 4 * KIB, 0, 1), Buffer("shape_dependent", None, 1, 2, traffic=0),
                       Buffer("c", 4 * KIB, 1, 2)))
    result = plan_pools(problem, [MemoryPool("sram", 8 * KIB), MemoryPool("dram")])
    verify_pools_plan(problem, result)
    assert result.dynamic == ("shape_dependent",)
    assert "shape_dependent" not in result.assignment
    assert result.pool_sizes()["sram"] == 8 * KIB
    with pytest.raises(PlanningError, match="'shape_dependent' has no static size; plan it with plan_pools"):
        plan_memory(problem)


def test_verifier_rejects_a_pool_over_its_limit() -> None:
    problem = chain([4 * KIB] * 2)
    pools = [MemoryPool("sram", 8 * KIB), MemoryPool("dram")]
    result = plan_pools(problem, pools)
    squeezed = type(result)(
        pools=(MemoryPool("sram", 4 * KIB), pools[1]), plans=result.plans, assignment=result.assignment,
        dynamic=(), traffic=result.traffic, dynamic_traffic=0, policy="traffic")
    with pytest.raises(PlanError, match="pool 'sram': 8192 bytes planned, limit 4096"):
        verify_pools_plan(problem, squeezed)


def test_unknown_policy() -> None:
    with pytest.raises(PlanningError, match="unknown pool policy 'magic'"):
        plan_pools(chain([1]), [MemoryPool("dram")], policy="magic")


# ----------------------------------------------------------------- JSON


def test_json_carries_pools_candidates_traffic_and_dynamic_sizes() -> None:
    document = {
        "format": "pyocc-plan-problem", "version": 1,
        "buffers": [
            {"name": "a", "size": 4096, "first": 0, "last": 1, "alignment": 64, "pools": ["sram", "dram"], "traffic": 9000},
            {"name": "b", "size": None, "first": 1, "last": 2},
            {"name": "c", "size": 4096, "first": 1, "last": 2},
        ],
        "pools": [{"name": "sram", "size": 4096, "alignment": 64}, {"name": "dram", "size": None},
                  {"name": "flash", "size": None, "access": "ro", "targets": ["host"]}],
    }
    problem = problem_from_json(document)
    assert problem_from_json(problem_to_json(problem)) == problem
    pools = pools_from_json(problem)
    assert pools[0] == MemoryPool("sram", 4096, 64) and pools[2].read_only and pools[2].targets == ("host",)
    result = plan_pools(problem, pools)
    data = pools_plan_to_json(problem, result)
    assert data["format"] == "pyocc-pools-solution"
    assert [(p["name"], p["pool_size"], [a["name"] for a in p["allocations"]]) for p in data["pools"]] == [
        ("sram", 4096, ["a"]), ("dram", 4096, ["c"]), ("flash", 0, [])]
    assert data["dynamic"] == [{"name": "b", "first": 1, "last": 2}]


def test_old_documents_still_read() -> None:
    old = {"format": "pyocc-plan-problem", "version": 1,
           "buffers": [{"name": "a", "size": 8, "first": 0, "last": 0}], "pools": [{"name": "p", "size": None}]}
    problem = problem_from_json(old)
    assert problem.buffers[0].traffic is None and problem.pools == ({"name": "p", "size": None},)
    assert pools_from_json(problem) == (MemoryPool("p"),)


@pytest.mark.parametrize(
    "pool, message",
    [
        ({"name": "p", "size": 1, "access": "rx"}, "pool 0 ('p'): 'access' must be \"rw\" or \"ro\""),
        ({"name": "p", "size": 1, "alignment": 0}, "pool 0 ('p'): 'alignment' must be an integer >= 1"),
        ({"name": "p", "size": 1, "targets": "host"}, "pool 0 ('p'): 'targets' must be a list of target names"),
    ],
)
def test_bad_pool_json(pool: dict, message: str) -> None:
    with pytest.raises(PlanningError) as error:
        problem_from_json({"format": "pyocc-plan-problem", "version": 1, "buffers": [], "pools": [pool]})
    assert str(error.value) == message


# ----------------------------------------------------------------- plan-json --pools


def write_problem(tmp_path, dram_size: int | None) -> str:
    """A three-buffer chain and a 4 KiB SRAM + DRAM problem file."""
    import json

    path = tmp_path / "problem.json"
    path.write_text(json.dumps({
        "format": "pyocc-plan-problem", "version": 1,
        "buffers": [{"name": n, "size": 4096, "first": i, "last": i + 1} for i, n in enumerate("abc")],
        "pools": [{"name": "sram", "size": 4096}, {"name": "dram", "size": dram_size}],
    }))
    return str(path)


def test_plan_json_with_pools(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from pyocc.planning.cli import main

    assert main([write_problem(tmp_path, None), "--pools"]) == 0
    solution = json.loads(capsys.readouterr().out)
    assert solution["format"] == "pyocc-pools-solution"
    assert [[a["name"] for a in p["allocations"]] for p in solution["pools"]] == [["a", "c"], ["b"]]


def test_plan_json_pool_overflow_is_one_line(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyocc.planning.cli import main

    problem = write_problem(tmp_path, 2048)
    assert main([problem, "--pools"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {problem}: buffer 'b' (4,096 bytes) fits in no pool: its last candidate, pool 'dram' "
                   "(2,048 bytes), lacks 2,048 bytes; make 'dram' larger or add a pool after it\n")


def test_bounded_choice_is_reproducible() -> None:
    """The choice of the fast pool's buffers uses no clock-bound search."""
    rng = random.Random(11)
    buffers = []
    for i in range(200):
        first = rng.randrange(150)
        size = rng.choice([1, 2, 4, 8, 16, 64]) * KIB
        buffers.append(Buffer(f"t{i}", size, first, first + rng.randrange(10), 64, traffic=size * rng.randrange(1, 5)))
    problem = Problem(tuple(buffers))
    pools = [MemoryPool("sram", 96 * KIB, 64), MemoryPool("dram", None, 64)]
    first = plan_pools(problem, pools, algorithm="greedy-by-size")
    again = plan_pools(problem, pools, algorithm="greedy-by-size", time_budget_ms=1)
    assert first.assignment == again.assignment
    assert first.plans["sram"].offsets == again.plans["sram"].offsets

"""The JSON formats and the plan-json command."""

import json
from pathlib import Path

import pytest

from pyocc.planning import (
    Buffer,
    PlanningError,
    Problem,
    plan_from_json,
    plan_memory,
    plan_to_json,
    problem_from_json,
    problem_to_json,
)
from pyocc.planning.cli import main

PROBLEM = Problem(
    (
        Buffer("conv1", 4096, 0, 1, 64, ("sram", "dram")),
        Buffer("relu1", 4096, 1, 2),
        Buffer("conv2", 2048, 2, 3, 16),
    ),
    ({"name": "sram", "size": 8192}, {"name": "dram", "size": None}),
)


def problem_document(**buffer_overrides: object) -> dict:
    """The JSON of PROBLEM, with fields of buffer 1 replaced (None deletes)."""
    data = problem_to_json(PROBLEM)
    for key, value in buffer_overrides.items():
        if value is None:
            del data["buffers"][1][key]
        else:
            data["buffers"][1][key] = value
    return data


def test_problem_round_trip() -> None:
    data = problem_to_json(PROBLEM)
    assert data["format"] == "pyocc-plan-problem" and data["version"] == 1
    assert data["buffers"][0] == {
        "name": "conv1", "size": 4096, "first": 0, "last": 1, "alignment": 64, "pools": ["sram", "dram"]
    }
    back = problem_from_json(json.loads(json.dumps(data)))
    assert back == PROBLEM
    assert back.pools == PROBLEM.pools


def test_optional_fields_default() -> None:
    data = {"format": "pyocc-plan-problem", "version": 1, "buffers": [{"name": "x", "size": 1, "first": 0, "last": 0}]}
    assert problem_from_json(data).buffers == (Buffer("x", 1, 0, 0),)


def test_plan_round_trip() -> None:
    plan = plan_memory(PROBLEM)
    data = json.loads(json.dumps(plan_to_json(PROBLEM, plan)))
    assert data["format"] == "pyocc-plan-solution"
    assert data["lower_bound"] == 8192 and data["naive"] == 10240
    assert data["allocations"][2] == {"name": "conv2", "offset": plan.offsets["conv2"], "size": 2048, "first": 2, "last": 3}
    back = plan_from_json(data)
    assert (back.offsets, back.pool_size, back.algorithm, back.optimal) == (
        plan.offsets, plan.pool_size, plan.algorithm, plan.optimal
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"size": -1}, "buffer 1 ('relu1'): 'size' must be a non-negative integer"),
        ({"size": "big"}, "buffer 1 ('relu1'): 'size' must be a non-negative integer"),
        ({"size": None}, "buffer 1 ('relu1'): missing 'size'"),
        ({"first": 1.5}, "buffer 1 ('relu1'): 'first' must be an integer"),
        ({"last": 0}, "buffer 1 ('relu1'): 'last' (0) is before 'first' (1)"),
        ({"alignment": 0}, "buffer 1 ('relu1'): 'alignment' must be an integer >= 1"),
        ({"pools": "sram"}, "buffer 1 ('relu1'): 'pools' must be a list of pool names"),
        ({"sise": 3}, "buffer 1 ('relu1'): unknown key 'sise'"),
        ({"name": ""}, "buffer 1: 'name' must be a non-empty string"),
        ({"name": "conv1"}, "buffer 1: duplicate buffer name 'conv1'"),
    ],
)
def test_schema_errors_are_precise(overrides: dict, message: str) -> None:
    with pytest.raises(PlanningError) as error:
        problem_from_json(problem_document(**overrides))
    assert str(error.value) == message


@pytest.mark.parametrize(
    "document, message",
    [
        ([], "expected a JSON object, got list"),
        ({"format": "x", "version": 1, "buffers": []}, "'format' must be 'pyocc-plan-problem', got 'x'"),
        ({"format": "pyocc-plan-problem", "version": 2, "buffers": []}, "unsupported 'version' 2"),
        ({"format": "pyocc-plan-problem", "version": 1}, "'buffers' must be a list"),
        ({"format": "pyocc-plan-problem", "version": 1, "buffers": [], "pools": [{"name": "p", "size": -1}]},
         "pool 0 ('p'): 'size' must be null or a non-negative integer"),
    ],
)
def test_document_errors(document: object, message: str) -> None:
    with pytest.raises(PlanningError, match=message.replace("(", r"\(").replace(")", r"\)")):
        problem_from_json(document)  # type: ignore[arg-type]


# ---------------------------------------------------------------- CLI


@pytest.fixture
def problem_file(tmp_path: Path) -> Path:
    path = tmp_path / "problem.json"
    path.write_text(json.dumps(problem_to_json(PROBLEM)))
    return path


def test_cli_prints_the_solution(problem_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(problem_file), "--algorithm", "greedy-by-size"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["algorithm"] == "greedy-by-size" and out["pool_size"] == 8192 and out["optimal"]


def test_cli_writes_the_output_file(problem_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "plan.json"
    assert main(["plan-json", str(problem_file), "-o", str(output), "--time-budget-ms", "5"]) == 0
    assert capsys.readouterr().out == ""
    assert plan_from_json(json.loads(output.read_text())).pool_size == 8192
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "problem.json"]  # no temporary left


def bad_input_cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    """(argv, the start of the expected error line) for each kind of bad input."""
    invalid = tmp_path / "invalid.json"
    invalid.write_text("{not json")
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(problem_document(size=-1)))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(problem_to_json(PROBLEM)))
    return [
        ([str(tmp_path / "missing.json")], "error: cannot read"),
        ([str(invalid)], "error: " + str(invalid) + ": invalid JSON"),
        ([str(schema)], "error: " + str(schema) + ": buffer 1 ('relu1'): 'size' must be"),
        ([str(good), "--algorithm", "magic"], "error: unknown algorithm 'magic'"),
        ([str(good), "--time-budget-ms", "soon"], "error: argument --time-budget-ms"),
        ([], "error: the following arguments are required"),
    ]


def test_cli_bad_input_is_one_line_and_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "out.json"
    for argv, expected in bad_input_cases(tmp_path):
        assert main([*argv, "-o", str(output)]) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.startswith(expected), captured.err
        assert captured.err.count("\n") == 1, captured.err
        assert not output.exists()

"""`--memory-pools` on the `pyocc` command: the per-pool report, and one
line with a non-zero exit for a plan that overflows or a bad spec. One case
runs the real command; the rest call its `main` in-process (same code,
without a second of interpreter start-up each)."""

from __future__ import annotations

import json

import pytest

from pyocc.tools.cli import main
from tests.conftest import light_model_path
from tests.tools.test_cli import pyocc_process

# the first conv of SqueezeNet, fused with its Relu, so its buffer has the Relu's name r1
OVERFLOW = ("pyocc: error: dnn-memory-pool: buffer 'r1' (3,154,176 bytes) fits in no pool: its last candidate, "
            "pool 'dram' (1,048,576 bytes), lacks 2,105,600 bytes; make 'dram' larger or add a pool after it")


def test_overflow_is_one_line_and_a_non_zero_exit() -> None:
    result = pyocc_process("plan", str(light_model_path("squeezenet")), "--memory-pools", "sram:size=1MiB,dram:size=1MiB")
    assert result.returncode == 1
    assert result.stderr == OVERFLOW + "\n" and result.stdout == ""


def test_plan_reports_each_pool_and_the_fast_pool_share(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(light_model_path("squeezenet")), "--memory-pools", "sram:size=1MiB,dram",
                 "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    sram, dram = report["pools"]
    assert (sram["name"], sram["limit"], dram["name"], dram["limit"]) == ("sram", 2**20, "dram", None)
    assert 0 < sram["bytes"] <= 2**20 < dram["bytes"]
    assert report["activation_bytes"] == sram["bytes"] + dram["bytes"]
    assert sram["buffers"] + dram["buffers"] == len(report["buffers"])
    assert {b["pool"] for b in report["buffers"]} == {"sram", "dram"}
    assert report["fast_pool_traffic_bytes"] == sram["traffic_bytes"]
    assert report["activation_traffic_bytes"] == sram["traffic_bytes"] + dram["traffic_bytes"]
    assert 0 < report["fast_pool_traffic_fraction"] < 1
    # weights are planned in their own read-only pool: at least their bytes
    (weight_pool, weight_bytes), = report["weight_bytes_by_pool"].items()
    assert weight_pool == "constants" and weight_bytes >= report["weight_bytes"]


@pytest.mark.parametrize("args, message", [
    (["compile", "MODEL", "-o", "model.so", "--memory-pools", "sram:size=1MiB,dram:size=1MiB"], OVERFLOW),
    (["run", "MODEL", "--memory-pools", "sram:size=1MB,dram"],
     "pyocc: error: dnn-memory-pool: memory pools: pool 'sram': size '1MB' must be a number of bytes"),
    (["plan", "MODEL", "--pool-candidates", "concat=dram"],
     "pyocc: error: pool candidates need memory pools; add --memory-pools"),
    (["plan", "MODEL", "--memory", "lazy", "--memory-pools", "dram"],
     "pyocc: error: memory pools need memory mode 'pool', got 'lazy'"),
    (["plan", "MODEL", "--memory-pools", "sram:size=1MiB,dram,flash:ro:size=1MiB,rom:ro:size=3MiB"],
     "pyocc: error: dnn-memory-pool: weights: weight %conv10_w (2,048,000 bytes) fits in no read-only pool: "
     "the last, pool 'rom' (3,145,728 bytes), lacks 774,144 bytes; make 'rom' larger or add a read-only pool after it"),
])
def test_overflow_and_bad_specs_are_one_line(args: list[str], message: str, tmp_path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(light_model_path("squeezenet")) if a == "MODEL" else a for a in args]
    args = [str(tmp_path / a) if a.endswith(".so") else a for a in args]
    assert main(args) != 0
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), captured.err
    assert captured.out == "" and not list(tmp_path.iterdir())

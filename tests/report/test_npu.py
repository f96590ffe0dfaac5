"""`pyocc plan --scratchpad`: the report's `npu` object and its text summary
from the scheduler and simulator, the program the scheduler sees (read from
the op definitions), and one line for each bad value."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest
from xdsl.context import Context
from xdsl.dialects import func

import pyocc
from pyocc.analysis.npu_program import npu_program
from pyocc.api import npu_schedule
from pyocc.examples.tiny_cnn import build as build_tiny_cnn
from pyocc.frontend.onnx_import import import_model
from pyocc.pipelines import Options, run_passes, tensor_passes
from pyocc.planning.scratchpad import run_scratchpad
from pyocc.tools.cli import main
from tests.conftest import light_model_path

KEYS = {"cycles", "compute_cycles", "stall_cycles", "stall_port_bound_cycles", "dram_bytes", "dram_lower_bound_bytes",
        "bound_cycles", "floor_cycles", "sram_bytes", "macs", "baseline_no_prefetch"}


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.onnx"
    onnx.save(build_tiny_cnn(), str(path))
    return path


def _program(path: Path, options: Options = Options()):
    module = import_model(str(path))
    run_passes(Context(), module, tensor_passes(options))
    return npu_program(next(op for op in module.walk() if isinstance(op, func.FuncOp)))


def test_the_program_is_read_from_the_op_definitions(tiny: Path) -> None:
    program = _program(tiny)
    kinds = {t.name: t.kind for t in program.tensors}
    assert kinds["x"] == "input" and kinds["y"] == "output" and kinds["w2"] == "weight"
    ops = {op.name: op for op in program.ops}
    # conv 3x3 stride 1: two halo rows, splits by rows and by its 8 output channels
    assert (ops["relu1"].out_rows, ops["relu1"].halo_rows, ops["relu1"].channels) == (16, 2, 8)
    assert ops["relu1"].macs == 8 * 16 * 16 * 3 * 3 * 3
    # max pool 2x2 stride 2: no halo; the channel concat splits by rows, the gemm does not
    assert (ops["pool"].out_rows, ops["pool"].halo_rows) == (8, 0)
    assert ops["cat"].out_rows == 8 and ops["y"].out_rows == 1
    # the flatten view shares gap's tensor
    assert ops["y"].inputs == ("gap",)


def test_plan_json_has_the_npu_report(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(tiny), "--scratchpad", "16KiB", "--format", "json"]) == 0
    npu = json.loads(capsys.readouterr().out)["npu"]
    assert KEYS <= set(npu)
    assert npu["sram_size"] == 16384 and npu["sram_bytes"] <= 16384
    assert npu["dram_bytes"] >= npu["dram_lower_bound_bytes"] and npu["cycles"] >= npu["bound_cycles"]
    assert npu["cycles"] == npu["compute_cycles"] + npu["stall_cycles"]
    # the floor: above the bound (the computes alone are, on ops this small), and below what runs
    assert npu["bound_cycles"] < npu["floor_cycles"] <= npu["cycles"]
    result = npu_schedule(str(tiny), scratchpad="16KiB")
    assert npu["stall_port_bound_cycles"] == result.simulation.stall_port_bound_cycles < npu["stall_cycles"]
    assert npu["cycles"] < npu["baseline_no_prefetch"]["cycles"]


def test_the_plan_reports_the_schedule_that_runs(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # at 16 KiB the scheduler's byte-share cascades (which the IR does not run) give another,
    # slower schedule: `pyocc plan` reports the one `pyocc run --scratchpad` runs (until stop 67 it
    # simulated the cascaded one: 3,900 cycles, 23,952 DRAM bytes, against 2,540 and 8,336)
    args = ["--no-fuse", "--no-coalesce", "--scratchpad", "16KiB"]
    assert main(["plan", str(tiny), *args, "--format", "json"]) == 0
    planned = json.loads(capsys.readouterr().out)["npu"]
    ran = pyocc.compile(str(tiny), fuse=False, coalesce=False, scratchpad="16KiB").memory_report().npu
    assert ran is not None and planned["cascades"] is False
    assert {k: planned[k] for k in KEYS} == {k: ran[k] for k in KEYS}
    cascaded = run_scratchpad(_program(tiny, Options(fuse=False, coalesce=False)), 16 << 10, cascades=True)
    assert (cascaded.cycles, cascaded.dram_bytes) != (planned["cycles"], planned["dram_bytes"])


@pytest.mark.parametrize(("model", "flags", "size", "stalling"), [
    (None, ["--no-fuse", "--no-coalesce"], "16KiB", 3), (None, [], "16KiB", 2), ("shufflenet", [], "1MiB", None),
], ids=["tiny-unfused", "tiny-fused", "shufflenet"])
def test_the_report_says_where_the_cycles_and_bytes_went_op_by_op(tiny: Path, model: str | None, flags: list[str],
                                                                    size: str, stalling: int | None,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # `npu.ops`: every op of the program once, adding up to the totals; the text names the ops
    # that waited longest, the longest first, at most three (the tiny CNN unfused at 16 KiB:
    # three of them stall, `right` none of its 136 cycles port-bound; fused, two; ShuffleNet more)
    path = tiny if model is None else light_model_path(model)
    args = ["plan", str(path), *flags, "--scratchpad", size]
    assert main([*args, "--format", "json"]) == 0
    npu = json.loads(capsys.readouterr().out)["npu"]
    ops = npu["ops"]
    options = Options(fuse=not flags, coalesce=not flags)
    assert [op["op"] for op in ops] == [op.name for op in _program(path, options).ops]
    assert sum(op["compute_cycles"] for op in ops) == npu["compute_cycles"]
    assert sum(op["stall_cycles"] for op in ops) == npu["stall_cycles"] > 0
    assert sum(op["port_bound_stall_cycles"] for op in ops) == npu["stall_port_bound_cycles"]
    assert sum(op["weight_load_bytes"] + op["input_load_bytes"] + op["output_store_bytes"]
               for op in ops) == npu["dram_bytes"]
    assert main([*args, "--format", "text"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("  stalled most "))
    named = [re.fullmatch(r" +(?:stalled most)? +([\d,]+) +op (\S+) \(([\d,]+) port-bound; (\d+) computes?, "
                          r"([\d,]+) B loaded for it, ([\d,]+) B stored\)", line) for line in lines[at:]]
    stalled = sorted((op for op in ops if op["stall_cycles"]), key=lambda op: -op["stall_cycles"])
    assert len(stalled) == stalling if stalling else len(stalled) > 3  # ShuffleNet: more than the summary names
    assert [m.groups() if m else line for m, line in zip(named, lines[at:])] == [
        (f"{op['stall_cycles']:,d}", op["op"], f"{op['port_bound_stall_cycles']:,d}", str(op["tiles"]),
         f"{op['weight_load_bytes'] + op['input_load_bytes']:,d}", f"{op['output_store_bytes']:,d}")
        for op in stalled[:3]]
    assert flags == [] or any(op["port_bound_stall_cycles"] < op["stall_cycles"] for op in stalled)


def test_plan_text_has_the_summary(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(tiny), "--scratchpad", "1MiB", "--npu-cost", "dram_bytes_per_cycle=4",
                 "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "npu scratchpad   1,048,576 B SRAM (macs/cycle 256, SRAM B/cycle 64, DRAM B/cycle 4)" in out
    assert "no prefetch" in out and "DRAM traffic" in out
    # the stalls, split: port-bound plus late
    stalls, port_bound, late = (int(re.search(rf"^ +{label} +([\d,]+)", out, re.M)[1].replace(",", ""))
                                for label in ("stalls", "port-bound", "late"))
    assert port_bound + late == stalls


def test_a_light_model_at_one_mib(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(light_model_path("bvlc_alexnet")), "--scratchpad", "1MiB", "--format", "json"]) == 0
    npu = json.loads(capsys.readouterr().out)["npu"]
    assert npu["sram_bytes"] <= 2**20
    assert npu["dram_bytes"] <= 1.25 * npu["dram_lower_bound_bytes"]
    assert npu["cycles"] <= 1.3 * npu["bound_cycles"]


@pytest.mark.parametrize("args, message", [
    (["--scratchpad", "lots"], "pyocc: error: --scratchpad: size 'lots' must be a number of bytes"),
    (["--scratchpad", "0"], "pyocc: error: --scratchpad: the SRAM size must be positive, got 0"),
    (["--scratchpad", "1KiB"], "pyocc: error: scratchpad: op 'sum' does not fit in 1024 bytes of SRAM even tiled; "
                               "give a larger --scratchpad"),
    (["--scratchpad", "1MiB", "--npu-cost", "macs=3"], "pyocc: error: --npu-cost: unknown key 'macs'"),
    (["--scratchpad", "1MiB", "--npu-cost", "dram_bytes_per_cycle=-1"],
     "pyocc: error: --npu-cost: dram_bytes_per_cycle needs a positive whole number"),
    (["--npu-cost", "macs_per_cycle=1"], "pyocc: error: --npu-cost needs a scratchpad; add --scratchpad SIZE"),
])
def test_bad_values_are_one_line(tiny: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(tiny), *args]) != 0
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), captured.err


def test_the_picture_draws_the_schedule_the_report_describes(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # both fuse the model for the target given: ShuffleNet's fusions differ on cuda, and so do its
    # schedules at 1 MiB (until stop 68 the picture fused for the host whatever the target)
    model = str(light_model_path("shufflenet"))
    cycles = []
    for target in ("host", "cuda"):
        args = ["plan", model, "--scratchpad", "1MiB", "--target", target]
        out = tmp_path / f"{target}.svg"
        assert main([*args, "--format", "svg", "-o", str(out)]) == 0
        assert main([*args, "--format", "json"]) == 0
        cycles.append(json.loads(capsys.readouterr().out)["npu"]["cycles"])
        assert f"{cycles[-1]:,d} cycles" in out.read_text()
    assert cycles[0] != cycles[1]


def test_the_picture_draws_both_memories_and_every_transfer(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "npu.svg"
    assert main(["plan", str(tiny), "--scratchpad", "16KiB", "--format", "svg", "-o", str(out)]) == 0
    svg = out.read_text()
    assert svg.startswith("<svg") and "SRAM" in svg and "DRAM" in svg
    # one rectangle per transfer and per compute, with its title
    result = npu_schedule(str(tiny), scratchpad="16KiB")
    assert svg.count("<title>load ") == sum(1 for t in result.simulation.transfers if t[0] == "load")
    assert svg.count("<title>store ") == sum(1 for t in result.simulation.transfers if t[0] == "store")
    assert svg.count("cycles") >= len(result.simulation.computes)
    assert f"{result.cycles:,d} cycles" in svg
    # the bound and the floor, each a dashed line across the lanes
    for name, cycle in (("bound", result.bound_cycles), ("floor", result.floor_cycles)):
        assert f"<title>{name}: {cycle:,d} cycles</title>" in svg

"""The scratchpad scheduler and the NPU cycle simulator (pyocc/planning):
the simulator's timing by hand, each rule it enforces, and schedules of a
small program at several SRAM sizes checked by it."""

from __future__ import annotations

import ast
import dataclasses
import gc
import math
import random
from pathlib import Path

import pytest

from pyocc.planning import PlanningError, scratchpad
from pyocc.planning.npu_simulator import (
    Alloc, Clock, Compute, Free, Load, NpuCost, Piece, ScheduleError, SramBuffer, Store, Wait, band_part, channel_band, covers,
    simulate, without_gc,
)
from pyocc.planning.scratchpad import (
    ALIGN, KEEP, STREAM, WHOLE, NpuOp, NpuProgram, NpuTensor,
    band_rows, channel_range, copy_rows,
    input_block, op_costs, run_scratchpad, schedule_cuts, schedule_no_prefetch, schedule_scratchpad, split_range, tile_rows,
)
from pyocc.planning.scratchpad.program import _Make, _Need, _Unit
from pyocc.planning.scratchpad.scheduler import _Allocator, _cheapest_hole, _Entry, _Scheduler
from pyocc.planning.scratchpad.search import _key, _plan_spills
from pyocc.planning.scratchpad.tuning import RESERVES
from pyocc.planning.scratchpad.units import _units

W = Piece("w", "all", 800)
X = Piece("x", "all", 64)
Y = Piece("y", "all", 64)
BW, BX, BY = SramBuffer("bw", 0, 800), SramBuffer("bx", 832, 64), SramBuffer("by", 896, 64)
SIZES = {"w": 800, "x": 64, "y": 64, "a": 64}


def _run(instructions, outputs=("y",), **kw):
    return simulate(instructions, sram_size=1024, tensor_bytes=SIZES, dram_resident={"w", "x"},
                    outputs=set(outputs), **kw)


def _gemm(macs=256 * 50):
    return Compute("gemm", macs, 928, ((BW, W), (BX, X)), ((BY, Y),))


def _program():
    return [Alloc(BW), Alloc(BX), Alloc(BY), Load(1, BX, X), Load(2, BW, W), Wait(1), Wait(2),
            _gemm(), Store(3, BY, Y), Wait(3), Free(BW), Free(BX), Free(BY)]


def test_the_tuned_numbers_are_read_through_the_tuning_module():
    # the package's modules read each tuned number as `tuning.NAME`: a module that
    # imported one by name would keep its own copy, which setting the number on
    # `scratchpad.tuning` (a monkeypatch, an experiment) would not reach
    package = Path(scratchpad.__file__).parent
    tuned = {name for name in vars(scratchpad.tuning) if name.isupper()}
    assert {"CHAIN_SHARE", "RESERVES", "DEADLINES"} <= tuned
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("tuning"):
                pytest.fail(f"{path.name} imports {[a.name for a in node.names]} from tuning by name")
            if isinstance(node, ast.Name) and node.id in tuned and path.name != "tuning.py":
                pytest.fail(f"{path.name}:{node.lineno} reads {node.id} without `tuning.`")


def test_the_package_docstring_names_every_module_in_import_order():
    # a newcomer reads pyocc/planning/scratchpad/__init__.py first: its list of modules
    # says where each part of the scheduler lives, each module importing only those above it
    package = Path(scratchpad.__file__).parent
    modules = sorted(path.stem for path in package.glob("*.py") if path.stem != "__init__")
    listed = [line[3:].split("`")[0] for line in scratchpad.__doc__.splitlines() if line.startswith("- `")]
    assert sorted(listed) == modules
    for module in modules:
        siblings = [node for node in ast.walk(ast.parse((package / f"{module}.py").read_text()))
                    if isinstance(node, ast.ImportFrom) and node.level == 1]  # `from .x import` and `from . import x`
        imported = {node.module or a.name for node in siblings for a in node.names}
        assert all(listed.index(m) < listed.index(module) for m in imported), (module, imported)


def test_timing_by_hand():
    # x: 8 cycles, w: 100 cycles on the port (8 B/cycle); gemm: max(50, ceil(928/64)=15)
    # = 50 cycles after both loads (108); y: 8 cycles out -> 166
    result = _run(_program())
    assert (result.cycles, result.compute_cycles, result.stall_cycles) == (166, 50, 116)
    assert (result.dram_read_bytes, result.dram_write_bytes, result.sram_peak_bytes) == (864, 64, 960)


def test_the_clock_times_instructions_one_by_one_as_the_simulator_does():
    # the same hand timing, kept by the clock the scheduler emits through
    # (Alloc and Free take no time): after the loads (x 0..8, w 8..108) the
    # gemm waits 108 cycles, computes 50, and y goes out 158..166
    clock = Clock(NpuCost())
    times = []
    for instruction in _program():
        clock.issue(instruction)
        times.append(clock.now)
    assert times == [0, 0, 0, 0, 0, 8, 108, 158, 158, 166, 166, 166, 166]
    assert (clock.moved, clock.ends) == (928, {1: 8, 2: 108, 3: 166})
    assert clock.done(3) and clock.port == 166


def test_dma_overlaps_compute():
    # a second load started before the gemm runs on the port (108..116) while
    # the gemm computes (108..158): it costs DRAM bytes but no cycles
    b2 = SramBuffer("b2", 960, 64)
    prog = _program()
    prog[7:7] = [Alloc(b2), Load(4, b2, X)]
    prog.insert(10, Wait(4))
    prog.append(Free(b2))
    result = _run(prog)
    assert (result.cycles, result.stall_cycles, result.dram_read_bytes) == (166, 116, 928)
    assert ("load", "x:all", 64, 108, 116) in result.transfers


def test_a_stall_is_port_bound_where_the_port_had_no_idle_cycle_left_before_it():
    # the gemm waits 108 cycles for x and w, the port busy from cycle 0: port-bound; the store of y
    # (158..166) was issued after the port had idled 50 cycles (108..158, the gemm computing): late
    result = _run(_program())
    assert result.port_bound_stalls == [108, 0]
    assert (result.stall_cycles, result.stall_port_bound_cycles) == (116, 108)


def test_a_stall_behind_a_transfer_that_outlasts_the_compute_is_port_bound():
    # a second x (8 cycles on the port: 108..116) loads while a 1-cycle gemm computes (108..109): waiting
    # for it stalls 7 cycles with no idle port cycle before it, and the store of y then queues right
    # behind it (116..124): port-bound, both after the last compute, and counted to the gemm
    b2 = SramBuffer("b2", 960, 64)
    prog = [Alloc(BW), Alloc(BX), Alloc(BY), Load(1, BX, X), Load(2, BW, W), Wait(1), Wait(2),
            Alloc(b2), Load(4, b2, X), Compute("gemm", 256, 64, ((BW, W), (BX, X)), ((BY, Y),)), Wait(4),
            Store(3, BY, Y), Wait(3), Free(BW), Free(BX), Free(BY), Free(b2)]
    result = _run(prog)
    assert result.port_bound_stalls == [108, 15]
    assert (result.cycles, result.stall_cycles, result.stall_port_bound_cycles) == (124, 123, 123)
    T = NpuTensor
    program = NpuProgram((T("w", 800, "weight"), T("x", 64, "input"), T("y", 64, "output")),
                         (NpuOp("gemm", 256, ("x",), ("w",), ("y",)),))
    (gemm,) = op_costs(program, prog, result, NpuCost())
    assert (gemm.stall_cycles, gemm.port_bound_stall_cycles) == (123, 123)


def test_the_waits_before_one_compute_share_the_idle_port_cycles_since_the_stall_before():
    # c1 computes 8..58 while the port idles (50 cycles); the loads for c2 start only after it: x2
    # (58..66) and w (66..166). c2 waits 8 + 100 cycles, 50 of them late: loaded before c1 instead
    # (a helper's review: counted wait by wait, the first wait took 8 of the 50 idle cycles and the
    # second counted all its 100 port-bound), the same bytes leave c2 the other 58 to wait
    b2 = SramBuffer("b2", 960, 64)
    a = Piece("a", "all", 64)
    c1 = Compute("c1", 256 * 50, 64, ((BX, X),), ((BY, a),))
    c2 = Compute("c2", 256 * 10, 928, ((BW, W), (b2, X)), ((BY, Y),))
    head = [Alloc(BW), Alloc(BX), Alloc(BY), Alloc(b2), Load(1, BX, X), Wait(1)]
    tail = [c2, Store(3, BY, Y), Wait(3), Free(BW), Free(BX), Free(BY), Free(b2)]
    late = _run(head + [c1, Load(4, b2, X), Load(2, BW, W), Wait(4), Wait(2)] + tail)
    assert late.port_bound_stalls == [8, 58, 0]
    early = _run(head[:5] + [Load(4, b2, X), Load(2, BW, W), Wait(1), c1, Wait(4), Wait(2)] + tail)
    assert early.port_bound_stalls == [8, 58, 0] and early.stall_cycles == 8 + 58 + 8


@pytest.mark.parametrize("mutate, message", [
    (lambda p: p.remove(Wait(2)) or p.insert(8, Wait(2)), "reads w:all, which is not resident"),
    (lambda p: p.__setitem__(1, Alloc(SramBuffer("bx", 700, 64))), "overlaps live buffer 'bw'"),
    (lambda p: p.__setitem__(0, Alloc(SramBuffer("bw", 512, 800))), "outside the 1024-byte SRAM"),
    (lambda p: p.insert(9, Free(BY)), "freed with transfer 3 still pending"),
    (lambda p: p.__setitem__(4, Load(2, BW, Piece("a", "all", 64))), "a:all is not in DRAM"),
    (lambda p: p.remove(Store(3, BY, Y)) or p.remove(Wait(3)), "graph output 'y' is not in DRAM"),
    (lambda p: p.remove(Wait(3)) or p.remove(Free(BY)), "never waited on"),
    (lambda p: p.insert(9, _gemm()), "writes 'by' while a transfer on it is pending"),
])
def test_simulator_rejects(mutate, message):
    prog = _program()
    mutate(prog)
    with pytest.raises(ScheduleError, match=message):
        _run(prog)


def test_spills_must_not_overlap_in_dram():
    a1, a2 = Piece("a", "all", 64), Piece("b", "all", 64)
    b1, b2 = SramBuffer("b1", 0, 64), SramBuffer("b2", 64, 64)
    prog = [Alloc(b1), Alloc(b2), Compute("p", 0, 128, (), ((b1, a1), (b2, a2))),
            Store(1, b1, a1), Store(2, b2, a2), Wait(1), Wait(2), Load(3, b1, a1), Load(4, b2, a2), Wait(3), Wait(4)]
    sizes = {"a": 64, "b": 64}
    run = lambda offsets: simulate(prog, sram_size=256, tensor_bytes=sizes, dram_resident=set(), outputs=set(), dram_offsets=offsets)
    run({"a": 0, "b": 64})
    with pytest.raises(ScheduleError, match="overlap in DRAM"):
        run({"a": 0, "b": 32})


def test_cost_parse():
    assert NpuCost.parse("") == NpuCost(256, 64, 8)
    assert NpuCost.parse("dram_bytes_per_cycle=16") == NpuCost(256, 64, 16)
    with pytest.raises(PlanningError, match="unknown key 'macs'"):
        NpuCost.parse("macs=3")
    with pytest.raises(PlanningError, match="macs_per_cycle needs a positive whole number"):
        NpuCost.parse("macs_per_cycle=0")


def _small_net() -> NpuProgram:
    T = NpuTensor
    return NpuProgram(
        (T("x", 4096, "input", 8), T("w1", 2048, "weight"), T("a", 8192, "activation", 8),
         T("w2", 65536, "weight"), T("b", 8192, "activation", 8), T("w3", 262144, "weight"), T("y", 256, "output")),
        (NpuOp("conv1", 100_000, ("x",), ("w1",), ("a",), 8, 2, 16),
         NpuOp("conv2", 500_000, ("a",), ("w2",), ("b",), 8, 2, 16),
         NpuOp("fc", 65_536, ("b",), ("w3",), ("y",), 1, 0, 64)),
    )


@pytest.mark.parametrize("sram", [32 * 1024, 64 * 1024, 1024 * 1024])
@pytest.mark.parametrize("cascades", [False, True])
def test_schedules_pass_the_simulator_and_respect_the_bounds(sram, cascades):
    program = _small_net()
    result = run_scratchpad(program, sram, cascades=cascades)  # simulates: raises on any broken rule
    assert result.sram_bytes <= sram
    assert result.dram_bytes >= result.dram_lower_bound_bytes == 4096 + 2048 + 65536 + 262144 + 256
    assert result.cycles >= result.bound_cycles == math.ceil(result.dram_lower_bound_bytes / 8)
    assert result.cycles <= result.baseline.cycles
    assert result.dram_bytes <= result.baseline.dram_bytes


def _floor_net():
    T = NpuTensor
    return NpuProgram(
        (T("x", 10, "input"), T("t1", 100, "activation"), T("w", 20, "weight"), T("t2", 50, "activation"),
         T("y", 10, "output")),
        (NpuOp("o1", 0, ("x",), (), ("t1",)),
         NpuOp("o2", 2560, ("t1",), ("w",), ("t2",)),
         NpuOp("o3", 0, ("t1", "t2"), (), ("y",))),
    )


def test_floors_by_hand():
    program = _floor_net()
    # o1 touches 110 B (2 cycles), o2 2560 MACs (10 cycles) over 170 B, o3 160 B (3 cycles)
    assert program.compute_floor_cycles(NpuCost()) == 2 + 10 + 3
    # per tensor: t1 leaves 40 B out of 60 B of SRAM (80 B both ways); but before o3
    # t1 and t2 are both live, 150 B: 90 B out and back in
    assert program.spill_floor_bytes(60) == 2 * 90
    assert program.spill_floor_bytes(120) == 2 * 30
    assert program.spill_floor_bytes(150) == 0


def test_weight_stream_floor_by_hand():
    program = _floor_net()
    # with 150 B of SRAM everything a run of ops reads from outside it fits (t1 and t2
    # before o3 the most): the compute floors alone
    assert program.weight_stream_floor_cycles(NpuCost(), 150) == 2 + 10 + 3
    # with 8 B, o3 alone reads t1 and t2 from before it: 142 B cross the port (18
    # cycles), and o2 alone t1 and w: 112 B (14 cycles) after o1's 2 cycles
    assert program.weight_stream_floor_cycles(NpuCost(), 8) == 2 + 14 + 18
    # cut only before o3 (o1 and o2 interleave): o1 and o2 read x and w from outside,
    # 22 B (3 cycles), under their 12 cycles of compute
    assert program.weight_stream_floor_cycles(NpuCost(), 8, cuts={2}) == 12 + 18


def _tail_net(b_weights: int = 6400) -> NpuProgram:
    """A weightless op a of 20,000 cycles at 1024 MACs a cycle, then b and c
    of 100 cycles, with `b_weights` and 6,400 B of weights."""
    T = NpuTensor
    return NpuProgram(
        (T("x", 512, "input"), T("t", 512, "activation"), T("wb", b_weights, "weight"), T("u", 512, "activation"),
         T("wc", 6400, "weight"), T("y", 512, "output")),
        (NpuOp("a", 1024 * 20_000, ("x",), (), ("t",)),
         NpuOp("b", 1024 * 100, ("t",), ("wb",), ("u",)),
         NpuOp("c", 1024 * 100, ("u",), ("wc",), ("y",))),
    )


SLOW = NpuCost(macs_per_cycle=1024, sram_bytes_per_cycle=1 << 20, dram_bytes_per_cycle=1)
"""1 DRAM byte a cycle; an op's SRAM bytes cost 1 cycle."""


def test_weight_stream_floor_cuts_before_a_weight_heavy_tail():
    # with 8,704 B of SRAM each op's operands fit: per op, the floor would be the
    # compute alone; but when b starts at most 8,704 B of t, wb and wc (13,312 B)
    # are in SRAM, so 4,608 B (4,608 cycles) cross the port after a: above both
    # the compute and the DRAM bound
    program = _tail_net()
    assert program.compute_floor_cycles(SLOW) == 20_000 + 100 + 100
    floor = program.weight_stream_floor_cycles(SLOW, 8704)
    assert floor == 20_000 + 512 + 2 * 6400 - 8704
    assert floor > run_scratchpad(program, 8704, SLOW, cascades=False).bound_cycles == 20_200
    # a, b and c interleaved: x, wb and wc stream under the compute
    assert program.weight_stream_floor_cycles(SLOW, 8704, cuts=()) == 20_000 + 100 + 100
    # the tail fits: compute alone
    assert _tail_net(640).weight_stream_floor_cycles(SLOW, 8704) == 20_000 + 100 + 100
    assert program.weight_stream_floor_cycles(SLOW, 16384) == 20_000 + 100 + 100
    for sram in (8704, 10240, 16384):
        result = run_scratchpad(program, sram, SLOW, cascades=False)
        assert result.cycles >= program.weight_stream_floor_cycles(SLOW, sram)


def test_schedule_cuts():
    # a and b interleave (a chain's bands): no cut between them
    program = _tail_net()

    def compute(op):
        return Compute(op, 1, 1, (), ())

    assert schedule_cuts(program, [compute("a"), compute("b"), compute("c")]) == {1, 2}
    assert schedule_cuts(program, [compute("a"), compute("b"), compute("a"), compute("b"), compute("c")]) == {2}
    assert schedule_cuts(program, [compute("b"), compute("a"), compute("c")]) == {2}


def _conv_pool(returned: bool = False) -> NpuProgram:
    """A convolution whose 36 KiB of weights stream in blocks of its 64
    output channels, then a global pool of its 16 KiB output (also a graph
    output when `returned`)."""
    T = NpuTensor
    return NpuProgram(
        (T("x", 4096, "input", 8), T("w", 36864, "weight"), T("y", 16384, "output" if returned else "activation", 8),
         T("g", 256, "output")),
        (NpuOp("conv", 64 * 64 * 16 * 9, ("x",), ("w",), ("y",), 8, 2, 64),
         NpuOp("pool", 64 * 64, ("y",), (), ("g",), 1, 0, 64, channel_inputs=("y",))),
    )


def test_a_channelwise_reader_runs_on_its_producers_blocks():
    # the pool runs on the convolution's blocks, each right after the tile that makes it,
    # which it reads in SRAM: y never goes to DRAM (it did: stored tile by tile, loaded whole)
    program = _conv_pool()
    units, tiling, _ = _units(program, 32 << 10, NpuCost(), False)
    rows, blocks = tiling["conv"]
    assert rows == 1 and blocks > 1 and tiling["pool"] == (1, blocks)
    assert [u.op for u in units] == ["conv", "pool"] * blocks
    for conv, pool in zip(units[::2], units[1::2], strict=True):
        (tile,) = conv.writes
        assert tile.mode == "keep" and [n.piece for n in pool.reads] == [tile.piece]
    result = run_scratchpad(program, 32 << 10, cascades=False)
    moved = {ins.piece.tensor for ins in result.schedule.instructions if isinstance(ins, Load | Store)}
    assert "y" not in moved and result.dram_bytes == result.dram_lower_bound_bytes
    # y returned: its tiles go out as they are made, and the pool reads it whole
    returned = _conv_pool(returned=True)
    units, tiling, _ = _units(returned, 32 << 10, NpuCost(), False)
    assert "pool" not in tiling and [u.op for u in units][-1] == "pool"


def _conv_sum(residual: bool = False) -> NpuProgram:
    """The convolution of `_conv_pool`, then a 1x1 convolution summing over
    its 64 channels into 16 (and with `residual`, an op adding y to its own
    input, channel by channel, after that)."""
    T = NpuTensor
    tensors = [T("x", 4096, "input", 8), T("w", 36864, "weight"), T("y", 16384, "activation", 8),
               T("v", 4096, "weight"), T("s", 4096, "output", 8)]
    ops = [NpuOp("conv", 64 * 64 * 16 * 9, ("x",), ("w",), ("y",), 8, 2, 64),
           NpuOp("sum", 16 * 64 * 64, ("y",), ("v",), ("s",), 8, 0, 16, in_channels=64, reduced_inputs=("y",),
                 reduced_weights=("v",))]
    if residual:
        tensors += [T("u", 16384, "input", 8), T("r", 16384, "output", 8)]
        ops.append(NpuOp("add", 0, ("u", "y"), (), ("r",), 8, 0, 64, channel_inputs=("u", "y")))
    return NpuProgram(tuple(tensors), tuple(ops))


@pytest.mark.parametrize("residual", [False, True])
def test_a_summing_reader_sums_over_its_producers_blocks(residual: bool):
    # the 1x1 convolution sums over the 3x3 one's blocks of output channels, each block
    # right after the tile that makes it, reading it in SRAM, its partial sums kept;
    # y reaches DRAM only when a later op reads it (stored as made: keep+store)
    program = _conv_sum(residual)
    units, tiling, _ = _units(program, 32 << 10, NpuCost(), False)
    blocks = tiling["conv"][1]
    assert tiling["conv"][0] == 1 and blocks > 1
    chained = [u for u in units if u.op in ("conv", "sum")]
    assert [u.op for u in chained] == ["conv", "sum"] * blocks
    for conv, summed in zip(chained[::2], chained[1::2], strict=True):
        (tile,) = conv.writes
        assert tile.mode == ("keep+store" if residual else "keep") and summed.reads[0].piece == tile.piece
        assert any(n.piece.tensor == "v" and n.piece.part.startswith("in") for n in summed.reads)
    result = run_scratchpad(program, 32 << 10, cascades=False)
    moved = [ins for ins in result.schedule.instructions if isinstance(ins, Load | Store) and ins.piece.tensor == "y"]
    assert not any(isinstance(ins, Load) and ins.piece.part.startswith("tile") for ins in moved)
    assert bool(moved) == residual


def test_a_schedule_the_sram_cannot_hold_with_its_channel_chains_runs_without_them(monkeypatch: pytest.MonkeyPatch):
    # channel chains whose units the scheduler cannot place (here: each reader block made to
    # read a piece larger than the SRAM) must not make the program fail: it is scheduled
    # without them, the same as with none found
    program, sram = _conv_sum(), 32 << 10
    plain = schedule_scratchpad(program, sram, cascades=False).instructions
    found = scratchpad.units._channel_chains

    def too_big(*args):
        units = found(*args)
        huge = _Need(Piece("v", "all", 2 * sram), False)
        return [dataclasses.replace(u, reads=(*u.reads, huge)) if u.op == "sum" else u for u in units]

    monkeypatch.setattr(scratchpad.units, "_channel_chains", lambda program, units, *args: units)
    without = schedule_scratchpad(program, sram, cascades=False).instructions
    assert without != plain
    monkeypatch.setattr(scratchpad.units, "_channel_chains", too_big)
    assert schedule_scratchpad(program, sram, cascades=False).instructions == without


@pytest.mark.parametrize("sram", [32 * 1024, 64 * 1024, 1024 * 1024])
def test_schedules_stay_above_the_weight_stream_floor(sram):
    program = _small_net()
    for cascades in (True, False):
        result = run_scratchpad(program, sram, cascades=cascades)
        cuts = schedule_cuts(program, result.schedule.instructions)
        assert result.cycles >= program.weight_stream_floor_cycles(NpuCost(), sram, cuts)


@pytest.mark.parametrize("sram", [32 * 1024, 64 * 1024, 1024 * 1024])
def test_schedules_without_cascades_stay_above_the_floors(sram):
    program = _small_net()
    result = run_scratchpad(program, sram, cascades=False)
    assert result.dram_bytes >= result.dram_lower_bound_bytes + program.spill_floor_bytes(sram)
    assert result.compute_cycles >= program.compute_floor_cycles(NpuCost())
    assert result.cycles >= program.compute_floor_cycles(NpuCost())


def test_an_input_of_the_current_unit_evicted_is_written_back_first():
    # SRAM fragmented: placing a unit's output may evict one of its own inputs,
    # which is loaded again; a dirty one must reach DRAM first (it was dropped:
    # "read before it is written" on SqueezeNet once whole ops took more SRAM)
    T = NpuTensor
    program = NpuProgram((T("x", 64, "input"), T("t", 64, "activation"), T("y", 64, "output")),
                         (NpuOp("a", 64, ("x",), (), ("t",)), NpuOp("b", 64, ("t",), (), ("y",))))
    units, _, _ = _units(program, 1024, NpuCost(), False)
    scheduler = _Scheduler(program, 1024, units)
    buffer = scheduler.allocate(64, "t:all", set(), evict=False)
    scheduler.resident[("t", "all")] = _Entry(buffer, True)
    scheduler.now = 1  # unit b, which reads t, is the current one
    scheduler.evict(("t", "all"))
    assert [type(i).__name__ for i in scheduler.out[-3:]] == ["Store", "Wait", "Free"]
    assert scheduler.loadable(Piece("t", "all", 64))


def test_an_allocation_evicts_only_what_lies_in_the_hole_it_takes():
    # SRAM of 320 B holding a (64 B, read last), b (128 B, read first) and c
    # (128 B, read second) at 0, 64 and 192: 128 B fit only where c is. The
    # pieces read furthest ahead were evicted until some hole fitted: a, which
    # frees no hole of 128 B, then c; a is loaded again for nothing
    T = NpuTensor
    program = NpuProgram(
        (T("a", 64, "input"), T("b", 128, "input"), T("c", 128, "input"), T("y", 64, "output")),
        (NpuOp("p", 64, ("b",), (), ("y",)), NpuOp("q", 64, ("c",), (), ("y",)), NpuOp("r", 64, ("a",), (), ("y",))))
    units = [_Unit("now", 64, (), (), True)] + [_Unit(op, 64, (_Need(Piece(t, "all", size), False),), (), True)
                                                for op, t, size in (("p", "b", 128), ("q", "c", 128), ("r", "a", 64))]
    scheduler = _Scheduler(program, 320, units)
    for name, size in (("a", 64), ("b", 128), ("c", 128)):
        scheduler.resident[(name, "all")] = _Entry(scheduler.allocate(size, f"{name}:all", set(), evict=False), False)
    scheduler.allocate(128, "y:all", set(), evict=True)
    assert sorted(scheduler.resident) == [("a", "all"), ("b", "all")]


def test_best_fit_takes_the_smallest_hole():
    # live buffers at [128, 192) and [256, 320) of 512 B: holes of 128 B at 0, 64 B at 192 and
    # 192 B at 320. 64 B go first fit at 0 (the 128 B hole is then cut in half), best fit at
    # 192; 128 B at 0 both ways; 256 B nowhere; weight blocks (`top`) the highest either way
    for best_fit, small in ((False, 0), (True, 192)):
        allocator = _Allocator(512, best_fit)
        for name, offset in (("a", 128), ("b", 256)):
            allocator.add(SramBuffer(name, offset, 64))
        assert (allocator.find(64), allocator.find(128), allocator.find(256), allocator.find(64, top=True)) == (
            small, 0, None, 448)


def _simulated(program: NpuProgram, sram: int, instructions: list):
    """`instructions`, a schedule of `program` for `sram` bytes, simulated
    as `run_scratchpad` simulates its own: the inputs and weights in DRAM,
    the spills where `_plan_spills` places them. Raises on a broken rule."""
    schedule = scratchpad.NpuSchedule(instructions, _plan_spills(instructions, program.by_name()), {})
    return scratchpad.search._simulate(schedule, program, sram, NpuCost())


def _fragmenting_output() -> NpuProgram:
    T = NpuTensor
    return NpuProgram(
        (T("x", 256, "input"), T("w0", 640, "weight"), T("a0", 128, "activation"), T("w1", 192, "weight"),
         T("a1", 192, "activation"), T("w2", 768, "weight"), T("y", 384, "output")),
        (NpuOp("op0", 9216, ("x",), ("w0",), ("a0",)), NpuOp("op1", 7168, ("a0",), ("w1",), ("a1",)),
         NpuOp("op2", 6144, ("a1",), ("w2",), ("y",))))


def test_best_fit_leaves_the_hole_a_prefetch_needs(monkeypatch: pytest.MonkeyPatch):
    # 1856 B of SRAM. When op1 starts, a0 and w1 lie at [896, 1216): free are 896 B below
    # them and 640 B above. First fit put op1's output a1 (192 B) at 0, leaving 704 B below,
    # too few for w2 (768 B): w2 loaded only once op1 had ended (176..272), and op2 waited
    # for it. Best fit puts a1 in the 640 B hole, and w2 loads at 0 while op1 computes
    # (148..244): 344 -> 316 cycles. `_fastest_scheduler` keeps the faster
    program = _fragmenting_output()
    monkeypatch.setattr(scratchpad.tuning, "BEST_FIT_RESERVES", ())
    first_fit = run_scratchpad(program, 1856, cascades=False)
    assert first_fit.cycles == 344 and ("load", "w2:all", 768, 176, 272) in first_fit.simulation.transfers
    monkeypatch.undo()
    best_fit = run_scratchpad(program, 1856, cascades=False)
    assert best_fit.cycles == 316 and ("load", "w2:all", 768, 148, 244) in best_fit.simulation.transfers
    assert best_fit.sram_bytes <= 1856


def _stem_bands(r: int, q: int, x: int) -> tuple[NpuProgram, list[_Unit]]:
    """Three bands of a stem, unit by unit: c reads a band of the image x
    (`x` bytes) and the weights w and makes a band of r (`r` bytes), p
    makes a band of q (`q` bytes) from it, s a band of the output z (64 B,
    streamed out) from that."""
    T = NpuTensor
    program = NpuProgram(
        (T("x", 3 * x, "input", 6), T("w", 64, "weight"), T("r", 3 * r, "activation", 3),
         T("q", 3 * q, "activation", 3), T("z", 3 * 64, "output", 3)),
        (NpuOp("c", 64, ("x",), ("w",), ("r",)), NpuOp("p", 64, ("r",), (), ("q",)),
         NpuOp("s", 64, ("q",), (), ("z",))))
    units = []
    for k in range(3):
        band = f"rows{k}:{k + 1}"
        units += [
            _Unit("c", 64 * 256, (_Need(Piece("x", f"rows{2 * k}:{2 * k + 2}", x), True), _Need(Piece("w", "all", 64), False)),
                  (_Make(Piece("r", band, r), KEEP),), k == 2),
            _Unit("p", 64 * 64, (_Need(Piece("r", band, r), True),), (_Make(Piece("q", band, q), KEEP),), k == 2),
            _Unit("s", 64 * 64, (_Need(Piece("q", band, q), True),), (_Make(Piece("z", band, 64), STREAM),), k == 2)]
    return program, units


@pytest.mark.parametrize("clear, r, q, x, loads, cycles", [
    # 1024 B of SRAM. While s makes the first band of z, x's next band (192 B) loads for c.
    # When c starts, w lies at [192, 256) and nothing else stays (q's band was read, z's streamed
    # out): first fit puts x's band at [320, 512), leaving c's output (576 B) no hole, so c
    # evicts it and loads it again (at 0, once q's band is freed)
    (False, 576, 192, 192, [("rows0:2", 0), ("rows2:4", 320), ("rows2:4", 0), ("rows4:6", 320), ("rows4:6", 0)], 408),
    # kept clear: from the top, at [832, 1024), it leaves [256, 832) for the output; each band loads once
    (True, 576, 192, 192, [("rows0:2", 0), ("rows2:4", 832), ("rows4:6", 832)], 360),
    # smaller bands: first fit leaves the output room, and the bands go where it puts them
    (True, 320, 64, 64, [("rows0:2", 0), ("rows2:4", 448), ("rows4:6", 192)], 312),
])
def test_a_prefetch_kept_clear_leaves_the_hole_its_readers_output_needs(clear, r, q, x, loads, cycles):
    program, units = _stem_bands(r, q, x)
    instructions = _Scheduler(program, 1024, units, clear=clear).run()
    result = simulate(instructions, sram_size=1024, tensor_bytes={t.name: t.size for t in program.tensors},
                      dram_resident={"x", "w"}, outputs={"z"})
    assert [(i.piece.part, i.buffer.offset) for i in instructions if isinstance(i, Load) and i.piece.tensor == "x"] == loads
    assert result.cycles == cycles and result.dram_bytes == len(loads) * x + 64 + 3 * 64


def _found_with_between() -> tuple[NpuProgram, int, scratchpad.search._Scheduled]:
    """`_fragmenting_output` at 1856 bytes scheduled with the reserve
    "between", as `_fastest_scheduler` is given a schedule to better."""
    program, sram = _fragmenting_output(), 1856
    units, tiling, _ = _units(program, sram, NpuCost(), False)
    instructions = _Scheduler(program, sram, units, reserve="between").run()
    schedule = scratchpad.NpuSchedule(instructions, _plan_spills(instructions, program.by_name()), tiling)
    simulated = scratchpad.search._simulate(schedule, program, sram, NpuCost())
    key = scratchpad.search._key(simulated.cycles, simulated.dram_bytes)
    return program, sram, scratchpad.search._Scheduled(key, schedule, units, "between")


def test_the_other_ways_are_tried_once_each_beside_the_reserve_a_schedule_came_with(monkeypatch: pytest.MonkeyPatch):
    # assembled units may be scheduled with a reserve after the first (`_scheduled_units` retries
    # them with each until one fits): `_fastest_scheduler` schedules each other reserve first fit,
    # not that one again, and no way twice; then the first `CLEAR_WAYS` once more kept clear
    program, sram, found = _found_with_between()
    made: list[tuple[str, bool, bool, bool]] = []

    class Recorded(_Scheduler):
        def __init__(self, program, sram, units, cost=NpuCost(), reserve=RESERVES[0], best_fit=False, deadlines=False,
                     facts=None, clear=False):
            made.append((reserve, best_fit, deadlines, clear))
            super().__init__(program, sram, units, cost, reserve, best_fit, deadlines, facts, clear)

    monkeypatch.setattr(scratchpad.search, "_Scheduler", Recorded)
    scratchpad.search._fastest_scheduler(program, sram, NpuCost(), found)
    assert sorted(way[0] for way in made if not any(way[1:])) == sorted(set(RESERVES) - {"between"})
    assert len(made) == len(set(made)) and sum(way[3] for way in made) == scratchpad.tuning.CLEAR_WAYS


def test_the_ways_share_their_units_facts_and_the_kept_one_simulates_to_its_rank(monkeypatch: pytest.MonkeyPatch):
    # `_fastest_scheduler` ranks each way by its scheduler's clock, not by simulating it, and makes
    # the units' facts (`_UnitFacts`) once for all its ways: the schedule it keeps, its spills
    # planned, simulates to the rank it gives
    program, sram, found = _found_with_between()
    facts = scratchpad.scheduler._UnitFacts.of
    made: list[int] = []
    monkeypatch.setattr(scratchpad.scheduler._UnitFacts, "of", classmethod(lambda cls, u, c: made.append(len(u)) or facts(u, c)))
    key, kept = scratchpad.search._fastest_scheduler(program, sram, NpuCost(), found)
    assert made == [len(found.units)]
    result = scratchpad.search._simulate(kept, program, sram, NpuCost())
    assert key == scratchpad.search._key(result.cycles, result.dram_bytes)


def test_a_schedule_a_little_slower_moving_far_fewer_dram_bytes_ranks_first(monkeypatch: pytest.MonkeyPatch):
    # `_key` ranks the schedules `schedule_scratchpad` compares: cycles, the DRAM bytes weighed in
    key = scratchpad.search._key

    assert key(1010, 900) < key(1000, 1000)  # 1% slower, 10% fewer bytes
    assert key(1000, 1000) < key(1010, 980)  # 1% slower, 2% fewer bytes
    assert key(1000, 990) < key(1000, 1000) < key(1001, 1000)
    monkeypatch.setattr(scratchpad.tuning, "DRAM_WEIGHT", 0)  # cycles first, then DRAM bytes
    assert key(1000, 1000) < key(1010, 900) and key(1000, 990) < key(1000, 1000)


def test_a_prefetch_for_a_later_unit_does_not_delay_the_next_units_load():
    # unit a streams t out, which unit b loads again at its start: a weight of
    # unit c prefetched before a computes went first on the DRAM port, and t's
    # store and load queued behind it (DenseNet-121's r283 and r284, behind the
    # loads of the transition's blocks); now it waits for b to start
    T = NpuTensor
    program = NpuProgram(
        (T("x", 64, "input"), T("t", 256, "activation"), T("u", 64, "activation"), T("w", 512, "weight"),
         T("y", 64, "output")),
        (NpuOp("a", 256 * 10, ("x",), (), ("t",)), NpuOp("b", 256 * 1000, ("t",), (), ("u",)),
         NpuOp("c", 256 * 10, ("u",), ("w",), ("y",))))
    sizes = program.by_name()

    def piece(name: str) -> Piece:
        return Piece(name, "all", sizes[name].size)

    units = [_Unit("a", 256 * 10, (_Need(piece("x"), False),), (_Make(piece("t"), STREAM),), True),
             _Unit("b", 256 * 1000, (_Need(piece("t"), False),), (_Make(piece("u"), WHOLE),), True),
             _Unit("c", 256 * 10, (_Need(piece("u"), False), _Need(piece("w"), False)),
                   (_Make(piece("y"), WHOLE),), True)]
    instructions = _Scheduler(program, 1024, units).run()
    result = _simulated(program, 1024, instructions)
    cost = NpuCost()
    a_ends = next(end for op, _, end in result.computes if op == "a")
    b_starts = next(start for op, start, _ in result.computes if op == "b")
    assert b_starts == a_ends + 2 * cost.dma_cycles(256)  # t stored and loaded, nothing before them


def _whole_units(program: NpuProgram) -> list[_Unit]:
    """One unit per op of `program`, reading and writing whole tensors."""
    sizes = program.by_name()

    def piece(name: str) -> Piece:
        return Piece(name, "all", sizes[name].size)

    return [_Unit(op.name, op.macs, tuple(_Need(piece(name), False) for name in (*op.inputs, *op.weights)),
                  tuple(_Make(piece(name), WHOLE) for name in op.outputs), True) for op in program.ops]


def _weightless_then_weights() -> tuple[NpuProgram, list[_Unit]]:
    """24 weightless units of 100 cycles, then 3 of 127 cycles that each
    read 8,000 B of weights (1,000 cycles on the port): the weights take the
    port longer than the 16 units before them (`PREFETCH_UNITS`) compute."""
    T = NpuTensor
    tensors = ((T("x", 64, "input"),) + tuple(T(f"t{i}", 64, "activation") for i in range(26))
               + tuple(T(f"w{j}", 8000, "weight") for j in range(3)) + (T("y", 64, "output"),))
    ops = tuple(NpuOp(f"a{i}", 256 * 100, ("x" if i == 0 else f"t{i - 1}",), (), (f"t{i}",)) for i in range(24)) + tuple(
        NpuOp(f"c{j}", 256 * 10, (f"t{23 + j}",), (f"w{j}",), (f"t{24 + j}" if j < 2 else "y",)) for j in range(3))
    program = NpuProgram(tensors, ops)
    return program, _whole_units(program)


def test_load_deadlines_by_hand():
    # c2 starts at 24 * 100 + 2 * 127 = 2654 counting compute alone: its weights start by
    # 1654; c1's by min(1654, 2527) - 1000, c0's by 654 - 1000, and the weightless units
    # before them are due as early as c0's
    program, units = _weightless_then_weights()
    starts, latest = scratchpad.scheduler._load_deadlines(program.by_name(), units, NpuCost())
    assert starts[24:] == [2400, 2527, 2654, 2781]
    assert latest == [-346] * 25 + [654, 1654]


def test_weights_due_beyond_the_prefetch_units_load_from_the_start():
    # at 8 B a cycle, 32 KiB of SRAM (room for every weight): with `deadlines` the
    # port loads x (0..8), then w0, w1, w2 back to back (8..3008); c2 computes
    # 3008..3135 and y goes out by 3143. Without, w0 loads only once c0 is 16 units
    # ahead (808..1808) and c2 waits for w2 until 3808
    program, units = _weightless_then_weights()
    results = []
    for deadlines in (False, True):
        instructions = _Scheduler(program, 32 * 1024, units, NpuCost(), "none", False, deadlines).run()
        results.append(_simulated(program, 32 * 1024, instructions))
    plain, due = results
    assert ("load", "w0:all", 8000, 808, 1808) in plain.transfers and plain.cycles == 3943
    assert [t for t in due.transfers if t[1].startswith("w")] == [
        ("load", "w0:all", 8000, 8, 1008), ("load", "w1:all", 8000, 1008, 2008), ("load", "w2:all", 8000, 2008, 3008)]
    assert (due.cycles, due.compute_cycles) == (3143, 2781)


def test_schedule_scratchpad_keeps_the_schedule_with_deadlines_where_it_is_faster(monkeypatch: pytest.MonkeyPatch):
    program, _ = _weightless_then_weights()
    assert run_scratchpad(program, 32 * 1024, cascades=False).cycles == 3143
    monkeypatch.setattr(scratchpad.tuning, "DEADLINES", False)
    assert run_scratchpad(program, 32 * 1024, cascades=False).cycles == 3943


def _outputs_freed_in_between() -> tuple[NpuProgram, list[_Unit]]:
    """A long unit a, then b, c, e, f, whose outputs (1,000, 64, 1,000 and
    64 B) each die at the next unit, then d, which reads 2,000 B of weights."""
    T = NpuTensor
    program = NpuProgram(
        (T("x", 64, "input"), T("t", 64, "activation"), T("u", 1000, "activation"), T("v", 64, "activation"),
         T("w", 1000, "activation"), T("z", 64, "activation"), T("W", 2000, "weight"), T("y", 64, "output")),
        (NpuOp("a", 256 * 10_000, ("x",), (), ("t",)), NpuOp("b", 256 * 10, ("t",), (), ("u",)),
         NpuOp("c", 256 * 10, ("u",), (), ("v",)), NpuOp("e", 256 * 10, ("v",), (), ("w",)),
         NpuOp("f", 256 * 10, ("w",), (), ("z",)), NpuOp("d", 256 * 10, ("z",), ("W",), ("y",))))
    return program, _whole_units(program)


@pytest.mark.parametrize("sram, none, between, largest", [
    # W loads while a computes where it fits beside the most one unit in between adds
    # (u and v: 1,064 B); "between" counts every output in between (2,128 B) and waits
    # for unit e
    (3200, (8, 258), (10042, 10292), (8, 258)),
    # 3,072 B: W does not fit beside 1,064 B; "none" loads it anyway, c's output evicts it,
    # and it is loaded again
    (3072, (8, 258), (10076, 10326), (10076, 10326)),
])
def test_the_largest_reserve_leaves_room_for_the_most_one_unit_adds(sram, none, between, largest):
    program, units = _outputs_freed_in_between()
    for reserve, first_load in (("none", none), ("between", between), ("largest", largest)):
        instructions = _Scheduler(program, sram, units, NpuCost(), reserve).run()
        result = _simulated(program, sram, instructions)
        loads = [(start, end) for _, piece, _, start, end in result.transfers if piece == "W:all"]
        assert loads[0] == first_load, reserve
        assert len(loads) == (2 if reserve == "none" and sram == 3072 else 1), reserve


def _large_second_weight(w1: int = 64) -> NpuProgram:
    T = NpuTensor
    return NpuProgram(
        (T("x", 64, "input"), T("w1", w1, "weight"), T("a", 64, "activation"), T("w2", 2400, "weight"),
         T("y", 64, "output")),
        (NpuOp("op1", 256 * 400, ("x",), ("w1",), ("a",)), NpuOp("op2", 256 * 10, ("a",), ("w2",), ("y",))),
    )


def test_a_weight_above_the_prefetch_share_loads_while_the_op_before_computes():
    # 4 KiB of SRAM: w2 (2400 B) is above the half of it a prefetch may fill, but it is
    # the first piece ahead, so it loads while op1 computes. By hand (8 B a cycle on the
    # port): x 0..8 and w1 8..16, waited on; w2, started before op1, on the port 16..316;
    # op1 computes 16..416 (102,400 MACs at 256); op2 waits for nothing and computes
    # 416..456 (max(10 for its MACs, 2528 B at 64 a cycle = 40)); y out 456..464.
    # The scheduler that never prefetched a piece above half the SRAM loaded w2 after
    # op1 (416..716), stalling 300 cycles: op2 716..756, y 756..764.
    result = run_scratchpad(_large_second_weight(), 4096, cascades=False)
    assert (result.cycles, result.compute_cycles, result.stall_cycles) == (464, 440, 24)
    assert ("load", "w2:all", 2400, 16, 316) in result.simulation.transfers


def test_no_prefetch_where_the_weight_does_not_fit_beside_the_op_before():
    # 3 KiB, w1 of 1 KiB: op1's operands (1152 B) leave 1920 B, too few for w2, and
    # none of them may go (op1 reads them): w2 loads only after op1. By hand: w1 (the
    # larger first) 0..128 and x 128..136 on the port; op1 136..536; then a (at 1088,
    # the free bytes on either side too few for w2) goes out 536..544 and is waited on;
    # w2 544..844; a back 844..852; op2 852..892; y out 892..900
    result = run_scratchpad(_large_second_weight(w1=1024), 3072, cascades=False)
    assert (result.cycles, result.compute_cycles, result.stall_cycles) == (900, 440, 460)
    assert ("load", "w2:all", 2400, 544, 844) in result.simulation.transfers


@pytest.mark.parametrize("sram", [32 * 1024, 64 * 1024, 1024 * 1024])
@pytest.mark.parametrize("reserve", RESERVES)
@pytest.mark.parametrize("best_fit, deadlines", [(False, False), (True, False), (False, True)])
def test_the_schedulers_clock_is_the_simulators(sram, reserve, best_fit, deadlines):
    # the scheduler times each instruction as it emits it, with the simulator's clock
    # (which stores have ended decides what it frees for a prefetch): at the end both
    # say the same time and the same bytes moved, in every way `_fastest_scheduler`
    # ranks by the clock alone
    program = _small_net()
    units, _, _ = _units(program, sram, NpuCost(), False)
    scheduler = _Scheduler(program, sram, units, NpuCost(), reserve, best_fit, deadlines)
    instructions = scheduler.run()
    result = _simulated(program, sram, instructions)
    assert (scheduler.clock.now, scheduler.clock.moved) == (result.cycles, result.dram_bytes)
    assert scheduler.clock.now > 0 and scheduler.clock.moved > 0


def test_small_sram_tiles_and_streams_weights():
    result = run_scratchpad(_small_net(), 32 * 1024)
    assert set(result.tiled_ops) == {"conv2", "fc"}
    assert result.tiled_ops["fc"][1] > 1  # fc's weight streams block by block
    loads = [t for t in result.simulation.transfers if t[0] == "load" and t[1].startswith("w3:block")]
    assert len(loads) == result.tiled_ops["fc"][1]
    # double buffering: a block's load overlaps the compute of the previous one, so
    # the fc's weight stream (32 Ki cycles of port time) is not paid twice
    assert result.cycles < result.baseline.cycles / 2


def test_big_sram_prefetches_without_tiling():
    # the cascading scheduler tiles nothing that fits; the one that runs (the default)
    # may split an op's weights only to stream them under its compute: either way
    # every byte crosses the port once
    cascaded = run_scratchpad(_small_net(), 1024 * 1024, cascades=True)
    assert cascaded.tiled_ops == {}
    for result in (cascaded, run_scratchpad(_small_net(), 1024 * 1024)):
        assert result.dram_bytes == result.dram_lower_bound_bytes
        assert result.cycles <= 1.15 * result.bound_cycles


def test_too_small_sram_is_one_line():
    with pytest.raises(PlanningError, match="does not fit in 1024 bytes of SRAM even tiled; give a larger --scratchpad"):
        schedule_scratchpad(_small_net(), 1024)


def test_unknown_tensor_is_refused():
    program = NpuProgram((NpuTensor("x", 4, "input"),), (NpuOp("f", 1, ("x",), (), ("nope",)),))
    with pytest.raises(PlanningError, match="op 'f' names unknown tensor 'nope'"):
        schedule_no_prefetch(program, 1024)


def test_weight_blocks_are_whole_channels():
    # fc: 64 output channels, 4096 bytes of weight per channel; whatever the
    # block count, each block is whole channels and the blocks add up to the
    # weight (what dnn-npu-schedule needs to load a block as a slice)
    result = run_scratchpad(_small_net(), 32 * 1024)
    blocks = result.tiled_ops["fc"][1]
    loads = {t[1]: t[2] for t in result.simulation.transfers if t[1].startswith("w3:block")}
    assert all(nbytes % 4096 == 0 for nbytes in loads.values())
    assert sum(loads.values()) == 262144
    fc = _small_net().ops[2]
    ranges = [channel_range(fc, f"block{j}/{blocks}")[:2] for j in range(blocks)]
    assert ranges[0][0] == 0 and ranges[-1][1] == 64
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert [(hi - lo) * 4096 for lo, hi in ranges] == [loads[f"w3:block{j}/{blocks}"] for j in range(blocks)]


def test_a_weight_read_whole_is_not_split():
    # a pre-activation's per-input-channel scale is read whole by every block
    program = NpuProgram(
        (NpuTensor("x", 256, "input"), NpuTensor("s", 64, "weight"), NpuTensor("w", 65536, "weight"),
         NpuTensor("y", 256, "output")),
        (NpuOp("fc", 16384, ("x",), ("s", "w"), ("y",), 1, 0, 64, whole_weights=("s",)),),
    )
    result = run_scratchpad(program, 32 * 1024)
    parts = {t[1] for t in result.simulation.transfers if t[0] == "load"}
    assert "s:all" in parts and not any(p.startswith("s:block") for p in parts)
    assert any(p.startswith("w:block") for p in parts)


def _conv_rows_program(y_kind: str = "activation", w_bytes: int = 576) -> NpuProgram:
    """A 3x3 conv (pad 1) on a 1x4x32x32 input, then a 1x1 stride-2 conv of its
    output: both read by bands of exact rows when tiled (`y_kind` "output":
    y is returned too, so the two cannot run as one chain cascade);
    `w_bytes`: the 3x3 conv's weights (as if it had more input channels)."""
    size = 4 * 32 * 32 * 4
    return NpuProgram(
        (NpuTensor("x", size, "input", 32), NpuTensor("w", w_bytes, "weight"), NpuTensor("y", size, y_kind, 32),
         NpuTensor("v", 64, "weight"), NpuTensor("z", size // 4, "output", 16)),
        (NpuOp("y", 4 * 32 * 32 * 36, ("x",), ("w",), ("y",), 32, 2, 4, (), (("x", 3, 1, 1),)),
         NpuOp("z", 4 * 16 * 16 * 4, ("y",), ("v",), ("z",), 16, 0, 4, (), (("y", 1, 2, 0),))),
    )


def test_row_bands_are_exact_rows_in_their_own_buffers():
    # tiled on its own (y is returned: no chain), an op's input bands are the
    # rows its window reads (halo included, clamped), named by them, and its
    # output tiles add up to the tensor
    program = _conv_rows_program("output")
    schedule = schedule_scratchpad(program, 24 << 10, cascades=False)
    assert schedule.tiling["y"][0] > 1
    op = program.ops[0]
    r = schedule.tiling["y"][0]
    loads = {ins.piece.part: ins.piece.bytes for ins in schedule.instructions
             if isinstance(ins, Load) and ins.piece.tensor == "x"}
    want = {}
    for i in range(r):
        first, end = op.out_band(r, i)
        lo, hi = max(0, first - 1), min(32, end + 1)
        want[f"rows{lo}:{hi}"] = (hi - lo) * 4 * 32 * 4
    assert loads == want
    tiles = {ins.piece.part: ins.piece.bytes for ins in schedule.instructions
             if isinstance(ins, Store) and ins.piece.tensor == "y"}
    assert sum(tiles.values()) == 4 * 32 * 32 * 4
    # a band is never read out of the whole tensor's buffer (strided in SRAM)
    for ins in schedule.instructions:
        if isinstance(ins, Compute):
            for buffer, piece in ins.reads:
                if piece.part.startswith("rows"):
                    assert buffer.size == piece.bytes
    result = run_scratchpad(program, 24 << 10, cascades=False)
    assert result.cascades is False and result.as_json()["cascades"] is False


def test_row_bands_of_one_channel_block_read_the_weights_whole():
    # a 1x1 conv on 8 bands of rows whose 40 KiB of weights are above the
    # streaming threshold of a 128 KiB SRAM (a quarter): with one channel
    # block every band reads the weights whole, loaded once and kept (they
    # were streamed as their one block, double-buffered: twice their bytes
    # of SRAM, which pushed such ops into channel blocks that re-read the input)
    size = 64 * 16 * 16 * 4
    program = NpuProgram(
        (NpuTensor("x", size, "input", 16), NpuTensor("w", 160 * 64 * 4, "weight"),
         NpuTensor("y", 160 * 16 * 16 * 4, "output", 16)),
        (NpuOp("y", 160 * 64 * 16 * 16, ("x",), ("w",), ("y",), 16, 0, 160, (), (("x", 1, 1, 0),)),))
    units, tiling, _ = _units(program, 128 << 10, NpuCost(), False, False)
    assert tiling["y"][0] > 1 and tiling["y"][1] == 1
    assert all(need.piece == Piece("w", "all", 160 * 64 * 4) for unit in units for need in unit.reads
               if need.piece.tensor == "w")
    result = run_scratchpad(program, 128 << 10, cascades=False)
    assert sum(t[2] for t in result.simulation.transfers if t[1].startswith("w:")) == 160 * 64 * 4


def test_a_chain_keeps_its_inner_bands_in_sram():
    # y (16 KiB) is read only by z, by a window: without (simulated) cascades
    # the two run as one chain, band by band; y's band is the rows z's band
    # reads, written and read in one SRAM buffer, and never goes to DRAM
    program = _conv_rows_program()
    result = run_scratchpad(program, 24 << 10, cascades=False)  # simulates: raises on a broken rule
    ins = result.schedule.instructions
    assert not any(isinstance(i, (Load, Store)) and i.piece.tensor == "y" for i in ins)
    assert result.tiled_ops["y"] == result.tiled_ops["z"] and result.tiled_ops["z"][0] > 1
    computes = [i for i in ins if isinstance(i, Compute)]
    assert [c.op for c in computes[:4]] == ["y", "z", "y", "z"]
    for made, used in zip(computes[0::2], computes[1::2], strict=True):
        (buffer, piece), = made.writes
        assert (buffer, piece) in used.reads and piece.part.startswith("rows")
        first, end = program.ops[1].in_rows(program.by_name()["y"], *tile_rows(program.ops[1], used.writes[0][1].part))
        assert piece.part == f"rows{first}:{end}"
    assert result.dram_bytes == result.dram_lower_bound_bytes + sum(
        i.piece.bytes for i in ins if isinstance(i, Load) and i.piece.tensor == "x") - 4 * 32 * 32 * 4
    plain = run_scratchpad(_conv_rows_program("output"), 24 << 10, cascades=False)
    assert result.dram_bytes < plain.dram_bytes


def test_a_chain_whose_weights_pass_a_quarter_of_the_sram_keeps_its_inner_bands_in_sram(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # with 8 KiB of weights (a third of the 24 KiB SRAM) the chain y -> z is
    # found only when its weights may take half of the SRAM (CHAIN_WEIGHTS):
    # then y (16 KiB) never goes to DRAM and the schedule is faster; with a
    # quarter only, y is streamed out and back in
    program, sram = _conv_rows_program(w_bytes=8 << 10), 24 << 10
    result = run_scratchpad(program, sram, cascades=False)  # simulates: raises on a broken rule
    assert not any(isinstance(i, (Load, Store)) and i.piece.tensor == "y" for i in result.schedule.instructions)
    assert result.tiled_ops["y"] == result.tiled_ops["z"]
    monkeypatch.setattr(scratchpad.tuning, "CHAIN_WEIGHTS", (2,))
    quarter = run_scratchpad(program, sram, cascades=False)
    assert any(isinstance(i, Store) and i.piece.tensor == "y" for i in quarter.schedule.instructions)
    assert result.cycles < quarter.cycles and result.dram_bytes < quarter.dram_bytes


def test_a_chain_runs_an_op_once_per_range_its_readers_read():
    # a is read by a 3x3 window (b) and row for row (c), both inside the chain:
    # a runs once for each range, so each reader reads a buffer whole; none of
    # a, b, c goes to DRAM (chains found without `wide`: with it, a runs once
    # on the wider range and c reads a copy of its rows)
    size = 4 * 32 * 32 * 4
    T = NpuTensor
    program = NpuProgram(
        (T("x", size, "input", 32), T("a", size, "activation", 32), T("b", size, "activation", 32),
         T("c", size, "activation", 32), T("y", 2 * size, "output", 32)),
        (NpuOp("a", 4096, ("x",), (), ("a",), 32, 0, 1, (), (("x", 1, 1, 0),)),
         NpuOp("b", 36864, ("a",), (), ("b",), 32, 2, 1, (), (("a", 3, 1, 1),)),
         NpuOp("c", 4096, ("a",), (), ("c",), 32, 0, 1, (), (("a", 1, 1, 0),)),
         NpuOp("y", 0, ("b", "c"), (), ("y",), 32, 0, 1, (), (("b", 1, 1, 0), ("c", 1, 1, 0)))),
    )
    sram = 24 << 10
    units, _, _ = _units(program, sram, NpuCost(), False)
    ins = _Scheduler(program, sram, units).run()
    _simulated(program, sram, ins)  # raises on a broken rule
    assert not any(isinstance(i, (Load, Store)) and i.piece.tensor in "abc" for i in ins)
    computes = [i for i in ins if isinstance(i, Compute)]
    first_band = computes[:next(k for k, c in enumerate(computes) if c.op == "y") + 1]
    made = [c.writes[0][1].part for c in first_band if c.op == "a"]
    assert len(made) == 2 and len(set(made)) == 2
    for c in first_band:
        for buffer, piece in c.reads:
            if piece.tensor == "a":
                assert buffer.size == piece.bytes  # its own buffer, read whole


def _residual_unit() -> NpuProgram:
    """A ShuffleNet unit: a 1x1 convolution, a 3x3 depthwise one, a 1x1 one
    adding the unit's input x as its residual (16 channels, 32 x 32)."""
    c, h, w = 16, 32, 32
    size = c * h * w * 4
    T = NpuTensor
    return NpuProgram(
        (T("x", size, "input", h), T("wa", c * c * 4, "weight"), T("a", size, "activation", h),
         T("wb", c * 9 * 4, "weight"), T("b", size, "activation", h), T("wy", c * c * 4, "weight"),
         T("y", size, "output", h)),
        (NpuOp("a", c * c * h * w, ("x",), ("wa",), ("a",), h, 0, c, (), (("x", 1, 1, 0),)),
         NpuOp("b", 9 * c * h * w, ("a",), ("wb",), ("b",), h, 2, c, (), (("a", 3, 1, 1),), channel_groups=c),
         NpuOp("y", c * c * h * w, ("b", "x"), ("wy",), ("y",), h, 0, c, (), (("b", 1, 1, 0), ("x", 1, 1, 0)),
               channel_inputs=("x",))),
    )


def test_a_chain_counted_tight_is_kept_where_it_is_faster():
    # the unit runs as one chain; x is read by rows twice per band (with a's
    # halo for b, without by y). Its band step counted with every inner band
    # twice (the default) takes 9 bands at 128 KiB; counted once, 4: x is
    # loaded again for fewer halos and a computes fewer halo rows. The
    # schedule kept is the fastest of those, the wide chains' (below) and
    # the rolled ones' (rolled, a computes each row once and y's residual
    # rows are copied out of x's band before and this one: the fastest)
    program, sram = _residual_unit(), 128 << 10

    def simulated(tight: bool, wide: bool = False, rolled: bool = False, reserve: str = RESERVES[0]):
        units, tiling, _ = _units(program, sram, NpuCost(), False, tight_chains=tight, wide_chains=wide,
                                  rolled_chains=rolled)
        instructions = _Scheduler(program, sram, units, reserve=reserve).run()
        return tiling["y"][0], _simulated(program, sram, instructions)

    (margin_bands, margin), (tight_bands, tight) = simulated(False), simulated(True)
    assert tight_bands < margin_bands and tight.cycles < margin.cycles
    result = run_scratchpad(program, sram, cascades=False)  # simulates: raises on a broken rule
    # the fastest chain count under the first way of reserving room, then the fastest way on it
    chosen = min(((False, False, False), (True, False, False), (True, True, False), (False, False, True),
                  (False, True, True)),
                 key=lambda counts: (lambda s: (s.cycles, s.dram_bytes))(simulated(*counts)[1]))
    fastest = min(((s.cycles, s.dram_bytes), bands) for bands, s in (
        simulated(*chosen, reserve) for reserve in RESERVES))
    assert ((result.cycles, result.dram_bytes), result.tiled_ops["y"][0]) == fastest


def test_a_chain_copies_a_residual_out_of_the_band_its_first_op_loaded():
    # x is read by rows twice per band: by a with the halo b's 3x3 window
    # needs, by y without it (the residual). Its rows are loaded once per
    # band; y reads a copy of its own rows made in SRAM out of a's band (a
    # compute of no MACs that reads and writes those bytes), so what x loads
    # is its size and the halos, not twice its size (the chain that computes
    # a's halo rows again, counted tight; rolled, see the test below)
    _, ins, x, bands = _scheduled_residual_unit(tight_chains=True)
    assert bands > 1
    loaded = sum(i.piece.bytes for i in ins if isinstance(i, Load) and i.piece.tensor == "x")
    assert loaded <= x.size + 2 * (bands - 1) * x.size // x.rows  # a halo row on each side of each inner edge
    copies = [i for i in ins if isinstance(i, Compute) and copy_rows(i.writes[0][1].part) is not None]
    assert len(copies) == bands
    for c in copies:
        ((_, band),), ((_, rows),) = c.reads, c.writes
        assert c.macs == 0 and c.sram_bytes == 2 * rows.bytes and band.bytes > rows.bytes
    assert _residuals_copied(ins, bands)


def _scheduled_residual_unit(**counts: bool) -> tuple[NpuProgram, list, NpuTensor, int]:
    """`_residual_unit` at 128 KiB, its chain counted as `counts` say
    (`_units`' `tight_chains`, `rolled_chains`), scheduled and simulated
    (which raises on a broken rule): the program, the instructions, x and
    y's row bands."""
    program, sram = _residual_unit(), 128 << 10
    units, tiling, _ = _units(program, sram, NpuCost(), False, **counts)
    ins = _Scheduler(program, sram, units).run()
    _simulated(program, sram, ins)
    return program, ins, program.by_name()["x"], tiling["y"][0]


def _residuals_copied(ins: list, bands: int) -> bool:
    """Whether each of y's `bands` computes reads x's rows as a copy made in SRAM."""
    residuals = [p for i in ins if isinstance(i, Compute) and i.op == "y" and i.macs
                 for _, p in i.reads if p.tensor == "x"]
    return len(residuals) == bands and all(copy_rows(p.part) is not None for p in residuals)


def test_a_rolled_chain_copies_a_residual_out_of_two_bands_of_its_input():
    # rolled, a computes each row once: its band reads only its new rows of
    # x, and y's rows lag a's by b's halo, so y's residual rows lie in two
    # bands of x, the band before and this one. They are copied out of both
    # (as a rolled reader's rows of its producer are): x crosses the port
    # once, each row in one band; before, y loaded its rows again. The
    # chain's estimate counts those rows as a copy, not as a load
    program, ins, x, bands = _scheduled_residual_unit(rolled_chains=True)
    assert bands > 2
    rows = sorted(band_rows(i.piece.part) for i in ins if isinstance(i, Load) and i.piece.tensor == "x")
    assert rows[0][0] == 0 and rows[-1][1] == x.rows and all(a[1] == b[0] for a, b in zip(rows, rows[1:]))
    assert _residuals_copied(ins, bands)
    two = [i for i in ins if isinstance(i, Compute) and i.writes[0][1].tensor == "x" and len(i.reads) == 2]
    assert len(two) >= bands - 2
    for c in two:
        ((_, written),) = c.writes
        (lo, hi), ((a, b), (a2, b2)) = copy_rows(written.part), [band_rows(p.part) for _, p in c.reads]
        assert a <= lo < b == a2 < hi <= b2 and c.macs == 0 and c.sram_bytes == 2 * written.bytes
    rolled = scratchpad.chains._chain_cost(program, 0, 3, bands, rolled=True)
    assert rolled is not None and rolled[2] == x.size  # x's rows read from outside: each once


def test_the_two_bands_a_rolled_reader_copies_an_outside_input_out_of():
    # the band its first reader loaded the step before, (4, 8), and one loaded this step right
    # after it: only where the rows need both and the two meet (overlapping bands would copy rows
    # twice; a gap leaves rows out)
    rolled = scratchpad.chains._outside_rolled
    assert rolled((4, 8), [(8, 12)], 7, 11) == [(4, 8), (8, 12)]
    assert rolled((4, 8), [(9, 12)], 7, 11) is None  # a gap: row 8 in neither
    assert rolled((4, 8), [(6, 12)], 5, 11) is None  # overlapping bands: rows 6 and 7 in both
    assert rolled((4, 8), [(8, 12)], 3, 11) is None  # row 3 in neither
    assert rolled((4, 8), [(8, 12)], 8, 11) is None  # this step's band alone holds them
    assert rolled((4, 8), [(8, 12)], 5, 8) is None  # the band before alone holds them
    assert rolled((4, 8), [(8, 12)], 7, 13) is None  # row 12 in neither
    assert rolled((4, 8), [(2, 4), (8, 12)], 7, 9) == [(4, 8), (8, 12)]


def test_a_rolled_chain_copies_nothing_of_an_input_living_in_a_concat_in_place():
    # an input in `kept` (its pieces are channel bands of a concat's output in place) is loaded
    # by rows for each reader, as before copies out of two bands, never copied
    program = _residual_unit()
    units = scratchpad.chains._chain_units(program, 0, 3, 8, 0, kept=frozenset({"x"}), rolled=True)
    assert not any(m.piece.tensor == "x" for u in units for m in u.writes)
    assert all(_plain_rows(n.piece.part) for u in units for n in u.reads if n.piece.tensor == "x")


def _plain_rows(part: str) -> bool:
    return part.startswith("rows") and "|" not in part


def _three_readers() -> NpuProgram:
    """x read by rows by three ops a step: a (1x1), b (a 3-row window,
    beside a's output) and y (a 3-row window, beside b's; its weights and
    MACs 1x1-sized, which the bytes counted here do not read): a and b each load their band of x, and
    y's rows lie across the band a loaded the step before and this step's."""
    c, h, w = 8, 16, 16
    size = c * h * w * 4
    T = NpuTensor
    return NpuProgram(
        (T("x", size, "input", h), T("wa", c * c * 4, "weight"), T("a", size, "activation", h),
         T("wb", 2 * c * c * 9 * 4, "weight"), T("b", size, "activation", h), T("wy", c * c * 4, "weight"),
         T("y", size, "output", h)),
        (NpuOp("a", c * c * h * w, ("x",), ("wa",), ("a",), h, 0, c, (), (("x", 1, 1, 0),)),
         NpuOp("b", 18 * c * c * h * w, ("a", "x"), ("wb",), ("b",), h, 2, c, (), (("a", 1, 1, 0), ("x", 3, 1, 1))),
         NpuOp("y", c * c * h * w, ("b", "x"), ("wy",), ("y",), h, 2, c, (), (("b", 1, 1, 0), ("x", 3, 1, 1)),
               channel_inputs=("x",))),
    )


@pytest.mark.parametrize("units", [1, 2, 3])
@pytest.mark.parametrize("bands", [2, 4, 8])
def test_a_rolled_chains_estimate_loads_and_copies_what_its_units_do(units: int, bands: int):
    # `_chain_cost` (through `_rolled_step`) counts the bytes of outside inputs the band steps
    # load and the bytes they copy in SRAM as `_chain_units` makes them: a residual's rows out of
    # two bands of its input are a copy, not a load; where two readers load bands of an input in
    # one step (3: `_three_readers`), the band before is the first reader's, in both
    program, stop = {1: (_residual_unit(), 3), 2: (_two_residual_units(), 6), 3: (_three_readers(), 3)}[units]
    found = scratchpad.chains._chain_cost(program, 0, stop, bands, rolled=True)
    assert found is not None
    made_units = scratchpad.chains._chain_units(program, 0, stop, bands, 0, rolled=True)
    made = {m.piece.tensor for u in made_units for m in u.writes if copy_rows(m.piece.part) is None}
    loaded = {(n.piece.tensor, n.piece.part): n.piece.bytes for u in made_units for n in u.reads
              if n.piece.tensor not in made and program.by_name()[n.piece.tensor].kind != "weight"
              and copy_rows(n.piece.part) is None}
    copied = {(m.piece.tensor, m.piece.part): m.piece.bytes for u in made_units for m in u.writes
              if copy_rows(m.piece.part) is not None}
    assert (found[2], found[3]) == (sum(loaded.values()), sum(copied.values()))


@pytest.mark.parametrize("bands", [4, 8, 16])
def test_a_rolled_chain_counts_the_band_before_its_residual_copy_holds(bands: int):
    # y's residual rows copied out of two bands of x hold x's band before in SRAM until the copy:
    # against the same chain whose residual is another tensor r (its rows loaded, nothing held),
    # the footprint is larger by that band (the widest one held), x is loaded once and the
    # residual's rows are copied instead of loaded
    program = _residual_unit()
    y = program.ops[2]
    other = NpuProgram((*program.tensors, dataclasses.replace(program.by_name()["x"], name="r")),
                       (*program.ops[:2], dataclasses.replace(y, inputs=("b", "r"), channel_inputs=("r",),
                                                              row_windows=(("b", 1, 1, 0), ("r", 1, 1, 0)))))
    own, apart = (scratchpad.chains._chain_cost(p, 0, 3, bands, rolled=True) for p in (program, other))
    assert own is not None and apart is not None
    x = program.by_name()["x"]
    every = scratchpad.chains._rolled_ranges(program, 0, 3, bands, NpuCost())
    assert every is not None
    widest_before = max(end - first for (first, end), *_ in every[:-1])  # a's rows: x's band in that step
    assert own[0] - apart[0] == scratchpad.row_bytes(x, widest_before)
    assert (own[2], apart[2]) == (x.size, 2 * x.size) and own[3] - apart[3] == x.size


def test_a_chain_reads_a_band_it_loaded_again_as_it_is():
    # x is read by rows three times a band step: by a (1x1: its band, loaded), by b (3x3: its
    # band and a halo row each side, loaded) and by y (1x1: a's band again). y reads the band a
    # loaded, not a copy of those rows out of b's larger band
    c, h, w = 8, 16, 16
    size = c * h * w * 4
    T = NpuTensor
    program = NpuProgram(
        (T("x", size, "input", h), T("wa", c * c * 4, "weight"), T("a", size, "activation", h),
         T("wb", 2 * c * c * 9 * 4, "weight"), T("b", size, "activation", h), T("wy", c * c * 4, "weight"),
         T("y", size, "output", h)),
        (NpuOp("a", c * c * h * w, ("x",), ("wa",), ("a",), h, 0, c, (), (("x", 1, 1, 0),)),
         NpuOp("b", 18 * c * c * h * w, ("a", "x"), ("wb",), ("b",), h, 2, c, (), (("a", 1, 1, 0), ("x", 3, 1, 1))),
         NpuOp("y", c * c * h * w, ("b", "x"), ("wy",), ("y",), h, 0, c, (), (("b", 1, 1, 0), ("x", 1, 1, 0)))),
    )
    units = scratchpad.chains._chain_units(program, 0, 3, 4, 0)
    reads = {u.op: [n.piece.part for n in u.reads if n.piece.tensor == "x"] for u in units if u.macs}
    assert not any(m.piece.tensor == "x" for u in units for m in u.writes)  # no copy of x
    assert reads["y"] == reads["a"] and reads["b"] != reads["a"]


def _two_residual_units() -> NpuProgram:
    """Two units of `_residual_unit` one after the other: the second's input
    (and residual) is the first's output u."""
    c, h, w = 16, 32, 32
    size = c * h * w * 4
    T = NpuTensor
    tensors = [T("x", size, "input", h), T("u", size, "activation", h), T("y", size, "output", h)]
    ops = []
    for k, (src, dst) in enumerate((("x", "u"), ("u", "y"))):
        tensors += [T(f"wa{k}", c * c * 4, "weight"), T(f"a{k}", size, "activation", h),
                    T(f"wb{k}", c * 9 * 4, "weight"), T(f"b{k}", size, "activation", h),
                    T(f"wy{k}", c * c * 4, "weight")]
        ops += [NpuOp(f"a{k}", c * c * h * w, (src,), (f"wa{k}",), (f"a{k}",), h, 0, c, (), ((src, 1, 1, 0),)),
                NpuOp(f"b{k}", 9 * c * h * w, (f"a{k}",), (f"wb{k}",), (f"b{k}",), h, 2, c, (), ((f"a{k}", 3, 1, 1),),
                      channel_groups=c),
                NpuOp(dst, c * c * h * w, (f"b{k}", src), (f"wy{k}",), (dst,), h, 0, c, (),
                      ((f"b{k}", 1, 1, 0), (src, 1, 1, 0)), channel_inputs=(src,))]
    return NpuProgram(tuple(tensors), tuple(ops))


def test_a_wide_chain_runs_two_residual_units_without_dram_between():
    # u, the first unit's output, is read by the second unit's first op with
    # a halo and by its last op without (the residual). Counted as one range
    # per band step (u's rows computed once, the residual's copied out of
    # them), the two units are one chain and u never reaches DRAM; counted
    # tight, u computed once per range makes that chain cost more than it
    # saves, and u goes out and back in. The wide one is faster; rolled too
    # (each row computed once, x's and u's residual rows copied out of two
    # bands), it moves 15% fewer DRAM bytes for 2.3% more cycles and ranks
    # first (`_key`): that one is kept
    program, sram = _two_residual_units(), 128 << 10
    result = run_scratchpad(program, sram, cascades=False)  # simulates: raises on a broken rule
    ins = result.schedule.instructions
    assert not any(isinstance(i, (Load, Store)) and i.piece.tensor == "u" for i in ins)
    assert any(isinstance(i, Compute) and i.writes[0][1].tensor == "u" and copy_rows(i.writes[0][1].part) is not None
               for i in ins)
    assert len({bands for bands, _ in result.tiled_ops.values()}) == 1  # one chain

    def simulated(tight: bool, wide: bool, rolled: bool = False, reserve: str = RESERVES[0]):
        units, _, _ = _units(program, sram, NpuCost(), False, tight_chains=tight, wide_chains=wide,
                             rolled_chains=rolled)
        instructions = _Scheduler(program, sram, units, reserve=reserve).run()
        return _simulated(program, sram, instructions)

    # the wide chains are the fastest chain count; the schedule kept ranks first of the wide ones,
    # rolled or not, under every way of reserving room for outputs
    assert simulated(True, True).cycles < min(simulated(False, False).cycles, simulated(True, False).cycles)
    wide = [simulated(tight, True, rolled, reserve) for tight, rolled in ((True, False), (False, True))
            for reserve in RESERVES]
    assert _key(result.cycles, result.dram_bytes) == min(_key(s.cycles, s.dram_bytes) for s in wide)
    assert result.dram_bytes < min(s.dram_bytes for s in wide[:len(RESERVES)])


def test_a_chains_cost_with_a_limit_is_its_cost_where_it_fits_and_none_above():
    # the chain search asks only what fits: `limit` stops at the first band
    # step above it. The answer must be the full count's where that fits
    # (the chains chosen then do not change), None where it does not; and a
    # program's answers are kept (the search asks again for every count)
    program = _two_residual_units()
    asked = 0
    for start in range(len(program.ops)):
        for stop in range(start + 2, len(program.ops) + 1):
            for bands in (1, 2, 3, 4, 6, 9, 32):
                for tight, wide in ((False, False), (True, False), (True, True)):
                    full = scratchpad.chains._chain_cost_of(program, start, stop, bands, tight, wide, None)
                    if full is None:
                        continue
                    for limit in (full[0] - 1, full[0], full[0] + 1, full[0] // 2):
                        got = scratchpad.chains._chain_cost(program, start, stop, bands, tight, wide, limit=limit)
                        assert got == (full if full[0] <= limit else None), (start, stop, bands, limit)
                        asked += 1
                    assert scratchpad.chains._chain_cost(program, start, stop, bands, tight, wide) == full
    assert asked > 100
    assert program.memo("chain_cost")
    assert _two_residual_units().memo("chain_cost") == {}  # each program its own


def test_cascades_false_never_cascades():
    program = _conv_rows_program()
    cascaded = schedule_scratchpad(program, 24 << 10, cascades=True)
    plain = schedule_scratchpad(program, 24 << 10)
    parts = {p.part for ins in plain.instructions if isinstance(ins, Compute) for _, p in (*ins.reads, *ins.writes)}
    assert not any(part.startswith("band") for part in parts)
    parts = {p.part for ins in cascaded.instructions if isinstance(ins, Compute) for _, p in (*ins.reads, *ins.writes)}
    assert any(part.startswith("band") for part in parts)


def test_grouped_channel_blocks_lie_in_a_group_or_are_whole_groups():
    op = NpuOp("y", 1, ("x",), ("w",), ("y",), channels=12, channel_groups=3)
    assert op.blocks_run(1) and op.blocks_run(3) and op.blocks_run(6) and op.blocks_run(12)
    assert not op.blocks_run(2)  # [0, 6) spans half of group 1
    assert not op.blocks_run(5)


def test_channel_bands_cover_what_they_hold():
    # a tensor of 4 channels, 100 B each: bands add up; a tile of a band counts once its tiles add up
    assert covers({"ch0:2/4": 200, "ch2:4/4": 200}, "all", 400)
    assert covers({"ch0:2/4": 200, "ch2:3/4": 100}, "ch0:3/4", 400)
    assert covers({"ch0:2/4": 200}, "ch0:2/4|rows1:3", 400)  # rows of a band held whole
    assert not covers({"ch0:2/4": 200}, "ch0:3/4", 400)  # channel 2 missing
    assert not covers({"ch0:2/4": 200, "ch3:4/4": 100}, "ch0:4/4", 400)  # a gap
    assert not covers({"ch2:4/4|tile0.0/2x1": 100}, "ch2:4/4", 400)  # half the band
    assert covers({"ch2:4/4|tile0.0/2x1": 100, "ch2:4/4|tile1.0/2x1": 100}, "ch2:4/4", 400)
    # rows of every channel (a concat's band in a chain cascade): held once bands of those rows cover every channel
    assert covers({"ch0:2/4|rows1:3": 80, "ch2:4/4|rows1:3": 80}, "rows1:3", 400)
    assert not covers({"ch0:2/4|rows1:3": 80}, "rows1:3", 400)
    assert not covers({"ch0:2/4|rows1:3": 80, "ch2:4/4|rows0:2": 80}, "rows1:3", 400)
    assert channel_band("ch2:4/4|rows1:3") == (2, 4, 4, "rows1:3") and channel_band("rows1:3") is None
    assert band_part(2, 4, 4, "rows1:3") == "ch2:4/4|rows1:3" and band_part(0, 2, 4) == "ch0:2/4"


def test_the_simulator_rejects_a_concat_read_before_all_its_bands_are_written():
    c, x = SramBuffer("bc", 0, 512), SramBuffer("bx", 512, 64)
    sizes = {"c": 512, "x": 64}
    half = Compute("a", 0, 320, ((x, Piece("x", "all", 64)),), ((c, Piece("c", "ch0:2/4", 256)),))
    other = Compute("b", 0, 320, ((x, Piece("x", "all", 64)),), ((c, Piece("c", "ch2:4/4", 256)),))
    read = Compute("y", 0, 512, ((c, Piece("c", "all", 512)),), ())

    def run(body):
        return simulate([Alloc(c), Alloc(x), Load(1, x, Piece("x", "all", 64)), Wait(1), *body, Free(c), Free(x)],
                        sram_size=1024, tensor_bytes=sizes, dram_resident={"x"}, outputs=set())

    run([half, other, read])  # both bands written into the one buffer: the whole is resident
    with pytest.raises(ScheduleError, match="reads c:all, which is not resident"):
        run([half, read])


def test_a_load_waits_only_for_a_store_of_its_bytes_issued_before_it():
    # the port is in order: a load issued after a store (not yet waited on) of
    # its bytes starts when that store ends; one issued before it would read
    # bytes not yet written; a load of other channels never waits for the store
    lo, hi = Piece("c", "ch0:2/4", 256), Piece("c", "ch2:4/4", 256)
    b_lo, b_hi, b_in = SramBuffer("lo", 0, 256), SramBuffer("hi", 256, 256), SramBuffer("in", 512, 256)
    make = [Alloc(b_lo), Alloc(b_hi), Alloc(b_in), Compute("c", 0, 512, (), ((b_lo, lo), (b_hi, hi)))]
    end = [Free(b_lo), Free(b_hi), Free(b_in)]

    def run(body):
        return simulate([*make, *body, *end], sram_size=1024, tensor_bytes={"c": 512}, dram_resident=set(), outputs=set(),
                        dram_offsets={"c": 0})

    same = run([Store(1, b_lo, lo), Load(2, b_in, lo), Wait(1), Wait(2)])
    assert ("load", "c:ch0:2/4", 256, 8 + 32, 8 + 64) in same.transfers  # after the store, on the port
    run([Store(1, b_hi, hi), Wait(1), Store(2, b_lo, lo), Load(3, b_in, hi), Wait(2), Wait(3)])
    with pytest.raises(ScheduleError, match="c:ch0:2/4 is not in DRAM"):
        run([Load(2, b_in, lo), Store(1, b_lo, lo), Wait(1), Wait(2)])


def _concat_net(joins=(2, 2)) -> NpuProgram:
    # two 1x1 convs write 2 channels each of 8 rows of 64 B; a concat joins them; a conv reads the 4 channels
    T = NpuTensor
    return NpuProgram(
        (T("x", 512, "input", 8), T("w1", 8, "weight"), T("w2", 8, "weight"), T("w3", 16, "weight"),
         T("a", 1024, "activation", 8), T("b", 1024, "activation", 8), T("c", 2048, "activation", 8),
         T("y", 512, "output", 8)),
        (NpuOp("a", 128, ("x",), ("w1",), ("a",)), NpuOp("b", 128, ("x",), ("w2",), ("b",)),
         NpuOp("c", 0, ("a", "b"), (), ("c",), joins=joins), NpuOp("y", 256, ("c",), ("w3",), ("y",))),
    )


def test_a_concat_runs_in_place_assembled_in_sram():
    result = run_scratchpad(_concat_net(), 64 << 10, cascades=False)  # simulated: raises on a broken rule
    computes = [i for i in result.schedule.instructions if isinstance(i, Compute)]
    assert [i.op for i in computes] == ["a", "b", "y"]  # no concat
    # both convs write their channels into one buffer, which the last conv reads whole
    (ba, pa), = computes[0].writes
    (bb, pb), = computes[1].writes
    assert ba == bb == computes[2].reads[0][0] and (pa.part, pb.part) == ("ch0:2/4", "ch2:4/4")
    assert result.schedule.homes == {"a": ("c", 0, 2), "b": ("c", 2, 4)}
    copied = run_scratchpad(_concat_net(joins=()), 64 << 10, cascades=False)
    # the concat read 2 KiB and wrote 2 KiB at 64 B per cycle
    assert copied.compute_cycles - result.compute_cycles == 4096 // 64
    assert result.dram_bytes == copied.dram_bytes == result.dram_lower_bound_bytes


def _concat_then_window() -> NpuProgram:
    """Two whole 1x1 convolutions write 2 channels each of 16 x 16; a concat
    joins them (4 KiB); a 3x3 convolution reads it by bands of rows."""
    T = NpuTensor
    rows, width = 16, 16

    def size(channels: int) -> int:
        return channels * rows * width * 4

    return NpuProgram(
        (T("x", size(4), "input", rows), T("wa", 32, "weight"), T("wb", 32, "weight"),
         T("a", size(2), "activation", rows), T("b", size(2), "activation", rows),
         T("c", size(4), "activation", rows), T("wy", 4 * 4 * 9 * 4, "weight"), T("y", size(4), "output", rows)),
        (NpuOp("a", 2 * 4 * rows * width, ("x",), ("wa",), ("a",)),
         NpuOp("b", 2 * 4 * rows * width, ("x",), ("wb",), ("b",)),
         NpuOp("c", 0, ("a", "b"), (), ("c",), rows, 0, 1, (), (("a", 1, 1, 0), ("b", 1, 1, 0)), joins=(2, 2)),
         NpuOp("y", 4 * 4 * 9 * rows * width, ("c",), ("wy",), ("y",), rows, 2, 4, (), (("c", 3, 1, 1),))),
    )


def test_no_chain_starts_at_a_concat_assembled_in_sram_without_concat_starts():
    # at 12 KiB the concat's 4 KiB output fits its home share (half the SRAM): a chain starts at it
    # (it saves c's bytes as if they went to DRAM), none without `concat_starts`; those units
    # write a and b into c's buffer in place and move no byte of a, b or c to or from DRAM,
    # where the chain's copies load a and b back band by band (its home assembled where every
    # unit fits beside it, `_rehome`'s `fit`). At 7 KiB c is assembled in no SRAM: the chain
    # stays either way
    program, cost = _concat_then_window(), NpuCost()
    assert scratchpad.chains._chains(program, 12 << 10, cost) == [(2, 4, 3)]
    assert scratchpad.chains._chains(program, 12 << 10, cost, concat_starts=False) == []
    assert scratchpad.chains._chains(program, 7 << 10, cost, concat_starts=False) == scratchpad.chains._chains(
        program, 7 << 10, cost) != []

    def simulated(concat_starts: bool):
        units, _, _ = _units(program, 12 << 10, cost, False, home_fit=12 << 10, concat_starts=concat_starts)
        instructions = _Scheduler(program, 12 << 10, units).run()
        return instructions, _simulated(program, 12 << 10, instructions)  # raises on a broken rule

    (chained, chain), (in_place, placed) = simulated(True), simulated(False)
    assert any(isinstance(i, Compute) and i.op == "c" for i in chained)
    assert not any(isinstance(i, Compute) and i.op == "c" for i in in_place)
    assert not any(isinstance(i, (Load, Store)) and i.piece.tensor in "abc" for i in in_place)
    assert placed.cycles < chain.cycles and placed.dram_bytes < chain.dram_bytes


def test_a_schedule_whose_partial_sums_fit_only_counted_at_the_largest_tile_is_found():
    # a 3x3 convolution of 64 to 64 channels on 48 x 56 at 32 KiB: summed over blocks of input
    # channels, its tiling counted at the mean tile takes 28 bands of 48 rows (most of them two
    # rows), and a unit then finds no hole for what it needs; `schedule_scratchpad` searches
    # again with the largest tile counted (`_reduction_tiling`'s `exact`), and that schedule fits
    rows, width, channels, sram = 48, 56, 64, 32 << 10
    T = NpuTensor
    size = channels * rows * width * 4
    program = NpuProgram(
        (T("x", size, "input", rows), T("w", channels * channels * 9 * 4, "weight"), T("y", size, "output", rows)),
        (NpuOp("y", channels * channels * 9 * rows * width, ("x",), ("w",), ("y",), rows, 2, channels, (),
               (("x", 3, 1, 1),), in_channels=channels, reduced_inputs=("x",), reduced_weights=("w",)),))
    tensors, op = program.by_name(), program.ops[0]
    mean = scratchpad.tiling._choose_tiling(op, tensors, sram, NpuCost())
    largest = scratchpad.tiling._choose_tiling(op, tensors, sram, NpuCost(), exact=True)
    assert rows % mean[0] and mean != largest
    units, _, _ = _units(program, sram, NpuCost(), False)
    with pytest.raises(PlanningError, match="does not fit"):
        _Scheduler(program, sram, units).run()
    result = run_scratchpad(program, sram, cascades=False)  # simulates: raises on a broken rule
    assert result.tiled_ops["y"] == largest[:2] and result.sram_bytes <= sram


def test_a_concat_in_place_too_big_for_sram_goes_to_its_dram_home_by_bands():
    # 3 KiB: the 2 KiB output does not fit half the SRAM: each band is stored to its place, the whole loaded
    result = run_scratchpad(_concat_net(), 3 << 10, cascades=False, chains=False)
    stores = [i.piece.part for i in result.schedule.instructions if isinstance(i, Store) and i.piece.tensor == "c"]
    loads = [i.piece.part for i in result.schedule.instructions if isinstance(i, Load) and i.piece.tensor == "c"]
    assert sorted(stores) == ["ch0:2/4", "ch2:4/4"] and loads == ["all"]
    assert not any(isinstance(i, Compute) and i.op == "c" for i in result.schedule.instructions)


def test_floors_with_a_concat_in_place_by_hand():
    T = NpuTensor
    program = NpuProgram(
        (T("x", 10, "input"), T("t1", 100, "activation"), T("t2", 50, "activation"), T("c", 150, "activation"),
         T("y", 10, "output")),
        (NpuOp("o1", 0, ("x",), (), ("t1",)), NpuOp("o2", 0, ("t1",), (), ("t2",)),
         NpuOp("cat", 0, ("t1", "t2"), (), ("c",), joins=(2, 1)), NpuOp("o4", 0, ("c", "t1"), (), ("y",))),
    )
    # o1 110 B (2 cycles), o2 150 B (3), the concat nothing, o4 260 B (5)
    assert program.compute_floor_cycles(NpuCost()) == 2 + 3 + 5
    # t1 and t2 live in c: before o4, 150 B (not t1 and c, 250 B, as with the concat copying)
    assert program.spill_floor_bytes(60) == 2 * 90
    copying = NpuProgram(program.tensors, (*program.ops[:2], NpuOp("cat", 0, ("t1", "t2"), (), ("c",)), program.ops[3]))
    assert copying.spill_floor_bytes(60) == 2 * 190


@pytest.mark.parametrize("sram", [3 << 10, 4 << 10, 64 << 10])
def test_schedules_with_concats_in_place_stay_above_the_floors(sram):
    program = _concat_net()
    result = run_scratchpad(program, sram, cascades=False)
    assert result.dram_bytes >= result.dram_lower_bound_bytes + program.spill_floor_bytes(sram)
    assert result.compute_cycles >= program.compute_floor_cycles(NpuCost())


def test_a_concat_in_place_fits_where_its_copy_does_not():
    # at 3 KiB the copying concat (4 KiB of operands, no row bands in this program) does not fit
    with pytest.raises(PlanningError, match="op 'c' does not fit"):
        _units(_concat_net(), 3 << 10, NpuCost(), False, in_place=False)
    run_scratchpad(_concat_net(), 3 << 10, cascades=False)


@pytest.mark.parametrize("sram", [5 << 10, 8 << 10, 64 << 10])
def test_concats_in_place_never_make_the_schedule_slower(sram):
    # the schedule kept is the fastest of: in place outside chains, in place first, none in place
    program = _concat_net()
    units, _, _ = _units(program, sram, NpuCost(), False, in_place=False)
    copying = _Scheduler(program, sram, units).run()
    plain = _simulated(program, sram, copying)
    assert run_scratchpad(program, sram, cascades=False).cycles <= plain.cycles


def test_op_costs_by_hand():
    # gemm reads x and w, writes a; gemm2 reads a and w again (w was freed: loaded
    # again), writes y. Timing: x 8 cycles and w 100 on the port, gemm at 108 for
    # 50 cycles; w again on the port 158..258 (issued at 158): gemm2 at 258 for 50;
    # y out 308..316
    program = NpuProgram(
        (NpuTensor("x", 64, "input"), NpuTensor("w", 800, "weight"), NpuTensor("a", 64, "activation"),
         NpuTensor("y", 64, "output")),
        (NpuOp("gemm", 256 * 50, ("x",), ("w",), ("a",)), NpuOp("gemm2", 256 * 50, ("a",), ("w",), ("y",))))
    BA, BY2 = SramBuffer("ba", 896, 64), SramBuffer("by", 832, 64)  # y where x was
    A = Piece("a", "all", 64)
    instructions = [
        Alloc(BW), Alloc(BX), Alloc(BA), Load(1, BX, X), Load(2, BW, W), Wait(1), Wait(2),
        Compute("gemm", 256 * 50, 928, ((BW, W), (BX, X)), ((BA, A),)), Free(BW), Free(BX),
        Alloc(BW), Alloc(BY2), Load(3, BW, W), Wait(3),
        Compute("gemm2", 256 * 50, 928, ((BW, W), (BA, A)), ((BY2, Y),)), Store(4, BY2, Y), Wait(4),
        Free(BW), Free(BA), Free(BY2),
    ]
    simulation = _run(instructions)
    assert (simulation.cycles, simulation.compute_cycles, simulation.stall_cycles) == (316, 100, 216)
    gemm, gemm2 = op_costs(program, instructions, simulation, NpuCost())
    assert (gemm.tiles, gemm.compute_cycles, gemm.stall_cycles) == (1, 50, 108)
    assert (gemm.weight_bytes, gemm.weight_load_bytes, gemm.input_load_bytes, gemm.output_store_bytes,
            gemm.reread_bytes) == (800, 800, 64, 0, 0)
    # the stall before gemm2 (100) and the wait for y after it (8) are gemm2's
    assert (gemm2.compute_cycles, gemm2.stall_cycles) == (50, 108)
    assert (gemm2.weight_load_bytes, gemm2.input_load_bytes, gemm2.output_store_bytes, gemm2.reread_bytes) == (
        800, 0, 64, 800)
    # floors: 12800 MACs (50 cycles) over 928 bytes (15 cycles) each
    assert gemm.floor_cycles == gemm2.floor_cycles == 50


@pytest.mark.parametrize("sram", [32 * 1024, 1024 * 1024])
def test_op_costs_add_up_to_the_simulation(sram):
    program = _small_net()
    result = run_scratchpad(program, sram, cascades=False)
    costs = op_costs(program, result.schedule.instructions, result.simulation, result.cost)
    assert [c.op for c in costs] == [op.name for op in program.ops]
    assert sum(c.compute_cycles for c in costs) == result.compute_cycles
    assert sum(c.stall_cycles for c in costs) == result.stall_cycles
    assert sum(c.port_bound_stall_cycles for c in costs) == result.simulation.stall_port_bound_cycles
    assert all(0 <= c.port_bound_stall_cycles <= c.stall_cycles for c in costs)
    assert sum(c.weight_load_bytes + c.input_load_bytes + c.output_store_bytes for c in costs) == result.dram_bytes
    assert sum(c.tiles for c in costs) == sum(isinstance(i, Compute) for i in result.schedule.instructions)
    assert all(c.compute_cycles >= c.floor_cycles for c in costs)


@pytest.mark.parametrize("sram", [3 << 10, 64 << 10])
def test_op_costs_and_weight_stream_floor_with_a_concat_in_place(sram):
    # the concat runs in place: no tiles, a floor of 0 (as in compute_floor_cycles),
    # and the per-op totals still add up to the simulation's
    program = _concat_net()
    result = run_scratchpad(program, sram, cascades=False)
    costs = {c.op: c for c in op_costs(program, result.schedule.instructions, result.simulation, result.cost)}
    assert costs["c"].tiles == 0 and costs["c"].floor_cycles == 0 and costs["c"].compute_cycles == 0
    assert sum(c.floor_cycles for c in costs.values()) == program.compute_floor_cycles(result.cost)
    assert sum(c.compute_cycles for c in costs.values()) == result.compute_cycles
    assert sum(c.stall_cycles for c in costs.values()) == result.stall_cycles
    assert (sum(c.weight_load_bytes + c.input_load_bytes + c.output_store_bytes for c in costs.values())
            == result.dram_bytes)
    assert program.weight_stream_floor_cycles(result.cost, sram) <= result.cycles
    # the copying concat's floor counts its 4 KiB of operands; the in-place one's does not
    copying = _concat_net(joins=())
    assert (copying.weight_stream_floor_cycles(result.cost, sram)
            - program.weight_stream_floor_cycles(result.cost, sram)) == 4096 // 64


def _wide_sum(in_channels: int) -> NpuProgram:
    """One convolution-like op whose every tile reads all 64 input channels
    of a 64 KiB input and a 36 KiB filter into 2 KiB (summable over `in_channels`
    blocks; 1: not at all)."""
    T = NpuTensor
    reduced = in_channels > 1
    return NpuProgram(
        (T("x", 64 << 10, "input"), T("w", 36 << 10, "weight"), T("b", 64, "weight"), T("y", 2 << 10, "output")),
        (NpuOp("y", 64 * 2 * 256 * 9, ("x",), ("w", "b"), ("y",), in_channels=in_channels,
               reduced_inputs=("x",) if reduced else (), reduced_weights=("w",) if reduced else (),
               first_only=("b",) if reduced else ()),))


def test_an_op_no_tile_fits_sums_over_input_channel_blocks():
    # at 16 KiB no tile of output rows and channels fits (there are none to
    # split here): the op is refused unless it may sum over input channels;
    # then each unit reads its block of x and w, the units after the first
    # read the partial sums the one before wrote (never evicted nor stored),
    # only the first reads the bias, and the simulator accepts it all
    with pytest.raises(PlanningError, match="does not fit"):
        run_scratchpad(_wide_sum(1), 16 << 10, cascades=False)
    result = run_scratchpad(_wide_sum(64), 16 << 10, cascades=False)
    blocks = result.schedule.input_blocks["y"]
    assert blocks > 1 and result.sram_bytes <= 16 << 10
    computes = [ins for ins in result.schedule.instructions if isinstance(ins, Compute)]
    assert len(computes) == blocks
    # each unit reads its channels [lo, hi) of x and of w: the blocks cover the 64 channels in order
    ranges = [next(p.part for _, p in ins.reads if p.tensor == "x") for ins in computes]
    spans = [input_block(part) for part in ranges]
    assert spans[0][0] == 0 and spans[-1][1] == 64 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert [p.part for _, p in computes[0].reads] == [ranges[0], ranges[0], "all"]
    for m, ins in enumerate(computes[1:], start=1):
        assert {p.part for _, p in ins.reads} == {ranges[m], f"acc{m - 1}/{blocks}|tile0.0/1x1"}
    assert [p.part for _, p in computes[-1].writes] == ["tile0.0/1x1"]
    assert sum(ins.macs for ins in computes) == 64 * 2 * 256 * 9
    stored = [ins.piece.part for ins in result.schedule.instructions if isinstance(ins, Store)]
    assert stored == ["all"]  # the output once; the partial sums never leave SRAM
    # every weight byte and input byte crosses the port once
    assert result.dram_bytes == result.dram_lower_bound_bytes


def test_a_tile_assembled_whole_stays_while_the_next_tile_sums_its_blocks():
    # an op writing its output whole, tile by tile, each tile summed over two
    # blocks of input channels: the unit of the second tile's first block
    # writes only partial sums, and the output (read by no later unit) was
    # freed there, half-written, then its second tile written into a new
    # buffer and stored as the whole ("does not hold y:all": Inception v1 at
    # 1 MiB once the prefetch followed the DMA clock); it stays until the
    # op's last unit
    T = NpuTensor
    program = NpuProgram(
        (T("x", 256, "input"), T("w", 512, "weight"), T("a", 128, "activation"), T("y", 128, "output")),
        (NpuOp("y", 64, ("x",), ("w",), ("y",), channels=2, in_channels=2, reduced_inputs=("x",),
               reduced_weights=("w",)),))
    x0, x1 = _Need(Piece("x", "in0:1/2", 128), True), _Need(Piece("x", "in1:2/2", 128), True)

    def w(block: int, tile: int) -> _Need:
        return _Need(Piece("w", f"in{block}:{block + 1}/2|block{tile}/2", 128), True)

    def acc(tile: int) -> Piece:
        return Piece("a", f"acc0/2|tile0.{tile}/1x2", 64)  # as in an op writing in place (a's home in y)

    units = [
        _Unit("y", 16, (x0, w(0, 0)), (_Make(acc(0), "keep"),), False),
        _Unit("y", 16, (x1, w(1, 0), _Need(acc(0), False)), (_Make(Piece("y", "tile0.0/1x2", 64), WHOLE),), False),
        _Unit("y", 16, (x0, w(0, 1)), (_Make(acc(1), "keep"),), False),
        _Unit("y", 16, (x1, w(1, 1), _Need(acc(1), False)), (_Make(Piece("y", "tile0.1/1x2", 64), WHOLE),), True),
    ]
    instructions = _Scheduler(program, 1024, units).run()
    simulate(instructions, sram_size=1024, tensor_bytes={"x": 256, "w": 512, "a": 128, "y": 128}, dram_resident={"x", "w"},
             outputs={"y"})
    allocs = [i.buffer.name for i in instructions if isinstance(i, Alloc) and ":y:all" in i.buffer.name]
    assert len(allocs) == 1
    assert [i.piece.part for i in instructions if isinstance(i, Store)] == ["all"]


def test_cheapest_hole_is_the_best_window_by_hand():
    """`_cheapest_hole` against every aligned window tried by hand: what it
    frees leaves a hole of the bytes asked, holds only buffers that may go,
    and its least willingly given up buffer ranks as high as the best
    window's."""
    rng = random.Random(7)
    for case in range(400):
        order, offset = [], 0
        for k in range(rng.randrange(0, 12)):
            start = offset + rng.choice((0, 0, 64, 128, 320))
            end = start + 64 * rng.randrange(1, 6)
            order.append((start, f"b{k}", end))
            offset = end
        size = max([end for *_, end in order], default=0) + rng.choice((0, 64, 256))
        given_up = {name: (rng.randrange(4),) for _, name, _ in order if rng.random() < 0.7}
        nbytes = 64 * rng.randrange(1, 12)
        gaps = zip([0] + [end for *_, end in order], [start for start, *_ in order] + [size])
        if any(hi - lo >= nbytes for lo, hi in gaps):
            continue  # asked only where no hole fits
        best = None
        for at in range(0, size - nbytes + 1, ALIGN):
            names = [name for start, name, end in order if start < at + nbytes and end > at]
            if names and all(n in given_up for n in names):
                worst = min(given_up[n] for n in names)
                best = worst if best is None or worst > best else best
        top = case % 2 == 1
        window = _cheapest_hole(order, size, nbytes, given_up, top=top)
        if best is None:
            assert window is None, (order, given_up, nbytes)
            continue
        assert window is not None and set(window) <= set(given_up)
        assert min(given_up[n] for n in window) == best
        # of the windows that start at the SRAM's start or a buffer's end, or end at its end or a
        # buffer's start: on a tie the fewest bytes freed, then the lowest (with `top`, the highest)
        tried = {0, (size - nbytes) // ALIGN * ALIGN, *(end for *_, end in order),
                 *((start - nbytes) // ALIGN * ALIGN for start, *_ in order)}
        keys = {}
        for at in (at for at in tried if 0 <= at <= size - nbytes):
            over = [(start, name, end) for start, name, end in order if start < at + nbytes and end > at]
            if over and all(name in given_up for _, name, _ in over):
                freed = sum(end - start for start, _, end in over)
                keys[min(given_up[name] for _, name, _ in over), -freed, at if top else -at] = over
        assert window == [name for _, name, _ in reversed(keys[max(keys)])]
        rest = [o for o in order if o[1] not in window]
        gaps = zip([0] + [end for *_, end in rest], [start for start, *_ in rest] + [size])
        assert any(hi - lo >= nbytes for lo, hi in gaps)


def test_without_gc_pauses_the_collector_and_restores_it():
    seen = []
    paused = without_gc(lambda: seen.append(gc.isenabled()) or 5)
    assert gc.isenabled()
    assert paused() == 5 and seen == [False] and gc.isenabled()
    gc.disable()
    try:
        assert paused() == 5 and not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
    failing = without_gc(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing()
    assert gc.isenabled()


def test_split_range_adds_up_the_shares_before_it():
    """`split_range`'s closed form equals adding the near-equal shares
    before `index` one by one, and the ranges tile [0, total)."""
    for total in (1, 2, 7, 64, 100, 25088):
        for parts in (1, 2, 3, 7, 64, 97):
            if parts > total:
                continue
            at = 0
            for index in range(parts):
                share = total // parts + (1 if index < total % parts else 0)
                assert split_range(total, parts, index) == (at, at + share)
                at += share
            assert at == total
    assert split_range(10, 4, 2) == (6, 8)  # shares 3, 3, 2, 2


def _resnet50_last_stage(with_r151: bool) -> NpuProgram:
    """ResNet-50's r145 (3x3 stride-2) and r149 (its 1x1 stride-2 projection
    of r139, 8 MiB of weights) as npu_program sees them; with `with_r151`,
    also the 1x1 convolution that reads r145's output and adds r149's."""
    T = NpuTensor
    tensors = [T("r142", 401408, "input", 14), T("r144_w", 9437184, "weight", 3), T("r144_b", 2048, "weight"),
               T("r145", 100352, "activation" if with_r151 else "output", 7), T("r139", 802816, "input", 14),
               T("r149_w", 8388608, "weight"), T("r149_b", 8192, "weight"),
               T("r149", 401408, "activation" if with_r151 else "output", 7)]
    ops = [NpuOp("r145", 115605504, ("r142",), ("r144_w", "r144_b"), ("r145",), 7, 1, 512,
                 row_windows=(("r142", 3, 2, 1),), in_channels=512, reduced_inputs=("r142",),
                 reduced_weights=("r144_w",), first_only=("r144_b",)),
           NpuOp("r149", 102760448, ("r139",), ("r149_w", "r149_b"), ("r149",), 7, 0, 2048,
                 row_windows=(("r139", 1, 2, 0),), in_channels=1024, reduced_inputs=("r139",),
                 reduced_weights=("r149_w",), first_only=("r149_b",))]
    if with_r151:
        tensors += [T("r147_w", 4194304, "weight"), T("r147_b", 8192, "weight"), T("r151", 401408, "output", 7)]
        ops.append(NpuOp("r151", 51380224, ("r145", "r149"), ("r147_w", "r147_b"), ("r151",), 7, 0, 2048,
                         row_windows=(("r145", 1, 1, 0), ("r149", 1, 1, 0)), channel_inputs=("r149",),
                         in_channels=512, reduced_inputs=("r145",), reduced_weights=("r147_w",),
                         first_only=("r147_b", "r149")))
    return NpuProgram(tuple(tensors), tuple(ops))


def test_weight_blocks_are_placed_from_the_top(monkeypatch: pytest.MonkeyPatch):
    # every block of a weight gets the highest aligned offset where it fits
    # among the live buffers (the holes its double buffer leaves stay out of the
    # bottom, where input bands and tensors that later ops read stay); every other
    # buffer the lowest. First fit put the blocks low too, between them. (Best
    # fit, faster here, is left out: it places the other buffers elsewhere.)
    monkeypatch.setattr(scratchpad.tuning, "BEST_FIT_RESERVES", ())
    program = _resnet50_last_stage(with_r151=True)
    schedule = schedule_scratchpad(program, 1 << 20, cascades=False)
    live: dict[str, SramBuffer] = {}
    blocks = 0
    for ins in schedule.instructions:
        if isinstance(ins, Free):
            del live[ins.buffer.name]
        if not isinstance(ins, Alloc):
            continue
        size = ins.buffer.size
        spans = sorted((b.offset, -(-(b.offset + b.size) // ALIGN) * ALIGN) for b in live.values())
        holes = [(lo, hi) for lo, hi in zip([0] + [end for _, end in spans], [start for start, _ in spans] + [1 << 20])
                 if hi - lo >= size]
        _, tensor, part = ins.buffer.name.split(":", 2)
        if program.by_name()[tensor].kind == "weight" and part != "all":
            blocks += 1
            assert ins.buffer.offset == (holes[-1][1] - size) // ALIGN * ALIGN
        else:
            assert ins.buffer.offset == holes[0][0]
        live[ins.buffer.name] = ins.buffer
    assert blocks > 100


@pytest.mark.parametrize("with_r151", [False, True])
def test_a_projection_keeps_its_bands_and_streams_its_weight_blocks(with_r151):
    # r149 at 1 MiB runs its 7 input bands (one strided row each) under every
    # block of output channels, channel blocks outer: the bands stay in SRAM,
    # and the tiling counts them so, leaving room for two weight blocks: each
    # block loads while the one before computes. Counted as two streamed bands,
    # the tiling took blocks of 300 KB, of which one fitted beside the 7 bands:
    # r149 stalled about as long as it computed (each block loaded after the
    # one before was freed). With r151, r145's output stays in SRAM meanwhile
    program = _resnet50_last_stage(with_r151)
    result = run_scratchpad(program, 1 << 20, cascades=False)
    r149 = next(c for c in op_costs(program, result.schedule.instructions, result.simulation, result.cost)
                if c.op == "r149")
    assert r149.stall_cycles < r149.compute_cycles / 10
    assert r149.input_load_bytes == 7 * 57344  # every band loaded once


def test_a_sum_over_input_channel_blocks_competes_with_the_other_tilings():
    # ResNet-50's r92 (a 1x1 convolution, 1024 input channels on 14x14 to 256)
    # at 1 MiB: its input (784 KiB) and weights (1 MiB) do not fit together.
    # In blocks of output channels each block touches the whole input in SRAM
    # again (28 blocks: 1.8 times its MACs' cycles); summed over blocks of its
    # input channels, each block touches its slice of input and filters once,
    # and its compute is within 5% of its MACs'. That tiling was taken only
    # where no other fitted
    T = NpuTensor
    program = NpuProgram(
        (T("r89", 802816, "input", 14), T("r91_w", 1048576, "weight"), T("r91_b", 1024, "weight"),
         T("r92", 200704, "output", 14)),
        (NpuOp("r92", 51380224, ("r89",), ("r91_w", "r91_b"), ("r92",), 14, 0, 256,
               row_windows=(("r89", 1, 1, 0),), in_channels=1024, reduced_inputs=("r89",),
               reduced_weights=("r91_w",), first_only=("r91_b",)),))
    result = run_scratchpad(program, 1 << 20, cascades=False)
    assert result.schedule.input_blocks["r92"] > 1
    assert result.compute_cycles < 1.05 * 51380224 / 256


def test_a_prefetch_leaves_room_for_the_outputs_of_the_units_before_its_own():
    # 1 KiB of SRAM. While a computes, w (which c reads) fitted beside x and t and
    # was prefetched; then b's output u (448 B) found no room: its buffer evicted w,
    # waiting for w's load to land, and c loaded w again (ShuffleNet's 1x1 weights,
    # prefetched units ahead and evicted half loaded by the next unit's output). By
    # hand, before: x 0..8; w 8..48; a 8..18 (10 cycles of MACs); w waited on and
    # evicted, b 48..59 (704 B at 64 a cycle); w again 59..99; c 99..112; y out
    # 112..120. Now a prefetch for c leaves b's output its bytes: b 18..29, w 29..69
    # (no room beside t and u), c 69..82, y out 82..90
    T = NpuTensor
    program = NpuProgram(
        (T("x", 64, "input"), T("t", 256, "activation"), T("u", 448, "activation"), T("w", 320, "weight"),
         T("y", 64, "output")),
        (NpuOp("a", 256 * 10, ("x",), (), ("t",)), NpuOp("b", 256 * 10, ("t",), (), ("u",)),
         NpuOp("c", 256 * 10, ("u",), ("w",), ("y",))))
    sizes = program.by_name()

    def piece(name: str) -> Piece:
        return Piece(name, "all", sizes[name].size)

    units = [_Unit("a", 256 * 10, (_Need(piece("x"), False),), (_Make(piece("t"), WHOLE),), True),
             _Unit("b", 256 * 10, (_Need(piece("t"), False),), (_Make(piece("u"), WHOLE),), True),
             _Unit("c", 256 * 10, (_Need(piece("u"), False), _Need(piece("w"), False)),
                   (_Make(piece("y"), WHOLE),), True)]

    def scheduled(reserve: str):
        instructions = _Scheduler(program, 1024, units, reserve=reserve).run()
        return _simulated(program, 1024, instructions)

    result = scheduled("between")
    assert [t[1] for t in result.transfers if t[0] == "load"] == ["x:all", "w:all"]
    assert ("load", "w:all", 320, 29, 69) in result.transfers
    assert result.cycles == 90
    before = scheduled("none")  # the rule before, still one `_fastest_scheduler` tries (`RESERVES`)
    assert [t[1] for t in before.transfers if t[0] == "load"] == ["x:all", "w:all", "w:all"]
    assert before.cycles == 120


def _one_by_one_then_three_by_three(inputs: int = 32) -> NpuProgram:
    """A 1x1 convolution (`inputs` to 16 channels) feeds a 3x3 one (16 to 8)
    on 32 rows of 16. Over 32 channels a row of the 1x1 costs 48 cycles,
    over 2 channels 18; a copy of it 32."""
    T = NpuTensor
    rows, width = 32, 16

    def size(channels: int) -> int:
        return channels * rows * width * 4

    return NpuProgram(
        (T("x", size(inputs), "input", rows), T("wa", inputs * 16 * 4, "weight"),
         T("a", size(16), "activation", rows), T("wy", 16 * 8 * 9 * 4, "weight"), T("y", size(8), "output", rows)),
        (NpuOp("a", inputs * 16 * rows * width, ("x",), ("wa",), ("a",), rows, 0, 16, (), (("x", 1, 1, 0),)),
         NpuOp("y", 16 * 8 * 9 * rows * width, ("a",), ("wy",), ("y",), rows, 2, 8, (), (("a", 3, 1, 1),))),
    )


def test_a_rolled_chain_computes_each_row_once_and_copies_its_halo():
    # at 48 KiB both ways chain the two convolutions on 9 bands. Computing the
    # halo again, the 1x1 computes 1.5 times its MACs; rolled, each of its rows
    # once, band after band, and every band of the 3x3 after the first reads a
    # copy of its rows out of the 1x1's band before and this one
    program, cost, sram = _one_by_one_then_three_by_three(), NpuCost(), 48 << 10
    chained = scratchpad.chains._chains(program, sram, cost)
    assert chained == scratchpad.chains._chains(program, sram, cost, rolled=True) == [(0, 2, 9)]
    produced = [ranges[0] for ranges in scratchpad.chains._rolled_ranges(program, 0, 2, 9, cost)]
    assert produced[0][0] == 0 and all(a[1] == b[0] for a, b in zip(produced, produced[1:]))

    def scheduled(rolled: bool):
        units, _, _ = _units(program, sram, cost, False, rolled_chains=rolled)
        return units, _simulated(program, sram, _Scheduler(program, sram, units).run())  # raises on a broken rule

    (units, plain), (rolled_units, rolled) = scheduled(False), scheduled(True)
    macs = [sum(u.macs for u in us if u.op == "a") for us in (units, rolled_units)]
    assert macs == [program.ops[0].macs * 3 // 2, program.ops[0].macs]
    copies = [u for u in rolled_units if u.macs == 0]
    assert len(copies) == 8
    assert all(copy_rows(u.writes[0].piece.part) and [n.piece.tensor for n in u.reads] == ["a", "a"] for u in copies)
    assert rolled.cycles < plain.cycles
    # at 32 KiB only the rolled chain saves more than it costs
    assert scratchpad.chains._chains(program, 32 << 10, cost) == [] != scratchpad.chains._chains(program, 32 << 10, cost, rolled=True)


def test_no_op_rolls_where_a_halo_is_taller_than_a_band():
    # on bands of one row the 3x3's band i reads the 1x1's row i - 1, which
    # the band two before computed: the 1x1 cannot roll, and computes its halo
    # rows again, as a chain that does not roll does; on bands of two rows, the
    # band before computed them, and it rolls
    program, cost = _one_by_one_then_three_by_three(), NpuCost()
    assert scratchpad.chains._rolled_ranges_of(program, 0, 2, 32, (True, False)) is None
    assert scratchpad.chains._roll_flags(program, 0, 2, 32, cost) == (False, False)
    assert scratchpad.chains._rolled_ranges(program, 0, 2, 32, cost) == [
        [ranges[0] for ranges in scratchpad.chains._chain_ranges(program, 0, 2, 32, i)] for i in range(32)]
    assert scratchpad.chains._roll_flags(program, 0, 2, 16, cost) == (True, False)


def test_an_op_whose_rows_cost_less_than_their_copy_computes_its_halo_again():
    # in a rolled chain on 8 bands, the 1x1 over 32 channels rolls: a band's
    # halo rows computed again cost 2 x 48 cycles and the DMA of 2 rows of its
    # input (512 cycles), the copy of its 6 rows 192. Over 2 channels, a row
    # costs 18 cycles and 2 rows of its input 32: it computes its halo again,
    # the 3x3 reads its band whole and no copy is made
    cost = NpuCost()
    for program, roll in ((_one_by_one_then_three_by_three(), True), (_one_by_one_then_three_by_three(2), False)):
        assert scratchpad.chains._roll_flags(program, 0, 2, 8, cost) == (roll, False)
        units = scratchpad.chains._chain_units(program, 0, 2, 8, 1 << 20, rolled=True, cost=cost)
        copies = [u for u in units if copy_rows(u.writes[0].piece.part)]
        macs = sum(u.macs for u in units if u.op == "a")
        if roll:
            assert len(copies) == 7 and macs == program.ops[0].macs
        else:
            assert copies == [] and macs > program.ops[0].macs
            ranges = scratchpad.chains._rolled_ranges(program, 0, 2, 8, cost)
            assert all(r[0] == program.ops[1].in_rows(program.by_name()["a"], *r[1]) for r in ranges)


def test_two_ways_that_find_the_same_units_are_finished_once(monkeypatch):
    # at 24 KiB the tight chain and the rolled one of a 1x1 over 2 channels and a 3x3 both take
    # 6 bands, and no op of the rolled one rolls (its rows cost less than their copy): the same
    # units. Both ways end within `PATH_MARGIN`; until stop 62 each was finished apart, to the
    # same schedule twice
    program, cost, sram = _one_by_one_then_three_by_three(2), NpuCost(), 24 << 10
    rolled, _, _ = _units(program, sram, cost, False, rolled_chains=True)
    assert rolled == _units(program, sram, cost, False, tight_chains=True)[0]
    finished = []
    finish = scratchpad.search._finished
    monkeypatch.setattr(scratchpad.search, "_finished", lambda *args: finished.append(args[4]) or finish(*args))
    schedule = scratchpad.schedule_scratchpad(program, sram, cost, cascades=False)
    assert len(finished) == 1
    _simulated(program, sram, schedule.instructions)  # raises on a broken rule


def _two_convs_joined_then_window() -> NpuProgram:
    """Two 1x1 convolutions (16 to 8 channels) of x, by bands of rows; a
    concat joins them; a 3x3 convolution (16 to 8) reads it: 32 rows of 16."""
    T = NpuTensor
    rows, width = 32, 16

    def size(channels: int) -> int:
        return channels * rows * width * 4

    return NpuProgram(
        (T("x", size(16), "input", rows), T("wa", 16 * 8 * 4, "weight"), T("wb", 16 * 8 * 4, "weight"),
         T("a", size(8), "activation", rows), T("b", size(8), "activation", rows),
         T("c", size(16), "activation", rows), T("wy", 16 * 8 * 9 * 4, "weight"), T("y", size(8), "output", rows)),
        (NpuOp("a", 16 * 8 * rows * width, ("x",), ("wa",), ("a",), rows, 0, 8, (), (("x", 1, 1, 0),)),
         NpuOp("b", 16 * 8 * rows * width, ("x",), ("wb",), ("b",), rows, 0, 8, (), (("x", 1, 1, 0),)),
         NpuOp("c", 0, ("a", "b"), (), ("c",), rows, 0, 1, (), (("a", 1, 1, 0), ("b", 1, 1, 0)), joins=(8, 8)),
         NpuOp("y", 16 * 8 * 9 * rows * width, ("c",), ("wy",), ("y",), rows, 2, 8, (), (("c", 3, 1, 1),))),
    )


def test_a_rolled_chain_runs_through_a_concat_written_in_place():
    # at 48 KiB the rolled chain holds both 1x1s, their concat and the 3x3 (until stop 61 no
    # rolled chain held a concat): band by band the 1x1s write their new rows into the concat's
    # band in place, and the 3x3 reads a copy of its rows out of the concat's band before and this
    # one. Computing the halos again, the chain ends at the concat. The two 1x1s read the same
    # rows of x, one band loaded once (`_rolled_step` counts it once since stop 67: 9 bands, not 13)
    program, cost, sram = _two_convs_joined_then_window(), NpuCost(), 48 << 10
    assert scratchpad.chains._chains(program, sram, cost) == [(0, 3, 6)]
    assert scratchpad.chains._chains(program, sram, cost, rolled=True) == [(0, 4, 9)]
    units, _, _ = _units(program, sram, cost, False, rolled_chains=True)
    _simulated(program, sram, _Scheduler(program, sram, units).run())  # raises on a broken rule
    assert not any(u.op == "c" for u in units)
    assert {m.piece.tensor for u in units if u.op in ("a", "b") for m in u.writes} == {"c"}
    copies = [u for u in units if copy_rows(u.writes[0].piece.part)]
    assert len(copies) == 8 and all([n.piece.tensor for n in u.reads] == ["c", "c"] for u in copies)


def test_a_rolled_chain_counted_by_its_peak_takes_fewer_bands():
    # within 40 KiB of step, the rolled chain of the 1x1 and the 3x3 counted by everything a band
    # step holds takes 9 bands (6: 41,472 bytes); counted by the most bytes live at once as its
    # units run (`_units_peak`: the band before goes after its copy, the copy after its reader),
    # 4 (40,448 bytes; 3: 51,712)
    program, cost, limit = _one_by_one_then_three_by_three(), NpuCost(), 40 << 10

    def fewest(peak: bool) -> int:
        return next(bands for bands in scratchpad.tiling._candidates(32) if scratchpad.chains._chain_cost(
            program, 0, 2, bands, wide=peak, rolled=True, limit=limit, cost=cost) is not None)

    assert (fewest(False), fewest(True)) == (9, 4)
    peak = scratchpad.chains._chain_cost(program, 0, 2, 4, wide=True, rolled=True, cost=cost)
    assert peak is not None and peak[0] == scratchpad.chains._units_peak(
        scratchpad.chains._chain_units(program, 0, 2, 4, 0, rolled=True, cost=cost))


def test_units_peak_holds_each_piece_from_its_first_unit_to_its_last():
    def piece(name: str, nbytes: int) -> _Need:
        return _Need(Piece(name, "all", nbytes), False)

    def make(name: str, nbytes: int) -> _Make:
        return _Make(Piece(name, "all", nbytes), KEEP)

    units = [_Unit("p", 0, (piece("w", 10),), (make("a", 100),), True),
             _Unit("q", 0, (piece("a", 100),), (make("b", 50),), True),
             _Unit("r", 0, (piece("b", 50), piece("w", 10)), (make("c", 5),), True)]
    assert scratchpad.chains._units_peak(units) == 160  # q: a, b and w (read again by r)
    assert scratchpad.chains._units_peak(units[:1]) == 110
    assert scratchpad.chains._units_peak([]) == 0


@pytest.mark.parametrize("images", [1, 2])
def test_tiles_of_rows_and_channels_are_assembled_only_in_a_tensor_of_one_image(images: int) -> None:
    # p runs on 2 bands of rows x 2 blocks of channels, each tile streamed
    # out, and q reads y whole: with `tiles`, each tile is kept and copied
    # into the rows of its channels of y's whole buffer (one strided copy
    # of a chunk per channel). In a tensor of two images those rows of a
    # block of channels are two runs, which one such copy cannot write: its
    # tiles stream out as before (and so do they without `tiles`)
    T = NpuTensor
    y = T("y", images * 4 * 4 * 16, "activation", 4, images)
    program = NpuProgram(
        (T("x", images * 4 * 4 * 16, "input", 4, images), T("w", 64, "weight"), y,
         T("z", images * 4 * 16, "output", 4, images)),
        (NpuOp("p", 256, ("x",), ("w",), ("y",), out_rows=4, channels=4),
         NpuOp("q", 64, ("y",), (), ("z",))))
    tile = y.size // 4
    units = [_Unit("p", 64, (_Need(Piece("x", f"rows{2 * i}:{2 * i + 2}", tile * 2), True),
                             _Need(Piece("w", f"block{j}/2", 32), True)),
                   (_Make(Piece("y", f"tile{i}.{j}/2x2", tile), STREAM),), (i, j) == (1, 1))
             for i in range(2) for j in range(2)]
    units.append(_Unit("q", 64, (_Need(Piece("y", "all", y.size), False),), (_Make(Piece("z", "all", 64), WHOLE),),
                       True))
    assert scratchpad.units._assembled(program, units, 1 << 20) is units  # without `tiles`: bands of every channel only
    assembled = scratchpad.units._assembled(program, units, 1 << 20, tiles=True)
    if images == 2:
        assert assembled is units
        return
    copies = [u for u in assembled if u.writes[0].piece.part.endswith("|assembled")]
    assert [u.writes[0].piece.part for u in copies] == [
        "rows0:2|ch0:2|assembled", "rows0:2|ch2:4|assembled", "rows2:4|ch0:2|assembled", "rows2:4|ch2:4|assembled"]
    assert [scratchpad.assembled_channels(u.writes[0].piece.part) for u in copies] == [(0, 2), (2, 4)] * 2
    assert [scratchpad.assembled_rows(u.writes[0].piece.part) for u in copies] == [(0, 2), (0, 2), (2, 4), (2, 4)]
    assert all(u.writes[0].mode == WHOLE for u in copies) and [u.last_of_op for u in copies] == [False] * 3 + [True]
    kept = [u.writes[0] for u in assembled if u.op == "p" and u not in copies]
    assert [m.mode for m in kept] == [KEEP] * 4
    assert scratchpad.assembled_channels("rows0:2|assembled") is None
    instructions = _Scheduler(program, 1 << 20, assembled).run()
    simulate(instructions, sram_size=1 << 20, tensor_bytes={t.name: t.size for t in program.tensors},
             dram_resident={"x", "w"}, outputs={"z"})
    assert not [i for i in instructions if isinstance(i, Store) and i.piece.tensor == "y"]


def _light_program(name: str) -> NpuProgram:
    """The NPU program of the light model `name`, in tensor form as pyocc compiles it."""
    from xdsl.context import Context
    from xdsl.dialects import func

    from pyocc.analysis.npu_program import npu_program
    from pyocc.frontend.onnx_import import import_model
    from pyocc.pipelines import Options, run_passes, tensor_passes
    from pyocc.testing.light_models import light_model_path

    module = import_model(str(light_model_path(name)))
    run_passes(Context(), module, tensor_passes(Options()))
    return npu_program(next(op for op in module.walk() if isinstance(op, func.FuncOp)))


def test_an_op_whose_weights_came_late_runs_on_weight_blocks_where_that_is_faster(monkeypatch):
    # SqueezeNet's fire7 3x3 expand (r45, 332,544 B of weights) fits whole at 1 MiB and its best tiling
    # is one tile, so streaming its weights left it whole: it waited 23,316 cycles for them, late (the
    # port had idled since the stall before). On two blocks of output channels the first block is half
    # the bytes, finds room and loads sooner, and the second loads while the first computes
    program = _light_program("squeezenet")

    def cost_of(result, op):
        return next(c for c in op_costs(program, result.schedule.instructions, result.simulation, result.cost)
                    if c.op == op)

    split = run_scratchpad(program, 1 << 20, cascades=False)
    # a split that finishes slower is not kept: the schedule finished without it is
    finish = scratchpad.search._finish

    def slower(program, sram, cost, best, choices, scheduled, streamed, split):
        key, schedule = finish(program, sram, cost, best, choices, scheduled, streamed, split)
        return ((key[0] + 1, *key[1:]) if split else key), schedule

    monkeypatch.setattr(scratchpad.search, "_finish", slower)
    kept = run_scratchpad(program, 1 << 20, cascades=False)
    monkeypatch.setattr(scratchpad.search, "_finish", finish)
    monkeypatch.setattr(scratchpad.search, "_split_late", lambda program, sram, cost, best, scheduled: (best, frozenset()))
    whole = run_scratchpad(program, 1 << 20, cascades=False)
    r45 = cost_of(whole, "r45")
    assert (r45.tiles, r45.stall_cycles) == (1, 23316) and r45.port_bound_stall_cycles < r45.stall_cycles // 100
    assert split.tiled_ops["r45"] == (1, 2) and cost_of(split, "r45").stall_cycles < r45.stall_cycles // 5
    assert split.cycles < whole.cycles
    # fire6's expand (r38) waited late too, but split it ran no faster: tried, and left whole
    assert cost_of(whole, "r38").stall_cycles > cost_of(whole, "r38").port_bound_stall_cycles
    assert cost_of(split, "r38").tiles == 1
    assert kept.schedule.instructions == whole.schedule.instructions


def test_trials_keep_all_at_once_where_faster_else_each_op_that_is():
    # `_kept_trials` (`_stream_stalled`, `_split_late`): the ops all at once first; where that is no
    # faster, each alone on top of those kept so far, kept where faster; a trial that does not fit
    # (PlanningError) is skipped
    from types import SimpleNamespace

    def scheduled_by(cycles):
        tried = []

        def scheduled(ops):
            tried.append(ops)
            if "c" in ops and len(ops) < 3:  # c with some of the others: no room
                raise PlanningError("does not fit")
            return SimpleNamespace(key=(cycles(ops),))
        return scheduled, tried

    best = SimpleNamespace(key=(100,))
    # all at once is faster: kept, nothing else tried
    scheduled, tried = scheduled_by(lambda ops: 90)
    kept, ops = scratchpad.search._kept_trials(best, ["a", "b", "c"], ["a", "b", "c"], scheduled, "trials")
    assert (kept.key, ops, tried) == ((90,), frozenset("abc"), [frozenset("abc")])
    # all at once is slower: a alone is faster (kept), then a+b is not, then a+c does not fit
    scheduled, tried = scheduled_by(lambda ops: {frozenset("a"): 95}.get(ops, 120))
    kept, ops = scratchpad.search._kept_trials(best, ["a", "b", "c"], ["a", "b", "c"], scheduled, "trials")
    assert (kept.key, ops) == ((95,), frozenset("a"))
    assert tried == [frozenset("abc"), frozenset("a"), frozenset("ab"), frozenset("ac")]
    # one op: tried once
    scheduled, tried = scheduled_by(lambda ops: 120)
    assert scratchpad.search._kept_trials(best, ["a"], ["a"], scheduled, "trials") == (best, frozenset())
    assert tried == [frozenset("a")]

"""The floor for every schedule that waits on the cones of a fully connected
layer's input (pyocc/planning/scratchpad/cones.py), checked against brute
force: the fewest cycles of any m positions over every subset of a small
grid, and a small net's floor worked out pixel by pixel from its ONNX
definition, not from the program's windows."""

from __future__ import annotations

import itertools
import math
import random

import onnx
from onnx import TensorProto
from xdsl.context import Context
from xdsl.dialects import func

from pyocc.analysis.npu_program import npu_program
from pyocc.frontend.onnx_import import import_model
from pyocc.pipelines import Options, run_passes, tensor_passes
from pyocc.planning.npu_simulator import NpuCost
from pyocc.planning.scratchpad import NpuOp, NpuProgram, NpuTensor, cone_floor, run_scratchpad
from pyocc.planning.scratchpad.cones import _fewest
from tests.graphs import GraphBuilder
from tests.planning.test_scratchpad import _light_program


def _brute_fewest(rows: int, cols: int, cells: dict[tuple[int, int, int, int], int]) -> list[int]:
    """The fewest cycles of the cells hit by any m positions, over every subset."""
    grid = [(r, c) for r in range(rows) for c in range(cols)]
    fewest = [math.inf] * (len(grid) + 1)
    for m in range(len(grid) + 1):
        for picked in itertools.combinations(grid, m):
            hit = sum(w for (a, b, c, d), w in cells.items() if any(a <= r <= b and c <= q <= d for r, q in picked))
            fewest[m] = min(fewest[m], hit)
    return fewest


def test_the_fewest_cycles_of_m_positions_are_the_brute_force_minimum():
    rng = random.Random(71)
    for rows, cols in ((1, 1), (1, 4), (7, 1), (2, 3), (3, 2), (3, 3), (4, 3), (2, 5), (4, 4)):
        for top in (1000, 1 << 40):  # the states in int32, and in int64
            cells = {}
            for _ in range(rng.randint(1, 40)):
                a, b = sorted(rng.randrange(rows) for _ in range(2))
                c, d = sorted(rng.randrange(cols) for _ in range(2))
                cells[(a, b, c, d)] = rng.randint(0, top)
            assert _fewest(rows, cols, cells) == _brute_fewest(rows, cols, cells), (rows, cols, cells)


def _program_of(model: onnx.ModelProto) -> NpuProgram:
    """The NPU program of `model`, in tensor form as pyocc compiles it."""
    module = import_model(model)
    run_passes(Context(), module, tensor_passes(Options()))
    return npu_program(next(op for op in module.walk() if isinstance(op, func.FuncOp)))


def _small_net(classes: int) -> NpuProgram:
    """x (1x2x6x6) -> 3x3 conv (4 channels) -> ReLU -> 3x3 conv (4) -> 2x2
    max pool (1x4x3x3) -> flatten -> fully connected (36 -> 18) -> ReLU ->
    fully connected (18 -> `classes`): the program pyocc schedules."""
    b = GraphBuilder("cones", seed=71)
    x = b.input("x", TensorProto.FLOAT, [1, 2, 6, 6])
    y = b.op("MaxPool", b.conv(b.op("Relu", b.conv(x, 2, 4, 3)), 4, 4, 3), kernel_shape=[2, 2], strides=[2, 2])
    y = b.op("Gemm", b.op("Flatten", y), b.weight([18, 36]), b.bias(18), transB=1)  # as the light models' are
    y = b.op("Gemm", b.op("Relu", y), b.weight([classes, 18]), b.bias(classes), transB=1)
    return _program_of(b.model([(y, TensorProto.FLOAT)]))


def test_a_small_nets_floor_is_its_pixel_by_pixel_brute_force():
    """The first fully connected layer's 36 inputs are 9 positions of the
    pool's 3 x 3 (4 channels each, 18 x 4 x 4 = 288 weight bytes a
    position). Position (r, c) needs rows and columns 2r..2r+1 of one
    channel of the second conv, so rows and columns 2r-1..2r+2 of every
    channel of the first (72 MACs a pixel: 4 outputs x 2 inputs x 3 x 3).
    The second conv's one channel, the ReLU and the pool are left out."""
    cost, sram = NpuCost(macs_per_cycle=1, sram_bytes_per_cycle=64, dram_bytes_per_cycle=2), 1024
    program = _small_net(classes=50)
    tensors = program.by_name()
    weights = 36 * 18 * 4 + 18 * 50 * 4 + 50 * 4  # the first layer's matrix, the second's and its bias

    def pixels(picked):
        return {(y, x) for r, c in picked for y in range(max(0, 2 * r - 1), min(5, 2 * r + 2) + 1)
                for x in range(max(0, 2 * c - 1), min(5, 2 * c + 2) + 1)}

    grid = [(r, c) for r in range(3) for c in range(3)]
    expected = max(min(72 * len(pixels(p)) for p in itertools.combinations(grid, m))
                   + max(0, weights - (m - 1) * 288 - sram) // 2 for m in range(1, 10))
    floor = cone_floor(program, cost, sram)
    assert floor is not None and floor.cycles == expected
    assert floor.grid == (3, 3) and 1 < floor.positions < 9  # the cones' overlap decides: not the first or last
    assert floor.cycles == floor.cone_cycles + floor.port_cycles
    # the program carries the columns the floor reads
    windowed = [op for op in program.ops if op.col_windows]  # the convs and the pool
    assert len(windowed) == 3 and all(op.col_windows == op.row_windows for op in windowed)
    assert {t.cols for t in tensors.values() if t.rows == 6} == {6}


def test_pyoccs_schedule_of_inception_v1_is_not_below_its_cone_floor():
    """Where the cone floor is the one that binds (above the bound and the
    ops' compute floors), what pyocc schedules takes longer."""
    program = _light_program("inception_v1")
    result = run_scratchpad(program, 1 << 20)
    floor = cone_floor(program, result.cost, 1 << 20)
    assert floor is not None and floor.grid == (1, 1)
    assert floor.cycles > max(result.bound_cycles, program.compute_floor_cycles(result.cost))
    assert result.floor_cycles == floor.cycles <= result.cycles


def test_a_weight_two_ops_share_waits_once():
    """Two fully connected layers after the gate read one weight: one load
    of it, kept in SRAM, serves both, so it counts once in what waits."""
    b = GraphBuilder("tied", seed=71)
    x = b.input("x", TensorProto.FLOAT, [1, 64])
    tied = b.weight([256, 256])
    y = b.op("Gemm", x, b.weight([256, 64]), b.bias(256), transB=1)
    for _ in range(2):
        y = b.op("Gemm", b.op("Relu", y), tied, b.bias(256), transB=1)
    program = _program_of(b.model([(y, TensorProto.FLOAT)]))
    cost, sram = NpuCost(), 300 << 10
    floor = cone_floor(program, cost, sram)
    waiting = 256 * 64 * 4 + 256 * 256 * 4 + 2 * 256 * 4  # the gate's matrix, the tied weight once, two biases
    assert floor is not None and floor.port_cycles == (waiting - sram) // cost.dram_bytes_per_cycle
    assert run_scratchpad(program, sram, cost).cycles >= floor.cycles


def test_two_readers_of_one_tensor_need_no_more_than_their_union():
    """T is read by a 3x1 and a 1x3 convolution whose sum the fully
    connected layer reads: a position needs a cross of T (its union), not
    the 3 x 3 square around it. The floor counts a part of the cross."""
    rows, per_pixel, matrix = 3, 1000, 36 * 10 * 4
    size = 4 * rows * rows * 4

    def conv(name, read, macs, weight, row, col):
        return NpuOp(name, macs, (read,), (weight,), (name,), rows, 0, 4, row_windows=((read, *row),),
                     in_channels=4, reduced_inputs=(read,), reduced_weights=(weight,), col_windows=((read, *col),))

    tensors = [NpuTensor("x", size, "input", rows, cols=rows, nchw=True)]
    tensors += [NpuTensor(n, size, "activation", rows, cols=rows, nchw=True) for n in ("t", "a", "b", "s")]
    tensors += [NpuTensor(n, 64, "weight") for n in ("wt", "wa", "wb")]
    tensors += [NpuTensor("w", matrix, "weight"), NpuTensor("y", 40, "output", nchw=True)]
    ops = [conv("t", "x", per_pixel * rows * rows, "wt", (1, 1, 0), (1, 1, 0)),
           conv("a", "t", 1, "wa", (3, 1, 1), (1, 1, 0)), conv("b", "t", 1, "wb", (1, 1, 0), (3, 1, 1)),
           NpuOp("s", 0, ("a", "b"), (), ("s",), rows, 0, 4, row_windows=(("a", 1, 1, 0), ("b", 1, 1, 0)),
                 col_windows=(("a", 1, 1, 0), ("b", 1, 1, 0))),
           NpuOp("y", 36 * 10, ("s",), ("w",), ("y",), 1, 0, 10, in_channels=36, reduced_inputs=("s",),
                 reduced_weights=("w",))]
    cost = NpuCost(macs_per_cycle=1, sram_bytes_per_cycle=1 << 20, dram_bytes_per_cycle=1)
    floor = cone_floor(NpuProgram(tuple(tensors), tuple(ops)), cost, 0)

    def cross(r, c):
        return ({(y, c) for y in range(r - 1, r + 2) if 0 <= y < rows}
                | {(r, x) for x in range(c - 1, c + 2) if 0 <= x < rows})

    grid = [(r, c) for r in range(rows) for c in range(rows)]
    exact = max(min(per_pixel * len(set().union(*(cross(*q) for q in picked)))
                    for picked in itertools.combinations(grid, m)) + matrix - (m - 1) * (matrix // 9)
                for m in range(1, 10))
    assert floor is not None and 0 < floor.cone_cycles and floor.cycles <= exact


def test_a_sequences_positions_are_not_told_from_its_channels():
    """A 1-d convolution's [1, C, L] tensors are not NCHW: the floor follows
    no cone through them (the first element of the flattened input needs
    only the first columns of each, not all of them)."""
    b = GraphBuilder("sequence", seed=71)
    x = b.input("x", TensorProto.FLOAT, [1, 8, 64])
    y = b.op("Relu", b.op("Conv", x, b.weight([16, 8, 3]), b.bias(16), kernel_shape=[3], pads=[1, 1]))
    y = b.op("Conv", y, b.weight([16, 16, 3]), b.bias(16), kernel_shape=[3], pads=[1, 1])
    y = b.op("Gemm", b.op("Flatten", y), b.weight([200, 16 * 64]), b.bias(200), transB=1)
    program = _program_of(b.model([(y, TensorProto.FLOAT)]))
    assert not any(t.nchw for t in program.tensors if t.kind == "activation" and t.size > 200 * 4)
    assert cone_floor(program, NpuCost(macs_per_cycle=1), 64 << 10) is None


def _concat_net(p_macs: int, q_macs: int, rows: int) -> NpuProgram:
    """x -> p (1x1, `p_macs`) -> a (1x1); x -> q (`q_macs`) -> b; concat(a, b)
    in place -> c -> a global pool (`rows` x `rows`) -> g -> fully connected
    (w: 4,000 bytes): one channel of c is one of a's or one of b's."""
    f = 4 * rows * rows  # bytes of one channel

    def conv(name, read, macs, weight):
        return NpuOp(name, macs, (read,), (weight,), (name,), rows, 0, 4, row_windows=((read, 1, 1, 0),),
                     in_channels=4, reduced_inputs=(read,), reduced_weights=(weight,),
                     col_windows=((read, 1, 1, 0),))

    tensors = [NpuTensor("x", 4 * f, "input", rows, cols=rows, nchw=True)]
    tensors += [NpuTensor(n, 4 * f, "activation", rows, cols=rows, nchw=True) for n in "pqab"]
    tensors += [NpuTensor("c", 8 * f, "activation", rows, cols=rows, nchw=True), NpuTensor("g", 32, "activation", nchw=True),
                NpuTensor("y", 500 * 4, "output", nchw=True)]
    tensors += [NpuTensor(n, 64, "weight") for n in ("wp", "wq", "wa", "wb")]
    tensors += [NpuTensor("w", 8 * 500 * 4, "weight")]
    ops = [conv("p", "x", p_macs, "wp"), conv("q", "x", q_macs, "wq"), conv("a", "p", 16, "wa"),
           conv("b", "q", 16, "wb"),
           NpuOp("c", 0, ("a", "b"), (), ("c",), rows, 0, 1, row_windows=(("a", 1, 1, 0), ("b", 1, 1, 0)),
                 joins=(4, 4), col_windows=(("a", 1, 1, 0), ("b", 1, 1, 0))),
           NpuOp("g", 8 * rows * rows, ("c",), (), ("g",), 1, 0, 8, row_windows=(("c", rows, 1, 0),),
                 col_windows=(("c", rows, 1, 0),)),
           NpuOp("y", 8 * 500, ("g",), ("w",), ("y",), 1, 0, 500, in_channels=8, reduced_inputs=("g",),
                 reduced_weights=("w",))]
    return NpuProgram(tuple(tensors), tuple(ops))


def test_one_channel_of_a_concat_needs_only_its_cheapest_input():
    cost = NpuCost(macs_per_cycle=1, sram_bytes_per_cycle=1 << 20, dram_bytes_per_cycle=1)
    for p_macs, q_macs in ((9000, 700), (700, 9000)):
        program = _concat_net(p_macs, q_macs, rows=4)
        floor = cone_floor(program, cost, sram_size=1000)
        # the element comes from a (needing p whole) or from b (q whole); its conv (a or b) is one channel, left out
        assert floor is not None and floor.cone_cycles == min(p_macs, q_macs)
        assert floor.port_cycles == 8 * 500 * 4 - 1000


def test_a_grid_of_positions_behind_a_concat_has_no_cone_floor():
    """A schedule could take each position's element from another input of
    the concat: the floor does not pick one (a pool of 2 x 2 windows leaves
    a 2 x 2 grid)."""
    program = _concat_net(9000, 700, rows=4)
    ops = list(program.ops)
    ops[5] = NpuOp("g", 8 * 4, ("c",), (), ("g",), 2, 0, 8, row_windows=(("c", 2, 2, 0),),
                   col_windows=(("c", 2, 2, 0),))
    tensors = [NpuTensor("g", 8 * 4 * 4, "activation", 2, cols=2, nchw=True) if t.name == "g" else t
               for t in program.tensors]
    ops[6] = NpuOp("y", 32 * 500, ("g",), ("w",), ("y",), 1, 0, 500, in_channels=32, reduced_inputs=("g",),
                   reduced_weights=("w",))
    tensors = [NpuTensor("w", 32 * 500 * 4, "weight") if t.name == "w" else t for t in tensors]
    assert cone_floor(NpuProgram(tuple(tensors), tuple(ops)), NpuCost(), 1000) is None


def test_vgg19_at_1mib_takes_more_than_1_3_times_its_bound_in_any_schedule():
    """Issue 22's goal of at most 1.3 x the bound per model cannot be met by
    VGG-19 at 1 MiB: fc6's 411 MB of weights (8 MiB a position of pool5)
    wait on the convolutions' cones (docs/scratchpad.md, stop 71)."""
    program = _light_program("vgg19")
    floor = cone_floor(program, NpuCost(), 1 << 20)
    assert floor is not None and floor.gate == "r39" and floor.grid == (7, 7)
    assert floor.cycles / program.bound_cycles(NpuCost()) > 1.3

"""`--scratchpad` runs the scheduled program on the host: dnn-npu-schedule
writes the scheduler's result as IR (SRAM buffers at their planned offsets,
DMA with prefetch and write-backs), dnn-dma-to-memcpy makes each transfer a
copy between the two arenas, and the numbers must still match onnxruntime
(random weights and inputs). At 1 MiB every op of SqueezeNet's stem runs on
bands of rows: strided copies of its input rows and halo in, of its output
rows out, pads adjusted per band; and its chains of ops (conv1, its pool
and the squeeze conv; each fire module from its expands to the next
squeeze) run as chain cascades, band by band, each op writing the rows
its readers' bands read into an SRAM buffer they read; a fire module's
concat runs in place there (each expand writes its channels of the
concat's band of rows). ShuffleNet's
concats run in place (at 1.5 MiB): each input's producer writes its channel band of the
concat's output (one SRAM buffer, or its band of the output's DRAM home). (A
simulated cascade, whose bands are byte shares, is refused in one line:
filecheck/rewrites/dnn_npu_schedule.mlir.)"""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest

import pyocc
from pyocc.testing.light_models import onnxruntime_reference

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("name, sram", [
    ("squeezenet", 16 << 20), ("shufflenet", 16 << 20),
    ("bvlc_alexnet", 16 << 20),  # fc6-fc8 stream their weights in blocks of output columns
    ("resnet50", 16 << 20),  # four convolutions (residual ones too) in blocks of output channels
    ("squeezenet", 1 << 20),  # row bands (with channel blocks too) and strided DMA
    # concats in place: producers write their channels of the concat's output (at 1.5 MiB: at 1 MiB,
    # and at 2 MiB since loads no longer wait for stores to be waited on, the schedule that copies them
    # simulates faster, and is kept)
    ("shufflenet", 3 << 19),
    # a residual unit's input, loaded by rows for its first convolution, is copied in SRAM for its last
    ("shufflenet", 1 << 20),
    # a load issued after a store of its bytes (not waited on) reads them; pool_proj writes its concat
    # band as the one tile of a 1x1 tiling; two 1x1 convolutions of a module's input read its bands in turn
    ("inception_v1", 1 << 20),
    # a residual block's first 1x1 convolution runs on the bands of rows of the block output before it
    ("resnet50", 1 << 20),
    # the max pools' bands of rows are copied into their whole outputs in SRAM (`_assembled`)
    ("bvlc_alexnet", 1 << 20),
    # rolled chains: a layer's 1x1 convolution computes each row once for its 3x3; in blocks 3 and 4,
    # the tiles of a 1x1 (bands of rows of blocks of channels) copied into its whole output in SRAM
    ("densenet121", 1 << 20),
])
def test_scheduled_program_matches_onnxruntime(name: str, sram: int) -> None:
    model, inputs, expected = onnxruntime_reference(name)
    compiled = pyocc.compile(model, scratchpad=sram, kernels="numpy")
    got = compiled.run(inputs)
    for value, want in zip(got.values(), expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
    report = compiled.memory_report()
    assert report.npu is not None and report.npu["sram_size"] == sram
    assert report.npu["sram_bytes"] <= sram
    # copies in and out, no DMA left for the host lowering; the SRAM is one arena of the given size
    text = str(compiled.module)
    assert "dnn.memcpy" in text and "dnn.dma_start" not in text
    assert f'dnn.pool_init {{size = {sram} : i64, pool_name = "sram"}}' in text
    if sram == 1 << 20:
        # what runs tiles op by op, by rows (the report says: no cascades),
        # and moves each band of rows by one strided copy
        assert report.npu["cascades"] is False
        assert any(tiles["row_bands"] > 1 for tiles in report.npu["tiled_ops"].values())
        assert "source_stride" in text
        # a chain cascade: an op writes a band of rows that the next op reads from SRAM
        assert re.search(r'npu.writes = \[\["[^"]+", "rows', text) or name != "squeezenet"
    if name in ("inception_v1", "squeezenet") and sram == 1 << 20:
        # each band of the image is loaded once: a band loaded ahead goes where the first convolution's
        # output band still finds room (`_Scheduler._clear_of_outputs`), not evicted for it and loaded again
        bands = re.findall(r'npu.buffer = "b\d+:data:(rows\d+:\d+)"', text)
        assert len(bands) > 1 and len(bands) == len(set(bands))
    if name == "inception_v1" and sram == 1 << 20:
        # siblings (`_sibling_bands`): one op reads a band of rows, then another op reads that band
        reads = re.findall(r'npu.reads = \[\["([^"]+)", "((?:ch[^"|]*\|)?rows[^"]*)"[^\n]*npu.writes = \[\["([^"]+)"', text)
        assert any(a[:2] == b[:2] and a[2] != b[2] for a, b in zip(reads, reads[1:], strict=False))
    if name == "resnet50" and sram == 1 << 20:
        assert re.search(r'npu.reads = \[\["[^"]+", "tile\d+\.0/([2-9]|\d\d+)x1"', text)
        # the second bottleneck in one rolled chain: its input r15 loaded band by band for its first 1x1,
        # and its rows one behind for the residual its last 1x1 (r25) adds copied out of two of those
        # bands into one buffer, SRAM to SRAM, not loaded again
        copies = re.findall(r'dnn.memcpy[^\n]*npu.reads = \[\["r15", "rows\d+:\d+"[^\n]*'
                            r'npu.writes = \[\["r15", "(rows\d+:\d+\|copy)"[^\n]*npu.op = "r25"', text)
        assert 2 in collections.Counter(copies).values()
    if name == "squeezenet" and sram == 1 << 20:
        # a fire module's concat runs in place in its chain: each expand writes its channels of the
        # concat's band of rows, which the next squeeze reads whole
        assert re.search(r'npu.writes = \[\["[^"]+", "ch\d+:\d+/\d+\|rows', text)
        # the global pool runs on the last convolution's blocks of output channels, each read where
        # the convolution wrote it (the 676 KB it makes never goes to DRAM)
        assert re.search(r'dnn.global_average_pool ins[^\n]*npu.reads = \[\["[^"]+", "tile0\.\d+/1x\d+"', text)
        # a fire module's input, assembled in SRAM band by band, its bands of rows copied out of it
        # for the next module's chain (`_assembled`, `slices`), instead of stored and loaded back by rows
        copied_out = r'dnn.memcpy[^\n]*npu.reads = \[\["([^"]+)", "all"[^\n]*npu.writes = \[\["\1", "rows\d+:\d+\|copy"'
        assert re.search(copied_out, text)
    if name == "shufflenet" and sram == 1 << 20:
        # rows copied out of a larger band, SRAM to SRAM, by a strided copy the schedule counts as a compute
        assert re.search(r'dnn.memcpy[^\n]*npu.writes = \[\["[^"]+", "rows\d+:\d+\|copy"[^\n]*npu.op = "', text)
    if name == "bvlc_alexnet" and sram == 1 << 20:
        # a band of rows of every channel copied into its rows of the whole output, SRAM to SRAM
        assert re.search(r'dnn.memcpy[^\n]*count = 96[^\n]*npu.writes = \[\["[^"]+", "rows\d+:\d+\|assembled"', text)
    if name == "densenet121" and sram == 1 << 20:
        # a 3x3's band of rows copied out of two bands of the 1x1 before it: two copies into one buffer
        into = re.findall(r'dnn.memcpy[^\n]*npu.writes = \[\["[^"]+", "(rows\d+:\d+\|copy)"', text)
        assert len(set(into)) < len(into)
        # a tile of a 1x1 convolution copied into the rows of its channels of the whole output, which the
        # 3x3 after it reads (`_assembled`'s `tiles`), instead of stored and loaded back whole
        assert re.search(r'dnn.memcpy[^\n]*npu.writes = \[\["[^"]+", "rows\d+:\d+\|ch\d+:\d+\|assembled"', text)
    if name == "shufflenet" and sram == 3 << 19:
        # an op writes its channel band of a concat's output (no dnn.concat copies them)
        assert re.search(r'npu.writes = \[\["[^"]+", "ch\d+:\d+/\d+', text)


def test_scheduled_program_runs_native_kernels() -> None:
    # the default kernels: every op of the schedule runs generated code, the
    # convolutions whose im2col the plan gives no scratch (the NPU has none)
    # in register tiles or direct loops; at 256 KiB, ShuffleNet's stage-4 shuffles given back
    # as transposes too (19 ops called numpy before, 4 at 1 MiB)
    model, inputs, expected = onnxruntime_reference("shufflenet")
    compiled = pyocc.compile(model, scratchpad="256KiB")
    assert compiled.numpy_sites == 0 and compiled.native_sites > 100
    for value, want in zip(compiled.run(inputs).values(), expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
    assert "dnn.transpose" in str(compiled.module)


def _model(name: str, nodes: list, inputs: dict[str, list[int]], outputs: dict[str, list[int]],
           weights: list | None = None) -> object:
    """An opset-17 ONNX model `name` of `nodes`, its float graph inputs and
    outputs of the given shapes, `weights` its initializers."""
    from onnx import TensorProto, helper

    def values(shapes: dict[str, list[int]]) -> list:
        return [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in shapes.items()]

    graph = helper.make_graph(nodes, name, values(inputs), values(outputs), weights or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _residual_block() -> object:
    """Three 3x3 convolutions of 64 channels on 16x16, the third adding the
    first's output (a residual), random weights."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)

    def weight(name: str) -> object:
        return numpy_helper.from_array((rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32), name)

    def bias(name: str) -> object:
        return numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a0"], ["a"]),
        helper.make_node("Conv", ["a", "w2", "b2"], ["h0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h0"], ["h"]),
        helper.make_node("Conv", ["h", "w3", "b3"], ["s"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["s", "a"], ["y0"]),
        helper.make_node("Relu", ["y0"], ["y"]),
    ]
    return _model("residual", nodes, {"x": [1, 64, 16, 16]}, {"y": [1, 64, 16, 16]},
                  [weight("w1"), bias("b1"), weight("w2"), bias("b2"), weight("w3"), bias("b3")])


def test_channel_blocks_load_their_block_of_the_residual() -> None:
    # at 128 KiB the third convolution runs in blocks of output channels and
    # the residual (64 KiB, evicted by then) comes back block by block, each
    # a contiguous slice of it, instead of whole for every block
    from pyocc.testing.random_graphs import compile_and_compare

    model = _residual_block()
    inputs = {"x": np.random.default_rng(1).standard_normal((1, 64, 16, 16)).astype(np.float32)}
    compiled, problem = compile_and_compare(model, inputs, scratchpad=128 << 10, kernels="numpy")
    assert problem is None, problem
    blocks = compiled.memory_report().npu["tiled_ops"]["y"]["channel_blocks"]
    assert blocks > 1
    # each block of the convolution reads its block of `a` (a buffer of its channels)
    read = re.findall(r'residual %\w+ : [^)]*memref<1x(\d+)x16x16xf32>\)[^\n]*\["a", "(block\d+/\d+)"',
                      str(compiled.module))
    assert len({part for _, part in read}) == blocks and all(int(c) < 64 for c, _ in read)


def _y_tiles_read_where_written(text: str, part: str) -> set[str]:
    """The tiles of y (parts matching the regular expression `part`) that
    the module `text` writes, once checked that the computes that read
    tiles of y read exactly those (each where it was written)."""
    written = set(re.findall(rf'npu.writes = \[\["y", "({part})"', text))
    assert set(re.findall(rf'npu.reads = \[\["y", "({part})"', text)) == written
    return written


def _conv_then(reader: str) -> object:
    """A 3x3 convolution of 16 to 64 channels on 8x8 (36 KiB of filters,
    random), a ReLU, then `reader`: "sum", a 1x1 convolution to 16
    channels; "pool", a global average pool."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(3)
    weights = [numpy_helper.from_array((rng.standard_normal((64, 16, 3, 3)) / 12).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["h"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["h"], ["y"])]
    if reader == "sum":
        weights.append(numpy_helper.from_array((rng.standard_normal((16, 64, 1, 1)) / 8).astype(np.float32), "v"))
        nodes.append(helper.make_node("Conv", ["y", "v"], ["s"]))
        shape = [1, 16, 8, 8]
    else:
        nodes.append(helper.make_node("GlobalAveragePool", ["y"], ["s"]))
        shape = [1, 64, 1, 1]
    return _model(reader, nodes, {"x": [1, 16, 8, 8]}, {"s": shape}, weights)


@pytest.mark.parametrize("reader", ["sum", "pool"])
def test_a_reader_runs_on_its_producers_channel_blocks(reader: str) -> None:
    # at 32 KiB the convolution streams its filters in blocks of output
    # channels; the op after it runs block by block beside it, reading each
    # tile where the convolution wrote it (the 1x1 convolution summing over
    # the blocks, the pool on the same blocks): y never goes to DRAM
    from pyocc.testing.random_graphs import compile_and_compare

    inputs = {"x": np.random.default_rng(4).standard_normal((1, 16, 8, 8)).astype(np.float32)}
    compiled, problem = compile_and_compare(_conv_then(reader), inputs, scratchpad=32 << 10, kernels="numpy")
    assert problem is None, problem
    text = str(compiled.module)
    assert len(_y_tiles_read_where_written(text, r"tile0\.\d+/1x\d+")) > 1
    # no copy moves y between the arenas, and no op reads it whole
    assert not [line for line in text.splitlines() if "dnn.memcpy" in line and "%y" in line]
    assert '"y", "all"' not in text


def _conv_then_max_pool() -> object:
    """A 3x3 convolution of 8 to 64 channels on 32x32 (random filters and
    bias), a ReLU, then a 3x3 max pool of stride 2."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(5)
    weights = [numpy_helper.from_array((rng.standard_normal((64, 8, 3, 3)) / 8).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["h"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["h"], ["y"]),
             helper.make_node("MaxPool", ["y"], ["s"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    return _model("conv_then_max_pool", nodes, {"x": [1, 8, 32, 32]}, {"s": [1, 64, 16, 16]}, weights)


def test_a_producer_is_tiled_by_channel_blocks_alone_for_its_pool() -> None:
    # at 64 KiB the convolution ran in 2 bands of rows of 63 channel blocks,
    # each tile stored, and the max pool loaded y again in blocks of its
    # own; now it runs in channel blocks alone (`_blocks_alone`), every row
    # in each tile, and the pool reads each tile where it was written
    from pyocc.testing.random_graphs import compile_and_compare

    inputs = {"x": np.random.default_rng(6).standard_normal((1, 8, 32, 32)).astype(np.float32)}
    compiled, problem = compile_and_compare(_conv_then_max_pool(), inputs, scratchpad=64 << 10, kernels="numpy")
    assert problem is None, problem
    tiled = compiled.memory_report().npu["tiled_ops"]["y"]
    assert tiled["row_bands"] == 1 and tiled["channel_blocks"] > 1
    text = str(compiled.module)
    assert len(_y_tiles_read_where_written(text, r"tile0\.\d+/1x\d+")) == tiled["channel_blocks"]
    assert not [line for line in text.splitlines() if "dnn.memcpy" in line and "%y" in line]


def _read_row_for_row() -> object:
    """x (32 channels of 32x32) -> y = ReLU(1x1 convolution) -> z =
    ReLU(1x1 convolution of y) -> a 3x3 convolution of z plus y (random
    weights): y is read row for row by z and again as the residual."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(7)
    weights = [numpy_helper.from_array((rng.standard_normal(shape) / 6).astype(np.float32), name)
               for name, shape in (("w", (32, 32, 1, 1)), ("v", (32, 32, 1, 1)), ("u", (32, 32, 3, 3)))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["y"]),
             helper.make_node("Conv", ["y", "v"], ["b"]), helper.make_node("Relu", ["b"], ["z"]),
             helper.make_node("Conv", ["z", "u"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["c", "y"], ["s"])]
    return _model("residual_block", nodes, {"x": [1, 32, 32, 32]}, {"s": [1, 32, 32, 32]}, weights)


def test_a_reader_runs_on_its_producers_row_bands() -> None:
    # at 32 KiB y streams out in bands of rows (the residual reads it
    # later); the 1x1 convolution after it runs on the same bands, each
    # right after the tile that makes it, reading the tile in SRAM instead
    # of loading y's rows back from DRAM
    from pyocc.testing.random_graphs import compile_and_compare

    inputs = {"x": np.random.default_rng(8).standard_normal((1, 32, 32, 32)).astype(np.float32)}
    compiled, problem = compile_and_compare(_read_row_for_row(), inputs, scratchpad=32 << 10, kernels="numpy")
    assert problem is None, problem
    text = str(compiled.module)
    assert len(_y_tiles_read_where_written(text, r"tile\d+\.0/\d+x1")) > 1


def _pools() -> object:
    """A 3x3 max pool (stride 2) of 64 channels of 32x32, then a global
    average pool: no weights, every input channel read by its own output
    channel only."""
    from onnx import helper

    nodes = [
        helper.make_node("MaxPool", ["x"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["m"], ["y"]),
    ]
    return _model("pools", nodes, {"x": [1, 64, 32, 32]}, {"y": [1, 64, 1, 1]})


def test_pools_run_in_channel_blocks() -> None:
    # at 24 KiB one band of the max pool's output rows still reads three rows
    # of all 64 input channels (24 KiB, double-buffered 48), and the global
    # pool reads its whole 64 KiB input: both were refused ("does not fit
    # even tiled"); each now runs on blocks of channels, a block of the
    # input in, the same block of the output out
    from pyocc.testing.random_graphs import compile_and_compare

    model = _pools()
    inputs = {"x": np.random.default_rng(2).standard_normal((1, 64, 32, 32)).astype(np.float32)}
    compiled, problem = compile_and_compare(model, inputs, scratchpad=24 << 10, kernels="numpy")
    assert problem is None, problem
    tiled = compiled.memory_report().npu["tiled_ops"]
    assert tiled["m"]["channel_blocks"] > 1 and tiled["y"]["channel_blocks"] > 1
    text = str(compiled.module)
    pooled = re.findall(r'dnn.global_average_pool ins\(%\w+ : memref<1x(\d+)x16x16xf32>\)', text)
    assert pooled and all(int(c) < 64 for c in pooled)


def _wide_conv() -> object:
    """A 3x3 convolution of 64 input channels (64 KiB) to 16 (with bias,
    plus a residual input, then a ReLU: fused), random weights."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["s"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["s", "r"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    return _model("wide_conv", nodes, {"x": [1, 64, 16, 16], "r": [1, 16, 16, 16]}, {"y": [1, 16, 16, 16]},
                  [numpy_helper.from_array((rng.standard_normal((16, 64, 3, 3)) / 24).astype(np.float32), "w"),
                   numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")])


def _wide_gemm() -> object:
    """A fully connected layer of 4096 inputs (16 KiB; its weight 1 MiB) to
    64, alpha 0.5, beta 2 (the bias added once, however the sum is split),
    then a ReLU (fused)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Gemm", ["x", "w", "c"], ["g"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    return _model("wide_gemm", nodes, {"x": [1, 4096]}, {"y": [1, 64]},
                  [numpy_helper.from_array((rng.standard_normal((64, 4096)) / 64).astype(np.float32), "w"),
                   numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "c")])


@pytest.mark.parametrize("build, inputs", [
    (_wide_conv, {"x": (1, 64, 16, 16), "r": (1, 16, 16, 16)}),
    (_wide_gemm, {"x": (1, 4096)}),
])
def test_sums_over_input_channel_blocks(build: object, inputs: dict[str, tuple[int, ...]]) -> None:
    # at 16 KiB even one band of output rows (or one output column of the
    # fully connected layer) needs every input channel: the op was refused
    # ("does not fit even tiled"); it now sums its output tile over blocks
    # of input channels: the first block adds the bias (and the residual),
    # the others the partial sums of the blocks before, the last applies
    # the ReLU
    from pyocc.testing.random_graphs import compile_and_compare

    model = build()  # type: ignore[operator]
    rng = np.random.default_rng(5)
    values = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in inputs.items()}
    compiled, problem = compile_and_compare(model, values, scratchpad=16 << 10, kernels="numpy")
    assert problem is None, problem
    tiles = compiled.memory_report().npu["tiled_ops"]["y"]
    assert tiles["input_channel_blocks"] > 1
    text = str(compiled.module)
    # one op per block; the running sum comes in as the residual or C, the ReLU only on the last block
    ops = re.findall(r'dnn\.(?:conv|gemm) ins\(([^)]*)\).*?\{(.*?)npu\.reads', text)
    assert len(ops) >= tiles["input_channel_blocks"]
    assert sum('activation = "relu"' in props for _, props in ops) == len(ops) // tiles["input_channel_blocks"]
    assert all(("residual" in operands or ", %" in operands.split(":")[0]) for operands, _ in ops)


def _dense_block() -> object:
    """A dense block of two layers: each 3x3 convolution (ReLU) adds 16
    channels to the block's tensor (a concat), and a 1x1 convolution
    (bias, ReLU) reads all 48 channels of it, random weights."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(6)

    def weight(name: str, shape: tuple[int, ...]) -> object:
        return numpy_helper.from_array((rng.standard_normal(shape) / 12).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a0"], ["a"]),
        helper.make_node("Concat", ["x", "a"], ["c1"], axis=1),
        helper.make_node("Conv", ["c1", "w2"], ["b0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["b0"], ["b"]),
        helper.make_node("Concat", ["c1", "b"], ["c2"], axis=1),
        helper.make_node("Conv", ["c2", "w3", "b3"], ["y0"]),
        helper.make_node("Relu", ["y0"], ["y"]),
    ]
    return _model("dense_block", nodes, {"x": [1, 16, 16, 16]}, {"y": [1, 8, 16, 16]},
                  [weight("w1", (16, 16, 3, 3)), weight("w2", (16, 32, 3, 3)), weight("w3", (8, 48, 1, 1)),
                   numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b3")])


def test_a_dense_block_sums_over_its_bands() -> None:
    # the 1x1 convolution reads the block's tensor, a concat in place whose
    # bands (c1, b) its producers wrote: it sums over
    # those bands, each read where it is (its own SRAM buffer, or loaded
    # from its place in the block's DRAM home), instead of the whole tensor
    # (at 40 KiB that schedule is the fastest the scheduler finds: 30,549
    # simulated cycles against 30,925 with the concats in place but whole
    # reads and 32,137 copying them; from 26 to 38 KiB, since a sum over
    # input channel blocks competes with the other tilings, copying them
    # with the second 3x3 convolution summed over its input channels is
    # faster: 35,807 against 39,259 summed over the bands at 29 KiB)
    from pyocc.testing.random_graphs import compile_and_compare

    model = _dense_block()
    inputs = {"x": np.random.default_rng(7).standard_normal((1, 16, 16, 16)).astype(np.float32)}
    compiled, problem = compile_and_compare(model, inputs, scratchpad=40 << 10, kernels="numpy")
    assert problem is None, problem
    assert compiled.memory_report().npu["tiled_ops"]["y"]["input_channel_blocks"] == 2
    text = str(compiled.module)
    # each block of the 1x1 convolution reads one band of c2: c1 (x and a, 32 channels: a concat of a
    # graph input is not in place) and b (16), with its filters' channels
    # (of a band of its rows, when the 1x1 convolution runs by rows too)
    bands = re.findall(r'dnn\.conv ins\(%\w+, %\w+[^:]*: memref<1x(\d+)x\d+x16xf32>, memref<8x(\d+)x1x1xf32>', text)
    assert set(bands) == {("16", "16"), ("32", "32")}
    assert re.search(r'npu.reads = \[\["c2", "ch32:48/48[^"]*"', text)


def _conv_stack(shape: tuple[int, int, int, int], layers: list[tuple[int, int, int]]) -> object:
    """x of `shape` through each of `layers` (output channels, kernel
    size, stride): a convolution (pads keeping the size at stride 1) and
    its ReLU, random weights."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(11)
    nodes, weights, x, channels = [], [], "x", shape[1]
    for i, (out, kernel, stride) in enumerate(layers):
        w = rng.standard_normal((out, channels, kernel, kernel)) / np.sqrt(channels * kernel * kernel)
        weights.append(numpy_helper.from_array(w.astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[kernel // 2] * 4, strides=[stride] * 2),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        x, channels = f"r{i}", out
    rows, width = shape[2], shape[3]
    for _, kernel, stride in layers:  # the pads keep the size at stride 1: the odd kernel's reach each side
        rows, width = (rows - 1) // stride + 1, (width - 1) // stride + 1
    return _model("conv_stack", nodes, {"x": list(shape)}, {x: [1, channels, rows, width]}, weights)


@pytest.mark.parametrize("shape, layers, sram", [
    ((1, 32, 32, 16), [(16, 1, 1), (8, 3, 1)], 32 << 10),  # a 1x1 feeding a 3x3
    ((1, 32, 40, 8), [(16, 3, 1), (8, 1, 1), (8, 1, 1), (16, 3, 2)], 16 << 10),  # a 3x3 reader at stride 2 last
    ((1, 32, 24, 8), [(8, 1, 1), (8, 3, 2), (32, 3, 2), (16, 1, 1)], 16 << 10),  # two 3x3 readers at stride 2
    # two chains: the 1x1 over 32 channels rolls; the one over 8 computes its halo rows again (`_roll_flags`)
    ((1, 32, 32, 16), [(16, 1, 1), (8, 3, 1), (16, 1, 1), (8, 3, 1)], 32 << 10),
])
def test_a_rolled_chain_copies_its_halo_rows_out_of_two_bands(shape: tuple[int, int, int, int],
                                                             layers: list[tuple[int, int, int]], sram: int) -> None:
    # the convolutions run as rolled chains: each computes each row once,
    # and before a band of a 3x3 reader its rows are copied out of its
    # producer's band before and this band (two strided copies into one
    # buffer, the second at the rows after the first's)
    from pyocc.testing.random_graphs import compile_and_compare

    inputs = {"x": np.random.default_rng(12).standard_normal(shape).astype(np.float32)}
    compiled, problem = compile_and_compare(_conv_stack(shape, layers), inputs, scratchpad=sram)
    assert problem is None, problem
    copies = [line for line in str(compiled.module).splitlines() if "dnn.memcpy" in line and "|copy" in line]
    into = [re.search(r'npu.writes = \[\["\w+", "(rows\d+:\d+\|copy)"', line).group(1) for line in copies]
    assert len(into) > 2 and len(set(into)) < len(into)  # copies of two bands into one buffer
    assert compiled.numpy_sites == 0


def _bottleneck_block(channels: int, growth: int, layers: int, size: int) -> object:
    """A dense block of DenseNet's bottleneck layers on `size` x `size`
    rows: each takes the ReLU of the block's tensor (a concat of `channels`
    and `growth` more per layer before it) through a 1x1 convolution to 4 x
    `growth` channels, its ReLU and a 3x3 convolution to `growth`, random
    weights."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(13)
    nodes, weights, features, block, width = [], [], ["x"], "x", channels
    for i in range(layers):
        for name, shape in ((f"a{i}", (4 * growth, width, 1, 1)), (f"b{i}", (growth, 4 * growth, 3, 3))):
            w = rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))
            weights.append(numpy_helper.from_array(w.astype(np.float32), name))
        nodes += [helper.make_node("Relu", [block], [f"r{i}"]), helper.make_node("Conv", [f"r{i}", f"a{i}"], [f"p{i}"]),
                  helper.make_node("Relu", [f"p{i}"], [f"q{i}"]),
                  helper.make_node("Conv", [f"q{i}", f"b{i}"], [f"n{i}"], pads=[1, 1, 1, 1])]
        features.append(f"n{i}")
        block, width = f"c{i}", width + growth
        nodes.append(helper.make_node("Concat", list(features), [block], axis=1))
    return _model("bottleneck_block", nodes, {"x": [1, channels, size, size]}, {block: [1, width, size, size]},
                  weights)


def test_tiles_assembled_in_sram_match_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    # the last layer's 1x1 convolution runs at 64 KiB on tiles of 2 bands of
    # rows and 13 blocks of channels, and its 3x3 reads its output (16 KiB)
    # whole: each tile is copied into the rows of its channels of the whole
    # output in SRAM (`_assembled`'s `tiles`), so q2 never goes to DRAM. The
    # search keeps the schedule that stores the tiles here (85,598 cycles,
    # against 87,899 assembled, which moves 610,304 DRAM bytes instead of
    # 645,120), so the tiles are assembled in every schedule the search
    # tries: the numbers of what runs must not change with that schedule
    # (DenseNet-121 at 1 MiB runs one the search keeps)
    from pyocc.planning import scratchpad
    from pyocc.testing.random_graphs import compile_and_compare

    assembled = scratchpad.units._assembled
    monkeypatch.setattr(scratchpad.search, "_assembled", lambda program, units, sram, slices=True, tiles=False:
                        assembled(program, units, sram, slices, tiles=True))
    inputs = {"x": np.random.default_rng(14).standard_normal((1, 128, 8, 8)).astype(np.float32)}
    compiled, problem = compile_and_compare(_bottleneck_block(128, 16, 3, 8), inputs, scratchpad=64 << 10)
    assert problem is None, problem
    assert compiled.memory_report().npu["tiled_ops"]["q2"] == {"row_bands": 2, "channel_blocks": 13}
    text = str(compiled.module)
    copies = re.findall(r'dnn.memcpy[^\n]*npu.writes = \[\["q2", "rows(\d+):(\d+)\|ch(\d+):(\d+)\|assembled"', text)
    assert len(copies) == 26  # every tile; each channel's rows at their place: (channel x 8 + row) x 32 bytes
    assert {(int(lo), int(hi)) for lo, hi, _, _ in copies} == {(0, 4), (4, 8)}
    assert "%q2_dram" not in text and compiled.numpy_sites == 0  # no DRAM home: never stored


def test_an_input_its_units_output_evicted_is_loaded_again() -> None:
    # at 48 KiB the output of a unit (the whole of r1, the ReLU of the first
    # concat, assembled in SRAM from its bands) evicts the band that the
    # unit copies into it, to make room; the scheduler took the whole
    # tensor's buffer for that band and the schedule broke a rule ("r1 reads
    # r1:tile0.0/3x1, which is not resident in 'b235:r1:all'": an internal
    # error). A piece that was in a buffer of its own and was evicted is
    # loaded again.
    from pyocc.testing.random_graphs import compile_and_compare

    inputs = {"x": np.random.default_rng(15).standard_normal((1, 64, 8, 8)).astype(np.float32)}
    compiled, problem = compile_and_compare(_bottleneck_block(64, 32, 3, 8), inputs, scratchpad=48 << 10)
    assert problem is None, problem
    assert compiled.memory_report().npu["sram_bytes"] <= 48 << 10

"""Models compiled for several threads (pyocc.lowering.native.threads): the
same bytes out on every thread count, including outer loops shorter than the
thread count and not divisible by it; the parallel loops are really there
(and absent, with the whole pool, on one thread); a kernel whose code
outside its loop has an effect stays serial; a running pool restarts on
NAME_set_threads, also from one thread to more."""

from __future__ import annotations

import ctypes
import re
import shutil
import time
from pathlib import Path

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import pyocc
from pyocc.dialects.dnn.scratch import im2col_block, im2col_copies
from pyocc.errors import PyoccError
import pyocc.lowering.native.conv as native_conv
from pyocc.lowering.native.dense_ir import SGEMM, SGEMM_COLUMN_BLOCK, SGEMM_PARALLEL_MACS, SGEMM_TYPE, Kernel
from pyocc.lowering.native.loops import PARALLEL_FOR_TYPE, PARALLEL_MIN_WORK, KernelBuilder
from pyocc.lowering.native.registry import native_kernel_for
from pyocc.lowering.native.threads import define_thread_pool, parallel_for_symbol
from pyocc.runtime import jit
from pyocc.runtime.loader import load_shared_library
from pyocc.tools.cli import main as pyocc_main

PARALLEL_CALL = re.compile(r'call void @"?\w+_parallel_for"?\(')


def many_ops() -> onnx.ModelProto:
    """Every kernel family that runs its outer loop on threads, each on
    outer extents of 3 (batch norm's channels, the pools' planes), 15
    (softmax's rows) or one merged run of elements, over more than
    PARALLEL_MIN_WORK elements; plus a convolution and two matrix products
    whose sgemm the threads split by columns (130 columns: two blocks and a
    2-column tail, fewer blocks than some thread counts), and two
    matrix-vector products (one row times a matrix, as is and transposed):
    the threads split the second's sgemv by outputs (4097: nine parts, the
    last with a tail of fewer than 64); the first (4100 outputs) stays
    whole, as split its rounding moved (Kernel.sgemv); and a product with
    too few columns (48) for two column blocks, which the threads split by
    rows (300: four parts, the last with 44 rows more); a depthwise
    convolution (its output channels on threads) and a grouped pointwise one
    (its groups on threads); and a channel shuffle's transpose (the
    convolution's 16 channels as 2 groups of 8, regrouped: its output's
    8 x 2 channels on threads); and a channel shuffle that a grouped
    pointwise convolution stores as it writes (dnn-fuse's
    conv-channel-shuffle; tanh keeps it on sgemm, whose first and last
    passes run inside each thread's part, on every 2nd plane)."""
    rng = np.random.default_rng(11)
    shape = [1, 3, 160, 160]
    assert np.prod(shape) >= PARALLEL_MIN_WORK

    def init(name: str, array: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(array.astype(np.float32), name)

    inits = [init("scale", rng.random(3) + 0.5), init("bias", rng.standard_normal(3)),
             init("mean", rng.standard_normal(3)), init("var", rng.random(3) + 0.5),
             init("row", rng.standard_normal((1, 1, 1, 160))), init("w", rng.standard_normal((16, 3, 5, 5))),
             init("ln_scale", rng.standard_normal(159)), init("ln_bias", rng.standard_normal(159)),
             init("fc", rng.standard_normal((160, 130))), init("fc_t", rng.standard_normal((130, 160))),
             init("tall", rng.standard_normal((300, 1600))),
             init("grouped_w", rng.standard_normal((16, 8, 1, 1))),
             init("depthwise", rng.standard_normal((3, 1, 3, 3))), init("w_pre", rng.standard_normal((8, 3, 3, 3))),
             numpy_helper.from_array(np.array([1600, 48], dtype=np.int64), "narrow"),
             init("wide", rng.standard_normal((160, 4100))), init("wide_t", rng.standard_normal((4097, 160))),
             numpy_helper.from_array(np.array([480, 160], dtype=np.int64), "rows"),
             numpy_helper.from_array(np.array([1, 2, 8, 160, 160], dtype=np.int64), "groups"),
             init("shuffle_w", rng.standard_normal((16, 8, 1, 1))), init("shuffle_b", rng.standard_normal(16)),
             numpy_helper.from_array(np.array([1, 16, 160, 160], dtype=np.int64), "merged")]
    nodes = [
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("Add", ["t", "row"], ["a"]),
        helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["p", "scale", "bias", "mean", "var"], ["n"]),
        helper.make_node("Softmax", ["n"], ["soft"], axis=-1),
        helper.make_node("AveragePool", ["n"], ["avg"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("GlobalAveragePool", ["soft"], ["gap"]),
        helper.make_node("LayerNormalization", ["avg", "ln_scale", "ln_bias"], ["ln"], axis=-1),
        helper.make_node("Conv", ["x", "w"], ["conv"], pads=[2, 2, 2, 2]),
        helper.make_node("Reshape", ["x", "rows"], ["matrix"]),
        helper.make_node("Gemm", ["matrix", "fc"], ["gemm"]),
        helper.make_node("Gemm", ["matrix", "fc_t"], ["gemm_t"], transB=1),
        helper.make_node("Conv", ["x", "depthwise"], ["dw"], pads=[1, 1, 1, 1], group=3),
        helper.make_node("Conv", ["conv", "grouped_w"], ["grouped"], group=2),
        helper.make_node("Relu", ["n"], ["n_relu"]),
        helper.make_node("Conv", ["n_relu", "w_pre"], ["pre"], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["x", "narrow"], ["columns"]),
        helper.make_node("Gemm", ["tall", "columns"], ["gemm_rows"]),
        helper.make_node("ReduceMean", ["matrix"], ["first"], axes=[0], keepdims=1),
        helper.make_node("Gemm", ["first", "wide"], ["gemv"]),
        helper.make_node("Gemm", ["first", "wide_t"], ["gemv_t"], transB=1),
        helper.make_node("Reshape", ["conv", "groups"], ["grouped_channels"]),
        helper.make_node("Transpose", ["grouped_channels"], ["shuffled"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Conv", ["conv", "shuffle_w", "shuffle_b"], ["pre_shuffle"], group=2),
        helper.make_node("Tanh", ["pre_shuffle"], ["pre_shuffle_tanh"]),
        helper.make_node("Reshape", ["pre_shuffle_tanh", "groups"], ["split"]),
        helper.make_node("Transpose", ["split"], ["swapped"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["swapped", "merged"], ["conv_shuffled"]),
    ]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
               for name in ("soft", "gap", "conv", "gemm", "gemm_t", "gemv", "gemv_t", "gemm_rows", "dw", "pre",
                            "grouped", "shuffled", "conv_shuffled")]
    outputs.append(helper.make_tensor_value_info("ln", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "many", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model)


def assert_same_as_one_thread(got: np.ndarray, want: np.ndarray, err_msg: str) -> None:
    """`got` (a run on several threads) is the one-thread run's `want` up to
    OpenBLAS's rounding. pyocc's own loops compute each element with the
    same code on every thread count, but a matrix product split between
    threads is several sgemm calls with fewer rows or columns, and OpenBLAS
    may round a block differently with the call's sizes: its Haswell kernel
    (which it picks on AMD EPYC too) gave 2,054 of 14,400 elements of a
    product split in two rows apart, by at most 6.9e-5 on values up to 100,
    where the kernel it picked on the machines of earlier stops gave the same
    bytes. A wrong split (rows, columns or offsets) is off by the values
    themselves."""
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * float(np.abs(want).max(initial=0.0)),
                               err_msg=err_msg)


MANY_OPS = pytest.mark.xdist_group("many_ops")
"""For the tests of the module's compiled many_ops (one_thread,
two_thread_library): on one pytest-xdist worker, which compiles it once."""


@pytest.fixture(scope="module")
def inputs() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(12).standard_normal((1, 3, 160, 160)).astype(np.float32)}


@pytest.fixture(scope="module")
def one_thread(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    model = pyocc.compile(many_ops())
    ir_text = "".join([model.native.llvm_ir, *model.native.kernels.values()])  # the kernels are compiled apart
    assert model.native.kernels, "one-thread kernels come as parts of their own (pyocc.runtime.jit's cache)"
    # one thread: exactly the single-threaded module, no pool, no outlined bodies
    assert "parallel_for" not in ir_text and "pthread" not in ir_text and ".body" not in ir_text
    assert not re.search(r"\.(part|sgemm|sgemv)\b", ir_text)  # no outlined parts, no split BLAS calls
    return model.run(inputs)


@MANY_OPS
def test_the_folded_channel_shuffle_is_onnxruntimes_on_threads(inputs: dict[str, np.ndarray],
                                                              one_thread: dict[str, np.ndarray]) -> None:
    # every thread count gives the one-thread bytes (below); those are onnxruntime's Conv, Tanh,
    # Reshape, Transpose, Reshape, here folded into one shuffled convolution (tanh: on sgemm)
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the numerics reference (a test extra)")
    want = ort.InferenceSession(many_ops().SerializeToString()).run(["conv_shuffled"], inputs)[0]
    np.testing.assert_allclose(one_thread["conv_shuffled"], want, rtol=1e-4, atol=1e-4)


@MANY_OPS
@pytest.mark.parametrize("threads", [2, 4, 5])
def test_every_thread_count_gives_the_same_bytes(threads: int, inputs: dict[str, np.ndarray],
                                                 one_thread: dict[str, np.ndarray]) -> None:
    model = pyocc.compile(many_ops(), threads=threads)
    # tanh, add, max pool, batch norm, softmax, average pool, global pool,
    # layer norm; the sgemm of the convolution and of the three products; one sgemv
    assert len(PARALLEL_CALL.findall(model.native.llvm_ir)) >= 13
    assert re.search(r'define internal void @"\w+\.sgemv"', model.native.llvm_ir)
    for _ in range(2):  # the pool is reused run after run
        outputs = model.run(inputs)
        for name, expected in one_thread.items():
            assert_same_as_one_thread(outputs[name], expected, err_msg=f"{name} on {threads} threads")


def _site(shape: list[int]) -> dict[str, object]:
    spec = {"shape": shape, "dtype": "float32"}
    return {"kernel": "test", "inputs": [spec], "outputs": [spec], "kwargs": {}, "parallel_for": "m_parallel_for"}


@pytest.mark.parametrize("case", ["parallel", "store_outside", "nested", "small", "two_loops"])
def test_which_loops_run_on_threads(case: str) -> None:
    """Only the first independent top-level loop with enough work is claimed,
    and only a body whose code outside that loop has no effect runs on threads."""
    rows, width = 3, PARALLEL_MIN_WORK
    if case == "small":
        width = PARALLEL_MIN_WORK // rows - 1
    module = ir.Module()
    k = KernelBuilder(module, "kernel", _site([rows, width]))
    x, out = k.input(0), k.outputs[0]

    def row(r: ir.Value) -> None:
        base = k.b.mul(r, k.i64(width))
        k.loop(width, lambda i: k.store(k.load(x, k.b.add(base, i)), out, k.b.add(base, i)))

    if case == "store_outside":
        k.store(ir.Constant(ir.FloatType(), 0.0), out, k.i64(0))
    if case == "nested":
        k.loop(2, lambda _: k.loop(rows, row, parallel=True, work=rows * width))
    else:
        k.loop(rows, row, parallel=True, work=rows * width)
    if case == "two_loops":
        k.loop(rows, row, parallel=True, work=rows * width)
    k.finish()
    assert k.outline.parallel is (case == "parallel")
    assert (k.outline.count == rows) is (case in ("parallel", "store_outside", "two_loops"))
    assert ("m_parallel_for" in str(module)) is (case == "parallel")


def test_a_channel_shuffle_runs_on_threads() -> None:
    """A transpose's copy is its kernel's only loop, so its outer loop (a
    channel shuffle's output channels: ShuffleNet's were 5 of its 76 sites,
    before dnn-fuse folded them into its convolutions)
    runs on threads; it ran on the calling thread alone, and the next
    convolution's threads read what one core wrote."""
    site = {"kernel": "transpose", "inputs": [{"shape": [1, 4, 34, 28, 28], "dtype": "float32"}],
            "outputs": [{"shape": [1, 34, 4, 28, 28], "dtype": "float32"}], "kwargs": {"perm": [0, 2, 1, 3, 4]},
            "parallel_for": "m_parallel_for"}
    module = ir.Module()
    native_kernel_for(site).emit(module, "m_site_0", site)
    assert "m_parallel_for" in str(module)


def _bn_relu_conv() -> onnx.ModelProto:
    """BatchNormalization, Relu, then a 3x3 Conv (dnn-fuse: one preact_conv),
    48 -> 64 channels on 24x24, and a deeper 3x3 Conv after it; random
    weights."""
    rng = np.random.default_rng(11)

    def weight(name: str, *shape: int, low: float = -0.5) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.uniform(low, 0.5, shape).astype(np.float32), name)

    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Conv", ["r", "w1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "bn_relu_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 48, 24, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 24, 24])],
        [weight("s", 48), weight("b", 48), weight("m", 48), weight("v", 48, low=0.1), weight("w1", 64, 48, 3, 3),
         weight("w2", 64, 64, 3, 3), weight("b2", 64)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_scratchpad_schedule_runs_its_register_tiles_on_threads() -> None:
    """The scratchpad's plan gives the host no im2col scratch: its
    convolutions run register tiles read in place (a preact_conv's
    pre-activating what they load), whose (tile, row) pairs run on the
    threads; onnxruntime's numbers on two and three threads."""
    ort = pytest.importorskip("onnxruntime")
    model = _bn_relu_conv()
    x = np.random.default_rng(12).standard_normal((1, 48, 24, 24)).astype(np.float32)
    (want,) = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    for threads, sram in ((2, "64KiB"), (3, "64KiB"), (2, "1MiB")):  # (at 1 MiB each op runs whole: on threads)
        compiled = pyocc.compile(model, scratchpad=sram, threads=threads)
        assert compiled.numpy_sites == 0
        sites = compiled.native.meta["sites"]
        assert {"preact_conv", "conv"} <= {site["kernel"] for site in sites}
        assert all(site.get("workspace") is None for site in sites)
        np.testing.assert_allclose(compiled.run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
    # a preact_conv site without a workspace, emitted for threads: its tiles' loop (masked loads at
    # the padding; on any host, AVX-512 too) is outlined as a part for the model's parallel-for
    site = {"kernel": "preact_conv", "inputs": [{"shape": shape, "dtype": "float32"} for shape in
                                                ([1, 48, 24, 24], [48], [48], [64, 48, 3, 3])] + [None, None],
            "outputs": [{"shape": [1, 64, 24, 24], "dtype": "float32"}],
            "kwargs": {"pads": [1, 1, 1, 1], "pre_activation": "relu"}}
    module = ir.Module()
    ir.Function(module, PARALLEL_FOR_TYPE, parallel_for_symbol("m"))
    native_kernel_for(site).emit(module, "m_site_0", site)
    text = str(module)
    assert "m_site_0.part" in text and "llvm.masked.load" in text
    llvm.parse_assembly(text).verify()  # the part reaches the scale and shift only through what it captured


@pytest.fixture(scope="module")
def two_thread_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """many_ops compiled for two threads and written as a shared library
    (once a module: the two tests that load it each load a copy of their
    own, since a library loaded twice from one path is one library, its
    thread pool shared)."""
    path = tmp_path_factory.mktemp("two_threads") / "m.so"
    pyocc.compile(many_ops(), threads=2, jit=False).save(path)
    return path


def _copy_of(library: Path, directory: Path) -> Path:
    """`library` and its weights copied into `directory`: a library of its own to load."""
    copy = directory / library.name
    shutil.copyfile(library, copy)
    shutil.copyfile(jit.weights_path_for(library), jit.weights_path_for(copy))
    return copy


@MANY_OPS
def test_a_running_pool_restarts_on_set_threads(tmp_path: Path, inputs: dict[str, np.ndarray],
                                                one_thread: dict[str, np.ndarray], two_thread_library: Path) -> None:
    _copy_of(two_thread_library, tmp_path)
    model = load_shared_library(tmp_path / "m.so")
    same_library = ctypes.CDLL(str((tmp_path / "m.so").resolve()))
    set_threads = getattr(same_library, f"{model.name}_set_threads")
    set_threads.argtypes, set_threads.restype = [ctypes.c_int32], ctypes.c_int32
    for count, status in ((3, 0), (1, 0), (0, 1), (257, 1), (7, 0)):
        assert set_threads(count) == status
        outputs = model.run(inputs)
        for name, expected in one_thread.items():
            assert_same_as_one_thread(outputs[name], expected, err_msg=f"{name} after set_threads({count})")
    model.close()


def _threads_of_this_process() -> int:
    """The threads this process has now (Linux: /proc/self/task)."""
    return len(list(Path("/proc/self/task").iterdir()))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc/self/task (Linux)")
@MANY_OPS
def test_set_threads_grows_a_pool_it_shrank_to_one_thread(tmp_path: Path, two_thread_library: Path) -> None:
    """NAME_set_threads(1) stops the workers; a later NAME_set_threads(3)
    starts two again (it restarted only a pool that had workers, so a
    library once set to one thread stayed there); NAME_destroy leaves
    none."""
    _copy_of(two_thread_library, tmp_path)
    before = _threads_of_this_process()
    model = load_shared_library(tmp_path / "m.so")
    set_threads = getattr(ctypes.CDLL(str((tmp_path / "m.so").resolve())), f"{model.name}_set_threads")
    set_threads.argtypes, set_threads.restype = [ctypes.c_int32], ctypes.c_int32
    workers = [_threads_of_this_process() - before]
    for count in (1, 3, 2):
        assert set_threads(count) == 0
        workers.append(_threads_of_this_process() - before)
    model.close()
    workers.append(_threads_of_this_process() - before)
    assert workers == [1, 0, 2, 1, 0]


def test_threads_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    onnx.save(many_ops(), tmp_path / "many.onnx")
    assert pyocc_main(["run", str(tmp_path / "many.onnx"), "--threads", "3"]) == 0
    assert "soft: shape [1, 3, 160, 160] float32" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        pyocc_main(["run", str(tmp_path / "many.onnx"), "--threads", "0"])
    assert exit_info.value.code == 2
    assert "'0' must be a whole number of threads from 1 to 256" in capsys.readouterr().err
    with pytest.raises(PyoccError, match="threads must be a whole number from 1 to 256, got 0"):
        pyocc.compile(many_ops(), threads=0)


def dense_block() -> onnx.ModelProto:
    """DenseNet's pattern: three batchnorm-relu-1x1-conv layers (preact_convs
    after fusion) on 64, 96 and 128 channels of a growing concat, which
    share one kernel that reads its channels at run time."""
    rng = np.random.default_rng(21)

    def init(name: str, array: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(array.astype(np.float32), name)

    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    features = "x"
    for i, channels in enumerate((64, 96, 128)):
        inits += [init(f"s{i}", rng.random(channels) + 0.5), init(f"b{i}", rng.standard_normal(channels)),
                  init(f"m{i}", rng.standard_normal(channels)), init(f"v{i}", rng.random(channels) + 0.5),
                  init(f"w{i}", rng.standard_normal((32, channels, 1, 1)) * 0.1)]
        nodes += [helper.make_node("BatchNormalization", [features, f"s{i}", f"b{i}", f"m{i}", f"v{i}"], [f"n{i}"]),
                  helper.make_node("Relu", [f"n{i}"], [f"r{i}"]),
                  helper.make_node("Conv", [f"r{i}", f"w{i}"], [f"y{i}"])]
        if i < 2:
            nodes.append(helper.make_node("Concat", [features, f"y{i}"], [f"cat{i}"], axis=1))
            features = f"cat{i}"
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 64, 64])],
                              [helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)], inits)
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("threads", [2, 3])
def test_a_kernel_shared_across_channels_splits_its_sgemm_at_run_time(threads: int) -> None:
    """The three preact_convs share one kernel whose sgemm depth is known at
    run time only; on threads it sizes its column blocks there (each of
    them, in lazy mode's whole im2col blocks, has at least two) and gives the
    bytes of one thread."""
    model = dense_block()
    x = {"x": np.random.default_rng(22).standard_normal((1, 64, 64, 64)).astype(np.float32)}
    one = pyocc.compile(model, memory="lazy")
    shared = [symbol for symbol in one.native.kernels if symbol.endswith("_sizes")]
    assert len(shared) == 1, sorted(one.native.kernels)
    for site in one.native.meta["sites"]:
        if site["kernel"] == "preact_conv":
            x_shape, w_shape = site["inputs"][0]["shape"], site["inputs"][3]["shape"]
            rows, _ = im2col_block(x_shape, w_shape, site["outputs"][0]["shape"], 4, site["workspace"]["shape"][0])
            block = -(-SGEMM_PARALLEL_MACS // (w_shape[0] * w_shape[1]))
            block = -(-block // SGEMM_COLUMN_BLOCK) * SGEMM_COLUMN_BLOCK
            assert rows * x_shape[3] >= 2 * block, "this site's sgemm would not split"
    model_on_threads = pyocc.compile(model, memory="lazy", threads=threads)
    ir_text = model_on_threads.native.llvm_ir
    body = ir_text[ir_text.index(f'define internal void @"{shared[0]}"'):]
    assert PARALLEL_CALL.search(body[:body.index("\n}")]), "the shared kernel's sgemm does not run on the threads"
    want = one.run(x)
    for _ in range(2):
        got = model_on_threads.run(x)
        for name, expected in want.items():
            assert_same_as_one_thread(got[name], expected, err_msg=f"{name} on {threads} threads")


@MANY_OPS
def test_idle_workers_sleep_and_wake_again(inputs: dict[str, np.ndarray],
                                           one_thread: dict[str, np.ndarray]) -> None:
    """Waiting threads spin only briefly (threads.SPIN_TICKS, then YIELDS
    yields): a model idle between runs burns no CPU, and its sleeping
    workers wake for the next run and give the same bytes."""
    model = pyocc.compile(many_ops(), threads=3)
    for _ in range(2):
        model.run(inputs)
        time.sleep(0.05)  # far past the spin: every worker is asleep
        start = time.process_time()
        time.sleep(0.2)
        idle = time.process_time() - start
        assert idle < 0.02, f"the idle pool burnt {idle * 1e3:.0f} ms of CPU in 200 ms"
    outputs = model.run(inputs)
    for name, expected in one_thread.items():
        assert_same_as_one_thread(outputs[name], expected, err_msg=f"{name} after the workers slept")
    model.native.close()


def split_parts(m: int, n: int, depth: int, threads: int) -> list[tuple[int, int, int, int]]:
    """The sgemm calls a split m x n x depth product makes on `threads`
    threads, as (m, n, k, element offset of its C) sorted by offset: a
    module whose kernel calls Kernel.sgemm, linked to a recording stand-in
    for the BLAS's sgemm, with the real pool."""
    name = "split"
    module = ir.Module(name=name)
    for kind in ("init", "destroy"):
        function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), f"{name}_{kind}")
        ir.IRBuilder(function.append_basic_block("entry")).ret_void()
    i64, ptr = ir.IntType(64), ir.PointerType()
    table_type = ir.ArrayType(i64, 4 * 64)
    table = ir.GlobalVariable(module, table_type, f"{name}_calls")
    table.initializer = ir.Constant(table_type, None)
    calls = ir.GlobalVariable(module, i64, f"{name}_count")
    calls.initializer = i64(0)
    recorder = ir.Function(module, SGEMM_TYPE, SGEMM)  # the stand-in: records m, n, k (CBLAS's i32s) and C
    b = ir.IRBuilder(recorder.append_basic_block("entry"))
    index = b.atomic_rmw("add", calls, i64(1), "seq_cst")
    for field, value in enumerate((recorder.args[3], recorder.args[4], recorder.args[5])):
        b.store(b.sext(value, i64), b.gep(table, [i64(0), b.add(b.mul(index, i64(4)), i64(field))]))
    b.store(b.ptrtoint(recorder.args[12], i64), b.gep(table, [i64(0), b.add(b.mul(index, i64(4)), i64(3))]))
    b.ret_void()
    ir.Function(module, PARALLEL_FOR_TYPE, parallel_for_symbol(name))
    kernel = Kernel(module, f"{name}_site_0")
    a, bm, c = (kernel.buffer(slot) for slot in range(3))
    kernel.sgemm(m, n, depth, a, depth, bm, n, c, n)
    kernel.finish()
    run = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr]), f"{name}_run")
    b = ir.IRBuilder(run.append_basic_block("entry"))
    b.call(kernel.function, [run.args[0]])
    b.ret_void()
    define_thread_pool(module, name, threads, uses_blas=False)
    engine, _ = jit.jit_module(str(module), jit._resolve_externals)
    address = {kind: engine.get_function_address(f"{name}_{kind}") for kind in ("init", "destroy", "run")}
    ctypes.CFUNCTYPE(None)(address["init"])()
    base = 1 << 20
    pointers = (ctypes.c_void_p * 3)(base, base, base)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address["run"])(ctypes.cast(pointers, ctypes.c_void_p))
    ctypes.CFUNCTYPE(None)(address["destroy"])()
    count = ctypes.c_int64.from_address(engine.get_global_value_address(f"{name}_count")).value
    recorded = list((ctypes.c_int64 * (4 * 64)).from_address(engine.get_global_value_address(f"{name}_calls")))
    del engine
    return sorted((recorded[4 * i], recorded[4 * i + 1], recorded[4 * i + 2], (recorded[4 * i + 3] - base) // 4)
                  for i in range(count))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_split_sgemm_gives_each_thread_an_even_part(threads: int) -> None:
    """128 x 729 x 32 (SqueezeNet's 1x1 32->128 at 27x27): two blocks of 256
    columns, which whole blocks with the tail on the last part split 256 :
    473; now two parts within one 16-column unit (and the tail) of each other,
    on 2 and 3 threads alike, each at least a block; one call on one thread."""
    parts = split_parts(128, 729, 32, threads)
    if threads == 1:
        assert parts == [(128, 729, 32, 0)]
        return
    assert [(m, k) for m, _, k, _ in parts] == [(128, 32)] * 2
    widths = [n for _, n, _, _ in parts]
    assert [offset for *_, offset in parts] == [0, widths[0]] and sum(widths) == 729
    assert min(widths) >= 256 and max(widths) - min(widths) <= 2 * SGEMM_COLUMN_BLOCK, widths


def test_a_product_with_fewer_columns_than_rows_is_split_by_rows() -> None:
    """1000 x 169 x 512 (SqueezeNet's last 1x1 conv at 13x13): cut by
    columns, each part would pack the whole 1000 x 512 A again; by rows
    each packs B (512 x 169) again. Three threads: three parts of 64-row
    multiples, every one with all 169 columns."""
    parts = split_parts(1000, 169, 512, 3)
    assert len(parts) == 3 and all(n == 169 and k == 512 for _, n, k, _ in parts), parts
    rows = [m for m, *_ in parts]
    assert sum(rows) == 1000 and all(r % 64 == 0 for r in rows[:-1]) and max(rows) - min(rows) <= 2 * 64, rows
    assert [offset for *_, offset in parts] == [0, rows[0] * 169, (rows[0] + rows[1]) * 169]


def small_workspace_convs() -> onnx.ModelProto:
    """Two 3x3 convolutions of 64 channels to 16 at 40x40, one plain (with
    bias and relu), one after batchnorm and relu (a preact_conv after
    fusion), at the pool's peak: the plan fits each im2col workspace to one
    output row's columns, so a block (13 rows of a slice of 4 channels:
    16 x 520 x 36) is far too small to split between threads."""
    rng = np.random.default_rng(31)

    def init(name: str, array: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(array.astype(np.float32), name)

    inits = [init("w", rng.standard_normal((16, 64, 3, 3)) * 0.1), init("b", rng.standard_normal(16)),
             init("w2", rng.standard_normal((16, 64, 3, 3)) * 0.1), init("s", rng.random(64) + 0.5),
             init("t", rng.standard_normal(64)), init("m", rng.standard_normal(64)), init("v", rng.random(64) + 0.5)]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("BatchNormalization", ["x", "s", "t", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["z"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 40, 40])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "z")],
                              inits)
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.fixture
def im2col_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No convolution runs the direct 3x3 kernel (`direct_conv_layouts`
    asks for no layout): tests of im2col's blocks on threads, whose narrow
    convolutions that kernel would otherwise take."""
    monkeypatch.setattr(native_conv, "DIRECT_NARROW_OUTS", 0)
    monkeypatch.setattr(native_conv, "DIRECT_POSITIONS_RANGE", (1, 0))


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_small_workspace_convolutions_run_whole_blocks_on_each_thread(threads: int, im2col_only: None) -> None:
    """A convolution whose fitted workspace makes blocks too small to split
    (the old code ran every block's sgemm whole on one thread) gets one
    copy of that workspace per thread (at most one per block): planned,
    shown in the report's pool, each copy as large as one thread's, and
    each thread runs whole blocks in its own copy (the sgemm is called
    from the outlined part), giving the bytes of one thread."""
    model = small_workspace_convs()
    x = {"x": np.random.default_rng(32).standard_normal((1, 64, 40, 40)).astype(np.float32)}
    one = pyocc.compile(model)
    many = pyocc.compile(model, threads=threads)
    one_sites = {site["site"]: site for site in one.native.meta["sites"] if site.get("workspace")}
    copied = [site for site in many.native.meta["sites"] if site.get("workspace")]
    assert sorted(site["kernel"] for site in copied) == ["conv", "preact_conv"]
    extra = 0
    for site in copied:
        single = one_sites[site["site"]]["workspace"]["shape"][0]
        rows, channels = im2col_block([1, 64, 40, 40], [16, 64, 3, 3], [1, 16, 40, 40], 4, single)
        assert (rows, channels) == (13, 4), "no longer a small block: the test needs another shape"
        copies = min(threads, 4)  # four blocks of 13 rows
        assert site["workspace"].get("copies") == copies
        assert site["workspace"]["shape"][0] == copies * single
        extra += (copies - 1) * single
    assert one.report.activation_bytes < many.report.activation_bytes <= one.report.activation_bytes + extra
    ir_text = many.native.llvm_ir
    parts = re.findall(r'define internal void @"(\w+_site_\d+(?:_sizes)?\.part(?:\.\d+)?)"\([^\n]*\n(.*?)\n}\n',
                       ir_text, re.S)
    calling = [name for name, body in parts if f'call void @"{SGEMM}"(' in body]
    assert len(calling) == 2, f"no part runs whole blocks' sgemms: {[name for name, _ in parts]}"
    want = one.run(x)
    for _ in range(2):
        got = many.run(x)
        for name, expected in want.items():
            assert_same_as_one_thread(got[name], expected, err_msg=f"{name} on {threads} threads")


def test_workspace_copies_hold_on_any_running_thread_count(tmp_path: Path, im2col_only: None) -> None:
    """A library compiled for two threads (two workspace copies) and run on
    one, two or three (NAME_set_threads): the copies are the parts, so
    fewer threads run them in turn and more find no third part; the bytes
    are one thread's every time."""
    model = small_workspace_convs()
    x = {"x": np.random.default_rng(33).standard_normal((1, 64, 40, 40)).astype(np.float32)}
    want = pyocc.compile(model).run(x)
    pyocc.compile(model, threads=2, jit=False).save(tmp_path / "m.so")
    loaded = load_shared_library(tmp_path / "m.so")
    library = ctypes.CDLL(str((tmp_path / "m.so").resolve()))
    set_threads = getattr(library, f"{loaded.name}_set_threads")
    set_threads.argtypes, set_threads.restype = [ctypes.c_int32], ctypes.c_int32
    for count in (1, 3, 2):
        assert set_threads(count) == 0
        got = loaded.run(x)
        for name, expected in want.items():
            assert_same_as_one_thread(got[name], expected, err_msg=f"{name} on {count} running threads")
    loaded.close()


def test_which_convolutions_get_workspace_copies() -> None:
    """DenseNet-121's 3x3 128->32 at 56x56 with a workspace of one row's
    columns (258,048 bytes: blocks of 10 rows x 12 channels, 32 x 560 x 108)
    gets a copy per thread, at most one per block (6 blocks); with room for
    all channels (866,880 bytes) its sgemm splits instead; a 7x7 image is
    one block; one thread never gets copies."""
    shapes = ([1, 128, 56, 56], [32, 128, 3, 3], [1, 32, 56, 56])
    assert im2col_block(*shapes, 4, 258048) == (10, 12)
    assert [im2col_copies(*shapes, 258048, threads) for threads in (1, 2, 5, 8)] == [1, 2, 5, 6]
    assert im2col_copies(*shapes, 866880, 2) == 1
    assert im2col_copies([1, 128, 7, 7], [32, 128, 3, 3], [1, 32, 7, 7], 225792, 2) == 1


def fused_pass_convs() -> onnx.ModelProto:
    """Two convolutions whose sgemm the threads split, each with a first and
    a last pass over more than PARALLEL_MIN_WORK outputs: a 3x3 one (im2col,
    64 output channels, 144 deep) starting from a residual and ending in
    bias and Relu, its product split by columns, and a pointwise one (512
    output channels, 144 columns of 256 deep) starting from its bias and
    ending in Relu, whose product C has fewer columns than rows: split by
    rows."""
    rng = np.random.default_rng(31)

    def init(name: str, array: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(array.astype(np.float32), name)

    inits = [init("w3", rng.standard_normal((64, 16, 3, 3)) * 0.2), init("b3", rng.standard_normal(64)),
             init("skip", rng.standard_normal((1, 64, 48, 48))),
             init("w1", rng.standard_normal((512, 256, 1, 1)) * 0.05), init("b1", rng.standard_normal(512))]
    nodes = [helper.make_node("Conv", ["x", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c3", "skip"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["y3"]),
             helper.make_node("Conv", ["x1", "w1", "b1"], ["c1"]),
             helper.make_node("Relu", ["c1"], ["y1"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 48, 48]),
              helper.make_tensor_value_info("x1", TensorProto.FLOAT, [1, 256, 12, 12])]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y3", "y1")]
    graph = helper.make_graph(nodes, "passes", inputs, outputs, inits)
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def _function_bodies(ir_text: str, pattern: str) -> dict[str, str]:
    """name -> body of each function defined in `ir_text` whose name matches `pattern`."""
    bodies = {}
    for match in re.finditer(rf'^define [^\n]*@"?({pattern})"?\(', ir_text, re.M):
        bodies[match.group(1)] = ir_text[match.start():ir_text.index("\n}", match.start())]
    return bodies


@pytest.mark.parametrize("threads", [2, 3])
def test_split_convolution_products_run_their_passes_in_each_part(threads: int, im2col_only: None) -> None:
    """On threads, a convolution block whose product is split runs its first
    pass (the residual or bias) and last pass (bias, Relu) inside each part
    of the product, on that part's own columns or rows, so one thread
    writes, multiplies into and finishes each output: one parallel-for
    for the three (the old kernel ran each pass as a parallel-for of its
    own over output channels, three for a pointwise block, four with
    im2col). The bytes stay those of one thread; the values onnxruntime's."""
    ort = pytest.importorskip("onnxruntime")
    model = fused_pass_convs()
    rng = np.random.default_rng(32)
    x = {"x": rng.standard_normal((1, 16, 48, 48)).astype(np.float32),
         "x1": rng.standard_normal((1, 256, 12, 12)).astype(np.float32)}
    # (lazy: the im2col workspace holds the whole image, one block, no per-thread copies)
    one = pyocc.compile(model, memory="lazy")
    on_threads = pyocc.compile(model, memory="lazy", threads=threads)
    sites = on_threads.native.meta["sites"]
    assert [site["kernel"] for site in sites] == ["conv", "conv"]  # the Add and both Relus fused into them
    assert "copies" not in sites[0]["workspace"]
    kernels = _function_bodies(on_threads.native.llvm_ir, r"\w+_site_\d+")
    assert len(kernels) == 2, sorted(kernels)
    calls = [len(PARALLEL_CALL.findall(body)) for body in kernels.values()]
    # 3x3: its im2col's channels, then the product (split by columns: known at compile time);
    # pointwise: the product's two ways of splitting (by columns or rows, chosen at run time).
    # The old kernels had a parallel-for for each pass too: 4 and 4.
    assert calls == [2, 2], calls
    loops = _function_bodies(on_threads.native.llvm_ir, r"\w+_site_\d+\.part(\.\d+)?")
    assert len(loops) == 1, f"only the im2col runs as an outlined loop: {sorted(loops)}"
    parts = _function_bodies(on_threads.native.llvm_ir, r"\w+_site_\d+\.sgemm(\.\d+)?")
    assert parts and all("@llvm.maxnum" in body or "fcmp" in body for body in parts.values()), \
        "every part of a split product finishes its outputs (Relu)"
    want = one.run(x)
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, x)
    for expected, name in zip(reference, ("y3", "y1"), strict=True):
        np.testing.assert_allclose(want[name], expected, rtol=1e-4, atol=1e-4)
    for _ in range(2):
        got = on_threads.run(x)
        for name, expected in want.items():
            assert_same_as_one_thread(got[name], expected, err_msg=f"{name} on {threads} threads")


def tiled_convs(batch: int) -> onnx.ModelProto:
    """A shallow 3x3 convolution (3 -> 16 channels: two 6-channel spatial
    register tiles and 4 channels after them; rows of 67, the last tile
    overlapping), a shallow pointwise one on its output (16 -> 37: nine
    4-channel tiles and one channel; 61 x 67 = 4,087 positions, 510 whole
    vectors and an overlapping last one) and a grouped pointwise one (16 ->
    44 in two groups of 8 input channels: five 4-channel tiles and two
    channels per group), all with relu, each with more than PARALLEL_MIN_WORK fmas, so
    that their register tiles run on threads."""
    rng = np.random.default_rng(5)
    w1, b1 = rng.standard_normal((16, 3, 3, 3)), rng.standard_normal(16)
    w2, b2 = rng.standard_normal((37, 16, 1, 1)), rng.standard_normal(37)
    w3, b3 = rng.standard_normal((44, 8, 1, 1)), rng.standard_normal(44)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
             helper.make_node("Relu", ["c2"], ["y"]),
             helper.make_node("Conv", ["r1", "w3", "b3"], ["c3"], group=2),
             helper.make_node("Relu", ["c3"], ["z"])]
    inits = [numpy_helper.from_array(a.astype(np.float32), n)
             for n, a in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("w3", w3), ("b3", b3))]
    graph = helper.make_graph(nodes, "tiled", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [batch, 3, 61, 67])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 37, 61, 67]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 44, 61, 67])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("batch", [1, 2])
def test_register_tiles_split_between_threads(batch: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spatial, pointwise and grouped pointwise register tiles run on
    threads (no sgemm on any thread count), and every thread count gives the one-thread bytes:
    each output is summed by the same instructions, whichever thread runs
    it. The outputs match onnxruntime too."""
    ort = pytest.importorskip("onnxruntime")
    import pyocc.lowering.native.conv as conv_module

    monkeypatch.setattr(conv_module, "host_has_avx512", lambda: False)  # (an AVX-512 host keeps sgemm)
    model = tiled_convs(batch)
    x = np.random.default_rng(6).standard_normal((batch, 3, 61, 67)).astype(np.float32)
    outputs = {}
    for threads in (1, 2, 3):
        compiled = pyocc.compile(model, threads=threads)
        ir_text = "".join([compiled.native.llvm_ir, *compiled.native.kernels.values()])
        assert "cblas_sgemm" not in ir_text, f"{threads} threads: a convolution left its register tiles"
        if threads > 1:
            assert len(PARALLEL_CALL.findall(ir_text)) >= 3, "the three convolutions' tiles run on threads"
        outputs[threads] = compiled.run({"x": x})
    for threads in (2, 3):
        for name in ("y", "z"):
            np.testing.assert_array_equal(outputs[threads][name], outputs[1][name],
                                          err_msg=f"{name}, {threads} threads")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), options).run(None, {"x": x})
    for name, expected in zip(("y", "z"), want, strict=True):
        np.testing.assert_allclose(outputs[1][name], expected, rtol=1e-4, atol=1e-4, err_msg=name)

"""target=cuda end to end without a GPU: the generated host code runs against
pyocc.testing.fake_cuda, a CPU stand-in for the CUDA runtime, cuDNN and
cuBLAS that checks every pointer, descriptor and workspace the code passes.

Light models with random weights must match onnxruntime, allocate exactly
what the memory mode promises per run (no cudaMalloc in pool mode, whose pool
init allocated once; one with pool allocation "run"; one per buffer in eager
and lazy mode, each freed), and leave nothing behind after
`close()`. The same models on a real GPU are tests/e2e/test_cuda_light_models.py
(marked `gpu`: they skip with the reason where no GPU can be used).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import onnx
import pytest

import pyocc
from pyocc.errors import PyoccError
from pyocc.examples.tiny_cnn import build as tiny_cnn
from pyocc.testing.fake_cuda import FakeCuda
from pyocc.testing.light_models import onnxruntime_reference
from pyocc.testing.random_graphs import compile_and_compare, random_inputs

ort = pytest.importorskip("onnxruntime")

CASES = [
    ("squeezenet", "eager"), ("squeezenet", "lazy"), ("squeezenet", "pool"),
    ("squeezenet", "pool-run"),  # Occamy's pool: one cudaMalloc and cudaFree per run
    ("resnet50", "pool"),  # conv + bias + residual + relu in one cuDNN call, in place
    ("shufflenet", "lazy"),  # grouped convs, channel shuffle as cudnnTransformTensor
    ("inception_v1", "pool"),  # asymmetric average pooling, LRN, concat bands
    ("densenet121", "pool"),  # channel affine as op-tensor calls, average pooling
    ("bvlc_alexnet", "pool"),  # grouped convs, LRN, gemm + relu
]


@pytest.mark.parametrize("name, memory", CASES)
def test_light_model_matches_onnxruntime(name: str, memory: str) -> None:
    model, inputs, expected = onnxruntime_reference(name)
    fake = FakeCuda()
    memory, _, allocation = memory.partition("-")
    compiled = pyocc.compile(model, target="cuda", memory=memory, cuda_libraries=fake,
                             pool_allocation=allocation or None)
    native = compiled.native
    before = fake.calls["cudaMalloc"]
    for _ in range(2):  # a second run reuses what init set up
        got = compiled.run(inputs)
        for value, want in zip(got.values(), expected, strict=True):
            np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
    assert fake.errors == []
    stats = compiled.native.alloc_stats()
    report = compiled.memory_report()
    assert stats.allocations == stats.frees and stats.live_bytes == 0
    assert fake.calls["cudaMalloc"] - before == 2 * stats.allocations
    assert report.allocator_calls_per_run == stats.allocations
    if memory == "pool" and allocation == "run":
        assert stats.allocations == 1 and native.init_pool_allocations == 0
        assert stats.peak_bytes == report.activation_bytes
        assert report.allocator_calls_at_init == 0
    elif memory == "pool":  # the pool is init's: nothing is allocated per run
        assert stats.allocations == 0 and stats.peak_bytes == 0
        assert native.init_pool_allocations == report.allocator_calls_at_init == 1
        assert native.init_pool_bytes == report.activation_bytes
    else:
        assert stats.allocations == len(report.buffers)
        assert native.init_pool_allocations == report.allocator_calls_at_init == 0
    compiled.native.close()
    assert fake.leaks() == []


def test_the_workspace_is_planned_in_the_pool() -> None:
    """Each convolution's cuDNN workspace is a buffer of the plan, live only
    while it runs: init allocates the pool (which holds it) and the weights,
    and no workspace of its own. The tutorial's tiny CNN (four convolutions,
    two of them in parallel branches) shows it as SqueezeNet's 26 did, in a
    fifth of the CPU time."""
    model = tiny_cnn()
    fake = FakeCuda()
    bound = 1 << 20
    compiled, problem = compile_and_compare(model, random_inputs(model, 0), target="cuda", memory="pool",
                                            cuda_libraries=fake, workspace=bound)
    assert problem is None, (problem, fake.errors)
    native, report = compiled.native, compiled.memory_report()
    assert native.init_allocations == 2 and native.workspace_bytes == 0 == report.workspace_bytes
    assert native.init_device_bytes == report.activation_bytes + native.meta["weights"]["bytes"]
    assert fake.live_bytes == native.init_device_bytes
    scratch = [b for b in report.buffers if b.name.startswith("scratch")]
    assert len(scratch) == sum(1 for n in model.graph.node if n.op_type == "Conv") == 4
    assert all(b.bytes == bound and b.consumers == ["dnn.conv"] for b in scratch)
    # the largest planned workspace and what is live with it fit in the pool
    assert report.activation_bytes >= bound
    assert fake.errors == []
    _, without = pyocc.lower(model, target="cuda", memory="pool", workspace=0)  # the plan only: not compiled
    assert not any(b.name.startswith("scratch") for b in without.buffers)
    assert without.activation_bytes < report.activation_bytes


def test_workspace_limit_is_honoured() -> None:
    """With no workspace, every convolution falls back to implicit GEMM."""
    model = tiny_cnn()
    fake = FakeCuda()
    compiled, problem = compile_and_compare(model, random_inputs(model, 0), target="cuda", memory="pool",
                                            cuda_libraries=fake, workspace=0)
    assert problem is None, (problem, fake.errors)
    assert compiled.native.workspace_bytes == 0
    assert not any(b.name.startswith("scratch") for b in compiled.memory_report().buffers)


@pytest.mark.parametrize("search, query", [("ranked", "cudnnGetConvolutionForwardAlgorithm_v7"),
                                           ("timed", "cudnnFindConvolutionForwardAlgorithm")])
def test_conv_search_chooses_from_its_query(search: str, query: str) -> None:
    """Init ranks each convolution's algorithms with cuDNN's heuristics
    (ranked) or by running them (timed), and keeps the first whose workspace
    fits. The stand-in's two rankings differ (its "timed" one puts GEMM
    first; its heuristics put the Winograd algorithms first, then
    PRECOMP_GEMM), so the algorithms the convolutions run with say which
    ranking init read."""
    model = tiny_cnn()
    fake = FakeCuda()
    compiled, problem = compile_and_compare(model, random_inputs(model, 0), target="cuda", memory="pool",
                                            cuda_libraries=fake, workspace=1 << 20, conv_search=search)
    assert problem is None, (problem, fake.errors)
    convs = sum(1 for n in model.graph.node if n.op_type == "Conv")
    other = {"cudnnGetConvolutionForwardAlgorithm_v7", "cudnnFindConvolutionForwardAlgorithm"} - {query}
    assert fake.calls[query] == convs and fake.calls[other.pop()] == 0
    used = set(fake.forward_algorithms)
    assert used == {2} if search == "timed" else 2 not in used, dict(fake.forward_algorithms)
    compiled.native.close()
    assert fake.leaks() == []


def test_conv_search_must_be_known() -> None:
    with pytest.raises(PyoccError, match="conv-search must be ranked or timed, got 'fastest'"):
        pyocc.compile(tiny_cnn(), target="cuda", cuda_libraries=FakeCuda(), conv_search="fastest")


class _Failing:
    """The fake, except that one function always returns `status`."""

    def __init__(self, function: str, status: int):
        self.fake = FakeCuda()
        self.function, self.status = function, status
        self._prototype = ctypes.CFUNCTYPE(ctypes.c_int32)  # a C function may ignore its arguments
        self._callback = self._prototype(lambda: status)

    def symbols(self) -> dict[str, int]:
        symbols: dict[str, Any] = dict(self.fake.symbols())
        symbols[self.function] = ctypes.cast(self._callback, ctypes.c_void_p).value
        return symbols


@pytest.mark.parametrize("function, status, message", [
    ("cudnnPoolingForward", 2000,
     "run: cudnnPoolingForward (dnn.max_pool #0) failed with CUDNN_STATUS_BAD_PARAM (2000)"),
    ("cudaMalloc", 2, "init: cudaMalloc (dnn.pool_init) failed with cudaErrorMemoryAllocation (2)"),
    ("cudnnCreate", 1001, "init: cudnnCreate (cuDNN handle) failed with CUDNN_STATUS_NOT_INITIALIZED (1001)"),
])
def test_a_failed_call_is_named(function: str, status: int, message: str) -> None:
    # the tiny CNN has what the three calls need (a handle, a pool, a max pool) at a seventh of SqueezeNet's compile
    model = tiny_cnn()
    libraries = _Failing(function, status)
    with pytest.raises(PyoccError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pyocc.compile(model, target="cuda", memory="pool", cuda_libraries=libraries).run(random_inputs(model, 0))


def test_no_gpu_is_one_line_error() -> None:
    """Without libraries (CI has none), compiling for cuda says what to do."""
    from pyocc.runtime.cuda import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if reason is None:
        pytest.skip("a GPU is usable here; tests/e2e/test_cuda_light_models.py covers it")
    model, _, _ = onnxruntime_reference("squeezenet")
    with pytest.raises(PyoccError, match="target cuda needs an NVIDIA GPU"):
        pyocc.compile(model, target="cuda")


def _pointwise_graph() -> onnx.ModelProto:
    """Ops cuDNN does not have, so they run as kernels pyocc generates:
    broadcast division, erf, exp, sqrt, reciprocal, leaky relu, hard swish,
    where, and Add(a, a) written in place."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    divisor = numpy_helper.from_array((rng.uniform(0.5, 2.0, (1, 6))).astype(np.float32), "divisor")
    nodes = [
        helper.make_node("Div", ["x", "divisor"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Sqrt", ["ax"], ["s"]),
        helper.make_node("Exp", ["e"], ["ex"]),
        helper.make_node("Reciprocal", ["ex"], ["r"]),
        helper.make_node("LeakyRelu", ["x"], ["lr"], alpha=0.2),
        helper.make_node("HardSwish", ["lr"], ["hs"]),
        helper.make_node("Greater", ["x", "s"], ["g"]),
        helper.make_node("Where", ["g", "r", "hs"], ["w"]),
        helper.make_node("Add", ["w", "w"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "pointwise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])], [divisor])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("memory", ["lazy", "pool"])
def test_generated_kernels_match_onnxruntime(memory: str) -> None:
    from pyocc.testing.random_graphs import compare_with_onnxruntime

    model = _pointwise_graph()
    x = np.random.default_rng(4).standard_normal((4, 6)).astype(np.float32)
    fake = FakeCuda()
    # ex2/lg2-based exp and the erf polynomial are within a few 1e-7 of float32
    problem = compare_with_onnxruntime(model, {"x": x}, rtol=1e-5, atol=1e-5, target="cuda", memory=memory,
                                       cuda_libraries=fake)
    assert problem is None, (problem, fake.errors)
    assert fake.calls["cuLaunchKernel"] >= 5 and fake.errors == []


def test_random_graphs_match_onnxruntime() -> None:
    """A slice of the differential fuzzer (bench/fuzz.py --target cuda runs more)."""
    from pyocc.testing.random_graphs import compare_with_onnxruntime, random_graph, random_inputs

    for seed in range(24):
        model = random_graph(seed)
        fake = FakeCuda()
        problem = compare_with_onnxruntime(model, random_inputs(model, seed), target="cuda",
                                           memory=("pool", "lazy", "eager")[seed % 3], cuda_libraries=fake)
        assert problem is None, (seed, problem, fake.errors)


@pytest.mark.parametrize("name", ["bert", "gpt2", "mobilenet_v2", "vit"])
def test_transformer_and_mobile_graphs_match_onnxruntime(name: str) -> None:
    """tests/graphs.py's graphs: token-id Gather, int64 and bool masks (Cast,
    Equal, Not, And, Where), LayerNormalization, GELU, attention's batched
    MatMul and Softmax, depthwise convs with Clip."""
    from pyocc.testing.random_graphs import compare_with_onnxruntime
    from tests.graphs import GRAPHS, random_inputs

    model = GRAPHS[name](seed=0)
    fake = FakeCuda()
    problem = compare_with_onnxruntime(model, random_inputs(model, seed=1), target="cuda", memory="pool",
                                       cuda_libraries=fake)
    assert problem is None, (problem, fake.errors)


def _conv_transpose_graph(shape: list[int], kernel: list[int], attrs: dict[str, Any], seed: int) -> onnx.ModelProto:
    """ConvTranspose (random weights and bias) then Relu, so that its output is read back from the pool."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    out_channels = kernel[1] * attrs.get("group", 1)
    initializers = [numpy_helper.from_array(rng.standard_normal(kernel).astype(np.float32), "w"),
                    numpy_helper.from_array(rng.standard_normal(out_channels).astype(np.float32), "b")]
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], **attrs), helper.make_node("Relu", ["t"], ["y"])]
    graph = helper.make_graph(nodes, "deconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("shape, kernel, attrs", [
    ([1, 4, 5, 5], [4, 3, 2, 2], {"strides": [2, 2]}),
    ([2, 4, 5, 4], [4, 3, 3, 3], {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    ([1, 4, 5, 4], [4, 2, 3, 3], {"strides": [2, 1], "dilations": [1, 2], "group": 2, "pads": [1, 0, 0, 0]}),
    ([1, 4, 7], [4, 3, 3], {"strides": [2], "pads": [1, 1]}),  # 1-d: cuDNN gets a trailing dim of 1
])
@pytest.mark.parametrize("workspace", [None, 0])
def test_conv_transpose_is_backward_data(shape: list[int], kernel: list[int], attrs: dict[str, Any],
                                         workspace: int | None) -> None:
    """Within the default workspace limit init picks the fake's ALGO_1, which needs a
    copy of the filter as workspace; with none it falls back to ALGO_0."""
    model = _conv_transpose_graph(shape, kernel, attrs, seed=len(shape) + len(attrs))
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    (expected,) = ort.InferenceSession(model.SerializeToString(), options).run(None, {"x": x})
    fake = FakeCuda()
    limit: dict[str, Any] = {} if workspace is None else {"workspace": workspace}
    compiled = pyocc.compile(model, target="cuda", memory="pool", cuda_libraries=fake, **limit)
    np.testing.assert_allclose(compiled.run({"x": x})["y"], expected, rtol=1e-4, atol=1e-5)
    assert fake.calls["cudnnConvolutionBackwardData"] == 1 and fake.errors == []
    assert compiled.native.workspace_bytes == (4 * int(np.prod(kernel)) if workspace is None else 0)
    compiled.native.close()
    assert fake.leaks() == []


def _resize_graph(shape: list[int], attrs: dict[str, Any], scales: list[float] | None = None,
                  sizes: list[int] | None = None) -> onnx.ModelProto:
    """Relu then Resize (by scales or to sizes), so the resize reads device memory."""
    from onnx import TensorProto, helper, numpy_helper

    initializers, inputs = [], ["r", ""]
    if scales is not None:
        initializers.append(numpy_helper.from_array(np.asarray(scales, dtype=np.float32), "scales"))
        inputs.append("scales")
    else:
        initializers.append(numpy_helper.from_array(np.asarray(sizes, dtype=np.int64), "sizes"))
        inputs += ["", "sizes"]
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Resize", inputs, ["y"], **attrs)]
    graph = helper.make_graph(nodes, "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


@pytest.mark.parametrize("shape, attrs, scales, sizes, gemms", [
    ([1, 3, 4, 5], {"mode": "linear"}, [1, 1, 2, 2], None, 2),  # UNet's: half_pixel, edges replicate
    ([2, 2, 3, 4], {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
     [1, 1, 2, 3], None, 2),
    ([1, 2, 5, 4], {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None, [1, 2, 7, 3], 2),
    ([1, 2, 4, 4], {"mode": "cubic"}, [1, 1, 1, 2], None, 1),  # width only: one gemm
    ([3, 6, 4], {"mode": "linear"}, [1, 1.5, 1], None, 1),  # height only: one strided batched gemm
])
def test_resize_is_two_gemms(shape: list[int], attrs: dict[str, Any], scales: list[float] | None,
                             sizes: list[int] | None, gemms: int) -> None:
    """Each resized axis is one gemm by its interpolation matrix; both axes go through the workspace."""
    from pyocc.testing.random_graphs import compare_with_onnxruntime

    model = _resize_graph(shape, attrs, scales, sizes)
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    fake = FakeCuda()
    problem = compare_with_onnxruntime(model, {"x": x}, target="cuda", memory="lazy", cuda_libraries=fake)
    assert problem is None, (problem, fake.errors)
    assert fake.calls["cublasSgemm_v2"] + fake.calls["cublasSgemmStridedBatched"] == gemms
    assert fake.errors == [] and fake.uninitialised_reads == []


def test_resize_of_the_channel_axis_fails_to_lower() -> None:
    model = _resize_graph([1, 2, 3, 3], {"mode": "nearest"}, [1, 2, 1, 1])
    with pytest.raises(PyoccError, match="it resizes axis 1, which has no cuBLAS lowering"):
        pyocc.compile(model, target="cuda", cuda_libraries=FakeCuda())


@pytest.mark.parametrize("memory", ["lazy", "pool"])
def test_unet_matches_onnxruntime(memory: str) -> None:
    """UNet in miniature (tests/graphs.py): convs, max pooling, a ConvTranspose
    (backward data), a bilinear Resize (two gemms) and skip concats."""
    from pyocc.testing.random_graphs import compare_with_onnxruntime
    from tests.graphs import GRAPHS, random_inputs

    model = GRAPHS["unet"]()
    fake = FakeCuda()
    problem = compare_with_onnxruntime(model, random_inputs(model, 0), target="cuda", memory=memory,
                                       cuda_libraries=fake)
    assert problem is None, (problem, fake.errors)
    assert fake.calls["cudnnConvolutionBackwardData"] == 1 and fake.calls["cublasSgemmStridedBatched"] == 1
    assert fake.errors == [] and fake.uninitialised_reads == []


def test_save_writes_llvm_ir_only(tmp_path: Any) -> None:
    compiled = pyocc.compile(tiny_cnn(), target="cuda", memory="pool", cuda_libraries=FakeCuda())
    compiled.save(tmp_path / "model.ll")
    assert '@"cudaMalloc"' in (tmp_path / "model.ll").read_text()
    for suffix in (".so", ".o"):
        with pytest.raises(PyoccError, match=r"target cuda writes LLVM IR \(\.ll\) only"):
            compiled.save(tmp_path / f"model{suffix}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ll"]


def _preact_graph(channels: int, kernel: int, input_read_after: bool) -> onnx.ModelProto:
    """BatchNormalization -> Relu -> Conv (DenseNet's pre-activation, fused to
    dnn.preact_conv), then, when `input_read_after`, Relu(x) as a second output,
    so that x is still live after the convolution."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(channels + kernel)
    c, m = channels, 6
    arrays = {"s": rng.standard_normal(c), "b": rng.standard_normal(c), "mean": rng.standard_normal(c),
              "var": rng.uniform(0.5, 2.0, c), "w": rng.standard_normal([m, c, kernel, kernel]) / c,
              "wb": rng.standard_normal(m)}
    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in arrays.items()]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["pre"]),
             helper.make_node("Conv", ["pre", "w", "wb"], ["y"], pads=[kernel // 2] * 4)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, 6, 6])]
    if input_read_after:
        nodes.append(helper.make_node("Relu", ["x"], ["x_relu"]))
        outputs.append(helper.make_tensor_value_info("x_relu", TensorProto.FLOAT, [1, c, 6, 6]))
    graph = helper.make_graph(nodes, "preact", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 6, 6])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("memory", ["eager", "lazy", "pool"])
@pytest.mark.parametrize("channels, kernel, read_after, path", [
    (80, 1, True, "blocks"),  # 1x1: pre-activated 64 + 16 channels at a time, each block a cuBLAS product
    (200, 1, True, "blocks"),  # 64 + 64 + 64 + 8: the middle full blocks are one loop in the code
    (8, 3, True, "scratch"),  # 3x3, x live after it: the whole pre-activated x in the op's scratch buffer
    (8, 3, False, "in place"),  # 3x3, x dies there: pre-activated in place, no scratch
])
def test_preact_conv_runs_on_cuda(memory: str, channels: int, kernel: int, read_after: bool, path: str) -> None:
    """DenseNet's pre-activation convolution on target=cuda: a generated
    kernel (its host twin here) pre-activates into planned scratch (or in
    place), then cuBLAS or cuDNN convolves; the outputs match onnxruntime."""
    from pyocc.dialects.dnn import ops as d
    from pyocc.lowering.cuda_scratch import preact_block, preact_in_place

    model = _preact_graph(channels, kernel, read_after)
    x = np.random.default_rng(1).standard_normal([1, channels, 6, 6]).astype(np.float32)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    expected = ort.InferenceSession(model.SerializeToString(), options).run(None, {"x": x})
    fake = FakeCuda()
    compiled = pyocc.compile(model, target="cuda", memory=memory, cuda_libraries=fake, reorder="given",
                             workspace=1 << 16)
    (op,) = [o for o in compiled.module.walk() if isinstance(o, d.PreActConvOp)]
    assert path == ("in place" if preact_in_place(op) else "blocks" if preact_block(op) else "scratch")
    # blocks: one 64-channel block of 6x6 floats; scratch: x (1152 B, to 1280 for alignment) then
    # cuDNN's 64 KiB; in place: cuDNN's 64 KiB only
    assert op.workspace is not None
    assert d.type_bytes(op.workspace.type) == {"blocks": 4 * 64 * 36, "scratch": 1280 + (1 << 16),
                                               "in place": 1 << 16}[path]
    got = compiled.run({"x": x})
    for value, want in zip(got.values(), expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
    assert fake.errors == []
    blocks = -(-channels // 64)
    assert fake.calls["cuLaunchKernel"] == (blocks if path == "blocks" else 1)
    assert fake.calls["cublasSgemm_v2"] == (blocks if path == "blocks" else 0)
    assert fake.calls["cudnnConvolutionForward"] == (0 if path == "blocks" else 1)
    compiled.native.close()
    assert fake.leaks() == []

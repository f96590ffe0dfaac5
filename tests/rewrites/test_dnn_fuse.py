"""dnn-fuse on whole models: fewer kernels, never a higher peak, and the
fused kernels compute what onnxruntime computes.

The FileCheck tests (filecheck/rewrites/dnn_fuse.mlir) pin each rule on
small IR; these tests check the pass on the light models (peak memory with
the liveness analysis, op counts) and the fused kernels' numbers on small
graphs built with onnx.helper and seeded random weights.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.context import Context
from xdsl.dialects import func

import pyocc
from pyocc.analysis.liveness import analyze_function
from pyocc.dialects.dnn import ops as d
from pyocc.frontend.onnx_import import import_model
from pyocc.pipelines import Options, run_passes, tensor_passes
from tests.conftest import LIGHT_MODELS, light_model_path
from tests.tools.inprocess import run_tool

ort = pytest.importorskip("onnxruntime")


def tensor_form(model: object, fuse: bool) -> func.FuncOp:
    """The model's function in tensor-form dnn, with or without dnn-fuse."""
    module = import_model(model)
    run_passes(Context(), module, tensor_passes(Options(fuse=fuse)))
    return next(op for op in module.walk() if isinstance(op, func.FuncOp))


def kernels(function: func.FuncOp) -> list[str]:
    """The kernel of every compute op, in order."""
    return [op.kernel for op in function.body.block.ops if isinstance(op, d.DnnComputeOp)]


#: onnxruntime's optimised graph (ORT_ENABLE_ALL) node count per light model
#: (bench/fusion_ops.py); the goal is to launch no more kernels than it.
ORT_NODES = {"bvlc_alexnet": 20, "densenet121": 557, "inception_v1": 90, "inception_v2": 96, "resnet50": 59,
             "shufflenet": 174, "squeezenet": 40, "vgg19": 27, "zfnet512": 20}


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_fusion_fewer_kernels_never_a_higher_peak(name: str) -> None:
    before = tensor_form(light_model_path(name), fuse=False)
    after = tensor_form(light_model_path(name), fuse=True)
    assert analyze_function(after).lower_bound <= analyze_function(before).lower_bound
    launches = kernels(after)
    assert len(launches) < len(kernels(before))
    assert len(launches) <= ORT_NODES[name]
    # every BatchNormalization folds or joins a conv but DenseNet's last one
    assert launches.count("channel_affine") <= 1


def random_initializer(rng: np.random.Generator, name: str, shape: list[int], positive: bool = False) -> onnx.TensorProto:
    values = rng.standard_normal(shape).astype(np.float32) * 0.5
    return numpy_helper.from_array(np.abs(values) + 0.5 if positive else values, name)


def compare_with_onnxruntime(model: onnx.ModelProto, expect_kernels: set[str]) -> None:
    """Compile `model` with fusion on and off; both match onnxruntime, and
    the fused module runs the `expect_kernels` (so the test cannot pass by
    not fusing)."""
    onnx.checker.check_model(model)
    rng = np.random.default_rng(7)
    inits = {t.name for t in model.graph.initializer}
    inputs = {i.name: rng.standard_normal([x.dim_value for x in i.type.tensor_type.shape.dim]).astype(np.float32)
              for i in model.graph.input if i.name not in inits}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    expected = ort.InferenceSession(model.SerializeToString(), options).run(None, inputs)
    for fuse in (True, False):
        compiled = pyocc.compile(model, memory="pool", fuse=fuse)
        ran = {op.kernel for op in compiled.module.walk() if isinstance(op, d.DnnComputeOp)}
        if fuse:
            assert expect_kernels <= ran
        for got, want in zip(compiled.run(inputs).values(), expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("channels, kernel", [(4, 3), (70, 1)])
def test_preact_conv_matches_onnxruntime(channels: int, kernel: int) -> None:
    """BatchNormalization -> Relu -> Conv (+ residual Add + Relu): the
    pre-activation runs inside the conv; padding stays zero after it (3x3),
    and a pointwise conv sums blocks of input channels (70 > PREACT_BLOCK)."""
    rng = np.random.default_rng(0)
    c, m = channels, 4
    nodes = [
        helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["pre"]),
        helper.make_node("Conv", ["pre", "w", "wb"], ["conv"], pads=[kernel // 2] * 4),
        helper.make_node("Add", ["conv", "x"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["y"]),
    ]
    inits = [random_initializer(rng, "s", [c]), random_initializer(rng, "b", [c]),
             random_initializer(rng, "mean", [c]), random_initializer(rng, "var", [c], positive=True),
             random_initializer(rng, "w", [m, c, kernel, kernel]), random_initializer(rng, "wb", [m])]
    graph = helper.make_graph(nodes, "preact", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, 6, 6])], inits)
    if c != m:  # the residual must have the conv's shape: add a slice of x's channels instead
        nodes[3].input[1] = "x_head"
        nodes.insert(3, helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["x_head"]))
        graph = helper.make_graph(nodes, "preact", list(graph.input), list(graph.output),
                                  inits + [numpy_helper.from_array(np.array(v, dtype=np.int64), n)
                                           for n, v in [("starts", [0]), ("ends", [m]), ("axes", [1])]])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compare_with_onnxruntime(model, {"preact_conv"})
    assert [k for k in kernels(tensor_form(model, fuse=True)) if k != "slice"] == ["preact_conv"]


def test_transformer_pieces_match_onnxruntime() -> None:
    """A decomposed LayerNorm, MatMul + Add + Erf-GELU, MatMul + Add on a
    batch of token rows: fused to layer_norm, gemm, gelu, gemm."""
    rng = np.random.default_rng(1)
    batch, tokens, width, hidden = 2, 3, 8, 16

    def const(name: str, value: float) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(value, dtype=np.float32), name)

    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], ["g"]),
        helper.make_node("Add", ["g", "beta"], ["ln"]),
        helper.make_node("MatMul", ["ln", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Div", ["hb", "sqrt2"], ["hs"]),
        helper.make_node("Erf", ["hs"], ["he"]),
        helper.make_node("Add", ["he", "one"], ["h1"]),
        helper.make_node("Mul", ["hb", "h1"], ["hg"]),
        helper.make_node("Mul", ["hg", "half"], ["gelu"]),
        helper.make_node("MatMul", ["gelu", "w2"], ["o"]),
        helper.make_node("Add", ["o", "b2"], ["y"]),
    ]
    inits = [const("two", 2.0), const("eps", 1e-5), const("sqrt2", float(np.sqrt(2.0))), const("one", 1.0),
             const("half", 0.5), random_initializer(rng, "gamma", [width]), random_initializer(rng, "beta", [width]),
             random_initializer(rng, "w1", [width, hidden]), random_initializer(rng, "b1", [hidden]),
             random_initializer(rng, "w2", [hidden, width]), random_initializer(rng, "b2", [width])]
    graph = helper.make_graph(nodes, "block",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, tokens, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, tokens, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compare_with_onnxruntime(model, {"layer_norm", "gemm", "unary"})
    fused = kernels(tensor_form(model, fuse=True))
    assert fused == ["layer_norm", "gemm", "unary", "gemm"]


def test_tanh_gelu_matches_onnxruntime() -> None:
    """GELU's tanh approximation, as GPT-2 exports write it, is one gelu."""
    names = {"half": 0.5, "three": 3.0, "c": 0.044715, "k": float(np.sqrt(2.0 / np.pi)), "one": 1.0}
    nodes = [
        helper.make_node("Mul", ["x", "half"], ["h"]),
        helper.make_node("Pow", ["x", "three"], ["p"]),
        helper.make_node("Mul", ["p", "c"], ["q"]),
        helper.make_node("Add", ["x", "q"], ["r"]),
        helper.make_node("Mul", ["r", "k"], ["s"]),
        helper.make_node("Tanh", ["s"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["u"]),
        helper.make_node("Mul", ["h", "u"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
                              [numpy_helper.from_array(np.array(v, dtype=np.float32), n) for n, v in names.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compare_with_onnxruntime(model, {"unary"})
    assert kernels(tensor_form(model, fuse=True)) == ["unary"]


def test_attention_softmax_matches_onnxruntime() -> None:
    """softmax(Q K^T / sqrt(d) + mask) V: the scores are one kernel."""
    heads, tokens, width = 2, 4, 8
    nodes = [
        helper.make_node("MatMul", ["q", "k"], ["s"]),
        helper.make_node("Div", ["s", "root_d"], ["scaled"]),
        helper.make_node("Add", ["scaled", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in
              [("q", [heads, tokens, width]), ("k", [heads, width, tokens]), ("mask", [1, tokens, tokens]),
               ("v", [heads, tokens, width])]]
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [heads, tokens, width])],
                              [numpy_helper.from_array(np.array(np.sqrt(width), dtype=np.float32), "root_d")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    compare_with_onnxruntime(model, {"attention_softmax"})
    assert kernels(tensor_form(model, fuse=True)) == ["attention_softmax", "matmul"]


def test_cli_no_fuse_measures_fusion(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pyocc.tools.cli import main

    path = str(light_model_path("squeezenet"))
    reports = {}
    for flags in ([], ["--no-fuse"]):  # fusion alone: coalescing would also remove the relu buffers
        assert main(["plan", path, "--format", "json", "--no-coalesce", *flags]) == 0
        reports[bool(flags)] = json.loads(capsys.readouterr().out)
    assert len(reports[False]["buffers"]) < len(reports[True]["buffers"])
    assert reports[False]["activation_bytes"] < reports[True]["activation_bytes"]


def test_pipelines_take_fuse_false() -> None:
    """`pyocc-opt -p 'occamy-lazy{fuse=false}'` keeps every op of the model."""
    path = str(light_model_path("squeezenet"))
    counts = {}
    for flag in ("true", "false"):
        done = run_tool("pyocc-opt", path, "-p", f"occamy-lazy{{fuse={flag}}}")
        assert done.returncode == 0, done.stderr
        counts[flag] = done.stdout.count("dnn.unary ins(")
    assert counts == {"true": 0, "false": 26}


@pytest.mark.parametrize("kernel", [1, 3])
def test_preact_conv_may_write_over_its_residual(kernel: int) -> None:
    """dnn-coalesce may give preact_conv its dying residual as `out`: the
    result is the same as into a fresh buffer."""
    from pyocc.runtime.host_kernels import preact_conv

    rng = np.random.default_rng(3)
    c, m = 70, 8
    x = rng.standard_normal((1, c, 5, 6)).astype(np.float32)
    scale, shift = rng.standard_normal((2, c)).astype(np.float32)
    w = rng.standard_normal((m, c, kernel, kernel)).astype(np.float32)
    residual = rng.standard_normal((1, m, 5, 6)).astype(np.float32)
    fresh = np.full_like(residual, np.nan)
    preact_conv(x, scale, shift, w, None, residual, out=fresh, pre_activation="relu", pads=[kernel // 2] * 4)
    in_place = residual.copy()
    preact_conv(x, scale, shift, w, None, in_place, out=in_place, pre_activation="relu", pads=[kernel // 2] * 4)
    np.testing.assert_array_equal(in_place, fresh)
    assert not np.isnan(fresh).any()

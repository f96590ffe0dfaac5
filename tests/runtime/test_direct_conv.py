"""The direct 3x3 convolution on packed weights (pyocc.lowering.native.conv).

A static 3x3 stride-1 convolution padded by 1, narrow or on a mid-sized
image (`direct_conv_layouts`), runs without im2col or BLAS on its weights
packed in blocks of output channels: select_kernels marks the weight's
entry, pack_weight_pool permutes it, the emitter reads the site's
"packed_weights". Checked here against onnxruntime on random weights and
inputs, across thread counts, and where the weights must stay as they are
(a weight two convolutions read, the numpy kernels)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import pyocc
from pyocc.api import Model
from pyocc.errors import PyoccError
from pyocc.lowering.native.conv import direct_conv_layouts, host_has_avx512
from pyocc.runtime.bridge import output_channel_blocks

pytestmark = pytest.mark.skipif(host_has_avx512(), reason="the direct 3x3 kernel's tile is sized for AVX2 hosts "
                                                          "without AVX-512; this host keeps im2col + sgemm")


def conv_model(channels: int, height: int, width: int, outs: int, batch: int = 1, epilogue: str = "relu",
               shared_weight: bool = False, strides: int = 1, pads: int = 1, kernel: int = 3, group: int = 1,
               seed: int = 0) -> onnx.ModelProto:
    """x -> Conv(3x3, pad 1) [+ r] [-> Relu] (epilogue "relu", "residual":
    bias, add and relu, "none": no bias nor activation); with
    `shared_weight` a second Conv reads the same weight and is added on."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((outs, channels // group, kernel, kernel)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(outs).astype(np.float32), "b")
    out_size = [(size + 2 * pads - kernel) // strides + 1 for size in (height, width)]
    attributes = {"pads": [pads] * 4, "strides": [strides] * 2, "group": group}
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, channels, height, width])]
    nodes = [helper.make_node("Conv", ["x", "w"] if epilogue == "none" else ["x", "w", "b"], ["c"], **attributes)]
    last = "c"
    if shared_weight:
        nodes += [helper.make_node("Conv", ["x", "w"], ["c2"], **attributes),
                  helper.make_node("Add", ["c", "c2"], ["both"])]
        last = "both"
    if epilogue == "residual":
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [batch, outs, *out_size]))
        nodes.append(helper.make_node("Add", [last, "r"], ["sum"]))
        last = "sum"
    if epilogue in ("relu", "residual"):
        nodes.append(helper.make_node("Relu", [last], ["y"]))
        last = "y"
    graph = helper.make_graph(nodes, "direct", inputs,
                              [helper.make_tensor_value_info(last, TensorProto.FLOAT, [batch, outs, *out_size])],
                              [w] if epilogue == "none" else [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def random_inputs(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    """Random float32 inputs of the model's shapes."""
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def expected(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """onnxruntime's output."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


def conv_sites(compiled: Model) -> list[dict]:
    """The conv sites of a compiled model."""
    return [site for site in compiled.native.meta["sites"] if site["kernel"] == "conv"]


#: (input channels, height, width, output channels, batch): mid-sized images of a few channels (rows of
#: 27 and 26: tiles of 6 and a narrower last one), and narrow ones (32 output channels) of any size
SHAPES = [(5, 27, 27, 16, 1), (7, 30, 26, 48, 1), (16, 28, 28, 32, 2), (3, 9, 11, 32, 2), (40, 7, 7, 32, 1)]


@pytest.mark.parametrize("epilogue", ["relu", "residual", "none"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_direct_conv_matches_onnxruntime(shape: tuple[int, ...], epilogue: str) -> None:
    """The convolution takes the direct kernel and matches onnxruntime."""
    channels, height, width, outs, batch = shape
    model = conv_model(channels, height, width, outs, batch, epilogue)
    inputs = random_inputs(model)
    compiled = pyocc.compile(model)
    (site,) = conv_sites(compiled)
    if channels * 9 <= 32 and epilogue != "residual":
        # so shallow a convolution runs the spatial register tiles instead
        assert "packed_weights" not in site
    else:
        assert site["packed_weights"] == {"1": {"layout": "output_channel_blocks", "block": 16}}
    (got,) = compiled.run(inputs).values()
    np.testing.assert_allclose(got, expected(model, inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(5, 27, 27, 16, 1), (16, 28, 28, 32, 2)], ids=lambda s: "x".join(map(str, s)))
def test_direct_conv_gives_one_threads_bytes_on_any_thread_count(shape: tuple[int, ...]) -> None:
    """Each output is summed by one tile in the taps' order, so 2 and 3
    threads give the bytes of one."""
    model = conv_model(*shape, epilogue="residual")
    inputs = random_inputs(model)
    (want,) = pyocc.compile(model).run(inputs).values()
    for threads in (2, 3):
        compiled = pyocc.compile(model, threads=threads)
        assert "packed_weights" in conv_sites(compiled)[0]
        (got,) = compiled.run(inputs).values()
        np.testing.assert_array_equal(got, want, err_msg=f"{threads} threads")


def test_a_weight_two_convolutions_read_stays_as_it_is() -> None:
    """Only a weight's one reader may have it packed: two convolutions of
    one weight both read it as it is (im2col + sgemm) and match."""
    model = conv_model(5, 27, 27, 16, shared_weight=True)
    inputs = random_inputs(model)
    compiled = pyocc.compile(model)
    sites = conv_sites(compiled)
    assert len(sites) == 2 and not any("packed_weights" in site for site in sites)
    assert not any("pack" in entry for entry in compiled.native.meta["weights"]["entries"])
    (got,) = compiled.run(inputs).values()
    np.testing.assert_allclose(got, expected(model, inputs), rtol=1e-4, atol=1e-4)


def test_numpy_kernels_read_the_weights_as_they_are() -> None:
    """With kernels="numpy" no site is native, so no weight is packed."""
    model = conv_model(5, 27, 27, 16)
    inputs = random_inputs(model)
    compiled = pyocc.compile(model, kernels="numpy")
    assert not any("pack" in entry for entry in compiled.native.meta["weights"]["entries"])
    (got,) = compiled.run(inputs).values()
    np.testing.assert_allclose(got, expected(model, inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("arguments", "direct"), [
    ({"channels": 5, "height": 27, "width": 27, "outs": 16}, True),  # mid-sized image
    ({"channels": 64, "height": 64, "width": 64, "outs": 64}, True),  # the largest mid-sized image
    ({"channels": 40, "height": 7, "width": 7, "outs": 32}, True),  # narrow, small image
    ({"channels": 256, "height": 14, "width": 14, "outs": 32}, True),  # narrow, deep
    ({"channels": 64, "height": 14, "width": 14, "outs": 64}, False),  # small image, not narrow
    ({"channels": 192, "height": 28, "width": 28, "outs": 64}, False),  # mid-sized but deep
    ({"channels": 16, "height": 70, "width": 70, "outs": 64}, False),  # a large image
    ({"channels": 16, "height": 28, "width": 28, "outs": 40}, False),  # outputs not a multiple of 16
    ({"channels": 16, "height": 28, "width": 28, "outs": 32, "strides": 2}, False),
    ({"channels": 16, "height": 28, "width": 28, "outs": 32, "pads": 0}, False),
    ({"channels": 16, "height": 28, "width": 28, "outs": 32, "kernel": 5, "pads": 2}, False),
    ({"channels": 16, "height": 28, "width": 28, "outs": 32, "group": 2}, False),
])
def test_which_convolutions_run_the_direct_kernel(arguments: dict, direct: bool) -> None:
    """`direct_conv_layouts`: 3x3 stride 1 padded by 1, group 1, outputs a
    multiple of 16, and narrow (at most 32 outputs) or of 700 to 4096
    positions and at most 128 input channels."""
    model = conv_model(**arguments, epilogue="residual")
    (site,) = conv_sites(pyocc.compile(model, jit=False))
    assert (direct_conv_layouts(site) is not None) == direct
    assert ("packed_weights" in site) == direct


def test_output_channel_blocks() -> None:
    """w[m, c, ky, kx] lands at [m // block, c, ky, kx, m % block]; outputs
    that are not a multiple of the block are refused in one line."""
    w = np.arange(32 * 3 * 3 * 3, dtype=np.float32).reshape(32, 3, 3, 3)
    packed = output_channel_blocks(w, 16)
    assert packed.shape == (2, 3, 3, 3, 16)
    for m, c, ky, kx in [(0, 0, 0, 0), (17, 2, 1, 0), (31, 1, 2, 2)]:
        assert packed[m // 16, c, ky, kx, m % 16] == w[m, c, ky, kx]
    with pytest.raises(PyoccError, match="no layout in blocks of 16"):
        output_channel_blocks(w[:24], 16)

"""Shallow spatial convolutions: generated register tiles or im2col + sgemm?

For stride-1 padded convolutions + bias + relu of SqueezeNet (the fire
modules' 3x3 expands), VGG-19 and deeper shapes, on one thread, prints
GFLOP/s (2 * MACs / CPU seconds, the best of 2 medians of 5 runs, the
three contenders taking turns) of

- tiles: pyocc.lowering.native.conv's `_spatial_tiles` (forced on);
- sgemm path: the same site through OpenBLAS (the tiles forced off);
- ort: onnxruntime's Conv + Relu, one intra-op thread;

the ratios, and which of the two pyocc picks (`tiled_spatial`) on this
host (on one thread). docs/performance.md ("Shallow spatial convolutions in
register tiles") has the measured table.

    python bench/spatial_conv.py
    python bench/spatial_conv.py --stride2    # the strided stems instead
"""

from __future__ import annotations

import argparse
import os
import sys

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[variable] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import pyocc.lowering.native.conv as conv  # noqa: E402
from pyocc.dialects.dnn.scratch import conv_scratch_bytes  # noqa: E402
from pyocc.testing.native_kernels import CompiledSite, site_for  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pointwise_conv import cpu_median  # noqa: E402  (the same timing as the pointwise table)

#: (input channels, image size, output channels, kernel size)
SHAPES = [(3, 224, 64, 3), (3, 28, 32, 3), (8, 27, 64, 3), (16, 13, 64, 3), (16, 27, 64, 3), (16, 55, 64, 3),
          (24, 55, 64, 3), (32, 27, 128, 3), (48, 13, 192, 3), (64, 13, 256, 3), (64, 56, 64, 3), (128, 28, 128, 3),
          (3, 56, 64, 7), (16, 27, 32, 5)]
#: the stride-2 stems, as SHAPES: SqueezeNet's (3x3, 3 -> 64 at 224; the same at 227 is 111 x 111 out),
#: ShuffleNet's (3x3, 3 -> 24 at 224), the 7x7 stems of ResNet-50, Inception v1/v2, DenseNet-121 (3 -> 64
#: at 224) and ZFNet's (3 -> 96 at 224)
STRIDE2_SHAPES = [(3, 224, 64, 3), (3, 227, 64, 3), (3, 224, 24, 3), (3, 224, 64, 7), (3, 224, 96, 7)]


def compiled(site: dict, tiles: bool) -> CompiledSite:
    """The site's native conv with the register tiles forced on or off."""
    saved = conv.TILED_SPATIAL_SHALLOW, conv.TILED_SPATIAL_DEPTH
    saved_avx512 = conv.host_has_avx512
    conv.TILED_SPATIAL_SHALLOW = conv.TILED_SPATIAL_DEPTH = 1 << 30 if tiles else 0
    conv.host_has_avx512 = lambda: False  # type: ignore[assignment]
    try:
        return CompiledSite(site, conv.emit_conv)
    finally:
        (conv.TILED_SPATIAL_SHALLOW, conv.TILED_SPATIAL_DEPTH), conv.host_has_avx512 = saved, saved_avx512


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride2", action="store_true", help="the stride-2 stems (STRIDE2_SHAPES)")
    stride = 2 if parser.parse_args().stride2 else 1
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    rng = np.random.default_rng(0)
    print("| conv (depth) | tiles GFLOP/s | sgemm path | onnxruntime | tiles / sgemm | tiles / ort | sgemm / ort "
          "| chosen |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for channels, size, outs, kernel in STRIDE2_SHAPES if stride == 2 else SHAPES:
        pad = kernel // 2
        out_size = (size + 2 * pad - kernel) // stride + 1
        x = rng.standard_normal((1, channels, size, size), dtype=np.float32)
        w = rng.standard_normal((outs, channels, kernel, kernel), dtype=np.float32) * np.float32(0.1)
        bias = rng.standard_normal(outs, dtype=np.float32)
        out = np.empty((1, outs, out_size, out_size), np.float32)
        inputs = [x, w, bias, None]
        # the whole im2col block as planned scratch: the sgemm path at its best
        workspace = np.empty(conv_scratch_bytes(x.shape, w.shape, out.shape, [stride] * 2, [pad] * 4, 1, 4),
                             np.int8)
        site = site_for("conv", inputs, [(out.shape, "float32")], workspace_bytes=workspace.size,
                        pads=[pad] * 4, strides=[stride] * 2, activation="relu")
        tiles, blas = compiled(site, True), compiled(site, False)
        chosen = "tiles" if conv.register_tiles(site) else "sgemm"
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[pad] * 4, strides=[stride] * 2),
                 helper.make_node("Relu", ["c"], ["y"])]
        weights = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, out.shape)], weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        session = ort.InferenceSession(model.SerializeToString(), options)
        times: dict[str, list[float]] = {"tiles": [], "blas": [], "ort": []}
        for _ in range(2):
            times["tiles"].append(cpu_median(lambda: tiles(inputs, [out], workspace), repeat=5))
            times["blas"].append(cpu_median(lambda: blas(inputs, [out], workspace), repeat=5))
            times["ort"].append(cpu_median(lambda: session.run(None, {"x": x}), repeat=5))
        tiles(inputs, [out], workspace)
        assert np.allclose(out, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4), "the tiles are wrong"
        flops = 2.0 * outs * channels * kernel * kernel * out_size * out_size
        t, s, o = (min(times[name]) for name in ("tiles", "blas", "ort"))
        print(f"| {kernel}x{kernel}{' /2' if stride == 2 else ''} {channels}->{outs} @{size} ({channels * kernel * kernel}) "
              f"| {flops / t / 1e9:.1f} | {flops / s / 1e9:.1f} | {flops / o / 1e9:.1f} "
              f"| {t / s:.2f} | {t / o:.2f} | {s / o:.2f} | {chosen} |", flush=True)


if __name__ == "__main__":
    main()

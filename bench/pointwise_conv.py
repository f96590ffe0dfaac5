"""Shallow pointwise convolutions: generated register tiles or sgemm?

For 1x1 convolutions + bias + relu of SqueezeNet, ResNet-50 and
Inception-like shapes (with --grouped: ShuffleNet's grouped ones), on one
thread, prints GFLOP/s (2 * MACs / CPU seconds, the best of 3 medians of
15 runs, the three contenders taking turns) of

- tiles: pyocc.lowering.native.conv's `_pointwise_tiles` (forced on);
- sgemm path: the same site through OpenBLAS (the tiles forced off);
- ort: onnxruntime's Conv + Relu, one intra-op thread;

and the ratios. docs/performance.md ("Shallow pointwise convolutions in
register tiles") has the measured table.

    python bench/pointwise_conv.py [--grouped]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[variable] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import pyocc.lowering.native.conv as conv  # noqa: E402
from pyocc.testing.native_kernels import CompiledSite, site_for  # noqa: E402

#: (input channels, image size, output channels)
SHAPES = [(16, 55, 64), (32, 27, 128), (48, 13, 192), (64, 13, 256), (16, 56, 64), (24, 28, 144), (32, 56, 128),
          (48, 28, 192), (64, 56, 256), (64, 28, 128), (128, 28, 512), (128, 55, 16), (256, 14, 1024),
          (256, 56, 64), (512, 7, 2048), (512, 28, 128), (1024, 14, 256)]
#: (input channels, image size, output channels, groups): the light ShuffleNet's grouped 1x1s (but one of
#: 6 channels per group, which runs the direct loops)
GROUPED_SHAPES = [(112, 28, 112, 4), (136, 28, 136, 4), (136, 14, 136, 4), (272, 14, 272, 4),
                  (272, 7, 272, 4)]


def cpu_median(run: Callable[[], None], repeat: int = 15) -> float:
    """The median CPU seconds of `repeat` runs after one warm-up."""
    run()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return statistics.median(times)


def compiled(site: dict, tiles: bool) -> CompiledSite:
    """The site's native conv with the register tiles forced on or off."""
    saved = conv.TILED_POINTWISE_DEPTH
    saved_avx512 = conv.host_has_avx512
    conv.TILED_POINTWISE_DEPTH = 1 << 30 if tiles else 0
    conv.host_has_avx512 = lambda: False  # type: ignore[assignment]
    try:
        return CompiledSite(site, conv.emit_conv)
    finally:
        conv.TILED_POINTWISE_DEPTH, conv.host_has_avx512 = saved, saved_avx512


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grouped", action="store_true", help="ShuffleNet's grouped 1x1 convolutions instead")
    shapes = GROUPED_SHAPES if parser.parse_args().grouped else [(*shape, 1) for shape in SHAPES]
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    rng = np.random.default_rng(0)
    print("| 1x1 conv | tiles GFLOP/s | sgemm path | onnxruntime | tiles / sgemm | tiles / ort | sgemm / ort |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for channels, size, outs, group in shapes:
        x = rng.standard_normal((1, channels, size, size), dtype=np.float32)
        w = rng.standard_normal((outs, channels // group, 1, 1), dtype=np.float32) * np.float32(0.1)
        bias = rng.standard_normal(outs, dtype=np.float32)
        out = np.empty((1, outs, size, size), np.float32)
        inputs = [x, w, bias, None]
        site = site_for("conv", inputs, [(out.shape, "float32")], activation="relu", group=group)
        tiles, blas = compiled(site, True), compiled(site, False)
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=group), helper.make_node("Relu", ["c"], ["y"])]
        weights = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, out.shape)], weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        session = ort.InferenceSession(model.SerializeToString(), options)
        times: dict[str, list[float]] = {"tiles": [], "blas": [], "ort": []}
        for _ in range(3):
            times["tiles"].append(cpu_median(lambda: tiles(inputs, [out])))
            times["blas"].append(cpu_median(lambda: blas(inputs, [out])))
            times["ort"].append(cpu_median(lambda: session.run(None, {"x": x})))
        tiles(inputs, [out])
        assert np.allclose(out, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4), "the tiles are wrong"
        flops = 2.0 * outs * channels // group * size * size
        t, s, o = (min(times[name]) for name in ("tiles", "blas", "ort"))
        groups = f" /{group}" if group > 1 else ""
        print(f"| {channels}->{outs}{groups} @{size} | {flops / t / 1e9:.1f} | {flops / s / 1e9:.1f} "
              f"| {flops / o / 1e9:.1f} | {t / s:.2f} | {t / o:.2f} | {s / o:.2f} |", flush=True)


if __name__ == "__main__":
    main()

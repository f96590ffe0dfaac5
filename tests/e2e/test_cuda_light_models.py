"""On a GPU (marker `gpu`; skipped with the reason elsewhere): the nine light
models with random weights, compiled for `target="cuda"` in pool mode, match
onnxruntime on the CPU within rtol 1e-3 / atol 1e-4 (cuDNN and cuBLAS sum in
other orders than onnxruntime's CPU kernels), and pool mode allocates device
memory once per run at most. bench/gpu_memory_latency.py checks eager and
lazy mode the same way and measures them; bench/gpu_check.sh runs both.
"""

from __future__ import annotations

import numpy as np
import pytest

from pyocc.testing.light_models import LIGHT_MODELS, onnxruntime_reference


@pytest.mark.gpu
@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_on_the_gpu_matches_onnxruntime(name: str) -> None:
    pytest.importorskip("onnxruntime")
    import pyocc

    model, inputs, expected = onnxruntime_reference(name)
    compiled = pyocc.compile(model, target="cuda", memory="pool")
    got = compiled.run(inputs)
    assert list(got) == compiled.output_names
    for value, want in zip(got.values(), expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-3, atol=1e-4)
    compiled.run(inputs)  # pool mode: one cudaMalloc per run, the planned pool
    stats = compiled.native.alloc_stats()
    assert stats.allocations == stats.frees == 1
    assert stats.peak_bytes == compiled.memory_report().activation_bytes


@pytest.mark.gpu
@pytest.mark.parametrize("memory", ["lazy", "pool"])
def test_unet_on_the_gpu_matches_onnxruntime(memory: str) -> None:
    """tests/graphs.py's UNet on real cuDNN and cuBLAS: its ConvTranspose is
    cudnnConvolutionBackwardData (the algorithm cuDNN ranks in init), its
    bilinear Resize two gemms through the workspace."""
    pytest.importorskip("onnxruntime")
    from pyocc.testing.random_graphs import compare_with_onnxruntime
    from tests.graphs import GRAPHS, random_inputs

    model = GRAPHS["unet"]()
    problem = compare_with_onnxruntime(model, random_inputs(model, 0), rtol=1e-3, atol=1e-4, target="cuda",
                                       memory=memory)
    assert problem is None, problem

"""End to end on the CPU: light models with their ConstantOfShape weights
replaced by seeded random ones (constant weights hide aliasing bugs) match
onnxruntime in every memory mode. A wrong plan shows up here as wrong numbers.

Weights are drawn in float32 and written with the model as ONNX external
data (He-style scale sqrt(2 / fan_in), so activations neither vanish nor
saturate the final softmax); onnxruntime and pyocc read them from the file,
so AlexNet, ZFNet-512 and VGG-19, whose fully connected weights are 250-550
MB, are in memory once at a time. Each model is written and run by
onnxruntime once per process and shared by its memory modes.
"""

from __future__ import annotations


import numpy as np
import pytest

import pyocc
from pyocc.testing.light_models import onnxruntime_reference

pytest.importorskip("onnxruntime")

CASES = [
    ("squeezenet", "eager"), ("squeezenet", "lazy"), ("squeezenet", "pool"),
    ("shufflenet", "eager"), ("shufflenet", "lazy"), ("shufflenet", "pool"),
    ("inception_v1", "lazy"), ("inception_v1", "pool"),
    ("resnet50", "pool"), ("densenet121", "pool"), ("inception_v2", "lazy"),
    ("inception_v2", "pool"),  # concat elimination and in-place chains in the pool
    # The three models with 250-550 MB of fully connected weights: AlexNet in
    # every mode, ZFNet-512 and VGG-19 (the same layer kinds, more of them)
    # in the default pool mode only. Their eager and lazy runs exercised no
    # code the smaller models' do not, at about a third of the suite's
    # numerics time and its memory peak (VGG-19 eager: 43 s on two cores).
    ("bvlc_alexnet", "eager"), ("bvlc_alexnet", "lazy"), ("bvlc_alexnet", "pool"),
    ("zfnet512", "pool"),
    ("vgg19", "pool"),
]


@pytest.mark.parametrize("name, memory", CASES)
def test_matches_onnxruntime(name: str, memory: str) -> None:
    model, inputs, expected = onnxruntime_reference(name)
    compiled = pyocc.compile(model, memory=memory)
    got = compiled.run(inputs)
    for value, want in zip(got.values(), expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
    report = compiled.memory_report()
    # the default kernels: native where one exists, and the report says how many sites are
    sites = compiled.native.meta["sites"]
    assert compiled.native_sites > 0
    assert compiled.numpy_sites == sum(not site["native"] for site in sites) == len(sites) - compiled.native_sites
    assert (report.native_sites, report.numpy_sites) == (compiled.native_sites, compiled.numpy_sites)
    assert f"kernels          {compiled.native_sites} native, {compiled.numpy_sites} numpy" in str(report)
    # Compiled with the default dnn-reorder: never above the given order.
    assert report.tensor_lower_bound_bytes <= report.lower_bound_given_order_bytes
    if memory != "eager":
        # coalescing only shares bytes: the buffers' bound is at most the
        # tensors'. Not in eager mode, whose coalescing picks concat bands by
        # the sum of sizes (eager's footprint) and may lengthen a band's life
        # past the tensors' peak (ShuffleNet: 3.09 vs 2.75 MiB). The
        # kernels' scratch is no tensor: one op runs at a time, so at most
        # one block (the largest, workspace_bytes) comes on top.
        assert report.lower_bound_bytes <= report.tensor_lower_bound_bytes + report.workspace_bytes
    if memory == "pool":
        assert report.allocator_calls_per_run == 1
        # every light model's convolutions run natively on im2col scratch
        # planned in the pool (scratch=True, the default): no numpy site left
        assert compiled.numpy_sites == 0
        assert any(buffer.name.endswith("_scratch") for buffer in report.buffers)
        assert report.lower_bound_bytes <= report.activation_bytes <= report.lower_bound_bytes + 64 * len(report.buffers)
    elif memory == "lazy":
        assert report.allocator_calls_per_run == len(report.buffers)

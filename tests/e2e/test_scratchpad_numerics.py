"""`--scratchpad` runs the DMA program on the host: dnn-scratchpad stages every
weight and graph input/output through the SRAM pool, dnn-dma-to-memcpy makes
each transfer a copy, and the numbers must still match onnxruntime (random
weights and inputs). The pool is the SRAM and must fit the given size."""

from __future__ import annotations

import numpy as np
import pytest

import pyocc
from pyocc.errors import PyoccError
from pyocc.testing.light_models import onnxruntime_reference

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("name, sram", [("squeezenet", 16 << 20), ("shufflenet", 16 << 20)])
def test_staged_program_matches_onnxruntime(name: str, sram: int) -> None:
    model, inputs, expected = onnxruntime_reference(name)
    compiled = pyocc.compile(model, scratchpad=sram, kernels="numpy")
    got = compiled.run(inputs)
    for value, want in zip(got.values(), expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)
    report = compiled.memory_report()
    assert report.activation_bytes <= sram  # the SRAM pool holds activations and staged operands
    assert report.npu is not None and report.npu["sram_size"] == sram
    # copies in and out, no DMA left for the host lowering
    text = str(compiled.module)
    assert "dnn.memcpy" in text and "dnn.dma_start" not in text


def test_a_pool_larger_than_the_scratchpad_is_one_line() -> None:
    model, _, _ = onnxruntime_reference("squeezenet")
    with pytest.raises(PyoccError, match=r"squeezenet|model: staged whole tensor by whole tensor, the program needs "
                                         r"[0-9,]+ bytes of SRAM, more than the 1,048,576 of --scratchpad"):
        pyocc.compile(model, scratchpad="1MiB", kernels="numpy")

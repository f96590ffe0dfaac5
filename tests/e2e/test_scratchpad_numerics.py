"""`--scratchpad` runs the scheduled program on the host: dnn-npu-schedule
writes the scheduler's result as IR (SRAM buffers at their planned offsets,
DMA with prefetch and write-backs), dnn-dma-to-memcpy makes each transfer a
copy between the two arenas, and the numbers must still match onnxruntime
(random weights and inputs). A schedule the IR cannot run yet (an op on
row bands) is one line."""

from __future__ import annotations

import numpy as np
import pytest

import pyocc
from pyocc.errors import PyoccError
from pyocc.testing.light_models import onnxruntime_reference

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("name, sram", [
    ("squeezenet", 16 << 20), ("shufflenet", 16 << 20),
    ("bvlc_alexnet", 16 << 20),  # fc6-fc8 stream their weights in blocks of output columns
    ("resnet50", 16 << 20),  # four convolutions (residual ones too) in blocks of output channels
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


def test_a_tiled_schedule_is_one_line() -> None:
    model, _, _ = onnxruntime_reference("squeezenet")
    with pytest.raises(PyoccError, match=r"dnn-npu-schedule: the schedule runs op '[^']+' on '[^']+' \(rows of a "
                                         r"tensor\); the IR runs whole tensors and output-channel blocks so far"):
        pyocc.compile(model, scratchpad="1MiB", kernels="numpy")

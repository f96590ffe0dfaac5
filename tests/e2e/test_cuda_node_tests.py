"""onnx's backend node tests on target=cuda, on the CPU stand-in
(pyocc.testing.fake_cuda): for the op types the cuda lowering handles, every
node test either matches onnx's expected outputs or stops with the
lowering's one-line "cannot lower" message. A mismatch, a failed library
call, a leak or a crash fails. `python bench/cuda_coverage.py` prints the
same over all node tests as a table.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx.backend.test.loader import load_model_tests

import pyocc
from pyocc.errors import PyoccError
from pyocc.testing.fake_cuda import FakeCuda

#: op types with a cuda lowering (cuDNN, cuBLAS, copies or generated kernels)
CUDA_OP_TYPES = {
    "Abs", "Add", "ArgMax", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat", "Conv",
    "ConvTranspose", "Resize",
    "Div", "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "Gelu", "Gemm",
    "GlobalAveragePool", "GlobalMaxPool", "Greater", "HardSigmoid", "HardSwish", "LRN", "LayerNormalization",
    "LeakyRelu", "Less", "Log", "LogSoftmax", "MatMul", "Max", "MaxPool", "Mean", "Min", "Mul", "Neg", "Not", "Or",
    "Pow", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
    "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax",
    "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Transpose", "Unsqueeze", "Where", "Xor", "And",
}

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # onnx's generators warn about their own overflows
    CASES = [case for case in load_model_tests(kind="node")
             if case.data_sets and case.model.graph.node[0].op_type in CUDA_OP_TYPES
             and all(isinstance(v, np.ndarray) for v in [*case.data_sets[0][0], *case.data_sets[0][1]])]


def test_there_are_cases() -> None:
    assert len(CASES) > 300


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_node_matches_or_is_refused_in_one_line(case: object) -> None:
    model = case.model  # type: ignore[attr-defined]
    inputs, expected = case.data_sets[0]  # type: ignore[attr-defined]
    fake = FakeCuda()
    try:
        compiled = pyocc.compile(model, target="cuda", memory="pool", cuda_libraries=fake)
    except PyoccError as e:
        message = str(e)
        assert "\n" not in message
        if "convert-dnn-to-llvm: cannot lower" in message:
            pytest.skip(f"not on target cuda: {message[:150]}")
        # what the host target refuses too (dynamic shapes, attributes) is not the cuda target's
        with pytest.raises(PyoccError):
            pyocc.compile(model, memory="pool")
        pytest.skip(f"not compiled on any target: {message[:150]}")
    got = list(compiled.run({i.name: v for i, v in zip(model.graph.input, inputs)}).values())
    compiled.native.close()
    for have, want in zip(got, expected):
        np.testing.assert_allclose(have, np.asarray(want), rtol=1e-3, atol=1e-4, equal_nan=True)
    assert fake.errors == [] and fake.leaks() == []

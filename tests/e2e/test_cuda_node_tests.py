"""onnx's backend node tests on target=cuda, on the CPU stand-in
(pyocc.testing.fake_cuda): for the op types the cuda lowering handles, every
node test either matches onnx's expected outputs or stops with the
lowering's one-line "cannot lower" message. A mismatch, a failed library
call, a leak or a crash fails. `python bench/cuda_coverage.py` prints the
same over all node tests as a table.

The cases that lower on cuda today are listed in cuda_node_tests_lowered.txt
beside this file: one on the list that stops lowering fails (a regression,
not a skip), and one that starts lowering fails until it is added to the
list, so the list is always exactly what the cuda target runs.
"""

from __future__ import annotations

import warnings
from pathlib import Path

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


LOWERED_LIST = Path(__file__).with_name("cuda_node_tests_lowered.txt")
#: the node tests that compile and run on target=cuda today
LOWERED = {line.strip() for line in LOWERED_LIST.read_text().splitlines()
           if line.strip() and not line.startswith("#")}


def test_there_are_cases() -> None:
    assert len(CASES) > 300
    assert len(LOWERED) > 200


def test_the_list_names_only_cases() -> None:
    """A name on the list that is no case (a typo, a case onnx renamed) would
    guard nothing."""
    unknown = sorted(LOWERED - {case.name for case in CASES})
    assert not unknown, f"{LOWERED_LIST.name} names cases that do not exist: {unknown}"


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
        assert case.name not in LOWERED, (  # type: ignore[attr-defined]
            f"{case.name} lowered on target cuda before and no longer does: {message}")  # type: ignore[attr-defined]
        if "convert-dnn-to-llvm: cannot lower" in message:
            pytest.skip(f"not on target cuda: {message[:150]}")
        # what the host target refuses too (dynamic shapes, attributes) is not the cuda target's
        with pytest.raises(PyoccError):
            pyocc.compile(model, memory="pool")
        pytest.skip(f"not compiled on any target: {message[:150]}")
    got = list(compiled.run({i.name: v for i, v in zip(model.graph.input, inputs, strict=True)}).values())
    compiled.native.close()
    for have, want in zip(got, expected, strict=True):
        np.testing.assert_allclose(have, np.asarray(want), rtol=1e-3, atol=1e-4, equal_nan=True)
    assert fake.errors == [] and fake.leaks() == []
    assert case.name in LOWERED, (  # type: ignore[attr-defined]
        f"{case.name} now lowers and runs on target cuda: add it to tests/e2e/{LOWERED_LIST.name}")  # type: ignore[attr-defined]

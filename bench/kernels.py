"""Benchmark host kernels against onnxruntime on single-node models.

Prints, for ResNet-50 / DenseNet / MobileNet-like conv shapes and the
ResNet-50 classifier gemm, the median time of pyocc's kernel, of
onnxruntime's CPU kernel, and their ratio. Both run on the same number of
threads: ``--threads N`` (default 1) sets numpy's BLAS threads (through the
environment, before numpy is imported) and onnxruntime's intra-op threads.

    python bench/kernels.py [--threads N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="threads for BLAS and onnxruntime")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per case (median reported)")
    return parser.parse_args()


ARGS = _parse_args()
# BLAS reads its thread count once, when numpy loads it: set it first.
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(ARGS.threads)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import helper  # noqa: E402

from pyocc.runtime import host_kernels as hk  # noqa: E402


@dataclass
class Case:
    """One benchmark: an ONNX node, its inputs, and the matching kernel call."""

    name: str
    op_type: str
    inputs: dict[str, np.ndarray]
    attrs: dict[str, object] = field(default_factory=dict)


def _conv_case(name: str, x: tuple[int, ...], w: tuple[int, ...], **attrs: object) -> Case:
    rng = np.random.default_rng(0)
    return Case(
        name,
        "Conv",
        {
            "x": rng.standard_normal(x).astype(np.float32),
            "w": rng.standard_normal(w).astype(np.float32),
            "b": rng.standard_normal(w[0]).astype(np.float32),
        },
        attrs,
    )


def _cases() -> list[Case]:
    rng = np.random.default_rng(1)
    return [
        _conv_case("resnet 3x3 64->64 @56", (1, 64, 56, 56), (64, 64, 3, 3), pads=[1, 1, 1, 1]),
        _conv_case("resnet 1x1 256->64 @56", (1, 256, 56, 56), (64, 256, 1, 1)),
        _conv_case("resnet 3x3 s2 128->128 @56", (1, 128, 56, 56), (128, 128, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1]),
        _conv_case("resnet stem 7x7 s2 3->64 @224", (1, 3, 224, 224), (64, 3, 7, 7), strides=[2, 2], pads=[3, 3, 3, 3]),
        _conv_case("densenet 3x3 128->32 @28", (1, 128, 28, 28), (32, 128, 3, 3), pads=[1, 1, 1, 1]),
        _conv_case("mobilenet dw 3x3 144 @56", (1, 144, 56, 56), (144, 1, 3, 3), pads=[1, 1, 1, 1], group=144),
        _conv_case("mobilenet dw 3x3 s2 144 @56", (1, 144, 56, 56), (144, 1, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1], group=144),
        Case(
            "resnet fc gemm 1x2048 @ 2048x1000",
            "Gemm",
            {
                "a": rng.standard_normal((1, 2048)).astype(np.float32),
                "b": rng.standard_normal((1000, 2048)).astype(np.float32),
                "c": rng.standard_normal(1000).astype(np.float32),
            },
            {"transB": 1},
        ),
    ]


def _ort_session(case: Case) -> ort.InferenceSession:
    node = helper.make_node(case.op_type, list(case.inputs), ["y"], **case.attrs)
    graph = helper.make_graph(
        [node],
        case.name,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in case.inputs.items()],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(np.float32)), None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.intra_op_num_threads = ARGS.threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _kernel_call(case: Case, out: np.ndarray) -> Callable[[], None]:
    """The pyocc kernel call equivalent to the case's ONNX node."""
    a = case.attrs
    if case.op_type == "Conv":
        x, w, b = case.inputs.values()
        return lambda: hk.conv(
            x, w, b, out=out, strides=a.get("strides"), pads=a.get("pads"), group=a.get("group", 1)
        )
    x, w, c = case.inputs.values()
    return lambda: hk.gemm(x, w, c, out=out, trans_b=a.get("transB", 0))


def _median_seconds(run: Callable[[], object], repeat: int) -> float:
    for _ in range(3):  # warm caches, BLAS buffers, onnxruntime's prepacking
        run()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    """Run every case and print the comparison table."""
    print(f"threads: {ARGS.threads} (numpy BLAS and onnxruntime intra-op), median of {ARGS.repeat} runs")
    print(f"{'case':38s} {'pyocc ms':>9s} {'ort ms':>9s} {'ratio':>6s}")
    for case in _cases():
        session = _ort_session(case)
        (reference,) = session.run(None, case.inputs)
        out = np.full(reference.shape, np.nan, dtype=np.float32)
        call = _kernel_call(case, out)
        ours = _median_seconds(call, ARGS.repeat)
        theirs = _median_seconds(lambda: session.run(None, case.inputs), ARGS.repeat)
        np.testing.assert_allclose(out, reference, rtol=1e-3, atol=1e-3)
        print(f"{case.name:38s} {ours * 1e3:9.3f} {theirs * 1e3:9.3f} {ours / theirs:6.2f}")


if __name__ == "__main__":
    main()

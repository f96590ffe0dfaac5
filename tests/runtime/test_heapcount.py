"""Issue 16's heap goal, measured from C: a compiled light model run by
examples/c/run_model under the LD_PRELOAD shim bench/heapcount.c takes no
heap beyond its planned pool, its inputs and outputs and OpenBLAS's
once-per-process buffer, give or take 64 KiB (the runner's, libc's and the
loader's own); the weights are memory-mapped, not on the heap. The same
check fails a program whose buffers are allocated at run time (lazy mode),
so it can catch a kernel temporary outside the plan. bench/heapcount.py
runs all nine light models (docs/performance.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

pytest.importorskip("scipy_openblas32", reason="the native kernels call OpenBLAS from scipy-openblas32")

import pyocc  # noqa: E402
from pyocc.testing.heapcount import HEAP_SLACK_BYTES, blas_init_bytes, build_tools, count_heap  # noqa: E402
from pyocc.testing.light_models import light_model_path  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc) for the runner and shim")


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    directory = tmp_path_factory.mktemp("heap")
    runner, shim = build_tools(directory)
    return runner, shim, blas_init_bytes(directory, shim)


def test_openblas_init_is_measured(tools: tuple[Path, Path, int]) -> None:
    # not vacuous: OpenBLAS's first sgemm does take heap (a fixed buffer),
    # and it is less than a light model's pool
    assert 0 < tools[2] < 1 << 20


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
def test_light_model_heap_is_the_plan(name: str, tmp_path: Path, tools: tuple[Path, Path, int]) -> None:
    runner, shim, blas = tools
    # jit=False: the model only runs from C, so machine code is generated once, by save()
    model = pyocc.compile(light_model_path(name), jit=False)
    assert model.numpy_sites == 0
    heap = count_heap(model, tmp_path, runner, shim, blas)
    assert heap.peak_bytes >= heap.pool_bytes + heap.io_bytes  # the pool and I/O are on the heap
    assert heap.unplanned_bytes <= HEAP_SLACK_BYTES, heap
    # the weights are mapped, not copied: the heap could not hold them too
    assert heap.peak_bytes < heap.pool_bytes + heap.io_bytes + heap.weight_bytes


def relu_chain() -> onnx.ModelProto:
    """Five ReLUs over 1x64x64x64 (1 MiB each): buffers, no weights."""
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(5)]
    nodes.append(helper.make_node("Add", ["t5", "t2"], ["y"]))
    nodes[0].input[0] = "x"
    shape = [1, 64, 64, 64]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_check_catches_run_time_allocation(tmp_path: Path, tools: tuple[Path, Path, int]) -> None:
    # lazy mode mallocs every buffer at run time, outside any plan: the same
    # measurement sees megabytes; in pool mode the same graph passes
    runner, shim, blas = tools
    lazy = count_heap(pyocc.compile(relu_chain(), memory="lazy", jit=False), tmp_path, runner, shim, blas)
    assert lazy.pool_bytes == 0 and lazy.unplanned_bytes > 1 << 20
    pool = count_heap(pyocc.compile(relu_chain(), jit=False), tmp_path, runner, shim, blas)
    assert pool.pool_bytes >= 1 << 20 and pool.unplanned_bytes <= HEAP_SLACK_BYTES, pool
    assert np.isfinite(np.frombuffer((tmp_path / "out.bin").read_bytes(), np.float32)).all()

"""bench/symbolic.py's ``--unfolded`` diagnostic: a static compile at S that
computes, like the symbolic program, the ``[S, S]`` tensors the importer
would fold into weights."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from pyocc.api import lower
from tests.symbolic.test_exporter_patterns import t5_relative_attention


def _bench() -> ModuleType:
    """bench/symbolic.py as a module (bench/ is not a package)."""
    path = Path(__file__).resolve().parents[2] / "bench" / "symbolic.py"
    spec = importlib.util.spec_from_file_location("bench_symbolic", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_static_compile_computes_the_position_bias_in_its_arena_unfolded_or_not() -> None:
    """T5's relative position buckets at S = 16 (256 elements) were folded
    by the static compile into a bias held among the weights; the importer
    now keeps a fold that would be larger than its sources as ops
    (pyocc.frontend.onnx_import.EXPANDING_FOLD_LIMIT), so the static
    compile computes the bias chain in its arena, and the bench's
    ``--unfolded`` diagnostic (which refuses such folds by shape) gives the
    same plan and weights."""
    bench = _bench()
    model = t5_relative_attention()
    shapes = {i.name: [16 if d.dim_param else d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in model.graph.input}
    _, folded = lower(bench.fresh(model), shapes=shapes)
    with bench.symbol_sized_unfolded(16):
        _, unfolded = lower(bench.fresh(model), shapes=shapes)
    assert unfolded.activation_bytes == folded.activation_bytes
    assert unfolded.weight_bytes == folded.weight_bytes
    assert folded.weight_bytes < 16 * 16 * 4  # the [16, 16] bias of one head is not among them

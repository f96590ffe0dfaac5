"""onnx's own backend test suite (`onnx.backend.test.BackendTest`) run
against `pyocc.backend`, from pytest.

Every test BackendTest generates is collected (CPU only: pyocc has no other
device, so the `_cuda` twins are dropped rather than listed as skips). A test
runs unless one exclusion below applies; an excluded test is skipped with
its one reason. Exclusions come from three places, checked in this order:

1. Derived from pyocc's own tables, so that they follow the code: a test
   whose graph uses an op that is not in the onnx dialect, or an element type
   the frontend refuses, or a non-tensor graph input.
2. `EXCLUDED`: pattern (re.search on the test name) -> reason, for tests
   whose ops pyocc supports but whose case it does not (an optional output,
   an attribute, a training-only form, ...).
3. `LIGHT_MODELS_IN_CI`: the light models (the `Real` category; they are
   local files, nothing is downloaded) other than these are left to
   tests/e2e, which checks them with random weights against onnxruntime;
   set PYOCC_BACKEND_LIGHT_MODELS=1 to run all nine here.

Environment: PYOCC_BACKEND_MEMORY=pool|lazy|eager picks the memory mode
(default pool); PYOCC_BACKEND_RUN_EXCLUDED=1 runs the pattern exclusions as
expected failures (an excluded test that passes then fails, so a stale
exclusion is noticed). `python tests/backend/test_onnx_backend.py` prints
the exclusions by reason.
"""

from __future__ import annotations

import collections
import os
import re
import unittest
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import onnx
import onnx.backend.test
import pytest
from onnx.backend.test.loader import load_model_tests

import pyocc.backend
from pyocc.dialects.onnx import OP_BY_TYPE
from pyocc.errors import PyoccError
from pyocc.frontend.onnx_import import element_type
from pyocc.testing.onnx_node_cases import node_test_cases

MEMORY = os.environ.get("PYOCC_BACKEND_MEMORY", "pool")

#: Tests of supported ops that pyocc does not pass, each with why. Keys are
#: regular expressions searched in the test name (without `_cpu`).
EXCLUDED: dict[str, str] = {
    # optional outputs: pyocc lowers an op's first output only
    r"^test_layer_normalization_.*(?<!_expanded)(?<!_expanded_ver18)$":
        "optional output: LayerNormalization's Mean and InvStdDev outputs are not produced (Y only)",
    r"^test_batchnorm_.*_training_mode":
        "training only: BatchNormalization with training_mode=1 (running statistics outputs)",
    r"^test_(training_)?dropout_.*mask":
        "optional output: Dropout's mask output is not produced",
    r"^test_training_dropout(_default)?$":
        "training only: Dropout with training_mode=1 is random",
    r"^test_maxpool_with_argmax_":
        "optional output: MaxPool's Indices output is not produced",
    # attributes or forms the kernels do not implement
    r"^test_averagepool_.*dilations":
        "attribute: AveragePool dilations (opset 19) are not implemented by the average_pool kernel",
    r"^test_resize_.*antialias":
        "attribute: Resize antialias=1 is not implemented",
    r"^test_resize_tf_crop_and_resize":
        "attribute: Resize coordinate_transformation_mode=tf_crop_and_resize (roi) is not supported",
    r"^test_resize_downsample_scales_(linear|cubic)_align_corners$":
        "reference mismatch: align_corners with non-integral scales; pyocc follows onnxruntime "
        "(x * (in - 1) / (out - 1) with the integer output length), the ONNX reference uses in * scale",
    r"^test_maxpool_2d_uint8$":
        "element type: MaxPool on uint8 (the dialect accepts floating-point inputs only)",
    r"^test_reduce_m(ax|in)_.*bool":
        "element type: ReduceMax/ReduceMin on bool (opset 20) are not in the onnx dialect",
    # empty values inside a graph fold to constants at import; an empty graph
    # input or output, or an empty operand of an op with a non-empty result, is refused
    r"^test_(reduce_(log_sum_exp|max|min)_empty_set|reduce_sum_empty_set_non_reduced_axis_zero"
    r"|constantofshape_int_shape_zero|reshape_allowzero_reordered|shape_start_greater_than_end"
    r"|slice_start_out_of_bounds|split_zero_size_splits_opset1[38]|tril_zero|triu_zero)$":
        "empty tensor: a graph input or output has a zero-sized dimension, which pyocc refuses",
    r"BFLOAT16|bfloat16":
        "element type: bfloat16 has no host kernel representation (convert-dnn-to-llvm)",
}

#: Light models run here by default: none. tests/e2e/test_light_models_numerics.py
#: checks all nine against onnxruntime with random weights (AlexNet in every
#: memory mode, ZFNet-512 in pool mode), a stronger check than this one with
#: their ConstantOfShape splat weights; AlexNet and ZFNet-512 here cost 47 s
#: of the suite's CPU time (their compile, again). PYOCC_BACKEND_LIGHT_MODELS=1
#: runs all nine here.
LIGHT_MODELS_IN_CI: tuple[str, ...] = ()


class MemoryModeBackend(pyocc.backend.PyoccBackend):
    """pyocc.backend in the memory mode PYOCC_BACKEND_MEMORY picks."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> pyocc.backend.PyoccRep:
        """As PyoccBackend.prepare, with `memory` defaulting to MEMORY."""
        kwargs.setdefault("memory", MEMORY)
        return super().prepare(model, device, **kwargs)


def models_by_test() -> dict[str, onnx.ModelProto]:
    """Test name (without `_cpu`) -> its model, for every test kind whose
    model is a local file or generated in memory."""
    models = {case.name: case.model for case in node_test_cases()}
    for kind in ("simple", "pytorch-converted", "pytorch-operator"):
        for case in load_model_tests(kind=kind):
            models[case.name] = onnx.load(os.path.join(case.model_dir, "model.onnx"))
    return models



def derived_reason(model: onnx.ModelProto) -> str | None:
    """Why pyocc cannot import `model`, from pyocc's own tables, or None."""
    missing = sorted({n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                      for n in model.graph.node
                      if n.domain not in ("", "ai.onnx") or n.op_type not in OP_BY_TYPE})
    if missing:
        return f"unsupported op: {', '.join(missing)}"
    graph = model.graph
    for value in [*graph.input, *graph.output]:
        if not value.type.HasField("tensor_type"):
            return f"not a tensor: graph value '{value.name}' is a {value.type.WhichOneof('value')} (tensors only)"
    types = [v.type.tensor_type.elem_type for v in [*graph.input, *graph.output]]
    types += [t.data_type for t in graph.initializer]
    types += [a.i for n in graph.node for a in n.attribute if n.op_type == "Cast" and a.name == "to"]
    for t in types:
        try:
            element_type(t)
        except PyoccError:
            return f"element type: {onnx.TensorProto.DataType.Name(t)} is not supported by pyocc"
    return None


def light_model_reason(name: str) -> str | None:
    """Why light model test `name` is not run here, or None."""
    model = name.removeprefix("test_")
    if os.environ.get("PYOCC_BACKEND_LIGHT_MODELS") == "1" or model in LIGHT_MODELS_IN_CI:
        return None
    return ("light model: left to tests/e2e/test_light_models_numerics.py (random weights vs onnxruntime) "
            "to keep CI fast; PYOCC_BACKEND_LIGHT_MODELS=1 runs it here")


def exclusions(names: list[str], models: dict[str, onnx.ModelProto], light: set[str]) -> dict[str, str]:
    """Test name -> the reason it is excluded, for the excluded ones."""
    reasons: dict[str, str] = {}
    for name in names:
        pattern = next((p for p in EXCLUDED if re.search(p, name)), None)
        if name in models and (reason := derived_reason(models[name])) is not None:
            reasons[name] = reason
        elif pattern is not None:
            reasons[name] = EXCLUDED[pattern]
        elif name in light and (reason := light_model_reason(name)) is not None:
            reasons[name] = reason
    return reasons


def _test_methods(cases: dict[str, type[unittest.TestCase]]) -> Iterator[tuple[type[unittest.TestCase], str]]:
    for case in cases.values():
        for attribute in sorted(vars(case)):
            if attribute.startswith("test_"):
                yield case, attribute


def build_test_cases() -> tuple[dict[str, type[unittest.TestCase]], dict[str, str]]:
    """BackendTest's unittest classes, CPU only, with exclusions applied;
    and the reason of every excluded test."""
    node_test_cases()  # onnx's node cases, built with numpy pools before BackendTest reads them
    backend_test = onnx.backend.test.BackendTest(MemoryModeBackend, __name__)
    cases = backend_test.test_cases
    light = {case.name for case in load_model_tests(kind="real")}
    names = []
    for case, attribute in list(_test_methods(cases)):
        if attribute.endswith("_cuda"):
            delattr(case, attribute)  # pyocc compiles for the host CPU only
        else:
            names.append(attribute.removesuffix("_cpu"))
    reasons = exclusions(names, models_by_test(), light)
    run_excluded = os.environ.get("PYOCC_BACKEND_RUN_EXCLUDED") == "1"
    for case, attribute in _test_methods(cases):
        reason = reasons.get(attribute.removesuffix("_cpu"))
        if reason is None:
            continue
        mark: Callable[[Any], Any] = unittest.skip(reason)
        if run_excluded and reason in EXCLUDED.values():
            mark = unittest.expectedFailure
        setattr(case, attribute, mark(getattr(case, attribute)))
    return cases, reasons


TEST_CASES, REASONS = build_test_cases()
globals().update(TEST_CASES)


@pytest.fixture(autouse=True, scope="module")
def onnx_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The light model tests write their input files under $ONNX_HOME
    (default ~/.onnx): keep them in a temporary folder."""
    home = tmp_path_factory.mktemp("onnx_home")
    before = os.environ.get("ONNX_HOME")
    os.environ["ONNX_HOME"] = str(home)
    yield home
    if before is None:
        del os.environ["ONNX_HOME"]
    else:
        os.environ["ONNX_HOME"] = before


def test_every_exclusion_pattern_matches_a_test() -> None:
    """A pattern that matches nothing is stale (renamed test, typo)."""
    names = [attribute.removesuffix("_cpu") for _, attribute in _test_methods(TEST_CASES)]
    stale = [p for p in EXCLUDED if not any(re.search(p, n) for n in names)]
    assert not stale, f"exclusion patterns that match no test: {stale}"


def test_supported_ops_have_node_tests_that_run() -> None:
    """The suite must not be excluded away: most node tests whose ops pyocc
    supports run, and every supported op (bar a few without node tests of
    their own) has at least one node test that runs."""
    models = {case.name: case.model for case in node_test_cases()}
    running = [n for n in models if n not in REASONS]
    assert len(running) >= 800, f"only {len(running)} node tests run (834 when this was written)"
    covered = {node.op_type for n in running for node in models[n].graph.node}
    untested = sorted(set(OP_BY_TYPE) - covered - {"LayerNormalization"})  # see the next test
    assert not untested, f"supported ops without a running node test: {untested}"


def _layer_norm_cases() -> list[Any]:
    return [c for c in node_test_cases()
            if c.name.startswith("test_layer_normalization_") and "expanded" not in c.name]


@pytest.mark.parametrize("case", _layer_norm_cases(), ids=lambda c: c.name)
def test_layer_normalization_y_only(case: Any) -> None:
    """Every LayerNormalization node test also reads the optional Mean and
    InvStdDev outputs, which pyocc does not produce; the same cases with
    only Y kept check Y against onnx's expected outputs."""
    from onnx.backend.test.runner import Runner, _normalize_tensor

    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    node = model.graph.node[0]
    assert node.op_type == "LayerNormalization"
    del node.output[1:]
    del model.graph.output[1:]
    rep = pyocc.backend.prepare(model, "CPU", memory=MEMORY)
    for inputs, expected in case.data_sets:
        outputs = rep.run([_normalize_tensor(x) for x in inputs])
        Runner.assert_similar_outputs([_normalize_tensor(expected[0])], outputs, case.rtol, case.atol)


def summary() -> str:
    """Counts of run and excluded tests, the exclusions by category and reason."""
    names = [attribute.removesuffix("_cpu") for _, attribute in _test_methods(TEST_CASES)]
    by_category: collections.Counter[str] = collections.Counter(r.split(":")[0] for r in REASONS.values())
    by_reason: collections.Counter[str] = collections.Counter(
        r if not r.startswith("unsupported op:") else "unsupported op: (one of the ops above)"
        for r in REASONS.values())
    lines = [f"{len(names)} tests, {len(names) - len(REASONS)} run, {len(REASONS)} excluded", "",
             "excluded by category:"]
    lines += [f"  {n:5d}  {category}" for category, n in by_category.most_common()]
    lines += ["", "excluded by reason:"]
    lines += [f"  {n:5d}  {reason}" for reason, n in by_reason.most_common()]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary())

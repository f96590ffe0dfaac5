"""onnx's backend node tests on target=cuda, on the CPU stand-in
(pyocc.testing.fake_cuda): for every node test whose ops all have a cuda
lowering (derived from pyocc.lowering.cuda's registry, not listed by hand),
it either matches onnx's expected outputs or stops with the
lowering's one-line "cannot lower" message. A mismatch, a failed library
call, a leak or a crash fails. `python bench/cuda_coverage.py` prints the
same over all node tests as a table.

The cases that lower on cuda today are listed in cuda_node_tests_lowered.txt
beside this file: one on the list that stops lowering fails (a regression,
not a skip), and one that starts lowering fails until it is added to the
list, so the list is always exactly what the cuda target runs.

Cases that convert to the same dnn program (the same ops, attributes, shapes
and constants; only the graph's and the values' names differ) run once: the
cuda target lowers the dnn program, so the others would compile the same
code for the same shapes a second time. 397 lowered cases are 311 programs:
mostly the `_ver18` twins of the `_expanded` functions, negative and positive
axes, `_example`/`_random`, the `_expanded` DepthToSpace/SpaceToDepth. Each
name of such a group still counts against the list (all in it, or none).
The host node tests (tests/backend) import every spelling.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from xdsl.context import Context
from xdsl.utils.exceptions import PassFailedException

import pyocc
import pyocc.dialects.dnn.ops as d
from pyocc.errors import PyoccError
from pyocc.frontend.onnx_import import import_model
from pyocc.lowering.convert_onnx_to_dnn import ConvertOnnxToDnnPass
from pyocc.lowering.cuda import CUDA_LOWERINGS
from pyocc.testing.fake_cuda import FakeCuda
from pyocc.testing.onnx_node_cases import node_test_cases


def cuda_program(model: onnx.ModelProto) -> str | None:
    """The dnn program the model converts to, printed without the graph's
    and the values' names, if it imports and all its dnn ops have a cuda
    lowering (pyocc.lowering.cuda's registry, keyed by op class): the node
    tests the cuda target is meant to run. None for the others; a model
    that imports on no target is the host node tests' concern."""
    try:
        module = import_model(model)
        ConvertOnnxToDnnPass().apply(Context(), module)
    except (PyoccError, PassFailedException):
        return None
    if not all(type(op) in CUDA_LOWERINGS for op in module.walk() if isinstance(op, d.DnnComputeOp)):
        return None
    module.attributes.pop("onnx.graph_name", None)
    for op in module.walk():
        for result in op.results:
            result.name_hint = None
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    arg.name_hint = None
    return str(module)


def programs(cases: list[object]) -> list[list[object]]:
    """The cases grouped by their cuda program, in onnx's order, each group
    led by its first case: the one the test compiles and runs."""
    groups: dict[str, list[object]] = {}
    for case in cases:
        program = cuda_program(case.model)  # type: ignore[attr-defined]
        if program is not None:
            groups.setdefault(program, []).append(case)
    return list(groups.values())


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # onnx's generators warn about their own overflows
    GROUPS = programs([case for case in node_test_cases()
                       if case.data_sets
                       and all(isinstance(v, np.ndarray) for v in [*case.data_sets[0][0], *case.data_sets[0][1]])])
CASES = [case for group in GROUPS for case in group]


LOWERED_LIST = Path(__file__).with_name("cuda_node_tests_lowered.txt")
#: the node tests that compile and run on target=cuda today
LOWERED = {line.strip() for line in LOWERED_LIST.read_text().splitlines()
           if line.strip() and not line.startswith("#")}


def test_there_are_cases() -> None:
    assert len(CASES) > 450
    assert len(LOWERED) > 350


def test_the_list_names_only_cases() -> None:
    """A name on the list that is no case (a typo, a case onnx renamed) would
    guard nothing."""
    unknown = sorted(LOWERED - {case.name for case in CASES})
    assert not unknown, f"{LOWERED_LIST.name} names cases that do not exist: {unknown}"


def test_a_group_is_one_program() -> None:
    """The grouping can fail: two cases of one op with other shapes are two
    programs, and the `_ver18` twin of an `_expanded` case is the same one."""
    by_name = {case.name: index for index, group in enumerate(GROUPS) for case in group}  # type: ignore[attr-defined]
    assert by_name["test_softmax_axis_0_expanded"] == by_name["test_softmax_axis_0_expanded_ver18"]
    assert by_name["test_softmax_axis_0_expanded"] != by_name["test_softmax_axis_1_expanded"]
    assert by_name["test_flatten_axis1"] != by_name["test_flatten_axis2"]
    assert len(GROUPS) < len(CASES)


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: g[0].name)
def test_node_matches_or_is_refused_in_one_line(group: list[object]) -> None:
    """The group's first case compiles and matches onnx's outputs, or is
    refused in one line; every name of the group is on the list, or none."""
    case = group[0]
    names = [other.name for other in group]  # type: ignore[attr-defined]
    model = case.model  # type: ignore[attr-defined]
    inputs, expected = case.data_sets[0]  # type: ignore[attr-defined]
    fake = FakeCuda()
    try:
        compiled = pyocc.compile(model, target="cuda", memory="pool", cuda_libraries=fake)
    except PyoccError as e:
        message = str(e)
        assert "\n" not in message
        listed = sorted(LOWERED.intersection(names))
        assert not listed, f"{listed} lowered on target cuda before and no longer do: {message}"
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
    unlisted = [name for name in names if name not in LOWERED]
    assert not unlisted, (
        " ".join(f"{name} now lowers and runs on target cuda: add it to tests/e2e/{LOWERED_LIST.name}"
                 for name in unlisted))

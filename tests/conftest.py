"""Shared pytest fixtures: the light models that ship inside the onnx wheel."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest

try:
    from _pytest.nodeid import coerce_node_id  # pytest 9: a test's id is item._id (see _join_group_in_id)
except ImportError:  # pytest 8: pytest-xdist's own group suffix works
    coerce_node_id = None

from pyocc.testing.light_models import LIGHT_MODELS, light_model_path  # noqa: F401 - re-exported for the tests


@pytest.fixture(params=LIGHT_MODELS)
def light_model(request: pytest.FixtureRequest) -> Path:
    """Each of the nine light models in turn."""
    return light_model_path(request.param)


LARGE_WEIGHTS = re.compile(r"alexnet|zfnet|vgg19")
"""Models whose fully connected weights take 250-550 MB (held once by
onnxruntime, then once by each compiled model: pyocc.testing.light_models
writes them as external data, which pyocc maps): their tests that
materialise those weights run on one worker, one after another."""
LARGEST_FIRST = ("vgg19", "zfnet", "alexnet")  # the order their tests run in: the largest weights first

MATERIALISES_WEIGHTS = re.compile(r"onnxruntime|test_onnx_backend\.py")
"""The tests that materialise a light model's weights: those that run it
against onnxruntime with random weights, and onnx's backend tests (its
reference data). The others keep the ConstantOfShape weights as splats
(import, planning, kernel choice), so they need not wait for one worker."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that materialise the weights of the models with large weights
    join xdist_group("large_weights"), so that pytest-xdist's loadgroup runs
    them on one worker (never two such models in memory at once; the
    worker's cached onnxruntime reference is reused); marked before
    pytest-xdist's hook reads the marks. They run first, the
    largest weights (VGG-19's) first of all: a worker's heap grows with
    every compile it has run, and these tests add up to 0.55 GB of weights
    to it (the suite's largest process)."""
    large = []
    for item in items:
        if LARGE_WEIGHTS.search(item.nodeid) and MATERIALISES_WEIGHTS.search(item.nodeid):
            item.add_marker(pytest.mark.xdist_group("large_weights"))
            large.append(item)
    large.sort(key=lambda item: LARGEST_FIRST.index(LARGE_WEIGHTS.search(item.nodeid).group()))
    chosen = {id(item) for item in large}
    items[:] = large + [item for item in items if id(item) not in chosen]
    if getattr(config.option, "loadgroup", False):  # a pytest-xdist worker under --dist loadgroup
        for item in large:
            _join_group_in_id(item, "large_weights")


def _join_group_in_id(item: pytest.Item, group: str) -> None:
    """What pytest-xdist's loadgroup does to a grouped test's id, `id@group`
    (its scheduler sends the tests of one group to one worker), done here:
    pytest-xdist 3.8 sets `item._nodeid`, which pytest 9 no longer reads
    (the id is `item._id`), so no group formed and the large models ran on
    both workers at once. Nothing to do where the id already carries the
    group (pytest 8, where xdist's own suffix works)."""
    if f"@{group}" not in item.nodeid and coerce_node_id is not None and hasattr(item, "_id"):
        item._id = coerce_node_id(f"{item.nodeid}@{group}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked `gpu` skip, saying why, where no GPU is usable for
    target=cuda (no CUDA libraries, no driver, no device); with
    PYOCC_REQUIRE_GPU=1 (bench/gpu_check.sh on the GPU machine) they fail
    instead, so a check that was meant to run on a GPU cannot pass by skipping."""
    if item.get_closest_marker("gpu") is not None:
        from pyocc.runtime.cuda import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason is not None:
            if os.environ.get("PYOCC_REQUIRE_GPU") == "1":
                pytest.fail(reason, pytrace=False)
            pytest.skip(reason)


@pytest.hookimpl(trylast=True)  # after the terminal reporter read -r
def pytest_configure(config: pytest.Config) -> None:
    """`-ra` would list every skip, one line per reason: a few hundred for
    onnx's node tests (issue #19), burying the result. Skips are counted by
    kind instead (pytest_terminal_summary); they are listed one a line only
    when asked for by name, `-rs`."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not re.search("[sS]", config.option.reportchars):
        reporter.reportchars = reporter.reportchars.replace("s", "")


def skip_reason_kind(reason: str) -> str:
    """The kind of a skip reason, for the summary: its text up to the first
    colon or parenthesis, without `Skipped: ` and without what varies (op
    names, numbers)."""
    reason = reason.removeprefix("Skipped: ").strip()
    kind = re.split(r"[:(]", reason, maxsplit=1)[0].strip()
    return kind or reason


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Skips counted by kind of reason, one line each (largest first),
    instead of -ra's line per skipped test; `-rs` still lists them all."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    kinds: Counter[str] = Counter()
    for report in skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        kinds[skip_reason_kind(reason)] += 1
    terminalreporter.section(f"{len(skipped)} skipped, by reason (pytest -rs lists each)", sep="-")
    for kind, count in kinds.most_common():
        terminalreporter.write_line(f"{count:5d}  {kind}")

"""Shared pytest fixtures: the light models that ship inside the onnx wheel."""

from __future__ import annotations

import gc
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest


def _one_blas_thread_per_worker() -> None:
    """numpy's OpenBLAS (not pyocc's, which runs on one thread unless a
    model says otherwise) starts a thread per core. Two pytest-xdist
    workers on two cores then run four BLAS threads, which spin while they
    wait for each other: measured on this suite's 2-core machine, 228
    196x64x128 products took 1.04 CPU s with two threads against 0.007 s
    with one, and test_cuda_target's DenseNet-121 and SqueezeNet cases (the
    fake cuDNN and cuBLAS are numpy) 26.4 -> 19.8 CPU s. Each worker runs
    one test at a time, so one thread each loses no parallelism. Set
    before numpy is first imported (it reads the variable when it loads
    OpenBLAS); an OPENBLAS_NUM_THREADS the user set is kept."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


_one_blas_thread_per_worker()

try:
    from _pytest.nodeid import coerce_node_id  # pytest 9: a test's id is item._id (see _join_group_in_id)
except ImportError:  # pytest 8: pytest-xdist's own group suffix works
    coerce_node_id = None

from pyocc.runtime import object_cache  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS, light_model_path  # noqa: E402,F401 - re-exported for the tests
from pyocc.testing.rss import current_rss_bytes, malloc_trim, peak_rss_bytes, reset_peak_rss  # noqa: E402


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
        for item in items:
            _join_group_in_id(item)


def on_one_worker(group: str, values: list[str]) -> list[object]:
    """Each of `values` as a parameter whose tests run on one pytest-xdist
    worker, in group `group_value` (xdist_group): what they share (a
    compiled model, its reference, a cached fixture) is made once, not on
    both workers at the same time."""
    return [pytest.param(value, marks=pytest.mark.xdist_group(f"{group}_{value}")) for value in values]


def _join_group_in_id(item: pytest.Item) -> None:
    """What pytest-xdist's loadgroup does to a grouped test's id (one marked
    xdist_group here or in its file), `id@group` (its scheduler sends the
    tests of one group to one worker), done here: pytest-xdist 3.8 sets
    `item._nodeid`, which pytest 9 no longer reads (the id is `item._id`),
    so no group formed and the large models ran on both workers at once.
    Nothing to do where the id already carries the group (pytest 8, where
    xdist's own suffix works)."""
    groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                     for mark in item.iter_markers("xdist_group")})
    group = "_".join(groups)
    if groups and f"@{group}" not in item.nodeid and coerce_node_id is not None and hasattr(item, "_id"):
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
    """Skip lines only when asked for by name, and one compile cache for the session."""
    hide_skip_lines(config)
    _share_compile_cache(config)


def hide_skip_lines(config: pytest.Config) -> None:
    """`-ra` would list every skip, one line per reason: a few hundred for
    onnx's node tests (issue #19), burying the result. Skips are counted by
    kind instead (pytest_terminal_summary); they are listed one a line only
    when asked for by name, `-rs`."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not re.search("[sS]", config.option.reportchars):
        reporter.reportchars = reporter.reportchars.replace("s", "")


CACHE_DIR_BEFORE = pytest.StashKey[tuple[str | None, str]]()
"""The PYOCC_CACHE_DIR the session found, and the directory it used instead."""


def _share_compile_cache(config: pytest.Config) -> None:
    """One fresh object cache (PYOCC_CACHE_DIR, pyocc.runtime.object_cache)
    for the whole session: made by the controller, before pytest-xdist
    starts its workers, which inherit the variable (so do the commands the
    tests run). A model or kernel one worker JIT-compiled is loaded, not
    compiled again, by the other and by every later test. The user's own
    cache is never read or written, and every session starts empty, as CI
    does; pytest_unconfigure removes the directory."""
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller's variable is set
        return
    directory = tempfile.mkdtemp(prefix="pyocc-test-cache-")
    config.stash[CACHE_DIR_BEFORE] = (os.environ.get(object_cache.CACHE_DIR_VARIABLE), directory)
    os.environ[object_cache.CACHE_DIR_VARIABLE] = directory


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the session's object cache and give PYOCC_CACHE_DIR back its value."""
    if CACHE_DIR_BEFORE not in config.stash:
        return
    before, directory = config.stash[CACHE_DIR_BEFORE]
    shutil.rmtree(directory, ignore_errors=True)
    if before is None:
        os.environ.pop(object_cache.CACHE_DIR_VARIABLE, None)
    else:
        os.environ[object_cache.CACHE_DIR_VARIABLE] = before


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
    count = terminalreporter.config.getoption("rss_report", 0)
    if count > 0:
        _rss_report(terminalreporter, count)
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


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--rss-report N`: each test's resident memory high-water mark in its
    worker (setup, call and teardown), the N largest listed at the end with
    each file's largest; 0 (the default) records nothing."""
    parser.addoption(
        "--rss-report", type=int, default=0, metavar="N",
        help="list the N tests (and files) whose worker's resident memory peaked highest (Linux /proc)",
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection made (gc.freeze): the 316,000 objects of the
    collected tests, onnx's node test cases and the imported modules live
    until the end, and a full garbage collection (Python's own, or
    _reclaim_memory's) then walks only what the tests made since: 0.18 CPU
    s per collection before, well under a millisecond after."""
    gc.collect()
    gc.freeze()


RECLAIM_AFTER_GROWTH = 64 * 2**20
"""How far a worker's resident size may grow past what it kept after its
last reclaim before the next test's teardown reclaims again (see
_reclaim_memory)."""


class _Reclaim:
    """The least resident size the worker had after a test since
    _reclaim_memory last reclaimed (None until the first test ends)."""

    kept: int | None = None


RECLAIM_SECONDS = pytest.StashKey[float]()
"""The CPU seconds the test's reclaim took, where one ran (for --rss-report)."""


def _reclaim_memory() -> float | None:
    """After a test that grew the worker by RECLAIM_AFTER_GROWTH or more:
    collect garbage and hand the freed heap back (gc.collect, malloc_trim).
    A compiled model's IR, kernels and mapped weights form reference cycles
    that only a full collection frees, and Python's runs one only after
    many allocations; so a worker kept every large test's garbage (a cuda
    AlexNet test: 230 MB) until the next collection, and the 0.3 GB its
    heap grew by, and stacked the next large test on top (the suite's 1.5+
    GB worker, issue #19). A full collection walks every object the tests
    made since collection (pytest_collection_finish froze the rest), so it
    runs only after tests that grew the worker, not after each. Returns the
    seconds it took, None where it did not run."""
    now = current_rss_bytes()
    if now is None:
        return None
    if _Reclaim.kept is None or now < _Reclaim.kept:  # what the worker keeps: the least seen since
        _Reclaim.kept = now
    if now - _Reclaim.kept < RECLAIM_AFTER_GROWTH:
        return None
    start = time.process_time()
    gc.collect()
    malloc_trim()
    _Reclaim.kept = current_rss_bytes() or now
    return time.process_time() - start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Reclaim the worker's memory after the test's fixtures are torn down
    (_reclaim_memory), before its teardown report records its peak."""
    result = yield
    seconds = _reclaim_memory()
    if seconds is not None:
        item.stash[RECLAIM_SECONDS] = seconds
    return result


RSS_PROPERTY = "rss_peak_bytes"
"""The user property (carried from pytest-xdist's workers to the
controller with each report) that holds a test's peak resident size and
the size its worker kept after it, in bytes, and the seconds its reclaim
took (-1.0: none ran)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """With --rss-report, the worker's resident high-water mark over the
    test's setup, call and teardown, recorded on its teardown report; the
    mark is then reset, so that the next test's peak is its own (plus what
    the worker still holds: module fixtures, caches)."""
    if call.when == "teardown" and item.config.getoption("rss_report", 0) > 0:
        peak, now = peak_rss_bytes(), current_rss_bytes()
        if peak is not None and now is not None:
            item.user_properties.append((RSS_PROPERTY, (peak, now, item.stash.get(RECLAIM_SECONDS, -1.0))))
        reset_peak_rss()
    return (yield)


def _rss_report(terminalreporter: pytest.TerminalReporter, count: int) -> None:
    peaks: dict[str, tuple[int, int]] = {}
    reclaims: list[float] = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "teardown":
                continue
            for key, value in getattr(report, "user_properties", ()):
                if key == RSS_PROPERTY:
                    peak, after, reclaim = value
                    peaks[report.nodeid] = (peak, after)
                    if reclaim >= 0:
                        reclaims.append(reclaim)
    if not peaks:
        return
    files: dict[str, tuple[int, int]] = {}
    for nodeid, (peak, after) in peaks.items():
        file = nodeid.split("::", 1)[0]
        files[file] = (max(peak, files.get(file, (0, 0))[0]), after)  # after: the file's last test's
    mib = 2**20
    terminalreporter.section(f"largest resident memory peaks (--rss-report {count})", sep="-")
    terminalreporter.write_line(f"memory reclaimed after {len(reclaims)} tests in {sum(reclaims):.1f} CPU s")
    terminalreporter.write_line("    peak   kept after  (MiB; each test's worker)")
    for file, (peak, after) in sorted(files.items(), key=lambda kv: -kv[1][0])[:count]:
        terminalreporter.write_line(f"{peak / mib:8.0f} {after / mib:8.0f}    {file}")
    terminalreporter.write_line("")
    for nodeid, (peak, after) in sorted(peaks.items(), key=lambda kv: -kv[1][0])[:count]:
        terminalreporter.write_line(f"{peak / mib:8.0f} {after / mib:8.0f}    {nodeid}")

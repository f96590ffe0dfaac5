"""pyocc.testing.rss, which the suite's --rss-report and its memory reclaim
between tests (tests/conftest.py) read: the high-water mark rises with an
allocation, the reset brings it back down, malloc_trim gives freed heap back."""

from __future__ import annotations

import gc
import mmap
import sys

import numpy as np
import pytest

from pyocc.testing.rss import current_rss_bytes, malloc_trim, peak_rss_bytes, reset_peak_rss

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc/self")

MIB = 2**20


def test_the_peak_follows_an_allocation_and_the_reset_forgets_it() -> None:
    assert reset_peak_rss()
    before = peak_rss_bytes()
    # a mapping of its own, not the allocator's: whether malloc gives a freed
    # block back depends on what the worker ran before (its thresholds move)
    block = mmap.mmap(-1, 64 * MIB)
    for page in range(0, 64 * MIB, mmap.PAGESIZE):
        block[page] = 1  # touched: resident
    peak = peak_rss_bytes()
    assert peak is not None and before is not None
    assert peak >= before + 60 * MIB
    block.close()
    now = current_rss_bytes()
    assert now is not None and now < peak - 32 * MIB
    assert reset_peak_rss()
    after = peak_rss_bytes()
    assert after is not None and after < peak - 32 * MIB


def test_malloc_trim_gives_freed_small_blocks_back() -> None:
    blocks = [bytearray(4096) for _ in range(32 * 1024)]  # 128 MiB of small blocks: the heap, not mmap
    keep = blocks[-1]  # the heap's top stays in use: only trim hands back the freed pages below it
    grown = current_rss_bytes()
    del blocks
    assert malloc_trim()
    trimmed = current_rss_bytes()
    assert grown is not None and trimmed is not None
    assert trimmed < grown - 64 * MIB
    del keep


def test_the_suite_reclaims_a_test_s_cyclic_garbage_after_it_grew_the_worker() -> None:
    """tests/conftest.py's _reclaim_memory: nothing below the growth it
    waits for; past it, the garbage that only a full collection frees (a
    cycle holding 128 MiB, as a compiled model's IR holds its kernels and
    weights) is freed and the worker shrinks back."""
    from tests.conftest import RECLAIM_AFTER_GROWTH, _Reclaim, _reclaim_memory

    gc.collect()
    _Reclaim.kept = current_rss_bytes()
    assert _reclaim_memory() is None  # no growth: no collection
    gc.disable()  # the cycle must survive until the reclaim, as a test's does between Python's collections
    try:
        cycle: dict[str, object] = {"data": np.ones(RECLAIM_AFTER_GROWTH * 2, dtype=np.uint8)}
        cycle["self"] = cycle
        del cycle
        grown = current_rss_bytes()
        assert grown is not None and _Reclaim.kept is not None
        assert grown >= _Reclaim.kept + RECLAIM_AFTER_GROWTH
        assert _reclaim_memory() is not None
        after = current_rss_bytes()
        assert after is not None and after < grown - RECLAIM_AFTER_GROWTH
        assert abs(_Reclaim.kept - after) < 4 * MIB  # the next growth counts from here
    finally:
        gc.enable()

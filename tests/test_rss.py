"""pyocc.testing.rss, which the suite's --rss-report and its memory reclaim
between tests (tests/conftest.py) read: the high-water mark rises with an
allocation, the reset brings it back down, malloc_trim gives freed heap back."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from pyocc.testing.rss import current_rss_bytes, malloc_trim, peak_rss_bytes, reset_peak_rss

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc/self")

MIB = 2**20


def test_the_peak_follows_an_allocation_and_the_reset_forgets_it() -> None:
    assert reset_peak_rss()
    before = peak_rss_bytes()
    block = np.ones(64 * MIB, dtype=np.uint8)  # touched: resident
    peak = peak_rss_bytes()
    assert peak is not None and before is not None
    assert peak >= before + 60 * MIB
    del block
    now = current_rss_bytes()
    assert now is not None and now < peak - 32 * MIB  # a block this large is its own mapping, given back when freed
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

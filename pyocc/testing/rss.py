"""A process's resident memory high-water mark, for the test suite's
`--rss-report` (tests/conftest.py): read it, reset it between tests, and
hand freed heap back to the system so that one large test's peak does not
stay in a worker for the rest of the run.

Linux only (/proc/self/status, /proc/self/clear_refs, glibc's malloc_trim);
elsewhere each function says it cannot (None or False) instead of failing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re

_STATUS = "/proc/self/status"


def _status_kib(field: str) -> int | None:
    try:
        with open(_STATUS) as status:
            match = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def peak_rss_bytes() -> int | None:
    """The process's resident set high-water mark (VmHWM) in bytes since it
    started or since the last reset_peak_rss, or None where /proc does not
    say."""
    kib = _status_kib("VmHWM")
    return None if kib is None else kib * 1024


def current_rss_bytes() -> int | None:
    """The process's resident set size now (VmRSS) in bytes, or None where
    /proc does not say."""
    kib = _status_kib("VmRSS")
    return None if kib is None else kib * 1024


def reset_peak_rss() -> bool:
    """Set the high-water mark back to the current resident size (writing
    "5" to /proc/self/clear_refs, Linux 4.0+), so that the next
    peak_rss_bytes is the peak from now on. False where that is refused."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name)
    return libc if hasattr(libc, "malloc_trim") else None


def malloc_trim() -> bool:
    """Ask glibc to give the free parts of its heaps back to the system
    (malloc_trim(0)): after a large test, its freed arrays and IR would
    otherwise stay resident in the worker. False where there is no glibc
    malloc_trim (musl, macOS)."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True

"""The plan sanitizer's kernel (see pyocc/rewrites/dnn_sanitize.py)."""

from __future__ import annotations

import ctypes

import numpy as np

from pyocc.errors import PyoccError

GUARD_BYTE = 0xFD
"""What guard bytes hold while nobody may write them."""

INT_POISON = 0x5A
"""Every byte of a poisoned integer or boolean buffer."""


def _guard_bytes(out: np.ndarray, guard: int) -> np.ndarray:
    """The `guard` bytes right after `out`'s data, as a writable uint8 view."""
    address = out.__array_interface__["data"][0] + out.nbytes
    return np.frombuffer((ctypes.c_uint8 * guard).from_address(address), dtype=np.uint8)


def sanitize(*, out: np.ndarray, action: str, guard: int, writer: str = "", buffer: str = "") -> None:
    """Poison `out` (NaN, or 0x5A bytes for integers) and arm its guard, or
    check that its guard bytes are intact after `writer` wrote it."""
    if action == "poison":
        if np.issubdtype(out.dtype, np.floating):
            out[...] = np.nan
        else:
            out.view(np.uint8)[...] = INT_POISON
        if guard:
            _guard_bytes(out, guard)[:] = GUARD_BYTE
        return
    changed = np.flatnonzero(_guard_bytes(out, guard) != GUARD_BYTE)
    if changed.size:
        raise PyoccError(
            f"sanitizer: {writer} wrote past the end of buffer '{buffer}' "
            f"({out.nbytes} bytes; guard bytes +{int(changed[0])}..+{int(changed[-1])} changed)"
        )

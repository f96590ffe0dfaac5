"""The weight store: how constant tensors are kept out of the IR text.

Small or splat constants stay inline (`dense<...>`). Everything else becomes
`dense_resource<key>`, MLIR's handle to a blob held by the builtin dialect and
printed once, as hex, in the `{-# dialect_resources ... #-}` section at the
end of the module. The text round-trips byte for byte, and the op listing
stays readable. Blobs follow MLIR's encoding: a 4-byte little-endian
alignment, then the raw little-endian data.

Weights pyocc creates itself stay numpy arrays in the store and become hex
text only if the module is printed: hex-encoding and decoding a 500 MB VGG
weight costs seconds and twice its size in memory, and compiling never needs
the text. `release` drops blobs a finished compilation no longer needs.
Weights of a model saved with ONNX external data are memory-mapped from
their file by the importer; `evict_mapped` gives back their resident pages
once a compilation has copied them (the file still holds them).
"""

from __future__ import annotations

import contextlib
import mmap
import re
from collections.abc import Iterator

import numpy as np
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.builtin import Builtin, DenseResourceAttr, TensorType

from pyocc.errors import PyoccError

#: inline constants up to this many elements (splats are always inline)
INLINE_LIMIT = 16

_BLOB_ALIGNMENT = 16


class _LazyBlobs(dict):
    """The builtin dialect's blob table (key -> hex text) where a value may
    also be a numpy array, hex-encoded only when the printer reads it."""

    def __getitem__(self, key: str) -> str:
        value = super().__getitem__(key)
        return _hex_blob(value) if not isinstance(value, str) else value

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self[key] if key in self else default

    def raw(self, key: str) -> str | np.ndarray | None:
        """The stored value as it is: hex text or an array."""
        return super().get(key)


def _hex_blob(array: np.ndarray) -> str:
    """MLIR's blob text for `array`: 0x, the alignment, the data, as hex."""
    header = _BLOB_ALIGNMENT.to_bytes(4, "little")
    return "0x" + (header + array.tobytes()).hex().upper()


def _blob_store() -> OpAsmDialectInterface:
    interface = Builtin.get_interface(OpAsmDialectInterface)
    assert interface is not None
    # xDSL keeps blobs as hex text in `_blob_storage`; swap in the lazy table once
    if not isinstance(interface._blob_storage, _LazyBlobs):  # pyright: ignore[reportPrivateUsage]
        interface._blob_storage = _LazyBlobs(interface._blob_storage)  # pyright: ignore[reportPrivateUsage]
    return interface


def _blobs() -> _LazyBlobs:
    return _blob_store()._blob_storage  # type: ignore[return-value]  # pyright: ignore[reportPrivateUsage]


def resource_keys() -> set[str]:
    """Keys of every blob the store holds now."""
    return set(_blobs())


def release(keys: set[str]) -> None:
    """Forget the blobs under `keys` (a module that references them can then
    no longer be printed or compiled)."""
    blobs = _blobs()
    for key in keys:
        blobs.pop(key, None)


@contextlib.contextmanager
def isolated_store() -> Iterator[None]:
    """Run the body with an empty blob store, as a fresh process would, and
    put the store back as it was afterwards (the blobs the body made are
    dropped). Keys are made unique against what the store holds, so a
    command run in a long-lived process would otherwise print `w1_3` where
    a fresh `pyocc-opt` prints `w1`."""
    blobs = _blobs()
    held = {key: blobs.raw(key) for key in blobs}
    blobs.clear()
    try:
        yield
    finally:
        blobs.clear()
        blobs.update(held)


def evict_mapped(key: str, upto: int | None = None) -> None:
    """Give back the resident pages of blob `key` if it maps a file (weights
    the importer memory-maps from ONNX external data), once its bytes have
    been copied where the compiled model reads them: all of it, or its
    first `upto` bytes (a page they share with the bytes after them stays).
    Other blobs in the same mapping (the importer maps each data file once)
    keep their pages, but for a page they share with this one. The mapping
    stays: a later read (printing the module, a neighbour in a shared page)
    pages the data in again from the file."""
    blob = _blobs().raw(key)
    base = blob
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if not isinstance(base, mmap.mmap) or not isinstance(blob, np.ndarray):
        return
    # the blob's place in its mapping
    start = blob.ctypes.data - np.frombuffer(base, dtype=np.uint8).ctypes.data
    first = start // mmap.PAGESIZE * mmap.PAGESIZE
    if upto is None:
        end = -(-(start + blob.nbytes) // mmap.PAGESIZE) * mmap.PAGESIZE
    else:
        end = (start + min(upto, blob.nbytes)) // mmap.PAGESIZE * mmap.PAGESIZE
    if end > first:  # (madvise stops at the mapping's end)
        base.madvise(mmap.MADV_DONTNEED, first, end - first)


def resource_key(name: str) -> str:
    """A valid resource identifier derived from a tensor name."""
    key = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "blob"
    return key if not key[0].isdigit() else "_" + key


def store_array(name: str, array: np.ndarray, tensor: TensorType) -> DenseResourceAttr:
    """Put `array` into the blob store under a key derived from `name` (made
    unique) and return the attribute that references it. The store keeps the
    array itself (no copy): the caller must not modify it afterwards."""
    store = _blob_store()
    key = store.declare_resource(resource_key(name))
    data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).view()
    data.flags.writeable = False
    _blobs()[key] = data
    return DenseResourceAttr.from_params(key, tensor)


def load_bytes(attr: DenseResourceAttr) -> bytes | memoryview:
    """The raw data bytes behind a `dense_resource` attribute (a read-only
    memoryview, without a copy, when the store holds the array)."""
    key = attr.resource_handle.data
    blob = _blobs().raw(key)
    if blob is not None and not isinstance(blob, str):
        return memoryview(blob.reshape(-1).view(np.uint8))
    if not blob:
        raise PyoccError(
            f"weight '{key}' has no data: the module references dense_resource<{key}> "
            "but its dialect_resources section does not define it"
        )
    return bytes.fromhex(blob[2:])[4:]

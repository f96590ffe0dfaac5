"""The weight store: how constant tensors are kept out of the IR text.

Small or splat constants stay inline (`dense<...>`). Everything else becomes
`dense_resource<key>`, MLIR's handle to a blob held by the builtin dialect and
printed once, as hex, in the `{-# dialect_resources ... #-}` section at the
end of the module. The text round-trips byte for byte, and the op listing
stays readable. Blobs follow MLIR's encoding: a 4-byte little-endian
alignment, then the raw little-endian data.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.builtin import Builtin, DenseResourceAttr, TensorType

if TYPE_CHECKING:
    import numpy as np

#: inline constants up to this many elements (splats are always inline)
INLINE_LIMIT = 16

_BLOB_ALIGNMENT = 16

#: key -> (the blob text stored for it, the array it encodes), until the
#: first load_bytes of that key: the compiler stores a weight at import and
#: reads it once when it packs the weight pool, so that read skips decoding
#: hex (a second of CPU per 250 MB of weights). Popped on read so that the
#: store does not hold every weight twice.
_UNREAD: dict[str, tuple[str, np.ndarray]] = {}


def _blob_store() -> OpAsmDialectInterface:
    interface = Builtin.get_interface(OpAsmDialectInterface)
    assert interface is not None
    return interface


def resource_key(name: str) -> str:
    """A valid resource identifier derived from a tensor name."""
    key = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "blob"
    return key if not key[0].isdigit() else "_" + key


def store_array(name: str, array: np.ndarray, tensor: TensorType) -> DenseResourceAttr:
    """Put `array`'s bytes into the blob store under a key derived from
    `name` (made unique) and return the attribute that references it.
    The store may keep `array` itself until the first `load_bytes` of the
    key (see `_UNREAD`): do not modify it afterwards."""
    import numpy as np

    store = _blob_store()
    key = store.declare_resource(resource_key(name))
    data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
    header = _BLOB_ALIGNMENT.to_bytes(4, "little")
    blob = "0x" + (header + data.tobytes()).hex().upper()
    store.parse_resource(key, blob)
    _UNREAD[key] = (blob, data)
    return DenseResourceAttr.from_params(key, tensor)


def load_bytes(attr: DenseResourceAttr) -> bytes | memoryview:
    """The raw data bytes behind a `dense_resource` attribute (a bytes-like
    object: `bytes`, or a read-only view of the array it was stored from)."""
    from pyocc.errors import PyoccError

    key = attr.resource_handle.data
    blob = _blob_store().lookup(key)
    if not blob:
        raise PyoccError(
            f"weight '{key}' has no data: the module references dense_resource<{key}> "
            "but its dialect_resources section does not define it"
        )
    unread = _UNREAD.pop(key, None)
    if unread is not None and unread[0] is blob:  # the very text store_array made
        view = memoryview(unread[1]).cast("B")
        return view.toreadonly()
    return bytes.fromhex(blob[2:])[4:]

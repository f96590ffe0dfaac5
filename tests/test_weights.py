"""The weight store: arrays stay arrays until printed, and a compiled model
gives its blobs back when it goes away (the store is process-wide)."""

from __future__ import annotations

import gc
import mmap
import re
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.builtin import Builtin, TensorType, f32

import pyocc
from pyocc.runtime import bridge
from pyocc.weights import evict_mapped, load_bytes, release, resource_keys, store_array
from tests.graphs import unet


def test_stored_array_loads_without_hex_and_prints_as_an_mlir_blob() -> None:
    w = np.random.default_rng(0).standard_normal((5, 7), dtype=np.float32)
    attr = store_array("w", w, TensorType(f32, [5, 7]))
    key = attr.resource_handle.data
    assert bytes(load_bytes(attr)) == w.tobytes()
    # what the printer reads: MLIR's encoding, a 4-byte alignment then the data
    text = Builtin.get_interface(OpAsmDialectInterface).lookup(key)
    assert text == "0x" + ((16).to_bytes(4, "little") + w.tobytes()).hex().upper()
    release({key})
    assert key not in resource_keys()


def test_compiled_model_releases_its_weight_blobs() -> None:
    before = resource_keys()
    model = pyocc.compile(unet(), memory="pool")
    created = resource_keys() - before
    assert created, "unet's convolution weights are large enough to be blobs"
    del model
    gc.collect()
    assert not created & resource_keys()


def _resident_bytes(path: Path) -> int:
    """Resident bytes of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            inside = line.endswith(" " + str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1]) * 1024
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc/self/smaps to count pages")
def test_a_mapped_weight_is_given_back_piece_by_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """evict_mapped(key, upto) gives back the pages of a mapped weight's
    first `upto` bytes only; pack_weight_pool copies a weight in pieces of
    WEIGHT_COPY_BYTES and says after each how far it got, so a weight
    mapped from a file is never resident twice (VGG-19's fc6 is 411 MB)."""
    w = np.random.default_rng(3).standard_normal(256 * 1024, dtype=np.float32)  # 1 MiB, 256 pages
    data = tmp_path / "w.data"
    w.tofile(data)
    mapped = np.memmap(data, dtype=np.float32, mode="r", offset=0, shape=w.shape)
    attr = store_array("mapped_w", mapped, TensorType(f32, list(w.shape)))
    key = attr.resource_handle.data
    try:
        assert bytes(load_bytes(attr)) == w.tobytes()  # every page read: resident
        assert _resident_bytes(data) == w.nbytes
        evict_mapped(key, 300_000)  # 73 whole pages and a part of the 74th
        assert _resident_bytes(data) == w.nbytes - 73 * mmap.PAGESIZE
        evict_mapped(key)
        assert _resident_bytes(data) == 0

        progress: list[tuple[str, int]] = []
        meta = {"weights": {"bytes": w.nbytes, "alignment": 64, "entries": [
            {"offset": 0, "nbytes": w.nbytes, "dtype": "float32", "shape": list(w.shape),
             "source": {"resource": key}}]}}

        def copied(copied_key: str, done: int) -> None:
            # what is copied so far is in the pool, and of the file only the last piece is
            # resident (and what the kernel's fault-around mapped beside it)
            progress.append((copied_key, done))
            assert _resident_bytes(data) <= 2 * piece
            evict_mapped(copied_key, done)

        piece = 64 * 1024
        monkeypatch.setattr(bridge, "WEIGHT_COPY_BYTES", piece)
        pool = bridge.pack_weight_pool(meta, lambda k, entry: load_bytes(attr), copied)
        assert pool.tobytes() == w.tobytes()
        assert progress == [(key, done) for done in range(piece, w.nbytes + 1, piece)]
        assert _resident_bytes(data) == 0
    finally:
        release({key})

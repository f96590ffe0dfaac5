"""The weight store: arrays stay arrays until printed, and a compiled model
gives its blobs back when it goes away (the store is process-wide)."""

from __future__ import annotations

import gc

import numpy as np
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.builtin import Builtin, TensorType, f32

import pyocc
from pyocc.weights import load_bytes, release, resource_keys, store_array
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

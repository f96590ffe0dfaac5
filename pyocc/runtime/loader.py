"""Load an AOT-compiled model: a shared library from
`CompiledModel.write_shared_library` plus its `.weights` file.

Only the library and the weights file are needed (no xDSL, no IR, no weight
store): the library carries its JSON site table (`NAME_meta()`), and the
weights file is the packed constant pool, memory-mapped once per load. One live model per loaded library
path: the kernel callback is a global of the library.
"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

import numpy as np

from pyocc.errors import PyoccError
from pyocc.runtime import blas
from pyocc.runtime.bridge import NativeModel, aligned_bytes
from pyocc.runtime.jit import weights_path_for


class SharedLibraryModel(NativeModel):
    """A model run from a shared library; `run` and `alloc_stats` as for the JIT."""

    def __init__(self, library: ctypes.CDLL, meta: dict, weight_pool: np.ndarray):
        name = meta["name"]
        functions = {}
        for kind in ("init", "run", "destroy"):
            try:
                functions[kind] = ctypes.cast(getattr(library, f"{name}_{kind}"), ctypes.c_void_p).value
            except AttributeError:
                raise PyoccError(f"the library has no {name}_{kind}: not a pyocc model library") from None
        super().__init__(meta, weight_pool, functions, keepalive=library)


def _json_from(library: ctypes.CDLL, symbol: str, path: Path) -> object:
    try:
        getter = getattr(library, symbol)
    except AttributeError:
        raise PyoccError(f"{path}: no {symbol}(): not a library written by pyocc") from None
    getter.restype = ctypes.c_char_p
    getter.argtypes = []
    return json.loads(getter().decode("utf-8"))


def load_shared_library(path: str | os.PathLike[str], weights: str | os.PathLike[str] | None = None,
                        name: str | None = None) -> SharedLibraryModel:
    """Load model `name` (default: the library's only one) from the shared
    library at `path`, with its weight pool from `weights` (default: the
    `.weights` file beside the library)."""
    path = Path(path)
    if not path.is_file():
        raise PyoccError(f"{path}: no such file")
    library = ctypes.CDLL(str(path.resolve()))
    if any(hasattr(library, symbol) for symbol in blas.BLAS_SYMBOLS):
        blas.load()  # the OpenBLAS it linked (the same library): one thread, as in the JIT
    names = _json_from(library, "pyocc_functions", path)
    assert isinstance(names, list)
    if name is None:
        if len(names) != 1:
            raise PyoccError(f"{path} holds models {names}; pass name=")
        name = names[0]
    if name not in names:
        raise PyoccError(f"{path} has no model '{name}' (it has {names})")
    meta = _json_from(library, f"{name}_meta", path)
    assert isinstance(meta, dict)
    if "symbols" in meta:
        raise PyoccError(f"{path}: a model compiled with --dim (its run takes the values of "
                         f"{', '.join(s['name'] for s in meta['symbols'])}); this loader reads fixed-shape "
                         "libraries only: run it from C (examples/c/run_model.c --dim NAME=VALUE), "
                         "or in Python with pyocc.compile(..., dims=...)")
    weights_path = Path(weights) if weights is not None else weights_path_for(path)
    expected = meta["weights"]["bytes"]
    if expected and not weights_path.is_file():
        raise PyoccError(f"{weights_path}: no such weights file (the model needs {expected} bytes of weights)")
    size = weights_path.stat().st_size if expected else 0
    if size != expected:
        raise PyoccError(f"{weights_path} has {size} bytes; model '{name}' expects {expected}")
    # memory-mapped once (private: never written back), page-aligned, so the
    # weight pool's offsets keep their alignment; no copy on the heap
    pool = np.memmap(weights_path, dtype=np.uint8, mode="c") if expected \
        else aligned_bytes(0, meta["weights"]["alignment"])
    return SharedLibraryModel(library, meta, pool)

"""Load an AOT-compiled model: a shared library from
`CompiledModel.write_shared_library` plus its `.weights` file.

Only the library and the weights file are needed (no xDSL, no IR, no weight
store): the library carries its JSON site table (`NAME_meta()`), and the
weights file is the packed constant pool, memory-mapped once per load. One live model per loaded library
path: the kernel callback is a global of the library. A library compiled
with symbolic dimensions (`pyocc compile --dim`, C ABI version 2,
pyocc.lowering.symbolic_native) loads as a `SymbolicLibraryModel`, whose
`run` takes inputs of any size in range.
"""

from __future__ import annotations

import ast
import ctypes
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pyocc.errors import PyoccError
from pyocc.runtime import blas
from pyocc.runtime.bridge import STATE_SLOTS, AllocStats, NativeModel, aligned_bytes
from pyocc.runtime.jit import weights_path_for


def entry_points(library: ctypes.CDLL, name: str) -> dict[str, int]:
    """The addresses of a model library's NAME_init, NAME_run and
    NAME_destroy; one PyoccError if one is missing."""
    addresses = {}
    for kind in ("init", "run", "destroy"):
        try:
            addresses[kind] = ctypes.cast(getattr(library, f"{name}_{kind}"), ctypes.c_void_p).value
        except AttributeError:
            raise PyoccError(f"the library has no {name}_{kind}: not a pyocc model library") from None
    return addresses


class SharedLibraryModel(NativeModel):
    """A model run from a shared library; `run` and `alloc_stats` as for the JIT."""

    def __init__(self, library: ctypes.CDLL, meta: dict, weight_pool: np.ndarray):
        super().__init__(meta, weight_pool, entry_points(library, meta["name"]), keepalive=library)


#: a symbolic library's run: int32_t run(inputs, outputs, weights, state, symbols)
_SYMBOLIC_RUN = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * 5)


def formula_value(text: str | int, values: Mapping[str, int]) -> int:
    """A dimension of a symbolic library's table (an int, or a formula in the
    symbols such as ``4*sequence`` or ``batch*sequence``) at `values`."""
    if isinstance(text, int):
        return text

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in values:
            return values[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Pow):
            left, right = value(node.left), value(node.right)
            return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right,
                    ast.Pow: left ** right}[type(node.op)]
        raise PyoccError(f"the library's table has a dimension {text!r} that is no formula in "
                         f"{', '.join(sorted(values))}")

    return value(ast.parse(text.replace("^", "**"), mode="eval").body)


class SymbolicLibraryModel:
    """A model compiled with symbolic dimensions run from its shared library
    (C ABI version 2): `run` reads each symbol's value off the first input
    dimension that is that symbol alone, checks it against its range and
    every input's shape against the table, and passes the values (sorted
    by name) to the library's run."""

    def __init__(self, library: ctypes.CDLL, meta: dict, weight_pool: np.ndarray):
        self.meta = meta
        self.name: str = meta["name"]
        self.weight_pool = weight_pool
        self.ranges: dict[str, tuple[int, int]] = {s["name"]: (s["min"], s["max"]) for s in meta["symbols"]}
        addresses = entry_points(library, self.name)
        self._library = library
        self._run = _SYMBOLIC_RUN(addresses["run"])
        self._destroy: Any = ctypes.CFUNCTYPE(None)(addresses["destroy"])
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addresses["init"])(None)
        self._stats = AllocStats(0, 0, 0, 0)

    @property
    def input_names(self) -> list[str]:
        """ONNX names of the graph inputs, in order."""
        return [spec["name"] for spec in self.meta["inputs"]]

    @property
    def output_names(self) -> list[str]:
        """ONNX names of the graph outputs, in order."""
        return [spec["name"] for spec in self.meta["outputs"]]

    def values_of(self, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
        """The symbols' values that the inputs' `shapes` give; PyoccError for
        one out of range or one no input dimension gives alone."""
        values: dict[str, int] = {}
        for spec in self.meta["inputs"]:
            for dim, size in zip(spec["shape"], shapes[spec["name"]], strict=False):
                if isinstance(dim, str) and dim in self.ranges:
                    values.setdefault(dim, int(size))
        for name, (low, high) in self.ranges.items():
            if name not in values:
                raise PyoccError(f"{self.name}: no input dimension is {name} alone, so its value cannot be read "
                                 "off the inputs; run the library from C with --dim")
            if not low <= values[name] <= high:
                raise PyoccError(f"{self.name}: {name}={values[name]} is out of range: the library was compiled "
                                 f"for {name} in {low}..{high}")
        return values

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once on inputs of any size in range (ONNX input name -> array);
        returns ONNX output name -> a new array."""
        if sorted(inputs) != sorted(self.input_names):
            raise PyoccError(f"{self.name}: inputs {sorted(inputs)} do not match the model's inputs "
                             f"{self.input_names}")
        arrays = {name: np.asarray(value) for name, value in inputs.items()}
        values = self.values_of({name: array.shape for name, array in arrays.items()})
        contiguous = []
        for spec in self.meta["inputs"]:
            array = arrays[spec["name"]]
            shape = [formula_value(d, values) for d in spec["shape"]]
            if list(array.shape) != shape or array.dtype != np.dtype(spec["dtype"]):
                raise PyoccError(f"{self.name}: input '{spec['name']}' has {array.dtype}{list(array.shape)}, the "
                                 f"model takes {spec['dtype']}{shape} at {values}")
            contiguous.append(np.ascontiguousarray(array))
        outputs = [np.empty([formula_value(d, values) for d in spec["shape"]], dtype=spec["dtype"])
                   for spec in self.meta["outputs"]]
        input_pointers = (ctypes.c_void_p * max(len(contiguous), 1))(*[a.ctypes.data for a in contiguous])
        output_pointers = (ctypes.c_void_p * max(len(outputs), 1))(*[a.ctypes.data for a in outputs])
        symbols = (ctypes.c_int64 * max(len(values), 1))(*[values[n] for n in sorted(values)])
        state = (ctypes.c_int64 * STATE_SLOTS)()
        status = self._run(ctypes.addressof(input_pointers), ctypes.addressof(output_pointers),
                           self.weight_pool.ctypes.data, ctypes.addressof(state), ctypes.addressof(symbols))
        self._stats = AllocStats.from_state(state)
        if status == 1:
            raise PyoccError(f"{self.name}: out of memory (the allocator returned NULL for the pool)")
        if status != 0:
            raise PyoccError(f"{self.name}: the generated code returned status {status}")
        return dict(zip(self.output_names, outputs, strict=True))

    def alloc_stats(self) -> AllocStats:
        """Allocator calls and bytes of the last `run` (counted in native code)."""
        return self._stats

    def close(self) -> None:
        """Call the library's NAME_destroy (once)."""
        if self._destroy is not None:
            self._destroy()
            self._destroy = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn ctypes down
            pass


def _json_from(library: ctypes.CDLL, symbol: str, path: Path) -> object:
    try:
        getter = getattr(library, symbol)
    except AttributeError:
        raise PyoccError(f"{path}: no {symbol}(): not a library written by pyocc") from None
    getter.restype = ctypes.c_char_p
    getter.argtypes = []
    return json.loads(getter().decode("utf-8"))


def load_shared_library(path: str | os.PathLike[str], weights: str | os.PathLike[str] | None = None,
                        name: str | None = None) -> SharedLibraryModel | SymbolicLibraryModel:
    """Load model `name` (default: the library's only one) from the shared
    library at `path`, with its weight pool from `weights` (default: the
    `.weights` file beside the library); a library compiled with symbolic
    dimensions (`pyocc compile --dim`) as a `SymbolicLibraryModel`."""
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
    if "symbols" in meta:
        return SymbolicLibraryModel(library, meta, pool)
    return SharedLibraryModel(library, meta, pool)

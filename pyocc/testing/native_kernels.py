"""Run one native kernel alone, outside any model (tests and bench/).

A site table entry (`site_for`, see pyocc.lowering.convert_dnn_to_llvm)
describes one kernel call; `CompiledSite(site)` compiles its native emitter
(or a given one) alone into a module and JITs it as a model is JITted
(pyocc.runtime.jit.jit_module: -O3 for this CPU, libm and OpenBLAS bound);
calling it runs it on the buffer table a compiled model would pass.

- `run_native(site, inputs)` / `run_numpy(site, inputs)`: the native kernel
  and pyocc.runtime.host_kernels' kernel of the same name; both return the
  output arrays, so a test compares them.
- `run_guarded(emit, kernel, inputs, out, kwargs)`: one float32 output (and
  an optional workspace) with guard elements behind them, NaN-filled, so a
  write past the end, a read of the workspace before writing it, or a
  write to an input fails.
- `CompiledSites(emit_all, count)`: several sites emitted into one module
  and JIT-compiled once, as a model's sites are (sites that share a
  kernel then call one function); `run_guarded(..., compiled=sites[i])`
  runs one of them with the same guards.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from typing import Any

import llvmlite.ir as ir
import numpy as np

from pyocc.lowering.native import native_kernel_for
from pyocc.lowering.native.loops import emit_size_wrapper
from pyocc.lowering.native.registry import site_slots
from pyocc.runtime import host_kernels
from pyocc.runtime.jit import _resolve_externals, jit_module

#: an input: an array, None (an absent optional input), or a list (variadic)
SiteInput = np.ndarray | None | list[np.ndarray]
#: emit(module, symbol, site), as pyocc.lowering.native.registry registers them
Emitter = Callable[[ir.Module, str, dict[str, Any]], None]


def site_for(kernel: str, inputs: Sequence[SiteInput], outputs: Sequence[tuple[Sequence[int], str]],
             out_keyword: str = "out", workspace_bytes: int | None = None, **kwargs: Any) -> dict[str, Any]:
    """A site table entry for `kernel` on these inputs, outputs of
    (shape, dtype), keyword arguments and (optionally) a workspace of
    `workspace_bytes`."""

    def spec(array: np.ndarray) -> dict[str, Any]:
        return {"shape": list(array.shape), "dtype": array.dtype.name}

    return {
        "site": 0, "op": f"dnn.{kernel}", "kernel": kernel,
        "inputs": [None if x is None else [spec(a) for a in x] if isinstance(x, list) else spec(x) for x in inputs],
        "outputs": [{"shape": list(shape), "dtype": dtype} for shape, dtype in outputs],
        "out_keyword": out_keyword, "kwargs": kwargs,
        "workspace": None if workspace_bytes is None else {"shape": [workspace_bytes], "dtype": "int8"},
    }


class CompiledSite:
    """One site's kernel compiled alone and JIT-compiled for this CPU."""

    def __init__(self, site: dict[str, Any], emit: Emitter | None = None):
        if emit is None:
            kernel = native_kernel_for(site)
            if kernel is None:
                raise ValueError(f"no native kernel computes this {site['kernel']} site")
            emit = kernel.emit
        emit_site: Emitter = emit
        compiled = CompiledSites(lambda module, symbols: emit_site(module, symbols[0], site), 1)
        self.site = site
        self.llvm_ir, self.engine = compiled.llvm_ir, compiled.engine
        self.function = compiled.functions[0]

    def __call__(self, inputs: Sequence[SiteInput], outputs: Sequence[np.ndarray],
                 workspace: np.ndarray | None = None) -> None:
        """Run on `inputs` (None for an absent optional one, a list for a
        variadic one), writing `outputs` (C-contiguous)."""
        _call(self.function, inputs, outputs, workspace)


def _call(function: Callable[[int], None], inputs: Sequence[SiteInput], outputs: Sequence[np.ndarray],
          workspace: np.ndarray | None) -> None:
    """Call a JIT-compiled entry point with the buffer table of `inputs`, `outputs` and `workspace`."""
    arrays: list[np.ndarray | None] = []
    for x in inputs:
        arrays.extend(x if isinstance(x, list) else [x])
    arrays += [*outputs] + ([workspace] if workspace is not None else [])
    for array in arrays:
        assert array is None or array.flags.c_contiguous, "the buffer table takes C-contiguous arrays"
    pointers = [None if a is None else a.ctypes.data for a in arrays]
    buffers = (ctypes.c_void_p * len(pointers))(*pointers)
    function(ctypes.addressof(buffers))


#: a site's entry point in a CompiledSites: called as CompiledSite is
SiteFunction = Callable[[Sequence[SiteInput], Sequence[np.ndarray], np.ndarray | None], None]


class CompiledSites:
    """`count` sites emitted into one module and JIT-compiled once.
    `emit_all(module, symbols)` emits site i's function as `symbols[i]`
    (sites that share a kernel emit it once and a wrapper each, as a
    compiled model does: pyocc.lowering.native.registry); `sites[i]` runs
    site i as CompiledSite does. One compile instead of one per site, and
    a shared kernel is compiled, as in a model, once for all its callers."""

    def __init__(self, emit_all: Callable[[ir.Module, list[str]], None], count: int):
        module = ir.Module(name="native_sites")
        symbols = [f"site_{index}" for index in range(count)]
        emit_all(module, symbols)
        for index, symbol in enumerate(symbols):
            entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), f"entry_{index}")
            builder = ir.IRBuilder(entry.append_basic_block())
            builder.call(module.get_global(symbol), [entry.args[0]])
            builder.ret_void()
        self.llvm_ir = str(module)
        self.engine, _ = jit_module(self.llvm_ir, _resolve_externals)
        prototype = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
        #: site i's entry point, called with the address of its buffer table
        self.functions = [prototype(self.engine.get_function_address(f"entry_{index}")) for index in range(count)]

    def __len__(self) -> int:
        """The number of sites."""
        return len(self.functions)

    def __getitem__(self, index: int) -> SiteFunction:
        """Site `index`'s entry point: run(inputs, outputs, workspace=None)."""
        function = self.functions[index]

        def run(inputs: Sequence[SiteInput], outputs: Sequence[np.ndarray], workspace: np.ndarray | None = None) -> None:
            _call(function, inputs, outputs, workspace)

        return run


def emit_sharing_sites(module: ir.Module, symbols: Sequence[str], sites: Sequence[dict[str, Any]],
                       general_sizes: Callable[[dict[str, Any]], tuple[dict[str, Any], Any] | None],
                       emit: Callable[[ir.Module, str, dict[str, Any]], None], why: str) -> dict[str, Any]:
    """Emit `sites` as a compiled model has sites that differ only in sizes
    (pyocc.lowering.native.registry): `symbols[i]` is site i's own kernel,
    `symbols[len(sites) + i]` its wrapper calling the one kernel that reads
    those sizes at run time, emitted once as "shared_sizes". Asserts that
    `general_sizes` (e.g. conv_row_sizes) shares every site's kernel (`why`
    says why it should) and that they all share the same one; returns that
    general site."""
    generals = []
    for site in sites:
        general = general_sizes(site)
        assert general is not None, why
        generals.append(general)
    general_site = generals[0][0]
    assert all(site == general_site for site, _ in generals), "the sites share one kernel"
    slots = site_slots(sites[0])
    emit(module, "shared_sizes", {**general_site, "run_time_sizes": slots})
    for index, (site, (_, sizes)) in enumerate(zip(sites, generals, strict=True)):
        emit(module, symbols[index], site)
        emit_size_wrapper(module, symbols[len(sites) + index], "shared_sizes", slots, sizes)
    return general_site


def _outputs(site: dict[str, Any]) -> list[np.ndarray]:
    # stale data in out, as the pool holds: kernels must not read it
    return [np.full(spec["shape"], 77, dtype=spec["dtype"]) for spec in site["outputs"]]


def run_native(site: dict[str, Any], inputs: Sequence[SiteInput], outputs: list[np.ndarray] | None = None,
               ) -> list[np.ndarray]:
    """Compile and run the native kernel of `site` on `inputs`; its outputs
    (`outputs` if given: pass an input there to run in place)."""
    outs = outputs if outputs is not None else _outputs(site)
    contiguous = [x if x is None or isinstance(x, list) else np.ascontiguousarray(x) for x in inputs]
    contiguous = [[np.ascontiguousarray(a) for a in x] if isinstance(x, list) else x for x in contiguous]
    CompiledSite(site)(contiguous, outs)
    return outs


def run_numpy(site: dict[str, Any], inputs: Sequence[SiteInput], outputs: list[np.ndarray] | None = None,
              ) -> list[np.ndarray]:
    """Run the numpy kernel of `site` on `inputs`; its outputs."""
    outs = outputs if outputs is not None else _outputs(site)
    args = [x if x is None or isinstance(x, list) else np.asarray(x) for x in inputs]
    while args and args[-1] is None:
        args.pop()
    destination = outs if site["out_keyword"] == "outs" else outs[0]
    getattr(host_kernels, site["kernel"])(*args, **{site["out_keyword"]: destination}, **site["kwargs"])
    return outs


#: float32 elements behind the output and the workspace that a kernel must not touch
GUARD = 64
_SENTINEL = np.float32(-1234.5)


def _guarded(size: int, fill: float) -> np.ndarray:
    """A float32 buffer of `size` elements filled with `fill`, then GUARD sentinels."""
    buffer = np.full(size + GUARD, fill, dtype=np.float32)
    buffer[size:] = _SENTINEL
    return buffer


def run_guarded(emit: Emitter | None, kernel: str, inputs: Sequence[np.ndarray | None], out: np.ndarray,
                kwargs: dict[str, Any], workspace_bytes: int | None = None,
                compiled: SiteFunction | None = None) -> None:
    """Emit, compile and run one kernel on these arrays, writing `out`
    (which may be one of the inputs, for in-place kernels). `workspace_bytes`:
    a scratch buffer of that size, filled with NaN so that reading it before
    writing shows. Raises AssertionError if the kernel writes past the end
    of `out` or of the workspace, or writes an input other than `out`.
    `compiled` (one site of a CompiledSites) runs that site's function
    instead of compiling `emit`'s."""
    site = site_for(kernel, inputs, [(out.shape, out.dtype.name)], workspace_bytes=workspace_bytes, **kwargs)
    in_place = [a is out for a in inputs]
    staged = _guarded(out.size, np.nan)
    staged[:out.size] = out.reshape(-1)
    staged_out = staged[:out.size].reshape(out.shape)
    arguments = [staged_out if same else a for a, same in zip(inputs, in_place, strict=True)]
    before = [None if a is None or same else a.copy() for a, same in zip(inputs, in_place, strict=True)]
    workspace = None
    if workspace_bytes is not None:
        workspace = _guarded(max(1, math.ceil(workspace_bytes / 4)), np.nan)
    if compiled is None:
        assert emit is not None, "run_guarded needs an emitter or a compiled site"
        compiled = CompiledSite(site, emit)
    compiled(arguments, [staged_out], workspace)
    assert (staged[out.size:] == _SENTINEL).all(), f"{kernel} wrote past the end of its output"
    if workspace is not None:
        used = max(1, math.ceil(workspace_bytes / 4))  # type: ignore[operator]
        assert (workspace[used:] == _SENTINEL).all(), f"{kernel} wrote past the end of its workspace"
    for original, array in zip(before, inputs, strict=True):
        if original is not None:
            assert array is not None and np.array_equal(original, array, equal_nan=True), f"{kernel} wrote an input"
    out[...] = staged_out

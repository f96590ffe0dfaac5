"""Run one site's native kernel and its numpy kernel side by side (tests).

`run_native(site, inputs)` compiles the native emitter of `site` (a site
table entry, see pyocc.lowering.convert_dnn_to_llvm) alone into a module,
JITs it like a model (pyocc.runtime.jit.jit_module) and runs it on numpy
arrays; `run_numpy(site, inputs)` runs pyocc.runtime.host_kernels' kernel of
the same name. Both return the output arrays, so a test compares them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import llvmlite.ir as ir
import numpy as np

from pyocc.lowering.native import native_kernel_for
from pyocc.runtime import host_kernels
from pyocc.runtime.jit import _resolve_externals, _target_machine, jit_module

#: an input: an array, None (an absent optional input), or a list (variadic)
SiteInput = np.ndarray | None | list[np.ndarray]


def site_for(kernel: str, inputs: Sequence[SiteInput], outputs: Sequence[tuple[Sequence[int], str]],
             out_keyword: str = "out", **kwargs: Any) -> dict[str, Any]:
    """A site table entry for `kernel` on these inputs, outputs of
    (shape, dtype) and keyword arguments."""

    def spec(array: np.ndarray) -> dict[str, Any]:
        return {"shape": list(array.shape), "dtype": array.dtype.name}

    return {
        "site": 0, "op": f"dnn.{kernel}", "kernel": kernel,
        "inputs": [None if x is None else [spec(a) for a in x] if isinstance(x, list) else spec(x) for x in inputs],
        "outputs": [{"shape": list(shape), "dtype": dtype} for shape, dtype in outputs],
        "out_keyword": out_keyword, "kwargs": kwargs,
    }


def _outputs(site: dict[str, Any]) -> list[np.ndarray]:
    # stale data in out, as the pool holds: kernels must not read it
    return [np.full(spec["shape"], 77, dtype=spec["dtype"]) for spec in site["outputs"]]


def run_native(site: dict[str, Any], inputs: Sequence[SiteInput], outputs: list[np.ndarray] | None = None,
               ) -> list[np.ndarray]:
    """Compile and run the native kernel of `site` on `inputs`; its outputs
    (`outputs` if given: pass an input there to run in place)."""
    kernel = native_kernel_for(site)
    if kernel is None:
        raise ValueError(f"no native kernel computes this {site['kernel']} site")
    module = ir.Module(name="native_site")
    kernel.emit(module, "site", site)
    # give the internal kernel an external entry point
    entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()]), "entry")
    builder = ir.IRBuilder(entry.append_basic_block())
    builder.call(module.get_global("site"), [entry.args[0]])
    builder.ret_void()
    engine, _ = jit_module(str(module), _target_machine(), _resolve_externals)
    outs = outputs if outputs is not None else _outputs(site)
    arrays: list[np.ndarray | None] = []
    for x in inputs:
        arrays.extend(x if isinstance(x, list) else [x])
    arrays = [None if a is None else np.ascontiguousarray(a) for a in arrays]
    pointers = [None if a is None else a.ctypes.data for a in arrays] + [o.ctypes.data for o in outs]
    buffers = (ctypes.c_void_p * len(pointers))(*pointers)
    function = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.get_function_address("entry"))
    function(ctypes.addressof(buffers))
    del engine
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

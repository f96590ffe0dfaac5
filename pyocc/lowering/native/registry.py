"""The registry of native kernels: kernel name -> the emitter that writes
that kernel's LLVM IR for one site.

A kernel name is a dnn op's `kernel` (its name without `dnn.`), the same
name as the numpy kernel in pyocc.runtime.host_kernels whose semantics the
emitter reproduces. An emitter `emit(module, symbol, site)` defines
`void symbol(i8 **buffers)` in the llvmlite `module`, specialised to the
site's static shapes, dtypes and keyword arguments (the site's JSON table
entry, see pyocc.lowering.convert_dnn_to_llvm). `buffers` holds the data
pointers of the kernel inputs in order (variadic inputs expanded, NULL for
an absent optional input), then the outputs.

An emitter that handles only some sites of its kernel (some dtypes, some
modes) says which through `supports(site)`; the other sites keep calling
the numpy kernel.

Sites that differ only in some sizes (DenseNet's 1x1 preact_convs differ
only in their input channels and scratch) may share one function, which
reads those sizes at run time: an emitter that can write such a function
says so through `shared_sizes(site)`, which returns the site as the shared
function sees it (the sizes that vary set to None, so that a use of one
fails at emission) and the sizes themselves (ints). Each site then gets a
thin wrapper `void symbol(i8 **buffers)` that appends its sizes to the
buffer pointers (as integers cast to pointers, slots `site["run_time_sizes"]`
onwards of the shared site) and calls the shared function (`emit_size_wrapper`).
A kernel may ask for at least `min_sharing_sites` such sites before a shared
function replaces their own: a conv's patches (a tiled op) share one, while
an untiled conv, alone with its shape, keeps the function specialised to it.

A kernel may read a weight in a layout of its own (a convolution's
direct kernel reads its weights in blocks of output channels), said by
`weight_layouts(site)`: input position -> the layout ({"layout": a name
of pyocc.runtime.bridge.WEIGHT_LAYOUTS, and its arguments}). Where that
input is a weight nothing else reads (no other op, copy or view; the
host lowering lists those as the site's "weight_entries"), select_kernels
records the layout on the weight's entry, so the weight pool holds it
that way, and on the site as "packed_weights" (the same mapping), which
the emitter reads; otherwise the site has no "packed_weights" and reads
the weight as it is.

A symbolic program (`--dim sequence=512`, pyocc.lowering.symbolic_native)
has sites whose dimensions are polynomials in its symbols. An emitter that
computes such a site says so with `run_time_shapes=True`: it is then given
the site with those dimensions as `Size`s (pyocc.lowering.native.sizes),
whose values the kernel computes from the symbols' values in its buffer
array (slots `site["run_time_symbols"]` onwards, one per symbol).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import llvmlite.ir

from pyocc.lowering.native.dense_ir import keep_loops_around_blas

#: emit(module, symbol, site): define `void symbol(i8 **buffers)` in module
Emitter = Callable[["llvmlite.ir.Module", str, dict[str, Any]], None]
#: supports(site): whether the emitter computes this site exactly as numpy does
Supports = Callable[[dict[str, Any]], bool]
#: shared_sizes(site): (the site with its run-time sizes None, those sizes),
#: or None when the site gets a function of its own
SharedSizes = Callable[[dict[str, Any]], "tuple[dict[str, Any], list[int]] | None"]
#: weight_layouts(site): input position (a str, as in JSON) -> the layout the emitter would read it in
WeightLayouts = Callable[[dict[str, Any]], "dict[str, dict[str, Any]] | None"]


@dataclass(frozen=True)
class NativeKernel:
    """One registered native kernel."""

    name: str
    """the kernel name (the numpy kernel it replaces)"""
    emit: Emitter
    """writes a site's function"""
    supports: Supports
    """which sites it can write"""
    shared_sizes: SharedSizes | None = None
    """which sites share a function that reads some sizes at run time (see
    the module docstring); None: every site's function is its own"""
    min_sharing_sites: int = 1
    """the sites of distinct shapes (their planned scratch aside) a shared
    function must serve to be used; fewer keep their own functions"""
    run_time_shapes: bool = False
    """whether the emitter computes a symbolic program's site, whose
    dimensions are run-time Sizes (see the module docstring)"""
    weight_layouts: WeightLayouts | None = None
    """which weights the emitter would read in a layout of its own (see the
    module docstring); None: every weight as it is"""


#: kernel name -> its native kernel
NATIVE_KERNELS: dict[str, NativeKernel] = {}


def _every_site(site: dict[str, Any]) -> bool:
    return True


def _keeping_blas_loops(emit: Emitter) -> Emitter:
    """`emit`, then `keep_loops_around_blas` on the functions it defined."""

    @functools.wraps(emit)
    def emitting(module: Any, symbol: str, site: dict[str, Any]) -> None:
        before = set(module.globals)
        emit(module, symbol, site)
        keep_loops_around_blas(module, [g for name, g in module.globals.items()
                                        if name not in before and isinstance(g, llvmlite.ir.Function) and g.blocks])

    return emitting


def native_kernel(name: str, supports: Supports | None = None, shared_sizes: SharedSizes | None = None,
                  min_sharing_sites: int = 1, run_time_shapes: bool = False,
                  weight_layouts: WeightLayouts | None = None) -> Callable[[Emitter], Emitter]:
    """Register the decorated emitter as the native kernel `name`; with
    `supports`, only for the sites it accepts; with `shared_sizes`, sites
    alike but for some sizes share one function, where at least
    `min_sharing_sites` distinct sites call it; with `run_time_shapes`, it
    also writes symbolic programs' sites; with `weight_layouts`, it reads
    some weights in layouts of its own (see the module docstring)."""

    def register(emit: Emitter) -> Emitter:
        if name in NATIVE_KERNELS:
            raise ValueError(f"native kernel '{name}' is registered twice")
        NATIVE_KERNELS[name] = NativeKernel(name, _keeping_blas_loops(emit), supports or _every_site, shared_sizes,
                                           min_sharing_sites, run_time_shapes, weight_layouts)
        return emit

    return register


def site_slots(site: dict[str, Any]) -> int:
    """The buffer pointers a site's kernel is called with: the inputs
    (variadic ones expanded, an absent one as NULL), the outputs and the
    workspace, if any; a size-sharing wrapper appends the sizes after them."""
    inputs = sum(len(spec) if isinstance(spec, list) else 1 for spec in site["inputs"])
    return inputs + len(site["outputs"]) + (site.get("workspace") is not None)


def native_kernel_for(site: dict[str, Any]) -> NativeKernel | None:
    """The native kernel that computes `site`, or None (it calls numpy)."""
    kernel = NATIVE_KERNELS.get(site["kernel"])
    if kernel is None or not kernel.supports(site):
        return None
    return kernel

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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import llvmlite.ir

#: emit(module, symbol, site): define `void symbol(i8 **buffers)` in module
Emitter = Callable[["llvmlite.ir.Module", str, dict[str, Any]], None]
#: supports(site): whether the emitter computes this site exactly as numpy does
Supports = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True)
class NativeKernel:
    """One registered native kernel."""

    name: str
    """the kernel name (the numpy kernel it replaces)"""
    emit: Emitter
    """writes a site's function"""
    supports: Supports
    """which sites it can write"""


#: kernel name -> its native kernel
NATIVE_KERNELS: dict[str, NativeKernel] = {}


def _every_site(site: dict[str, Any]) -> bool:
    return True


def native_kernel(name: str, supports: Supports | None = None) -> Callable[[Emitter], Emitter]:
    """Register the decorated emitter as the native kernel `name`; with
    `supports`, only for the sites it accepts."""

    def register(emit: Emitter) -> Emitter:
        if name in NATIVE_KERNELS:
            raise ValueError(f"native kernel '{name}' is registered twice")
        NATIVE_KERNELS[name] = NativeKernel(name, emit, supports or _every_site)
        return emit

    return register


def native_kernel_for(site: dict[str, Any]) -> NativeKernel | None:
    """The native kernel that computes `site`, or None (it calls numpy)."""
    kernel = NATIVE_KERNELS.get(site["kernel"])
    if kernel is None or not kernel.supports(site):
        return None
    return kernel

"""Run as a script by test_jit_far_sections.py: JIT-compile a module after
arranging this process's free address space so that MCJIT places the
module's code more than 2 GiB away from its one-page data section, as a
long-lived process whose mappings come and go (a test worker, torch
loaded) may do by chance; then run it and print its result.

`python far_sections.py MODE`, MODE one of:
- `small`: the module JIT-compiled for the default (small) code model,
  whose 32-bit relocations cannot reach that far (the control: this must
  not print a right result);
- `jit`: the same module through pyocc.runtime.jit.jit_module;
- `site`: a max-pool site through pyocc.testing.native_kernels.CompiledSite
  (test_native_kernels' test_max_pool was running when a worker aborted).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import numpy as np

from pyocc.runtime import jit
from pyocc.testing.native_kernels import CompiledSite, site_for

#: integer steps in the module: its code needs more than one page
STEPS = 3000
#: the vector constant the module adds (its data section: one page)
ADDEND = [1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5]
#: the reservation between the one-page holes and the rest of the free space
GAP = 3 << 30

_MAP_PRIVATE_ANONYMOUS_NORESERVE = 0x02 | 0x20 | 0x4000
_PROT_READ_WRITE = 0x1 | 0x2


def module_text() -> str:
    """`i64 entry(i64 x, ptr p)`: STEPS integer steps on x (returned),
    and p[0:8] += ADDEND (a constant-pool load)."""
    steps = "\n".join(f"  %x{i + 1} = {'mul' if i % 2 else 'xor'} i64 %x{i}, {1000003 * (i + 7)}" for i in range(STEPS))
    addend = ", ".join(f"float {v}" for v in ADDEND)
    return (f'define i64 @"entry"(i64 %x0, ptr %p) {{\n{steps}\n'
            f"  %v = load <8 x float>, ptr %p, align 4\n  %w = fadd <8 x float> %v, <{addend}>\n"
            f"  store <8 x float> %w, ptr %p, align 4\n  ret i64 %x{STEPS}\n}}\n")


def expected_steps(x: int) -> int:
    """What `entry` returns for x (wrapping as i64 does)."""
    for i in range(STEPS):
        x = (x * (1000003 * (i + 7))) if i % 2 else (x ^ (1000003 * (i + 7)))
        x = (x + (1 << 63)) % (1 << 64) - (1 << 63)
    return x


def scatter_free_space() -> None:
    """Leave one-page holes above a GAP-byte reservation and no other free
    room above it, so that MCJIT's one-page sections land up there and its
    larger ones below, more than GAP bytes away."""
    libc = ctypes.CDLL(None)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    failed = ctypes.c_void_p(-1).value

    def reserve(size: int, prot: int = 0) -> int | None:
        address = libc.mmap(None, size, prot, _MAP_PRIVATE_ANONYMOUS_NORESERVE, -1, 0)
        return None if address in (None, failed) else address

    pages = [reserve(4096, _PROT_READ_WRITE) for _ in range(256)]
    gap = reserve(GAP)
    assert gap is not None and None not in pages
    filled: list[tuple[int, int]] = []
    for shift in range(46, 12, -1):  # every free gap of two pages or more, biggest first
        while (address := reserve(1 << shift)) is not None:
            filled.append((address, 1 << shift))
    below = max((f for f in filled if f[0] + f[1] <= gap and f[1] >= 1 << 24), key=lambda f: f[1])
    libc.munmap(below[0], below[1])  # the only room for more than a page, far below
    for page in pages[::2]:
        libc.munmap(page, 4096)  # the one-page holes


def main(mode: str) -> None:
    """JIT and run the module (or site) of `mode`; print what it computed."""
    text = module_text()
    jit.jit_module('define void @"warm"() {\n  ret void\n}\n')  # LLVM's own mappings first
    if mode == "site":  # long rows: two pages of code, a constant pool of -inf
        x = np.random.default_rng(0).standard_normal((1, 2, 5, 77)).astype(np.float32)
        site = site_for("max_pool", [x], [((1, 2, 3, 39), "float32")], kernel_shape=[3, 3], strides=[2, 2],
                        pads=[1, 1, 1, 1], ceil_mode=0)
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
        want = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max(axis=(-1, -2))
        scatter_free_space()
        out = np.zeros(want.shape, np.float32)
        CompiledSite(site)([x], [out])
        print("ok" if np.array_equal(out, want) else "wrong", flush=True)
        return
    engine: Any
    scatter_free_space()
    if mode == "small":
        machine = jit._target_machine("default")
        module = jit.optimized_module(text, machine)
        engine = jit._llvm().create_mcjit_compiler(module, machine)
        engine.finalize_object()
    else:
        engine, _ = jit.jit_module(text)
    entry = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)(engine.get_function_address("entry"))
    data = np.zeros(8, np.float32)
    result = entry(3, data.ctypes.data)
    right = result == expected_steps(3) and data.tolist() == ADDEND
    print("ok" if right else "wrong", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])

"""The module's own allocator (pyocc.lowering.host_allocator), JIT-compiled
alone and called through ctypes: blocks aligned as asked with malloc's
pointer just below them, and, on glibc, a freed pool's block given back to
the next allocation of its size (what aligned_alloc did not do for a
process's first runs, which page-faulted their pools in again)."""

from __future__ import annotations

import ctypes
import platform
from collections.abc import Callable
from typing import Any

import llvmlite.ir as ir
import pytest

from pyocc.lowering.host_allocator import (
    ALLOCATE,
    ALLOCATE_TYPE,
    HEADER,
    RELEASE,
    RELEASE_TYPE,
    define_host_allocator,
    host_allocator,
)
from pyocc.runtime.jit import _resolve_externals, jit_module


@pytest.fixture(scope="module")
def allocator() -> tuple[Any, Callable[[int, int], int], Callable[[int], None]]:
    module = ir.Module(name="allocator")
    ir.Function(module, ALLOCATE_TYPE, ALLOCATE)
    ir.Function(module, RELEASE_TYPE, RELEASE)
    define_host_allocator(module)
    # internal functions are not looked up by name: export them through two wrappers
    for name, signature in ((ALLOCATE, ALLOCATE_TYPE), (RELEASE, RELEASE_TYPE)):
        wrapper = ir.Function(module, signature, f"test_{name}")
        b = ir.IRBuilder(wrapper.append_basic_block())
        result = b.call(module.globals[name], wrapper.args)
        b.ret_void() if isinstance(signature.return_type, ir.VoidType) else b.ret(result)
    engine, _ = jit_module(str(module), bind=_resolve_externals)
    allocate = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        engine.get_function_address(f"test_{ALLOCATE}"))
    release = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.get_function_address(f"test_{RELEASE}"))
    return engine, allocate, release


def test_module_without_allocations_is_left_alone() -> None:
    module = ir.Module(name="empty")
    define_host_allocator(module)
    assert ALLOCATE not in module.globals and "malloc" not in module.globals


def test_defined_internal_on_malloc_and_free() -> None:
    module = ir.Module(name="one")
    ir.Function(module, ALLOCATE_TYPE, ALLOCATE)
    ir.Function(module, RELEASE_TYPE, RELEASE)
    define_host_allocator(module)
    text = str(module)
    assert f'define internal ptr @"{ALLOCATE}"' in text and f'define internal void @"{RELEASE}"' in text
    assert 'declare ptr @"malloc"(i64' in text and 'declare void @"free"(ptr' in text
    assert "aligned_alloc" not in text
    # asked again (a second function of the module), the same two functions, defined once
    assert host_allocator(module) == (module.globals[ALLOCATE], module.globals[RELEASE])
    assert str(module).count(f'define internal ptr @"{ALLOCATE}"') == 1


@pytest.mark.parametrize("alignment", [16, 64, 128, 4096])
@pytest.mark.parametrize("size", [1, 100, 1 << 20])
def test_blocks_are_aligned_with_mallocs_pointer_below(allocator: tuple, alignment: int, size: int) -> None:
    _, allocate, release = allocator
    block = allocate(alignment, size)
    assert block and block % alignment == 0
    raw = ctypes.c_void_p.from_address(block - HEADER).value
    # malloc's block holds the header and the aligned block whole
    assert raw is not None and HEADER <= block - raw <= HEADER + alignment - 1
    ctypes.memset(block, 0x5A, size)  # the whole block is ours to write
    release(block)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="block reuse is checked against glibc's malloc")
def test_a_freed_pool_is_the_next_runs(allocator: tuple) -> None:
    # twelve "runs" of a 4 MiB pool: from the third on, each gets the block the
    # last one freed (glibc's aligned_alloc gave a new one, with fresh pages,
    # to each of the first eight or so)
    _, allocate, release = allocator
    addresses = []
    for _ in range(12):
        block = allocate(64, 4 << 20)
        ctypes.memset(block, 1, 4 << 20)
        addresses.append(block)
        release(block)
    assert len(set(addresses[2:])) == 1, [hex(a) for a in addresses]

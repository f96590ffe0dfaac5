"""The allocator generated host code calls for its pools and buffers.

Every `dnn.pool_init` and `dnn.malloc` of a host function becomes one call

    void *pyocc_alloc(int64_t alignment, int64_t size);  // NULL when out of memory
    void  pyocc_free(void *block);                       // a block pyocc_alloc returned

defined in the module itself (internal, never inlined) on top of libc's
`malloc` and `free`: `pyocc_alloc` asks malloc for `size + alignment + 8`
bytes, returns the first multiple of `alignment` at least 8 bytes into
them, and keeps malloc's pointer in the 8 bytes just below it, which
`pyocc_free` hands back to `free`.

Why not `aligned_alloc`: glibc's carves the aligned block out of a larger
one and frees the small tail, which lands in the thread's cache of small
blocks (tcache, seven per size), whose blocks never merge with their
neighbours. The tail then sits between the freed pool and the top of the
heap, so the next run's pool cannot reuse the freed one and gets fresh
pages until that cache is full: each of a process's first eight or so
runs page-faulted its whole pool in again. Measured with glibc 2.36: 4
MiB aligned_alloc/free pairs got a new block 7 times in a row (21 times
with GLIBC_TUNABLES=glibc.malloc.tcache_count=20, once with 0); SqueezeNet
from C, two threads, faulted about 960 pages of 4 KiB in each of its
runs 4 to 10, about 2 ms more per run (docs/performance.md, stop 42). A block from
plain `malloc`, freed, merges back into the heap it came from, so from
the third run on a run's pool is the last run's, its pages already there.
"""

from __future__ import annotations

import llvmlite.ir as ir

from pyocc.lowering.llvm_math import declared_function

#: the allocation and release functions generated host code calls
ALLOCATE = "pyocc_alloc"
RELEASE = "pyocc_free"

I8 = ir.IntType(8)
I64 = ir.IntType(64)
PTR = ir.PointerType()
ALLOCATE_TYPE = ir.FunctionType(PTR, [I64, I64])
RELEASE_TYPE = ir.FunctionType(ir.VoidType(), [PTR])
#: bytes below the aligned block that hold malloc's pointer
HEADER = 8


def define_host_allocator(module: ir.Module) -> None:
    """Give ALLOCATE and RELEASE their bodies in `module` where it declares
    them (the host lowering does, in the llvm dialect); a module that
    declares neither is left as it is."""
    if ALLOCATE in module.globals or RELEASE in module.globals:
        host_allocator(module)


def host_allocator(module: ir.Module) -> tuple[ir.Function, ir.Function]:
    """The module's ALLOCATE and RELEASE, declared and defined where they
    are not yet (a function already defined is left as it is)."""
    malloc = declared_function(module, "malloc", ir.FunctionType(PTR, [I64]))
    free = declared_function(module, "free", RELEASE_TYPE)

    allocate = declared_function(module, ALLOCATE, ALLOCATE_TYPE)
    if allocate.is_declaration:
        alignment, size = allocate.args
        entry, fail, done = (allocate.append_basic_block(n) for n in ("entry", "fail", "done"))
        b = ir.IRBuilder(entry)
        raw = b.call(malloc, [b.add(b.add(size, alignment), I64(HEADER))])
        b.cbranch(b.icmp_unsigned("==", raw, ir.Constant(PTR, None)), fail, done)
        b.position_at_end(fail)
        b.ret(ir.Constant(PTR, None))
        b.position_at_end(done)
        # the first multiple of `alignment` at least HEADER bytes into the block
        start = b.add(b.ptrtoint(raw, I64), I64(HEADER))
        aligned = b.and_(b.sub(b.add(start, alignment), I64(1)), b.neg(alignment))
        block = b.gep(raw, [b.sub(aligned, b.ptrtoint(raw, I64))], source_etype=I8)
        b.store(raw, b.gep(block, [I64(-HEADER)], source_etype=I8))
        b.ret(block)
        allocate.linkage = "internal"
        allocate.attributes.add("noinline")

    release = declared_function(module, RELEASE, RELEASE_TYPE)
    if release.is_declaration:
        b = ir.IRBuilder(release.append_basic_block("entry"))
        block = release.args[0]
        b.call(free, [b.load(b.gep(block, [I64(-HEADER)], source_etype=I8), typ=PTR)])
        b.ret_void()
        release.linkage = "internal"
        release.attributes.add("noinline")
    return allocate, release

"""What one parallel-for of a model's worker pool costs, on an almost empty body.

Builds a small LLVM module around pyocc.lowering.native.threads'
pool (`define_thread_pool`, the code every model compiled with `threads=N`
gets), JIT-compiles it as models are (pyocc.runtime.jit), and times
`--calls` parallel-fors in a row from one native loop, no Python between
them. Each parallel-for adds 1 to `--count` floats (cut into chunks as the
kernels' loops are: CHUNKS_PER_THREAD per thread). Between two calls the
caller may run `--gap` iterations of serial work (an atomic increment
each, about 1-2 ns), as a model's serial kernels do between its parallel
loops. It prints, per thread count, the wall and CPU microseconds per call
(CPU: this process, all threads: what spinning workers burn).

    python bench/parallel_for.py                       # 1 and 2 threads
    python bench/parallel_for.py --count 65536 --gap 20000 --calls 2000

Run it from another checkout's root (PYTHONPATH=that root) to time that
checkout's pool with the same script.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import llvmlite.ir as ir
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.lowering.native import threads as pool  # noqa: E402
from pyocc.lowering.native.loops import BODY_TYPE, CHUNKS_PER_THREAD, I64, PTR  # noqa: E402
from pyocc.runtime import jit  # noqa: E402

NAME = "bench"
F32 = ir.FloatType()


def _counted(b: ir.IRBuilder, count: ir.Value, start: ir.Value,
             step: Callable[[ir.IRBuilder, ir.Value], object]) -> None:
    """for (i = start; i < count; ++i) step(b, i), leaving `b` after the loop."""
    entry = b.block
    head = b.append_basic_block("head")
    body = b.append_basic_block("body")
    after = b.append_basic_block("after")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(start, entry)
    b.cbranch(b.icmp_unsigned("<", i, count), body, after)
    b.position_at_end(body)
    step(b, i)
    i.add_incoming(b.add(i, I64(1)), b.block)
    b.branch(head)
    b.position_at_end(after)


def module_text(threads: int) -> str:
    """The benchmark module: NAME_init/destroy (the pool's start and stop),
    NAME_body (adds 1 to floats [begin, end) of buffers[0]) and
    NAME_loop(buffers, calls, count, gap)."""
    module = ir.Module(name=NAME)
    for kind in ("init", "destroy"):
        function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), f"{NAME}_{kind}")
        ir.IRBuilder(function.append_basic_block("entry")).ret_void()
    body = ir.Function(module, BODY_TYPE, f"{NAME}_body")
    body.linkage = "internal"
    body.attributes.add("noinline")
    b = ir.IRBuilder(body.append_basic_block("entry"))
    buffers, begin, end = body.args
    data = b.load(buffers, typ=PTR)

    def add_one(b: ir.IRBuilder, i: ir.Value) -> None:
        slot = b.gep(data, [i], source_etype=F32)
        b.store(b.fadd(b.load(slot, typ=F32), F32(1.0)), slot)

    _counted(b, end, begin, add_one)
    b.ret_void()
    counter = ir.GlobalVariable(module, I64, f"{NAME}_serial")
    counter.initializer = I64(0)
    loop = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64]), f"{NAME}_loop")
    b = ir.IRBuilder(loop.append_basic_block("entry"))
    buffers, calls, count, gap = loop.args
    pool.define_thread_pool(module, NAME, threads, uses_blas=False)
    parallel_for = module.get_global(pool.parallel_for_symbol(NAME))

    def one_call(b: ir.IRBuilder, _: ir.Value) -> None:
        b.call(parallel_for, [body, buffers, count, I64(CHUNKS_PER_THREAD)])
        _counted(b, gap, I64(0), lambda b, _: b.atomic_rmw("add", counter, I64(1), "monotonic"))

    _counted(b, calls, I64(0), one_call)
    b.ret_void()
    return str(module)


def main() -> None:
    """Time the pool at each thread count and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--count", type=int, default=1024, help="floats each parallel-for adds 1 to")
    parser.add_argument("--gap", type=int, default=0, help="serial iterations between two calls")
    parser.add_argument("--calls", type=int, default=20000, help="parallel-fors per timed batch")
    parser.add_argument("--batches", type=int, default=5, help="timed batches (the median is printed, and the fastest)")
    args = parser.parse_args()
    data = np.zeros(args.count, dtype=np.float32)
    buffers = (ctypes.c_void_p * 1)(data.ctypes.data)
    print(f"count {args.count}, gap {args.gap}, {args.calls} calls a batch, median of {args.batches} batches")
    print("| threads | wall us / call | fastest batch | CPU us / call |")
    print("|---:|---:|---:|---:|")
    for threads in args.threads:
        engine, _ = jit.jit_module(module_text(threads), jit._resolve_externals)
        address = {k: engine.get_function_address(f"{NAME}_{k}") for k in ("init", "destroy", "loop")}
        init = ctypes.CFUNCTYPE(None)(address["init"])
        destroy = ctypes.CFUNCTYPE(None)(address["destroy"])
        loop = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(
            address["loop"])
        init()
        data[:] = 0
        loop(ctypes.cast(buffers, ctypes.c_void_p), 100, args.count, args.gap)  # warm up
        wall, cpu = [], []
        for _ in range(args.batches):
            start, start_cpu = time.perf_counter(), time.process_time()
            loop(ctypes.cast(buffers, ctypes.c_void_p), args.calls, args.count, args.gap)
            wall.append((time.perf_counter() - start) / args.calls * 1e6)
            cpu.append((time.process_time() - start_cpu) / args.calls * 1e6)
        destroy()
        expected = 100 + args.batches * args.calls
        if not np.all(data == expected):  # every element was added to once per call
            raise SystemExit(f"wrong result on {threads} threads: {np.unique(data)} != {expected}")
        print(f"| {threads} | {statistics.median(wall):.2f} | {min(wall):.2f} | {statistics.median(cpu):.2f} |")
        del engine


if __name__ == "__main__":
    main()

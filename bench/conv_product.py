"""The convolutions' matrix product: a generated MLAS-style one against OpenBLAS's sgemm.

For the products (M out channels x N output positions x K channel taps) of
the light models' convolutions, this times C += W @ X by a generated
product (below: the weights read where they lie and broadcast, a chunk of
X packed per column tile, an MR x NV*16 tile of C in AVX-512 registers;
JIT-compiled for this CPU) and by OpenBLAS's single-threaded sgemm (beta 1,
what the native convolutions call), and checks both against a float64
product. The weights come from a
rotation of copies filling 48 MB, so that, as in a model's run, they are
not in cache when a product starts. The two take turns, and each reports
its best time per call over the rounds (steadier on a shared machine).

    python bench/conv_product.py
    python bench/conv_product.py --rounds 30

docs/performance.md ("A generated product without packed weights") has
what it measured, and why the native convolutions still call OpenBLAS.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import llvmlite.ir as ir  # noqa: E402
import numpy as np  # noqa: E402

from pyocc.runtime import blas, jit  # noqa: E402

F32 = ir.FloatType()
I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()

#: float32 lanes of one vector (an AVX-512 register)
LANES = 16
VECTOR = ir.VectorType(F32, LANES)
MASK = ir.VectorType(I1, LANES)
#: rows of W (output channels) per register tile
MR = 8
#: vectors of X (output positions) per register tile
NV = 3
#: rows of the tiles that take the rows an MR tile leaves (the last ones one at a time)
TAIL_ROWS = (4,)
#: steps of the depth per chunk: a column tile's panel of X (KC x NV * LANES floats, 48 KiB) stays in cache
KC = 256
#: the function's name in a module
GEMM_SYMBOL = "pyocc_gemm_acc"
GEMM_TYPE = ir.FunctionType(ir.VoidType(), [I64, I64, I64, PTR, I64, PTR, I64, PTR, I64])


def gemm_function(module: ir.Module) -> ir.Function:
    """The module's `pyocc_gemm_acc(m, n, k, w, ldw, x, ldx, c, ldc)`:
    C (m x n, row stride ldc) += W (m x k, ldw) @ X (k x n, ldx), all
    float32 row-major; emitted on first use."""
    existing = module.globals.get(GEMM_SYMBOL)
    if existing is not None:
        return existing
    function = ir.Function(module, GEMM_TYPE, GEMM_SYMBOL)
    function.linkage = "internal"
    for arg, name in zip(function.args, ["m", "n", "k", "w", "ldw", "x", "ldx", "c", "ldc"], strict=True):
        arg.name = name
    for index in (3, 5, 7):
        function.args[index].add_attribute("noalias")
    _Emitter(module, function).emit()
    return function


class _Emitter:
    """Writes the body of the product function."""

    def __init__(self, module: ir.Module, function: ir.Function):
        self.module = module
        self.function = function
        self.builder = ir.IRBuilder(function.append_basic_block("entry"))
        self.fma = module.globals.get("llvm.fma.v16f32") or ir.Function(
            module, ir.FunctionType(VECTOR, [VECTOR, VECTOR, VECTOR]), "llvm.fma.v16f32")
        masked_load_type = ir.FunctionType(VECTOR, [PTR, I32, MASK, VECTOR])
        masked_store_type = ir.FunctionType(ir.VoidType(), [VECTOR, PTR, I32, MASK])
        self.masked_load = module.globals.get("llvm.masked.load.v16f32.p0") or ir.Function(
            module, masked_load_type, "llvm.masked.load.v16f32.p0")
        self.masked_store = module.globals.get("llvm.masked.store.v16f32.p0") or ir.Function(
            module, masked_store_type, "llvm.masked.store.v16f32.p0")

    # -- small helpers -------------------------------------------------------------

    def loop(self, start: ir.Value, stop: ir.Value, step: int, body: callable) -> None:  # type: ignore[valid-type]
        """for (i = start; i < stop; i += step) body(i)."""
        b = self.builder
        preheader = b.block
        header = b.append_basic_block("loop")
        inner = b.append_basic_block("body")
        after = b.append_basic_block("after")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64)
        i.add_incoming(start, preheader)
        b.cbranch(b.icmp_signed("<", i, stop), inner, after)
        b.position_at_end(inner)
        body(i)
        i.add_incoming(b.add(i, I64(step)), b.block)
        b.branch(header)
        b.position_at_end(after)

    def element(self, base: ir.Value, index: ir.Value) -> ir.Value:
        return self.builder.gep(base, [index], inbounds=True, source_etype=F32)

    def splat(self, value: ir.Value) -> ir.Value:
        b = self.builder
        one = b.insert_element(ir.Constant(VECTOR, ir.Undefined), value, I32(0))
        return b.shuffle_vector(one, ir.Constant(VECTOR, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, LANES), [0] * LANES))

    def load_vector(self, pointer: ir.Value, mask: ir.Value | None) -> ir.Value:
        if mask is None:
            return self.builder.load(pointer, typ=VECTOR, align=4)
        return self.builder.call(self.masked_load, [pointer, I32(4), mask, ir.Constant(VECTOR, [0.0] * LANES)])

    def store_vector(self, value: ir.Value, pointer: ir.Value, mask: ir.Value | None) -> None:
        if mask is None:
            self.builder.store(value, pointer, align=4)
        else:
            self.builder.call(self.masked_store, [value, pointer, I32(4), mask])

    def smin(self, a: ir.Value, z: ir.Value) -> ir.Value:
        return self.builder.select(self.builder.icmp_signed("<", a, z), a, z)

    # -- the product -----------------------------------------------------------------

    def emit(self) -> None:
        """Chunks of the depth; in each, column tiles of NV vectors (then one
        vector, then a masked one); in each, row tiles of MR rows (then one
        row at a time)."""
        b = self.builder
        m, n, k, w, ldw, x, ldx, c, ldc = self.function.args
        # the chunk of X a column tile reads, packed: its rows one after the other
        space = b.alloca(ir.ArrayType(F32, KC * NV * LANES))
        space.align = 64
        panel = b.inttoptr(b.ptrtoint(space, I64), PTR)  # an opaque pointer, as the arguments are
        n_wide = b.sub(n, b.srem(n, I64(NV * LANES)))  # columns the wide tiles cover
        n_full = b.sub(n, b.srem(n, I64(LANES)))  # ... and the one-vector tiles
        rest = b.sub(n, n_full)
        lanes = ir.Constant(ir.VectorType(I64, LANES), list(range(LANES)))
        rest_lanes = b.insert_element(ir.Constant(ir.VectorType(I64, LANES), ir.Undefined), rest, I32(0))
        rest_lanes = b.shuffle_vector(rest_lanes, ir.Constant(ir.VectorType(I64, LANES), ir.Undefined),
                                      ir.Constant(ir.VectorType(I32, LANES), [0] * LANES))
        tail_mask = b.icmp_unsigned("<", lanes, rest_lanes)

        row_tiles = [(MR, b.sub(m, b.srem(m, I64(MR))))]
        for size in TAIL_ROWS:
            row_tiles.append((size, b.sub(m, b.srem(m, I64(size)))))

        def chunk(k0: ir.Value) -> None:
            depth = self.smin(b.sub(k, k0), I64(KC))
            w_chunk = self.element(w, k0)
            x_chunk = self.element(x, b.mul(k0, ldx))

            def columns(j0: ir.Value, vectors: int, mask: ir.Value | None) -> None:
                width = vectors * LANES
                source = self.element(x_chunk, j0)

                def pack(step: ir.Value) -> None:
                    row = self.element(source, b.mul(step, ldx))
                    for v in range(vectors):
                        value = self.load_vector(self.element(row, I64(v * LANES)),
                                                 mask if v == vectors - 1 else None)
                        self.store_vector(value, self.element(panel, b.add(b.mul(step, I64(width)),
                                                                           I64(v * LANES))), None)

                self.loop(I64(0), depth, 1, pack)

                def rows(i0: ir.Value, count: int) -> None:
                    self.tile(count, vectors, mask, depth, self.element(w_chunk, b.mul(i0, ldw)), ldw,
                              panel, I64(width), self.element(c, b.add(b.mul(i0, ldc), j0)), ldc)

                done: ir.Value = I64(0)
                for size, end in row_tiles:
                    self.loop(done, end, size, lambda i0, size=size: rows(i0, size))
                    done = end
                self.loop(done, m, 1, lambda i0: rows(i0, 1))

            self.loop(I64(0), n_wide, NV * LANES, lambda j0: columns(j0, NV, None))
            self.loop(n_wide, n_full, LANES, lambda j0: columns(j0, 1, None))
            with b.if_then(b.icmp_signed(">", rest, I64(0))):
                columns(n_full, 1, tail_mask)

        self.loop(I64(0), k, KC, chunk)
        b.ret_void()

    def tile(self, rows: int, vectors: int, mask: ir.Value | None, depth: ir.Value, w: ir.Value, ldw: ir.Value,
             x: ir.Value, ldx: ir.Value, c: ir.Value, ldc: ir.Value) -> None:
        """C[:rows, :vectors * LANES] += W[:rows, :depth] @ X[:depth, ...]
        with the tile in registers (`mask`: the last vector's valid lanes)."""
        b = self.builder
        c_rows = [self.element(c, b.mul(I64(r), ldc)) if r else c for r in range(rows)]
        w_rows = [self.element(w, b.mul(I64(r), ldw)) if r else w for r in range(rows)]

        def at(row: ir.Value, v: int) -> ir.Value:
            return self.element(row, I64(v * LANES)) if v else row

        def mask_of(v: int) -> ir.Value | None:
            return mask if v == vectors - 1 else None

        start: list[ir.Value] = [self.load_vector(at(c_rows[r], v), mask_of(v))
                                 for r in range(rows) for v in range(vectors)]
        preheader = b.block
        header = b.append_basic_block("tile")
        body = b.append_basic_block("tile_body")
        after = b.append_basic_block("tile_after")
        b.branch(header)
        b.position_at_end(header)
        step = b.phi(I64)
        step.add_incoming(I64(0), preheader)
        accumulators = [b.phi(VECTOR) for _ in start]
        for phi, value in zip(accumulators, start, strict=True):
            phi.add_incoming(value, preheader)
        b.cbranch(b.icmp_signed("<", step, depth), body, after)
        b.position_at_end(body)
        x_row = self.element(x, b.mul(step, ldx))
        xs = [self.load_vector(at(x_row, v), None) for v in range(vectors)]
        updated: list[ir.Value] = []
        for r in range(rows):
            weight = self.splat(b.load(self.element(w_rows[r], step), typ=F32))
            for v in range(vectors):
                updated.append(b.call(self.fma, [weight, xs[v], accumulators[r * vectors + v]]))
        for phi, value in zip(accumulators, updated, strict=True):
            phi.add_incoming(value, body)
        step.add_incoming(b.add(step, I64(1)), body)
        b.branch(header)
        b.position_at_end(after)
        for r in range(rows):
            for v in range(vectors):
                self.store_vector(accumulators[r * vectors + v], at(c_rows[r], v), mask_of(v))



#: (M, N, K) of convolution products of Inception v2, ResNet-50 and a tiny odd one
SHAPES = [(320, 49, 1728), (352, 49, 1024), (224, 49, 2016), (192, 196, 1152), (256, 196, 1728),
          (128, 196, 576), (96, 196, 576), (192, 560, 288), (64, 784, 192), (128, 784, 320), (96, 784, 576),
          (64, 1344, 147), (37, 101, 33)]
#: bytes of weight copies the products rotate through
COLD_BYTES = 48_000_000


def _generated() -> tuple[object, ctypes._CFuncPtr]:
    """The generated product, JIT-compiled: (engine, callable)."""
    llvm = jit._llvm()
    module = ir.Module("conv_product")
    module.triple = llvm.get_process_triple()
    gemm_function(module).linkage = "external"
    machine = jit._target_machine(jit.JIT_CODE_MODEL)
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    jit.optimize(parsed, machine)
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    function = ctypes.CFUNCTYPE(None, i64, i64, i64, ptr, i64, ptr, i64, ptr, i64)(
        engine.get_function_address(GEMM_SYMBOL))
    return engine, function


def best_of_turns(calls: list[Callable[[], object]], rounds: int, repeats: int) -> list[float]:
    """Each call's best time per call, in seconds, over `rounds` rounds in
    which the calls take turns, `repeats` calls each (steadier than a
    median on a shared machine)."""
    best = [float("inf")] * len(calls)
    for _ in range(rounds):
        for side, call in enumerate(calls):
            start = time.perf_counter()
            for _ in range(repeats):
                call()
            best[side] = min(best[side], (time.perf_counter() - start) / repeats)
    return best


def main() -> None:
    """Time every shape and print one line each, then the total."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="turns each side takes (best reported)")
    args = parser.parse_args()
    engine, generated = _generated()
    sgemm = blas.load().scipy_cblas_sgemm
    sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                           ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
    rng = np.random.default_rng(0)
    totals = [0.0, 0.0]
    print(f"tile {MR} x {NV * LANES}, depth chunk {KC}; "
          "ms per call (GMAC/s), best of the rounds")
    print(f"{'M x N x K':>16}  {'generated':>18}  {'OpenBLAS':>18}  ratio  max err gen / blas")
    for m, n, k in SHAPES:
        copies = max(1, COLD_BYTES // (m * k * 4))
        weights = [rng.standard_normal((m, k), dtype=np.float32) for _ in range(copies)]
        x = rng.standard_normal((k, n), dtype=np.float32)
        c0 = rng.standard_normal((m, n), dtype=np.float32)
        want = c0.astype(np.float64) + weights[0].astype(np.float64) @ x.astype(np.float64)
        got = [c0.copy(), c0.copy()]
        generated(m, n, k, weights[0].ctypes.data, k, x.ctypes.data, n, got[0].ctypes.data, n)
        sgemm(101, 111, 111, m, n, k, 1.0, weights[0].ctypes.data, k, x.ctypes.data, n, 1.0, got[1].ctypes.data, n)
        errors = [float(np.abs(g - want).max()) for g in got]
        c = c0.copy()
        turn = [0]

        def next_weights() -> int:
            turn[0] = (turn[0] + 1) % copies
            return weights[turn[0]].ctypes.data

        calls = [lambda: generated(m, n, k, next_weights(), k, x.ctypes.data, n, c.ctypes.data, n),
                 lambda: sgemm(101, 111, 111, m, n, k, 1.0, next_weights(), k, x.ctypes.data, n, 1.0,
                               c.ctypes.data, n)]
        best = best_of_turns(calls, args.rounds, max(2, int(3e7 / (m * n * k))))
        totals = [t + b for t, b in zip(totals, best, strict=True)]
        cells = [f"{b * 1e3:8.3f} ({m * n * k / b / 1e9:5.1f})" for b in best]
        print(f"{f'{m} x {n} x {k}':>16}  {cells[0]:>18}  {cells[1]:>18}  {best[0] / best[1]:5.2f}  "
              f"{errors[0]:.1e} / {errors[1]:.1e}")
    print(f"all shapes: generated / OpenBLAS = {totals[0] / totals[1]:.2f}")
    del engine


if __name__ == "__main__":
    main()

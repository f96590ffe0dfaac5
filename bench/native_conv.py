"""BLAS or generated micro-kernels for the host's native convolutions?

For ResNet-50's convolutions (and MobileNet-like depthwise ones), on one
thread, prints GFLOP/s (2 * MACs / CPU seconds, median of --repeat runs) of

- gemm only, the convolution's matrix product (M = out channels, N =
  output positions, K = in channels * taps) by OpenBLAS's sgemm
  (scipy-openblas32, 1 thread) and by a generated register-tiled sgemm
  (6 x 32 tiles of AVX-512 fma, the micro-kernel below, no packing);
- the whole native conv (pyocc.lowering.native.conv: im2col blocks of
  IM2COL_BLOCK_BYTES + OpenBLAS, or direct loops for depthwise), also with
  whole-image im2col blocks (`full`), and the numpy kernel it replaces
  (pyocc.runtime.kernels.conv, numpy's own OpenBLAS pinned to 1 thread).

    python bench/native_conv.py [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[variable] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import llvmlite.ir as ir  # noqa: E402
import numpy as np  # noqa: E402

import pyocc.dialects.dnn.scratch as scratch  # noqa: E402
from pyocc.lowering.native.conv import emit_conv  # noqa: E402
from pyocc.lowering.native.dense_ir import F32, Kernel  # noqa: E402
from pyocc.runtime import host_kernels as hk  # noqa: E402
from pyocc.testing.native_kernels import CompiledSite, site_for  # noqa: E402

#: (name, x shape, w shape, strides, pads, group)
SHAPES = [
    ("conv1 7x7/2 3->64 @224", [1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3], 1),
    ("1x1 64->256 @56", [1, 64, 56, 56], [256, 64, 1, 1], None, None, 1),
    ("3x3 64->64 @56", [1, 64, 56, 56], [64, 64, 3, 3], None, [1, 1, 1, 1], 1),
    ("3x3 128->128 @28", [1, 128, 28, 28], [128, 128, 3, 3], None, [1, 1, 1, 1], 1),
    ("3x3 256->256 @14", [1, 256, 14, 14], [256, 256, 3, 3], None, [1, 1, 1, 1], 1),
    ("3x3 512->512 @7", [1, 512, 7, 7], [512, 512, 3, 3], None, [1, 1, 1, 1], 1),
    ("1x1/2 512->1024 @28", [1, 512, 28, 28], [1024, 512, 1, 1], [2, 2], None, 1),
    ("dw 3x3 32 @112", [1, 32, 112, 112], [32, 1, 3, 3], None, [1, 1, 1, 1], 32),
    ("dw 3x3/2 144 @56", [1, 144, 56, 56], [144, 1, 3, 3], [2, 2], [1, 1, 1, 1], 144),
]

VECTOR = 16  # float32 lanes of an AVX-512 register
ROWS, COLUMNS = 6, 2 * VECTOR  # the register tile: 6 x 32 floats in 12 accumulators


def emit_tiled_sgemm(module: ir.Module, symbol: str, m: int, n: int, k: int) -> None:
    """C (m x n) = A (m x k) @ B (k x n), row-major, buffers [A, B, C]: a
    6 x 32 register tile per step of k (broadcast A, two vector loads of B,
    12 fmas), scalar loops (which LLVM vectorises) for the edges."""
    kernel = Kernel(module, symbol)
    a, b_, c = kernel.buffer(0), kernel.buffer(1), kernel.buffer(2)
    bld = kernel.builder
    vector = ir.VectorType(F32, VECTOR)
    fma = module.globals.get("llvm.fma.v16f32") or ir.Function(
        module, ir.FunctionType(vector, [vector, vector, vector]), "llvm.fma.v16f32")
    full_rows, full_columns = m - m % ROWS, n - n % COLUMNS
    accumulators = [[kernel.variable(vector) for _ in range(2)] for _ in range(ROWS)]
    zero = ir.Constant(vector, [0.0] * VECTOR)

    def splat(value: ir.Value) -> ir.Value:
        one = bld.insert_element(ir.Constant(vector, ir.Undefined), value, ir.IntType(32)(0))
        return bld.shuffle_vector(one, ir.Constant(vector, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), VECTOR), [0] * VECTOR))

    with kernel.loop(0, full_columns, COLUMNS) as j:
        with kernel.loop(0, full_rows, ROWS) as i:
            for row in accumulators:
                for slot in row:
                    bld.store(zero, slot)
            with kernel.loop(0, k) as p:
                b_row = kernel.element(b_, kernel.add(kernel.mul(p, n), j))
                b0 = bld.load(b_row, typ=vector, align=4)
                b1 = bld.load(kernel.element(b_row, VECTOR), typ=vector, align=4)
                for r in range(ROWS):
                    weight = splat(kernel.load(a, kernel.add(kernel.mul(kernel.add(i, r), k), p)))
                    for slot, operand in zip(accumulators[r], (b0, b1), strict=True):
                        bld.store(bld.call(fma, [weight, operand, bld.load(slot, typ=vector)]), slot)
            for r in range(ROWS):
                target = kernel.element(c, kernel.add(kernel.mul(kernel.add(i, r), n), j))
                bld.store(bld.load(accumulators[r][0], typ=vector), target, align=4)
                bld.store(bld.load(accumulators[r][1], typ=vector), kernel.element(target, VECTOR), align=4)
    total = kernel.scalar(0.0)

    def scalar_block(rows: tuple[int, int], columns: tuple[int, int]) -> None:
        with kernel.loop(*rows) as i:
            with kernel.loop(*columns) as j:
                bld.store(F32(0.0), total)
                with kernel.loop(0, k) as p:
                    product = bld.fmul(kernel.load(a, kernel.add(kernel.mul(i, k), p)),
                                       kernel.load(b_, kernel.add(kernel.mul(p, n), j)))
                    bld.store(bld.fadd(bld.load(total, typ=F32), product), total)
                kernel.store(bld.load(total, typ=F32), c, kernel.add(kernel.mul(i, n), j))

    scalar_block((full_rows, m), (0, n))
    scalar_block((0, full_rows), (full_columns, n))
    kernel.finish()


def cpu_median(run: Callable[[], None], repeat: int) -> float:
    run()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return statistics.median(times)


def gemm_site(m: int, n: int, k: int) -> dict:
    return {"site": 0, "op": "bench", "kernel": "gemm", "inputs": [], "outputs": [], "kwargs": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| conv | M x N x K | sgemm OpenBLAS | sgemm generated | native conv | native conv, full im2col | numpy conv |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, x_shape, w_shape, strides, pads, group in SHAPES:
        x = rng.standard_normal(x_shape, dtype=np.float32)
        w = rng.standard_normal(w_shape, dtype=np.float32)
        kwargs = {key: value for key, value in (("strides", strides), ("pads", pads), ("group", group)) if value}
        out_shape = [1, w_shape[0]] + [
            (x_shape[2 + i] + (pads or [0] * 4)[i] + (pads or [0] * 4)[2 + i] - w_shape[2 + i]) // (strides or [1, 1])[i] + 1
            for i in range(2)]
        m, n, k = w_shape[0], out_shape[2] * out_shape[3], w_shape[1] * w_shape[2] * w_shape[3]
        flops = 2.0 * m * n * k
        out = np.empty(out_shape, np.float32)
        cells = []
        if group == 1:
            a, b, c = w.reshape(m, k), rng.standard_normal((k, n), dtype=np.float32), np.empty((m, n), np.float32)
            blas = CompiledSite(gemm_site(m, n, k), lambda mod, sym, site: _blas_gemm(mod, sym, m, n, k))
            generated = CompiledSite(gemm_site(m, n, k), lambda mod, sym, site: emit_tiled_sgemm(mod, sym, m, n, k))
            cells.append(flops / cpu_median(lambda: blas([a, b], [c]), args.repeat) / 1e9)
            reference = c.copy()
            cells.append(flops / cpu_median(lambda: generated([a, b], [c]), args.repeat) / 1e9)
            assert np.allclose(c, reference, rtol=1e-3, atol=1e-2), "the generated sgemm is wrong"
        else:
            cells += [float("nan"), float("nan")]
        for block in (scratch.IM2COL_BLOCK_BYTES, 1 << 40):
            saved, scratch.IM2COL_BLOCK_BYTES = scratch.IM2COL_BLOCK_BYTES, block
            size = scratch.conv_scratch_bytes(x_shape, w_shape, out_shape, strides, pads, group, 4)
            site = site_for("conv", [x, w, None, None], [(out.shape, "float32")], workspace_bytes=size or None, **kwargs)
            native = CompiledSite(site, emit_conv)
            workspace = np.empty(max(size // 4, 1), np.float32)
            cells.append(flops / cpu_median(lambda: native([x, w, None, None], [out], workspace), args.repeat) / 1e9)
            scratch.IM2COL_BLOCK_BYTES = saved
        want = np.empty(out_shape, np.float32)
        cells.append(flops / cpu_median(lambda: hk.conv(x, w, out=want, **kwargs), args.repeat) / 1e9)
        assert np.allclose(out, want, rtol=1e-3, atol=1e-2), "the native conv is wrong"
        print(f"| {name} | {m} x {n} x {k} | " + " | ".join("-" if c != c else f"{c:.1f}" for c in cells) + " |",
              flush=True)


def _blas_gemm(module: ir.Module, symbol: str, m: int, n: int, k: int) -> None:
    kernel = Kernel(module, symbol)
    kernel.sgemm(m, n, k, kernel.buffer(0), k, kernel.buffer(1), n, kernel.buffer(2), n)
    kernel.finish()


if __name__ == "__main__":
    main()

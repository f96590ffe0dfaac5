"""A direct 3x3 convolution vectorised along output channels, against pyocc's native conv and onnxruntime.

bench/layer_times.py finds most of the light models' one-thread gap to
onnxruntime in 3x3 stride-1 convolutions: pyocc runs them as im2col +
OpenBLAS sgemm (30-39 GMAC/s here), onnxruntime as direct NCHWc kernels
(40-46). This measures a direct convolution's kernel on its own, written
here as LLVM IR: the experiment that chose the tile of pyocc's direct
kernel (`_direct_tiles` in pyocc/lowering/native/conv.py, which reads the
padding from a band of rows in the planned scratch instead of the padded
copy below):

- a register tile holds `--vectors` x 8 output channels (AVX2 vectors)
  by `--positions` consecutive positions of one output row;
- the weights are packed once, outside the timed call, as
  [channel blocks][input channels][3][3][block channels], so a tap's
  weights for the tile are `--vectors` contiguous vector loads, and
  the input is read where it lies (NCHW): each position's value is
  broadcast from memory;
- the taps (input channel, ky, kx) run as one loop over a table of input
  offsets, so no broadcast is shared between taps (sharing them made LLVM
  spill the tile);
- `--channel-block` input channels at a time (the packed weights of a
  block stay in L1), the tile read back from the output between blocks;
- the input is first copied into a zero-padded image (timed), so no tap
  needs a bounds check; the tile is written to (and read from) the NCHW
  output one float at a time (a transpose, cheap next to the taps).

Each shape runs as one Conv + bias (zero) on one thread: the direct
kernel (padding copy and call, from Python), pyocc's compiled model
(`pyocc.compile`, its run from Python) and onnxruntime (one intra-op
thread), taking turns, best of the rounds. Errors are against
onnxruntime. Shapes whose output channels are not a multiple of the tile's
are left out.

    python bench/direct_conv.py
    python bench/direct_conv.py --positions 6 --vectors 2 --channel-block 32
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from collections.abc import Callable
from pathlib import Path

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[variable] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import llvmlite.ir as ir  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.helper as oh  # noqa: E402
import onnxruntime as ort  # noqa: E402

import pyocc  # noqa: E402
from conv_product import best_of_turns  # noqa: E402  (bench/, the script's own folder)
from pyocc.runtime import jit  # noqa: E402

F32 = ir.FloatType()
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
#: float32 lanes of an AVX2 vector
LANES = 8
VECTOR = ir.VectorType(F32, LANES)

#: (input channels, output rows = columns, output channels) of 3x3 stride-1 convolutions of the
#: light models: Inception v2, ResNet-50, DenseNet-121, SqueezeNet 1.1 and VGG-19
SHAPES = [(96, 14, 128), (128, 14, 192), (160, 14, 192), (192, 14, 224), (128, 7, 192), (192, 7, 320),
          (64, 28, 96), (96, 28, 96), (64, 56, 192),  # Inception v2
          (64, 56, 64), (128, 28, 128), (256, 14, 256), (512, 7, 512),  # ResNet-50
          (128, 56, 32), (128, 28, 32), (128, 14, 32), (128, 7, 32),  # DenseNet-121
          (16, 55, 64), (32, 27, 128), (48, 13, 192), (64, 13, 256),  # SqueezeNet 1.1
          (128, 112, 128), (256, 56, 256), (512, 28, 512)]  # VGG-19


class DirectConv:
    """The kernel for one shape: `conv(padded input, packed weights, output)`,
    JIT-compiled (the engine is kept alive with the object)."""

    def __init__(self, channels: int, size: int, outs: int, positions: int, vectors: int, channel_block: int):
        self.channels, self.size, self.outs = channels, size, outs
        self.positions, self.vectors = positions, vectors
        self.block = channel_block or channels
        self.module = ir.Module("direct_conv")
        self.module.triple = jit._llvm().get_process_triple()
        self.fma = ir.Function(self.module, ir.FunctionType(VECTOR, [VECTOR] * 3), f"llvm.fma.v{LANES}f32")
        function = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR]), "conv")
        for argument in function.args:
            argument.add_attribute("noalias")
        self.x, self.w, self.out = function.args
        self.b = ir.IRBuilder(function.append_basic_block("entry"))
        padded = size + 2
        offsets = [c * padded * padded + ky * padded + kx
                   for c in range(channels) for ky in range(3) for kx in range(3)]
        table_type = ir.ArrayType(I32, len(offsets))
        self.table = ir.GlobalVariable(self.module, table_type, "tap_offsets")
        self.table.global_constant = True
        self.table.initializer = ir.Constant(table_type, offsets)
        self._emit()
        llvm = jit._llvm()
        machine = jit._target_machine(jit.JIT_CODE_MODEL)
        parsed = llvm.parse_assembly(str(self.module))
        parsed.verify()
        jit.optimize(parsed, machine)
        self.engine = llvm.create_mcjit_compiler(parsed, machine)
        self.engine.finalize_object()
        self.call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
            self.engine.get_function_address("conv"))

    def pack(self, w: np.ndarray) -> np.ndarray:
        """The weights [outs, channels, 3, 3] as [blocks, channels, 3, 3, block]."""
        width = LANES * self.vectors
        blocked = w.reshape(self.outs // width, width, self.channels, 3, 3)
        return np.ascontiguousarray(blocked.transpose(0, 2, 3, 4, 1))

    # -- emission ------------------------------------------------------------------

    def _loop(self, start: ir.Value | int, stop: ir.Value | int, step: int, body: Callable[[ir.Value], None]) -> None:
        """for (i = start; i < stop; i += step) body(i)."""
        b = self.b
        preheader = b.block
        header, inner, after = (b.append_basic_block(name) for name in ("loop", "body", "after"))
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64)
        i.add_incoming(I64(start) if isinstance(start, int) else start, preheader)
        b.cbranch(b.icmp_signed("<", i, I64(stop) if isinstance(stop, int) else stop), inner, after)
        b.position_at_end(inner)
        body(i)
        i.add_incoming(b.add(i, I64(step)), b.block)
        b.branch(header)
        b.position_at_end(after)

    def _at(self, base: ir.Value, index: ir.Value | int) -> ir.Value:
        return self.b.gep(base, [I64(index) if isinstance(index, int) else index], inbounds=True, source_etype=F32)

    def _splat(self, value: ir.Value) -> ir.Value:
        b = self.b
        one = b.insert_element(ir.Constant(VECTOR, ir.Undefined), value, I32(0))
        zeros = ir.Constant(ir.VectorType(I32, LANES), [0] * LANES)
        return b.shuffle_vector(one, ir.Constant(VECTOR, ir.Undefined), zeros)

    def _out_element(self, block: ir.Value, lane: int, row: ir.Value, column: ir.Value) -> ir.Value:
        b, area = self.b, self.size * self.size
        channel = b.add(b.mul(block, I64(LANES * self.vectors)), I64(lane))
        return self._at(self.out, b.add(b.mul(channel, I64(area)), b.add(b.mul(row, I64(self.size)), column)))

    def _tile(self, block: ir.Value, row: ir.Value, column: ir.Value, positions: int, first_tap: int, end_tap: int
              ) -> None:
        """The tile's taps first_tap..end_tap added to the output (or to zero, from the first tap)."""
        b, vectors = self.b, self.vectors
        start: list[ir.Value] = []
        for j in range(positions):
            for v in range(vectors):
                if first_tap == 0:
                    start.append(ir.Constant(VECTOR, [0.0] * LANES))
                    continue
                value: ir.Value = ir.Constant(VECTOR, ir.Undefined)
                for lane in range(LANES):
                    element = self._out_element(block, v * LANES + lane, row, b.add(column, I64(j)))
                    value = b.insert_element(value, b.load(element, typ=F32), I32(lane))
                start.append(value)
        preheader = b.block
        header, inner, after = (b.append_basic_block(name) for name in ("taps", "tap", "stored"))
        b.branch(header)
        b.position_at_end(header)
        tap = b.phi(I64)
        tap.add_incoming(I64(first_tap), preheader)
        accumulators = [b.phi(VECTOR) for _ in start]
        for phi, value in zip(accumulators, start, strict=True):
            phi.add_incoming(value, preheader)
        b.cbranch(b.icmp_signed("<", tap, I64(end_tap)), inner, after)
        b.position_at_end(inner)
        weights = self._at(self.w, b.mul(b.add(b.mul(block, I64(self.channels * 9)), tap), I64(LANES * vectors)))
        offset = b.sext(b.load(b.gep(self.table, [I64(0), tap], inbounds=True), typ=I32), I64)
        source = self._at(self.x, b.add(offset, b.add(b.mul(row, I64(self.size + 2)), column)))
        w = [b.load(self._at(weights, v * LANES), typ=VECTOR, align=4) for v in range(vectors)]
        updated = list(accumulators)
        for j in range(positions):
            x = self._splat(b.load(self._at(source, j), typ=F32))
            for v in range(vectors):
                updated[j * vectors + v] = b.call(self.fma, [w[v], x, updated[j * vectors + v]])
        for phi, value in zip(accumulators, updated, strict=True):
            phi.add_incoming(value, b.block)
        tap.add_incoming(b.add(tap, I64(1)), b.block)
        b.branch(header)
        b.position_at_end(after)
        for j in range(positions):
            for v in range(vectors):
                for lane in range(LANES):
                    b.store(b.extract_element(accumulators[j * vectors + v], I32(lane)),
                            self._out_element(block, v * LANES + lane, row, b.add(column, I64(j))))

    def _emit(self) -> None:
        """For each block of output channels, channel block and output row: the row's tiles."""
        size, positions = self.size, self.positions
        whole = size - size % positions

        def per_block(block: ir.Value) -> None:
            for first in range(0, self.channels, self.block):
                taps = (first * 9, min(self.channels, first + self.block) * 9)

                def per_row(row: ir.Value, taps: tuple[int, int] = taps) -> None:
                    if whole:
                        self._loop(0, whole, positions, lambda column: self._tile(block, row, column, positions, *taps))
                    if size % positions:
                        self._tile(block, row, I64(whole), size % positions, *taps)

                self._loop(0, size, 1, per_row)

        self._loop(0, self.outs // (LANES * self.vectors), 1, per_block)
        self.b.ret_void()


def one_conv(w: np.ndarray, size: int) -> onnx.ModelProto:
    """A model of one 3x3 stride-1 pad-1 Conv with weights `w` and a zero bias."""
    outs, channels = w.shape[:2]
    graph = oh.make_graph(
        [oh.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], "conv",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, channels, size, size])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, outs, size, size])],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(np.zeros(outs, np.float32), "b")])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def main() -> None:
    """Time every shape, one line each, then the totals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=4, help="output positions of a register tile")
    parser.add_argument("--vectors", type=int, default=3, help="vectors of 8 output channels of a register tile")
    parser.add_argument("--channel-block", type=int, default=32, help="input channels per pass (0: all)")
    parser.add_argument("--rounds", type=int, default=7, help="turns each side takes (best reported)")
    args = parser.parse_args()
    if args.positions * args.vectors > 13:
        parser.error("a tile of more than 13 vectors does not fit AVX2's 16 registers with its operands")
    rng = np.random.default_rng(0)
    totals = [0.0, 0.0, 0.0]
    print(f"tile {args.vectors * LANES} channels x {args.positions} positions, channel block {args.channel_block}; "
          f"one thread, ms per call (GMAC/s), best of {args.rounds} rounds taking turns")
    print("| C -> M @ size | direct | pyocc | onnxruntime | direct / pyocc | direct / ort | pyocc / ort | max error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for channels, size, outs in SHAPES:
        if outs % (LANES * args.vectors):
            continue
        x = rng.standard_normal((1, channels, size, size), dtype=np.float32)
        w = rng.standard_normal((outs, channels, 3, 3), dtype=np.float32)
        kernel = DirectConv(channels, size, outs, args.positions, args.vectors, args.channel_block)
        packed = kernel.pack(w)
        padded = np.zeros((channels, size + 2, size + 2), np.float32)
        out = np.empty((outs, size, size), np.float32)

        def direct() -> None:
            padded[:, 1:-1, 1:-1] = x[0]
            kernel.call(padded.ctypes.data, packed.ctypes.data, out.ctypes.data)

        model = one_conv(w, size)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 3
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        compiled = pyocc.compile(model)
        want = session.run(None, {"x": x})[0]
        direct()
        error = float(np.abs(out - want[0]).max())
        calls = [direct, lambda: compiled.run({"x": x}), lambda: session.run(None, {"x": x})]
        macs = outs * channels * 9 * size * size
        best = best_of_turns(calls, args.rounds, max(2, int(2e8 / macs)))
        totals = [total + seconds for total, seconds in zip(totals, best, strict=True)]
        cells = " | ".join(f"{seconds * 1e3:.3f} ({macs / seconds / 1e9:.1f})" for seconds in best)
        print(f"| {channels} -> {outs} @ {size} | {cells} | {best[0] / best[1]:.2f} | {best[0] / best[2]:.2f} | "
              f"{best[1] / best[2]:.2f} | {error:.1e} |")
    print(f"all shapes: direct / pyocc {totals[0] / totals[1]:.2f}, direct / onnxruntime {totals[0] / totals[2]:.2f}, "
          f"pyocc / onnxruntime {totals[1] / totals[2]:.2f}")


if __name__ == "__main__":
    main()

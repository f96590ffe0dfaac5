"""convert-dnn-to-llvm + the JIT: hand-written buffer-form IR in each memory
mode (lazy, pool, eager), run natively and compared with host kernels called
directly; the native allocation counters against what the IR implies; and
the pass's errors for what it cannot lower."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

import pyocc
from pyocc.errors import PyoccError
from pyocc.examples.tiny_cnn import build
from pyocc.lowering.convert_dnn_to_llvm import ConvertDnnToLlvmPass, compile_module
from pyocc.registry import PYOCC_DIALECTS
from pyocc.runtime import host_kernels as hk
from pyocc.runtime import jit
from pyocc.runtime.loader import load_shared_library

RNG_SEED = 20240601


def _context() -> Context:
    ctx = Context()
    for name, factory in {**get_all_dialects(), **PYOCC_DIALECTS}.items():
        ctx.register_dialect(name, factory)
    return ctx


_parses = 0


def parse_with_weights(ir: str, weights: dict[str, np.ndarray]) -> ModuleOp:
    """Parse `ir`, giving each `dense_resource<KEY>` the bytes of weights[KEY]
    through a dialect_resources section (MLIR's blob encoding: a 4-byte
    alignment, then the little-endian data)."""
    # The blob store is global and a parsed reference to a key it already
    # holds is renamed, while the section's blob is not: use fresh keys.
    global _parses
    _parses += 1
    weights = {f"{key}_{_parses}": a for key, a in weights.items()}
    for key in weights:
        ir = ir.replace(f"dense_resource<{key.rsplit('_', 1)[0]}>", f"dense_resource<{key}>")
    blobs = ",\n".join(
        f'      {key}: "0x{((16).to_bytes(4, "little") + np.ascontiguousarray(a).tobytes()).hex().upper()}"'
        for key, a in weights.items()
    )
    text = ir + (f"{{-#\n  dialect_resources: {{\n    builtin: {{\n{blobs}\n    }}\n  }}\n#-}}\n" if weights else "")
    return Parser(_context(), text).parse_module()


def parse(ir: str) -> ModuleOp:
    return Parser(_context(), ir).parse_module()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(RNG_SEED)


def conv_relu_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty((1, 4, 8, 8), np.float32)
    hk.conv(x, w, b, out=out, pads=[1, 1, 1, 1])
    return np.maximum(out, 0)


HEADER = """func.func @main_graph(%x: memref<1x3x8x8xf32> {onnx.name = "x"}, %y: memref<1x4x8x8xf32> {onnx.name = "y", dnn.output}) {
  %w = "dnn.weight"() <{value = dense_resource<conv_w> : tensor<4x3x3x3xf32>}> : () -> memref<4x3x3x3xf32>
  %b = "dnn.weight"() <{value = dense_resource<conv_b> : tensor<4xf32>}> : () -> memref<4xf32>
"""
CONV = """  "dnn.conv"(%x, %w, %b, {t}) <{{operandSegmentSizes = array<i32: 1, 1, 1, 0, 1, 0>, pads = array<i64: 1, 1, 1, 1>}}> : (memref<1x3x8x8xf32>, memref<4x3x3x3xf32>, memref<4xf32>, memref<1x4x8x8xf32>) -> ()
"""
UNARY = """  "dnn.unary"({src}, {dst}) <{{operandSegmentSizes = array<i32: 1, 1>, fn = "{fn}"}}> : (memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) -> ()
"""

LAZY = (HEADER
        + "  %t = dnn.malloc {size = 1024 : i64, alignment = 64 : i64} : memref<1x4x8x8xf32>\n"
        + CONV.format(t="%t")
        + UNARY.format(src="%t", dst="%y", fn="relu")
        + "  dnn.dealloc %t {size = 1024 : i64} : memref<1x4x8x8xf32>\n  func.return\n}\n")

POOL = (HEADER
        + "  %p = dnn.pool_init {size = 2048 : i64} : memref<2048xi8>\n"
        + "  %t1 = dnn.mem_offset %p {offset = 0 : i64, size = 1024 : i64} : memref<2048xi8> -> memref<1x4x8x8xf32>\n"
        + "  %t2 = dnn.mem_offset %p {offset = 1024 : i64, size = 1024 : i64} : memref<2048xi8> -> memref<1x4x8x8xf32>\n"
        + CONV.format(t="%t1")
        + UNARY.format(src="%t1", dst="%t2", fn="relu")
        + UNARY.format(src="%t2", dst="%y", fn="sigmoid")
        + "  dnn.pool_release %p : memref<2048xi8>\n  func.return\n}\n")

EAGER = (HEADER
         + "  %t1 = dnn.malloc {size = 1024 : i64, alignment = 64 : i64} : memref<1x4x8x8xf32>\n"
         + "  %t2 = dnn.malloc {size = 1024 : i64, alignment = 128 : i64} : memref<1x4x8x8xf32>\n"
         + CONV.format(t="%t1")
         + UNARY.format(src="%t1", dst="%t2", fn="relu")
         + UNARY.format(src="%t2", dst="%y", fn="sigmoid")
         + "  dnn.dealloc %t1 {size = 1024 : i64} : memref<1x4x8x8xf32>\n"
         + "  dnn.dealloc %t2 {size = 1024 : i64} : memref<1x4x8x8xf32>\n  func.return\n}\n")


def conv_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"conv_w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
            "conv_b": rng.standard_normal(4).astype(np.float32)}


def test_lazy_conv_relu(rng: np.random.Generator) -> None:
    weights = conv_weights(rng)
    model = compile_module(parse_with_weights(LAZY, weights))
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    y = model.run({"x": x})["y"]
    np.testing.assert_allclose(y, conv_relu_reference(x, weights["conv_w"], weights["conv_b"]), rtol=1e-6, atol=1e-6)
    stats = model.alloc_stats()
    assert (stats.allocations, stats.frees, stats.peak_bytes, stats.live_bytes) == (1, 1, 1024, 0)
    assert model.expected_alloc_stats() == {"allocations": 1, "peak_bytes": 1024}
    # a second run reuses the compiled code and counts afresh
    x2 = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(model.run({"x": x2})["y"],
                               conv_relu_reference(x2, weights["conv_w"], weights["conv_b"]), rtol=1e-6, atol=1e-6)
    assert model.alloc_stats().allocations == 1


def sigmoid(v: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-v.astype(np.float64)))).astype(np.float32)


def test_pool_two_buffers_one_allocation(rng: np.random.Generator) -> None:
    weights = conv_weights(rng)
    model = compile_module(parse_with_weights(POOL, weights))
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    y = model.run({"x": x})["y"]
    expected = sigmoid(conv_relu_reference(x, weights["conv_w"], weights["conv_b"]))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    stats = model.alloc_stats()
    assert (stats.allocations, stats.frees, stats.peak_bytes, stats.live_bytes) == (1, 1, 2048, 0)


def test_eager_allocates_everything_at_entry(rng: np.random.Generator) -> None:
    weights = conv_weights(rng)
    model = compile_module(parse_with_weights(EAGER, weights))
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    y = model.run({"x": x})["y"]
    expected = sigmoid(conv_relu_reference(x, weights["conv_w"], weights["conv_b"]))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    stats = model.alloc_stats()
    assert (stats.allocations, stats.frees, stats.peak_bytes, stats.live_bytes) == (2, 2, 2048, 0)


VIEW_CONCAT = """func.func @main_graph(%x: memref<1x3x8x8xf32> {onnx.name = "x"}, %y: memref<1x7x64xf32> {onnx.name = "y", dnn.output}) {
  %w = "dnn.weight"() <{value = dense_resource<conv_w> : tensor<4x3x3x3xf32>}> : () -> memref<4x3x3x3xf32>
  %b = "dnn.weight"() <{splat = dense<0.25> : tensor<1xf32>}> : () -> memref<4xf32>
  %t = dnn.malloc {size = 1024 : i64, alignment = 64 : i64} : memref<1x4x8x8xf32>
  "dnn.conv"(%x, %w, %b, %t) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 1, 0>, pads = array<i64: 1, 1, 1, 1>}> : (memref<1x3x8x8xf32>, memref<4x3x3x3xf32>, memref<4xf32>, memref<1x4x8x8xf32>) -> ()
  %xv = "dnn.view"(%x) : (memref<1x3x8x8xf32>) -> memref<1x3x64xf32>
  %tv = "dnn.view"(%t) : (memref<1x4x8x8xf32>) -> memref<1x4x64xf32>
  "dnn.concat"(%xv, %tv, %y) <{operandSegmentSizes = array<i32: 2, 1>, axis = 1 : i64}> : (memref<1x3x64xf32>, memref<1x4x64xf32>, memref<1x7x64xf32>) -> ()
  dnn.dealloc %t {size = 1024 : i64} : memref<1x4x8x8xf32>
  func.return
}
"""


def test_view_and_concat(rng: np.random.Generator) -> None:
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    model = compile_module(parse_with_weights(VIEW_CONCAT, {"conv_w": w}))
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    y = model.run({"x": x})["y"]
    conv = np.empty((1, 4, 8, 8), np.float32)
    hk.conv(x, w, np.full(4, 0.25, np.float32), out=conv, pads=[1, 1, 1, 1])
    expected = np.concatenate([x.reshape(1, 3, 64), conv.reshape(1, 4, 64)], axis=1)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    assert model.alloc_stats().peak_bytes == 1024


DTYPES = """func.func @main_graph(%a: memref<2x5xf32> {onnx.name = "a"}, %n: memref<2x5xi64> {onnx.name = "n", dnn.output}, %m: memref<2x5xi1> {onnx.name = "m", dnn.output}) {
  %k = "dnn.weight"() <{value = dense<[1.0, -2.0, 0.5, 3.0, -0.25]> : tensor<5xf32>}> : () -> memref<5xf32>
  %s = dnn.malloc {size = 40 : i64} : memref<2x5xf32>
  "dnn.binary"(%a, %k, %s) <{operandSegmentSizes = array<i32: 1, 1, 1>, fn = "mul"}> : (memref<2x5xf32>, memref<5xf32>, memref<2x5xf32>) -> ()
  "dnn.cast"(%s, %n) <{operandSegmentSizes = array<i32: 1, 1>}> : (memref<2x5xf32>, memref<2x5xi64>) -> ()
  "dnn.binary"(%s, %k, %m) <{operandSegmentSizes = array<i32: 1, 1, 1>, fn = "greater"}> : (memref<2x5xf32>, memref<5xf32>, memref<2x5xi1>) -> ()
  dnn.dealloc %s {size = 40 : i64} : memref<2x5xf32>
  func.return
}
"""


def test_inline_weights_and_integer_and_bool_outputs(rng: np.random.Generator) -> None:
    model = compile_module(parse(DTYPES))
    a = (rng.standard_normal((2, 5)) * 4).astype(np.float32)
    out = model.run({"a": a})
    k = np.array([1.0, -2.0, 0.5, 3.0, -0.25], np.float32)
    s = a * k
    assert out["n"].dtype == np.int64 and out["m"].dtype == np.bool_
    np.testing.assert_array_equal(out["n"], np.trunc(s).astype(np.int64))
    np.testing.assert_array_equal(out["m"], s > k)


def test_run_checks_inputs(rng: np.random.Generator) -> None:
    model = compile_module(parse_with_weights(LAZY, conv_weights(rng)))
    good = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    with pytest.raises(PyoccError, match="missing \\['x'\\]"):
        model.run({"z": good})
    with pytest.raises(PyoccError, match="input 'x' has shape \\[1, 3, 8, 9\\]"):
        model.run({"x": np.zeros((1, 3, 8, 9), np.float32)})
    with pytest.raises(PyoccError, match="input 'x' has dtype float64"):
        model.run({"x": good.astype(np.float64)})


# -- what the pass refuses, each error naming the op -------------------------


def _lower(ir: str, **options: str) -> None:
    ConvertDnnToLlvmPass(**options).apply(_context(), parse(ir))


def test_unknown_target() -> None:
    with pytest.raises(PassFailedException, match="unknown target 'tpu'"):
        _lower(DTYPES, target="tpu")


def test_tensor_form_op_is_refused() -> None:
    ir = """func.func @f(%a: memref<4xf32> {onnx.name = "a"}, %b: memref<4xf32> {dnn.output}) {
  %t = "dnn.weight"() <{splat = dense<1.0> : tensor<1xf32>}> : () -> tensor<4xf32>
  func.return
}
"""
    with pytest.raises(PassFailedException, match="cannot lower dnn.weight: expected a memref"):
        _lower(ir)
    ir = """func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = "dnn.unary"(%a) <{operandSegmentSizes = array<i32: 1, 0>, fn = "relu"}> : (tensor<4xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
"""
    with pytest.raises(PassFailedException, match="convert-dnn-to-llvm needs buffer-form dnn .* but @f is in "
                                                  "tensor-form dnn; run dnn-insert-memory-ops first"):
        _lower(ir)


def test_unknown_op_is_named() -> None:
    ir = """func.func @f(%a: memref<4xf32> {onnx.name = "a"}, %b: memref<4xf32> {dnn.output}) {
  %c = arith.constant 1 : i64
  func.return
}
"""
    with pytest.raises(PassFailedException, match="cannot lower arith.constant: no host lowering"):
        _lower(ir)


def test_dynamic_shape_is_refused() -> None:
    ir = """func.func @f(%a: memref<?x4xf32> {onnx.name = "a"}, %b: memref<4xf32> {dnn.output}) {
  func.return
}
"""
    with pytest.raises(PassFailedException, match="dynamic shape"):
        _lower(ir)


def test_kernels_are_compiled_once_per_process(tmp_path: Path) -> None:
    """A compile of the tiny CNN in eager mode after one in lazy mode reuses
    every native kernel the lazy one compiled (no new engine: the two plan
    the same kernel scratch; pool mode fits its scratch into the pool's
    slack, so its convolutions are other kernels), computes the numbers of
    the pool-mode model, and writes a shared library from the reused
    kernels that runs like the JIT."""
    model = build()
    rng = np.random.default_rng(RNG_SEED)
    inputs = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
              for i in model.graph.input}
    want = pyocc.compile(model, memory="pool").run(inputs)
    lazy = pyocc.compile(model, memory="lazy")
    compiled_before = dict(jit._kernels)
    eager = pyocc.compile(model, memory="eager")
    assert eager.native.kernels, "the tiny CNN has native kernels"
    assert jit._kernels.keys() == compiled_before.keys(), "the eager compile compiled a kernel again"
    assert all(entry is compiled_before[key] for key, entry in jit._kernels.items())
    eager.save(tmp_path / "tiny.so")
    for got in (lazy.run(inputs), eager.run(inputs), load_shared_library(tmp_path / "tiny.so").run(inputs)):
        for a, b in zip(got.values(), want.values(), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_a_model_on_threads_shares_no_kernel(tmp_path: Path) -> None:
    """Kernels compiled for several threads call their own model's
    parallel-for, so a model on two threads is compiled whole, from no
    cached kernel, even after the same model on one thread filled the
    cache; it computes the one-thread numbers (to the last bits), and so does its shared
    library. A one-thread compile afterwards still finds its kernels."""
    model = build()
    rng = np.random.default_rng(RNG_SEED)
    inputs = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
              for i in model.graph.input}
    one = pyocc.compile(model, memory="pool")
    assert one.native.kernels, "the tiny CNN has native kernels"
    cached = dict(jit._kernels)
    two = pyocc.compile(model, memory="pool", threads=2)
    assert two.native.kernels == {}, "a model on threads took its kernels from the cache"
    assert jit._kernels.keys() == cached.keys(), "a model on threads put its kernels into the cache"
    assert all(f'define internal void @"{symbol}"' in two.native.llvm_ir for symbol in one.native.kernels)
    assert "_parallel_for" in two.native.llvm_ir
    want = one.run(inputs)
    two.save(tmp_path / "two.so")
    for got in (two.run(inputs), load_shared_library(tmp_path / "two.so").run(inputs)):
        for a, b in zip(got.values(), want.values(), strict=True):
            # to the last bits only: on a host without AVX-512 one thread runs a shallow pointwise
            # convolution as register tiles, threads as a split sgemm (another summation order)
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    again = pyocc.compile(model, memory="pool")
    assert again.native.kernels.keys() == one.native.kernels.keys()
    assert jit._kernels.keys() == cached.keys(), "the one-thread compile compiled a kernel again"


#: f(p, n): p[i] *= 2 for i < n, its counter a stack variable (as
#: pyocc.runtime.ir_writer.IRWriter writes variables)
DOUBLE_LOOP = """
define void @"f"(ptr %p, i64 %n) {
entry:
  %i = alloca i64
  store i64 0, ptr %i
  br label %test
test:
  %k = load i64, ptr %i
  %more = icmp ult i64 %k, %n
  br i1 %more, label %body, label %done
body:
  %a = getelementptr float, ptr %p, i64 %k
  %v = load float, ptr %a
  %d = fmul float %v, 2.0
  store float %d, ptr %a
  %j = add i64 %k, 1
  store i64 %j, ptr %i
  br label %test
done:
  ret void
}
"""


@pytest.mark.parametrize("level", [jit.SPEED_LEVEL, jit.SIMPLIFY_SPEED_LEVEL, jit.CALLS_ONLY_SPEED_LEVEL])
def test_each_speed_level_runs_its_own_pipeline(level: int) -> None:
    """SIMPLIFY_SPEED_LEVEL (the planner's functions) puts stack variables
    in registers and vectorises nothing; SPEED_LEVEL (the kernels)
    vectorises the loop; CALLS_ONLY_SPEED_LEVEL leaves the module as it is.
    The code each compiles doubles the array."""
    module = str(jit.optimized_module(DOUBLE_LOOP, jit._target_machine(jit.JIT_CODE_MODEL, level), speed_level=level))
    assert ("alloca" in module) == (level == jit.CALLS_ONLY_SPEED_LEVEL)
    assert ("x float>" in module) == (level == jit.SPEED_LEVEL)
    engine, _ = jit.jit_module(DOUBLE_LOOP, speed_level=level)
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(engine.get_function_address("f"))
    x = np.arange(37, dtype=np.float32)
    f(x.ctypes.data, x.size)
    np.testing.assert_array_equal(x, 2 * np.arange(37, dtype=np.float32))


def test_code_is_generated_without_loop_strength_reduction_and_llvm_is_left_as_found(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """pyocc's code generator skips LLVM's loop strength reduction
    (jit.LOOP_STRENGTH_REDUCTION), a switch LLVM keeps for the whole
    process: the object of a loop generated in a `code_generator` block
    differs from LLVM's own, which a plain llvmlite compile (another user of
    llvmlite, numba) still gets before, between and after pyocc's (once
    the last of nested blocks closes); and the object the JIT generates
    (read back from the object cache) is the block's."""
    from pyocc.runtime import object_cache

    def emit() -> bytes:
        machine = jit._target_machine(jit.JIT_CODE_MODEL)
        return machine.emit_object(jit.optimized_module(DOUBLE_LOOP, machine))

    llvm_default = emit()
    with jit.code_generator():
        reduced_not = emit()
        with jit.code_generator():
            assert emit() == reduced_not
        assert emit() == reduced_not  # the inner block closing leaves the outer one's switch
    assert reduced_not != llvm_default
    assert emit() == llvm_default
    monkeypatch.setenv(object_cache.CACHE_DIR_VARIABLE, str(tmp_path))
    jit.jit_module(DOUBLE_LOOP)
    stored = [path.read_bytes() for path in tmp_path.glob(f"*{object_cache.SUFFIX}")]
    assert stored == [reduced_not]
    assert emit() == llvm_default

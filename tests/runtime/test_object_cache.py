"""The on-disk object cache of JIT compiles (PYOCC_CACHE_DIR,
pyocc.runtime.object_cache): a second compile of a module loads the
object the first one stored, byte for byte what a compile produces, and
runs the same; a changed optimisation level or text misses; the external
symbols of a cached object are checked as a compile checks them; the
directory keeps to its size limit; an unusable directory is one line."""

from __future__ import annotations

import ctypes
import os
import time
from collections import Counter, OrderedDict
from pathlib import Path

import numpy as np
import pytest

import pyocc
from pyocc.errors import PyoccError
from pyocc.examples.tiny_cnn import build
from pyocc.runtime import jit, object_cache
from pyocc.runtime.loader import load_shared_library
from tests.tools.inprocess import run_tool
from tests.tools.test_bad_input import relu

#: f(p, n): p[i] = expf(p[i]) for i < n; a loop O3 vectorises
EXP_LOOP = """
define void @"f"(ptr %p, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%j, %loop]
  %a = getelementptr float, ptr %p, i64 %i
  %v = load float, ptr %a
  %e = call float @expf(float %v)
  %s = fmul float %e, SCALE
  store float %s, ptr %a
  %j = add i64 %i, 1
  %c = icmp ult i64 %j, %n
  br i1 %c, label %loop, label %done
done:
  ret void
}
declare float @expf(float)
"""


def exp_loop(scale: str = "1.0") -> str:
    """EXP_LOOP multiplying by `scale` (a float literal)."""
    return EXP_LOOP.replace("SCALE", scale)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory for this test (not the session's), and
    fresh hit/miss counts."""
    directory = tmp_path / "cache"
    monkeypatch.setenv(object_cache.CACHE_DIR_VARIABLE, str(directory))
    monkeypatch.setattr(object_cache, "stats", Counter())
    return directory


def run_exp(engine: object) -> np.ndarray:
    """What the compiled f makes of 0, 1/16, ..., 15/16."""
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(engine.get_function_address("f"))
    x = np.arange(16, dtype=np.float32) / 16
    f(x.ctypes.data, x.size)
    return x


def test_a_second_compile_loads_the_object_the_first_stored(cache: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    first, _ = jit.jit_module(exp_loop(), jit._resolve_externals)
    assert object_cache.stats == Counter(misses=1, stores=1)
    [entry] = cache.iterdir()
    second, module = jit.jit_module(exp_loop(), jit._resolve_externals)
    assert object_cache.stats["hits"] == 1 and object_cache.stats["stores"] == 1
    want = np.exp(np.arange(16, dtype=np.float32) / 16)
    np.testing.assert_allclose(run_exp(first), want, rtol=1e-6)
    np.testing.assert_array_equal(run_exp(second), run_exp(first))
    # the module a hit returns is the optimised one (for code written to disk; a compile's own is also
    # changed by the code generator's IR passes, which run on it in place)
    machine = jit._target_machine(jit.JIT_CODE_MODEL)
    assert str(module) == str(jit.optimized_module(exp_loop(), machine, jit._resolve_externals))
    # the stored object is what a compile produces: one into another empty directory stores the same bytes
    monkeypatch.setenv(object_cache.CACHE_DIR_VARIABLE, str(tmp_path / "other"))
    jit.jit_module(exp_loop(), jit._resolve_externals)
    assert (tmp_path / "other" / entry.name).read_bytes() == entry.read_bytes()


def test_a_changed_speed_level_or_text_misses(cache: Path) -> None:
    jit.jit_module(exp_loop(), jit._resolve_externals)
    unoptimised, _ = jit.jit_module(exp_loop(), jit._resolve_externals, speed_level=0)
    doubled, _ = jit.jit_module(exp_loop("2.0"), jit._resolve_externals)
    assert object_cache.stats == Counter(misses=3, stores=3)
    assert len(list(cache.iterdir())) == 3
    x = np.exp(np.arange(16, dtype=np.float32) / 16)
    np.testing.assert_allclose(run_exp(unoptimised), x, rtol=1e-6)
    np.testing.assert_allclose(run_exp(doubled), 2 * x, rtol=1e-6)


def test_an_undefined_symbol_is_refused_on_a_hit(cache: Path) -> None:
    """A module calling puts, compiled once with a binding that allows it
    (stored), is refused by the host runtime's check when compiled again:
    the check reads the module, not the cached object's origin."""
    text = ('declare i32 @puts(ptr)\n@s = private constant [3 x i8] c"hi\\00"\n'
            'define void @"f"() {\n  %r = call i32 @puts(ptr @s)\n  ret void\n}\n')
    puts = ctypes.cast(ctypes.CDLL(None).puts, ctypes.c_void_p).value
    jit.jit_module(text, lambda module: jit._llvm().add_symbol("puts", puts))
    assert object_cache.stats["stores"] == 1
    with pytest.raises(PyoccError, match="generated code calls 'puts', which the host runtime does not provide"):
        jit.jit_module(text, jit._resolve_externals)
    assert object_cache.stats["hits"] == 1


def test_a_model_compiled_again_loads_its_code(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny CNN compiled twice, each time with an empty in-process
    kernel cache: the second compile loads every object the first stored
    (its kernels and its run function), computes the same numbers, and
    writes a shared library (from modules optimised on demand) that does."""
    model = build()
    rng = np.random.default_rng(7)
    inputs = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
              for i in model.graph.input}
    monkeypatch.setattr(jit, "_kernels", OrderedDict())
    want = pyocc.compile(model, memory="pool").run(inputs)
    stored = object_cache.stats["stores"]
    assert stored >= 2 and object_cache.stats["hits"] == 0
    monkeypatch.setattr(jit, "_kernels", OrderedDict())
    again = pyocc.compile(model, memory="pool")
    assert object_cache.stats["hits"] == stored and object_cache.stats["stores"] == stored
    again.save(tmp_path / "tiny.so")
    for got in (again.run(inputs), load_shared_library(tmp_path / "tiny.so").run(inputs)):
        for a, b in zip(got.values(), want.values(), strict=True):
            np.testing.assert_array_equal(a, b)


def test_the_directory_keeps_to_its_limit(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the limit, the least recently used entries go (a hit counts as
    a use) until the entries take three quarters of it."""
    monkeypatch.setattr(object_cache, "CACHE_SIZE_LIMIT", 4000)
    monkeypatch.setattr(object_cache, "_sizes", {})
    cache.mkdir()
    for n in range(4):
        object_cache.store(cache, f"k{n}", bytes(1000))
        os.utime(cache / f"k{n}.o", (time.time() - 100 + n,) * 2)
    assert len(list(cache.iterdir())) == 4, "at the limit, nothing goes"
    assert object_cache.load(cache, "k0") == bytes(1000)
    object_cache.store(cache, "k4", bytes(1000))
    assert sorted(p.name for p in cache.iterdir()) == ["k0.o", "k3.o", "k4.o"]


def test_an_unusable_cache_directory_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model.onnx"
    relu(model)
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv(object_cache.CACHE_DIR_VARIABLE, str(tmp_path / "file" / "cache"))
    done = run_tool("pyocc", "run", str(model), "--save-outputs", str(tmp_path / "out.npz"))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"PYOCC_CACHE_DIR={tmp_path / 'file' / 'cache'} cannot be used as pyocc's compile cache" in lines[0]
    assert not (tmp_path / "out.npz").exists()


def test_the_session_has_a_cache_of_its_own() -> None:
    """tests/conftest.py points every worker at one fresh directory, never the user's."""
    directory = Path(os.environ[object_cache.CACHE_DIR_VARIABLE])
    assert directory.is_dir() and directory.name.startswith("pyocc-test-cache-")

"""JIT and AOT for models lowered by `convert-dnn-to-llvm{target=host}`.

`CompiledModel(llvm_ir, meta, weight_pool)` compiles the LLVM IR in-process
with llvmlite's MCJIT and runs it through the C ABI (pyocc.runtime.bridge).
The only external symbols generated code may use are a few libc functions
and the libm functions native kernels call (`expf`, `tanhf`, `erf`, ...),
plus OpenBLAS's sgemm for the native matrix products (pyocc.runtime.blas,
one thread; a model compiled for more splits them between its threads) and, in a model compiled
for several threads, the pthread functions of its worker pool
(PTHREAD_SYMBOLS); they are resolved explicitly (`llvm.add_symbol`), and any
other undefined symbol is an error, not a silent lookup in the process.

Every module is optimised by LLVM's pipeline at O3 for the host CPU (its
name and features), so the native kernels' loops are vectorised.

The same compiled module is written to disk as LLVM IR (`write_llvm_ir`), an
object file (`write_object`) or a shared library plus its weights file
(`write_shared_library`), which pyocc.runtime.loader runs in any process.

The compiler side (`pyocc.lowering.convert_dnn_to_llvm.compile_module`)
builds a CompiledModel from an xDSL module; this module never imports xDSL.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pyocc.errors import PyoccError
from pyocc.runtime import blas
from pyocc.runtime.bridge import NativeModel

#: the libc functions generated code may call
LIBC_SYMBOLS = ("aligned_alloc", "free", "memcpy")
#: the libm functions generated code may call: declared ones (erf), and those
#: LLVM's math intrinsics become (llvm.exp.f32 -> expf, ...)
LIBM_SYMBOLS = ("erf", "expf", "logf", "tanhf", "powf", "exp2f", "log2f", "fmodf", "tanh", "exp", "log", "pow",
                "fmod")
#: the pthread functions the worker pool of a model compiled for several
#: threads calls (pyocc.lowering.native.threads; libc's since glibc 2.34)
PTHREAD_SYMBOLS = ("pthread_create", "pthread_join", "pthread_mutex_init", "pthread_mutex_destroy",
                   "pthread_mutex_lock", "pthread_mutex_unlock", "pthread_cond_init", "pthread_cond_destroy",
                   "pthread_cond_wait", "pthread_cond_broadcast", "pthread_cond_signal")
#: LLVM's optimisation level for generated code
SPEED_LEVEL = 3

_initialised = False


def _llvm() -> Any:
    """llvmlite.binding, initialised once for the native target."""
    global _initialised
    import llvmlite.binding as llvm  # loads LLVM itself; the AOT loader imports this module and needs none

    if not _initialised:
        # llvmlite 0.50: initialize() raises; the native target is enough
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _initialised = True
    return llvm


def _libc() -> ctypes.CDLL:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else ctypes.CDLL(None)


def _libm() -> ctypes.CDLL:
    name = ctypes.util.find_library("m")
    return ctypes.CDLL(name) if name else ctypes.CDLL(None)


def _target_machine(codemodel: str = "default") -> Any:
    """The host's target machine. PIC so that the same object links into a
    shared library; the host's CPU so that the vectoriser uses its vector
    width. The in-process JIT asks for the large code model, since MCJIT may
    place its sections, and libc's functions it calls, more than 2 GiB apart
    in a process with a big address space (torch loaded): the small model's
    32-bit relocations then fail an LLVM assertion that kills the process."""
    llvm = _llvm()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
                                        opt=SPEED_LEVEL, reloc="pic", codemodel=codemodel)


def optimize(module: Any, machine: Any) -> None:
    """Run LLVM's default module pipeline at SPEED_LEVEL on `module` for
    `machine`, loop and SLP vectorisation on."""
    llvm = _llvm()
    options = llvm.create_pipeline_tuning_options(speed_level=SPEED_LEVEL)
    options.loop_vectorization = True
    options.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(module, builder)


def jit_module(llvm_ir: str, machine: Any, bind: Callable[[Any], None] | None = None) -> tuple[Any, Any]:
    """Parse and verify `llvm_ir` for `machine`, optimise it (`optimize`), let
    `bind` resolve its external symbols (llvm.add_symbol), and JIT it:
    (engine, module)."""
    llvm = _llvm()
    module = llvm.parse_assembly(llvm_ir)
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    module.verify()
    optimize(module, machine)
    if bind is not None:
        bind(module)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    return engine, module


def weights_path_for(library: str | os.PathLike[str]) -> Path:
    """Where a shared library's weight pool lives: beside it, `.weights`."""
    return Path(library).with_suffix(".weights")


class CompiledModel(NativeModel):
    """A model JIT-compiled in this process. `llvm_ir` is the module text,
    `meta` the function's JSON table, `weight_pool` its packed constants."""

    def __init__(self, llvm_ir: str, meta: dict[str, Any], weight_pool: np.ndarray):
        self.llvm_ir = llvm_ir
        self._machine = _target_machine()
        engine, self._module = jit_module(llvm_ir, _target_machine("large"), _resolve_externals)
        name = meta["name"]
        functions = {kind: engine.get_function_address(f"{name}_{kind}") for kind in ("init", "run", "destroy")}
        super().__init__(meta, weight_pool, functions, keepalive=engine)

    def write_llvm_ir(self, path: str | os.PathLike[str]) -> None:
        """The module as generated, before LLVM optimises it, as LLVM IR
        text (`.ll`) for this machine's triple and data layout."""
        module = _llvm().parse_assembly(self.llvm_ir)
        module.triple = self._machine.triple
        module.data_layout = str(self._machine.target_data)
        Path(path).write_text(str(module))

    def write_object(self, path: str | os.PathLike[str]) -> None:
        """The module as a native, position-independent object file (`.o`)."""
        Path(path).write_bytes(self._machine.emit_object(self._module))

    def write_weights(self, path: str | os.PathLike[str]) -> None:
        """The packed weight pool, the raw bytes the `weights` argument points to."""
        Path(path).write_bytes(self.weight_pool.tobytes())

    def write_shared_library(self, path: str | os.PathLike[str]) -> Path:
        """Link the object into a shared library at `path` with the system C
        compiler (`$CC`, else `cc`), and write its weight pool beside it
        (`weights_path_for(path)`). Returns the weights file's path."""
        compiler = shutil.which(os.environ.get("CC", "cc"))
        if compiler is None:
            raise PyoccError("no C compiler found (set CC or install cc) to link the shared library; "
                             "write_object() writes a .o without one")
        path = Path(path)
        with tempfile.TemporaryDirectory() as tmp:
            obj = Path(tmp) / f"{self.name}.o"
            self.write_object(obj)
            # a model whose native kernels call the BLAS links OpenBLAS, found through an rpath
            uses_blas = any(f.is_declaration and f.name in blas.BLAS_SYMBOLS for f in self._module.functions)
            # a model compiled for several threads runs a pthread pool
            uses_threads = any(f.is_declaration and f.name in PTHREAD_SYMBOLS for f in self._module.functions)
            result = subprocess.run([compiler, "-shared", "-o", str(path), str(obj), "-lm",
                                     *(["-lpthread"] if uses_threads else []),
                                     *(blas.link_flags() if uses_blas else [])],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                detail = " ".join(result.stderr.split())  # one line, whatever the linker printed
                raise PyoccError(f"linking {path} failed: {detail}")
        weights = weights_path_for(path)
        self.write_weights(weights)
        return weights


def _resolve_externals(module: Any) -> None:
    """Bind each declared external function to libc's or libm's, by address,
    and the libm functions LLVM's intrinsics lower to; refuse any symbol
    that is neither an LLVM intrinsic nor an allowed libc / libm one."""
    llvm = _llvm()
    # the process itself: pthreads before glibc 2.34 live in libpthread, which Python loads
    libraries = {"libc": _libc(), "libm": _libm(), "process": ctypes.CDLL(None)}

    def bind(name: str, library: str) -> None:
        try:
            address = ctypes.cast(getattr(libraries[library], name), ctypes.c_void_p).value
        except AttributeError:
            raise PyoccError(f"{library} has no '{name}' (needed by generated code)") from None
        llvm.add_symbol(name, address)

    for name in LIBM_SYMBOLS:
        bind(name, "libm")
    for function in module.functions:
        if not function.is_declaration or function.name.startswith("llvm.") or function.name in LIBM_SYMBOLS:
            continue
        if function.name in blas.BLAS_SYMBOLS:  # the native matrix products' sgemm (OpenBLAS, one thread)
            llvm.add_symbol(function.name, blas.symbols()[function.name])
            continue
        if function.name in PTHREAD_SYMBOLS:  # the worker pool of a model compiled for several threads
            bind(function.name, "process")
            continue
        if function.name not in LIBC_SYMBOLS:
            raise PyoccError(f"generated code calls '{function.name}', which the host runtime does not provide "
                             f"(allowed: {', '.join(LIBC_SYMBOLS + LIBM_SYMBOLS)})")
        bind(function.name, "libc")


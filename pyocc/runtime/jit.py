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
name and features), so the native kernels' loops are vectorised; the host
code of target cuda, library calls one after another, is compiled without
optimising (CALLS_ONLY_SPEED_LEVEL, pyocc.runtime.cuda_model), and the
memory planner's functions, which Python calls, are only simplified
(SIMPLIFY_SPEED_LEVEL, pyocc.runtime.planner_native).

The code generator runs without LLVM's loop strength reduction
(`code_generator`, LOOP_STRENGTH_REDUCTION): it was the costliest single
pass of a compile and made no difference to run time.

The native kernels of a model come as modules of their own (one LLVM IR
text per kernel), JIT-compiled one by one and cached in the process by
their text (`jit_kernels`): a kernel alike in everything but its name to
one compiled before (the same emitter, shapes and attributes, in another
model or another memory mode of the same model) is not compiled again.
Kernels are never inlined into the run function, so compiling them apart
changes no code. The files written to disk still hold one module. A model
compiled for several threads is compiled whole, as one module: its kernels
call that model's own parallel-for, so no other model may share them.

With `PYOCC_CACHE_DIR` set, the object code of every JIT compile is also
kept on disk (pyocc.runtime.object_cache, keyed by the IR text, the
optimisation level, the code model and the host CPU): a module compiled
before, in any process, is loaded instead of optimised and compiled again.

The same compiled module is written to disk as LLVM IR (`write_llvm_ir`), an
object file (`write_object`) or a shared library plus its weights file
(`write_shared_library`), which pyocc.runtime.loader runs in any process.

The compiler side (`pyocc.lowering.convert_dnn_to_llvm.compile_module`)
builds a CompiledModel from an xDSL module; this module never imports xDSL.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pyocc.errors import PyoccError
from pyocc.runtime import blas, object_cache
from pyocc.runtime.bridge import STATE_SLOTS, AllocStats, NativeModel

#: the libc functions generated code may call (malloc and free through the
#: module's own allocator, pyocc.lowering.host_allocator)
LIBC_SYMBOLS = ("malloc", "free", "memcpy")
#: the libm functions generated code may call: declared ones (erf), and those
#: LLVM's math intrinsics become (llvm.exp.f32 -> expf, ...)
LIBM_SYMBOLS = ("erf", "expf", "logf", "tanhf", "powf", "exp2f", "log2f", "fmodf", "tanh", "exp", "log", "pow",
                "fmod")
#: the pthread functions the worker pool of a model compiled for several
#: threads calls (pyocc.lowering.native.threads; libc's since glibc 2.34), and
#: sched_yield, which its waiting threads call before they sleep
PTHREAD_SYMBOLS = ("pthread_create", "pthread_join", "pthread_mutex_init", "pthread_mutex_destroy",
                   "pthread_mutex_lock", "pthread_mutex_unlock", "pthread_cond_init", "pthread_cond_destroy",
                   "pthread_cond_wait", "pthread_cond_broadcast", "pthread_cond_signal", "sched_yield")
#: LLVM's optimisation level for generated code
SPEED_LEVEL = 3
#: ... and for code that only calls libraries one call after another (the
#: host side of target cuda): nothing to vectorise, and O3 and its code
#: generator cost two CPU seconds on DenseNet-121's 28,000 lines
CALLS_ONLY_SPEED_LEVEL = 0
#: ... and for code whose time goes into being called, not into its loops
#: (the memory planner's functions, pyocc.runtime.planner_native, called
#: from Python tens of thousands of times a compile on a few hundred
#: buffers): `simplify` only (its variables in registers) and the code
#: generator at O1. On the planner's 960 lines that compiled in 0.06-0.10
#: CPU s, where LLVM's O1 or O3 pipeline took 0.3-0.4 and planned T5's
#: sequence only 0.03-0.05 s sooner (0.65-0.68 s against 0.70-0.71)
SIMPLIFY_SPEED_LEVEL = 1

#: whether the code generator runs LLVM's loop strength reduction on host
#: code. Off: measured at stop 47 it was the costliest single pass of
#: compiling Inception v1 and ResNet-50 (0.49 of 4.1 CPU s of LLVM passes,
#: a few kernels' vectorised loops 0.04-0.06 s each), and without it the
#: light models compiled in 15% less CPU time and ran as fast (median run
#: time over seven light models, one thread, four rounds in turns: geomean
#: 1.003 of with it, every model within 0.97-1.05). (A change here changes
#: the object code: bump object_cache.CACHE_FORMAT.)
LOOP_STRENGTH_REDUCTION = False

#: the code model of everything JIT-compiled in this process. MCJIT maps a
#: module's code and its data (constant pools, the GOT) apart, wherever the
#: process has room; in a long-lived process whose mappings come and go (a
#: test worker, torch loaded) they can land more than 2 GiB apart, and the
#: default (small) model's 32-bit PC-relative relocations then fail an
#: assertion inside LLVM's RuntimeDyld that aborts the process in
#: `finalize_object`. The large model addresses everything with 64 bits.
#: Objects written to disk (.o, .so) keep the default model: the system
#: linker lays them out.
JIT_CODE_MODEL = "large"

#: compiled native kernels kept for reuse (least recently used dropped
#: first); a model keeps its own kernels alive, whatever the cache drops
KERNEL_CACHE_SIZE = 128
#: the name every kernel is compiled under in its own module
KERNEL_NAME = "kernel"

_initialised = False
#: normalised kernel text -> (engine, its optimised module, the name bound by llvm.add_symbol, address)
_kernels: OrderedDict[str, tuple[Any, Any, str, int]] = OrderedDict()


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


_generating = 0
"""How many `code_generator` blocks are open, in all threads."""
_generating_lock = threading.Lock()


@contextlib.contextmanager
def code_generator() -> Iterator[None]:
    """The code generator as pyocc runs it on host code, for the block:
    loop strength reduction as LOOP_STRENGTH_REDUCTION says. LLVM keeps
    that switch as a command-line option, one for the process, so it is
    set when the first block opens and set back to LLVM's default when the
    last one closes: another user of llvmlite in the process (numba)
    compiles as it would without pyocc."""
    global _generating
    if LOOP_STRENGTH_REDUCTION:
        yield
        return
    llvm = _llvm()
    with _generating_lock:
        if _generating == 0:
            llvm.set_option("pyocc", "--disable-lsr=true")
        _generating += 1
    try:
        yield
    finally:
        with _generating_lock:
            _generating -= 1
            if _generating == 0:
                llvm.set_option("pyocc", "--disable-lsr=false")


@functools.cache  # find_library runs ldconfig: once a process
def _libc() -> ctypes.CDLL:
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else ctypes.CDLL(None)


@functools.cache
def _libm() -> ctypes.CDLL:
    name = ctypes.util.find_library("m")
    return ctypes.CDLL(name) if name else ctypes.CDLL(None)


def _target_machine(codemodel: str = "default", speed_level: int = SPEED_LEVEL) -> Any:
    """The host's target machine. PIC so that the same object links into a
    shared library; the host's CPU so that the vectoriser uses its vector
    width. `codemodel` "default" for objects written to disk; whatever is
    JIT-compiled in this process uses JIT_CODE_MODEL (`jit_module` makes its
    own machine). `speed_level` is the code generator's optimisation level."""
    llvm = _llvm()
    target = llvm.Target.from_default_triple()
    # a new one each time: an MCJIT engine owns (and frees) the machine it is given
    cpu, features, _ = _host_compiler()
    return target.create_target_machine(cpu=cpu, features=features, opt=speed_level, reloc="pic", codemodel=codemodel)


def optimize(module: Any, machine: Any, speed_level: int = SPEED_LEVEL) -> None:
    """Run LLVM's default module pipeline at SPEED_LEVEL on `module` for
    `machine`, loop and SLP vectorisation on; at SIMPLIFY_SPEED_LEVEL,
    `simplify`; at 0, nothing. (A change here changes the object code:
    bump object_cache.CACHE_FORMAT.)"""
    if speed_level == 0:
        return
    if speed_level == SIMPLIFY_SPEED_LEVEL:
        simplify(module, machine)
        return
    llvm = _llvm()
    options = llvm.create_pipeline_tuning_options(speed_level=SPEED_LEVEL)
    options.loop_vectorization = True
    options.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(module, builder)


def simplify(module: Any, machine: Any) -> None:
    """Promote `module`'s stack variables to registers (SROA), combine
    instructions and simplify the control flow, no more: what makes
    IRWriter's variables (allocas, pyocc.runtime.ir_writer) registers."""
    llvm = _llvm()
    builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=1))
    passes = llvm.create_new_module_pass_manager()
    passes.add_sroa_pass()
    passes.add_instruction_combine_pass()
    passes.add_simplify_cfg_pass()
    passes.run(module, builder)


def _parsed(llvm_ir: str, machine: Any) -> Any:
    """`llvm_ir` parsed and verified, for `machine`'s triple and data layout."""
    module = _llvm().parse_assembly(llvm_ir)
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    module.verify()
    return module


def optimized_module(llvm_ir: str, machine: Any, bind: Callable[[Any], None] | None = None,
                     before_optimize: bool = False, speed_level: int = SPEED_LEVEL) -> Any:
    """Parse and verify `llvm_ir` for `machine`, optimise it (`optimize` at
    `speed_level`) and let `bind` resolve its external
    symbols (llvm.add_symbol; before optimising with `before_optimize`):
    the module, ready for codegen. A `bind` run after optimising must not
    change the module (the object cache's key is the text before)."""
    module = _parsed(llvm_ir, machine)
    if bind is not None and before_optimize:
        bind(module)
    optimize(module, machine, speed_level)
    if bind is not None and not before_optimize:
        bind(module)
    return module


@functools.cache
def _host_compiler() -> tuple[str, str, str]:
    """The host CPU's name and features, as the target machines get them,
    and the llvmlite and LLVM versions that compile for it."""
    import llvmlite  # beside llvmlite.binding, which _llvm() imported: no cost

    llvm = _llvm()
    versions = f"llvmlite {llvmlite.__version__} llvm {'.'.join(map(str, llvm.llvm_version_info))}"
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(), versions


def _object_key(text: str, machine: Any, speed_level: int) -> str:
    """The object cache's key for JIT-compiling the module `text` (as it
    goes into the optimiser) with `machine` at `speed_level`: everything
    the object code depends on (pyocc.runtime.object_cache). The pipeline
    `optimize` runs is fixed by the code: changing it means bumping
    object_cache.CACHE_FORMAT."""
    cpu, features, versions = _host_compiler()
    return object_cache.cache_key((versions, machine.triple, cpu, features, f"speed {speed_level}",
                                   f"code model {JIT_CODE_MODEL} reloc pic", text))


class _OptimisedOnDemand:
    """The optimised module of a compile the object cache answered: what
    `optimized_module` returns for the same arguments, made on first use
    (only code written to disk from a JIT-compiled model needs it), then
    stood in for. (A compile's own module differs a little: MCJIT's code
    generator runs its IR passes, such as loop strength reduction, on it in
    place; both are the same program.)"""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._module: Any = None

    def module(self) -> Any:
        """The optimised module, made the first time."""
        if self._module is None:
            self._module = self._make()
        return self._module

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module(), name)

    def __str__(self) -> str:
        return str(self.module())


def jit_module(llvm_ir: str, bind: Callable[[Any], None] | None = None, before_optimize: bool = False,
               speed_level: int = SPEED_LEVEL) -> tuple[Any, Any]:
    """`optimized_module`, then JIT it in this process: (engine, module).
    Every JIT-compiled module uses the large code model (JIT_CODE_MODEL):
    the machine is made here, so that no caller can hand MCJIT one whose
    32-bit relocations abort the process once its sections lie far apart.

    With a cache directory (`PYOCC_CACHE_DIR`, pyocc.runtime.object_cache)
    the object code MCJIT generates is kept there; a module compiled
    before under the same key is neither optimised nor compiled again:
    its object is loaded, after `bind` has checked and bound the parsed
    module's external symbols as for a compile (so an undefined symbol is
    refused all the same), and the module returned is optimised only if
    used."""
    llvm = _llvm()
    machine = _target_machine(JIT_CODE_MODEL, speed_level)
    directory = object_cache.cache_dir()
    if directory is None:
        module = optimized_module(llvm_ir, machine, bind, before_optimize, speed_level)
        engine = llvm.create_mcjit_compiler(module, machine)
        with code_generator():
            engine.finalize_object()
        return engine, module
    module = _parsed(llvm_ir, machine)
    if bind is not None and before_optimize:
        bind(module)
    key = _object_key(str(module) if before_optimize else llvm_ir, machine, speed_level)
    cached = object_cache.load(directory, key)
    if cached is not None:
        if bind is not None and not before_optimize:
            bind(module)
        engine = llvm.create_mcjit_compiler(module, machine)
        pending = [cached]  # handed over once, not kept alive with the engine
        engine.set_object_cache(getbuffer_func=lambda _module: pending.pop() if pending else None)
        engine.finalize_object()  # MCJIT loads the object instead of compiling the module
        optimised = _OptimisedOnDemand(lambda: optimized_module(llvm_ir, _target_machine(JIT_CODE_MODEL, speed_level),
                                                                bind, before_optimize, speed_level))
        return engine, optimised
    optimize(module, machine, speed_level)
    if bind is not None and not before_optimize:
        bind(module)
    engine = llvm.create_mcjit_compiler(module, machine)
    compiled: list[bytes] = []
    engine.set_object_cache(notify_func=lambda _module, data: compiled.append(data))
    with code_generator():
        engine.finalize_object()
    for data in compiled:  # one module: one object
        object_cache.store(directory, key, data)
    return engine, module


def _normalised(symbol: str, text: str) -> str:
    """A kernel module's text with its symbol (and the names made from it,
    such as its constant tables') replaced by KERNEL_NAME: the cache key."""
    return text.replace(f'"{symbol}', f'"{KERNEL_NAME}')


def _kernel_name(key: str) -> str:
    """The symbol a kernel of normalised text `key` is bound under."""
    return f"pyocc_kernel_{hashlib.sha1(key.encode()).hexdigest()}"


def _external_kernel(module: Any) -> None:
    """Make a kernel module's KERNEL_NAME external (the emitters define
    kernels internal: O3 would drop an unused one) and resolve its externals."""
    module.get_function(KERNEL_NAME).linkage = "external"
    _resolve_externals(module)


def optimize_kernels(kernels: Mapping[str, str]) -> tuple[dict[str, str], list[Any]]:
    """What `jit_kernels` returns, without JIT-compiling anything: symbol ->
    the name it would be bound under, and each kernel's module, optimised
    as the JIT optimises it (not taken from the cache, whose modules belong
    to its engines). For code that is only written to disk."""
    names: dict[str, str] = {}
    modules: list[Any] = []
    for symbol, text in kernels.items():
        key = _normalised(symbol, text)
        names[symbol] = _kernel_name(key)
        modules.append(optimized_module(key, _target_machine(JIT_CODE_MODEL), _external_kernel, before_optimize=True))
    return names, modules


def jit_kernels(kernels: Mapping[str, str]) -> tuple[dict[str, str], list[Any]]:
    """JIT each native kernel (symbol -> the LLVM IR text of a module that
    defines `void symbol(ptr)`) on its own, unless a kernel of the same text
    (its symbol aside) was compiled earlier in this process. Each is bound
    under a name made from its text (llvm.add_symbol). Returns symbol -> that
    name, and the engines that hold the code (keep them alive while it runs)."""
    llvm = _llvm()
    names: dict[str, str] = {}
    engines: list[Any] = []
    for symbol, text in kernels.items():
        key = _normalised(symbol, text)
        entry = _kernels.get(key)
        if entry is None:
            name = _kernel_name(key)
            engine, module = jit_module(key, _external_kernel, before_optimize=True)
            entry = (engine, module, name, engine.get_function_address(KERNEL_NAME))
            _kernels[key] = entry
            if len(_kernels) > KERNEL_CACHE_SIZE:
                _kernels.popitem(last=False)
        else:
            _kernels.move_to_end(key)
        engine, _, name, address = entry
        llvm.add_symbol(name, address)  # again on every use: a dropped and recompiled kernel moves
        names[symbol] = name
        engines.append(entry)
    return names, engines


def renamed(text: str, names: Mapping[str, str]) -> str:
    """LLVM IR text with each global `@"old"` renamed to `@"new"`; where two
    declared functions get one name (two sites whose kernels came out the
    same), one declaration is kept."""
    for old, new in names.items():
        text = text.replace(f'@"{old}"', f'@"{new}"')
    declared: set[str] = set()
    lines = []
    for line in text.splitlines():
        if line.startswith("declare "):
            signature = line.split("(", 1)[0]
            if signature in declared:
                continue
            declared.add(signature)
        lines.append(line)
    return "\n".join(lines) + "\n"


def weights_path_for(library: str | os.PathLike[str]) -> Path:
    """Where a shared library's weight pool lives: beside it, `.weights`."""
    return Path(library).with_suffix(".weights")


class CompiledModel(NativeModel):
    """A model JIT-compiled in this process. `llvm_ir` is the module text,
    `meta` the function's JSON table, `weight_pool` its packed constants;
    `kernels` the native kernels `llvm_ir` declares, symbol -> the text of
    a module defining it (compiled apart and cached, see `jit_kernels`).
    With `jit=False` the code is optimised but not JIT-compiled until the
    first `run`: enough to write it to disk (`pyocc compile`), which then
    generates machine code once, not twice."""

    def __init__(self, llvm_ir: str, meta: dict[str, Any], weight_pool: np.ndarray,
                 kernels: Mapping[str, str] | None = None, jit: bool = True):
        self.llvm_ir = llvm_ir
        self.kernels = dict(kernels or {})
        self._machine = _target_machine()
        super().__init__(meta, weight_pool, None)
        if jit:
            self._start()
        else:
            self._names, self._kernel_modules = optimize_kernels(self.kernels)
            self._module = optimized_module(renamed(llvm_ir, self._names), _target_machine(JIT_CODE_MODEL),
                                            self._binder(set(self._names.values())))

    @staticmethod
    def _binder(bound: set[str]) -> Callable[[Any], None]:
        """Resolve a model module's externals, its kernels (`bound`) aside."""
        return lambda module: _resolve_externals(module, bound)

    def _start(self) -> None:
        """JIT the kernels (cached) and the model, and bind its functions."""
        names, engines = jit_kernels(self.kernels)
        engine, module = jit_module(renamed(self.llvm_ir, names), self._binder(set(names.values())))
        self._names, self._module = names, module
        self._kernel_modules = [entry[1] for entry in engines]
        functions = {kind: engine.get_function_address(f"{self.name}_{kind}") for kind in ("init", "run", "destroy")}
        self._bind(functions, keepalive=(engine, engines))

    def _linked(self, optimised: bool) -> Any:
        """One module: the model's and its kernels', linked (kernels internal
        again, under their symbols), as generated or as the JIT optimised it."""
        llvm = _llvm()
        if optimised:
            module = self._module.clone()
            parts = {symbol: part.clone() for symbol, part in zip(self.kernels, self._kernel_modules, strict=True)}
        else:
            module = llvm.parse_assembly(self.llvm_ir)
            parts = {symbol: llvm.parse_assembly(text) for symbol, text in self.kernels.items()}
        module.triple = self._machine.triple
        module.data_layout = str(self._machine.target_data)
        linked: set[str] = set()
        for symbol, part in parts.items():
            name = self._names[symbol] if optimised else symbol
            if name in linked:
                continue  # two symbols of one kernel text: one definition
            part.triple = module.triple
            part.data_layout = module.data_layout
            function = part.get_function(KERNEL_NAME if optimised else symbol)
            function.name = name
            function.linkage = "external"
            for variable in part.global_variables:  # the kernel's tables: its own, whatever their name
                if not variable.is_declaration:
                    variable.linkage = "internal"
            module.link_in(part)  # consumes part
            linked.add(name)
        for symbol in self.kernels:
            module.get_function(self._names[symbol] if optimised else symbol).linkage = "internal"
        return module

    def write_llvm_ir(self, path: str | os.PathLike[str]) -> None:
        """The module as generated, before LLVM optimises it, as LLVM IR
        text (`.ll`) for this machine's triple and data layout."""
        Path(path).write_text(str(self._linked(optimised=False)))

    def write_object(self, path: str | os.PathLike[str]) -> None:
        """The module as a native, position-independent object file (`.o`)."""
        with code_generator():
            Path(path).write_bytes(self._machine.emit_object(self._linked(optimised=True)))

    def write_weights(self, path: str | os.PathLike[str]) -> None:
        """The packed weight pool, the raw bytes the `weights` argument points to."""
        Path(path).write_bytes(self.weight_pool.tobytes())

    def write_shared_library(self, path: str | os.PathLike[str]) -> Path:
        """Link the object into a shared library at `path` with the system C
        compiler (`$CC`, else `cc`), and write its weight pool beside it
        (`weights_path_for(path)`). Returns the weights file's path."""
        path = Path(path)
        link_shared_library(path, self.write_object, (self._module, *self._kernel_modules))
        weights = weights_path_for(path)
        self.write_weights(weights)
        return weights


def link_shared_library(path: Path, write_object: Callable[[Path], None], modules: Sequence[Any]) -> None:
    """Link the object `write_object` writes into a shared library at `path`
    with the system C compiler (`$CC`, else `cc`): with libm, with pthreads
    and OpenBLAS when `modules` (the llvmlite modules in it) call them."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        raise PyoccError("no C compiler found (set CC or install cc) to link the shared library; "
                         "write_object() writes a .o without one")
    with tempfile.TemporaryDirectory() as tmp:
        obj = Path(tmp) / "model.o"
        write_object(obj)
        # a model whose native kernels call the BLAS links OpenBLAS, found through an rpath
        uses_blas = any(f.is_declaration and f.name in blas.BLAS_SYMBOLS for module in modules
                        for f in module.functions)
        # a model compiled for several threads runs a pthread pool
        uses_threads = any(f.is_declaration and f.name in PTHREAD_SYMBOLS for module in modules
                           for f in module.functions)
        result = subprocess.run([compiler, "-shared", "-o", str(path), str(obj), "-lm",
                                 *(["-lpthread"] if uses_threads else []),
                                 *(blas.link_flags() if uses_blas else [])],
                                capture_output=True, text=True)
        if result.returncode != 0:
            detail = " ".join(result.stderr.split())  # one line, whatever the linker printed
            raise PyoccError(f"linking {path} failed: {detail}")


def _resolve_externals(module: Any, bound: set[str] | frozenset[str] = frozenset()) -> None:
    """Bind each declared external function to libc's or libm's, by address,
    and the libm functions LLVM's intrinsics lower to; refuse any symbol
    that is neither an LLVM intrinsic nor an allowed libc / libm one, nor
    in `bound` (bound already: the model's native kernels)."""
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
        if (not function.is_declaration or function.name.startswith("llvm.") or function.name in LIBM_SYMBOLS
                or function.name in bound):
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



#: a symbolic program's run function (pyocc.lowering.symbolic_native):
#: int32_t run(inputs, outputs, weights, state, symbols)
_SYMBOLIC_RUN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p)


class SymbolicCompiledModel:
    """A symbolic program's generated code, JIT-compiled in this process:
    `run` calls its run function with the input and output arrays and the
    symbols' values (no Python in between: the kernels are native)."""

    def __init__(self, llvm_ir: str, function: str, weight_pool: np.ndarray):
        """JIT `llvm_ir`, whose run function is `function`; `weight_pool` the packed constants."""
        self.llvm_ir = llvm_ir
        engine, self._module = jit_module(llvm_ir, _resolve_externals)
        self._engine = engine
        self._run = _SYMBOLIC_RUN(engine.get_function_address(function))
        self.weight_pool = weight_pool
        self._stats = AllocStats(0, 0, 0, 0)

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray], values: list[int]) -> None:
        """Run on C-contiguous `inputs`, writing `outputs` (arrays of the
        shapes at `values`, the symbols' values in the module's order);
        PyoccError when the pool could not be allocated."""
        input_pointers = (ctypes.c_void_p * max(len(inputs), 1))(*(a.ctypes.data for a in inputs))
        output_pointers = (ctypes.c_void_p * max(len(outputs), 1))(*(a.ctypes.data for a in outputs))
        symbols = (ctypes.c_int64 * max(len(values), 1))(*values)
        state = (ctypes.c_int64 * STATE_SLOTS)()
        status = self._run(ctypes.addressof(input_pointers), ctypes.addressof(output_pointers),
                           self.weight_pool.ctypes.data, ctypes.addressof(state), ctypes.addressof(symbols))
        self._stats = AllocStats.from_state(state)
        if status == 1:
            raise PyoccError("out of memory (the allocator returned NULL for the pool)")
        if status != 0:
            raise PyoccError(f"the generated code returned status {status}")

    def alloc_stats(self) -> AllocStats:
        """Allocator calls and bytes of the last `run` (counted in native code)."""
        return self._stats

    def write_llvm_ir(self, path: str | os.PathLike[str]) -> None:
        """The module as generated, before LLVM optimises it, as LLVM IR
        text (`.ll`) for this machine's triple and data layout."""
        machine = _target_machine()
        module = _llvm().parse_assembly(self.llvm_ir)
        module.triple = machine.triple
        module.data_layout = str(machine.target_data)
        Path(path).write_text(str(module))

    def write_object(self, path: str | os.PathLike[str]) -> None:
        """The module as optimised, a position-independent object file (`.o`)."""
        machine = _target_machine()
        module = self._module.clone()
        module.triple = machine.triple
        module.data_layout = str(machine.target_data)
        with code_generator():
            Path(path).write_bytes(machine.emit_object(module))

    def write_shared_library(self, path: str | os.PathLike[str]) -> Path:
        """A shared library at `path` (C ABI version 2, see
        pyocc.lowering.symbolic_native) and its weight pool beside it
        (`weights_path_for(path)`). Returns the weights file's path."""
        path = Path(path)
        link_shared_library(path, self.write_object, (self._module,))
        weights = weights_path_for(path)
        weights.write_bytes(self.weight_pool.tobytes())
        return weights

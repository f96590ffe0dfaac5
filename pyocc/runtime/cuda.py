"""Finding and loading the CUDA runtime, cuDNN and cuBLAS for `target=cuda`.

Code generated for `target=cuda` calls the functions listed in
pyocc.runtime.cuda_api; the JIT binds each of those external symbols to an
address. This module finds the libraries that hold them (the CUDA runtime,
cuBLAS, cuDNN, and the driver's libcuda for the kernels pyocc writes), loads
them with ctypes and hands out the addresses (`CudaLibraries.symbols()`);
`cuda_unavailable_reason()` says in one line why no GPU can be used, or None.

Where each library is looked for, in this order:

1. `cuda.pathfinder.load_nvidia_dynamic_lib` (package cuda-pathfinder, part of
   `pyocc[cuda]`): it knows every layout of NVIDIA's wheels, conda and
   toolkit installs, and returns a library some other component (PyTorch,
   say) has already loaded, so that one process never holds two copies;
2. NVIDIA's wheels on `sys.path`: `<entry>/nvidia/<package>/lib/<soname>`
   (CUDA 12 wheels have one package folder per library, CUDA 13 wheels share
   `nvidia/cu13/lib`), for an older cuda-pathfinder or none;
3. the system loader (`LD_LIBRARY_PATH`, ldconfig's cache), by soname:
   the only place the driver's `libcuda.so.1` normally is.

The preferred sonames are cuda_api.LIBRARY_SONAMES (CUDA 12, what
`pyocc[cuda]` installs); CUDA 13 libraries (what a PyTorch built for CUDA 13
brings) are taken when no CUDA 12 one is found. The CUDA runtime and cuBLAS
must come from the same CUDA release; `load` says so when they do not.

cuDNN 9 needs care. `libcudnn.so.9` is a small shim: the first call that needs
convolution (or ops, or the graph engine) support dlopens `libcudnn_cnn.so.9`
(`_ops`, `_graph`, `_engines_*`, ...) by bare name, which the dynamic loader
looks for on `LD_LIBRARY_PATH` and the system paths only, never in the
wheel's folder: the familiar "Unable to load any of {libcudnn_cnn.so.9...}
Invalid handle" abort. So before cuDNN is used, every `libcudnn_*.so.9` beside
the shim is loaded by absolute path, RTLD_GLOBAL; the shim's later
`dlopen("libcudnn_cnn.so.9")` then finds the library already loaded (dlopen
matches the sonames of loaded objects), the same thing PyTorch does for its
own wheels. The parts depend on each other, so they are loaded in passes
until no more load; `_graph`, `_ops` and `_cnn` must. cuDNN's parts also need
cuBLASLt, which is loaded (RTLD_GLOBAL) before them.

Like all of pyocc.runtime, this module never imports xDSL.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyocc.errors import PyoccError
from pyocc.runtime import cuda_api

INSTALL_HINT = "pip install 'pyocc[cuda]'"
REASON_PREFIX = "target cuda needs an NVIDIA GPU: "

#: soname candidates per library, preferred first: CUDA 12 (cuda_api), then 13
SONAMES: dict[str, tuple[str, ...]] = {
    "cudart": (cuda_api.LIBRARY_SONAMES["cudart"], "libcudart.so.13"),
    "cublasLt": ("libcublasLt.so.12", "libcublasLt.so.13"),
    "cublas": (cuda_api.LIBRARY_SONAMES["cublas"], "libcublas.so.13"),
    "cudnn": (cuda_api.LIBRARY_SONAMES["cudnn"],),
    "cuda": (cuda_api.LIBRARY_SONAMES["cuda"],),  # the driver API (kernels pyocc writes); comes with the driver
    "nvrtc": ("libnvrtc.so.12", "libnvrtc.so.13"),  # optional: see _load_optional
}
#: dependencies first: cuBLAS and cuDNN both need cuBLASLt
LOAD_ORDER: tuple[str, ...] = ("cudart", "cuda", "cublasLt", "cublas", "cudnn")
#: libraries whose CUDA major version must match the CUDA runtime's
SAME_CUDA_RELEASE: tuple[str, ...] = ("cublasLt", "cublas")
#: the cuDNN 9 sub-libraries the shim dlopens by bare name
CUDNN_PARTS: tuple[str, ...] = (
    "libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
    "libcudnn_heuristic.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9",
)
#: the parts the functions in cuda_api need (the others are loaded when they load)
CUDNN_REQUIRED_PARTS: tuple[str, ...] = ("libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9")
#: what each library is called in messages
DISPLAY_NAMES: dict[str, str] = {"cudart": "the CUDA runtime", "cublasLt": "cuBLASLt", "cublas": "cuBLAS",
                                 "cudnn": "cuDNN", "cuda": "the NVIDIA driver's CUDA library", "nvrtc": "NVRTC"}

_RTLD_GLOBAL_NOW = os.RTLD_NOW | os.RTLD_GLOBAL


# -- where to look: pure functions ------------------------------------------------------


def cuda_major(soname: str) -> int | None:
    """The major version in a library file name ("libcudart.so.12.8.90" -> 12)."""
    _, sep, version = Path(soname).name.partition(".so.")
    head = version.split(".")[0]
    return int(head) if sep and head.isdigit() else None


def is_one_of(filename: str, sonames: Sequence[str]) -> bool:
    """Whether `filename` is one of `sonames` or a versioned file of one
    ("libcublas.so.13.1.0.3" is "libcublas.so.13"; "libcublasLt.so.13" is not)."""
    return any(filename == soname or filename.startswith(soname + ".") for soname in sonames)


def rank_wheel_files(library: str, files: Iterable[str | Path]) -> list[Path]:
    """The files among `files` (paths found under `<dir>/nvidia/*/lib/`) that
    are `library`, best first: by soname preference (CUDA 12 before 13), then
    in the order given (the order of sys.path). Pure: looks at names only."""
    wanted = SONAMES[library]
    matches = [Path(f) for f in files if Path(f).name in wanted]
    return sorted(matches, key=lambda p: wanted.index(p.name))  # stable: keeps the given order within a soname


def wheel_library_files(search_dirs: Sequence[str | Path]) -> list[Path]:
    """Every `lib*.so*` of NVIDIA's wheels under `search_dirs` (sys.path
    entries), in the order of `search_dirs`, package folders sorted by name."""
    found: list[Path] = []
    for entry in search_dirs:
        root = Path(entry) / "nvidia"
        if root.is_dir():
            found += sorted(p for p in root.glob("*/lib/lib*.so*") if p.is_file())
    return found


def cudnn_parts_beside(shim: str | Path, exists: Callable[[Path], bool] = Path.is_file) -> list[Path]:
    """The cuDNN 9 sub-libraries in the folder of the shim `shim`, in the
    order CUDNN_PARTS lists them."""
    folder = Path(shim).parent
    return [folder / part for part in CUDNN_PARTS if exists(folder / part)]


# -- loading -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LibrarySearch:
    """Where `CudaLibraries.load` may look: the three places of the module
    docstring, each of which can be turned off (tests do)."""

    search_dirs: tuple[str, ...] = ()
    """Folders whose `nvidia/*/lib/` hold NVIDIA's wheels (normally sys.path)."""
    use_pathfinder: bool = True
    """Ask cuda-pathfinder first, when it is installed."""
    use_system_loader: bool = True
    """Last, dlopen the bare soname (LD_LIBRARY_PATH, ldconfig's cache)."""

    @classmethod
    def default(cls) -> LibrarySearch:
        """Pathfinder, then the wheels on sys.path, then the system loader."""
        return cls(search_dirs=tuple(p for p in sys.path if p and os.path.isdir(p)))


@dataclass
class _Loaded:
    """One loaded library and where it came from."""

    handle: ctypes.CDLL
    path: str
    found_via: str


def _pathfinder_load(library: str) -> str | None:
    """The absolute path cuda-pathfinder loads `library` from, or None when it
    is not installed, does not know the library, or cannot find it."""
    try:
        # cuda-pathfinder is optional (pyocc[cuda]); without it the other searches run
        from cuda.pathfinder import load_nvidia_dynamic_lib  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        loaded = load_nvidia_dynamic_lib(library)
    except Exception:  # noqa: BLE001 - not found, unknown to this version, or not loadable: try the next place
        return None
    return getattr(loaded, "abs_path", None)


def _dlopen(path: str) -> ctypes.CDLL:
    """Load a library so that later dlopens by soname find it and its symbols
    resolve others' (RTLD_GLOBAL); OSError when the loader refuses it."""
    return ctypes.CDLL(path, mode=_RTLD_GLOBAL_NOW)


def _load_one(library: str, search: LibrarySearch, wheel_files: list[Path], sonames: tuple[str, ...]) -> _Loaded:
    """Load `library` (one of SONAMES) under one of `sonames`, trying the
    places of `search` in order; PyoccError when none works."""
    failures: list[str] = []
    if search.use_pathfinder:
        path = _pathfinder_load(library)
        if path and is_one_of(Path(path).name, sonames):
            try:
                return _Loaded(_dlopen(path), path, "cuda-pathfinder")
            except OSError as e:
                failures.append(f"{path}: {e}")
    for candidate in rank_wheel_files(library, wheel_files):
        if candidate.name not in sonames:
            continue
        try:
            return _Loaded(_dlopen(str(candidate)), str(candidate), "wheel")
        except OSError as e:
            failures.append(f"{candidate}: {e}")
    if search.use_system_loader:
        for soname in sonames:
            try:
                return _Loaded(_dlopen(soname), soname, "system loader")
            except OSError:
                continue  # not on the system path: the usual case, not worth reporting
    name = DISPLAY_NAMES[library]
    if library == "cuda":  # not a wheel: the driver installs it
        raise PyoccError(f"{name} ({sonames[0]}) was not found: install the NVIDIA driver")
    if failures:
        raise PyoccError(f"{name} was found but does not load ({failures[0]}); reinstall it with {INSTALL_HINT}")
    raise PyoccError(f"the CUDA libraries are not installed: {name} ({' or '.join(sonames)}) was not found "
                     f"({INSTALL_HINT})")


def _load_optional(library: str, search: LibrarySearch, wheel_files: list[Path], major: int | None) -> None:
    """Load `library` of CUDA release `major` if it is there, quietly: NVRTC,
    which cuDNN's runtime-compiled engines use when they can (not needed by
    the cuda_api functions)."""
    sonames = tuple(s for s in SONAMES[library] if cuda_major(s) == major) or SONAMES[library]
    try:
        _load_one(library, search, wheel_files, sonames)
    except PyoccError:
        pass


def _preload_cudnn_parts(shim_path: str) -> list[str]:
    """Load the cuDNN sub-libraries beside the shim (see the module
    docstring), in passes until no more load; returns their paths.
    PyoccError when a part the cuda_api functions need does not load."""
    if not os.path.isabs(shim_path):
        return []  # found by the system loader: the shim's own dlopens find the parts the same way
    pending = cudnn_parts_beside(shim_path)
    loaded: list[str] = []
    errors: dict[str, str] = {}
    progress = True
    while pending and progress:
        progress = False
        for part in list(pending):
            try:
                _dlopen(str(part))
            except OSError as e:
                errors[part.name] = str(e)
                continue
            pending.remove(part)
            loaded.append(str(part))
            errors.pop(part.name, None)
            progress = True
    names = {Path(p).name for p in loaded}
    missing = [part for part in CUDNN_REQUIRED_PARTS if part not in names]
    if missing:
        detail = errors.get(missing[0], "not found beside it")
        raise PyoccError(f"cuDNN's {missing[0]} (beside {shim_path}) does not load: {detail}; "
                         f"reinstall cuDNN with {INSTALL_HINT}")
    return loaded


def _with_release_note(message: str, library: str, sonames: tuple[str, ...], loaded: dict[str, _Loaded],
                       wheel_files: list[Path]) -> str:
    """`message`, plus why, when `library` is installed only for another CUDA
    release than the runtime that was loaded."""
    others = [p.name for p in rank_wheel_files(library, wheel_files) if p.name not in sonames]
    if library not in SAME_CUDA_RELEASE or not others:
        return message
    return (f"{DISPLAY_NAMES[library]} is installed only as {others[0]}, which does not match the CUDA runtime "
            f"{Path(loaded['cudart'].path).name}: install one CUDA release of both ({INSTALL_HINT})")


@dataclass
class CudaLibraries:
    """The CUDA runtime, the driver, cuDNN and cuBLAS, loaded: `symbols()`
    gives the address of every function in cuda_api.FUNCTIONS."""

    handles: dict[str, ctypes.CDLL]
    """cudart, cuda (the driver), cublasLt, cublas, cudnn -> the loaded library."""
    paths: dict[str, str]
    """The same keys -> the file each was loaded from (a bare soname when the
    system loader found it)."""
    found_via: dict[str, str] = field(default_factory=dict)
    """The same keys -> cuda-pathfinder, wheel or system loader."""
    cudnn_parts: list[str] = field(default_factory=list)
    """The cuDNN sub-libraries preloaded beside the shim."""

    @classmethod
    def load(cls, search: LibrarySearch | None = None) -> CudaLibraries:
        """Find and load the libraries (see the module docstring); the same
        object for every call with the default search. PyoccError, one line,
        when one is missing or does not load."""
        if search is None:
            if _DEFAULT_LOAD.libraries is None:
                _DEFAULT_LOAD.libraries = cls._load(LibrarySearch.default())
            return _DEFAULT_LOAD.libraries
        return cls._load(search)

    @classmethod
    def _load(cls, search: LibrarySearch) -> CudaLibraries:
        wheel_files = wheel_library_files(search.search_dirs)
        loaded: dict[str, _Loaded] = {}
        for library in LOAD_ORDER:
            sonames = SONAMES[library]
            if library in SAME_CUDA_RELEASE:
                major = cuda_major(loaded["cudart"].path)
                sonames = tuple(s for s in sonames if cuda_major(s) == major) or sonames
            try:
                loaded[library] = _load_one(library, search, wheel_files, sonames)
            except PyoccError as e:
                raise PyoccError(_with_release_note(str(e), library, sonames, loaded, wheel_files)) from None
        _load_optional("nvrtc", search, wheel_files, cuda_major(loaded["cudart"].path))
        parts = _preload_cudnn_parts(loaded["cudnn"].path)
        return cls(handles={k: v.handle for k, v in loaded.items()},
                   paths={k: v.path for k, v in loaded.items()},
                   found_via={k: v.found_via for k, v in loaded.items()},
                   cudnn_parts=parts)

    def symbols(self) -> dict[str, int]:
        """Function name -> address, for every cuda_api.FUNCTIONS entry, from
        its library. PyoccError naming the symbol and the file when one is
        missing (a library too old, or not NVIDIA's)."""
        addresses: dict[str, int] = {}
        for function in cuda_api.FUNCTIONS:
            try:
                pointer = getattr(self.handles[function.library], function.name)
            except AttributeError:
                raise PyoccError(f"{function.name} is missing from {self.paths[function.library]}: that "
                                 f"{DISPLAY_NAMES[function.library]} is too old or not NVIDIA's; "
                                 f"reinstall with {INSTALL_HINT}") from None
            address = ctypes.cast(pointer, ctypes.c_void_p).value
            if not address:
                raise PyoccError(f"{function.name} in {self.paths[function.library]} has no address")
            addresses[function.name] = address
        return addresses

    def device_count(self) -> int:
        """How many CUDA devices the runtime sees; PyoccError with the status
        when it cannot tell (no driver, no device)."""
        return _device_count(self.handles["cudart"])

    def versions(self) -> dict[str, int]:
        """The libraries' own version numbers (cudaRuntimeGetVersion,
        cuDriverGetVersion, cudnnGetVersion, cudnnGetCudartVersion,
        cublasGetProperty), for reports. Needs no GPU."""
        out: dict[str, int] = {}
        value = ctypes.c_int(0)
        if self.handles["cudart"].cudaRuntimeGetVersion(ctypes.byref(value)) == 0:
            out["cudart"] = value.value
        if self.handles["cuda"].cuDriverGetVersion(ctypes.byref(value)) == 0:
            out["driver"] = value.value
        cudnn = self.handles["cudnn"]
        cudnn.cudnnGetVersion.restype = ctypes.c_size_t
        cudnn.cudnnGetCudartVersion.restype = ctypes.c_size_t
        out["cudnn"] = int(cudnn.cudnnGetVersion())
        out["cudnn_built_for_cudart"] = int(cudnn.cudnnGetCudartVersion())
        parts = []
        for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            if self.handles["cublas"].cublasGetProperty(prop, ctypes.byref(value)) != 0:
                break
            parts.append(value.value)
        if len(parts) == 3:
            out["cublas"] = parts[0] * 10000 + parts[1] * 100 + parts[2]
        return out

    def describe(self) -> str:
        """One line per library: which file, found how."""
        return "\n".join(f"{name:9s} {self.paths[name]}  ({self.found_via.get(name, '?')})" for name in LOAD_ORDER)


@dataclass
class _DefaultLoad:
    """The libraries loaded with the default search, once per process."""

    libraries: CudaLibraries | None = None
    reason: str | None = None
    reason_known: bool = False


_DEFAULT_LOAD = _DefaultLoad()


# -- is a GPU usable? -------------------------------------------------------------------------


def _device_count(cudart: ctypes.CDLL) -> int:
    """cudaGetDeviceCount through `cudart` (not in cuda_api's table: only this
    module asks); PyoccError naming the status when it fails or finds none."""
    count = ctypes.c_int(0)
    status = int(cudart.cudaGetDeviceCount(ctypes.byref(count)))
    if status != 0:
        name = cuda_api.STATUS_NAMES["cudart"].get(status, "")
        what = ("no NVIDIA driver found, or one too old for this CUDA runtime" if status in (3, 35)
                else "no CUDA device found")
        raise PyoccError(f"{what} (cudaGetDeviceCount returned {status}{' ' + name if name else ''})")
    if count.value == 0:
        raise PyoccError("no CUDA device found (cudaGetDeviceCount found 0 devices)")
    return count.value


def unavailable_reason(search: LibrarySearch) -> str | None:
    """cuda_unavailable_reason for one search, uncached: the runtime is
    loaded first and asked for a device (cheap), then cuBLAS and cuDNN."""
    try:
        cudart = _load_one("cudart", search, wheel_library_files(search.search_dirs), SONAMES["cudart"])
        _device_count(cudart.handle)
        CudaLibraries.load(None if search == LibrarySearch.default() else search)
    except PyoccError as e:
        return REASON_PREFIX + str(e)
    except Exception as e:  # noqa: BLE001 - must never raise: a loader surprise is a reason too
        return f"{REASON_PREFIX}loading the CUDA libraries failed ({type(e).__name__}: {e})".splitlines()[0]
    return None


def cuda_unavailable_reason() -> str | None:
    """None when a GPU is usable for `target=cuda`, else one line for the
    user saying why (libraries not installed, no driver, no device). Never
    raises; computed once per process."""
    if not _DEFAULT_LOAD.reason_known:
        _DEFAULT_LOAD.reason = unavailable_reason(LibrarySearch.default())
        _DEFAULT_LOAD.reason_known = True
    return _DEFAULT_LOAD.reason

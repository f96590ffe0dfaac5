"""Finding and loading the CUDA libraries (pyocc.runtime.cuda).

Without a GPU (CI): the search order as pure functions, the one-line reason
when nothing is installed, and the whole loader against stand-in libraries
built here with the C compiler under the real sonames and wheel layouts:
tiny .so files that export the cuda_api functions as stubs, and a cuDNN shim
that, like cuDNN 9's, dlopens libcudnn_cnn.so.9 by bare name. Each load runs
in a subprocess, so that no stand-in stays loaded in the test process under a
real library's soname.

With a GPU (marker `gpu`, skipped with the reason otherwise): the real
libraries load, every symbol resolves, and a few calls go through the
addresses the JIT would bind.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyocc.runtime import cuda, cuda_api
from pyocc.runtime.cuda import LibrarySearch, cuda_major, cudnn_parts_beside, rank_wheel_files, wheel_library_files

# -- search order: pure functions ----------------------------------------------------


def test_cuda_major_reads_the_version_after_so() -> None:
    assert cuda_major("libcudart.so.12") == 12
    assert cuda_major("/x/nvidia/cu13/lib/libcublas.so.13.1.0.3") == 13
    assert cuda_major("libcudart.so") is None


def test_versioned_file_names_count_as_their_soname() -> None:
    assert cuda.is_one_of("libcublas.so.13.1.0.3", ("libcublas.so.12", "libcublas.so.13"))
    assert cuda.is_one_of("libcudart.so.12", ("libcudart.so.12",))
    assert not cuda.is_one_of("libcublasLt.so.13", ("libcublas.so.13",))
    assert not cuda.is_one_of("libcudart.so.120", ("libcudart.so.12",))


def test_rank_prefers_cuda_12_then_the_given_order() -> None:
    files = [
        "/venv/site-packages/nvidia/cu13/lib/libcudart.so.13",
        "/venv/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
        "/user/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
        "/venv/site-packages/nvidia/cuda_runtime/lib/libcudart.so",  # the dev symlink is never taken
        "/venv/site-packages/nvidia/cublas/lib/libcublas.so.12",
    ]
    assert [str(p) for p in rank_wheel_files("cudart", files)] == [files[1], files[2], files[0]]
    assert [str(p) for p in rank_wheel_files("cublas", files)] == [files[4]]
    assert rank_wheel_files("cudnn", files) == []


def test_rank_does_not_mistake_cublaslt_for_cublas() -> None:
    files = ["/s/nvidia/cublas/lib/libcublasLt.so.12", "/s/nvidia/cublas/lib/libcublas.so.12"]
    assert [p.name for p in rank_wheel_files("cublas", files)] == ["libcublas.so.12"]
    assert [p.name for p in rank_wheel_files("cublasLt", files)] == ["libcublasLt.so.12"]


def test_wheel_files_are_globbed_in_search_dir_order(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for path in (second / "nvidia/cu13/lib/libcudart.so.13", first / "nvidia/cudnn/lib/libcudnn.so.9",
                 first / "nvidia/cuda_runtime/lib/libcudart.so.12", first / "nvidia/cudnn/include/cudnn.h"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    found = wheel_library_files([first, tmp_path / "missing", second])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "a/nvidia/cuda_runtime/lib/libcudart.so.12", "a/nvidia/cudnn/lib/libcudnn.so.9",
        "b/nvidia/cu13/lib/libcudart.so.13",
    ]


def test_cudnn_parts_are_the_ones_beside_the_shim(tmp_path: Path) -> None:
    for name in ("libcudnn.so.9", "libcudnn_cnn.so.9", "libcudnn_graph.so.9", "libcudnn_ops.so.9"):
        (tmp_path / name).write_bytes(b"")
    parts = cudnn_parts_beside(tmp_path / "libcudnn.so.9")
    assert [p.name for p in parts] == ["libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9"]


def test_default_search_looks_at_sys_path() -> None:
    search = LibrarySearch.default()
    assert search.use_pathfinder and search.use_system_loader
    assert set(search.search_dirs) <= set(sys.path)


# -- nothing installed ----------------------------------------------------------------


def test_reason_without_libraries_says_what_to_install(tmp_path: Path) -> None:
    search = LibrarySearch(search_dirs=(str(tmp_path),), use_pathfinder=False, use_system_loader=False)
    reason = cuda.unavailable_reason(search)
    assert reason is not None and "\n" not in reason
    assert reason.startswith("target cuda needs an NVIDIA GPU: ")
    assert "libcudart.so.12" in reason and "pip install 'pyocc[cuda]'" in reason


def test_load_without_libraries_is_a_pyocc_error(tmp_path: Path) -> None:
    search = LibrarySearch(search_dirs=(str(tmp_path),), use_pathfinder=False, use_system_loader=False)
    with pytest.raises(cuda.PyoccError, match=r"not installed.*pyocc\[cuda\]"):
        cuda.CudaLibraries.load(search)


def test_a_file_that_does_not_load_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "nvidia/cuda_runtime/lib/libcudart.so.12"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not an ELF file")
    search = LibrarySearch(search_dirs=(str(tmp_path),), use_pathfinder=False, use_system_loader=False)
    with pytest.raises(cuda.PyoccError, match="does not load") as error:
        cuda.CudaLibraries.load(search)
    assert str(broken) in str(error.value)


def test_reason_never_raises() -> None:
    reason = cuda.cuda_unavailable_reason()
    assert reason is None or (reason.startswith("target cuda needs an NVIDIA GPU: ") and "\n" not in reason)


# -- stand-in libraries ----------------------------------------------------------------

_CUDART_EXTRA = r"""
#include <stdlib.h>
int cudaGetDeviceCount(int *count) {
    const char *status = getenv("FAKE_CUDA_STATUS"), *devices = getenv("FAKE_CUDA_DEVICES");
    *count = devices ? atoi(devices) : 1;
    return status ? atoi(status) : 0;
}
int cudaRuntimeGetVersion(int *version) { *version = %(major)d080; return 0; }
"""
_CUDNN_EXTRA = r"""
#include <dlfcn.h>
#include <stddef.h>
size_t cudnnGetVersion(void) { return 91001; }
size_t cudnnGetCudartVersion(void) { return %(major)d080; }
/* like cuDNN 9's shim: the convolution part is dlopened by bare name on first use */
int cudnnCreateConvolutionDescriptor(void *desc) {
    void *part = dlopen("libcudnn_cnn.so.9", RTLD_NOW);
    int (*entry)(void) = part ? (int (*)(void))dlsym(part, "fake_cnn_entry") : NULL;
    return entry ? entry() : 4000;
}
"""
_DRIVER_EXTRA = r"""
int cuDriverGetVersion(int *version) { *version = 13000; return 0; }
"""
_CUBLAS_EXTRA = r"""
int cublasGetProperty(int type, int *value) { *value = type == 0 ? %(major)d : type == 1 ? 9 : 1; return 0; }
"""
_CUSTOM = {"cudaGetDeviceCount", "cudaRuntimeGetVersion", "cudnnCreateConvolutionDescriptor"}


def _stubs(library: str, omit: str = "") -> str:
    """C stubs returning success for every cuda_api function of `library`."""
    return "".join(f"int {f.name}(void) {{ return 0; }}\n" for f in cuda_api.FUNCTIONS
                   if f.library == library and f.name not in _CUSTOM and f.name != omit)


def _compile(source: str, out: Path, soname: str, libs: tuple[str, ...] = ()) -> None:
    """Build a shared library with soname `soname`; `libs` are DT_NEEDED
    sonames found in `out`'s folder at link time (no rpath: like the wheels'
    cuDNN parts, they resolve only when loaded already)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(out.suffix + ".c")
    src.write_text(source)
    cmd = ["cc", "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{soname}", f"-L{out.parent}"]
    cmd += [f"-l:{lib}" for lib in libs] + ["-ldl"]
    subprocess.run(cmd, check=True, capture_output=True)
    src.unlink()


def _build(folder: Path, major: int, omit: str = "", cudnn_parts: tuple[str, ...] = ("graph", "ops", "cnn")) -> dict[str, Path]:
    """Stand-ins for one CUDA release in `folder`: name -> file."""
    built = {
        "cudart": folder / f"libcudart.so.{major}",
        "cublasLt": folder / f"libcublasLt.so.{major}",
        "cublas": folder / f"libcublas.so.{major}",
        "cudnn": folder / "libcudnn.so.9",
        "cuda": folder / "libcuda.so.1",
    }
    _compile(_DRIVER_EXTRA + _stubs("cuda", omit), built["cuda"], built["cuda"].name)
    _compile(_CUDART_EXTRA % {"major": major} + _stubs("cudart", omit), built["cudart"], built["cudart"].name)
    _compile("int fake_cublaslt(void) { return 0; }\n", built["cublasLt"], built["cublasLt"].name)
    _compile(_CUBLAS_EXTRA % {"major": major} + _stubs("cublas", omit), built["cublas"], built["cublas"].name)
    _compile(_CUDNN_EXTRA % {"major": major} + _stubs("cudnn", omit), built["cudnn"], "libcudnn.so.9")
    # ops first; graph and cnn need it (graph comes first in CUDNN_PARTS: a second pass loads it)
    if "ops" in cudnn_parts:
        _compile("int fake_ops_entry(void) { return 0; }\n", folder / "libcudnn_ops.so.9", "libcudnn_ops.so.9")
    for part in ("graph", "cnn"):
        if part in cudnn_parts:
            name = f"libcudnn_{part}.so.9"
            _compile(f"int fake_ops_entry(void);\nint fake_{part}_entry(void) {{ return fake_ops_entry(); }}\n",
                     folder / name, name, libs=("libcudnn_ops.so.9",))
    return built


def _place(files: dict[str, Path], site: Path, layout: dict[str, str]) -> Path:
    """Copy built libraries into a site-packages-like folder: name -> the
    wheel's lib folder (e.g. "nvidia/cublas/lib"); the cuDNN parts go with cudnn."""
    for name, folder in layout.items():
        target = site / folder
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(files[name], target / files[name].name)
        if name == "cudnn":
            for part in files[name].parent.glob("libcudnn_*.so.9"):
                shutil.copy2(part, target / part.name)
    return site


# the driver's libcuda.so.1 is no wheel's: the real one is found by the system loader, which these
# tests turn off so that no real library is mixed in; the stand-in sits where the wheel search finds it
CU12_LAYOUT = {"cudart": "nvidia/cuda_runtime/lib", "cublasLt": "nvidia/cublas/lib", "cublas": "nvidia/cublas/lib",
               "cudnn": "nvidia/cudnn/lib", "cuda": "nvidia/driver_stand_in/lib"}
CU13_LAYOUT = {"cudart": "nvidia/cu13/lib", "cublasLt": "nvidia/cu13/lib", "cublas": "nvidia/cu13/lib",
               "cudnn": "nvidia/cudnn/lib", "cuda": "nvidia/driver_stand_in/lib"}

_PROBE = r"""
import ctypes, json, sys
from pyocc.runtime import cuda
site, what = sys.argv[1], sys.argv[2]
search = cuda.LibrarySearch(search_dirs=(site,), use_pathfinder=False, use_system_loader=False)
out = {}
if what == "pathfinder":  # a stand-in cuda.pathfinder that knows where the libraries are; no wheel search
    import os, types
    def load_nvidia_dynamic_lib(name):
        for root, _, files in os.walk(site):
            for f in files:
                if f.startswith(f"lib{name}.so."):
                    return types.SimpleNamespace(abs_path=os.path.join(root, f))
        raise RuntimeError(f"{name} not found")
    sys.modules["cuda"] = types.ModuleType("cuda")
    sys.modules["cuda.pathfinder"] = types.SimpleNamespace(load_nvidia_dynamic_lib=load_nvidia_dynamic_lib)
    search = cuda.LibrarySearch(search_dirs=(), use_pathfinder=True, use_system_loader=False)
    what = "load"
if what == "reason":
    out["reason"] = cuda.unavailable_reason(search)
elif what == "unpreloaded":
    shim = ctypes.CDLL(site + "/nvidia/cudnn/lib/libcudnn.so.9")
    out["conv_status"] = shim.cudnnCreateConvolutionDescriptor(None)
else:
    try:
        libraries = cuda.CudaLibraries.load(search)
        symbols = libraries.symbols()
    except cuda.PyoccError as e:
        out["error"] = str(e)
    else:
        out["paths"] = libraries.paths
        out["found_via"] = libraries.found_via
        out["parts"] = libraries.cudnn_parts
        out["symbols"] = sorted(symbols)
        conv = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(symbols["cudnnCreateConvolutionDescriptor"])
        out["conv_status"] = conv(None)
        out["versions"] = libraries.versions()
        out["devices"] = libraries.device_count()
print(json.dumps(out))
"""


def _probe(site: Path, what: str = "load", **env: str) -> dict:
    """Run _PROBE in a fresh interpreter; its JSON answer."""
    result = subprocess.run([sys.executable, "-c", _PROBE, str(site), what], capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc) to build stand-in libraries")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """Stand-in libraries: a complete CUDA 12 set, a CUDA 13 set, one whose
    cuBLAS lacks a function, one whose cuDNN lacks libcudnn_cnn.so.9."""
    root = tmp_path_factory.mktemp("stand_ins")
    return {
        "cu12": _build(root / "cu12", 12),
        "cu13": _build(root / "cu13", 13),
        "no_gemm": _build(root / "no_gemm", 12, omit="cublasSgemmStridedBatched"),
        "no_cnn": _build(root / "no_cnn", 12, cudnn_parts=("graph", "ops")),
    }


@needs_cc
def test_loads_cuda_12_wheels_and_binds_every_symbol(stand_ins: dict, tmp_path: Path) -> None:
    site = _place(stand_ins["cu12"], tmp_path, CU12_LAYOUT)
    out = _probe(site)
    assert "error" not in out, out["error"]
    assert out["paths"]["cudart"] == str(site / "nvidia/cuda_runtime/lib/libcudart.so.12")
    assert out["paths"]["cudnn"] == str(site / "nvidia/cudnn/lib/libcudnn.so.9")
    assert out["symbols"] == sorted(f.name for f in cuda_api.FUNCTIONS)
    assert sorted(Path(p).name for p in out["parts"]) == sorted(cuda.CUDNN_REQUIRED_PARTS)
    assert out["conv_status"] == 0  # the shim found libcudnn_cnn.so.9 by bare name
    assert out["versions"] == {"cudart": 12080, "driver": 13000, "cudnn": 91001, "cudnn_built_for_cudart": 12080,
                               "cublas": 120901}
    assert out["devices"] == 1


@needs_cc
def test_cuda_pathfinder_is_asked_first(stand_ins: dict, tmp_path: Path) -> None:
    # the stand-in pathfinder returns files under a folder the wheel search is not given
    site = _place(stand_ins["cu12"], tmp_path, {k: f"elsewhere/{k}" for k in CU12_LAYOUT})
    out = _probe(site, "pathfinder")
    assert "error" not in out, out["error"]
    assert set(out["found_via"].values()) == {"cuda-pathfinder"}
    assert out["paths"]["cublas"] == str(site / "elsewhere/cublas/libcublas.so.12")
    assert out["conv_status"] == 0  # the parts beside a shim pathfinder found are preloaded too


@needs_cc
def test_without_preloading_the_shim_does_not_find_its_parts(stand_ins: dict, tmp_path: Path) -> None:
    # the negative twin of the test above: this is what preloading fixes
    site = _place(stand_ins["cu12"], tmp_path, CU12_LAYOUT)
    assert _probe(site, "unpreloaded")["conv_status"] == 4000


@needs_cc
def test_loads_cuda_13_wheels(stand_ins: dict, tmp_path: Path) -> None:
    site = _place(stand_ins["cu13"], tmp_path, CU13_LAYOUT)
    out = _probe(site)
    assert "error" not in out, out["error"]
    assert {k: Path(v).name for k, v in out["paths"].items()} == {
        "cudart": "libcudart.so.13", "cublasLt": "libcublasLt.so.13", "cublas": "libcublas.so.13",
        "cudnn": "libcudnn.so.9", "cuda": "libcuda.so.1"}
    assert out["conv_status"] == 0


@needs_cc
def test_prefers_cuda_12_when_both_are_installed(stand_ins: dict, tmp_path: Path) -> None:
    _place(stand_ins["cu13"], tmp_path, CU13_LAYOUT)
    site = _place(stand_ins["cu12"], tmp_path, CU12_LAYOUT)
    out = _probe(site)
    assert {Path(v).name for k, v in out["paths"].items() if k not in ("cudnn", "cuda")} == {
        "libcudart.so.12", "libcublasLt.so.12", "libcublas.so.12"}


@needs_cc
def test_runtime_and_cublas_of_different_releases_are_refused(stand_ins: dict, tmp_path: Path) -> None:
    _place(stand_ins["cu12"], tmp_path, {k: CU12_LAYOUT[k] for k in ("cudart", "cudnn", "cuda")})
    site = _place(stand_ins["cu13"], tmp_path, {"cublasLt": "nvidia/cu13/lib", "cublas": "nvidia/cu13/lib"})
    error = _probe(site)["error"]
    assert "libcublasLt.so.13" in error and "does not match the CUDA runtime libcudart.so.12" in error


@needs_cc
def test_a_missing_symbol_names_it_and_the_file(stand_ins: dict, tmp_path: Path) -> None:
    site = _place(stand_ins["no_gemm"], tmp_path, CU12_LAYOUT)
    error = _probe(site)["error"]
    assert error.startswith("cublasSgemmStridedBatched is missing from ")
    assert str(site / "nvidia/cublas/lib/libcublas.so.12") in error


@needs_cc
def test_without_the_driver_library_says_to_install_the_driver(stand_ins: dict, tmp_path: Path) -> None:
    site = _place(stand_ins["cu12"], tmp_path, {k: v for k, v in CU12_LAYOUT.items() if k != "cuda"})
    error = _probe(site)["error"]
    assert error == "the NVIDIA driver's CUDA library (libcuda.so.1) was not found: install the NVIDIA driver"


@needs_cc
def test_a_missing_cudnn_part_is_named(stand_ins: dict, tmp_path: Path) -> None:
    site = _place(stand_ins["no_cnn"], tmp_path, CU12_LAYOUT)
    error = _probe(site)["error"]
    assert "libcudnn_cnn.so.9" in error and "pyocc[cuda]" in error


@needs_cc
@pytest.mark.parametrize(("env", "expected"), [
    ({}, None),
    ({"FAKE_CUDA_STATUS": "100"}, "no CUDA device found (cudaGetDeviceCount returned 100 cudaErrorNoDevice)"),
    ({"FAKE_CUDA_STATUS": "35"}, "no NVIDIA driver found, or one too old for this CUDA runtime "
                                 "(cudaGetDeviceCount returned 35 cudaErrorInsufficientDriver)"),
    ({"FAKE_CUDA_DEVICES": "0"}, "no CUDA device found (cudaGetDeviceCount found 0 devices)"),
])
def test_reason_from_the_device_count(stand_ins: dict, tmp_path: Path, env: dict[str, str],
                                      expected: str | None) -> None:
    site = _place(stand_ins["cu12"], tmp_path, CU12_LAYOUT)
    reason = _probe(site, "reason", **env)["reason"]
    assert reason == (None if expected is None else "target cuda needs an NVIDIA GPU: " + expected)


# -- on a GPU -------------------------------------------------------------------------------


@pytest.mark.gpu
def test_real_libraries_bind_every_symbol() -> None:
    libraries = cuda.CudaLibraries.load()
    symbols = libraries.symbols()
    assert set(symbols) == {f.name for f in cuda_api.FUNCTIONS}
    assert all(address > 0 for address in symbols.values())
    versions = libraries.versions()
    assert versions["cudnn"] // 10000 == 9, versions
    # cuDNN must be built for the CUDA release of the runtime it runs with
    assert versions["cudnn_built_for_cudart"] // 1000 == cuda_major(libraries.paths["cudart"]), versions


def _call(symbols: dict[str, int], name: str, *args: object) -> int:
    """Call a cuda_api function through its address, as generated code does."""
    return cuda_api.BY_NAME[name].c_prototype()(symbols[name])(*args)


@pytest.mark.gpu
def test_real_libraries_answer_through_the_bound_addresses() -> None:
    symbols = cuda.CudaLibraries.load().symbols()
    pointer = ctypes.c_void_p()
    assert _call(symbols, "cudaMalloc", ctypes.addressof(pointer), 1 << 20) == 0 and pointer.value
    assert _call(symbols, "cudaFree", pointer) == 0
    handle, desc = ctypes.c_void_p(), ctypes.c_void_p()
    assert _call(symbols, "cudnnCreate", ctypes.addressof(handle)) == 0
    # lives in libcudnn_cnn.so.9: fails with "Invalid handle" unless the parts were found
    assert _call(symbols, "cudnnCreateConvolutionDescriptor", ctypes.addressof(desc)) == 0
    assert _call(symbols, "cudnnDestroyConvolutionDescriptor", desc) == 0
    assert _call(symbols, "cudnnDestroy", handle) == 0
    blas = ctypes.c_void_p()
    assert _call(symbols, "cublasCreate_v2", ctypes.addressof(blas)) == 0
    assert _call(symbols, "cublasDestroy_v2", blas) == 0

"""OpenBLAS for the host's native kernels: where it is and how to bind it.

The generated code of the matrix products and convolutions calls
`scipy_cblas_sgemm` (and `scipy_cblas_sgemv`) from the OpenBLAS of the `scipy-openblas32` wheel
(32-bit integers, every symbol prefixed `scipy_`, so it never clashes with
the OpenBLAS numpy bundles). The JIT binds the symbols to the loaded
library (`symbols()`); a shared library links it (`link_flags()`). The
library runs on one thread unless told otherwise (`set_threads`; a model
compiled for several threads sets it to one in NAME_init too, and splits
its matrix products between its own threads instead).

Like all of pyocc.runtime, this module never imports xDSL.
"""

from __future__ import annotations

import ctypes
import os

from pyocc.errors import PyoccError

#: the BLAS functions generated code may call (the thread setter: models
#: compiled for several threads set OpenBLAS to one thread when they start)
BLAS_SYMBOLS = ("scipy_cblas_sgemm", "scipy_cblas_sgemv", "scipy_openblas_set_num_threads")
#: threads the BLAS runs on unless `set_threads` says otherwise
DEFAULT_THREADS = 1

_library: ctypes.CDLL | None = None


def library_dir() -> str:
    """The directory of the OpenBLAS shared library (scipy-openblas32's lib/)."""
    try:
        # on first use: only native matrix kernels need OpenBLAS, and a missing wheel is one line, not an ImportError
        import scipy_openblas32
    except ImportError:
        raise PyoccError("the host's native kernels need OpenBLAS: pip install scipy-openblas32") from None
    return str(scipy_openblas32.get_lib_dir())


def library_name() -> str:
    """The library's link name (`-l<name>`)."""
    import scipy_openblas32  # present: library_dir() ran first and said so in one line otherwise

    return str(scipy_openblas32.get_library())


def library_path() -> str:
    """The full path of the OpenBLAS shared library."""
    return os.path.join(library_dir(), f"lib{library_name()}.so")


def load() -> ctypes.CDLL:
    """The OpenBLAS library, loaded once (globally, so the JIT can find its
    symbols too) and set to `DEFAULT_THREADS` threads."""
    global _library
    if _library is None:
        _library = ctypes.CDLL(library_path(), mode=ctypes.RTLD_GLOBAL)
        _library.scipy_openblas_set_num_threads(ctypes.c_int(DEFAULT_THREADS))
    return _library


def set_threads(threads: int) -> None:
    """Run the BLAS on `threads` threads from now on."""
    if threads < 1:
        raise PyoccError(f"BLAS threads must be at least 1, got {threads}")
    load().scipy_openblas_set_num_threads(ctypes.c_int(threads))


def symbols() -> dict[str, int]:
    """Address of each of `BLAS_SYMBOLS` in the loaded library."""
    library = load()
    return {name: ctypes.cast(getattr(library, name), ctypes.c_void_p).value or 0 for name in BLAS_SYMBOLS}


def link_flags() -> list[str]:
    """What a shared library that calls the BLAS links with."""
    directory = library_dir()
    return [f"-L{directory}", f"-l{library_name()}", f"-Wl,-rpath,{directory}"]

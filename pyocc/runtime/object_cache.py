"""The on-disk cache of JIT-compiled object code (`PYOCC_CACHE_DIR`).

LLVM's optimiser and code generator are most of what compiling a model
costs. With `PYOCC_CACHE_DIR` set to a directory, pyocc.runtime.jit keeps
the object code MCJIT generates for each module there, under a key made
from everything the code depends on (`cache_key`: the IR text as it goes
into the optimiser, the optimisation level, the code model, the target
triple, CPU and features, the LLVM and llvmlite versions and
CACHE_FORMAT), and a later compile of the same key, in this process or
any other, loads that object instead of optimising and generating code
again. Unset or empty, nothing is cached.

Off unless asked for: a cached object is machine code the process runs
without having compiled it, so its directory must be one the user chose
and trusts (not a shared or world-writable one), and pyocc writes nothing
into a home directory unasked.

Entries are written atomically (a temporary file in the directory, then
`os.replace`), so processes may share one directory: a reader sees a whole
object or none. The directory is kept to about CACHE_SIZE_LIMIT bytes: a
store that takes it over the limit removes the least recently used
entries (a hit refreshes an entry's time) until it is under three
quarters of it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from pyocc.errors import PyoccError

#: the environment variable naming the cache directory
CACHE_DIR_VARIABLE = "PYOCC_CACHE_DIR"
#: bumped whenever what an entry holds or how its key is made changes, so
#: that no older pyocc's entry is ever read as this one's
CACHE_FORMAT = 3
#: the size the directory is kept to (about: processes sharing it each
#: count their own stores between the scans)
CACHE_SIZE_LIMIT = 512 * 1024 * 1024
#: the suffix of an entry's file
SUFFIX = ".o"

#: this process's lookups and stores: "hits", "misses", "stores"
stats: Counter[str] = Counter()

#: per directory: its size when last scanned plus what this process stored since
_sizes: dict[Path, int] = {}


def cache_dir() -> Path | None:
    """The cache directory `PYOCC_CACHE_DIR` names (made if missing), or
    None when it is unset or empty. PyoccError when it cannot be made."""
    value = os.environ.get(CACHE_DIR_VARIABLE, "")
    if not value:
        return None
    path = Path(value)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PyoccError(f"{CACHE_DIR_VARIABLE}={value} cannot be used as pyocc's compile cache "
                         f"({error.strerror}); set it to a writable directory, or unset it") from None
    return path


def cache_key(parts: Iterable[str]) -> str:
    """The entry name for a compile described by `parts` (each a string;
    the caller names everything the object code depends on): sha256 of
    CACHE_FORMAT and the parts, each preceded by its length, so that no
    two different lists of parts give one text."""
    digest = hashlib.sha256(f"pyocc-object-cache {CACHE_FORMAT}\n".encode())
    for part in parts:
        data = part.encode()
        digest.update(f"{len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()


def load(directory: Path, key: str) -> bytes | None:
    """The object stored under `key`, or None (counted as a hit or a miss)."""
    path = directory / f"{key}{SUFFIX}"
    try:
        data = path.read_bytes()
        os.utime(path)  # recently used: evicted last
    except FileNotFoundError:  # never stored, or evicted by another process just now
        stats["misses"] += 1
        return None
    stats["hits"] += 1
    return data


def store(directory: Path, key: str, data: bytes) -> None:
    """Keep `data` under `key`, atomically; then keep the directory to
    CACHE_SIZE_LIMIT. A directory that cannot be written to (full, read
    only) is skipped: the compile it would have saved already happened."""
    try:
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=SUFFIX)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.replace(temporary, directory / f"{key}{SUFFIX}")
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        return
    stats["stores"] += 1
    if directory not in _sizes:
        _sizes[directory] = _scan(directory)[1]
    else:
        _sizes[directory] += len(data)
    if _sizes[directory] > CACHE_SIZE_LIMIT:
        _sizes[directory] = _evict(directory, CACHE_SIZE_LIMIT * 3 // 4)


def _scan(directory: Path) -> tuple[list[tuple[float, int, Path]], int]:
    """The entries of `directory` (time last used, size, path) and their total size."""
    entries = []
    with os.scandir(directory) as scan:
        for entry in scan:
            if entry.name.endswith(SUFFIX) and not entry.name.startswith("."):
                try:
                    status = entry.stat()
                except FileNotFoundError:  # evicted by another process
                    continue
                entries.append((status.st_mtime, status.st_size, Path(entry.path)))
    return entries, sum(size for _, size, _ in entries)


def _evict(directory: Path, target: int) -> int:
    """Remove the least recently used entries of `directory` until its
    entries take at most `target` bytes; their size afterwards."""
    entries, total = _scan(directory)
    for _, size, path in sorted(entries):
        if total <= target:
            break
        try:
            path.unlink()
        except FileNotFoundError:  # another process evicted it first
            pass
        total -= size
    return total

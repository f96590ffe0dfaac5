"""Where the tools write: one check shared by `pyocc` and `pyocc-opt` that
an output path can be written before any work is done. Light on purpose:
`pyocc-opt` imports it at start-up."""

from __future__ import annotations

from pathlib import Path

from pyocc.errors import PyoccError


def check_output_path(path: str | Path) -> Path:
    """`path` as a Path, after checking that a file can be written there
    (its folder exists and is a folder): a user mistake is one line before
    any work is done, not a traceback or a linker's error after it."""
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise PyoccError(f"{path}: is a directory; give a file name")
    if not folder.exists():
        raise PyoccError(f"{path}: the folder '{folder}' does not exist; create it first or write elsewhere")
    if not folder.is_dir():
        raise PyoccError(f"{path}: '{folder}' is not a folder")
    return path

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


#: What `pyocc plan` writes, by format, and the file suffixes each may have
#: (the first is the one to suggest). An -o suffix picks the format.
PLAN_FORMATS: dict[str, tuple[str, ...]] = {
    "text": (".txt", ".text", ".log", ""),
    "json": (".json",),
    "svg": (".svg",),
    "html": (".html", ".htm"),
}


def plan_format(requested: str | None, output: str | None, text_only: str | None, stdout_is_terminal: bool) -> str:
    """The format `pyocc plan` writes: `--format` if given, else the one the
    -o file's suffix names, else text. A suffix that does not fit the format
    (SVG into plan.png, text into plan.html) and a page written to a terminal
    are refused in one line. `text_only` names the option (--explain,
    --liveness) that makes the output text whatever the format."""
    suffix = Path(output).suffix.lower() if output else None
    if suffix is not None and requested is None and text_only is None:
        requested = next((f for f, suffixes in PLAN_FORMATS.items() if suffix in suffixes), None)
        if requested is None:
            known = ", ".join(f"{f} ({'/'.join(x for x in xs if x)})" for f, xs in PLAN_FORMATS.items())
            raise PyoccError(f"{output}: pyocc plan cannot write '{suffix}' files; it writes {known}: "
                             "give -o one of these suffixes")
    fmt = "text" if text_only is not None else (requested or "text")
    if suffix is not None and suffix not in PLAN_FORMATS[fmt]:
        what = text_only or f"--format {fmt}"
        raise PyoccError(f"{output}: {what} writes {fmt}, not '{suffix}'; name the file "
                         f"{Path(output).with_suffix(PLAN_FORMATS[fmt][0]).name}"
                         + ("" if text_only else " or drop --format to follow the suffix"))
    if output is None and fmt in ("svg", "html") and stdout_is_terminal:
        raise PyoccError(f"--format {fmt} writes a picture, not text for the terminal; "
                         f"give -o plan.{fmt} (or pipe it: ... > plan.{fmt})")
    return fmt

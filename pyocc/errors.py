"""The one exception type for mistakes a user can make (bad file, unsupported
op, dynamic dimension, pool overflow, bad option). Tools print its message as
one line and exit non-zero; anything else escaping is a bug in pyocc."""


class PyoccError(Exception):
    """A user-facing error: the message names the problem and what to do."""


def one_line(error: BaseException) -> str:
    """The informative line of an exception, for tools that print one line.

    xDSL's errors often carry the whole module in their message, or a
    source excerpt: `file:line:col`, the source line, a caret line, then the
    message. This keeps `file:line:col: message` or the first line that says
    something, never the IR dump."""
    lines = [ln.rstrip() for ln in str(error).strip().splitlines() if ln.strip()]
    if not lines:
        return type(error).__name__
    for i, ln in enumerate(lines):
        if set(ln.strip()) <= {"^"} and i + 1 < len(lines):
            message = lines[i + 1].strip()
            location = lines[0].strip() if i >= 2 else ""
            return f"{location}: {message}" if location else message
    for ln in lines:
        stripped = ln.strip()
        if ("error" in stripped.lower() or ": " in stripped) and not stripped.startswith(("%", '"', "builtin.", "func.", "^")):
            return stripped
    return lines[0].strip()

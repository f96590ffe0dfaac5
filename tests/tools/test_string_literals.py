"""pyocc-opt's one-write string literals print exactly what xDSL's own
byte-by-byte method prints (pyocc/tools/string_literals.py)."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.dialects.builtin import StringAttr
from xdsl.printer import Printer

from pyocc.tools import string_literals

# xDSL's method, taken before any test can have installed ours.
XDSL_PRINT_BYTES_LITERAL = Printer.__dict__["print_bytes_literal"]
if XDSL_PRINT_BYTES_LITERAL is string_literals._print_bytes_literal:  # pragma: no cover
    raise RuntimeError("pyocc-opt's printer was installed before this test module was imported")

CASES = [
    "",
    "conv1",
    "relu 1/2",
    'a "quoted" name',
    "back\\slash",
    "new\nline\ttab\r\x00nul",
    "\x7f delete and ~ tilde",
    "non-ASCII: µs, π, 名前",
    "".join(chr(c) for c in range(128)),
]


def _printed(method, text: str) -> tuple[str, int, int]:
    """What `method` prints for `text`, and the printer's line and column after it."""
    out = StringIO()
    printer = Printer(stream=out)
    printer.print_string("x = ")
    method(printer, text.encode("utf-8"))
    return out.getvalue(), printer._current_line, printer._current_column


@pytest.mark.parametrize("text", CASES, ids=range(len(CASES)))
def test_one_write_prints_what_xdsl_prints(text: str) -> None:
    assert _printed(string_literals._print_bytes_literal, text) == _printed(XDSL_PRINT_BYTES_LITERAL, text)


def test_every_byte_value_is_escaped_as_xdsl_escapes_it() -> None:
    every = bytes(range(256))
    out = StringIO()
    XDSL_PRINT_BYTES_LITERAL(Printer(stream=out), every)
    assert string_literals.quoted(every) == out.getvalue()


def test_installed_printer_prints_string_attributes_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Printer, "print_bytes_literal", XDSL_PRINT_BYTES_LITERAL)
    string_literals.write_string_literals_at_once()
    writes: list[str] = []
    out = StringIO()
    printer = Printer(stream=out)
    monkeypatch.setattr(printer, "_write", writes.append)
    printer.print_attribute(StringAttr('layer "a"\\b'))
    assert "".join(writes) == '"layer \\22a\\22\\\\b"'
    assert len(writes) == 1

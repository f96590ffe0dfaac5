"""String literals printed in one write instead of one write per byte.

xDSL's `Printer.print_bytes_literal` escapes a string attribute byte by byte
and hands each byte to `print_string` on its own. The IR that pyocc-opt
prints is full of string attributes (op names, layer names, plan notes), so
printing the NPU schedule's 1.8 MB of IR made about 860,000 such calls.
This module builds the escaped literal first and prints it in one call.
The text is the same, byte for byte: the same escapes, and no newline can
appear inside a literal (a newline byte is printed as `\\0A`), so the
printer's line and column bookkeeping comes out the same too.
"""

from __future__ import annotations

from xdsl.printer import Printer


def _escape(byte: int) -> str:
    """How xDSL writes one byte inside a string literal: a backslash doubled,
    a quote and anything outside printable ASCII as `\\XX` (two hex digits)."""
    if byte == 0x5C:  # backslash
        return "\\\\"
    if byte < 0x20 or byte > 0x7E or byte == 0x22:  # control, non-ASCII, quote
        return f"\\{byte:02X}"
    return chr(byte)


ESCAPED: tuple[str, ...] = tuple(_escape(byte) for byte in range(256))
"""The escaped text of every byte value, looked up instead of matched."""


def quoted(bytestring: bytes) -> str:
    """`bytestring` as an MLIR string literal, quotes included."""
    return '"' + "".join(map(ESCAPED.__getitem__, bytestring)) + '"'


def _print_bytes_literal(self: Printer, bytestring: bytes) -> None:
    """Print `bytestring` as a string literal in one write (replaces xDSL's)."""
    self.print_string(quoted(bytestring))


def write_string_literals_at_once() -> None:
    """Make every xDSL `Printer` print string literals in one write.

    Called by pyocc-opt before it prints. Idempotent, and the printed text
    is unchanged (tests/tools/test_string_literals.py compares with xDSL's
    own method)."""
    Printer.print_bytes_literal = _print_bytes_literal  # type: ignore[method-assign]

"""Sizes and counts as people read them: one helper for every report,
picture and explanation, so 16 KiB is never printed as 0.02 MiB and one
buffer is never "1 buffers"."""

from __future__ import annotations

KIB, MIB, GIB = 2**10, 2**20, 2**30


def unit_for(n: int) -> tuple[str, int]:
    """The unit sizes up to `n` bytes read best in: GiB, MiB, KiB or B."""
    for name, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return name, size
    return "B", 1


def format_bytes(n: int, unit: tuple[str, int] | None = None) -> str:
    """`n` bytes in the unit that reads best (or in `unit`): 8.04 MiB,
    16.00 KiB, 160 B."""
    name, size = unit or unit_for(n)
    return f"{n} B" if size == 1 else f"{n / size:.2f} {name}"


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    """`1 buffer`, `2 buffers`, `0 ops`, `232,012 instructions`."""
    return f"{count:,} {noun if count == 1 else plural_noun or noun + 's'}"

"""Sizes in the unit that reads best and counts with the right noun, in
every report (text, picture, --explain)."""

from __future__ import annotations

from pyocc.api import MemoryReport, PoolReport
from pyocc.units import format_bytes, plural, unit_for


def test_sizes_read_in_their_own_unit() -> None:
    assert format_bytes(160) == "160 B"
    assert format_bytes(16384) == "16.00 KiB"
    assert format_bytes(5218304) == "4.98 MiB"
    assert format_bytes(3 * 2**30) == "3.00 GiB"
    assert format_bytes(512, unit_for(4096)) == "0.50 KiB"


def test_counts_agree_with_their_noun() -> None:
    assert [plural(n, "buffer") for n in (0, 1, 2)] == ["0 buffers", "1 buffer", "2 buffers"]
    assert plural(232012, "instruction") == "232,012 instructions"  # grouped like the reports' bytes


def test_the_text_report_uses_both() -> None:
    report = MemoryReport(model="m.onnx", memory="pool", planner="auto", activation_bytes=16384,
                          lower_bound_bytes=16384, naive_bytes=34880, weight_bytes=0, io_bytes=3112,
                          workspace_bytes=0, plan_ms=0.1,
                          pools=[PoolReport("sram", 16384, 2**20, 1, 100)], activation_traffic_bytes=100)
    text = str(report)
    assert "16,384 B     16.00 KiB" in text and "0.02 MiB" not in text
    assert "(limit 1,048,576 B, 1 buffer, 100.0% of activation traffic)" in text

"""tests/conftest.py's skip reporting: `-ra` does not list every skip (onnx's
node tests would print a few hundred lines), skips are counted by kind, and
`-rs` still lists each."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import hide_skip_lines, skip_reason_kind


def _configured(given: str, effective: str) -> str:
    reporter = SimpleNamespace(reportchars=effective)
    config = SimpleNamespace(option=SimpleNamespace(reportchars=given),
                             pluginmanager=SimpleNamespace(get_plugin=lambda name: reporter))
    hide_skip_lines(config)  # type: ignore[arg-type]
    return reporter.reportchars


@pytest.mark.parametrize("given, effective, kept", [
    ("a", "wsxXEf", "wxXEf"),  # -ra: everything but the skips
    ("A", "wPpsxXEf", "wPpxXEf"),
    ("fE", "wfE", "wfE"),  # the default (addopts) lists no skips anyway
    ("s", "ws", "ws"),  # asked for by name: listed
    ("as", "wsxXEf", "wsxXEf"),
    ("aS", "wsxXEf", "wsxXEf"),
])
def test_skips_are_listed_only_when_asked_for_by_name(given: str, effective: str, kept: str) -> None:
    assert _configured(given, effective) == kept


@pytest.mark.parametrize("reason, kind", [
    ("Skipped: unsupported op: GridSample", "unsupported op"),
    ("element type: BFLOAT16 is not supported by pyocc", "element type"),
    ("target cuda needs an NVIDIA GPU (no libcudart)", "target cuda needs an NVIDIA GPU"),
])
def test_skip_reasons_are_counted_by_kind(reason: str, kind: str) -> None:
    assert skip_reason_kind(reason) == kind

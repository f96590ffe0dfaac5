"""docs/guide.md cannot drift from the code it documents.

* every bad-input message the tests check (tests/tools/test_bad_input.py's
  CASES and the frontend's BAD_INPUT_MESSAGES) appears in a row of the
  guide's troubleshooting table, so a reworded message fails here until the
  table shows it;
* every option of every `pyocc` subcommand, of `plan-json` and pyocc's own
  `pyocc-opt` options are named in the guide;
* every registered pass is in the guide's pass table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pyocc.planning.cli import _parser as plan_json_parser
from pyocc.registry import PYOCC_PASSES
from pyocc.tools.cli import build_parser
from tests.frontend.test_onnx_import import BAD_INPUT_MESSAGES
from tests.tools.test_bad_input import CASES

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"
TEXT = GUIDE.read_text()


def troubleshooting_rows(text: str) -> list[str]:
    """The table rows of the guide's troubleshooting section."""
    section = text.split("## Troubleshooting", 1)[1]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| message")]


MESSAGES = sorted({case[3] for case in CASES.values()} | {message for _, message in BAD_INPUT_MESSAGES})


def test_the_tables_are_there() -> None:
    """The checks below look at real rows, not at an empty section."""
    assert len(troubleshooting_rows(TEXT)) >= 60
    assert len(MESSAGES) >= 15


@pytest.mark.parametrize("message", MESSAGES)
def test_bad_input_message_is_in_the_troubleshooting_table(message: str) -> None:
    rows = troubleshooting_rows(TEXT)
    assert any(message in row for row in rows), f"docs/guide.md's troubleshooting table lacks {message!r}"


def long_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every `--option` of a parser and of its subcommands (help excluded)."""
    options: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                options |= long_options(sub)
        options |= {s for s in action.option_strings if s.startswith("--") and s != "--help"}
    return options


def test_every_command_option_is_documented() -> None:
    options = long_options(build_parser()) | long_options(plan_json_parser())
    assert {"--memory", "--planner", "--inputs", "--algorithm"} <= options
    missing = sorted(o for o in options if f"`{o}" not in TEXT)
    assert not missing, f"docs/guide.md does not document {missing}"


def test_every_pyocc_opt_option_of_pyocc_is_documented() -> None:
    """pyocc-opt's own options (those xdsl-opt does not have)."""
    from xdsl.xdsl_opt_main import xDSLOptMain

    from pyocc.tools.opt import PyoccOptMain

    def options_of(tool: type[xDSLOptMain]) -> set[str]:
        main = object.__new__(tool)  # no __init__: it would parse sys.argv
        main.available_frontends, main.available_passes, main.available_targets = {}, {}, {}
        parser = argparse.ArgumentParser()
        main.register_all_arguments(parser)
        return long_options(parser)

    added = options_of(PyoccOptMain) - options_of(xDSLOptMain)
    assert "--shape" in added
    missing = sorted(o for o in added if f"`{o}" not in TEXT)
    assert not missing, f"docs/guide.md does not document pyocc-opt's {missing}"


@pytest.mark.parametrize("name", sorted(PYOCC_PASSES))
def test_every_pass_is_in_the_pass_table(name: str) -> None:
    assert f"| `{name}` |" in TEXT, f"docs/guide.md's pass table lacks {name}"


def test_every_memory_report_field_is_documented() -> None:
    """The report table names every field of MemoryReport (its JSON keys)."""
    import dataclasses

    from pyocc.api import MemoryReport

    fields = [f.name for f in dataclasses.fields(MemoryReport)] + ["fast_pool_traffic_fraction"]
    section = TEXT.split("## The memory report", 1)[1].split("\n## ", 1)[0]
    missing = [f for f in fields if f"`{f}`" not in section]
    assert not missing, f"docs/guide.md's memory report table lacks {missing}"

"""Every verifier message of the dnn dialect has a case in
filecheck/dialects/dnn/invalid.mlir: a new `raise VerifyException(...)` in
pyocc/dialects/dnn/ops.py fails here until the invalid-IR file shows it.
The traits' own checks (Targets, WritesInPlace, AliasesOperand) are about
op definitions, not IR, and are tested in test_dnn_op_facts.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OPS = ROOT / "pyocc" / "dialects" / "dnn" / "ops.py"
CHECKS = "\n".join(line for line in (ROOT / "filecheck" / "dialects" / "dnn" / "invalid.mlir").read_text().splitlines()
                   if line.startswith("// CHECK"))
#: classes whose checks verify an op's definition, not the IR
DEFINITION_CHECKS = {"Targets", "WritesInPlace", "AliasesOperand"}


def verifier_messages() -> list[tuple[int, list[str]]]:
    """(line, the message's literal fragments) per `raise VerifyException(...)` in ops.py."""
    tree = ast.parse(OPS.read_text())
    found = []
    for cls in [None, *[n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]]:
        if cls is not None and cls.name in DEFINITION_CHECKS:
            continue
        body = tree.body if cls is None else cls.body
        for statement in body:
            if cls is None and isinstance(statement, ast.ClassDef):
                continue
            for node in ast.walk(statement):
                if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                        and getattr(node.exc.func, "id", None) == "VerifyException"):
                    message = node.exc.args[0]
                    parts = message.values if isinstance(message, ast.JoinedStr) else [message]
                    fragments = [p.value.strip() for p in parts if isinstance(p, ast.Constant) and p.value.strip()]
                    found.append((node.lineno, fragments))
    return found


MESSAGES = verifier_messages()


def test_the_messages_are_found() -> None:
    assert len(MESSAGES) >= 25


@pytest.mark.parametrize(("line", "fragments"), MESSAGES, ids=[f"ops.py:{line}" for line, _ in MESSAGES])
def test_every_verifier_message_has_an_invalid_ir_case(line: int, fragments: list[str]) -> None:
    missing = [f for f in fragments if f not in CHECKS]
    assert not missing, f"ops.py:{line}: no CHECK line of invalid.mlir shows {missing}"

"""The in-process lit runner (tests/lit_inprocess.py) fails where lit
fails: a FileCheck mismatch, a `not` on a command that succeeds, a failing
command piped into one that passes (pipefail); and it leaves no state of
one call behind for the next."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from xdsl.ir import Attribute

from tests.lit_inprocess import LitFileError, run_lit_file, run_lines, substitute

MODULE = """
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  func.return %x : tensor<2xf32>
}
"""


def _lit_file(tmp_path: Path, runs: list[str], checks: str = "// CHECK: func.func @f") -> Path:
    path = tmp_path / "case.mlir"
    path.write_text("".join(f"// RUN: {run}\n" for run in runs) + checks + "\n" + MODULE)
    return path


def test_a_passing_file_passes(tmp_path: Path) -> None:
    path = _lit_file(tmp_path, ["pyocc-opt %s | pyocc-opt | filecheck %s",
                                "pyocc-opt %s > %t.a.mlir && pyocc-opt %t.a.mlir > %t.b.mlir && diff %t.a.mlir %t.b.mlir",
                                "not pyocc-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=ERR"],
                     "// CHECK: func.func @f\n// ERR: unknown pass 'no-such-pass'")
    passed, log = run_lit_file(path, tmp_path / "run")
    assert passed, log


def test_a_check_that_does_not_match_fails(tmp_path: Path) -> None:
    path = _lit_file(tmp_path, ["pyocc-opt %s | filecheck %s"], "// CHECK: func.func @g")
    passed, log = run_lit_file(path, tmp_path / "run")
    assert not passed
    assert "RUN line 1 exited with status 1" in log
    assert "@g" in log


def test_files_that_differ_fail_diff(tmp_path: Path) -> None:
    path = _lit_file(tmp_path, ["pyocc-opt %s > %t.a.mlir && pyocc-opt %s --print-op-generic > %t.b.mlir "
                                "&& diff %t.a.mlir %t.b.mlir"])
    passed, log = run_lit_file(path, tmp_path / "run")
    assert not passed
    assert "+++" in log


def test_not_on_a_command_that_succeeds_fails(tmp_path: Path) -> None:
    passed, log = run_lit_file(_lit_file(tmp_path, ["not pyocc-opt %s"]), tmp_path / "run")
    assert not passed, log


def test_a_failing_command_fails_its_pipeline(tmp_path: Path) -> None:
    """pipefail: filecheck alone would pass (only a CHECK-NOT on empty input)."""
    path = _lit_file(tmp_path, ["pyocc-opt %s -p no-such-pass | filecheck %s --check-prefix=NONE"],
                     "// NONE-NOT: func.func")
    passed, log = run_lit_file(path, tmp_path / "run")
    assert not passed
    assert "unknown pass 'no-such-pass'" in log


def test_later_lines_do_not_run_after_a_failure(tmp_path: Path) -> None:
    path = _lit_file(tmp_path, ["not pyocc-opt %s", "pyocc-opt %s > %t.never"])
    passed, _ = run_lit_file(path, tmp_path / "run")
    assert not passed
    assert not (tmp_path / "run" / "Output" / "case.mlir.tmp.never").exists()


def test_disable_verify_does_not_outlive_its_call(tmp_path: Path) -> None:
    """xdsl-opt's --disable-verify replaces Attribute.__post_init__ for the whole process."""
    before = Attribute.__post_init__
    passed, log = run_lit_file(_lit_file(tmp_path, ["pyocc-opt %s --disable-verify | filecheck %s"]), tmp_path / "run")
    assert passed, log
    assert Attribute.__post_init__ is before


def test_unknown_forms_are_refused(tmp_path: Path) -> None:
    """What the runner cannot do as lit does is an error, never a silent pass."""
    path = tmp_path / "case.mlir"
    path.write_text("// REQUIRES: cuda\n// RUN: pyocc-opt %s\n")
    with pytest.raises(LitFileError, match="REQUIRES"):
        run_lines(path)
    with pytest.raises(LitFileError, match="%{pathsep}"):
        substitute("pyocc-opt a%{pathsep}b", path, tmp_path / "t")
    assert substitute("pyocc-opt %S/x.mlir", path, tmp_path / "t") == f"pyocc-opt {tmp_path}/x.mlir"  # lit's %S: the file's folder
    with pytest.raises(LitFileError, match="no RUN line"):
        run_lit_file(_lit_file(tmp_path, []), tmp_path / "run")


def test_a_local_lit_config_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """lit.local.cfg can mark a folder unsupported or add substitutions, which this runner would not see."""
    monkeypatch.setattr("tests.lit_inprocess.FILECHECK_ROOT", tmp_path)
    (tmp_path / "lit.local.cfg").write_text("config.unsupported = True\n")
    with pytest.raises(LitFileError, match="lit.local.cfg"):
        run_lit_file(_lit_file(tmp_path, ["pyocc-opt %s"]), tmp_path / "run")


def test_substitutions_are_lits() -> None:
    """%python before %s and %t (lit applies lit.cfg's substitutions first), %% a percent sign."""
    line = substitute("%python %s %t.onnx 100%%", Path("/a/b.py"), Path("/o/b.py.tmp"))
    assert line == f"{sys.executable} /a/b.py /o/b.py.tmp.onnx 100%"

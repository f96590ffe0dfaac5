"""When pyocc.api.lower runs the op verifiers: on the imported module and
on the lowered one, not after every pass; and when a pass breaks the IR,
the error still names that pass (lower runs again, verifying after each)."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from pyocc.api import lower
from pyocc.dialects.dnn import ops as d
from pyocc.pipelines import Options
from pyocc.rewrites.dnn_insert_memory_ops import DnnInsertMemoryOpsPass
from pyocc.rewrites.dnn_memory_pool import DnnMemoryPoolPass
from pyocc.examples.tiny_cnn import build as tiny_cnn


@pytest.fixture
def verifications(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the module verifications (one entry per call)."""
    calls: list[int] = []
    verify = ModuleOp.verify

    def counted(self: ModuleOp, *args: object, **kwargs: object) -> None:
        calls.append(1)
        verify(self, *args, **kwargs)

    monkeypatch.setattr(ModuleOp, "verify", counted)
    return calls


def test_a_lowering_verifies_the_import_and_the_result(verifications: list[int]) -> None:
    lower(tiny_cnn())
    assert len(verifications) == 2


def test_verify_each_verifies_after_every_pass(verifications: list[int]) -> None:
    lower(tiny_cnn(), options=Options(verify_each=True))
    assert len(verifications) > 5  # the import, then one a pass


def test_no_verifier_runs_with_verify_off(verifications: list[int]) -> None:
    lower(tiny_cnn(), options=Options(verify=False))
    assert verifications == []


@pytest.fixture
def broken_malloc(monkeypatch: pytest.MonkeyPatch) -> None:
    """dnn-insert-memory-ops, then one of its buffers made a byte long:
    IR the malloc verifier refuses."""
    apply = DnnInsertMemoryOpsPass.apply

    def breaking(self: DnnInsertMemoryOpsPass, ctx: object, module: ModuleOp) -> None:
        apply(self, ctx, module)
        malloc = next(op for op in module.walk() if isinstance(op, d.MallocOp))
        malloc.size = d.i64_attr(1)

    monkeypatch.setattr(DnnInsertMemoryOpsPass, "apply", breaking)


@pytest.mark.usefixtures("broken_malloc")
def test_a_pass_that_breaks_the_ir_is_named() -> None:
    with pytest.raises(VerifyException, match=r"^after pass dnn-insert-memory-ops: dnn\.malloc: size 1 is smaller"):
        lower(tiny_cnn())


@pytest.mark.usefixtures("broken_malloc")
def test_with_the_verifiers_off_the_broken_ir_goes_through() -> None:
    module, _ = lower(tiny_cnn(), options=Options(memory="lazy", verify=False))
    assert min(op.size.value.data for op in module.walk() if isinstance(op, d.MallocOp)) == 1


@pytest.fixture
def failing_pool_pass(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """dnn-memory-pool stopped by an internal error (a bug, not the user's
    input); counts its runs."""
    runs: list[int] = []

    def failing(self: DnnMemoryPoolPass, ctx: object, module: ModuleOp) -> None:
        runs.append(1)
        raise RuntimeError("the pool pass failed")

    monkeypatch.setattr(DnnMemoryPoolPass, "apply", failing)
    return runs


def test_an_internal_error_is_raised_as_it_was_when_no_pass_broke_the_ir(failing_pool_pass: list[int]) -> None:
    with pytest.raises(RuntimeError, match="the pool pass failed"):
        lower(tiny_cnn())
    assert len(failing_pool_pass) == 2  # the lowering, then the one verified after every pass


@pytest.mark.usefixtures("broken_malloc")
def test_a_pass_that_stumbles_on_broken_ir_names_the_pass_that_broke_it(failing_pool_pass: list[int]) -> None:
    with pytest.raises(VerifyException, match=r"^after pass dnn-insert-memory-ops: dnn\.malloc"):
        lower(tiny_cnn())
    assert len(failing_pool_pass) == 1  # the second lowering stops before the pool pass

"""The facts the dnn ops carry for passes and lowerings (pyocc/dialects/dnn/ops.py):
which targets run an op, which ops alias an operand's bytes. Each is
checked against the code that acts on it, so the two cannot drift apart."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import MemRefType, f32, i8
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from pyocc.dialects.dnn import ops as d
from pyocc.lowering.convert_dnn_to_cuda import CUDA_OPS


def test_cuda_target_is_exactly_the_ops_the_cuda_lowering_has_an_entry_for() -> None:
    declared = {op.name for op in d.COMPUTE_OPS if "cuda" in op.targets()}
    assert declared == set(CUDA_OPS)


def test_every_compute_op_runs_on_host() -> None:
    assert all("host" in op.targets() for op in d.COMPUTE_OPS)
    assert d.PreActConvOp.targets() == frozenset({"host"})
    assert d.ConvOp.targets() == frozenset({"host", "cuda"})


def test_a_targets_trait_must_name_known_targets_including_host() -> None:
    op = d.SanitizeOp.build({"out": Block(arg_types=[MemRefType(f32, [4])]).args[0]},
                            properties={"action": d.StringAttr("poison"), "guard": d.IntegerAttr(0, 64)})
    with pytest.raises(VerifyException, match="Targets must include 'host'"):
        d.Targets(("cuda",)).verify(op)
    with pytest.raises(VerifyException, match="name only"):
        d.Targets(("host", "npu")).verify(op)
    d.Targets(("host", "cuda")).verify(op)


def test_aliasing_ops_are_the_ones_with_the_trait() -> None:
    assert set(d.ALIAS_OPS) == {d.ViewOp, d.SubviewOp}
    assert not any(op.has_trait(d.AliasesOperand) for op in d.COMPUTE_OPS + d.MEMORY_OPS)


def test_aliased_value_follows_a_subview_to_its_source_and_stops_at_a_block_argument() -> None:
    block = Block(arg_types=[MemRefType(i8, [64])])
    pool = block.args[0]
    band = d.SubviewOp(pool, 16, MemRefType(f32, [4]))
    assert d.aliased_value(band) is pool
    assert d.aliased_value(pool.owner) is None
    assert d.aliased_value(d.MallocOp(MemRefType(f32, [4]))) is None

"""The facts the dnn ops carry for passes and lowerings (pyocc/dialects/dnn/ops.py):
which targets run an op, which ops alias an operand's bytes, the properties'
defaults. Each is checked against the code that acts on it (the cuda
lowering's table, the host kernels' signatures), so the two cannot drift
apart."""

from __future__ import annotations

import inspect

import pytest
from xdsl.dialects.builtin import DenseArrayBase, MemRefType, TensorType, f32, i8, i64
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from pyocc.dialects.dnn import ops as d
from pyocc.dialects.properties import property_value
from pyocc.runtime import host_kernels
from pyocc.lowering.cuda import CUDA_OPS


def test_cuda_target_is_exactly_the_ops_the_cuda_lowering_has_an_entry_for() -> None:
    declared = {op.name for op in d.COMPUTE_OPS if "cuda" in op.targets()}
    assert declared == set(CUDA_OPS)


def test_every_compute_op_runs_on_host() -> None:
    assert all("host" in op.targets() for op in d.COMPUTE_OPS)
    assert d.AttentionSoftmaxOp.targets() == frozenset({"host"})
    assert d.PreActConvOp.targets() == frozenset({"host", "cuda"})
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


def _kernel_defaults(op: type[d.DnnComputeOp]) -> dict[str, object]:
    """The keyword defaults of the host kernel `op` calls, None ones left out."""
    kernel = getattr(host_kernels, op.name.removeprefix("dnn."))
    return {name: p.default for name, p in inspect.signature(kernel).parameters.items()
            if p.default is not inspect.Parameter.empty and p.default is not None}


@pytest.mark.parametrize("op", d.COMPUTE_OPS, ids=lambda op: op.name)
def test_property_defaults_are_the_kernels_defaults(op: type[d.DnnComputeOp]) -> None:
    """Every property whose kernel argument has a default declares that
    default, and no property declares a default the kernel does not have."""
    kernel_defaults = _kernel_defaults(op)
    properties = op.get_irdl_definition().properties
    declared = {name: property_value(p.default_value) for name, p in properties.items() if p.default_value is not None}
    assert set(declared) == {name for name in kernel_defaults if name in properties}
    for name, value in declared.items():
        want = kernel_defaults[name]
        assert value == (want if isinstance(want, str) else pytest.approx(want, rel=1e-6)), name


def test_kernel_kwargs_fill_defaults_and_leave_out_absent_properties() -> None:
    x = Block(arg_types=[TensorType(f32, [1, 4, 8, 8]), TensorType(f32, [4, 4, 3, 3])]).args
    conv = d.ConvOp.build({"x": x[0], "w": x[1]}, [TensorType(f32, [1, 4, 6, 6])],
                          {"strides": d.DenseArrayBase.from_list(i64, [1, 1])})
    assert conv.kernel_kwargs() == {"strides": [1, 1], "group": 1}
    del conv.properties["group"]  # as if built without xDSL's filling: the definition's default still counts
    assert conv.kernel_kwargs()["group"] == 1


def test_row_band_of_a_strided_conv_adjusts_its_pads() -> None:
    """A band of output rows reads the input rows its window covers, halo
    included; the top pad stays on the first band only, the bottom pad on
    the last (here a stride-2 3x3 conv whose last row needs no bottom pad)."""
    block = Block(arg_types=[TensorType(f32, [1, 3, 10, 10]), TensorType(f32, [8, 3, 3, 3]),
                             TensorType(f32, [1, 8, 5, 5])])
    conv = d.ConvOp.build({"x": block.args[0], "w": block.args[1], "residual": block.args[2]},
                          [TensorType(f32, [1, 8, 5, 5])],
                          {"strides": DenseArrayBase.from_list(i64, [2, 2]), "pads": DenseArrayBase.from_list(i64, [1, 1, 1, 1])})
    assert conv.row_windows() == {"x": (3, 2, 1), "residual": (1, 1, 0)}
    bands = [conv.row_band(first, end) for first, end in ((0, 2), (2, 4), (4, 5))]
    assert [b[0] for b in bands] == [{"x": (0, 4), "residual": (0, 2)}, {"x": (3, 8), "residual": (2, 4)},
                                     {"x": (7, 10), "residual": (4, 5)}]
    assert [list(b[1]["pads"].get_values()) for b in bands] == [[1, 1, 0, 1], [0, 1, 0, 1], [0, 1, 0, 1]]
    # a gemm has no rows to band
    gemm = d.GemmOp.build({"a": Block(arg_types=[TensorType(f32, [1, 8])]).args[0],
                           "b": Block(arg_types=[TensorType(f32, [8, 4])]).args[0]}, [TensorType(f32, [1, 4])])
    assert gemm.row_windows() is None and gemm.row_band(0, 1) is None


def test_col_windows_read_the_kernels_second_axis():
    """Along the columns a window has the kernel's, strides' and pads'
    second entries: here a 3 x 5 kernel, strides (2, 1), pads (1, 2, 1, 2)."""
    block = Block(arg_types=[TensorType(f32, [1, 3, 10, 12]), TensorType(f32, [8, 3, 3, 5]), TensorType(f32, [8])])
    conv = d.ConvOp.build({"x": block.args[0], "w": block.args[1], "bias": block.args[2]},
                          [TensorType(f32, [1, 8, 5, 12])],
                          {"strides": DenseArrayBase.from_list(i64, [2, 1]),
                           "pads": DenseArrayBase.from_list(i64, [1, 2, 1, 2])})
    assert conv.row_windows() == {"x": (3, 2, 1)}  # the bias is per channel: read whole
    assert conv.col_windows() == {"x": (5, 1, 2)}
    # a concat along the columns joins whole columns: it runs on row bands, not on column bands
    a, b = Block(arg_types=[TensorType(f32, [1, 2, 4, 3])] * 2).args
    concat = d.ConcatOp.build({"inputs": [a, b]}, [TensorType(f32, [1, 2, 4, 6])],
                              {"axis": d.IntegerAttr(3, i64)})
    assert concat.row_windows() == {"inputs": (1, 1, 0)} and concat.col_windows() is None

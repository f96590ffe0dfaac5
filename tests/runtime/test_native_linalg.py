"""The native matrix-product and convolution kernels (pyocc.lowering.native
linalg and conv) against the numpy kernels they replace, on random data:
odd, tiny, padded, strided, dilated, grouped, depthwise, 1-D and 3-D shapes,
every fused part. Each emitter is JIT-compiled alone and called with the
buffer table a compiled model passes (pyocc.testing.native_kernels.run_guarded)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import llvmlite.ir as ir
import numpy as np
import pytest

pytest.importorskip("scipy_openblas32", reason="the native kernels call OpenBLAS from scipy-openblas32")

from pyocc.dialects.dnn.scratch import (  # noqa: E402
    conv_algorithm,
    conv_scratch_bytes,
    im2col_block,
    im2col_block_bytes,
    im2col_row_bytes,
    output_block_rows,
)
from pyocc.lowering.native.conv import (  # noqa: E402
    TILED_POINTWISE_DEPTH,
    Geometry,
    conv_row_sizes,
    emit_conv,
    emit_conv_transpose,
    emit_preact_conv,
    host_has_avx512,
    preact_conv_sizes,
    register_tiles,
    tiled_spatial,
)
import pyocc.lowering.native.conv as conv_module  # noqa: E402
from pyocc.lowering.native.dense_ir import NotNative  # noqa: E402
from pyocc.lowering.native.loops import PARALLEL_FOR_TYPE  # noqa: E402
from pyocc.lowering.native.threads import parallel_for_symbol  # noqa: E402
from pyocc.lowering.native.linalg import emit_attention_softmax, emit_gemm, emit_matmul  # noqa: E402
from pyocc.lowering.native.registry import native_kernel_for  # noqa: E402
from pyocc.runtime import host_kernels as hk  # noqa: E402
from pyocc.testing.native_kernels import CompiledSites, emit_sharing_sites, run_guarded, site_for  # noqa: E402

RNG = np.random.default_rng(16)


def random(shape: list[int] | tuple[int, ...]) -> np.ndarray:
    return RNG.standard_normal(shape, dtype=np.float32)


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    """Equal up to float32 rounding of a different summation order."""
    assert not np.isnan(got).any() or np.isnan(want).any(), "the native kernel left NaN (unwritten) elements"
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * scale)


def conv_out_shape(x: list[int], w: list[int], strides: list[int] | None, pads: list[int] | None,
                   dilations: list[int] | None) -> list[int]:
    rank = len(w) - 2
    strides, dilations = strides or [1] * rank, dilations or [1] * rank
    pads = pads or [0] * 2 * rank
    return [x[0], w[0]] + [(x[2 + i] + pads[i] + pads[rank + i] - (w[2 + i] - 1) * dilations[i] - 1) // strides[i] + 1
                           for i in range(rank)]


CONVS: dict[str, dict[str, Any]] = {
    "3x3_padded": dict(x=[1, 3, 8, 8], w=[4, 3, 3, 3], pads=[1, 1, 1, 1]),
    "strided_dilated_asymmetric": dict(x=[2, 3, 9, 7], w=[4, 3, 3, 2], strides=[2, 1], pads=[1, 0, 2, 1],
                                       dilations=[1, 2], bias=True, residual=True, activation="relu"),
    "stem_7x7_stride2": dict(x=[1, 3, 23, 23], w=[5, 3, 7, 7], strides=[2, 2], pads=[3, 3, 3, 3], bias=True),
    "pointwise": dict(x=[2, 5, 6, 6], w=[7, 5, 1, 1], bias=True, residual=True, activation="tanh"),
    "pointwise_stride2": dict(x=[1, 5, 7, 7], w=[7, 5, 1, 1], strides=[2, 2]),
    "depthwise": dict(x=[2, 4, 6, 6], w=[4, 1, 3, 3], pads=[1, 1, 1, 1], group=4, bias=True, residual=True,
                      activation="leaky_relu", alpha=0.2),
    "depthwise_multiplier_strided": dict(x=[1, 4, 7, 7], w=[8, 1, 3, 3], strides=[2, 2], pads=[1, 1, 1, 1], group=4),
    "grouped_dilated": dict(x=[1, 6, 7, 5], w=[4, 3, 3, 1], strides=[1, 2], pads=[0, 1, 0, 1], group=2,
                            dilations=[2, 1], activation="sigmoid"),
    "grouped_wide_blas": dict(x=[2, 32, 7, 7], w=[8, 16, 3, 3], strides=[2, 2], pads=[1, 1, 1, 1], group=2,
                              bias=True, residual=True, activation="relu"),
    "grouped_wide_pointwise": dict(x=[1, 48, 5, 5], w=[12, 16, 1, 1], group=3, bias=True),
    "one_d": dict(x=[2, 3, 10], w=[4, 3, 3], strides=[2], pads=[1, 2], dilations=[2], activation="hard_swish"),
    "three_d": dict(x=[1, 2, 4, 5, 6], w=[3, 2, 3, 2, 3], pads=[1, 0, 1, 1, 1, 1], bias=True),
    "tiny_all_padding": dict(x=[1, 3, 1, 1], w=[2, 3, 3, 3], pads=[1, 1, 1, 1]),
    # more taps than conv.UNROLLED_TAPS: im2col loops over the taps at run time (stem_7x7_stride2 and
    # three_d do too); stride 1 (the vector copies), dilated, and taps wholly in the padding
    "large_kernel_contiguous_dilated": dict(x=[1, 2, 9, 8], w=[3, 2, 5, 4], pads=[2, 3, 1, 4], dilations=[1, 2],
                                            bias=True, activation="relu"),
    # the leading padding reaches past the output row (tap 0's valid range is empty and starts beyond it),
    # unrolled (3x3) and as a run-time tap loop (5x5)
    "pads_beyond_the_row": dict(x=[1, 2, 1, 1], w=[2, 2, 3, 3], pads=[2, 2, 0, 0]),
    "pads_beyond_the_row_large_kernel": dict(x=[1, 2, 3, 3], w=[2, 2, 5, 5], pads=[4, 4, 0, 0], strides=[1, 2]),
    "kernel_larger_than_stride_gap": dict(x=[1, 2, 5, 5], w=[3, 2, 2, 2], strides=[3, 3], pads=[0, 0, 1, 1]),
    "clip_hard_sigmoid": dict(x=[1, 3, 5, 5], w=[2, 3, 3, 3], activation="clip", alpha=-0.5, beta=0.5),
    "hard_sigmoid": dict(x=[1, 3, 5, 5], w=[2, 3, 3, 3], activation="hard_sigmoid", alpha=0.3, beta=0.4),
    "many_blocks": dict(x=[1, 64, 40, 40], w=[32, 64, 3, 3], pads=[1, 1, 1, 1], bias=True, activation="relu"),
    # row blocks (the last one short) by channel blocks (67 = 34 + 33), the later ones adding onto the residual
    "channel_blocks_residual": dict(x=[1, 67, 30, 30], w=[8, 67, 3, 3], pads=[1, 1, 1, 1], bias=True,
                                    residual=True, activation="relu"),
    # pointwise in two row blocks (64 + 6 rows: 64 x 64 x 64 outputs fill the 1 MiB; tanh keeps it on
    # sgemm, not _pointwise_tiles), and 1x1 convs that must not take the pointwise path (padded; grouped narrow)
    "pointwise_row_blocks": dict(x=[2, 3, 70, 64], w=[64, 3, 1, 1], bias=True, residual=True, activation="tanh"),
    "one_by_one_padded": dict(x=[1, 4, 5, 5], w=[3, 4, 1, 1], pads=[1, 0, 0, 1], bias=True),
    "one_by_one_grouped_narrow": dict(x=[1, 6, 5, 5], w=[6, 2, 1, 1], group=3, bias=True, activation="relu"),
    # stride-2 rows long enough for the vector copy of every other input (and its tail), unrolled and as a
    # run-time tap loop
    "stride2_long_rows": dict(x=[1, 3, 9, 80], w=[13, 3, 3, 3], strides=[2, 2], pads=[1, 1, 1, 1], bias=True,
                              activation="relu"),
    "stride2_long_rows_large_kernel": dict(x=[1, 2, 11, 70], w=[3, 2, 5, 5], strides=[2, 2], pads=[2, 2, 2, 2]),
    # shallow pointwise convs in register tiles (_pointwise_tiles): 4-channel tiles and single channels
    # after them, whole vectors of positions, then the rest as one overlapping vector, or one by one
    # (fewer positions than a vector); with a residual the sgemm path
    "pointwise_tiles": dict(x=[2, 9, 5, 7], w=[10, 9, 1, 1], bias=True, activation="relu"),
    "pointwise_tiles_no_bias": dict(x=[1, 5, 4, 8], w=[3, 5, 1, 1]),
    "pointwise_tiles_residual": dict(x=[1, 17, 3, 11], w=[6, 17, 1, 1], bias=True, residual=True, activation="relu"),
    "pointwise_tiles_tiny": dict(x=[1, 3, 2, 3], w=[5, 3, 1, 1]),
    "pointwise_tiles_deepest": dict(x=[1, 128, 3, 7], w=[9, 128, 1, 1], bias=True, activation="relu"),
    # grouped (ShuffleNet's 1x1s): each group's tiles and channels after them read the group's inputs
    "pointwise_tiles_grouped": dict(x=[1, 24, 5, 13], w=[18, 8, 1, 1], group=3, bias=True, activation="relu"),
    "pointwise_tiles_grouped_two_images": dict(x=[2, 36, 7, 9], w=[24, 12, 1, 1], group=3),
    # a folded channel shuffle (ConvOp.shuffle): as many shuffle groups as conv groups, each group's
    # channels stored `shuffle` planes apart (register tiles; sgemm with tanh, 3x3 im2col), or any other
    # shuffle (the direct loops); a case of every algorithm, each against the conv then the shuffle
    "shuffled_pointwise_tiles": dict(x=[1, 32, 5, 6], w=[12, 8, 1, 1], group=4, shuffle=4, bias=True,
                                     activation="relu"),
    "shuffled_pointwise_sgemm": dict(x=[2, 32, 5, 6], w=[12, 8, 1, 1], group=4, shuffle=4, bias=True,
                                     activation="tanh"),
    "shuffled_grouped_im2col": dict(x=[1, 16, 6, 7], w=[8, 8, 3, 3], pads=[1, 1, 1, 1], group=2, shuffle=2,
                                    bias=True, activation="relu"),
    "shuffled_direct_other_groups": dict(x=[1, 4, 5, 5], w=[12, 2, 3, 3], pads=[1, 1, 1, 1], group=2, shuffle=3,
                                         bias=True, activation="relu"),
    "shuffled_ungrouped": dict(x=[2, 3, 5, 4], w=[8, 3, 1, 1], shuffle=4, bias=True),
    # shallow stride-1 convs in register tiles (_spatial_tiles): 6-channel tiles and the channels after
    # them (2, 1, 4 < 6: only those), rows of several vectors with an overlapping last one, rows
    # narrower than a vector (masked stores), padding 0/1/2/3 and asymmetric, kernel rows in the padding
    # (1-pixel and 1-row images), 1-D; a deeper one with im2col columns over 1 MiB; 3-D or with a residual: sgemm
    "spatial_tiles": dict(x=[2, 3, 9, 37], w=[14, 3, 3, 3], pads=[1, 1, 1, 1], bias=True, activation="relu"),
    "spatial_tiles_5x5": dict(x=[1, 1, 6, 17], w=[7, 1, 5, 5], pads=[2, 2, 2, 2]),
    "spatial_tiles_unpadded": dict(x=[1, 2, 7, 20], w=[4, 2, 3, 3], bias=True),
    "spatial_tiles_asymmetric": dict(x=[1, 3, 5, 19], w=[6, 3, 3, 3], pads=[2, 0, 0, 1], bias=True,
                                     activation="relu"),
    "spatial_tiles_one_pixel": dict(x=[1, 3, 1, 1], w=[5, 3, 3, 3], pads=[1, 1, 1, 1], bias=True, activation="relu"),
    "spatial_tiles_one_row_7x7": dict(x=[1, 1, 1, 40], w=[3, 1, 3, 7], pads=[1, 3, 1, 3], bias=True),
    "spatial_tiles_narrow_rows": dict(x=[1, 3, 13, 13], w=[13, 3, 3, 3], pads=[1, 1, 1, 1], activation="relu"),
    "spatial_tiles_1d": dict(x=[2, 5, 40], w=[7, 5, 5], pads=[2, 2], bias=True, activation="relu"),
    "spatial_tiles_wide_columns": dict(x=[1, 24, 55, 55], w=[8, 24, 3, 3], pads=[1, 1, 1, 1], bias=True,
                                       activation="relu"),
    "spatial_tiles_three_d": dict(x=[1, 1, 4, 5, 6], w=[3, 1, 3, 2, 3], pads=[1, 0, 1, 1, 1, 1], activation="relu"),
    # stride 2 (the stems): a tap loads the 2 x 16 floats its lanes span and keeps every other one
    "spatial_tiles_stride2": dict(x=[1, 3, 23, 45], w=[14, 3, 3, 3], strides=[2, 2], pads=[1, 1, 1, 1], bias=True,
                                  activation="relu"),
    "spatial_tiles_stride2_even_unpadded": dict(x=[2, 2, 10, 34], w=[6, 2, 3, 3], strides=[2, 2], bias=True),
    "spatial_tiles_stride2_asymmetric": dict(x=[1, 3, 9, 40], w=[7, 3, 3, 3], strides=[2, 2], pads=[0, 1, 2, 0]),
    "spatial_tiles_stride2_5x5": dict(x=[1, 1, 20, 41], w=[7, 1, 5, 5], strides=[2, 2], pads=[2, 2, 2, 2],
                                      bias=True, activation="relu"),
    # a 7x7 stride-2 stem (depth 147) stays on sgemm, which it ties
    "stride2_7x7_stem": dict(x=[1, 3, 90, 91], w=[8, 3, 7, 7], strides=[2, 2], pads=[3, 3, 3, 3], bias=True,
                             activation="relu"),
    "spatial_tiles_residual": dict(x=[1, 3, 6, 21], w=[5, 3, 3, 3], pads=[1, 1, 1, 1], bias=True, residual=True,
                                   activation="relu"),
}


def conv_case(case: dict[str, Any], make: Callable[[list[int]], np.ndarray] = random,
              ) -> tuple[list[np.ndarray | None], list[int], dict[str, Any]]:
    """The inputs (made by `make` from their shapes), output shape and
    keyword arguments of a CONVS case."""
    out_shape = conv_out_shape(case["x"], case["w"], case.get("strides"), case.get("pads"), case.get("dilations"))
    inputs = [make(case["x"]), make(case["w"]), make([case["w"][0]]) if case.get("bias") else None,
              make(out_shape) if case.get("residual") else None]
    kwargs = {k: case[k] for k in ("strides", "pads", "dilations", "group", "activation", "alpha", "beta", "shuffle")
              if k in case}
    return inputs, out_shape, kwargs


#: the planned scratch the kernel may get: a full block, one output row's
#: columns (the least the pool gives), or 2.5 rows (a partial last row unused)
SCRATCH_SIZES = {"full_block": lambda block, row: block, "one_row": lambda block, row: row,
                 "rows_and_a_half": lambda block, row: min(block, 5 * row // 2)}


@pytest.mark.parametrize("size", sorted(SCRATCH_SIZES))
@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv_matches_numpy(name: str, size: str) -> None:
    # the kernel runs as many output rows per im2col block as its planned
    # workspace holds (dnn-memory-pool fits it to the pool's slack)
    inputs, out_shape, kwargs = conv_case(CONVS[name])
    want = np.empty(out_shape, np.float32)
    hk.conv(*inputs, out=want, **kwargs)
    got = np.full(out_shape, np.nan, np.float32)
    scratch = conv_scratch_bytes(inputs[0].shape, inputs[1].shape, out_shape, kwargs.get("strides"),
                                 kwargs.get("pads"), kwargs.get("group"), 4, shuffle=kwargs.get("shuffle"))
    if not scratch and size != "full_block":
        pytest.skip("this convolution needs no scratch: one size is enough")
    workspace = SCRATCH_SIZES[size](scratch, im2col_row_bytes(inputs[1].shape, out_shape, 4))
    run_guarded(emit_conv, "conv", inputs, got, kwargs, workspace_bytes=workspace or None)
    assert_close(got, want)


@pytest.mark.parametrize("name", sorted(name for name in CONVS if "shuffle" in CONVS[name]))
def test_shuffled_conv_is_the_conv_then_its_channel_shuffle(name: str) -> None:
    # the numpy kernel (the reference above) against the plain conv and then ShuffleNet's
    # Reshape-Transpose-Reshape in numpy, and the algorithm each case is meant to run
    inputs, out_shape, kwargs = conv_case(CONVS[name])
    shuffle = kwargs.pop("shuffle")
    plain = np.empty(out_shape, np.float32)
    hk.conv(*inputs, out=plain, **kwargs)
    batch, channels, *spatial = out_shape
    want = plain.reshape(batch, shuffle, channels // shuffle, *spatial).swapaxes(1, 2).reshape(out_shape)
    got = np.full(out_shape, np.nan, np.float32)
    hk.conv(*inputs, out=got, shuffle=shuffle, **kwargs)
    assert_close(got, want)
    algorithm = conv_algorithm(inputs[1].shape, kwargs.get("strides"), kwargs.get("pads"), kwargs.get("group"),
                               shuffle)
    assert algorithm == {"shuffled_grouped_im2col": "im2col", "shuffled_direct_other_groups": "direct",
                         "shuffled_ungrouped": "direct"}.get(name, "pointwise")


def _needs_columns(name: str) -> bool:
    """Whether CONVS[name] runs im2col blocks (needs a row of columns planned)."""
    inputs, _, kwargs = conv_case(CONVS[name], lambda shape: np.zeros(shape, np.float32))
    return conv_algorithm(inputs[1].shape, kwargs.get("strides"), kwargs.get("pads"), kwargs.get("group"),
                          kwargs.get("shuffle")) == "im2col"


@pytest.mark.parametrize("avx512", [False, True], ids=["no_avx512", "avx512"])
@pytest.mark.parametrize("room", ["none", "less_than_a_row"])
@pytest.mark.parametrize("name", sorted(name for name in CONVS if _needs_columns(name)))
def test_im2col_conv_without_planned_columns_runs_natively(name: str, room: str, avx512: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # the plan for an NPU's scratchpad gives the host no scratch: such a site runs
    # natively, not the numpy kernel's temporaries: register tiles read from the
    # input in place where their rule allows, at any depth and on any host (the
    # other choice is the direct loops, not sgemm), else the direct loops
    inputs, out_shape, kwargs = conv_case(CONVS[name])
    geometry = Geometry.of(inputs[0].shape, inputs[1].shape, out_shape, kwargs)
    monkeypatch.setattr(conv_module, "host_has_avx512", lambda: not avx512)
    on_the_other_host = tiled_spatial(geometry, kwargs, inputs[3] is not None, any_depth=True)
    monkeypatch.setattr(conv_module, "host_has_avx512", lambda: avx512)
    row = im2col_row_bytes(inputs[1].shape, out_shape, 4)
    workspace = None if room == "none" else row - 4
    outputs = [(out_shape, "float32")]
    site = site_for("conv", inputs, outputs, workspace_bytes=workspace, **kwargs)
    assert native_kernel_for(site) is not None
    assert conv_row_sizes(site) is None, "it keeps its own function"
    tiles = tiled_spatial(geometry, kwargs, inputs[3] is not None, any_depth=True)
    assert tiles == on_the_other_host
    module = ir.Module()
    emit_conv(module, "model_site_0", site)
    assert ("llvm.masked.load" in str(module)) == tiles  # the tiles' loads at the padding: what is emitted
    if name == "many_blocks":  # 64 x 9 deep: with planned columns sgemm, without them register tiles
        assert tiles and not register_tiles(site_for("conv", inputs, outputs, workspace_bytes=row, **kwargs))
    if name in ("channel_blocks_residual", "three_d", "one_d"):  # a residual, 3-D, dilated: direct loops
        assert not tiles
    want = np.empty(out_shape, np.float32)
    hk.conv(*inputs, out=want, **kwargs)
    got = np.full(out_shape, np.nan, np.float32)
    run_guarded(emit_conv, "conv", inputs, got, kwargs, workspace_bytes=workspace)
    assert_close(got, want)


@pytest.mark.parametrize("avx512", [False, True], ids=["no_avx512", "avx512"])
@pytest.mark.parametrize("room", ["none", "less_than_a_row"])
@pytest.mark.parametrize("name", ["3x3_padded", "one_by_one_padded", "spatial_tiles_stride2_asymmetric",
                                  "pointwise", "strided_dilated_asymmetric", "channel_blocks_residual"])
def test_preact_conv_without_planned_columns_runs_natively(name: str, room: str, avx512: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # DenseNet's preact_convs, tiled for the scratchpad, were 2,540 numpy sites at 1 MiB: register
    # tiles that pre-activate what they load (the padding left zero), or the direct loops
    monkeypatch.setattr(conv_module, "host_has_avx512", lambda: avx512)
    inputs, out_shape, kwargs, _ = preact_case(name, "relu", "one_row")
    x, scale, shift, w, bias, residual = inputs
    workspace = None if room == "none" else im2col_row_bytes(w.shape, out_shape, 4) - 4
    site = site_for("preact_conv", inputs, [(out_shape, "float32")], workspace_bytes=workspace, **kwargs)
    assert native_kernel_for(site) is not None and preact_conv_sizes(site) is None
    tiles = tiled_spatial(Geometry.of(x.shape, w.shape, out_shape, kwargs), kwargs, residual is not None,
                          any_depth=True)
    # on any host (a residual, tanh or a dilation: the direct loops)
    assert tiles == (name in ("3x3_padded", "one_by_one_padded", "spatial_tiles_stride2_asymmetric"))
    module = ir.Module()
    emit_preact_conv(module, "model_site_0", site)
    assert ("llvm.masked.load" in str(module)) == tiles  # the tiles' loads at the padding: what is emitted
    want = np.empty(out_shape, np.float32)
    hk.preact_conv(x, scale, shift, w, bias, residual, out=want, **kwargs)
    got = np.full(out_shape, np.nan, np.float32)
    run_guarded(emit_preact_conv, "preact_conv", inputs, got, kwargs, workspace_bytes=workspace)
    assert_close(got, want)


def test_blocked_cases_span_several_blocks() -> None:
    # the cases above that exercise the im2col blocking really do span several blocks each way
    rows, channels = im2col_block([1, 67, 30, 30], [8, 67, 3, 3], [1, 8, 30, 30], 4)
    assert (rows, channels) == (18, 34)  # 30 rows = 18 + 12, 67 channels = 34 + 33
    rows, channels = im2col_block([1, 64, 40, 40], [32, 64, 3, 3], [1, 32, 40, 40], 4)
    assert rows < 40 and 40 % rows and channels < 64


def test_algorithm_of_one_by_one_convs() -> None:
    # only an unpadded stride-1 1x1 conv multiplies its input as is; padding, strides and narrow groups do not
    assert conv_algorithm([64, 3, 1, 1], None, None, 1) == "pointwise"
    assert conv_algorithm([12, 16, 1, 1], [1, 1], [0, 0, 0, 0], 3) == "pointwise"
    assert conv_algorithm([3, 4, 1, 1], None, [1, 0, 0, 1], 1) == "im2col"
    assert conv_algorithm([7, 5, 1, 1], [2, 2], None, 1) == "im2col"
    assert conv_algorithm([6, 2, 1, 1], None, None, 3) == "direct"
    assert output_block_rows([64, 3, 1, 1], [2, 64, 70, 64], 4) == 64  # so pointwise_row_blocks has 2 blocks


def calls_sgemm(name: str, parallel: bool = False, **change: Any) -> bool:
    """Whether the conv kernel of CONVS case `name` (with `change`) calls
    sgemm; `parallel`: in a model compiled for several threads."""
    inputs, out_shape, kwargs = conv_case({**CONVS[name], **change})
    module = ir.Module()
    if parallel:
        ir.Function(module, PARALLEL_FOR_TYPE, parallel_for_symbol("model"))
    emit_conv(module, "model_site_0", site_for("conv", inputs, [(out_shape, "float32")], workspace_bytes=1 << 20,
                                               **kwargs))
    return "cblas_sgemm" in str(module)


@pytest.mark.parametrize(("name", "bodies"), [("many_blocks", 3), ("one_d", 3), ("strided_dilated_asymmetric", 2),
                                               ("stem_7x7_stride2", 1), ("three_d", 1)])
def test_im2col_unrolls_only_the_last_dim_of_a_small_kernel(name: str, bodies: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # a kernel of at most UNROLLED_TAPS taps gets one im2col body per tap of its last dim (its valid
    # range a constant) inside a run-time loop over its other dims, not one per tap: a 3x3 conv's 9
    # bodies were most of the LLVM time of a model of many 3x3 convs (docs/performance.md); a larger
    # kernel loops over all its taps at run time (one body)
    emitted: list[object] = []
    tap = conv_module._im2col_tap
    monkeypatch.setattr(conv_module, "_im2col_tap", lambda *args: emitted.append(args) or tap(*args))
    inputs, out_shape, kwargs = conv_case(CONVS[name])
    emit_conv(ir.Module(), "model_site_0", site_for("conv", inputs, [(out_shape, "float32")],
                                                    workspace_bytes=1 << 20, **kwargs))
    assert len(emitted) == bodies


SPATIAL_TILES = ["spatial_tiles", "spatial_tiles_5x5", "spatial_tiles_unpadded", "spatial_tiles_asymmetric",
                 "spatial_tiles_one_pixel", "spatial_tiles_one_row_7x7", "spatial_tiles_narrow_rows",
                 "spatial_tiles_1d", "spatial_tiles_wide_columns", "spatial_tiles_stride2",
                 "spatial_tiles_stride2_even_unpadded", "spatial_tiles_stride2_asymmetric", "spatial_tiles_stride2_5x5"]


def test_shallow_spatial_convs_run_register_tiles() -> None:
    # on one thread a stride-1 conv of depth (channels x taps) at most TILED_SPATIAL_SHALLOW, or at most
    # TILED_SPATIAL_DEPTH with im2col columns over TILED_SPATIAL_COLUMN_BYTES, no residual and relu or no
    # activation calls no BLAS, on one thread or on several (on a host without AVX-512: one with it keeps
    # sgemm); deeper, strided by more than 2 or unevenly, dilated, grouped, with a residual or another activation it calls sgemm
    for name in SPATIAL_TILES:
        assert calls_sgemm(name) == host_has_avx512(), name
        assert calls_sgemm(name, parallel=True) == host_has_avx512(), name
    assert calls_sgemm("spatial_tiles_residual")
    assert calls_sgemm("spatial_tiles_three_d")  # 3-D: im2col + sgemm
    assert calls_sgemm("spatial_tiles", activation="tanh")
    assert calls_sgemm("spatial_tiles", strides=[3, 3])
    assert calls_sgemm("stride2_7x7_stem")  # deeper than TILED_SPATIAL_SHALLOW: stride 1 only
    assert calls_sgemm("spatial_tiles", strides=[1, 2])
    assert calls_sgemm("spatial_tiles", dilations=[2, 2])
    # deeper than TILED_SPATIAL_SHALLOW with few columns; deeper than TILED_SPATIAL_DEPTH with many
    assert calls_sgemm("spatial_tiles", x=[2, 4, 9, 37], w=[14, 4, 3, 3])
    assert calls_sgemm("spatial_tiles_wide_columns", x=[1, 25, 55, 55], w=[8, 25, 3, 3])
    assert calls_sgemm("spatial_tiles_wide_columns", x=[1, 24, 32, 32])  # 216 x 1024 columns: under 1 MiB


@pytest.mark.parametrize("name", SPATIAL_TILES)
def test_spatial_tiles_match_onnxruntime(name: str) -> None:
    # the tiled kernel (forced on where the host has AVX-512) against onnxruntime's Conv + Relu
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    inputs, out_shape, kwargs = conv_case(CONVS[name])
    x, w, bias, _ = inputs
    got = np.full(out_shape, np.nan, np.float32)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conv_module, "host_has_avx512", lambda: False)
        run_guarded(emit_conv, "conv", inputs, got, kwargs, workspace_bytes=1 << 20)
    names = ["x", "w"] + (["b"] if bias is not None else [])
    nodes = [helper.make_node("Conv", names, ["c"], pads=kwargs.get("pads") or [0] * (2 * (len(w.shape) - 2)),
                              strides=kwargs.get("strides") or [1] * (len(w.shape) - 2)),
             helper.make_node("Relu" if kwargs.get("activation") == "relu" else "Identity", ["c"], ["y"])]
    weights = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(bias, "b")] if bias is not None else [])
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), options).run(None, {"x": x})[0]
    assert_close(got, want)


def test_shallow_pointwise_convs_run_register_tiles() -> None:
    # on one thread a pointwise conv of at most TILED_POINTWISE_DEPTH input channels with no activation
    # but relu and no residual (per group: a grouped one too) calls no BLAS (on a host without AVX-512: one
    # with it keeps sgemm); a deeper one, one with a residual or another activation calls sgemm
    def calls_sgemm(name: str, **change: Any) -> bool:
        inputs, out_shape, kwargs = conv_case({**CONVS[name], **change})
        module = ir.Module()
        emit_conv(module, "conv", site_for("conv", inputs, [(out_shape, "float32")], **kwargs))
        return "cblas_sgemm" in str(module)

    for name in ("pointwise_tiles", "pointwise_tiles_tiny", "pointwise_tiles_deepest", "pointwise_tiles_no_bias",
                 "pointwise_tiles_grouped", "pointwise_tiles_grouped_two_images", "grouped_wide_pointwise"):
        assert calls_sgemm(name) == host_has_avx512(), name
    assert calls_sgemm("pointwise_tiles_residual")
    assert calls_sgemm("pointwise_row_blocks")  # tanh
    assert calls_sgemm("pointwise_tiles_deepest", x=[1, TILED_POINTWISE_DEPTH + 1, 3, 7],
                       w=[9, TILED_POINTWISE_DEPTH + 1, 1, 1])
    assert calls_sgemm("pointwise_tiles_grouped", x=[1, 3 * (TILED_POINTWISE_DEPTH + 1), 5, 13],
                       w=[18, TILED_POINTWISE_DEPTH + 1, 1, 1])  # deeper than that per group
    assert calls_sgemm("pointwise")  # tanh
    assert calls_sgemm("shuffled_pointwise_tiles") == host_has_avx512()
    assert calls_sgemm("shuffled_pointwise_sgemm")  # tanh
    assert calls_sgemm("grouped_wide_pointwise", residual=True)


def test_conv_residual_in_place() -> None:
    # dnn-coalesce writes a residual conv over its dying residual: out is residual
    for name in ("strided_dilated_asymmetric", "pointwise", "depthwise", "channel_blocks_residual",
                 "pointwise_row_blocks", "pointwise_tiles_residual"):
        inputs, out_shape, kwargs = conv_case(CONVS[name])
        want = np.empty(out_shape, np.float32)
        hk.conv(*inputs, out=want, **kwargs)
        residual = inputs[3]
        assert residual is not None
        scratch = conv_scratch_bytes(inputs[0].shape, inputs[1].shape, out_shape, kwargs.get("strides"),
                                     kwargs.get("pads"), kwargs.get("group"), 4)
        run_guarded(emit_conv, "conv", inputs, residual, kwargs, workspace_bytes=scratch or None)
        assert_close(residual, want)


PREACT_CASES = ["3x3_padded", "pointwise", "depthwise", "one_d", "strided_dilated_asymmetric", "channel_blocks_residual"]


def preact_case(name: str, pre_activation: str | None, size: str, make: Callable[[list[int]], np.ndarray] = random,
                ) -> tuple[list[np.ndarray | None], list[int], dict[str, Any], int]:
    """The inputs (x, scale, shift, w, bias, residual; made by `make`),
    output shape, keyword arguments and planned scratch bytes (0: a
    grouped preact_conv, which needs none) of a preact_conv on CONVS[name]."""
    inputs, out_shape, kwargs = conv_case(CONVS[name], make)
    x, w, bias, residual = inputs
    assert x is not None and w is not None
    channels = x.shape[1]
    scale, shift = make([channels]), make([channels])
    if pre_activation is not None:
        kwargs["pre_activation"] = pre_activation
    scratch = im2col_block_bytes(x.shape, w.shape, out_shape, 4) if kwargs.get("group", 1) == 1 else 0
    workspace = SCRATCH_SIZES[size](scratch, im2col_row_bytes(w.shape, out_shape, 4)) if scratch else 0
    return [x, scale, shift, w, bias, residual], out_shape, kwargs, workspace


@functools.lru_cache(maxsize=1)
def preact_kernels(name: str, pre_activation: str | None) -> CompiledSites:
    """The preact_conv on CONVS[name] at each of SCRATCH_SIZES (sorted), as
    a model's sites that differ only in channels and scratch have them:
    site i is the site's own kernel, site len(SCRATCH_SIZES) + i its
    wrapper calling the kernel that reads its channels and block at run
    time, emitted once for all (pyocc.lowering.native.registry). One
    compile per case, not two per scratch size. The last case only is kept
    (2 MiB of JIT engine each): its three sizes' tests are adjacent, and
    run on one worker (xdist_group), not split between two that would
    each compile it."""
    sites = []
    for size in sorted(SCRATCH_SIZES):
        inputs, out_shape, kwargs, workspace = preact_case(name, pre_activation, size,
                                                           lambda shape: np.zeros(shape, np.float32))
        assert workspace, "a group-1 preact_conv plans scratch"
        sites.append(site_for("preact_conv", inputs, [(out_shape, "float32")], workspace_bytes=workspace, **kwargs))

    def emit(module: ir.Module, symbols: list[str]) -> None:
        general_site = emit_sharing_sites(module, symbols, sites, preact_conv_sizes, emit_preact_conv,
                                          "a group-1 preact_conv with scratch shares its kernel")
        assert None in general_site["inputs"][0]["shape"], "the shared kernel's site leaves the channels out"

    return CompiledSites(emit, 2 * len(sites))


@pytest.mark.xdist_group("preact_kernels")  # one worker runs them in order: preact_kernels compiles each case once
@pytest.mark.parametrize("size", sorted(SCRATCH_SIZES))
@pytest.mark.parametrize("name", PREACT_CASES)
@pytest.mark.parametrize("pre_activation", [None, "relu"])
def test_preact_conv_matches_numpy(name: str, pre_activation: str | None, size: str) -> None:
    inputs, out_shape, kwargs, workspace = preact_case(name, pre_activation, size)
    x, scale, shift, w, bias, residual = inputs
    want = np.empty(out_shape, np.float32)
    hk.preact_conv(x, scale, shift, w, bias, residual, out=want, **kwargs)
    got = np.full(out_shape, np.nan, np.float32)
    if not workspace:
        if size != "full_block":
            pytest.skip("a grouped preact_conv runs direct loops: no scratch, one size is enough")
        run_guarded(emit_preact_conv, "preact_conv", inputs, got, kwargs)
        assert_close(got, want)
        return
    compiled = preact_kernels(name, pre_activation)
    index = sorted(SCRATCH_SIZES).index(size)
    run_guarded(None, "preact_conv", inputs, got, kwargs, workspace_bytes=workspace, compiled=compiled[index])
    assert_close(got, want)
    # the kernel shared by sites that differ only in channels and scratch, through
    # the site's wrapper: the same bytes as the site's own kernel
    shared = np.full(out_shape, np.nan, np.float32)
    run_guarded(None, "preact_conv", inputs, shared, kwargs, workspace_bytes=workspace,
                compiled=compiled[len(SCRATCH_SIZES) + index])
    np.testing.assert_array_equal(shared, got)


def test_preact_conv_sites_that_differ_in_channels_share_a_kernel() -> None:
    """DenseNet's 1x1 preact_convs: their shared site is the same whatever
    the channels and the scratch; a grouped one keeps its own kernel."""
    def site(channels: int, workspace: int, group: int = 1) -> dict[str, Any]:
        x, w = np.zeros([1, channels, 14, 14], np.float32), np.zeros([128, channels // group, 1, 1], np.float32)
        scale = np.zeros([channels], np.float32)
        return site_for("preact_conv", [x, scale, scale, w, None, None], [([1, 128, 14, 14], "float32")],
                        workspace_bytes=workspace, group=group, pre_activation="relu")

    first, second = preact_conv_sizes(site(256, 200704)), preact_conv_sizes(site(992, 777728))
    assert first is not None and second is not None
    assert first[0] == second[0]
    assert first[1] == [256, *im2col_block([1, 256, 14, 14], [128, 256, 1, 1], [1, 128, 14, 14], 4, 200704)]
    assert preact_conv_sizes(site(256, 200704, group=2)) is None


CONV_TRANSPOSES: dict[str, dict[str, Any]] = {
    "stride2": dict(x=[1, 3, 4, 4], w=[3, 2, 3, 3], strides=[2, 2], pads=[1, 1, 1, 1], bias=True),
    "output_padding": dict(x=[2, 2, 3, 5], w=[2, 3, 3, 2], strides=[2, 3], pads=[0, 1, 1, 0], output_padding=[1, 2]),
    "grouped_dilated": dict(x=[1, 4, 5, 5], w=[4, 1, 3, 3], strides=[1, 1], pads=[2, 2, 2, 2], dilations=[2, 2],
                            group=2, bias=True),
    "one_d": dict(x=[1, 3, 6], w=[3, 2, 4], strides=[3], pads=[1, 0]),
    "three_d": dict(x=[1, 2, 2, 3, 3], w=[2, 2, 2, 2, 2], strides=[2, 1, 2], pads=[0, 0, 1, 0, 1, 0]),
}


@pytest.mark.parametrize("name", sorted(CONV_TRANSPOSES))
def test_conv_transpose_matches_numpy(name: str) -> None:
    case = CONV_TRANSPOSES[name]
    rank = len(case["w"]) - 2
    strides, dilations = case.get("strides") or [1] * rank, case.get("dilations") or [1] * rank
    pads, extra = case.get("pads") or [0] * 2 * rank, case.get("output_padding") or [0] * rank
    group = case.get("group", 1)
    out_shape = [case["x"][0], case["w"][1] * group] + [
        (case["x"][2 + i] - 1) * strides[i] + (case["w"][2 + i] - 1) * dilations[i] + 1 + extra[i] - pads[i] - pads[rank + i]
        for i in range(rank)]
    inputs = [random(case["x"]), random(case["w"]), random([out_shape[1]]) if case.get("bias") else None]
    kwargs = {k: case[k] for k in ("strides", "pads", "dilations", "group", "output_padding") if k in case}
    want = np.empty(out_shape, np.float32)
    hk.conv_transpose(*inputs, out=want, **kwargs)
    got = np.full(out_shape, np.nan, np.float32)
    run_guarded(emit_conv_transpose, "conv_transpose", inputs, got, kwargs)
    assert_close(got, want)


GEMMS: dict[str, dict[str, Any]] = {
    "plain": dict(a=[5, 7], b=[7, 9]),
    "transposed_scaled": dict(a=[7, 5], b=[9, 7], trans_a=1, trans_b=1, alpha=0.5, beta=2.0, c=[9]),
    "c_row_vector": dict(a=[4, 3], b=[3, 6], c=[1, 6], activation="relu"),
    "c_column": dict(a=[4, 3], b=[3, 6], c=[4, 1], beta=-1.5),
    "c_full_beta_zero": dict(a=[4, 3], b=[3, 6], c=[4, 6], beta=0.0),
    "c_scalar": dict(a=[2, 3], b=[3, 2], c=[], activation="leaky_relu", activation_alpha=0.3),
    "classifier": dict(a=[1, 2048], b=[10, 2048], trans_b=1, c=[10]),
    "clip": dict(a=[3, 4], b=[4, 5], c=[5], activation="clip", activation_alpha=-0.1, activation_beta=0.2),
    "empty_depth": dict(a=[3, 0], b=[0, 4], c=[4]),
    # one row or one column: sgemv, in each transpose combination
    "row_sgemv": dict(a=[1, 37], b=[37, 11], c=[11], beta=0.5, activation="relu"),
    "row_sgemv_trans_a": dict(a=[37, 1], b=[37, 11], trans_a=1, alpha=-2.0),
    "row_sgemv_trans_ab": dict(a=[37, 1], b=[11, 37], trans_a=1, trans_b=1, c=[1, 11]),
    "column_sgemv": dict(a=[6, 13], b=[13, 1], c=[6, 1], beta=-1.0),
    "column_sgemv_trans_a": dict(a=[13, 6], b=[13, 1], trans_a=1, alpha=0.25),
    "column_sgemv_trans_ab": dict(a=[13, 6], b=[1, 13], trans_a=1, trans_b=1, c=[6, 1], activation="sigmoid"),
    "one_by_one": dict(a=[1, 5], b=[1, 5], trans_b=1, c=[1]),
}


@pytest.mark.parametrize("name", sorted(GEMMS))
def test_gemm_matches_numpy(name: str) -> None:
    case = dict(GEMMS[name])
    a, b = random(case.pop("a")), random(case.pop("b"))
    c = random(case.pop("c")) if "c" in case else None
    m = a.shape[1] if case.get("trans_a") else a.shape[0]
    n = b.shape[0] if case.get("trans_b") else b.shape[1]
    want = np.empty((m, n), np.float32)
    hk.gemm(a, b, c, out=want, **case)
    got = np.full((m, n), np.nan, np.float32)
    run_guarded(emit_gemm, "gemm", [a, b, c], got, case)
    assert_close(got, want)


MATMULS = {
    "2d": ([5, 7], [7, 3]),
    "vector_matrix": ([7], [7, 3]),
    "matrix_vector": ([2, 5, 7], [7]),
    "vector_vector": ([7], [7]),
    "shared_weights": ([2, 3, 5, 7], [7, 4]),
    "broadcast_batches": ([2, 1, 3, 4], [3, 4, 6]),
    "broadcast_a": ([3, 4], [2, 4, 5]),
    "attention_heads": ([2, 4, 6, 8], [2, 4, 8, 6]),
    "one_row": ([1, 1, 9], [1, 9, 1]),
    "row_times_matrix": ([1, 9], [9, 5]),
    "batched_columns": ([3, 4, 9], [3, 9, 1]),
}


@pytest.mark.parametrize("name", sorted(MATMULS))
def test_matmul_matches_numpy(name: str) -> None:
    a_shape, b_shape = MATMULS[name]
    a, b = random(a_shape), random(b_shape)
    want = np.matmul(a, b)
    got = np.full(want.shape, np.nan, np.float32)
    run_guarded(emit_matmul, "matmul", [a, b], got, {})
    assert_close(got, want)


@pytest.mark.parametrize("mask_shape", [None, [6], [1, 3, 1, 6], [2, 3, 5, 6]], ids=str)
@pytest.mark.parametrize("scale", [1.0, 0.125])
def test_attention_softmax_matches_numpy(mask_shape: list[int] | None, scale: float) -> None:
    a, b = random([2, 3, 5, 4]), random([2, 3, 4, 6])
    mask = random(mask_shape) if mask_shape is not None else None
    want = np.empty((2, 3, 5, 6), np.float32)
    hk.attention_softmax(a, b, mask, out=want, scale=scale)
    got = np.full(want.shape, np.nan, np.float32)
    run_guarded(emit_attention_softmax, "attention_softmax", [a, b, mask], got, {"scale": scale})
    assert_close(got, want)


def test_other_dtypes_stay_on_numpy() -> None:
    a, b = np.ones((2, 2), np.float64), np.ones((2, 2), np.float64)
    with pytest.raises(NotNative, match="float64"):
        run_guarded(emit_matmul, "matmul", [a, b], np.empty((2, 2), np.float64), {})


# -- whole models, native kernels against onnxruntime ------------------------------


@pytest.mark.parametrize("scratch", [False, True], ids=["no_scratch", "planned_scratch"])
@pytest.mark.parametrize("memory", ["eager", "lazy", "pool"])
def test_tiny_cnn_runs_natively(memory: str, scratch: bool) -> None:
    pytest.importorskip("onnxruntime")
    from pyocc.examples.tiny_cnn import build
    from pyocc.testing.random_graphs import compile_and_compare, random_inputs

    model = build()
    compiled, problem = compile_and_compare(model, random_inputs(model, 0), memory=memory, scratch=scratch)
    assert problem is None, problem
    kernels = [site["kernel"] for site in compiled.native.meta["sites"]]
    # an im2col convolution without planned scratch has no block to work in: register tiles or direct loops
    assert {"conv", "gemm"} <= set(kernels) and compiled.numpy_sites == 0
    scratch_buffers = [b for b in compiled.memory_report().buffers if b.name.endswith("_scratch")]
    assert bool(scratch_buffers) == scratch


@pytest.mark.parametrize(("name", "blas"), [("many_blocks", True), ("pointwise_row_blocks", True), ("spatial_tiles", False)])
def test_loops_around_blas_are_not_unrolled(name: str, blas: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that calls sgemm spends its time there: its loops carry
    `llvm.loop.unroll.disable` (dense_ir.keep_loops_around_blas, applied
    to every registered emitter's functions), so O3 leaves them loops and
    the optimised kernel keeps one sgemm call per call the emitter wrote
    (unrolled, the loop over im2col blocks around it copied it). A kernel
    of generated code (register tiles) is unrolled as before."""
    from pyocc.runtime import jit

    monkeypatch.setattr(conv_module, "host_has_avx512", lambda: False)  # the register tiles' rule, on any host
    inputs, out_shape, kwargs = conv_case(CONVS[name])
    site = site_for("conv", inputs, [(out_shape, "float32")], workspace_bytes=1 << 20, **kwargs)
    module = ir.Module()
    kernel = native_kernel_for(site)
    assert kernel is not None
    kernel.emit(module, "model_site_0", site)
    text = str(module)
    assert ("cblas_sgemm" in text) == blas
    assert ("llvm.loop.unroll.disable" in text) == blas
    optimised = str(jit.optimized_module(text.replace('"model_site_0"', f'"{jit.KERNEL_NAME}"'),
                                         jit._target_machine(jit.JIT_CODE_MODEL), jit._external_kernel,
                                         before_optimize=True))
    calls = lambda ir_text: len(re.findall(r"call void @\"?scipy_cblas_sgemm\"?\(", ir_text))  # noqa: E731
    assert calls(optimised) == calls(text)

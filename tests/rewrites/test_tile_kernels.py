"""The native kernels of tiled programs: the patches of one conv differ only
in their rows (input rows, output rows, the padding at the image's top and
bottom edge, the planned scratch), so they share one function that reads
those at run time (pyocc.lowering.native.conv.conv_row_sizes). It must give
the bytes of each patch's own function, on every conv algorithm (im2col in
one block or in several, pointwise, depthwise / direct, grouped); an
untiled conv keeps its own function."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import llvmlite.ir as ir
import numpy as np
import pytest

pytest.importorskip("scipy_openblas32", reason="the native kernels call OpenBLAS from scipy-openblas32")

from xdsl.context import Context  # noqa: E402

import pyocc  # noqa: E402
from pyocc.api import lower  # noqa: E402
from pyocc.dialects.dnn.scratch import conv_scratch_bytes, im2col_row_bytes  # noqa: E402
from pyocc.lowering.convert_dnn_to_llvm import ConvertDnnToLlvmPass, read_meta, select_kernels  # noqa: E402
import pyocc.lowering.native.conv as conv_module  # noqa: E402
from pyocc.lowering.native.conv import conv_row_sizes, emit_conv  # noqa: E402
from pyocc.lowering.native.registry import NATIVE_KERNELS  # noqa: E402
from pyocc.runtime import host_kernels as hk  # noqa: E402
from pyocc.testing.native_kernels import CompiledSites, emit_sharing_sites, run_guarded, site_for  # noqa: E402
from tests.graphs import mobilenet_v2, random_inputs  # noqa: E402

RNG = np.random.default_rng(19)

#: one conv (weights, strides, group, fused parts), and its patches as
#: (input rows, padding above, padding below): the first patch reaches the
#: image's top edge, the last its bottom edge, the middle ones neither
PATCHED_CONVS: dict[str, dict[str, Any]] = {
    # MobileNetV2's stem: im2col, stride 2, the taps unrolled
    "stem_stride2": dict(channels=3, width=40, w=[16, 3, 3, 3], strides=[2, 2], side=1, activation="clip",
                         patches=[(10, 1, 0), (19, 0, 0), (8, 0, 1)]),
    # im2col with a residual, padding both edges in one patch (a region of one patch's height)
    "im2col_residual": dict(channels=5, width=37, w=[6, 5, 3, 3], side=1, residual=True, activation="relu",
                            patches=[(7, 1, 0), (9, 0, 0), (6, 0, 1), (4, 1, 1)]),
    # a 7x7 kernel: the taps loop at run time
    "seven_by_seven": dict(channels=2, width=13, w=[3, 2, 7, 7], strides=[2, 2], side=3,
                           patches=[(12, 3, 0), (15, 0, 0), (11, 0, 3)]),
    "pointwise": dict(channels=16, width=16, w=[24, 16, 1, 1], residual=True, activation="clip",
                      patches=[(5, 0, 0), (9, 0, 0), (1, 0, 0)]),
    # (clip: with no activation or relu it would run register tiles, so keep its own kernels)
    "grouped_pointwise": dict(channels=16, width=9, w=[8, 8, 1, 1], group=2, activation="clip",
                              patches=[(3, 0, 0), (7, 0, 0)]),
    "depthwise": dict(channels=24, width=16, w=[24, 1, 3, 3], group=24, side=1, activation="clip",
                      patches=[(5, 1, 0), (9, 0, 0), (8, 0, 1), (3, 1, 1)]),
    "depthwise_stride2": dict(channels=8, width=15, w=[8, 1, 3, 3], group=8, strides=[2, 2], side=1,
                              residual=True, patches=[(7, 1, 0), (9, 0, 0), (8, 0, 1)]),
}


def _patch(case: dict[str, Any], rows: int, top: int, bottom: int, scratch: str
           ) -> tuple[list[np.ndarray | None], list[int], dict[str, Any], int | None]:
    """One patch of `case`: inputs, output shape, kwargs and planned scratch bytes."""
    w_shape = case["w"]
    strides = case.get("strides", [1, 1])
    side = case.get("side", 0)
    pads = [top, side, bottom, side]
    x = RNG.standard_normal([1, case["channels"], rows, case["width"]], dtype=np.float32)
    out_shape = [1, w_shape[0]] + [(size + pads[i] + pads[2 + i] - w_shape[2 + i]) // strides[i] + 1
                                   for i, size in enumerate(x.shape[2:])]
    inputs = [x, RNG.standard_normal(w_shape, dtype=np.float32), RNG.standard_normal([w_shape[0]], dtype=np.float32),
              RNG.standard_normal(out_shape, dtype=np.float32) if case.get("residual") else None]
    kwargs: dict[str, Any] = {"strides": strides, "pads": pads, "group": case.get("group", 1)}
    if case.get("activation") == "clip":
        kwargs.update(activation="clip", alpha=0.0, beta=6.0)
    elif case.get("activation"):
        kwargs["activation"] = case["activation"]
    workspace = conv_scratch_bytes(x.shape, w_shape, out_shape, strides, pads, kwargs["group"], 4) or None
    if scratch == "one_row":
        assert workspace is not None, "an im2col case"
        workspace = im2col_row_bytes(w_shape, out_shape, 4)
    return inputs, out_shape, kwargs, workspace


def emit_patches(module: ir.Module, symbols: list[str], sites: list[dict[str, Any]]) -> None:
    """The sites of a tiled conv's patches as a compiled model has them:
    `symbols[i]` is site i's own kernel (specialised to its rows), and
    `symbols[len(sites) + i]` its wrapper calling the one conv kernel that
    reads its rows at run time (what the patches of a tiled conv call),
    emitted once for all of them."""
    emit_sharing_sites(module, symbols, sites, conv_row_sizes, emit_conv, "a 2-D conv patch shares its kernel")


@pytest.mark.parametrize("name, scratch", [(name, "full_block") for name in sorted(PATCHED_CONVS)]
                         + [("im2col_residual", "one_row"), ("seven_by_seven", "one_row")])
def test_patches_share_a_kernel_that_gives_the_bytes_of_their_own(name: str, scratch: str) -> None:
    # one_row: the least scratch the pool may plan, so several blocks of rows and slices of channels
    case = PATCHED_CONVS[name]
    patches = [_patch(case, rows, top, bottom, scratch) for rows, top, bottom in case["patches"]]
    sites = [site_for("conv", inputs, [(out_shape, "float32")], workspace_bytes=workspace, **kwargs)
             for inputs, out_shape, kwargs, workspace in patches]
    # every patch's own kernel and the shared one in one module, compiled once
    compiled = CompiledSites(lambda module, symbols: emit_patches(module, symbols, sites), 2 * len(sites))
    for index, ((inputs, out_shape, kwargs, workspace), patch) in enumerate(zip(patches, case["patches"], strict=True)):
        want = np.empty(out_shape, np.float32)
        hk.conv(*inputs, out=want, **kwargs)
        own = np.full(out_shape, np.nan, np.float32)
        run_guarded(None, "conv", inputs, own, kwargs, workspace_bytes=workspace, compiled=compiled[index])
        np.testing.assert_allclose(own, want, rtol=1e-5, atol=2e-5 * max(float(np.abs(want).max()), 1.0))
        shared = np.full(out_shape, np.nan, np.float32)
        run_guarded(None, "conv", inputs, shared, kwargs, workspace_bytes=workspace,
                    compiled=compiled[len(sites) + index])
        assert shared.tobytes() == own.tobytes(), patch


def test_patch_sizes_are_its_rows_and_blocks() -> None:
    inputs, out_shape, kwargs, workspace = _patch(PATCHED_CONVS["stem_stride2"], 19, 0, 0, "full_block")
    site = site_for("conv", inputs, [(out_shape, "float32")], workspace_bytes=workspace, **kwargs)
    general = conv_row_sizes(site)
    assert general is not None
    general_site, sizes = general
    assert sizes == [19, 9, 0, 9, 3]  # 9 output rows in one block of all 3 channels
    assert general_site["inputs"][0]["shape"] == [1, 3, None, 40]
    assert general_site["kwargs"]["pads"] == [None, 1, None, 1]
    # a 1-D or 3-D conv keeps its own function
    x = np.zeros([1, 3, 9], np.float32)
    one_d = site_for("conv", [x, np.zeros([4, 3, 3], np.float32), None, None], [([1, 4, 7], "float32")],
                     workspace_bytes=1024)
    assert conv_row_sizes(one_d) is None


@pytest.mark.parametrize("name", ["grouped_pointwise", "shallow_pointwise", "shallow_spatial"])
def test_a_patch_that_runs_register_tiles_keeps_its_own_kernel(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the tiles sum each output in another order than a shared kernel's sgemm: sharing would change the bits
    monkeypatch.setattr(conv_module, "host_has_avx512", lambda: False)  # (an AVX-512 host keeps sgemm)
    case = {"grouped_pointwise": PATCHED_CONVS["grouped_pointwise"],
            "shallow_pointwise": dict(channels=16, width=9, w=[8, 16, 1, 1]),
            "shallow_spatial": dict(channels=3, width=20, w=[8, 3, 3, 3], side=1)}[name]
    for activation, shares in (("relu", False), (None, False), ("clip", True)):
        inputs, out_shape, kwargs, workspace = _patch({**case, "activation": activation}, 6, 0, 0, "full_block")
        site = site_for("conv", inputs, [(out_shape, "float32")], workspace_bytes=workspace, **kwargs)
        assert conv_module.register_tiles(site) != shares, activation
        assert (conv_row_sizes(site) is not None) == shares, activation


def _selection(model, **options) -> tuple[Any, dict[str, Any]]:
    module, _ = lower(model, **options)
    ConvertDnnToLlvmPass().apply(Context(), module)
    selection = select_kernels(module, "native")
    return selection, read_meta(module, "main_graph")


def test_a_tiled_conv_shares_one_function_and_an_untiled_one_keeps_its_own(monkeypatch: pytest.MonkeyPatch
                                                                           ) -> None:
    monkeypatch.setattr(conv_module, "host_has_avx512", lambda: False)  # the register tiles' rule, on any host
    untiled, _ = _selection(mobilenet_v2())
    assert not untiled.wrappers  # every conv alone with its shape: specialised to it
    tiled, meta = _selection(mobilenet_v2(), tile_region=12, tile_patches=5)
    convs = [site for site in meta["sites"] if site["kernel"] == "conv"]
    shapes = {json.dumps([site["inputs"], site["outputs"], site["kwargs"]]) for site in convs}
    functions = [symbol for symbol, (kernel, _) in tiled.kernels.items() if kernel.name == "conv"]
    shared = [symbol for symbol in functions if symbol.endswith("_sizes")]
    # the region (every conv of the graph) holds 11 convs, two of them alike but for their rows (the
    # first two blocks' 16 -> 64 expansions): 10 kinds for the 38 shapes of the 5 patches' 55 convs. Two
    # kinds, the projections 64 -> 24 and 96 -> 24 (no activation, no residual), run register tiles, so
    # each of their 5 shapes keeps its own function; the other 8 kinds share one each
    tiles = {json.dumps([site["inputs"], site["outputs"], site["kwargs"]]) for site in convs
             if conv_module.register_tiles(site)}
    assert len(shapes) == 38 and len(tiles) == 5, sorted(functions)
    assert len(shared) == 8 and len(functions) == 8 + 5, sorted(functions)
    assert {general for general, _, _ in tiled.wrappers.values()} == set(shared)


def test_a_tiled_program_computes_the_bytes_of_its_own_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    model = mobilenet_v2()
    inputs = random_inputs(model)
    # a branching region in two patches (their own functions compile in 1.5 s; in 5 patches, 16 s)
    options = dict(tile_region=11, tile_patches=2)
    selection, _ = _selection(model, **options)
    assert len({general for general, _, _ in selection.wrappers.values()}) >= 5, "the patches share functions"
    shared = pyocc.compile(model, **options).run(inputs)
    conv = NATIVE_KERNELS["conv"]
    monkeypatch.setitem(NATIVE_KERNELS, "conv", dataclasses.replace(conv, min_sharing_sites=10 ** 9))
    own = pyocc.compile(model, **options).run(inputs)
    for name, value in own.items():
        assert shared[name].tobytes() == value.tobytes(), name

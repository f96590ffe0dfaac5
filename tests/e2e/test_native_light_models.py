"""The light models with native kernels: which sites still call numpy, and
the numbers against onnxruntime with random weights.

tests/e2e/test_light_models_numerics.py runs every light model in every
memory mode with the default kernels (native), and checks the native and
numpy sites the report counts; this file checks which sites fall back to
numpy, and that `kernels="numpy"` still calls numpy everywhere and matches.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from xdsl.context import Context

import pyocc
from pyocc.api import lower
from pyocc.errors import PyoccError
from pyocc.lowering.convert_dnn_to_llvm import (
    ConvertDnnToLlvmPass,
    KernelSelection,
    lowered_functions,
    read_meta,
    select_kernels,
)
from pyocc.lowering.native import NATIVE_KERNELS
from pyocc.testing.light_models import LIGHT_MODELS, light_model_path, onnxruntime_reference

#: what the light models compute besides convolutions and matrix products
#: (the native conv / gemm kernels are the other half of issue #16): every
#: one of these must run natively
LIGHT_MODEL_KERNELS = {"average_pool", "channel_affine", "concat", "copy", "global_average_pool", "lrn", "max_pool",
                       "softmax", "transpose", "unary"}
#: the light models' convolution and matrix-product kernels still without a
#: native kernel; once they have one, every light model runs without numpy
NOT_NATIVE_YET = {"conv", "preact_conv", "gemm"} - set(NATIVE_KERNELS)


def test_the_light_models_kernels_are_native() -> None:
    assert LIGHT_MODEL_KERNELS <= set(NATIVE_KERNELS)


@functools.cache
def native_selection(name: str) -> tuple[KernelSelection, str, dict[str, Any]]:
    """Light model `name` lowered, converted to LLVM form and its kernels
    selected (kernels=native, nothing compiled): the selection, the
    function's name and its site table. Once per worker: DenseNet-121's
    takes 2 CPU s, and two tests read it."""
    module, _ = lower(str(light_model_path(name)))
    ConvertDnnToLlvmPass().apply(Context(), module)
    selection = select_kernels(module, "native")
    function = lowered_functions(module)[0]
    return selection, function, read_meta(module, function)


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_numpy_sites_are_only_the_kernels_without_a_native_one(name: str) -> None:
    """With kernels=native, a site calls numpy only if its kernel has no
    native emitter; with no such kernel left, the model calls numpy nowhere."""
    _, _, meta = native_selection(name)
    numpy_kernels = sorted({site["kernel"] for site in meta["sites"] if not site["native"]})
    assert set(numpy_kernels) <= NOT_NATIVE_YET, f"{name}: {numpy_kernels} call numpy"
    kinds = {site["kernel"] for site in meta["sites"]}
    assert kinds <= LIGHT_MODEL_KERNELS | {"conv", "preact_conv", "gemm"}, kinds
    expected = sum(site["kernel"] in NOT_NATIVE_YET for site in meta["sites"])
    assert meta["numpy_sites"] == expected
    if not NOT_NATIVE_YET:
        assert meta["numpy_sites"] == 0


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet"])
def test_numpy_kernels_match_onnxruntime(name: str) -> None:
    """`kernels="numpy"` calls numpy at every site and still matches
    onnxruntime. (The native default on the same models, with its site
    counts in the report, is test_light_models_numerics's pool case.)"""
    model, inputs, expected = onnxruntime_reference(name)
    reference = pyocc.compile(model, kernels="numpy")
    assert reference.numpy_sites == len(reference.native.meta["sites"]) > 0 and reference.native_sites == 0
    report = reference.memory_report()
    assert (report.native_sites, report.numpy_sites) == (0, reference.numpy_sites)
    got = reference.run(inputs)
    for value, want in zip(got.values(), expected, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-5)


def test_unknown_kernels_is_one_clear_error() -> None:
    with pytest.raises(PyoccError, match="unknown kernels 'fast'; use native or numpy"):
        pyocc.compile(light_model_path("squeezenet"), kernels="fast")


def test_densenet_preact_convs_share_their_kernels() -> None:
    """DenseNet-121's group-1 preact_convs differ only in channels and
    scratch: each site's function is a wrapper of a function shared by a
    whole dense block, which keeps its compile short (docs/performance.md)."""
    selection, name, meta = native_selection("densenet121")
    preact = [site for site in meta["sites"]
              if site["kernel"] == "preact_conv" and int(site["kwargs"].get("group") or 1) == 1]
    assert len(preact) == 61
    wrapped = {f"{name}_site_{site['site']}" for site in preact}
    assert wrapped <= selection.wrappers.keys()
    shared = {general for general, _, _ in selection.wrappers.values()}
    assert all(symbol.endswith("_sizes") and symbol in selection.kernels for symbol in shared)
    assert len(shared) <= 8 and len(selection.kernels) < 30

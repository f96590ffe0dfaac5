"""A compile runs Python's cyclic garbage collector less often
(pyocc.api.COMPILE_GC_THRESHOLD) and leaves its thresholds as it found
them, whether it returns or raises."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import pyocc
from pyocc import api
from pyocc.errors import PyoccError
from pyocc.examples.tiny_cnn import build


@pytest.fixture
def thresholds() -> Iterator[list[tuple[int, int, int]]]:
    """Python's default thresholds for the test (restored after it), and
    the list the import appends the thresholds it runs under to."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    seen: list[tuple[int, int, int]] = []
    real = api.import_model

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    api.import_model = spy
    try:
        yield seen
    finally:
        api.import_model = real
        gc.set_threshold(*before)


def test_a_compile_collects_less_and_restores_the_thresholds(thresholds: list[tuple[int, int, int]]) -> None:
    pyocc.compile(build(), kernels="numpy")
    assert thresholds == [(api.COMPILE_GC_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_is_kept(thresholds: list[tuple[int, int, int]]) -> None:
    gc.set_threshold(50_000, 5, 5)
    pyocc.lower(build())
    assert thresholds == [(50_000, 5, 5)]
    assert gc.get_threshold() == (50_000, 5, 5)


def test_a_failed_compile_restores_them(thresholds: list[tuple[int, int, int]]) -> None:
    with pytest.raises(PyoccError, match="unknown target"):
        pyocc.compile(build(), target="tpu")
    assert gc.get_threshold() == (700, 10, 10)

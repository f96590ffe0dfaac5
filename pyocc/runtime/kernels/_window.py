"""Shared geometry of sliding-window operators (conv, conv_transpose, pooling).

A window operator visits, for every kernel tap, one strided slice of the
(padded) input; looping over the few taps in Python and letting numpy sweep
all output positions at once keeps these kernels vectorised.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Window:
    """Spatial parameters of a sliding window over the trailing dims of NC... data."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]

    @classmethod
    def from_onnx(
        cls,
        kernel: Sequence[int],
        strides: Sequence[int] | None,
        pads: Sequence[int] | None,
        dilations: Sequence[int] | None,
    ) -> "Window":
        """Build a window from ONNX attributes (pads as [begins..., ends...])."""
        rank = len(kernel)
        pads = list(pads) if pads else [0] * (2 * rank)
        if len(pads) != 2 * rank:
            raise ValueError(f"pads must have {2 * rank} entries for a {rank}-D window, got {pads}")
        return cls(
            kernel=tuple(int(k) for k in kernel),
            strides=tuple(int(s) for s in strides) if strides else (1,) * rank,
            dilations=tuple(int(d) for d in dilations) if dilations else (1,) * rank,
            pads_begin=tuple(int(p) for p in pads[:rank]),
            pads_end=tuple(int(p) for p in pads[rank:]),
        )

    def taps(self) -> Iterator[tuple[int, ...]]:
        """All kernel tap positions, in C order (matching the weight layout)."""
        return itertools.product(*(range(k) for k in self.kernel))

    def tap_slices(self, tap: Sequence[int], out_spatial: Sequence[int]) -> tuple[slice, ...]:
        """Slices of the padded input that tap ``tap`` reads for every output position."""
        return tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s)
            for t, d, s, o in zip(tap, self.dilations, self.strides, out_spatial)
        )

    def pad_input(self, x: np.ndarray, out_spatial: Sequence[int], fill: float) -> np.ndarray:
        """Return ``x`` padded with ``fill`` so every tap slice is in bounds.

        The end padding is whatever the output size needs, which also covers
        ceil_mode's extra partial windows (the compiler already sized ``out``).
        Returns ``x`` itself, without a copy, when no padding is needed.
        """
        spatial = x.shape[2:]
        needed = [
            (o - 1) * s + (k - 1) * d + 1
            for o, s, k, d in zip(out_spatial, self.strides, self.kernel, self.dilations)
        ]
        ends = [max(0, n - b - size) for n, b, size in zip(needed, self.pads_begin, spatial)]
        if not any(self.pads_begin) and not any(ends):
            return x
        padded_shape = x.shape[:2] + tuple(b + size + e for b, size, e in zip(self.pads_begin, spatial, ends))
        padded = np.full(padded_shape, fill, dtype=x.dtype)
        interior = tuple(slice(b, b + size) for b, size in zip(self.pads_begin, spatial))
        padded[(slice(None), slice(None)) + interior] = x
        return padded

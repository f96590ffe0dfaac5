"""A problem as parallel lists, with the derived facts every algorithm needs.

Algorithms work on buffer *indices* into these lists rather than on ``Buffer``
objects: attribute lookups on 100,000 frozen dataclasses are what makes naive
planners slow. Derived facts (conflict counts, the conflict graph) are computed
once, on first use, and shared by every algorithm ``auto`` runs.
"""

from __future__ import annotations

import heapq
import operator
from typing import TYPE_CHECKING

import numpy as np

from .problem import Problem

if TYPE_CHECKING:
    from pyocc.runtime.planner_native import Placer


def round_up(value: int, alignment: int) -> int:
    """The smallest multiple of ``alignment`` that is >= ``value`` (value >= 0)."""
    return -(-value // alignment) * alignment


class PreparedProblem:
    """Parallel lists ``names``, ``sizes``, ``firsts``, ``lasts``, ``aligns`` of a problem."""

    def __init__(self, problem: Problem) -> None:
        """Flatten ``problem`` into lists; derived facts are computed lazily."""
        self.problem = problem
        buffers = problem.buffers
        self.n = len(buffers)
        self.names = [b.name for b in buffers]
        self.sizes = [b.size for b in buffers]
        self.firsts = [b.first for b in buffers]
        self.lasts = [b.last for b in buffers]
        self.aligns = [b.alignment for b in buffers]
        # Zero-size buffers conflict with nothing: algorithms skip them and
        # give them offset 0, which every alignment accepts.
        self.active = [i for i, size in enumerate(self.sizes) if size > 0]
        self._conflict_counts: list[int] | None = None
        self.lower_bound: int | None = None
        """Filled in by ``bounds.lower_bound`` on first use (a cache)."""
        self._adjacency: list[list[int]] | None = None
        self.placer: Placer | None = None
        """The native placement (``placement.native_placer``), made on first use."""

    def conflict_counts(self) -> list[int]:
        """For each buffer, how many other non-empty buffers overlap it in time.

        Counted without enumerating pairs: ``j`` overlaps ``i`` iff
        ``first_j <= last_i`` and not ``last_j < first_i`` (the second set is a
        subset of the first), so two binary searches per buffer suffice.
        """
        if self._conflict_counts is None:
            counts = np.zeros(self.n, dtype=np.int64)
            if self.active:
                active = np.array(self.active, dtype=np.int64)
                firsts = np.array(self.firsts, dtype=np.int64)[active]
                lasts = np.array(self.lasts, dtype=np.int64)[active]
                started = np.searchsorted(np.sort(firsts), lasts, side="right")
                ended = np.searchsorted(np.sort(lasts), firsts, side="left")
                counts[active] = started - ended - 1
            self._conflict_counts = counts.tolist()
        return self._conflict_counts

    def total_conflicts(self) -> int:
        """The number of conflicting (overlapping, both non-empty) pairs."""
        return sum(self.conflict_counts()) // 2

    def adjacency(self) -> list[list[int]]:
        """The conflict graph as adjacency lists (built by a sweep over steps).

        Costs O(n + pairs) time and memory: callers check ``total_conflicts``
        first on big problems.
        """
        if self._adjacency is None:
            adjacency: list[list[int]] = [[] for _ in range(self.n)]
            firsts, lasts = self.firsts, self.lasts
            live: dict[int, None] = {}  # insertion-ordered set of live buffers
            ending: list[tuple[int, int]] = []  # heap of (last, index)
            for i in sorted(self.active, key=firsts.__getitem__):
                first = firsts[i]
                while ending and ending[0][0] < first:
                    del live[heapq.heappop(ending)[1]]
                neighbours = adjacency[i]
                for j in live:
                    neighbours.append(j)
                    adjacency[j].append(i)
                live[i] = None
                heapq.heappush(ending, (lasts[i], i))
            self._adjacency = adjacency
        return self._adjacency

    def pool_size(self, offsets: list[int]) -> int:
        """max(offset + size) over all buffers, 0 when there are none."""
        return max(map(operator.add, offsets, self.sizes), default=0)

    def offsets_by_name(self, offsets: list[int]) -> dict[str, int]:
        """Index-ordered offsets as the name -> offset dict a ``Plan`` carries."""
        return dict(zip(self.names, offsets))

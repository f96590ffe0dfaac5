"""The planner's plain-data vocabulary: buffers, problems, plans and errors.

A *problem* is a set of buffers, each with a byte size and a live range
``[first, last]`` (inclusive) on an abstract step axis. A *plan* gives every
buffer a byte offset in one pool so that two buffers whose live ranges overlap
never share a byte. Nothing here knows about IR: any compiler can build these.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class PlanningError(Exception):
    """A problem the planner cannot accept: bad sizes, ranges, names or options.

    The message is one line a user can act on.
    """


class PlanError(Exception):
    """A plan that breaks a rule of the problem (found by ``verify_plan``).

    The message names the buffer(s) involved and the rule broken.
    """


def _is_int(value: object) -> bool:
    """True for real integers; ``bool`` is an ``int`` subclass but never a size."""
    return isinstance(value, int) and not isinstance(value, bool)


def fitted_alignment(alignment: int, size: int) -> int:
    """The alignment a buffer of `size` bytes gets when it may get at most
    `alignment`: all of it, or, for a smaller buffer, the next power of two
    of its size (1 for an empty one). Such a buffer lies inside one block
    of `alignment` bytes all the same (a 64-byte-aligned pool's cache line),
    so no access to it touches more lines than at `alignment`; and since
    a size is a multiple of its element's size, a power of two, so is the
    offset. At a small symbolic size (a sequence of 1) a whole line for
    each of many 4- to 32-byte tensors would be most of the pool. The one
    rule for every small buffer: the compile's static planning problem
    applies it (`pyocc.rewrites.dnn_memory_pool.planning_problem`), the
    symbolic planner at every value (``SymbolicBuffer``), and the code that
    evaluates a symbolic plan at run time."""
    if size >= alignment:
        return alignment
    return min(alignment, 1 << max(size - 1, 0).bit_length())


@dataclass(frozen=True)
class Buffer:
    """One buffer to place: its size in bytes and the steps it is live.

    ``first`` and ``last`` are inclusive: the buffer holds data from the start
    of step ``first`` to the end of step ``last``. Two buffers conflict when
    their ranges share a step and both have a non-zero size.
    """

    name: str
    size: int | None
    """Bytes, >= 0. Zero-size buffers conflict with nothing. ``None`` marks a
    dynamic buffer whose size is known only at run time: ``plan_pools`` leaves
    it to the runtime allocator, ``plan_memory`` refuses it."""
    first: int
    """First step the buffer is live (inclusive)."""
    last: int
    """Last step the buffer is live (inclusive), >= first."""
    alignment: int = 1
    """The offset must be a multiple of this (>= 1; not necessarily a power of two)."""
    pools: tuple[str, ...] = ()
    """Ordered pool candidates (``plan_pools``); empty: every read-write pool
    in pool order. Ignored by single-pool planning."""
    traffic: int | None = None
    """Bytes read plus written over the buffer's life; ``None``: assume one
    write and one read (``2 * size``). ``plan_pools`` gives the fast pool to
    the buffers that carry the most traffic."""

    @property
    def is_dynamic(self) -> bool:
        """True when the size is unknown at compile time (``size is None``)."""
        return self.size is None

    def traffic_bytes(self) -> int:
        """``traffic`` if given, else ``2 * size`` (0 for a dynamic buffer)."""
        if self.traffic is not None:
            return self.traffic
        return 2 * self.size if self.size is not None else 0

    def overlaps(self, other: Buffer) -> bool:
        """True when the two live ranges share at least one step."""
        return self.first <= other.last and other.first <= self.last


def _check_buffer(index: int, buffer: Buffer) -> None:
    """Raise ``PlanningError`` naming the buffer when one of its fields is invalid."""
    where = f"buffer {index} ({buffer.name!r})"
    if not isinstance(buffer.name, str) or not buffer.name:
        raise PlanningError(f"buffer {index}: name must be a non-empty string")
    if buffer.size is not None and (not _is_int(buffer.size) or buffer.size < 0):
        raise PlanningError(f"{where}: size must be a non-negative integer, got {buffer.size!r}")
    if not _is_int(buffer.first) or not _is_int(buffer.last):
        raise PlanningError(f"{where}: first and last must be integers")
    if buffer.last < buffer.first:
        raise PlanningError(
            f"{where}: last ({buffer.last}) is before first ({buffer.first})"
        )
    if not _is_int(buffer.alignment) or buffer.alignment < 1:
        raise PlanningError(
            f"{where}: alignment must be an integer >= 1, got {buffer.alignment!r}"
        )
    if buffer.traffic is not None and (not _is_int(buffer.traffic) or buffer.traffic < 0):
        raise PlanningError(f"{where}: traffic must be None or a non-negative integer, got {buffer.traffic!r}")
    if isinstance(buffer.pools, str) or not all(isinstance(p, str) and p for p in buffer.pools):
        raise PlanningError(f"{where}: pools must be a sequence of pool names")


@dataclass(frozen=True)
class Problem:
    """The buffers to place in one pool; validated on construction.

    Raises ``PlanningError`` for a negative size, ``last < first``, an
    alignment below 1 or two buffers with the same name.
    """

    buffers: tuple[Buffer, ...]
    pools: tuple[dict, ...] = field(default=(), compare=False)
    """Optional pool descriptions (``{"name": ..., "size": None | int}``) from
    JSON, carried through unchanged; single-pool planning does not use them."""

    def __post_init__(self) -> None:
        """Normalise to tuples and validate every buffer (``PlanningError``)."""
        # Accept any iterable (a list is the natural thing to write) but store
        # a tuple so the problem stays immutable.
        if not isinstance(self.buffers, tuple):
            object.__setattr__(self, "buffers", tuple(self.buffers))
        if not isinstance(self.pools, tuple):
            object.__setattr__(self, "pools", tuple(self.pools))
        seen: set[str] = set()
        for index, buffer in enumerate(self.buffers):
            if not isinstance(buffer, Buffer):
                raise PlanningError(f"buffer {index}: expected a Buffer, got {type(buffer).__name__}")
            _check_buffer(index, buffer)
            if buffer.name in seen:
                raise PlanningError(f"buffer {index}: duplicate buffer name {buffer.name!r}")
            seen.add(buffer.name)

    def __len__(self) -> int:
        """The number of buffers."""
        return len(self.buffers)

    @property
    def dynamic(self) -> tuple[Buffer, ...]:
        """The buffers whose size is unknown at compile time."""
        return tuple(b for b in self.buffers if b.size is None)

    def static(self) -> Problem:
        """The same problem without its dynamic buffers (pools kept)."""
        return Problem(tuple(b for b in self.buffers if b.size is not None), self.pools)

    def by_name(self) -> dict[str, Buffer]:
        """Buffers keyed by name."""
        return {buffer.name: buffer for buffer in self.buffers}

    @property
    def steps(self) -> range:
        """The steps from the earliest ``first`` to the latest ``last`` (empty if no buffers)."""
        if not self.buffers:
            return range(0)
        return range(
            min(b.first for b in self.buffers), max(b.last for b in self.buffers) + 1
        )


@dataclass(frozen=True)
class Plan:
    """Where every buffer lives in the pool, and how the plan was found."""

    offsets: dict[str, int]
    """Buffer name -> byte offset in the pool."""
    pool_size: int
    """max(offset + size) over all buffers; 0 when there are none."""
    algorithm: str
    """The algorithm that produced the plan ("auto:<winner>" for auto)."""
    optimal: bool
    """True only when proven optimal: the pool meets the lower bound, or exact finished."""
    plan_ms: float
    """Wall-clock milliseconds spent planning (including verification)."""

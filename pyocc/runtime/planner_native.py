"""The planner's hot loops as native code: placing an order's buffers
first fit (or best fit), the hill climb's trials, and the symbolic
planner's stacked layouts (their pool at every value of a range, and its
greedy layouts).

The hill climb (pyocc.planning.algorithms.hill_climb_offsets) places a
trial order thousands of times per search, each buffer at the lowest
aligned offset that is free among the conflicting buffers placed before
it. In Python a trial of T5's 151 buffers cost about 60 µs, and the
symbolic planner's 16 searches over a second (issue #21); here it is a few
µs, most of them in the call. The rule and the offsets are exactly those
of pyocc.planning.placement's graph engine (first fit, or best fit: the
smallest gap that fits; tests compare the two). The functions below are
written once in LLVM IR with llvmlite and JIT-compiled together, once a
process, simplified but not optimised further (pyocc.runtime.jit's
SIMPLIFY_SPEED_LEVEL; its object cache keeps them), by the first
hill climb that runs long (pyocc.planning.algorithms.NATIVE_AFTER_TRIALS);
until then, and where the graph engine does not place, the planner's
Python does the same work:

    int64_t pyocc_place(
        int64_t n,                 // buffers in the problem
        int64_t count,             // buffers in the order
        const int64_t *order,      // their indices, in placing order
        int64_t keep,              // order[:keep] take their offsets from
        const int64_t *kept,       //   kept[i] (a placement of an order that starts the same)
        const int64_t *sizes, const int64_t *alignments,
        const int64_t *starts,     // the conflict graph: buffer i's neighbours are
        const int64_t *neighbours, //   neighbours[starts[i] .. starts[i + 1])
        int64_t limit,             // no buffer may end above this
        int64_t best_fit,          // 0: the lowest gap that fits; 1: the smallest
        int64_t *offsets,          // out: every buffer's offset (0 if not in the order)
        int8_t *placed,            // scratch, n bytes
        int64_t *busy_start,       // scratch, as many as the most neighbours
        int64_t *busy_end,
        int64_t *critical);        // out: the positions in `order` of the buffers that
                                   //   end at the pool's top, then -1
    // the pool (the largest offset + size of any buffer), or -1 as soon as
    // a placed buffer ends above `limit`

Each buffer's placed neighbours go into `busy` sorted by (start, end)
(insertion sort: a buffer has a few dozen neighbours at most in the
problems the graph engine takes), and the scan is `choose_gap`'s: the
first gap between the union of the busy ranges whose aligned start fits.

The symbolic planner (pyocc.planning.symbolic) scores every candidate
layout by its pool at every value of the range (T5: 148 layouts, 151
buffers, 512 values; a few numpy calls per buffer, 0.2 s in all):

    void pyocc_stacked_pool(
        int64_t points,            // values the sizes are given at
        int64_t count,             // buffers, in placing order:
        const int64_t *order,
        const int64_t *starts,     // buffer i sits on the buffers
        const int64_t *below,      //   below[starts[i] .. starts[i + 1])
        const int64_t *sizes,      // buffer i's size at value g: sizes[i * points + g]
        const int64_t *alignments, // its alignment there, likewise
        int64_t *ends,             // scratch, like sizes
        int64_t *pool);            // out: the pool at each value

Each buffer's offset at a value is the largest end there of the buffers
it sits on, aligned up; the pool is the largest end
(`pyocc.planning.symbolic._pool`, the same numbers).

And one of the layouts it scores is greedy by size at a reference point
(`pyocc.planning.symbolic._greedy`, the same layouts; 0.17 s of numpy calls
for T5's 36):

    void pyocc_stacked_greedy(
        int64_t points, int64_t count,
        const int64_t *order,      // the buffers, largest at the reference first
        int64_t reference,         // the point the gaps are chosen at
        int64_t use_gaps,          // 0: each buffer sits on all its placed conflicts
        const int64_t *sizes, const int64_t *alignments,  // as for the pool
        const int64_t *starts,     // buffer i's conflicts, sorted, itself left out:
        const int64_t *conflicts,  //   conflicts[starts[i] .. starts[i + 1])
        int64_t *offsets, int64_t *ends,  // scratch, like sizes
        int8_t *placed,            // scratch, a byte per buffer
        int64_t *chosen,           // out: how many buffers buffer i sits on,
        int64_t *below,            //   below[starts[i] ..], sorted
        int64_t *by_end, int64_t *at, int64_t *floors);  // scratch, the most conflicts + 1

With `use_gaps`, a buffer sits on the fewest of its placed conflicts, by
their end at the reference, whose top leaves it a gap below the others at
every point (`_lowest_gap`).

The hill climb itself runs natively too, a chunk of trials per call: each
trial draws the same random numbers its Python loop draws from
``random.Random`` (CPython's Mersenne Twister: its 624 words and position,
from ``getstate()``, twisted and tempered here as `_random` does; ``choice``
and ``randrange`` are ``_randbelow``, the top bits of a word drawn until
below n, and ``random() < 0.5`` is the top bit of the first of its two
words), moves or swaps as the Python loop does, and places the trial with
`pyocc_place`. The Python loop's trials cost about 10 µs each, 3 of them
the call into `pyocc_place`; here about 4:

    int64_t pyocc_climb(
        int64_t trials, int64_t bound,  // at most this many; stop once the best pool is <= bound
        int64_t n, int64_t count,  // buffers, and how many of them the order holds
        int64_t *order,            // in/out: the climb's order
        int64_t *trial,            // scratch, count
        int64_t *current, int64_t *best,  // in/out: the current and the best offsets
        int64_t *critical,         // in/out: positions of the buffers at the top, then -1
        int64_t *status,           // in/out: the top of the current placement, the best pool
        int64_t *state,            // in/out: the generator's 624 words and its position
        ... the problem and scratch as for pyocc_place, and count + 1 more);
    // the trials run
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import random
from array import array
from dataclasses import dataclass
from collections.abc import Callable, Sequence
from typing import Any

import llvmlite.ir as ir
import numpy as np

from pyocc.runtime.ir_writer import I8, I64, PTR, IRWriter
from pyocc.runtime.jit import SIMPLIFY_SPEED_LEVEL, jit_module


@dataclass(frozen=True)
class _Signature:
    """One of the module's functions: its name, its arguments' names (the
    `integers` are int64s, the others pointers) and whether it returns an
    int64 (else nothing)."""

    symbol: str
    arguments: tuple[str, ...]
    integers: frozenset[str]
    returns_integer: bool

    def declare(self, module: ir.Module) -> tuple[dict[str, ir.Value], IRWriter]:
        """The function declared in `module`: its arguments by name, and a writer at its start."""
        kinds = [I64 if name in self.integers else PTR for name in self.arguments]
        function = ir.Function(module, ir.FunctionType(I64 if self.returns_integer else ir.VoidType(), kinds),
                               name=self.symbol)
        for argument, name in zip(function.args, self.arguments, strict=True):
            argument.name = name
        return dict(zip(self.arguments, function.args, strict=True)), IRWriter.for_function(function)

    def bound(self, engine: Any) -> Callable[..., Any]:
        """The compiled function in `engine`, callable from Python (ctypes)."""
        kinds = [ctypes.c_int64 if name in self.integers else ctypes.c_void_p for name in self.arguments]
        prototype = ctypes.CFUNCTYPE(ctypes.c_int64 if self.returns_integer else None, *kinds)
        return prototype(engine.get_function_address(self.symbol))


PLACE = _Signature("pyocc_place", (
    "n", "count", "order", "keep", "kept", "sizes", "alignments", "starts", "neighbours", "limit", "best_fit",
    "offsets", "placed", "busy_start", "busy_end", "critical"), frozenset({"n", "count", "keep", "limit", "best_fit"}),
    returns_integer=True)
STACKED_POOL = _Signature("pyocc_stacked_pool", (
    "points", "count", "order", "starts", "below", "sizes", "alignments", "ends", "pool"),
    frozenset({"points", "count"}), returns_integer=False)
STACKED_GREEDY = _Signature("pyocc_stacked_greedy", (
    "points", "count", "order", "reference", "use_gaps", "sizes", "alignments", "starts", "conflicts", "offsets",
    "ends", "placed", "chosen", "below", "by_end", "at", "floors"),
    frozenset({"points", "count", "reference", "use_gaps"}), returns_integer=False)

CLIMB = _Signature("pyocc_climb", (
    "trials", "bound", "n", "count", "order", "trial", "current", "best", "critical", "status", "state",
    "sizes", "alignments", "starts", "neighbours", "offsets", "placed", "busy_start", "busy_end", "found"),
    frozenset({"trials", "bound", "n", "count"}), returns_integer=True)
#: Python's Mersenne Twister (MT19937, as CPython's _random module runs it):
#: its state words, the twist's constants and the tempering masks
MT_WORDS, MT_SHIFT, MT_MATRIX, MT_UPPER, MT_LOWER = 624, 397, 0x9908B0DF, 0x80000000, 0x7FFFFFFF
MT_TEMPER_B, MT_TEMPER_C = 0x9D2C5680, 0xEFC60000


def planner_module() -> str:
    """The LLVM IR of `pyocc_place`, `pyocc_stacked_pool` and `pyocc_stacked_greedy` (the module docstring)."""
    module = ir.Module(name="pyocc_planner")
    place = _emit_place(module)
    _emit_stacked_pool(module)
    _emit_stacked_greedy(module)
    next_word = _emit_next_word(module)
    _emit_climb(module, place, next_word, _emit_random_below(module, next_word))
    return str(module)


def _emit_place(module: ir.Module) -> ir.Function:
    """`pyocc_place` (the module docstring) in `module`; returns it."""
    a, w = PLACE.declare(module)
    b = w.b
    with w.counted(0, a["n"]) as i:
        b.store(I8(0), w.at(a["placed"], i, I8))
        w.store(I64(0), a["offsets"], i)
    with w.counted(0, a["count"]) as k:
        i = w.load(a["order"], k)
        size = w.load(a["sizes"], i)
        offset = w.variable(-1)
        with b.if_else(b.icmp_signed("<", k, a["keep"])) as (kept, placed_here):
            with kept:
                w.set(offset, w.load(a["kept"], i))
            with placed_here:
                _place_one(w, a, i, size, offset)
        chosen = w.get(offset)
        w.store(chosen, a["offsets"], i)
        b.store(I8(1), w.at(a["placed"], i, I8))
        with b.if_then(b.icmp_signed(">", b.add(chosen, size), a["limit"])):
            b.ret(I64(-1))
    pool = w.variable(0)
    with w.counted(0, a["n"]) as i:
        end = b.add(w.load(a["offsets"], i), w.load(a["sizes"], i))
        w.set(pool, b.select(b.icmp_signed(">", end, w.get(pool)), end, w.get(pool)))
    # the hill climb's next move starts at one of these (the buffers that set the pool)
    found = w.variable(0)
    with w.counted(0, a["count"]) as k:
        i = w.load(a["order"], k)
        with b.if_then(b.icmp_signed("==", b.add(w.load(a["offsets"], i), w.load(a["sizes"], i)), w.get(pool))):
            w.store(k, a["critical"], w.get(found))
            w.set(found, b.add(w.get(found), I64(1)))
    w.store(I64(-1), a["critical"], w.get(found))
    b.ret(w.get(pool))
    return b.function


def _emit_stacked_pool(module: ir.Module) -> None:
    """`pyocc_stacked_pool` (the module docstring) in `module`."""
    a, w = STACKED_POOL.declare(module)
    b = w.b
    points = a["points"]
    with w.counted(0, points) as g:
        w.store(I64(0), a["pool"], g)
    with w.counted(0, a["count"]) as k:
        i = w.load(a["order"], k)
        first, last = w.load(a["starts"], i), w.load(a["starts"], b.add(i, I64(1)))
        row = b.gep(a["ends"], [b.mul(i, points)], source_etype=I64)
        # row by row: each loop over the points reads and writes contiguous memory
        with w.counted(0, points) as g:
            w.store(I64(0), row, g)
        with w.counted(first, last) as e:
            under = b.gep(a["ends"], [b.mul(w.load(a["below"], e), points)], source_etype=I64)
            with w.counted(0, points) as g:
                end, top = w.load(under, g), w.load(row, g)
                w.store(b.select(b.icmp_signed(">", end, top), end, top), row, g)
        with w.counted(0, points) as g:
            at = b.add(b.mul(i, points), g)
            alignment = w.load(a["alignments"], at)
            end = b.add(w.round_up(w.load(row, g), alignment), w.load(a["sizes"], at))
            w.store(end, row, g)
            pool = w.load(a["pool"], g)
            w.store(b.select(b.icmp_signed(">", end, pool), end, pool), a["pool"], g)
    b.ret_void()


def _emit_stacked_greedy(module: ir.Module) -> None:
    """`pyocc_stacked_greedy` (the module docstring) in `module`."""
    a, w = STACKED_GREEDY.declare(module)
    b = w.b
    points = a["points"]

    def cell(buffer: ir.Value, point: ir.Value) -> ir.Value:
        return b.add(b.mul(buffer, points), point)

    def flag(base: ir.Value, index: ir.Value) -> ir.Value:
        return b.icmp_signed("!=", b.load(w.at(base, index, I8), typ=I8), I8(0))

    def larger(x: ir.Value, y: ir.Value) -> ir.Value:
        return b.select(b.icmp_signed(">", x, y), x, y)

    with w.counted(0, a["count"]) as k:
        b.store(I8(0), w.at(a["placed"], w.load(a["order"], k), I8))
    with w.counted(0, a["count"]) as k:
        i = w.load(a["order"], k)
        first = w.load(a["starts"], i)
        # the placed conflicts, by index (the conflict lists are sorted)
        found = w.variable(0)
        with w.counted(first, w.load(a["starts"], b.add(i, I64(1)))) as e:
            c = w.load(a["conflicts"], e)
            with b.if_then(flag(a["placed"], c)):
                w.store(c, a["below"], b.add(first, w.get(found)))
                w.set(found, b.add(w.get(found), I64(1)))
        chosen = w.variable(w.get(found))  # all of them, unless a lower gap is found
        with b.if_then(b.and_(b.icmp_signed("!=", a["use_gaps"], I64(0)), b.icmp_signed(">", w.get(found), I64(0)))):
            _lowest_gap(w, a, i, first, w.get(found), chosen, cell)
        # the buffer sits on the chosen: the aligned largest of their ends, at every point
        with w.counted(0, points) as g:
            top = w.variable(0)
            with w.counted(0, w.get(chosen)) as q:
                w.set(top, larger(w.get(top), w.load(a["ends"], cell(w.load(a["below"], b.add(first, q)), g))))
            at = cell(i, g)
            offset = w.round_up(w.get(top), w.load(a["alignments"], at))
            w.store(offset, a["offsets"], at)
            w.store(b.add(offset, w.load(a["sizes"], at)), a["ends"], at)
        w.store(w.get(chosen), a["chosen"], i)
        b.store(I8(1), w.at(a["placed"], i, I8))
    b.ret_void()


def _lowest_gap(w: IRWriter, a: dict[str, ir.Value], i: ir.Value, first: ir.Value, found: ir.Value,
                chosen: ir.Value, cell: Callable[[ir.Value, ir.Value], ir.Value]) -> None:
    """pyocc.planning.symbolic._lowest_gap for buffer `i`, whose `found`
    placed conflicts are in ``below[first:]``: where a lower gap works at
    every point, set `chosen` to the buffers under it and write them,
    by index, over ``below[first:]``."""
    b = w.b
    reference = a["reference"]
    # by_end/at: the conflicts sorted by their end at the reference (stable: insertion sort)
    with w.counted(0, found) as q:
        c = w.load(a["below"], b.add(first, q))
        key = w.load(a["ends"], cell(c, reference))
        p = w.variable(q)
        done = w.variable(0)
        with w.loop(lambda: b.and_(b.icmp_signed(">", w.get(p), I64(0)), b.icmp_signed("==", w.get(done), I64(0)))):
            before = b.sub(w.get(p), I64(1))
            with b.if_else(b.icmp_signed(">", w.load(a["at"], before), key)) as (move, stop):
                with move:
                    w.store(w.load(a["by_end"], before), a["by_end"], w.get(p))
                    w.store(w.load(a["at"], before), a["at"], w.get(p))
                    w.set(p, before)
                with stop:
                    w.set(done, 1)
        w.store(c, a["by_end"], w.get(p))
        w.store(key, a["at"], w.get(p))
    # floors[m]: the lowest offset at the reference of the conflicts from m on
    w.store(I64(2**63 - 1), a["floors"], found)
    q = w.variable(found)
    with w.loop(lambda: b.icmp_signed(">", w.get(q), I64(0))):
        w.set(q, b.sub(w.get(q), I64(1)))
        low = w.load(a["offsets"], cell(w.load(a["by_end"], w.get(q)), reference))
        above = w.load(a["floors"], b.add(w.get(q), I64(1)))
        w.store(b.select(b.icmp_signed("<", low, above), low, above), a["floors"], w.get(q))
    size_at = w.load(a["sizes"], cell(i, reference))
    alignment_at = w.load(a["alignments"], cell(i, reference))
    m = w.variable(0)
    decided = w.variable(0)
    with w.loop(lambda: b.and_(b.icmp_signed("<=", w.get(m), found), b.icmp_signed("==", w.get(decided), I64(0)))):
        now = w.get(m)
        # the gap above the first m by end: the candidates are where the sorted ends
        # step up (the bottom, m = 0, unless a conflict ends at 0; and the top, m = found)
        under = b.select(b.icmp_signed(">", now, I64(0)),
                         w.load(a["at"], b.select(b.icmp_signed(">", now, I64(0)), b.sub(now, I64(1)), now)), I64(0))
        over = b.select(b.icmp_signed("<", now, found), w.load(a["at"], now), I64(2**63 - 1))  # at holds found + 1
        with b.if_then(b.icmp_signed(">", over, under)):
            with b.if_else(b.icmp_signed("==", now, found)) as (top_of_all, below_some):
                with top_of_all:
                    w.set(decided, 1)  # only the top of them all: sit on every conflict
                with below_some:
                    fits_at = b.icmp_signed("<=", b.add(w.round_up(under, alignment_at), size_at),
                                            w.load(a["floors"], now))
                    with b.if_then(fits_at):
                        _gap_everywhere(w, a, i, now, found, chosen, decided, cell)
        w.set(m, b.add(now, I64(1)))


def _gap_everywhere(w: IRWriter, a: dict[str, ir.Value], i: ir.Value, m: ir.Value, found: ir.Value,
                    chosen: ir.Value, decided: ir.Value, cell: Callable[[ir.Value, ir.Value], ir.Value]) -> None:
    """Whether buffer `i` fits above the first `m` conflicts by end and
    below the others at every point; if so, they are `chosen` (written by
    index over the buffer's ``below``) and the search is `decided`."""
    b = w.b
    fits = w.variable(1)
    with w.counted(0, a["points"]) as g:
        top = w.variable(0)
        with w.counted(0, m) as q:
            end = w.load(a["ends"], cell(w.load(a["by_end"], q), g))
            w.set(top, b.select(b.icmp_signed(">", end, w.get(top)), end, w.get(top)))
        floor = w.variable(2**63 - 1)
        with w.counted(m, found) as q:
            low = w.load(a["offsets"], cell(w.load(a["by_end"], q), g))
            w.set(floor, b.select(b.icmp_signed("<", low, w.get(floor)), low, w.get(floor)))
        at = cell(i, g)
        end = b.add(w.round_up(w.get(top), w.load(a["alignments"], at)), w.load(a["sizes"], at))
        with b.if_then(b.icmp_signed(">", end, w.get(floor))):
            w.set(fits, 0)
    # (a gap at the very bottom, m = 0, keeps every conflict: `_lowest_gap`'s empty
    # answer is falsy where `_greedy` reads it, the same layouts as the Python)
    with b.if_then(b.and_(b.icmp_signed("!=", w.get(fits), I64(0)), b.icmp_signed(">", m, I64(0)))):
        # the first m by end, sorted by index, over the buffer's below
        start = w.load(a["starts"], i)
        with w.counted(0, m) as q:
            c = w.load(a["by_end"], q)
            p = w.variable(q)
            done = w.variable(0)
            with w.loop(lambda: b.and_(b.icmp_signed(">", w.get(p), I64(0)), b.icmp_signed("==", w.get(done), I64(0)))):
                before = b.sub(w.get(p), I64(1))
                other = w.load(a["below"], b.add(start, before))
                with b.if_else(b.icmp_signed(">", other, c)) as (move, stop):
                    with move:
                        w.store(other, a["below"], b.add(start, w.get(p)))
                        w.set(p, before)
                    with stop:
                        w.set(done, 1)
            w.store(c, a["below"], b.add(start, w.get(p)))
        w.set(chosen, m)
    with b.if_then(b.icmp_signed("!=", w.get(fits), I64(0))):
        w.set(decided, 1)


def _place_one(w: IRWriter, a: dict[str, ir.Value], i: ir.Value, size: ir.Value, offset: ir.Value) -> None:
    """Set `offset` to buffer `i`'s first-fit (best-fit) offset among its placed neighbours."""
    b = w.b
    busy = w.variable(0)  # how many of busy_start/busy_end are filled
    with w.counted(w.load(a["starts"], i), w.load(a["starts"], b.add(i, I64(1)))) as e:
        j = w.load(a["neighbours"], e)
        with b.if_then(b.icmp_signed("!=", b.load(w.at(a["placed"], j, I8), typ=I8), I8(0))):
            start = w.load(a["offsets"], j)
            end = b.add(start, w.load(a["sizes"], j))
            # insertion sort by (start, end): move the ranges after it up one
            p = w.variable(w.get(busy))
            sorted_here = w.variable(0)
            with w.loop(lambda: b.and_(b.icmp_signed(">", w.get(p), I64(0)),
                                       b.icmp_signed("==", w.get(sorted_here), I64(0)))):
                before = b.sub(w.get(p), I64(1))
                other_start, other_end = w.load(a["busy_start"], before), w.load(a["busy_end"], before)
                after = b.or_(b.icmp_signed(">", other_start, start),
                              b.and_(b.icmp_signed("==", other_start, start), b.icmp_signed(">", other_end, end)))
                with b.if_else(after) as (move, stop):
                    with move:
                        w.store(other_start, a["busy_start"], w.get(p))
                        w.store(other_end, a["busy_end"], w.get(p))
                        w.set(p, before)
                    with stop:
                        w.set(sorted_here, 1)
            w.store(start, a["busy_start"], w.get(p))
            w.store(end, a["busy_end"], w.get(p))
            w.set(busy, b.add(w.get(busy), I64(1)))
    # choose_gap: the first gap between the busy ranges' union that the buffer fits,
    # or with best_fit the smallest (the lowest of equal ones)
    alignment = w.load(a["alignments"], i)
    best_fit = b.icmp_signed("!=", a["best_fit"], I64(0))
    running = w.variable(0)  # every byte below this is taken by some busy range
    best_gap = w.variable(0)
    q = w.variable(0)
    with w.loop(lambda: b.and_(b.icmp_signed("<", w.get(q), w.get(busy)),
                               b.or_(best_fit, b.icmp_signed("<", w.get(offset), I64(0))))):
        start = w.load(a["busy_start"], w.get(q))
        with b.if_then(b.icmp_signed(">=", start, w.get(running))):
            candidate = w.round_up(w.get(running), alignment)
            with b.if_then(b.icmp_signed("<=", b.add(candidate, size), start)):
                gap = b.sub(start, w.get(running))
                better = b.or_(b.icmp_signed("<", w.get(offset), I64(0)), b.icmp_signed("<", gap, w.get(best_gap)))
                with b.if_then(better):
                    w.set(offset, candidate)
                    w.set(best_gap, gap)
        end = w.load(a["busy_end"], w.get(q))
        w.set(running, b.select(b.icmp_signed(">", end, w.get(running)), end, w.get(running)))
        w.set(q, b.add(w.get(q), I64(1)))
    with b.if_then(b.icmp_signed("<", w.get(offset), I64(0))):
        w.set(offset, w.round_up(w.get(running), alignment))


def _emit_next_word(module: ir.Module) -> ir.Function:
    """`int64_t pyocc_next_word(int64_t *state)`: the next 32-bit word of
    the Mersenne Twister whose 624 words and position are `state` (as
    ``random.Random.getstate()[1]`` lists them), as CPython's
    ``genrand_uint32`` makes it: all 624 words twisted at once when the
    position reaches the end, then one tempered."""
    function = ir.Function(module, ir.FunctionType(I64, [PTR]), name="pyocc_next_word")
    function.linkage = "internal"
    state = function.args[0]
    w = IRWriter.for_function(function)
    b = w.b
    words = I64(MT_WORDS)

    def word(k: ir.Value) -> ir.Value:
        return w.load(state, b.urem(k, words))

    with b.if_then(b.icmp_signed(">=", w.load(state, words), words)):
        with w.counted(0, words) as k:
            y = b.or_(b.and_(word(k), I64(MT_UPPER)), b.and_(word(b.add(k, I64(1))), I64(MT_LOWER)))
            twisted = b.xor(word(b.add(k, I64(MT_SHIFT))), b.lshr(y, I64(1)))
            odd = b.icmp_signed("!=", b.and_(y, I64(1)), I64(0))
            w.store(b.select(odd, b.xor(twisted, I64(MT_MATRIX)), twisted), state, k)
        w.store(I64(0), state, words)
    position = w.load(state, words)
    w.store(b.add(position, I64(1)), state, words)
    y = w.load(state, position)
    y = b.xor(y, b.lshr(y, I64(11)))
    y = b.xor(y, b.and_(b.shl(y, I64(7)), I64(MT_TEMPER_B)))
    y = b.xor(y, b.and_(b.shl(y, I64(15)), I64(MT_TEMPER_C)))
    b.ret(b.xor(y, b.lshr(y, I64(18))))
    return function


def _emit_random_below(module: ir.Module, next_word: ir.Function) -> ir.Function:
    """`int64_t pyocc_random_below(int64_t *state, int64_t n)`: Python's
    ``Random._randbelow(n)`` for 0 < n < 2**32: the top ``n.bit_length()``
    bits of the next word, drawn again until below `n`."""
    function = ir.Function(module, ir.FunctionType(I64, [PTR, I64]), name="pyocc_random_below")
    function.linkage = "internal"
    state, n = function.args
    w = IRWriter.for_function(function)
    b = w.b
    bits = b.sub(I64(64), b.ctlz(n, ir.IntType(1)(0)))
    r = w.variable(b.lshr(b.call(next_word, [state]), b.sub(I64(32), bits)))
    with w.loop(lambda: b.icmp_unsigned(">=", w.get(r), n)):
        w.set(r, b.lshr(b.call(next_word, [state]), b.sub(I64(32), bits)))
    b.ret(w.get(r))
    return function


def _emit_climb(module: ir.Module, place: ir.Function, next_word: ir.Function, random_below: ir.Function) -> None:
    """`pyocc_climb` in `module`: up to `trials` trials of
    pyocc.planning.algorithms.hill_climb_offsets, each drawing from the
    same random numbers as its Python loop (`state`, the generator's
    words), placed with `place` (the trial kept where its pool is no
    larger: `order`, `current` and `critical` take it, `best` when smaller;
    ``status`` holds the pool's top and the best pool); stops early once
    the best pool is at most `bound`, or when no buffer is at the top.
    Returns the trials run."""
    a, w = CLIMB.declare(module)
    b = w.b
    state, count = a["state"], a["count"]
    top, best_size = w.at(a["status"], I64(0)), w.at(a["status"], I64(1))
    ran = w.variable(0)
    tops = w.variable(0)

    def copy(source: ir.Value, target: ir.Value, length: ir.Value) -> None:
        with w.counted(0, length) as k:
            w.store(w.load(source, k), target, k)

    def go_on() -> ir.Value:
        w.set(tops, 0)
        with w.loop(lambda: b.icmp_signed(">=", w.load(a["critical"], w.get(tops)), I64(0))):
            w.set(tops, b.add(w.get(tops), I64(1)))
        return b.and_(b.and_(b.icmp_signed("<", w.get(ran), a["trials"]),
                             b.icmp_signed(">", b.load(best_size, typ=I64), a["bound"])),
                      b.icmp_signed(">", w.get(tops), I64(0)))

    with w.loop(go_on):
        w.set(ran, b.add(w.get(ran), I64(1)))
        copy(a["order"], a["trial"], count)
        position = w.load(a["critical"], b.call(random_below, [state, w.get(tops)]))
        move = w.variable(0)
        with b.if_then(b.icmp_signed(">", position, I64(0))):
            # random() < 0.5: its first word's top bit is clear (the second word is drawn all the same)
            first = b.call(next_word, [state])
            b.call(next_word, [state])
            w.set(move, b.zext(b.icmp_unsigned("<", first, I64(1 << 31)), I64))
        changed = w.variable(0)
        with b.if_else(b.icmp_signed("!=", w.get(move), I64(0))) as (moved, swapped):
            with moved:
                # trial.insert(changed, trial.pop(position))
                w.set(changed, b.call(random_below, [state, position]))
                k = w.variable(position)
                with w.loop(lambda: b.icmp_signed(">", w.get(k), w.get(changed))):
                    w.store(w.load(a["trial"], b.sub(w.get(k), I64(1))), a["trial"], w.get(k))
                    w.set(k, b.sub(w.get(k), I64(1)))
                w.store(w.load(a["order"], position), a["trial"], w.get(changed))
            with swapped:
                x = b.call(random_below, [state, count])
                y = b.call(random_below, [state, count])
                held = w.load(a["trial"], x)
                w.store(w.load(a["trial"], y), a["trial"], x)
                w.store(held, a["trial"], y)
                w.set(changed, b.select(b.icmp_signed("<", x, y), x, y))
        pool = b.call(place, [a["n"], count, a["trial"], w.get(changed), a["current"], a["sizes"], a["alignments"],
                              a["starts"], a["neighbours"], b.load(top, typ=I64), I64(0), a["offsets"], a["placed"],
                              a["busy_start"], a["busy_end"], a["found"]])
        with b.if_then(b.icmp_signed(">=", pool, I64(0))):
            copy(a["offsets"], a["current"], a["n"])
            copy(a["trial"], a["order"], count)
            copy(a["found"], a["critical"], b.add(count, I64(1)))
            b.store(pool, top)
            with b.if_then(b.icmp_signed("<", pool, b.load(best_size, typ=I64))):
                b.store(pool, best_size)
                copy(a["current"], a["best"], a["n"])
    b.ret(w.get(ran))


_KEEP_ALIVE: list[Any] = []
"""The engine that holds the compiled functions (one a process)."""


@functools.cache
def _compiled() -> tuple[Callable[..., int], Callable[..., None], Callable[..., None], Callable[..., int]]:
    """`pyocc_place`, `pyocc_stacked_pool`, `pyocc_stacked_greedy` and
    `pyocc_climb`, JIT-compiled (once a process; the object cache may hold them)."""
    engine, _ = jit_module(planner_module(), speed_level=SIMPLIFY_SPEED_LEVEL)
    _KEEP_ALIVE.append(engine)
    return PLACE.bound(engine), STACKED_POOL.bound(engine), STACKED_GREEDY.bound(engine), CLIMB.bound(engine)


def compiled() -> bool:
    """Whether this process has JIT-compiled the planner's functions (a
    `Placer`, a `Climb`, `stacked_pool` and `stacked_greedy` need them)."""
    return _compiled.cache_info().currsize > 0


def _flattened(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(starts, items): `lists` as one int64 array, list k in
    ``items[starts[k]:starts[k + 1]]`` (items holds one 0 when every list
    is empty, so that it has an address)."""
    starts = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(items) for items in lists], out=starts[1:])
    items = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(starts[-1]))
    return starts, items if len(items) else np.zeros(1, dtype=np.int64)


def _layout_arguments(function: str, sizes: np.ndarray, alignments: np.ndarray, lists: Sequence[Sequence[int]],
                      order: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The int64 arrays `stacked_pool` and `stacked_greedy` pass: (sizes,
    alignments, starts, items of `lists`, order), checked."""
    if len(order) != sizes.shape[0] or alignments.shape != sizes.shape:
        raise ValueError(f"{function} places every buffer once, with a size and an alignment at every point")
    return (np.ascontiguousarray(sizes, dtype=np.int64), np.ascontiguousarray(alignments, dtype=np.int64),
            *_flattened(lists), np.asarray(order, dtype=np.int64))


def stacked_pool(sizes: np.ndarray, alignments: np.ndarray, below: Sequence[Sequence[int]],
                 order: Sequence[int]) -> np.ndarray:
    """The pool at every point of a layout in which buffer ``i`` sits on
    the buffers ``below[i]``, placed in `order` (every buffer once);
    `sizes` and `alignments` are int64 arrays, a row per buffer and a
    column per point (the module docstring)."""
    sizes, alignments, starts, items, order_array = _layout_arguments("stacked_pool", sizes, alignments, below, order)
    count, points = sizes.shape
    ends = np.empty_like(sizes)
    pool = np.empty(points, dtype=np.int64)
    _compiled()[1](points, count, order_array.ctypes.data, starts.ctypes.data, items.ctypes.data, sizes.ctypes.data,
                   alignments.ctypes.data, ends.ctypes.data, pool.ctypes.data)
    return pool


def _address(values: array) -> int:
    return values.buffer_info()[0]


def stacked_greedy(sizes: np.ndarray, alignments: np.ndarray, conflicts: Sequence[Sequence[int]],
                   order: Sequence[int], reference: int, use_gaps: bool) -> tuple[tuple[int, ...], ...]:
    """pyocc.planning.symbolic._greedy's below-sets, natively: each buffer
    of `order` sits on its placed `conflicts` (each list sorted, itself
    left out), or, with `use_gaps`, on the fewest of them, by end at point
    `reference`, whose top leaves it a gap below the others at every
    point; `sizes` and `alignments` as for `stacked_pool`."""
    sizes, alignments, starts, items, order_array = _layout_arguments("stacked_greedy", sizes, alignments,
                                                                      conflicts, order)
    count, points = sizes.shape
    widest = max(max((len(c) for c in conflicts), default=0), 1)
    offsets, ends = np.empty_like(sizes), np.empty_like(sizes)
    placed = np.zeros(max(count, 1), dtype=np.int8)
    chosen = np.zeros(max(count, 1), dtype=np.int64)
    below = np.zeros_like(items)
    by_end, at, floors = (np.zeros(widest + 1, dtype=np.int64) for _ in range(3))
    _compiled()[2](points, count, order_array.ctypes.data, reference, int(use_gaps), sizes.ctypes.data,
                   alignments.ctypes.data, starts.ctypes.data, items.ctypes.data, offsets.ctypes.data,
                   ends.ctypes.data, placed.ctypes.data, chosen.ctypes.data, below.ctypes.data, by_end.ctypes.data,
                   at.ctypes.data, floors.ctypes.data)
    listed = below.tolist()
    return tuple(tuple(listed[start:start + n]) for start, n in zip(starts.tolist()[:count], chosen.tolist()))


class Placer:
    """One problem's sizes, alignments and conflict graph, laid out for
    `pyocc_place`, and its scratch."""

    def __init__(self, sizes: Sequence[int], alignments: Sequence[int], adjacency: Sequence[Sequence[int]]):
        self.n = len(sizes)
        widest = max(map(len, adjacency), default=0)
        # the offsets and the top buffers, as int64 arrays (`place` returns copies)
        self.offsets = array("q", bytes(8 * max(self.n, 1)))
        self.critical = array("q", bytes(8 * (self.n + 1)))
        # kept alive here: the function gets their addresses
        self._problem_arrays = [np.asarray(sizes, dtype=np.int64), np.asarray(alignments, dtype=np.int64),
                                *_flattened(adjacency)]
        self._scratch = [np.zeros(max(self.n, 1), dtype=np.int8), np.zeros(max(widest, 1), dtype=np.int64),
                         np.zeros(max(widest, 1), dtype=np.int64)]
        placed_at, busy_start_at, busy_end_at = (values.ctypes.data for values in self._scratch)
        self._problem = tuple(values.ctypes.data for values in self._problem_arrays)
        self._outputs = (_address(self.offsets), placed_at, busy_start_at, busy_end_at, _address(self.critical))
        self._function = _compiled()[0]

    def place(self, order: array, limit: int, keep: int = 0, kept: array | None = None,
              best_fit: bool = False) -> tuple[array, int, list[int]] | None:
        """(every buffer's offset, the pool, the positions in `order` of
        the buffers that end at the pool's top) placing `order` (buffer
        indices, an int64 array) first fit (`best_fit`: best fit), the
        first `keep` of them at their offsets in `kept` (an int64 array
        indexed by buffer); None as soon as a buffer ends above `limit`."""
        if keep and kept is None:
            raise ValueError("keep needs the kept offsets")
        kept_at = _address(self.offsets if kept is None else kept)  # not read when nothing is kept
        pool = self._function(self.n, len(order), _address(order), keep, kept_at, *self._problem, limit,
                              int(best_fit), *self._outputs)
        if pool < 0:
            return None
        critical = self.critical
        return self.offsets[:self.n], pool, critical[:critical.index(-1)].tolist()

    def climb(self, order: Sequence[int], current: Sequence[int], best: Sequence[int], critical: Sequence[int],
              top: int, best_size: int, rng: random.Random) -> Climb:
        """The hill climb (pyocc.planning.algorithms.hill_climb_offsets) from
        where it stands: its order, the current and the best offsets, the
        positions of the buffers at the top, the top and the best pool, and
        its random numbers, to go on natively (`Climb.run`)."""
        return Climb(self, order, current, best, critical, top, best_size, rng)


class Climb:
    """A hill climb going on natively (`pyocc_climb`): the same trials,
    from the same random numbers, as its Python loop, kept in the arrays
    here between `run` calls."""

    def __init__(self, placer: Placer, order: Sequence[int], current: Sequence[int], best: Sequence[int],
                 critical: Sequence[int], top: int, best_size: int, rng: random.Random):
        count = len(order)
        words = rng.getstate()[1]  # the generator's 624 words and its position
        self.order, self.trial = array("q", order), array("q", order)
        self.current, self.best = array("q", current), array("q", best)
        self.critical = array("q", [*critical, -1, *([0] * (count - len(critical)))])
        self.status = array("q", [top, best_size])
        self.state = array("q", words)
        self._scratch = array("q", bytes(8 * (count + 1)))
        self._placer = placer
        self._arrays = tuple(_address(values) for values in (self.order, self.trial, self.current, self.best,
                                                                   self.critical, self.status, self.state))
        self._function = _compiled()[3]

    @property
    def best_size(self) -> int:
        """The smallest pool found so far."""
        return self.status[1]

    def run(self, trials: int, bound: int) -> int:
        """Up to `trials` more trials, fewer once the best pool is at most
        `bound` (or no buffer is at the top); returns how many ran."""
        placer = self._placer
        scratch = placer._outputs[:-1]  # pyocc_place's offsets and scratch; its top buffers go to ours
        return self._function(trials, bound, placer.n, len(self.order), *self._arrays, *placer._problem, *scratch,
                              _address(self._scratch))

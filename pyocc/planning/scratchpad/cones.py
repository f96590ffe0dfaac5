"""A floor for every schedule: a fully connected layer waits on the cones of its input.

The other floors (`NpuProgram.compute_floor_cycles`, the DRAM bound,
`NpuProgram.weight_stream_floor_cycles` with its cuts) either hold for
every schedule but see no order between ops, or see the order but hold
only for schedules that cut where they assume. `cone_floor` holds for
every schedule that computes the program's ops, interleaved or not, and
sees the order that the data forces. (The simulator checks what a
compute reads and the port's queue, and takes each compute's MACs from
the schedule: pyocc's own row bands are charged equal shares of the op's
MACs though their rows differ by one, within a row's MACs of a band.)

**The argument.** Take a *gate*: an op X each of whose outputs sums over
every element of its input g (a fully connected layer), with weights W.
Its input g has a grid of positions (rows x columns of an NCHW tensor; 1 x
1 after a global pool), each holding `in_channels / positions` elements.

- A MAC that reads a byte of W also reads the element of g the byte
  multiplies. So the W bytes of a position cannot be consumed before some
  element of that position exists, and until then they wait in SRAM or
  have not crossed the port yet.
- Every op after X whose inputs all descend from X's output (the *tail*)
  needs an output of X, so all of g: none of the tail's weights is
  consumed before every position exists.
- Let F be W's bytes plus the tail's (each tensor once). At the moment
  t the m-th position of g gets its first element, at most (m - 1)
  positions' W bytes have been consumed, and at most the SRAM's bytes of
  F are resident. The rest crosses the one DRAM port after t, at
  `dram_bytes_per_cycle`.
- Before t, the computes (one at a time) made the *cone* of those m
  positions: every element of every tensor that an element of each of
  them depends on. That takes at least its MACs over `macs_per_cycle`,
  and a whole op at least its compute floor (`NpuProgram.op_floor_cycles`).

So every schedule takes at least, for every m, the fewest cycles any m
positions' cones take plus (F - (m - 1) x the bytes of a position - the
SRAM) over the port's bytes per cycle; the floor is the largest over m.
The fewest is over the positions the schedule picks: `_fewest` finds
it exactly by dynamic programming over the grid's rows.

**What it counts of a cone, and what it leaves out** (each leaves the
floor a floor):

- Only tensors whose elements have a row, a column and a channel are
  followed (`NpuTensor.nchw`: one image of NCHW, or a [1, K] vector), not
  a rank-3 sequence's, whose positions a matrix product's sum would not
  tell from its channels.
- Along the rows and columns: the windows of the ops (`NpuOp.row_windows`,
  `col_windows`). An input read without a window (no band of it suffices)
  is left out, unless it has a single row and column.
- Along the channels: an element of one channel of an op's output needs
  every channel of the inputs it sums over (`in_channels` > 1, one
  group: a convolution); an element of every channel needs every
  channel of every input. Any other op (a pooling, an add, a grouped
  convolution, a shuffle) is taken to need one channel of each input, and
  its own compute on one channel is left out. One channel of a concat
  needs only the input it comes from: on a 1 x 1 grid the floor takes the
  input whose cone is cheapest; on a larger grid a schedule could take a
  different input per position, and there is no floor.
- A tensor two readers need is needed on the union of what each needs
  where the two agree along one axis (rows, or columns) and meet along
  the other; otherwise on what one of them needs (the rows or columns of
  a position are one span: a region is a rectangle per position).

Tested in tests/planning/test_scratchpad_cones.py; measured in
docs/scratchpad.md ("A floor for every schedule", stop 71).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..npu_simulator import NpuCost
from .program import NpuOp, NpuProgram, NpuTensor

Span = tuple[int, int]
"""Rows (or columns) [lo, hi] of a tensor, both ends included."""

Region = tuple[tuple[Span, ...], tuple[Span, ...]]
"""Per row of the gate's grid the rows of a tensor one of its positions
needs, and per column of the grid the columns: position (r, c) needs the
rectangle of rows `region[0][r]` and columns `region[1][c]`."""

Cells = dict[tuple[int, int, int, int], int]
"""Cells of the gate's grid: (first row, last row, first column, last
column) -> compute cycles (MACs over `macs_per_cycle`, rounded down) that
any position in that rectangle needs."""

LARGEST_STATES = 1 << 22
"""The most states of `_fewest` (a grid of R rows and C columns has
(max(R, C) + 1)^min(R, C)): 7 x 7 has 2,097,152 (VGG-19's pool5); larger
grids get no floor."""

LARGEST_CHOICES = 64
"""The most cones `cone_floor` works out for one gate, one per choice of
the inputs of the concats one channel of which is needed (Inception's
last module: 4); beyond it, no floor."""


@dataclass(frozen=True)
class ConeFloor:
    """The floor `cone_floor` found, and where."""

    cycles: int
    """No schedule of the program takes fewer."""
    gate: str
    """The fully connected op whose input's cones it waits on."""
    grid: tuple[int, int]
    """Rows and columns of the gate's input: its positions."""
    positions: int
    """m: the floor is at the moment the m-th position gets an element."""
    cone_cycles: int
    """The fewest compute cycles of any m positions' cones."""
    port_cycles: int
    """What still crosses the DRAM port after that moment."""


class _NoFloor(Exception):
    """The cones cannot be read: a cone that does not slide along the grid
    (`_cells`), a concat's choice on a grid of more than one position, or
    more choices than `LARGEST_CHOICES`."""


class _Join(Exception):
    """One channel of a concat is needed: which input it comes from is the
    schedule's choice (`op`: its index; `inputs`: how many)."""

    def __init__(self, op: int, inputs: int) -> None:
        """The concat at index `op` with `inputs` inputs."""
        super().__init__(op, inputs)
        self.op, self.inputs = op, inputs


def cone_floor(program: NpuProgram, cost: NpuCost, sram_size: int) -> ConeFloor | None:
    """The largest cone floor over the program's gates (see the module's
    docstring), or None when it has no gate the floor can read."""
    found = [f for k in _gates(program) if (f := _gate_floor(program, k, cost, sram_size)) is not None]
    return max(found, key=lambda f: f.cycles, default=None)


def _gates(program: NpuProgram) -> list[int]:
    """Ops each of whose outputs sums over every element of their one
    reduced input (a fully connected layer): one image, one row of output,
    the input read whole (or a single position), and the weights, input
    and output sized as a K x N matrix, K elements and N elements."""
    tensors = program.by_name()
    found = []
    for k, op in enumerate(program.ops):
        if op.out_rows != 1 or len(op.reduced_inputs) != 1 or op.in_channels <= 1 or len(op.outputs) != 1:
            continue
        g, out = tensors[op.reduced_inputs[0]], tensors[op.outputs[0]]
        matrix = _matrix_bytes(op, tensors)
        if not g.nchw or out.images != 1 or op.channels <= 1 or matrix % (op.in_channels * op.channels):
            continue
        item = matrix // (op.in_channels * op.channels)
        whole = op.window(g.name) is None or (g.rows, g.cols) == (1, 1)
        if whole and g.size == op.in_channels * item and out.size == op.channels * item \
                and op.in_channels % (g.rows * g.cols) == 0:
            found.append(k)
    return found


def _gate_floor(program: NpuProgram, k: int, cost: NpuCost, sram_size: int) -> ConeFloor | None:
    """The cone floor of the gate at index `k` (None: no floor read)."""
    tensors = program.by_name()
    gate = program.ops[k]
    g = tensors[gate.reduced_inputs[0]]
    positions = g.rows * g.cols
    matrix = _matrix_bytes(gate, tensors)
    per_position = -(-matrix // positions)  # rounded up: at most this many bytes wait on a position
    waiting = sum(tensors[w].size for w in dict.fromkeys(  # F: each tensor once (a weight may be tied)
        (*gate.reduced_weights, *(w for op in _tail(program, k) for w in op.weights))))
    floors = program.op_floor_cycles(cost)
    tried = 0

    def cones(choices: dict[int, int]) -> tuple[int, Cells]:
        nonlocal tried
        tried += 1
        if tried > LARGEST_CHOICES:
            raise _NoFloor
        try:
            return _cone(program, k, cost, floors, choices)
        except _Join as join:
            if positions > 1:
                raise _NoFloor from None  # a schedule may pick another input per position
            found = [cones({**choices, join.op: i}) for i in range(join.inputs)]
            return min(found, key=lambda c: c[0] + sum(c[1].values()))

    try:
        whole, cells = cones({})
    except _NoFloor:
        return None
    fewest = _fewest(g.rows, g.cols, cells)
    if fewest is None:
        return None
    best: ConeFloor | None = None
    for m in range(1, positions + 1):
        computed = whole + fewest[m]
        port = max(0, waiting - (m - 1) * per_position - sram_size) // cost.dram_bytes_per_cycle
        if best is None or computed + port > best.cycles:
            best = ConeFloor(computed + port, gate.name, (g.rows, g.cols), m, computed, port)
    return best


def _matrix_bytes(op: NpuOp, tensors: dict[str, NpuTensor]) -> int:
    """The bytes of the weights a gate sums its input with (each tensor once)."""
    return sum(tensors[w].size for w in dict.fromkeys(op.reduced_weights))


def _tail(program: NpuProgram, k: int) -> list[NpuOp]:
    """The ops after the gate at `k` whose activation inputs all descend
    from its output: none of them runs a MAC before the gate has an output."""
    below = set(program.ops[k].outputs)
    tail = []
    for op in program.ops[k + 1:]:
        if op.inputs and all(i in below for i in op.inputs):
            tail.append(op)
            below.update(op.outputs)
    return tail


def _cone(program: NpuProgram, k: int, cost: NpuCost, floors: list[int],
          choices: dict[int, int]) -> tuple[int, Cells]:
    """What the positions of the gate `k`'s input need computed: the
    cycles of the ops every position needs whole (their compute floors),
    and the cycles of the rest's MACs by cells of the grid. `choices`:
    for the concats one channel of which is needed, the input it comes
    from. Raises `_Join` at a concat not in `choices`, `_NoFloor` when a
    cone does not slide along the grid (`_cells`)."""
    tensors = program.by_name()
    g = tensors[program.ops[k].reduced_inputs[0]]
    every: dict[str, Region] = {}  # every channel needed
    some: dict[str, Region] = {g.name: (tuple((r, r) for r in range(g.rows)), tuple((c, c) for c in range(g.cols)))}
    whole, cells = 0, {}
    for j in range(k - 1, -1, -1):
        op = program.ops[j]
        out = tensors[op.outputs[0]]
        if op.outputs[0] in every:
            region = every[op.outputs[0]]
            if all(s == (0, out.rows - 1) for s in region[0]) and all(s == (0, out.cols - 1) for s in region[1]):
                whole += floors[j]
            else:
                for cell, n in _cells(region, out).items():
                    cells[cell] = cells.get(cell, 0) + op.macs * n // (out.rows * out.cols * cost.macs_per_cycle)
            for name in op.inputs:
                _need(every, name, _read(op, tensors[name], region, out))
        if op.outputs[0] in some:
            region = some[op.outputs[0]]
            mixes = op.in_channels > 1 and op.channel_groups == 1
            inputs = op.inputs
            if op.joins:
                if j not in choices:
                    raise _Join(j, len(op.inputs))
                inputs = (op.inputs[choices[j]],)
            for name in inputs:
                _need(every if mixes and name in op.reduced_inputs else some, name,
                      _read(op, tensors[name], region, out))
    return whole, cells


def _read(op: NpuOp, tensor: NpuTensor, region: Region, out: NpuTensor) -> Region | None:
    """What of input `tensor` the op reads to make `region` of its output
    `out`: its windows applied to each span; None when the input's
    elements are not placed by row and column (`NpuTensor.nchw`), a window
    is missing along an axis the input has more than one of, or a span
    falls in the pads alone."""
    if not tensor.nchw:
        return None
    windows = {name: (e, s, p) for name, e, s, p in op.col_windows}
    spans = []
    for axis, (window, extent) in enumerate(((op.window(tensor.name), tensor.rows),
                                             (windows.get(tensor.name), tensor.cols))):
        if extent == 1:
            spans.append(tuple((0, 0) for _ in region[axis]))
        elif window is None:
            return None
        else:
            e, s, p = window
            read = tuple((max(0, lo * s - p), min(extent - 1, hi * s - p + e - 1)) for lo, hi in region[axis])
            if any(lo > hi for lo, hi in read):
                return None
            spans.append(read)
    return spans[0], spans[1]


def _need(needs: dict[str, Region], name: str, region: Region | None) -> None:
    """Add `region` to what is needed of tensor `name`. Two rectangles per
    position make one only where they agree along one axis and meet along
    the other (their union); otherwise what is kept is one of them, the
    larger over all positions: a part of what is needed, never more."""
    if region is None:
        return
    old = needs.setdefault(name, region)
    if old == region:
        return

    def meet(a: tuple[Span, ...], b: tuple[Span, ...]) -> tuple[Span, ...] | None:
        if any(x[0] > y[1] + 1 or y[0] > x[1] + 1 for x, y in zip(a, b)):
            return None
        return tuple((min(x[0], y[0]), max(x[1], y[1])) for x, y in zip(a, b))

    if old[0] == region[0] and (cols := meet(old[1], region[1])) is not None:
        needs[name] = (old[0], cols)
    elif old[1] == region[1] and (rows := meet(old[0], region[0])) is not None:
        needs[name] = (rows, old[1])
    else:
        needs[name] = max(old, region, key=_area)


def _area(region: Region) -> int:
    """The pixels a region's positions need, added up over the positions."""
    return sum(hi - lo + 1 for lo, hi in region[0]) * sum(hi - lo + 1 for lo, hi in region[1])


def _cells(region: Region, out: NpuTensor) -> dict[tuple[int, int, int, int], int]:
    """The pixels of `out` by the rectangle of grid positions that need
    them: a pixel row that the grid's rows a..b need (and no other) and a
    pixel column that its columns c..d need fall in cell (a, b, c, d).
    Raises `_NoFloor` when the grid rows needing a pixel row are not
    consecutive (the spans do not slide along the grid)."""
    by_axis = []
    for axis, extent in ((0, out.rows), (1, out.cols)):
        counts: dict[Span, int] = {}
        for y in range(extent):
            which = [r for r, (lo, hi) in enumerate(region[axis]) if lo <= y <= hi]
            if not which:
                continue
            if which[-1] - which[0] + 1 != len(which):
                raise _NoFloor
            counts[(which[0], which[-1])] = counts.get((which[0], which[-1]), 0) + 1
        by_axis.append(counts)
    return {(a, b, c, d): n * m for (a, b), n in by_axis[0].items() for (c, d), m in by_axis[1].items()}


def _fewest(rows: int, cols: int, cells: Cells) -> list[int] | None:
    """For m = 0 .. rows x cols, the fewest cycles of the cells that any m
    positions of the grid hit (a cell is hit by the positions in its
    rectangle), or None when the grid is too large (`LARGEST_STATES`).

    Dynamic programming over the grid's rows. After row r the state is, per
    column, the last row at or above r with that column picked (or none):
    that is all the rows below need, since a cell (a, b, c, d) is hit iff
    some column c..d was last picked in row a or later, looked at in row
    b. Per state and count of picks the fewest cycles are kept: an array
    with one axis per column (its digit: 0 none, else the row + 1) and
    one for the count. Picking the columns S in row r folds the axes of S
    (their old digits no longer matter) and sets them to r + 1."""
    if cols > rows:  # the fewer columns, the fewer states
        return _fewest(cols, rows, {(c, d, a, b): w for (a, b, c, d), w in cells.items()})
    if (rows + 1) ** cols > LARGEST_STATES:
        return None
    subsets = 1 << cols
    total = sum(cells.values())
    kind = np.int32 if total < 1 << 29 else np.int64  # VGG-19's 7 x 7: 283 MB of states in int64
    endless = np.iinfo(kind).max // 2 - total
    # last row b -> first row a -> the cycles hit, by the set of columns picked in rows a..b
    tables: dict[int, dict[int, np.ndarray]] = {}
    for (a, b, c, d), cycles in cells.items():
        mask = (1 << (d + 1)) - (1 << c)
        table = tables.setdefault(b, {}).setdefault(a, np.zeros(subsets, kind))
        table += cycles * ((np.arange(subsets) & mask) != 0)
    fewest = np.full(rows * cols + 1, endless, kind)
    done = np.zeros((1,) * cols + (1,), kind)  # no row yet: every digit 0, no pick
    for r in range(rows):
        digits = np.indices((r + 2,) * cols, sparse=True)
        hit = np.zeros((r + 2,) * cols, kind)
        for a, table in tables.get(r, {}).items():
            picked = sum((digit > a).astype(np.int64) << c for c, digit in enumerate(digits))
            hit += table[picked]
        counts = done.shape[-1]
        last = r == rows - 1
        after = None if last else np.full((r + 2,) * cols + (counts + cols,), endless, kind)
        for s in range(subsets):
            axes = tuple(c for c in range(cols) if s >> c & 1)
            folded = done.min(axis=axes, keepdims=True) if axes else done
            at = tuple(slice(r + 1, r + 2) if s >> c & 1 else slice(0, r + 1) for c in range(cols))
            sums = folded + hit[at][..., None]
            if last:
                lowest = sums.reshape(-1, counts).min(axis=0)
                fewest[len(axes):len(axes) + counts] = np.minimum(fewest[len(axes):len(axes) + counts], lowest)
            else:
                assert after is not None
                after[(*at, slice(len(axes), len(axes) + counts))] = sums
        if after is not None:
            done = after
    return [int(x) for x in fewest]

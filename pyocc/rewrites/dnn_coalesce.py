"""`dnn-coalesce{mode=lazy}`: Occamy's tensor coalescing on buffer-form dnn.

A buffer that can live in the bytes of another one is never allocated. Each
rewrite below removes one malloc/dealloc pair; the liveness analysis
(pyocc.analysis.liveness) proves it safe:

- **bands** (views): a Split output, or a Slice along one contiguous range,
  is a `dnn.subview` of its input instead of a copy:

      split(x) -> y, z    =>  y = subview(x, 0), z = subview(x, |y|)

- **in place**: an op writes its result over an input whose buffer dies at
  that op (same type, never a graph input, output or weight, no alias of it
  read later), for the kernels that are correct with `out` = that input:

      relu(a) into b, a dies here          =>  relu(a) into a
      add(a, c) into b, a dies here        =>  add(a, c) into a

- **concat elimination**: a producer writes straight into its band of the
  concat output (contiguous when every dim before the axis is 1), chained
  through nested concats; the concat copies only the inputs left over:

      p(...) into a; concat(a, c) into o   =>  p(...) into subview(o, 0); copy(c) into subview(o, |a|)

  This makes the output live as long as all its inputs together, which can
  raise the peak (DenseNet-121), so the bands are chosen by the max-live
  bound (eager mode: the sum of buffers): per concat the subset of its
  inputs with the lowest bound, greedily forwards and backwards over the
  concats, each followed by a local search that drops or adds single bands
  (`BandChoice`). A band is legal only if its bytes are written before the
  concat and the output is not overwritten while the band is still read.
- **returned views**: a buffer whose only way out is a copy into a graph
  output (through a view) lives in that output instead.

Deallocs are re-placed at the end (lazy: after the last use of each buffer,
views included; eager: all before the return), so dnn-memory-pool and the
LLVM lowering see the coalesced lifetimes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import Liveness, analyze_function, function_bodies, root_buffer
from pyocc.dialects.dnn import ops as d
from pyocc.rewrites.dnn_insert_memory_ops import copy_op

#: op name -> the operands its kernel may overwrite with its result (checked
#: in pyocc/runtime/kernels: each reads that input before or while writing out)
IN_PLACE_OPERANDS: dict[str, tuple[str, ...]] = {
    "dnn.unary": ("x",),              # unary(x) into x
    "dnn.binary": ("a", "b"),         # binary(a, b) into a | into b (same shape)
    "dnn.variadic": ("inputs[0]",),   # sum(x, ...) into x (folded left to right)
    "dnn.channel_affine": ("x",),     # x * scale + shift into x
    "dnn.batch_norm": ("x",),
    "dnn.softmax": ("x",),
    "dnn.log_softmax": ("x",),
    "dnn.layer_norm": ("x",),
    "dnn.where": ("b",),              # where(c, a, b) into b (b is copied first)
    "dnn.conv": ("residual",),        # conv(x) + residual into residual
    "dnn.preact_conv": ("residual",),  # the same after a fused pre-activation
}

#: Above this many inputs a concat's subsets are not all tried (one by one instead).
MAX_SUBSET_INPUTS = 6


@dataclass(frozen=True)
class DnnCoalescePass(ModulePass):
    """Tensor coalescing on buffer-form dnn (see the module docstring)."""

    name = "dnn-coalesce"

    mode: str = "lazy"
    """The form dnn-insert-memory-ops produced: lazy (deallocs after the last
    use; concats chosen by max-live bound) or eager (deallocs at exit; by sum)."""

    in_place: bool = True
    """Write results over dying inputs."""

    bands: bool = True
    """Split and contiguous Slice outputs as subviews of their input."""

    concat: bool = True
    """Producers write into their band of a concat output."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "buffers")
        if self.mode not in ("eager", "lazy"):
            raise PassFailedException(f"dnn-coalesce: mode must be 'eager' or 'lazy', got '{self.mode}'")
        for function in function_bodies(op):
            coalesce_function(function, self.mode, self.in_place, self.bands, self.concat)


@dataclass
class CoalesceStats:
    """How many buffers each rewrite removed in one function."""

    bands: int = 0
    in_place: int = 0
    concat_inputs: int = 0
    returned_views: int = 0


def coalesce_function(function: func.FuncOp, mode: str = "lazy", in_place: bool = True,
                      bands: bool = True, concat: bool = True) -> CoalesceStats:
    """Apply every enabled rewrite to one buffer-form function, in place."""
    block = function.body.block
    for o in block.ops:
        if isinstance(o, d.DnnComputeOp) and not o.on_buffers:
            raise PassFailedException(
                f"dnn-coalesce: @{function.sym_name.data} is in tensor form; run dnn-insert-memory-ops first"
            )
        if isinstance(o, d.MemOffsetOp | d.PoolInitOp):
            raise PassFailedException(
                f"dnn-coalesce: @{function.sym_name.data} already has a pool; run dnn-coalesce before dnn-memory-pool"
            )
    stats = CoalesceStats()
    if bands:
        stats.bands = band_views(block)
    if in_place:
        stats.in_place = write_in_place(function)
    if concat:
        stats.concat_inputs = eliminate_concats(function, mode)
    stats.returned_views = returned_views(function)
    _erase_dead_aliases(block)
    place_deallocs(function, mode)
    return stats


# ---------------------------------------------------------------------------
# Small facts about buffers
# ---------------------------------------------------------------------------


def _is_malloc(value: SSAValue) -> bool:
    """`value` is a buffer of its own (a dnn.malloc result)."""
    return isinstance(value.owner, d.MallocOp)


def _contiguous_band(shape: tuple[int, ...] | list[int], axis: int) -> bool:
    """A range along `axis` is one contiguous run of bytes when every dim
    before it is 1 (batch 1 along the channels)."""
    return math.prod(shape[:axis]) == 1


def _writes(op: Operation) -> list[SSAValue]:
    """The buffers an op writes."""
    if isinstance(op, d.DnnComputeOp):
        return op.destinations()
    if isinstance(op, d.MemcpyOp):
        return [op.target]
    return []


def _replace_buffer(old: SSAValue, new_op: Operation, before: Operation | None = None) -> None:
    """Use `new_op` (an alias) instead of the malloc'd buffer `old`; it goes
    before `before`, or where the malloc was."""
    malloc = old.owner
    assert isinstance(malloc, d.MallocOp)
    new_op.results[0].name_hint = old.name_hint
    anchor = before or malloc
    anchor.parent_block().insert_op_before(new_op, anchor)  # type: ignore[union-attr]
    old.replace_all_uses_with(new_op.results[0])
    malloc.detach()
    malloc.erase()


# ---------------------------------------------------------------------------
# Bands: Split / Slice outputs as subviews
# ---------------------------------------------------------------------------


def band_views(block: Block) -> int:
    """split/slice along a contiguous range => subviews of the input."""
    removed = 0
    for op in list(block.ops):
        if isinstance(op, d.SplitOp):
            removed += _split_as_bands(op)
        elif isinstance(op, d.SliceOp):
            removed += _slice_as_band(op)
    return removed


def _split_as_bands(op: d.SplitOp) -> int:
    """split(x) -> y, z  =>  y = subview(x, 0), z = subview(x, |y|)."""
    shape = op.x.type.get_shape()
    axis = (op.axis.value.data if op.axis is not None else 0) % len(shape)
    if not _contiguous_band(shape, axis):
        return 0
    removed, offset = 0, 0
    for out in list(op.outs):
        band = d.SubviewOp(op.x, offset, out.type)  # type: ignore[arg-type]
        offset += d.type_bytes(out.type)
        if _is_malloc(out):
            _replace_buffer(out, band, before=op)
            removed += 1
        else:  # a graph output: copy its band there
            op.parent_block().insert_ops_before([band, copy_op(band.result, out)], op)  # type: ignore[union-attr]
    op.detach()
    op.erase()
    return removed


def _slice_as_band(op: d.SliceOp) -> int:
    """slice(x)[a:b] along one contiguous axis  =>  subview(x, a * inner bytes)."""
    from pyocc.runtime.kernels.tensor import _onnx_slice

    shape = list(op.x.type.get_shape())
    starts = list(op.starts.get_values()) if op.starts is not None else []
    ends = list(op.ends.get_values()) if op.ends is not None else []
    axes = list(op.axes.get_values()) if op.axes is not None else list(range(len(starts)))
    steps = list(op.steps.get_values()) if op.steps is not None else [1] * len(starts)
    ranges = {}
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis %= len(shape)
        s = _onnx_slice(int(start), int(end), int(step), shape[axis])
        first, stop, stride = s.indices(shape[axis])
        if (first, stop, stride) != (0, shape[axis], 1):
            if stride != 1 or axis in ranges:
                return 0
            ranges[axis] = (first, max(stop, first))
    if len(ranges) > 1 or not _is_malloc(op.out):
        return 0
    ((axis, (first, stop)),) = ranges.items() if ranges else ((0, (0, shape[0] if shape else 1)),)
    if not _contiguous_band(shape, axis):
        return 0
    inner = math.prod(shape[axis + 1:]) * d.element_bytes(op.x.type.get_element_type())
    if (stop - first) * inner != d.type_bytes(op.out.type):
        return 0
    _replace_buffer(op.out, d.SubviewOp(op.x, first * inner, op.out.type), before=op)  # type: ignore[arg-type]
    op.detach()
    op.erase()
    return 1


# ---------------------------------------------------------------------------
# In place
# ---------------------------------------------------------------------------


def in_place_candidates(op: d.DnnComputeOp) -> list[SSAValue]:
    """The inputs `op`'s kernel may overwrite with its result."""
    values = []
    for name in IN_PLACE_OPERANDS.get(op.name, ()):
        if name == "inputs[0]":
            inputs = list(getattr(op, "inputs"))
            value = inputs[0] if inputs else None
        else:
            value = getattr(op, name)
        if value is not None:
            values.append(value)
    return values


def write_in_place(function: func.FuncOp) -> int:
    """op(a) into b, where a's buffer dies at op  =>  op(a) into a."""
    liveness = analyze_function(function)
    last = {b.value: b.last for b in liveness.buffers}
    removed = 0
    for i, op in enumerate(list(function.body.block.ops)):
        if not isinstance(op, d.DnnComputeOp) or len(op.destinations()) != 1:
            continue
        out = op.destinations()[0]
        if not _is_malloc(out):
            continue  # a graph output, or already coalesced
        for x in in_place_candidates(op):
            if _can_overwrite(op, x, out, i, last):
                root = root_buffer(x)
                last[root] = max(last[root], last.get(out, i))
                malloc = out.owner
                out.replace_all_uses_with(x)
                malloc.detach()  # type: ignore[union-attr]
                malloc.erase()  # type: ignore[union-attr]
                removed += 1
                break
    return removed


def _can_overwrite(op: d.DnnComputeOp, x: SSAValue, out: SSAValue, step: int, last: dict[SSAValue, int]) -> bool:
    """May `op` (step `step`) write its result `out` over input `x`?"""
    root = root_buffer(x)
    if not _is_malloc(root):
        return False  # a graph input or output, a weight: never overwritten
    if x.type != out.type:
        return False  # different shape, size or dtype
    if last.get(root) != step:
        return False  # read later, through x or any alias of its buffer
    reads = op.read_values()
    if any(root_buffer(v) is root and v is not x for v in reads):
        return False  # another (partial) alias of the same bytes is read too
    if not isinstance(op, d.BinaryOp) and sum(v is x for v in reads) > 1:
        return False
    return True


# ---------------------------------------------------------------------------
# Concat elimination, chosen by the liveness-based peak
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Band:
    """One concat input that may be written into its band of the output."""

    concat: d.ConcatOp
    step: int
    output: SSAValue
    root: SSAValue
    offset: int


@dataclass
class _Buffer:
    """What the choice needs to know of one buffer: its bytes, the steps it
    is live, the steps at which it is written, and whether the pool holds it
    (a graph output does not)."""

    bytes: int
    first: int
    last: int
    writes: list[int] = field(default_factory=list)
    counted: bool = True


class BandChoice:
    """Which concat inputs to write into their band: the live-bytes profile
    and legality of any set of bands, and a search for a good set.

    A set of bands merges each input's buffer (with everything already
    merged into it) into its concat output. The merged buffer lives from the
    first step of any member to the last, so the peak can rise; the cost is
    the max-live bound (lazy) or the sum of buffers (eager)."""

    def __init__(self, liveness: Liveness, ops: list[Operation], eager: bool):
        import numpy as np

        self.eager = eager
        self.buffers: dict[SSAValue, _Buffer] = {}
        for b in liveness.buffers:
            if b.kind == "output" or (b.kind == "intermediate" and _is_malloc(b.value)):
                self.buffers[b.value] = _Buffer(b.bytes, b.first, b.last, counted=b.kind == "intermediate")
        for i, op in enumerate(ops):
            for value in _writes(op):
                buffer = self.buffers.get(root_buffer(value))
                if buffer is not None:
                    buffer.writes.append(i)
        self.base = np.zeros(liveness.steps + 1, dtype=np.int64)
        for b in self.buffers.values():
            if b.counted:
                self.base[b.first:b.last + 1] += b.bytes
        self.base_sum = sum(b.bytes for b in self.buffers.values() if b.counted)

    def cost(self, bands: list[_Band]) -> int | None:
        """The cost with `bands` merged, or None when the set is illegal: a
        band's bytes must be written only before its concat, and its output
        not overwritten while the band is still read."""
        parent = {band.root: band for band in bands}
        if len(parent) < len(bands):
            return None  # one buffer cannot be a band of two outputs
        members: dict[SSAValue, list[SSAValue]] = {}
        for value in {*parent, *(band.output for band in bands)}:
            top = value
            while top in parent:
                top = parent[top].output
            members.setdefault(top, []).append(value)
        children: dict[SSAValue, list[SSAValue]] = {}
        for band in bands:
            children.setdefault(band.output, []).append(band.root)
        for band in bands:
            group = [band.root, *self._merged_into(band.root, children)]
            if any(w >= band.step for m in group for w in self.buffers[m].writes):
                return None
            group_last = max(self.buffers[m].last for m in group)
            if any(w != band.step and w <= group_last for w in self.buffers[band.output].writes):
                return None
        if self.eager:
            return self.base_sum - sum(self.buffers[band.root].bytes for band in bands)
        profile = self.base.copy()
        for top, group in members.items():
            for m in group:
                b = self.buffers[m]
                if b.counted:
                    profile[b.first:b.last + 1] -= b.bytes
            head = self.buffers[top]
            if head.counted:
                first = min(self.buffers[m].first for m in group)
                last = max(self.buffers[m].last for m in group)
                profile[first:last + 1] += head.bytes
        return int(profile.max()) if len(profile) else 0

    @staticmethod
    def _merged_into(value: SSAValue, children: dict[SSAValue, list[SSAValue]]) -> list[SSAValue]:
        """Every buffer merged (transitively) into `value`."""
        found, frontier = [], [value]
        while frontier:
            for child in children.get(frontier.pop(), []):
                found.append(child)
                frontier.append(child)
        return found

    def choose(self, concats: list[list[_Band]]) -> list[_Band]:
        """Greedy over the concats (per concat, the subset of its inputs
        with the lowest cost, ties to more bands), then local search: drop a
        band or add one while that lowers the cost (adding: or keeps it).
        Greedy runs both in program order and backwards (one band can tie
        the peak early and block a chain later), and the better result wins."""
        candidates = [b for bands in concats for b in bands]
        results = []
        for order in (concats, concats[::-1]):
            chosen: list[_Band] = []
            for bands in order:
                chosen = self._best_extension(chosen, bands)
            chosen = self._improve(chosen, candidates)
            results.append((self.cost(chosen), -len(chosen), chosen))
        return min(results, key=lambda r: r[:2])[2]

    def _best_extension(self, chosen: list[_Band], bands: list[_Band]) -> list[_Band]:
        best, best_cost = chosen, self.cost(chosen)
        assert best_cost is not None
        if len(bands) <= MAX_SUBSET_INPUTS:
            subsets = (list(s) for n in range(1, len(bands) + 1) for s in itertools.combinations(bands, n))
        else:  # too many subsets: grow one input at a time
            subsets = (bands[:n] for n in range(1, len(bands) + 1))
        for subset in subsets:
            cost = self.cost([*chosen, *subset])
            if cost is not None and (cost < best_cost or (cost == best_cost and len(subset) + len(chosen) > len(best))):
                best, best_cost = [*chosen, *subset], cost
        return best

    def _improve(self, chosen: list[_Band], candidates: list[_Band]) -> list[_Band]:
        cost = self.cost(chosen)
        assert cost is not None
        improved = True
        while improved:
            improved = False
            for band in list(chosen):
                trial = [b for b in chosen if b is not band]
                new = self.cost(trial)
                if new is not None and new < cost:
                    chosen, cost, improved = trial, new, True
            for band in candidates:
                if band in chosen or any(b.root is band.root for b in chosen):
                    continue
                new = self.cost([*chosen, band])
                if new is not None and new <= cost:
                    chosen, cost, improved = [*chosen, band], new, new < cost or improved
        return chosen


def concat_bands(concat: d.ConcatOp, step: int) -> list[_Band]:
    """The inputs of a concat that could be written into its output, with
    their byte offsets (empty when the bands are not contiguous)."""
    out = concat.out
    if out is None or not (_is_malloc(out) or isinstance(out.owner, Block)):
        return []
    shape = out.type.get_shape()
    if not _contiguous_band(shape, concat.axis.value.data % len(shape)):
        return []
    inputs = list(concat.inputs)
    roots = [root_buffer(v) for v in inputs]
    bands, offset = [], 0
    for value, root in zip(inputs, roots):
        if _is_malloc(root) and roots.count(root) == 1 and root is not out and _whole(value):
            bands.append(_Band(concat, step, out, root, offset))
        offset += d.type_bytes(value.type)
    return bands


def _whole(value: SSAValue) -> bool:
    """`value` is all of its buffer (itself or reshaped views), not a band."""
    while isinstance(value.owner, d.ViewOp):
        value = value.owner.source
    return _is_malloc(value)


def eliminate_concats(function: func.FuncOp, mode: str) -> int:
    """Write concat inputs into their bands of the output where that does not
    raise the peak; the concat copies only the rest."""
    block = function.body.block
    ops = list(block.ops)
    choice = BandChoice(analyze_function(function), ops, eager=mode == "eager")
    concats = [concat_bands(op, step) for step, op in enumerate(ops)
               if isinstance(op, d.ConcatOp) and op.on_buffers]
    chosen = choice.choose([bands for bands in concats if bands])
    _apply_bands(block, sorted(chosen, key=lambda band: band.step))
    return len(chosen)


def _apply_bands(block: Block, bands: list[_Band]) -> None:
    """Rewrite the IR: each chosen input's buffer becomes a subview of its
    concat output; each concat becomes copies of the inputs left over."""
    merged: dict[d.ConcatOp, set[int]] = {}
    for band in bands:
        view = d.SubviewOp(band.output, band.offset, band.root.type)  # type: ignore[arg-type]
        _replace_buffer(band.root, view)
        merged.setdefault(band.concat, set()).add(band.offset)
    for concat, offsets in merged.items():
        offset = 0
        for value in list(concat.inputs):
            if offset not in offsets:
                band = d.SubviewOp(concat.out, offset, value.type)  # type: ignore[arg-type]
                block.insert_ops_before([band, copy_op(value, band.result)], concat)
            offset += d.type_bytes(value.type)
        concat.detach()
        concat.erase()
    _hoist_band_owners(block)


def _hoist_band_owners(block: Block) -> None:
    """A buffer with subviews must exist before the first write into any of
    them: move its malloc, and its subview tree, before the first op that
    touches the group."""
    ops = list(block.ops)
    index = {op: i for i, op in enumerate(ops)}
    trees: dict[SSAValue, list[Operation]] = {}
    for op in ops:
        if isinstance(op, d.SubviewOp):
            trees.setdefault(root_buffer(op.result), [])
    for root in trees:
        tree: list[Operation] = []
        frontier = [root]
        while frontier:  # subviews in breadth-first order: a source before its bands
            value = frontier.pop(0)
            for use in list(value.uses):
                if isinstance(use.operation, d.SubviewOp) and use.operation not in tree:
                    tree.append(use.operation)
                    frontier.append(use.operation.result)
        members = {root, *(o.result for o in tree)}
        users = [index[use.operation] for m in members for use in m.uses
                 if use.operation not in tree and use.operation is not root.owner]
        if not users:
            continue
        anchor = ops[min(users)]
        late_malloc = _is_malloc(root) and index[root.owner] > min(users)  # type: ignore[index]
        movable = ([root.owner] if late_malloc else []) + tree
        for op in movable:
            op.detach()
        block.insert_ops_before(movable, anchor)  # type: ignore[arg-type]
        ops = list(block.ops)
        index = {op: i for i, op in enumerate(ops)}


# ---------------------------------------------------------------------------
# Returned views
# ---------------------------------------------------------------------------


def returned_views(function: func.FuncOp) -> int:
    """copy(view(a)) into a graph output  =>  a lives in that output."""
    block = function.body.block
    copies: dict[SSAValue, list[d.CopyOp]] = {}
    for op in block.ops:
        if isinstance(op, d.CopyOp) and isinstance(op.out.owner, Block):
            copies.setdefault(root_buffer(op.x), []).append(op)
    removed = 0
    for root, ops in copies.items():
        (copy,) = ops if len(ops) == 1 else (None,)
        if copy is None or not _is_malloc(root):
            continue
        target = copy.out
        assert target is not None
        if len(list(target.uses)) != 1 or d.type_bytes(target.type) != d.type_bytes(root.type):
            continue
        if any(i > _index(block, copy) for i in _write_steps(block, root)):
            continue
        _replace_buffer(root, d.ViewOp.create(operands=[target], result_types=[root.type]))
        copy.detach()
        copy.erase()
        removed += 1
    return removed


def _index(block: Block, op: Operation) -> int:
    """The step of `op` in `block`."""
    return next(i for i, o in enumerate(block.ops) if o is op)


def _write_steps(block: Block, root: SSAValue) -> list[int]:
    """The steps of the ops that write `root` or any alias of it."""
    return [i for i, op in enumerate(block.ops) if any(root_buffer(v) is root for v in _writes(op))]


# ---------------------------------------------------------------------------
# Clean-up: dead aliases, deallocs
# ---------------------------------------------------------------------------


def _erase_dead_aliases(block: Block) -> None:
    """Drop views and subviews nothing uses any more."""
    changed = True
    while changed:
        changed = False
        for op in list(block.ops):
            if isinstance(op, d.ALIAS_OPS) and not op.results[0].uses:
                op.detach()
                op.erase()
                changed = True


def place_deallocs(function: func.FuncOp, mode: str) -> None:
    """One dealloc per malloc: lazy, right after the last use of the buffer
    or any alias of it; eager, all before the return."""
    block = function.body.block
    for op in [o for o in block.ops if isinstance(o, d.DeallocOp)]:
        op.detach()
        op.erase()
    mallocs = [o.result for o in block.ops if isinstance(o, d.MallocOp)]
    ret = block.last_op
    assert ret is not None
    if mode == "eager":
        block.insert_ops_before([d.DeallocOp(m) for m in mallocs], ret)
        return
    ops = list(block.ops)
    index = {op: i for i, op in enumerate(ops)}
    last = {b.value: b.last for b in analyze_function(function).buffers}
    after: dict[int, list[SSAValue]] = {}
    alias_defs: dict[SSAValue, int] = {}
    for op in ops:
        if isinstance(op, d.ALIAS_OPS):
            root = root_buffer(op.results[0])
            alias_defs[root] = max(alias_defs.get(root, 0), index[op])
    for m in mallocs:
        step = max(last.get(m, index[m.owner]), alias_defs.get(m, 0))
        after.setdefault(min(step, len(ops) - 2), []).append(m)
    for step in sorted(after, reverse=True):
        anchor = ops[step]
        for m in reversed(after[step]):
            block.insert_op_after(d.DeallocOp(m), anchor)

"""`dnn-coalesce{mode=lazy}`: Occamy's tensor coalescing on buffer-form dnn.

A buffer that can live in the bytes of another one is never allocated. An
analysis decides (pyocc.analysis.coalescing, over the liveness analysis)
and small patterns rewrite, each removing malloc/dealloc pairs:

    SplitAsBands           split(x) -> y, z  =>  y = subview(x, 0), z = subview(x, |y|)
    SliceAsBand            slice(x)[a:b] along a contiguous range  =>  subview(x, a * |row|)
    WriteInPlace           op(a) into b, where a's buffer dies at op  =>  op(a) into a
    ProduceIntoConcatBand  p(...) into a; concat(a, c) into o  =>  p(...) into subview(o, 0)
    ConcatOfLeftovers      concat(a, c) into o, a already in its band  =>  copy(c) into subview(o, |a|)
    ReturnedView           copy(a) into graph output o  =>  a = view(o)

- **bands** (views): a Split output, or a Slice along one contiguous range
  (every dim before the axis is 1), is a `dnn.subview` of its input;
- **in place**: an op writes its result over an input whose buffer dies at
  that op (same type, never a graph input, output or weight, no alias of it
  read later), for the inputs its kernel may overwrite (the op's
  `WritesInPlace` trait, `op.in_place_inputs()`);
- **concat elimination**: a producer writes straight into its band of the
  concat output, chained through nested concats; the concat copies only the
  inputs left over. This makes the output live as long as all its inputs
  together, which can raise the peak (DenseNet-121), so the bands are
  chosen by the max-live bound (eager mode: the sum of buffers), per concat
  the subset of its inputs with the lowest bound, greedily forwards and
  backwards, then a local search (`BandChoice`). A band is legal only if its
  bytes are written before the concat and the output is not overwritten
  while the band is still read. The output's malloc and its subviews then
  move before the first op that touches them (`hoist_band_owners`);
- **returned views**: a buffer whose only way out is a copy into a graph
  output lives in that output instead.

Views nothing reads any more go by xDSL's dead-code elimination; deallocs
are re-placed at the end (lazy: after the last use of each buffer, views
included; eager: all before the return), so dnn-memory-pool and the LLVM
lowering see the coalesced lifetimes.

A new rule is a `RewritePattern` whose comment is its one-line statement,
a condition from the analysis, and a rewrite through the `PatternRewriter`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import region_dce
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.coalescing import (
    ConcatBand,
    InPlaceFacts,
    choose_concat_bands,
    contiguous_band,
    is_malloc,
    returned_view_candidates,
    write_steps,
)
from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import analyze_function, function_bodies, root_buffer
from pyocc.dialects.dnn import ops as d
from pyocc.rewrites.dnn_insert_memory_ops import copy_op
from pyocc.runtime.kernels.tensor import onnx_axis_slice


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
        stats.bands = walk(function, SplitAsBands(), SliceAsBand())
    if in_place:
        stats.in_place = walk(function, WriteInPlace(InPlaceFacts.of(function)))
    if concat:
        chosen = choose_concat_bands(function, eager=mode == "eager")
        stats.concat_inputs = rewrite_at(ProduceIntoConcatBand(chosen), [band.root.owner for band in chosen])
        rewrite_at(ConcatOfLeftovers(chosen), dict.fromkeys(band.concat for band in chosen))
        hoist_band_owners(block)
    candidates = returned_view_candidates(block)
    stats.returned_views = rewrite_at(ReturnedView(candidates), list(candidates))
    region_dce(function.body)  # views and subviews nothing uses any more
    place_deallocs(function, mode)
    return stats


# ---------------------------------------------------------------------------
# Applying patterns
# ---------------------------------------------------------------------------


class _Counting(RewritePattern):
    """Patterns that count the buffers they remove."""

    removed: int = 0


def walk(function: func.FuncOp, *patterns: _Counting) -> int:
    """Apply `patterns` once to every op of `function`, in program order (ops
    they insert are not revisited); the number of buffers they removed."""
    applier = GreedyRewritePatternApplier(list(patterns), dce_enabled=False)
    PatternRewriteWalker(applier, apply_recursively=False).rewrite_region(function.body)
    return sum(p.removed for p in patterns)


def rewrite_at(pattern: _Counting, ops: Iterable[Operation]) -> int:
    """Apply `pattern` at each of `ops`, in the order an analysis chose; the
    number of buffers it removed."""
    for op in ops:
        pattern.match_and_rewrite(op, PatternRewriter(op))
    return pattern.removed


def _into_alias(rewriter: PatternRewriter, old: SSAValue, alias: Operation, before: Operation | None = None) -> None:
    """Use `alias` (a view or subview) instead of the malloc'd buffer `old`;
    it goes before `before`, or where the malloc was."""
    malloc = old.owner
    assert isinstance(malloc, d.MallocOp)
    alias.results[0].name_hint = old.name_hint
    rewriter.insert(alias, InsertPoint.before(before or malloc))
    rewriter.replace_all_uses_with(old, alias.results[0])
    rewriter.erase(malloc)


# ---------------------------------------------------------------------------
# Bands: Split / Slice outputs as subviews
# ---------------------------------------------------------------------------


class SplitAsBands(_Counting):
    """split(x) -> y, z  =>  y = subview(x, 0), z = subview(x, |y|)   (contiguous bands)"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: d.SplitOp, rewriter: PatternRewriter) -> None:
        shape = op.x.type.get_shape()
        axis = (op.axis.value.data if op.axis is not None else 0) % len(shape)
        if not contiguous_band(shape, axis):
            return
        offset = 0
        for out in list(op.outs):
            band = d.SubviewOp(op.x, offset, out.type)  # type: ignore[arg-type]
            offset += d.type_bytes(out.type)
            if is_malloc(out):
                _into_alias(rewriter, out, band, before=op)
                self.removed += 1
            else:  # a graph output: copy its band there
                rewriter.insert([band, copy_op(band.result, out)], InsertPoint.before(op))
        rewriter.erase(op)


class SliceAsBand(_Counting):
    """slice(x)[a:b] along one contiguous axis  =>  subview(x, a * inner bytes)"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: d.SliceOp, rewriter: PatternRewriter) -> None:
        band = _slice_band(op)
        if band is None or not is_malloc(op.out):
            return
        first, bytes_ = band
        if bytes_ != d.type_bytes(op.out.type):
            return
        _into_alias(rewriter, op.out, d.SubviewOp(op.x, first, op.out.type), before=op)  # type: ignore[arg-type]
        rewriter.erase(op)
        self.removed += 1


def _slice_band(op: d.SliceOp) -> tuple[int, int] | None:
    """The byte offset and length of what a slice selects, when that is one
    contiguous range of its input (None otherwise)."""
    shape = list(op.x.type.get_shape())
    starts = list(op.starts.get_values()) if op.starts is not None else []
    ends = list(op.ends.get_values()) if op.ends is not None else []
    axes = list(op.axes.get_values()) if op.axes is not None else list(range(len(starts)))
    steps = list(op.steps.get_values()) if op.steps is not None else [1] * len(starts)
    ranges = {}
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis %= len(shape)
        s = onnx_axis_slice(int(start), int(end), int(step), shape[axis])
        first, stop, stride = s.indices(shape[axis])
        if (first, stop, stride) != (0, shape[axis], 1):
            if stride != 1 or axis in ranges:
                return None
            ranges[axis] = (first, max(stop, first))
    if len(ranges) > 1 or not is_malloc(op.out):
        return None
    ((axis, (first, stop)),) = ranges.items() if ranges else ((0, (0, shape[0] if shape else 1)),)
    if not contiguous_band(shape, axis):
        return None
    inner = math.prod(shape[axis + 1:]) * d.element_bytes(op.x.type.get_element_type())
    return first * inner, (stop - first) * inner


# ---------------------------------------------------------------------------
# In place
# ---------------------------------------------------------------------------


class WriteInPlace(_Counting):
    """op(a) into b, where a's buffer dies at op  =>  op(a) into a"""

    def __init__(self, facts: InPlaceFacts):
        self.facts = facts

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: d.DnnComputeOp, rewriter: PatternRewriter) -> None:
        if len(op.destinations()) != 1:
            return
        out = op.destinations()[0]
        if not is_malloc(out):
            return  # a graph output, or already coalesced
        x = next((x for x in op.in_place_inputs() if self.facts.can_overwrite(op, x, out)), None)
        if x is None:
            return
        self.facts.merge(x, out, op)
        malloc = out.owner
        rewriter.replace_all_uses_with(out, x)
        rewriter.erase(malloc)  # type: ignore[arg-type]
        self.removed += 1


# ---------------------------------------------------------------------------
# Concat elimination (the bands chosen by pyocc.analysis.coalescing)
# ---------------------------------------------------------------------------


class ProduceIntoConcatBand(_Counting):
    """p(...) into a; concat(a, c) into o  =>  p(...) into subview(o, 0)   (a chosen band)"""

    def __init__(self, chosen: list[ConcatBand]):
        self.bands = {band.root: band for band in chosen}

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: d.MallocOp, rewriter: PatternRewriter) -> None:
        band = self.bands.get(op.result)
        if band is None:
            return
        _into_alias(rewriter, op.result, d.SubviewOp(band.output, band.offset, op.result.type))  # type: ignore[arg-type]
        self.removed += 1


class ConcatOfLeftovers(_Counting):
    """concat(a, c) into o, a already in its band  =>  copy(c) into subview(o, |a|)"""

    def __init__(self, chosen: list[ConcatBand]):
        self.in_bands: dict[d.ConcatOp, set[int]] = {}
        for band in chosen:
            self.in_bands.setdefault(band.concat, set()).add(band.offset)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: d.ConcatOp, rewriter: PatternRewriter) -> None:
        offsets = self.in_bands.get(op)
        if offsets is None:
            return
        offset = 0
        for value in list(op.inputs):
            if offset not in offsets:
                band = d.SubviewOp(op.out, offset, value.type)  # type: ignore[arg-type]
                rewriter.insert([band, copy_op(value, band.result)], InsertPoint.before(op))
            offset += d.type_bytes(value.type)
        rewriter.erase(op)


def hoist_band_owners(block: Block) -> None:
    """A buffer with subviews must exist before the first write into any of
    them: move its malloc, and its subview tree, before the first op that
    touches the group.

    Only mallocs and subviews move, each with its own group, and no group's
    op uses another group's buffers: the other ops keep their order, so the
    positions taken once compare them all along."""
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
        late_malloc = is_malloc(root) and index[root.owner] > min(users)  # type: ignore[index]
        for op in ([root.owner] if late_malloc else []) + tree:
            _move_before(op, anchor)  # type: ignore[arg-type]


def _move_before(op: Operation, anchor: Operation) -> None:
    """Move `op` before `anchor`: a copy there takes over its uses."""
    moved = op.clone()
    Rewriter.insert_op(moved, InsertPoint.before(anchor))
    Rewriter.replace_op(op, [], moved.results)


# ---------------------------------------------------------------------------
# Returned views
# ---------------------------------------------------------------------------


class ReturnedView(_Counting):
    """copy(a) into graph output o, a written before  =>  a = view(o)"""

    def __init__(self, candidates: dict[d.CopyOp, SSAValue]):
        self.candidates = candidates

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: d.CopyOp, rewriter: PatternRewriter) -> None:
        root = self.candidates.get(op)
        target = op.out
        if root is None or target is None:
            return
        if len(list(target.uses)) != 1 or d.type_bytes(target.type) != d.type_bytes(root.type):
            return
        block = op.parent_block()
        assert block is not None
        step = next(i for i, o in enumerate(block.ops) if o is op)
        if any(i > step for i in write_steps(block, root)):
            return
        _into_alias(rewriter, root, d.ViewOp.create(operands=[target], result_types=[root.type]))
        rewriter.erase(op)
        self.removed += 1


# ---------------------------------------------------------------------------
# Deallocs
# ---------------------------------------------------------------------------


def place_deallocs(function: func.FuncOp, mode: str) -> None:
    """One dealloc per malloc: lazy, right after the last use of the buffer
    or any alias of it; eager, all before the return."""
    block = function.body.block
    for op in [o for o in block.ops if isinstance(o, d.DeallocOp)]:
        Rewriter.erase_op(op)
    mallocs = [o.result for o in block.ops if isinstance(o, d.MallocOp)]
    ret = block.last_op
    assert ret is not None
    if mode == "eager":
        Rewriter.insert_op([d.DeallocOp(m) for m in mallocs], InsertPoint.before(ret))
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
            Rewriter.insert_op(d.DeallocOp(m), InsertPoint.after(anchor))

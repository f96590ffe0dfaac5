"""`dnn-recompute{values=a,b}`: compute a cheap value again at its late
readers instead of keeping it alive in between (DTR, Checkmate, MONeT; here
at inference).

A value read early and again much later (a long skip, the output of an
upsample read by a concat and by a later add) stays alive across every op
in between, often across the peak. When its producer is cheap (the
`Recomputable` trait of pyocc/dialects/dnn/ops.py: unary functions such as
ReLU, binary ops such as add, folded batch norms, upsampling) the chain
that makes it can be cloned just before the late readers, and the value
dies at its early ones:

    v = p(x); a(v) ... b(v)   =>   v = p(x); a(v) ... v' = p(x); b(v')

An analysis decides (`recompute_site`): the late readers start after the
widest gap between consecutive readers of the value; the chain grows
upwards through Recomputable producers whose results would otherwise die
before that gap ends and whose own inputs are no larger (the upsample's
small input instead of its big output). The clone reads the chain's
inputs, which then live until the late readers, so the gain is real only
when they are smaller or alive anyway (the graph input, a tensor read later
anyway): the `--memory-limit` search (dnn_recompute_search) keeps a
recomputation only when the planned pool goes down.

`tables=true` also recomputes *tables*: values computed from weights
alone (no function argument in what they are made of), which import keeps
as ops where folding them would make the program larger (a transformer's
rotary cos/sin tables of the sequence's length: `EXPANDING_FOLD_LIMIT` in
pyocc/frontend/onnx_import.py). Read by every layer, such a table is alive
from the first to the last; at a short sequence it is a few bytes that
take an aligned slot of the pool each, at the peak. The ops that make it
(any compute op: on tensors they are pure, and these read only weights)
run again for the readers after the widest gap between its readers, at
the step of that gap where they add least to the peak over the rest of
the gap (`table_sites`, `_cheapest_step`; in a symbolic compile, the least
worst at the probe's sizes and at small lengths), so the first copy dies
at the early readers. Only where no op that makes it has a result larger
than the table (the clones' own bytes stay within the table's).

Runs on tensor form, after dnn-reorder (which would move the clone back up).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.dialects.dnn import ops as d
from pyocc.rewrites.dnn_reorder import bytes_at, small_values

MAX_CHAIN = 4
"""At most this many ops cloned for one value."""


@dataclass(frozen=True)
class RecomputeSite:
    """One recomputation: `chain` (Recomputable ops in block order, the last
    one makes `value`) is cloned just before `late[0]`, and the readers in
    `late` read the clone's result instead of `value`."""

    value: SSAValue
    chain: tuple[Operation, ...]
    late: tuple[Operation, ...]

    def ops(self) -> int:
        """The operations the clones add to one run: each chain op's result
        elements times its `ops_per_element`."""
        total = 0
        for op in self.chain:
            trait = op.get_trait(d.Recomputable)
            assert trait is not None
            total += trait.ops_per_element * math.prod(op.results[0].type.get_shape())  # type: ignore[attr-defined]
        return total

    def macs(self) -> int:
        """The MACs the clones add (the chain ops' declared `macs()`)."""
        return sum(op.macs() for op in self.chain)  # type: ignore[attr-defined]

    def extended_bytes(self) -> int:
        """The bytes the clones keep alive longer: the chain's inputs made
        by ops (not graph inputs or weights) that no reader outside the chain
        needs at or after the first late reader. Recomputing can lower the
        peak only when this is less than the value's own bytes."""
        block = self.late[0].parent_block()
        assert block is not None
        anchor = block.get_operation_index(self.late[0])
        inputs = {v for op in self.chain for v in op.operands
                  if isinstance(v.owner, Operation) and v.owner not in self.chain and not isinstance(v.owner, d.WeightOp)}
        return sum(d.type_bytes(v.type) for v in inputs
                   if not any(u.operation not in self.chain and u.operation.parent_block() is block
                              and block.get_operation_index(u.operation) >= anchor for u in v.uses))


def is_recomputable(op: Operation | Block) -> bool:
    """True for a tensor-form compute op with one tensor result whose op
    definition says it is cheap (the `Recomputable` trait)."""
    return (isinstance(op, d.DnnComputeOp) and op.get_trait(d.Recomputable) is not None
            and len(op.results) == 1 and isinstance(op.results[0].type, TensorType)
            and not op.on_buffers)


def _readers(value: SSAValue, block: Block) -> list[Operation] | None:
    """The ops of `block` that read `value`, in block order (None when a
    reader sits elsewhere, e.g. in a nested region)."""
    readers = {use.operation for use in value.uses}
    if any(r.parent_block() is not block for r in readers):
        return None
    return sorted(readers, key=block.get_operation_index)


def recompute_site(value: SSAValue) -> RecomputeSite | None:
    """Where recomputing `value` would end its life early: None when its
    producer is not Recomputable, or no two of its readers are apart by at
    least one other op (nothing to gain)."""
    producer = value.owner
    if not isinstance(producer, Operation) or not is_recomputable(producer):
        return None
    block = producer.parent_block()
    if block is None:
        return None
    readers = _readers(value, block)
    if readers is None or len(readers) < 2:
        return None
    position = [block.get_operation_index(r) for r in readers]
    gaps = [position[k] - position[k - 1] for k in range(1, len(readers))]
    widest = max(gaps)
    if widest < 2:
        return None
    split = gaps.index(widest) + 1
    anchor = position[split]
    chain = [producer]
    frontier = [producer]
    while frontier and len(chain) < MAX_CHAIN:
        op = frontier.pop()
        for operand in op.operands:
            source = operand.owner
            if (not isinstance(source, Operation) or source in chain or not is_recomputable(source)
                    or isinstance(source, d.WeightOp)):
                continue
            users = _readers(operand, block)
            # clone the producer too only when its result would die before the
            # late readers anyway, and the clone then reads no more bytes
            if users is None or any(u not in chain and block.get_operation_index(u) >= anchor for u in users):
                continue
            inputs = [v for v in source.operands if not isinstance(v.owner, d.WeightOp)]
            if sum(d.type_bytes(v.type) for v in inputs) > d.type_bytes(operand.type):
                continue
            if len(chain) < MAX_CHAIN:
                chain.append(source)
                frontier.append(source)
    chain.sort(key=block.get_operation_index)
    return RecomputeSite(value, tuple(chain), tuple(readers[split:]))


def weight_only_values(block: Block) -> set[SSAValue]:
    """The values of `block` computed from weights alone: weights, views of
    such values, and the tensor results of compute ops (no regions) that
    read only such values (a ``dnn.range`` reads none)."""
    made: set[SSAValue] = set()
    for op in block.ops:
        if isinstance(op, d.WeightOp) or (
                isinstance(op, d.ViewOp | d.DnnComputeOp) and not op.regions and op.results
                and all(isinstance(r.type, TensorType) for r in op.results) and all(v in made for v in op.operands)):
            made.update(op.results)
    return made


@dataclass(frozen=True)
class TableSite:
    """One table recomputed (`tables=true`): the ops of `chain` (in block
    order: views, compute ops) are cloned just before `before`, and each
    late reader reads the clones of the values in `late` it read."""

    table: SSAValue
    chain: tuple[Operation, ...]
    late: tuple[Operation, ...]
    before: Operation


def _reads_through_views(value: SSAValue, block: Block) -> list[tuple[Operation, SSAValue]] | None:
    """(reader, the value it reads: `value` or a view of it) for every op
    of `block` that reads `value`, looking through views; None when one sits
    elsewhere (a nested region)."""
    result: list[tuple[Operation, SSAValue]] = []
    stack = [value]
    while stack:
        current = stack.pop()
        for use in current.uses:
            reader = use.operation
            if reader.parent_block() is not block:
                return None
            if isinstance(reader, d.ViewOp):
                stack.append(reader.result)
            else:
                result.append((reader, current))
    return result


def _made_of(values: set[SSAValue], block: Block) -> list[Operation]:
    """The ops of `block` that make `values`, and those that make their
    operands, down to (not including) weights, in block order."""
    ops: set[Operation] = set()
    stack = list(values)
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, Operation) and not isinstance(owner, d.WeightOp) and owner not in ops:
            ops.add(owner)
            stack.extend(owner.operands)
    return sorted(ops, key=block.get_operation_index)


def _cheapest_step(block: Block, first: Operation, last: Operation, chain: Sequence[Operation],
                   sizes: Sequence[Callable[[Attribute], int]] = (d.type_bytes,)) -> Operation:
    """The op of `block` from `first` to `last` (the late reader; in block
    order) before which `chain` (the ops that make a table again) adds the
    least to the peak: made before op i, the clones' results are alive at
    i and the table from i to `last` (the table is alive there already,
    the original's life ends at the early readers only after the rewrite),
    so i costs the larger of the bytes alive before i plus the chain's
    results and the most bytes alive before any later op up to `last`
    (views share their root's bytes; the latest op on ties). With several
    `sizes` (a symbolic compile's tensor sizes at its probe and at small
    lengths), the op whose cost is the least worst against the least of
    each."""
    ops = list(block.ops)
    index = {op: i for i, op in enumerate(ops)}

    def root(value: SSAValue) -> SSAValue:
        while isinstance(value.owner, d.ViewOp):
            value = value.owner.source
        return value

    ends: dict[SSAValue, int] = {}
    for i, op in enumerate(ops):
        for operand in op.operands:
            ends[root(operand)] = i
    span = range(index[first], index[last] + 1)
    made = [r for op in chain if isinstance(op, d.DnnComputeOp) for r in op.results]
    scores = [0.0] * len(ops)
    for size in sizes:
        alive = [0] * (len(ops) + 1)
        for i, op in enumerate(ops):
            if isinstance(op, d.DnnComputeOp):
                for r in op.results:
                    if r in ends and isinstance(r.type, TensorType):
                        # alive before every op after its producer up to its last reader
                        alive[i + 1] += size(r.type)
                        alive[ends[r] + 1] -= size(r.type)
        running, before = 0, []
        for i in range(len(ops)):
            running += alive[i]
            before.append(running)
        clones = sum(size(r.type) for r in made)
        cost: dict[int, int] = {}
        later = 0
        for i in reversed(span):
            cost[i] = max(before[i] + clones, later)
            later = max(later, before[i])
        least = max(min(cost.values()), 1)
        for i in span:
            scores[i] = max(scores[i], cost[i] / least)
    return ops[min(span, key=lambda i: (scores[i], -i))]


def table_sites(function: func.FuncOp,
                sizes: Sequence[Callable[[Attribute], int]] = (d.type_bytes,)) -> list[TableSite]:
    """The tables of `function` worth recomputing (module docstring): a
    value made from weights alone by a compute op, read (through views) by
    ops that are not, at least two of them apart by more than one op, and
    by none of the ops that make tables after the widest gap; made by ops
    none of whose results is larger than it."""
    block = function.body.block
    made = weight_only_values(block)
    sites: list[TableSite] = []
    for op in block.ops:
        if not isinstance(op, d.DnnComputeOp) or len(op.results) != 1 or op.results[0] not in made:
            continue
        table = op.results[0]
        reads = _reads_through_views(table, block)
        if reads is None or not reads:
            continue
        outside = sorted({r for r, _ in reads if not set(r.results) & made}, key=block.get_operation_index)
        if len(outside) < 2:
            continue
        position = [block.get_operation_index(r) for r in outside]
        gaps = [b - a for a, b in itertools.pairwise(position)]
        if max(gaps) < 2:
            continue
        split = gaps.index(max(gaps)) + 1
        anchor = position[split]
        if any(block.get_operation_index(r) >= anchor for r, _ in reads if set(r.results) & made):
            continue  # another table still reads it late: it stays alive anyway
        late = tuple(outside[split:])
        values = {v for r, v in reads if r in late}
        chain = _made_of(values, block)
        size = d.type_bytes(table.type)
        if any(isinstance(r.type, TensorType) and d.type_bytes(r.type) > size for c in chain for r in c.results):
            continue
        after_early = outside[split - 1].next_op
        assert after_early is not None  # the late readers follow
        before = _cheapest_step(block, after_early, outside[split], chain, sizes)
        sites.append(TableSite(table, tuple(chain), late, before))
    return sites


def recompute_tables(function: func.FuncOp,
                     sizes: Sequence[Callable[[Attribute], int]] = (d.type_bytes,)) -> list[TableSite]:
    """Recompute every table of `function` worth it (`table_sites`), one
    after the other (each rewrite moves the others' positions); returns the
    sites rewritten."""
    done: list[TableSite] = []
    seen: set[SSAValue] = set()
    while True:
        site = next((s for s in table_sites(function, sizes) if s.table not in seen), None)
        if site is None:
            return done
        seen.add(site.table)
        mapping: dict[SSAValue, SSAValue] = {}
        block = function.body.block
        for original in site.chain:
            clone = original.clone(value_mapper=mapping)
            block.insert_op_before(clone, site.before)
            for old, new in zip(original.results, clone.results, strict=True):
                if old.name_hint:
                    new.name_hint = f"{old.name_hint}_again"
                mapping[old] = new
                seen.add(new)
        late = set(site.late)
        for reader in late:
            reader.operands = [mapping.get(operand, operand) for operand in reader.operands]
        done.append(site)


class RecomputeAtLateReaders(RewritePattern):
    """v = p(x); a(v) ... b(v)  =>  v = p(x); a(v) ... v' = p(x); b(v')
    (the sites decided by `recompute_site`, keyed by their first late reader)."""

    def __init__(self, sites: dict[Operation, RecomputeSite]):
        self.sites = sites

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        site = self.sites.pop(op, None)
        if site is None:
            return
        mapping: dict[SSAValue, SSAValue] = {}
        for original in site.chain:
            clone = original.clone(value_mapper=mapping)
            rewriter.insert(clone, InsertPoint.before(op))
            if original.results[0].name_hint:
                clone.results[0].name_hint = f"{original.results[0].name_hint}_again"
            mapping[original.results[0]] = clone.results[0]
        late = set(site.late)
        rewriter.replace_uses_with_if(site.value, mapping[site.value], lambda use: use.operation in late)


def printed_names(function: func.FuncOp) -> dict[str, SSAValue]:
    """The values of `function`'s block by the names the IR printer gives
    them (`%relu`, `%relu_1`, ...: a name hint, then `_N` for its N-th
    repeat, block arguments first, then the op results in block order)."""
    seen: dict[str, int] = {}
    names: dict[str, SSAValue] = {}
    block = function.body.block
    values = [*block.args, *(r for op in block.ops for r in op.results)]
    for value in values:
        if not value.name_hint:
            continue
        count = seen.get(value.name_hint, 0)
        seen[value.name_hint] = count + 1
        names.setdefault(f"{value.name_hint}_{count}" if count else value.name_hint, value)
    return names


def named_recompute_ops(function: func.FuncOp, names: list[str]) -> int:
    """The element operations recomputing the named values of the
    tensor-form `function` adds (each site as if recomputed alone; unknown
    names and values with nothing to gain add none)."""
    values = printed_names(function)
    sites = [recompute_site(values[n]) for n in names if n in values]
    return sum(site.ops() for site in sites if site is not None)


def recompute_values(function: func.FuncOp, names: list[str]) -> list[RecomputeSite]:
    """Recompute the named values of `function` at their late readers, one
    after the other; returns the sites rewritten (a value with nothing to
    gain is left as it is). Raises PassFailedException for a name that is
    missing, ambiguous, or made by an op that is not Recomputable."""
    done: list[RecomputeSite] = []
    for name in names:
        value = printed_names(function).get(name)
        if value is None:
            raise PassFailedException(f"dnn-recompute: no value named %{name} in @{function.sym_name.data}; "
                                      "name an op result as the tensor-form IR prints it (pyocc-opt MODEL -p ...)")
        owner = value.owner
        if not isinstance(owner, Operation) or not is_recomputable(owner):
            what = owner.name if isinstance(owner, Operation) else "a block argument"
            raise PassFailedException(f"dnn-recompute: %{name} is made by {what}, which is not Recomputable; "
                                      "only cheap ops (the Recomputable trait: unary, binary, channel_affine, "
                                      "batch_norm, resize) are recomputed")
        site = recompute_site(value)
        if site is None:
            continue
        PatternRewriteWalker(RecomputeAtLateReaders({site.late[0]: site}), apply_recursively=False).rewrite_module(function)
        done.append(site)
    return done


@dataclass(frozen=True)
class DnnRecomputePass(ModulePass):
    """Recompute the named cheap values at their late readers (see the
    module docstring); tensor form only."""

    name = "dnn-recompute"

    values: str = ""
    """The values to recompute, by name without the %, comma-separated
    (e.g. `values=skip,up`)."""

    tables: bool = False
    """Also recompute the tables (values made from weights alone) at their
    late readers (module docstring)."""

    symbol_dim: int = 0
    """A symbolic compile's probe value (0: none), as dnn-reorder's: the
    step a table is made again at is chosen at the probe's sizes and at
    small values of the symbol (`small_values`, every tensor rounded up
    to `alignment`), the least worst of them."""

    alignment: int = 1
    """With `symbol_dim`: the pool's alignment."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "tensors")
        names = [n.strip().lstrip("%") for n in self.values.split(",") if n.strip()]
        for function in op.walk():
            if isinstance(function, func.FuncOp) and function.body.blocks:
                if any(isinstance(o, d.DnnComputeOp) and o.on_buffers for o in function.body.block.ops):
                    raise PassFailedException("dnn-recompute: run it on tensor form, before dnn-insert-memory-ops")
                recompute_values(function, names)
                if self.tables:
                    sizes: list[Callable[[Attribute], int]] = [d.type_bytes]
                    if self.symbol_dim:
                        sizes += [partial(bytes_at, self.symbol_dim, value, alignment=self.alignment)
                                  for value in small_values(self.symbol_dim)]
                    recompute_tables(function, sizes)

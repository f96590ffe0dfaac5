"""`dnn-tile{region=auto patches=4}`: patch-based execution of a CNN's stem.

The peak of a CNN's activation memory usually sits in its first layers,
at full resolution. MCUNetV2-style patch-based inference runs a region of
row-local ops (dnn.conv, the pools, elementwise ops: the `RowLocal` trait)
patch by patch along the rows of the region's output; each patch slices the
rows of the region input it needs (its receptive field: the halo rows are
read twice and recomputed), runs the chain on the small tensors, and writes
its rows into the region output, which is the only tensor of the region that
ever exists whole:

    y = opk(...op1(x))                         (a chain here, N = 1, NCHW)
  =>
    x0 = dnn.slice(x) rows [0, h0)             first patch: the top pad kept
    y0 = opk(...op1(x0)) pads bottom 0         the halo rows replace the pad
    e  = dnn.empty                             the region output, unwritten
    y  = dnn.insert_slice(e, y0) offset 0
    x1 = dnn.slice(x) rows [l1, h1)            ... last patch: the bottom pad kept
    y  = dnn.insert_slice(y, y1) offset r1

A region may branch: residual adds (ResNet's bottlenecks with their
projection shortcut, MobileNetV2's inverted residuals) and concats
(Inception's branches, DenseNet's dense blocks) inside it are fine as long
as the region has one input and one output. Each patch computes every
branch; a value read by several paths holds the union of the rows they
need (the halo is the max over the paths), and a reader that needs fewer
rows gets a `dnn.slice` of them.

Runs on tensor form, before dnn-insert-memory-ops; dnn-coalesce then writes
every insert_slice over its `dest`, so the region output is one buffer. The
region starts at the function's first argument (the graph input) and ends
at a cut: after the region's last op no other region value is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, TensorType, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.dialects.dnn import ops as d

ROWS = 2
"""The tiled axis: H of NCHW."""


@dataclass(frozen=True)
class RowWindow:
    """How one op of a region maps its output rows to input rows: output row
    o reads input rows [o * stride - pad_top, o * stride - pad_top + extent)."""

    extent: int
    stride: int
    pad_top: int
    pad_bottom: int
    rows_in: int
    rows_out: int

    def needs(self, first: int, end: int) -> tuple[int, int, int, int]:
        """The input rows [lo, hi) output rows [first, end) read, clamped to
        the input, and the (top, bottom) pads that replace what is clamped."""
        return d.band_rows(first, end, self.extent, self.stride, self.pad_top, self.rows_in)


def _ints(op: Operation, name: str, default: list[int]) -> list[int]:
    attr = op.properties.get(name)
    return list(attr.get_values()) if isinstance(attr, DenseArrayBase) else default  # type: ignore[arg-type]


def _rows_of(value: SSAValue) -> int | None:
    """The rows of an N=1 NCHW tensor, None for anything else."""
    t = value.type
    if not isinstance(t, TensorType):
        return None
    shape = t.get_shape()
    return shape[ROWS] if len(shape) == 4 and shape[0] == 1 and shape[ROWS] > 0 else None


def _is_weight(value: SSAValue) -> bool:
    return isinstance(value.owner, d.WeightOp)


def _window_of(op: Operation) -> RowWindow | None:
    """The row window of a sliding op (RowLocal(window=True)) on its `x`."""
    rows_in, rows_out = _rows_of(op.x), _rows_of(op.results[0])  # type: ignore[attr-defined]
    assert rows_in is not None and rows_out is not None
    weight = getattr(op, "w", None)
    if weight is not None:  # the taps are the weight's dims (conv)
        if len(weight.type.get_shape()) != 4:
            return None
        kernel = weight.type.get_shape()[2]
    else:
        kernel_shape = _ints(op, "kernel_shape", [])
        if len(kernel_shape) != 2:
            return None
        kernel = kernel_shape[0]
    stride = _ints(op, "strides", [1, 1])[0]
    pads = _ints(op, "pads", [0, 0, 0, 0])
    dilation = _ints(op, "dilations", [1, 1])[0]
    window = RowWindow((kernel - 1) * dilation + 1, stride, pads[0], pads[2], rows_in, rows_out)
    if (rows_in + pads[0] + pads[2] - window.extent) // stride + 1 != rows_out:
        return None  # ceil_mode added a row that hangs past the pad
    return window


def op_windows(op: Operation, inside: set[SSAValue]) -> dict[int, RowWindow] | None:
    """How `op` reads the region values among its operands: operand index
    -> row window, for every operand in `inside`; every other operand must be
    a constant that does not vary along the rows. None when dnn-tile cannot
    run `op` on a band of rows (not RowLocal, not N=1 NCHW, a broadcast data
    input, a concat or per-channel op along another axis, no region input)."""
    trait = op.get_trait(d.RowLocal)
    if trait is None or not isinstance(op, d.DnnComputeOp) or not op.results or len(op.results) != 1:
        return None
    result = op.results[0]
    rows_out = _rows_of(result)
    if rows_out is None or not result.uses:
        return None
    shape_out = result.type.get_shape()  # type: ignore[attr-defined]
    axis = op.properties.get("axis")
    if isinstance(axis, IntegerAttr) and axis.value.data != 1:
        return None  # a per-channel op (channel_affine) or a concat must work along the channels
    windows: dict[int, RowWindow] = {}
    reads = set(op.read_values())
    for index, value in enumerate(op.operands):
        if value not in reads:
            continue
        if value not in inside:
            if not _is_weight(value):
                return None  # a tensor from outside the region
            shape = value.type.get_shape()  # type: ignore[attr-defined]
            if not trait.window and len(shape) >= 2 and shape[-2] != 1:
                return None  # a constant that varies along the rows does not fit a band
            continue
        rows_in = _rows_of(value)
        if rows_in is None:
            return None
        if trait.window and value is getattr(op, "x", None):
            window = _window_of(op)
            if window is None:
                return None
            windows[index] = window
            continue
        shape_in = value.type.get_shape()  # type: ignore[attr-defined]
        if trait.joins_channels:
            if shape_in[:1] + shape_in[2:] != shape_out[:1] + shape_out[2:]:
                return None
        elif shape_in != shape_out:
            return None  # a broadcast data input
        windows[index] = RowWindow(1, 1, 0, 0, rows_in, rows_out)
    return windows if windows else None


@dataclass
class Region:
    """A region dnn-tile runs patch by patch: `ops` in block order, reading
    only `input` (the graph input), each other's results and constants;
    `windows[i]` maps the region-value operands of `ops[i]` to their row
    windows. Only `output` (the last op's result) is used after the region:
    a chain or a branching block (residual adds, concats) with one input and
    one output."""

    input: SSAValue
    ops: list[Operation]
    windows: list[dict[int, RowWindow]]

    @property
    def output(self) -> SSAValue:
        """The region output, the only region tensor that exists whole."""
        return self.ops[-1].results[0]

    def rows_in(self) -> int:
        """The rows of the region input."""
        rows = _rows_of(self.input)
        assert rows is not None
        return rows

    def rows_out(self) -> int:
        """The rows of the region output."""
        return self.output.type.get_shape()[ROWS]  # type: ignore[attr-defined]


def regions(function: func.FuncOp) -> list[Region]:
    """Every region from the function's first argument, shortest first: the
    prefixes (in block order) of the ops that can run on bands of rows and
    read only the graph input, each other and constants, cut where exactly
    one of their results, the last op's, is used after them."""
    block = function.body.block
    if not block.args or _rows_of(block.args[0]) is None:
        return []
    region_input = block.args[0]
    ops = list(block.ops)
    position = {op: i for i, op in enumerate(ops)}
    inside: set[SSAValue] = {region_input}
    taken: list[Operation] = []
    windows: list[dict[int, RowWindow]] = []
    found: list[Region] = []
    last_use = 0  # the last position at which a region value before the current op is used
    for i, op in enumerate(ops):
        if not any(v in inside for v in op.operands):
            continue  # weights and ops outside the region's dataflow
        op_window = op_windows(op, inside)
        if op_window is None:
            break
        taken.append(op)
        windows.append(op_window)
        if last_use <= i:  # no earlier region value is needed after this op: a cut
            found.append(Region(region_input, list(taken), list(windows)))
        result = op.results[0]
        inside.add(result)
        last_use = max(last_use, *(position[use.operation] for use in result.uses))
    return found


def auto_region(found: list[Region]) -> Region | None:
    """region=auto: the region that ends at the smallest output (the
    earliest one on a tie), where patch-based execution saves most."""
    if not found:
        return None
    sizes = [d.type_bytes(r.output.type) for r in found]
    return found[sizes.index(min(sizes))]


def patch_bounds(rows: int, patches: int) -> list[tuple[int, int]]:
    """Output rows [first, end) of each of `patches` near-equal patches."""
    patches = min(patches, rows)
    return [(i * rows // patches, (i + 1) * rows // patches) for i in range(patches)]


@dataclass
class PatchRows:
    """What one patch computes: `bands[v]`, the rows [lo, hi) of region value
    v it holds (the union of what its readers need: the halo is the max over
    the paths); `reads[(i, k)]`, the rows (lo, hi) operand k of ops[i] reads
    and the (top, bottom) pads that replace the rows clamped at the edges."""

    bands: dict[SSAValue, tuple[int, int]]
    reads: dict[tuple[int, int], tuple[int, int, int, int]]


def patch_rows(region: Region, first: int, end: int) -> PatchRows:
    """The rows each op of `region` computes for output rows [first, end)."""
    bands: dict[SSAValue, tuple[int, int]] = {region.output: (first, end)}
    reads: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    for i in range(len(region.ops) - 1, -1, -1):
        op = region.ops[i]
        band = bands[op.results[0]]
        for k, window in region.windows[i].items():
            need = window.needs(*band)
            reads[(i, k)] = need
            value = op.operands[k]
            lo, hi = need[:2]
            if value in bands:
                lo, hi = min(lo, bands[value][0]), max(hi, bands[value][1])
            bands[value] = (lo, hi)
    return PatchRows(bands, reads)


def _with_rows(t: TensorType, rows: int) -> TensorType:
    shape = list(t.get_shape())
    shape[ROWS] = rows
    return TensorType(t.get_element_type(), shape)


def _slice(value: SSAValue, lo: int, hi: int) -> Operation:
    return d.SliceOp.build({"x": value}, [_with_rows(value.type, hi - lo)], {  # type: ignore[arg-type]
        "starts": DenseArrayBase.from_list(i64, [lo]), "ends": DenseArrayBase.from_list(i64, [hi]),
        "axes": DenseArrayBase.from_list(i64, [ROWS])})


def tile_region(region: Region, patches: int) -> None:
    """Rewrite `region` (from `regions`) into `patches` patches."""
    last = region.ops[-1]
    output = region.output
    rewriter = Rewriter()
    where = InsertPoint.before(last)
    dest: SSAValue | None = None
    for index, (first, end) in enumerate(patch_bounds(region.rows_out(), patches)):
        rows = patch_rows(region, first, end)
        lo, hi = rows.bands[region.input]
        x = _slice(region.input, lo, hi)
        rewriter.insert_op(x, where)
        # region value -> (its value in this patch, the first row it holds)
        held: dict[SSAValue, tuple[SSAValue, int]] = {region.input: (x.results[0], lo)}
        bands: dict[tuple[SSAValue, int, int], SSAValue] = {}  # (held value, rows) -> its slice
        for i, op in enumerate(region.ops):
            operands = list(op.operands)
            top, bottom = 0, 0
            for k, window in region.windows[i].items():
                lo, hi, pad_top, pad_bottom = rows.reads[(i, k)]
                value, start = held[op.operands[k]]
                if (lo, hi) != (start, start + value.type.get_shape()[ROWS]):  # type: ignore[attr-defined]
                    if (value, lo, hi) not in bands:  # this reader needs fewer rows than held: one slice per band
                        band = _slice(value, lo - start, hi - start)
                        rewriter.insert_op(band, where)
                        bands[(value, lo, hi)] = band.results[0]
                    value = bands[(value, lo, hi)]
                operands[k] = value
                if window.extent > 1 or window.pad_top or window.pad_bottom:
                    top, bottom = pad_top, pad_bottom
            properties = dict(op.properties)
            if any(w.extent > 1 or w.pad_top or w.pad_bottom for w in region.windows[i].values()):
                row_pads = _ints(op, "pads", [0, 0, 0, 0])
                properties["pads"] = DenseArrayBase.from_list(i64, [top, row_pads[1], bottom, row_pads[3]])
            o_lo, o_hi = rows.bands[op.results[0]]
            patch = type(op).create(operands=operands, result_types=[_with_rows(op.results[0].type, o_hi - o_lo)],  # type: ignore[arg-type]
                                    properties=properties, attributes=dict(op.attributes))
            rewriter.insert_op(patch, where)
            held[op.results[0]] = (patch.results[0], o_lo)
            if op.results[0].name_hint:
                patch.results[0].name_hint = f"{op.results[0].name_hint}_p{index}"
        if dest is None:
            empty = d.EmptyOp.build({}, [output.type])
            rewriter.insert_op(empty, where)
            dest = empty.results[0]
        insert = d.InsertSliceOp.build({"dest": dest, "x": held[output][0]}, [output.type], {
            "axis": IntegerAttr(ROWS, i64), "offset": IntegerAttr(first, i64)})
        rewriter.insert_op(insert, where)
        dest = insert.results[0]
    assert dest is not None
    dest.name_hint = output.name_hint
    output.replace_all_uses_with(dest)
    for op in reversed(region.ops):
        rewriter.erase_op(op)


def high_rows(region: Region, end: int) -> dict[SSAValue, int]:
    """Region value -> one past the last of its rows that output rows
    [0, end) need (what the patches up to one ending at `end` computed)."""
    high: dict[SSAValue, int] = {region.output: end}
    for i in range(len(region.ops) - 1, -1, -1):
        op = region.ops[i]
        top = high.get(op.results[0], 0)
        for k, window in region.windows[i].items():
            value = op.operands[k]
            hi = window.needs(0, top)[1] if top > 0 else 0
            high[value] = max(high.get(value, 0), hi)
    return high


@dataclass
class CachedPatch:
    """What one patch computes with halos cached: `new[i]`, the output rows
    [a, b) ops[i] computes (empty: the op does not run in this patch);
    `reads[(i, k)]` as in PatchRows; `low[v]`, the first row of region
    value v this patch reads (rows of v below it are no longer needed)."""

    new: list[tuple[int, int]]
    reads: dict[tuple[int, int], tuple[int, int, int, int]]
    low: dict[SSAValue, int]


def cached_patches(region: Region, patches: int) -> list[CachedPatch]:
    """The patches of `region` when each row of each op is computed once:
    patch p computes the rows its output rows need that no earlier patch
    did, reading the halo rows the earlier patches left in the cache."""
    found: list[CachedPatch] = []
    before: dict[SSAValue, int] = {}
    for _, end in patch_bounds(region.rows_out(), patches):
        high = high_rows(region, end)
        new: list[tuple[int, int]] = []
        reads: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        low: dict[SSAValue, int] = {}
        for i, op in enumerate(region.ops):
            result = op.results[0]
            band = (before.get(result, 0), high.get(result, 0))
            new.append(band)
            if band[0] >= band[1]:
                continue
            for k, window in region.windows[i].items():
                need = window.needs(*band)
                reads[(i, k)] = need
                value = op.operands[k]
                low[value] = min(low.get(value, need[0]), need[0])
        found.append(CachedPatch(new, reads, low))
        before = high
    return found


def _concat_rows(parts: list[SSAValue]) -> Operation:
    rows = sum(p.type.get_shape()[ROWS] for p in parts)  # type: ignore[attr-defined]
    return d.ConcatOp.build({"inputs": parts}, [_with_rows(parts[0].type, rows)],  # type: ignore[arg-type]
                            {"axis": IntegerAttr(ROWS, i64)})


def tile_region_cached(region: Region, patches: int) -> None:
    """Rewrite `region` into `patches` patches that compute every row of
    every op once (StreamNet-style): after a value's new rows are computed,
    the rows of it the next patch still reads (its halo) are sliced into a
    small cache, and a reader whose rows span the cache and the new rows
    reads their concat along the rows."""
    last = region.ops[-1]
    output = region.output
    rewriter = Rewriter()
    where = InsertPoint.before(last)
    plan = cached_patches(region, patches)
    # region value -> the pieces of it this patch holds, (value, first row),
    # and those the next patch will hold (the cache)
    held: dict[SSAValue, list[tuple[SSAValue, int]]] = {}
    carry: dict[SSAValue, list[tuple[SSAValue, int]]] = {}
    dest: SSAValue | None = None

    def emit(op: Operation) -> SSAValue:
        rewriter.insert_op(op, where)
        return op.results[0]

    def rows_of(pieces: list[tuple[SSAValue, int]]) -> tuple[int, int]:
        value, start = pieces[-1]
        return pieces[0][1], start + value.type.get_shape()[ROWS]  # type: ignore[attr-defined]

    def band(value: SSAValue, lo: int, hi: int, slices: dict[tuple[SSAValue, int, int], SSAValue]) -> SSAValue:
        """Rows [lo, hi) of region value `value` as one tensor."""
        if value is region.input:
            pieces = [(value, 0)]
        else:
            pieces = held[value]
            inside = [p for p in pieces if p[1] <= lo and hi <= rows_of([p])[1]]
            if inside:
                pieces = inside[:1]
            elif len(pieces) > 1:  # the rows span the cache and the new rows: join them once
                joined = emit(_concat_rows([p for p, _ in pieces]))
                held[value] = pieces = [(joined, pieces[0][1])]
        whole, start = pieces[0]
        if (lo, hi) == (start, start + whole.type.get_shape()[ROWS]):  # type: ignore[attr-defined]
            return whole
        if (whole, lo, hi) not in slices:
            slices[(whole, lo, hi)] = emit(_slice(whole, lo - start, hi - start))
        return slices[(whole, lo, hi)]

    for index, (patch, (first, end)) in enumerate(zip(plan, patch_bounds(region.rows_out(), patches), strict=True)):
        following = plan[index + 1] if index + 1 < len(plan) else None
        slices: dict[tuple[SSAValue, int, int], SSAValue] = {}
        held, carry = carry, {}
        for i, op in enumerate(region.ops):
            result = op.results[0]
            o_lo, o_hi = patch.new[i]
            if o_lo < o_hi:
                operands = list(op.operands)
                top, bottom = 0, 0
                for k, window in region.windows[i].items():
                    lo, hi, pad_top, pad_bottom = patch.reads[(i, k)]
                    operands[k] = band(op.operands[k], lo, hi, slices)
                    if window.extent > 1 or window.pad_top or window.pad_bottom:
                        top, bottom = pad_top, pad_bottom
                properties = dict(op.properties)
                if any(w.extent > 1 or w.pad_top or w.pad_bottom for w in region.windows[i].values()):
                    row_pads = _ints(op, "pads", [0, 0, 0, 0])
                    properties["pads"] = DenseArrayBase.from_list(i64, [top, row_pads[1], bottom, row_pads[3]])
                computed = emit(type(op).create(operands=operands, properties=properties,
                                                attributes=dict(op.attributes),
                                                result_types=[_with_rows(result.type, o_hi - o_lo)]))  # type: ignore[arg-type]
                if result.name_hint:
                    computed.name_hint = f"{result.name_hint}_p{index}"
                held[result] = [*held.get(result, []), (computed, o_lo)]
            if result is output or result not in held or following is None or result not in following.low:
                continue
            # the rows of it the next patch still reads: the halo cache
            lo, hi = rows_of(held[result])
            keep = max(following.low[result], lo)
            if keep < hi:
                carry[result] = [(band(result, keep, hi, slices), keep)]
        if dest is None:
            dest = emit(d.EmptyOp.build({}, [output.type]))
        dest = emit(d.InsertSliceOp.build({"dest": dest, "x": held[output][-1][0]}, [output.type], {
            "axis": IntegerAttr(ROWS, i64), "offset": IntegerAttr(first, i64)}))
    assert dest is not None
    dest.name_hint = output.name_hint
    output.replace_all_uses_with(dest)
    for op in reversed(region.ops):
        rewriter.erase_op(op)


def tile_function(function: func.FuncOp, region: str | int, patches: int, halo: str = "recompute") -> int:
    """Tile the region of one function, its halos recomputed or cached;
    returns the ops it covers (0: none)."""
    found = regions(function)
    chosen = auto_region(found) if region == "auto" else next((r for r in found if len(r.ops) == int(region)), None)
    if chosen is None or patches < 2 or chosen.rows_out() < 2:
        return 0
    if halo == "cache":
        tile_region_cached(chosen, patches)
    else:
        tile_region(chosen, patches)
    return len(chosen.ops)


@dataclass(frozen=True)
class DnnTilePass(ModulePass):
    """Run the region of row-local ops at the start of each function patch
    by patch (see the module docstring); tensor form only."""

    name = "dnn-tile"

    region: str | int = "auto"
    """auto (the region that ends at the smallest output), or the number of
    ops N: the first N ops from the graph input, left untiled when they do
    not form a region (a value other than the last op's is used after them,
    or the row-local ops end sooner)."""

    patches: int = 4
    """Patches along the region output's rows (at most one per row)."""

    halo: str = "recompute"
    """recompute (each patch computes its halo rows again) or cache (each
    row is computed once; the rows the next patch reads again stay in a
    small cache)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "tensors")
        if self.region != "auto" and not str(self.region).isdigit():
            raise PassFailedException(f"dnn-tile: region must be auto or a number of ops, got '{self.region}'")
        if self.halo not in ("recompute", "cache"):
            raise PassFailedException(f"dnn-tile: halo must be recompute or cache, got '{self.halo}'")
        if self.patches < 1:
            raise PassFailedException(f"dnn-tile: patches must be at least 1, got {self.patches}")
        for function in op.walk():
            if isinstance(function, func.FuncOp) and function.body.blocks:
                if any(isinstance(o, d.DnnComputeOp) and o.on_buffers for o in function.body.block.ops):
                    raise PassFailedException("dnn-tile: run it on tensor form, before dnn-insert-memory-ops")
                tile_function(function, self.region, self.patches, self.halo)

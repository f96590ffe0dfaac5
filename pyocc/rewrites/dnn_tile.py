"""`dnn-tile{region=auto patches=4}`: patch-based execution of a CNN's stem.

The peak of a CNN's activation memory usually sits in its first layers,
at full resolution. MCUNetV2-style patch-based inference runs a region of
row-local ops (dnn.conv, the pools, elementwise ops: the `RowLocal` trait)
patch by patch along the rows of the region's output; each patch slices the
rows of the region input it needs (its receptive field: the halo rows are
read twice and recomputed), runs the chain on the small tensors, and writes
its rows into the region output, which is the only tensor of the region that
ever exists whole:

    y = opk(...op1(x))                         (a single-use chain, N = 1, NCHW)
  =>
    x0 = dnn.slice(x) rows [0, h0)             first patch: the top pad kept
    y0 = opk(...op1(x0)) pads bottom 0         the halo rows replace the pad
    e  = dnn.empty                             the region output, unwritten
    y  = dnn.insert_slice(e, y0) offset 0
    x1 = dnn.slice(x) rows [l1, h1)            ... last patch: the bottom pad kept
    y  = dnn.insert_slice(y, y1) offset r1

Runs on tensor form, before dnn-insert-memory-ops; dnn-coalesce then writes
every insert_slice over its `dest`, so the region output is one buffer. The
region starts at the function's first argument (the graph input).
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
        start = first * self.stride - self.pad_top
        stop = (end - 1) * self.stride - self.pad_top + self.extent
        lo, hi = max(0, start), min(self.rows_in, stop)
        return lo, hi, lo - start, stop - hi


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


def row_window(op: Operation, value: SSAValue) -> RowWindow | None:
    """The row window of `op` applied to its data input `value`, or None when
    dnn-tile cannot run `op` on a band of `value`'s rows."""
    trait = op.get_trait(d.RowLocal)
    if trait is None or not isinstance(op, d.DnnComputeOp) or not op.results or len(op.results) != 1:
        return None
    rows_in, rows_out = _rows_of(value), _rows_of(op.results[0])
    if rows_in is None or rows_out is None:
        return None
    others = [v for v in op.read_values() if v is not value]
    if any(not _is_weight(v) for v in others):
        return None  # every other input must be a constant (a residual, a second tensor: no)
    if not trait.window:
        if value.type.get_shape() != op.results[0].type.get_shape():  # type: ignore[attr-defined]
            return None  # a broadcast data input
        axis = op.properties.get("axis")
        if isinstance(axis, IntegerAttr) and axis.value.data != 1:
            return None  # a per-channel op (channel_affine) must work along the channels
        for v in others:  # a constant that varies along the rows does not fit a band
            shape = v.type.get_shape()  # type: ignore[attr-defined]
            if len(shape) >= 2 and shape[-2] != 1:
                return None
        return RowWindow(1, 1, 0, 0, rows_in, rows_out)
    if getattr(op, "x", None) is not value:
        return None
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


def region_chain(function: func.FuncOp) -> list[tuple[Operation, SSAValue, RowWindow]]:
    """The longest chain of row-local ops from the function's first argument:
    (op, its data input, its window) each; every value inside the chain has
    one use (the last op's result, the region output, may have many)."""
    block = function.body.block
    if not block.args:
        return []
    value: SSAValue = block.args[0]
    chain: list[tuple[Operation, SSAValue, RowWindow]] = []
    while True:
        users = [use.operation for use in value.uses]
        if chain and len(users) != 1:
            break
        op = next((u for u in sorted(set(users), key=_position) if row_window(u, value) is not None), None)
        if op is None:
            break
        chain.append((op, value, row_window(op, value)))  # type: ignore[arg-type]
        value = op.results[0]
    return chain


def _position(op: Operation) -> int:
    block = op.parent_block()
    return block.get_operation_index(op) if block is not None else 0


def auto_region(chain: list[tuple[Operation, SSAValue, RowWindow]]) -> int:
    """region=auto: the prefix of the chain that ends at its smallest output
    (the earliest one on a tie), where patch-based execution saves most."""
    sizes = [d.type_bytes(op.results[0].type) for op, _, _ in chain]
    return sizes.index(min(sizes)) + 1 if sizes else 0


def patch_bounds(rows: int, patches: int) -> list[tuple[int, int]]:
    """Output rows [first, end) of each of `patches` near-equal patches."""
    patches = min(patches, rows)
    return [(i * rows // patches, (i + 1) * rows // patches) for i in range(patches)]


def _with_rows(t: TensorType, rows: int) -> TensorType:
    shape = list(t.get_shape())
    shape[ROWS] = rows
    return TensorType(t.get_element_type(), shape)


def tile_region(chain: list[tuple[Operation, SSAValue, RowWindow]], patches: int) -> None:
    """Rewrite a region chain (from region_chain) into `patches` patches."""
    last = chain[-1][0]
    output = last.results[0]
    rewriter = Rewriter()
    where = InsertPoint.before(last)
    region_input = chain[0][1]
    dest: SSAValue | None = None
    for index, (first, end) in enumerate(patch_bounds(output.type.get_shape()[ROWS], patches)):  # type: ignore[attr-defined]
        # rows each op's output must have, from the region output back to its input
        bands: list[tuple[int, int]] = [(first, end)]
        pads: list[tuple[int, int]] = []
        for _, _, window in reversed(chain):
            lo, hi, top, bottom = window.needs(*bands[0])
            bands.insert(0, (lo, hi))
            pads.insert(0, (top, bottom))
        lo, hi = bands[0]
        x = d.SliceOp.build({"x": region_input}, [_with_rows(region_input.type, hi - lo)], {  # type: ignore[arg-type]
            "starts": DenseArrayBase.from_list(i64, [lo]), "ends": DenseArrayBase.from_list(i64, [hi]),
            "axes": DenseArrayBase.from_list(i64, [ROWS])})
        rewriter.insert_op(x, where)
        value: SSAValue = x.results[0]
        for (op, data, window), (top, bottom), (o_lo, o_hi) in zip(chain, pads, bands[1:], strict=True):
            properties = dict(op.properties)
            if window.extent > 1 or window.pad_top or window.pad_bottom:
                row_pads = _ints(op, "pads", [0, 0, 0, 0])
                properties["pads"] = DenseArrayBase.from_list(i64, [top, row_pads[1], bottom, row_pads[3]])
            operands = [value if v is data else v for v in op.operands]
            patch = type(op).create(operands=operands, result_types=[_with_rows(op.results[0].type, o_hi - o_lo)],  # type: ignore[arg-type]
                                    properties=properties, attributes=dict(op.attributes))
            rewriter.insert_op(patch, where)
            value = patch.results[0]
            if op.results[0].name_hint:
                value.name_hint = f"{op.results[0].name_hint}_p{index}"
        if dest is None:
            empty = d.EmptyOp.build({}, [output.type])
            rewriter.insert_op(empty, where)
            dest = empty.results[0]
        insert = d.InsertSliceOp.build({"dest": dest, "x": value}, [output.type], {
            "axis": IntegerAttr(ROWS, i64), "offset": IntegerAttr(first, i64)})
        rewriter.insert_op(insert, where)
        dest = insert.results[0]
    assert dest is not None
    dest.name_hint = output.name_hint
    output.replace_all_uses_with(dest)
    for op, _, _ in reversed(chain):
        rewriter.erase_op(op)


def tile_function(function: func.FuncOp, region: str | int, patches: int) -> int:
    """Tile the region of one function; returns the ops it covers (0: none)."""
    chain = region_chain(function)
    count = auto_region(chain) if region == "auto" else int(region)
    if count < 1 or count > len(chain):
        return 0
    chain = chain[:count]
    if patches < 2 or chain[-1][0].results[0].type.get_shape()[ROWS] < 2:  # type: ignore[attr-defined]
        return 0
    tile_region(chain, patches)
    return count


@dataclass(frozen=True)
class DnnTilePass(ModulePass):
    """Run the region of row-local ops at the start of each function patch
    by patch (see the module docstring); tensor form only."""

    name = "dnn-tile"

    region: str | int = "auto"
    """auto (the prefix of the chain that ends at its smallest output), or
    the number of ops N: the first N ops of the chain from the graph input,
    left untiled if the chain is shorter."""

    patches: int = 4
    """Patches along the region output's rows (at most one per row)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "tensors")
        if self.region != "auto" and not str(self.region).isdigit():
            raise PassFailedException(f"dnn-tile: region must be auto or a number of ops, got '{self.region}'")
        if self.patches < 1:
            raise PassFailedException(f"dnn-tile: patches must be at least 1, got {self.patches}")
        for function in op.walk():
            if isinstance(function, func.FuncOp) and function.body.blocks:
                tile_function(function, self.region, self.patches)

"""Native data-movement kernels: transpose, concat, split, slice, gather,
expand, tile, pad and resize (any dtype; resize's linear and cubic modes
float32).

Most are one strided loop nest (KernelBuilder.strided_loop_nest) whose
strides say where each output element comes from. pad and resize map every
output index, per axis, through a constant table computed at compile time
by the numpy kernel's own index rules (np.pad on index ranges; resize's tap
and weight functions), so the native kernel reads exactly the elements and
weights the numpy kernel does, in the same order. None of them may write
over an input (as their numpy kernels).
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir
import numpy as np

from pyocc.lowering.llvm_math import broadcast_strides, row_major_strides
from pyocc.lowering.native.loops import F32, FLOATS, ITEMSIZE, KernelBuilder, Operand, all_dtypes_in
from pyocc.lowering.native.dense_ir import NotNative
from pyocc.lowering.native.registry import native_kernel
from pyocc.lowering.native.sizes import Size
from pyocc.runtime.kernels.resize import _cubic_taps, _linear_taps, _nearest_taps, _original_coordinates
from pyocc.runtime.kernels.tensor import onnx_axis_slice

#: dtypes data movement handles: every one with an element type
_ANY = frozenset(ITEMSIZE)


def _moves(site: dict[str, Any]) -> bool:
    """A data-movement site whose operands all have element types."""
    return all_dtypes_in(site, _ANY)


def _copy_strided(k: KernelBuilder, source: Operand, source_strides: list[int], target: Operand,
                  target_strides: list[int], shape: tuple[int, ...] | list[int], source_base: int = 0,
                  target_base: int = 0, parallel: bool = False) -> None:
    """target[walk] = source[walk] over `shape`, each with its strides and
    base; `parallel`: the copy is the kernel's only loop, so its outer loop
    may run on threads (each element is written once)."""
    k.strided_loop_nest(shape, [source_strides, target_strides],
                        lambda at: k.store(k.load(source, at[0]), target, at[1]), [source_base, target_base],
                        parallel=parallel)


@native_kernel("transpose", supports=_moves, run_time_shapes=True)
def emit_transpose(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Transpose (host_kernels.transpose); no perm reverses the axes."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    perm = k.kwargs.get("perm") or list(range(len(x.shape)))[::-1]
    # on threads, each thread writes its own range of the output's outer dimension (a channel
    # shuffle's: the channels the next op reads on that thread)
    _copy_strided(k, x, [x.strides[p] for p in perm], out, out.strides, out.shape, parallel=True)
    k.finish()


@native_kernel("concat", supports=_moves, run_time_shapes=True)
def emit_concat(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Concat: each input into its band of out along axis (host_kernels.concat)."""
    k = KernelBuilder(module, symbol, site)
    parts, out = k.inputs[0], k.outputs[0]
    assert isinstance(parts, list)
    axis = k.kwargs["axis"] % len(out.shape)
    offset = 0
    for part in parts:
        _copy_strided(k, part, part.strides, out, out.strides, part.shape, 0, offset * out.strides[axis])
        offset += part.shape[axis]
    k.finish()


@native_kernel("split", supports=_moves, run_time_shapes=True)
def emit_split(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Split: out k is the k-th band of x along axis (host_kernels.split)."""
    k = KernelBuilder(module, symbol, site)
    x = k.input(0)
    axis = k.kwargs.get("axis", 0) % len(x.shape)
    offset = 0
    for part in k.outputs:
        _copy_strided(k, x, x.strides, part, part.strides, part.shape, offset * x.strides[axis], 0)
        offset += part.shape[axis]
    k.finish()


def _slice_starts_steps(site: dict[str, Any]) -> tuple[list[int], list[int]]:
    """Per axis of x: the first element and the step the slice takes."""
    shape = site["inputs"][0]["shape"]
    kw = site["kwargs"]
    starts_kw = list(kw["starts"])
    axes = list(kw.get("axes") or range(len(starts_kw)))
    steps_kw = list(kw.get("steps") or [1] * len(starts_kw))
    starts, steps = [0] * len(shape), [1] * len(shape)
    for start, end, axis, step in zip(starts_kw, kw["ends"], axes, steps_kw, strict=True):
        axis %= len(shape)
        if isinstance(end, Size) or isinstance(shape[axis], Size):
            # a run-time end or dimension (a symbolic program's Slice up to the length): a forward
            # slice from a static start inside the dimension; where it ends is the output's shape
            if isinstance(start, Size) or isinstance(step, Size) or step != 1 or not 0 <= start or \
                    not start < shape[axis]:
                raise NotNative(f"slice: start {start!r} step {step!r} on a run-time dimension")
            starts[axis] = start
            continue
        first, _, stride = onnx_axis_slice(int(start), int(end), int(step), shape[axis]).indices(shape[axis])
        starts[axis], steps[axis] = first, stride
    return starts, steps


@native_kernel("slice", supports=_moves, run_time_shapes=True)
def emit_slice(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Slice with static starts/ends/axes/steps (host_kernels.slice)."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    starts, steps = _slice_starts_steps(site)
    base = sum(s * stride for s, stride in zip(starts, x.strides, strict=True))
    _copy_strided(k, x, [step * stride for step, stride in zip(steps, x.strides, strict=True)], out, out.strides,
                  out.shape, base, 0)
    k.finish()


def _supports_gather(site: dict[str, Any]) -> bool:
    return _moves(site) and site["inputs"][1]["dtype"] in ("int32", "int64")


@native_kernel("gather", supports=_supports_gather, run_time_shapes=True)
def emit_gather(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Gather along axis; negative indices count from the end
    (host_kernels.gather). An index out of range reads the nearest valid
    element instead of failing (numpy raises)."""
    k = KernelBuilder(module, symbol, site)
    x, indices, out = k.input(0), k.input(1), k.outputs[0]
    b = k.b
    axis = k.kwargs.get("axis", 0) % len(x.shape)
    outer, dim, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:])
    count = indices.size

    def per_outer(o: ir.Value) -> None:
        def per_index(p: ir.Value) -> None:
            chosen = k.load(indices, p)
            if indices.dtype != "int64":
                chosen = b.sext(chosen, ir.IntType(64))
            wrapped = b.select(b.icmp_signed("<", chosen, k.i64(0)), b.add(chosen, k.i64(dim)), chosen)
            row, _ = k.clamp_index(wrapped, dim)
            source = b.mul(b.add(b.mul(o, k.i64(dim)), row), k.i64(inner))
            target = b.mul(b.add(b.mul(o, k.i64(count)), p), k.i64(inner))
            k.loop(inner, lambda i: k.store(k.load(x, b.add(source, i)), out, b.add(target, i)))

        k.loop(count, per_index)

    k.loop(outer, per_outer)
    k.finish()


@native_kernel("expand", supports=_moves, run_time_shapes=True)
def emit_expand(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Expand: x broadcast to out's shape (host_kernels.expand)."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    _copy_strided(k, x, list(broadcast_strides(x.shape, out.shape)), out, out.strides, out.shape)
    k.finish()


@native_kernel("tile", supports=_moves, run_time_shapes=True)
def emit_tile(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Tile: out viewed as (r0, d0, r1, d1, ...) is x broadcast along
    the r's (host_kernels.tile)."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    repeats = [int(r) for r in k.kwargs["repeats"]]
    interleaved = [n for pair in zip(repeats, x.shape, strict=True) for n in pair]
    x_strides = [s for stride in x.strides for s in (0, stride)]
    _copy_strided(k, x, x_strides, out, row_major_strides(interleaved), interleaved)
    k.finish()


# ---------------------------------------------------------------------------
# table-driven gathers: pad and resize
# ---------------------------------------------------------------------------


def _pad_tables(site: dict[str, Any]) -> list[list[int]] | None:
    """Per axis, the x index each out index copies (-1: the constant), from
    np.pad on index ranges; None when the numpy kernel would fail."""
    shape = site["inputs"][0]["shape"]
    kw = site["kwargs"]
    mode = kw.get("mode", "constant")
    pads = [int(p) for p in kw["pads"]]
    rank = len(shape)
    tables = []
    for axis in range(rank):
        begin, end = pads[axis], pads[rank + axis]
        first, last = max(-begin, 0), shape[axis] - max(-end, 0)
        if last <= first:
            return None
        indices = np.arange(first, last)
        widths = (max(begin, 0), max(end, 0))
        if mode == "constant":
            table = np.pad(indices, widths, constant_values=-1)
        elif mode in ("reflect", "edge", "wrap"):
            if mode == "reflect" and len(indices) == 1 and any(widths):
                return None
            table = np.pad(indices, widths, mode=mode)
        else:
            return None
        tables.append([int(v) for v in table])
    return tables


def _supports_pad(site: dict[str, Any]) -> bool:
    return _moves(site) and _pad_tables(site) is not None


def _gather_tables(k: KernelBuilder, x: Operand, out: Operand, tables: list[list[int]],
                   fill: ir.Value | None) -> None:
    """out[o0, o1, ...] = x[t0[o0], t1[o1], ...] (fill where an entry is -1)."""
    b = k.b
    globals_ = [k.constant_table(table, f"axis{axis}") for axis, table in enumerate(tables)]

    def element(indices: list[ir.Value]) -> None:
        sources = [k.load_table(table, i) for table, i in zip(globals_, indices, strict=True)]
        safe = [b.select(b.icmp_signed("<", s, k.i64(0)), k.i64(0), s) for s in sources] if fill is not None \
            else sources
        value = k.load(x, k.offset(safe, x.strides))
        if fill is not None:
            missing = None
            for s in sources:
                negative = b.icmp_signed("<", s, k.i64(0))
                missing = negative if missing is None else b.or_(missing, negative)
            assert missing is not None
            value = b.select(missing, fill, value)
        k.store(value, out, k.offset(indices, out.strides))

    k.loop_nest(list(out.shape), element)


@native_kernel("pad", supports=_supports_pad)
def emit_pad(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Pad, modes constant / reflect / edge / wrap, negative pads crop
    (host_kernels.pad)."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    tables = _pad_tables(site)
    assert tables is not None
    constant = k.kwargs.get("mode", "constant") == "constant"
    fill = k.constant(np.asarray(k.kwargs.get("value", 0.0)).astype(x.dtype).item(), x.dtype) if constant else None
    _gather_tables(k, x, out, tables, fill)
    k.finish()


def _resize_axes(site: dict[str, Any]) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray | None]] | None:
    """Per resized axis: (axis, tap indices [out, taps], weights, outside
    mask or None), from the numpy kernel's own tap functions; None if the
    numpy kernel would reject the site."""
    kw = site["kwargs"]
    shape, out_shape = site["inputs"][0]["shape"], site["outputs"][0]["shape"]
    rank = len(shape)
    mode = kw.get("mode", "nearest")
    ctm = kw.get("coordinate_transformation_mode", "half_pixel")
    scales = kw.get("scales")
    roi = list(kw.get("roi") or [0.0] * rank + [1.0] * rank)
    axes = []
    try:
        for axis in range(rank):
            in_size, out_size = shape[axis], out_shape[axis]
            scale = np.float32(scales[axis]) if scales else np.float32(out_size) / np.float32(in_size)
            if in_size == out_size and scale == 1 and ctm != "tf_crop_and_resize":
                continue
            coordinates = _original_coordinates(out_size, in_size, scale, ctm, roi[axis], roi[rank + axis])
            if mode == "nearest":
                index, weights = _nearest_taps(coordinates, in_size, kw.get("nearest_mode", "round_prefer_floor"))
            elif mode == "linear":
                index, weights = _linear_taps(coordinates, in_size)
            elif mode == "cubic":
                index, weights = _cubic_taps(coordinates, in_size, kw.get("cubic_coeff_a", -0.75),
                                             kw.get("exclude_outside", 0))
            else:
                return None
            outside = ((coordinates < 0) | (coordinates > in_size - 1)) if ctm == "tf_crop_and_resize" else None
            axes.append((axis, index, weights.astype(np.float32), outside))
    except (ValueError, ZeroDivisionError, KeyError):
        return None
    return axes


def _supports_resize(site: dict[str, Any]) -> bool:
    if not _moves(site) or site["inputs"][0]["dtype"] != site["outputs"][0]["dtype"]:
        return False
    if site["kwargs"].get("mode", "nearest") != "nearest" and site["inputs"][0]["dtype"] != "float32":
        return False
    # resize's roi / scales / sizes arrive as keyword arguments: a site with
    # more than x as a tensor input is not one the numpy kernel takes either
    return len(site["inputs"]) == 1 and _resize_axes(site) is not None


@native_kernel("resize", supports=_supports_resize)
def emit_resize(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Resize (host_kernels.resize): per resized axis, the taps and
    weights of the numpy kernel as constant tables, combined axis after
    axis in its order (first axis innermost); nearest is a pure gather."""
    k = KernelBuilder(module, symbol, site)
    x, out = k.input(0), k.outputs[0]
    b = k.b
    axes = _resize_axes(site)
    assert axes is not None
    nearest = k.kwargs.get("mode", "nearest") == "nearest"
    extrapolation = ir.Constant(F32, float(k.kwargs.get("extrapolation_value", 0.0))) \
        if x.dtype in FLOATS else k.constant(0, x.dtype)
    tables = {}
    for axis, index, weights, outside in axes:
        taps = index.shape[1]
        tables[axis] = (taps, k.constant_table(index.reshape(-1).tolist(), f"index{axis}"),
                        _float_table(k, weights.reshape(-1).tolist(), f"weight{axis}"),
                        None if outside is None else k.constant_table(outside.astype(np.int64).tolist(),
                                                                      f"outside{axis}"))
    resized = [axis for axis, *_ in axes]

    def element(indices: list[ir.Value]) -> None:
        def source_index(axis: int, tap: int) -> ir.Value:
            taps, index_table, _, _ = tables[axis]
            return k.load_table(index_table, b.add(b.mul(indices[axis], k.i64(taps)), k.i64(tap)))

        def combine(position: int, fixed: dict[int, int]) -> ir.Value:
            # numpy resizes the axes in order: the first resized axis's taps
            # combine innermost
            if position < 0:
                coordinates = [source_index(a, fixed[a]) if a in fixed else indices[a] for a in range(len(x.shape))]
                return k.load(x, k.offset(coordinates, x.strides))
            axis = resized[position]
            taps, _, weight_table, _ = tables[axis]
            acc = None
            for tap in range(taps):
                value = combine(position - 1, {**fixed, axis: tap})
                if not nearest:
                    at = b.add(b.mul(indices[axis], k.i64(taps)), k.i64(tap))
                    weight = b.load(b.gep(weight_table, [k.i64(0), at], inbounds=True,
                                          source_etype=weight_table.value_type), typ=F32)
                    value = b.fmul(value, weight)
                acc = value if acc is None else b.fadd(acc, value)
            assert acc is not None
            return acc

        value = combine(len(resized) - 1, {})
        outside = None
        for axis in resized:
            mask = tables[axis][3]
            if mask is not None:
                flag = b.icmp_signed("!=", k.load_table(mask, indices[axis]), k.i64(0))
                outside = flag if outside is None else b.or_(outside, flag)
        if outside is not None:
            value = b.select(outside, extrapolation, value)
        k.store(value, out, k.offset(indices, out.strides))

    k.loop_nest(list(out.shape), element)
    k.finish()


def _float_table(k: KernelBuilder, values: list[float], name: str) -> ir.GlobalVariable:
    """An internal constant float32 array (resize's weights)."""
    array = ir.ArrayType(F32, len(values))
    table = ir.GlobalVariable(k.module, array, k.module.get_unique_name(f"{k.function.name}.{name}"))
    table.linkage = "internal"
    table.global_constant = True
    table.initializer = ir.Constant(array, [float(v) for v in values])
    return table


def _supports_gather_elements(site: dict[str, Any]) -> bool:
    x, indices = site["inputs"]
    return _moves(site) and indices["dtype"] in ("int32", "int64") and len(x["shape"]) == len(indices["shape"])


@native_kernel("gather_elements", supports=_supports_gather_elements, run_time_shapes=True)
def emit_gather_elements(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX GatherElements (host_kernels.gather_elements): out[i] = x[i with
    its `axis` coordinate replaced by indices[i]], negative indices wrapped
    (out of range: the nearest valid element, where numpy raises)."""
    k = KernelBuilder(module, symbol, site)
    x, indices, out = k.input(0), k.input(1), k.outputs[0]
    b = k.b
    axis = k.kwargs.get("axis", 0) % len(x.shape)
    dim = x.shape[axis]

    def element(coordinates: list[ir.Value]) -> None:
        at = k.offset(coordinates, out.strides)
        chosen = k.load(indices, k.offset(coordinates, indices.strides))
        if indices.dtype != "int64":
            chosen = b.sext(chosen, ir.IntType(64))
        wrapped = b.select(b.icmp_signed("<", chosen, k.i64(0)), b.add(chosen, k.i64(dim)), chosen)
        row, _ = k.clamp_index(wrapped, dim)
        source = [row if a == axis else c for a, c in enumerate(coordinates)]
        k.store(k.load(x, k.offset(source, x.strides)), out, at)

    k.loop_nest(list(out.shape), element)
    k.finish()


def _supports_gather_nd(site: dict[str, Any]) -> bool:
    return _moves(site) and site["inputs"][1]["dtype"] in ("int32", "int64")


@native_kernel("gather_nd", supports=_supports_gather_nd, run_time_shapes=True)
def emit_gather_nd(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX GatherND (host_kernels.gather_nd): each row of `indices` (its
    last dimension, depth) addresses a block of x within its batch (the
    first `batch_dims` dimensions); negative indices wrapped (out of range:
    the nearest valid element, where numpy raises)."""
    k = KernelBuilder(module, symbol, site)
    x, indices, out = k.input(0), k.input(1), k.outputs[0]
    b = k.b
    batch_dims = int(k.kwargs.get("batch_dims", 0))
    depth = indices.shape[-1]
    if isinstance(depth, Size):
        raise NotNative(f"gather_nd: a run-time index depth {depth!r}")
    batch = math.prod(x.shape[:batch_dims])
    addressed = x.shape[batch_dims:batch_dims + depth]
    strides = row_major_strides(x.shape[batch_dims:])[:depth]
    block = math.prod(x.shape[batch_dims + depth:])
    per_batch = math.prod(x.shape[batch_dims:])
    rows = math.prod(indices.shape[batch_dims:-1])

    def per_batch_row(n: ir.Value) -> None:
        def per_row(r: ir.Value) -> None:
            row = b.add(b.mul(n, k.i64(rows)), r)
            source = b.mul(n, k.i64(per_batch))
            for j, (dim, stride) in enumerate(zip(addressed, strides, strict=True)):
                chosen = k.load(indices, b.add(b.mul(row, k.i64(depth)), k.i64(j)))
                if indices.dtype != "int64":
                    chosen = b.sext(chosen, ir.IntType(64))
                wrapped = b.select(b.icmp_signed("<", chosen, k.i64(0)), b.add(chosen, k.i64(dim)), chosen)
                clamped, _ = k.clamp_index(wrapped, dim)
                source = b.add(source, b.mul(clamped, k.i64(stride)))
            target = b.mul(row, k.i64(block))
            k.loop(block, lambda i: k.store(k.load(x, b.add(source, i)), out, b.add(target, i)))

        k.loop(rows, per_row)

    k.loop(batch, per_batch_row)
    k.finish()


def _supports_fill(site: dict[str, Any]) -> bool:
    return all_dtypes_in(site, _ANY) and not site["inputs"]


@native_kernel("constant_of_shape", supports=_supports_fill)
def emit_constant_of_shape(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX ConstantOfShape: out filled with `value` (host_kernels.constant_of_shape)."""
    k = KernelBuilder(module, symbol, site)
    out = k.outputs[0]
    value = np.asarray(k.kwargs.get("value", 0.0)).astype(out.dtype).item()
    fill = k.constant(value, out.dtype)
    k.loop(out.size, lambda i: k.store(fill, out, i))
    k.finish()


def _supports_range(site: dict[str, Any]) -> bool:
    return _supports_fill(site) and site["outputs"][0]["dtype"] in ("float32", "float64", "int32", "int64")


@native_kernel("range", supports=_supports_range, run_time_shapes=True)
def emit_range(module: ir.Module, symbol: str, site: dict[str, Any]) -> None:
    """ONNX Range (host_kernels.range): start, then `value += delta` step by
    step in out's dtype, as onnxruntime (and numpy's cumsum) round it."""
    k = KernelBuilder(module, symbol, site)
    out = k.outputs[0]
    b = k.b
    dtype = out.dtype
    start = k.constant(np.asarray(k.kwargs["start"]).astype(dtype).item(), dtype)
    delta = k.constant(np.asarray(k.kwargs["delta"]).astype(dtype).item(), dtype)
    add = b.fadd if dtype in FLOATS else b.add

    def step(i: ir.Value, value: ir.Value) -> ir.Value:
        k.store(value, out, i)
        return add(value, delta)

    k.reduce(out.size, start, step)
    k.finish()

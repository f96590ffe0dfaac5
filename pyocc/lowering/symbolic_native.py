"""Generated native code for a symbolic program (``--dim sequence=512``):
one LLVM module that runs every value of the symbols.

Design. The symbolic program is the buffer-form program's run steps
(pyocc.symbolic.program_steps) with every integer that varies a
polynomial in the symbols (fitted over the probes), plus the pool plan
whose offsets are expressions (pyocc.planning.symbolic.SymbolicPlan).
From them this module writes one llvmlite module with

    int32_t NAME_run(void *const *inputs, void *const *outputs,
                     const void *weights, int64_t *state,
                     const int64_t *symbols);

`symbols` holds the symbols' values (sorted by name), which the runtime
reads off the input shapes; a value out of its range returns 2 (nothing
is run). The module also has the shared library's functions (C ABI
version 2, static models' version 1 plus the symbols; `pyocc compile
--dim ... -o m.so`, examples/c/run_model.c --dim):

    void        NAME_init(void *const *unused);    // nothing to set up
    void        NAME_destroy(void);
    void        NAME_tensor_bytes(const int64_t *symbols, int64_t *bytes);
                // the inputs' then the outputs' byte sizes at those values
    const char *NAME_meta(void);       // JSON: abi 2, symbols with ranges,
                                       // inputs/outputs (dims as formulas), weights
    const char *pyocc_functions(void); // ["NAME"]

Once per run the run function evaluates, as LLVM
integer arithmetic on the symbols' values, every planned buffer's size, its
offset (in the plan's placement order: the aligned maximum of the ends of
the buffers below it) and the pool size: the plan's pieces are constant
tables (their orders, below-sets, alignments) that one loop reads, from
the rows of the piece the cut symbol's value falls in;
allocates the pool (one
`pyocc_alloc`, pyocc.lowering.host_allocator, counted in `state` like the static models' allocations:
calls, frees, bytes now, peak); points every buffer, view and subview at
its offset; copies what the program copies; and calls one native kernel
per compute op with the op's buffer pointers (its planned scratch last,
if it has one) and then the symbols' values
(as integers cast to pointers). The run function is `noinline optnone`
(LLVM does not optimise it: it calls, and its arithmetic runs once per run);
the kernels are optimised at O3. The kernels take their shapes at run time:
each site's dimensions are polynomials, which the emitters registered with
`run_time_shapes=True` see as `Size`s (pyocc.lowering.native.sizes) and the
kernel computes from the symbols' values it was passed; sites whose shapes
do not depend on the symbols call the ordinary static kernels. Sites alike
in kernel, dtypes, shapes (as polynomials) and arguments share one
function. No Python runs during a run.

What cannot be written this way raises `NotNativeProgram` with one line
saying why (a kernel without a native emitter or with one that needs a
static size, a kernel argument that depends on the symbols, a constant
whose leading block is not a prefix of its bytes); pyocc.api then runs the
program through the numpy kernels (pyocc.symbolic.SymbolicRun) and says so
in a warning. The weights are packed into one read-only pool by
`pack_weights` (64-byte aligned, each at its value for the largest
symbols; a run reads the leading rows it needs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import llvmlite.ir as ir
import numpy as np

from pyocc.lowering.host_allocator import host_allocator
from pyocc.lowering.native import native_kernel_for
from pyocc.lowering.native.dense_ir import NotNative
from pyocc.lowering.native.registry import site_slots
from pyocc.lowering.native.sizes import SizeContext, StaticSizeError
from pyocc.planning.symbolic import Piece, Poly, SymbolicPlan
from pyocc.runtime.bridge import aligned_bytes
from pyocc.runtime.ir_writer import IRWriter

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
#: the run function's signature (see the module docstring)
RUN_TYPE = ir.FunctionType(I32, [PTR, PTR, PTR, PTR, PTR])
#: the pool's and every weight's alignment
ALIGNMENT = 64

_MARK = re.compile(r"^@(\d+)@$")


class FittedSteps(Protocol):
    """The run steps' JSON text with its varying integers fitted
    (pyocc.symbolic.SymbolicProgram): ``pieces[0]``, ``numbers[0]``,
    ``pieces[1]``, ..., over the symbols' ``ranges``."""

    pieces: tuple[str, ...]
    numbers: tuple[Poly, ...]
    ranges: Mapping[str, tuple[int, int]]


class NotNativeProgram(Exception):
    """A symbolic program that generated code cannot run (the message says why)."""


@dataclass
class SymbolicNative:
    """A symbolic program's generated code: the LLVM IR text of one module,
    the name of its run function, the packed weights, and what the run
    passes in: the graph inputs and outputs in order (ONNX names)."""

    llvm_ir: str
    function: str
    weight_pool: np.ndarray
    input_names: list[str]
    output_names: list[str]
    symbols: list[str]
    native_sites: int
    kernels: int
    arguments: list[tuple[str, bool, list[int | Poly], str]]
    """The graph inputs and outputs in order: (ONNX name, is output, shape
    with Polys in the symbols, dtype)."""
    meta: dict[str, Any]
    """The library's JSON table (`NAME_meta`, see the module docstring)."""


def poly_steps(program: FittedSteps) -> list[list[Any]]:
    """The run steps (pyocc.symbolic.program_steps) with every varying
    integer a Poly; NotNativeProgram when one sits where no number may."""
    parts = [program.pieces[0]]
    for i, piece in enumerate(program.pieces[1:]):
        parts += [f'"@{i}@"', piece]
    try:
        steps = json.loads("".join(parts))
    except json.JSONDecodeError:
        raise NotNativeProgram("a size that depends on the symbols sits inside a name") from None
    return _leaves(steps, lambda value: program.numbers[int(match.group(1))]
                   if isinstance(value, str) and (match := _MARK.match(value)) else value)


def _leaves(value: Any, leaf: Any) -> Any:
    """`value` (JSON-like: lists, dicts, leaves) with every leaf mapped by `leaf`."""
    if isinstance(value, list):
        return [_leaves(v, leaf) for v in value]
    if isinstance(value, dict):
        return {k: _leaves(v, leaf) for k, v in value.items()}
    return leaf(value)


def _has_poly(value: Any) -> bool:
    """Whether `value` holds a Poly."""
    found: list[Poly] = []
    _leaves(value, lambda v: found.append(v) if isinstance(v, Poly) else None)
    return bool(found)


def _at(value: Any, values: Mapping[str, int]) -> Any:
    """`value` with every Poly evaluated at `values`."""
    return _leaves(value, lambda v: v.evaluate(values) if isinstance(v, Poly) else v)


def _text(value: Any) -> str:
    """A site's key text (Polys as their formulas)."""
    return json.dumps(value, sort_keys=True, default=str)


def pack_weights(weights: Sequence[np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """The weights packed into one 64-byte aligned byte array, each at a
    64-byte aligned offset: (the pool, the offsets)."""
    offsets, total = [], 0
    for weight in weights:
        offsets.append(total)
        total += -(-max(weight.nbytes, 1) // ALIGNMENT) * ALIGNMENT
    pool = aligned_bytes(max(total, ALIGNMENT))
    for weight, offset in zip(weights, offsets, strict=True):
        pool[offset:offset + weight.nbytes] = np.ascontiguousarray(weight).reshape(-1).view(np.uint8)
    return pool, offsets


def build_symbolic_native(name: str, program: FittedSteps, weights: Sequence[np.ndarray],
                          plan: SymbolicPlan) -> SymbolicNative:
    """The generated code of a symbolic program (`program`: the fitted run
    steps; `weights`: their values at the largest symbols; `plan`: the pool
    plan), see the module docstring. NotNativeProgram when it cannot be written."""
    ranges = dict(program.ranges)
    names = sorted(ranges)
    steps = poly_steps(program)
    symbol = re.sub(r"[^A-Za-z0-9_]", "_", name)
    module = ir.Module(name=symbol)
    types: dict[int, tuple[list[int | Poly], str]] = {}
    weight_of: dict[int, int] = {}
    sites: list[tuple[list[Any], dict[str, Any]]] = []
    for step in steps:
        kind = step[0]
        if kind == "arg":
            types[step[1]] = (step[4], step[5])
        elif kind == "weight":
            _, value, index, shape = step
            weight = weights[index]
            _check_prefix(weight, shape)
            types[value] = (shape, str(weight.dtype))
            weight_of[value] = index
        elif kind in ("malloc", "view"):
            types[step[1]] = (step[3], step[4])
        elif kind == "subview":
            types[step[1]] = (step[4], step[5])
        elif kind == "call":
            _, kernel, inputs, outs, _keyword, kwargs, workspace = step

            def spec(v: int) -> dict[str, Any]:
                shape, dtype = types[v]
                return {"shape": list(shape), "dtype": dtype}

            site = {"kernel": kernel,
                    "inputs": [None if v is None else [spec(x) for x in v] if isinstance(v, list) else spec(v)
                               for v in inputs],
                    "outputs": [spec(v) for v in outs], "kwargs": kwargs,
                    "workspace": None if workspace is None else spec(workspace)}
            sites.append((step, site))
    # one function per distinct site
    functions: dict[str, ir.Function] = {}
    site_function: list[ir.Function] = []
    for step, site in sites:
        key = _text(site)
        if key not in functions:
            functions[key] = emit_site(module, f"{symbol}_site_{len(functions)}", site, ranges)
        site_function.append(functions[key])
    _emit_run(module, f"{symbol}_run", steps, site_function, weight_of, weights, plan, names, ranges)
    pool, _ = pack_weights(weights)
    args = [s for s in steps if s[0] == "arg"]
    ordered = [s for s in args if not s[3]] + [s for s in args if s[3]]  # inputs, then outputs
    meta = library_meta(symbol, ranges, ordered, int(pool.nbytes))
    _emit_library_functions(module, symbol, meta, [(s[4], s[5]) for s in ordered], ranges)
    try:
        text = str(module)
    except StaticSizeError as e:  # a run-time Size written as a constant by an emitter
        raise NotNativeProgram(f"a kernel needs a static size: {e}") from None
    return SymbolicNative(text, f"{symbol}_run", pool, [s[2] for s in args if not s[3]],
                          [s[2] for s in args if s[3]], names, len(sites), len(functions),
                          [(s[2], s[3], s[4], s[5]) for s in args], meta)


#: the C ABI version of a symbolic model's library (static models': 1)
SYMBOLIC_ABI_VERSION = 2


def library_meta(symbol: str, ranges: Mapping[str, tuple[int, int]], arguments: Sequence[list[Any]],
                 weight_bytes: int) -> dict[str, Any]:
    """The JSON table of a symbolic model's library: its ABI version, the
    symbols (sorted by name, the order of `NAME_run`'s `symbols`) with their
    ranges, the inputs then the outputs (`arguments`: the run steps' "arg"
    entries in that order; a dimension that varies as its formula) and the
    weight pool's size."""
    def tensor(step: list[Any]) -> dict[str, Any]:
        return {"name": step[2], "shape": [str(d) if isinstance(d, Poly) else int(d) for d in step[4]],
                "dtype": step[5]}

    return {"abi": SYMBOLIC_ABI_VERSION, "name": symbol, "target": "host",
            "symbols": [{"name": n, "min": ranges[n][0], "max": ranges[n][1]} for n in sorted(ranges)],
            "inputs": [tensor(s) for s in arguments if not s[3]], "outputs": [tensor(s) for s in arguments if s[3]],
            "numpy_sites": 0, "weights": {"bytes": weight_bytes, "alignment": ALIGNMENT}}


def _string_getter(module: ir.Module, function: str, text: str) -> None:
    """`const char *function(void)`: a NUL-terminated constant `text`."""
    data = bytearray(text.encode("utf-8") + b"\0")
    variable = ir.GlobalVariable(module, ir.ArrayType(I8, len(data)), f"{function}.text")
    variable.global_constant = True
    variable.linkage = "internal"
    variable.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
    getter = ir.Function(module, ir.FunctionType(PTR, []), function)
    ir.IRBuilder(getter.append_basic_block("entry")).ret(variable.bitcast(PTR))


def _emit_library_functions(module: ir.Module, symbol: str, meta: Mapping[str, Any],
                            arguments: Sequence[tuple[list[int | Poly], str]],
                            ranges: Mapping[str, tuple[int, int]]) -> None:
    """`NAME_init`, `NAME_destroy`, `NAME_tensor_bytes`, `NAME_meta` and
    `pyocc_functions` (see the module docstring); `arguments`: the inputs'
    then the outputs' (shape, dtype)."""
    init = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), f"{symbol}_init")
    ir.IRBuilder(init.append_basic_block("entry")).ret_void()
    destroy = ir.Function(module, ir.FunctionType(ir.VoidType(), []), f"{symbol}_destroy")
    ir.IRBuilder(destroy.append_basic_block("entry")).ret_void()
    tensor_bytes = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR]), f"{symbol}_tensor_bytes")
    entry = tensor_bytes.append_basic_block("entry")
    b = ir.IRBuilder(tensor_bytes.append_basic_block("body"))
    ir.IRBuilder(entry).branch(b.block)  # the entry block holds the symbols' values (SizeContext)
    sizes = SizeContext(module, f"{symbol}_tensor_bytes", 0, sorted(ranges), ranges, argument=0)
    for index, (shape, dtype) in enumerate(arguments):
        nbytes = Poly.constant(np.dtype(dtype).itemsize)
        for d in shape:
            nbytes = nbytes * (d if isinstance(d, Poly) else Poly.constant(int(d)))
        b.store(sizes.value(nbytes),
                b.gep(tensor_bytes.args[1], [ir.Constant(I64, index)], inbounds=True, source_etype=I64))
    b.ret_void()
    _string_getter(module, f"{symbol}_meta", json.dumps(meta, separators=(",", ":")))
    _string_getter(module, "pyocc_functions", json.dumps([symbol]))


def _check_prefix(weight: np.ndarray, shape: list[int | Poly]) -> None:
    """A constant read at a symbolic shape must be the leading bytes of its
    value at the maximum: one dimension depends on the symbols, every
    dimension after it is whole and every one before it is 1 (a position
    table ``[1, S, 32]`` read from ``[1, 512, 32]``), or every element is
    the same (a splat: an ``[S, S]`` block of a filled ``[512, 512]``, which
    exporters write as ``Expand(value, [S, S])``, is any prefix of it)."""
    if not _has_poly(shape) or (weight.size and bool(np.all(weight == weight.reshape(-1)[0]))):
        return
    varying = [k for k, d in enumerate(shape) if _has_poly(d)]
    first = varying[0]
    if len(shape) != weight.ndim or len(varying) > 1 or any(
            d != full for d, full in zip(shape[first + 1:], weight.shape[first + 1:], strict=True)) or any(
            d != 1 for d in weight.shape[:first]):
        raise NotNativeProgram(f"a constant of shape {list(weight.shape)} is read in leading blocks that are not "
                               "its leading bytes (one dimension may depend on the symbols, after dimensions of 1)")


def emit_site(module: ir.Module, symbol: str, site: dict[str, Any],
              ranges: Mapping[str, tuple[int, int]]) -> ir.Function:
    """Define the kernel function `void symbol(i8 **buffers)` of one site
    (kernel, inputs, outputs, kwargs; dimensions ints or Polys in the
    symbols of `ranges`) in `module`: the buffer pointers, then the
    symbols' values (sorted by name) as integers cast to pointers. Its
    Polys are run-time Sizes to the emitter (a kernel registered with
    `run_time_shapes`); NotNativeProgram when no native kernel can write it."""
    names = sorted(ranges)
    at_maximum = _at(site, {n: high for n, (_, high) in ranges.items()})
    kernel = native_kernel_for(at_maximum)
    if kernel is None:
        raise NotNativeProgram(f"the {site['kernel']} kernel of {_shapes(at_maximum)} has no native kernel "
                               "that computes it")
    symbolic = _has_poly(site)
    if symbolic and not kernel.run_time_shapes:
        if _has_poly(site["kwargs"]):
            raise NotNativeProgram(f"the arguments of a {site['kernel']} kernel depend on the symbols "
                                   f"({_text(site['kwargs'])})")
        raise NotNativeProgram(f"the native {site['kernel']} kernel takes static shapes only")
    slots = site_slots(site)
    context = SizeContext(module, symbol, slots, names, ranges)

    sized = _leaves(site, lambda v: context.size(v) if isinstance(v, Poly) else v)
    emitted = {**sized, "run_time_symbols": slots} if symbolic else at_maximum
    try:
        kernel.emit(module, symbol, emitted)
    except (NotNative, StaticSizeError) as e:  # anything else from an emitter is a bug: it propagates
        raise NotNativeProgram(f"the native {site['kernel']} kernel cannot take the run-time shapes "
                               f"{_shapes(site)}: {e}") from None
    function = module.globals[symbol]
    assert isinstance(function, ir.Function)
    return function


def _shapes(site: dict[str, Any]) -> str:
    specs = [s for spec in site["inputs"] if spec is not None for s in (spec if isinstance(spec, list) else [spec])]
    return ", ".join("x".join(str(d) for d in s["shape"]) or "scalar" for s in [*specs, *site["outputs"]])


def _umax(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """The unsigned larger of two i64s."""
    return b.select(b.icmp_unsigned(">", x, y), x, y)


def _align_up(b: ir.IRBuilder, x: ir.Value, alignment: int | ir.Value) -> ir.Value:
    """`x` rounded up to a multiple of `alignment`, a number (x itself for
    1) or one computed at run time."""
    if isinstance(alignment, int):
        if alignment <= 1:
            return x
        step: ir.Value = ir.Constant(I64, alignment)
        bump: ir.Value = ir.Constant(I64, alignment - 1)
    else:
        step, bump = alignment, b.sub(alignment, ir.Constant(I64, 1))
    return b.mul(b.udiv(b.add(x, bump), step), step)


def _needed_ends(piece: Piece) -> tuple[list[tuple[int, ...]], list[int]]:
    """The ends a piece's offsets and pool size need: (for each buffer, the
    buffers of its below-set that no other buffer of that set sits on; the
    buffers no buffer sits on). Dropping the others changes no value: if
    ``c`` is below ``j`` and ``j`` below ``i``, ``end(c) <= offset(j) <=
    end(j)`` at every value, so the maximum over ``i``'s below-set is the
    same without ``c``, and so is the pool (the largest end) over the
    buffers nothing sits on. The plan keeps its sets (its formulas and
    JSON name them); the generated code computes fewer maxima (LLaMA's
    classic export: 4 per buffer and piece, 1,184 selects in its run
    function, which LLVM compiles even at optnone)."""
    below = []
    for i, under in enumerate(piece.below):
        members = set(under)
        covered = {c for j in under for c in piece.below[j] if c in members}
        below.append(tuple(c for c in under if c not in covered))
    used = {c for under in piece.below for c in under}
    return below, [i for i in piece.order if i not in used]


def _plan_tables(plan: SymbolicPlan) -> dict[str, list[int]]:
    """The plan as the run function reads it: every piece's tables, one
    after the other (a piece's rows of a per-buffer table start at
    ``piece * buffers``, of `below_start` at ``piece * (buffers + 1)``):
    - `order_start`, `order`: each piece's placement order;
    - `below_start`, `below`: the ends each buffer's offset is the maximum
      of (`_needed_ends`, as indices into `below`);
    - `alignment`, `first_power`, `least`: the alignment of each buffer,
      fixed where it cannot vary over the piece (`first_power` 0), else
      fitted to its size at run time: each power of two from
      `first_power` down to `least` that the size is at most replaces it
      (pyocc.planning.fitted_alignment);
    - `tops_start`, `tops`: the buffers whose ends the pool is the maximum of."""
    buffers = plan.problem.buffers
    tables: dict[str, list[int]] = {name: [] for name in (
        "order_start", "order", "below_start", "below", "alignment", "first_power", "least", "tops_start", "tops")}
    for piece in plan.pieces:
        below, tops = _needed_ends(piece)
        tables["order_start"].append(len(tables["order"]))
        tables["order"] += piece.order
        for under in below:
            tables["below_start"].append(len(tables["below"]))
            tables["below"] += under
        tables["below_start"].append(len(tables["below"]))
        for buffer in buffers:
            fixed = buffer.fixed_alignment(piece.ranges)
            tables["alignment"].append(buffer.alignment if fixed is None else fixed)
            # the largest power of two below the alignment, and the least the size can fit it to
            tables["first_power"].append(0 if fixed is not None else 1 << (buffer.alignment - 1).bit_length() - 1)
            tables["least"].append(1 if fixed is not None else buffer.least_alignment(piece.ranges))
        tables["tops_start"].append(len(tables["tops"]))
        tables["tops"] += tops
    tables["order_start"].append(len(tables["order"]))
    tables["tops_start"].append(len(tables["tops"]))
    return tables


def _emit_plan(function: ir.Function, b: ir.IRBuilder, plan: SymbolicPlan,
               poly: Callable[[int | Poly], ir.Value]) -> tuple[dict[int, ir.Value], ir.Value]:
    """The plan's offsets (buffer index -> i64) and pool size at the
    symbols' values, written at `b` (left at the end of what it wrote).
    The plan is data (`_plan_tables`, constant arrays in the module) read
    by one loop: every buffer's size is evaluated, the piece is the number
    of piece bounds the cut symbol is above, and each buffer of that
    piece's placement order gets the aligned maximum of the ends of the
    buffers below it. (Written out buffer by buffer and piece by piece, the
    same arithmetic was most of T5's 7,800-instruction run function, whose
    code generation, even at optnone, cost 0.15 CPU s a compile.)"""
    buffers = plan.problem.buffers
    count = len(buffers)
    if not count:
        return {}, ir.Constant(I64, 0)
    w = IRWriter(function.entry_basic_block, b)
    tables = {}
    for label, values in _plan_tables(plan).items():
        kind = ir.ArrayType(I64, max(len(values), 1))
        table = ir.GlobalVariable(function.module, kind, f"{function.name}_plan_{label}")
        table.global_constant, table.linkage = True, "internal"
        table.initializer = ir.Constant(kind, values or [0])
        tables[label] = table
    at_entry = ir.IRBuilder(function.entry_basic_block)
    at_entry.position_before(function.entry_basic_block.terminator)
    sizes, ends, offsets = (at_entry.alloca(I64, size=ir.Constant(I64, count)) for _ in range(3))
    for i, buffer in enumerate(buffers):
        w.store(poly(buffer.size), sizes, ir.Constant(I64, i))
    piece: ir.Value = ir.Constant(I64, 0)
    if plan.split is not None:
        value = poly(Poly.symbol(plan.split))
        for k, bounds in enumerate(plan.pieces[:-1]):
            above = b.icmp_unsigned(">", value, ir.Constant(I64, bounds.ranges[plan.split][1]), name=f"above_piece{k}")
            piece = b.add(piece, b.zext(above, I64))
    rows = b.mul(piece, ir.Constant(I64, count))
    below_rows = b.mul(piece, ir.Constant(I64, count + 1))
    following = b.add(piece, ir.Constant(I64, 1))
    with w.counted(w.load(tables["order_start"], piece), w.load(tables["order_start"], following)) as position:
        i = w.load(tables["order"], position)
        top = w.variable(0)
        row = b.add(below_rows, i)
        with w.counted(w.load(tables["below_start"], row), w.load(tables["below_start"], b.add(row, I64(1)))) as e:
            w.set(top, _umax(b, w.get(top), w.load(ends, w.load(tables["below"], e))))
        size = w.load(sizes, i)
        alignment = w.variable(w.load(tables["alignment"], b.add(rows, i)))
        power = w.variable(w.load(tables["first_power"], b.add(rows, i)))
        least = w.load(tables["least"], b.add(rows, i))
        with w.loop(lambda: b.icmp_signed(">=", w.get(power), least)):
            w.set(alignment, b.select(b.icmp_unsigned("<=", size, w.get(power)), w.get(power), w.get(alignment)))
            w.set(power, b.lshr(w.get(power), I64(1)))
        offset = _align_up(b, w.get(top), w.get(alignment))
        w.store(offset, offsets, i)
        w.store(b.add(offset, size), ends, i)
    pool_bytes = w.variable(0)
    with w.counted(w.load(tables["tops_start"], piece), w.load(tables["tops_start"], following)) as t:
        w.set(pool_bytes, _umax(b, w.get(pool_bytes), w.load(ends, w.load(tables["tops"], t))))
    return ({i: w.load(offsets, ir.Constant(I64, i)) for i in range(count)},
            b.load(pool_bytes, typ=I64, name="pool_bytes"))


def _emit_run(module: ir.Module, symbol: str, steps: list[list[Any]], site_functions: Sequence[ir.Function],
              weight_of: Mapping[int, int], weights: Sequence[np.ndarray], plan: SymbolicPlan,
              names: Sequence[str], ranges: Mapping[str, tuple[int, int]]) -> None:
    """`NAME_run` (see the module docstring)."""
    function = ir.Function(module, RUN_TYPE, symbol)
    # a straight line of calls, and the plan's arithmetic once per run: LLVM's
    # O3 on it cost 1.7 of LLaMA's 4.3 CPU s of JIT, and nothing measurable at run time
    function.attributes.add("noinline")
    function.attributes.add("optnone")
    inputs, outputs, weight_base, state, symbols = function.args
    entry = function.append_basic_block("entry")
    b = ir.IRBuilder(function.append_basic_block("body"))
    ir.IRBuilder(entry).branch(b.block)  # the entry block holds the symbols' values (SizeContext)
    sizes = SizeContext(module, symbol, 0, names, ranges, argument=4)

    def poly(value: int | Poly) -> ir.Value:
        return sizes.value(value) if isinstance(value, Poly) else ir.Constant(I64, int(value))

    offsets, pool_bytes = _emit_plan(function, b, plan, poly)
    # a value out of range (from C, which nothing checked): status 2, nothing allocated or run
    for n in names:
        low, high = ranges[n]
        value = sizes.value(Poly.symbol(n))
        outside = b.or_(b.icmp_signed("<", value, ir.Constant(I64, low)),
                        b.icmp_signed(">", value, ir.Constant(I64, high)))
        with b.if_then(outside, likely=False):
            b.ret(ir.Constant(I32, 2))
    rounded = _align_up(b, _umax(b, pool_bytes, ir.Constant(I64, 1)), ALIGNMENT)
    allocate, release = host_allocator(module)
    memcpy = module.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
    pool = b.call(allocate, [ir.Constant(I64, ALIGNMENT), rounded])

    def counter(slot: int) -> ir.Value:
        return b.gep(state, [ir.Constant(I64, slot)], inbounds=True, source_etype=I64)

    with b.if_then(b.icmp_unsigned("==", pool, ir.Constant(PTR, None)), likely=False):
        b.ret(ir.Constant(I32, 1))
    b.store(b.add(b.load(counter(0), typ=I64), ir.Constant(I64, 1)), counter(0))
    now = b.add(b.load(counter(2), typ=I64), pool_bytes)
    b.store(now, counter(2))
    b.store(_umax(b, b.load(counter(3), typ=I64), now), counter(3))

    _, weight_offsets = pack_weights(weights)
    pointers: dict[int, ir.Value] = {}
    arguments = {False: 0, True: 0}
    calls = iter(site_functions)
    slot_count = 0
    for step in steps:
        if step[0] == "call":
            _, _, kernel_inputs, outs, _, _, workspace = step
            count = sum(len(v) if isinstance(v, list) else 1 for v in kernel_inputs) + len(outs) + \
                (workspace is not None)
            slot_count = max(slot_count, count + len(names))
    array = b.alloca(PTR, size=ir.Constant(I64, max(slot_count, 1)))
    symbol_pointers = [b.inttoptr(sizes.value(Poly.symbol(n)), PTR) for n in names]

    def byte_pointer(base: ir.Value, offset: ir.Value) -> ir.Value:
        return b.gep(base, [offset], inbounds=True, source_etype=I8)

    for step in steps:
        kind = step[0]
        if kind == "arg":
            _, value, _, is_output, _, _ = step
            table = outputs if is_output else inputs
            slot = b.gep(table, [ir.Constant(I64, arguments[is_output])], inbounds=True, source_etype=PTR)
            pointers[value] = b.load(slot, typ=PTR)
            arguments[is_output] += 1
        elif kind == "weight":
            pointers[step[1]] = byte_pointer(weight_base, ir.Constant(I64, weight_offsets[weight_of[step[1]]]))
        elif kind == "malloc":
            pointers[step[1]] = byte_pointer(pool, offsets[step[2]])
        elif kind == "view":
            pointers[step[1]] = pointers[step[2]]
        elif kind == "subview":
            pointers[step[1]] = byte_pointer(pointers[step[2]], poly(step[3]))
        elif kind == "copy":
            _, target, source, size = step
            b.call(memcpy, [pointers[target], pointers[source], poly(size), ir.Constant(ir.IntType(1), 0)])
        elif kind == "call":
            _, _, kernel_inputs, outs, _, _, workspace = step
            values: list[ir.Value] = []
            for v in kernel_inputs:
                if v is None:
                    values.append(ir.Constant(PTR, None))
                elif isinstance(v, list):
                    values += [pointers[x] for x in v]
                else:
                    values.append(pointers[v])
            values += [pointers[v] for v in outs] + ([] if workspace is None else [pointers[workspace]])
            values += symbol_pointers
            for index, value in enumerate(values):
                b.store(value, b.gep(array, [ir.Constant(I64, index)], inbounds=True, source_etype=PTR))
            b.call(next(calls), [array])
    b.call(release, [pool])
    b.store(b.add(b.load(counter(1), typ=I64), ir.Constant(I64, 1)), counter(1))
    b.store(b.sub(b.load(counter(2), typ=I64), pool_bytes), counter(2))
    b.ret(ir.Constant(I32, 0))


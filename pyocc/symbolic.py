"""A program for every value of a symbolic dimension, read off a few probes.

The compiler lowers a model with symbolic input dimensions (``--dim
sequence=512``) at a few *probe* values of its symbols (the importer folds
Shape/Gather/Concat/Slice chains at each) and reads the symbolic program
off them: the printed buffer-form programs must agree everywhere except in
their integers, and every integer (a dimension, a byte size, a Slice end, a
Reshape target) must be one polynomial in the symbols (degree at most
``FIT_DEGREE`` per symbol) at every probe: fitted at ``(FIT_DEGREE + 1)``
values per symbol (fewer where the symbolic shapes' degree is lower; more
again when the check finds a higher one), then checked at another. A constant folded from a
symbol's value must be the leading block of its value at the maximum (a
position table sliced to the length, a causal mask). A program whose
structure, numbers or constants do not fit is one PyoccError saying so.

From the symbolic program come the symbolic planning problem (buffer
sizes are polynomials, lifetimes are the program's) and the text of the
program at any value (``SymbolicProgram.text_at``).

Probing is sampling: the plan made from the fitted sizes is then verified
over the whole range by pyocc.planning.symbolic, and a run at a value checks
the input shapes against the fitted ones.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseResourceAttr
from xdsl.ir import Attribute, SSAValue

from pyocc.analysis.liveness import analyze_function
from pyocc.dialects.dnn import ops as d
from pyocc.errors import PyoccError
from pyocc.lowering.llvm_common import buffer_spec, graph_arguments, kernel_kwarg, weight_source
from pyocc.planning import Problem
from pyocc.planning.symbolic import Poly, SymbolicBuffer, SymbolicPlan, SymbolicProblem
from pyocc.runtime import host_kernels
from pyocc.runtime.bridge import aligned_bytes
from pyocc.weights import load_bytes

FIT_DEGREE = 2
"""Highest power of a symbol in a fitted integer (byte sizes of attention
scores are S^2)."""
CHECKS = 1
"""Extra probe values per symbol that every fitted integer is checked at: a
polynomial of degree at most ``FIT_DEGREE`` is fixed by its ``FIT_DEGREE + 1``
fit values, so one more value exposes an integer of higher degree (or none)
unless it happens to agree there too. (When a constant is folded from the
symbol, the check value is the maximum: see ``pyocc.api._probe``.)"""

_INTEGERS = re.compile(r"(\d+)")
"""A printed program's integers, as a group: a split keeps them between the pieces."""


class ProgramMismatch(PyoccError):
    """The programs lowered at two probe values differ in more than their
    integers (their ops, or their buffers' lifetimes)."""

_RESOURCE = re.compile(r"dense_resource<[^>]*>")


def probe_points(ranges: Mapping[str, tuple[int, int]], degrees: Mapping[str, int] | None = None) -> tuple[
        list[dict[str, int]], list[dict[str, int]]]:
    """(fit points, check points): the grid of ``FIT_DEGREE + 1`` values of
    every symbol (``degrees[name] + 1`` where `degrees` expects a lower
    degree: the first of them), and points where every symbol takes one of
    its ``CHECKS`` check values. The values are the largest primes of the range: the top,
    where the memory is, so that size-dependent choices (dnn-reorder's op
    order) are those for large sizes; primes, so that a probe rarely equals
    another dimension of the model. A range with too few primes uses its
    largest values."""
    names = sorted(ranges)
    fits: list[list[int]] = []
    checks: list[list[int]] = []
    wanted = FIT_DEGREE + 1 + CHECKS
    for name in names:
        low, high = ranges[name]
        primes = [v for v in range(high, max(low, 2) - 1, -1) if _is_prime(v)][:wanted]
        values = primes if len(primes) == wanted else list(range(high, max(low, high - wanted + 1) - 1, -1))
        # fewer fit values only where a check value remains to catch a degree that is higher
        degree = FIT_DEGREE if degrees is None or len(values) <= FIT_DEGREE + 1 else \
            max(0, min(FIT_DEGREE, degrees.get(name, FIT_DEGREE)))
        fits.append(values[:degree + 1])
        checks.append(values[FIT_DEGREE + 1:])
    fit_points = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*fits)]
    check_points = []
    for i in range(max((len(c) for c in checks), default=0)):
        check_points.append({name: (checks[k][i] if i < len(checks[k]) else fits[k][-1])
                             for k, name in enumerate(names)})
    return fit_points, check_points


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def _basis(points: Sequence[Mapping[str, int]], names: Sequence[str], degrees: Sequence[int]) -> tuple[
        list[tuple[tuple[str, int], ...]], np.ndarray]:
    """The monomials (powers up to `degrees` per symbol) and their values at `points`."""
    monomials = [tuple((n, p) for n, p in zip(names, powers, strict=True) if p)
                 for powers in itertools.product(*(range(d + 1) for d in degrees))]
    matrix = np.array([[np.prod([float(point[n]) ** p for n, p in m]) if m else 1.0 for m in monomials]
                       for point in points])
    return monomials, matrix


def _solve_integers(matrix: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The integer coefficients (one column per column of `values`) of the
    square system ``matrix @ coefficients = values``, solved in exact
    rational arithmetic and rounded (a column no integers solve is caught by
    the caller's check). Floats would not do: with two symbols near 512 the
    basis holds ``S^2 T^2`` ~ 7e10 next to 1, and a least-squares solve in
    float64 lost the integers (``128*S`` came out wrong)."""
    size = len(matrix)
    if matrix.shape != (size, size):
        raise ValueError(f"the fit needs a square system, got {matrix.shape}")
    rows = [[Fraction(int(round(v))) for v in row] + [Fraction(int(k == i)) for k in range(size)]
            for i, row in enumerate(matrix)]
    for col in range(size):  # Gauss-Jordan: the inverse, exactly
        pivot = next(r for r in range(col, size) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        lead = rows[col][col]
        rows[col] = [v / lead for v in rows[col]]
        for r in range(size):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    inverse = [row[size:] for row in rows]
    denominator = math.lcm(*(v.denominator for row in inverse for v in row))
    scaled = np.array([[int(v * denominator) for v in row] for row in inverse], dtype=object)
    numerators = scaled @ values.astype(object)
    rounded = [[(2 * n + denominator) // (2 * denominator) for n in row] for row in numerators]
    return np.array(rounded, dtype=np.int64).reshape(size, values.shape[1])


def fit_polynomials(values: np.ndarray, fit_points: Sequence[Mapping[str, int]],
                    check_points: Sequence[Mapping[str, int]]) -> tuple[list[Poly], list[int]]:
    """Fit every column of `values` (one row per point: the fit points, then
    the check points) with a polynomial with integer coefficients in the
    symbols; returns the polynomials and the columns no polynomial fits
    exactly at every point (empty when all fit)."""
    polys = [Poly.constant(int(v)) for v in values[0]]
    # most integers do not vary (and some are long digit runs of floats): fit only those that do
    varying = np.flatnonzero((values != values[0]).any(axis=0))
    if not len(varying):
        return polys, []
    names = sorted(fit_points[0])
    degrees = [min(FIT_DEGREE, len({p[n] for p in fit_points}) - 1) for n in names]
    monomials, matrix = _basis(fit_points, names, degrees)
    coefficients = _solve_integers(matrix, values[:len(fit_points), varying])
    _, everywhere = _basis([*fit_points, *check_points], names, degrees)
    predicted = np.rint(everywhere).astype(np.int64) @ coefficients
    wrong = sorted(int(varying[j]) for j in np.flatnonzero((predicted != values[:, varying]).any(axis=0)))
    for j, column in enumerate(varying):
        polys[column] = Poly.of({m: int(c) for m, c in zip(monomials, coefficients[:, j], strict=True)})
    return polys, wrong


@dataclass(frozen=True)
class SymbolicProgram:
    """A printed program whose varying integers are polynomials in the
    symbols: ``pieces[0]``, ``numbers[0]``, ``pieces[1]``, ..., ``pieces[-1]``."""

    pieces: tuple[str, ...]
    numbers: tuple[Poly, ...]
    ranges: Mapping[str, tuple[int, int]]

    def text_at(self, values: Mapping[str, int]) -> str:
        """The program's text at one value of every symbol."""
        parts = [self.pieces[0]]
        for number, piece in zip(self.numbers, self.pieces[1:], strict=True):
            parts += [str(number.evaluate(values)), piece]
        return "".join(parts)

    def symbolic_text(self) -> str:
        """The program with every varying integer written as its
        expression in braces, e.g. ``memref<1x{sequence}x32xf32>``."""
        parts = [self.pieces[0]]
        for number, piece in zip(self.numbers, self.pieces[1:], strict=True):
            parts += ["{" + str(number) + "}", piece]
        return "".join(parts)


def _line_of(pieces: Sequence[str], numbers: Sequence[int], index: int) -> str:
    """The printed line holding integer `index` of a program split into
    `pieces` around its `numbers`."""
    head = "".join(p + str(n) for p, n in zip(pieces[:index], numbers[:index], strict=True)) + pieces[index]
    text = head + "".join(str(n) + p for n, p in zip(numbers[index:], pieces[index + 1:], strict=True))
    start = max(head.rfind("\n") + 1, len(head) - 80)
    end = text.find("\n", len(head))
    return text[start:min(end if end >= 0 else len(text), len(head) + 40)].strip()


def fit_program(texts: Sequence[str], fit_points: Sequence[Mapping[str, int]],
                check_points: Sequence[Mapping[str, int]], ranges: Mapping[str, tuple[int, int]],
                what: str = "the model") -> SymbolicProgram:
    """The symbolic program of the printed programs `texts`, one per point
    (fit points, then check points). PyoccError when their structure differs
    or an integer is no polynomial in the symbols. (A constant's shape may
    vary: `check_weights` checks the constants' data.)"""
    points = [*fit_points, *check_points]
    # each text split once around its integers: pieces at even positions, the integers' digits at odd ones
    parts = [_INTEGERS.split(_RESOURCE.sub("dense_resource<>", t)) for t in texts]
    split = [p[::2] for p in parts]
    numbers = [[int(n) for n in p[1::2]] for p in parts]
    for i, pieces in enumerate(split[1:], start=1):
        if pieces != split[0]:
            where = next(k for k, (a, b) in enumerate(zip(pieces, split[0], strict=False)) if a != b)
            raise ProgramMismatch(
                f"{what}: the program differs between {_show(points[0])} and {_show(points[i])} "
                f"(near '{_line_of(split[0], numbers[0], max(where - 1, 0))}'): its ops depend on the symbolic size, "
                "so one program cannot run every value; fix the dimension with --shape")
    polys, wrong = fit_polynomials(np.array(numbers, dtype=np.int64).reshape(len(texts), -1),
                                   fit_points, check_points)
    if wrong:
        line = _line_of(split[0], numbers[0], wrong[0])
        raise PyoccError(
            f"{what}: a number in '{line}' is no polynomial in {', '.join(sorted(ranges))} "
            f"(values {[row[wrong[0]] for row in numbers]} at {', '.join(_show(p) for p in points)}); "
            "fix the dimension with --shape")
    # keep the integers that do not vary as printed (`5.000000e-01` has three)
    tokens = parts[0][1::2]
    pieces, varying = [split[0][0]], []
    for token, poly, piece in zip(tokens, polys, split[0][1:], strict=True):
        if poly.is_constant():
            pieces[-1] += token + piece
        else:
            varying.append(poly)
            pieces.append(piece)
    return SymbolicProgram(tuple(pieces), tuple(varying), dict(ranges))


def symbolic_problem(problems: Sequence[Problem], fit_points: Sequence[Mapping[str, int]],
                     check_points: Sequence[Mapping[str, int]], ranges: Mapping[str, tuple[int, int]],
                     what: str = "the model") -> SymbolicProblem:
    """The planning problem whose buffer sizes are fitted over `problems`
    (one per point, fit points then check points; same buffers and lifetimes)."""
    reference = problems[0].buffers
    for problem in problems[1:]:
        if [(b.name, b.first, b.last, b.alignment) for b in problem.buffers] != \
                [(b.name, b.first, b.last, b.alignment) for b in reference]:
            raise ProgramMismatch(f"{what}: the buffers' lifetimes depend on the symbolic size; fix it with --shape")
    if not reference:
        return SymbolicProblem((), ranges)
    sizes = np.array([[b.size for b in p.buffers] for p in problems], dtype=np.int64)
    polys, wrong = fit_polynomials(sizes, fit_points, check_points)
    if wrong:
        raise PyoccError(f"{what}: buffer {reference[wrong[0]].name}'s size is no polynomial in "
                         f"{', '.join(sorted(ranges))}; fix the dimension with --shape")
    return SymbolicProblem(tuple(SymbolicBuffer(b.name, poly, b.first, b.last, b.alignment)
                                 for b, poly in zip(reference, polys, strict=True)), ranges)


def fit_buffer_types(types: Sequence[Sequence[Attribute]], fit_points: Sequence[Mapping[str, int]],
                     check_points: Sequence[Mapping[str, int]], what: str = "the model") -> list[
                         tuple[tuple[Poly, ...], Attribute]]:
    """Every planned buffer's dimensions as polynomials and its element type,
    from its memref type at each point (fit points, then check points; one
    list per point in the planning problem's order). PyoccError when a rank
    or an element type changes, or a dimension is no polynomial."""
    reference = types[0]
    for point_types in types[1:]:
        if [(len(t.get_shape()), t.element_type) for t in point_types] != \
                [(len(t.get_shape()), t.element_type) for t in reference]:
            raise ProgramMismatch(f"{what}: the buffers' ranks or element types depend on the symbolic size; "
                                  "fix it with --shape")
    if not reference:
        return []
    dims = np.array([[d for t in point_types for d in t.get_shape()] for point_types in types], dtype=np.int64)
    polys, wrong = fit_polynomials(dims, fit_points, check_points)
    if wrong:
        raise PyoccError(f"{what}: a buffer's dimension is no polynomial in the symbols; fix the dimension with --shape")
    result, k = [], 0
    for t in reference:
        rank = len(t.get_shape())
        result.append((tuple(polys[k:k + rank]), t.element_type))
        k += rank
    return result


def _show(values: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items()))


# ---------------------------------------------------------------------------
# Running a symbolic program: steps over one pool planned for every value
# ---------------------------------------------------------------------------


def program_steps(function: func.FuncOp) -> tuple[list[list[Any]], list[np.ndarray], list[str]]:
    """A lazy buffer-form function as JSON-ready steps (every integer a
    shape, a byte offset or a kernel argument, so that the steps at several
    values fit like the program text) and its weights as arrays. Values are
    numbered in order of definition; the steps are

        ["arg", id, onnx name, is output, shape, dtype]
        ["weight", id, weight index, shape]          (a leading block of the weight)
        ["malloc", id, buffer index (the planning problem's order), shape, dtype]
        ["view", id, source id, shape, dtype]          (same bytes, new type)
        ["subview", id, source id, byte offset, shape, dtype]
        ["copy", target id, source id, bytes]
        ["call", kernel, inputs (ids, None, lists), output ids, out keyword, kwargs, workspace id or None]

    (The workspace, a native kernel's planned scratch, is passed to native
    kernels only: the numpy kernels need none.)
    """
    ids: dict[SSAValue, int] = {}
    steps: list[list[Any]] = []
    weights: list[np.ndarray] = []
    names: list[str] = []

    def define(value: SSAValue) -> int:
        ids[value] = len(ids)
        return ids[value]

    liveness = analyze_function(function)
    buffers = {b.value: i for i, b in enumerate(b for b in liveness.intermediates
                                               if isinstance(b.value.owner, d.MallocOp))}
    for arg, is_output, spec in graph_arguments(function):
        steps.append(["arg", define(arg), spec["name"], is_output, spec["shape"], spec["dtype"]])
    for op in function.body.block.ops:
        match op:
            case d.WeightOp():
                spec = buffer_spec(op, op.result.type)
                weights.append(_weight_array(op, spec))
                names.append(op.result.name_hint or f"weight #{len(weights) - 1}")
                steps.append(["weight", define(op.result), len(weights) - 1, spec["shape"]])
            case d.MallocOp():
                spec = buffer_spec(op, op.result.type)
                steps.append(["malloc", define(op.result), buffers[op.result], spec["shape"], spec["dtype"]])
            case d.ViewOp():
                spec = buffer_spec(op, op.result.type)
                steps.append(["view", define(op.result), ids[op.source], spec["shape"], spec["dtype"]])
            case d.SubviewOp():
                spec = buffer_spec(op, op.result.type)
                steps.append(["subview", define(op.result), ids[op.source], op.offset.value.data,
                              spec["shape"], spec["dtype"]])
            case d.MemcpyOp():
                if op.strides() is not None:
                    raise PyoccError("a strided dnn.memcpy (a scratchpad band) has no symbolic program; "
                                     "compile the scratchpad with concrete shapes")
                steps.append(["copy", ids[op.target], ids[op.source], op.size.value.data])
            case d.DnnComputeOp():
                inputs = [None if v is None else [ids[x] for x in v] if isinstance(v, list) else ids[v]
                          for v in op.kernel_inputs()]
                kwargs = {name: kernel_kwarg(op, name, attr) for name, attr in op.kernel_attributes().items()}
                workspace = getattr(op, "workspace", None)
                steps.append(["call", op.kernel, inputs, [ids[v] for v in op.destinations()],
                              "outs" if hasattr(op, "outs") else "out", kwargs,
                              None if workspace is None else ids[workspace]])
            case d.DeallocOp() | func.ReturnOp():
                pass
            case _:
                raise PyoccError(f"symbolic shapes cannot run {op.name} yet; fix the dimension with --shape")
    return steps, weights, names


def _weight_array(op: d.WeightOp, spec: dict[str, Any]) -> np.ndarray:
    """A weight's value as a (read-only) array of its buffer's shape."""
    dtype, shape = np.dtype(spec["dtype"]), tuple(spec["shape"])
    source = weight_source(op, math.prod(shape) * dtype.itemsize)
    if "splat" in source:
        return np.full(shape, source["splat"], dtype=dtype)
    if "values" in source:
        values = np.asarray(source["values"], dtype=dtype)
        return values.reshape(shape) if values.size == math.prod(shape) else np.full(shape, values.reshape(-1)[0])
    assert isinstance(op.value, DenseResourceAttr)
    return np.frombuffer(load_bytes(op.value), dtype=dtype.newbyteorder("<")).reshape(shape)


def check_weights(weights: Sequence[Sequence[np.ndarray]], names: Sequence[str],
                  at_maximum: Sequence[np.ndarray] | None, what: str, symbols: str) -> list[np.ndarray]:
    """The weights a symbolic program runs with, from the weights of the
    programs at every probe (`weights[probe][i]`) and, when some constant's
    shape varies, at every symbol's maximum. A constant that import folded
    from a symbol's value must be, at every probe, the leading block of its
    value at the maximum (a Slice of a table up to Shape(x)[1], a causal
    Trilu mask, a Range): then the run takes that block. Any other constant
    whose data differs between probes is one PyoccError."""
    chosen = list(weights[0])
    for i, name in enumerate(names):
        shapes = {w[i].shape for w in weights}
        if len(shapes) == 1:
            if any(not np.array_equal(w[i], weights[0][i]) for w in weights[1:]):
                raise PyoccError(
                    f"{what}: the constant %{name} holds data computed at import from the value of {symbols}; "
                    "pyocc cannot run it for every value: feed it as a graph input, or fix the dimension with --shape")
            continue
        full = at_maximum[i] if at_maximum is not None else None
        if full is None or any(
                w[i].ndim != full.ndim or any(n > m for n, m in zip(w[i].shape, full.shape, strict=True))
                or not np.array_equal(w[i], full[tuple(slice(0, n) for n in w[i].shape)]) for w in weights):
            raise PyoccError(
                f"{what}: the constant %{name} has a shape that depends on {symbols} and is not the leading "
                "block of its value at the maximum; pyocc cannot run it for every value: feed it as a graph "
                "input, or fix the dimension with --shape")
        chosen[i] = full
    return chosen


def _bytes_of(array: np.ndarray) -> np.ndarray:
    """The bytes of a contiguous array, as a flat uint8 view."""
    return array.reshape(-1).view(np.uint8)


@dataclass
class SymbolicRun:
    """Runs a symbolic program at any value in range: the steps at that
    value come from their fitted text, the pool is allocated once per run at
    the plan's size for that value, and every buffer is a view at its
    planned offset; the kernels are pyocc's numpy host kernels."""

    steps: SymbolicProgram
    """The JSON text of `program_steps`, its integers fitted."""
    weights: list[np.ndarray]
    plan: SymbolicPlan
    _cache: dict[tuple[tuple[str, int], ...], list[list[Any]]] = field(default_factory=dict)

    def steps_at(self, values: Mapping[str, int]) -> list[list[Any]]:
        """The steps at one value of every symbol (kept for the last few values)."""
        key = tuple(sorted(values.items()))
        if key not in self._cache:
            if len(self._cache) >= 8:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = json.loads(self.steps.text_at(values))
        return self._cache[key]

    def run(self, values: Mapping[str, int], inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run at `values` (already checked to be in range) on `inputs`
        (ONNX name -> array of the shape at `values`)."""
        steps = self.steps_at(values)
        offsets = self.plan.offsets(values)
        names = [b.name for b in self.plan.problem.buffers]
        pool = _bytes_of(aligned_bytes(max(self.plan.pool_bytes(values), 1)))
        arrays: dict[int, np.ndarray] = {}
        outputs: dict[str, np.ndarray] = {}
        for step in steps:
            kind = step[0]
            if kind == "arg":
                _, value, name, is_output, shape, dtype = step
                if is_output:
                    arrays[value] = outputs[name] = np.empty(shape, dtype=dtype)
                else:
                    arrays[value] = np.ascontiguousarray(inputs[name], dtype=dtype)
            elif kind == "weight":
                _, value, index, shape = step
                weight = self.weights[index]
                if list(weight.shape) != shape:
                    weight = np.ascontiguousarray(weight[tuple(slice(0, n) for n in shape)])
                arrays[value] = weight
            elif kind == "malloc":
                _, value, index, shape, dtype = step
                start = offsets[names[index]]
                size = math.prod(shape) * np.dtype(dtype).itemsize
                arrays[value] = pool[start:start + size].view(dtype).reshape(shape)
            elif kind == "view":
                _, value, source, shape, dtype = step
                size = math.prod(shape) * np.dtype(dtype).itemsize
                arrays[value] = _bytes_of(arrays[source])[:size].view(dtype).reshape(shape)
            elif kind == "subview":
                _, value, source, offset, shape, dtype = step
                size = math.prod(shape) * np.dtype(dtype).itemsize
                arrays[value] = _bytes_of(arrays[source])[offset:offset + size].view(dtype).reshape(shape)
            elif kind == "copy":
                _, target, source, size = step
                _bytes_of(arrays[target])[:size] = _bytes_of(arrays[source])[:size]
            else:
                _, kernel, kernel_inputs, outs, keyword, kwargs, _workspace = step
                args = [None if v is None else [arrays[x] for x in v] if isinstance(v, list) else arrays[v]
                        for v in kernel_inputs]
                while args and args[-1] is None:
                    args.pop()
                destinations = [arrays[v] for v in outs]
                getattr(host_kernels, kernel)(*args, **{keyword: destinations if keyword == "outs"
                                                        else destinations[0]}, **kwargs)
        return outputs

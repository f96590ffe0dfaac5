"""Sizes known only at run time: a dimension that is a polynomial in a
symbolic program's symbols (``1x{sequence}x32xf32``), for native kernels
that take their shapes at run time (pyocc.lowering.symbolic_native).

A kernel written for such a site gets the symbols' values at run time in
its buffer array, as integers cast to pointers, from slot
``site["run_time_symbols"]`` on (one per symbol, in `SizeContext.names`
order), and every dimension that depends on them as a `Size`: the
polynomial plus the context that turns it into an i64 of the kernel
function. The emitters' index arithmetic runs unchanged on Sizes:

- ``+``, ``-``, ``*`` with ints and Sizes build new polynomials (a result
  without a symbol is a plain int again), so ``math.prod(shape)`` and
  row-major strides work;
- ``==`` compares polynomials exactly (``S*32 == 32*S``; a Size is never
  equal to an int), so two operands' dims merge only when they are the same
  expression;
- ``<``, ``<=``, ``>``, ``>=`` hold only when they hold at every value of
  the range (``count <= 0`` is False for a length 1..512, ``count == 1``
  too), so a special case taken for a static size is never taken for a
  size that might differ;
- `KernelBuilder.i64` and `Kernel.index` turn a Size into its i64 value:
  the polynomial evaluated once, at the top of the kernel's first block
  (which dominates every use), and reused. Nothing else may be written
  into that block while a Size is used (an IRBuilder's position is an
  index into its block): the kernels' code starts in a second block
  (`has_sizes`).

What an emitter cannot do with a Size fails loudly at emission: ``int()``,
``float()``, ``str()`` (an llvmlite constant), arithmetic or comparisons
with a float, ``/``, and ``//`` or ``%`` that do not divide every
coefficient raise `StaticSizeError` (a TypeError), so a kernel that needs a
static number falls back instead of computing garbage. Only that exception
means "this kernel needs static shapes" to pyocc.lowering.symbolic_native;
any other exception from an emitter is a bug and propagates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import llvmlite.ir as ir
import numpy as np

from pyocc.planning.symbolic import Poly

I64 = ir.IntType(64)
PTR = ir.PointerType()

#: the most points of the symbols' ranges a comparison evaluates a polynomial at
_GRID_POINTS = 1 << 22


class StaticSizeError(TypeError):
    """A run-time Size used where an emitter needs a compile-time number (the
    message says how); a TypeError, as Python raises for such misuse."""


class SizeContext:
    """The symbols of one kernel function: where their values come from
    (buffer slots from `first_slot` on), their ranges, and the i64 values
    already computed in the function (materialised at the top of its first
    block)."""

    def __init__(self, module: ir.Module, symbol: str, first_slot: int, names: Sequence[str],
                 ranges: Mapping[str, tuple[int, int]], argument: int = 0):
        """For the function `symbol` of `module`, its symbols `names` in
        slots from `first_slot` of its pointer array argument `argument`."""
        self.module = module
        self.argument = argument
        self.symbol = symbol
        self.first_slot = first_slot
        self.names = list(names)
        self.ranges = {name: ranges[name] for name in self.names}
        self._values: dict[Poly, ir.Value] = {}
        self._bounds: dict[Poly, tuple[int, int]] = {}
        self._last: ir.Instruction | None = None
        self._function: ir.Function | None = None

    def size(self, dim: int | Poly) -> int | Size:
        """A dimension as the emitters see it: an int, or a Size when it varies."""
        if isinstance(dim, Poly):
            return Size.of(dim, self)
        return int(dim)

    def _builder(self) -> ir.IRBuilder:
        function = self.module.globals[self.symbol]
        assert isinstance(function, ir.Function) and function.blocks, f"@{self.symbol} has no body yet"
        if function is not self._function:
            self._function, self._values, self._last = function, {}, None
        builder = ir.IRBuilder(function.blocks[0])
        if self._last is None:
            builder.position_at_start(function.blocks[0])
        else:
            builder.position_after(self._last)
        return builder

    def value(self, poly: Poly) -> ir.Value:
        """`poly` as an i64 of the kernel function (computed once)."""
        builder = self._builder()
        cached = self._values.get(poly)
        if cached is not None:
            return cached
        total: ir.Value | None = None
        for monomial, coefficient in poly.terms:
            term: ir.Value = ir.Constant(I64, coefficient)
            for name, power in monomial:
                for _ in range(power):
                    term = self._emit(builder, builder.mul(term, self._symbol(builder, name)))
            total = term if total is None else self._emit(builder, builder.add(total, term))
        result = total if total is not None else ir.Constant(I64, 0)
        self._values[poly] = result
        return result

    def _symbol(self, builder: ir.IRBuilder, name: str) -> ir.Value:
        key = Poly.symbol(name)
        if key not in self._values:
            function = self._function
            assert function is not None
            slot = self._emit(builder, builder.gep(function.args[self.argument], [ir.Constant(I64, self.first_slot +
                                                                                  self.names.index(name))],
                                                   inbounds=True, source_etype=PTR))
            pointer = self._emit(builder, builder.load(slot, typ=PTR))
            self._values[key] = self._emit(builder, builder.ptrtoint(pointer, I64))
        builder.position_after(self._last)
        return self._values[key]

    def _emit(self, builder: ir.IRBuilder, instruction: ir.Instruction) -> ir.Instruction:
        self._last = instruction
        builder.position_after(instruction)
        return instruction

    def bounds(self, poly: Poly) -> tuple[int, int]:
        """The least and the largest value of `poly` over the ranges, every
        point evaluated (StaticSizeError for ranges of more than _GRID_POINTS
        points: a kernel then cannot decide on its sizes)."""
        if poly not in self._bounds:
            axes = [np.arange(low, high + 1, dtype=np.int64) for low, high in self.ranges.values()]
            if math.prod(len(a) for a in axes) > _GRID_POINTS:
                raise StaticSizeError(f"the symbols' ranges hold more than {_GRID_POINTS} points: "
                                f"the sign of {poly} is not checked")
            grid = np.meshgrid(*axes, indexing="ij")
            values = poly.evaluate_grid({n: g.reshape(-1) for n, g in zip(self.names, grid, strict=True)})
            self._bounds[poly] = (int(values.min()), int(values.max()))
        return self._bounds[poly]


def _poly(other: Any) -> Poly | None:
    if isinstance(other, Size):
        return other.poly
    if isinstance(other, int) and not isinstance(other, bool):
        return Poly.constant(other)
    return None


class Size:
    """A dimension known at run time (see the module docstring)."""

    __slots__ = ("poly", "context")

    def __init__(self, poly: Poly, context: SizeContext):
        self.poly = poly
        self.context = context

    @staticmethod
    def of(poly: Poly, context: SizeContext) -> int | Size:
        """`poly` as a Size, or as an int when it has no symbol."""
        if poly.is_constant():
            return poly.terms[0][1] if poly.terms else 0
        return Size(poly, context)

    def value(self) -> ir.Value:
        """The i64 value in the kernel function."""
        return self.context.value(self.poly)

    def _arith(self, other: Any, combine: Any) -> int | Size:
        poly = _poly(other)
        if isinstance(other, float):
            raise StaticSizeError(f"a run-time size {self.poly} combined with the float {other!r}")
        if poly is None:
            return NotImplemented
        return Size.of(combine(self.poly, poly), self.context)

    def __add__(self, other: Any) -> int | Size:
        return self._arith(other, lambda a, b: a + b)

    __radd__ = __add__

    def __sub__(self, other: Any) -> int | Size:
        return self._arith(other, lambda a, b: a - b)

    def __rsub__(self, other: Any) -> int | Size:
        return self._arith(other, lambda a, b: b - a)

    def __mul__(self, other: Any) -> int | Size:
        return self._arith(other, lambda a, b: a * b)

    __rmul__ = __mul__

    def __neg__(self) -> int | Size:
        return Size.of(-self.poly, self.context)

    def __floordiv__(self, other: Any) -> int | Size:
        if isinstance(other, int) and other and all(c % other == 0 for _, c in self.poly.terms):
            return Size.of(Poly.of({m: c // other for m, c in self.poly.terms}), self.context)
        raise StaticSizeError(f"a run-time size {self.poly} is not divisible by {other!r} at compile time")

    def __rfloordiv__(self, other: Any) -> int:
        raise StaticSizeError(f"{other!r} divided by a run-time size {self.poly} at compile time")

    def __truediv__(self, other: Any) -> float:
        raise StaticSizeError(f"a run-time size {self.poly} divided as a compile-time number")

    def __rtruediv__(self, other: Any) -> float:
        raise StaticSizeError(f"{other!r} divided by a run-time size {self.poly} at compile time")

    def __rmod__(self, other: Any) -> int:
        raise StaticSizeError(f"{other!r} taken modulo a run-time size {self.poly} at compile time")

    def __mod__(self, other: Any) -> int:
        if isinstance(other, int) and other and all(c % other == 0 for _, c in self.poly.terms):
            return 0
        raise StaticSizeError(f"a run-time size {self.poly} has no remainder by {other!r} at compile time")

    def __eq__(self, other: object) -> bool:
        poly = _poly(other)
        return poly is not None and poly == self.poly

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.poly)

    def _always(self, other: Any, holds: Any) -> bool:
        poly = _poly(other)
        if isinstance(other, float):
            raise StaticSizeError(f"a run-time size {self.poly} compared with the float {other!r}")
        if poly is None:
            return NotImplemented
        low, high = self.context.bounds(self.poly - poly)
        return bool(holds(low) and holds(high))

    def __lt__(self, other: Any) -> bool:
        return self._always(other, lambda d: d < 0)

    def __le__(self, other: Any) -> bool:
        return self._always(other, lambda d: d <= 0)

    def __gt__(self, other: Any) -> bool:
        return self._always(other, lambda d: d > 0)

    def __ge__(self, other: Any) -> bool:
        return self._always(other, lambda d: d >= 0)

    def __bool__(self) -> bool:
        # a non-constant polynomial is not the zero polynomial
        return True

    def __int__(self) -> int:
        raise StaticSizeError(f"a run-time size {self.poly} used as a compile-time int")

    __index__ = __int__

    def __float__(self) -> float:
        raise StaticSizeError(f"a run-time size {self.poly} used as a compile-time number")

    def __str__(self) -> str:
        raise StaticSizeError(f"a run-time size {self.poly} written as a constant")

    def __format__(self, spec: str) -> str:
        raise StaticSizeError(f"a run-time size {self.poly} written as a constant")

    def __repr__(self) -> str:
        return f"Size({self.poly})"


def has_sizes(site: Mapping[str, Any]) -> bool:
    """Whether `site` holds a run-time Size (a dimension of an operand, or a keyword argument)."""

    def holds(value: Any) -> bool:
        if isinstance(value, Size):
            return True
        if isinstance(value, list | tuple):
            return any(holds(v) for v in value)
        if isinstance(value, Mapping):
            return any(holds(v) for v in value.values())
        return False

    return holds([site["inputs"], site["outputs"], site.get("workspace"), site.get("kwargs")])


def at_least_one(count: int | Size) -> None:
    """Raise StaticSizeError unless a loop count is at least 1 over the whole
    range (loops test at the bottom: a run-time count of 0 would run once)."""
    if isinstance(count, Size) and count.context.bounds(count.poly)[0] < 1:
        raise StaticSizeError(f"a run-time loop count {count.poly} can be 0 in range")


def i64_of(value: int | Size | ir.Value) -> ir.Value:
    """An i64 for an int, a Size or an i64 value."""
    if isinstance(value, Size):
        return value.value()
    if isinstance(value, int):
        return ir.Constant(I64, value)
    return value

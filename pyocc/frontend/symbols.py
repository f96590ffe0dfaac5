"""Symbolic dimensions of a model's graph inputs (ONNX ``dim_param``).

A ``dim_param`` such as ``sequence`` either gets a range with ``--dim
sequence=512`` (API ``dims={"sequence": 512}``: every value 1..512) or is
fixed by ``--shape`` (then the model compiles exactly as a static one).
This module reads which input dimensions carry which symbol, checks that
every symbol is declared, and gives the concrete input shapes at one value
of every symbol (what the importer is run at, see pyocc.symbolic).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import onnx

from pyocc.errors import PyoccError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def parse_dim(spec: str, option: str = "--dim", low: int = 1) -> tuple[str, int]:
    """``sequence=512`` -> ("sequence", 512); PyoccError on bad text
    (`option` names the option in the message; values below `low` are bad)."""
    what = "maximum" if option == "--dim" else "value"
    name, sep, value = spec.partition("=")
    name = name.strip()
    if not sep or not _NAME.fullmatch(name):
        label = "MAX" if option == "--dim" else "VALUE"
        raise PyoccError(f"{option} '{spec}' must look like NAME={label}, e.g. {option} sequence=512")
    try:
        number = int(value)
    except ValueError:
        raise PyoccError(f"{option} '{spec}': the {what} must be an integer, e.g. {option} {name}=512") from None
    if number < low:
        raise PyoccError(f"{option} '{spec}': the {what} must be at least {low}")
    return name, number


def parse_dims(specs: Sequence[str], option: str = "--dim", low: int = 1) -> dict[str, int]:
    """Repeated ``--dim NAME=MAX`` (or ``--at NAME=VALUE``) -> {name: number};
    a name given twice is an error."""
    dims: dict[str, int] = {}
    for spec in specs:
        name, number = parse_dim(spec, option, low)
        if name in dims:
            raise PyoccError(f"{option} names '{name}' twice; give each symbol once")
        dims[name] = number
    return dims


@dataclass(frozen=True)
class SymbolicInputs:
    """Graph input name -> its shape, each dimension an int or a symbol name."""

    shapes: dict[str, tuple[int | str, ...]]
    ranges: dict[str, tuple[int, int]]
    """symbol -> (low, high), inclusive."""

    def at(self, values: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """The concrete input shapes at one value of every symbol."""
        return {name: tuple(values[d] if isinstance(d, str) else d for d in shape)
                for name, shape in self.shapes.items()}


def symbolic_inputs(model: onnx.ModelProto, dims: Mapping[str, int],
                    shapes: Mapping[str, Sequence[int]] | None = None) -> SymbolicInputs:
    """The graph inputs with a symbolic dimension declared in `dims` (symbol
    -> maximum), each symbol ranging over 1..maximum. Inputs fixed by
    `shapes` keep their given shape. A dim_param that is neither declared nor
    fixed, or a declared symbol no input has, is one PyoccError."""
    shapes = dict(shapes or {})
    initializers = {t.name for t in model.graph.initializer}
    params = sorted({d.dim_param for i in model.graph.input if i.type.HasField("tensor_type")
                     for d in i.type.tensor_type.shape.dim if d.dim_param})
    misnamed = sorted(set(dims) - set(params))
    if misnamed:  # before any input's undeclared dimension: a mistyped name is the likelier mistake
        raise PyoccError(
            f"--dim names '{misnamed[0]}', which no graph input's dimension is "
            f"(symbolic dimensions: {', '.join(params) or 'none'})")
    found: dict[str, tuple[int | str, ...]] = {}
    seen: set[str] = set()
    for inp in model.graph.input:
        if inp.name in initializers or inp.name in shapes or not inp.type.HasField("tensor_type"):
            continue
        ttype = inp.type.tensor_type
        if not ttype.HasField("shape"):
            continue
        shape: list[int | str] = []
        for i, dim in enumerate(ttype.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                shape.append(int(dim.dim_value))
            elif dim.dim_param and dim.dim_param in dims:
                shape.append(dim.dim_param)
                seen.add(dim.dim_param)
            else:
                label = f" ('{dim.dim_param}')" if dim.dim_param else ""
                hint = (f"--dim {dim.dim_param}=MAX (e.g. --dim {dim.dim_param}=512) to run every value up to MAX, "
                        if dim.dim_param else "")
                raise PyoccError(
                    f"graph input '{inp.name}' has a dynamic dimension {i}{label}; pass {hint}"
                    f"or fix it with --shape {inp.name}=...")
        if any(isinstance(d, str) for d in shape):
            found[inp.name] = tuple(shape)
    unknown = sorted(set(dims) - seen)
    fixed = {d.dim_param for i in model.graph.input if i.name in shapes and i.type.HasField("tensor_type")
             for d in i.type.tensor_type.shape.dim if d.dim_param}
    _check_shared_symbols(model, shapes, fixed & seen, found)
    if unknown and unknown[0] in fixed:
        raise PyoccError(f"--dim names '{unknown[0]}', but --shape fixes every input that has it; drop one of the two")
    if unknown:
        raise PyoccError(
            f"--dim names '{unknown[0]}', which no graph input's dimension is "
            f"(symbolic dimensions: {', '.join(params) or 'none'})")
    return SymbolicInputs(found, {name: (1, high) for name, high in dims.items() if name in seen})


def _check_shared_symbols(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]], both: set[str],
                          symbolic: Mapping[str, tuple[int | str, ...]]) -> None:
    """Inputs that name one dimension alike have one value of it (ONNX's
    dim_param): `--shape` cannot fix it for one input while `--dim` keeps
    it symbolic for another (T5's input_ids and attention_mask share
    `sequence`). One PyoccError naming both, before shape inference would
    report the two sizes meeting deep inside the graph."""
    if not both:
        return
    symbol = sorted(both)[0]
    given = next(i.name for i in model.graph.input if i.name in shapes
                 and any(d.dim_param == symbol for d in i.type.tensor_type.shape.dim))
    others = ", ".join(name for name, shape in symbolic.items() if symbol in shape)
    raise PyoccError(f"--shape {given}=... fixes '{symbol}', which --dim {symbol}=MAX keeps symbolic for {others}: "
                     f"inputs that share a dimension share its value; drop {given}'s --shape, or fix every input "
                     f"with '{symbol}' by --shape and drop --dim {symbol}")

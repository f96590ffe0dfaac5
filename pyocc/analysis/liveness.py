"""Liveness of dnn tensors: which bytes must exist at which step.

The step axis is the position of ops in the function body. For every value
the analysis decides what it is:
- `input`: a graph input (function argument), owned by the caller;
- `output`: a value the function returns; its producer writes straight into
  the caller's output buffer;
- `weight`: a dnn.weight, in the read-only constant pool;
- `intermediate`: everything else that a compute op produces. These are the
  buffers a memory plan places.
A `dnn.view` or `dnn.subview` owns no bytes: it extends the life of its
root (the buffer it aliases) to its own last use. So a buffer whose bands
are subviews (a coalesced concat output) lives for the union of the
lifetimes of all its aliases.

Works on both forms: on tensors (a compute result is a buffer) and on
buffers (a malloc or mem_offset result is a buffer). An analysis computes and
never rewrites.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from pyocc.dialects.dnn import ops as d


@dataclass
class LiveBuffer:
    """One buffer: its size and the steps during which it holds live data."""

    name: str
    value: SSAValue
    shape: tuple[int, ...]
    dtype: str
    bytes: int
    first: int
    last: int
    kind: str = "intermediate"
    producer: str = ""
    consumers: list[str] = field(default_factory=list)
    first_use: int | None = None
    """The first op that reads or writes it (a malloc or dealloc is not a
    use); None when nothing does."""


@dataclass
class Liveness:
    """Liveness facts of one function."""

    function: str
    buffers: list[LiveBuffer]
    steps: int

    @property
    def intermediates(self) -> list[LiveBuffer]:
        """The buffers a memory plan places."""
        return [b for b in self.buffers if b.kind == "intermediate"]

    @property
    def naive_bytes(self) -> int:
        """Sum of all intermediate buffers: the footprint with no reuse."""
        return sum(b.bytes for b in self.intermediates)

    @property
    def lower_bound(self) -> int:
        """Max over steps of the bytes of simultaneously live intermediates:
        no plan of this op order can use fewer."""
        return self._peak(lambda b: b.first)

    @property
    def lower_bound_by_use(self) -> int:
        """`lower_bound` with each buffer live from its first use (its
        producer writing it) to its last, wherever its malloc sits: in eager
        mode, where every malloc is at entry, the bound a plan of these
        buffers is measured against."""
        return self._peak(lambda b: b.first if b.first_use is None else b.first_use)

    @property
    def live_bytes(self) -> list[int]:
        """Bytes of intermediates live at each step (each from its first step
        to its last; two steps past the end, both 0): `lower_bound` is its max."""
        return self._profile(lambda b: b.first)

    def _profile(self, first: Callable[[LiveBuffer], int]) -> list[int]:
        """Bytes of intermediates live at each step, each from `first(buffer)`
        to its last step."""
        events = [0] * (self.steps + 2)
        for b in self.intermediates:
            events[first(b)] += b.bytes
            events[b.last + 1] -= b.bytes
        live, running = [], 0
        for delta in events:
            running += delta
            live.append(running)
        return live

    def _peak(self, first: Callable[[LiveBuffer], int]) -> int:
        """Max over steps of the bytes of intermediates live at once, each
        from `first(buffer)` to its last step."""
        return max(self._profile(first))

    def bytes_of(self, kind: str) -> int:
        """Total bytes of buffers of one kind (input, output, weight)."""
        return sum(b.bytes for b in self.buffers if b.kind == kind)

    def root_of(self, value: SSAValue) -> SSAValue:
        """The buffer a value lives in (through views)."""
        return _root(value)

    def table(self) -> str:
        """The liveness table as text: one row per buffer, bounds at the bottom."""
        rows = [("name", "shape", "dtype", "bytes", "first", "last", "kind")]
        for b in self.buffers:
            rows.append((b.name, "x".join(map(str, b.shape)) or "scalar", b.dtype, str(b.bytes),
                         str(b.first), str(b.last), b.kind))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"// liveness of @{self.function} ({self.steps} steps)"]
        for r in rows:
            lines.append("// " + "  ".join(c.rjust(w) if c.isdigit() else c.ljust(w) for c, w in zip(r, widths)).rstrip())
        lines.append(f"// max-live lower bound: {self.lower_bound} bytes ({self.lower_bound / 2**20:.2f} MiB)")
        lines.append(f"// naive (sum of intermediates): {self.naive_bytes} bytes ({self.naive_bytes / 2**20:.2f} MiB)")
        return "\n".join(lines)


def root_buffer(value: SSAValue) -> SSAValue:
    """The value that owns the bytes `value` lives in: through every view and
    subview, a malloc / mem_offset result, a function argument or a weight."""
    return _root(value)


def _root(value: SSAValue) -> SSAValue:
    while (source := d.aliased_value(value.owner)) is not None:
        value = source
    return value


def _name(value: SSAValue, index: int) -> str:
    return value.name_hint or f"v{index}"


def buffer_values(op: Operation) -> list[SSAValue]:
    """The values an op creates storage for (tensor results of compute ops,
    or allocated buffers in buffer form)."""
    if isinstance(op, d.DnnComputeOp):
        return list(op.results)
    if isinstance(op, (d.MallocOp, d.MemOffsetOp)):
        return [op.result]
    return []


def _allocated_bytes(value: SSAValue) -> int:
    """The bytes a buffer occupies: a malloc's size (which may exceed its
    type's, e.g. for the sanitizer's guard bytes), else its type's size."""
    if isinstance(value.owner, d.MallocOp):
        return value.owner.size.value.data
    return d.type_bytes(value.type)  # type: ignore[arg-type]


def analyze_function(function: func.FuncOp) -> Liveness:
    """Liveness of every buffer in `function` (see the module docstring)."""
    block = function.body.block
    ops = list(block.ops)
    returned: set[SSAValue] = set()
    last_op = ops[-1] if ops else None
    if isinstance(last_op, func.ReturnOp):
        returned = {v for v in last_op.arguments}
    output_args: set[SSAValue] = {
        arg for i, arg in enumerate(block.args)
        if function.arg_attrs is not None and "dnn.output" in function.arg_attrs.data[i].data
    }

    buffers: dict[SSAValue, LiveBuffer] = {}
    # Printing an element type goes through xDSL's printer: once per element
    # type (cheap to hash, unlike shaped types, whose equality is deep).
    element_facts: dict[Attribute, tuple[str, int]] = {}

    def record(value: SSAValue, kind: str, first: int, producer: str) -> None:
        t = value.type
        assert isinstance(t, TensorType | MemRefType)
        element = t.get_element_type()
        facts = element_facts.get(element)
        if facts is None:
            facts = element_facts[element] = (str(element), d.element_bytes(element))
        dtype, element_size = facts
        shape = tuple(t.get_shape())
        buffers[value] = LiveBuffer(
            name=_name(value, len(buffers)), value=value, shape=shape, dtype=dtype,
            bytes=_allocated_bytes(value) if isinstance(value.owner, d.MallocOp) else math.prod(shape) * element_size,
            first=first, last=first,
            kind=kind, producer=producer,
        )

    for arg in block.args:
        record(arg, "output" if arg in output_args else "input", 0, "")
    # isinstance on op classes is slow (ABC checks); ask once per op class.
    # A dealloc or a view does not read its operand: it is not a use.
    classes: dict[type, tuple[bool, bool, bool]] = {}
    for i, op in enumerate(ops):
        facts = classes.get(type(op))
        if facts is None:
            facts = classes[type(op)] = (
                isinstance(op, d.WeightOp),
                isinstance(op, d.DeallocOp) or op.has_trait(d.AliasesOperand),
                isinstance(op, (d.DnnComputeOp, d.MallocOp, d.MemOffsetOp)),  # see buffer_values
            )
        is_weight, not_a_use, creates_buffers = facts
        if is_weight:
            record(op.result, "weight", i, op.name)
        if creates_buffers:
            for value in buffer_values(op):
                record(value, "output" if value in returned else "intermediate", i, op.name)
        if not_a_use:
            continue
        for operand in op.operands:
            b = buffers.get(_root(operand))
            if b is not None:
                b.last = max(b.last, i)
                b.consumers.append(op.name)
                if b.first_use is None:
                    b.first_use = i
    # Caller-owned and constant buffers live for the whole function.
    for b in buffers.values():
        if b.kind in ("input", "output", "weight"):
            b.first, b.last = 0, max(len(ops) - 1, 0)
    return Liveness(function.sym_name.data, list(buffers.values()), len(ops))


def function_bodies(module: Operation) -> list[func.FuncOp]:
    """The functions of `module` that have a body (declarations have none,
    and every pass leaves them alone). Found without walking into a
    function (the passes call this after every pass: a walk of every op
    of every function cost more than the lifetime check that follows)."""
    if isinstance(module, func.FuncOp):
        return [module] if module.body.blocks else []
    return [function for region in module.regions for block in region.blocks for op in block.ops
            for function in function_bodies(op)]


def analyze_module(module: Operation) -> list[Liveness]:
    """Liveness of every function in a module."""
    return [analyze_function(op) for op in function_bodies(module)]


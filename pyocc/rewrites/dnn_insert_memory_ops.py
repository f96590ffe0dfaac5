"""`dnn-insert-memory-ops{mode=eager|lazy}`: Occamy's liveness-aware insertion
of memory operations. Tensor-form dnn becomes buffer-form dnn.

- Every compute op gets a destination buffer (destination-passing style).
- Graph outputs become trailing function arguments marked `dnn.output`; the op
  that produces an output writes straight into it (a returned view, weight or
  input is copied there with `dnn.copy`).
- Intermediates get a `dnn.malloc` and a `dnn.dealloc`, aligned by element
  type (`d.buffer_alignment`): floats to `alignment`, integers and booleans
  to their element's size (the most each gets: the pool's planning gives a
  buffer of fewer bytes the next power of two of its size,
  `pyocc.planning.fitted_alignment`):
  - eager: all mallocs at function entry, all deallocs before the return:
    fast, largest footprint (the naive sum);
  - lazy: malloc right before the producer, dealloc right after the last use
    (views counted): the smallest footprint of this op order, the max-live
    lower bound, but one allocator call per tensor at run time.
- Kernel scratch: an op whose `scratch_bytes()` is positive (a convolution
  the host runs as im2col + BLAS) gets a `dnn.malloc` of that many bytes as
  its `workspace` operand, allocated like an output (lazy: right before the
  op, freed right after it, so it is live only around the op; eager: at
  entry), so that the pool plans it and the report counts it. Where the
  kernel can run in smaller blocks, the malloc carries `min_size` (the
  op's `scratch_min_bytes()`): dnn-memory-pool then sizes it to the slack
  of the pool at the op, between `min_size` and `size`.
  Only with `scratch=true` (the host with native kernels; cuDNN's workspace
  on target cuda is allocated once at init).
- `memcpy=true` (for targets whose kernels see another memory space) copies
  graph inputs in and outputs out with `dnn.memcpy`; the host needs none.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    i8,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import analyze_function, function_bodies
from pyocc.dialects.dnn import ops as d


@functools.lru_cache(maxsize=4096)
def to_buffer_type(t: Attribute) -> Attribute:
    """tensor<...> -> memref<...> of the same shape and element type, made
    once per tensor type: xDSL checks a type's parameters against their
    constraints on every construction (about a millisecond), and a program
    asks for the same few types over and over (a tiled one, per patch)."""
    if isinstance(t, TensorType):
        return MemRefType(t.get_element_type(), t.get_shape())
    return t


@dataclass(frozen=True)
class DnnInsertMemoryOpsPass(ModulePass):
    """Tensor-form dnn -> buffer-form dnn with malloc/dealloc (module docstring)."""

    name = "dnn-insert-memory-ops"

    mode: str = "lazy"
    """eager: allocate everything at entry, free at exit; lazy: allocate right
    before the producer, free right after the last use."""

    alignment: int = 64
    """Byte alignment of every floating-point buffer and kernel scratch; an
    integer or boolean buffer gets its element's size (`d.buffer_alignment`)."""

    memcpy: bool = False
    """Copy graph inputs/outputs between host and device memory with dnn.memcpy."""

    scratch: bool = False
    """Allocate each op's kernel scratch (`scratch_bytes()`, what the host's
    native kernels need) as its workspace operand."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "tensors")
        if self.mode not in ("eager", "lazy"):
            raise PassFailedException(
                f"dnn-insert-memory-ops: mode must be 'eager' or 'lazy', got '{self.mode}'"
            )
        if self.alignment < 1 or self.alignment & (self.alignment - 1):
            raise PassFailedException(
                f"dnn-insert-memory-ops: alignment must be a power of two, got {self.alignment}"
            )
        for function in function_bodies(op):
            insert_memory_ops(function, self.mode, self.alignment, self.memcpy, self.scratch)


def insert_memory_ops(function: func.FuncOp, mode: str, alignment: int = 64, memcpy: bool = False,
                      scratch: bool = False) -> None:
    """Rewrite one tensor-form function into buffer form, in place."""
    block = function.body.block
    ret = block.last_op
    if not isinstance(ret, func.ReturnOp):
        raise PassFailedException(f"dnn-insert-memory-ops: @{function.sym_name.data} does not end in func.return")
    for o in block.ops:
        if o.name.startswith("onnx."):
            raise PassFailedException(
                f"dnn-insert-memory-ops: {o.name} is not lowered yet; run convert-onnx-to-dnn first"
            )
        if isinstance(o, d.DnnComputeOp) and o.on_buffers:
            raise PassFailedException(
                f"dnn-insert-memory-ops: @{function.sym_name.data} is already in buffer form"
            )
    liveness = analyze_function(function)
    last_use = {b.value: b.last for b in liveness.intermediates}
    old_ops = list(block.ops)

    # The new signature: inputs, then one destination argument per output.
    in_types = [to_buffer_type(a.type) for a in block.args]
    out_types = [to_buffer_type(v.type) for v in ret.arguments]
    new_block = Block(arg_types=[*in_types, *out_types])
    mapping: dict[SSAValue, SSAValue] = {}
    for old, new in zip(block.args, new_block.args):
        new.name_hint = old.name_hint
        mapping[old] = new
    out_args = list(new_block.args[len(in_types):])
    for value, arg in zip(ret.arguments, out_args):
        arg.name_hint = (value.name_hint or "out") + "_out" if value.name_hint else "out"

    # Which compute result writes straight into which output argument.
    # (With memcpy, outputs are computed in device buffers and copied out.)
    direct_output: dict[SSAValue, SSAValue] = {}
    for value, arg in zip(ret.arguments, out_args):
        if not memcpy and isinstance(value.owner, d.DnnComputeOp) and value not in direct_output:
            direct_output[value] = arg

    returned = set(ret.arguments)
    entry_allocs: list[Operation] = []
    body: list[Operation] = []
    frees_after: dict[int, list[SSAValue]] = {}
    exit_frees: list[SSAValue] = []

    for index, op in enumerate(old_ops):
        if op is ret:
            break
        if isinstance(op, d.WeightOp | d.ViewOp):
            new_op = _retype(op, mapping)
            body.append(new_op)
            continue
        if not isinstance(op, d.DnnComputeOp):
            raise PassFailedException(f"dnn-insert-memory-ops: cannot place {op.name}")
        destinations: list[SSAValue] = []
        for result in op.results:
            if result in direct_output:
                destinations.append(direct_output[result])
                mapping[result] = direct_output[result]
                continue
            buffer_type = to_buffer_type(result.type)
            alloc = d.MallocOp(buffer_type, d.buffer_alignment(buffer_type, alignment))  # type: ignore[arg-type]
            alloc.result.name_hint = result.name_hint
            (entry_allocs if mode == "eager" else body).append(alloc)
            destinations.append(alloc.result)
            mapping[result] = alloc.result
            if mode == "eager":
                exit_frees.append(alloc.result)
            else:
                # a returned value is copied out at the end (memcpy), so it is freed after that
                last = len(old_ops) if result in returned else last_use.get(result, index)
                frees_after.setdefault(last, []).append(alloc.result)
        workspace = _scratch_malloc(op, alignment) if scratch else None
        if workspace is not None:
            (entry_allocs if mode == "eager" else body).append(workspace)
        body.append(_buffer_form(op, mapping, destinations, workspace.result if workspace else None))
        if workspace is not None and mode == "eager":
            exit_frees.append(workspace.result)
        elif workspace is not None:
            body.append(d.DeallocOp(workspace.result))
        for buffer in frees_after.pop(index, []):
            body.append(d.DeallocOp(buffer))
    # Buffers whose last use is the return (copied out at the end) or a view.
    late_frees = [b for step in sorted(frees_after) for b in frees_after[step]]

    # Outputs that are not written in place by their producer get a copy.
    tail: list[Operation] = []
    for value, arg in zip(ret.arguments, out_args):
        if direct_output.get(value) is arg:
            continue
        source = mapping[value]
        tail.append(_memcpy(source, arg, "device_to_host") if memcpy else copy_op(source, arg))
    for buffer in [*late_frees, *exit_frees]:
        tail.append(d.DeallocOp(buffer))

    new_block.add_ops([*entry_allocs, *body, *tail, func.ReturnOp()])
    if memcpy:
        _add_io_copies(new_block, len(in_types), lazy=mode != "eager")

    arg_attrs = list(function.arg_attrs.data) if function.arg_attrs is not None else [DictionaryAttr({})] * len(in_types)
    res_attrs = list(function.res_attrs.data) if function.res_attrs is not None else [DictionaryAttr({})] * len(out_args)
    out_attrs = [DictionaryAttr({**r.data, "dnn.output": UnitAttr()}) for r in res_attrs]
    new_function = func.FuncOp(
        function.sym_name.data,
        ([a.type for a in new_block.args], []),
        Region(new_block),
        arg_attrs=ArrayAttr([*arg_attrs, *out_attrs]),
    )
    replace_function(function, new_function)


def replace_function(function: func.FuncOp, new_function: func.FuncOp) -> None:
    """Put `new_function` where `function` is and erase `function` (its
    body's uses dropped first: the new body took its values' places)."""
    parent = function.parent_block()
    assert parent is not None
    parent.insert_op_before(new_function, function)
    function.detach()
    for old in reversed(list(function.body.block.ops)):
        old.drop_all_references()
    function.erase(safe_erase=False)


def _retype(op: Operation, mapping: dict[SSAValue, SSAValue]) -> Operation:
    """A weight or view with memref types (operands through `mapping`)."""
    new_op = op.__class__.create(
        operands=[mapping[o] for o in op.operands],
        result_types=[to_buffer_type(r.type) for r in op.results],
        properties=dict(op.properties),
        attributes=dict(op.attributes),
    )
    for old, new in zip(op.results, new_op.results):
        new.name_hint = old.name_hint
        mapping[old] = new
    return new_op


def _scratch_malloc(op: d.DnnComputeOp, alignment: int) -> d.MallocOp | None:
    """The buffer of `op`'s kernel scratch, or None when it needs none."""
    size = op.scratch_bytes()
    if size <= 0:
        return None
    if not any(name == "workspace" for name, _ in op.get_irdl_definition().operands):
        raise PassFailedException(f"dnn-insert-memory-ops: {op.name} declares {size} bytes of scratch "
                                  "but has no workspace operand")
    alloc = d.MallocOp(_bytes_type(size), alignment)
    least = op.scratch_min_bytes()
    if 0 < least < size:
        alloc.properties["min_size"] = d.i64_attr(least)
    alloc.result.name_hint = f"{op.results[0].name_hint or 'op'}_scratch"
    return alloc


@functools.lru_cache(maxsize=4096)
def _bytes_type(size: int) -> MemRefType:
    """memref<size x i8>, a kernel scratch's type, made once per size (see
    to_buffer_type)."""
    return MemRefType(i8, [size])


def _buffer_form(op: d.DnnComputeOp, mapping: dict[SSAValue, SSAValue], destinations: list[SSAValue],
                 workspace: SSAValue | None = None) -> Operation:
    """The same kernel, reading mapped buffers and writing `destinations`
    (and `workspace`, when given, as its scratch)."""
    operands: dict[str, list[SSAValue]] = {}
    for name, _ in op.get_irdl_definition().operands:
        value = getattr(op, name)
        group = list(value) if isinstance(value, tuple | list) else ([] if value is None else [value])
        operands[name] = destinations if name in ("out", "outs") else [mapping[v] for v in group]
    if workspace is not None:
        operands["workspace"] = [workspace]
    return type(op).build(operands, [], op.properties, op.attributes)


def copy_op(source: SSAValue, target: SSAValue) -> Operation:
    """A buffer-form dnn.copy of `source` into `target`."""
    return d.CopyOp.build({"x": source, "out": target})


def _memcpy(source: SSAValue, target: SSAValue, kind: str) -> Operation:
    return d.MemcpyOp.create(operands=[source, target], properties={
        "kind": StringAttr(kind), "size": d.i64_attr(d.type_bytes(source.type))})


def _add_io_copies(block: Block, n_inputs: int, lazy: bool) -> None:
    """Device targets: stage each graph input into a device buffer at entry,
    freed right after its last reader in lazy mode, before the return in
    eager mode (like every other buffer of that mode)."""
    first = block.first_op
    ret = block.last_op
    assert ret is not None
    for arg in list(block.args[:n_inputs]):
        staged = d.MallocOp(arg.type)  # type: ignore[arg-type]
        copy = _memcpy(arg, staged.result, "host_to_device")
        arg.replace_uses_with_if(staged.result, lambda use: use.operation is not copy)
        block.insert_ops_before([staged, copy], first)
        free = d.DeallocOp(staged.result)
        if lazy:
            block.insert_op_after(free, _last_reader(block, staged.result))
        else:
            block.insert_op_before(free, ret)


def _last_reader(block: Block, buffer: SSAValue) -> Operation:
    """The last op that uses `buffer` or a view of it."""
    aliases = {buffer}
    last = buffer.owner
    assert isinstance(last, Operation)
    for op in block.ops:
        if any(v in aliases for v in op.operands):
            if isinstance(op, d.ViewOp | d.SubviewOp):
                aliases.add(op.results[0])
            last = op
    return last

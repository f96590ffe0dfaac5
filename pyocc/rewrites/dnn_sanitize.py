"""`dnn-sanitize{guard=64}`: make a wrong memory plan fail loudly.

A planner bug does not crash: two live tensors share bytes and the numbers
come out wrong, or only slightly wrong. This pass, run on buffer form with
malloc/dealloc (before dnn-memory-pool, so the plan includes what it adds),
turns such bugs into NaNs and named errors, like AddressSanitizer does for C:

    %b = dnn.malloc {size = N + guard}          the guard lives behind the data
    dnn.sanitize outs(%b) {action = "poison"}    NaN in, guard armed (0xFD)
    dnn.conv ins(...) outs(%b)                   the producer writes %b
    dnn.sanitize outs(%b) {action = "check", writer = "dnn.conv", buffer = "b"}
    ...                                          readers
    dnn.sanitize outs(%b) {action = "poison"}    dead: NaN again
    dnn.dealloc %b

- Poison before the first write: a reader that runs before the producer, or
  a plan that hands a live tensor's bytes to a new one, reads or spreads NaN.
- Poison after the last read: a plan that lets two tensors overlap in time
  and space shows NaN in the output instead of a plausible wrong number.
- Guard bytes: after each op that writes a buffer, the bytes just past its
  end must still be 0xFD; if not, the run stops with an error naming the
  buffer and the op.

Costs: `guard` extra bytes per buffer, and a kernel call per probe. Use it
in tests and with `pyocc run --sanitize`, not in production.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import function_bodies
from pyocc.dialects.dnn import ops as d


def _probe(buffer: SSAValue, action: str, guard: int, writer: str = "") -> d.SanitizeOp:
    """A dnn.sanitize op on `buffer`."""
    probe = d.SanitizeOp.build({"out": buffer}, properties={
        "action": StringAttr(action), "guard": IntegerAttr(guard, i64),
        "buffer": StringAttr(buffer.name_hint or "?"),
    })
    if writer:
        probe.properties["writer"] = StringAttr(writer)
    return probe


def sanitize_function(function: func.FuncOp, guard: int) -> int:
    """Insert the probes into one buffer-form function; returns how many."""
    block = function.body.block
    probes = 0
    for op in list(block.ops):
        if isinstance(op, d.MallocOp):
            op.properties["size"] = IntegerAttr(op.size.value.data + guard, i64)
            Rewriter.insert_op(_probe(op.result, "poison", guard), InsertPoint.after(op))
            probes += 1
        elif isinstance(op, d.DeallocOp):
            if isinstance(op.operands[0].owner, d.MallocOp):
                op.properties["size"] = op.operands[0].owner.properties["size"]
            Rewriter.insert_op(_probe(op.operands[0], "poison", 0), InsertPoint.before(op))
            probes += 1
        elif isinstance(op, d.DnnComputeOp) and not isinstance(op, d.SanitizeOp):
            checks: list[Operation] = [
                _probe(out, "check", guard, writer=op.name)
                for out in op.destinations() if isinstance(out.owner, d.MallocOp) and guard
            ]
            if checks:
                Rewriter.insert_op(checks, InsertPoint.after(op))
                probes += len(checks)
    return probes


@dataclass(frozen=True)
class DnnSanitizePass(ModulePass):
    """Poison dead buffers and guard live ones (see the module docstring)."""

    name = "dnn-sanitize"

    guard: int = 64
    """Guard bytes behind every buffer (0: poison only, no bounds checks)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "buffers")
        if self.guard < 0:
            raise PassFailedException(f"dnn-sanitize: guard must be >= 0 bytes, got {self.guard}")
        functions = function_bodies(op)
        if any(isinstance(o, d.PoolInitOp | d.MemOffsetOp) for f in functions for o in f.walk()):
            raise PassFailedException("dnn-sanitize: run it before dnn-memory-pool (it needs malloc/dealloc)")
        for function in functions:
            sanitize_function(function, self.guard)

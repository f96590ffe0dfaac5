"""A linear check that no dnn op touches a buffer outside its lifetime.

In buffer form a buffer's life runs from its `dnn.malloc` to its
`dnn.dealloc`; views (`dnn.view`, `dnn.subview`) share it. Reading or writing a buffer (or
a view of it) after its dealloc, or freeing it twice, is a bug in a pass,
and one that only shows up as wrong numbers at run time. The check walks
each function once, so it can run after every pass (pyocc.pipelines does)
even on 20,000-op models; `pyocc-opt -p dnn-verify-lifetimes` runs it on
its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import function_bodies
from pyocc.dialects.dnn import ops as d


def _root(value: SSAValue, roots: dict[SSAValue, SSAValue]) -> SSAValue:
    """The buffer a value lives in, through views and subviews (memoised in `roots`)."""
    if value in roots:
        return roots[value]
    source = d.aliased_value(value.owner)
    root = value if source is None else _root(source, roots)
    roots[value] = root
    return root


def check_function_lifetimes(function: func.FuncOp) -> None:
    """Raise VerifyException if an op of `function` uses a freed buffer."""
    roots: dict[SSAValue, SSAValue] = {}
    freed: dict[SSAValue, Operation] = {}
    for op in function.body.block.ops:
        for operand in op.operands:
            root = _root(operand, roots)
            if root in freed:
                what = "frees it again" if isinstance(op, d.DeallocOp) else "uses it"
                raise VerifyException(
                    f"{op.name} {what} after its dnn.dealloc: buffer %{root.name_hint or '?'} is dead there"
                )
        if isinstance(op, d.DeallocOp):
            freed[_root(op.operands[0], roots)] = op


def check_lifetimes(module: Operation) -> None:
    """check_function_lifetimes on every function of `module`."""
    for function in function_bodies(module):
        check_function_lifetimes(function)


@dataclass(frozen=True)
class DnnVerifyLifetimesPass(ModulePass):
    """Fail if any op uses a buffer after its dealloc (see module docstring)."""

    name = "dnn-verify-lifetimes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "buffers", "pool")
        check_lifetimes(op)

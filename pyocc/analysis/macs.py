"""Multiply-accumulates of a module: the compute cost dnn-tile trades for
memory (each op's count is its `macs()`, declared on the op class)."""

from __future__ import annotations

from xdsl.ir import Operation

from pyocc.dialects.dnn import ops as d


def module_macs(module: Operation) -> int:
    """The MACs of one run: the sum of every compute op's `macs()`."""
    return sum(op.macs() for op in module.walk() if isinstance(op, d.DnnComputeOp))

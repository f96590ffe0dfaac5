"""`dnn-print-liveness`: print the liveness table of every function (as `//`
comments, before the IR) and leave the IR unchanged."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from pyocc.analysis.ir_form import require_form
from pyocc.analysis.liveness import analyze_module


@dataclass(frozen=True)
class DnnPrintLivenessPass(ModulePass):
    """Print name, shape, dtype, bytes, first, last and kind of each buffer,
    with the max-live lower bound and the naive sum at the bottom."""

    name = "dnn-print-liveness"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "tensors", "buffers", "pool")
        for liveness in analyze_module(op):
            print(liveness.table(), file=sys.stdout)

"""Which form a module is in (the onnx dialect, tensor-form dnn, buffer-form
dnn, one planned pool), and the one check every pass makes first: a pass
given IR of another form says in one line which form it needs and which
pass produces it, instead of silently doing nothing.

    onnx      the onnx dialect          (the ONNX frontend: pyocc-opt model.onnx)
    tensors   tensor-form dnn           (convert-onnx-to-dnn)
    buffers   buffer-form dnn           (dnn-insert-memory-ops: dnn.malloc / dnn.dealloc)
    pool      one planned pool          (dnn-memory-pool: dnn.pool_init / dnn.mem_offset)

An analysis: it reads the IR and never rewrites it.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.liveness import function_bodies
from pyocc.dialects.dnn import ops as d

FORMS: dict[str, tuple[str, str]] = {
    "onnx": ("the onnx dialect", "the ONNX frontend"),
    "tensors": ("tensor-form dnn", "convert-onnx-to-dnn"),
    "buffers": ("buffer-form dnn (dnn.malloc/dnn.dealloc)", "dnn-insert-memory-ops"),
    "pool": ("a planned pool (dnn.pool_init/dnn.mem_offset)", "dnn-memory-pool"),
}
"""Form -> (what it is called, the pass that produces it), in pipeline order."""


def function_form(function: func.FuncOp) -> str | None:
    """The form of one function body, or None when it holds nothing that
    tells (only a return: every pass may run on it)."""
    ops = list(function.body.walk())
    if any(op.name.startswith("onnx.") for op in ops):
        return "onnx"
    if any(isinstance(op, d.PoolInitOp) for op in ops):
        return "pool"
    if (any(isinstance(arg.type, MemRefType) for arg in function.body.block.args)
            or any(isinstance(op, (d.MallocOp, d.DeallocOp, d.MemOffsetOp)) for op in ops)):
        return "buffers"
    if any(op.name.startswith("dnn.") for op in ops):
        return "tensors"
    return None


def require_form(module: Operation, pass_name: str, *forms: str) -> None:
    """Raise PassFailedException, in one line, unless every function of
    `module` is in one of `forms` (or shows no form). The line names the
    form the pass needs and the pass that produces it."""
    for function in function_bodies(module):
        form = function_form(function)
        if form is None or form in forms:
            continue
        want = " or ".join(FORMS[f][0] for f in forms)
        producer = FORMS[forms[0]][1]
        order = list(FORMS)
        if order.index(form) < order.index(forms[0]):
            advice = f"run {producer} first"
        elif FORMS[form][1] == pass_name:
            advice = "it has run already"
        else:
            advice = f"run {pass_name} before {FORMS[form][1]}"
        raise PassFailedException(
            f"{pass_name} needs {want}, which {producer} produces, but @{function.sym_name.data} "
            f"is in {FORMS[form][0]}; {advice}")

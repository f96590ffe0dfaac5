"""Writing a fusion rule: a worked example for tutorial chapter 5.

    python -m pyocc.examples.my_fusion_rule tiny.onnx

A rule of `dnn-fuse` is data: a pattern to match (read from the op that is
replaced back to its producers) and a function that builds the replacement.
This file writes one rule from scratch, `relu(conv(x)) => conv{relu}(x)`,
runs it alone on a model's tensor-form dnn IR, and prints the compute ops
before and after, so you can see which places matched and which did not.
The pattern names op classes (`d.UnaryOp`, `d.ConvOp`) and their fields,
and is checked against the op definitions when the `Rule` is built: a
misspelt field is an error naming the rule, the op and the field. The real
table, `RULES` in pyocc/rewrites/dnn_fuse.py, has this rule in a more
general form (`conv-activation`, any fusable activation).
"""

from __future__ import annotations

import sys

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker

from pyocc.dialects.dnn import ops as d
from pyocc.frontend.onnx_import import import_model
from pyocc.lowering.convert_onnx_to_dnn import ConvertOnnxToDnnPass
from pyocc.rewrites.dnn_fuse import fusion_patterns
from pyocc.rewrites.fusion import Match, Rule, op


def conv_with_relu(m: Match) -> Operation:
    """produce: the matched conv, rebuilt with a fused ReLU."""
    return m.rebuild("conv", activation="relu")


# relu(conv(x))  =>  conv{activation=relu}(x)
MY_RULE = Rule(
    "my-conv-relu",
    match=op(d.UnaryOp, "relu", fn="relu", x=op(d.ConvOp, "conv", activation=None)),
    produce=conv_with_relu,
)
"""Match a dnn.unary computing relu whose input `x` is a dnn.conv without an
activation yet; the engine adds the condition every rule needs: the conv's
result has no other reader, so the tensor between them disappears."""


def compute_ops(module: ModuleOp) -> list[str]:
    """One line per compute op: `%result = dnn.op(fn) {activation = ...}`."""
    lines = []
    for operation in module.walk():
        if isinstance(operation, d.DnnComputeOp) and operation.results:
            fn = operation.properties.get("fn")
            fused = operation.properties.get("activation")
            name = operation.name + (f"({fn.data})" if fn is not None else "")
            suffix = f" {{activation = {fused.data}}}" if fused is not None else ""
            lines.append(f"%{operation.results[0].name_hint} = {name}{suffix}")
    return lines


def main(path: str) -> None:
    """Lower `path` to tensor-form dnn, print its ops, apply MY_RULE, print again."""
    module = import_model(path)
    ConvertOnnxToDnnPass().apply(Context(), module)
    print("before:", *compute_ops(module), sep="\n  ")
    patterns = GreedyRewritePatternApplier(fusion_patterns([MY_RULE]))
    PatternRewriteWalker(patterns, apply_recursively=True).rewrite_module(module)
    module.verify()
    print("after my-conv-relu:", *compute_ops(module), sep="\n  ")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tiny.onnx")

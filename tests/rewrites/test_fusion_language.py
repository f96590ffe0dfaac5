"""The fusion pattern language checks a rule when it is built: a field the
op does not have, a pattern where a value belongs (or the reverse), or an op
named by a string is an error naming the rule, the op and the field; and a
correctly spelled condition really holds the fusion back."""

from __future__ import annotations

import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType, f32
from xdsl.ir import Block, Region
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker

from pyocc.dialects.dnn import ops as d
from pyocc.rewrites.dnn_fuse import RULES, fusion_patterns, with_activation
from pyocc.rewrites.fusion import FusionRuleError, Rule, op, var


def sigmoid_into_conv(**conv_fields: object) -> Rule:
    """sigmoid(conv(x)) => conv{activation=sigmoid}(x), with the conv's fields."""
    return Rule("sigmoid-into-conv",
                match=op(d.UnaryOp, "act", fn="sigmoid", x=op(d.ConvOp, "conv", **conv_fields)),
                produce=with_activation("conv"))


def test_misspelt_field_is_an_error_naming_rule_op_and_field() -> None:
    """`activaton=None` used to read as "the property is absent" and fused a
    sigmoid onto a conv that already had a relu, dropping the relu."""
    with pytest.raises(FusionRuleError) as error:
        sigmoid_into_conv(activaton=None)
    assert str(error.value) == ("fusion rule 'sigmoid-into-conv': dnn.conv (pattern 'conv') has no field "
                                "'activaton'; did you mean 'activation'?")


def test_every_class_of_a_pattern_is_checked() -> None:
    """A pattern over two op classes needs the field on both."""
    with pytest.raises(FusionRuleError, match="dnn.gemm .* has no field 'pads'"):
        Rule("r", match=op(d.UnaryOp, "act", x=op((d.ConvOp, d.GemmOp), "p", pads=None)), produce=with_activation("p"))


def test_operand_takes_a_pattern_and_property_a_value() -> None:
    with pytest.raises(FusionRuleError, match="operand 'x' takes a pattern"):
        Rule("r", match=op(d.UnaryOp, "act", x="conv"), produce=with_activation("conv"))
    with pytest.raises(FusionRuleError, match="'fn' is a property; it takes a value, not a pattern"):
        Rule("r", match=op(d.UnaryOp, "act", fn=var("f")), produce=with_activation("conv"))
    with pytest.raises(FusionRuleError, match="'conv' is not a dnn compute op class"):
        op("conv", "conv")


def test_the_rule_table_is_well_formed() -> None:
    """Every rule of RULES passed the check (it ran at import); names are unique."""
    assert len({rule.name for rule in RULES}) == len(RULES)
    assert all(isinstance(rule.match.classes[0], type) for rule in RULES)


def test_spelled_condition_keeps_the_relu() -> None:
    """With `activation=None` spelled right, a conv that has a relu is not
    given a sigmoid on top."""
    x_type, w_type = TensorType(f32, [1, 2, 4, 4]), TensorType(f32, [2, 2, 1, 1])
    block = Block(arg_types=[x_type, w_type])
    conv = d.ConvOp.build({"x": block.args[0], "w": block.args[1]}, [x_type], {"activation": StringAttr("relu")})
    sigmoid = d.UnaryOp.build({"x": conv.results[0]}, [x_type], {"fn": StringAttr("sigmoid")})
    block.add_ops([conv, sigmoid, func.ReturnOp(sigmoid.results[0])])
    module = ModuleOp([func.FuncOp("f", ((x_type, w_type), (x_type,)), Region(block))])
    module.verify()
    walker = PatternRewriteWalker(GreedyRewritePatternApplier(fusion_patterns([sigmoid_into_conv(activation=None)])))
    walker.rewrite_module(module)
    assert [o.name for o in block.ops] == ["dnn.conv", "dnn.unary", "func.return"]
    assert block.first_op.properties["activation"] == StringAttr("relu")
    # the same conv without an activation does take the sigmoid: the rule is live
    del conv.properties["activation"]
    walker.rewrite_module(module)
    assert [o.name for o in block.ops] == ["dnn.conv", "func.return"]
    assert block.first_op.properties["activation"] == StringAttr("sigmoid")

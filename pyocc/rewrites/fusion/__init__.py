"""The fusion pattern language (`language`) and the engine that applies its
rules as xDSL rewrite patterns (`engine`); the rule table is `RULES` in
pyocc/rewrites/dnn_fuse.py."""

from pyocc.rewrites.fusion.engine import RulePattern, compile_rules
from pyocc.rewrites.fusion.language import (
    Condition,
    FusionRuleError,
    Match,
    OpPattern,
    Rule,
    Var,
    const,
    op,
    prop_value,
    var,
)

__all__ = ["Condition", "FusionRuleError", "Match", "OpPattern", "Rule", "RulePattern", "Var", "compile_rules", "const",
           "op", "prop_value", "var"]

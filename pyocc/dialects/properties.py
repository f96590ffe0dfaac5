"""Property attributes as Python values: the one conversion both dialects'
readers use (`OnnxOp.int_attr` and friends, `DnnComputeOp.kernel_kwargs`), so
an integer, float, string or integer/float array property means the same
Python value wherever it is read."""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, FloatAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute

#: what a property becomes in Python
PropertyValue = int | float | str | list[int] | list[float]


def property_value(attr: Attribute) -> PropertyValue:
    """The Python value of an integer, float, string or dense-array property.

    Raises TypeError for any other attribute (the op definitions allow no
    other kind of kernel or ONNX property)."""
    if isinstance(attr, IntegerAttr | FloatAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, DenseArrayBase):
        return list(attr.get_values())
    raise TypeError(f"the property {attr} has no Python value form (expected an integer, float, string or array)")

"""The value of a `dnn.weight` as a numpy array, and a `dnn.weight` made
from one: what compile-time folding (convert-onnx-to-dnn's batch norm,
dnn-fuse's folded scales) reads and writes.

Not imported by the dialect itself (`pyocc.dialects.dnn`), so loading the
dialect does not load numpy.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, DenseResourceAttr, TensorType
from xdsl.ir import Attribute

from pyocc.dialects.dnn import ops as d
from pyocc.weights import INLINE_LIMIT, load_bytes, store_array

_NUMPY_DTYPES: dict[str, type] = {
    "f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64,
    "i32": np.int32, "i16": np.int16, "i8": np.int8, "ui8": np.uint8, "i1": np.bool_,
}


def numpy_dtype(t: Attribute) -> np.dtype:
    """numpy dtype of an xDSL element type."""
    return np.dtype(_NUMPY_DTYPES[str(t)])


def weight_array(op: d.WeightOp) -> np.ndarray:
    """The numpy value of a dnn.weight (compile-time folding needs it)."""
    t = op.result.type
    dtype = numpy_dtype(t.get_element_type())
    shape = tuple(t.get_shape())
    if op.splat is not None:
        return np.full(shape, op.splat.get_values()[0], dtype=dtype)
    value = op.value
    if isinstance(value, DenseResourceAttr):
        return np.frombuffer(load_bytes(value), dtype=dtype).reshape(shape)
    return np.array(value.get_values(), dtype=dtype).reshape(shape)


def weight_from_array(name: str, array: np.ndarray, ttype: TensorType) -> d.WeightOp:
    """A dnn.weight holding `array` (inline when tiny, else a blob)."""
    flat = array.reshape(-1)
    if flat.size and (flat == flat[0]).all():
        splat = DenseIntOrFPElementsAttr.from_list(TensorType(ttype.element_type, [1]), [flat[0].item()])
        return d.WeightOp.create(result_types=[ttype], properties={"splat": splat})
    if array.size <= INLINE_LIMIT:
        value = DenseIntOrFPElementsAttr.from_list(ttype, flat.tolist())
    else:
        value = store_array(name, array, ttype)
    return d.WeightOp.create(result_types=[ttype], properties={"value": value})

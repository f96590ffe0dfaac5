"""Host kernels: one numpy function per DNN operator, ONNX semantics.

Compiled models call one kernel per operation with views into the planned
memory pool. Every kernel writes its result into the keyword-only ``out``
(or ``outs``) array and never returns or rebinds it; inputs are never
modified; ``out`` may hold stale data, so it is never read before written.
Aliasing: unary, binary, channel_affine, batch_norm, softmax, log_softmax
and layer_norm are correct when ``out`` is (for binary: the same-shaped)
one of their data inputs (in-place reuse); so are variadic with ``out`` its
first input, where with ``out`` its ``b``, conv with ``out`` its
``residual`` and insert_slice with ``out`` its ``dest`` (dnn-coalesce relies on exactly this list); every other kernel
assumes ``out`` does not overlap its inputs.

The kernels live in ``pyocc.runtime.kernels`` by family; this module is the
single place callers import them from.
"""

from pyocc.runtime.kernels.conv import conv, conv_transpose, preact_conv
from pyocc.runtime.kernels.elementwise import (
    ACTIVATIONS,
    binary,
    cast,
    copy,
    unary,
    variadic,
    where,
)
from pyocc.runtime.kernels.linalg import gemm, matmul
from pyocc.runtime.kernels.normalization import (
    attention_softmax,
    batch_norm,
    channel_affine,
    layer_norm,
    log_softmax,
    lrn,
    softmax,
)
from pyocc.runtime.kernels.pool import average_pool, global_average_pool, global_max_pool, max_pool
from pyocc.runtime.kernels.reduction import arg_max, arg_min, reduce
from pyocc.runtime.kernels.resize import resize
from pyocc.runtime.kernels.sanitize import sanitize
from pyocc.runtime.kernels.tensor import (
    concat,
    constant_of_shape,
    empty,
    cum_sum,
    expand,
    gather,
    gather_elements,
    gather_nd,
    insert_slice,
    pad,
    range,
    scatter_elements,
    scatter_nd,
    slice,
    split,
    tile,
    top_k,
    transpose,
)

__all__ = [
    "ACTIVATIONS",
    "arg_max",
    "attention_softmax",
    "arg_min",
    "average_pool",
    "batch_norm",
    "binary",
    "cast",
    "channel_affine",
    "concat",
    "constant_of_shape",
    "empty",
    "conv",
    "conv_transpose",
    "copy",
    "cum_sum",
    "expand",
    "gather",
    "gather_elements",
    "gather_nd",
    "insert_slice",
    "gemm",
    "global_average_pool",
    "global_max_pool",
    "layer_norm",
    "log_softmax",
    "lrn",
    "matmul",
    "max_pool",
    "pad",
    "preact_conv",
    "range",
    "reduce",
    "resize",
    "sanitize",
    "scatter_elements",
    "scatter_nd",
    "slice",
    "softmax",
    "split",
    "tile",
    "top_k",
    "transpose",
    "unary",
    "variadic",
    "where",
]

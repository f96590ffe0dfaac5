"""Each compute op's `macs()` (declared on the op class) and a module's sum,
checked against the textbook counts."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from xdsl.context import Context

from pyocc.analysis.macs import module_macs
from pyocc.dialects.dnn import ops as d
from pyocc.frontend.onnx_import import import_model
from pyocc.pipelines import Options, run_passes, tensor_passes


def test_macs_of_conv_pool_gemm() -> None:
    w = numpy_helper.from_array(np.ones((8, 2, 3, 3), np.float32), "w")  # group 2: 4 input channels, 2 per group
    g = numpy_helper.from_array(np.ones((8 * 4 * 4, 10), np.float32), "g")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], group=2),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "g"], ["y"])]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, g])
    module = import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), None)
    run_passes(Context(), module, tensor_passes(Options(fuse=False)))
    by_kind = {op.name: op.macs() for op in module.walk() if isinstance(op, d.DnnComputeOp)}
    conv = 8 * 8 * 8 * 2 * 3 * 3  # outputs x (in channels per group) x taps
    pool = 8 * 4 * 4 * 2 * 2
    gemm = 10 * 128
    assert by_kind == {"dnn.conv": conv, "dnn.max_pool": pool, "dnn.gemm": gemm}
    assert module_macs(module) == conv + pool + gemm

"""The `dnn` dialect (Occamy's DNN IR): kernel-sized compute ops on tensors or
buffers, weights, views and memory operations. See ops.py for the rules."""

from xdsl.ir import Dialect

from pyocc.dialects.dnn.ops import DNN_OPS

Dnn = Dialect("dnn", DNN_OPS, [])

"""The `dnn` dialect (Occamy's DNN IR): kernel-sized compute ops on tensors or
buffers, weights, views and memory operations (ops.py), and the scratchpad's
asynchronous DMA transfers (dma.py). See ops.py for the rules."""

from xdsl.ir import Dialect

from pyocc.dialects.dnn.dma import DMA_OPS, DMA_TYPES
from pyocc.dialects.dnn.ops import DNN_OPS

Dnn = Dialect("dnn", [*DNN_OPS, *DMA_OPS], DMA_TYPES)

"""Small ONNX graphs in the style of well-known architectures, built with
onnx.helper so the tests need no torch and no files.

Each builder mimics the operator patterns an exporter emits for one
architecture (MobileNetV2, UNet, BERT, GPT-2, ViT) at toy sizes (hidden
32-64, sequences of 16, 32x32 images) so that a graph compiles and runs in
well under a second. Weights are seeded random initializers, scaled by
1/sqrt(fan_in) so activations stay O(1) through the layers: large values
would saturate softmax and tanh and hide wrong numbers.

The `*_symbolic` builders (encoder, BERT-, GPT-2-style) give the sequence
length as an ONNX dim_param, "sequence", for `--dim sequence=MAX` (the
ViT-style one its batch, "batch"); they are not in GRAPHS (those run at fixed shapes) but in tests/symbolic/.

`random_inputs(model, seed)` makes matching inputs: normal floats, token ids
in range for int64 ids, and 0/1 attention masks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pyocc.examples.unet_skips import build as unet_skips_example

#: name of an int64 graph input -> exclusive upper bound of its values
ID_RANGES_KEY = "pyocc.id_range"


class GraphBuilder:
    """Collects nodes and initializers with unique names; `op` returns the
    name of the node's (first) output so graphs read like expressions."""

    def __init__(self, name: str, seed: int) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.id_ranges: dict[str, int] = {}
        self.count = 0

    def fresh(self, hint: str) -> str:
        """A new unique tensor name starting with `hint`."""
        self.count += 1
        return f"{hint}_{self.count}"

    def input(self, name: str, elem_type: int, shape: Sequence[int], id_range: int | None = None) -> str:
        """Declare a graph input; `id_range` marks int64 token ids in [0, id_range)."""
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        if id_range is not None:
            self.id_ranges[name] = id_range
        return name

    def const(self, value: Any, dtype: Any = np.float32, hint: str = "c") -> str:
        """An initializer holding exactly `value`."""
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, shape: Sequence[int], fan_in: int | None = None, hint: str = "w") -> str:
        """A random float32 weight of `shape`, scaled by 1/sqrt(fan_in)
        (default: the product of all but the first dimension)."""
        fan_in = fan_in or max(1, math.prod(shape[1:]))
        value = self.rng.standard_normal(list(shape), dtype=np.float32) / np.float32(math.sqrt(fan_in))
        return self.const(value, hint=hint)

    def bias(self, size: int, hint: str = "b") -> str:
        """A small random float32 bias vector."""
        return self.const(self.rng.standard_normal(size, dtype=np.float32) * np.float32(0.1), hint=hint)

    def op(self, op_type: str, *inputs: str, outputs: int = 1, **attrs: Any) -> Any:
        """Append a node; returns its output name (a list if `outputs` > 1)."""
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=names[0], **attrs))
        return names[0] if outputs == 1 else names

    def model(self, outputs: Sequence[tuple[str, int]], opset: int = 17) -> onnx.ModelProto:
        """The finished, checked model; `outputs` are (tensor name, elem type)."""
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs,
            [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
            self.initializers,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        # give the outputs their inferred shapes, as an exporter would
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        del model.graph.output[:]
        model.graph.output.extend(inferred.graph.output)
        for name, bound in self.id_ranges.items():
            entry = model.metadata_props.add()
            entry.key, entry.value = f"{ID_RANGES_KEY}.{name}", str(bound)
        onnx.checker.check_model(model, full_check=True)
        return model

    # -- layers shared by several architectures ---------------------------
    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1,
             pad: int | None = None) -> str:
        """Conv2d with bias; 'same' padding for odd kernels unless `pad` is given."""
        pad = k // 2 if pad is None else pad
        w = self.weight([c_out, c_in // group, k, k])
        return self.op("Conv", x, w, self.bias(c_out), kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=group)

    def linear(self, x: str, d_in: int, d_out: int) -> str:
        """MatMul + Add, the form exporters emit for a Linear on 3-D input."""
        return self.op("Add", self.op("MatMul", x, self.weight([d_in, d_out], fan_in=d_in)), self.bias(d_out))

    def layer_norm(self, x: str, dim: int) -> str:
        """The LayerNormalization op over the last axis."""
        gamma = self.const(1.0 + 0.1 * self.rng.standard_normal(dim, dtype=np.float32))
        return self.op("LayerNormalization", x, gamma, self.bias(dim), axis=-1, epsilon=1e-5)

    def layer_norm_decomposed(self, x: str, dim: int) -> str:
        """LayerNorm as older exporters wrote it: ReduceMean, Sub, Pow, Sqrt, Div."""
        mean = self.op("ReduceMean", x, axes=[-1], keepdims=1)
        centered = self.op("Sub", x, mean)
        var = self.op("ReduceMean", self.op("Pow", centered, self.const(2.0)), axes=[-1], keepdims=1)
        std = self.op("Sqrt", self.op("Add", var, self.const(1e-5)))
        gamma = self.const(1.0 + 0.1 * self.rng.standard_normal(dim, dtype=np.float32))
        return self.op("Add", self.op("Mul", self.op("Div", centered, std), gamma), self.bias(dim))

    def gelu_erf(self, x: str) -> str:
        """GELU as BERT exports it: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        erf = self.op("Erf", self.op("Div", x, self.const(math.sqrt(2.0))))
        return self.op("Mul", self.op("Mul", x, self.const(0.5)), self.op("Add", erf, self.const(1.0)))

    def gelu_tanh(self, x: str) -> str:
        """GELU as GPT-2 exports it: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
        cube = self.op("Pow", x, self.const(3.0))
        inner = self.op("Add", x, self.op("Mul", cube, self.const(0.044715)))
        gate = self.op("Tanh", self.op("Mul", inner, self.const(math.sqrt(2.0 / math.pi))))
        return self.op("Mul", self.op("Mul", x, self.const(0.5)), self.op("Add", gate, self.const(1.0)))

    def split_heads(self, x: str, heads: int, head_dim: int, perm: Sequence[int]) -> str:
        """[B, S, H*D] -> Reshape [B, S, H, D] (0 = keep the dim) -> Transpose `perm`."""
        shaped = self.op("Reshape", x, self.const([0, 0, heads, head_dim], np.int64))
        return self.op("Transpose", shaped, perm=list(perm))

    def attention(self, q: str, k_t: str, v: str, mask: tuple[str, str] | None, head_dim: int,
                  scale_by: str = "Div") -> str:
        """softmax(q k^T * scale [+ mask]) v on [B, H, S, D] heads; `mask` is
        ("add", additive mask) or ("where", bool keep-mask)."""
        scores = self.op("MatMul", q, k_t)
        if scale_by == "Div":
            scores = self.op("Div", scores, self.const(math.sqrt(head_dim)))
        else:
            scores = self.op("Mul", scores, self.const(1.0 / math.sqrt(head_dim)))
        if mask is not None and mask[0] == "add":
            scores = self.op("Add", scores, mask[1])
        elif mask is not None:
            scores = self.op("Where", mask[1], scores, self.const(-1e4))
        return self.op("MatMul", self.op("Softmax", scores, axis=-1), v)

    def merge_heads(self, x: str, seq: int, hidden: int) -> str:
        """[B, H, S, D] -> Transpose [B, S, H, D] -> Reshape [B, S, H*D] (-1 = B)."""
        return self.op("Reshape", self.op("Transpose", x, perm=[0, 2, 1, 3]),
                       self.const([-1, seq, hidden], np.int64))


# ---------------------------------------------------------------------------
# The architectures
# ---------------------------------------------------------------------------

def mobilenet_v2(seed: int = 0) -> onnx.ModelProto:
    """MobileNetV2 in miniature: a strided stem (Conv + BatchNormalization +
    Clip(0, 6) as ReLU6), inverted residual blocks (1x1 expand, depthwise 3x3
    with group = channels, ReLU6, 1x1 linear project, residual Add when the
    shape allows), a 1x1 head conv, GlobalAveragePool, Flatten and a Gemm
    classifier. Input 1x3x32x32, 10 classes."""
    g = GraphBuilder("mobilenet_v2", seed)
    x = g.input("image", TensorProto.FLOAT, [1, 3, 32, 32])
    zero, six = g.const(0.0), g.const(6.0)

    def relu6(t: str) -> str:
        return g.op("Clip", t, zero, six)

    def batch_norm(t: str, c: int) -> str:
        scale = g.const(1.0 + 0.1 * g.rng.standard_normal(c, dtype=np.float32))
        mean = g.const(0.1 * g.rng.standard_normal(c, dtype=np.float32))
        var = g.const(0.5 + g.rng.random(c, dtype=np.float32))
        return g.op("BatchNormalization", t, scale, g.bias(c), mean, var, epsilon=1e-5)

    def inverted_residual(t: str, c_in: int, c_out: int, stride: int, expand: int) -> str:
        hidden = c_in * expand
        h = relu6(g.conv(t, c_in, hidden, 1))
        h = relu6(g.conv(h, hidden, hidden, 3, stride=stride, group=hidden))
        h = g.conv(h, hidden, c_out, 1)
        return g.op("Add", t, h) if stride == 1 and c_in == c_out else h

    h = relu6(batch_norm(g.conv(x, 3, 16, 3, stride=2), 16))          # 16 x 16x16
    h = inverted_residual(h, 16, 16, 1, 4)
    h = inverted_residual(h, 16, 24, 2, 4)                           # 24 x 8x8
    h = inverted_residual(h, 24, 24, 1, 4)
    h = relu6(g.conv(h, 24, 64, 1))
    h = g.op("Flatten", g.op("GlobalAveragePool", h), axis=1)
    logits = g.op("Gemm", h, g.weight([10, 64]), g.bias(10), transB=1)
    return g.model([(logits, TensorProto.FLOAT)])


def mobilenet_v2_224(seed: int = 0) -> onnx.ModelProto:
    """MobileNetV2 at full size (width 1.0, 1x3x224x224, 1000 classes), the
    network MCUNetV2's patch-based inference is measured on: a 3x3/2 stem
    of 32 channels, the 17 inverted residual blocks of the paper's table
    (expansion t, channels c, repeats n, stride s), a 1x1 conv to 1280,
    GlobalAveragePool and the classifier; BatchNorm folded into the convs'
    biases as exported models have it, ReLU6 as Clip(0, 6). Random weights."""
    g = GraphBuilder("mobilenet_v2_224", seed)
    x = g.input("image", TensorProto.FLOAT, [1, 3, 224, 224])
    zero, six = g.const(0.0), g.const(6.0)

    def relu6(t: str) -> str:
        return g.op("Clip", t, zero, six)

    h, c_in = relu6(g.conv(x, 3, 32, 3, stride=2)), 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = c_in * t
            b = relu6(g.conv(h, c_in, hidden, 1)) if t != 1 else h
            b = relu6(g.conv(b, hidden, hidden, 3, stride=stride, group=hidden))
            b = g.conv(b, hidden, c, 1)
            h, c_in = (g.op("Add", h, b) if stride == 1 and c_in == c else b), c
    h = relu6(g.conv(h, 320, 1280, 1))
    h = g.op("Flatten", g.op("GlobalAveragePool", h), axis=1)
    logits = g.op("Gemm", h, g.weight([1000, 1280]), g.bias(1000), transB=1)
    return g.model([(logits, TensorProto.FLOAT)])


def unet(seed: int = 0) -> onnx.ModelProto:
    """UNet in miniature: two encoder stages (two 3x3 Conv + Relu, then
    MaxPool 2x2), a bottleneck, and a decoder that upsamples once with
    ConvTranspose (k=2, s=2) and once with a bilinear Resize, each followed
    by a skip Concat with the encoder feature of the same size and convs;
    a 1x1 conv and Sigmoid give a 2-channel mask. Input 1x3x32x32."""
    g = GraphBuilder("unet", seed)
    x = g.input("image", TensorProto.FLOAT, [1, 3, 32, 32])

    def double_conv(t: str, c_in: int, c_out: int) -> str:
        t = g.op("Relu", g.conv(t, c_in, c_out, 3))
        return g.op("Relu", g.conv(t, c_out, c_out, 3))

    def max_pool(t: str) -> str:
        return g.op("MaxPool", t, kernel_shape=[2, 2], strides=[2, 2])

    e1 = double_conv(x, 3, 8)                                         # 8 x 32x32
    e2 = double_conv(max_pool(e1), 8, 16)                             # 16 x 16x16
    bottom = double_conv(max_pool(e2), 16, 32)                        # 32 x 8x8
    up = g.op("ConvTranspose", bottom, g.weight([32, 16, 2, 2], fan_in=32 * 4), g.bias(16),
              kernel_shape=[2, 2], strides=[2, 2])                    # 16 x 16x16
    d2 = double_conv(g.op("Concat", up, e2, axis=1), 32, 16)
    up = g.op("Resize", d2, "", g.const([1.0, 1.0, 2.0, 2.0]), mode="linear")  # 16 x 32x32
    up = g.conv(up, 16, 8, 1)
    d1 = double_conv(g.op("Concat", e1, up, axis=1), 16, 8)
    mask = g.op("Sigmoid", g.conv(d1, 8, 2, 1))
    return g.model([(mask, TensorProto.FLOAT)])


def unet_skips(seed: int = 0) -> onnx.ModelProto:
    """A U-Net whose long-lived tensors are cheap to make again (the graph
    dnn-recompute is for): pyocc.examples.unet_skips, which the docs use."""
    return unet_skips_example(seed)


def bert(seed: int = 0, batch: int = 2, seq: int = 16, hidden: int = 32, heads: int = 4,
         vocab: int = 50) -> onnx.ModelProto:
    """A two-layer BERT encoder as HuggingFace exports it: word, position
    (int64 position ids, a constant) and token-type (int32 ids) embeddings by Gather,
    LayerNormalization; an int64 attention_mask turned into an additive mask
    ((1 - mask) * -10000) for layer 1 and into a bool keep-mask
    (Not(Equal(mask, 0))) for Where in layer 2; multi-head self-attention (MatMul + Add projections, Reshape with
    0 dims, Transpose, scale by Div, Softmax); GELU in Erf form; residual
    Adds; layer 1 uses the LayerNormalization op, layer 2 the decomposed
    ReduceMean/Sub/Pow/Sqrt/Div form. A pooler gathers token 0 and applies
    Gemm + Tanh. The merge-heads Reshape of layer 2 takes its target shape
    from a Shape -> Gather -> Concat chain, as tracing exporters write it.
    Outputs: last hidden state [batch, seq, hidden] and pooled [batch, hidden]."""
    g = GraphBuilder("bert", seed)
    head_dim = hidden // heads
    ids = g.input("input_ids", TensorProto.INT64, [batch, seq], id_range=vocab)
    types = g.input("token_type_ids", TensorProto.INT32, [batch, seq], id_range=2)
    mask = g.input("attention_mask", TensorProto.INT64, [batch, seq], id_range=2)

    words = g.op("Gather", g.weight([vocab, hidden], fan_in=1), ids, axis=0)
    positions = g.op("Gather", g.weight([seq, hidden], fan_in=1), g.const(np.arange(seq)[None], np.int64), axis=0)
    token_types = g.op("Gather", g.weight([2, hidden], fan_in=1), types, axis=0)
    h = g.layer_norm(g.op("Add", g.op("Add", words, positions), token_types), hidden)

    extended = g.op("Unsqueeze", mask, g.const([1, 2], np.int64))                # [batch, 1, 1, seq]
    additive = g.op("Mul", g.op("Sub", g.const(1.0), g.op("Cast", extended, to=TensorProto.FLOAT)),
                    g.const(-10000.0))
    keep = g.op("Not", g.op("Equal", extended, g.const(0, np.int64)))

    for layer, (mask_form, norm) in enumerate([(("add", additive), g.layer_norm),
                                               (("where", keep), g.layer_norm_decomposed)]):
        q = g.split_heads(g.linear(h, hidden, hidden), heads, head_dim, [0, 2, 1, 3])
        k_t = g.split_heads(g.linear(h, hidden, hidden), heads, head_dim, [0, 2, 3, 1])
        v = g.split_heads(g.linear(h, hidden, hidden), heads, head_dim, [0, 2, 1, 3])
        context = g.attention(q, k_t, v, mask_form, head_dim)
        if layer == 0:
            context = g.merge_heads(context, seq, hidden)
        else:
            context = g.op("Transpose", context, perm=[0, 2, 1, 3])
            batch_seq = g.op("Gather", g.op("Shape", context), g.const([0, 1], np.int64), axis=0)
            context = g.op("Reshape", context, g.op("Concat", batch_seq, g.const([hidden], np.int64), axis=0))
        h = norm(g.op("Add", g.linear(context, hidden, hidden), h), hidden)
        ffn = g.linear(g.gelu_erf(g.linear(h, hidden, 2 * hidden)), 2 * hidden, hidden)
        h = norm(g.op("Add", ffn, h), hidden)

    first = g.op("Gather", h, g.const(0, np.int64), axis=1)                      # [batch, hidden]
    pooled = g.op("Tanh", g.op("Gemm", first, g.weight([hidden, hidden]), g.bias(hidden), transB=1))
    return g.model([(h, TensorProto.FLOAT), (pooled, TensorProto.FLOAT)])


def gpt2(seed: int = 0, batch: int = 2, seq: int = 16, hidden: int = 32, heads: int = 4,
         vocab: int = 64) -> onnx.ModelProto:
    """A two-block GPT-2 decoder: int64 input_ids and a bool attention_mask
    (padding) input, token and position embeddings by Gather,
    pre-LayerNormalization blocks with a fused QKV projection (MatMul + Add,
    Split into q, k, v), scale by Mul, and a causal mask: block 1 Slices a
    lower-triangular bool constant (the exporters' `bias` buffer), block 2
    builds it with Trilu; Where puts -10000 above the diagonal or on padding
    (And of the causal and padding masks). The MLP runs Gemm on
    [batch * seq, hidden] (Reshape around it) with GELU in tanh form. A final
    LayerNormalization and an LM head tied to the token embedding (MatMul
    with its Transpose) give logits [batch, seq, vocab], and a Gather with
    index -1 the next-token logits [batch, vocab]."""
    g = GraphBuilder("gpt2", seed)
    head_dim = hidden // heads
    ids = g.input("input_ids", TensorProto.INT64, [batch, seq], id_range=vocab)
    padding = g.op("Unsqueeze", g.input("attention_mask", TensorProto.BOOL, [batch, seq]), g.const([1, 2], np.int64))
    wte = g.weight([vocab, hidden], fan_in=1)
    h = g.op("Add", g.op("Gather", wte, ids, axis=0),
             g.op("Gather", g.weight([seq, hidden], fan_in=1), g.const(np.arange(seq), np.int64), axis=0))

    max_positions = 2 * seq
    bias_buffer = g.const(np.tril(np.ones((max_positions, max_positions), dtype=bool))[None, None], dtype=bool)
    sliced = g.op("Slice", bias_buffer, g.const([0, 0], np.int64), g.const([seq, seq], np.int64),
                  g.const([2, 3], np.int64))
    trilu = g.op("Cast", g.op("Trilu", g.const(np.ones((seq, seq))), upper=0), to=TensorProto.BOOL)
    for causal in (sliced, trilu):
        x = g.layer_norm(h, hidden)
        qkv = g.linear(x, hidden, 3 * hidden)
        q, k, v = g.op("Split", qkv, g.const([hidden] * 3, np.int64), axis=2, outputs=3)
        q = g.split_heads(q, heads, head_dim, [0, 2, 1, 3])
        k_t = g.split_heads(k, heads, head_dim, [0, 2, 3, 1])
        v = g.split_heads(v, heads, head_dim, [0, 2, 1, 3])
        keep = g.op("And", causal, padding)
        context = g.merge_heads(g.attention(q, k_t, v, ("where", keep), head_dim, scale_by="Mul"), seq, hidden)
        h = g.op("Add", h, g.linear(context, hidden, hidden))
        flat = g.op("Reshape", g.layer_norm(h, hidden), g.const([-1, hidden], np.int64))
        mlp = g.op("Gemm", g.gelu_tanh(g.op("Gemm", flat, g.weight([hidden, 4 * hidden], fan_in=hidden),
                                            g.bias(4 * hidden))),
                   g.weight([4 * hidden, hidden], fan_in=4 * hidden), g.bias(hidden))
        h = g.op("Add", h, g.op("Reshape", mlp, g.const([batch, seq, hidden], np.int64)))
    logits = g.op("MatMul", g.layer_norm(h, hidden), g.op("Transpose", wte, perm=[1, 0]))
    next_token = g.op("Gather", logits, g.const(-1, np.int64), axis=1)
    return g.model([(logits, TensorProto.FLOAT), (next_token, TensorProto.FLOAT)])


def vit(seed: int = 0, patch: int = 8, hidden: int = 32, heads: int = 4) -> onnx.ModelProto:
    """A one-block Vision Transformer: patch embedding by a Conv with
    kernel = stride = patch, Reshape + Transpose to [1, tokens, hidden], a
    learned class token Concat'ed in front, position embedding Add, a
    pre-norm encoder block whose fused QKV output is Reshaped to
    [1, tokens, 3, heads, d], Transposed to [3, 1, heads, tokens, d] and
    split with scalar Gathers, attention, the Gelu op (opset 20) in the MLP,
    a final LayerNormalization, Slice of the class token and a Gemm head.
    Input 1x3x32x32, 10 classes."""
    g = GraphBuilder("vit", seed)
    head_dim = hidden // heads
    patches = (32 // patch) ** 2
    tokens = patches + 1
    x = g.input("image", TensorProto.FLOAT, [1, 3, 32, 32])
    emb = g.conv(x, 3, hidden, patch, stride=patch, pad=0)                     # [1, hidden, 4, 4]
    emb = g.op("Transpose", g.op("Reshape", emb, g.const([1, hidden, patches], np.int64)), perm=[0, 2, 1])
    cls = g.const(0.02 * g.rng.standard_normal((1, 1, hidden), dtype=np.float32))
    h = g.op("Add", g.op("Concat", cls, emb, axis=1), g.weight([1, tokens, hidden], fan_in=1))

    x = g.layer_norm(h, hidden)
    qkv = g.op("Reshape", g.linear(x, hidden, 3 * hidden), g.const([1, tokens, 3, heads, head_dim], np.int64))
    qkv = g.op("Transpose", qkv, perm=[2, 0, 3, 1, 4])                         # [3, 1, H, T, D]
    q, k, v = (g.op("Gather", qkv, g.const(i, np.int64), axis=0) for i in range(3))
    k_t = g.op("Transpose", k, perm=[0, 1, 3, 2])
    context = g.merge_heads(g.attention(q, k_t, v, None, head_dim, scale_by="Mul"), tokens, hidden)
    h = g.op("Add", h, g.linear(context, hidden, hidden))
    mlp = g.linear(g.op("Gelu", g.linear(g.layer_norm(h, hidden), hidden, 2 * hidden)), 2 * hidden, hidden)
    h = g.layer_norm(g.op("Add", h, mlp), hidden)

    cls_out = g.op("Reshape", g.op("Slice", h, g.const([0], np.int64), g.const([1], np.int64), g.const([1], np.int64)),
                   g.const([1, hidden], np.int64))
    logits = g.op("Gemm", cls_out, g.weight([10, hidden]), g.bias(10), transB=1)
    return g.model([(logits, TensorProto.FLOAT)], opset=20)


#: every builder, by the name the tests use
GRAPHS = {"mobilenet_v2": mobilenet_v2, "unet": unet, "bert": bert, "gpt2": gpt2, "vit": vit}


# ---------------------------------------------------------------------------
# One graph per family of ops that real exports need (issue: import gaps):
# each is checked against onnxruntime like the architectures above.
# ---------------------------------------------------------------------------

def nan_guards(seed: int = 0) -> onnx.ModelProto:
    """IsNaN and IsInf guards as transformers export them: NaN from Log of
    negative values and inf from 1/0 replaced by Where (broadcast 0), and
    the detect_positive/negative forms of IsInf as outputs."""
    g = GraphBuilder("nan_guards", seed)
    x = g.input("x", TensorProto.FLOAT, [4, 8])
    logs = g.op("Log", x)                                                        # NaN where x < 0
    clean = g.op("Where", g.op("IsNaN", logs), g.const(0.0), logs)
    inverse = g.op("Reciprocal", g.op("Relu", x))                                # +inf where x <= 0
    neg_inverse = g.op("Neg", inverse)
    finite = g.op("Where", g.op("IsInf", inverse), g.const([[-1.0]]), inverse)
    positive = g.op("IsInf", neg_inverse, detect_negative=0)
    negative = g.op("IsInf", neg_inverse, detect_positive=0)
    return g.model([(clean, TensorProto.FLOAT), (finite, TensorProto.FLOAT),
                    (positive, TensorProto.BOOL), (negative, TensorProto.BOOL)])


def einsums(seed: int = 0) -> onnx.ModelProto:
    """Einsum in the forms models use: attention scores with a transposed
    key (bhid,bhjd->bhij), a three-operand chain, an ellipsis transpose, a
    batch diagonal, an outer product, a contraction with a broadcast
    ellipsis, and implicit output mode."""
    g = GraphBuilder("einsums", seed)
    q = g.input("q", TensorProto.FLOAT, [2, 3, 5, 4])
    k = g.input("k", TensorProto.FLOAT, [2, 3, 6, 4])
    a = g.input("a", TensorProto.FLOAT, [3, 4])
    b = g.input("b", TensorProto.FLOAT, [4, 5])
    c = g.input("c", TensorProto.FLOAT, [5, 2])
    s = g.input("s", TensorProto.FLOAT, [2, 3, 3])
    outs = [
        g.op("Einsum", q, k, equation="bhid,bhjd->bhij"),
        g.op("Einsum", a, b, c, equation="ij,jk,kl->il"),
        g.op("Einsum", q, equation="...ij->...ji"),
        g.op("Einsum", s, equation="bii->bi"),
        g.op("Einsum", a, c, equation="ij,kl->ijkl"),
        g.op("Einsum", q, b, equation="...id,dk->...ik"),
        g.op("Einsum", a, b, equation="ij,jk"),
        g.op("Einsum", s, equation="bij->j"),
    ]
    return g.model([(o, TensorProto.FLOAT) for o in outs])


def ordering(seed: int = 0) -> onnx.ModelProto:
    """TopK (values and int64 indices, largest and smallest), CumSum
    (plain, exclusive + reverse), ArgMin and the Reduce family (L1, L2,
    LogSum, LogSumExp, SumSquare; opset 18 axes inputs)."""
    g = GraphBuilder("ordering", seed)
    x = g.input("x", TensorProto.FLOAT, [3, 7])
    k3 = g.const([3], np.int64)
    values, indices = g.op("TopK", x, k3, outputs=2)
    small_values, small_indices = g.op("TopK", x, k3, axis=0, largest=0, outputs=2)
    axis1 = g.const(1, np.int64)
    cum = g.op("CumSum", x, axis1)
    cum_er = g.op("CumSum", x, g.const(0, np.int32), exclusive=1, reverse=1)
    arg = g.op("ArgMin", x, axis=1, keepdims=0)
    axes = g.const([1], np.int64)
    positive = g.op("Add", g.op("Abs", x), g.const(0.5))
    reductions = [g.op(name, x if name != "ReduceLogSum" else positive, axes, keepdims=0)
                  for name in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")]
    return g.model([(values, TensorProto.FLOAT), (indices, TensorProto.INT64),
                    (small_values, TensorProto.FLOAT), (small_indices, TensorProto.INT64),
                    (cum, TensorProto.FLOAT), (cum_er, TensorProto.FLOAT), (arg, TensorProto.INT64)]
                   + [(r, TensorProto.FLOAT) for r in reductions], opset=18)


def indexing(seed: int = 0) -> onnx.ModelProto:
    """Trilu (upper and lower with k), ScatterND (replace and add),
    ScatterElements (negative and repeated indices, replace and add), GatherND,
    GatherElements, Tile, Expand, Mod (integer and fmod) and Where with
    three-way broadcasting."""
    g = GraphBuilder("indexing", seed)
    x = g.input("x", TensorProto.FLOAT, [2, 4, 5])
    u = g.input("u", TensorProto.FLOAT, [2, 5])
    n = g.input("n", TensorProto.INT64, [2, 4, 5], id_range=50)
    upper = g.op("Trilu", x, g.const(1, np.int64))
    lower = g.op("Trilu", x, g.const(-1, np.int64), upper=0)
    where_nd = g.const([[0, 1], [1, 3]], np.int64)
    scattered = g.op("ScatterND", x, where_nd, u)
    added = g.op("ScatterND", x, g.const([[1, 2], [1, 2]], np.int64), u, reduction="add")
    gathered = g.op("GatherND", x, where_nd)
    scatter_index = g.const([[[0, -1, 2, 1, 0]], [[3, 3, 1, 0, -4]]], np.int64)              # [2, 1, 5]
    row = g.op("Reshape", u, g.const([2, 1, 5], np.int64))
    by_element = g.op("ScatterElements", x, scatter_index, row, axis=1)
    summed = g.op("ScatterElements", x, g.op("Concat", scatter_index, scatter_index, axis=1),
                  g.op("Concat", row, row, axis=1), axis=1, reduction="add")
    elements = g.op("GatherElements", x, g.const(np.random.default_rng(seed).integers(0, 4, (2, 3, 5)), np.int64),
                    axis=1)
    tiled = g.op("Tile", u, g.const([2, 1], np.int64))
    expanded = g.op("Expand", u, g.const([3, 2, 5], np.int64))
    int_mod = g.op("Mod", g.op("Sub", n, g.const(25, np.int64)), g.const(7, np.int64))
    float_mod = g.op("Mod", x, g.const(0.7), fmod=1)
    chosen = g.op("Where", g.op("Greater", u, g.const(0.0)), g.op("Reshape", u, g.const([2, 1, 5], np.int64)),
                  g.const(-2.0))
    return g.model([(upper, TensorProto.FLOAT), (lower, TensorProto.FLOAT), (scattered, TensorProto.FLOAT),
                    (added, TensorProto.FLOAT), (gathered, TensorProto.FLOAT), (elements, TensorProto.FLOAT),
                    (by_element, TensorProto.FLOAT), (summed, TensorProto.FLOAT),
                    (tiled, TensorProto.FLOAT), (expanded, TensorProto.FLOAT), (int_mod, TensorProto.INT64),
                    (float_mod, TensorProto.FLOAT), (chosen, TensorProto.FLOAT)])


def unary_functions(seed: int = 0) -> onnx.ModelProto:
    """The unary ops added for real models: trigonometry (rotary embeddings),
    Sign, Round, Erf, and the activations Softplus, Softsign, Elu, Selu,
    Celu, ThresholdedRelu, Mish (opset 18) and Shrink."""
    g = GraphBuilder("unary_functions", seed)
    x = g.input("x", TensorProto.FLOAT, [3, 16])
    unit = g.op("Tanh", x)                                                       # in (-1, 1) for asin, atanh
    above_one = g.op("Add", g.op("Abs", x), g.const(1.5))                        # > 1 for acosh
    outs = [g.op(name, x) for name in ("Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "Sign", "Erf",
                                        "Softplus", "Softsign", "Mish")]
    outs += [g.op("Round", g.op("Mul", x, g.const(2.0)))]
    outs += [g.op(name, unit) for name in ("Asin", "Acos", "Atanh")]
    outs += [g.op("Acosh", above_one)]
    outs += [g.op("Elu", x, alpha=0.7), g.op("Selu", x), g.op("Celu", x, alpha=1.3),
             g.op("ThresholdedRelu", x, alpha=0.2), g.op("Shrink", x, lambd=0.4, bias=0.1)]
    return g.model([(o, TensorProto.FLOAT) for o in outs], opset=18)


def empty_shape_arithmetic(seed: int = 0) -> onnx.ModelProto:
    """What the classic exporter writes around masks and reshapes: an empty
    int64 Constant feeding ConstantOfShape (a scalar), a Slice of a Shape
    that is empty, Concat'ed into a Reshape target, and an empty Slice of an
    activation Concat'ed to it (an empty value that takes no byte)."""
    g = GraphBuilder("empty_shape_arithmetic", seed)
    x = g.input("x", TensorProto.FLOAT, [2, 3, 4])
    empty = g.op("Constant", value=numpy_helper.from_array(np.zeros(0, np.int64)))
    scalar = g.op("ConstantOfShape", empty, value=helper.make_tensor("v", TensorProto.FLOAT, [1], [-2.5]))
    scaled = g.op("Mul", x, scalar)
    shape = g.op("Shape", x)
    nothing = g.op("Slice", shape, g.const([3], np.int64), g.const([3], np.int64))   # shape[3:3], empty
    target = g.op("Concat", nothing, g.const([6, 4], np.int64), axis=0)
    reshaped = g.op("Reshape", scaled, target)
    sliver = g.op("Slice", reshaped, g.const([4], np.int64), g.const([4], np.int64), g.const([1], np.int64))
    joined = g.op("Concat", reshaped, sliver, axis=1)                              # [6, 4] + [6, 0]
    return g.model([(joined, TensorProto.FLOAT)])


def masked_attention_classic(seed: int = 0, batch: int = 2, seq: int = 16, heads: int = 2,
                             head_dim: int = 8) -> onnx.ModelProto:
    """A masked BERT-style attention block as transformers' default path and
    the classic exporter (opset 17) write it (distilled from bench/zoo.py's
    BERT): the int64 attention_mask Cast to bool and And'ed with a bool
    scalar made by ConstantOfShape of an empty shape, a causal keep-mask,
    the target shape of an Expand computed by the Where(Equal(shape, -1))
    idiom over ConstantOfShape, an additive mask Where(keep, 0, -inf),
    Softmax, and the IsNaN -> Where guard that zeroes fully masked rows
    (batch 1 masks its key 0, so row 0 of batch 1 is all -inf)."""
    g = GraphBuilder("masked_attention_classic", seed)
    q = g.input("query", TensorProto.FLOAT, [batch, heads, seq, head_dim])
    k = g.input("key", TensorProto.FLOAT, [batch, heads, seq, head_dim])
    v = g.input("value", TensorProto.FLOAT, [batch, heads, seq, head_dim])
    mask = g.input("key_padding", TensorProto.INT64, [batch, seq], id_range=2)
    empty = g.op("Constant", value=numpy_helper.from_array(np.zeros(0, np.int64)))
    true = g.op("ConstantOfShape", empty, value=helper.make_tensor("v", TensorProto.BOOL, [1], [True]))
    padding = g.op("Unsqueeze", g.op("Cast", mask, to=TensorProto.BOOL), g.const([1, 2], np.int64))
    no_first_key = np.ones((batch, 1, 1, seq), dtype=bool)
    no_first_key[1, ..., 0] = False
    padding = g.op("And", padding, g.const(no_first_key, dtype=bool))
    causal = g.op("Cast", g.op("Trilu", g.const(np.ones((seq, seq))), upper=0), to=TensorProto.BOOL)
    keep = g.op("And", g.op("And", true, causal), padding)                        # [batch, 1, seq, seq]
    wanted = g.const([batch, -1, seq, seq], np.int64)
    ones = g.op("ConstantOfShape", g.const([4], np.int64), value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))
    is_free = g.op("Equal", wanted, g.op("Mul", ones, g.const(-1, np.int64)))
    target = g.op("Where", is_free, ones, wanted)
    keep = g.op("Expand", keep, target)
    additive = g.op("Where", keep, g.const([0.0]), g.const([-np.inf]))
    scores = g.op("Div", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), g.const(math.sqrt(head_dim)))
    probs = g.op("Softmax", g.op("Add", scores, additive), axis=-1)
    guarded = g.op("Where", g.op("IsNaN", probs), g.const([0.0]), probs)
    return g.model([(g.op("MatMul", guarded, v), TensorProto.FLOAT)])


def pixel_shuffle_and_instance_norm(seed: int = 0) -> onnx.ModelProto:
    """DepthToSpace in both modes (sub-pixel upsampling), SpaceToDepth, and
    InstanceNormalization (style-transfer and GAN generators)."""
    g = GraphBuilder("pixel_shuffle_and_instance_norm", seed)
    x = g.input("x", TensorProto.FLOAT, [1, 8, 3, 4])
    dcr = g.op("DepthToSpace", x, blocksize=2)
    crd = g.op("DepthToSpace", x, blocksize=2, mode="CRD")
    back = g.op("SpaceToDepth", dcr, blocksize=2)
    normed = g.op("InstanceNormalization", x, g.const(1.0 + 0.1 * g.rng.standard_normal(8)), g.bias(8),
                  epsilon=1e-3)
    return g.model([(dcr, TensorProto.FLOAT), (crd, TensorProto.FLOAT), (back, TensorProto.FLOAT),
                    (normed, TensorProto.FLOAT)])


#: the op-family graphs, by name
OP_GRAPHS = {"nan_guards": nan_guards, "einsums": einsums, "ordering": ordering, "indexing": indexing,
             "unary_functions": unary_functions, "empty_shape_arithmetic": empty_shape_arithmetic,
             "masked_attention_classic": masked_attention_classic,
             "pixel_shuffle_and_instance_norm": pixel_shuffle_and_instance_norm}


def random_inputs(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input: standard normal floats; int64 ids
    uniform in the range the builder recorded (0/1 for masks and types); bool
    inputs as random booleans."""
    rng = np.random.default_rng(seed)
    ranges = {p.key.removeprefix(ID_RANGES_KEY + "."): int(p.value)
              for p in model.metadata_props if p.key.startswith(ID_RANGES_KEY + ".")}
    inputs: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if tensor.elem_type == TensorProto.BOOL:
            inputs[value.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            inputs[value.name] = rng.integers(0, ranges.get(value.name, 2), shape).astype(dtype)
        else:
            inputs[value.name] = rng.standard_normal(shape).astype(dtype)
    if "attention_mask" in inputs:
        inputs["attention_mask"][..., 0] = 1  # a real mask keeps at least the first token
    return inputs


# ---------------------------------------------------------------------------
# Graphs with a symbolic sequence length (ONNX dim_param "sequence")
# ---------------------------------------------------------------------------


def _symbolic_encoder_layer(g: GraphBuilder, h: str, hidden: int, heads: int, mask: str | None,
                            merge_by_shape: bool) -> str:
    """One post-norm encoder layer on [1, S, hidden] with S symbolic: the
    split-heads Reshape keeps S with a 0 dim; the merge-heads Reshape takes
    its target from Shape -> Gather -> Concat (`merge_by_shape`) or from
    [0, 0, hidden]."""
    head_dim = hidden // heads
    q = g.split_heads(g.linear(h, hidden, hidden), heads, head_dim, [0, 2, 1, 3])
    k_t = g.split_heads(g.linear(h, hidden, hidden), heads, head_dim, [0, 2, 3, 1])
    v = g.split_heads(g.linear(h, hidden, hidden), heads, head_dim, [0, 2, 1, 3])
    context = g.op("Transpose", g.attention(q, k_t, v, None if mask is None else ("add", mask), head_dim),
                   perm=[0, 2, 1, 3])
    if merge_by_shape:
        batch_seq = g.op("Gather", g.op("Shape", context), g.const([0, 1], np.int64), axis=0)
        target = g.op("Concat", batch_seq, g.const([hidden], np.int64), axis=0)
    else:
        target = g.const([0, 0, hidden], np.int64)
    h = g.layer_norm(g.op("Add", g.linear(g.op("Reshape", context, target), hidden, hidden), h), hidden)
    ffn = g.linear(g.gelu_erf(g.linear(h, hidden, 2 * hidden)), 2 * hidden, hidden)
    return g.layer_norm(g.op("Add", ffn, h), hidden)


def encoder_symbolic(seed: int = 0, hidden: int = 32, heads: int = 4, layers: int = 2) -> onnx.ModelProto:
    """A plain transformer encoder (post-norm, GELU) on x [1, "sequence",
    hidden], the sequence length an ONNX dim_param: the memory of every
    activation is a polynomial in it (attention scores grow as S^2)."""
    g = GraphBuilder("encoder_symbolic", seed)
    h = g.input("x", TensorProto.FLOAT, [1, "sequence", hidden])
    for layer in range(layers):
        h = _symbolic_encoder_layer(g, h, hidden, heads, None, merge_by_shape=layer % 2 == 1)
    return g.model([(h, TensorProto.FLOAT)])


def bert_symbolic(seed: int = 0, hidden: int = 32, heads: int = 4, vocab: int = 50,
                  max_positions: int = 512) -> onnx.ModelProto:
    """A two-layer BERT encoder whose inputs are [1, "sequence"] (ONNX
    dim_param): word and position embeddings by Gather (position_ids is an
    input, as HuggingFace exports it when given),
    an additive mask from the int64 attention_mask, and a pooler on token
    0. Outputs: last hidden state and pooled."""
    g = GraphBuilder("bert_symbolic", seed)
    ids = g.input("input_ids", TensorProto.INT64, [1, "sequence"], id_range=vocab)
    position_ids = g.input("position_ids", TensorProto.INT64, [1, "sequence"], id_range=max_positions)
    mask = g.input("attention_mask", TensorProto.INT64, [1, "sequence"], id_range=2)
    words = g.op("Gather", g.weight([vocab, hidden], fan_in=1), ids, axis=0)       # [1, S, hidden]
    positions = g.op("Gather", g.weight([max_positions, hidden], fan_in=1), position_ids, axis=0)
    h = g.layer_norm(g.op("Add", words, positions), hidden)
    extended = g.op("Unsqueeze", mask, g.const([1, 2], np.int64))                   # [1, 1, 1, S]
    additive = g.op("Mul", g.op("Sub", g.const(1.0), g.op("Cast", extended, to=TensorProto.FLOAT)),
                    g.const(-10000.0))
    for layer in range(2):
        h = _symbolic_encoder_layer(g, h, hidden, heads, additive, merge_by_shape=layer == 1)
    first = g.op("Gather", h, g.const(0, np.int64), axis=1)                         # [1, hidden]
    pooled = g.op("Tanh", g.op("Gemm", first, g.weight([hidden, hidden]), g.bias(hidden), transB=1))
    return g.model([(h, TensorProto.FLOAT), (pooled, TensorProto.FLOAT)])


def gpt2_symbolic(seed: int = 0, hidden: int = 32, heads: int = 4, vocab: int = 50, layers: int = 2,
                  max_positions: int = 512) -> onnx.ModelProto:
    """A GPT-2-style decoder on input_ids [1, "sequence"] (ONNX dim_param)
    as tracing exporters write it: position embeddings and the causal mask
    are Slices, up to Shape(input_ids)[1], of a [max_positions, hidden] table
    and of a [max_positions, max_positions] lower-triangular bool buffer
    (both fold at import into constants of S rows, leading blocks of the
    tables); pre-norm blocks, Where on the mask, GELU in tanh form."""
    g = GraphBuilder("gpt2_symbolic", seed)
    head_dim = hidden // heads
    ids = g.input("input_ids", TensorProto.INT64, [1, "sequence"], id_range=vocab)
    length = g.op("Gather", g.op("Shape", ids), g.const([1], np.int64), axis=0)             # [S]
    zero = g.const([0], np.int64)
    positions = g.op("Slice", g.weight([max_positions, hidden], fan_in=1), zero, length, zero)
    h = g.op("Add", g.op("Gather", g.weight([vocab, hidden], fan_in=1), ids, axis=0), positions)
    bias = g.const(np.tril(np.ones((max_positions, max_positions), dtype=bool)), np.bool_)
    both = g.const([0, 1], np.int64)
    causal = g.op("Slice", bias, g.const([0, 0], np.int64), g.op("Concat", length, length, axis=0), both)
    for _ in range(layers):
        x = g.layer_norm(h, hidden)
        q = g.split_heads(g.linear(x, hidden, hidden), heads, head_dim, [0, 2, 1, 3])
        k_t = g.split_heads(g.linear(x, hidden, hidden), heads, head_dim, [0, 2, 3, 1])
        v = g.split_heads(g.linear(x, hidden, hidden), heads, head_dim, [0, 2, 1, 3])
        context = g.op("Transpose", g.attention(q, k_t, v, ("where", causal), head_dim, scale_by="Mul"),
                       perm=[0, 2, 1, 3])
        context = g.op("Reshape", context, g.const([0, 0, hidden], np.int64))
        h = g.op("Add", h, g.linear(context, hidden, hidden))
        h = g.op("Add", h, g.linear(g.gelu_tanh(g.linear(g.layer_norm(h, hidden), hidden, 4 * hidden)),
                                    4 * hidden, hidden))
    logits = g.op("MatMul", g.layer_norm(h, hidden), g.weight([hidden, vocab]))
    return g.model([(logits, TensorProto.FLOAT)])


def vit_symbolic(seed: int = 0, patch: int = 8, hidden: int = 32, heads: int = 4) -> onnx.ModelProto:
    """The one-block Vision Transformer of `vit` on image ["batch", 3, 32,
    32], the batch an ONNX dim_param, as tracing exporters write it: the
    class token is Expanded to Shape(image)[0] rows, every Reshape keeps the
    batch with a 0 (the head's with -1), so the memory of every activation
    is linear in the batch."""
    g = GraphBuilder("vit_symbolic", seed)
    head_dim = hidden // heads
    patches = (32 // patch) ** 2
    tokens = patches + 1
    x = g.input("image", TensorProto.FLOAT, ["batch", 3, 32, 32])
    emb = g.conv(x, 3, hidden, patch, stride=patch, pad=0)                     # [B, hidden, 4, 4]
    emb = g.op("Transpose", g.op("Reshape", emb, g.const([0, hidden, patches], np.int64)), perm=[0, 2, 1])
    batch = g.op("Gather", g.op("Shape", x), g.const([0], np.int64), axis=0)   # [B]
    cls = g.op("Expand", g.const(0.02 * g.rng.standard_normal((1, 1, hidden), dtype=np.float32)),
               g.op("Concat", batch, g.const([1, hidden], np.int64), axis=0))  # [B, 1, hidden]
    h = g.op("Add", g.op("Concat", cls, emb, axis=1), g.weight([1, tokens, hidden], fan_in=1))

    x = g.layer_norm(h, hidden)
    qkv = g.op("Reshape", g.linear(x, hidden, 3 * hidden), g.const([0, tokens, 3, heads, head_dim], np.int64))
    qkv = g.op("Transpose", qkv, perm=[2, 0, 3, 1, 4])                         # [3, B, H, T, D]
    q, k, v = (g.op("Gather", qkv, g.const(i, np.int64), axis=0) for i in range(3))
    k_t = g.op("Transpose", k, perm=[0, 1, 3, 2])
    context = g.op("Transpose", g.attention(q, k_t, v, None, head_dim, scale_by="Mul"), perm=[0, 2, 1, 3])
    context = g.op("Reshape", context, g.const([0, tokens, hidden], np.int64))
    h = g.op("Add", h, g.linear(context, hidden, hidden))
    mlp = g.linear(g.op("Gelu", g.linear(g.layer_norm(h, hidden), hidden, 2 * hidden)), 2 * hidden, hidden)
    h = g.layer_norm(g.op("Add", h, mlp), hidden)

    cls_out = g.op("Reshape", g.op("Slice", h, g.const([0], np.int64), g.const([1], np.int64), g.const([1], np.int64)),
                   g.const([-1, hidden], np.int64))
    logits = g.op("Gemm", cls_out, g.weight([10, hidden]), g.bias(10), transB=1)
    return g.model([(logits, TensorProto.FLOAT)], opset=20)


def every_tensor_an_output(model: onnx.ModelProto, elem_types: dict[str, int]) -> onnx.ModelProto:
    """A copy of `model` with every node output also a graph output (of the
    element type `elem_types` gives it, shape unknown): onnxruntime then
    returns every intermediate tensor."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    outputs = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in outputs:
                probe.graph.output.append(helper.make_tensor_value_info(name, elem_types[name], None))
    return probe

"""What PyTorch's exporter writes for Hugging Face transformers with a
symbolic sequence (bench/symbolic.py --zoo), as small graphs built here
with onnx.helper (no torch needed):

- an Expand whose shape is ``Where(Equal(shape, -1 * ones), ones, shape)``
  (the exporter's spelling of ``x.expand(shape)``): known only through the
  values of Equal, Where, ConstantOfShape and Mul on shape tensors;
- ``Where(IsNaN(scores), 0, scores)`` around an attention's softmax;
- GatherElements; GatherND by (batch, position) pairs (the dynamo
  exporter's lookup of the attention mask); Split into equal parts and by
  sizes (GPT-2's c_attn);
- a position table ``[1, 512, 8]`` sliced to ``[1, S, 8]`` (folded to a
  constant read in leading blocks after a dimension of 1);
- a batch of 2 whose mask is read at ``batch * S + position`` of its
  flattened copy (the classic export of every transformers model here at
  batch 2): a Gather of every position in order, imported as the Reshape
  it is; and read by (batch, position) pairs (the dynamo export at batch
  2): a GatherND of every index in order, imported as the Reshape it is;
- positions tiled across the hidden axis (Whisper's ``repeat`` by the
  dynamo exporter), run at run time by the native tile kernel;
- a batch of 2 whose positions (a sliced table, a Range) are expanded to
  the batch (the dynamo export of Whisper): folded, constants whose two
  blocks are equal, imported by a symbolic compile as the Expand of one;
- T5's relative position buckets (Range, Sub, Abs/Neg of int64
  differences, Log, ``full_like`` caps: splats of [S, S]) looked up in a
  bias table, compiled for 1..512;
- and, for shape inference only, Tile, Pad, ArgMax, Size, Max/Min and logic
  on shape values.

Each graph's symbolic shapes, and the values of its shape tensors, equal
onnxruntime's at several lengths; the graphs that pyocc runs natively
compile once (``dims={"sequence": 64}``), run generated code (no numpy
kernel) and match onnxruntime at every length."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import pyocc
from pyocc.api import SymbolicModel
from pyocc.errors import PyoccError
from pyocc.frontend.symbolic_shapes import infer_symbolic_shapes
from pyocc.frontend.symbols import symbolic_inputs
from tests.graphs import every_tensor_an_output

MAXIMUM = 64
LENGTHS = (1, 2, 17, 63, 64)
HIDDEN = 8


def _int64(name: str, values: list[int] | int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[str], name: str) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                    for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _x() -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence", HIDDEN])


def expand_by_where() -> onnx.ModelProto:
    """y = x + Expand(w, shape of x), the shape spelled as the exporter does."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axis0"], ["batch1"]),
        helper.make_node("Unsqueeze", ["length", "axis0"], ["length1"]),
        helper.make_node("Concat", ["batch1", "length1", "width"], ["concat"], axis=0),
        helper.make_node("Reshape", ["concat", "minus_one"], ["target"]),
        helper.make_node("Shape", ["target"], ["rank"]),
        helper.make_node("ConstantOfShape", ["rank"], ["ones"], value=numpy_helper.from_array(
            np.array([1], np.int64))),
        helper.make_node("Mul", ["ones", "minus_one_scalar"], ["minus_ones"]),
        helper.make_node("Equal", ["target", "minus_ones"], ["is_free"]),
        helper.make_node("Where", ["is_free", "ones", "target"], ["expand_shape"]),
        helper.make_node("Expand", ["w", "expand_shape"], ["expanded"]),
        helper.make_node("Add", ["x", "expanded"], ["y"]),
    ]
    inits = [_int64("zero", 0), _int64("one", 1), _int64("axis0", [0]), _int64("width", [HIDDEN]),
             _int64("minus_one", [-1]), _int64("minus_one_scalar", -1),
             numpy_helper.from_array(np.linspace(-1, 1, HIDDEN, dtype=np.float32).reshape(1, 1, HIDDEN), "w")]
    return _model(nodes, inits, [_x()], ["y"], "expand_by_where")


def nan_guarded_attention() -> onnx.ModelProto:
    """softmax(x x^T) with NaN scores replaced by 0 before and after, then times x."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["x", "xt"], ["scores"]),
        helper.make_node("IsNaN", ["scores"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "scores"], ["clean"]),
        helper.make_node("Softmax", ["clean"], ["weights"], axis=-1),
        helper.make_node("IsInf", ["weights"], ["inf"]),
        helper.make_node("Where", ["inf", "zero", "weights"], ["finite"]),
        helper.make_node("MatMul", ["finite", "x"], ["y"]),
    ]
    return _model(nodes, [numpy_helper.from_array(np.array(0.0, np.float32), "zero")], [_x()], ["y"],
                  "nan_guarded_attention")


def gather_elements() -> onnx.ModelProto:
    """GatherElements along the hidden axis by an index input of x's shape."""
    index = helper.make_tensor_value_info("index", TensorProto.INT64, [1, "sequence", HIDDEN])
    nodes = [helper.make_node("GatherElements", ["x", "index"], ["picked"], axis=2),
             helper.make_node("Relu", ["picked"], ["y"])]
    return _model(nodes, [], [_x(), index], ["y"], "gather_elements")


def gather_nd() -> onnx.ModelProto:
    """x[pairs[..., 0], pairs[..., 1]] for (batch, position) pairs [1, S, 2]: rows of x [1, S, 8]."""
    pairs = helper.make_tensor_value_info("pairs", TensorProto.INT64, [1, "sequence", 2])
    nodes = [helper.make_node("GatherND", ["x", "pairs"], ["picked"]),
             helper.make_node("Neg", ["picked"], ["y"])]
    return _model(nodes, [], [_x(), pairs], ["y"], "gather_nd")


def split_heads() -> onnx.ModelProto:
    """GPT-2's c_attn: a projection to 3 * HIDDEN split by sizes into q, k, v,
    and x split in two equal halves (no sizes given)."""
    nodes = [
        helper.make_node("MatMul", ["x", "qkv_weight"], ["qkv"]),
        helper.make_node("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=2),
        helper.make_node("Mul", ["q", "k"], ["qk"]),
        helper.make_node("Add", ["qk", "v"], ["y"]),
        helper.make_node("Split", ["x"], ["left", "right"], axis=2),
        helper.make_node("Sub", ["left", "right"], ["z"]),
    ]
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((HIDDEN, 3 * HIDDEN)).astype(np.float32), "qkv_weight"),
             _int64("sizes", [HIDDEN] * 3)]
    return _model(nodes, inits, [_x()], ["y", "z"], "split_heads")


def position_table() -> onnx.ModelProto:
    """x + table[:, :S]: a [1, 512, 8] table sliced to the length (a constant
    of shape [1, S, 8] after folding, read from its value at the maximum)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "one", "two"], ["length"]),
        helper.make_node("Slice", ["table", "zero", "length", "one"], ["positions"]),
        helper.make_node("Add", ["x", "positions"], ["y"]),
    ]
    table = np.random.default_rng(4).standard_normal((1, 512, HIDDEN)).astype(np.float32)
    inits = [_int64("zero", [0]), _int64("one", [1]), _int64("two", [2]), numpy_helper.from_array(table, "table")]
    return _model(nodes, inits, [_x()], ["y"], "position_table")


def shape_arithmetic() -> onnx.ModelProto:
    """Tile, Pad, ArgMax, Size, and Max/Min/Less/Not/Xor on the length, whose
    results feed Reshape targets: their values must be known."""
    nodes = [
        helper.make_node("Tile", ["x", "repeats"], ["tiled"]),                    # 1 x 2S x 8
        helper.make_node("Pad", ["x", "pads"], ["padded"]),                       # 1 x (S + 3) x 8
        helper.make_node("ArgMax", ["x"], ["argmax"], axis=2, keepdims=1),        # 1 x S x 1
        helper.make_node("Size", ["x"], ["size"]),                                # 8 S
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Max", ["length", "one"], ["at_least_one"]),             # S
        helper.make_node("Min", ["length", "zero"], ["none"]),                    # 0
        helper.make_node("Less", ["length", "one"], ["empty"]),                   # false
        helper.make_node("Not", ["empty"], ["nonempty"]),                         # true
        helper.make_node("Xor", ["empty", "nonempty"], ["either"]),               # true
        helper.make_node("Where", ["either", "size", "none"], ["count"]),         # 8 S
        helper.make_node("Add", ["count", "none"], ["count0"]),
        helper.make_node("Unsqueeze", ["count0", "axis0"], ["flat"]),
        helper.make_node("Reshape", ["x", "flat"], ["y"]),                        # 8 S
        helper.make_node("Div", ["size", "at_least_one"], ["width"]),             # 8
        helper.make_node("Unsqueeze", ["width", "axis0"], ["width1"]),
        helper.make_node("Concat", ["minus_one", "width1"], ["rows"], axis=0),
        helper.make_node("Reshape", ["tiled", "rows"], ["z"]),                    # 2S x 8
    ]
    inits = [_int64("repeats", [1, 2, 1]), _int64("pads", [0, 1, 0, 0, 2, 0]), _int64("one", 1),
             _int64("zero", 0), _int64("axis0", [0]), _int64("minus_one", [-1])]
    model = _model(nodes, inits, [_x()], ["y", "z"], "shape_arithmetic")
    model.graph.output.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("padded",)])
    model.graph.output.append(helper.make_tensor_value_info("argmax", TensorProto.INT64, None))
    return model


def _constant(name: str, value: float | int | list[int]) -> onnx.NodeProto:
    array = np.array(value, np.float32 if isinstance(value, float) else np.int64)
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array))


def _bucket(prefix: str, distance: str, exact: int, buckets: int, scale: float) -> list[onnx.NodeProto]:
    """T5's bucket of a relative distance `distance` (int64, >= 0): itself
    below `exact`, else ``min(exact + int(log(d / exact) / scale * exact), buckets - 1)``,
    the cap a ``full_like`` (``ConstantOfShape(Shape(d), buckets - 1)``)."""
    p = prefix
    return [
        _constant(f"{p}exact", exact),
        helper.make_node("Less", [distance, f"{p}exact"], [f"{p}small"]),
        helper.make_node("Cast", [distance], [f"{p}distance_f"], to=TensorProto.FLOAT),
        _constant(f"{p}exact_f", float(exact)),
        helper.make_node("Div", [f"{p}distance_f", f"{p}exact_f"], [f"{p}ratio"]),
        helper.make_node("Log", [f"{p}ratio"], [f"{p}log"]),
        _constant(f"{p}scale", scale),
        helper.make_node("Div", [f"{p}log", f"{p}scale"], [f"{p}scaled"]),
        helper.make_node("Mul", [f"{p}scaled", f"{p}exact_f"], [f"{p}large_f"]),
        helper.make_node("Cast", [f"{p}large_f"], [f"{p}large_i"], to=TensorProto.INT64),
        helper.make_node("Add", [f"{p}large_i", f"{p}exact"], [f"{p}large"]),
        helper.make_node("Shape", [f"{p}large"], [f"{p}large_shape"]),
        helper.make_node("ConstantOfShape", [f"{p}large_shape"], [f"{p}cap"],
                         value=numpy_helper.from_array(np.array([buckets - 1], np.int64))),
        helper.make_node("Min", [f"{p}large", f"{p}cap"], [f"{p}capped"]),
        helper.make_node("Where", [f"{p}small", distance, f"{p}capped"], [f"{p}bucket"]),
    ]


def t5_relative_attention() -> onnx.ModelProto:
    """T5's attention with relative position buckets, as the classic
    exporter writes it (no position table): memory - query positions from
    two Ranges to the length, bucketed bidirectionally (Abs, the sign's
    half of the buckets added) for the encoder and causally (Neg of
    Min(d, 0), a zeros_like splat) for the decoder, looked up in a
    [buckets, heads] table, transposed to [1, heads, S, S] and added to
    the attention scores of x viewed as 2 heads. Both bias chains are
    [S, S] int64 computations, and each caps its buckets with a
    ``full_like`` splat of shape [S, S]."""
    heads = 2
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Range", ["zero", "length", "one"], ["query"]),
        helper.make_node("Range", ["zero", "length", "one"], ["memory"]),
        helper.make_node("Unsqueeze", ["query", "axis1"], ["query_col"]),
        helper.make_node("Unsqueeze", ["memory", "axis0"], ["memory_row"]),
        helper.make_node("Sub", ["memory_row", "query_col"], ["relative"]),           # S x S
        # encoder: bidirectional
        helper.make_node("Greater", ["relative", "zero"], ["after"]),
        helper.make_node("Cast", ["after"], ["after_i"], to=TensorProto.INT64),
        helper.make_node("Mul", ["after_i", "half"], ["side"]),
        helper.make_node("Abs", ["relative"], ["distance"]),
        *_bucket("e_", "distance", 2, 4, float(np.log(8 / 2))),
        helper.make_node("Add", ["side", "e_bucket"], ["enc_bucket"]),
        # decoder: causal
        helper.make_node("Shape", ["relative"], ["relative_shape"]),
        helper.make_node("ConstantOfShape", ["relative_shape"], ["zeros"],
                         value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Min", ["relative", "zeros"], ["before"]),
        helper.make_node("Neg", ["before"], ["back"]),
        *_bucket("d_", "back", 4, 8, float(np.log(16 / 4))),
        # the tables, [S, S, heads] -> [1, heads, S, S]
        helper.make_node("Gather", ["enc_table", "enc_bucket"], ["enc_bias_shh"], axis=0),
        helper.make_node("Gather", ["dec_table", "d_bucket"], ["dec_bias_shh"], axis=0),
        helper.make_node("Add", ["enc_bias_shh", "dec_bias_shh"], ["bias_shh"]),
        helper.make_node("Transpose", ["bias_shh"], ["bias_hss"], perm=[2, 0, 1]),
        helper.make_node("Unsqueeze", ["bias_hss", "axis0"], ["bias"]),
        # scores of x as heads
        helper.make_node("Reshape", ["x", "heads_shape"], ["split"]),                  # 1 x S x 2 x 4
        helper.make_node("Transpose", ["split"], ["q"], perm=[0, 2, 1, 3]),           # 1 x 2 x S x 4
        helper.make_node("Transpose", ["split"], ["k"], perm=[0, 2, 3, 1]),           # 1 x 2 x 4 x S
        helper.make_node("MatMul", ["q", "k"], ["scores"]),
        helper.make_node("Add", ["scores", "bias"], ["biased"]),
        helper.make_node("Softmax", ["biased"], ["weights"], axis=-1),
        helper.make_node("MatMul", ["weights", "q"], ["y"]),
    ]
    inits = [_int64("zero", 0), _int64("one", 1), _int64("half", 4), _int64("axis0", [0]), _int64("axis1", [1]),
             _int64("heads_shape", [1, -1, heads, HIDDEN // heads]),
             numpy_helper.from_array(rng.standard_normal((8, heads)).astype(np.float32), "enc_table"),
             numpy_helper.from_array(rng.standard_normal((8, heads)).astype(np.float32), "dec_table")]
    return _model(nodes, inits, [_x()], ["y"], "t5_relative_attention")


def flattened_mask_lookup() -> onnx.ModelProto:
    """x * mask for a batch of 2, the mask read as transformers' classic
    export reads it: ``Gather(Flatten(mask), batch * S + position)``, the
    indices ``[2, 1, 1, S]`` built from two Ranges and the length (a
    constant after folding whose values change with S), then reshaped to
    the indices' shape."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "sequence", HIDDEN])
    mask = helper.make_tensor_value_info("mask", TensorProto.INT64, [2, "sequence"])
    nodes = [
        helper.make_node("Cast", ["mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Shape", ["mask_f"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Range", ["zero", "batch", "one"], ["rows"]),
        helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
        helper.make_node("Unsqueeze", ["rows", "axes123"], ["rows4"]),            # 2 x 1 x 1 x 1
        helper.make_node("Unsqueeze", ["positions", "axes012"], ["positions4"]),  # 1 x 1 x 1 x S
        helper.make_node("Mul", ["rows4", "length"], ["row_starts"]),
        helper.make_node("Add", ["positions4", "row_starts"], ["flat_index"]),     # 2 x 1 x 1 x S
        helper.make_node("Flatten", ["mask_f"], ["flat_mask"], axis=2),           # 2S x 1
        helper.make_node("Gather", ["flat_mask", "flat_index"], ["picked"], axis=0),  # 2 x 1 x 1 x S x 1
        helper.make_node("Shape", ["flat_index"], ["index_shape"]),
        helper.make_node("Reshape", ["picked", "index_shape"], ["mask4"]),        # 2 x 1 x 1 x S
        helper.make_node("Reshape", ["mask4", "rows_shape"], ["mask3"]),          # 2 x S x 1
        helper.make_node("Mul", ["x", "mask3"], ["y"]),
    ]
    inits = [_int64("zero", 0), _int64("one", 1), _int64("axes123", [1, 2, 3]), _int64("axes012", [0, 1, 2]),
             _int64("rows_shape", [2, -1, 1])]
    return _model(nodes, inits, [x, mask], ["y"], "flattened_mask_lookup")


def mask_by_pairs() -> onnx.ModelProto:
    """x * mask for a batch of 2, the mask read as the dynamo exporter
    reads it: ``GatherND(mask, pairs)``, the (batch, position) pairs
    ``[2, 1, 1, S, 2]`` built from two Ranges, expanded and concatenated (a
    constant after folding whose batch comes before S: at S its leading
    blocks are not the leading bytes of its value at the maximum)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "sequence", HIDDEN])
    mask = helper.make_tensor_value_info("mask", TensorProto.INT64, [2, "sequence"])
    nodes = [
        helper.make_node("Cast", ["mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Shape", ["mask_f"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Range", ["zero", "batch", "one"], ["rows"]),
        helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
        helper.make_node("Unsqueeze", ["rows", "axes1234"], ["rows5"]),            # 2 x 1 x 1 x 1 x 1
        helper.make_node("Unsqueeze", ["positions", "axes0124"], ["positions5"]),  # 1 x 1 x 1 x S x 1
        helper.make_node("Concat", ["batch", "one", "one", "length", "one"], ["pairs_shape"], axis=0),
        helper.make_node("Expand", ["rows5", "pairs_shape"], ["row_of"]),          # 2 x 1 x 1 x S x 1
        helper.make_node("Expand", ["positions5", "pairs_shape"], ["position_of"]),
        helper.make_node("Concat", ["row_of", "position_of"], ["pairs"], axis=4),  # 2 x 1 x 1 x S x 2
        helper.make_node("GatherND", ["mask_f", "pairs"], ["mask4"]),              # 2 x 1 x 1 x S
        helper.make_node("Reshape", ["mask4", "rows_shape"], ["mask3"]),           # 2 x S x 1
        helper.make_node("Mul", ["x", "mask3"], ["y"]),
    ]
    inits = [_int64("zero", [0]), _int64("one", [1]), _int64("axes1234", [1, 2, 3, 4]),
             _int64("axes0124", [0, 1, 2, 4]), _int64("rows_shape", [2, -1, 1])]
    return _model(nodes, inits, [x, mask], ["y"], "mask_by_pairs")


def batch_positions() -> onnx.ModelProto:
    """x + positions for a batch of 2, the positions expanded to the batch
    as the dynamo exporter writes Whisper's decoder:
    ``Expand(Slice(table, 0, S), Shape(x))`` (folded at one S, a constant
    ``[2, S, 8]`` whose two blocks are equal and whose leading blocks are
    not its leading bytes at the maximum), and an index ``[2, 1, S]`` of
    positions expanded the same way, added after a cast."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "sequence", HIDDEN])
    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "one", "two"], ["length"]),
        helper.make_node("Slice", ["table", "zero", "length", "one"], ["positions"]),   # 1 x S x 8
        helper.make_node("Expand", ["positions", "shape"], ["batch_positions"]),         # 2 x S x 8
        helper.make_node("Range", ["zero_scalar", "length_scalar", "one_scalar"], ["index"]),
        helper.make_node("Squeeze", ["length", "zero"], ["length_scalar"]),
        helper.make_node("Concat", ["two", "one", "length"], ["index_shape"], axis=0),
        helper.make_node("Expand", ["index", "index_shape"], ["batch_index"]),           # 2 x 1 x S
        helper.make_node("Cast", ["batch_index"], ["batch_index_f"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["batch_index_f"], ["index_column"], perm=[0, 2, 1]),  # 2 x S x 1
        helper.make_node("Add", ["x", "batch_positions"], ["shifted"]),
        helper.make_node("Add", ["shifted", "index_column"], ["y"]),
    ]
    nodes.insert(4, nodes.pop(5))  # the Squeeze before the Range that reads it
    inits = [_int64("zero", [0]), _int64("one", [1]), _int64("two", [2]), _int64("zero_scalar", 0),
             _int64("one_scalar", 1),
             numpy_helper.from_array(rng.standard_normal((1, MAXIMUM, HIDDEN)).astype(np.float32), "table")]
    return _model(nodes, inits, [x], ["y"], "batch_positions")


def tiled_positions() -> onnx.ModelProto:
    """x + its positions tiled across the hidden axis, as the dynamo
    exporter writes Whisper's ``repeat``: ``Tile(Unsqueeze(Range(0, S)),
    [1, 1, 8])``. Folded, the tile would be a constant ``[1, S, 8]`` eight
    times the positions it repeats; it runs at run time
    (pyocc.frontend.onnx_import.EXPANDING_FOLD_LIMIT), and the native tile
    kernel takes the run-time shapes."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
        helper.make_node("Unsqueeze", ["positions", "axes02"], ["column"]),      # 1 x S x 1
        helper.make_node("Tile", ["column", "repeats"], ["tiled"]),              # 1 x S x 8
        helper.make_node("Cast", ["tiled"], ["tiled_f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "tiled_f"], ["y"]),
    ]
    inits = [_int64("zero", 0), _int64("one", 1), _int64("axes02", [0, 2]), _int64("repeats", [1, 1, HIDDEN])]
    return _model(nodes, inits, [_x()], ["y"], "tiled_positions")


def rotary_layers() -> onnx.ModelProto:
    """Two layers that read one rotary table, as the exporters write
    LLaMA's: ``cos(concat(p * f, p * f))`` of the positions ``p =
    Range(0, S)`` and four frequencies ``f``, a ``[S, 8]`` table that
    multiplies x in the first layer and that layer's output after an MLP
    four times wider in the second. Folded, the table is larger than the
    positions and frequencies it is computed from, so import keeps it as
    ops (pyocc.frontend.onnx_import.EXPANDING_FOLD_LIMIT) except where it
    is tiny (S <= 2: not more than 64 bytes)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
        helper.make_node("Cast", ["positions"], ["positions_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["positions_f", "axis1"], ["column"]),   # S x 1
        helper.make_node("Mul", ["column", "frequencies"], ["angles"]),        # S x 4
        helper.make_node("Concat", ["angles", "angles"], ["both"], axis=-1),    # S x 8
        helper.make_node("Cos", ["both"], ["table"]),
        helper.make_node("Mul", ["x", "table"], ["h"]),                         # layer 0
        helper.make_node("MatMul", ["h", "up"], ["wide"]),
        helper.make_node("Sigmoid", ["wide"], ["gate"]),
        helper.make_node("Mul", ["wide", "gate"], ["act"]),
        helper.make_node("MatMul", ["act", "down"], ["narrow"]),
        helper.make_node("Add", ["h", "narrow"], ["h2"]),
        helper.make_node("Mul", ["h2", "table"], ["y"]),                        # layer 1
    ]
    rng = np.random.default_rng(7)
    inits = [_int64("zero", 0), _int64("one", 1), _int64("axis1", [1]),
             numpy_helper.from_array(np.array([1.0, 0.1, 0.01, 0.001], np.float32), "frequencies"),
             numpy_helper.from_array(rng.standard_normal((HIDDEN, 4 * HIDDEN)).astype(np.float32), "up"),
             numpy_helper.from_array(rng.standard_normal((4 * HIDDEN, HIDDEN)).astype(np.float32), "down")]
    return _model(nodes, inits, [_x()], ["y"], "rotary_layers")


GRAPHS: dict[str, Callable[[], onnx.ModelProto]] = {
    "expand_by_where": expand_by_where, "nan_guarded_attention": nan_guarded_attention,
    "gather_elements": gather_elements, "gather_nd": gather_nd, "split_heads": split_heads,
    "position_table": position_table, "shape_arithmetic": shape_arithmetic,
    "t5_relative_attention": t5_relative_attention, "flattened_mask_lookup": flattened_mask_lookup,
    "mask_by_pairs": mask_by_pairs, "batch_positions": batch_positions, "tiled_positions": tiled_positions,
    "rotary_layers": rotary_layers,
}
NATIVE = ("expand_by_where", "nan_guarded_attention", "gather_elements", "gather_nd", "split_heads",
          "position_table", "flattened_mask_lookup", "mask_by_pairs", "batch_positions", "tiled_positions",
          "rotary_layers")
"""The graphs pyocc runs as generated code (shape_arithmetic's Pad takes static shapes only)."""


def _inputs(model: onnx.ModelProto, s: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(s)
    batch = model.graph.input[0].type.tensor_type.shape.dim[0].dim_value
    inputs = {"x": rng.standard_normal((batch, s, HIDDEN)).astype(np.float32)}
    if any(i.name == "mask" for i in model.graph.input):
        inputs["mask"] = rng.integers(0, 2, (batch, s)).astype(np.int64)
    if any(i.name == "index" for i in model.graph.input):
        inputs["index"] = rng.integers(-HIDDEN, HIDDEN, (1, s, HIDDEN)).astype(np.int64)
    if any(i.name == "pairs" for i in model.graph.input):
        inputs["pairs"] = np.stack([np.zeros(s, np.int64), rng.integers(-s, s, s)], -1)[None]
    return inputs


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_shapes_and_shape_values_equal_onnxruntimes(graph: str) -> None:
    """At each length, every tensor's symbolic shape, and every value the
    inference knows (shape tensors, truth values as 0/1), is what onnxruntime computes."""
    model = GRAPHS[graph]()
    symbolic = infer_symbolic_shapes(model, symbolic_inputs(model, {"sequence": MAXIMUM}), what=graph)
    probe = every_tensor_an_output(model, {n: t.elem_type for n, t in symbolic.tensors.items()})
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    known = 0
    for s in LENGTHS:
        for info, array in zip(session.get_outputs(), session.run(None, _inputs(model, s)), strict=True):
            tensor = symbolic.tensors[info.name]
            assert tensor.concrete({"sequence": s}) == array.shape, (info.name, s)
            if tensor.values is not None:
                values = [v.evaluate({"sequence": s}) for v in tensor.values]
                assert values == array.astype(np.int64).reshape(-1).tolist(), (info.name, s)
                known += 1
    assert known > 0 or graph in ("nan_guarded_attention", "gather_elements", "gather_nd", "split_heads")


def test_the_exporters_expand_shape_is_known_through_equal_and_where() -> None:
    model = expand_by_where()
    symbolic = infer_symbolic_shapes(model, symbolic_inputs(model, {"sequence": MAXIMUM}), what="g")
    assert [str(v) for v in symbolic.tensors["expand_shape"].values or ()] == ["1", "sequence", str(HIDDEN)]
    assert [str(v) for v in symbolic.tensors["is_free"].values or ()] == ["0", "0", "0"]
    assert symbolic.text("expanded") == f"1x{{sequence}}x{HIDDEN}xf32"


def test_a_comparison_whose_truth_changes_in_the_range_leaves_the_values_unknown() -> None:
    """Equal(S, 5) holds at one length only: the values are unknown (not
    guessed), and an Expand that needs them says so in one line."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Equal", ["shape", "five"], ["is_five"]),
             helper.make_node("Where", ["is_five", "ones", "shape"], ["target"]),
             helper.make_node("Expand", ["x", "target"], ["y"])]
    inits = [_int64("five", [1, 5, HIDDEN]), _int64("ones", [1, 1, 1])]
    model = _model(nodes, inits, [_x()], ["y"], "g")
    symbolic = infer_symbolic_shapes(model, symbolic_inputs(model, {"sequence": 4}), what="g")
    assert symbolic.tensors["is_five"].values is not None  # S <= 4: never 5
    with pytest.raises(PyoccError, match=r"^g: symbolic shape inference: Expand at node 'y' needs its "
                                         r"shape at compile time, and it is computed at run time"):
        infer_symbolic_shapes(model, symbolic_inputs(model, {"sequence": MAXIMUM}), what="g")


@pytest.mark.parametrize("graph", NATIVE)
def test_one_compile_runs_generated_code_like_onnxruntime(graph: str) -> None:
    model = GRAPHS[graph]()
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    compiled = pyocc.compile(fresh, dims={"sequence": MAXIMUM})
    assert isinstance(compiled, SymbolicModel)
    assert compiled.fallback_reason is None and compiled.numpy_sites == 0 and compiled.native_sites > 0
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for s in LENGTHS:
        inputs = _inputs(model, s)
        got = compiled.run(inputs)
        for value, want in zip(got.values(), session.run(None, inputs), strict=True):
            assert value.shape == want.shape
            np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5, err_msg=f"{graph} at S={s}")


def test_t5_relative_attention_runs_generated_code_at_every_length() -> None:
    """Compiled for 1..512, T5's bias chains run as kernels (folded, their
    [S, S] tensors would be larger than the positions and tables they are
    computed from): the Ranges, the int64 Abs and Neg run natively, and the
    ``full_like`` caps and the zeros, splats of [S, S] read by Min, are
    held as one element each (they were held whole at the maximum, three
    [512, 512] int64 splats: 6 MiB). Matches onnxruntime from S = 1 to the
    maximum."""
    model = t5_relative_attention()
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    compiled = pyocc.compile(fresh, dims={"sequence": 512})
    assert isinstance(compiled, SymbolicModel)
    assert compiled.fallback_reason is None and compiled.numpy_sites == 0
    assert compiled.native is not None and compiled.native.weight_pool.nbytes < 1024
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for s in (1, 2, 17, 128, 512):
        inputs = _inputs(model, s)
        got = compiled.run(inputs)["y"]
        np.testing.assert_allclose(got, session.run(None, inputs)[0], rtol=1e-5, atol=1e-5, err_msg=f"S={s}")


def test_a_static_compile_computes_t5s_bias_at_run_time() -> None:
    """A static compile at S = 32 does not fold T5's bias chains: folded,
    the ``[1, 2, 32, 32]`` bias (8 KiB) would be held among the weights,
    computed from two 64-byte tables and a few scalars
    (pyocc.frontend.onnx_import.EXPANDING_FOLD_LIMIT). The weights are those
    tables and scalars and the splats' one-element blocks; the bias is
    computed in the arena by native kernels and matches onnxruntime."""
    model = t5_relative_attention()
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    inputs = _inputs(model, 32)
    compiled = pyocc.compile(fresh, shapes={"x": inputs["x"].shape})
    report = compiled.memory_report()
    held = sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    assert report.numpy_sites == 0
    assert report.weight_bytes <= held + 128, report.weight_bytes  # the tables, the scalars, splats' blocks
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(compiled.run(inputs)["y"], session.run(None, inputs)[0], rtol=1e-5, atol=1e-5)


def test_a_table_every_layer_reads_is_not_alive_across_the_layers_at_small_lengths() -> None:
    """At S = 1 and 2 a static compile folds the rotary table (32 and 64
    bytes) into weights; the symbolic program computes it (at its probes it
    is larger than its sources), and it was alive from the first layer to
    the second, across the MLP's peak: one more aligned slot of 64 bytes
    there, 1.22x the static plan at S = 1 (352 B against 288). It is now
    computed again before the second layer (dnn-recompute{tables}), so the
    first copy dies in the first layer and the arena is the static plan's."""
    model = rotary_layers()
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    compiled = pyocc.compile(fresh, dims={"sequence": MAXIMUM})
    assert isinstance(compiled, SymbolicModel)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for s in (1, 2, 17):
        static_model = onnx.ModelProto()
        static_model.CopyFrom(model)
        static_compiled = pyocc.compile(static_model, shapes={"x": (1, s, HIDDEN)})
        static = static_compiled.memory_report()
        symbolic = compiled.memory_report(dims={"sequence": s})
        assert symbolic.activation_bytes <= 1.05 * static.activation_bytes, (s, symbolic.activation_bytes,
                                                                             static.activation_bytes)
        # the static compile at 17 computes the table twice too (at 1 and 2 it folds it)
        inputs = _inputs(model, s)
        np.testing.assert_allclose(static_compiled.run(inputs)["y"], session.run(None, inputs)[0],
                                   rtol=1e-5, atol=1e-5, err_msg=f"static at S={s}")

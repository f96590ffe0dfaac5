"""Shape inference with symbols (pyocc.frontend.symbolic_shapes): every
tensor's shape of the BERT-, GPT-2-, encoder- and ViT-style graphs as
polynomials in "sequence" (ViT: "batch"), checked against ONNX's own shape inference at concrete
lengths, and every planned buffer's byte size against the polynomial the
probing path (pyocc.symbolic) fits."""

from __future__ import annotations

import functools
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import DYNAMIC_INDEX, IndexType, IntegerAttr
from xdsl.interpreter import Interpreter
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.ir import SSAValue

from pyocc.api import SymbolicLowering, lower_symbolic
from pyocc.dialects.dnn import ops as d
from pyocc.errors import PyoccError
from pyocc.frontend.symbolic_shapes import SymbolicShapes, infer_symbolic_shapes
from pyocc.frontend.symbols import symbolic_inputs
from pyocc.lowering.symbolic_pool import pool_module
from pyocc.planning import Poly, SymbolicBuffer, SymbolicProblem, plan_symbolic
from tests.graphs import (bert_symbolic, encoder_symbolic, every_tensor_an_output, gpt2_symbolic, random_inputs,
                          vit_symbolic)

GRAPHS = {"encoder": (encoder_symbolic, "sequence"), "bert": (bert_symbolic, "sequence"),
          "gpt2": (gpt2_symbolic, "sequence"), "vit": (vit_symbolic, "batch")}
"""name -> (builder, its symbolic dimension)"""


def _shapes(model: onnx.ModelProto, maximum: int = 512, symbol: str = "sequence") -> SymbolicShapes:
    return infer_symbolic_shapes(model, symbolic_inputs(model, {symbol: maximum}), what=model.graph.name)


def _at(model: onnx.ModelProto, value: int, symbol: str = "sequence") -> onnx.ModelProto:
    """A copy of `model` with every `symbol` input dimension set to `value`."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for inp in fixed.graph.input:
        for dim in inp.type.tensor_type.shape.dim:
            if dim.dim_param == symbol:
                dim.Clear()
                dim.dim_value = value
    return fixed


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("sequence", [1, 2, 17, 128, 512])
def test_shapes_equal_onnxruntimes_at_each_length(graph: str, sequence: int) -> None:
    """onnxruntime runs the model at one length with every intermediate made
    an output: each array's shape is the symbolic shape at that length."""
    build, symbol = GRAPHS[graph]
    model = build()
    symbolic = _shapes(model, symbol=symbol)
    probe = every_tensor_an_output(model, {n: t.elem_type for n, t in symbolic.tensors.items()})
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = random_inputs(_at(model, sequence, symbol))
    arrays = session.run(None, inputs)
    for info, array in zip(session.get_outputs(), arrays, strict=True):
        assert symbolic.tensors[info.name].concrete({symbol: sequence}) == array.shape, info.name
    assert len(arrays) >= len(model.graph.node)
    assert sum(not symbolic.elements(n.output[0]).is_constant() for n in model.graph.node) > len(model.graph.node) // 2


def test_shapes_are_polynomials_in_the_symbol() -> None:
    model = gpt2_symbolic()
    symbolic = _shapes(model)
    scores = [n.output[0] for n in model.graph.node if n.op_type == "Softmax"][0]
    assert symbolic.text(scores) == "1x4x{sequence}x{sequence}xf32"
    causal = [n.output[0] for n in model.graph.node if n.op_type == "Slice"][1]
    assert symbolic.bytes(causal) == Poly.parse("sequence^2")  # bool: one byte each
    merged = [n.output[0] for n in model.graph.node if n.op_type == "Reshape"][3]
    assert symbolic.shape(merged) == (Poly.constant(1), Poly.symbol("sequence"), Poly.constant(32))
    length = [n.output[0] for n in model.graph.node if n.op_type == "Gather"][0]
    assert symbolic.tensors[length].values == (Poly.symbol("sequence"),)


def _named(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its intermediate tensors renamed `t0x`, `t1x`, ...: xDSL
    keeps those as SSA name hints, so a planned buffer names its tensor."""
    keep = {i.name for i in model.graph.input} | {o.name for o in model.graph.output}
    names: dict[str, str] = {}
    for node in model.graph.node:
        for output in node.output:
            if output not in keep:
                names[output] = f"t{len(names)}x"
    for node in model.graph.node:
        node.input[:] = [names.get(i, i) for i in node.input]
        node.output[:] = [names.get(o, o) for o in node.output]
    return model


MAXIMUM = 40
"""The range the lowering tests compile for (1..40)."""


@functools.cache
def _lowered(graph: str) -> tuple[onnx.ModelProto, SymbolicLowering]:
    """Graph `graph` (tensors renamed by `_named`) lowered once for every
    value up to MAXIMUM, shared by the tests below (none changes it)."""
    build, symbol = GRAPHS[graph]
    model = _named(build())
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    return model, lower_symbolic(fresh, {symbol: MAXIMUM})


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_buffer_sizes_equal_the_probed_polynomials(graph: str) -> None:
    """The probing path fits each buffer's size on probes near the maximum;
    symbolic inference derives it from the dim_param. Both must be the same
    polynomial, hence agree at every length."""
    symbol = GRAPHS[graph][1]
    model, lowered = _lowered(graph)
    symbolic = _shapes(model, MAXIMUM, symbol)
    buffers = lowered.plan.problem.buffers
    for buffer, (dims, _) in zip(buffers, lowered.buffer_types, strict=True):
        # a table made again before its late readers (dnn-recompute{tables}) has its tensor's shape
        tensor = buffer.name.split("#")[0].removesuffix("_again")
        if tensor.endswith("_scratch"):  # a conv's im2col workspace (ViT's patch embedding): no tensor
            assert graph == "vit"
            continue
        assert symbolic.bytes(tensor) == buffer.size, buffer.name
        # the probed memref's dims, fitted (lowering may flatten [1, S, 32] to [S, 32])
        assert math.prod(dims, start=Poly.constant(1)) == symbolic.elements(tensor), buffer.name
        for sequence in (1, 2, 17, MAXIMUM):
            assert symbolic.bytes(tensor).evaluate({symbol: sequence}) == buffer.size.evaluate({symbol: sequence})
    assert sum(not b.size.is_constant() for b in buffers) >= len(buffers) - 2


# -- one line for what symbolic inference cannot do ---------------------------

def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], shape: list) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_op_without_a_rule_is_one_line() -> None:
    model = _model([helper.make_node("TopK", ["x", "k"], ["y", "i"], axis=-1)],
                   [onnx.numpy_helper.from_array(np.array([2], np.int64), "k")], [1, "sequence"])
    with pytest.raises(PyoccError, match=r"^bad: symbolic shape inference: TopK at node 'y' has no symbolic shape "
                                         r"rule .*; fix the dimension with --shape$"):
        _shapes(model)


def test_reshape_that_does_not_divide_is_one_line() -> None:
    model = _model([helper.make_node("Reshape", ["x", "target"], ["y"])],
                   [onnx.numpy_helper.from_array(np.array([-1, 3], np.int64), "target")], [1, "sequence"])
    with pytest.raises(PyoccError, match=r"Reshape at node 'y' infers -1 as \(sequence\) / \(3\), "
                                         r"which is no polynomial; fix the dimension with --shape"):
        _shapes(model)


def test_slice_whose_end_crosses_the_dimension_is_one_line() -> None:
    # table[:, :sequence] of a 100-column table: all of sequence below 100, clamped above: no polynomial
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
             helper.make_node("Slice", ["table", "zero", "length", "one"], ["y"])]
    inits = [onnx.numpy_helper.from_array(np.array([1], np.int64), "one"),
             onnx.numpy_helper.from_array(np.array([0], np.int64), "zero"),
             onnx.numpy_helper.from_array(np.zeros((1, 100), np.float32), "table")]
    with pytest.raises(PyoccError, match=r"^bad: symbolic shape inference: Slice at node 'y' compares sequence "
                                         r"with 100, whose order changes inside the range; fix the dimension"):
        _shapes(_model(nodes, inits, [1, "sequence"]))


# -- the plan as IR: offsets and pool size as arith ops on the symbols -----------

@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_pool_ir_computes_the_plans_offsets_at_every_length(graph: str) -> None:
    """xDSL's interpreter runs the emitted function at every length in range:
    pool size and offsets equal the plan's (which verify_symbolic_plan checked)."""
    symbol = GRAPHS[graph][1]
    lowered = _lowered(graph)[1]
    module = lowered.pool_module(views=False)
    module.verify()
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    assert {op.name for op in function.body.block.ops} <= {
        "arith.constant", "arith.addi", "arith.muli", "arith.cmpi", "arith.select", "arith.floordivsi", "func.return"}
    interpreter = Interpreter(module)
    interpreter.register_implementations(ArithFunctions())
    interpreter.register_implementations(FuncFunctions())
    names = [b.name for b in lowered.plan.problem.buffers]
    for sequence in range(1, MAXIMUM + 1):
        results = [r.value.data for r in interpreter.call_op(function.sym_name.data,
                                                             (IntegerAttr(sequence, IndexType()),))]
        offsets = lowered.plan.offsets({symbol: sequence})
        assert results[0] == lowered.plan.pool_bytes({symbol: sequence})
        assert results[1:] == [offsets[n] for n in names]
    assert lowered.shapes is not None and lowered.shapes.ranges == {symbol: (1, MAXIMUM)}


def test_pool_ir_computes_a_small_buffers_alignment_from_its_size() -> None:
    """Two 16*S^2-byte buffers live together: 16 bytes apart at S = 1, a
    line apart from S = 2 (`fitted_alignment`). The emitted function
    computes the alignment from the size (a compare-and-select per power of
    two from its least, 16, up: 32 and 16) and its offsets equal the plan's
    at every S; a buffer never below its alignment in the range keeps the
    constant one (no select)."""
    problem = SymbolicProblem((SymbolicBuffer("bias", Poly.parse("16*S^2"), 0, 2, 64),
                               SymbolicBuffer("masked", Poly.parse("16*S^2"), 1, 3, 64)), {"S": (1, 8)})
    for low, selects in ((1, 2), (2, 0)):
        plan = plan_symbolic(problem.within({"S": (low, 8)}))
        module = pool_module(plan)
        function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        assert sum(isinstance(op, arith.SelectOp) for op in function.body.block.ops) == selects
        interpreter = Interpreter(module)
        interpreter.register_implementations(ArithFunctions())
        interpreter.register_implementations(FuncFunctions())
        for s in range(low, 9):
            results = [r.value.data for r in interpreter.call_op(function.sym_name.data, (IntegerAttr(s, IndexType()),))]
            assert results == [plan.pool_bytes({"S": s}), *plan.offsets({"S": s}).values()], s
        assert sorted(plan.offsets({"S": low}).values()) == [0, 16 * low * low]  # S = 1: 16 bytes apart


def test_pool_ir_of_a_static_size_has_no_symbol_arithmetic() -> None:
    """Every buffer of constant size: the function folds to constants (the negative twin)."""
    problem = SymbolicProblem((SymbolicBuffer("a", Poly.constant(100), 0, 1, 64),
                               SymbolicBuffer("b", Poly.constant(28), 1, 2, 64)), {"S": (1, 8)})
    plan = plan_symbolic(problem)
    function = next(op for op in pool_module(plan).walk() if isinstance(op, func.FuncOp))
    assert [a.name_hint for a in function.body.block.args] == ["S"]  # still an argument
    assert not function.body.block.args[0].uses
    returned = function.body.block.last_op
    assert isinstance(returned, func.ReturnOp)
    folded = [plan.pool_bytes({"S": 1}), *plan.offsets({"S": 1}).values()]
    assert [_constant_of(v) for v in returned.operands] == folded


def _constant_of(value: SSAValue) -> int | None:
    """The integer an SSA value folds to when it is made of constants and
    add/mul/floordiv/select-by-compare ops only (None otherwise)."""
    op = value.owner
    if isinstance(op, arith.ConstantOp):
        return op.value.value.data
    args = [_constant_of(o) for o in op.operands]
    if isinstance(op, arith.AddiOp):
        return args[0] + args[1]
    if isinstance(op, arith.MuliOp):
        return args[0] * args[1]
    if isinstance(op, arith.FloorDivSIOp):
        return args[0] // args[1]
    if isinstance(op, arith.CmpiOp):
        return int(args[0] >= args[1])
    if isinstance(op, arith.SelectOp):
        return args[1] if args[0] else args[2]
    return None


def test_conv_with_a_symbolic_spatial_size_is_one_line() -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])]
    inits = [onnx.numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w")]
    graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "height", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(PyoccError, match=r"^bad: symbolic shape inference: Conv at node 'y' has a symbolic spatial "
                                         r"size; symbols may be its batch only; fix the dimension with --shape$"):
        _shapes(model, symbol="height")


@pytest.mark.parametrize("graph", ["gpt2", "vit"])
def test_pool_ir_views_have_the_buffers_dynamic_types(graph: str) -> None:
    """With views: one dnn.symbolic_pool of the pool size and one
    dnn.symbolic_view per buffer at its offset, each memref with a `?` for
    every dimension that varies, its value an SSA operand; the module verifies."""
    lowered = _lowered(graph)[1]
    module = lowered.pool_module()
    module.verify()
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    ops = list(function.body.block.ops)
    pools = [op for op in ops if isinstance(op, d.SymbolicPoolOp)]
    views = [op for op in ops if isinstance(op, d.SymbolicViewOp)]
    returned = ops[-1]
    assert isinstance(returned, func.ReturnOp) and len(pools) == 1
    assert pools[0].size == returned.operands[0]
    assert [v.offset for v in views] == list(returned.operands[1:])
    dynamic = 0
    for view, (dims, element) in zip(views, lowered.buffer_types, strict=True):
        assert view.result.type.element_type == element
        shape = view.result.type.get_shape()
        assert [s == DYNAMIC_INDEX for s in shape] == [not dim.is_constant() for dim in dims]
        assert [s for s in shape if s != DYNAMIC_INDEX] == [dim.evaluate({}) for dim in dims if dim.is_constant()]
        dynamic += len(view.dims)
    # every buffer but ViT's im2col block has a symbolic dimension, attention scores two
    assert dynamic >= len(views) - (graph == "vit")


# -- the pool-form program with dynamic memrefs -----------------------------------

@pytest.mark.parametrize("graph", ["encoder", "bert"])
def test_pool_form_has_dynamic_memrefs_and_no_allocations(graph: str) -> None:
    """The whole program for every length: the symbol is the first argument,
    the graph's memrefs have a `?` exactly where the ONNX input/output has the
    symbol (from the symbolic shape inference, an independent derivation),
    every buffer is a view of one symbolic pool, no malloc or dealloc is left,
    and the module verifies."""
    symbol = GRAPHS[graph][1]
    lowered = _lowered(graph)[1]
    module = lowered.pool_form_module()
    module.verify()
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    block = function.body.block
    assert [a.type for a in block.args[:1]] == [IndexType()] and block.args[0].name_hint == symbol
    assert lowered.shapes is not None
    names = [*lowered.shapes.inputs, *lowered.shapes.outputs]
    for arg, onnx_name in zip(block.args[1:], names, strict=True):
        dims = lowered.shapes.shape(onnx_name)
        assert [s == DYNAMIC_INDEX for s in arg.type.get_shape()] == [not d.is_constant() for d in dims], onnx_name
    kinds = [op.name for op in block.ops]
    assert "dnn.malloc" not in kinds and "dnn.dealloc" not in kinds
    assert kinds.count("dnn.symbolic_pool") == 1
    assert kinds.count("dnn.symbolic_view") == len(lowered.plan.problem.buffers)
    # the compute ops read and write the views: every view is used
    views = [op for op in block.ops if isinstance(op, d.SymbolicViewOp)]
    assert all(view.result.uses for view in views)


def test_pool_form_of_a_constant_sliced_to_the_length_is_one_line() -> None:
    """GPT-2-style: the position table and the causal mask fold at import
    into constants of S rows, whose types differ between probes."""
    lowered = _lowered("gpt2")[1]
    with pytest.raises(PyoccError, match=r"^gpt2_symbolic: dnn.weight %\w+ holds a number that depends on the "
                                         r"symbolic size; the symbolic pool form cannot write it yet"):
        lowered.pool_form_module()

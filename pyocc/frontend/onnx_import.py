"""ONNX ModelProto -> a module with one `func.func` in the `onnx` dialect.

The import runs in three steps:

1. **Load and check**: the file parses, every op is in the default domain
   and known to pyocc, and every graph input has a static shape (the user may
   fix dynamic dimensions with `shapes={"x": (1, 3, 224, 224)}`).
2. **Fold and infer**: ONNX shape inference gives every value a type; nodes
   whose inputs are all constants (Constant, Shape of a static tensor, the
   Concat/Gather/Unsqueeze chains exporters emit to compute shapes) are
   evaluated with numpy, and inference runs again until nothing changes.
3. **Emit**: one op per remaining node. Shape-like inputs (Reshape's shape,
   Slice's bounds, ...) become properties, so every op has one form whatever
   the opset. Weights become `onnx.Constant` (see pyocc/weights.py) or stay
   `onnx.ConstantOfShape` when the model fills them with one value.
"""

from __future__ import annotations

import functools
import math
import mmap
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import ExternalDataInfo, uses_external_data
from onnx.reference import ReferenceEvaluator
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    Signedness,
    StringAttr,
    TensorType,
    f32,
    f64,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.irdl import VarResultDef
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from pyocc.dialects.onnx import OP_BY_TYPE
from pyocc.dialects.onnx.base import OnnxOp
from pyocc.dialects.onnx.tensor import ConstantOfShapeOp, ConstantOp
from pyocc.errors import PyoccError, one_line
from pyocc.weights import INLINE_LIMIT, store_array

#: Inputs that pyocc needs at compile time, by op type: input index -> the
#: property it becomes. Older opsets carry the same values as attributes of
#: the same name, so both forms meet here.
CONSTANT_INPUTS: dict[str, dict[int, str]] = {
    "Reshape": {1: "shape"},
    "Unsqueeze": {1: "axes"},
    "Squeeze": {1: "axes"},
    "ReduceSum": {1: "axes"},
    "ReduceMean": {1: "axes"},
    "ReduceMax": {1: "axes"},
    "ReduceMin": {1: "axes"},
    "ReduceProd": {1: "axes"},
    "ReduceL1": {1: "axes"},
    "ReduceL2": {1: "axes"},
    "ReduceLogSum": {1: "axes"},
    "ReduceLogSumExp": {1: "axes"},
    "ReduceSumSquare": {1: "axes"},
    "CumSum": {1: "axis"},
    "TopK": {1: "K"},
    "Trilu": {1: "k"},
    "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps"},
    "Pad": {1: "pads", 2: "constant_value", 3: "axes"},
    "Resize": {1: "roi", 2: "scales", 3: "sizes"},
    "Expand": {1: "shape"},
    "Tile": {1: "repeats"},
    "Clip": {1: "min", 2: "max"},
    "Split": {1: "split"},
    "Dropout": {1: "ratio", 2: "training_mode"},
    "Range": {0: "start", 1: "limit", 2: "delta"},
}

#: Ops whose output shape depends on input values, with what decides it.
#: On constant inputs they fold at import; on run-time values pyocc cannot
#: plan them.
DATA_DEPENDENT_SHAPES: dict[str, str] = {
    "NonZero": "the number of non-zero elements",
    "NonMaxSuppression": "the number of boxes kept",
    "Unique": "the number of distinct values",
    "Compress": "the number of true conditions",
    "If": "its branches give outputs of different shapes, and a value computed at run time picks one",
    "StringSplit": "the number of substrings",
}

#: Attributes that carry no meaning at inference and are dropped.
IGNORED_ATTRIBUTES = {"is_test", "consumed_inputs", "training_mode", "seed", "to",
                      "num_outputs", "spatial", "roi", "sizes", "value"}

#: Ops for which an empty input adds nothing and is left out (exporters
#: concatenate empty shape pieces and empty slices).
SKIPS_EMPTY_INPUTS = {"Concat"}

#: Ops that must not be folded even when their inputs are constant: their
#: result would be a large materialised weight that the op states in a line.
NEVER_FOLD = {"ConstantOfShape"}

#: Fold a constant subgraph only while its result stays this small; larger
#: constant computations (e.g. a transposed weight) stay ops.
FOLD_LIMIT_ELEMENTS = 1 << 16

EXPANDING_FOLD_LIMIT = 64
"""Bytes up to which a folded data tensor may be larger than the constants
it was computed from (see `_Importer.unfold_expanding`).

Constant folding must not make the program's memory larger. A folded
tensor is held among the weights for the model's whole life; computed at
run time it is a buffer of the arena, planned at its true lifetime, and
the constants it was computed from are held instead. Folding a Sub of two
position vectors ``[1, S] - [S, 1]``, a causal mask, a position bias
gathered from a ``[32, 4]`` table (T5) turns a few hundred bytes into
``[S, S]`` tensors: in a static compile at S = 128 T5 held 0.4 MB more
weights and its arena was 0.68 of the symbolic compile's, which computes
them (lowered near the maximum S, where they exceed FOLD_LIMIT_ELEMENTS).
Such a tensor stays an op unless it is at most this many bytes: one slot
of the arena's default 64-byte alignment, the least a buffer takes there,
so that keeping the op could save no memory and would cost a kernel call
per run. Values the compiler reads at compile time (shapes, axes, Slice
bounds: `_Importer.compile_time_values`) always fold."""


@functools.cache  # attributes are immutable; building the table per call was 1/6 of DenseNet's import
def element_type(onnx_type: int) -> Attribute:
    """The xDSL element type of an ONNX TensorProto data type."""
    table: dict[int, Attribute] = {
        TensorProto.FLOAT: Float32Type(),
        TensorProto.DOUBLE: Float64Type(),
        TensorProto.FLOAT16: Float16Type(),
        TensorProto.BFLOAT16: BFloat16Type(),
        TensorProto.INT64: IntegerType(64),
        TensorProto.INT32: IntegerType(32),
        TensorProto.INT16: IntegerType(16),
        TensorProto.INT8: IntegerType(8),
        TensorProto.UINT8: IntegerType(8, Signedness.UNSIGNED),
        TensorProto.BOOL: IntegerType(1),
    }
    if onnx_type not in table:
        name = TensorProto.DataType.Name(onnx_type) if onnx_type in TensorProto.DataType.values() else str(onnx_type)
        raise PyoccError(f"tensor element type {name} is not supported by pyocc")
    return table[onnx_type]


@functools.lru_cache(maxsize=1 << 14)
def tensor_type(element: Attribute, shape: tuple[int, ...]) -> TensorType:
    """``TensorType(element, shape)``, made once (attributes are immutable):
    shape inference types every tensor of the model again in each of its
    rounds, and verifying a new type each time was a quarter of an import
    at a symbolic compile's later probes."""
    return TensorType(element, shape)


@functools.lru_cache(maxsize=1 << 12)
def _evaluator(node: bytes, opsets: tuple[tuple[str, int], ...]) -> ReferenceEvaluator | None:
    """onnx's reference evaluator of one node (its serialized proto), its
    inputs fed at each run; None where it cannot be made. Made once per
    node: making one cost 0.25 ms, running it 0.02, and a symbolic
    compile folds each shape computation again at every probe."""
    proto = onnx.NodeProto()
    proto.ParseFromString(node)
    graph = helper.make_graph(
        [proto], "fold", [helper.make_value_info(i, helper.TypeProto()) for i in dict.fromkeys(proto.input) if i],
        [helper.make_value_info(o, helper.TypeProto()) for o in proto.output if o])
    try:
        return ReferenceEvaluator(helper.make_model(
            graph, opset_imports=[helper.make_opsetid(domain, version) for domain, version in opsets]))
    except Exception:  # noqa: BLE001 - an op the reference evaluator lacks: the node is not folded
        return None


def numpy_dtype_of(t: Attribute) -> Any:
    """The numpy dtype of an xDSL element type the frontend produces."""
    table = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
             "i16": np.int16, "i8": np.int8, "ui8": np.uint8, "i1": np.bool_}
    if str(t) not in table:
        raise PyoccError(f"element type {t} has no numpy equivalent")
    return table[str(t)]


def value_name(name: str) -> str:
    """An SSA name hint from an ONNX tensor name (`gpu_0/conv1_0` -> `gpu_0_conv1_0`)."""
    hint = re.sub(r"[^A-Za-z0-9_$.]", "_", name)
    return hint if hint and not hint[0].isdigit() else "v" + hint


def parse_shape(text: str) -> tuple[int, ...]:
    """`1x3x224x224` -> (1, 3, 224, 224); raises PyoccError on bad text."""
    try:
        dims = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        raise PyoccError(f"shape '{text}' is not of the form 1x3x224x224") from None
    if any(d < 0 for d in dims):
        raise PyoccError(f"shape '{text}' has a negative dimension")
    return dims


def load_model(path: str | Path, external_data: bool = True) -> onnx.ModelProto:
    """Read an .onnx file, with one-line errors for missing or broken files.
    With `external_data=False`, weights stored in files next to the model
    stay there (import_model memory-maps them; see external_array)."""
    path = Path(path)
    if not path.exists():
        raise PyoccError(f"{path}: no such file")
    if path.is_dir():
        raise PyoccError(f"{path}: is a directory, expected an .onnx file")
    try:
        model = onnx.load(str(path), load_external_data=external_data)
    except (DecodeError, ValueError, RuntimeError, OSError) as e:
        raise PyoccError(
            f"{path}: not a valid ONNX model (the file is corrupt or truncated: {str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None
    if not model.graph.node and not model.graph.output:
        raise PyoccError(f"{path}: not a valid ONNX model (it has no graph)")
    return model


FoldCache = dict[tuple[bytes, tuple[tuple[str, tuple[int, ...], bytes], ...]], list[np.ndarray] | None]
"""Folds by (the node's serialized proto, its inputs' dtype, shape and
bytes): their results, or None where the reference evaluator cannot run
the node (`import_model`'s `folds`)."""


def import_model(
    model: onnx.ModelProto | str | Path,
    shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    function_name: str = "main_graph",
    unfold_broadcasts: int = 0,
    verify: bool = True,
    folds: FoldCache | None = None,
) -> ModuleOp:
    """Import an ONNX model (a ModelProto or a path) into the `onnx` dialect.

    `shapes` fixes graph input shapes (needed for dynamic dimensions).
    `unfold_broadcasts` (a symbolic compile's probe value of its symbol; 0:
    off): a folded constant whose blocks along its first axis are all
    equal, and that has the probe value in a later dimension, is
    imported as the Expand of its first block (`_Importer.broadcasts_as_expand`).
    `verify=False` leaves out the op verifiers on the imported module: a
    symbolic compile's probes after the first, whose programs must be the
    first's but for their integers (pipelines.Options.verify).
    `folds` (a dict the caller keeps, empty at first) is shared by several
    imports of one model: a constant node folded with the same input values
    in an earlier one is not evaluated again (a symbolic compile's probes
    fold the same weights-only subgraphs at every probe value).
    Raises PyoccError for anything the user must fix."""
    source = ""
    if not hasattr(model, "graph"):
        source = str(model)
        # weights in external files are memory-mapped, not read into the proto
        model = load_model(model, external_data=False)  # type: ignore[arg-type]
    return _Importer(model, dict(shapes or {}), function_name, source,  # type: ignore[arg-type]
                     unfold_broadcasts=unfold_broadcasts, verify=verify, folds=folds).run()


def external_array(tensor: TensorProto, base_dir: Path, what: str = "the model",
                   mapped: dict[Path, mmap.mmap] | None = None) -> np.ndarray:
    """The data of `tensor`, an initializer whose bytes are stored in a file
    next to the model (ONNX external data), memory-mapped read-only instead
    of read: a model's weights are then held once, by the compiled model,
    not also by the proto and its copy. Types numpy cannot map (packed
    4-bit, strings) are read as onnx reads them. PyoccError (one line,
    naming the tensor and the file) when the file is missing or too short.

    `mapped` (file -> its mapping) is shared by the tensors of one model:
    each data file is then mapped once, and every tensor is a view into it
    (one mapping and one descriptor per file, not per tensor, held until
    the last view goes)."""
    info = ExternalDataInfo(tensor)
    location = Path(info.location)
    name = tensor.name
    if location.is_absolute() or ".." in location.parts:
        raise PyoccError(f"{what}: initializer '{name}' keeps its data at '{info.location}', outside the model's "
                         "folder; external data must lie in the model's folder (re-save the model with onnx.save)")
    path = base_dir / location
    if not path.is_file():
        raise PyoccError(f"{what}: initializer '{name}' keeps its data in '{info.location}', which is not in "
                         f"{base_dir}; put that file next to the model")
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    count = math.prod(tensor.dims)
    packed = helper.tensor_dtype_to_storage_tensor_dtype(tensor.data_type) != tensor.data_type
    if packed or dtype.kind not in "biuf" or count == 0 or not np.little_endian:
        try:
            return numpy_helper.to_array(tensor, str(base_dir))
        except (OSError, ValueError) as e:
            raise PyoccError(f"{what}: initializer '{name}': cannot read its data from '{info.location}' "
                             f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    offset = int(info.offset or 0)
    size = path.stat().st_size
    nbytes = count * dtype.itemsize
    if (info.length is not None and int(info.length) != nbytes) or offset + nbytes > size:
        raise PyoccError(f"{what}: initializer '{name}' needs {nbytes:,d} bytes at offset {offset:,d} of "
                         f"'{info.location}', which holds {size:,d} bytes; the file is truncated or not this model's")
    mapping = None if mapped is None else mapped.get(path)
    if mapping is None:
        with open(path, "rb") as file:
            mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        if mapped is not None:
            mapped[path] = mapping
    return np.ndarray((count,), dtype=dtype, buffer=mapping, offset=offset).reshape(tuple(tensor.dims))


@dataclass
class Splat:
    """A constant tensor of one repeated value (ConstantOfShape's output)."""

    value: Any
    shape: tuple[int, ...]
    onnx_type: int

    def materialize(self) -> np.ndarray:
        return np.full(self.shape, self.value, dtype=helper.tensor_dtype_to_np_dtype(self.onnx_type))


@dataclass
class _Importer:
    model: onnx.ModelProto
    shapes: dict[str, Sequence[int]]
    function_name: str
    source: str = ""
    """The model's file, when it came from one (named in some messages)."""
    unfold_broadcasts: int = 0
    """The probe value whose folded batch broadcasts import as Expands (see import_model; 0: none)."""
    verify: bool = True
    """Run the op verifiers on the imported module (see import_model)."""
    folds: FoldCache | None = None
    """Folds shared with other imports of the model (see import_model)."""
    consts: dict[str, Any] = field(default_factory=dict)
    types: dict[str, TensorType] = field(default_factory=dict)
    values: dict[str, SSAValue] = field(default_factory=dict)
    folded_by: dict[str, onnx.NodeProto] = field(default_factory=dict)
    """The node each folded constant was computed by (`unfold_expanding` may put it back)."""
    sources: dict[str, dict[str, int]] = field(default_factory=dict)
    """For each folded constant, the constants it was computed from that no
    fold made (initializers, Constant, Shape and ConstantOfShape results),
    with the bytes each is held in."""

    # -- step 1 ----------------------------------------------------------
    def check_ops(self) -> None:
        """Reject foreign domains, subgraphs, and ops pyocc cannot run. An
        op pyocc lacks is fine when all its inputs are compile-time constants
        (e.g. the Trilu that builds a causal mask): folding evaluates it."""
        static = {t.name for t in self.model.graph.initializer}
        for node in self.model.graph.node:
            if node.domain not in ("", "ai.onnx"):
                raise PyoccError(
                    f"node '{node.name or node.output[0]}' uses op {node.op_type} of domain "
                    f"'{node.domain}', which pyocc does not support (only the default ONNX domain)"
                )
            foldable = node.op_type in ("Shape", "Size") or all(i in static for i in node.input if i)
            if node.op_type in DATA_DEPENDENT_SHAPES and not foldable and (
                    node.op_type != "If" or _branch_shapes_differ(node)):
                self.reject_data_dependent(node)
            if foldable:
                static.update(o for o in node.output if o)
            elif node.op_type not in OP_BY_TYPE:
                self.reject_op(node)
            for attr in node.attribute:
                if attr.type == attr.GRAPH or attr.type == attr.GRAPHS:
                    raise PyoccError(f"op {node.op_type} with a subgraph is not supported")

    def reject_data_dependent(self, node: onnx.NodeProto) -> None:
        """Raise the one-line error for an op whose output shape depends on
        the values of its inputs, computed at run time."""
        where = f"{self.source}: " if self.source else ""
        raise PyoccError(
            f"{where}{node.op_type} at node '{node.name or node.output[0]}' has an output shape that depends on "
            f"the input data ({DATA_DEPENDENT_SHAPES[node.op_type]}); pyocc plans static shapes only: run this part "
            "of the model outside pyocc, or export the model without it"
        )

    def reject_op(self, node: onnx.NodeProto) -> None:
        """Raise the one-line error for an op pyocc has no lowering for."""
        raise PyoccError(
            f"unsupported op {node.op_type} (node '{node.name or node.output[0]}', opset {self.opset()}); "
            f"pyocc supports: {', '.join(sorted(OP_BY_TYPE))}"
        )

    def opset(self) -> int:
        for entry in self.model.opset_import:
            if entry.domain in ("", "ai.onnx"):
                return entry.version
        return 1

    def fix_input_shapes(self) -> None:
        graph = self.model.graph
        initializers = {t.name for t in graph.initializer}
        inputs = [i for i in graph.input if i.name not in initializers]
        known = {i.name for i in inputs}
        for name in self.shapes:
            if name not in known:
                raise PyoccError(
                    f"--shape names '{name}', which is not a graph input "
                    f"(inputs: {', '.join(sorted(known)) or 'none'})"
                )
        for inp in inputs:
            ttype = inp.type.tensor_type
            if not inp.type.HasField("tensor_type"):
                raise PyoccError(f"graph input '{inp.name}' is not a tensor")
            if inp.name in self.shapes:
                given = list(self.shapes[inp.name])
                if ttype.HasField("shape") and len(ttype.shape.dim) != len(given):
                    raise PyoccError(
                        f"--shape for '{inp.name}' has rank {len(given)} but the model says rank {len(ttype.shape.dim)}"
                    )
                for i, dim in enumerate(ttype.shape.dim):
                    if dim.HasField("dim_value") and dim.dim_value != given[i]:
                        raise PyoccError(
                            f"--shape for '{inp.name}' sets dimension {i} to {given[i]} but the model fixes it to {dim.dim_value}"
                        )
                del ttype.shape.dim[:]
                for d in given:
                    ttype.shape.dim.add().dim_value = int(d)
                continue
            if not ttype.HasField("shape"):
                raise PyoccError(
                    f"graph input '{inp.name}' has no shape; give one with --shape {inp.name}=1x3x224x224"
                )
            for i, dim in enumerate(ttype.shape.dim):
                if dim.HasField("dim_value") and dim.dim_value == 0:
                    raise PyoccError(
                        f"graph input '{inp.name}' has a zero-sized dimension {i}; pyocc compiles tensors "
                        f"with at least one element: give a non-empty shape with --shape {inp.name}=..."
                    )
                if not dim.HasField("dim_value") or dim.dim_value <= 0:
                    label = f" ('{dim.dim_param}')" if dim.dim_param else ""
                    example = "x".join(
                        str(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else "1"
                        for d in ttype.shape.dim
                    )
                    raise PyoccError(
                        f"graph input '{inp.name}' has a dynamic dimension {i}{label}; "
                        f"fix it with --shape {inp.name}={example} (or shapes={{'{inp.name}': ...}} in the API)"
                        + (f", or run every value up to MAX with --dim {dim.dim_param}=MAX" if dim.dim_param else "")
                    )

    # -- step 2 ----------------------------------------------------------
    def fold_and_infer(self) -> None:
        graph = self.model.graph
        base_dir = Path(self.source).parent
        mapped: dict[Path, mmap.mmap] = {}  # each data file mapped once
        for init in graph.initializer:
            if uses_external_data(init):
                self.consts[init.name] = external_array(init, base_dir, self.source or "the model", mapped)
            else:
                self.consts[init.name] = numpy_helper.to_array(init)
        nodes = list(graph.node)
        for _round in range(8):
            self.infer_types(nodes)
            remaining = []
            for node in nodes:
                if self.try_fold(node):
                    self.note_fold(node)
                else:
                    remaining.append(node)
            done = len(remaining) == len(nodes)
            nodes = remaining
            if done:
                break
        nodes = [self.gather_nd_as_reshape(self.gather_as_reshape(node)) for node in nodes]
        self.nodes = self.splats_as_blocks(self.unfold_expanding(nodes))
        if self.unfold_broadcasts:
            self.nodes = self.broadcasts_as_expand(self.nodes)

    def note_fold(self, node: onnx.NodeProto) -> None:
        """Record that `node` was folded: its results' node and sources (the
        union of its inputs' sources; a result of Shape, Size, Constant or
        ConstantOfShape, or an empty one, is its own source)."""
        outputs = [o for o in node.output if o]
        own = node.op_type in ("Shape", "Size", "Constant", "ConstantOfShape") or \
            all(_nbytes(self.consts[o]) == 0 for o in outputs)
        sources: dict[str, int] = {}
        if not own:
            for name in node.input:
                if name:
                    sources.update(self.sources.get(name) or {name: _nbytes(self.consts[name])})
        for o in outputs:
            self.folded_by[o] = node
            self.sources[o] = {o: _nbytes(self.consts[o])} if own else sources

    def compile_time_values(self) -> set[str]:
        """The tensors whose values the compiler reads at compile time, and
        everything they are computed from: inputs that become properties
        (CONSTANT_INPUTS: shapes, axes, Slice bounds, Range's bounds), and
        every input of an op that runs only folded (one pyocc has no
        run-time form of, one of DATA_DEPENDENT_SHAPES). Shape and Size
        read only their input's type. These always fold."""
        wanted: list[str] = []
        for node in self.model.graph.node:
            if node.op_type not in OP_BY_TYPE or node.op_type in DATA_DEPENDENT_SHAPES:
                wanted += [i for i in node.input if i]
            else:
                slots = CONSTANT_INPUTS.get(node.op_type, {})
                wanted += [i for k, i in enumerate(node.input) if i and k in slots]
        return computed_from(self.model.graph.node, wanted)

    def expands(self, name: str) -> bool:
        """True when folded constant `name` takes more bytes than
        EXPANDING_FOLD_LIMIT and than the constants it was computed from
        (its `sources`) together."""
        held = _nbytes(self.consts[name])
        return held > max(EXPANDING_FOLD_LIMIT, sum(self.sources.get(name, {name: held}).values()))

    def unfold_expanding(self, nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
        """`nodes` with the folds put back, in the graph's order, that made
        a data tensor larger than what it was computed from (`expands`; see
        EXPANDING_FOLD_LIMIT for why): starting from the constants the
        remaining nodes and the graph's outputs read, a folded constant
        that expands is computed at run time by its node again, whose own
        inputs are then looked at the same way, back to the small
        constants (a position table, the scalars of a Range) it started
        from. A constant that expands but holds one value repeated becomes
        a splat instead (one element: `splats_as_blocks`). Compile-time
        values (`compile_time_values`) and the results of ops that run only
        folded stay folded. A fold whose result is not larger than its
        sources stays, however large the intermediate values it went
        through (GPT-2's positions: a Range gathered from the position
        table, a slice of it)."""
        compile_time = self.compile_time_values()
        wanted = [o.name for o in self.model.graph.output]
        for node in nodes:
            slots = CONSTANT_INPUTS.get(node.op_type, {})
            wanted += [i for k, i in enumerate(node.input) if i and k not in slots]
        unfolded: dict[int, onnx.NodeProto] = {}
        seen: set[str] = set()
        while wanted:
            name = wanted.pop()
            node = self.folded_by.get(name)
            if name in seen or node is None or name not in self.consts or isinstance(self.consts[name], Splat):
                continue
            seen.add(name)
            if id(node) in unfolded or not self.expands(name) or node.op_type not in OP_BY_TYPE or \
                    node.op_type in DATA_DEPENDENT_SHAPES or any(o in compile_time for o in node.output):
                continue
            flat = np.asarray(self.consts[name]).reshape(-1)
            if (flat == flat[0]).all():
                array = self.consts[name]
                self.consts[name] = Splat(flat[0].item(), tuple(array.shape),
                                          helper.np_dtype_to_tensor_dtype(array.dtype))
                continue
            unfolded[id(node)] = node
            for o in node.output:
                self.consts.pop(o, None)
            slots = CONSTANT_INPUTS.get(node.op_type, {})
            wanted += [i for k, i in enumerate(node.input) if i and k not in slots]
        if not unfolded:
            return nodes
        order = {id(node): k for k, node in enumerate(self.model.graph.node)}
        # a rewritten node (gather_as_reshape) keeps its outputs, and so its place
        place = {o: k for k, node in enumerate(self.model.graph.node) for o in node.output if o}
        merged = [*nodes, *unfolded.values()]
        return sorted(merged, key=lambda n: order.get(id(n), place.get(n.output[0], -1)))

    def splats_as_blocks(self, nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
        """`nodes` with every splat constant (one value repeated) that an op
        which broadcasts its operands (`OnnxOp.BROADCASTS`) reads replaced by
        its smallest block that gives the op the same result: 1 in each axis
        where another operand gives the result its size. A ``[S, S]`` splat
        that a Min with an ``[S, S]`` tensor reads is then one element among
        the weights, not ``S * S`` (T5's relative position buckets: 10.5 MB
        of its weights at S = 512)."""
        rewritten = []
        blocks: dict[tuple[str, tuple[int, ...]], str] = {}
        for node in nodes:
            cls = OP_BY_TYPE.get(node.op_type)
            legacy = any(a.name in ("broadcast", "axis") for a in node.attribute)  # before opset 7
            if cls is None or not cls.BROADCASTS or legacy or not all(i in self.types for i in node.input if i):
                rewritten.append(node)
                continue
            inputs = list(node.input)
            for k, name in enumerate(inputs):
                splat = self.consts.get(name)
                if not isinstance(splat, Splat):
                    continue
                others = [list(self.types[i].get_shape()) for j, i in enumerate(inputs) if j != k and i]
                shape = _block_shape(splat.shape, others)
                if shape == splat.shape:
                    continue
                if (name, shape) not in blocks:
                    block = f"{name}__pyocc_block{sum(1 for key in blocks if key[0] == name)}"
                    small = Splat(splat.value, shape, splat.onnx_type)
                    self.consts[block] = small.materialize() if math.prod(shape) <= INLINE_LIMIT else small
                    self.types[block] = TensorType(element_type(splat.onnx_type), list(shape))
                    blocks[(name, shape)] = block
                inputs[k] = blocks[(name, shape)]
            if inputs != list(node.input):
                node = _with_inputs(node, inputs)
            rewritten.append(node)
        return rewritten

    def broadcasts_as_expand(self, nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
        """`nodes` after an Expand of its first block for every folded
        constant they read whose blocks along the first axis (more than one)
        are all equal, and one of whose later axes is the probe value
        `unfold_broadcasts`: a batch's copies of one table that follows the
        symbol. Exporters write
        ``Expand(positions, [B, S, 32])`` for a batch of B; folded at one S
        that is a constant ``[B, S, 32]`` whose leading blocks at a smaller
        S are not its leading bytes at the maximum, which no program for
        every S reads in place, while its block ``[1, S, 32]`` is. The
        Expand copies the block into the arena at run time, a planned
        buffer. A constant whose first axis alone is the symbol (a symbolic
        batch's copies) is its leading bytes already and stays; a static
        compile keeps every constant among its weights."""
        outputs = {o.name for o in self.model.graph.output}
        expands: list[onnx.NodeProto] = []
        done: set[str] = set()
        for node in nodes:
            for name in node.input:
                if name in done or name in outputs or name not in self.consts:
                    continue
                value = self.consts[name]
                shape = np.shape(value)
                if isinstance(value, Splat) or len(shape) < 2 or shape[0] < 2 or self.unfold_broadcasts not in shape[1:]:
                    continue
                array = np.asarray(value)
                if not all(np.array_equal(array[i], array[0]) for i in range(1, array.shape[0])):
                    continue
                done.add(name)
                block, target = f"{name}__pyocc_block", f"{name}__pyocc_shape"
                self.consts[block] = np.ascontiguousarray(array[:1])
                self.consts[target] = np.array(array.shape, dtype=np.int64)
                self.types[block] = TensorType(self.types[name].element_type, list(array[:1].shape))
                self.types[target] = TensorType(IntegerType(64), [array.ndim])
                del self.consts[name]
                expands.append(helper.make_node("Expand", [block, target], [name], name=f"{name}__pyocc_expand"))
        return expands + nodes

    def gather_as_reshape(self, node: onnx.NodeProto) -> onnx.NodeProto:
        """A Gather whose (folded) indices are every position of its axis in
        order, ``0, 1, ..., n - 1`` in any shape, as the Reshape it is.
        transformers reads a flattened attention mask at ``batch * S +
        position``: with a symbolic sequence those indices are a constant
        whose values, not only its shape, change with S, which no program
        for every S can hold; the Reshape has none."""
        if node.op_type != "Gather" or len(node.input) != 2 or node.input[0] in self.consts \
                or node.input[1] not in self.consts or node.input[0] not in self.types:
            return node
        indices = self.consts[node.input[1]]
        shape = list(self.types[node.input[0]].get_shape())
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
        if isinstance(indices, Splat) or not shape or not -len(shape) <= axis < len(shape):
            return node
        axis %= len(shape)
        flat = np.asarray(indices).reshape(-1)
        if flat.size != shape[axis] or not np.issubdtype(flat.dtype, np.integer) or \
                not np.array_equal(flat, np.arange(shape[axis])):
            return node
        return self.reshape_node(node, [*shape[:axis], *np.shape(indices), *shape[axis + 1:]])

    def gather_nd_as_reshape(self, node: onnx.NodeProto) -> onnx.NodeProto:
        """A GatherND (``batch_dims`` 0) whose (folded) indices ``[..., k]``
        are every index of its data's first k dimensions in order, ``(0, 0),
        (0, 1), ..., (n - 1, m - 1)``, as the Reshape it is. The dynamo
        exporter reads a batch's attention mask ``[B, S]`` at (batch,
        position) pairs ``[B, 1, 1, S, 2]``: with a symbolic sequence and
        B > 1 those pairs are a constant whose leading blocks are not its
        leading bytes at the largest S (the batch comes first), which no
        program for every S can read in place; the Reshape reads nothing.
        Only pairs whose leading dimension is more than 1 are rewritten: at
        a batch of 1 the pairs are read in place already, and rewriting them
        too moved the symbolic planner's cut search for the dynamo GPT-2 at
        batch 1 to a layout 1.086x its static plan at S = 28 (1.000 before),
        so those programs stay as they were."""
        if node.op_type != "GatherND" or len(node.input) != 2 or node.input[0] in self.consts \
                or node.input[1] not in self.consts or node.input[0] not in self.types:
            return node
        if any(a.name == "batch_dims" and helper.get_attribute_value(a) != 0 for a in node.attribute):
            return node
        indices = self.consts[node.input[1]]
        shape = list(self.types[node.input[0]].get_shape())
        if isinstance(indices, Splat) or np.ndim(indices) < 2 or np.shape(indices)[0] < 2:
            return node
        depth = np.shape(indices)[-1]
        if not 1 <= depth <= len(shape) or not np.issubdtype(np.asarray(indices).dtype, np.integer):
            return node
        every = np.indices(shape[:depth]).reshape(depth, -1).T
        if not np.array_equal(np.asarray(indices).reshape(-1, depth), every):
            return node
        return self.reshape_node(node, [*np.shape(indices)[:-1], *shape[depth:]])

    def reshape_node(self, node: onnx.NodeProto, shape: Sequence[int]) -> onnx.NodeProto:
        """A Reshape of `node`'s data input to `shape` (a folded constant),
        with `node`'s name and outputs: what a gather that reads every index
        in order is (`gather_as_reshape`, `gather_nd_as_reshape`)."""
        target = f"{node.output[0]}__pyocc_reshape"
        self.consts[target] = np.array(shape, dtype=np.int64)
        self.types[target] = TensorType(IntegerType(64), [len(shape)])
        return helper.make_node("Reshape", [node.input[0], target], list(node.output), name=node.name)

    def infer_types(self, nodes: list) -> None:
        graph = self.model.graph
        # Shape inference needs the values of small constants (shapes, axes)
        # only; large ones (weights) go in as typed inputs, so each round does
        # not copy and serialise every weight again.
        initializers = [
            numpy_helper.from_array(v, name) if not isinstance(v, Splat) and v.size <= FOLD_LIMIT_ELEMENTS else None
            for name, v in self.consts.items()
        ]
        weight_inputs = [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
            for name, v in self.consts.items() if not isinstance(v, Splat) and v.size > FOLD_LIMIT_ELEMENTS
        ]
        splat_nodes = [
            helper.make_node(
                "ConstantOfShape", [name + "__pyocc_shape"], [name],
                value=helper.make_tensor("value", v.onnx_type, [1], [v.value]),
            )
            for name, v in self.consts.items() if isinstance(v, Splat)
        ]
        shape_inits = [
            numpy_helper.from_array(np.array(v.shape, dtype=np.int64), name + "__pyocc_shape")
            for name, v in self.consts.items() if isinstance(v, Splat)
        ]
        init_names = set(self.consts)
        new_graph = helper.make_graph(
            splat_nodes + nodes,
            graph.name or "graph",
            [i for i in graph.input if i.name not in init_names] + weight_inputs,
            list(graph.output),
            [t for t in initializers if t is not None] + shape_inits,
        )
        new_model = helper.make_model(new_graph, opset_imports=list(self.model.opset_import))
        new_model.ir_version = max(self.model.ir_version, 4)
        try:
            inferred = onnx.shape_inference.infer_shapes(new_model, strict_mode=True, data_prop=True)
        except Exception as e:  # onnx raises several types; all mean the same here
            raise PyoccError(f"ONNX shape inference failed: {str(e).splitlines()[0]}") from None
        for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
                continue
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            if any(d < 0 for d in dims):
                continue
            _check_size(vi.name, dims, tt.elem_type)
            self.types[vi.name] = tensor_type(element_type(tt.elem_type), tuple(dims))
        for name, v in self.consts.items():
            if name not in self.types:
                if isinstance(v, Splat):
                    self.types[name] = TensorType(element_type(v.onnx_type), v.shape)
                else:
                    self.types[name] = TensorType(
                        element_type(helper.np_dtype_to_tensor_dtype(v.dtype)), v.shape
                    )

    def try_fold(self, node: onnx.NodeProto) -> bool:
        """Evaluate `node` with numpy if all its inputs are constants; a node
        whose every output is empty needs no inputs at all: an empty tensor
        has no values, so it is a constant whatever the node computes."""
        outputs = [o for o in node.output if o]
        if outputs and all(o in self.types and 0 in self.types[o].get_shape() for o in outputs):
            for o in outputs:
                ttype = self.types[o]
                dtype = numpy_dtype_of(ttype.element_type)
                self.consts[o] = np.zeros(tuple(ttype.get_shape()), dtype=dtype)
            return True
        if node.op_type in ("Shape", "Size") and node.input[0] in self.types:
            shape = self.types[node.input[0]].get_shape()
            if node.op_type == "Size":
                self.consts[node.output[0]] = np.array(math.prod(shape), dtype=np.int64)
                return True
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            start, end = attrs.get("start", 0), attrs.get("end", len(shape))
            self.consts[node.output[0]] = np.array(shape[start:end], dtype=np.int64)
            return True
        if node.op_type == "ConstantOfShape":
            if node.input[0] not in self.consts:
                return False
            shape = tuple(int(d) for d in np.asarray(self._array(node.input[0])).reshape(-1))
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is None:
                splat = Splat(0.0, shape, 1)
            else:
                arr = numpy_helper.to_array(value).reshape(-1)
                splat = Splat(arr[0].item(), shape, value.data_type)
            if math.prod(shape) <= INLINE_LIMIT:
                self.consts[node.output[0]] = splat.materialize()
            else:
                self.consts[node.output[0]] = splat
            return True
        inputs = [i for i in node.input if i]
        if not all(i in self.consts for i in inputs):
            return False
        if node.op_type in NEVER_FOLD:
            return False
        if any(_size(self.consts[i]) > FOLD_LIMIT_ELEMENTS for i in inputs):
            return False

        results = self.evaluate(node, [np.asarray(self._array(i)) for i in inputs])
        if results is None:  # the reference evaluator lacks a few ops: leave the node as it is
            return False
        if any(r.size > FOLD_LIMIT_ELEMENTS for r in results):
            return False
        for name, value in zip([o for o in node.output if o], results):
            self.consts[name] = value
        return True

    def evaluate(self, node: onnx.NodeProto, arrays: list[np.ndarray]) -> list[np.ndarray] | None:
        """The results of `node` run by onnx's reference evaluator on
        `arrays` (its non-empty inputs, in order); None when the evaluator
        cannot run it. With `folds`, the results of the same node on the
        same input values in an earlier import of the same model are taken
        from there (copies: a fold's result is this import's own)."""
        key = None
        if self.folds is not None and all(a.dtype != object for a in arrays):
            key = (node.SerializeToString(), tuple((a.dtype.str, a.shape, a.tobytes()) for a in arrays))
            if key in self.folds:
                known = self.folds[key]
                return None if known is None else [r.copy() for r in known]
        inputs = [i for i in node.input if i]
        opsets = tuple((o.domain, o.version) for o in self.model.opset_import)
        evaluator = _evaluator(node.SerializeToString() if key is None else key[0], opsets)
        try:
            # the model's own arithmetic, quietly: T5's relative position buckets take log(0)
            # = -inf and cast it, as onnxruntime does, with nothing for the user to act on
            with np.errstate(all="ignore"):
                outputs = None if evaluator is None else evaluator.run(None, dict(zip(inputs, arrays, strict=True)))
            results: list[np.ndarray] | None = None if outputs is None else [
                # a result may be a view of an input (Reshape, Identity): each import's own
                r.copy() if any(np.shares_memory(r, a) for a in arrays) else r
                for r in map(np.asarray, outputs)]
        except Exception:  # the reference evaluator lacks a few ops: the caller leaves the node as it is
            results = None
        if key is not None:
            self.folds[key] = None if results is None else [r.copy() for r in results]
        return results

    def _array(self, name: str) -> np.ndarray:
        v = self.consts[name]
        return v.materialize() if isinstance(v, Splat) else v

    # -- step 3 ----------------------------------------------------------
    def run(self) -> ModuleOp:
        self.check_ops()
        self.fix_input_shapes()
        self.fold_and_infer()
        for node in self.nodes:
            if node.op_type not in OP_BY_TYPE:  # constant inputs, but folding gave up
                self.reject_op(node)
        graph = self.model.graph
        init_names = set(t.name for t in graph.initializer)
        inputs = [i for i in graph.input if i.name not in init_names]
        arg_types = [self.types[i.name] for i in inputs]
        for out in graph.output:
            if out.name not in self.types:
                raise PyoccError(
                    f"graph output '{out.name}' has no static shape after shape inference; "
                    "pyocc needs static shapes (fix the inputs with --shape)"
                )
        result_types = [self.types[o.name] for o in graph.output]
        block = Block(arg_types=arg_types)
        for arg, inp in zip(block.args, inputs):
            arg.name_hint = value_name(inp.name)
            self.values[inp.name] = arg
        self.builder = Builder(InsertPoint.at_end(block))
        for node in self.nodes:
            self.emit_node(node)
        outputs = [self.value(o.name) for o in graph.output]
        self.builder.insert(func.ReturnOp(*outputs))
        function = func.FuncOp(
            self.function_name,
            (arg_types, result_types),
            Region(block),
            arg_attrs=ArrayAttr([DictionaryAttr({"onnx.name": StringAttr(i.name)}) for i in inputs]),
            res_attrs=ArrayAttr([DictionaryAttr({"onnx.name": StringAttr(o.name)}) for o in graph.output]),
        )
        module = ModuleOp([function])
        if graph.name:
            module.attributes["onnx.graph_name"] = StringAttr(graph.name)
        if self.verify:
            try:
                module.verify()
            except (VerifyException, DiagnosticException) as e:
                raise PyoccError(f"the model is inconsistent: {one_line(e)}") from None
        return module

    def value(self, name: str) -> SSAValue:
        """The SSA value of ONNX tensor `name`, materialising constants lazily."""
        if name in self.values:
            return self.values[name]
        if name not in self.consts:
            raise PyoccError(f"tensor '{name}' is used but never defined in the graph")
        const = self.consts[name]
        op = self.constant_op(name, const)
        self.builder.insert(op)
        op.results[0].name_hint = value_name(name)
        self.values[name] = op.results[0]
        return op.results[0]

    def constant_op(self, name: str, const: Any) -> OnnxOp:
        if isinstance(const, Splat):
            ttype = TensorType(element_type(const.onnx_type), const.shape)
            scalar_type = TensorType(ttype.element_type, [1])
            value = DenseIntOrFPElementsAttr.from_list(scalar_type, [const.value])
            return ConstantOfShapeOp.create(result_types=[ttype], properties={"value": value})
        array = np.asarray(const)
        if array.size == 0:
            raise PyoccError(
                f"tensor '{name}' is empty (shape {'x'.join(map(str, array.shape))}) and is read by an op "
                "that keeps a non-empty result; pyocc folds empty tensors at import but cannot compile this use"
            )
        ttype = TensorType(element_type(helper.np_dtype_to_tensor_dtype(array.dtype)), array.shape)
        flat = array.reshape(-1)
        if array.size <= INLINE_LIMIT or (array.size and (flat == flat[0]).all()):
            if array.size > INLINE_LIMIT:
                return ConstantOp(_splat(ttype, flat[0].item()))
            return ConstantOp(DenseIntOrFPElementsAttr.from_list(ttype, flat.tolist()))
        return ConstantOp(store_array(name, array, ttype))

    def emit_node(self, node: onnx.NodeProto) -> None:
        op_type = node.op_type
        cls = OP_BY_TYPE[op_type]
        special = SPECIAL_IMPORTS.get(op_type)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        const_inputs = CONSTANT_INPUTS.get(op_type, {})
        operands: list[SSAValue] = []
        for index, name in enumerate(node.input):
            if index in const_inputs:
                if name:
                    if name not in self.consts:
                        raise PyoccError(
                            f"{op_type} node '{node.name or node.output[0]}': input "
                            f"'{const_inputs[index]}' must be a constant (pyocc plans memory "
                            "statically), but it is computed at run time"
                        )
                    attrs[const_inputs[index]] = self._array(name)
                continue
            if not name:
                continue
            if op_type in SKIPS_EMPTY_INPUTS and name in self.consts and _size(self.consts[name]) == 0:
                continue
            operands.append(self.value(name))
        outputs = [o for o in node.output if o]
        declared = cls.get_irdl_definition().results
        every_output = len(declared) > 1 or any(isinstance(r, VarResultDef) for _, r in declared)
        for extra in outputs[1:]:
            if not every_output and self.is_used(extra):
                raise PyoccError(
                    f"{op_type} node '{node.name or outputs[0]}': output {extra!r} is used, "
                    "but pyocc supports only the first output of this op"
                )
        if not every_output:
            outputs = outputs[:1]
        for o in outputs:
            if o not in self.types:
                raise PyoccError(
                    f"{op_type} node '{node.name or o}': output '{o}' has no static shape "
                    "after shape inference; pyocc needs static shapes"
                )
        result_types = [self.types[o] for o in outputs]
        if special is not None:
            op = special(self, node, operands, attrs, result_types)
        else:
            op = cls.create(
                operands=operands,
                result_types=result_types,
                properties=self.properties(cls, node, attrs),
            )
        if op is None:
            return
        self.builder.insert(op)
        for name, result in zip(outputs, op.results):
            result.name_hint = value_name(name)
            self.values[name] = result

    def is_used(self, name: str) -> bool:
        return any(name in n.input for n in self.nodes) or any(
            o.name == name for o in self.model.graph.output
        )

    def properties(self, cls: type[OnnxOp], node: onnx.NodeProto, attrs: dict[str, Any]) -> dict[str, Attribute]:
        """ONNX attributes -> xDSL properties, checked against the op's declaration."""
        declared = cls.get_irdl_definition().properties
        props: dict[str, Attribute] = {}
        for key, value in attrs.items():
            if key not in declared:
                if key in IGNORED_ATTRIBUTES:
                    continue
                raise PyoccError(
                    f"{node.op_type} node '{node.name or node.output[0]}': attribute '{key}' "
                    "is not supported by pyocc"
                )
            props[key] = to_property(key, value, declared[key])
        return props


def _branch_shapes_differ(node: onnx.NodeProto) -> bool:
    """True when an If's two branches declare outputs of different shapes
    (an unknown dimension counts as different)."""
    def shapes(branch: Any) -> list[tuple[Any, ...]]:
        result = []
        for out in branch.output:
            tt = out.type.tensor_type
            dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim) if tt.HasField("shape") else None
            result.append(dims)
        return result

    branches = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    then_shapes, else_shapes = shapes(branches["then_branch"]), shapes(branches["else_branch"])
    return then_shapes != else_shapes or any(s is None or None in s for s in then_shapes)


MAX_TENSOR_BYTES = 2**48
"""No tensor may be larger than this (256 TiB): beyond it sizes are certainly
a mistake in the model, and byte counts would overflow the 64-bit offsets of
the generated code."""


def _check_size(name: str, dims: Sequence[int], onnx_type: int) -> None:
    """Reject an absurdly large tensor with one clear line. Empty tensors are
    legal ONNX (classic exports compute shapes with them); they are folded
    to constants at import (see `_Importer.try_fold`)."""
    shape = "x".join(map(str, dims)) or "scalar"
    itemsize = helper.tensor_dtype_to_np_dtype(onnx_type).itemsize if onnx_type else 4
    nbytes = math.prod(dims) * itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise PyoccError(
            f"tensor '{name}' (shape {shape}) would take {nbytes:,} bytes, more than pyocc's limit of "
            f"2^48; check the model's shapes or the --shape you gave"
        )


def computed_from(nodes: Sequence[onnx.NodeProto], names: Sequence[str]) -> set[str]:
    """`names` and every tensor of `nodes` their values are computed from
    (a Shape or Size reads only its input's type: the walk stops there)."""
    producer = {o: node for node in nodes for o in node.output if o}
    wanted = list(names)
    found: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name in found:
            continue
        found.add(name)
        node = producer.get(name)
        if node is not None and node.op_type not in ("Shape", "Size"):
            wanted += [i for i in node.input if i]
    return found


def _nbytes(const: Any) -> int:
    """Bytes a folded constant is held in (a Splat: one element)."""
    if isinstance(const, Splat):
        return int(helper.tensor_dtype_to_np_dtype(const.onnx_type).itemsize)
    return int(np.asarray(const).nbytes)


def _block_shape(shape: tuple[int, ...], others: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The smallest block of a splat of `shape` that broadcasts with
    `others` (numpy's rule, axes aligned at the end) to the same result:
    1 in every axis where some other operand is larger than 1."""
    rank = len(shape)
    block = []
    for axis, size in enumerate(shape):
        from_end = rank - axis
        wider = any(len(o) >= from_end and o[len(o) - from_end] > 1 for o in others)
        block.append(1 if wider else size)
    return tuple(block)


def _with_inputs(node: onnx.NodeProto, inputs: Sequence[str]) -> onnx.NodeProto:
    """A copy of `node` that reads `inputs` (the model's node is left as it is)."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    del copy.input[:]
    copy.input.extend(inputs)
    return copy


def _size(const: Any) -> int:
    """Element count of a folded constant (a Splat is not materialised)."""
    return math.prod(const.shape) if isinstance(const, Splat) else const.size


def _splat(ttype: TensorType, value: Any) -> DenseIntOrFPElementsAttr:
    """A splat dense attribute without materialising the full array."""
    elem = ttype.element_type
    dtype = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64,
             "i32": np.int32, "i8": np.int8, "i1": np.int8, "i16": np.int16, "ui8": np.uint8}.get(str(elem))
    if dtype is None:
        return DenseIntOrFPElementsAttr.from_list(ttype, [value] * math.prod(ttype.get_shape()))
    data = np.full(math.prod(ttype.get_shape()), value, dtype=dtype).tobytes()
    return DenseIntOrFPElementsAttr(ttype, BytesAttr(data))


def to_property(key: str, value: Any, definition: Any) -> Attribute:
    """One ONNX attribute (or folded constant input) as an xDSL property of
    the kind the op declares (int, float, string, ints, floats)."""
    constr = str(definition.constr)
    if isinstance(value, bytes):
        return StringAttr(value.decode())
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, np.ndarray):
        if "FloatAttr" in constr:
            return FloatAttr(float(value.reshape(-1)[0]), f32)
        if "IntegerAttr" in constr:
            return IntegerAttr(int(value.reshape(-1)[0]), i64)
        value = value.reshape(-1).tolist()
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], float):
            return DenseArrayBase.from_list(f32, [float(v) for v in value])
        return DenseArrayBase.from_list(i64, [int(v) for v in value])
    if isinstance(value, float) or "FloatAttr" in constr:
        return FloatAttr(float(value), f32)
    if isinstance(value, int):
        return IntegerAttr(int(value), i64)
    raise PyoccError(f"attribute '{key}' has a kind pyocc cannot import ({type(value).__name__})")


# ---------------------------------------------------------------------------
# Per-op import rules where ONNX's forms differ from the dialect's one form.
# ---------------------------------------------------------------------------

ImportRule = Callable[[_Importer, Any, list[SSAValue], dict[str, Any], list[TensorType]], OnnxOp | None]


def _import_cast(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp:
    # `to` is the result's element type; nothing else to carry.
    return OP_BY_TYPE["Cast"].create(operands=operands, result_types=types)


def _import_softmax(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp | None:
    """Before opset 13, Softmax flattened the input to 2-D at `axis` (default
    1); since 13 it works along one axis (default -1). When the axis is the
    last one both agree; otherwise the old form becomes Reshape-Softmax-Reshape."""
    cls = OP_BY_TYPE[node.op_type]
    shape = list(types[0].get_shape())
    rank = len(shape)
    if imp.opset() >= 13:
        return cls.create(operands=operands, result_types=types, properties=imp.properties(cls, node, attrs))
    axis = attrs.get("axis", 1) % max(rank, 1)
    if axis == rank - 1:
        return cls.create(operands=operands, result_types=types,
                          properties={"axis": IntegerAttr(-1, i64)})
    flat = TensorType(types[0].element_type, [math.prod(shape[:axis]), math.prod(shape[axis:])])
    reshape = OP_BY_TYPE["Reshape"]
    to2d = reshape.create(operands=operands, result_types=[flat],
                          properties={"shape": DenseArrayBase.from_list(i64, list(flat.get_shape()))})
    soft = cls.create(operands=[to2d.results[0]], result_types=[flat], properties={"axis": IntegerAttr(-1, i64)})
    imp.builder.insert(to2d)
    imp.builder.insert(soft)
    return reshape.create(operands=[soft.results[0]], result_types=types,
                          properties={"shape": DenseArrayBase.from_list(i64, shape)})


def _import_dropout(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp:
    ratio = attrs.get("ratio", 0.5)
    ratio = float(ratio.reshape(-1)[0]) if hasattr(ratio, "reshape") else float(ratio)
    training = attrs.get("training_mode")
    if training is not None and bool(training.reshape(-1)[0]) and ratio != 0.0:
        raise PyoccError(f"Dropout node '{node.name or node.output[0]}' is in training mode (random); "
                         "pyocc compiles inference graphs only")
    return OP_BY_TYPE["Dropout"].create(operands=operands, result_types=types,
                                        properties={"ratio": FloatAttr(ratio, f32)})


def _text(value: Any) -> str:
    """An ONNX string attribute (bytes) as str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _import_resize(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp:
    """Resize's scales or sizes may name only some `axes` (opset 18) and
    sizes may keep the aspect ratio; the dialect has one full-rank `scales`
    (the output shape is in the result type)."""
    cls = OP_BY_TYPE["Resize"]
    scales = attrs.pop("scales", None)
    sizes = attrs.pop("sizes", None)
    axes = attrs.pop("axes", None)
    policy = _text(attrs.pop("keep_aspect_ratio_policy", "stretch"))
    attrs.pop("roi", None)
    attrs.pop("extrapolation_value", None)  # read only by tf_crop_and_resize, refused below
    if _text(attrs.get("coordinate_transformation_mode", "")) == "tf_crop_and_resize":
        raise PyoccError("Resize with coordinate_transformation_mode=tf_crop_and_resize is not supported")
    if attrs.pop("antialias", 0):
        raise PyoccError("Resize with antialias=1 is not supported")
    props = imp.properties(cls, node, attrs)
    in_shape = operands[0].type.get_shape()  # type: ignore[union-attr]
    out_shape = types[0].get_shape()
    rank = len(in_shape)
    axes = [int(a) % rank for a in axes] if axes is not None else list(range(rank))
    if scales is not None and len(scales):
        full = [1.0] * rank
        for axis, scale in zip(axes, list(scales)):
            full[axis] = float(scale)
    else:
        full = [o / i for o, i in zip(out_shape, in_shape)]
        if sizes is not None and len(sizes) and policy != "stretch":
            # one scale for all named axes; the result type has its rounded sizes
            ratios = [float(size) / in_shape[axis] for axis, size in zip(axes, list(sizes))]
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            for axis in axes:
                full[axis] = scale
    props["scales"] = DenseArrayBase.from_list(f32, full)
    return cls.create(operands=operands, result_types=types, properties=props)


def _import_pad(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp:
    """Pad's forms: opset 1 `paddings`, opset 2 `value` (attributes), since
    11 `pads`/`constant_value` (inputs), since 18 pads for some `axes` only.
    The dialect has one: pads for every axis and `constant_value`."""
    cls = OP_BY_TYPE["Pad"]
    if "paddings" in attrs:
        attrs["pads"] = attrs.pop("paddings")
    if "value" in attrs:
        attrs["constant_value"] = attrs.pop("value")
    axes = attrs.pop("axes", None)
    if axes is not None:
        rank = len(operands[0].type.get_shape())  # type: ignore[union-attr]
        pads = [int(p) for p in list(attrs["pads"])]
        full = [0] * (2 * rank)
        for k, axis in enumerate(int(a) % rank for a in axes):
            full[axis], full[axis + rank] = pads[k], pads[k + len(axes)]
        attrs["pads"] = full
    return cls.create(operands=operands, result_types=types, properties=imp.properties(cls, node, attrs))


def _import_clip(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp:
    cls = OP_BY_TYPE["Clip"]
    props: dict[str, Attribute] = {}
    for bound in ("min", "max"):
        if bound in attrs and attrs[bound] is not None:
            v = attrs[bound]
            props[bound] = FloatAttr(float(v.reshape(-1)[0]) if hasattr(v, "reshape") else float(v), f32)
    return cls.create(operands=operands, result_types=types, properties=props)


def _import_split(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp:
    cls = OP_BY_TYPE["Split"]
    attrs.pop("split", None)  # the result types say it
    return cls.create(operands=operands, result_types=types, properties=imp.properties(cls, node, attrs))


def _import_range(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp:
    """A Range that folding left (its result larger than its three scalars:
    `_Importer.unfold_expanding`): start and delta as properties (f64,
    exact for integers up to 2^53), the length in the result type."""
    props = {key: FloatAttr(float(np.asarray(attrs[key]).reshape(-1)[0]), f64) for key in ("start", "delta")}
    return OP_BY_TYPE["Range"].create(result_types=types, properties=props)


def _import_legacy_broadcast(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp:
    """Before opset 7, binary ops and Gemm broadcast only with `broadcast=1`,
    and a binary op's B then lines up with A from `axis` on (default: the
    trailing axes, as numpy does). B is reshaped to put 1s after it, which
    turns that rule into numpy broadcasting, the dialect's one rule."""
    cls = OP_BY_TYPE[node.op_type]
    attrs.pop("broadcast", None)
    axis = attrs.pop("axis", None)
    if axis is not None and len(operands) == 2:
        a_rank = len(operands[0].type.get_shape())  # type: ignore[union-attr]
        b_type = operands[1].type
        b_shape = list(b_type.get_shape())  # type: ignore[union-attr]
        trailing = a_rank - (axis % a_rank) - len(b_shape)
        if trailing > 0:
            operands = [operands[0], _reshaped(imp, operands[1], b_shape + [1] * trailing)]
    return cls.create(operands=operands, result_types=types, properties=imp.properties(cls, node, attrs))


def _import_prelu(imp: _Importer, node: Any, operands: list[SSAValue], attrs: dict[str, Any], types: list[TensorType]) -> OnnxOp:
    """Before opset 7, a 1-D slope of C values applies per channel (axis 1);
    reshaped to [C, 1, ...] it broadcasts the numpy way."""
    cls = OP_BY_TYPE["PRelu"]
    x_shape = list(operands[0].type.get_shape())  # type: ignore[union-attr]
    slope_shape = list(operands[1].type.get_shape())  # type: ignore[union-attr]
    if imp.opset() < 7 and len(x_shape) > 2 and slope_shape == [x_shape[1]]:
        operands = [operands[0], _reshaped(imp, operands[1], slope_shape + [1] * (len(x_shape) - 2))]
    return cls.create(operands=operands, result_types=types, properties=imp.properties(cls, node, attrs))


def _reshaped(imp: _Importer, value: SSAValue, shape: list[int]) -> SSAValue:
    """`value` viewed as `shape` (an onnx.Reshape inserted before the node)."""
    reshape = OP_BY_TYPE["Reshape"].create(
        operands=[value], result_types=[TensorType(value.type.element_type, shape)],  # type: ignore[attr-defined]
        properties={"shape": DenseArrayBase.from_list(i64, shape)})
    imp.builder.insert(reshape)
    return reshape.results[0]


SPECIAL_IMPORTS: dict[str, ImportRule] = {
    "Cast": _import_cast,
    "Softmax": _import_softmax,
    "LogSoftmax": _import_softmax,
    "Dropout": _import_dropout,
    "Resize": _import_resize,
    "Pad": _import_pad,
    "Clip": _import_clip,
    "Split": _import_split,
    "Range": _import_range,
    "PRelu": _import_prelu,
    **{op: _import_legacy_broadcast for op in ("Add", "Sub", "Mul", "Div", "Pow", "Gemm")},
}

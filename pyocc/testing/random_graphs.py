"""Random valid ONNX graphs for differential testing against onnxruntime.

A memory planner that is wrong does not crash: two live tensors share bytes
and the numbers come out wrong. So we generate many small graphs shaped like
the ones that break planners and compare pyocc's outputs with onnxruntime's:

* branches that fork and join (Concat, Add of two paths),
* residual Adds and long-lived skips (a tensor read again many ops later),
* in-place candidates (elementwise ops whose input dies there, Add(a, a)),
* views (Reshape, Flatten, Identity) in the middle of the graph,
* intermediates that are also graph outputs (read after they are returned).

Every graph is built from a seed, so a failure is reproduced by its seed
alone, and `shrink` removes nodes while the failure persists.

    graph = random_graph(seed=7)          # an onnx.ModelProto
    inputs = random_inputs(graph, seed=7)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import pyocc

OPSET = 17


@dataclass
class _Tensor:
    """A value of the graph being built: its name, shape, and when it was made."""

    name: str
    shape: tuple[int, ...]
    born: int


class _Builder:
    """Grows one random graph op by op, keeping every shape consistent."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.tensors: list[_Tensor] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def weight(self, shape: tuple[int, ...], positive: bool = False) -> str:
        value = self.rng.standard_normal(shape).astype(np.float32) * 0.5
        if positive:
            value = np.abs(value) + 0.5
        name = self.name("w")
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def constant(self, value: float) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(value, np.float32), name))
        return name

    def add(self, op: str, inputs: list[str], shape: tuple[int, ...], **attrs: object) -> _Tensor:
        out = _Tensor(self.name(op.lower()), shape, len(self.nodes))
        self.nodes.append(helper.make_node(op, inputs, [out.name], **attrs))
        self.tensors.append(out)
        return out

    def pick(self, rank: int = 4) -> _Tensor:
        """A tensor to read: usually a recent one, sometimes an old one (a
        long-lived skip)."""
        candidates = [t for t in self.tensors if len(t.shape) == rank]
        if self.rng.random() < 0.25:
            return candidates[int(self.rng.integers(len(candidates)))]
        return candidates[-1 - int(self.rng.integers(min(3, len(candidates))))]

    def same_shape(self, t: _Tensor) -> _Tensor | None:
        """Another tensor of `t`'s shape, if there is one."""
        others = [o for o in self.tensors if o.shape == t.shape and o is not t]
        return others[int(self.rng.integers(len(others)))] if others else None


def _conv(b: _Builder, x: _Tensor) -> _Tensor:
    n, c, h, w = x.shape
    k = int(b.rng.choice([1, 3]))
    out_c = int(b.rng.integers(2, 9))
    stride = 2 if h >= 6 and b.rng.random() < 0.2 else 1
    pad = k // 2
    group = c if (k == 3 and out_c == c and b.rng.random() < 0.3) else 1
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    inputs = [x.name, b.weight((out_c, c // group, k, k))]
    if b.rng.random() < 0.6:
        inputs.append(b.weight((out_c,)))
    return b.add("Conv", inputs, (n, out_c, oh, ow), kernel_shape=[k, k], pads=[pad] * 4,
                 strides=[stride, stride], group=group)


def _unary(b: _Builder, x: _Tensor) -> _Tensor:
    op = str(b.rng.choice(["Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "Abs", "Neg"]))
    if op == "Clip":
        return b.add("Clip", [x.name, b.constant(0.0), b.constant(6.0)], x.shape)
    return b.add(op, [x.name], x.shape)


def _binary(b: _Builder, x: _Tensor) -> _Tensor:
    op = str(b.rng.choice(["Add", "Add", "Mul", "Sub"]))
    other = b.same_shape(x)
    roll = b.rng.random()
    if roll < 0.1:
        second = x.name  # Add(a, a): both operands are one buffer
    elif other is not None and roll < 0.8:
        second = other.name
    else:  # a per-channel constant, broadcast
        second = b.weight((1, x.shape[1], 1, 1))
    return b.add(op, [x.name, second], x.shape)


def _batch_norm(b: _Builder, x: _Tensor) -> _Tensor:
    c = x.shape[1]
    stats = [b.weight((c,)), b.weight((c,)), b.weight((c,)), b.weight((c,), positive=True)]
    return b.add("BatchNormalization", [x.name, *stats], x.shape)


def _pool(b: _Builder, x: _Tensor) -> _Tensor:
    n, c, h, w = x.shape
    op = str(b.rng.choice(["MaxPool", "AveragePool"]))
    if h >= 4 and w >= 4 and b.rng.random() < 0.5:
        return b.add(op, [x.name], (n, c, h // 2, w // 2), kernel_shape=[2, 2], strides=[2, 2])
    return b.add(op, [x.name], x.shape, kernel_shape=[3, 3], pads=[1, 1, 1, 1])


def _concat(b: _Builder, x: _Tensor) -> _Tensor:
    n, c, h, w = x.shape
    partners = [t for t in b.tensors if len(t.shape) == 4 and t.shape[0] == n and t.shape[2:] == (h, w)]
    chosen = [x] + [partners[int(i)] for i in b.rng.integers(len(partners), size=int(b.rng.integers(1, 3)))]
    return b.add("Concat", [t.name for t in chosen], (n, sum(t.shape[1] for t in chosen), h, w), axis=1)


def _softmax(b: _Builder, x: _Tensor) -> _Tensor:
    return b.add("Softmax", [x.name], x.shape, axis=1)


def _view(b: _Builder, x: _Tensor) -> _Tensor:
    """Reshape to (n, c*h, w) and back: two views in the middle of the graph."""
    n, c, h, w = x.shape
    if b.rng.random() < 0.5:
        return b.add("Identity", [x.name], x.shape)
    shape_a = b.name("shape")
    b.inits.append(numpy_helper.from_array(np.array([n, c * h, w], np.int64), shape_a))
    flat = b.add("Reshape", [x.name, shape_a], (n, c * h, w))
    shape_b = b.name("shape")
    b.inits.append(numpy_helper.from_array(np.array(x.shape, np.int64), shape_b))
    b.tensors.remove(flat)  # only 4-D tensors are picked as operands
    return b.add("Reshape", [flat.name, shape_b], x.shape)


def _sum(b: _Builder, x: _Tensor) -> _Tensor:
    others = [o for o in b.tensors if o.shape == x.shape]
    chosen = [others[int(i)] for i in b.rng.integers(len(others), size=2)]
    return b.add("Sum", [x.name, *[o.name for o in chosen]], x.shape)


STEPS: list[tuple[Callable[[_Builder, _Tensor], _Tensor], float]] = [
    (_conv, 3.0), (_unary, 2.0), (_binary, 2.5), (_batch_norm, 0.7), (_pool, 0.8),
    (_concat, 1.2), (_softmax, 0.3), (_view, 0.6), (_sum, 0.4),
]
"""Each graph-growing step and how often it is chosen."""


def random_graph(seed: int, max_ops: int = 14) -> onnx.ModelProto:
    """A random valid ONNX model (opset 17) with 1-2 inputs and 1-3 outputs."""
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    size = int(rng.choice([4, 6, 8]))
    inputs = []
    for _ in range(1 + int(rng.random() < 0.3)):
        t = _Tensor(b.name("x"), (1, int(rng.integers(1, 5)), size, size), -1)
        b.tensors.append(t)
        inputs.append(t)
    weights = np.array([w for _, w in STEPS])
    for _ in range(int(rng.integers(3, max_ops + 1))):
        step = STEPS[int(rng.choice(len(STEPS), p=weights / weights.sum()))][0]
        step(b, b.pick())
    produced = [t for t in b.tensors if t.born >= 0]
    outputs = [produced[-1]]
    extra = [t for t in produced[:-1] if rng.random() < 0.15][:2]  # intermediates also returned
    outputs += extra
    graph = helper.make_graph(
        b.nodes, f"random_{seed}",
        [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.shape)) for t in inputs],
        [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.shape)) for t in outputs],
        b.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def graph_features(model: onnx.ModelProto) -> frozenset[str]:
    """What a differential run counts as the kinds of graph a setting has
    met: the op types of `model`, plus "returned intermediate" where a graph
    output is not the only one (an intermediate read after it is returned)
    and "two inputs" where the graph has two."""
    features = {node.op_type for node in model.graph.node}
    if len(model.graph.output) > 1:
        features.add("returned intermediate")
    if len(model.graph.input) > 1:
        features.add("two inputs")
    return frozenset(features)


def covering_seeds(settings: int, least: int, most: int, candidates: int = 30) -> dict[int, list[int]]:
    """Seeds for a differential run over `settings` compiler settings,
    setting k -> its seeds (each `k` modulo `settings`, so that
    `seed % settings` still names a seed's setting). From setting k's first
    `candidates` seeds, greedily the one whose graph has the most
    graph_features the setting has not met yet, until it has met every
    feature that any candidate graph of any setting has (3-6 graphs for the
    18 settings of CONFIGS) or has `most` graphs; then the lowest seeds
    left, up to `least` graphs. A setting that cannot meet every feature
    in `most` graphs gets its best cover: the caller checks."""
    features = {seed: graph_features(random_graph(seed)) for seed in range(settings * candidates)}
    every = frozenset().union(*features.values())
    chosen: dict[int, list[int]] = {}
    for setting in range(settings):
        left = list(range(setting, settings * candidates, settings))
        unmet = set(every)
        seeds: list[int] = []
        while unmet and len(seeds) < most:
            best = max(left, key=lambda seed: (len(features[seed] & unmet), -seed))
            if not features[best] & unmet:
                break
            seeds.append(best)
            left.remove(best)
            unmet -= features[best]
        seeds += left[:max(0, least - len(seeds))]
        chosen[setting] = sorted(seeds)
    return chosen


def random_inputs(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Seeded random float32 inputs for every graph input of `model`."""
    rng = np.random.default_rng(seed + 1_000_003)
    return {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input
    }


def without_node(model: onnx.ModelProto, index: int) -> onnx.ModelProto | None:
    """`model` with node `index` removed: its readers read its first input
    instead (same shape for every shape-preserving op). None when that would
    make the graph invalid."""
    nodes = list(model.graph.node)
    node = nodes[index]
    if not node.input:
        return None
    source, target = node.input[0], node.output[0]
    smaller = onnx.ModelProto()
    smaller.CopyFrom(model)
    del smaller.graph.node[:]
    for other in nodes[:index] + nodes[index + 1:]:
        copy = onnx.NodeProto()
        copy.CopyFrom(other)
        copy.input[:] = [source if i == target else i for i in copy.input]
        smaller.graph.node.append(copy)
    for out in smaller.graph.output:
        if out.name == target:
            out.name = source
    used = {i for n in smaller.graph.node for i in n.input}
    kept = [t for t in smaller.graph.initializer if t.name in used]
    del smaller.graph.initializer[:]
    smaller.graph.initializer.extend(kept)
    if len({o.name for o in smaller.graph.output}) != len(smaller.graph.output):
        return None
    try:
        onnx.checker.check_model(smaller, full_check=True)
    except Exception:  # noqa: BLE001 - any checker complaint means "not a valid reduction"
        return None
    return smaller


def shrink(model: onnx.ModelProto, fails: Callable[[onnx.ModelProto], bool]) -> onnx.ModelProto:
    """Remove nodes one at a time while `fails(model)` stays true: the
    smallest graph that still shows the failure (a greedy delta debugging)."""
    changed = True
    while changed:
        changed = False
        for index in reversed(range(len(model.graph.node))):
            smaller = without_node(model, index)
            if smaller is not None and fails(smaller):
                model, changed = smaller, True
                break
    return model


class InvalidGraph(Exception):
    """The reference (onnxruntime) rejects the graph: not a pyocc failure."""


def compare_with_onnxruntime(model: onnx.ModelProto, inputs: dict[str, np.ndarray],
                             rtol: float = 1e-4, atol: float = 1e-5, **options: object) -> str | None:
    """Compile `model` with pyocc (`options` go to pyocc.compile), run it and
    onnxruntime on `inputs`; None when every output matches, else one line
    saying which output differs and by how much. Raises InvalidGraph when
    onnxruntime itself rejects the graph."""
    return compile_and_compare(model, inputs, rtol, atol, **options)[1]


def compile_and_compare(model: onnx.ModelProto, inputs: dict[str, np.ndarray], rtol: float = 1e-4,
                        atol: float = 1e-5, **options: object) -> tuple[pyocc.api.Model | pyocc.api.SymbolicModel,
                                                                         str | None]:
    """compare_with_onnxruntime, also returning the compiled model it ran:
    for a test that checks more of the same compile (its report, its
    kernels), so that it need not compile the model a second time."""
    import onnxruntime as ort  # a test dependency only: pyocc itself runs without it

    session_options = ort.SessionOptions()
    session_options.intra_op_num_threads = 1
    session_options.log_severity_level = 3
    try:
        session = ort.InferenceSession(model.SerializeToString(), session_options, providers=["CPUExecutionProvider"])
        expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs), strict=True))
    except Exception as e:  # noqa: BLE001 - onnxruntime's errors have no common base
        raise InvalidGraph(f"onnxruntime rejects the graph: {str(e).splitlines()[0]}") from None
    compiled = pyocc.compile(model, **options)  # type: ignore[arg-type]
    return compiled, _difference(compiled.run(inputs), expected, rtol, atol)


def _difference(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], rtol: float, atol: float) -> str | None:
    """None when every output in `got` matches `expected`, else one line
    saying which differs and by how much."""
    for name, want in expected.items():
        have = got[name]
        # fp32 sums in another order differ by a few ulps of the largest
        # value, so the absolute tolerance scales with the output's range.
        scale = max(1.0, float(np.abs(want).max()))
        if have.shape != want.shape or not np.allclose(have, want, rtol=rtol, atol=atol * scale):
            diff = float(np.nanmax(np.abs(have - want))) if have.shape == want.shape else float("nan")
            return f"output '{name}' differs from onnxruntime (max |diff| {diff:.3g}, shapes {have.shape} vs {want.shape})"
    return None


CONFIGS: list[dict[str, object]] = [
    {"memory": "eager"},
    {"memory": "lazy"},
    {"memory": "pool"},
    {"memory": "pool", "planner": "occamy-first-fit"},
    {"memory": "pool", "planner": "greedy-by-size"},
    {"memory": "pool", "planner": "best-fit-decreasing"},
    {"memory": "pool", "planner": "greedy-by-conflicts"},
    {"memory": "pool", "planner": "hill-climb"},
    {"memory": "pool", "planner": "long-lived-first"},
    {"memory": "pool", "planner": "exact"},
    {"memory": "lazy", "sanitize": True},
    {"memory": "pool", "sanitize": True},
    {"memory": "pool", "fuse": False},
    {"memory": "lazy", "fuse": False, "sanitize": True},
    {"memory": "pool", "reorder": "greedy", "sanitize": True},
    {"memory": "lazy", "reorder": "given"},
    {"memory": "pool", "coalesce": False},
    {"memory": "eager", "coalesce": False, "fuse": False},
]
"""The compiler settings a differential run covers (keyword arguments of
pyocc.compile): every memory mode and every planner with the default flow
(fusion, coalescing, dnn-reorder auto), then fusion or coalescing off, the
sanitizer (dead buffers poisoned with NaN, guard bytes checked) on lazy and
pool, and the other op orders."""

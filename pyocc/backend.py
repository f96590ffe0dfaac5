"""pyocc as an ONNX backend (`onnx.backend.base.Backend`).

    import pyocc.backend
    rep = pyocc.backend.prepare(model, device="CPU", memory="pool")
    outputs = rep.run([x])            # a tuple in graph-output order
    outputs = pyocc.backend.run_model(model, [x])
    outputs = pyocc.backend.run_node(node, [x, y])

pyocc is a static compiler: every shape, and every input that decides a
shape (Reshape's `shape`, Slice's `starts`, ConstantOfShape's input, ...),
must be known when the model is compiled. An ONNX backend, though, is handed
the model first and the inputs later, and the model may leave dimensions
dynamic or feed such shape-like values as graph inputs. So the rule is:

**The rep compiles on first run, and specialises.** `prepare` checks the
model (device, options) but compiles nothing. `run(inputs)` compiles the
model for the shapes of the given inputs, with every *compile-time input*
frozen to the value given. A graph input is compile-time when a slot that
pyocc needs at compile time depends on its value: the slot reads it
directly (the slots are `pyocc.frontend.onnx_import.CONSTANT_INPUTS`, plus
ConstantOfShape's shape and Range's bounds) or through nodes that compute
the slot (`shape -> Max -> Sub -> Concat -> Pad.pads`; a Shape node needs
only its input's shape, so the dependence stops there). The compiled model
is cached per key = (every input's shape and dtype, the bytes of every
frozen input), so a second run with the same shapes and shape-values reuses
it, and a run with new ones compiles again: a frozen value is never reused
for a different input. Frozen inputs hold at most `FROZEN_INPUT_LIMIT`
elements; a larger one is refused with a PyoccError.

Keyword options of `prepare` / `run_model` / `run_node`: `memory`
("pool" (default), "lazy" or "eager") and `planner` (pool mode), as in
`pyocc.compile`.
onnx's test runner also passes `rtol`/`atol`; they are accepted and ignored.
Only the CPU device is supported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

import pyocc.api
from pyocc.api import Model
from pyocc.dialects.onnx import OP_BY_TYPE
from pyocc.errors import PyoccError
from pyocc.frontend.onnx_import import CONSTANT_INPUTS, computed_from
from pyocc.pipelines import MEMORY_MODES

#: Compile-time input slots beyond CONSTANT_INPUTS: inputs that decide an
#: output shape, which the importer folds when they are constants.
SHAPE_INPUTS: dict[str, set[int]] = {
    "ConstantOfShape": {0},
}

#: A compile-time graph input is frozen only up to this many elements; a
#: larger one is not a shape-like value and is refused.
FROZEN_INPUT_LIMIT = 1 << 12

#: Keyword options `prepare` takes; `rtol`/`atol` come from onnx's runner.
OPTIONS = ("memory", "planner")
IGNORED_OPTIONS = ("rtol", "atol")


def compile_time_inputs(model: onnx.ModelProto) -> set[str]:
    """Names of the graph inputs whose values some compile-time slot depends
    on: read there directly, or through nodes that compute the slot's value
    (a Shape or Size node needs only its input's shape, so the walk stops)."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    inputs = {i.name for i in graph.input} - initializers
    pending: list[str] = []
    for node in graph.node:
        slots = set(CONSTANT_INPUTS.get(node.op_type, {})) | SHAPE_INPUTS.get(node.op_type, set())
        pending.extend(name for index, name in enumerate(node.input) if index in slots and name)
    return computed_from(graph.node, pending) & inputs


def _check_options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The pyocc options among `kwargs`; unknown keys are a user error."""
    unknown = [k for k in kwargs if k not in OPTIONS and k not in IGNORED_OPTIONS]
    if unknown:
        raise PyoccError(f"unknown backend option(s) {', '.join(sorted(unknown))}; "
                         f"pyocc.backend takes {', '.join(OPTIONS)}")
    options = {k: kwargs[k] for k in OPTIONS if k in kwargs}
    memory = options.get("memory", "pool")
    if memory not in MEMORY_MODES:
        raise PyoccError(f"memory mode must be one of {', '.join(MEMORY_MODES)}, got '{memory}'")
    return options


class PyoccRep(BackendRep):
    """A prepared model: compiles on first `run`, once per specialisation key
    (see the module docstring)."""

    def __init__(self, model: onnx.ModelProto, options: Mapping[str, Any]):
        self.model = model
        self.options = dict(options)
        graph = model.graph
        initializers = {t.name for t in graph.initializer}
        self.input_names = [i.name for i in graph.input if i.name not in initializers]
        self.output_names = [o.name for o in graph.output]
        self.frozen_inputs = compile_time_inputs(model)
        self.compiled: dict[tuple[Any, ...], Model] = {}

    def _arrays(self, inputs: Any) -> dict[str, np.ndarray]:
        """`inputs` (a list in graph-input order, a dict by name, or one array) by name."""
        if isinstance(inputs, Mapping):
            given = {k: np.asarray(v) for k, v in inputs.items()}
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            values = list(inputs)
            if len(values) != len(self.input_names):
                raise PyoccError(f"the model takes {len(self.input_names)} input(s) {self.input_names}, "
                                 f"got {len(values)}")
            given = {n: np.asarray(v) for n, v in zip(self.input_names, values)}
        missing = [n for n in self.input_names if n not in given]
        unknown = [n for n in given if n not in self.input_names]
        if missing or unknown:
            raise PyoccError(f"inputs do not match the model's inputs {self.input_names}"
                             + (f" (missing {missing})" if missing else "")
                             + (f" (unknown {unknown})" if unknown else ""))
        return given

    def key(self, arrays: Mapping[str, np.ndarray]) -> tuple[Any, ...]:
        """What a compiled model is specialised to: every input's shape and
        dtype, and the bytes of every frozen input."""
        return tuple(
            (name, arrays[name].shape, arrays[name].dtype.str,
             arrays[name].tobytes() if name in self.frozen_inputs else None)
            for name in self.input_names
        )

    def specialise(self, arrays: Mapping[str, np.ndarray]) -> onnx.ModelProto:
        """A copy of the model whose frozen inputs are initializers holding
        the given values."""
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        graph = model.graph
        for name in sorted(self.frozen_inputs):
            value = arrays[name]
            if value.size > FROZEN_INPUT_LIMIT:
                raise PyoccError(f"input '{name}' decides a shape at compile time but has {value.size} "
                                 f"elements; pyocc freezes at most {FROZEN_INPUT_LIMIT}")
            graph.initializer.append(numpy_helper.from_array(value, name))
        kept = [i for i in graph.input if i.name not in self.frozen_inputs]
        del graph.input[:]
        graph.input.extend(kept)
        if self.frozen_inputs:
            model.ir_version = max(model.ir_version, 4)  # initializers need not be inputs
        return model

    def compiled_for(self, arrays: Mapping[str, np.ndarray]) -> Model:
        """The compiled model for these inputs, compiling it on a cache miss."""
        key = self.key(arrays)
        if key not in self.compiled:
            shapes = {n: arrays[n].shape for n in self.input_names if n not in self.frozen_inputs}
            self.compiled[key] = pyocc.api.compile(self.specialise(arrays), shapes=shapes, **self.options)
        return self.compiled[key]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run on `inputs`; returns the outputs in graph order (a named tuple
        that can also be indexed by output name)."""
        arrays = self._arrays(inputs)
        model = self.compiled_for(arrays)
        feed = {n: arrays[n] for n in self.input_names if n not in self.frozen_inputs}
        results = model.run(feed)
        return namedtupledict("Outputs", self.output_names)(*[results[n] for n in self.output_names])


class PyoccBackend(Backend):
    """The ONNX backend API over pyocc (see the module docstring)."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Only the host CPU."""
        try:
            return Device(device).type == DeviceType.CPU
        except AttributeError:
            return False

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        """Whether every node is in the default domain and an op pyocc knows."""
        return cls.supports_device(device) and all(
            n.domain in ("", "ai.onnx") and n.op_type in OP_BY_TYPE for n in model.graph.node)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> PyoccRep:
        """Check `model` and the options; compilation happens on first run."""
        if not cls.supports_device(device):
            raise PyoccError(f"device '{device}' is not supported by pyocc; use device='CPU'")
        options = _check_options(kwargs)
        return PyoccRep(model, options)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        """Prepare and run once."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[Any, ...]:
        """Run one node: it becomes a one-node model whose inputs are `inputs`
        (in the node's input order; empty names are absent optionals)."""
        opset = kwargs.pop("opset_version", None)
        arrays = [np.asarray(v) for v in inputs]
        names = [n for n in node.input if n]
        if len(names) != len(arrays):
            raise PyoccError(f"node {node.op_type} has {len(names)} input(s), got {len(arrays)}")
        graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                        for n, a in zip(names, arrays)]
        graph_outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        graph = helper.make_graph([node], f"{node.op_type}_node", graph_inputs, graph_outputs)
        opsets = [helper.make_opsetid("", opset)] if opset is not None else None
        model = helper.make_model(graph, opset_imports=opsets) if opsets else helper.make_model(graph)
        return cls.run_model(model, arrays, device, **kwargs)


prepare = PyoccBackend.prepare
run_model = PyoccBackend.run_model
run_node = PyoccBackend.run_node
supports_device = PyoccBackend.supports_device
is_compatible = PyoccBackend.is_compatible

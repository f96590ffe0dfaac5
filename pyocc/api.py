"""The Python API: compile an ONNX model, run it, and ask where its memory went.

    import pyocc
    model = pyocc.compile("resnet50.onnx", target="host", memory="pool")
    outputs = model.run({"gpu_0/data_0": x})
    print(model.memory_report())
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyocc.errors import PyoccError
from pyocc.pipelines import MEMORY_MODES, Options

if TYPE_CHECKING:
    import numpy as np
    import onnx
    from xdsl.dialects.builtin import ModuleOp



@dataclass
class BufferReport:
    """One intermediate buffer in a memory report."""

    name: str
    bytes: int
    offset: int | None
    first: int
    last: int
    shape: list[int]
    dtype: str
    producer: str
    consumers: list[str]


@dataclass
class MemoryReport:
    """The one memory report type every command prints from (see docs/guide.md
    for the vocabulary)."""

    model: str
    memory: str
    planner: str | None
    activation_bytes: int
    lower_bound_bytes: int
    naive_bytes: int
    weight_bytes: int
    io_bytes: int
    workspace_bytes: int
    plan_ms: float
    buffers: list[BufferReport] = field(default_factory=list)
    allocator_calls_per_run: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        import dataclasses

        return dataclasses.asdict(self)

    def __str__(self) -> str:
        def mib(n: int) -> str:
            return f"{n:>14,d} B  {n / 2**20:9.2f} MiB"

        lines = [
            f"model            {self.model}",
            f"memory mode      {self.memory}" + (f" (planner {self.planner})" if self.planner else ""),
            f"activation       {mib(self.activation_bytes)}",
            f"lower bound      {mib(self.lower_bound_bytes)}",
            f"naive            {mib(self.naive_bytes)}",
            f"weights          {mib(self.weight_bytes)}",
            f"graph I/O        {mib(self.io_bytes)}",
            f"workspace        {mib(self.workspace_bytes)}",
            f"buffers          {len(self.buffers)}",
            f"planning         {self.plan_ms:.1f} ms",
        ]
        if self.allocator_calls_per_run is not None:
            lines.append(f"allocator calls  {self.allocator_calls_per_run} per run")
        return "\n".join(lines)


def lower(
    model: str | Path | onnx.ModelProto,
    memory: str = "pool",
    planner: str = "auto",
    shapes: Mapping[str, Sequence[int]] | None = None,
    alignment: int = 64,
    options: Options | None = None,
    coalesce: bool = True,
    sanitize: bool = False,
) -> tuple[ModuleOp, MemoryReport]:
    """Import and lower a model to buffer-form dnn IR in the given memory
    mode; returns the module and its memory report. `coalesce=False` skips
    dnn-coalesce. `options` (see pyocc.pipelines.Options), when given,
    overrides memory/planner/alignment/coalesce."""
    from xdsl.context import Context
    from xdsl.dialects import func
    from xdsl.utils.exceptions import PassFailedException

    from pyocc.analysis.liveness import analyze_function, root_buffer
    from pyocc.dialects.dnn import ops as d
    from pyocc.frontend.onnx_import import import_model
    from pyocc.pipelines import buffer_passes, pool_passes, run_passes, tensor_passes

    if options is None:
        options = Options(memory=memory, planner=planner, alignment=alignment, coalesce=coalesce,
                          sanitize=sanitize)
    memory = options.memory
    if memory not in MEMORY_MODES:
        raise PyoccError(f"memory mode must be one of {', '.join(MEMORY_MODES)}, got '{memory}'")
    name = Path(model).name if isinstance(model, str | Path) else (model.graph.name or "model")
    module = import_model(model, shapes)
    ctx = Context()
    try:
        run_passes(ctx, module, tensor_passes(options))
        function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        tensor_liveness = analyze_function(function)
        run_passes(ctx, module, buffer_passes(options))
        # the bound of the buffers the plan places (after coalescing), with
        # lazy lifetimes even in eager mode
        buffer_liveness = analyze_function(next(op for op in module.walk() if isinstance(op, func.FuncOp)),
                                           from_first_use=True)
        start = time.perf_counter()
        run_passes(ctx, module, pool_passes(options))
        plan_ms = (time.perf_counter() - start) * 1000
    except PassFailedException as e:
        raise PyoccError(str(e)) from None
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    ops = list(function.body.block.ops)
    liveness = analyze_function(function)
    buffers: list[BufferReport] = []
    for b in liveness.intermediates:
        owner = b.value.owner
        buffers.append(BufferReport(
            name=b.name, bytes=b.bytes,
            offset=owner.offset.value.data if isinstance(owner, d.MemOffsetOp) else None,
            first=b.first, last=b.last, shape=list(b.shape), dtype=b.dtype,
            producer=next((o.name for o in ops[b.first:] if isinstance(o, d.DnnComputeOp)
                           and any(root_buffer(v) is b.value for v in o.destinations())), ""),
            consumers=sorted(set(b.consumers) - {"dnn.view"}),
        ))
    if memory == "pool":
        pool = next((o for o in ops if isinstance(o, d.PoolInitOp)), None)
        activation = pool.size.value.data if pool is not None else 0
        calls = 1 if pool is not None else 0
    elif memory == "lazy":
        activation, calls = liveness.lower_bound, len(buffers)
    else:
        activation, calls = liveness.naive_bytes, len(buffers)
    report = MemoryReport(
        model=name, memory=memory,
        planner=function.attributes["dnn.planner"].data if "dnn.planner" in function.attributes else None,  # type: ignore[attr-defined]
        activation_bytes=activation,
        lower_bound_bytes=buffer_liveness.lower_bound,
        naive_bytes=tensor_liveness.naive_bytes,
        weight_bytes=liveness.bytes_of("weight"),
        io_bytes=liveness.bytes_of("input") + liveness.bytes_of("output"),
        workspace_bytes=0,
        plan_ms=plan_ms,
        buffers=buffers,
        allocator_calls_per_run=calls,
    )
    return module, report


class Model:
    """A compiled model: `run(inputs) -> outputs` like onnxruntime, plus its
    memory report."""

    def __init__(self, module: ModuleOp, report: MemoryReport, native: Any):
        self.module = module
        self.report = report
        self.native = native

    @property
    def input_names(self) -> list[str]:
        """ONNX names of the graph inputs, in order."""
        return list(self.native.input_names)

    @property
    def output_names(self) -> list[str]:
        """ONNX names of the graph outputs, in order."""
        return list(self.native.output_names)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once: ONNX input name -> array; returns output name -> array."""
        outputs = self.native.run(dict(inputs))
        stats = getattr(self.native, "alloc_stats", None)
        if callable(stats):
            self.report.allocator_calls_per_run = stats().allocations
        return outputs

    def memory_report(self) -> MemoryReport:
        """Where the memory goes: activation, bound, naive, weights, I/O."""
        return self.report

    def save(self, path: str | Path) -> Path:
        """Write the compiled code: .ll (LLVM IR), .o (object) or .so (shared
        library plus its weights file, loadable by pyocc.runtime.loader)."""
        path = Path(path)
        suffix = path.suffix
        if suffix == ".ll":
            self.native.write_llvm_ir(path)
        elif suffix == ".o":
            self.native.write_object(path)
        elif suffix == ".so":
            self.native.write_shared_library(path)
        else:
            raise PyoccError(f"{path}: unknown output kind '{suffix}'; use .so, .o or .ll")
        return path


def compile(  # noqa: A001 - the name users expect
    model: str | Path | onnx.ModelProto,
    target: str = "host",
    memory: str = "pool",
    planner: str = "auto",
    shapes: Mapping[str, Sequence[int]] | None = None,
    coalesce: bool = True,
    sanitize: bool = False,
) -> Model:
    """Compile an ONNX model (path or ModelProto) to native code for `target`
    ('host'), with memory mode 'pool' (default), 'lazy' or 'eager';
    `coalesce=False` turns tensor coalescing (dnn-coalesce) off.
    `sanitize=True` adds dnn-sanitize: dead buffers are poisoned with NaN and
    out-of-bounds writes stop the run with an error (for testing)."""
    if target != "host":
        raise PyoccError(f"target '{target}' is not available yet; use --target host")
    from pyocc.lowering.convert_dnn_to_llvm import compile_module

    module, report = lower(model, memory=memory, planner=planner, shapes=shapes, coalesce=coalesce,
                           sanitize=sanitize)
    return Model(module, report, compile_module(module))

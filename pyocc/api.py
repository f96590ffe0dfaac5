"""The Python API: compile an ONNX model, run it, and ask where its memory went.

    import pyocc
    model = pyocc.compile("resnet50.onnx", target="host", memory="pool")
    outputs = model.run({"gpu_0/data_0": x})
    print(model.memory_report())
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.liveness import analyze_function, root_buffer
from pyocc.analysis.macs import module_macs
from pyocc.dialects.dnn import ops as d
from pyocc.errors import PyoccError
from pyocc.frontend.onnx_import import import_model
from pyocc.lowering.convert_dnn_to_llvm import compile_module
from pyocc.pipelines import MEMORY_MODES, Options, buffer_passes, pool_passes, run_passes, tensor_passes, tile_passes
from pyocc.rewrites.dnn_memory_pool import buffer_traffic, memory_pools, plan_weights
from pyocc.rewrites.dnn_reorder import DnnReorderPass
from pyocc.rewrites.dnn_tile_search import Plan, choose_tiling
from pyocc.runtime.bridge import check_inputs
from pyocc.runtime.cuda import CudaLibraries, cuda_unavailable_reason
from pyocc.weights import release, resource_keys
from pyocc.units import format_bytes, plural

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
    pool: str | None = None
    """The named pool it lives in (`memory_pools`), None otherwise."""
    traffic: int = 0
    """Bytes read plus written: bytes times the compute ops that touch it."""


@dataclass
class PoolReport:
    """One named memory pool in a memory report (`memory_pools`)."""

    name: str
    bytes: int
    """Planned size: what the pool must hold."""
    limit: int | None
    """The pool's size limit; None: unbounded."""
    buffers: int
    traffic_bytes: int
    """Activation traffic (bytes read + written) this pool serves."""
    read_only: bool = False


@dataclass
class MemoryReport:
    """The one memory report type every command prints from (see docs/guide.md
    for the vocabulary)."""

    model: str
    memory: str
    planner: str | None
    activation_bytes: int
    lower_bound_bytes: int
    """Max-live bytes of the buffers as planned, after coalescing made some
    tensors share a buffer: the bound the plan is graded against (a pool
    equal to it is optimal for this op order)."""
    naive_bytes: int
    weight_bytes: int
    io_bytes: int
    workspace_bytes: int
    plan_ms: float
    buffers: list[BufferReport] = field(default_factory=list)
    allocator_calls_per_run: int | None = None
    allocator_calls_at_init: int | None = None
    """Activation allocations made once, when the model is initialised: the
    planned pools on target cuda with pool allocation `init` (None on the
    host). The weights and the convolution workspace are not counted."""
    tensor_lower_bound_bytes: int | None = None
    """Max-live bytes of the tensors, each in its own bytes, before
    coalescing: what the plan would be bound by without coalescing (at
    least `lower_bound_bytes`)."""
    lower_bound_given_order_bytes: int | None = None
    """The tensors' max-live bound (as `tensor_lower_bound_bytes`) of the op
    order before dnn-reorder ran."""
    reorder: str | None = None
    """dnn-reorder's strategy; None when the given order was kept."""
    reorder_ms: float = 0.0
    """Milliseconds dnn-reorder took (not counting the IR verifier after it)."""
    pools: list[PoolReport] = field(default_factory=list)
    """Per named pool (only with `memory_pools`); the first is the fast one."""
    weight_bytes_by_pool: dict[str, int] = field(default_factory=dict)
    """Planned weight bytes per read-only pool (only with `memory_pools`)."""
    dynamic_buffers: list[str] = field(default_factory=list)
    """Buffers without a static size, left to the runtime allocator."""
    activation_traffic_bytes: int = 0
    """Bytes read + written in intermediate buffers over one run."""
    fast_pool_traffic_bytes: int | None = None
    """Of that, what the first (fast) pool serves (only with `memory_pools`)."""
    native_sites: int | None = None
    """Compute ops that run native kernels (host code of a compiled model only)."""
    numpy_sites: int | None = None
    """Compute ops that call back into the numpy kernels (host code of a compiled model only)."""
    macs: int = 0
    """Multiply-accumulates of one run, as compiled (tiling included)."""
    extra_macs: float = 0.0
    """MACs added by patch-based execution (dnn-tile), over the untiled
    program's; 0.0 when nothing was tiled."""
    tiling: str | None = None
    """The tiled region ("N ops in P patches"); None when nothing was tiled."""
    tiled_lower_bound_bytes: int | None = None
    """The tiled program's own buffers' bound (None when nothing was tiled);
    `lower_bound_bytes` stays the untransformed program's, so the gain shows."""

    @property
    def fast_pool_traffic_fraction(self) -> float | None:
        """fast_pool_traffic_bytes / activation_traffic_bytes (None without pools)."""
        if self.fast_pool_traffic_bytes is None:
            return None
        return self.fast_pool_traffic_bytes / self.activation_traffic_bytes if self.activation_traffic_bytes else 0.0

    def check_limit(self, limit_bytes: int | None) -> None:
        """Raise PyoccError if the activation memory exceeds `limit_bytes`
        (None: no limit); the message says what to try."""
        if limit_bytes is None or self.activation_bytes <= limit_bytes:
            return
        hint = (f"; the smallest reached, with {self.tiling} (patch-based)" if self.tiling
                else "; pool mode needs less" if self.memory != "pool" and self.lower_bound_bytes <= limit_bytes
                else "; no plan can go below the lower bound of this op order" if self.lower_bound_bytes > limit_bytes
                else "")
        raise PyoccError(
            f"{self.model} needs {self.activation_bytes:,} bytes of activation memory in {self.memory} mode, "
            f"more than the limit of {limit_bytes:,} (lower bound {self.lower_bound_bytes:,}){hint}"
        )

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["fast_pool_traffic_fraction"] = self.fast_pool_traffic_fraction
        return data

    def __str__(self) -> str:
        def mib(n: int) -> str:
            return f"{n:>14,d} B  {format_bytes(n):>12s}"

        lines = [
            f"model            {self.model}",
            f"memory mode      {self.memory}" + (f" (planner {self.planner})" if self.planner else ""),
            f"activation       {mib(self.activation_bytes)}",
            f"lower bound      {mib(self.lower_bound_bytes)}  (max-live buffers, after coalescing)",
        ]
        if self.tensor_lower_bound_bytes is not None:
            lines.append(f"tensor bound     {mib(self.tensor_lower_bound_bytes)}  (max-live tensors, before coalescing)")
        if self.reorder is not None and self.lower_bound_given_order_bytes is not None:
            lines.append(f"  given order    {mib(self.lower_bound_given_order_bytes)}"
                         f"  (tensors in the model's op order; reorder {self.reorder}: {self.reorder_ms:.1f} ms)")
        lines += [
            f"naive            {mib(self.naive_bytes)}",
            f"weights          {mib(self.weight_bytes)}",
            f"graph I/O        {mib(self.io_bytes)}",
            f"workspace        {mib(self.workspace_bytes)}",
            f"buffers          {len(self.buffers)}",
            f"planning         {self.plan_ms:.1f} ms",
        ]
        if self.allocator_calls_per_run is not None:
            at_init = ("" if self.allocator_calls_at_init is None
                       else f", {self.allocator_calls_at_init} at init")
            lines.append(f"allocator calls  {self.allocator_calls_per_run} per run{at_init}")
        if self.native_sites is not None and self.numpy_sites is not None:
            lines.append(f"kernels          {self.native_sites} native, {self.numpy_sites} numpy")
        if self.tiling is not None:
            lines.append(f"tiling           {self.tiling}, {self.extra_macs:+.1%} MACs")
        for pool in self.pools:
            limit = "unbounded" if pool.limit is None else f"limit {pool.limit:,d} B"
            share = pool.traffic_bytes / self.activation_traffic_bytes if self.activation_traffic_bytes else 0.0
            lines.append(f"pool {pool.name:<11s} {mib(pool.bytes)}  ({limit}, {plural(pool.buffers, 'buffer')}, "
                         f"{share:.1%} of activation traffic)")
        for pool_name, nbytes in self.weight_bytes_by_pool.items():
            lines.append(f"{'weights ' + pool_name:<16s} {mib(nbytes)}  (read-only pool)")
        if self.fast_pool_traffic_bytes is not None and self.pools:
            lines.append(f"fast pool        {self.pools[0].name}: {self.fast_pool_traffic_bytes:,d} B of "
                         f"{self.activation_traffic_bytes:,d} B activation traffic "
                         f"({self.fast_pool_traffic_fraction:.1%})")
        if self.dynamic_buffers:
            lines.append(f"dynamic buffers  {len(self.dynamic_buffers)} left to the runtime allocator: "
                         + ", ".join(self.dynamic_buffers))
        return "\n".join(lines)


def lower(
    model: str | Path | onnx.ModelProto,
    memory: str = "pool",
    planner: str = "auto",
    shapes: Mapping[str, Sequence[int]] | None = None,
    alignment: int = 64,
    options: Options | None = None,
    fuse: bool = True,
    coalesce: bool = True,
    sanitize: bool = False,
    memory_pools: str | None = None,
    pool_candidates: str | None = None,
    reorder: str = Options.reorder,
    target: str = "host",
    pool_allocation: str | None = None,
    workspace: int = Options.workspace,
    scratch: bool = True,
    memory_limit: int | str | None = None,
    max_extra_macs: float = 0.10,
    tile_region: int = 0,
    tile_patches: int = 4,
) -> tuple[ModuleOp, MemoryReport]:
    """Import and lower a model to buffer-form dnn IR in the given memory
    mode; returns the module and its memory report. `fuse=False` skips layer
    fusion (dnn-fuse), `coalesce=False` tensor coalescing (dnn-coalesce).
    `memory_pools` (e.g. "sram:size=1MiB,dram", pool mode only) plans across
    named pools; `pool_candidates` ("concat=dram,conv=sram+dram") restricts
    the pools of the buffers each kind of op writes. `reorder` is
    dnn-reorder's strategy (auto, exact, greedy, or given to keep the ONNX order).
    `target` "cuda" stages inputs and outputs through device buffers and
    applies only the fusions cuDNN can run; there `pool_allocation` says when
    the planned pool is allocated: "init" (default: once per model) or "run"
    (once per run, Occamy's way), and `workspace` the bytes of cuDNN
    workspace each convolution may use, planned as a buffer (so the
    activation memory includes it). `scratch` (default True) plans the
    host's native kernel scratch (im2col columns) as buffers of the plan,
    each sized to the pool's slack at its op (pyocc.planning.fit); False
    leaves it out, and the convolutions that need it run numpy kernels.
    `tile_region` > 0 runs the first N row-local ops patch by patch
    (dnn-tile, `tile_patches` patches). `memory_limit` (bytes, or "min")
    picks a tiling when the program as given needs more activation memory
    than that: the first fitting one in order of extra MACs, or ("min") the
    smallest within `max_extra_macs` (a ratio of the untiled MACs); bytes
    that no tiling reaches are an error naming the smallest size reached.
    `options` (see pyocc.pipelines.Options), when given, overrides
    memory/planner/alignment/fuse/coalesce/memory_pools/reorder/tiling."""
    if options is None:
        options = Options(memory=memory, planner=planner, alignment=alignment, fuse=fuse, coalesce=coalesce,
                          sanitize=sanitize,
                          memory_pools=memory_pools or "", pool_candidates=pool_candidates or "",
                          reorder=reorder, target=target,
                          pool_allocation=_pool_allocation(pool_allocation, target), workspace=workspace,
                          scratch=scratch, tile_region=tile_region, tile_patches=tile_patches)
    memory = options.memory
    if options.target not in ("host", "cuda"):
        raise PyoccError(f"target must be host or cuda, got '{options.target}'")
    if options.target == "cuda" and options.sanitize:
        raise PyoccError("the sanitizer runs on the host only; drop --sanitize with --target cuda")
    if memory not in MEMORY_MODES:
        raise PyoccError(f"memory mode must be one of {', '.join(MEMORY_MODES)}, got '{memory}'")
    if options.memory_pools and memory != "pool":
        raise PyoccError(f"memory pools need memory mode 'pool', got '{memory}'; drop --memory-pools or use --memory pool")
    if options.pool_candidates and not options.memory_pools:
        raise PyoccError("pool candidates need memory pools; add --memory-pools, e.g. 'sram:size=1MiB,dram'")
    name = Path(model).name if isinstance(model, str | Path) else (model.graph.name or "model")
    module = import_model(model, shapes)
    ctx = Context()
    try:
        given_bound, reorder_ms = _run_tensor_passes(ctx, module, tensor_passes(options))
        function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        tensor_liveness = analyze_function(function)
        base_macs = module_macs(module)
        if memory_limit is not None:
            choice = choose_tiling(function, _planner_of(ctx, module, options), memory, memory_limit,
                                   max_extra_macs, base_macs)
            options = dataclasses.replace(options, tile_region=choice.region, tile_patches=choice.patches)
        if options.tile_region and options.target == "cuda":
            raise PyoccError(f"{name}: patch-based execution (tiling) runs on the host only for now; "
                             "use --target host, or a --memory-limit the untiled program fits")
        untiled_bound = None
        if options.tile_region:
            # the report's lower bound stays the untransformed program's
            untiled = module.clone()
            run_passes(ctx, untiled, buffer_passes(dataclasses.replace(options, tile_region=0)))
            untiled_bound = analyze_function(
                next(op for op in untiled.walk() if isinstance(op, func.FuncOp))).lower_bound_by_use
        run_passes(ctx, module, tile_passes(options))
        run_passes(ctx, module, buffer_passes(options))
        timings: dict[str, float] = {}
        run_passes(ctx, module, pool_passes(options), timings)
        plan_ms = sum(timings.values())  # the pool passes, not the IR verifier
    except PassFailedException as e:
        raise PyoccError(str(e)) from None
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    ops = list(function.body.block.ops)
    liveness = analyze_function(function)

    pool_names = {o.pool: o.pool_name.data for o in ops if isinstance(o, d.PoolInitOp) and o.pool_name is not None}
    scratch = {root_buffer(o.workspace) for o in ops
               if isinstance(o, d.DnnComputeOp) and getattr(o, "workspace", None) is not None}
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
            pool=pool_names.get(owner.pool) if isinstance(owner, d.MemOffsetOp) else None,
            traffic=buffer_traffic(b),
        ))
    at_init = None if options.target == "host" else 0
    if memory == "pool":
        inits = [o for o in ops if isinstance(o, d.PoolInitOp)]
        activation = sum(o.size.value.data for o in inits)
        calls = sum(1 for o in ops if isinstance(o, d.MallocOp))
        if options.target == "cuda" and options.pool_allocation == "init":
            at_init = len(inits)
        else:
            calls += len(inits)
    elif memory == "lazy":
        activation, calls = liveness.lower_bound, len(buffers)
    else:
        activation, calls = liveness.naive_bytes, len(buffers)
    report = MemoryReport(
        model=name, memory=memory,
        planner=function.attributes["dnn.planner"].data if "dnn.planner" in function.attributes else None,  # type: ignore[attr-defined]
        activation_bytes=activation,
        lower_bound_bytes=liveness.lower_bound_by_use,
        naive_bytes=tensor_liveness.naive_bytes,
        weight_bytes=liveness.bytes_of("weight"),
        io_bytes=liveness.bytes_of("input") + liveness.bytes_of("output"),
        # planned kernel scratch (host, native kernels): the most one op has at once
        workspace_bytes=max((b.bytes for b in liveness.intermediates if b.value in scratch), default=0),
        plan_ms=plan_ms,
        buffers=buffers,
        allocator_calls_per_run=calls,
        allocator_calls_at_init=at_init,
        tensor_lower_bound_bytes=tensor_liveness.lower_bound,
        lower_bound_given_order_bytes=tensor_liveness.lower_bound if given_bound is None else given_bound,
        reorder=None if given_bound is None else options.reorder,
        reorder_ms=reorder_ms,
        activation_traffic_bytes=sum(b.traffic for b in buffers),
        macs=module_macs(module),
    )
    if any(isinstance(o, d.InsertSliceOp) for o in ops):
        report.extra_macs = (report.macs - base_macs) / base_macs if base_macs else 0.0
        report.tiling = f"{options.tile_region} ops in {options.tile_patches} patches"
        report.tiled_lower_bound_bytes = report.lower_bound_bytes
        if untiled_bound is not None:
            report.lower_bound_bytes = untiled_bound
    if options.memory_pools:
        _report_pools(report, function, options)
    if isinstance(memory_limit, int):
        report.check_limit(memory_limit)
    return module, report


def _pool_allocation(pool_allocation: str | None, target: str) -> str:
    """When the planned pool is allocated: `pool_allocation` checked, or the
    target's way (cuda: once, at init; host: per run) when it is None."""
    if pool_allocation is None:
        return "init" if target == "cuda" else "run"
    if pool_allocation not in ("init", "run"):
        raise PyoccError(f"pool allocation must be init or run, got '{pool_allocation}'")
    if target == "host" and pool_allocation == "init":
        raise PyoccError("pool allocation 'init' is for target cuda; the host allocates its pool per run "
                         "(drop --pool-allocation or use --target cuda)")
    return pool_allocation


def _planner_of(ctx: Context, tensor_module: ModuleOp, options: Options) -> Plan:
    """The tile search's compile step: (region, patches) -> the planned
    buffer-form function of a copy of `tensor_module` tiled so."""

    def plan(region: int, patches: int) -> func.FuncOp:
        tiled = dataclasses.replace(options, tile_region=region, tile_patches=patches)
        copy = tensor_module.clone()
        run_passes(ctx, copy, [*tile_passes(tiled), *buffer_passes(tiled), *pool_passes(tiled)])
        return next(op for op in copy.walk() if isinstance(op, func.FuncOp))

    return plan


def _run_tensor_passes(ctx: Any, module: ModuleOp, passes: list[Any]) -> tuple[int | None, float]:
    """Run the tensor stage; returns the lower bound of the order dnn-reorder
    was given (None when it did not run) and the milliseconds it took."""
    given_bound = None
    timings: dict[str, float] = {}
    for p in passes:
        if isinstance(p, DnnReorderPass):
            function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
            given_bound = analyze_function(function).lower_bound
        run_passes(ctx, module, [p], timings)
    return given_bound, timings.get(DnnReorderPass.name, 0.0)


def _report_pools(report: MemoryReport, function: Any, options: Options) -> None:
    """Fill the per-pool part of a report: sizes, traffic, weights, dynamic buffers."""
    pools = memory_pools(options.memory_pools, options.alignment)
    sizes = {o.pool_name.data: o.size.value.data for o in function.body.block.ops
             if isinstance(o, d.PoolInitOp) and o.pool_name is not None}
    for pool in pools:
        if pool.read_only:
            continue
        held = [b for b in report.buffers if b.pool == pool.name]
        report.pools.append(PoolReport(
            name=pool.name, bytes=sizes.get(pool.name, 0), limit=pool.size, buffers=len(held),
            traffic_bytes=sum(b.traffic for b in held)))
    report.weight_bytes_by_pool = plan_weights(function, pools, options.alignment)
    report.dynamic_buffers = [b.name for b in report.buffers if b.offset is None]
    report.fast_pool_traffic_bytes = report.pools[0].traffic_bytes if report.pools else 0


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

    @property
    def numpy_sites(self) -> int:
        """Compute ops that call back into the numpy kernels at run time
        (host: those without a native kernel, or all with kernels="numpy")."""
        return int(getattr(self.native, "numpy_sites", 0))

    @property
    def native_sites(self) -> int:
        """Compute ops that run a native kernel compiled into the model."""
        return int(getattr(self.native, "native_sites", 0))

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once: ONNX input name -> array; returns output name -> array.
        A wrong input is one PyoccError naming the model file (not the ONNX
        graph's name, which is often just `main_graph`)."""
        check_inputs(self.report.model, self.native.meta, dict(inputs))
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
    fuse: bool = True,
    coalesce: bool = True,
    sanitize: bool = False,
    memory_pools: str | None = None,
    pool_candidates: str | None = None,
    reorder: str = Options.reorder,
    cuda_libraries: Any = None,
    workspace: int = 32 << 20,
    pool_allocation: str | None = None,
    kernels: str = "native",
    scratch: bool = True,
    memory_limit: int | str | None = None,
    max_extra_macs: float = 0.10,
    tile_region: int = 0,
    tile_patches: int = 4,
) -> Model:
    """Compile an ONNX model (path or ModelProto) to native code for `target`
    ('host' or 'cuda'), with memory mode 'pool' (default), 'lazy' or 'eager';
    `fuse=False` turns layer fusion off, `coalesce=False` tensor coalescing.
    `sanitize=True` adds dnn-sanitize: dead buffers are poisoned with NaN and
    out-of-bounds writes stop the run with an error (for testing).
    On 'cuda', `cuda_libraries` provides the library functions (default:
    NVIDIA's, found by pyocc.runtime.cuda; tests pass
    pyocc.testing.fake_cuda.FakeCuda()), `workspace` is the convolution
    workspace in bytes, and `pool_allocation` says when the planned pool is
    allocated: "init" (the default: once, when the model is loaded) or "run"
    (a cudaMalloc and cudaFree per run, Occamy's way). On 'host',
    `kernels="native"` (default) compiles a native kernel for every op that
    has one and calls the numpy kernels for the rest (`Model.numpy_sites`
    counts them); `kernels="numpy"` calls the numpy kernels for every op.
    `scratch` (default True) plans the native kernels' scratch (im2col
    columns) in the pool (see `lower`); with `kernels="numpy"` none is planned. `memory_limit`, `max_extra_macs`, `tile_region` and
    `tile_patches`: patch-based execution of the stem (see `lower`)."""
    if target not in ("host", "cuda"):
        raise PyoccError(f"unknown target '{target}'; use host or cuda")
    if kernels not in ("native", "numpy"):
        raise PyoccError(f"unknown kernels '{kernels}'; use native or numpy")
    if target == "cuda" and sanitize:
        raise PyoccError("the sanitizer runs on the host only; drop --sanitize with --target cuda")
    if target == "cuda" and cuda_libraries is None:
        reason = cuda_unavailable_reason()
        if reason is not None:
            raise PyoccError(reason)
        cuda_libraries = CudaLibraries.load()

    before = resource_keys()
    module, report = lower(model, memory=memory, planner=planner, shapes=shapes, fuse=fuse, coalesce=coalesce,
                           sanitize=sanitize,
                           memory_pools=memory_pools, pool_candidates=pool_candidates, reorder=reorder,
                           target=target, pool_allocation=pool_allocation, workspace=workspace,
                           scratch=scratch and kernels == "native", memory_limit=memory_limit, max_extra_macs=max_extra_macs,
                           tile_region=tile_region, tile_patches=tile_patches)
    native = compile_module(module, target=target, cuda_libraries=cuda_libraries, workspace=workspace,
                            pool_allocation=_pool_allocation(pool_allocation, target), kernels=kernels)
    if target == "cuda":
        report.workspace_bytes = native.workspace_bytes
    else:
        report.native_sites, report.numpy_sites = native.native_sites, native.numpy_sites
    compiled = Model(module, report, native)
    # the weights now live in the model's packed pool; drop the store's blobs
    # (which may be hundreds of MB) once nothing can print the module any more
    weakref.finalize(compiled, release, resource_keys() - before)
    return compiled

"""The Python API: compile an ONNX model, run it, and ask where its memory went.

    import pyocc
    model = pyocc.compile("resnet50.onnx", target="host", memory="pool")
    outputs = model.run({"gpu_0/data_0": x})
    print(model.memory_report())
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import itertools
import json
import re
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.liveness import Liveness, analyze_function, function_bodies, root_buffer
from pyocc.analysis.macs import module_macs
from pyocc.dialects.dnn import Dnn
from pyocc.analysis.npu_program import npu_run, npu_summary, parse_scratchpad
from pyocc.dialects.dnn import ops as d
from pyocc.errors import PyoccError
from pyocc.frontend.onnx_import import FoldCache, import_model, load_model
from pyocc.frontend.symbolic_shapes import SymbolicShapes, infer_symbolic_shapes
from pyocc.frontend.symbols import SymbolicInputs, symbolic_inputs
from pyocc.lowering.convert_dnn_to_llvm import compile_module
from pyocc.lowering.limits import CUDA_CONV_SEARCH, CUDA_WORKSPACE
from pyocc.lowering.native.threads import MAX_THREADS
from pyocc.lowering.symbolic_native import NotNativeProgram, build_symbolic_native
from pyocc.lowering.symbolic_pool import BufferType, pool_module, symbolic_pool_form
from pyocc.planning import PlanningError, Poly, Problem, SymbolicPlan, SymbolicProblem, max_live, plan_symbolic
from pyocc.planning.npu_simulator import NpuCost
from pyocc.planning.scratchpad import NpuResult
from pyocc.analysis.verify_lifetimes import check_lifetimes
from pyocc.pipelines import MEMORY_MODES, Options, buffer_passes, pool_passes, run_passes, tensor_passes, tile_passes
from pyocc.rewrites.dnn_memory_pool import (
    Placement,
    apply_placement,
    buffer_traffic,
    memory_pools,
    plan_weights,
    planning_problem,
)
from pyocc.rewrites.dnn_reorder import DnnReorderPass, order_taken, schedule_nodes
from pyocc.rewrites.dnn_npu_schedule import schedule_function
from pyocc.lowering.dnn_dma_to_memcpy import DnnDmaToMemcpyPass
from pyocc.rewrites.dnn_recompute import named_recompute_ops
from pyocc.rewrites.dnn_recompute_search import choose_recompute
from pyocc.rewrites.dnn_tile_search import Plan, choose_tiling
from pyocc.runtime.bridge import AllocStats, check_inputs
from pyocc.runtime.cuda import CudaLibraries, cuda_unavailable_reason
from pyocc.runtime.jit import SymbolicCompiledModel
from pyocc.symbolic import (
    ProgramMismatch,
    SymbolicProgram,
    SymbolicRun,
    check_weights,
    fit_buffer_types,
    fit_polynomials,
    fit_program,
    probe_points,
    program_steps,
    symbolic_problem,
)
from pyocc.weights import evict_mapped, release, resource_keys
from pyocc.units import format_bytes, plural

if TYPE_CHECKING:
    import onnx



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
    reorder_order: tuple[int, ...] | None = field(default=None, repr=False)
    """The op order dnn-reorder took, as positions in the order it was given
    (pyocc.rewrites.dnn_reorder.order_taken); None when it did not run. For
    a symbolic compile's later probes (`Options.reorder_order`), not a
    reader: left out of `to_json`."""
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
    """The transformed (tiled or recomputing) program's own buffers' bound
    (None when nothing was transformed); `lower_bound_bytes` stays the
    untransformed program's, so the gain shows."""
    recomputed: list[str] = field(default_factory=list)
    """The cheap values computed again at their late readers (dnn-recompute),
    by their tensor-form names; empty when none."""
    recompute_ops: int = 0
    """Element operations the recomputed values add to one run (each op's
    result elements times its Recomputable `ops_per_element`)."""
    npu: dict[str, Any] | None = None
    """The scratchpad schedule's simulation (`scratchpad`): cycles, DRAM
    bytes, SRAM used, bounds and the no-prefetch baseline; None without."""

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
        transformed = ", ".join([*([f"{self.tiling} (patch-based)"] if self.tiling else []),
                                 *([f"{', '.join(self.recomputed)} recomputed"] if self.recomputed else [])])
        hint = (f"; the smallest reached, with {transformed}" if transformed
                else "; pool mode needs less" if self.memory != "pool" and self.lower_bound_bytes <= limit_bytes
                else "; no plan can go below the lower bound of this op order" if self.lower_bound_bytes > limit_bytes
                else "")
        bound = "lower bound" if self.tiled_lower_bound_bytes is None else "untransformed program's lower bound"
        raise PyoccError(
            f"{self.model} needs {self.activation_bytes:,} bytes of activation memory in {self.memory} mode, "
            f"more than the limit of {limit_bytes:,} ({bound} {self.lower_bound_bytes:,}){hint}"
        )

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        data = dataclasses.asdict(self)
        del data["reorder_order"]
        data["fast_pool_traffic_fraction"] = self.fast_pool_traffic_fraction
        return data

    def __str__(self) -> str:
        def mib(n: int) -> str:
            return f"{n:>14,d} B  {format_bytes(n):>12s}"

        lines = [
            f"model            {self.model}",
            f"memory mode      {self.memory}" + (f" (planner {self.planner})" if self.planner else ""),
            f"activation       {mib(self.activation_bytes)}",
            f"lower bound      {mib(self.lower_bound_bytes)}  (max-live buffers, after coalescing"
            + (")" if self.tiled_lower_bound_bytes is None else "; of the program before tiling or recomputing)"),
        ]
        if self.tiled_lower_bound_bytes is not None:
            lines.append(f"  transformed    {mib(self.tiled_lower_bound_bytes)}  (the same bound of the program as run)")
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
        if self.recomputed:
            lines.append(f"recompute        {', '.join(self.recomputed)} again at late readers: "
                         f"{self.recompute_ops:,d} element ops, {self.extra_macs:+.1%} MACs")
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
        if self.npu is not None:
            lines.append(npu_summary(self.npu))
        return "\n".join(lines)



def _limit_rank(limit: int | str, activation_bytes: int, extra_work: int) -> tuple[int, int, int]:
    """How `--memory-limit` ranks a way to meet it (lower is better): with
    "min" the smaller activation memory, with a byte limit fitting first;
    then the least extra work (MACs and recomputed element operations)."""
    if limit == "min":
        return 0, activation_bytes, extra_work
    fits = activation_bytes <= int(limit)
    return (0, 0, extra_work) if fits else (1, activation_bytes, extra_work)


#: What `--scratchpad` runs with (`pyocc run`, `pyocc compile`, the API),
#: said where it is asked for with anything else
SCRATCHPAD_MODE = ("--scratchpad runs on target host in pool mode without --memory-pools "
                   "(the schedule plans the SRAM and the DRAM)")

#: Python's cyclic garbage collector looks at the youngest objects after this
#: many allocations during a compile (Python's default: 700). A compile
#: makes and drops hundreds of thousands of IR objects; at 700 the
#: collector ran 374 times during T5's symbolic compile, three of them
#: over every object of the process, 0.26 CPU s in all (0.07 of a static
#: compile); at 10,000, 0.08 (0.03), at the same peak memory
COMPILE_GC_THRESHOLD = 10_000


@contextlib.contextmanager
def collecting_less() -> Iterator[None]:
    """Within the block, Python's cyclic garbage collector runs after
    COMPILE_GC_THRESHOLD allocations (a higher threshold already set is
    kept); the thresholds before are restored after it."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], COMPILE_GC_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@collecting_less()
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
    scratchpad: int | str | None = None,
    npu_cost: str | None = None,
    tile_halo: str = "recompute",
    stage_dma: bool = False,
    recompute: str = "",
    threads: int = 1,
    folds: FoldCache | None = None,
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
    (dnn-tile, `tile_patches` patches, the halo rows recomputed or, with
    `tile_halo="cache"`, computed once and cached). `recompute` ("a,b":
    tensor-form value names) computes those cheap values again at their late
    readers (dnn-recompute). `memory_limit` (bytes, or "min")
    picks recomputations and a tiling when the program as given needs more
    activation memory than that: recomputed values that lower the planned
    pool (least work first), then the first fitting tiling in order of extra
    MACs, or ("min") the smallest within `max_extra_macs` (a ratio of the
    untransformed MACs; a recomputed element op counts as one); bytes
    that nothing reaches are an error naming the smallest size reached.
    `scratchpad` (bytes, or "1MiB") schedules the tensor-form program for
    an NPU whose compute reads only SRAM of that size (DMA from DRAM,
    prefetch, tiling, chain cascades) and simulates it under `npu_cost`
    ("macs_per_cycle=256,sram_bytes_per_cycle=64,dram_bytes_per_cycle=8"
    by default): the report's `npu`. `stage_dma=True` (what `compile` asks
    for with a scratchpad) also makes the program that schedule:
    dnn-npu-schedule writes it as IR (SRAM and DRAM buffers at their
    planned offsets, DMA with its prefetches and write-backs, simulated
    again from the IR) instead of the buffer and pool passes, and
    dnn-dma-to-memcpy turns the DMA into host copies. That schedule tiles
    op by op and in chain cascades (the IR does not run the scheduler's
    byte-share cascades), with `stage_dma` or without: the `npu` report
    says `"cascades": false`, and what it reports is what runs.
    `threads` (host): the threads the model will run on; a convolution
    whose blocks are too small to split between them gets one copy of its
    fitted scratch per thread (dnn-memory-pool{threads}), in the plan and
    the report; 1 plans as for one thread.
    `folds`: the importer's folds shared with other lowerings of the same
    model (`import_model`; a symbolic compile's probes).
    `options` (see pyocc.pipelines.Options), when given, overrides
    memory/planner/alignment/fuse/coalesce/memory_pools/reorder/tiling/threads.

    The op verifiers run on the imported module and once on the result
    (`Options.verify`), not after every pass: that was a tenth of a small
    model's compile. When the lowering fails with anything but a
    PyoccError, PlanningError or MemoryError (a pass broke the IR), it runs again
    verifying after every pass (`Options.verify_each`), so that the error
    names the pass."""
    if options is None:
        options = Options(memory=memory, planner=planner, alignment=alignment, fuse=fuse, coalesce=coalesce,
                          sanitize=sanitize,
                          memory_pools=memory_pools or "", pool_candidates=pool_candidates or "",
                          reorder=reorder, target=target,
                          pool_allocation=_pool_allocation(pool_allocation, target), workspace=workspace,
                          scratch=scratch, tile_region=tile_region, tile_patches=tile_patches,
                          tile_halo=tile_halo, recompute=recompute, threads=threads)
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
    npu_machine = None if scratchpad is None else parse_scratchpad(scratchpad, npu_cost)
    if npu_cost is not None and scratchpad is None:
        raise PyoccError("--npu-cost needs a scratchpad; add --scratchpad SIZE, e.g. --scratchpad 1MiB")
    again = functools.partial(_lower, model, shapes, memory_limit=memory_limit, max_extra_macs=max_extra_macs,
                              npu_machine=npu_machine, stage_dma=stage_dma, folds=folds)
    try:
        return again(options)
    except (PyoccError, PlanningError, MemoryError):  # the user's input, or no memory: a second lowering finds nothing
        raise
    except Exception:
        if not options.verify or options.verify_each:
            raise
        # a pass broke the IR (or stumbled on IR an earlier pass broke): the same lowering,
        # verified after every pass, names the pass that did (run_passes); else the error as it was
        again(dataclasses.replace(options, verify_each=True))
        raise


def _lower(model: str | Path | onnx.ModelProto, shapes: Mapping[str, Sequence[int]] | None, options: Options, *,
           memory_limit: int | str | None, max_extra_macs: float, npu_machine: tuple[int, NpuCost] | None,
           stage_dma: bool, folds: FoldCache | None) -> tuple[ModuleOp, MemoryReport]:
    """`lower` once, its arguments checked (`npu_machine`: the parsed scratchpad and cost model)."""
    memory = options.memory
    each = options.verify and options.verify_each  # the op verifiers after every pass, not only at the end
    name = Path(model).name if isinstance(model, str | Path) else (model.graph.name or "model")
    before = resource_keys()
    module = import_model(model, shapes, unfold_broadcasts=options.unfold_broadcasts, verify=options.verify,
                          folds=folds)
    ctx = Context()
    try:
        given_bound, reorder_ms, reorder_order = _run_tensor_passes(ctx, module, tensor_passes(options), each)
        function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        tensor_liveness = analyze_function(function)
        base_macs = module_macs(module)
        # the schedule that runs (without byte-share cascades: the IR runs chains only), also
        # where it is only reported (pyocc plan): what the report says is what `pyocc run` runs
        npu_result = None if npu_machine is None else npu_run(function, *npu_machine)
        npu = None if npu_result is None else npu_result.as_json()
        kept = _Searched()
        recompute_ops = 0
        if memory_limit is not None:
            # recomputation first: its clones are elementwise ops, cheaper
            # than the halo rows of most tilings; then tiling on top
            recomputed = choose_recompute(function, _recompute_planner_of(ctx, module, options, kept), memory,
                                          memory_limit, max_extra_macs * base_macs)
            with_recompute = dataclasses.replace(options, recompute=",".join(recomputed.values))
            left = max(0.0, max_extra_macs - (recomputed.ops + recomputed.macs) / base_macs) if base_macs else 0.0
            choice = choose_tiling(function, _planner_of(ctx, module, with_recompute, kept), memory, memory_limit,
                                   left, base_macs)
            recompute_ops = recomputed.ops
            if recomputed.values:
                # tiling alone may get as far for less extra work (a cached halo adds none): the
                # smaller pool with min, else what fits, and on a tie the least extra work
                alone = choose_tiling(function, _planner_of(ctx, module, options, kept), memory, memory_limit,
                                      max_extra_macs, base_macs)
                work = recomputed.ops + recomputed.macs + choice.extra_macs
                if _limit_rank(memory_limit, alone.activation_bytes, alone.extra_macs) \
                        <= _limit_rank(memory_limit, choice.activation_bytes, work):
                    choice, recompute_ops = alone, 0
                else:
                    options = with_recompute
            else:
                options = with_recompute
            options = dataclasses.replace(options, tile_region=choice.region, tile_patches=choice.patches,
                                          tile_halo=choice.halo)
        elif options.recompute:
            recompute_ops = named_recompute_ops(function, options.recompute.split(","))
        if options.tile_region and options.target == "cuda":
            raise PyoccError(f"{name}: patch-based execution (tiling) runs on the host only for now; "
                             "use --target host, or a --memory-limit the untiled program fits")
        untiled_bound = None
        if options.tile_region or options.recompute:
            # the report's lower bound stays the untransformed program's
            untiled_bound = kept.untiled_bound
            if untiled_bound is None:
                untiled = module.clone()
                untiled_options = dataclasses.replace(options, tile_region=0, recompute="")
                run_passes(ctx, untiled, [*buffer_passes(untiled_options), *pool_passes(untiled_options)])
                untiled_bound = analyze_function(
                    next(op for op in untiled.walk() if isinstance(op, func.FuncOp))).lower_bound_by_use
        searched = None if stage_dma else kept.plans.get(_plan_key(options))
        timings: dict[str, float] = {}
        if stage_dma:
            if npu_machine is None or memory != "pool" or options.memory_pools or options.target != "host":
                raise PyoccError(SCRATCHPAD_MODE)
            if options.tile_region:
                raise PyoccError("--scratchpad does not combine with tiling (--memory-limit, --tile-region): "
                                 "the scratchpad schedule tiles on its own; drop one of them")
            start = time.perf_counter()
            assert npu_result is not None
            # the schedule the report simulated, written as IR (and simulated again from it)
            schedule_function(function, *npu_machine, schedule=npu_result.schedule)
            timings["dnn-npu-schedule"] = (time.perf_counter() - start) * 1000
            # verified once, after dnn-dma-to-memcpy below (run_passes): a
            # scheduled program has tens of thousands of ops, and each
            # verification of them cost a sixth of the compile
        elif searched is not None:
            # the search compiled the chosen tiling already (unverified): verified below, not compiled again
            module, timings = searched
            check_lifetimes(module)
        else:
            run_passes(ctx, module, tile_passes(options), verify=each)
            run_passes(ctx, module, buffer_passes(options), verify=each)
        if searched is None and not stage_dma:
            run_passes(ctx, module, pool_passes(options), timings, verify=each)
        plan_ms = sum(timings.values())  # the pool passes, not the IR verifier
        if stage_dma:
            run_passes(ctx, module, [DnnDmaToMemcpyPass()], verify=each)
        if options.verify:
            module.verify()
    except PassFailedException as e:
        raise PyoccError(str(e)) from None
    function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    ops = list(function.body.block.ops)
    liveness = analyze_function(function)

    scratch = {root_buffer(o.workspace) for o in ops
               if isinstance(o, d.DnnComputeOp) and getattr(o, "workspace", None) is not None}
    buffers = buffer_reports(ops, liveness)
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
        reorder_order=reorder_order,
        activation_traffic_bytes=sum(b.traffic for b in buffers),
        macs=module_macs(module),
    )
    tiled = any(isinstance(o, d.InsertSliceOp) for o in ops)
    if tiled:
        report.tiling = f"{options.tile_region} ops in {options.tile_patches} patches" + (
            ", halos cached" if options.tile_halo == "cache" else "")
    if options.recompute:
        report.recomputed = options.recompute.split(",")
        report.recompute_ops = recompute_ops
    if tiled or options.recompute:
        report.extra_macs = (report.macs - base_macs) / base_macs if base_macs else 0.0
        report.tiled_lower_bound_bytes = report.lower_bound_bytes
        if untiled_bound is not None:
            report.lower_bound_bytes = untiled_bound
    if options.memory_pools:
        _report_pools(report, function, options)
    report.npu = npu
    if isinstance(memory_limit, int):
        report.check_limit(memory_limit)
    # weights mapped from an external data file: passes may have read them; the file keeps them
    for key in resource_keys() - before:
        evict_mapped(key)
    return module, report


def npu_schedule(
    model: str | Path | onnx.ModelProto,
    *,
    scratchpad: int | str,
    npu_cost: str | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    fuse: bool = True,
    reorder: str = Options.reorder,
    target: str = "host",
) -> NpuResult:
    """The scratchpad schedule of `model` (fused for `target` and reordered
    as `lower` does) and its simulation: what `pyocc plan --scratchpad SIZE
    --format svg` draws (pyocc.report.npu_picture), the schedule the text
    and JSON reports describe."""
    sram_size, cost = parse_scratchpad(scratchpad, npu_cost)
    module = import_model(model, shapes)
    try:
        _run_tensor_passes(Context(), module, tensor_passes(Options(fuse=fuse, reorder=reorder, target=target)))
    except PassFailedException as e:
        raise PyoccError(str(e)) from None
    return npu_run(next(op for op in module.walk() if isinstance(op, func.FuncOp)), sram_size, cost)


def buffer_reports(ops: list[Operation], liveness: Liveness) -> list[BufferReport]:
    """One BufferReport per intermediate buffer of a buffer-form function
    (`ops`, its operations in order, and their `liveness`)."""
    pool_names = {o.pool: o.pool_name.data for o in ops if isinstance(o, d.PoolInitOp) and o.pool_name is not None}
    # buffer -> (step, op name) of every compute op writing it, in order (one pass, not one per buffer)
    writers: dict[SSAValue, list[tuple[int, str]]] = {}
    for step, o in enumerate(ops):
        if isinstance(o, d.DnnComputeOp):
            for root in dict.fromkeys(root_buffer(v) for v in o.destinations()):
                writers.setdefault(root, []).append((step, o.name))
    buffers: list[BufferReport] = []
    for b in liveness.intermediates:
        owner = b.value.owner
        buffers.append(BufferReport(
            name=b.name, bytes=b.bytes,
            offset=owner.offset.value.data if isinstance(owner, d.MemOffsetOp) else None,
            first=b.first, last=b.last, shape=list(b.shape), dtype=b.dtype,
            producer=next((name for step, name in writers.get(b.value, []) if step >= b.first), ""),
            consumers=sorted(set(b.consumers) - {"dnn.view"}),
            pool=pool_names.get(owner.pool) if isinstance(owner, d.MemOffsetOp) else None,
            traffic=buffer_traffic(b),
        ))
    return buffers


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


@dataclass
class _Searched:
    """What the tile search compiled, kept so that lower compiles neither
    the chosen tiling nor the untiled program (the report's bound) again."""

    plans: dict[tuple[str, int, int, str], tuple[ModuleOp, dict[str, float]]] = dataclasses.field(default_factory=dict)
    """(recomputed values, region, patches, halo) -> the planned module and
    its pool passes' milliseconds."""
    untiled_bound: int | None = None
    """The untiled program's lower_bound_by_use, after its pool passes (as its own report gives it)."""


def _planner_of(ctx: Context, tensor_module: ModuleOp, options: Options, kept: _Searched) -> Plan:
    """The tile search's compile step: (region, patches, halo) -> the
    planned buffer-form function of a copy of `tensor_module` tiled so.
    Each copy and its pool passes' timings go into `kept`, with the untiled
    program's bound."""

    def plan(region: int, patches: int, halo: str = "recompute") -> func.FuncOp:
        tiled = dataclasses.replace(options, tile_region=region, tile_patches=patches, tile_halo=halo)
        return _planned(ctx, tensor_module, tiled, kept)

    return plan


def _recompute_planner_of(ctx: Context, tensor_module: ModuleOp, options: Options,
                          kept: _Searched) -> Callable[[tuple[str, ...]], func.FuncOp]:
    """The recompute search's compile step: values -> the planned
    buffer-form function of a copy of `tensor_module` with those values
    recomputed (untiled), kept in `kept` like the tile search's."""

    def plan(values: tuple[str, ...]) -> func.FuncOp:
        return _planned(ctx, tensor_module, dataclasses.replace(options, recompute=",".join(values), tile_region=0),
                        kept)

    return plan


def _plan_key(options: Options) -> tuple[str, int, int, str]:
    """What makes one searched program differ from another: (recomputed
    values, region, patches, halo); patches and halo only with a region."""
    if not options.tile_region:
        return (options.recompute, 0, 0, "recompute")
    return (options.recompute, options.tile_region, options.tile_patches, options.tile_halo)


def _planned(ctx: Context, tensor_module: ModuleOp, options: Options, kept: _Searched) -> func.FuncOp:
    """A copy of `tensor_module` transformed as `options` say (recomputation,
    tiling) and planned, or the copy `kept` has of it; the untransformed
    program's bound goes into `kept`."""
    key = _plan_key(options)
    if key not in kept.plans:
        copy = tensor_module.clone()
        # only measured: the chosen one is compiled again, verified, by lower
        run_passes(ctx, copy, [*tile_passes(options), *buffer_passes(options)], verify=False)
        timings: dict[str, float] = {}
        run_passes(ctx, copy, pool_passes(options), timings, verify=False)
        if not options.recompute and not options.tile_region:
            # measured after the pool passes, as the untransformed report's (its scratch fitted)
            kept.untiled_bound = analyze_function(next(op for op in copy.walk()
                                                       if isinstance(op, func.FuncOp))).lower_bound_by_use
        kept.plans[key] = (copy, timings)
    return next(op for op in kept.plans[key][0].walk() if isinstance(op, func.FuncOp))


def _run_tensor_passes(ctx: Any, module: ModuleOp, passes: list[Any], verify: bool = True) -> tuple[
        int | None, float, tuple[int, ...] | None]:
    """Run the tensor stage (the op verifiers after each pass unless
    `verify` is False, see `run_passes`); returns the lower bound of the
    order dnn-reorder was given (None when it did not run), the
    milliseconds it took and the order it took (`order_taken`; None when it
    did not run or the module has several functions)."""
    given_bound = None
    taken = None
    timings: dict[str, float] = {}
    for p in passes:
        if isinstance(p, DnnReorderPass):
            function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
            given_bound = analyze_function(function).lower_bound
            nodes = schedule_nodes(function.body.block)
            run_passes(ctx, module, [p], timings, verify)
            # an order is one function's (dnn-reorder{order})
            taken = order_taken(nodes, function.body.block) if len(list(function_bodies(module))) == 1 else None
        else:
            run_passes(ctx, module, [p], timings, verify)
    return given_bound, timings.get(DnnReorderPass.name, 0.0), taken


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


@dataclass
class SymbolicLowering:
    """A model lowered once for every value of its symbolic dimensions
    (``dims={"sequence": 512}``): the buffer-form program with its integers
    as polynomials in the symbols (pyocc.symbolic), and one pool plan whose
    offsets and size are expressions, verified over the whole range."""

    model: str
    inputs: SymbolicInputs
    program: SymbolicProgram
    plan: SymbolicPlan
    options: Options
    fitted: dict[str, Poly]
    """Report fields that are polynomials in the symbols (naive, weight and I/O bytes, MACs)."""
    runner: SymbolicRun | None = None
    """What runs the program at one value (see `compile(dims=...)`)."""
    resource_keys: list[str] = field(default_factory=list)
    """The weights' dense_resource keys, in the order the program text names them."""
    lower_ms: float = 0.0
    """Milliseconds to probe, fit and plan."""
    shapes: SymbolicShapes | None = None
    """Every ONNX tensor's shape as polynomials in the symbols, inferred from
    the dim_params (pyocc.frontend.symbolic_shapes), not probed."""
    buffer_types: list[BufferType] = field(default_factory=list)
    """Every planned buffer's dimensions (polynomials) and element type, in
    the planning problem's order."""
    probe_functions: list[func.FuncOp] = field(default_factory=list)
    """The lazy buffer-form function at the first two probe values."""

    @property
    def ranges(self) -> dict[str, tuple[int, int]]:
        """symbol -> (low, high), inclusive."""
        return dict(self.inputs.ranges)

    def check_values(self, values: Mapping[str, int]) -> dict[str, int]:
        """`values` checked: every symbol given, each in its range (PyoccError otherwise)."""
        for name, (low, high) in self.ranges.items():
            if name not in values:
                raise PyoccError(f"{self.model}: give a value for '{name}' (range {low}..{high})")
            value = values[name]
            if not isinstance(value, int) or not low <= value <= high:
                raise PyoccError(f"{self.model}: {name}={value} is out of range: it was compiled for "
                                 f"{name} in {low}..{high} (--dim {name}={high}); compile with a larger --dim")
        unknown = sorted(set(values) - set(self.ranges))
        if unknown:
            raise PyoccError(f"{self.model}: '{unknown[0]}' is not a symbolic dimension "
                             f"(symbols: {', '.join(sorted(self.ranges))})")
        return {name: int(values[name]) for name in self.ranges}

    def values_of(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """The symbols' values read off the graph inputs' shapes (name ->
        shape); PyoccError when a shape disagrees with the model's."""
        values: dict[str, int] = {}
        for name, declared in self.inputs.shapes.items():
            if name not in shapes:
                raise PyoccError(f"{self.model}: missing input '{name}'")
            given = tuple(shapes[name])
            if len(given) != len(declared):
                raise PyoccError(f"{self.model}: input '{name}' has rank {len(given)}, expected {len(declared)}")
            for dim, size in zip(declared, given, strict=True):
                if isinstance(dim, str):
                    if values.setdefault(dim, int(size)) != int(size):
                        raise PyoccError(f"{self.model}: input '{name}' gives {dim}={size} but another input "
                                         f"gives {dim}={values[dim]}")
                elif dim != size:
                    raise PyoccError(f"{self.model}: input '{name}' has shape {list(given)}, "
                                     f"expected {['?' if isinstance(x, str) else x for x in declared]}")
        return self.check_values(values)

    def memory_report(self, dims: Mapping[str, int] | None = None) -> MemoryReport:
        """The memory report at one value of every symbol, e.g.
        ``dims={"sequence": 17}`` (default: every symbol at its maximum)."""
        values = self.check_values(dims if dims is not None else self.plan.problem.maximum())
        static = self.plan.problem.at(values)
        offsets = self.plan.offsets(values)
        return MemoryReport(
            model=self.model, memory="pool", planner="symbolic",
            activation_bytes=self.plan.pool_bytes(values),
            lower_bound_bytes=max_live(static),
            naive_bytes=self.fitted["naive_bytes"].evaluate(values),
            weight_bytes=self.fitted["weight_bytes"].evaluate(values),
            io_bytes=self.fitted["io_bytes"].evaluate(values),
            workspace_bytes=0, plan_ms=self.plan.plan_ms,
            buffers=[BufferReport(name=b.name, bytes=b.size, offset=offsets[b.name], first=b.first, last=b.last,
                                  shape=[], dtype="", producer="", consumers=[]) for b in static.buffers],
            allocator_calls_per_run=1,
            macs=self.fitted["macs"].evaluate(values),
        )

    def module_at(self, dims: Mapping[str, int]) -> tuple[ModuleOp, MemoryReport]:
        """The pool-form program at one value of every symbol (the symbolic
        program's text at that value, its buffers placed at the symbolic
        plan's offsets there) and its report: what `pyocc plan --at` draws."""
        values = self.check_values(dims)
        keys = iter(self.resource_keys)
        text = re.sub(r"dense_resource<>", lambda _: f"dense_resource<{next(keys)}>", self.program.text_at(values))
        ctx = Context()
        for dialect in (Builtin, Func, Dnn):
            ctx.load_dialect(dialect)
        module = Parser(ctx, text).parse_module()
        function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        problem = planning_problem(analyze_function(function), self.options.alignment)
        apply_placement(function, [b.name for b in problem.buffers],
                        Placement.of_plan(self.plan.at(values), self.options.alignment))
        report = self.memory_report(values)
        liveness = analyze_function(function)
        report.buffers = buffer_reports(list(function.body.block.ops), liveness)
        report.activation_traffic_bytes = sum(b.traffic for b in report.buffers)
        report.tensor_lower_bound_bytes = None
        return module, report

    def pool_module(self, views: bool = True) -> ModuleOp:
        """The plan as IR: ``func.func @<model>_pool(%symbol: index, ...)``
        computing the pool size and every buffer's offset (problem order)
        with arith ops on the symbols' values (pyocc.lowering.symbolic_pool);
        with `views`, also the symbolic pool and every buffer as a view with
        dynamic dimensions (`dnn.symbolic_pool`, `dnn.symbolic_view`)."""
        name = re.sub(r"[^A-Za-z0-9_]", "_", Path(self.model).stem) + "_pool"
        return pool_module(self.plan, name, self.buffer_types if views else None)

    def pool_form_module(self) -> ModuleOp:
        """The pool-form program for every value, with dynamic memrefs
        (pyocc.lowering.symbolic_pool.symbolic_pool_form); PyoccError for a
        program with an op whose properties depend on the size."""
        return symbolic_pool_form(self.probe_functions, self.plan, self.buffer_types, self.model)

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON: the symbols' ranges, the activation size as a
        formula (`activation_bytes_expr`, piecewise when the plan is in
        pieces, which `pieces` lists with their ranges) and at the maximum
        (`activation_bytes`), and every buffer's size and offset formulas."""
        problem = self.plan.problem
        at_max = self.memory_report()
        return {
            "model": self.model, "memory": "pool", "planner": "symbolic",
            "symbols": {name: list(bounds) for name, bounds in self.ranges.items()},
            **({"types": {name: self.shapes.text(name) for name in (*self.shapes.inputs, *self.shapes.outputs)}}
               if self.shapes is not None else {}),
            "activation_bytes_expr": self.plan.pool_expr(),
            "activation_bytes": at_max.activation_bytes,
            "lower_bound_bytes": at_max.lower_bound_bytes,
            "naive_bytes_expr": str(self.fitted["naive_bytes"]),
            "weight_bytes": at_max.weight_bytes,
            "io_bytes_expr": str(self.fitted["io_bytes"]),
            "plan_ms": self.plan.plan_ms,
            "pieces": [{"symbols": {name: list(bounds) for name, bounds in piece.ranges.items()},
                        "activation_bytes_expr": self.plan.piece_pool_expr(k)}
                       for k, piece in enumerate(self.plan.pieces)],
            "buffers": [{"name": b.name, "size_expr": str(b.size), "offset_expr": self.plan.offset_expr(i),
                         "first": b.first, "last": b.last, "alignment": b.alignment}
                        for i, b in enumerate(problem.buffers)],
        }


@collecting_less()
def lower_symbolic(
    model: str | Path | onnx.ModelProto,
    dims: Mapping[str, int],
    shapes: Mapping[str, Sequence[int]] | None = None,
    planner: str = "auto",
    alignment: int = 64,
    fuse: bool = True,
    coalesce: bool = True,
    reorder: str = Options.reorder,
    memory: str = "pool",
    target: str = "host",
) -> SymbolicLowering:
    """Lower a model whose inputs have symbolic dimensions (ONNX dim_param)
    for every value up to `dims` (symbol -> maximum): the model is lowered
    at a few probe values of the symbols, the programs' integers are fitted
    as polynomials (pyocc.symbolic) and one pool plan with offsets as
    expressions is made and verified over the whole range. `shapes` fixes
    other inputs. Pool mode and target host only (one clear error otherwise)."""
    start = time.perf_counter()
    if target != "host":
        raise PyoccError(f"symbolic shapes (--dim) run on the host only for now; use --target host, "
                         f"or fix the dimensions with --shape for target {target}")
    if memory != "pool":
        raise PyoccError(f"symbolic shapes (--dim) plan one pool: use --memory pool, not '{memory}'")
    proto = load_model(model) if isinstance(model, str | Path) else model
    name = Path(model).name if isinstance(model, str | Path) else (proto.graph.name or "model")
    inputs = symbolic_inputs(proto, dims, shapes)
    # the symbols through shape inference first: an op without a symbolic rule is one line before any probe
    tensor_shapes = infer_symbolic_shapes(proto, inputs, shapes, name)
    # as few fit values as the shapes' degree needs (the spare ones only if the check finds a higher degree)
    fit_points, check_points = probe_points(inputs.ranges, tensor_shapes.degrees())
    spare_points = [point for point in probe_points(inputs.ranges)[0] if point not in fit_points]
    options = Options(memory="lazy", planner=planner, alignment=alignment, fuse=fuse, coalesce=coalesce,
                      reorder=reorder)
    try:
        probes = _probe(proto, inputs, shapes, options, fit_points, check_points, spare_points, name)
    except ProgramMismatch:
        if reorder == "given":
            raise
        # a choice that depends on the sizes differed between two probes (not
        # the op order: every probe takes the first's): once more in the model's own order
        options = dataclasses.replace(options, reorder="given")
        probes = _probe(proto, inputs, shapes, options, fit_points, check_points, spare_points, name)
    program, problem, steps, weights, polys, texts, buffer_types, functions = probes
    fitted = dict(zip(["naive_bytes", "weight_bytes", "io_bytes", "macs"], polys, strict=True))
    try:
        plan = plan_symbolic(problem)
    except PlanningError as e:
        raise PyoccError(f"{name}: {e}") from None
    runner = SymbolicRun(steps, weights, plan)
    return SymbolicLowering(name, inputs, program, plan, dataclasses.replace(options, memory="pool"), fitted,
                            runner, re.findall(r"dense_resource<([^>]*)>", texts[0]),
                            (time.perf_counter() - start) * 1e3, tensor_shapes, buffer_types, functions)


@dataclasses.dataclass
class _Probed:
    """What the lowering at one probe point gives the fit."""

    function: func.FuncOp | None
    """Kept for the first two lowerings only (`SymbolicLowering.probe_functions`)."""
    text: str
    steps: str
    weights: list[np.ndarray]
    problem: Problem
    types: list[Attribute]
    scalars: list[int]


def _probe(proto: onnx.ModelProto, inputs: SymbolicInputs, shapes: Mapping[str, Sequence[int]] | None,
           options: Options, fit_points: list[dict[str, int]], check_points: list[dict[str, int]],
           spare_points: list[dict[str, int]], name: str) -> tuple[
               SymbolicProgram, SymbolicProblem, SymbolicProgram, list[np.ndarray], list[Poly], list[str],
               list[BufferType], list[func.FuncOp]]:
    """Lower the model at every probe point and fit: (program, planning
    problem, run steps, weights, the report's scalars as polynomials
    (naive, weight and I/O bytes, MACs), program texts, buffer types, the
    first two functions).

    A constant folded from a symbol's value (its shape varies between the
    fit points) needs the program at the maximum for its data
    (`check_weights`). That lowering is then tried as the check point, in
    place of `check_points`, so that one lowering serves both; where the
    program at the maximum differs (a Slice of a table to its full length
    is no Slice there), `check_points` are lowered and checked as usual.

    `fit_points` may be fewer than ``FIT_DEGREE + 1`` values per symbol
    where the shapes' degree is lower (a batch: 1); when the check then
    finds an integer of a higher degree, `spare_points` (the others) are
    lowered too and everything is fitted again at the full degree.

    Only the first lowering runs the op verifiers (on the imported and the
    lowered module, `Options.verify`) and searches an op order (dnn-reorder): the others
    must give its program but for the integers, which `fit_program`
    checks, and take its order (`Options.reorder_order`); their buffer
    lifetimes are still checked after every pass."""
    names: list[str] = []
    first_order: list[int] = []
    count = itertools.count(1)
    folds: FoldCache = {}  # the importer's folds that do not depend on the probe value are made once

    def lower_at(point: Mapping[str, int]) -> _Probed:
        before = resource_keys()
        copy = type(proto)()
        copy.CopyFrom(proto)
        # the order is chosen at the probe, at the top of the range: what is
        # free there is chosen for small values of the symbol (dnn-reorder{symbol_dim})
        # and a batch's copies of a table that follows the symbol are expanded at run time (import_model)
        at = dataclasses.replace(options, reorder_symbol_dim=next(iter(point.values())),
                                 unfold_broadcasts=next(iter(point.values()))) if len(point) == 1 else options
        # the op verifiers at the first probe only, and its op order at every probe: the others
        # must be its program (fit_program), integers aside; dnn-reorder searches once, at the top
        index = next(count)
        at = at if index == 1 else dataclasses.replace(at, verify=False, reorder_order=tuple(first_order))
        module, report = lower(copy, shapes={**dict(shapes or {}), **inputs.at(point)}, options=at, folds=folds)
        if index == 1:
            first_order[:] = report.reorder_order or ()
        function = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        point_steps, point_weights, point_names = program_steps(function)
        names[:] = point_names
        release(resource_keys() - before)
        liveness = analyze_function(function)
        return _Probed(function if index <= 2 else None, str(function.parent_op()), json.dumps(point_steps), point_weights,
                       planning_problem(liveness, options.alignment, fit=False),
                       [b.value.type for b in liveness.intermediates if isinstance(b.value.owner, d.MallocOp)],
                       [report.naive_bytes, report.weight_bytes, report.io_bytes, report.macs])

    def fit(probed: list[_Probed], fit_points: list[dict[str, int]], checks: list[dict[str, int]]) -> tuple[
            SymbolicProgram, SymbolicProblem, SymbolicProgram, list[Poly], list[BufferType]]:
        program = fit_program([p.text for p in probed], fit_points, checks, inputs.ranges, name)
        problem = symbolic_problem([p.problem for p in probed], fit_points, checks, inputs.ranges, name)
        run_steps = fit_program([p.steps for p in probed], fit_points, checks, inputs.ranges, name)
        polys, wrong = fit_polynomials(np.array([p.scalars for p in probed], dtype=np.int64), fit_points, checks)
        if wrong:
            raise PyoccError(f"{name}: its size is no polynomial in {', '.join(sorted(inputs.ranges))}; "
                             "fix the dimension with --shape")
        return program, problem, run_steps, polys, fit_buffer_types([p.types for p in probed], fit_points, checks,
                                                                     name)

    fits = [lower_at(point) for point in fit_points]
    fit_points = list(fit_points)
    folded = any(len({p.weights[i].shape for p in fits}) > 1 for i in range(len(names)))
    maximum = {n: high for n, (_, high) in inputs.ranges.items()}
    at_maximum: _Probed | None = next((p for p, point in zip(fits, fit_points, strict=True) if point == maximum),
                                      None)
    # the check: the maximum where a folded constant needs its lowering anyway, else `check_points`
    on_maximum = folded and at_maximum is None and bool(check_points)
    if on_maximum:
        at_maximum = lower_at(maximum)
    checks, probed_checks = ([maximum], [at_maximum]) if on_maximum else (
        check_points, [lower_at(point) for point in check_points])
    while True:
        try:
            fitted = fit([*fits, *probed_checks], fit_points, checks)
            break
        except PyoccError:
            if spare_points:
                # an integer of a higher degree than the shapes have: fit at every fit value
                fits += [lower_at(point) for point in spare_points]
                fit_points += spare_points
                spare_points = []
            elif on_maximum:
                # the program differs at the maximum (a Slice of a whole table is no Slice there)
                on_maximum = False
                checks, probed_checks = check_points, [lower_at(point) for point in check_points]
            else:
                raise
    probed = [*fits, *probed_checks]
    program, problem, run_steps, scalars, buffer_types = fitted
    if folded or any(len({p.weights[i].shape for p in probed}) > 1 for i in range(len(names))):
        # a constant folded from the symbol's value: its value at the top of the range
        at_maximum = at_maximum or lower_at(maximum)
    chosen = check_weights([p.weights for p in probed], names, None if at_maximum is None else at_maximum.weights,
                           name, ", ".join(sorted(inputs.ranges)))
    return program, problem, run_steps, chosen, scalars, [p.text for p in probed], buffer_types, [
        p.function for p in probed[:2] if p.function is not None]


class SymbolicModel:
    """A model compiled once for every value of its symbolic dimensions
    (`compile(path, dims={"sequence": 512})`): `run` takes inputs of any
    size in range. With `kernels="native"` (the default) it runs generated
    code (pyocc.lowering.symbolic_native): per run, the offsets and the pool
    size are evaluated from the symbols' values read off the input shapes,
    one pool of that size is allocated, every buffer is a pointer at its
    planned offset and native kernels that take their shapes at run time
    compute every op; no Python runs in between. A program that generated
    code cannot run yet (a kernel without run-time shapes, ...) runs pyocc's
    numpy kernels driven from Python (pyocc.symbolic.SymbolicRun) and says
    so in a warning (`fallback_reason`); so does `kernels="numpy"`."""

    def __init__(self, lowered: SymbolicLowering, kernels: str = "native"):
        self.lowered = lowered
        assert lowered.runner is not None
        self.runner = lowered.runner
        self.native: SymbolicCompiledModel | None = None
        self.fallback_reason: str | None = None
        """Why the numpy kernels run this model (None when the generated code does)."""
        self._native_sites = 0
        self.compile_ms = 0.0
        """Milliseconds to write and JIT the generated code."""
        if kernels == "numpy":
            self.fallback_reason = "kernels=numpy"
            return
        start = time.perf_counter()
        try:
            code = build_symbolic_native(lowered.model, self.runner.steps, self.runner.weights, lowered.plan)
        except NotNativeProgram as e:
            self.fallback_reason = str(e)
            warnings.warn(f"{lowered.model}: symbolic shapes run the numpy kernels from Python for this model: {e}",
                          stacklevel=3)
            return
        self.native = SymbolicCompiledModel(code.llvm_ir, code.function, code.weight_pool)
        self._native_sites = code.native_sites
        self._native_order = (code.input_names, code.output_names, code.symbols)
        self._arguments = code.arguments
        self.compile_ms = (time.perf_counter() - start) * 1e3

    @functools.cached_property
    def input_names(self) -> list[str]:
        """ONNX names of the graph inputs, in order."""
        return [s[2] for s in self.runner.steps_at(self.lowered.plan.problem.maximum()) if s[0] == "arg" and not s[3]]

    @functools.cached_property
    def output_names(self) -> list[str]:
        """ONNX names of the graph outputs, in order."""
        return [s[2] for s in self.runner.steps_at(self.lowered.plan.problem.maximum()) if s[0] == "arg" and s[3]]

    @property
    def numpy_sites(self) -> int:
        """Compute ops that run the numpy kernels (all of them without generated code)."""
        if self.native is not None:
            return 0
        return sum(1 for s in self.runner.steps_at(self.lowered.plan.problem.maximum()) if s[0] == "call")

    @property
    def native_sites(self) -> int:
        """Compute ops that run a native kernel of the generated code."""
        return self._native_sites

    def alloc_stats(self) -> AllocStats | None:
        """Allocator calls and bytes of the last run of the generated code (None without it)."""
        return self.native.alloc_stats() if self.native is not None else None

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once on inputs of any size in range: ONNX input name ->
        array; a size out of range or a wrong shape is one PyoccError."""
        arrays = {name: np.asarray(value) for name, value in inputs.items()}
        expected = self.input_names
        if sorted(arrays) != sorted(expected):
            raise PyoccError(f"{self.lowered.model}: inputs {sorted(arrays)} do not match the model's inputs {expected}")
        values = self.lowered.values_of({name: arrays[name].shape for name in self.lowered.inputs.shapes})
        # the arguments' shapes at `values` (the generated code's: no program text to read at a new value)
        arguments = self._arguments if self.native is not None else [
            (s[2], s[3], s[4], s[5]) for s in self.runner.steps_at(values) if s[0] == "arg"]
        shapes = {name: ([d.evaluate(values) if isinstance(d, Poly) else d for d in shape], dtype)
                  for name, _, shape, dtype in arguments}
        for name, is_output, _, _ in arguments:
            if not is_output:
                array = arrays[name]
                shape, dtype = shapes[name]
                if list(array.shape) != shape or array.dtype != np.dtype(dtype):
                    raise PyoccError(f"{self.lowered.model}: input '{name}' has {array.dtype}{list(array.shape)}, "
                                     f"the model takes {dtype}{shape} at {values}")
        if self.native is None:
            return self.runner.run(values, arrays)
        input_names, output_names, symbols = self._native_order
        outputs = {name: np.empty(shapes[name][0], dtype=shapes[name][1]) for name in output_names}
        contiguous = [np.ascontiguousarray(arrays[name]) for name in input_names]
        self.native.run(contiguous, list(outputs.values()), [values[n] for n in symbols])
        return outputs

    def memory_report(self, dims: Mapping[str, int] | None = None) -> MemoryReport:
        """The memory report at one value of every symbol, e.g.
        ``dims={"sequence": 17}`` (default: each at its maximum), with the
        kernels that run it (`kernels  N native, M numpy`)."""
        report = self.lowered.memory_report(dims)
        report.native_sites, report.numpy_sites = self.native_sites, self.numpy_sites
        return report

    def save(self, path: str | Path) -> Path:
        """Write the generated code: .ll (LLVM IR), .o (object) or .so
        (shared library plus its weights file; C ABI version 2: the run
        takes the symbols' values, see pyocc.lowering.symbolic_native and
        examples/c/run_model.c ``--dim``). A model that runs the numpy
        kernels has no generated code to write: one PyoccError."""
        path = Path(path)
        if self.native is None:
            raise PyoccError(f"{self.lowered.model}: with --dim this model runs the numpy kernels from Python "
                             f"({self.fallback_reason}), which no library can hold; run it with pyocc run --dim, "
                             "or fix the dimension with --shape to write a library")
        return write_code(self.native, path)


def write_code(native: Any, path: Path) -> Path:
    """Write `native`'s generated code to `path`, the kind by its suffix:
    .ll (LLVM IR), .o (object) or .so (shared library plus its weights
    file). An unknown suffix is one PyoccError."""
    suffix = path.suffix
    if suffix == ".ll":
        native.write_llvm_ir(path)
    elif suffix == ".o":
        native.write_object(path)
    elif suffix == ".so":
        native.write_shared_library(path)
    else:
        raise PyoccError(f"{path}: unknown output kind '{suffix}'; use .so, .o or .ll")
    return path


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
        return write_code(self.native, path)


@collecting_less()
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
    workspace: int = CUDA_WORKSPACE,
    pool_allocation: str | None = None,
    conv_search: str = CUDA_CONV_SEARCH,
    kernels: str = "native",
    scratch: bool = True,
    memory_limit: int | str | None = None,
    max_extra_macs: float = 0.10,
    tile_region: int = 0,
    tile_patches: int = 4,
    tile_halo: str = "recompute",
    scratchpad: int | str | None = None,
    npu_cost: str | None = None,
    threads: int = 1,
    recompute: str = "",
    dims: Mapping[str, int] | None = None,
    jit: bool = True,
) -> Model | SymbolicModel:
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
    (a cudaMalloc and cudaFree per run, Occamy's way), and `conv_search` how
    init chooses each convolution's algorithm: "ranked" (cuDNN's heuristics)
    or "timed" (cuDNN runs each; pyocc.lowering.limits). On 'host',
    `kernels="native"` (default) compiles a native kernel for every op that
    has one and calls the numpy kernels for the rest (`Model.numpy_sites`
    counts them); `kernels="numpy"` calls the numpy kernels for every op.
    `scratch` (default True) plans the native kernels' scratch (im2col
    columns) in the pool (see `lower`); with `kernels="numpy"` none is
    planned. `memory_limit`, `max_extra_macs`, `tile_region`,
    `tile_patches`, `tile_halo` and `recompute`: recomputation and
    patch-based execution of the stem (see `lower`).
    `scratchpad` (bytes or "1MiB") runs the scratchpad schedule (see
    `lower`): compute on SRAM buffers of that size only, DMA as host
    copies; schedules that run ops on row bands are refused in one line
    for now; `npu_cost` as in `lower`.
    `threads` (host): the threads the model runs on, for its BLAS calls and
    for the independent outer loops of its native kernels (a worker pool
    the model starts when it is loaded; results are the same for every
    count); 1, the default, compiles exactly the single-threaded code.
    `dims` (symbol -> maximum, e.g. {"sequence": 512}) compiles one
    `SymbolicModel` whose `run` takes every value from 1 to the maximum
    (pool mode, target host; generated code with native kernels that take
    their shapes at run time, or the numpy kernels with a warning for a
    program it cannot write yet; see `SymbolicModel` and `lower_symbolic`).
    `jit=False` (host) optimises the code but leaves generating machine
    code in this process until the first `run`: a model compiled only to
    be saved (`Model.save`, `pyocc compile`) then generates it once."""
    if dims:
        if (sanitize or memory_pools or pool_candidates or memory_limit is not None or tile_region or recompute
                or threads != 1 or scratchpad is not None):
            raise PyoccError("dims= (--dim) does not combine with the sanitizer, memory pools, "
                             "a memory limit, tiling, threads or a scratchpad yet; "
                             "fix the dimension with --shape to use them")
        if kernels not in ("native", "numpy"):
            raise PyoccError(f"unknown kernels '{kernels}'; use native or numpy")
        return SymbolicModel(lower_symbolic(model, dims, shapes=shapes, planner=planner, fuse=fuse,
                                            coalesce=coalesce, reorder=reorder, memory=memory, target=target),
                             kernels)
    if target not in ("host", "cuda"):
        raise PyoccError(f"unknown target '{target}'; use host or cuda")
    if kernels not in ("native", "numpy"):
        raise PyoccError(f"unknown kernels '{kernels}'; use native or numpy")
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise PyoccError(f"threads must be a whole number from 1 to {MAX_THREADS}, got {threads!r}")
    if target == "cuda" and threads != 1:
        raise PyoccError("threads applies to the host target; drop --threads with --target cuda")
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
                           scratch=scratch and kernels == "native",
                           memory_limit=memory_limit, max_extra_macs=max_extra_macs,
                           tile_region=tile_region, tile_patches=tile_patches, tile_halo=tile_halo,
                           recompute=recompute,
                           scratchpad=scratchpad, npu_cost=npu_cost, stage_dma=scratchpad is not None,
                           threads=threads)
    native = compile_module(module, target=target, cuda_libraries=cuda_libraries, workspace=workspace,
                            pool_allocation=_pool_allocation(pool_allocation, target), kernels=kernels,
                            threads=threads, jit=jit, conv_search=conv_search)
    if target == "cuda":
        report.workspace_bytes = native.workspace_bytes
    else:
        report.native_sites, report.numpy_sites = native.native_sites, native.numpy_sites
    compiled = Model(module, report, native)
    # the weights now live in the model's packed pool; drop the store's blobs
    # (which may be hundreds of MB) once nothing can print the module any more
    weakref.finalize(compiled, release, resource_keys() - before)
    return compiled

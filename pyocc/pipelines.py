"""Named pipelines: one pass name that runs a whole Occamy flow.

    occamy-eager   onnx -> dnn (fused) -> buffers, everything allocated at entry
    occamy-lazy    onnx -> dnn -> buffers, allocated just in time
    occamy-pool    occamy-lazy, then one planned pool (mem_offset views)

A flow has four stages, each a list of passes built from `Options`:

    tensor_passes   onnx -> tensor-form dnn, and rewrites on tensors (dnn-fuse)
    tile_passes     below the max-live bound: cheap values recomputed at their
                    late readers (dnn-recompute), the stem patch by patch
                    (dnn-tile); both off by default
    buffer_passes   tensor form -> buffer form with malloc/dealloc, coalesced
                    (target cuda: plus the scratch buffers its lowering needs)
    pool_passes     malloc/dealloc -> one planned pool (pool mode only)

The Python API (`pyocc.api.lower`) runs the same stages, so the command
line, `pyocc-opt` and the API can never disagree about what a mode means.
A new pass joins a flow by appending itself to the stage it belongs to,
behind an `Options` field that can turn it off.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

from pyocc.analysis.verify_lifetimes import check_lifetimes
from pyocc.lowering.convert_onnx_to_dnn import ConvertOnnxToDnnPass
from pyocc.lowering.cuda_scratch import DnnCudaScratchPass
from pyocc.lowering.limits import CUDA_WORKSPACE
from pyocc.rewrites.dnn_coalesce import DnnCoalescePass
from pyocc.rewrites.dnn_fuse import DnnFusePass
from pyocc.rewrites.dnn_insert_memory_ops import DnnInsertMemoryOpsPass
from pyocc.rewrites.dnn_memory_pool import DnnMemoryPoolPass
from pyocc.rewrites.dnn_recompute import DnnRecomputePass
from pyocc.rewrites.dnn_reorder import DnnReorderPass
from pyocc.rewrites.dnn_sanitize import DnnSanitizePass
from pyocc.rewrites.dnn_tile import DnnTilePass

MEMORY_MODES = ("eager", "lazy", "pool")


@dataclass(frozen=True)
class Options:
    """What a flow does; every field has the default `pyocc` uses."""

    memory: str = "pool"
    """eager, lazy or pool."""

    planner: str = "auto"
    """The pool planner (see dnn-memory-pool); pool mode only."""

    alignment: int = 64
    """Byte alignment of every float buffer and of the pool (an integer or
    boolean buffer is aligned to its element's size: `d.buffer_alignment`)."""

    coalesce: bool = True
    """Run dnn-coalesce: in-place results, band views, concat elimination."""

    fuse: bool = True
    """Run dnn-fuse (layer fusion) on the tensor form."""

    reorder: str = "auto"
    """dnn-reorder's strategy (auto, exact, greedy) or given (keep the order)."""

    reorder_symbol_dim: int = 0
    """A symbolic compile's probe value, for dnn-reorder{symbol_dim}: the
    order is chosen at the largest sizes, and what is free there is not at
    small ones (0: a static compile)."""

    reorder_order: tuple[int, ...] = ()
    """A symbolic compile's probes after the first: the op order the first
    probe's dnn-reorder took (`MemoryReport.reorder_order`), taken instead
    of searching again (dnn-reorder{order}; empty: search)."""

    unfold_broadcasts: int = 0
    """A symbolic compile's probe value, for the import: a folded constant
    whose blocks along its first axis are all equal (a batch's copies of a
    table) and that has this value in a later dimension is imported as the
    Expand of its first block (pyocc.frontend.onnx_import.import_model; 0:
    a static compile, never)."""

    sanitize: bool = False
    """Poison dead buffers and guard live ones (dnn-sanitize): for testing."""

    memory_pools: str = ""
    """Named pools, e.g. "sram:size=1MiB,dram" (pool mode; see
    pyocc.planning.pools); empty: one anonymous pool."""

    pool_policy: str = "traffic"
    """Which buffers a bounded pool keeps: traffic or first-fit (baseline)."""

    pool_candidates: str = ""
    """Per op kind candidate pools with memory_pools, e.g. "concat=dram"."""

    target: str = "host"
    """Where the code runs: host, or cuda (inputs and outputs are staged
    through device buffers, and only fusions cuDNN can run are applied)."""

    workspace: int = CUDA_WORKSPACE
    """target cuda: bytes of cuDNN workspace each convolution may use,
    planned as a buffer live around it (dnn-cuda-scratch)."""

    pool_allocation: str = "init"
    """target cuda, pool mode: when the planned pool is allocated: init (once
    per model, by NAME_init) or run (once per run, Occamy's way). The host's
    pool is allocated per run."""

    scratch: bool = True
    """Plan the host's native kernel scratch (im2col columns) as buffers of
    the memory plan (dnn-insert-memory-ops{scratch=true}), each sized to
    the pool's slack at its op (dnn-memory-pool); host only."""

    fit_scratch: bool = True
    """Pool mode: size each kernel scratch to the pool's slack at its op
    (dnn-memory-pool{fit_scratch}); False plans every block whole (as
    with `sanitize`, whose guards and fills are sized for the whole block)."""

    threads: int = 1
    """The threads the host model is compiled for: a fitted kernel scratch
    whose op runs blocks on the threads apart gets one copy per thread
    (dnn-memory-pool{threads}); 1 plans exactly as a one-thread build."""

    tile_region: int = 0
    """dnn-tile's region: the first N row-local ops from the graph input run
    patch by patch; 0: no tiling."""

    tile_patches: int = 4
    """dnn-tile's patch count (with tile_region)."""
    tile_halo: str = "recompute"
    """dnn-tile's halo rows: recompute or cache (with tile_region)."""
    recompute: str = ""
    """dnn-recompute's values: the cheap values (by name, comma-separated)
    computed again at their late readers; empty: none."""
    recompute_tables: bool = True
    """dnn-recompute{tables}: values made from weights alone (a rotary
    table of the sequence's length, which import keeps as ops) computed
    again at their late readers instead of alive from the first layer to
    the last."""
    verify: bool = True
    """Run the op verifiers on the imported module and on the lowered one
    (pyocc.api.lower; the buffer lifetimes are checked after every pass
    either way). A symbolic compile leaves them off for its probes after
    the first, whose programs must be the first's but for their integers
    (pyocc.symbolic.fit_program checks)."""
    verify_each: bool = False
    """With `verify`: run the op verifiers after every pass too
    (`run_passes`), as pyocc-opt does. `lower` lowers again this way when
    a lowering fails, so that the error names the pass that broke the IR."""


def tensor_passes(options: Options) -> list[ModulePass]:
    """onnx dialect -> tensor-form dnn, plus the rewrites on tensors."""
    passes: list[ModulePass] = [ConvertOnnxToDnnPass()]
    if options.fuse:
        passes.append(DnnFusePass(target=options.target))
    passes += reorder_passes(options)
    return passes


def reorder_passes(options: Options) -> list[ModulePass]:
    """dnn-reorder, last of the tensor rewrites (after fusion, which changes
    the ops it orders); empty when the order is kept."""
    if options.reorder == "given":
        return []
    return [DnnReorderPass(strategy=options.reorder, symbol_dim=options.reorder_symbol_dim,
                           order=options.reorder_order)]


def tile_passes(options: Options) -> list[ModulePass]:
    """dnn-recompute (with `recompute`), then dnn-tile (with a tile_region),
    on the final tensor form (after dnn-reorder, which would move the clones
    back up and interleave the patches). Kept out of tensor_passes so a
    report can take the bound of the untransformed program."""
    passes: list[ModulePass] = []
    if options.recompute or options.recompute_tables:
        passes.append(DnnRecomputePass(values=options.recompute, tables=options.recompute_tables,
                                       symbol_dim=options.reorder_symbol_dim,
                                       alignment=options.alignment if options.reorder_symbol_dim else 1))
    if options.tile_region > 0:
        passes.append(DnnTilePass(region=options.tile_region, patches=options.tile_patches, halo=options.tile_halo))
    return passes


def buffer_passes(options: Options) -> list[ModulePass]:
    """Tensor form -> buffer form with malloc/dealloc (eager or lazy)."""
    mode = "eager" if options.memory == "eager" else "lazy"
    passes: list[ModulePass] = [DnnInsertMemoryOpsPass(mode=mode, alignment=options.alignment,
                                                       memcpy=options.target == "cuda",
                                                       scratch=options.scratch and options.target == "host")]
    if options.coalesce:
        passes.append(DnnCoalescePass(mode=mode))
    if options.sanitize:
        passes.append(DnnSanitizePass())
    if options.target == "cuda":
        passes.append(DnnCudaScratchPass(workspace=options.workspace, mode=mode, alignment=options.alignment))
    return passes


def pool_passes(options: Options) -> list[ModulePass]:
    """malloc/dealloc -> one planned pool; empty outside pool mode."""
    if options.memory != "pool":
        return []
    return [DnnMemoryPoolPass(planner=options.planner, alignment=options.alignment,
                              pools=options.memory_pools, policy=options.pool_policy,
                              candidates=options.pool_candidates,
                              # the sanitizer's guard bytes and fills are sized for the whole block
                              fit_scratch=options.fit_scratch and not options.sanitize,
                              threads=options.threads)]


def all_passes(options: Options) -> list[ModulePass]:
    """The whole flow, stage after stage."""
    return [*tensor_passes(options), *tile_passes(options), *buffer_passes(options), *pool_passes(options)]


def run_passes(
    ctx: Context, module: ModuleOp, passes: list[ModulePass], timings: dict[str, float] | None = None,
    verify: bool = True,
) -> None:
    """Apply `passes` in order, verifying the module after each (the op
    verifiers, then the buffer lifetimes). `timings`, when given, gets each
    pass's milliseconds (verification not included). `verify=False` leaves
    the op verifiers out (the buffer lifetimes are still checked): for the
    programs the tile search only measures, whose chosen one is compiled
    again, verified."""
    for p in passes:
        start = time.perf_counter()
        p.apply(ctx, module)
        if timings is not None:
            timings[p.name] = timings.get(p.name, 0.0) + (time.perf_counter() - start) * 1000
        try:
            if verify:
                module.verify()
            check_lifetimes(module)
        except VerifyException as e:
            raise VerifyException(f"after pass {p.name}: {e}") from e


@dataclass(frozen=True)
class OccamyEagerPipeline(ModulePass):
    """convert-onnx-to-dnn, dnn-fuse, dnn-insert-memory-ops{mode=eager}."""

    name = "occamy-eager"

    fuse: bool = True
    """Run dnn-fuse (false: measure the flow without layer fusion)."""

    target: str = "host"
    """host, or cuda (I/O staged through device buffers, cuDNN's fusions only)."""

    def stages(self) -> list[ModulePass]:
        """The passes this pipeline runs (pyocc-opt --print-between-passes
        prints the IR after each)."""
        return all_passes(Options(memory="eager", fuse=self.fuse, target=self.target))

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_passes(ctx, op, self.stages())


@dataclass(frozen=True)
class OccamyLazyPipeline(ModulePass):
    """convert-onnx-to-dnn, dnn-fuse, dnn-insert-memory-ops{mode=lazy}."""

    name = "occamy-lazy"

    fuse: bool = True
    """Run dnn-fuse (false: measure the flow without layer fusion)."""

    target: str = "host"
    """host, or cuda (I/O staged through device buffers, cuDNN's fusions only)."""

    def stages(self) -> list[ModulePass]:
        """The passes this pipeline runs (pyocc-opt --print-between-passes
        prints the IR after each)."""
        return all_passes(Options(memory="lazy", fuse=self.fuse, target=self.target))

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_passes(ctx, op, self.stages())


@dataclass(frozen=True)
class OccamyPoolPipeline(ModulePass):
    """occamy-lazy, then dnn-memory-pool{planner, alignment}."""

    name = "occamy-pool"

    planner: str = "auto"
    """The planning algorithm (see dnn-memory-pool)."""

    alignment: int = 64
    """Byte alignment of the pool and of every float buffer in it."""

    pools: str = ""
    """Named pools, e.g. "sram:size=1MiB,dram" (see dnn-memory-pool)."""

    fuse: bool = True
    """Run dnn-fuse (false: measure the flow without layer fusion)."""

    target: str = "host"
    """host, or cuda (I/O staged through device buffers, cuDNN's fusions only)."""

    def stages(self) -> list[ModulePass]:
        """The passes this pipeline runs (pyocc-opt --print-between-passes
        prints the IR after each)."""
        return all_passes(Options(memory="pool", planner=self.planner, alignment=self.alignment,
                                  memory_pools=self.pools, fuse=self.fuse, target=self.target))

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_passes(ctx, op, self.stages())


PIPELINES = {"eager": OccamyEagerPipeline, "lazy": OccamyLazyPipeline, "pool": OccamyPoolPipeline}

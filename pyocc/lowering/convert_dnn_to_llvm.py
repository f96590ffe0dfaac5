"""`convert-dnn-to-llvm`: buffer-form dnn functions -> llvm dialect.

Each `func.func @NAME` in destination-passing (buffer) form becomes a handful
of `llvm.func`s with a small C ABI, the same for the in-process JIT and for an
AOT shared library (ABI version 1):

    void    NAME_init(void *const *kernel_table);  // table[0]: the kernel callback
    int32_t NAME_run(void *const *inputs, void *const *outputs,
                     const void *weights, int64_t *state);
    void    NAME_destroy(void);                     // forgets the callback
    const char *NAME_meta(void);                    // the JSON table, NUL-terminated
    const char *pyocc_functions(void);              // JSON list of the NAMEs

- `inputs` / `outputs`: data pointers of the graph inputs / outputs, in
  argument order (outputs are the arguments marked `dnn.output`).
- `weights`: the base of the read-only constant pool; each `dnn.weight` is
  `weights + offset`, offsets 64-byte aligned, fixed at compile time. Weight
  bytes never enter the IR: the JSON table says where each one comes from.
- `state`: `int64_t[4]` the caller zeroes: allocator calls, free calls,
  bytes currently allocated, peak bytes allocated. The generated code keeps
  them up to date, so a run reports exactly what its allocations cost.
- `run` returns 0, or 1 when the allocator returned NULL.

Memory ops become real allocations (on the host every named pool, SRAM or
DRAM, is plain memory: one allocation per `dnn.pool_init` per run; the
table lists them under "pools"): `dnn.malloc` and `dnn.pool_init` ->
`pyocc_alloc` (size rounded up to the alignment; the accounting uses the
IR's size), `dnn.dealloc` / `dnn.pool_release` -> `pyocc_free`: the
module's own allocator on libc's `malloc` and `free`
(pyocc.lowering.host_allocator says why not `aligned_alloc`),
`dnn.mem_offset` -> pool + offset, `dnn.view` -> the same pointer,
`dnn.subview` -> source + offset,
`dnn.memcpy{kind=host_to_host}` -> `memcpy`. The only external symbols are
libc's `malloc`, `free` and `memcpy`, plus the libm functions native
kernels call.

Each compute op is a numbered *site*: the code fills a stack array with the
data pointers of the kernel inputs in order (variadic inputs expanded, NULL
for an absent optional input), then the destinations, then the op's
`workspace` (kernel scratch, a planned buffer) when it has one, and calls
`NAME_dispatch(site, buffers)`. How a site runs is decided when the module
is exported to LLVM (`to_llvmlite(module, kernels=...)`): with
`kernels="native"` (the default) a site whose kernel has a native emitter
(pyocc.lowering.native) calls a function generated for its static shapes,
`NAME_site_K(buffers)` (sites alike in kernel, shapes and arguments share
the function of the first of them, K; sites whose emitter takes some sizes
at run time and that differ only in those, such as DenseNet's 1x1
preact_convs in their channels, share `NAME_site_K_sizes`, each site's
function a thin wrapper that passes its sizes: see
pyocc.lowering.native.registry); every other site (all of them with
`kernels="numpy"`) calls `kernel(site, buffers)` through the pointer that
`NAME_init` stored, i.e. the numpy kernel. The
JSON table (`NAME_meta`) describes each site: kernel name, the shape and
dtype of every buffer, the kernel keyword arguments; plus the graph inputs
and outputs and the weight-pool layout. The runtime (pyocc.runtime.bridge)
turns it into numpy views and host-kernel calls for the sites that call back
(their count is the table's "numpy_sites").

xDSL's llvmlite exporter cannot convert indirect calls, so `to_llvmlite`
converts the one function that makes them (`NAME_dispatch`) with a small
shim; every other op goes through `xdsl.backend.llvm`.

The lowering of one function lives in pyocc.lowering.convert_dnn_to_host
(target=host) and the package pyocc.lowering.cuda (target=cuda); this
module holds the pass, which picks one through pyocc.lowering.targets, and
the export to llvmlite with the native kernels (pyocc.lowering.native).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import llvmlite.ir as ir
from xdsl.backend.llvm.convert import convert_module
from xdsl.backend.llvm.convert_op import convert_op
from xdsl.backend.llvm.convert_type import convert_type
from xdsl.context import Context
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import DenseResourceAttr, ModuleOp, StringAttr, TensorType, i1
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from pyocc.analysis.ir_form import require_form
from pyocc.errors import PyoccError
from pyocc.lowering.host_allocator import define_host_allocator
from pyocc.lowering.limits import CONV_SEARCHES, CUDA_CONV_SEARCH, CUDA_WORKSPACE
from pyocc.lowering.llvm_common import MODULE_FUNCTIONS_SYMBOL, PTR, cannot_lower, string_getter, string_global
from pyocc.lowering.native import native_kernel_for
from pyocc.lowering.native.registry import NativeKernel, site_slots
from pyocc.lowering.native.dense_ir import SGEMM
from pyocc.lowering.native.loops import PARALLEL_FOR_TYPE, emit_size_wrapper
from pyocc.lowering.native.threads import MAX_THREADS, define_thread_pool, parallel_for_symbol
from pyocc.lowering.convert_dnn_to_host import RUN_PART_OPS, is_run_code
from pyocc.lowering.targets import TARGETS
from pyocc.runtime.bridge import pack_weight_pool
from pyocc.runtime.cuda import CudaLibraries
from pyocc.runtime.cuda_model import CudaModel
from pyocc.runtime.jit import CompiledModel
from pyocc.weights import evict_mapped, load_bytes

if TYPE_CHECKING:
    import llvmlite.ir

#: how the host target runs its compute sites: generated loops where an
#: emitter exists (numpy otherwise), or every site through the numpy kernels
KERNEL_CHOICES = ("native", "numpy")


@dataclass(frozen=True)
class ConvertDnnToLlvmPass(ModulePass):
    """Lower buffer-form dnn functions to llvm-dialect functions with the C
    ABI described in this module's docstring."""
    name = "convert-dnn-to-llvm"

    target: str = "host"
    """Where the code runs: `host` (the CPU, kernels called through a table
    the runtime fills) or `cuda` (an NVIDIA GPU driven through the CUDA
    runtime, cuDNN and cuBLAS; see pyocc.lowering.cuda)."""
    workspace: int = CUDA_WORKSPACE
    """target=cuda: bytes of the convolution workspace allocated at init;
    each convolution takes the fastest algorithm whose workspace fits."""
    pool_allocation: str = "init"
    """target=cuda: when a planned pool is allocated: `init` (once per model,
    by NAME_init; freed by NAME_destroy) or `run` (once per run, Occamy's way)."""
    conv_search: str = CUDA_CONV_SEARCH
    """target=cuda: how init chooses each convolution's algorithm among those
    whose workspace fits: `ranked` (cuDNN's heuristics) or `timed` (cuDNN
    runs each and ranks them by time; pyocc.lowering.limits)."""
    run_part_ops: int = RUN_PART_OPS
    """target=host: a run of more compute ops and copies than this is split
    into functions of at most this many, called in order (LLVM's code
    generation of one long straight-line function grows faster than its
    length); 0 never splits."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_form(op, self.name, "buffers", "pool")
        if self.target not in TARGETS:
            raise PassFailedException(
                f"convert-dnn-to-llvm: unknown target '{self.target}' (expected one of {', '.join(TARGETS)})")
        if self.workspace < 0:
            raise PassFailedException(f"convert-dnn-to-llvm: workspace must be >= 0 bytes, got {self.workspace}")
        if self.run_part_ops < 0:
            raise PassFailedException(f"convert-dnn-to-llvm: run_part_ops must be >= 0, got {self.run_part_ops}")
        if self.pool_allocation not in ("init", "run"):
            raise PassFailedException(f"convert-dnn-to-llvm: pool-allocation must be init or run, "
                                      f"got '{self.pool_allocation}'")
        if self.conv_search not in CONV_SEARCHES:
            raise PassFailedException(f"convert-dnn-to-llvm: conv-search must be {' or '.join(CONV_SEARCHES)}, "
                                      f"got '{self.conv_search}'")
        target = TARGETS[self.target]
        lowered: list[Operation] = []
        names: list[str] = []
        for top in op.ops:
            if isinstance(top, func.FuncOp):
                if top.is_declaration:
                    raise cannot_lower(top, f"@{top.sym_name.data} has no body")
                lowered += target.lower_function(top, self.workspace, self.pool_allocation, self.conv_search,
                                                  self.run_part_ops)
                names.append(top.sym_name.data)
            elif isinstance(top, llvm.FuncOp | llvm.GlobalOp):
                lowered.append(top.clone())
            else:
                raise cannot_lower(top, "only func.func is lowered at module level")
        lowered += target.declarations(lowered)
        lowered += string_global(f"{MODULE_FUNCTIONS_SYMBOL}_json", json.dumps(names))
        lowered.append(string_getter(MODULE_FUNCTIONS_SYMBOL, f"{MODULE_FUNCTIONS_SYMBOL}_json"))
        body = op.body.block
        for old in list(body.ops):
            old.detach()
            old.erase(safe_erase=False)
        body.add_ops(lowered)


# ---------------------------------------------------------------------------
# From the llvm dialect to LLVM IR text, and to a runnable model
# ---------------------------------------------------------------------------


def read_meta(module: ModuleOp, name: str) -> dict[str, Any]:
    """The JSON table of function `name` in a lowered module."""
    for op in module.ops:
        if isinstance(op, llvm.GlobalOp) and op.sym_name.data == f"{name}_meta_json":
            assert isinstance(op.value, StringAttr)
            return json.loads(op.value.data.rstrip("\0"))
    raise KeyError(name)


def lowered_functions(module: ModuleOp) -> list[str]:
    """The function names a lowered module exports (`pyocc_functions`)."""
    for op in module.ops:
        if isinstance(op, llvm.GlobalOp) and op.sym_name.data == f"{MODULE_FUNCTIONS_SYMBOL}_json":
            assert isinstance(op.value, StringAttr)
            return json.loads(op.value.data.rstrip("\0"))
    return []


@dataclass
class KernelSelection:
    """The native functions a lowered module's sites call (select_kernels)."""

    kernels: dict[str, tuple[NativeKernel, dict[str, Any]]]
    """symbol -> (native kernel, the site its emitter writes the function for)"""
    wrappers: dict[str, tuple[str, int, list[int]]]
    """symbol -> (the shared function it calls, the site's buffer slots, the
    sizes it appends to them): the sites whose kernel reads sizes at run time"""


def _site_key(site: dict[str, Any]) -> str:
    """What a site's function depends on: everything but its number and
    which weights it reads."""
    return json.dumps({k: v for k, v in site.items() if k not in ("site", "native", "weight_entries")},
                      sort_keys=True)


def _pack_weights(site: dict[str, Any], kernel: NativeKernel, entries: list[dict[str, Any]]) -> None:
    """Record the layouts the site's kernel would read its weights in
    (NativeKernel.weight_layouts), for the weights the site alone reads
    ("weight_entries", from the host lowering): on each weight's entry
    ("pack", which pack_weight_pool applies) and on the site
    ("packed_weights", which the emitter reads)."""
    wanted = kernel.weight_layouts(site) if kernel.weight_layouts is not None else None
    read = site["weight_entries"]
    packed = {position: layout for position, layout in (wanted or {}).items() if position in read}
    for position, layout in packed.items():
        entries[read[position]]["pack"] = layout
    if packed:
        site["packed_weights"] = packed


def select_kernels(module: ModuleOp, kernels: str = "native", share_sizes: bool = True) -> KernelSelection:
    """Decide, in a lowered module (changed in place), which host sites run
    native kernels: with `kernels="native"` every site a native emitter
    supports (pyocc.lowering.native), with "numpy" none. Their calls in
    `NAME_run` become direct calls of `NAME_site_K` (declared here, defined
    by to_llvmlite; sites that differ only in their number share the
    function of the first, K), and each function's table says per site whether it is
    "native" and counts the "numpy_sites". A module selected once keeps its
    choice. With `share_sizes`, sites whose emitter takes some sizes at run
    time and that differ only in those share one function, `NAME_site_K_sizes`
    (K the first of them), and each `NAME_site_K` of theirs is a wrapper
    passing its sizes (pyocc.lowering.native.registry), where at least the
    kernel's `min_sharing_sites` sites of distinct shapes (their scratch
    aside) share it. Returns the functions to_llvmlite writes."""
    # the emitters import llvmlite and numpy: only when a module is exported
    if kernels not in KERNEL_CHOICES:
        raise ValueError(f"kernels must be one of {', '.join(KERNEL_CHOICES)}, got '{kernels}'")
    symbols = {op.sym_name.data: op for op in module.ops if isinstance(op, llvm.FuncOp | llvm.GlobalOp)}
    chosen = KernelSelection({}, {})
    for name in lowered_functions(module):
        if f"{name}_dispatch" not in symbols:
            continue  # not a host function (cuda code has no sites)
        meta_global = symbols[f"{name}_meta_json"]
        meta = read_meta(module, name)
        already = "numpy_sites" in meta
        native_sites: dict[int, str] = {}
        # sites alike in everything but their number share one function
        shared: dict[str, str] = {}
        # ... and sites alike but for the sizes their emitter reads at run time, one more
        sized: dict[str, str] = {}
        # symbol -> (kernel, site, its shared site and sizes or None), one per distinct site
        functions: dict[str, tuple[NativeKernel, dict[str, Any], tuple[dict[str, Any], list[int]] | None]] = {}
        for site in meta["sites"]:
            kernel = None
            if already:
                kernel = native_kernel_for(site) if site["native"] else None
            elif kernels == "native":
                kernel = native_kernel_for(site)
            site["native"] = kernel is not None
            if kernel is None:
                continue
            if not already and "weight_entries" in site:
                _pack_weights(site, kernel, meta["weights"]["entries"])
            symbol = shared.setdefault(_site_key(site), f"{name}_site_{site['site']}")
            native_sites[site["site"]] = symbol
            if symbol in functions:
                continue
            general = kernel.shared_sizes(site) if share_sizes and kernel.shared_sizes is not None else None
            if general is not None:
                general = ({**general[0], "run_time_sizes": site_slots(site)}, general[1])
            functions[symbol] = (kernel, site, general)
        # the distinct sites each shared function would serve, sites that differ only
        # in their planned scratch counted once (the same shape: no rows to share)
        sharers = Counter(_site_key(general[0]) for general in {
            _site_key({**site, "workspace": None}): general
            for _, site, general in functions.values() if general is not None}.values())
        for symbol, (kernel, site, general) in functions.items():
            if symbol in chosen.kernels or symbol in chosen.wrappers:
                continue
            if general is None or sharers[_site_key(general[0])] < kernel.min_sharing_sites:
                chosen.kernels[symbol] = (kernel, site)
                continue
            general_site, sizes = general
            general_symbol = sized.setdefault(_site_key(general_site), f"{symbol}_sizes")
            chosen.kernels.setdefault(general_symbol, (kernel, general_site))
            chosen.wrappers[symbol] = (general_symbol, site_slots(site), sizes)
        if already:
            continue
        meta["numpy_sites"] = sum(not site["native"] for site in meta["sites"])
        (table,) = string_global(meta_global.sym_name.data, json.dumps(meta, separators=(",", ":")))
        module.body.block.insert_op_before(table, meta_global)
        meta_global.detach()
        meta_global.erase()
        # the sites are called by the run, or by its parts when it is split
        calls = [op for function in symbols.values() if isinstance(function, llvm.FuncOp)
                 and is_run_code(function.sym_name.data, name) for op in function.walk()]
        for call in calls:
            if not (isinstance(call, llvm.CallOp) and call.callee is not None
                    and call.callee.string_value() == f"{name}_dispatch"):
                continue
            site_constant = call.args[0].owner
            assert isinstance(site_constant, llvm.ConstantOp)
            site_number = site_constant.value.value.data
            if site_number in native_sites:
                direct = llvm.CallOp(native_sites[site_number], call.args[1])
                call.parent.insert_op_before(direct, call)
                call.detach()
                call.erase()
        for symbol in dict.fromkeys(native_sites.values()):
            module.body.block.add_op(llvm.FuncOp(symbol, llvm.LLVMFunctionType([PTR]),
                                                 linkage=llvm.LinkageAttr("external")))
    return chosen


def _export(module: ModuleOp, kernels: str, share_sizes: bool = True, consume: bool = False,
            ) -> tuple[llvmlite.ir.Module, dict[str, tuple[NativeKernel, dict[str, Any]]]]:
    """A lowered module in llvmlite IR (xDSL's exporter, plus indirect
    `llvm.call`s, which it does not convert), with the wrappers of the
    sites whose kernels share a function taking their sizes at run time,
    and the native kernels declared only (the host allocator,
    pyocc.lowering.host_allocator, defined); and those kernels (see
    select_kernels). The module is left as it was, unless `consume`: then
    it is exported in place, without the copy (a tenth of DenseNet's
    compile), and must not be used again."""
    if not consume:
        module = module.clone()
    selection = select_kernels(module, kernels, share_sizes)
    bodies: dict[str, Region] = {}
    linkages: dict[str, str] = {}
    for op in module.ops:
        if isinstance(op, llvm.FuncOp) and any(
            isinstance(inner, llvm.CallOp) and inner.callee is None for inner in op.walk()
        ):
            bodies[op.sym_name.data] = op.detach_region(op.body)
            linkages[op.sym_name.data] = op.linkage.linkage.data if op.linkage is not None else "external"
            op.add_region(Region())
    llvm_module = convert_module(module, fallback_target_triple=None)
    define_host_allocator(llvm_module)  # declared by the host lowering, defined here on malloc and free
    # xDSL's exporter drops a function's no_inline / optimize_none: set them here
    for op in module.ops:
        if isinstance(op, llvm.FuncOp):
            attributes = llvm_module.get_global(op.sym_name.data).attributes
            if op.no_inline is not None:
                attributes.add("noinline")
            if op.optimize_none is not None:
                attributes.add("optnone")
    for name, region in bodies.items():
        function = llvm_module.get_global(name)
        function.linkage = linkages[name]  # a declaration's linkage is not exported
        if len(region.blocks) != 1:
            raise NotImplementedError(f"@{name}: indirect calls are converted in one-block functions only")
        block = region.block
        builder = ir.IRBuilder(function.append_basic_block())
        values: dict[SSAValue, ir.Value] = dict(zip(block.args, function.args))
        for op in block.ops:
            if isinstance(op, llvm.CallOp) and op.callee is None:
                target, *args = (values[a] for a in op.args)
                signature = ir.FunctionType(
                    ir.VoidType() if op.returned is None else _llvm_type(op.returned.type),
                    [a.type for a in args])
                # llvmlite's call() reads the signature from a typed pointer, and
                # builder.bitcast() drops a ptr -> ptr cast: insert the cast by hand
                typed = ir.instructions.CastInstr(builder.block, "bitcast", target, ir.PointerType(signature))
                builder._insert(typed)
                result = builder.call(typed, args)
                if op.returned is not None:
                    values[op.returned] = result
            else:
                convert_op(op, builder, values)
    for symbol, (general_symbol, slots, sizes) in selection.wrappers.items():
        emit_size_wrapper(llvm_module, symbol, general_symbol, slots, sizes)
    return llvm_module, selection.kernels


def to_llvmlite(module: ModuleOp, kernels: str = "native", threads: int = 1,
                consume: bool = False) -> llvmlite.ir.Module:
    """Convert a lowered (llvm-dialect) module to llvmlite IR: xDSL's exporter,
    plus indirect `llvm.call`s, which it does not convert, plus the native
    kernel of every site `select_kernels(kernels)` picks. With `threads` > 1
    each host function gets a pool of worker threads (started by NAME_init,
    `NAME_set_threads` exported) and its native kernels' independent loops
    a parallel-for (pyocc.lowering.native.threads); with 1 the module is
    exactly the single-threaded one. With `consume` the module is exported
    in place (see _export) and must not be used again."""
    if not 1 <= threads <= MAX_THREADS:
        raise PyoccError(f"threads must be between 1 and {MAX_THREADS}, got {threads}")
    functions = lowered_functions(module)
    llvm_module, native = _export(module, kernels, consume=consume)
    if threads > 1:
        # declared before the kernels are written: their BLAS calls split between the threads when it is there
        for name in functions:
            if f"{name}_dispatch" in llvm_module.globals:
                ir.Function(llvm_module, PARALLEL_FOR_TYPE, parallel_for_symbol(name))
    for symbol, (kernel, site) in native.items():
        if threads > 1:
            site = {**site, "parallel_for": parallel_for_symbol(symbol.rsplit("_site_", 1)[0])}
        kernel.emit(llvm_module, symbol, site)
    if threads > 1:
        uses_blas = SGEMM in llvm_module.globals
        for name in functions:
            if f"{name}_dispatch" in llvm_module.globals:  # host code (cuda code has no sites)
                define_thread_pool(llvm_module, name, threads, uses_blas)
    return llvm_module


def to_llvm_parts(module: ModuleOp, kernels: str = "native", consume: bool = False) -> tuple[str, dict[str, str]]:
    """As to_llvm_ir for one thread, in parts: the module's LLVM IR text with
    its native kernels declared, and each kernel's own module (symbol -> LLVM
    IR text), which the JIT compiles apart and caches
    (pyocc.runtime.jit.jit_kernels). One thread only: a kernel compiled for
    several calls its own model's parallel-for, so it is no model's to share.
    With `consume` the module is exported in place (see _export)."""
    llvm_module, native = _export(module, kernels, consume=consume)
    parts: dict[str, str] = {}
    for symbol, (kernel, site) in native.items():
        part = ir.Module(name=symbol)
        kernel.emit(part, symbol, site)
        parts[symbol] = str(part)
    return str(llvm_module), parts


def _llvm_type(t: Attribute) -> llvmlite.ir.Type:
    return convert_type(t)


def to_llvm_ir(module: ModuleOp, kernels: str = "native", threads: int = 1, consume: bool = False) -> str:
    """LLVM IR text of a lowered module (see to_llvmlite for `kernels`, `threads` and `consume`)."""
    return str(to_llvmlite(module, kernels, threads, consume))


def _read_resource(key: str, entry: dict[str, Any]) -> bytes:
    """A dense_resource blob's bytes from pyocc's weight store."""
    return load_bytes(DenseResourceAttr.from_params(key, TensorType(i1, entry["shape"])))


def compile_module(module: ModuleOp, function: str | None = None, target: str = "host",
                   cuda_libraries: Any = None, workspace: int = ConvertDnnToLlvmPass.workspace,
                   pool_allocation: str = ConvertDnnToLlvmPass.pool_allocation, kernels: str = "native",
                   threads: int = 1, jit: bool = True, conv_search: str = ConvertDnnToLlvmPass.conv_search) -> Any:
    """Lower a buffer-form module (it is not modified) and JIT function
    `function` (default: the only one) into a runnable model: a
    CompiledModel on the host, whose sites run native kernels where one
    exists (`kernels="native"`) or all through numpy (`kernels="numpy"`);
    on target "cuda" a CudaModel bound to `cuda_libraries` (anything with
    `symbols() -> {name: address}`; default NVIDIA's libraries,
    pyocc.runtime.cuda.CudaLibraries; `workspace`, `pool_allocation` and
    `conv_search` are the pass's target=cuda options). `threads` (host): the threads the
    model runs on, its BLAS and its native loops (see to_llvmlite).
    `jit=False` (host) leaves the JIT until the model's first run
    (CompiledModel): enough to write the code to disk."""
    lowered = module.clone()
    try:
        ConvertDnnToLlvmPass(target=target, workspace=workspace, pool_allocation=pool_allocation,
                             conv_search=conv_search).apply(Context(), lowered)
    except PassFailedException as e:
        raise PyoccError(str(e)) from None
    names = lowered_functions(lowered)
    if function is None:
        if len(names) != 1:
            raise PyoccError(f"the module has functions {names}; say which one to compile")
        function = names[0]
    if function not in names:
        raise PyoccError(f"no function @{function} in the module (it has {names})")
    if kernels not in KERNEL_CHOICES:
        raise PyoccError(f"unknown kernels '{kernels}'; use {' or '.join(KERNEL_CHOICES)}")
    select_kernels(lowered, kernels)
    meta = read_meta(lowered, function)
    weight_pool = pack_weight_pool(meta, _read_resource, evict_mapped)
    if target == "cuda":
        if cuda_libraries is None:
            cuda_libraries = CudaLibraries.load()
        # `lowered` is this function's own copy: exported in place
        return CudaModel(to_llvm_ir(lowered, consume=True), meta, weight_pool, cuda_libraries.symbols(), keepalive=cuda_libraries)
    if threads > 1:
        # kernels on threads call their model's own parallel-for, so they are not shared
        # between models: one module, compiled whole (the cache holds one-thread kernels)
        return CompiledModel(to_llvm_ir(lowered, kernels, threads, consume=True), meta, weight_pool, jit=jit)
    llvm_ir, parts = to_llvm_parts(lowered, kernels, consume=True)
    return CompiledModel(llvm_ir, meta, weight_pool, parts, jit=jit)

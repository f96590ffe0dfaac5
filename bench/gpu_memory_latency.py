"""Memory and latency of pyocc's target=cuda code on a GPU, per light model
and memory mode (eager, lazy, pool; pool-run on request), against PyTorch on
the same GPU, with TensorRT's activation memory as an anchor where it is
installed.

For each light model (random weights, pyocc.testing.light_models) and mode:

- compile with ``pyocc.api.compile(model, target="cuda", memory=mode)``;
- check the outputs against onnxruntime on the CPU (rtol 1e-3, atol 1e-4):
  a mismatch is reported, and the script exits 1 at the end;
- time ``model.run(inputs)`` (wall clock, host-to-device and device-to-host
  copies included): the first run (cold: cuDNN and cuBLAS load their kernels)
  and the median of ``--runs`` runs after ``--warmup`` warm-up runs. All
  modes of a model are compiled first and then run in turns, one run of
  each per round, so that a slow stretch of the machine slows them all
  (timed one mode after the other, the same mode's median moved by half
  between runs on an H200);
- read ``model.native.alloc_stats()`` after the last run (cudaMalloc and
  cudaFree calls of that run, its peak activation bytes), the pools init
  allocated once (``model.native.init_pool_allocations`` / ``init_pool_bytes``:
  pool mode allocates its pool at init, pool-run per run, Occamy's way) and
  ``model.report`` (planned activation, weight and workspace bytes).

The peer is PyTorch eager on the same GPU running the same ONNX model,
converted with onnx2torch (TF32 off on both sides, as pyocc uses plain fp32
math); where onnx2torch is missing or fails on a model, onnxruntime's
CUDAExecutionProvider when present (latency only), else "peer unavailable".
PyTorch's side is read from its caching allocator's statistics
(``torch.cuda.memory_stats()``) over one run after the warm-up and
``torch.cuda.reset_peak_memory_stats()``: ``allocated_bytes.all.peak`` (the
peak of live tensors), ``reserved_bytes.all.peak`` (what the allocator held
from the device), and, as differences across the run,
``allocation.all.allocated`` (allocation requests) and ``num_device_alloc``
(cudaMalloc calls; 0 once the cache is warm).

The cuDNN workspace is included on both sides: pyocc plans it as a buffer
of the pool (``--workspace`` bytes per convolution, live only while it
runs), and PyTorch allocates cuDNN's workspace through the same caching
allocator, so it is in ``allocated_bytes.all.peak``.

Where the ``tensorrt`` wheel imports, TensorRT builds an fp32 engine (TF32
off, builder optimisation level 0 so that it builds in seconds) of the same
model and its activation memory,
``engine.device_memory_size_v2`` (``device_memory_size`` before TensorRT 10),
is recorded as an anchor: the scratch TensorRT itself plans for one
inference, workspace included; otherwise one line says it is not installed.

Memory columns, in MiB:
- act: activation bytes: pyocc's measured peak per run (alloc_stats().peak_bytes)
  plus the pool init allocated (pool mode): the pool, planned cuDNN
  workspace included; PyTorch's allocated peak minus its weights, input and
  output tensors (cuDNN's workspace included);
- total: everything the run needs on the device: pyocc's act + weights +
  graph inputs/outputs + the workspace init allocates outside the plan
  (model.report); PyTorch's allocated peak (reserved peak beside it).

    python bench/gpu_memory_latency.py                       # all nine models, 20 runs
    python bench/gpu_memory_latency.py --models resnet50 squeezenet --runs 50 --out results/
    python bench/gpu_memory_latency.py --target host --peer none   # dry run of this script on the CPU
    python bench/gpu_memory_latency.py --fake-cuda --models squeezenet --runs 2   # the cuda path, CPU stand-in
    python bench/gpu_memory_latency.py --modes pool --workspace 0 1MiB 4MiB 32MiB   # latency against --workspace
    python bench/gpu_memory_latency.py --modes eager pool --conv-search ranked timed

With more than one ``--workspace`` size or ``--conv-search`` each mode runs
at each (modes named ``pool@4MiB`` or ``pool@4MiB,timed``), and a table per
variant compares pool mode with the peer: what a larger workspace buys in
speed and costs in activation memory, or what timing cuDNN's algorithms at
init buys.

Without a usable GPU it prints the one-line reason and exits 2. Exit 1: a
mismatch, an error, or models left out for the time budget (``--budget-s``).
Results go to stdout and, with ``--out DIR``, to DIR/results.md and
DIR/results.json. bench/gpu_check.sh runs it on the lent GPU machine.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyocc.lowering.limits import CONV_SEARCHES, CUDA_CONV_SEARCH, CUDA_WORKSPACE  # noqa: E402
from pyocc.planning.pools import parse_size  # noqa: E402
from pyocc.testing.light_models import LIGHT_MODELS  # noqa: E402

MODES = ("eager", "lazy", "pool")
#: what --modes may name: pool-run is pool mode with the pool allocated per run (Occamy's way)
ALL_MODES = (*MODES, "pool-run")
RTOL, ATOL = 1e-3, 1e-4
MIB = 2**20


def _parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=LIGHT_MODELS, choices=LIGHT_MODELS, metavar="MODEL",
                        help=f"light models to run (default: all of {', '.join(LIGHT_MODELS)})")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=ALL_MODES, metavar="MODE",
                        help=f"memory modes (default: {' '.join(MODES)}; pool-run: the pool allocated per run)")
    parser.add_argument("--tensorrt", default="auto", choices=["auto", "none"],
                        help="auto: record TensorRT's activation memory where the tensorrt wheel imports")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per model, mode and peer (median)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs after the first, before timing")
    parser.add_argument("--out", type=Path, help="folder for results.md and results.json")
    parser.add_argument("--peer", default="auto", choices=["auto", "onnx2torch", "ort", "none"],
                        help="the peer: auto tries onnx2torch (PyTorch eager), then onnxruntime's CUDA provider")
    parser.add_argument("--budget-s", type=float, default=200.0,
                        help="start no new model after this many seconds (the rest are listed as left out)")
    parser.add_argument("--target", default="cuda", choices=["cuda", "host"],
                        help="host: a dry run of this script's flow on the CPU (peer on the CPU, no GPU memory)")
    parser.add_argument("--workspace", nargs="+", type=parse_size, default=[CUDA_WORKSPACE], metavar="SIZE",
                        help="cuDNN workspace bytes per convolution (pyocc's --workspace), e.g. 0 4MiB; with "
                             "several, every mode runs at each (default: pyocc's, "
                             f"{CUDA_WORKSPACE // MIB} MiB)")
    parser.add_argument("--conv-search", nargs="+", choices=CONV_SEARCHES, default=[CUDA_CONV_SEARCH],
                        metavar="SEARCH", help="how init chooses each convolution's algorithm (pyocc's "
                        f"--conv-search: {' or '.join(CONV_SEARCHES)}); with both, every mode runs with each "
                        f"(default: pyocc's, {CUDA_CONV_SEARCH})")
    parser.add_argument("--fake-cuda", action="store_true",
                        help="target cuda on the CPU stand-in (pyocc.testing.fake_cuda): a dry run of the cuda "
                             "path without a GPU; its timings mean nothing")
    return parser.parse_args(argv)


# -- measurements --------------------------------------------------------------------------


@dataclass
class ModeResult:
    """pyocc in one memory mode on one model."""

    mode: str
    compile_s: float | None = None
    first_ms: float | None = None
    median_ms: float | None = None
    mallocs_per_run: int | None = None
    frees_per_run: int | None = None
    init_mallocs: int | None = None
    """pools cudaMalloc'd once, by init (pool mode: 1; the weights are not counted)"""
    act_bytes: int | None = None
    """measured peak activation bytes of the last run (alloc_stats) plus the pools init allocated"""
    planned_act_bytes: int | None = None
    weight_bytes: int | None = None
    io_bytes: int | None = None
    workspace_bytes: int | None = None
    max_abs_err: float | None = None
    matches: bool | None = None
    error: str | None = None

    @property
    def total_bytes(self) -> int | None:
        """act + weights + graph I/O + workspace."""
        parts = (self.act_bytes, self.weight_bytes, self.io_bytes, self.workspace_bytes)
        return None if any(p is None for p in parts) else sum(parts)  # type: ignore[arg-type]


@dataclass
class PeerResult:
    """The peer on one model."""

    name: str = "unavailable"
    first_ms: float | None = None
    median_ms: float | None = None
    act_bytes: int | None = None
    total_bytes: int | None = None
    """allocated_bytes.all.peak over one run"""
    reserved_bytes: int | None = None
    """reserved_bytes.all.peak over one run"""
    requests_per_run: int | None = None
    """allocation.all.allocated over one run: the allocator's requests"""
    device_mallocs_per_run: int | None = None
    """num_device_alloc over one run: cudaMalloc calls (0 with a warm cache)"""
    max_abs_err: float | None = None
    note: str | None = None


@dataclass
class ModelResult:
    """Everything measured on one model."""

    model: str
    modes: dict[str, ModeResult] = field(default_factory=dict)
    peer: PeerResult = field(default_factory=PeerResult)
    tensorrt_act_bytes: int | None = None
    """TensorRT's device memory for one inference of an fp32 engine (an anchor)"""
    tensorrt_note: str | None = None
    error: str | None = None


def one_line(error: BaseException) -> str:
    """The first line of an exception, with its type."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def max_abs_error(got: list[Any], want: list[Any]) -> tuple[float, bool]:
    """Largest absolute difference, and whether all outputs are close."""
    import numpy as np

    if len(got) != len(want):
        return math.inf, False
    worst, close = 0.0, True
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return math.inf, False
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) if g.size else 0.0)
        close = close and bool(np.allclose(g, w, rtol=RTOL, atol=ATOL))
    return worst, close


def timed(run: Callable[[], object], runs: int, warmup: int) -> tuple[float, float]:
    """(first call ms, median ms of `runs` calls after `warmup` more)."""
    start = time.perf_counter()
    run()
    first = (time.perf_counter() - start) * 1e3
    for _ in range(warmup):
        run()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1e3)
    return first, statistics.median(samples)


def timed_in_turns(runs: dict[str, Callable[[], object]], count: int, warmup: int) -> dict[str, tuple[float, float]]:
    """`timed` for several calls at once, in turns: each one's first call,
    then `warmup` rounds, then `count` rounds in each of which every call
    runs once (starting one further along each round), so that a slow
    stretch of the machine is shared by all of them. Key -> (first call
    ms, median ms)."""
    firsts: dict[str, float] = {}
    for key, run in runs.items():
        start = time.perf_counter()
        run()
        firsts[key] = (time.perf_counter() - start) * 1e3
    keys = list(runs)
    for _ in range(warmup):
        for key in keys:
            runs[key]()
    samples: dict[str, list[float]] = {key: [] for key in keys}
    for round_ in range(count):
        for key in keys[round_ % len(keys):] + keys[:round_ % len(keys)]:
            start = time.perf_counter()
            runs[key]()
            samples[key].append((time.perf_counter() - start) * 1e3)
    return {key: (firsts[key], statistics.median(samples[key])) for key in keys}


@dataclass
class _Compiled:
    """One mode compiled: the model, its last outputs and its run."""

    model: Any
    outputs: dict[str, Any] = field(default_factory=dict)

    def run(self, inputs: dict[str, Any]) -> None:
        self.outputs.update(self.model.run(inputs))


def compile_mode(model: Any, mode: str, args: argparse.Namespace, workspace: int = CUDA_WORKSPACE,
                 conv_search: str = CUDA_CONV_SEARCH) -> tuple[ModeResult, _Compiled | None]:
    """Compile one mode at one workspace size and convolution algorithm
    search: its result so far (compile time, or the error) and the model."""
    from pyocc.api import compile as pyocc_compile

    result = ModeResult(mode)
    memory, _, allocation = mode.partition("-")
    try:
        start = time.perf_counter()
        extra: dict[str, Any] = {"pool_allocation": allocation} if allocation else {}
        if args.fake_cuda:
            from pyocc.testing.fake_cuda import FakeCuda

            extra["cuda_libraries"] = FakeCuda()
        compiled = pyocc_compile(model, target=args.target, memory=memory, workspace=workspace,
                                 conv_search=conv_search, **extra)
        result.compile_s = time.perf_counter() - start
        return result, _Compiled(compiled)
    except Exception as e:  # noqa: BLE001 - one mode failing must not hide the others
        result.error = one_line(e)
        traceback.print_exc(file=sys.stderr)
        return result, None


def finish_mode(result: ModeResult, compiled: _Compiled, reference: list[Any]) -> None:
    """Check the last run's outputs and read the counters and the report into `result`."""
    model = compiled.model
    try:
        result.max_abs_err, result.matches = max_abs_error([compiled.outputs[n] for n in model.output_names],
                                                           reference)
        stats = model.native.alloc_stats()
        init_pools = getattr(model.native, "init_pool_bytes", 0)  # target cuda: the pool init allocated
        result.mallocs_per_run, result.frees_per_run = stats.allocations, stats.frees
        result.init_mallocs = getattr(model.native, "init_pool_allocations", 0)
        result.act_bytes = stats.peak_bytes + init_pools
        report = model.report
        result.planned_act_bytes = report.activation_bytes
        result.weight_bytes, result.io_bytes = report.weight_bytes, report.io_bytes
        result.workspace_bytes = report.workspace_bytes
    except Exception as e:  # noqa: BLE001
        result.error = one_line(e)
        traceback.print_exc(file=sys.stderr)


def measure_modes(model: Any, inputs: dict[str, Any], reference: list[Any],
                  args: argparse.Namespace) -> dict[str, ModeResult]:
    """Every mode in every variant of one model: all compiled first, then
    timed in turns (`timed_in_turns`), then checked and read."""
    results: dict[str, ModeResult] = {}
    compiled: dict[str, _Compiled] = {}
    for workspace in args.workspace:
        for search in args.conv_search:
            for mode in args.modes:
                key = mode_key(mode, workspace, search, args)
                results[key], one = compile_mode(model, mode, args, workspace, search)
                results[key].mode = key
                if one is not None:
                    compiled[key] = one
    try:
        times = timed_in_turns({key: functools.partial(one.run, inputs) for key, one in compiled.items()},
                               args.runs, args.warmup)
    except Exception as e:  # noqa: BLE001 - a run failing is reported for every mode it interrupted
        for key in compiled:
            results[key].error = one_line(e)
        traceback.print_exc(file=sys.stderr)
        times = {}
    for key, (first, median) in times.items():
        results[key].first_ms, results[key].median_ms = first, median
        finish_mode(results[key], compiled[key], reference)
    compiled.clear()
    gc.collect()
    return results


def model_for_peer(model: Any) -> Any:
    """The same model in a form onnx2torch converts: weights no longer listed
    as graph inputs (IR 3 style, which hides their shapes from shape
    inference), Dropout as Identity (what it is at inference; onnx2torch
    has no converter for Dropout-7), and every value's shape inferred
    (onnx2torch reads pooling and batch-norm ranks from them)."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    weights = {t.name for t in copy.graph.initializer}
    inputs = [i for i in copy.graph.input if i.name not in weights]
    del copy.graph.input[:]
    copy.graph.input.extend(inputs)
    copy.ir_version = max(copy.ir_version, 4)
    for node in copy.graph.node:
        if node.op_type == "Dropout":
            node.op_type = "Identity"
            del node.attribute[:]
            del node.output[1:]
    copy = onnx.shape_inference.infer_shapes(copy)
    if _split_asymmetric_average_pools(copy):
        copy = onnx.shape_inference.infer_shapes(copy)
    return copy


def _split_asymmetric_average_pools(model: Any) -> bool:
    """Rewrite each AveragePool with asymmetric pads (onnx2torch refuses
    them; inception_v1 has one) as Pad + AveragePool, times k/count where the
    padding must not be counted: the same numbers. True if any was rewritten."""
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in [*graph.value_info, *graph.input]}
    nodes, changed = [], False
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        pads = list(attrs.get("pads", []))
        rank = len(pads) // 2
        if node.op_type != "AveragePool" or pads[:rank] == pads[rank:] or attrs.get("ceil_mode", 0):
            nodes.append(node)
            continue
        kernel, strides = list(attrs["kernel_shape"]), list(attrs.get("strides", [1] * rank))
        out, padded, pooled = node.output[0], node.output[0] + "_padded", node.output[0] + "_pooled"
        nodes.append(helper.make_node("Pad", [node.input[0]], [padded], mode="constant",
                                      pads=[0, 0, *pads[:rank], 0, 0, *pads[rank:]]))
        counted = attrs.get("count_include_pad", 0) == 1
        nodes.append(helper.make_node("AveragePool", [padded], [out if counted else pooled],
                                      kernel_shape=kernel, strides=strides))
        if not counted:  # each window's mean over its in-bounds elements only
            count = np.ones([1, 1], dtype=np.float64)
            for size, k, stride, before, after in zip(shapes[node.input[0]][2:], kernel, strides,
                                                      pads[:rank], pads[rank:]):
                starts = np.arange((size + before + after - k) // stride + 1) * stride - before
                inside = np.minimum(starts + k, size) - np.maximum(starts, 0)
                count = count[..., None] * inside
            scale = (np.prod(kernel) / count).astype(np.float32)
            graph.initializer.append(numpy_helper.from_array(scale, out + "_scale"))
            nodes.append(helper.make_node("Mul", [pooled, out + "_scale"], [out]))
        changed = True
    del graph.node[:]
    graph.node.extend(nodes)
    return changed


def measure_torch_peer(model: Any, inputs: dict[str, Any], reference: list[Any], args: argparse.Namespace,
                       output_bytes: int) -> PeerResult:
    """PyTorch eager on the onnx2torch conversion of `model`."""
    import numpy as np
    import torch
    from onnx2torch import convert

    on_gpu = _on_gpu(args)
    device = torch.device("cuda" if on_gpu else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    peer = PeerResult(name=f"PyTorch {torch.__version__} eager (onnx2torch)")
    module = convert(model_for_peer(model)).eval().to(device)
    names = [i.name for i in model.graph.input if i.name in inputs]
    outputs: list[Any] = []

    def run() -> None:
        with torch.inference_mode():
            args_ = [torch.from_numpy(inputs[n]).to(device) for n in names]
            result = module(*args_)
            result = result if isinstance(result, (tuple, list)) else [result]
            outputs[:] = [r.cpu().numpy() for r in result]  # .cpu() waits for the GPU

    peer.first_ms, peer.median_ms = timed(run, args.runs, args.warmup)
    if on_gpu:  # one more run after the warm-up ones, for the allocator's statistics
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_stats()
        resident = before.get("allocated_bytes.all.current", 0)  # the weights: the last run's tensors are freed
        run()
        torch.cuda.synchronize()
        after = torch.cuda.memory_stats()
        peak = after.get("allocated_bytes.all.peak", 0)
        input_bytes = sum(int(np.asarray(inputs[n]).nbytes) for n in names)
        peer.total_bytes = peak
        peer.reserved_bytes = after.get("reserved_bytes.all.peak")
        peer.requests_per_run = after.get("allocation.all.allocated", 0) - before.get("allocation.all.allocated", 0)
        peer.device_mallocs_per_run = after.get("num_device_alloc", 0) - before.get("num_device_alloc", 0)
        peer.act_bytes = max(0, peak - resident - input_bytes - output_bytes)
    peer.max_abs_err, close = max_abs_error(outputs, reference)
    if not close:
        peer.note = f"peer outputs differ from onnxruntime CPU (max abs err {peer.max_abs_err:.1e})"
    del module
    gc.collect()
    if on_gpu:
        torch.cuda.empty_cache()
    return peer


def measure_ort_peer(model: Any, inputs: dict[str, Any], reference: list[Any], args: argparse.Namespace) -> PeerResult:
    """onnxruntime's CUDA provider: latency only."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise RuntimeError("onnxruntime has no CUDAExecutionProvider here")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CUDAExecutionProvider"])
    peer = PeerResult(name=f"onnxruntime {ort.__version__} CUDAExecutionProvider", note="memory not measured")
    outputs: list[Any] = []

    def run() -> None:
        outputs[:] = session.run(None, inputs)

    peer.first_ms, peer.median_ms = timed(run, args.runs, args.warmup)
    peer.max_abs_err, _ = max_abs_error(outputs, reference)
    return peer


def measure_peer(model: Any, inputs: dict[str, Any], reference: list[Any], args: argparse.Namespace) -> PeerResult:
    """The first peer that works, per --peer; "unavailable" with the reasons otherwise."""
    import numpy as np

    output_bytes = sum(int(np.asarray(r).nbytes) for r in reference)
    tries: list[tuple[str, Callable[[], PeerResult]]] = []
    if args.peer in ("auto", "onnx2torch"):
        tries.append(("onnx2torch", lambda: measure_torch_peer(model, inputs, reference, args, output_bytes)))
    if args.peer in ("auto", "ort") and _on_gpu(args):
        tries.append(("ort", lambda: measure_ort_peer(model, inputs, reference, args)))
    failures = []
    for name, attempt in tries:
        try:
            return attempt()
        except Exception as e:  # noqa: BLE001 - a peer failing is reported, not fatal
            failures.append(f"{name}: {one_line(e)}")
    return PeerResult(note="; ".join(failures) or "peer not requested")


def tensorrt_activation_bytes(model: Any) -> int:
    """TensorRT's device memory for one inference of an fp32 engine (TF32
    off) of `model`: engine.device_memory_size_v2 (device_memory_size before
    TensorRT 10), the activations and scratch TensorRT plans itself."""
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    explicit = 0 if int(trt.__version__.split(".")[0]) >= 10 else 1 << int(
        trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(explicit)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(model_for_peer(model).SerializeToString()):
        raise RuntimeError("; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
    config = builder.create_builder_config()
    config.clear_flag(trt.BuilderFlag.TF32)
    if hasattr(config, "builder_optimization_level"):  # the quickest build: this is a memory anchor, not a race
        config.builder_optimization_level = 0
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError("TensorRT built no engine")
    engine = trt.Runtime(logger).deserialize_cuda_engine(serialized)
    size = getattr(engine, "device_memory_size_v2", None)
    return int(size if size is not None else engine.device_memory_size)


def tensorrt_status() -> str | None:
    """None when the tensorrt wheel imports; else the one line saying why not."""
    try:
        import tensorrt  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means no anchor
        return f"TensorRT: not installed ({one_line(e)})"
    return None


def mode_key(mode: str, workspace: int, search: str, args: argparse.Namespace) -> str:
    """The mode's name in the tables: `pool`, or with the variant after an
    `@` when several run: `pool@4MiB`, `pool@timed`, `pool@4MiB,timed`."""
    variant = [_size_text(workspace)] if len(args.workspace) > 1 else []
    variant += [search] if len(args.conv_search) > 1 else []
    return mode + ("@" + ",".join(variant) if variant else "")


def _size_text(size: int) -> str:
    """`size` bytes as --workspace takes it: 0, 4MiB, 64KiB, 100B."""
    if size == 0:
        return "0"
    return f"{size // MIB}MiB" if size % MIB == 0 else f"{size // 1024}KiB" if size % 1024 == 0 else f"{size}B"


def _on_gpu(args: argparse.Namespace) -> bool:
    return args.target == "cuda" and not args.fake_cuda


def measure_model(name: str, args: argparse.Namespace) -> ModelResult:
    """All modes and the peer on one light model."""
    from pyocc.testing.light_models import onnxruntime_reference

    result = ModelResult(name)
    try:
        path, inputs, reference = onnxruntime_reference(name)
        import onnx

        model = onnx.load(str(path))  # the peers take the proto, weights included
    except Exception as e:  # noqa: BLE001
        result.error = one_line(e)
        return result
    result.modes = measure_modes(model, inputs, reference, args)
    for key, mode in result.modes.items():
        print(f"  {name} {key}: {_mode_line(mode)}", flush=True)
    if args.tensorrt == "auto" and _on_gpu(args) and tensorrt_status() is None:
        try:
            result.tensorrt_act_bytes = tensorrt_activation_bytes(model)
        except Exception as e:  # noqa: BLE001 - an anchor failing is reported, not fatal
            result.tensorrt_note = one_line(e)
        print(f"  {name} TensorRT activation: {_mib(result.tensorrt_act_bytes)} MiB"
              + (f" ({result.tensorrt_note})" if result.tensorrt_note else ""), flush=True)
    if args.peer != "none":
        result.peer = measure_peer(model, inputs, reference, args)
        print(f"  {name} peer: {result.peer.name} {_fmt(result.peer.median_ms)} ms"
              + (f" ({result.peer.note})" if result.peer.note else ""), flush=True)
    return result


# -- tables -------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _mib(value: int | None) -> str:
    return "–" if value is None else f"{value / MIB:.1f}"


def _mode_line(r: ModeResult) -> str:
    if r.error:
        return f"ERROR {r.error}"
    verdict = "ok" if r.matches else f"MISMATCH (max abs err {r.max_abs_err:.1e})"
    return (f"{_fmt(r.median_ms)} ms (first {_fmt(r.first_ms, 1)}), {r.mallocs_per_run}/{r.frees_per_run} "
            f"malloc/free per run, {r.init_mallocs} at init, act {_mib(r.act_bytes)} MiB, "
            f"compile {_fmt(r.compile_s, 1)} s, {verdict}")


def geomean(values: list[float]) -> float | None:
    """Geometric mean of positive numbers; None for none."""
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def markdown_tables(results: list[ModelResult], header: str, tensorrt: str | None = None) -> str:
    """The per-mode table, the pool-vs-peer table and the goals, as Markdown;
    `tensorrt` is the line saying why TensorRT was not measured (None: it was)."""
    lines = [header, "", "Activation memory includes the cuDNN workspace on both sides (pyocc: planned in the "
             "pool; PyTorch: allocated through its caching allocator).", "",
             "### pyocc, per model and memory mode", "",
             "| model | mode | median ms | first ms | cudaMalloc/free per run | cudaMalloc at init (pools) "
             "| act MiB (planned) | total MiB | compile s | vs onnxruntime CPU |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m in results:
        if m.error:
            lines.append(f"| {m.model} | – | | | | | | | | ERROR {m.error} |")
        for r in m.modes.values():
            check = (f"ERROR {r.error}" if r.error else "ok" if r.matches
                     else f"MISMATCH {r.max_abs_err:.1e}")
            lines.append(f"| {m.model} | {r.mode} | {_fmt(r.median_ms)} | {_fmt(r.first_ms, 1)} | "
                         f"{_fmt_calls(r)} | {'–' if r.init_mallocs is None else r.init_mallocs} | "
                         f"{_mib(r.act_bytes)} ({_mib(r.planned_act_bytes)}) | "
                         f"{_mib(r.total_bytes)} | {_fmt(r.compile_s, 1)} | {check} |")
    if tensorrt is not None:
        lines += ["", tensorrt]
    suffixes = dict.fromkeys("".join(key.partition("@")[1:]) for m in results for key in m.modes)
    for suffix in suffixes:  # in the order they ran
        lines += _peer_table(results, suffix)
    return "\n".join(lines) + "\n"


def _peer_table(results: list[ModelResult], suffix: str) -> list[str]:
    """Pool mode in one variant (`suffix`: "", "@4MiB", "@timed", ...)
    against the peer, the means and the goals, as Markdown lines."""
    lines = ["", f"### pool mode{' (' + suffix[1:] + ')' if suffix else ''} against the peer", "",
             "| model | peer | peer median ms | peer first ms | pool median ms | peer act MiB | pool act MiB "
             "| peer total MiB (reserved) | peer requests / cudaMalloc per run | TensorRT act MiB "
             "| speedup (peer/pool) | activation saved | total memory saved |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    speedups, act_savings, savings = [], [], []
    for m in results:
        pool, peer = m.modes.get("pool" + suffix), m.peer
        pool = None if pool is None or pool.error else pool
        speedup = _ratio(peer.median_ms, pool.median_ms if pool else None)
        saved = (1 - pool.total_bytes / peer.total_bytes
                 if pool and pool.total_bytes is not None and peer.total_bytes else None)
        act_saved = (1 - pool.act_bytes / peer.act_bytes
                     if pool and pool.act_bytes is not None and peer.act_bytes else None)
        for values, value in ((speedups, speedup), (act_savings, act_saved), (savings, saved)):
            if value is not None:
                values.append(value)
        requests = ("–" if peer.requests_per_run is None
                    else f"{peer.requests_per_run} / {peer.device_mallocs_per_run}")
        trt = _mib(m.tensorrt_act_bytes) if m.tensorrt_note is None else f"– ({m.tensorrt_note})"
        lines.append(f"| {m.model} | {peer.name}{' – ' + peer.note if peer.note else ''} | "
                     f"{_fmt(peer.median_ms)} | {_fmt(peer.first_ms, 1)} | "
                     f"{_fmt(pool.median_ms if pool else None)} | {_mib(peer.act_bytes)} | "
                     f"{_mib(pool.act_bytes if pool else None)} | "
                     f"{_mib(peer.total_bytes)} ({_mib(peer.reserved_bytes)}) | {requests} | {trt} | "
                     f"{_fmt(speedup)} | {_percent(act_saved)} | {_percent(saved)} |")
    speedup_mean = geomean(speedups)
    act_mean = sum(act_savings) / len(act_savings) if act_savings else None
    saving_mean = sum(savings) / len(savings) if savings else None
    lines += ["", f"geometric-mean speedup of pool mode over the peer: {_fmt(speedup_mean)}x "
                  f"({len(speedups)} models); mean activation memory saved: {_percent(act_mean)}, "
                  f"mean total memory saved: {_percent(saving_mean)} ({len(savings)} models)"]
    lines += ["", f"goals (issues #7, #23){' (' + suffix[1:] + ')' if suffix else ''}:", ""]
    lines += [f"- {g}" for g in goals(results, speedup_mean, act_mean, suffix)]
    return lines


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _fmt_calls(r: ModeResult) -> str:
    return "–" if r.mallocs_per_run is None else f"{r.mallocs_per_run}/{r.frees_per_run}"


def goals(results: list[ModelResult], speedup: float | None, saving: float | None, suffix: str = "") -> list[str]:
    """Issue #7's and #23's goals for the modes of one variant (`suffix`),
    each with PASS, FAIL or n/a and the models that miss it;
    `saving` is the mean activation memory saved against the peer."""
    def verdict(misses: list[str], known: int) -> str:
        if not known:
            return "n/a"
        return "PASS" if not misses else "FAIL: " + ", ".join(misses)

    act_misses, act_known, speed_misses, speed_known = [], 0, [], 0
    for m in results:
        pool, lazy, eager = (m.modes.get(k + suffix) for k in ("pool", "lazy", "eager"))
        if pool and lazy and pool.act_bytes is not None and lazy.act_bytes is not None:
            act_known += 1
            if pool.act_bytes > lazy.act_bytes:
                act_misses.append(f"{m.model} ({_mib(pool.act_bytes)} > {_mib(lazy.act_bytes)} MiB)")
        if pool and eager and pool.median_ms is not None and eager.median_ms is not None:
            speed_known += 1
            if pool.median_ms > eager.median_ms:
                speed_misses.append(f"{m.model} ({pool.median_ms:.2f} > {eager.median_ms:.2f} ms)")
    return [
        f"pool activation memory <= lazy's on every model: {verdict(act_misses, act_known)}",
        f"pool at least as fast as eager on every model: {verdict(speed_misses, speed_known)}",
        f"pool >= 1.25x geometric-mean speedup over the peer: "
        f"{'n/a' if speedup is None else ('PASS' if speedup >= 1.25 else 'FAIL')} ({_fmt(speedup)}x)",
        f"pool >= 35% less peak activation memory than the peer: "
        f"{'n/a' if saving is None else ('PASS' if saving >= 0.35 else 'FAIL')} "
        f"({'–' if saving is None else f'{saving:.1%}'})",
    ]


def environment(args: argparse.Namespace) -> dict[str, Any]:
    """What ran: GPU, library files and versions."""
    env: dict[str, Any] = {"target": args.target, "runs": args.runs, "warmup": args.warmup, "python": sys.version.split()[0]}
    env["libraries"] = "pyocc.testing.fake_cuda.FakeCuda (CPU stand-in)" if args.fake_cuda else None
    if _on_gpu(args):
        from pyocc.runtime.cuda import CudaLibraries

        libraries = CudaLibraries.load()
        env["libraries"] = libraries.paths
        env["versions"] = libraries.versions()
    try:
        import torch

        env["torch"] = torch.__version__
        if _on_gpu(args) and torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
    except Exception as e:  # noqa: BLE001
        env["torch"] = f"unavailable ({one_line(e)})"
    return env


def main(argv: list[str] | None = None) -> int:
    """Measure, print, write; the exit status (0 all matched, 1 not, 2 no GPU)."""
    args = _parse_args(argv)
    if _on_gpu(args):
        from pyocc.runtime.cuda import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason is not None:
            print(reason)
            return 2
    start = time.perf_counter()
    env = environment(args)
    print(f"environment: {json.dumps(env)}", flush=True)
    results: list[ModelResult] = []
    left_out: list[str] = []
    for name in args.models:
        if time.perf_counter() - start > args.budget_s:
            left_out.append(name)
            continue
        print(f"{name}:", flush=True)
        results.append(measure_model(name, args))
    elapsed = time.perf_counter() - start
    where = (env.get("gpu", "GPU unknown") if _on_gpu(args) else
             "CPU stand-in (dry run)" if args.fake_cuda else "host (dry run)")
    header = (f"## target {args.target}: {where}"
              f", median of {args.runs} runs, {elapsed:.0f} s in all")
    trt_status = tensorrt_status() if args.tensorrt == "auto" and _on_gpu(args) else (
        "TensorRT: not measured (no GPU)" if args.tensorrt == "auto" else "TensorRT: not requested")
    env["tensorrt"] = trt_status or "measured"
    text = markdown_tables(results, header, trt_status)
    if left_out:
        text += f"\nleft out for the time budget ({args.budget_s:.0f} s): {', '.join(left_out)}\n"
    print("\n" + text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.md").write_text(text)
        data = {"environment": env, "elapsed_s": elapsed, "left_out": left_out,
                "results": [{**asdict(m), "modes": {k: {**asdict(r), "total_bytes": r.total_bytes}
                                                    for k, r in m.modes.items()}} for m in results]}
        (args.out / "results.json").write_text(json.dumps(data, indent=1))
    failed = [f"{m.model}/{r.mode}" for m in results for r in m.modes.values() if r.error or not r.matches]
    failed += [m.model for m in results if m.error]
    if failed or left_out:
        print(f"FAILED: {', '.join(failed + [f'{n} (left out)' for n in left_out])}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""End-to-end latency of pyocc's host code against onnxruntime, per light model.

For each of the nine light models shipped with onnx (their ConstantOfShape
weights replaced by seeded random ones, as the e2e numerics tests do, so
that both sides do real work on real numbers) this prints:

- compile: seconds from the ONNX ModelProto to a runnable native model
  (``pyocc.compile``: import, passes, planning, llvm lowering, llvmlite JIT,
  weight packing), in pool mode;
- pyocc / ort: the median (``--statistic min``: fastest) latency of ``Model.run`` and of
  ``InferenceSession.run`` over ``--runs`` timed runs, both warmed first;
- ratio = pyocc / ort, and the geometric mean of the ratios;
- native: the sites (compute ops) that run native kernels, of all sites
  (``--kernels numpy`` runs every site through numpy);
- with ``--scratchpad SIZE``: pyocc runs its schedule for an NPU with SIZE
  bytes of SRAM, as ``pyocc run --scratchpad`` does (the host's check of
  that schedule, not the NPU's speed: the simulator's cycles are that);
- with ``--c-runner``: the same model saved as a library (``Model.save``,
  as ``pyocc compile`` writes it) and run by examples/c/run_model (built
  with ``cc``) on the same inputs, ``--repeat`` the timed runs after
  ``--warmup`` warm-up ones (at least 0.3 s of them: ``warm_runs``), all
  in one process of its own with no Python (a process's first runs are
  slower: the warm-up ran in a separate process before stop 42, which made
  the line slower than the library runs): its median ms per run
  (run_model's own clock: wall time); right after it, onnxruntime's median
  in a process of its own, warmed up and timed the same way (``ort
  process ms``); and the ratio of the two (issue 16's "line for the C
  runner"), with its geometric mean. (Before stop 42 the ratio divided by
  the in-process onnxruntime time, measured minutes earlier: its rows
  swung with onnxruntime's own spread.)

Both sides use the same number of threads: ``--threads N`` (default 1) sets
onnxruntime's ``intra_op_num_threads`` (inter-op 1, sequential execution),
compiles pyocc's models with ``threads=N`` (its OpenBLAS and the parallel
loops of its native kernels), and pins numpy's BLAS to N threads, through
OPENBLAS/OMP/MKL_NUM_THREADS set before numpy loads and, when threadpoolctl
is installed, also through ``threadpool_limits``. pyocc's numpy kernels
(``--kernels numpy``, and the ops without a native kernel) are
single-threaded apart from numpy's BLAS.

    python bench/host_latency.py                       # all nine, 1 thread
    python bench/host_latency.py --models resnet50 squeezenet --runs 20
    python bench/host_latency.py --threads 2 --markdown
    python bench/host_latency.py --clock cpu           # steadier on a busy machine
    python bench/host_latency.py --threads 2 --statistic min --runs 15  # fastest runs, wall clock
    python bench/host_latency.py --kernels numpy       # the numpy kernels for every op
    python bench/host_latency.py --profile densenet121 # cProfile + time per kernel
    python bench/host_latency.py --c-runner            # and the compiled library run from C
    python bench/host_latency.py --scratchpad 1MiB     # the NPU schedule run on the host (SRAM arena, DMA copies)

With several threads, `--order blocks` times each runtime's runs back to
back instead of in turns: in turns, a run starts while the other runtime's
idle workers may still spin on the cores (onnxruntime's do, for longer
than pyocc's; bench/turns.py measures what that costs each side).

On a machine shared with other work, wall-clock medians swing with the load;
``--clock cpu`` times this process's CPU time instead (with one thread that
is the latency on an idle core), and the two runtimes take turns run by run,
so load bursts hit both alike. docs/performance.md has the measured tables.

Importing pyocc's compiler stack (xDSL, llvmlite) is timed once, before
the first compile, and printed under the table; compile times exclude it.
Compile and run times use the same clock.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LIGHT_MODELS = [
    "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
    "shufflenet", "squeezenet", "vgg19", "zfnet512",
]


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=LIGHT_MODELS, choices=LIGHT_MODELS, metavar="MODEL",
                        help=f"light models to run (default: all of {', '.join(LIGHT_MODELS)})")
    parser.add_argument("--runs", type=int, default=10, help="timed runs per model and runtime (see --statistic)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs before timing")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads for pyocc's models (pyocc.compile threads=), BLAS and onnxruntime intra-op")
    parser.add_argument("--statistic", default="median", choices=["median", "min"],
                        help="report each runtime's median run, or its fastest (min: the runs a loaded machine "
                             "left alone; with two threads CPU time is no latency, so this is the steadier wall clock)")
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                        help="wall: elapsed time; cpu: this process's CPU time, steadier on a shared "
                             "machine (meaningful with --threads 1 only)")
    parser.add_argument("--order", default="turns", choices=["turns", "blocks"],
                        help="turns: the runtimes take turns run by run (a load burst hits both alike); blocks: "
                             "each runtime's warm-up and runs back to back, one runtime after the other (with "
                             "several threads a run in turns starts while the other runtime's idle workers still "
                             "spin: bench/turns.py)")
    parser.add_argument("--memory", default="pool", choices=["pool", "lazy", "eager"], help="pyocc memory mode")
    parser.add_argument("--kernels", default="native", choices=["native", "numpy"],
                        help="pyocc's host kernels: native (default: generated code where an op has a native "
                             "kernel, numpy for the rest) or numpy (every op)")
    parser.add_argument("--scratchpad", default=None, metavar="SIZE",
                        help="run pyocc's schedule for an NPU with SIZE bytes of SRAM (e.g. 1MiB: its SRAM "
                             "arena, DMA as copies), as `pyocc run --scratchpad` does; pool mode")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--c-runner", action="store_true",
                        help="also time the saved library run by examples/c/run_model (needs cc)")
    parser.add_argument("--profile", metavar="MODEL", choices=LIGHT_MODELS,
                        help="instead of the table: cProfile pyocc's runs of MODEL and print per-kernel times")
    # (--c-runner's onnxruntime process: MODEL.onnx INPUTS.npz WARMUP; prints its median ms)
    parser.add_argument("--ort-process", nargs=3, metavar=("MODEL", "INPUTS", "WARMUP"), help=argparse.SUPPRESS)
    return parser.parse_args()


ARGS = _parse_args()
# BLAS reads its thread count once, when numpy loads it: set it first.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = str(ARGS.threads)
# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

from pyocc.testing.light_models import random_inputs_for, with_random_weights  # noqa: E402

try:  # optional: enforce and report the BLAS thread count
    from threadpoolctl import threadpool_info, threadpool_limits
except ImportError:  # pragma: no cover - the environment variables suffice
    threadpool_info = threadpool_limits = None


def ort_session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    """onnxruntime's CPU session on `threads` intra-op threads, sequential."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def median_seconds(runners: list[Callable[[], object]], runs: int, warmup: int) -> list[float]:
    """Median time of each runner over `runs` calls, after `warmup` calls.

    The runners take turns (one call each per round), so a burst of load on
    a shared machine slows all of them alike instead of one of them; with
    `--order blocks` each runner's warm-up and runs come back to back, one
    runner after the other."""
    if ARGS.order == "blocks" and len(runners) > 1:
        return [seconds for run in runners for seconds in median_seconds([run], runs, warmup)]
    clock = time.process_time if ARGS.clock == "cpu" else time.perf_counter
    for _ in range(warmup):
        for run in runners:
            run()
    samples: list[list[float]] = [[] for _ in runners]
    for _ in range(runs):
        for run, times in zip(runners, samples):
            start = clock()
            run()
            times.append(clock() - start)
    statistic = statistics.median if ARGS.statistic == "median" else min
    return [statistic(times) for times in samples]


@dataclass
class Row:
    """One model's measurements."""

    model: str
    compile_s: float
    pyocc_ms: float
    ort_ms: float
    max_abs_err: float
    native_sites: int
    sites: int
    c_runner_ms: float | None = None
    ort_process_ms: float | None = None

    @property
    def ratio(self) -> float:
        """pyocc latency / onnxruntime latency."""
        return self.pyocc_ms / self.ort_ms

    @property
    def c_runner_ratio(self) -> float | None:
        """The C runner's latency / onnxruntime's in a process of its own, when measured."""
        return None if self.c_runner_ms is None or self.ort_process_ms is None else \
            self.c_runner_ms / self.ort_process_ms


#: examples/c/run_model.c, which `--c-runner` builds once (`c_runner`)
RUNNER_SOURCE = Path(__file__).resolve().parent.parent / "examples" / "c" / "run_model.c"


@functools.cache
def c_runner() -> Path:
    """examples/c/run_model, built with `cc` into a folder kept until the process ends."""
    folder = tempfile.mkdtemp(prefix="host-latency-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    runner = Path(folder) / "run_model"
    subprocess.run(["cc", "-O2", "-o", str(runner), str(RUNNER_SOURCE), "-ldl"], check=True)
    return runner


#: a process of its own warms up for at least this long (seconds; `warm_runs`)
C_RUNNER_WARM_SECONDS = 0.3


def warm_runs(seconds_per_run: float) -> int:
    """The warm-up runs of a process of its own (the C runner's, and
    onnxruntime's beside it): --warmup runs, or more to fill
    C_RUNNER_WARM_SECONDS at `seconds_per_run`. In-process runs come long
    after their process started its threads, and a new process's threads
    need about 0.1 s of running to get a core each on this project's VMs
    (SqueezeNet on two threads from C: its first 11 runs 9.5-19 ms, the
    rest 6.1-6.5; run_model --warmup). That is the machine's scheduler
    settling once per process, not the model's latency."""
    return max(ARGS.warmup, math.ceil(C_RUNNER_WARM_SECONDS / max(seconds_per_run, 1e-6)))


def c_runner_ms(compiled: object, inputs: dict[str, np.ndarray], folder: Path, warmup: int) -> float:
    """The median ms per run of `compiled` saved as a library in `folder`
    and run by examples/c/run_model on `inputs` (graph-input order): `warmup`
    runs, then --runs timed ones, in one process, on the model's threads."""
    runner = c_runner()
    library = folder / "model.so"
    compiled.save(library)  # type: ignore[attr-defined]
    (folder / "in.bin").write_bytes(b"".join(np.ascontiguousarray(value).tobytes() for value in inputs.values()))
    command = [str(runner), str(library), str(folder / "in.bin"), os.devnull, "--repeat", str(ARGS.runs),
               "--warmup", str(warmup)]  # in the timed process, as the in-process runs are warmed in theirs
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    last = done.stdout.strip().splitlines()[-1]  # "median X ms per run over N runs"
    return float(last.split()[1])


def ort_process_ms(model: onnx.ModelProto, inputs: dict[str, np.ndarray], folder: Path, warmup: int) -> float:
    """The median ms per run of onnxruntime on `model` in a process of its own
    (this script with --ort-process), warmed up as the C runner is: the
    peer the C runner's line is divided by, measured the same way, right
    after it."""
    onnx.save(model, str(folder / "model.onnx"))
    np.savez(folder / "inputs.npz", **inputs)
    command = [sys.executable, __file__, "--threads", str(ARGS.threads), "--runs", str(ARGS.runs),
               "--ort-process", str(folder / "model.onnx"), str(folder / "inputs.npz"), str(warmup)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def ort_process(model_path: str, inputs_path: str, warmup: int) -> None:
    """--ort-process: onnxruntime alone in this process, `warmup` runs then
    --runs timed ones (wall clock); prints the median ms."""
    session = ort_session(onnx.load(model_path), ARGS.threads)
    with np.load(inputs_path) as saved:
        feeds = {name: saved[name] for name in saved.files}
    for _ in range(warmup):
        session.run(None, feeds)
    times = []
    for _ in range(ARGS.runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    print(f"{statistics.median(times) * 1e3:.3f}")


def measure(name: str) -> Row:
    """Compile, check and time one light model on both runtimes."""
    import pyocc

    model = with_random_weights(name)
    inputs = random_inputs_for(model)
    clock = time.process_time if ARGS.clock == "cpu" else time.perf_counter
    start = clock()
    compiled = pyocc.compile(model, memory=ARGS.memory, kernels=ARGS.kernels, threads=ARGS.threads,
                             scratchpad=ARGS.scratchpad)
    compile_s = clock() - start
    session = ort_session(model, ARGS.threads)
    got = compiled.run(inputs)
    want = session.run(None, inputs)
    error = max(float(np.max(np.abs(g - w))) for g, w in zip(got.values(), want))
    ours, theirs = median_seconds([lambda: compiled.run(inputs), lambda: session.run(None, inputs)],
                                  ARGS.runs, ARGS.warmup)
    from_c = peer = None
    if ARGS.c_runner:
        with tempfile.TemporaryDirectory() as folder:
            warmup = warm_runs(ours)
            from_c = c_runner_ms(compiled, inputs, Path(folder), warmup)
            peer = ort_process_ms(model, inputs, Path(folder), warmup)
    return Row(name, compile_s, ours * 1e3, theirs * 1e3, error, compiled.native_sites,
               compiled.native_sites + compiled.numpy_sites, from_c, peer)


def geomean(values: list[float]) -> float:
    """Geometric mean of positive numbers."""
    return float(np.exp(np.mean(np.log(values))))


def print_table(rows: list[Row], import_s: float) -> None:
    """The comparison table, plain or Markdown."""
    header = ["model", "compile s", "pyocc ms", "ort ms", "ratio", "max abs err", "native"]
    cells = [[r.model, f"{r.compile_s:.2f}", f"{r.pyocc_ms:.2f}", f"{r.ort_ms:.2f}", f"{r.ratio:.2f}",
              f"{r.max_abs_err:.1e}", f"{r.native_sites}/{r.sites}"] for r in rows]
    footer = ["geomean", "", "", "", f"{geomean([r.ratio for r in rows]):.2f}", "", ""]
    if ARGS.c_runner:
        header += ["C runner ms", "ort process ms", "C runner / ort process"]
        for line, r in zip(cells, rows, strict=True):
            line += [f"{r.c_runner_ms:.2f}", f"{r.ort_process_ms:.2f}", f"{r.c_runner_ratio:.2f}"]
        footer += ["", "", f"{geomean([r.c_runner_ratio for r in rows]):.2f}"]
    if ARGS.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for line in cells + [footer]:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(c[i]) for c in [header, footer, *cells]) for i in range(len(header))]
        for line in [header, *cells, footer]:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
    print(f"\nimport of pyocc's compiler stack (xDSL, llvmlite), paid once: {import_s:.2f} s")


def profile(name: str) -> None:
    """cProfile `--runs` pyocc runs of one model; print the top functions and
    the time per kernel (summed over its call sites)."""
    import cProfile
    import pstats

    import pyocc

    model = with_random_weights(name)
    inputs = random_inputs_for(model)
    compiled = pyocc.compile(model, memory=ARGS.memory, kernels=ARGS.kernels, threads=ARGS.threads,
                             scratchpad=ARGS.scratchpad)
    for _ in range(ARGS.warmup):
        compiled.run(inputs)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(ARGS.runs):
        compiled.run(inputs)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)

    bridge = compiled.native._bridge
    kernels = bridge.kernels
    clock = time.process_time if ARGS.clock == "cpu" else time.perf_counter
    per_kernel: dict[str, float] = {}
    for index, kernel in enumerate(kernels):
        call = _site_runner(bridge, index)
        start = clock()
        for _ in range(ARGS.runs):
            call()
        per_kernel[kernel.__name__] = per_kernel.get(kernel.__name__, 0.0) + (clock() - start)
    total = sum(per_kernel.values())
    print(f"per-kernel time (ms per run, kernels called on fresh arrays), total {total / ARGS.runs * 1e3:.2f} ms")
    for kernel, seconds in sorted(per_kernel.items(), key=lambda kv: -kv[1]):
        print(f"  {kernel:24s} {seconds / ARGS.runs * 1e3:9.2f}  {seconds / total:6.1%}")


def _site_runner(bridge: object, index: int) -> Callable[[], None]:
    """A call of site `index`'s kernel on arrays of ones of its shapes."""
    site = bridge.sites[index]  # type: ignore[attr-defined]

    def array(spec: dict) -> np.ndarray:
        return np.ones(spec["shape"], dtype=spec["dtype"])

    inputs = []
    for spec in site["inputs"]:
        if spec is None:
            inputs.append(None)
        elif isinstance(spec, list):
            inputs.append([array(s) for s in spec])
        else:
            inputs.append(array(spec))
    while inputs and inputs[-1] is None:
        inputs.pop()
    outs = [array(s) for s in site["outputs"]]
    destination = outs if site["out_keyword"] == "outs" else outs[0]
    kernel = bridge.kernels[index]  # type: ignore[attr-defined]
    kwargs = {site["out_keyword"]: destination, **site["kwargs"]}
    return lambda: kernel(*inputs, **kwargs)


def main() -> None:
    """Measure the chosen models and print the table."""
    limiter = threadpool_limits(limits=ARGS.threads) if threadpool_limits is not None else None
    blas = "env vars only (threadpoolctl not installed)"
    if threadpool_info is not None:
        blas = ", ".join(f"{i['internal_api']} {i['num_threads']}" for i in threadpool_info()) or "none found"
    if ARGS.profile:
        profile(ARGS.profile)
        return
    if ARGS.ort_process:
        model_path, inputs_path, warmup = ARGS.ort_process
        ort_process(model_path, inputs_path, int(warmup))
        return
    clock = time.process_time if ARGS.clock == "cpu" else time.perf_counter
    start = clock()
    import pyocc.api  # noqa: F401
    import pyocc.lowering.convert_dnn_to_llvm  # noqa: F401
    import pyocc.runtime.jit  # noqa: F401
    import_s = clock() - start
    print(f"threads: {ARGS.threads} (onnxruntime intra-op; BLAS: {blas}); memory {ARGS.memory}; "
          f"kernels {ARGS.kernels}; "
          f"{ARGS.clock} clock, {ARGS.statistic} of {ARGS.runs} runs after {ARGS.warmup} warm-up, {ARGS.order}; onnxruntime {ort.__version__}, "
          f"numpy {np.__version__}, {os.cpu_count()} CPUs")
    rows = []
    for name in ARGS.models:
        rows.append(measure(name))
        print(f"  {name}: {rows[-1].ratio:.2f}x", file=sys.stderr, flush=True)
    print_table(rows, import_s)
    del limiter


if __name__ == "__main__":
    main()

"""Where a light model's time goes, layer family by layer family, against onnxruntime.

For each light model (random weights) this times every site of pyocc's
native model on one thread, or on `--threads N` (the timing build of bench/serial_share.py:
cycle counters around each site function, converted to milliseconds by
the run's wall time; on threads, each site's cycles are the calling
thread's, waiting for the workers included) and every node of
onnxruntime's session on as many intra-op threads (its own profiler), and
prints one table per model (on threads the two sides run one after the
other, not in turns: `measure`):

- convolutions grouped by kernel size, stride, group and output size
  (`3x3/1 @14`: a 3x3 stride-1 convolution with a 14-row output), each
  matched to onnxruntime's convolution node of the same output shape (in
  graph order) and kernel size: sites, millions of multiply-adds, the milliseconds and
  GMAC/s of each, their ratio and the difference in milliseconds, the
  largest difference first;
- the other kernels (pyocc) and ops (onnxruntime), by name, in total.

Both sides run the same model on the same inputs in the same process;
each side's times are medians over `--runs` runs. The per-site cycle
counts add up to the instrumented run's wall time, so on a shared
machine a burst of load shows in both columns of that side alike.

    python bench/layer_times.py inception_v2
    python bench/layer_times.py resnet50 vgg19 --runs 10
    python bench/layer_times.py resnet50 --threads 2
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ[variable] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

from pyocc.testing.light_models import LIGHT_MODELS, with_random_weights  # noqa: E402
from serial_share import instrument, timed_build  # noqa: E402  (bench/, the script's own folder)


@dataclass
class Family:
    """The convolutions of one family: counts and both sides' times."""

    sites: int = 0
    macs: int = 0
    pyocc_ms: float = 0.0
    ort_ms: float = 0.0


def conv_family(site: dict[str, Any]) -> str:
    """`KxK/s @rows` (and ` g` for a grouped one) of a conv site."""
    w_shape, out_shape = site["inputs"][1]["shape"], site["outputs"][0]["shape"]
    stride = (site["kwargs"].get("strides") or [1])[0]
    grouped = " g" if (site["kwargs"].get("group") or 1) != 1 else ""
    kernel = "x".join(str(size) for size in w_shape[2:])
    return f"{kernel}/{stride}{grouped} @{out_shape[2] if len(out_shape) > 2 else 1}"


class PyoccSide:
    """The model's native build on `threads` threads, timed site by site
    (bench/serial_share.py's timing build)."""

    def __init__(self, model_name: str, threads: int):
        self.inputs, name, self.sites, self.timed, engine, set_threads = timed_build(model_name, instrument)
        assert set_threads(threads) == 0
        self.table = (ctypes.c_int64 * (2 * len(self.sites))).from_address(
            engine.get_global_value_address(f"{name}_timing_sites"))
        self.site_ms: list[np.ndarray] = []
        self.walls: list[float] = []

    def run(self, timed: bool) -> None:
        """One run; when `timed`, its wall time and each site's share of it are kept."""
        ctypes.memset(ctypes.addressof(self.table), 0, ctypes.sizeof(self.table))
        start = time.perf_counter()
        self.timed.run(self.inputs)
        wall = (time.perf_counter() - start) * 1e3
        if timed:
            cycles = np.frombuffer(self.table, dtype=np.int64).reshape(len(self.sites), 2)[:, 0].astype(float)
            self.site_ms.append(cycles / cycles.sum() * wall)
            self.walls.append(wall)

    def medians(self) -> tuple[list[float], float]:
        """(median ms of each site, median ms per run) over the timed runs."""
        self.timed.close()
        return [float(ms) for ms in np.median(np.stack(self.site_ms), axis=0)], statistics.median(self.walls)


class OrtSide:
    """onnxruntime's session on `threads` intra-op threads, with its profiler on."""

    def __init__(self, model_name: str, inputs: dict[str, np.ndarray], folder: str, threads: int):
        proto = with_random_weights(model_name)
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "ort")
        self.session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
        self.feed = dict(zip([i.name for i in self.session.get_inputs()], inputs.values(), strict=True))
        self.walls: list[float] = []

    def run(self, timed: bool) -> None:
        """One run; when `timed`, its wall time is kept."""
        start = time.perf_counter()
        self.session.run(None, self.feed)
        if timed:
            self.walls.append((time.perf_counter() - start) * 1e3)

    def medians(self, runs: int) -> tuple[list[tuple[str, list[int], list[int], float]], float]:
        """([(op type, output shape, kernel size (of a conv: its weights'
        dims 2 and 3, in both layouts), median ms)] of the nodes in graph order,
        over the last `runs` runs; median ms per run, profiler on)."""
        events = json.loads(Path(self.session.end_profiling()).read_text())
        durations: dict[str, list[float]] = collections.defaultdict(list)
        nodes: dict[str, tuple[str, list[int], list[int]]] = {}
        for event in events:
            if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
                node = event["name"].removesuffix("_kernel_time")
                outputs = event["args"].get("output_type_shape") or [{}]
                inputs = event["args"].get("input_type_shape") or []
                weights = next(iter(inputs[1].values()), []) if len(inputs) > 1 else []
                nodes.setdefault(node, (event["args"].get("op_name", "?"), next(iter(outputs[0].values()), []),
                                        weights[2:4]))
                durations[node].append(event["dur"] / 1e3)
        rows = [(op, shape, kernel, statistics.median(durations[node][-runs:]))
                for node, (op, shape, kernel) in nodes.items()]
        return rows, statistics.median(self.walls)


def measure(model_name: str, runs: int, threads: int) -> tuple[list[dict[str, Any]], list[float], float,
                                                 list[tuple[str, list[int], list[int], float]], float]:
    """(pyocc's sites, their median ms, pyocc's ms per run, onnxruntime's
    nodes with their median ms, its ms per run): one warm-up run each,
    then `runs` runs each, taking turns; on threads, one side's runs and
    then the other's (in turns, onnxruntime's idle workers spin on the
    cores while pyocc runs: with two threads on two cores, pyocc's
    convolutions at 56x56 and 28x28 then ran no faster than on one)."""
    pyocc_side = PyoccSide(model_name, threads)
    with tempfile.TemporaryDirectory() as folder:
        ort_side = OrtSide(model_name, pyocc_side.inputs, folder, threads)
        rounds = [(pyocc_side, ort_side)] * (runs + 1) if threads == 1 else \
            [(pyocc_side,)] * (runs + 1) + [(ort_side,)] * (runs + 1)
        for index, sides in enumerate(rounds):
            for side in sides:
                side.run(timed=index % (runs + 1) > 0)
        nodes, ort_ms = ort_side.medians(runs)
    site_ms, pyocc_ms = pyocc_side.medians()
    return pyocc_side.sites, site_ms, pyocc_ms, nodes, ort_ms


def same_output(shape: list[int], out_shape: list[int]) -> bool:
    """Whether onnxruntime's output `shape` is `out_shape`, also in its
    blocked NCHWc form ([n, channel blocks, h, w, block])."""
    if list(shape) == list(out_shape):
        return True
    return (len(shape) == len(out_shape) + 1 and shape[0] == out_shape[0] and shape[2:-1] == out_shape[2:]
            and shape[1] * shape[-1] >= out_shape[1] > (shape[1] - 1) * shape[-1])


def report(model_name: str, runs: int, threads: int) -> None:
    """Print the model's tables."""
    sites, site_ms, pyocc_ms, nodes, ort_ms = measure(model_name, runs, threads)
    on = "one thread, taking turns" if threads == 1 else f"{threads} threads, one side after the other"
    print(f"\n{model_name}: {on}, medians of {runs} runs: pyocc {pyocc_ms:.2f} ms per run "
          f"(timing build), onnxruntime {ort_ms:.2f} (profiler on), its nodes {sum(n[3] for n in nodes):.2f}")
    convs = [index for index, (op, _, _, _) in enumerate(nodes) if "Conv" in op]
    used: set[int] = set()
    families: dict[str, Family] = collections.defaultdict(Family)
    others: collections.Counter[str] = collections.Counter()
    unmatched = 0
    for site, ms in zip(sites, site_ms, strict=True):
        if site["kernel"] != "conv":
            others[site["kernel"]] += ms
            continue
        out_shape = site["outputs"][0]["shape"]
        kernel = list(site["inputs"][1]["shape"][2:4])
        match = next((index for index in convs if index not in used and same_output(nodes[index][1], out_shape)
                      and nodes[index][2] in (kernel, [])), None)
        if match is None:
            unmatched += 1
            others["conv (no onnxruntime match)"] += ms
            continue
        used.add(match)
        family = families[conv_family(site)]
        w_shape = site["inputs"][1]["shape"]
        family.sites += 1
        family.macs += int(np.prod(out_shape)) * int(np.prod(w_shape[1:]))
        family.pyocc_ms += ms
        family.ort_ms += nodes[match][3]
    print(f"| conv | sites | MMAC | pyocc ms | GMAC/s | ort ms | GMAC/s | pyocc / ort | difference ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, f in sorted(families.items(), key=lambda item: item[1].ort_ms - item[1].pyocc_ms):
        print(f"| {name} | {f.sites} | {f.macs / 1e6:.1f} | {f.pyocc_ms:.3f} | {f.macs / f.pyocc_ms / 1e6:.1f} | "
              f"{f.ort_ms:.3f} | {f.macs / f.ort_ms / 1e6:.1f} | {f.pyocc_ms / f.ort_ms:.2f} | "
              f"{f.pyocc_ms - f.ort_ms:+.3f} |")
    ort_others: collections.Counter[str] = collections.Counter()
    for index, (op, _, _, ms) in enumerate(nodes):
        if index not in used:
            ort_others[op] += ms
    print("other pyocc kernels (ms): " + ", ".join(f"{name} {ms:.3f}" for name, ms in others.most_common()))
    print("other onnxruntime ops (ms): " + ", ".join(f"{name} {ms:.3f}" for name, ms in ort_others.most_common()))
    if unmatched:
        print(f"({unmatched} conv sites matched no onnxruntime conv node of their output shape and kernel)")


def main() -> None:
    """Print the tables of the models asked for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=LIGHT_MODELS, help="light model names (default: all nine)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each side (medians reported)")
    parser.add_argument("--threads", type=int, default=1, help="threads of both sides (default: 1)")
    args = parser.parse_args()
    for name in args.models:
        report(name, args.runs, args.threads)


if __name__ == "__main__":
    main()

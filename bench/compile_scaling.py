"""How the compiler itself scales with model size: time and memory per stage.

Synthetic graphs of N ops (a repeating residual block: Conv 1x1, Relu, Add
of a skip, and every 8th block a Concat of two branches, on 1x8x4x4
tensors) are compiled end to end. For each N it prints the seconds spent in
import, the dnn passes (lowering, memory ops, pool planning), the LLVM
lowering and machine-code generation, and the peak resident memory of the
process (each size runs in a fresh process) — the figures that show whether
cost grows about linearly.

    python bench/compile_scaling.py                 # N = 1000 .. 20000
    python bench/compile_scaling.py --sizes 500 1000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def synthetic_graph(ops: int, channels: int = 8, size: int = 4) -> onnx.ModelProto:
    """About `ops` ONNX nodes of residual blocks with an occasional branch."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    block = 0
    while len(nodes) < ops:
        w = f"w{block}"
        inits.append(numpy_helper.from_array(rng.standard_normal((channels, channels, 1, 1)).astype(np.float32) * 0.3, w))
        nodes += [helper.make_node("Conv", [x, w], [f"c{block}"]),
                  helper.make_node("Relu", [f"c{block}"], [f"r{block}"]),
                  helper.make_node("Add", [f"r{block}", x], [f"a{block}"])]
        x = f"a{block}"
        if block % 8 == 7:
            half = f"h{block}"
            inits.append(numpy_helper.from_array(
                rng.standard_normal((channels // 2, channels, 1, 1)).astype(np.float32) * 0.3, half))
            nodes += [helper.make_node("Conv", [x, half], [f"p{block}"]),
                      helper.make_node("Conv", [x, half], [f"q{block}"]),
                      helper.make_node("Concat", [f"p{block}", f"q{block}"], [f"k{block}"], axis=1)]
            x = f"k{block}"
        block += 1
    graph = helper.make_graph(
        nodes, f"synthetic_{ops}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, channels, size, size])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def measure(ops: int) -> dict[str, float]:
    """Seconds per stage and the peak Python heap in MiB for one size."""
    from xdsl.context import Context

    from pyocc.frontend.onnx_import import import_model
    from pyocc.lowering.convert_dnn_to_llvm import compile_module
    from pyocc.pipelines import Options, buffer_passes, pool_passes, run_passes, tensor_passes

    model = synthetic_graph(ops)
    times: dict[str, float] = {"nodes": float(len(model.graph.node))}
    t = time.perf_counter()
    module = import_model(model)
    times["import s"] = time.perf_counter() - t
    options = Options()
    for stage, passes in (("to dnn s", tensor_passes(options)), ("memory ops s", buffer_passes(options)),
                          ("pool plan s", pool_passes(options))):
        t = time.perf_counter()
        run_passes(Context(), module, passes)
        times[stage] = time.perf_counter() - t
    t = time.perf_counter()
    compiled = compile_module(module)
    times["llvm + codegen s"] = time.perf_counter() - t
    x = np.random.default_rng(1).standard_normal((1, 8, 4, 4)).astype(np.float32)
    t = time.perf_counter()
    compiled.run({"x": x})
    times["one run s"] = time.perf_counter() - t
    times["peak RSS MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return times


def main(argv: list[str] | None = None) -> int:
    """Print the table for the requested sizes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000, 20000])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # measure one size, print JSON
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one)))
        return 0
    rows = []
    for n in args.sizes:  # a fresh process per size, so peak memory is that size's own
        done = subprocess.run([sys.executable, __file__, "--one", str(n)], capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " | total s | total us per node |")
    print("|" + "---|" * (len(columns) + 2))
    for row in rows:
        total = sum(v for k, v in row.items() if k.endswith(" s") and k != "one run s")
        cells = [f"{row[c]:.0f}" if c == "nodes" else f"{row[c]:.2f}" for c in columns]
        print("| " + " | ".join(cells) + f" | {total:.2f} | {total / row['nodes'] * 1e6:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

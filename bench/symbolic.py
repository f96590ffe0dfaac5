"""One plan for every sequence length, against a static plan per length.

For each graph with a symbolic dimension (tests/graphs.py: a BERT-style
encoder, a GPT-2-style decoder and a plain transformer encoder, whose
sequence is symbolic, and a ViT-style graph, whose batch is), compile once
with ``dims={SYMBOL: MAX}`` and, at every S of ``--lengths``: the symbolic
pool arena(S), the pool of a static compile at that S (its own plan and op
order), their ratio, the max-live bound of the symbolic program at S, and
the largest difference of the run at S from onnxruntime; and the weights:
those the symbolic program reads at S (its memory report), those of the
static compile at S (which may fold an ``[S, S]`` mask or position bias
that the symbolic program, lowered near the maximum, computes in its
arena), the ratio of arena + weights of the two, and the weights the
symbolic model holds (the same at every S: a constant folded from the
symbol is held at the maximum, of which a run reads a block). ``--unfolded`` adds the static plan of a
compile at S that does not fold tensors with two dimensions equal to S
(a diagnostic: what of the ratio is folding). Then the compile
times: the symbolic compile, and one static compile (pyocc.compile at S =
MAX, native kernels, the default), and what runs the symbolic model
(generated code, or the numpy kernels and why). Last, for the graphs whose
symbolic model runs generated code, the latency at each S of
``--latency-lengths``: the symbolic model's run against a static compile
at that S (native kernels; median of ``--runs`` runs, wall clock, one
thread) and against the numpy kernels driven from Python (the fallback).

    python bench/symbolic.py                        # S in 1 2 17 128 384 512
    python bench/symbolic.py --lengths 1,64,512 --max 512
    python bench/symbolic.py --only ViT             # one graph
    python bench/symbolic.py --only encoder --lengths 512 --latency-lengths 1,17,128,512 --runs 50
    python bench/symbolic.py --compile-times        # each compile alone in a fresh process
    python bench/symbolic.py --zoo bert,gpt2 --only zoo --latency-lengths ''   # zoo models only
    python bench/symbolic.py --zoo t5 --only zoo --latency-lengths '' --unfolded  # with the unfolded static plan

``--zoo`` adds rows for the Hugging Face transformers of bench/zoo.py
(bert, distilbert, gpt2, llama, t5, whisper: 2 layers (Whisper 1 each
side), hidden size 32, random weights, their position tables made
``--max`` long; T5 has none), each exported with a symbolic ``sequence``
axis on its token inputs (input_ids and attention_mask; T5's
decoder_input_ids too, the same symbol; Whisper's decoder_input_ids only,
its 32 frames of features fixed) and the batch fixed at 1 (``--zoo-batch 2``: 2), by the classic
TorchScript exporter (opset 17) or, with ``--zoo-exporter dynamo``, the
dynamo exporter (opset 18). A model PyTorch cannot export (T5 by dynamo,
Whisper by the classic exporter: ``aten::diff``) gets a row saying so. It
needs torch and transformers; without them the zoo rows are skipped with
one line.

The compile times of the main table are measured in one process, after
other compiles: a static compile there reuses native kernels JIT-compiled
before (pyocc.runtime.jit caches them by text) and finds every import done.
``--compile-times`` runs each compile in a process of its own instead: the
symbolic compile (probes, fit, plan, generated code) against one static
compile at the maximum, in wall-clock seconds and in the process's CPU
seconds (which a loaded machine changes least). The model is built (a zoo
model exported) once, here, and saved to a temporary file that each
compiling process reads, so that no compile runs next to PyTorch's
hundreds of thousands of Python objects: every full garbage collection
during a compile walks them all (it doubled the symbolic compile's tensor
passes, which make many objects, 0.27 -> 0.55 CPU s for BERT, and a static
compile, which makes fewer, much less), which measured the exporter's heap,
not the compiler.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

# Measure the working tree this file belongs to, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyocc  # noqa: E402
from pyocc.api import SymbolicModel, lower  # noqa: E402
from pyocc.errors import PyoccError  # noqa: E402
from pyocc.runtime import object_cache  # noqa: E402
from pyocc.frontend import onnx_import  # noqa: E402
from tests.graphs import bert_symbolic, encoder_symbolic, gpt2_symbolic, vit_symbolic  # noqa: E402

GRAPHS = {"encoder (2 layers)": (encoder_symbolic, "sequence"), "BERT-style (2 layers)": (bert_symbolic, "sequence"),
          "GPT-2-style (2 layers)": (gpt2_symbolic, "sequence"), "ViT-style (1 block, batch)": (vit_symbolic, "batch")}
"""name -> (builder, its symbolic dimension)"""

ZOO_POSITIONS: dict[str, str | None] = {
    "bert": "max_position_embeddings", "distilbert": "max_position_embeddings", "gpt2": "n_positions",
    "llama": "max_position_embeddings", "t5": None, "whisper": "max_target_positions"}
"""The zoo's transformers `--zoo` takes -> the config field of their position
table's length (None: T5 has no table, its relative position buckets take
any length)."""
ZOO_FIXED_INPUTS = {"whisper": ("input_features",)}
"""Inputs whose shape stays fixed (Whisper's 32 frames of mel features: the
conv stem makes them the encoder's 16 positions, max_source_positions);
every other input has the symbolic ``sequence`` as its axis 1 (T5: the
encoder's and the decoder's, one symbol)."""


def zoo_model(name: str, maximum: int, exporter: str = "classic", batch: int = 1) -> onnx.ModelProto:
    """bench/zoo.py's model `name` at batch `batch`, its position table `maximum`
    long, exported by the classic (opset 17) or the dynamo (opset 18)
    exporter with a symbolic ``sequence`` axis on its inputs and its first output."""
    import torch
    import zoo

    field = ZOO_POSITIONS[name]
    # T5's decoder as long as its encoder (16 tokens): one symbol is both lengths
    entry = zoo.ZOO[name](batch=batch, **({field: maximum} if field else {}),
                          **({"decoder_length": 16} if name == "t5" else {}))
    fixed = ZOO_FIXED_INPUTS.get(name, ())
    with tempfile.TemporaryDirectory(prefix="pyocc-symbolic-zoo-") as tmp:
        path = Path(tmp) / f"{name}.onnx"
        sink = io.StringIO()
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                _quiet_descriptors():
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)  # the dynamo exporter logs (to a handler made before the redirect)
            try:
                if exporter == "dynamo":
                    # the wrapper takes its inputs as *args: one tuple of per-input dims
                    sequence = torch.export.Dim("sequence", max=maximum)
                    torch.onnx.export(entry.module, entry.inputs, str(path), input_names=entry.names,
                                      output_names=["hidden"], opset_version=18, dynamo=True,
                                      dynamic_shapes=(tuple(None if n in fixed else {1: sequence}
                                                            for n in entry.names),))
                else:
                    torch.onnx.export(entry.module, entry.inputs, str(path), input_names=entry.names,
                                      output_names=["hidden"], opset_version=17, dynamo=False,
                                      dynamic_axes={**{n: {1: "sequence"} for n in entry.names if n not in fixed},
                                                    "hidden": {1: "sequence"}})
            finally:
                logging.disable(logging.NOTSET)
        return onnx.load(str(path))


@contextlib.contextmanager
def _quiet_descriptors() -> Iterator[None]:
    """File descriptors 1 and 2 to a temporary file for the block (the
    classic exporter prints its whole TorchScript graph to them, below
    Python, when an operator has no ONNX export)."""
    with tempfile.TemporaryFile() as sink:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def add_zoo(names: list[str], maximum: int, exporter: str = "classic", batch: int = 1) -> None:
    """Add the zoo rows `names` to GRAPHS (one line and none when torch or transformers is missing)."""
    # bench/zoo.py, next to this file; importing it also takes bench/ off sys.path, where transformers,
    # probing for a package named `kernels`, would find bench/kernels.py
    import zoo  # noqa: F401

    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("bench/symbolic.py: --zoo needs torch and transformers (pip install torch transformers); "
              "skipping the zoo rows")
        return
    for name in names:
        layers = "1 layer each side" if name == "whisper" else "2 layers"
        GRAPHS[f"zoo {name} ({exporter}, {layers}, batch {batch})"] = (
            partial(zoo_model, name, maximum, exporter, batch), "sequence")


def fresh(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy (the importer fixes input shapes in the proto it is given)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def inputs_at(model: onnx.ModelProto, s: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random inputs at sequence length `s`: floats, token ids < 50,
    positions 0..s-1, a 0/1 mask with token 0 kept."""
    inputs = {}
    for inp in model.graph.input:
        shape = [s if d.dim_param else d.dim_value for d in inp.type.tensor_type.shape.dim]
        if inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            inputs[inp.name] = rng.standard_normal(shape).astype(np.float32)
        elif inp.name == "position_ids":
            inputs[inp.name] = np.arange(s, dtype=np.int64)[None]
        elif inp.name == "attention_mask":
            rows = shape[0]
            inputs[inp.name] = np.concatenate([np.ones((rows, 1), np.int64), rng.integers(0, 2, (rows, s - 1))],
                                              axis=1)
        else:
            inputs[inp.name] = rng.integers(0, 50, shape)
    return inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="1,2,17,128,384,512")
    parser.add_argument("--max", type=int, default=512)
    parser.add_argument("--only", default="", help="measure only the graphs whose name contains this text")
    parser.add_argument("--latency-lengths", default="17,128,512", help="S values of the latency table ('' for none)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per latency (after 3 warm-up runs)")
    parser.add_argument("--compile-times", action="store_true", help="only the compile times, each in a fresh process")
    parser.add_argument("--zoo", default="", help=f"comma-separated zoo models to add ({', '.join(ZOO_POSITIONS)}); "
                        "needs torch and transformers")
    parser.add_argument("--zoo-exporter", choices=("classic", "dynamo"), default="classic",
                        help="the exporter of the --zoo models (default classic)")
    parser.add_argument("--zoo-batch", type=int, default=1, help="the batch of the --zoo models (default 1)")
    parser.add_argument("--unfolded", action="store_true",
                        help="also compile the static plan at each S without folding tensors with two dimensions "
                        "equal to S (a diagnostic: see symbol_sized_unfolded)")
    parser.add_argument("--one-compile", nargs=3, metavar=("KIND", "MODEL", "SYMBOL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.pop(object_cache.CACHE_DIR_VARIABLE, None)  # cold compiles: no code loaded from a disk cache
    zoo_names = [n for n in args.zoo.split(",") if n]
    unknown = [n for n in zoo_names if n not in ZOO_POSITIONS]
    if unknown:
        parser.error(f"unknown zoo model {unknown[0]!r}; choose from {', '.join(ZOO_POSITIONS)}")
    if args.one_compile:
        kind, path, symbol = args.one_compile
        print("%.3f %.3f" % one_compile(onnx.load(path), symbol, kind, args.max))
        return
    add_zoo(zoo_names, args.max, args.zoo_exporter, args.zoo_batch)
    if args.compile_times:
        print("| graph | symbolic compile s | one static compile s (S = max, native kernels) | ratio | "
              "symbolic CPU s | static CPU s | CPU ratio |")
        print("|---|---|---|---|---|---|---|")
        for name, (build, symbol) in GRAPHS.items():
            if args.only in name:
                with tempfile.TemporaryDirectory(prefix="pyocc-symbolic-compile-") as tmp:
                    path = Path(tmp) / "model.onnx"
                    onnx.save(build(), str(path))
                    (symbolic_s, symbolic_cpu), (static_s, static_cpu) = (tuple(float(v) for v in subprocess.run(
                        [sys.executable, __file__, "--max", str(args.max), "--one-compile", kind, str(path), symbol],
                        capture_output=True, text=True, check=True).stdout.split()[-2:])
                        for kind in ("symbolic", "static"))
                print(f"| {name} | {symbolic_s:.2f} | {static_s:.2f} | {symbolic_s / static_s:.2f} | "
                      f"{symbolic_cpu:.2f} | {static_cpu:.2f} | {symbolic_cpu / static_cpu:.2f} |")
        return
    lengths = [int(s) for s in args.lengths.split(",")]
    rng = np.random.default_rng(0)
    print("| graph | S | arena(S) B | static plan B | ratio | bound(S) B | weights(S) B | static weights B | "
          "arena + weights ratio | weights held B |" + (" static, unfolded B | ratio to it |" if args.unfolded else "")
          + " max abs diff vs onnxruntime |")
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.unfolded else "") + "---|")
    times = []
    latencies = []
    for name, (build, symbol) in GRAPHS.items():
        if args.only not in name:
            continue
        try:
            model = build()
        except Exception as e:  # noqa: BLE001 - a zoo model PyTorch cannot export: its row says so
            line = re.sub(r"\x1b\[[0-9;]*m", "", str(e).strip().splitlines()[0])[:160]  # no terminal colours
            print(f"| {name} | - | export failed: {type(e).__name__}: {line} | | | | | | | |")
            continue
        start = time.perf_counter()
        try:
            symbolic = pyocc.compile(fresh(model), dims={symbol: args.max})
        except PyoccError as e:  # a model pyocc cannot compile symbolically yet: its row says where it stopped
            print(f"| {name} | - | compile failed: {e} | | | | | | | |")
            continue
        symbolic_s = time.perf_counter() - start
        session = ort.InferenceSession(model.SerializeToString())
        held = weights_held(symbolic)
        for s in lengths:
            inputs = inputs_at(model, s, rng)
            shapes = {k: v.shape for k, v in inputs.items()}
            _, static = lower(fresh(model), shapes=shapes)
            report = symbolic.memory_report(dims={symbol: s})
            outputs = symbolic.run(inputs)
            diff = max(float(np.max(np.abs(a - b)))
                       for a, b in zip(outputs.values(), session.run(None, inputs), strict=True))
            total = (report.activation_bytes + report.weight_bytes) / (static.activation_bytes + static.weight_bytes)
            unfolded = ""
            if args.unfolded:
                with symbol_sized_unfolded(s):
                    _, plain = lower(fresh(model), shapes=shapes)
                unfolded = f" {plain.activation_bytes:,} | {report.activation_bytes / plain.activation_bytes:.3f} |"
            print(f"| {name} | {s} | {report.activation_bytes:,} | {static.activation_bytes:,} | "
                  f"{report.activation_bytes / static.activation_bytes:.3f} | {report.lower_bound_bytes:,} | "
                  f"{report.weight_bytes:,} | {static.weight_bytes:,} | {total:.3f} | {held:,} |{unfolded} {diff:.1e} |")
        inputs = inputs_at(model, args.max, rng)
        start = time.perf_counter()
        pyocc.compile(fresh(model), shapes={k: v.shape for k, v in inputs.items()})
        runs = "generated code" if symbolic.native is not None else f"numpy: {symbolic.fallback_reason}"
        times.append((name, symbolic_s, time.perf_counter() - start, runs))
        if symbolic.native is None:
            continue
        for s in [int(v) for v in args.latency_lengths.split(",") if v]:
            inputs = inputs_at(model, s, rng)
            static_model = pyocc.compile(fresh(model), shapes={k: v.shape for k, v in inputs.items()})
            values = symbolic.lowered.values_of({k: v.shape for k, v in inputs.items()})
            latencies.append((name, s, median_ms(lambda: symbolic.run(inputs), args.runs),
                              median_ms(lambda: static_model.run(inputs), args.runs),  # noqa: B023 - called here
                              median_ms(lambda: symbolic.runner.run(values, inputs), args.runs)))  # noqa: B023
    print()
    print("| graph | symbolic compile s | one static compile s (S = max, native kernels) | ratio | runs |")
    print("|---|---|---|---|---|")
    for name, symbolic_s, static_s, runs in times:
        print(f"| {name} | {symbolic_s:.2f} | {static_s:.2f} | {symbolic_s / static_s:.2f} | {runs} |")
    if latencies:
        print()
        print("| graph | S | symbolic, generated code ms | static at S, native ms | ratio | "
              "symbolic, numpy kernels ms |")
        print("|---|---|---|---|---|---|")
        for name, s, native, static, numpy in latencies:
            print(f"| {name} | {s} | {native:.3f} | {static:.3f} | {native / static:.2f} | {numpy:.3f} |")


def weights_held(model: SymbolicModel) -> int:
    """The weight bytes the symbolic model holds, whatever S: its packed
    weight pool (generated code), or its constants (numpy kernels). A
    constant folded from the symbol is held at the maximum, of which a run
    at S reads a block; the model's memory report gives instead the
    weights a program at S would read (what a static compile at S holds)."""
    if model.native is not None:
        return int(model.native.weight_pool.nbytes)
    return sum(int(w.nbytes) for w in model.runner.weights)


@contextlib.contextmanager
def symbol_sized_unfolded(s: int) -> Iterator[None]:
    """For the block, the importer does not fold a constant whose result
    has two dimensions equal to `s` (an ``[S, S]`` mask or position bias,
    S >= 2): a static compile then computes it every run, in its arena,
    as the symbolic program (lowered near the maximum, where such tensors
    exceed the fold limit) does. A diagnostic for the bench's
    ``--unfolded`` column (which part of a gap is folding, which is the
    plan or the op order), not a compile option: it wraps the importer's
    private fold step. The importer itself now keeps a fold that would be
    larger than its sources as ops (onnx_import.EXPANDING_FOLD_LIMIT: T5's
    bias, Whisper's mask), so the column differs from the static plan
    only where a tensor with two dimensions equal to S is folded from
    sources at least as large."""
    fold = onnx_import._Importer.try_fold

    def try_fold(importer: onnx_import._Importer, node: onnx.NodeProto) -> bool:
        if not fold(importer, node):
            return False
        if s < 2 or node.op_type in ("ConstantOfShape", "Shape", "Size"):  # splats and shapes stay folded
            return True
        outputs = [o for o in node.output if o]
        if any(list(np.shape(importer.consts[o])).count(s) >= 2 for o in outputs):
            for o in outputs:
                del importer.consts[o]
            return False
        return True

    onnx_import._Importer.try_fold = try_fold  # type: ignore[method-assign]
    try:
        yield
    finally:
        onnx_import._Importer.try_fold = fold  # type: ignore[method-assign]


def one_compile(model: onnx.ModelProto, symbol: str, kind: str, maximum: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds (this process's, all its threads) of one
    compile of `model`: "symbolic" (`symbol` up to `maximum`) or "static"
    (every symbolic dimension at `maximum`). The CPU seconds are what a
    loaded machine changes least."""
    start, cpu = time.perf_counter(), time.process_time()
    if kind == "symbolic":
        pyocc.compile(model, dims={symbol: maximum})
    else:
        shapes = {i.name: [maximum if d.dim_param else d.dim_value for d in i.type.tensor_type.shape.dim]
                  for i in model.graph.input}
        pyocc.compile(model, shapes=shapes)
    return time.perf_counter() - start, time.process_time() - cpu


def median_ms(run: Callable[[], object], runs: int) -> float:
    """The median wall-clock milliseconds of `runs` calls of `run`, after 3 unmeasured ones."""
    for _ in range(3):
        run()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1e3)
    return float(np.median(samples))


if __name__ == "__main__":
    main()

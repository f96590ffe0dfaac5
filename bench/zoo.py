"""The real-world corpus: torchvision and Hugging Face transformers models,
exported by both of PyTorch's ONNX exporters, through pyocc.

Every model is built in code with seeded random weights (transformers
configs are small `BertConfig(...)`-style objects; nothing is downloaded),
exported with the classic TorchScript exporter (opset 17) and the dynamo
exporter (opset 18), and then, for each file, one row:

- import / plan / run: whether pyocc imports it, compiles it in pool mode
  (planning included) and runs it, or the one line that stopped it;
- match: the largest elementwise error against onnxruntime (ORT_ENABLE_ALL)
  in units of the tolerance 1e-4 + 1e-3 * |reference|; 1.0 or less matches
  (docs/guide.md, "Numerics of deep nets"); then the largest |reference|,
  which says whether the comparison means anything;
- activation: pyocc's pool bytes against onnxruntime's best, the smaller of
  its heap growth during one run at ORT_ENABLE_ALL and ORT_ENABLE_BASIC
  (memory pattern on, arena off, outputs excluded; measured by the
  LD_PRELOAD heap counter bench/heapcount.c, built with `cc` on first use);
- latency: pyocc's run time over onnxruntime's (median of 3, both on one
  thread).

    pip install -e '.[zoo]'
    python bench/zoo.py                                # every model, both exporters
    python bench/zoo.py --models bert,resnet18 --exporters classic

The zoo extra (torch, torchvision, transformers, onnxscript) is for this
script only; pyocc never imports any of them.
"""

from __future__ import annotations

import os

# one thread for numpy's BLAS and for onnxruntime: a fair latency ratio, and
# a frugal run on a shared machine (set before numpy is imported)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent

# Measure the working tree this file belongs to, installed or not; and keep
# bench/ itself off the path: transformers probes for a package named
# `kernels`, which would find bench/kernels.py.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

#: the elementwise tolerance of a match: |pyocc - ort| <= ATOL + RTOL * |ort|
ATOL, RTOL = 1e-4, 1e-3


@dataclass
class Entry:
    """A model to export: the module, example inputs (torch tensors) and
    their names, and the family it stands for."""

    family: str
    module: Any
    inputs: tuple[Any, ...]
    names: list[str]


# ---------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------


def _torch() -> Any:
    import torch

    torch.manual_seed(0)
    return torch


def _image(torch: Any, size: int) -> Any:
    return torch.randn(1, 3, size, size)


def _vision(name: str, family: str, size: int, **kwargs: Any) -> Callable[[], Entry]:
    def build() -> Entry:
        torch = _torch()
        import torchvision

        model = torchvision.models.get_model(name, weights=None, **kwargs).eval()
        return Entry(family, _FirstTensors(model), (_image(torch, size),), ["image"])

    build.family = family  # type: ignore[attr-defined]
    return build


def _small_vit() -> Entry:
    torch = _torch()
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
                              mlp_dim=128, num_classes=10).eval()
    # torchvision initialises the head to zeros: the logits would be 0 whatever pyocc computed
    torch.nn.init.normal_(model.heads.head.weight, std=0.2)
    return Entry("vision transformer", model, (_image(torch, 64),), ["image"])


def _small_swin() -> Entry:
    torch = _torch()
    from torchvision.models.swin_transformer import SwinTransformer

    model = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=[7, 7],
                            stochastic_depth_prob=0.0, num_classes=10).eval()
    return Entry("vision transformer", model, (_image(torch, 112),), ["image"])


def _small_maxvit() -> Entry:
    torch = _torch()
    from torchvision.models.maxvit import MaxVit

    model = MaxVit(input_size=(64, 64), stem_channels=16, partition_size=4, block_channels=[32, 64],
                   block_layers=[1, 1], head_dim=16, stochastic_depth_prob=0.0, num_classes=10).eval()
    return Entry("vision transformer", model, (_image(torch, 64),), ["image"])


def _text_inputs(torch: Any, vocab: int, batch: int = 2, seq: int = 16) -> tuple[Any, Any]:
    ids = torch.randint(0, vocab, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, seq * 2 // 3:] = 0  # padding: the mask matters
    return ids, mask


def _hf(config_name: str, model_name: str, family: str, vocab: int = 100, **config: Any) -> Callable[..., Entry]:
    """A transformers model with a masked batch (input_ids, attention_mask)."""

    def build(batch: int = 2, **changes: Any) -> Entry:
        """The model and a batch of `batch` rows; `changes` override the
        config (bench/symbolic.py: more positions for longer sequences)."""
        torch = _torch()
        import transformers

        cfg = getattr(transformers, config_name)(vocab_size=vocab, **{**config, **changes})
        model = getattr(transformers, model_name)(cfg).eval()
        ids, mask = _text_inputs(torch, vocab, batch=batch)
        return Entry(family, _HfOutputs(model, ("input_ids", "attention_mask")), (ids, mask),
                     ["input_ids", "attention_mask"])

    build.family = family  # type: ignore[attr-defined]
    return build


def _t5(batch: int = 2, decoder_length: int = 8, **changes: Any) -> Entry:
    """T5 (no position table: relative position buckets); `batch` rows of
    16 encoder tokens and `decoder_length` decoder tokens, `changes`
    override the config."""
    torch = _torch()
    from transformers import T5Config, T5Model

    cfg = T5Config(**{**dict(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                             num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                             decoder_start_token_id=0), **changes})
    model = T5Model(cfg).eval()
    ids, mask = _text_inputs(torch, 100, batch=batch)
    decoder = torch.randint(0, 100, (batch, decoder_length))
    return Entry("T5", _HfOutputs(model, ("input_ids", "attention_mask", "decoder_input_ids")), (ids, mask, decoder),
                 ["input_ids", "attention_mask", "decoder_input_ids"])


def _whisper(batch: int = 1, decoder_length: int = 6, **changes: Any) -> Entry:
    """Whisper: `batch` rows of 32 frames of 16 mel bins (the conv stem
    halves them to the 16 encoder positions, fixed) and `decoder_length`
    decoder tokens; `changes` override the config (max_target_positions:
    the decoder's position table)."""
    torch = _torch()
    from transformers import WhisperConfig, WhisperModel

    cfg = WhisperConfig(**{**dict(vocab_size=100, num_mel_bins=16, d_model=32, encoder_layers=1, decoder_layers=1,
                                  encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                  decoder_ffn_dim=64, max_source_positions=16, max_target_positions=16,
                                  pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1),
                           **changes})
    model = WhisperModel(cfg).eval()
    features = torch.randn(batch, 16, 32)
    decoder = torch.randint(0, 100, (batch, decoder_length))
    return Entry("Whisper", _HfOutputs(model, ("input_features", "decoder_input_ids")), (features, decoder),
                 ["input_features", "decoder_input_ids"])


for _builder, _family in ((_small_vit, "vision transformer"), (_small_swin, "vision transformer"),
                          (_small_maxvit, "vision transformer"), (_t5, "T5"), (_whisper, "Whisper")):
    _builder.family = _family  # type: ignore[attr-defined]

_BERT_SIZE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
              "max_position_embeddings": 64}

ZOO: dict[str, Callable[[], Entry]] = {
    "resnet18": _vision("resnet18", "CNN", 112),
    "mobilenet_v3_small": _vision("mobilenet_v3_small", "CNN", 112),
    "efficientnet_b0": _vision("efficientnet_b0", "CNN", 112),
    "squeezenet1_1": _vision("squeezenet1_1", "CNN", 112),
    "shufflenet_v2_x0_5": _vision("shufflenet_v2_x0_5", "CNN", 112),
    "regnet_y_400mf": _vision("regnet_y_400mf", "CNN", 112),
    "convnext_tiny": _vision("convnext_tiny", "CNN", 64),
    "googlenet": _vision("googlenet", "CNN", 112, aux_logits=False, init_weights=True),
    "inception_v3": _vision("inception_v3", "CNN", 299, aux_logits=False, init_weights=True),
    "lraspp_mobilenet_v3_large": _vision("lraspp_mobilenet_v3_large", "segmentation", 112, weights_backbone=None),
    "deeplabv3_mobilenet_v3_large": _vision("deeplabv3_mobilenet_v3_large", "segmentation", 112,
                                            weights_backbone=None, aux_loss=False),
    "fcn_resnet50": _vision("fcn_resnet50", "segmentation", 112, weights_backbone=None, aux_loss=False),
    "ssdlite320_mobilenet_v3_large": _vision("ssdlite320_mobilenet_v3_large", "detection", 320,
                                             weights_backbone=None),
    "vit": _small_vit,
    "swin": _small_swin,
    "maxvit": _small_maxvit,
    "bert": _hf("BertConfig", "BertModel", "BERT", **_BERT_SIZE),
    "distilbert": _hf("DistilBertConfig", "DistilBertModel", "BERT", dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                      max_position_embeddings=64),
    "gpt2": _hf("GPT2Config", "GPT2Model", "GPT-2", n_embd=32, n_layer=2, n_head=4, n_positions=64),
    "llama": _hf("LlamaConfig", "LlamaModel", "LLaMA", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64),
    "t5": _t5,
    "whisper": _whisper,
}


class _FirstTensors:
    """Wraps a torchvision model whose output is a dict (segmentation) or a
    list of dicts (detection) into one returning a tuple of tensors."""

    def __new__(cls, model: Any) -> Any:
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, x: Any) -> Any:
                out = self.inner(x)
                if isinstance(out, dict):
                    return tuple(out.values())
                if isinstance(out, list | tuple) and out and isinstance(out[0], dict):
                    return tuple(v for d in out for v in d.values())
                return out

        return Wrapped(model).eval()


class _HfOutputs:
    """Wraps a transformers model called with keyword inputs into one with
    positional inputs returning its tensors as a tuple (last hidden state
    first), the form both exporters take."""

    def __new__(cls, model: Any, keys: tuple[str, ...]) -> Any:
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, *args: Any) -> Any:
                out = self.inner(**dict(zip(keys, args, strict=True)), use_cache=False, return_dict=True)
                return tuple(v for v in out.values() if isinstance(v, torch.Tensor))

        return Wrapped(model).eval()


# ---------------------------------------------------------------------------
# Measuring one exported file
# ---------------------------------------------------------------------------


@dataclass
class Row:
    """What one (model, exporter) pair gave."""

    model: str
    family: str
    exporter: str
    export: str = "-"
    imported: str = "-"
    plan: str = "-"
    run: str = "-"
    match: str = "-"
    activation: str = "-"
    latency: str = "-"
    failure: str = ""

    def cells(self) -> list[str]:
        return [self.model, self.family, self.exporter, self.imported, self.plan, self.run, self.match,
                self.activation, self.latency]


def _line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:220]


def export(entry: Entry, exporter: str, path: Path) -> None:
    """Write `entry` to `path` with the classic (opset 17) or the dynamo
    (opset 18) exporter, quietly."""
    import torch

    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        if exporter == "classic":
            torch.onnx.export(entry.module, entry.inputs, str(path), input_names=entry.names, opset_version=17,
                              dynamo=False)
        else:
            torch.onnx.export(entry.module, entry.inputs, str(path), input_names=entry.names, opset_version=18,
                              dynamo=True)


def feeds_for(path: Path, entry: Entry) -> dict[str, np.ndarray]:
    """The example inputs by the exported graph's input names (an exporter
    may drop an input the graph does not read)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    by_name = {n: t.numpy() for n, t in zip(entry.names, entry.inputs, strict=True)}
    return {n: by_name[n] for n in names}


def tolerance_units(value: np.ndarray, reference: np.ndarray) -> float:
    """The largest elementwise |value - reference| in units of the tolerance
    ATOL + RTOL * |reference| (inf when the shapes differ)."""
    if value.shape != reference.shape:
        return float("inf")
    reference = reference.astype(np.float64)
    error = np.abs(value.astype(np.float64) - reference) / (ATOL + RTOL * np.abs(reference))
    return float(np.nanmax(error)) if error.size else 0.0


def float64_reference(entry: Entry) -> list[np.ndarray] | None:
    """The model's outputs computed by PyTorch in float64 (a copy of the
    module in double precision, float inputs widened), or None when the
    model will not run in double."""
    import copy

    import torch

    try:
        module = copy.deepcopy(entry.module).double()
        inputs = [t.double() if t.is_floating_point() else t for t in entry.inputs]
        with torch.no_grad():
            out = module(*inputs)
    except Exception:
        return None
    outs = out if isinstance(out, tuple | list) else (out,)
    return [o.detach().numpy() for o in outs if isinstance(o, torch.Tensor)]


def median_seconds(run: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def heap_counter(workdir: Path) -> Path | None:
    """bench/heapcount.c built into `workdir` (None without a C compiler)."""
    target = workdir / "heapcount.so"
    if not target.exists():
        done = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(target), str(HERE / "heapcount.c"), "-ldl"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return None
    return target


_ORT_HEAP = """
import ctypes, sys, numpy as np, onnxruntime as ort
model, npz, level = sys.argv[1:]
lib = ctypes.CDLL(None)
so = ort.SessionOptions(); so.enable_cpu_mem_arena = False; so.enable_mem_pattern = True
so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level); so.intra_op_num_threads = 1
so.log_severity_level = 3
sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
feeds = dict(np.load(npz))
sess.run(None, feeds); outs = sess.run(None, feeds); del outs
buf = (ctypes.c_longlong * 2)()
lib.heapcount_mark(); lib.heapcount_read(buf); before = buf[0]
outs = sess.run(None, feeds)
lib.heapcount_read(buf)
print(buf[1] - before - sum(o.nbytes for o in outs))
"""


def ort_activation_bytes(path: Path, feeds: dict[str, np.ndarray], workdir: Path) -> int | None:
    """onnxruntime's best heap growth during one run (see the module docstring)."""
    shim = heap_counter(workdir)
    if shim is None:
        return None
    npz = workdir / "feeds.npz"
    np.savez(npz, **feeds)
    best = None
    for level in ("ORT_ENABLE_ALL", "ORT_ENABLE_BASIC"):
        done = subprocess.run([sys.executable, "-c", _ORT_HEAP, str(path), str(npz), level],
                              env={**os.environ, "LD_PRELOAD": str(shim)}, capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            value = int(done.stdout.strip().splitlines()[-1])
            best = value if best is None else min(best, value)
    return best


def measure(name: str, entry: Entry, exporter: str, workdir: Path) -> Row:
    """One row: export, import, plan, run, compare."""
    import onnxruntime as ort

    import pyocc
    from pyocc.frontend.onnx_import import import_model

    row = Row(name, entry.family, exporter)
    path = workdir / f"{name}-{exporter}.onnx"
    try:
        export(entry, exporter, path)
        row.export = "ok"
    except Exception as e:  # an exporter failure is a finding, not a crash
        row.export, row.failure = "no", "export: " + _line(e)
        row.imported = "(export failed)"
        return row
    feeds = feeds_for(path, entry)
    try:
        import_model(path)
        row.imported = "ok"
        compiled = pyocc.compile(path, memory="pool")
        row.plan = "ok"
        got = compiled.run(feeds)
        row.run = "ok"
    except Exception as e:
        stage = "import" if row.imported == "-" else ("plan" if row.plan == "-" else "run")
        setattr(row, {"import": "imported", "plan": "plan", "run": "run"}[stage], "no")
        row.failure = f"{stage}: {_line(e)}"
        return row
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    worst = 0.0
    for value, want in zip(got.values(), expected, strict=True):
        if want.dtype.kind in "biu" and value.shape == want.shape:
            worst = max(worst, 0.0 if np.array_equal(value, want) else float("inf"))
        else:
            worst = max(worst, tolerance_units(value, want))
    magnitude = max((float(np.abs(w).max()) for w in expected if w.dtype.kind == "f" and w.size), default=0.0)
    # the largest |reference| says whether the comparison means anything (a
    # randomly initialised net may squash its output to ~0)
    row.match = f"{'yes' if worst <= 1.0 else 'no'} ({worst:.2g}; max abs {magnitude:.2g})"
    if worst > 1.0 and worst != float("inf"):
        reference = float64_reference(entry)
        if reference is not None and len(reference) == len(expected):
            ours64 = max(tolerance_units(v, r) for v, r in zip(got.values(), reference, strict=True))
            ort64 = max(tolerance_units(e, r) for e, r in zip(expected, reference, strict=True))
            row.match += f"; float64: pyocc {ours64:.2g}, ort {ort64:.2g}"
    ort_bytes = ort_activation_bytes(path, feeds, workdir)
    ours = compiled.report.activation_bytes
    if ort_bytes:
        row.activation = f"{ours / 2**20:.2f} / {ort_bytes / 2**20:.2f} MiB ({ours / ort_bytes:.2f}x)"
    else:
        row.activation = f"{ours / 2**20:.2f} MiB / -"
    pyocc_s = median_seconds(lambda: compiled.run(feeds))
    ort_s = median_seconds(lambda: session.run(None, feeds))
    row.latency = f"{pyocc_s / ort_s:.1f}x"
    return row


HEADER = ["model", "family", "exporter", "import", "plan", "run", "match ort (worst / tol; max abs ref)",
          "activation pyocc / ort best", "latency pyocc / ort"]


def measure_one(name: str, exporter: str) -> Row:
    """One row, in this process (the parent runs each in a fresh one)."""
    with tempfile.TemporaryDirectory(prefix="pyocc-zoo-") as tmp:
        try:
            entry = ZOO[name]()
        except Exception as e:
            return Row(name, ZOO[name].family, exporter, failure=f"build: {_line(e)}")
        return measure(name, entry, exporter, Path(tmp))


def measure_in_subprocess(name: str, exporter: str, timeout: int) -> Row:
    """One row from a fresh process: every model gets its own JIT and heap,
    a crash or a hang costs one row, not the table."""
    command = [sys.executable, __file__, "--one", name, "--exporters", exporter]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Row(name, ZOO[name].family, exporter, failure=f"timeout: no result in {timeout} s")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return Row(**json.loads(line))
    last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    return Row(name, ZOO[name].family, exporter, failure=f"crash (exit {done.returncode}): {last[:200]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(ZOO), help="comma-separated names (default: all)")
    parser.add_argument("--exporters", default="classic,dynamo", help="classic, dynamo or both")
    parser.add_argument("--timeout", type=int, default=900, help="seconds for one model and exporter")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one row as JSON
    args = parser.parse_args(argv)
    exporters = [e for e in args.exporters.split(",") if e]
    if args.one:
        print(json.dumps(dataclasses.asdict(measure_one(args.one, exporters[0]))))
        return 0
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        parser.error(f"unknown models {unknown}; choose from {', '.join(ZOO)}")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    failures: list[str] = []
    started = time.perf_counter()
    for name in names:
        for exporter in exporters:
            row = measure_in_subprocess(name, exporter, args.timeout)
            print("| " + " | ".join(row.cells()) + " |", flush=True)
            if row.failure:
                failures.append(f"- {name} ({exporter}): {row.failure}")
    print()
    print("What stopped a row (one line each):" if failures else "Every row ran.")
    print("\n".join(failures))
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())

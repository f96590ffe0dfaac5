"""The `pyocc` command: plan, run and compile, and one clear line for each
user mistake."""

from __future__ import annotations

import functools
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from pyocc.examples.tiny_cnn import build as tiny_cnn
from tests.conftest import light_model_path
from tests.tools.inprocess import run_tool

PYOCC = str(Path(sys.executable).with_name("pyocc"))
PYOCC_OPT = str(Path(sys.executable).with_name("pyocc-opt"))


def pyocc(*args: str) -> subprocess.CompletedProcess:
    """`pyocc ARGS` in this process (tests/tools/inprocess.py): its exit
    status, stdout and stderr, without a second of start-up."""
    return run_tool("pyocc", *args)


def pyocc_process(*args: str) -> subprocess.CompletedProcess:
    """`pyocc ARGS` as a real process, for the tests of the console script
    itself (it exists, it starts light, its errors reach the terminal as one
    line)."""
    return subprocess.run([PYOCC, *args], capture_output=True, text=True, timeout=600)


def plan_json(*args: str) -> dict:
    """`pyocc plan ARGS --format json`'s report (a fresh copy each call),
    the command run once per ARGS in this process: several tests read the
    same plan of SqueezeNet."""
    return json.loads(_plan_json_text(*args))


@functools.cache
def _plan_json_text(*args: str) -> str:
    result = pyocc("plan", *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tutorial's tiny CNN as a file: for the tests of what the command
    does with its options and mistakes, which no model's size changes
    (SqueezeNet took each such command 3-5 s of import and planning)."""
    path = tmp_path_factory.mktemp("model") / "tiny_cnn.onnx"
    onnx.save(tiny_cnn(), str(path))
    return str(path)


def test_plan_json_has_the_report_fields() -> None:
    report = plan_json(str(light_model_path("squeezenet")))
    for key in ("model", "memory", "planner", "activation_bytes", "lower_bound_bytes", "tensor_lower_bound_bytes",
                "naive_bytes", "weight_bytes", "io_bytes", "workspace_bytes", "plan_ms", "buffers"):
        assert key in report
    # the lower bound is the buffers' (after coalescing): the pool never goes
    # below it; coalescing can take it below the tensors' bound
    assert report["lower_bound_bytes"] <= report["activation_bytes"] < report["naive_bytes"]
    assert report["lower_bound_bytes"] <= report["tensor_lower_bound_bytes"]


def test_the_lower_bound_is_never_above_a_plan_that_reaches_it() -> None:
    """ResNet-50: coalescing takes the buffers' bound (the pool) well below
    the tensors' bound; the report calls the first the lower bound."""
    report = json.loads(pyocc("plan", str(light_model_path("resnet50")), "--format", "json").stdout)
    assert report["activation_bytes"] == report["lower_bound_bytes"] < report["tensor_lower_bound_bytes"]
    text = pyocc("plan", str(light_model_path("resnet50"))).stdout
    line = next(line for line in text.splitlines() if line.startswith("lower bound"))
    assert f"{report['lower_bound_bytes']:,d} B" in line and "after coalescing" in line


def test_run_with_inputs_and_saved_outputs(tmp_path: Path, tiny_model: str) -> None:
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "out.npz"
    lazy = pyocc("run", tiny_model, "--inputs", str(tmp_path / "in.npz"), "--save-outputs", str(out),
                 "--memory", "lazy")
    assert lazy.returncode == 0, lazy.stderr
    first = np.load(out)["y"]
    pool = pyocc("run", tiny_model, "--inputs", str(tmp_path / "in.npz"), "--save-outputs", str(out),
                 "--memory", "pool")
    assert pool.returncode == 0, pool.stderr
    np.testing.assert_allclose(np.load(out)["y"], first, rtol=1e-5, atol=1e-7)


def test_compile_target_cuda_writes_host_code_without_a_gpu(tmp_path: Path, tiny_model: str) -> None:
    """Writing the GPU host code needs no GPU: no cudaMalloc per run in pool
    mode (init allocates the pool), one with --pool-allocation run, one per
    buffer in lazy mode, each op a library call."""
    model = tiny_model
    counts = {}
    for memory, flags in (("pool", []), ("pool-run", ["--pool-allocation", "run"]), ("lazy", [])):
        out = tmp_path / f"{memory}.ll"
        result = pyocc("compile", model, "--target", "cuda", "--memory", memory.split("-")[0], *flags,
                       "-o", str(out))
        assert result.returncode == 0, result.stderr
        text = out.read_text()
        run = text[text.index('define i32 @"main_graph_run"'):]
        run = run[:run.index("\n}\n")]
        counts[memory] = run.count('@"cudaMalloc"')
        assert run.count('@"cudaFree"') == counts[memory]
        assert '@"cudnnConvolutionBiasActivationForward"' in run and '@"cudnnPoolingForward"' in run
    lazy = plan_json(model, "--target", "cuda", "--memory", "lazy")
    assert counts["pool"] == 0 and counts["pool-run"] == 1 and counts["lazy"] == len(lazy["buffers"]) > 5


def test_plan_reports_pool_allocations_per_run_and_at_init() -> None:
    model = str(light_model_path("squeezenet"))
    once = plan_json(model, "--target", "cuda")
    per_run = plan_json(model, "--target", "cuda", "--pool-allocation", "run")
    host = plan_json(model)
    assert (once["allocator_calls_per_run"], once["allocator_calls_at_init"]) == (0, 1)
    assert (per_run["allocator_calls_per_run"], per_run["allocator_calls_at_init"]) == (1, 0)
    assert (host["allocator_calls_per_run"], host["allocator_calls_at_init"]) == (1, None)


def test_plan_target_cuda_stages_io_through_device_buffers() -> None:
    host = plan_json(str(light_model_path("squeezenet")))
    cuda = plan_json(str(light_model_path("squeezenet")), "--target", "cuda")
    # the input and output copies are device buffers, planned like the rest,
    # and so is each convolution's cuDNN workspace
    scratch = [b for b in cuda["buffers"] if b["name"].startswith("scratch")]
    convs = sum(1 for n in onnx.load(str(light_model_path("squeezenet"))).graph.node if n.op_type == "Conv")
    assert len(scratch) == convs and all(b["bytes"] == 1 << 20 for b in scratch)  # the default --workspace, 1 MiB
    # the host's own kernel scratch (im2col blocks, `<result>_scratch`) is not the cuda flow's
    host_tensors = [b for b in host["buffers"] if not b["name"].endswith("_scratch")]
    assert len(host_tensors) < len(host["buffers"])
    assert len(cuda["buffers"]) == len(host_tensors) + 2 + len(scratch)


def test_versions() -> None:
    from pyocc import __version__

    assert pyocc_process("--version").stdout.strip() == f"pyocc {__version__}"
    opt = subprocess.run([PYOCC_OPT, "-v"], capture_output=True, text=True)
    assert opt.stdout.startswith(f"pyocc-opt {__version__} (pyocc), built on xdsl version 0.75"), opt.stdout


def test_version_and_help_start_without_the_compiler() -> None:
    """`pyocc --version` (and --help, and a mistyped option) imports neither
    xDSL, onnx nor llvmlite: the commands' module loads only for a command."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "pyocc.tools.cli", "--version"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.startswith("pyocc "), run.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "pyocc.planning" in imported  # the check reads real -X importtime lines
    heavy = sorted(name for name in imported if name.split(".")[0] in ("xdsl", "onnx", "llvmlite")
                   or name == "pyocc.tools.commands")
    assert not heavy, f"pyocc --version imports {heavy}"


def test_pyocc_opt_help_lists_pyoccs_passes_first() -> None:
    from pyocc.registry import PYOCC_PASSES

    text = subprocess.run([PYOCC_OPT, "--help"], capture_output=True, text=True).stdout
    ours = text.index("pyocc's passes and pipelines")
    for name in PYOCC_PASSES:
        assert f"\n  {name} " in text[ours:], name
    # xDSL's own passes come after the options, not before pyocc's
    assert text.index("canonicalize") > text.rindex("--shape") > ours


def test_run_help_lists_the_planners_and_an_example() -> None:
    from pyocc.planning import ALGORITHMS

    text = "".join(pyocc("run", "--help").stdout.split())  # argparse wraps lines at hyphens
    assert all(name in text for name in ALGORITHMS)
    assert "examples:pyoccrunmodel.onnx" in text


def test_compile_names_the_weights_file(tmp_path: Path, tiny_model: str) -> None:
    result = pyocc("compile", tiny_model, "-o", str(tmp_path / "m.so"))
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first == f"wrote {tmp_path / 'm.so'} and {tmp_path / 'm.weights'} (its weights: keep the two together)"
    # the file holds the compiled model's weights (the folded ones: 4,392 B of the tiny CNN's)
    assert (tmp_path / "m.weights").stat().st_size >= plan_json(tiny_model)["weight_bytes"] > 4_000


def test_plan_format_follows_the_output_suffix(tmp_path: Path, tiny_model: str) -> None:
    model = tiny_model
    for name, starts in [("plan.html", "<!DOCTYPE html>"), ("plan.svg", "<svg "), ("plan.json", "{"),
                         ("plan.txt", "model "), ("plan", "model ")]:
        result = pyocc("plan", model, "-o", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        assert (tmp_path / name).read_text().startswith(starts), name
    assert json.loads((tmp_path / "plan.json").read_text())["model"] == "tiny_cnn.onnx"


def test_plan_does_not_write_a_picture_to_a_terminal(tmp_path: Path, tiny_model: str) -> None:
    """--format html|svg without -o: refused on a terminal, written to a pipe."""
    leader, follower = pty.openpty()
    try:
        done = subprocess.run([PYOCC, "plan", tiny_model, "--format", "html"],
                              stdout=follower, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 1
    assert done.stderr.strip() == ("pyocc: error: --format html writes a picture, not text for the terminal; "
                                   "give -o plan.html (or pipe it: ... > plan.html)")
    piped = pyocc("plan", tiny_model, "--format", "svg")
    assert piped.returncode == 0 and piped.stdout.startswith("<svg "), piped.stderr


@pytest.mark.parametrize("args, message", [
    (["run", "missing.onnx"], "missing.onnx: no such file"),
    (["compile", "MODEL", "-o", "model.exe"], "unknown output kind '.exe'"),
    (["plan", "MODEL", "--planner", "magic"], "unknown planner 'magic'"),
    (["run", "MODEL", "--inputs", "nothing.npz"], "nothing.npz: cannot read inputs"),
    (["run", "MODEL", "--target", "cuda"], "target cuda needs an NVIDIA GPU"),
    (["compile", "MODEL", "--target", "cuda", "-o", "model.so"], "target cuda writes LLVM IR (.ll) only"),
    (["run", "MODEL", "--target", "cuda", "--sanitize"], "the sanitizer runs on the host only"),
    (["plan", "MODEL", "--pool-allocation", "init"], "pool allocation 'init' is for target cuda"),
])
def test_user_errors_are_one_line(args: list[str], message: str, tmp_path: Path, tiny_model: str) -> None:
    args = [tiny_model if a == "MODEL" else a for a in args]
    args = [str(tmp_path / a) if a.endswith((".exe", ".npz", ".so")) else a for a in args]
    result = (pyocc_process if args[0] == "compile" and "--target" not in args else pyocc)(*args)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not any(tmp_path.iterdir())

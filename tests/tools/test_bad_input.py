"""Every bad input the user can give gets one clear line and a non-zero exit,
and nothing is written half-way. One row per mistake; docs/guide.md's
troubleshooting table lists the same messages.

(The file-level mistakes that the frontend tests already cover, such as a
missing, truncated or non-ONNX file, an unknown op or domain and a dynamic
dimension, are in tests/frontend/test_onnx_import.py.)
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.tools.inprocess import run_tool

BIN = Path(sys.executable).parent
X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


def save(path: Path, nodes: list, inputs: list | None = None, inits: list | None = None) -> None:
    """Write a one-graph opset-17 model (checked by onnx only when valid)."""
    graph = helper.make_graph(nodes, "g", inputs or [X], [Y], inits or [])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def relu(path: Path) -> None:
    save(path, [helper.make_node("Relu", ["x"], ["y"])])


def relu_chain(path: Path) -> None:
    """Two intermediates of 768 bytes each before the output."""
    save(path, [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
                helper.make_node("Relu", ["b"], ["y"])])


def conv_pool(path: Path) -> None:
    """conv 3x3 -> relu -> max_pool: a stem that patch-based execution shrinks."""
    w = numpy_helper.from_array(np.full((8, 3, 3, 3), 0.1, np.float32), "w")
    save(path, [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c"], ["r"]),
                helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                helper.make_node("Relu", ["p"], ["y"])], inits=[w])


def unsupported_attribute(path: Path) -> None:
    save(path, [helper.make_node("Relu", ["x"], ["y"], foo=1)])


def inconsistent_shapes(path: Path) -> None:
    w = numpy_helper.from_array(np.ones((4, 5, 3, 3), np.float32), "w")
    save(path, [helper.make_node("Conv", ["x", "w"], ["y"])], inits=[w])


def incompatible_broadcast(path: Path) -> None:
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 8, 8])
    save(path, [helper.make_node("Add", ["x", "z"], ["y"])], inputs=[X, z])


def zero_sized(path: Path) -> None:
    save(path, [helper.make_node("Relu", ["x"], ["y"])],
         inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 0, 8])])


def absurdly_large(path: Path) -> None:
    save(path, [helper.make_node("Relu", ["x"], ["y"])],
         inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**31, 2**31, 2**31])])


def data_dependent_nonzero(path: Path) -> None:
    """NonZero of an activation: as many indices as there are non-zeros."""
    save(path, [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["y"], name="nz")])


def data_dependent_if(path: Path) -> None:
    """An If whose branches give a 2-element and a 3-element tensor, picked
    by a condition computed from the input (as torchvision's detection
    models export a box count check)."""
    def branch(name: str, values: list[float]) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(name, TensorProto.FLOAT, [len(values)])
        const = helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.float32)))
        return helper.make_graph([const], name, [], [out])

    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="pick", then_branch=branch("two", [1.0, 2.0]),
                              else_branch=branch("three", [1.0, 2.0, 3.0]))]
    save(path, nodes, inits=[numpy_helper.from_array(np.array(0.0, np.float32), "zero")])


def symbolic_topk(path: Path) -> None:
    """x [1, "sequence"] into TopK, which has no symbolic shape rule."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence"])
    save(path, [helper.make_node("TopK", ["x", "k"], ["y", "i"], name="top", axis=-1)], inputs=[x],
         inits=[numpy_helper.from_array(np.array([2], np.int64), "k")])


def shared_symbol(path: Path) -> None:
    """x and mask [1, "sequence"], added: one dimension, one value."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence"])
    mask = helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, "sequence"])
    save(path, [helper.make_node("Add", ["x", "mask"], ["y"])], inputs=[x, mask])


def malformed_mlir(path: Path) -> None:
    path.write_text("func.func @f( {\n")


def two_inputs(path: Path) -> None:
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 3, 8, 8])
    save(path, [helper.make_node("Add", ["x", "z"], ["y"])], inputs=[X, z])


def npy(array: np.ndarray) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        np.save(path, array)
    return write


def npz(**arrays: np.ndarray) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        np.savez(path, **arrays)
    return write


GOOD = np.zeros((1, 3, 8, 8), np.float32)

# name: (model maker, command with MODEL / ARG / OUT placeholders, file maker for ARG, expected message)
CASES = {
    "unsupported attribute": (unsupported_attribute, ["pyocc", "run", "MODEL", "--save-outputs", "OUT"], None,
                              "Relu node 'y': attribute 'foo' is not supported by pyocc"),
    "inconsistent shapes": (inconsistent_shapes, ["pyocc", "run", "MODEL", "--save-outputs", "OUT"], None,
                            "the model is inconsistent: onnx.Conv: input channels 3 must equal weight channels 5"),
    "incompatible broadcast": (incompatible_broadcast, ["pyocc", "plan", "MODEL", "-o", "OUT"], None,
                               "ONNX shape inference failed"),
    "zero-sized tensor": (zero_sized, ["pyocc", "compile", "MODEL", "-o", "OUT.so"], None,
                          "graph input 'x' has a zero-sized dimension 1"),
    "data-dependent shape (NonZero)": (
        data_dependent_nonzero, ["pyocc", "compile", "MODEL", "-o", "OUT.so"], None,
        "NonZero at node 'nz' has an output shape that depends on the input data (the number of non-zero "
        "elements); pyocc plans static shapes only"),
    "data-dependent shape (If)": (
        data_dependent_if, ["pyocc", "plan", "MODEL", "-o", "OUT"], None,
        "If at node 'pick' has an output shape that depends on the input data (its branches give outputs of "
        "different shapes, and a value computed at run time picks one); pyocc plans static shapes only"),
    "absurdly large tensor": (absurdly_large, ["pyocc", "plan", "MODEL", "-o", "OUT"], None,
                              "tensor 'x' (shape 2147483648x2147483648x2147483648) would take"),
    "npz missing an input": (relu, ["pyocc", "run", "MODEL", "--inputs", "ARG", "--save-outputs", "OUT"],
                             npz(z=GOOD), "missing ['x']"),
    "npz with an extra input": (relu, ["pyocc", "run", "MODEL", "--inputs", "ARG", "--save-outputs", "OUT"],
                                npz(x=GOOD, z=GOOD), "unknown ['z']"),
    "npz with a wrong shape": (relu, ["pyocc", "run", "MODEL", "--inputs", "ARG", "--save-outputs", "OUT"],
                               npz(x=np.zeros((1, 3, 8, 9), np.float32)),
                               "input 'x' has shape [1, 3, 8, 9], the model takes [1, 3, 8, 8]"),
    "npz with a wrong dtype": (relu, ["pyocc", "run", "MODEL", "--inputs", "ARG", "--save-outputs", "OUT"],
                               npz(x=GOOD.astype(np.int64)),
                               "model.onnx: input 'x' has dtype int64, the model takes float32"),
    "model over --memory-limit": (relu_chain, ["pyocc", "run", "MODEL", "--memory", "eager", "--no-coalesce",
                                                "--memory-limit", "1KiB", "--save-outputs", "OUT"], None,
                                  "needs 1,536 bytes of activation memory in eager mode, more than the limit of 1,024"),
    "unreadable --memory-limit": (relu, ["pyocc", "plan", "MODEL", "--memory-limit", "lots", "-o", "OUT"], None,
                                  "argument --memory-limit: size 'lots' must be a number of bytes"),
    "unreadable --max-extra-macs": (relu, ["pyocc", "plan", "MODEL", "--max-extra-macs", "lots", "-o", "OUT"], None,
                                    "argument --max-extra-macs: 'lots' must be a non-negative ratio"),
    "tiling on cuda": (conv_pool, ["pyocc", "plan", "MODEL", "--target", "cuda", "--memory-limit", "min", "-o", "OUT"],
                       None, "patch-based execution (tiling) runs on the host only for now"),
    "command line option that does not exist": (relu, ["pyocc", "plan", "MODEL", "--colour", "red", "-o", "OUT"], None,
                                                "unrecognized arguments: --colour red"),
    "pass option that does not exist": (relu, ["pyocc-opt", "MODEL", "-p", "dnn-insert-memory-ops{colour=red}", "-o", "OUT"],
                                        None, "not found in expected arguments"),
    "pass option with a wrong value": (relu, ["pyocc-opt", "MODEL", "-p",
                                              "convert-onnx-to-dnn,dnn-insert-memory-ops{mode=sometimes}", "-o", "OUT"],
                                       None, "mode must be 'eager' or 'lazy', got 'sometimes'"),
    "pass that does not exist": (relu, ["pyocc-opt", "MODEL", "-p", "no-such-pass", "-o", "OUT"], None,
                                 "unknown pass 'no-such-pass' (pyocc-opt --help lists the passes)"),
    "mistyped pass": (relu, ["pyocc-opt", "MODEL", "-p", "convert-onnx-to-dnn,dnn-fusee", "-o", "OUT"], None,
                      "unknown pass 'dnn-fusee'; did you mean 'dnn-fuse'?"),
    "malformed pass pipeline": (relu, ["pyocc-opt", "MODEL", "-p", "dnn-fuse{", "-o", "OUT"], None,
                                "-p 'dnn-fuse{': Expected argument name here (column 10)"),
    "compile into a folder that does not exist (.o)": (relu, ["pyocc", "compile", "MODEL", "-o", "MISSING/m.o"], None,
                                                       "does not exist; create it first or write elsewhere"),
    "compile into a folder that does not exist (.ll)": (relu, ["pyocc", "compile", "MODEL", "-o", "MISSING/m.ll"], None,
                                                        "does not exist; create it first or write elsewhere"),
    "compile into a folder that does not exist (.so)": (relu, ["pyocc", "compile", "MODEL", "-o", "MISSING/m.so"], None,
                                                        "does not exist; create it first or write elsewhere"),
    "outputs saved into a folder that does not exist": (relu, ["pyocc", "run", "MODEL", "--save-outputs", "MISSING/o.npz"],
                                                        None, "does not exist; create it first or write elsewhere"),
    "pyocc-opt into a folder that does not exist": (relu, ["pyocc-opt", "MODEL", "-o", "MISSING/t.mlir"], None,
                                                    "does not exist; create it first or write elsewhere"),
    ".npy for a model with two inputs": (two_inputs, ["pyocc", "run", "MODEL", "--inputs", "ARG.npy", "--save-outputs", "OUT"],
                                         npy(GOOD), "an .npy file holds one array, but the model takes 2 inputs (x, z)"),
    ".npy with a wrong shape": (relu, ["pyocc", "run", "MODEL", "--inputs", "ARG.npy", "--save-outputs", "OUT"],
                                npy(np.zeros(3, np.float32)), "the model takes [1, 3, 8, 8]"),
    "inputs file that is not numpy": (relu, ["pyocc", "run", "MODEL", "--inputs", "ARG.npy", "--save-outputs", "OUT"],
                                      lambda path: path.write_text("hello"), "cannot read inputs"),
    "plan in a format that does not fit the suffix": (relu, ["pyocc", "plan", "MODEL", "--format", "svg", "-o", "OUT.png"],
                                                      None, "--format svg writes svg, not '.png'"),
    "plan into a file of a kind it cannot write": (relu, ["pyocc", "plan", "MODEL", "-o", "OUT.png"], None,
                                                   "pyocc plan cannot write '.png' files"),
    "plan --explain into an .html file": (relu, ["pyocc", "plan", "MODEL", "--explain", "-o", "OUT.html"], None,
                                          "--explain writes text, not '.html'"),
    "pass before the one that makes its form": (relu, ["pyocc-opt", "MODEL", "-p", "dnn-fuse", "-o", "OUT"], None,
                                                "dnn-fuse needs tensor-form dnn, which convert-onnx-to-dnn produces"),
    "pool without memory ops": (relu_chain, ["pyocc-opt", "MODEL", "-p", "convert-onnx-to-dnn,dnn-memory-pool", "-o", "OUT"],
                                None, "dnn-memory-pool needs buffer-form dnn (dnn.malloc/dnn.dealloc), which "
                                      "dnn-insert-memory-ops produces"),
    "lowering before the memory ops": (relu_chain, ["pyocc-opt", "MODEL", "-p", "convert-onnx-to-dnn,convert-dnn-to-llvm",
                                                    "-o", "OUT"], None,
                                       "convert-dnn-to-llvm needs buffer-form dnn (dnn.malloc/dnn.dealloc) or a planned "
                                       "pool (dnn.pool_init/dnn.mem_offset), which dnn-insert-memory-ops produces"),
    "no threads": (relu, ["pyocc", "compile", "MODEL", "--threads", "0", "-o", "OUT.so"], None,
                   "'0' must be a whole number of threads from 1 to 256"),
    "threads on the GPU target": (relu, ["pyocc", "compile", "MODEL", "--target", "cuda", "--threads", "2",
                                         "-o", "OUT.ll"], None,
                                  "threads applies to the host target; drop --threads with --target cuda"),
    "op without a symbolic shape rule": (symbolic_topk, ["pyocc", "plan", "MODEL", "--dim", "sequence=8", "-o", "OUT"],
                                         None, "model.onnx: symbolic shape inference: TopK at node 'top' has no "
                                               "symbolic shape rule"),
    "--shape fixes a symbol --dim keeps": (shared_symbol, ["pyocc", "plan", "MODEL", "--dim", "sequence=512",
                                                          "--shape", "x=1x600", "-o", "OUT"], None,
                                           "--shape x=... fixes 'sequence', which --dim sequence=MAX keeps symbolic "
                                           "for mask"),
    "malformed MLIR text": (malformed_mlir, ["pyocc-opt", "MODEL", "-o", "OUT"], None,
                            "model.mlir:1:15: Expected argument or type"),
}


#: the cases also run as real processes (one or more per tool): the console
#: scripts exist and no traceback reaches the terminal; every case runs in
#: this process (tests/tools/inprocess.py), which asserts the same
IN_A_PROCESS = ("command line option that does not exist", "compile into a folder that does not exist (.so)",
                "malformed MLIR text", "pass before the one that makes its form")


@pytest.mark.parametrize("case, in_a_process", [(case, False) for case in CASES] + [(case, True) for case in IN_A_PROCESS],
                         ids=[*CASES, *(f"{case} (subprocess)" for case in IN_A_PROCESS)])
def test_bad_input_is_one_line(case: str, in_a_process: bool, tmp_path: Path) -> None:
    make_model, command, make_arg, message = CASES[case]
    model = tmp_path / ("model.mlir" if make_model is malformed_mlir else "model.onnx")
    make_model(model)
    places = {"MODEL": str(model), "ARG": str(tmp_path / "arg.npz"), "ARG.npy": str(tmp_path / "arg.npy"),
              "OUT": str(tmp_path / "out")}
    places |= {a: str(tmp_path / f"out{a[3:]}") for a in command if a.startswith("OUT.")}
    if make_arg is not None:
        make_arg(Path(places["ARG.npy" if "ARG.npy" in command else "ARG"]))
    # MISSING/...: a file in a folder that does not exist
    command = [str(BIN / command[0]), *(places.get(a, a.replace("MISSING", str(tmp_path / "MISSING")))
                                        for a in command[1:])]
    before = set(tmp_path.iterdir())
    if in_a_process:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    else:
        done = run_tool(*command)
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert message in lines[0], lines[0]
    assert set(tmp_path.iterdir()) == before, "a file was written although the command failed"

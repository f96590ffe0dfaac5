# RUN: %python %s %t
# RUN: filecheck %s --check-prefix=LLVM --input-file %t.llvm
# RUN: filecheck %s --check-prefix=FALLBACK --input-file %t.fallback
# Generated code for a symbolic program (pyocc.lowering.symbolic_native):
# a one-head attention block on x [1, "sequence", 8] (an ONNX dim_param).
# `llvm` prints the LLVM IR: the run function reads the symbol's value from
# its fifth argument, computes the buffers' offsets and the pool size from
# it, allocates the pool once, and calls each kernel with the buffer
# pointers and then the value; a kernel with run-time shapes reads the value
# from its buffer array and computes its trip counts from it; a value out
# of range returns 2 before the pool is allocated. Negative:
# `fallback`, a CumSum (no native kernel) makes the program run the numpy
# kernels, with one line saying why.
import contextlib
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from pyocc.api import lower_symbolic
from pyocc.lowering.symbolic_native import NotNativeProgram, build_symbolic_native
from pyocc.weights import isolated_store

rng = np.random.default_rng(0)


def model(normalise: str):
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "xt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1) if normalise == "Softmax"
        else helper.make_node("CumSum", ["scores", "last"], ["p"]),
        helper.make_node("MatMul", ["p", "x"], ["out"]),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "wq"),
             numpy_helper.from_array(np.array(-1, np.int64), "last")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence", 8])
    graph = helper.make_graph(nodes, "attention", [x], [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def generate(normalise: str):
    lowered = lower_symbolic(model(normalise), {"sequence": 64})
    return build_symbolic_native("attention", lowered.runner.steps, lowered.runner.weights, lowered.plan)


def llvm_mode() -> None:
    print(generate("Softmax").llvm_ir)


def fallback_mode() -> None:
    try:
        generate("CumSum")
    except NotNativeProgram as e:
        print(f"not native: {e}")


# One process writes each mode's output to its own file (%t.MODE), one
# filecheck prefix per file: the modes share the import of pyocc (1.5 s of
# CPU each). Each mode runs with an empty weights store and a fresh random
# generator, as in a process of its own.
for name, run in {"llvm": llvm_mode, "fallback": fallback_mode}.items():
    rng = np.random.default_rng(0)
    with open(f"{sys.argv[1]}.{name}", "w") as f, contextlib.redirect_stdout(f), isolated_store():
        run()

# LLVM-LABEL: define internal void @"attention_site_{{[0-9]+}}"(ptr
# LLVM:       ptrtoint ptr
# LLVM:       define i32 @"attention_run"(ptr %{{.*}}, ptr %{{.*}}, ptr %{{.*}}, ptr %{{.*}}, ptr %[[SYMBOLS:.*]])
# LLVM-NEXT:  {
# LLVM-NEXT:  entry:
# LLVM-NEXT:    %[[SLOT:.*]] = getelementptr inbounds ptr, ptr %[[SYMBOLS]], i64 0
# LLVM-NEXT:    %[[RAW:.*]] = load ptr, ptr %[[SLOT]]
# LLVM-NEXT:    %[[S:.*]] = ptrtoint ptr %[[RAW]] to i64
# LLVM:         mul i64 {{[0-9]+}}, %[[S]]
# LLVM:         icmp slt i64 %[[S]], 1
# LLVM-NEXT:    icmp sgt i64 %[[S]], 64
# LLVM:         ret i32 2
# LLVM:         %[[POOL:.*]] = call ptr @"pyocc_alloc"(i64 64, i64 %{{.*}})
# LLVM:         icmp eq ptr %[[POOL]], null
# LLVM:         %[[VALUE:.*]] = inttoptr i64 %[[S]] to ptr
# LLVM:         getelementptr inbounds i8, ptr %[[POOL]], i64 %{{.*}}
# LLVM:         store ptr %[[VALUE]]
# LLVM:         call void @"attention_site_{{[0-9]+}}"(ptr
# LLVM:         call void @"pyocc_free"(ptr %[[POOL]])
# LLVM:         ret i32 0
# The shared library's functions (C ABI version 2): the inputs' and outputs'
# byte sizes at the symbols' values (x and out: 32*sequence), and the table.
# LLVM:       define void @"attention_tensor_bytes"(ptr %[[VALUES:.*]], ptr %[[BYTES:.*]])
# LLVM:         %[[SLOT2:.*]] = getelementptr inbounds ptr, ptr %[[VALUES]], i64 0
# LLVM:         %[[S2:.*]] = ptrtoint ptr
# LLVM-NEXT:    %[[SIZE:.*]] = mul i64 32, %[[S2]]
# LLVM:         getelementptr inbounds i64, ptr %[[BYTES]], i64 0
# LLVM-NEXT:    store i64 %[[SIZE]]
# LLVM:         getelementptr inbounds i64, ptr %[[BYTES]], i64 1
# LLVM-NEXT:    store i64 %[[SIZE]]
# LLVM:       c"{\22abi\22:2,{{.*}}\22symbols\22:[{\22name\22:\22sequence\22,\22min\22:1,\22max\22:64}],{{.*}}\22shape\22:[1,\22sequence\22,8]
# LLVM:       define ptr @"attention_meta"()
# LLVM:       define ptr @"pyocc_functions"()

# FALLBACK: not native: the cum_sum kernel of 1x64x64, 1x64x64 has no native kernel that computes it

// Every pass checks the form of its input first (pyocc/analysis/ir_form.py):
// IR of another form is one line naming the form it needs and the pass that
// produces it, never a silent no-op.
// RUN: pyocc-opt %s -p "convert-onnx-to-dnn,dnn-fuse,dnn-reorder,dnn-insert-memory-ops,dnn-coalesce,dnn-sanitize,dnn-memory-pool" | filecheck %s
// RUN: not pyocc-opt %s -p dnn-fuse 2>&1 | filecheck %s --check-prefix=FUSE
// RUN: not pyocc-opt %s -p dnn-reorder 2>&1 | filecheck %s --check-prefix=REORDER
// RUN: not pyocc-opt %s -p "convert-onnx-to-dnn,dnn-memory-pool" 2>&1 | filecheck %s --check-prefix=POOL
// RUN: not pyocc-opt %s -p "convert-onnx-to-dnn,dnn-sanitize" 2>&1 | filecheck %s --check-prefix=SANITIZE
// RUN: not pyocc-opt %s -p "convert-onnx-to-dnn,convert-onnx-to-dnn" 2>&1 | filecheck %s --check-prefix=TWICE
// RUN: not pyocc-opt %s -p "convert-onnx-to-dnn,dnn-insert-memory-ops,dnn-fuse" 2>&1 | filecheck %s --check-prefix=LATE
// RUN: not pyocc-opt %s -p "convert-onnx-to-dnn,convert-dnn-to-llvm" 2>&1 | filecheck %s --check-prefix=LLVM
// RUN: not pyocc-opt %s -p "convert-onnx-to-dnn,dnn-cuda-scratch" 2>&1 | filecheck %s --check-prefix=SCRATCH
// RUN: not pyocc-opt %s -p "convert-onnx-to-dnn,dnn-insert-memory-ops,dnn-memory-pool,dnn-cuda-scratch" 2>&1 | filecheck %s --check-prefix=SCRATCH-LATE
// RUN: not pyocc-opt %s -p dnn-tile 2>&1 | filecheck %s --check-prefix=TILE
// RUN: not pyocc-opt %s -p dnn-print-liveness 2>&1 | filecheck %s --check-prefix=LIVENESS
// RUN: not pyocc-opt %s -p "convert-onnx-to-dnn,dnn-verify-lifetimes" 2>&1 | filecheck %s --check-prefix=LIFETIMES
// RUN: pyocc-opt %s -p "convert-onnx-to-dnn,dnn-print-liveness,dnn-insert-memory-ops,dnn-cuda-scratch,dnn-verify-lifetimes,dnn-memory-pool,dnn-verify-lifetimes,convert-dnn-to-llvm" | filecheck %s --check-prefix=LOWERED

// The whole flow in order: each pass meets the form it needs.
// CHECK-LABEL: func.func @relu_chain
// CHECK: dnn.pool_init
// CHECK: dnn.mem_offset

// FUSE: pyocc-opt: error: dnn-fuse needs tensor-form dnn, which convert-onnx-to-dnn produces, but @relu_chain is in the onnx dialect; run convert-onnx-to-dnn first
// REORDER: pyocc-opt: error: dnn-reorder needs tensor-form dnn, which convert-onnx-to-dnn produces, but @relu_chain is in the onnx dialect; run convert-onnx-to-dnn first
// POOL: pyocc-opt: error: dnn-memory-pool needs buffer-form dnn (dnn.malloc/dnn.dealloc), which dnn-insert-memory-ops produces, but @relu_chain is in tensor-form dnn; run dnn-insert-memory-ops first
// SANITIZE: pyocc-opt: error: dnn-sanitize needs buffer-form dnn (dnn.malloc/dnn.dealloc), which dnn-insert-memory-ops produces, but @relu_chain is in tensor-form dnn; run dnn-insert-memory-ops first
// TWICE: pyocc-opt: error: convert-onnx-to-dnn needs the onnx dialect, which the ONNX frontend produces, but @relu_chain is in tensor-form dnn; it has run already
// LATE: pyocc-opt: error: dnn-fuse needs tensor-form dnn, which convert-onnx-to-dnn produces, but @relu_chain is in buffer-form dnn (dnn.malloc/dnn.dealloc); run dnn-fuse before dnn-insert-memory-ops
// LLVM: pyocc-opt: error: convert-dnn-to-llvm needs buffer-form dnn (dnn.malloc/dnn.dealloc) or a planned pool (dnn.pool_init/dnn.mem_offset), which dnn-insert-memory-ops produces, but @relu_chain is in tensor-form dnn; run dnn-insert-memory-ops first
// SCRATCH: pyocc-opt: error: dnn-cuda-scratch needs buffer-form dnn (dnn.malloc/dnn.dealloc), which dnn-insert-memory-ops produces, but @relu_chain is in tensor-form dnn; run dnn-insert-memory-ops first
// SCRATCH-LATE: pyocc-opt: error: dnn-cuda-scratch needs buffer-form dnn (dnn.malloc/dnn.dealloc), which dnn-insert-memory-ops produces, but @relu_chain is in a planned pool (dnn.pool_init/dnn.mem_offset); run dnn-cuda-scratch before dnn-memory-pool
// TILE: pyocc-opt: error: dnn-tile needs tensor-form dnn, which convert-onnx-to-dnn produces, but @relu_chain is in the onnx dialect; run convert-onnx-to-dnn first
// LIVENESS: pyocc-opt: error: dnn-print-liveness needs tensor-form dnn or buffer-form dnn (dnn.malloc/dnn.dealloc) or a planned pool (dnn.pool_init/dnn.mem_offset), which convert-onnx-to-dnn produces, but @relu_chain is in the onnx dialect; run convert-onnx-to-dnn first
// LIFETIMES: pyocc-opt: error: dnn-verify-lifetimes needs buffer-form dnn (dnn.malloc/dnn.dealloc) or a planned pool (dnn.pool_init/dnn.mem_offset), which dnn-insert-memory-ops produces, but @relu_chain is in tensor-form dnn; run dnn-insert-memory-ops first

// Each of these passes in its place: no error, the module reaches llvm.
// LOWERED: llvm.func @relu_chain_run

func.func @relu_chain(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = "onnx.Relu"(%x) : (tensor<1024xf32>) -> tensor<1024xf32>
  %b = "onnx.Neg"(%a) : (tensor<1024xf32>) -> tensor<1024xf32>
  %c = "onnx.Relu"(%b) : (tensor<1024xf32>) -> tensor<1024xf32>
  func.return %c : tensor<1024xf32>
}

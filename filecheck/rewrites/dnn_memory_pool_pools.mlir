// RUN: pyocc-opt %s -p 'dnn-insert-memory-ops{mode=lazy},dnn-memory-pool{pools="sram:size=4KiB,dram"}' | filecheck %s
// RUN: pyocc-opt %s -p 'dnn-insert-memory-ops{mode=lazy},dnn-memory-pool{pools="sram,dram"}' | filecheck %s --check-prefix=UNBOUNDED
// RUN: pyocc-opt %s -p 'dnn-insert-memory-ops{mode=lazy},dnn-memory-pool{pools="sram:size=4KiB,dram" candidates="unary=dram"}' | filecheck %s --check-prefix=KIND
// RUN: not pyocc-opt %s -p 'dnn-insert-memory-ops{mode=lazy},dnn-memory-pool{pools="sram,dram" candidates="relu=dram"}' 2>&1 | filecheck %s --check-prefix=BADKIND
// RUN: not pyocc-opt %s -p 'dnn-insert-memory-ops{mode=lazy},dnn-memory-pool{pools="sram:size=4KiB,dram:size=2KiB"}' 2>&1 | filecheck %s --check-prefix=OVERFLOW
// RUN: not pyocc-opt %s -p 'dnn-insert-memory-ops{mode=lazy},dnn-memory-pool{pools="sram:size=4KB,dram"}' 2>&1 | filecheck %s --check-prefix=BADSPEC

// A chain of three 4 KiB buffers; a and b are live together, so do b and c.
// A 4 KiB SRAM holds one buffer at a time: it keeps a and c (they never
// overlap, and c is read twice: the most traffic), b spills to the DRAM.
// Each pool is one named dnn.pool_init, each view sits on its own pool.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: dnn.planner = "sram={{.*}},dram={{.*}}"
// CHECK-NEXT: %[[S:.*]] = dnn.pool_init {size = 4096 : i64, pool_name = "sram"} : memref<4096xi8>
// CHECK-NEXT: %[[D:.*]] = dnn.pool_init {size = 4096 : i64, pool_name = "dram"} : memref<4096xi8>
// CHECK-NEXT: %a = dnn.mem_offset %[[S]] {offset = 0 : i64, size = 4096 : i64}
// CHECK: %b = dnn.mem_offset %[[D]] {offset = 0 : i64, size = 4096 : i64}
// CHECK: %c = dnn.mem_offset %[[S]] {offset = 0 : i64, size = 4096 : i64}
// CHECK-NOT: dnn.malloc
// CHECK-NOT: dnn.dealloc
// CHECK: dnn.pool_release %[[D]]
// CHECK-NEXT: dnn.pool_release %[[S]]
// CHECK-NEXT: func.return

// With an unbounded first pool everything stays there: one pool, as large as
// the single-pool plan (8192 bytes), and no empty DRAM pool is allocated.
// UNBOUNDED: dnn.pool_init {size = 8192 : i64, pool_name = "sram"}
// UNBOUNDED-NOT: pool_name = "dram"
// UNBOUNDED-NOT: dnn.malloc

// Per-kind candidates: buffers written by dnn.unary may only use the DRAM,
// so the SRAM keeps nothing and is not allocated.
// KIND-NOT: pool_name = "sram"
// KIND: %[[D:.*]] = dnn.pool_init {size = 8192 : i64, pool_name = "dram"}
// KIND: %a = dnn.mem_offset %[[D]]
// KIND: %b = dnn.mem_offset %[[D]]
// KIND: %c = dnn.mem_offset %[[D]]
// BADKIND: pyocc-opt: error: dnn-memory-pool: pool candidates: unknown op kind 'relu' (e.g. conv, concat, gemm, softmax)

// OVERFLOW: pyocc-opt: error: dnn-memory-pool: buffer 'b' (4,096 bytes) fits in no pool: its last candidate, pool 'dram' (2,048 bytes), lacks 2,048 bytes; make 'dram' larger or add a pool after it
// BADSPEC: pyocc-opt: error: dnn-memory-pool: memory pools: pool 'sram': size '4KB' must be a number of bytes, optionally with KiB, MiB or GiB (e.g. 512KiB)
func.func @chain(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "relu"} : tensor<1024xf32>
  %b = dnn.unary ins(%a : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %c = dnn.unary ins(%b : tensor<1024xf32>) {fn = "tanh"} : tensor<1024xf32>
  %d = dnn.binary ins(%c, %c : tensor<1024xf32>, tensor<1024xf32>) {fn = "add"} : tensor<1024xf32>
  func.return %d : tensor<1024xf32>
}

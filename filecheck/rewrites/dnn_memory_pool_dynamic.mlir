// RUN: pyocc-opt %s -p 'dnn-memory-pool{pools="sram:size=1KiB,dram"}' | filecheck %s
// RUN: not pyocc-opt %s -p 'dnn-memory-pool' 2>&1 | filecheck %s --check-prefix=ONEPOOL

// A buffer whose size is known only at run time (memref<?xf32>) is left to
// the runtime allocator, malloc and dealloc kept, while the static buffer is
// still planned (too big for the 1 KiB SRAM, it goes to the DRAM).
// CHECK-LABEL: func.func @dynamic
// CHECK-NEXT: %[[D:.*]] = dnn.pool_init {size = 4096 : i64, pool_name = "dram"}
// CHECK-NOT: pool_name = "sram"
// CHECK-NEXT: %a = dnn.mem_offset %[[D]] {offset = 0 : i64, size = 4096 : i64}
// CHECK: %n_out = dnn.malloc {size = 0 : i64} : memref<?xf32>
// CHECK: dnn.dealloc %n_out
// CHECK-NOT: dnn.malloc
// CHECK: dnn.pool_release %[[D]]

// Without named pools there is only the one static plan: a clear error.
// ONEPOOL: pyocc-opt: error: dnn-memory-pool: buffer %n_out (memref<?xf32>) has no static size; fix the input shape, or give pools=... to leave it to the runtime allocator
func.func @dynamic(%x: memref<1024xf32>, %n: memref<?xf32>, %y: memref<1024xf32> {dnn.output}) {
  %a = dnn.malloc {size = 4096 : i64} : memref<1024xf32>
  dnn.unary ins(%x : memref<1024xf32>) outs(%a : memref<1024xf32>) {fn = "relu"}
  %n_out = dnn.malloc {size = 0 : i64} : memref<?xf32>
  dnn.unary ins(%n : memref<?xf32>) outs(%n_out : memref<?xf32>) {fn = "exp"}
  dnn.dealloc %n_out {size = 0 : i64} : memref<?xf32>
  dnn.unary ins(%a : memref<1024xf32>) outs(%y : memref<1024xf32>) {fn = "neg"}
  dnn.dealloc %a {size = 4096 : i64} : memref<1024xf32>
  func.return
}

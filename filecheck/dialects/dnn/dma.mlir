// RUN: pyocc-opt %s | pyocc-opt | filecheck %s
// RUN: pyocc-opt %s --print-op-generic | pyocc-opt | filecheck %s
// RUN: pyocc-opt %s -p canonicalize | filecheck %s --check-prefix=KEPT
// dnn.dma_start / dnn.dma_wait: an asynchronous copy between DRAM and the
// SRAM scratchpad, printed like a kernel call (`ins(...) outs(...)`) with
// the token's type last. The custom and the generic form parse to the same ops.

// A weight prefetched while a conv runs, then a result written back.
// CHECK-LABEL: func.func @prefetch_and_write_back
// CHECK-NEXT: %sram = dnn.pool_init
// CHECK-NEXT: %w_s = dnn.mem_offset %sram
// CHECK-NEXT: %y_s = dnn.mem_offset %sram
// CHECK-NEXT: %load = dnn.dma_start ins(%w : memref<8x8xf32>) outs(%w_s : memref<8x8xf32>) {direction = "dram_to_sram", size = 256 : i64} : !dnn.dma_token
// CHECK-NEXT: dnn.dma_wait %load : !dnn.dma_token
// CHECK-NEXT: dnn.gemm ins(%x, %w_s : memref<1x8xf32>, memref<8x8xf32>) outs(%y_s : memref<1x8xf32>)
// CHECK-NEXT: %store = dnn.dma_start ins(%y_s : memref<1x8xf32>) outs(%y : memref<1x8xf32>) {direction = "sram_to_dram", size = 32 : i64} : !dnn.dma_token
// CHECK-NEXT: dnn.dma_wait %store : !dnn.dma_token
func.func @prefetch_and_write_back(%w: memref<8x8xf32>, %x: memref<1x8xf32>, %y: memref<1x8xf32> {dnn.output}) {
  %sram = dnn.pool_init {size = 1024 : i64, pool_name = "sram"} : memref<1024xi8>
  %w_s = dnn.mem_offset %sram {offset = 0 : i64, size = 256 : i64} : memref<1024xi8> -> memref<8x8xf32>
  %y_s = dnn.mem_offset %sram {offset = 256 : i64, size = 32 : i64} : memref<1024xi8> -> memref<1x8xf32>
  %load = dnn.dma_start ins(%w : memref<8x8xf32>) outs(%w_s : memref<8x8xf32>) {direction = "dram_to_sram", size = 256 : i64} : !dnn.dma_token
  dnn.dma_wait %load : !dnn.dma_token
  dnn.gemm ins(%x, %w_s : memref<1x8xf32>, memref<8x8xf32>) outs(%y_s : memref<1x8xf32>)
  %store = dnn.dma_start ins(%y_s : memref<1x8xf32>) outs(%y : memref<1x8xf32>) {direction = "sram_to_dram", size = 32 : i64} : !dnn.dma_token
  dnn.dma_wait %store : !dnn.dma_token
  func.return
}

// A band of rows: rows 1..2 of the DRAM side move into a 2-row SRAM buffer.
// CHECK-LABEL: func.func @band
// CHECK-NEXT: %t = dnn.dma_start ins(%x : memref<1x2x4x3xf32>) outs(%b : memref<1x2x2x3xf32>) {direction = "dram_to_sram", size = 48 : i64, rows = array<i64: 1, 3>} : !dnn.dma_token
func.func @band(%x: memref<1x2x4x3xf32>, %b: memref<1x2x2x3xf32>) {
  %t = dnn.dma_start ins(%x : memref<1x2x4x3xf32>) outs(%b : memref<1x2x2x3xf32>) {direction = "dram_to_sram", size = 48 : i64, rows = array<i64: 1, 3>} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}

// Transfers have effects: dead-code elimination keeps a start whose token
// only a wait reads, and the wait itself.
// KEPT-LABEL: func.func @prefetch_and_write_back
// KEPT: dnn.dma_start
// KEPT: dnn.dma_wait %load
// KEPT: dnn.dma_start
// KEPT: dnn.dma_wait %store

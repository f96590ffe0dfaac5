// RUN: pyocc-opt %s --split-input-file -p dnn-scratchpad | filecheck %s
// RUN: pyocc-opt %s --split-input-file -p dnn-scratchpad,dnn-memory-pool,dnn-dma-to-memcpy | filecheck %s --check-prefix=HOST
// RUN: pyocc-opt %s --split-input-file -p dnn-memory-pool,dnn-scratchpad --verify-diagnostics | filecheck %s --check-prefix=ORDER

// A weight and the graph input are copied into SRAM before the op, the graph
// output is written in SRAM and copied out after it; the activation between
// the two ops (a dnn.malloc: SRAM already) is left alone.
// CHECK-LABEL: func.func @stage_dram_operands
// CHECK:      %x_sram = dnn.malloc {{.*}} : memref<1x4xf32>
// CHECK-NEXT: %x_in = dnn.dma_start ins(%x : memref<1x4xf32>) outs(%x_sram : memref<1x4xf32>) {direction = "dram_to_sram", size = 16 : i64} : !dnn.dma_token
// CHECK-NEXT: dnn.dma_wait %x_in : !dnn.dma_token
// CHECK-NEXT: %w_sram = dnn.malloc {{.*}} : memref<4x4xf32>
// CHECK-NEXT: %w_in = dnn.dma_start ins(%w : memref<4x4xf32>) outs(%w_sram : memref<4x4xf32>) {direction = "dram_to_sram", size = 64 : i64} : !dnn.dma_token
// CHECK-NEXT: dnn.dma_wait %w_in : !dnn.dma_token
// CHECK-NEXT: dnn.gemm ins(%x_sram, %w_sram : memref<1x4xf32>, memref<4x4xf32>) outs(%h : memref<1x4xf32>)
// CHECK-NEXT: dnn.dealloc %w_sram
// CHECK-NEXT: dnn.dealloc %x_sram
// CHECK-NEXT: %y_sram = dnn.malloc
// CHECK-NEXT: dnn.unary ins(%h : memref<1x4xf32>) outs(%y_sram : memref<1x4xf32>) {fn = "relu"}
// CHECK-NEXT: %y_out = dnn.dma_start ins(%y_sram : memref<1x4xf32>) outs(%y : memref<1x4xf32>) {direction = "sram_to_dram", size = 16 : i64} : !dnn.dma_token
// CHECK-NEXT: dnn.dma_wait %y_out
// CHECK-NEXT: dnn.dealloc %y_sram
// On the host the planned pool is the SRAM and each transfer a copy.
// HOST-LABEL: func.func @stage_dram_operands
// HOST:     dnn.pool_init
// HOST-NOT: dnn.dma_
// HOST:     "dnn.memcpy"(%w, %w_sram) <{kind = "host_to_host", size = 64 : i64}>
// HOST:     "dnn.memcpy"(%y_sram, %y) <{kind = "host_to_host", size = 16 : i64}>
func.func @stage_dram_operands(%x: memref<1x4xf32>, %y: memref<1x4xf32> {dnn.output}) {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<4x4xf32>}> : () -> memref<4x4xf32>
  %h = dnn.malloc {size = 16 : i64} : memref<1x4xf32>
  dnn.gemm ins(%x, %w : memref<1x4xf32>, memref<4x4xf32>) outs(%h : memref<1x4xf32>)
  dnn.unary ins(%h : memref<1x4xf32>) outs(%y : memref<1x4xf32>) {fn = "relu"}
  dnn.dealloc %h {size = 16 : i64} : memref<1x4xf32>
  func.return
}

// -----

// Negative: an op whose operands are all SRAM buffers gets no DMA.
// CHECK-LABEL: func.func @sram_only_not_staged
// CHECK-NOT:  dnn.dma_start
// CHECK:      dnn.unary ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {fn = "relu"}
// CHECK-NOT:  dnn.dma_start
func.func @sram_only_not_staged() {
  %a = dnn.malloc {size = 32 : i64} : memref<8xf32>
  %b = dnn.malloc {size = 32 : i64} : memref<8xf32>
  dnn.unary ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {fn = "relu"}
  dnn.dealloc %a {size = 32 : i64} : memref<8xf32>
  dnn.dealloc %b {size = 32 : i64} : memref<8xf32>
  func.return
}

// Negative: after dnn-memory-pool the mallocs are gone; the pass refuses.
// ORDER: dnn-scratchpad needs buffer-form dnn (dnn.malloc/dnn.dealloc), which dnn-insert-memory-ops produces, but @stage_dram_operands is in a planned pool (dnn.pool_init/dnn.mem_offset); run dnn-scratchpad before dnn-memory-pool

// RUN: pyocc-opt %s --split-input-file -p dnn-dma-to-memcpy | filecheck %s

// A transfer becomes a synchronous host copy; its wait goes.
// CHECK-LABEL: func.func @copies
// CHECK-NEXT:  %s = dnn.malloc
// CHECK-NEXT:  "dnn.memcpy"(%w, %s) <{kind = "host_to_host", size = 32 : i64}> : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:  dnn.unary ins(%s : memref<8xf32>) outs(%y : memref<8xf32>) {fn = "relu"}
// CHECK-NOT:   dnn.dma_
func.func @copies(%w: memref<8xf32>, %y: memref<8xf32> {dnn.output}) {
  %s = dnn.malloc {size = 32 : i64} : memref<8xf32>
  %t = dnn.dma_start ins(%w : memref<8xf32>) outs(%s : memref<8xf32>) {direction = "dram_to_sram", size = 32 : i64} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  dnn.unary ins(%s : memref<8xf32>) outs(%y : memref<8xf32>) {fn = "relu"}
  dnn.dealloc %s {size = 32 : i64} : memref<8xf32>
  func.return
}

// -----

// Negative: a program without DMA is left as it is.
// CHECK-LABEL: func.func @no_dma
// CHECK-NEXT:  dnn.unary ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {fn = "relu"}
// CHECK-NEXT:  func.return
func.func @no_dma(%x: memref<8xf32>, %y: memref<8xf32> {dnn.output}) {
  dnn.unary ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {fn = "relu"}
  func.return
}

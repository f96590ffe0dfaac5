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

// -----

// A band of rows (rows 1..2 of 4) moves as one strided copy: a chunk of
// 24 B per channel, from byte 12 of the DRAM side (a subview), one channel
// (48 B) apart there, packed (24 B apart) in SRAM; written back the other way.
// CHECK-LABEL: func.func @band
// CHECK-NEXT:  %s = dnn.malloc
// CHECK-NEXT:  %[[X:.*]] = dnn.subview %x {offset = 12 : i64} : memref<1x2x4x3xf32> -> memref<84xi8>
// CHECK-NEXT:  "dnn.memcpy"(%[[X]], %s) <{kind = "host_to_host", size = 24 : i64, count = 2 : i64, source_stride = 48 : i64, target_stride = 24 : i64}>
// CHECK-NEXT:  %[[Y:.*]] = dnn.subview %y {offset = 12 : i64} : memref<1x2x4x3xf32> -> memref<84xi8>
// CHECK-NEXT:  "dnn.memcpy"(%s, %[[Y]]) <{kind = "host_to_host", size = 24 : i64, count = 2 : i64, source_stride = 24 : i64, target_stride = 48 : i64}>
// CHECK-NOT:   dnn.dma_
func.func @band(%x: memref<1x2x4x3xf32>, %y: memref<1x2x4x3xf32> {dnn.output}) {
  %s = dnn.malloc {size = 48 : i64} : memref<1x2x2x3xf32>
  %t = dnn.dma_start ins(%x : memref<1x2x4x3xf32>) outs(%s : memref<1x2x2x3xf32>) {direction = "dram_to_sram", size = 48 : i64, rows = array<i64: 1, 3>} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  %u = dnn.dma_start ins(%s : memref<1x2x2x3xf32>) outs(%y : memref<1x2x4x3xf32>) {direction = "sram_to_dram", size = 48 : i64, rows = array<i64: 1, 3>} : !dnn.dma_token
  dnn.dma_wait %u : !dnn.dma_token
  dnn.dealloc %s {size = 48 : i64} : memref<1x2x2x3xf32>
  func.return
}

// -----

// Negative: a band of one channel is contiguous, so it stays one plain
// copy (no count), from the band's first byte.
// CHECK-LABEL: func.func @one_channel_band
// CHECK-NEXT:  %s = dnn.malloc
// CHECK-NEXT:  %[[X:.*]] = dnn.subview %x {offset = 12 : i64} : memref<1x1x4x3xf32> -> memref<24xi8>
// CHECK-NEXT:  "dnn.memcpy"(%[[X]], %s) <{kind = "host_to_host", size = 24 : i64}>
// CHECK-NEXT:  dnn.dealloc
func.func @one_channel_band(%x: memref<1x1x4x3xf32>) {
  %s = dnn.malloc {size = 24 : i64} : memref<1x1x2x3xf32>
  %t = dnn.dma_start ins(%x : memref<1x1x4x3xf32>) outs(%s : memref<1x1x2x3xf32>) {direction = "dram_to_sram", size = 24 : i64, rows = array<i64: 1, 3>} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  dnn.dealloc %s {size = 24 : i64} : memref<1x1x2x3xf32>
  func.return
}

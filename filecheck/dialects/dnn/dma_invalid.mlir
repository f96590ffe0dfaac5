// RUN: pyocc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// One case per verifier message of pyocc/dialects/dnn/dma.py.

func.func @bad_direction(%a: memref<8xf32>, %b: memref<8xf32>) {
  %t = dnn.dma_start ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {direction = "sideways", size = 32 : i64} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_start: direction must be one of dram_to_sram, sram_to_dram, got 'sideways'

// -----

func.func @sizes_differ(%a: memref<8xf32>, %b: memref<4xf32>) {
  %t = dnn.dma_start ins(%a : memref<8xf32>) outs(%b : memref<4xf32>) {direction = "dram_to_sram", size = 32 : i64} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_start: source has 32 bytes but target has 16: a transfer copies whole buffers

// -----

func.func @wrong_size(%a: memref<8xf32>, %b: memref<8xf32>) {
  %t = dnn.dma_start ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {direction = "dram_to_sram", size = 16 : i64} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_start: size 16 is not the 32 bytes copied

// -----

func.func @same_buffer(%a: memref<8xf32>) {
  %t = dnn.dma_start ins(%a : memref<8xf32>) outs(%a : memref<8xf32>) {direction = "dram_to_sram", size = 32 : i64} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_start: source and target are the same buffer

// -----

func.func @never_waited(%a: memref<8xf32>, %b: memref<8xf32>) {
  %t = dnn.dma_start ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {direction = "dram_to_sram", size = 32 : i64} : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_start: its token must be waited on by exactly one dnn.dma_wait, found 0 uses

// -----

func.func @waited_twice(%a: memref<8xf32>, %b: memref<8xf32>) {
  %t = dnn.dma_start ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {direction = "dram_to_sram", size = 32 : i64} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_start: its token must be waited on by exactly one dnn.dma_wait, found 2 uses

// -----

func.func @token_from_elsewhere(%t: !dnn.dma_token) {
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_wait: the token must come from a dnn.dma_start

// -----

func.func @rows_outside(%a: memref<1x2x4x3xf32>, %b: memref<1x2x2x3xf32>) {
  %t = dnn.dma_start ins(%a : memref<1x2x4x3xf32>) outs(%b : memref<1x2x2x3xf32>) {direction = "dram_to_sram", size = 48 : i64, rows = array<i64: 3, 5>} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_start: rows [3, 5] are not a band [lo, hi) of the rows of the DRAM side memref<1x2x4x3xf32>

// -----

func.func @band_shape(%a: memref<1x2x4x3xf32>, %b: memref<1x2x3x3xf32>) {
  %t = dnn.dma_start ins(%b : memref<1x2x3x3xf32>) outs(%a : memref<1x2x4x3xf32>) {direction = "sram_to_dram", size = 72 : i64, rows = array<i64: 1, 3>} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_start: a band of 2 rows needs an SRAM side of shape [1, 2, 2, 3], got memref<1x2x3x3xf32>

// -----

func.func @band_size(%a: memref<1x2x4x3xf32>, %b: memref<1x2x2x3xf32>) {
  %t = dnn.dma_start ins(%a : memref<1x2x4x3xf32>) outs(%b : memref<1x2x2x3xf32>) {direction = "dram_to_sram", size = 96 : i64, rows = array<i64: 1, 3>} : !dnn.dma_token
  dnn.dma_wait %t : !dnn.dma_token
  func.return
}
// CHECK: dnn.dma_start: size 96 is not the 48 bytes copied

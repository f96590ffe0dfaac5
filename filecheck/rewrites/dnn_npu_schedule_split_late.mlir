// RUN: pyocc-opt %s -p 'dnn-npu-schedule{sram="3584"}' | filecheck %s

// An op that fits whole and whose weights load late is tried on a tiling
// whose weights load in blocks (`_split_late`), kept where that runs faster.
// Once the first convolution has computed, the free bytes are [0, 1152)
// and [2688, 3584); the 3x3's filters (1152 B) fit neither hole beside a1,
// so they would load only once the second convolution had ended. Split
// into two blocks of two output channels (576 B each), the first block
// loads from the top while the second convolution computes, and the
// second while the first block's half of the 3x3 computes.
// CHECK-LABEL: func.func @split
// CHECK:       %a1_sram = dnn.mem_offset %mempool_sram {npu.buffer = "b5:a1:all", offset = 0
// CHECK-NEXT:  dnn.dma_wait
// CHECK-NEXT:  %w2_sram = dnn.mem_offset %mempool_sram {npu.buffer = "b6:w2:block0/2", offset = 3008
// CHECK:       dnn.conv ins(%a0_sram, %w1_sram {{.*}} outs(%a1_sram
// CHECK:       %w2_sram_1 = dnn.mem_offset %mempool_sram {npu.buffer = "b8:w2:block1/2"
// CHECK:       dnn.conv ins(%a1_sram, %w2_sram_1
func.func @split(%x: tensor<1x8x2x2xf32>) -> tensor<1x4x2x2xf32> {
  %w0 = "dnn.weight"() <{value = dense<1.0> : tensor<32x8x1x1xf32>}> : () -> tensor<32x8x1x1xf32>
  %a0 = dnn.conv ins(%x, %w0 : tensor<1x8x2x2xf32>, tensor<32x8x1x1xf32>) {pads = array<i64: 0, 0, 0, 0>} : tensor<1x32x2x2xf32>
  %w1 = "dnn.weight"() <{value = dense<1.0> : tensor<8x32x1x1xf32>}> : () -> tensor<8x32x1x1xf32>
  %a1 = dnn.conv ins(%a0, %w1 : tensor<1x32x2x2xf32>, tensor<8x32x1x1xf32>) {pads = array<i64: 0, 0, 0, 0>} : tensor<1x8x2x2xf32>
  %w2 = "dnn.weight"() <{value = dense<1.0> : tensor<4x8x3x3xf32>}> : () -> tensor<4x8x3x3xf32>
  %a2 = dnn.conv ins(%a1, %w2 : tensor<1x8x2x2xf32>, tensor<4x8x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x2x2xf32>
  func.return %a2 : tensor<1x4x2x2xf32>
}

// Negative: the same with one output channel (its filters 1x8x6x6, as
// many bytes), which no tiling splits into weight blocks: it runs whole,
// and best fit makes room for its filters instead (a1 at 2688).
// CHECK-LABEL: func.func @whole
// CHECK:       %a1_sram = dnn.mem_offset %mempool_sram {npu.buffer = "b5:a1:all", offset = 2688
// CHECK-NEXT:  dnn.dma_wait
// CHECK-NEXT:  %w2_sram = dnn.mem_offset %mempool_sram {npu.buffer = "b6:w2:all", offset = 0
// CHECK-NOT:   w2:block
// CHECK:       func.return
func.func @whole(%x: tensor<1x8x2x2xf32>) -> tensor<1x1x1x1xf32> {
  %w0 = "dnn.weight"() <{value = dense<1.0> : tensor<32x8x1x1xf32>}> : () -> tensor<32x8x1x1xf32>
  %a0 = dnn.conv ins(%x, %w0 : tensor<1x8x2x2xf32>, tensor<32x8x1x1xf32>) {pads = array<i64: 0, 0, 0, 0>} : tensor<1x32x2x2xf32>
  %w1 = "dnn.weight"() <{value = dense<1.0> : tensor<8x32x1x1xf32>}> : () -> tensor<8x32x1x1xf32>
  %a1 = dnn.conv ins(%a0, %w1 : tensor<1x32x2x2xf32>, tensor<8x32x1x1xf32>) {pads = array<i64: 0, 0, 0, 0>} : tensor<1x8x2x2xf32>
  %w2 = "dnn.weight"() <{value = dense<1.0> : tensor<1x8x6x6xf32>}> : () -> tensor<1x8x6x6xf32>
  %a2 = dnn.conv ins(%a1, %w2 : tensor<1x8x2x2xf32>, tensor<1x8x6x6xf32>) {pads = array<i64: 2, 2, 2, 2>} : tensor<1x1x1x1xf32>
  func.return %a2 : tensor<1x1x1x1xf32>
}

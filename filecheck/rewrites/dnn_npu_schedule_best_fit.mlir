// RUN: pyocc-opt %s -p 'dnn-npu-schedule{sram="3584"}' | filecheck %s

// Buffers go first fit: in the lowest hole they fit. Where that cuts the
// hole a later load needs, the schedule made with each buffer in the
// smallest hole it fits (best fit) runs faster, and is kept
// (`BEST_FIT_RESERVES`, `_fastest_scheduler`).

// Once the first convolution has computed, w0 and x are dead: free are
// [0, 1152) below a0 and w1 and [2688, 3584) above them. First fit put a1
// (128 B) at 0, leaving 1024 B below and 896 B above, too few for w2
// (1152 B): w2 loaded only once the second convolution had ended. Best fit
// puts a1 in the smaller hole, at 2688, and w2 loads at 0 while the second
// convolution computes. (The last convolution has one output channel: with
// several, its weights would load in blocks instead, the first one sooner,
// `_split_late`, and first fit would do.)
// CHECK-LABEL: func.func @best_fit
// CHECK:       %a1_sram = dnn.mem_offset %mempool_sram {npu.buffer = "b5:a1:all", offset = 2688
// CHECK:       %w2_sram = dnn.mem_offset %mempool_sram {npu.buffer = "b6:w2:all", offset = 0
// CHECK-NEXT:  %w2_in = dnn.dma_start ins(%w2
// CHECK-NEXT:  dnn.conv ins(%a0_sram, %w1_sram {{.*}} outs(%a1_sram
// CHECK:       dnn.dma_wait %w2_in
// CHECK:       dnn.conv ins(%a1_sram, %w2_sram
func.func @best_fit(%x: tensor<1x8x2x2xf32>) -> tensor<1x1x1x1xf32> {
  %w0 = "dnn.weight"() <{value = dense<1.0> : tensor<32x8x1x1xf32>}> : () -> tensor<32x8x1x1xf32>
  %a0 = dnn.conv ins(%x, %w0 : tensor<1x8x2x2xf32>, tensor<32x8x1x1xf32>) {pads = array<i64: 0, 0, 0, 0>} : tensor<1x32x2x2xf32>
  %w1 = "dnn.weight"() <{value = dense<1.0> : tensor<8x32x1x1xf32>}> : () -> tensor<8x32x1x1xf32>
  %a1 = dnn.conv ins(%a0, %w1 : tensor<1x32x2x2xf32>, tensor<8x32x1x1xf32>) {pads = array<i64: 0, 0, 0, 0>} : tensor<1x8x2x2xf32>
  %w2 = "dnn.weight"() <{value = dense<1.0> : tensor<1x8x6x6xf32>}> : () -> tensor<1x8x6x6xf32>
  %a2 = dnn.conv ins(%a1, %w2 : tensor<1x8x2x2xf32>, tensor<1x8x6x6xf32>) {pads = array<i64: 2, 2, 2, 2>} : tensor<1x1x1x1xf32>
  func.return %a2 : tensor<1x1x1x1xf32>
}

// Negative: the same with a 1x1 last convolution, whose filters (128 B)
// fit beside a1 either way. Best fit runs no faster, so a1 stays where
// first fit put it, at 0, and w2 beside it.
// CHECK-LABEL: func.func @first_fit
// CHECK:       %a1_sram = dnn.mem_offset %mempool_sram {npu.buffer = "b5:a1:all", offset = 0
// CHECK:       %w2_sram = dnn.mem_offset %mempool_sram {npu.buffer = "b6:w2:all", offset = 128
// CHECK-NEXT:  %w2_in = dnn.dma_start ins(%w2
// CHECK-NEXT:  dnn.conv ins(%a0_sram, %w1_sram {{.*}} outs(%a1_sram
func.func @first_fit(%x: tensor<1x8x2x2xf32>) -> tensor<1x4x2x2xf32> {
  %w0 = "dnn.weight"() <{value = dense<1.0> : tensor<32x8x1x1xf32>}> : () -> tensor<32x8x1x1xf32>
  %a0 = dnn.conv ins(%x, %w0 : tensor<1x8x2x2xf32>, tensor<32x8x1x1xf32>) {pads = array<i64: 0, 0, 0, 0>} : tensor<1x32x2x2xf32>
  %w1 = "dnn.weight"() <{value = dense<1.0> : tensor<8x32x1x1xf32>}> : () -> tensor<8x32x1x1xf32>
  %a1 = dnn.conv ins(%a0, %w1 : tensor<1x32x2x2xf32>, tensor<8x32x1x1xf32>) {pads = array<i64: 0, 0, 0, 0>} : tensor<1x8x2x2xf32>
  %w2 = "dnn.weight"() <{value = dense<1.0> : tensor<4x8x1x1xf32>}> : () -> tensor<4x8x1x1xf32>
  %a2 = dnn.conv ins(%a1, %w2 : tensor<1x8x2x2xf32>, tensor<4x8x1x1xf32>) {pads = array<i64: 0, 0, 0, 0>} : tensor<1x4x2x2xf32>
  func.return %a2 : tensor<1x4x2x2xf32>
}

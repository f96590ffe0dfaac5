// RUN: pyocc-opt %s -p "dnn-npu-schedule{sram=256KiB}" | filecheck %s

// An op run on bands of rows alone streams each band out: a band of rows of
// every channel is no contiguous part of the whole tensor. Where a later op
// reads that output whole and it fits half the SRAM, the schedule made with
// each band copied, SRAM to SRAM, into its rows of the whole tensor's
// buffer (`_assembled`) is kept where it runs faster.

// The max pool's 256 KiB input does not fit 7/8 of the SRAM: it runs on 6
// bands of rows. The convolution reads its 64 KiB output whole. Streamed
// out, the output was stored band by band and loaded back whole after the
// last band's store (60,038 cycles, 463,908 DRAM bytes); assembled, each
// band is copied into its rows of the whole buffer by a strided copy and
// the convolution reads it there (44,897 cycles, 332,836 bytes).
// CHECK-LABEL: func.func @assembled
// CHECK:       dnn.max_pool ins(%x_sram : memref<1x1x42x256xf32>) outs(%p_sram : memref<1x1x21x128xf32>)
// CHECK-SAME:  npu.writes = {{\[}}["p", "tile0.0/6x1"
// CHECK:       %p_sram_1 = dnn.mem_offset %mempool_sram {npu.buffer = "b4:p:all"
// CHECK:       %0 = dnn.subview %p_sram_1 {offset = 0 : i64}
// CHECK-NEXT:  "dnn.memcpy"(%p_sram, %0) <{kind = "host_to_host", size = 10752 : i64, count = 1 : i64, source_stride = 10752 : i64, target_stride = 65536 : i64}>
// CHECK-SAME:  npu.writes = {{\[}}["p", "rows0:21|assembled"
// CHECK:       %1 = dnn.subview %p_sram_1 {offset = 10752 : i64}
// CHECK-NEXT:  "dnn.memcpy"(%p_sram_2, %1)
// CHECK-SAME:  npu.writes = {{\[}}["p", "rows21:42|assembled"
// CHECK-NOT:   dnn.dma_start ins(%p_sram
// CHECK:       npu.writes = {{\[}}["p", "rows106:128|assembled"
// CHECK-NOT:   dnn.dma_start ins(%p_sram
// CHECK:       dnn.conv ins(%p_sram_1, %w_sram : memref<1x1x128x128xf32>, memref<1x1x3x3xf32>)
func.func @assembled(%x: tensor<1x1x256x256xf32>) -> tensor<1x1x128x128xf32> {
  %p = dnn.max_pool ins(%x : tensor<1x1x256x256xf32>) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x1x128x128xf32>
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<1x1x3x3xf32>}> : () -> tensor<1x1x3x3xf32>
  %y = dnn.conv ins(%p, %w : tensor<1x1x128x128xf32>, tensor<1x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x1x128x128xf32>
  func.return %y : tensor<1x1x128x128xf32>
}

// Negative: the same with the pool's output returned too. It goes to DRAM
// anyway (a graph output): its bands stream out, and the convolution loads
// it back whole.
// CHECK-LABEL: func.func @returned
// CHECK-NOT:   assembled
// CHECK:       %p_out_1 = dnn.dma_start ins(%p_sram :
// CHECK-SAME:  npu.piece = {{\[}}"p", "tile0.0/6x1"
// CHECK-NOT:   assembled
// CHECK:       %p_in = dnn.dma_start ins(%p_out
// CHECK-SAME:  npu.piece = {{\[}}"p", "all"
// CHECK-NOT:   assembled
// CHECK:       dnn.conv ins(%p_sram_6, %w_sram
func.func @returned(%x: tensor<1x1x256x256xf32>) -> (tensor<1x1x128x128xf32>, tensor<1x1x128x128xf32>) {
  %p = dnn.max_pool ins(%x : tensor<1x1x256x256xf32>) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x1x128x128xf32>
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<1x1x3x3xf32>}> : () -> tensor<1x1x3x3xf32>
  %y = dnn.conv ins(%p, %w : tensor<1x1x128x128xf32>, tensor<1x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x1x128x128xf32>
  func.return %y, %p : tensor<1x1x128x128xf32>, tensor<1x1x128x128xf32>
}

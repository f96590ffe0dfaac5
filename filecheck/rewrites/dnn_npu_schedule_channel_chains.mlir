// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=32KiB}" --verify-diagnostics | filecheck %s

// The op after one tiled by blocks of output channels runs on those blocks
// beside it when it reads nothing else of that output (`_channel_chains`):
// each tile is read in SRAM, where it was written, instead of going out to
// DRAM and coming back. (Its own file: dnn_npu_schedule.mlir's other SRAM
// sizes would tile these filters into hundreds of blocks for nothing.)

// A convolution whose filters (36 KiB) exceed 32 KiB runs in 9 blocks of
// output channels, and the global pool after it reads only those channels:
// it runs on the same blocks, each right after the tile that makes it,
// reading the tile where the convolution wrote it. %y never goes to DRAM;
// the pool's output is assembled whole in SRAM and stored once.
// CHECK-LABEL: func.func @conv_then_pool
// CHECK-NOT:   %y_out
// CHECK:       dnn.conv ins(%x_sram, %w_sram : memref<1x16x8x8xf32>, memref<8x16x3x3xf32>) outs(%y_sram : memref<1x8x8x8xf32>) {{.*}}npu.writes = {{\[}}["y", "tile0.0/1x9", 2048 : i64, 16384 : i64]]
// CHECK-NOT:   dnn.dma_start
// CHECK:       dnn.global_average_pool ins(%y_sram : memref<1x8x8x8xf32>) outs(%{{.*}} : memref<1x8x1x1xf32>) {npu.reads = {{\[}}["y", "tile0.0/1x9", 2048 : i64, 16384 : i64]], npu.writes = {{\[}}["g", "tile0.0/1x9", 32 : i64, 256 : i64]]
// CHECK:       dnn.conv ins(%x_sram, %w_sram_1
// CHECK:       dnn.global_average_pool ins(%y_sram_1 : memref<1x7x8x8xf32>)
// CHECK-NOT:   %y_out
// CHECK:       dnn.dma_start ins(%g_sram : memref<1x64x1x1xf32>) outs(%g_out : memref<1x64x1x1xf32>) {{.*}}direction = "sram_to_dram"
// CHECK-NOT:   %y_out
// CHECK:       func.return
func.func @conv_then_pool(%x: tensor<1x16x8x8xf32>) -> tensor<1x64x1x1xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x16x3x3xf32>}> : () -> tensor<64x16x3x3xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x16x8x8xf32>, tensor<64x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x64x8x8xf32>
  %g = dnn.global_average_pool ins(%y : tensor<1x64x8x8xf32>) : tensor<1x64x1x1xf32>
  func.return %g : tensor<1x64x1x1xf32>
}

// -----

// Negative: %y is returned too, so its tiles go out to DRAM as they are
// made, and the pool reads it whole after the convolution's last block.
// CHECK-LABEL: func.func @conv_then_pool_and_out
// CHECK:       dnn.dma_start ins(%y_sram : memref<1x8x8x8xf32>) {{.*}}npu.piece = {{\[}}"y", "tile0.0/1x9", 2048 : i64, 16384 : i64], direction = "sram_to_dram"
// CHECK-NOT:   dnn.global_average_pool
// CHECK:       npu.writes = {{\[}}["y", "tile0.8/1x9"
// CHECK:       dnn.global_average_pool ins(%{{.*}} : memref<1x64x8x8xf32>) outs(%g_sram : memref<1x64x1x1xf32>) {npu.reads = {{\[}}["y", "all", 16384 : i64, 16384 : i64]]
func.func @conv_then_pool_and_out(%x: tensor<1x16x8x8xf32>) -> (tensor<1x64x8x8xf32>, tensor<1x64x1x1xf32>) {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x16x3x3xf32>}> : () -> tensor<64x16x3x3xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x16x8x8xf32>, tensor<64x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x64x8x8xf32>
  %g = dnn.global_average_pool ins(%y : tensor<1x64x8x8xf32>) : tensor<1x64x1x1xf32>
  func.return %y, %g : tensor<1x64x8x8xf32>, tensor<1x64x1x1xf32>
}

// -----

// The same convolution, then a 1x1 convolution summing over its 64
// channels: that one sums over the first one's 9 blocks of output
// channels, each block right after the tile that makes it, reading the
// tile where it was written and its filters' input channels of that block
// (`in0:8/64`); its partial sums stay in SRAM (`acc`). %y never goes to
// DRAM.
// CHECK-LABEL: func.func @conv_then_sum
// CHECK-NOT:   %y_out
// CHECK:       dnn.conv ins(%x_sram, %w_sram : {{.*}}) outs(%y_sram : memref<1x8x8x8xf32>) {{.*}}npu.writes = {{\[}}["y", "tile0.0/1x9", 2048 : i64, 16384 : i64]]
// CHECK-NOT:   dnn.conv ins(%x_sram
// CHECK:       dnn.conv ins(%y_sram, %{{.*}} : memref<1x8x8x8xf32>, memref<16x8x1x1xf32>) outs(%s_sram : memref<1x16x8x8xf32>) {npu.reads = {{\[}}["y", "tile0.0/1x9", 2048 : i64, 16384 : i64], ["v", "in0:8/64", 512 : i64, 4096 : i64]], npu.writes = {{\[}}["s", "acc0/9|tile0.0/1x1"
// CHECK:       dnn.conv ins(%x_sram, %w_sram_1
// CHECK:       dnn.conv ins(%y_sram_1, %{{.*}}, residual %s_sram : memref<1x7x8x8xf32>, memref<16x7x1x1xf32>, memref<1x16x8x8xf32>)
// CHECK-NOT:   %y_out
// CHECK:       func.return
func.func @conv_then_sum(%x: tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x16x3x3xf32>}> : () -> tensor<64x16x3x3xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<16x64x1x1xf32>}> : () -> tensor<16x64x1x1xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x16x8x8xf32>, tensor<64x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x64x8x8xf32>
  %s = dnn.conv ins(%y, %v : tensor<1x64x8x8xf32>, tensor<16x64x1x1xf32>) : tensor<1x16x8x8xf32>
  func.return %s : tensor<1x16x8x8xf32>
}

// -----

// Negative: with 64 output channels the second convolution's partial sums
// (16 KiB) and its filters do not fit in half of the SRAM beside a tile:
// %y's tiles go out to DRAM as they are made.
// CHECK-LABEL: func.func @conv_then_wide_sum
// CHECK:       %y_out = dnn.dma_start ins(%y_sram : memref<1x8x8x8xf32>) {{.*}}npu.piece = {{\[}}"y", "tile0.0/1x9", 2048 : i64, 16384 : i64], direction = "sram_to_dram"
func.func @conv_then_wide_sum(%x: tensor<1x16x8x8xf32>) -> tensor<1x64x8x8xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x16x3x3xf32>}> : () -> tensor<64x16x3x3xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<64x64x1x1xf32>}> : () -> tensor<64x64x1x1xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x16x8x8xf32>, tensor<64x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x64x8x8xf32>
  %s = dnn.conv ins(%y, %v : tensor<1x64x8x8xf32>, tensor<64x64x1x1xf32>) : tensor<1x64x8x8xf32>
  func.return %s : tensor<1x64x8x8xf32>
}

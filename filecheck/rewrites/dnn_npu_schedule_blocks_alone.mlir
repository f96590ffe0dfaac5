// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=64KiB}" --verify-diagnostics | filecheck %s

// An op whose reader reads it channel for channel (a max pool) is tiled
// by blocks of output channels alone, every row in each tile, where that
// is estimated no slower once the store and the load again of its output
// are taken off (`_blocks_alone`): the pool then runs on each tile where
// the convolution wrote it (`_channel_chains`). (Its own file: the other
// SRAM sizes of the npu schedule tests tile these otherwise.)

// The whole input (32 KiB) fits beside a block of filters and a tile: 42
// blocks of output channels (before: 2 bands of rows of 63 blocks, each
// tile stored, and the pool loading %y again in 28 blocks of its own).
// %y never goes to DRAM.
// CHECK-LABEL: func.func @conv_then_max_pool
// CHECK-NOT:   %y_out
// CHECK:       dnn.conv ins(%x_sram, %w_sram : memref<1x8x32x32xf32>, memref<2x8x3x3xf32>) outs(%y_sram : memref<1x2x32x32xf32>) {{.*}}npu.writes = {{\[}}["y", "tile0.0/1x42", 8192 : i64, 262144 : i64]]
// CHECK-NOT:   dnn.dma_start
// CHECK:       dnn.max_pool ins(%y_sram : memref<1x2x32x32xf32>) outs(%m_sram : memref<1x2x16x16xf32>) {{.*}}npu.reads = {{\[}}["y", "tile0.0/1x42", 8192 : i64, 262144 : i64]], npu.writes = {{\[}}["m", "tile0.0/1x42", 2048 : i64, 65536 : i64]]
// CHECK:       dnn.conv ins(%x_sram, %w_sram_1
// CHECK:       dnn.max_pool ins(%y_sram_1 : memref<1x2x32x32xf32>)
// CHECK-NOT:   %y_out
// CHECK:       func.return
func.func @conv_then_max_pool(%x: tensor<1x8x32x32xf32>) -> tensor<1x64x16x16xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x8x3x3xf32>}> : () -> tensor<64x8x3x3xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x8x32x32xf32>, tensor<64x8x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x64x32x32xf32>
  %m = dnn.max_pool ins(%y : tensor<1x64x32x32xf32>) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x64x16x16xf32>
  func.return %m : tensor<1x64x16x16xf32>
}

// -----

// Negative: with 16 input channels the whole input (64 KiB) does not fit,
// so every tile reads a band of its rows: the convolution stays in bands
// of rows and blocks of channels, each tile stored to %y's DRAM home.
// CHECK-LABEL: func.func @wide_conv_then_max_pool
// CHECK:       dnn.conv ins(%x_sram, %w_sram : memref<1x16x9x32xf32>, memref<3x16x3x3xf32>) outs(%y_sram : memref<1x3x8x32xf32>) {{.*}}npu.writes = {{\[}}["y", "tile0.0/4x28", 3072 : i64, 262144 : i64]]
// CHECK:       %y_out = dnn.dma_start ins(%y_sram : memref<1x3x8x32xf32>) {{.*}}npu.piece = {{\[}}"y", "tile0.0/4x28", 3072 : i64, 262144 : i64], direction = "sram_to_dram"
func.func @wide_conv_then_max_pool(%x: tensor<1x16x32x32xf32>) -> tensor<1x64x16x16xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x16x3x3xf32>}> : () -> tensor<64x16x3x3xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x16x32x32xf32>, tensor<64x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x64x32x32xf32>
  %m = dnn.max_pool ins(%y : tensor<1x64x32x32xf32>) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x64x16x16xf32>
  func.return %m : tensor<1x64x16x16xf32>
}

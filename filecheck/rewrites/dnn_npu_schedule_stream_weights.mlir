// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=32KiB}" --verify-diagnostics | filecheck %s

// An op whose weights take more than 3/8 of the SRAM (`STREAM_WEIGHTS_SHARE`),
// or more than 1/8 when they take longer to load than the op computes,
// streams them in blocks of output channels even though it fits whole:
// its first block computes once its filters are in, while the next block's
// load runs (double buffering), instead of waiting for all the filters.

// 16 KiB of filters, above 12 KiB; the whole op (24 KiB) would fit in 7/8
// of 32 KiB: it runs in 4 blocks, block 1's filters loading while block 0
// computes.
// CHECK-LABEL: func.func @heavy_weights
// CHECK:       %w_in = dnn.dma_start {{.*}}npu.piece = {{\[}}"w", "block0/4", 4096 : i64, 16384 : i64], direction = "dram_to_sram"
// CHECK:       dnn.dma_wait %w_in
// CHECK:       %w_in_1 = dnn.dma_start {{.*}}npu.piece = {{\[}}"w", "block1/4", 4096 : i64, 16384 : i64]
// CHECK:       dnn.conv ins(%x_sram, %w_sram : memref<1x64x4x4xf32>, memref<16x64x1x1xf32>) {{.*}}npu.writes = {{\[}}["y", "tile0.0/1x4", 1024 : i64, 4096 : i64]]
// CHECK:       dnn.conv ins(%x_sram, %w_sram_1 : memref<1x64x4x4xf32>, memref<16x64x1x1xf32>)
func.func @heavy_weights(%x: tensor<1x64x4x4xf32>) -> tensor<1x64x4x4xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x64x1x1xf32>}> : () -> tensor<64x64x1x1xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x64x4x4xf32>, tensor<64x64x1x1xf32>) : tensor<1x64x4x4xf32>
  func.return %y : tensor<1x64x4x4xf32>
}

// -----

// 8 KiB of filters, above 1/8 of the SRAM (`STREAM_SLOW_WEIGHTS_SHARE`),
// which take longer to load (1,024 cycles) than the op computes (344); the
// whole op (22 KiB) fits in 7/8 of 32 KiB: they stream too.
// CHECK-LABEL: func.func @slow_weights
// CHECK:       npu.piece = {{\[}}"w", "block0/[[N:[0-9]+]]", {{.*}}direction = "dram_to_sram"
// CHECK:       npu.piece = {{\[}}"w", "block1/[[N]]", {{.*}}direction = "dram_to_sram"
// CHECK:       dnn.conv ins(%x_sram, %w_sram : memref<1x64x6x6xf32>, {{.*}}npu.writes = {{\[}}["y", "tile0.0/1x[[N]]"
func.func @slow_weights(%x: tensor<1x64x6x6xf32>) -> tensor<1x32x6x6xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<32x64x1x1xf32>}> : () -> tensor<32x64x1x1xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x64x6x6xf32>, tensor<32x64x1x1xf32>) : tensor<1x32x6x6xf32>
  func.return %y : tensor<1x32x6x6xf32>
}

// -----

// Negative: 2 KiB of filters, below 1/8 of the SRAM: the op runs whole,
// its filters loaded in one piece.
// CHECK-LABEL: func.func @light_weights
// CHECK-NOT:   "w", "block
// CHECK:       npu.piece = {{\[}}"w", "all", 2048 : i64, 2048 : i64]
// CHECK-NOT:   "w", "block
// CHECK:       dnn.conv ins(%x_sram, %w_sram : memref<1x64x4x4xf32>, memref<8x64x1x1xf32>) {{.*}}npu.writes = {{\[}}["y", "all", 512 : i64, 512 : i64]]
func.func @light_weights(%x: tensor<1x64x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<8x64x1x1xf32>}> : () -> tensor<8x64x1x1xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x64x4x4xf32>, tensor<8x64x1x1xf32>) : tensor<1x8x4x4xf32>
  func.return %y : tensor<1x8x4x4xf32>
}

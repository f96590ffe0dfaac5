// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=32KiB}" --verify-diagnostics | filecheck %s

// The op after one tiled by bands of rows alone runs band by band beside
// it when it reads nothing else of that output and reads it row for row (a
// 1x1 window of stride 1), tiled by rows and streaming its own output too
// (`_row_chains`): it takes the producer's bands and reads each tile in
// SRAM where it was written. (Its own file: the other SRAM sizes of the
// npu schedule tests tile these otherwise.)

// %y (128 KiB) is read by the 1x1 convolution %z and again, later, as the
// residual of %s, as ResNet-50's block outputs are (the scheduler takes
// no chain cascade here). %z runs on %y's 32 bands, each right after the
// tile that makes it, reading it where it was written; the tile is also
// stored (`keep+store`) for %s.
// CHECK-LABEL: func.func @residual_block
// CHECK:       dnn.conv ins(%x_sram, %w_sram : memref<1x32x1x32xf32>, memref<32x32x1x1xf32>) outs(%y_sram : memref<1x32x1x32xf32>) {{.*}}npu.writes = {{\[}}["y", "tile0.0/32x1", 4096 : i64, 131072 : i64]]
// CHECK:       %y_out = dnn.dma_start ins(%y_sram : memref<1x32x1x32xf32>) {{.*}}npu.piece = {{\[}}"y", "tile0.0/32x1", 4096 : i64, 131072 : i64], direction = "sram_to_dram"
// CHECK-NOT:   dnn.conv ins(%x_sram
// CHECK:       dnn.conv ins(%y_sram, %v_sram : memref<1x32x1x32xf32>, memref<32x32x1x1xf32>) outs(%z_sram : memref<1x32x1x32xf32>) {{.*}}npu.reads = {{\[}}["y", "tile0.0/32x1", 4096 : i64, 131072 : i64], ["v", "all"
// CHECK:       dnn.conv ins(%x_sram_1, %w_sram : {{.*}}npu.writes = {{\[}}["y", "tile1.0/32x1"
// CHECK:       dnn.conv ins(%y_sram_1, %v_sram : {{.*}}npu.reads = {{\[}}["y", "tile1.0/32x1"
func.func @residual_block(%x: tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<32x32x1x1xf32>}> : () -> tensor<32x32x1x1xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<32x32x1x1xf32>}> : () -> tensor<32x32x1x1xf32>
  %u = "dnn.weight"() <{value = dense<1.0> : tensor<32x32x3x3xf32>}> : () -> tensor<32x32x3x3xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x32x32x32xf32>, tensor<32x32x1x1xf32>) {activation = "relu"} : tensor<1x32x32x32xf32>
  %z = dnn.conv ins(%y, %v : tensor<1x32x32x32xf32>, tensor<32x32x1x1xf32>) {activation = "relu"} : tensor<1x32x32x32xf32>
  %s = dnn.conv ins(%z, %u, residual %y : tensor<1x32x32x32xf32>, tensor<32x32x3x3xf32>, tensor<1x32x32x32xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x32x32x32xf32>
  func.return %s : tensor<1x32x32x32xf32>
}

// -----

// Negative: %z is a 3x3 convolution, whose bands read a halo of %y's rows
// beyond the tile: it reads %y by bands of rows, loaded from DRAM.
// CHECK-LABEL: func.func @halo_block
// CHECK-NOT:   npu.reads = {{\[}}["y", "tile
// CHECK:       npu.reads = {{\[}}["y", "rows
// CHECK-NOT:   npu.reads = {{\[}}["y", "tile
// CHECK:       func.return
func.func @halo_block(%x: tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<32x32x1x1xf32>}> : () -> tensor<32x32x1x1xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<32x32x3x3xf32>}> : () -> tensor<32x32x3x3xf32>
  %u = "dnn.weight"() <{value = dense<1.0> : tensor<32x32x3x3xf32>}> : () -> tensor<32x32x3x3xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x32x32x32xf32>, tensor<32x32x1x1xf32>) {activation = "relu"} : tensor<1x32x32x32xf32>
  %z = dnn.conv ins(%y, %v : tensor<1x32x32x32xf32>, tensor<32x32x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x32x32x32xf32>
  %s = dnn.conv ins(%z, %u, residual %y : tensor<1x32x32x32xf32>, tensor<32x32x3x3xf32>, tensor<1x32x32x32xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x32x32x32xf32>
  func.return %s : tensor<1x32x32x32xf32>
}

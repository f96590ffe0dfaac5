// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=192KiB}" | filecheck %s

// An op that fits whole, reading an input that takes more than half the
// SRAM through the same window as an earlier op tiled by bands of rows,
// may run on that op's bands instead (`_sibling_rows`); the two then run
// band by band together (`_sibling_bands`), each band of the input loaded
// once. The schedule is made so once, and kept where it runs faster.

// x is 128 KiB. a (its output 64 KiB) does not fit in 7/8 of 192 KiB and
// runs in 64 bands of one row; b (its output 16 KiB) fits whole, and
// loaded all of x again after a. Now b runs on a's bands, each reading the
// row a read (45,394 -> 26,704 cycles; DRAM 344,704 -> 213,632 bytes).
// CHECK-LABEL: func.func @joins
// CHECK:       %x_in = dnn.dma_start {{.*}}npu.piece = {{\[}}"x", "rows0:1", 2048 : i64, 131072 : i64]
// CHECK:       dnn.conv ins(%x_sram, %w_sram : {{.*}}npu.writes = {{\[}}["a", "tile0.0/64x1"
// CHECK:       dnn.conv ins(%x_sram, %v_sram : memref<1x16x1x32xf32>, memref<2x16x1x1xf32>) {{.*}}npu.writes = {{\[}}["b", "tile0.0/64x1"
// CHECK-NOT:   "x", "all"
// CHECK:       npu.writes = {{\[}}["b", "tile63.0/64x1"
func.func @joins(%x: tensor<1x16x64x32xf32>) -> (tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>) {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<8x16x1x1xf32>}> : () -> tensor<8x16x1x1xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<2x16x1x1xf32>}> : () -> tensor<2x16x1x1xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x16x64x32xf32>, tensor<8x16x1x1xf32>) : tensor<1x8x64x32xf32>
  %b = dnn.conv ins(%x, %v : tensor<1x16x64x32xf32>, tensor<2x16x1x1xf32>) : tensor<1x2x64x32xf32>
  func.return %a, %b : tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>
}

// -----

// Negative: b is a 3x3 convolution, whose bands would read other rows
// than a's: it runs whole after a, on all of x loaded again.
// CHECK-LABEL: func.func @other_window
// CHECK:       npu.piece = {{\[}}"x", "all", 131072 : i64, 131072 : i64]
// CHECK:       npu.writes = {{\[}}["a", "tile63.0/64x1"
// CHECK:       dnn.conv ins({{%x_sram_[0-9]+}}, %v_sram : memref<1x16x64x32xf32>, memref<2x16x3x3xf32>) {{.*}}npu.writes = {{\[}}["b", "all"
func.func @other_window(%x: tensor<1x16x64x32xf32>) -> (tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>) {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<8x16x1x1xf32>}> : () -> tensor<8x16x1x1xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<2x16x3x3xf32>}> : () -> tensor<2x16x3x3xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x16x64x32xf32>, tensor<8x16x1x1xf32>) : tensor<1x8x64x32xf32>
  %b = dnn.conv ins(%x, %v : tensor<1x16x64x32xf32>, tensor<2x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x64x32xf32>
  func.return %a, %b : tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>
}

// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=64KiB}" | filecheck %s

// Ops tiled by bands of rows alone whose band i reads the same rows of the
// same tensor (siblings: Inception's 1x1 convolutions of a module's input)
// run band by band together (`_sibling_bands`): each band is loaded once
// for all of them, instead of once per op.

// x (128 KiB) does not fit in 64 KiB; two 1x1 convolutions read it in 64
// bands of one row. Band i of a and band i of b read the one buffer x's
// rows were loaded into: x crosses the DRAM port once (DRAM 332,800 ->
// 263,168 bytes, 41,656 -> 32,896 cycles).
// CHECK-LABEL: func.func @siblings
// CHECK:       %x_in = dnn.dma_start {{.*}}npu.piece = {{\[}}"x", "rows0:1", 2048 : i64, 131072 : i64]
// CHECK:       dnn.conv ins(%x_sram, %w_sram : {{.*}}npu.writes = {{\[}}["a", "tile0.0/64x1"
// CHECK-NOT:   "x", "rows0:1", 2048 : i64, 131072 : i64], direction
// CHECK:       dnn.conv ins(%x_sram, %v_sram : {{.*}}npu.writes = {{\[}}["b", "tile0.0/64x1"
// CHECK:       dnn.conv ins(%x_sram_1, %w_sram : {{.*}}npu.writes = {{\[}}["a", "tile1.0/64x1"
// CHECK:       dnn.conv ins(%x_sram_1, %v_sram : {{.*}}npu.writes = {{\[}}["b", "tile1.0/64x1"
// CHECK-NOT:   "x", "rows0:1", 2048 : i64, 131072 : i64], direction
// CHECK:       npu.writes = {{\[}}["b", "tile63.0/64x1"
func.func @siblings(%x: tensor<1x16x64x32xf32>) -> (tensor<1x8x64x32xf32>, tensor<1x8x64x32xf32>) {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<8x16x1x1xf32>}> : () -> tensor<8x16x1x1xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<8x16x1x1xf32>}> : () -> tensor<8x16x1x1xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x16x64x32xf32>, tensor<8x16x1x1xf32>) : tensor<1x8x64x32xf32>
  %b = dnn.conv ins(%x, %v : tensor<1x16x64x32xf32>, tensor<8x16x1x1xf32>) : tensor<1x8x64x32xf32>
  func.return %a, %b : tensor<1x8x64x32xf32>, tensor<1x8x64x32xf32>
}

// -----

// Negative: the second reader is a 3x3 convolution, whose bands read one
// row more on each side: no band of it reads what a band of the 1x1 reads,
// and each op runs all its bands before the other's.
// CHECK-LABEL: func.func @cousins
// CHECK:       dnn.conv ins(%x_sram, %w_sram : {{.*}}npu.writes = {{\[}}["a", "tile0.0/64x1"
// CHECK-NOT:   , %v_sram :
// CHECK:       npu.writes = {{\[}}["a", "tile63.0/64x1"
// CHECK:       dnn.conv ins({{%x_sram_[0-9]+}}, %v_sram
func.func @cousins(%x: tensor<1x16x64x32xf32>) -> (tensor<1x8x64x32xf32>, tensor<1x8x64x32xf32>) {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<8x16x1x1xf32>}> : () -> tensor<8x16x1x1xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<8x16x3x3xf32>}> : () -> tensor<8x16x3x3xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x16x64x32xf32>, tensor<8x16x1x1xf32>) : tensor<1x8x64x32xf32>
  %b = dnn.conv ins(%x, %v : tensor<1x16x64x32xf32>, tensor<8x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x8x64x32xf32>
  func.return %a, %b : tensor<1x8x64x32xf32>, tensor<1x8x64x32xf32>
}

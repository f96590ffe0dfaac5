// RUN: pyocc-opt %s -p "dnn-npu-schedule{sram=64KiB}" | filecheck %s

// An op whose filters take more than 1/8 of the SRAM but load faster than
// it computes runs whole by the rules (`STREAM_SLOW_WEIGHTS_SHARE`). Where
// the simulation shows its compute waiting for them, the schedule is made
// again with them streamed in blocks of output channels, and kept where it
// runs faster (`_stream_stalled`).

// The first convolution's 9 KiB of filters (above 8 KiB; 1,152 cycles to
// load against 2,304 of compute) load after x, and it waited for all of
// them: now it streams them in 3 blocks and starts once the first is in
// (10,368 -> 9,648 cycles). Negative: the second convolution's filters,
// as large, load while the first computes, so it never waited: it still
// loads them whole and runs whole.
// CHECK-LABEL: func.func @first_waits
// CHECK:       %x_in = dnn.dma_start {{.*}}npu.piece = {{\[}}"x", "all"
// CHECK:       npu.piece = {{\[}}"w", "block0/3", 3456 : i64, 9216 : i64]
// CHECK:       npu.piece = {{\[}}"w", "block1/3", 2880 : i64, 9216 : i64]
// CHECK:       npu.piece = {{\[}}"w", "block2/3", 2880 : i64, 9216 : i64]
// CHECK-NOT:   "v", "block
// CHECK:       npu.piece = {{\[}}"v", "all", 9216 : i64, 9216 : i64]
// CHECK:       dnn.conv ins(%x_sram, %w_sram : memref<1x16x16x16xf32>, memref<6x16x3x3xf32>) {{.*}}npu.writes = {{\[}}["a", "tile0.0/1x3"
// CHECK:       dnn.conv ins(%x_sram, %w_sram_1 : memref<1x16x16x16xf32>, memref<5x16x3x3xf32>) {{.*}}npu.writes = {{\[}}["a", "tile0.1/1x3"
// CHECK:       dnn.conv ins(%x_sram, %w_sram_2 : memref<1x16x16x16xf32>, memref<5x16x3x3xf32>) {{.*}}npu.writes = {{\[}}["a", "tile0.2/1x3"
// CHECK-NOT:   "v", "block
// CHECK:       dnn.conv ins(%a_sram, %v_sram : memref<1x16x16x16xf32>, memref<16x16x3x3xf32>) {{.*}}npu.writes = {{\[}}["b", "all"
// CHECK:       dnn.max_pool ins(%b_sram : memref<1x16x16x16xf32>)
func.func @first_waits(%x: tensor<1x16x16x16xf32>) -> tensor<1x16x16x16xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<16x16x3x3xf32>}> : () -> tensor<16x16x3x3xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<16x16x3x3xf32>}> : () -> tensor<16x16x3x3xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x16x16x16xf32>, tensor<16x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x16x16x16xf32>
  %b = dnn.conv ins(%a, %v : tensor<1x16x16x16xf32>, tensor<16x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x16x16x16xf32>
  %y = dnn.max_pool ins(%b : tensor<1x16x16x16xf32>) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x16x16x16xf32>
  func.return %y : tensor<1x16x16x16xf32>
}

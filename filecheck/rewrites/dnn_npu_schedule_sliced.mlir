// RUN: pyocc-opt %s -p "dnn-npu-schedule{sram=512KiB}" | filecheck %s

// An op run on bands of rows alone streams each band out. Where the later
// ops read that output by bands of rows of their own (with halos, other
// bounds), each band was loaded back from DRAM once the producer's bands
// were stored. Where the output fits half the SRAM, the schedule made with
// it assembled in SRAM (`_assembled`: each band copied into its rows of the
// whole tensor's buffer) and each band its readers read copied out of the
// whole, SRAM to SRAM, is kept where it ranks first (`_key`).

// The max pool's 1 MiB input runs on 13 bands of rows. Both convolutions
// read its 256 KiB output by 6 bands of rows, with a row of halo each
// side. Streamed out and loaded back by rows: 332,052 cycles, 2,656,400
// DRAM bytes; assembled and copied out: 308,961 cycles, 2,304,144 bytes.
// CHECK-LABEL: func.func @sliced
// CHECK:       %p_sram_1 = dnn.mem_offset %mempool_sram {npu.buffer = "b4:p:all"
// CHECK:       "dnn.memcpy"(%p_sram, %0)
// CHECK-SAME:  npu.writes = {{\[}}["p", "rows0:19|assembled"
// CHECK-NOT:   dnn.dma_start ins(%p_sram
// CHECK:       npu.writes = {{\[}}["p", "rows236:256|assembled"
// CHECK-NOT:   dnn.dma_start ins(%p_sram
// CHECK:       "dnn.memcpy"(%{{.*}}, %p_sram_14) <{kind = "host_to_host", size = 44032 : i64, count = 1 : i64, source_stride = 262144 : i64, target_stride = 44032 : i64}>
// CHECK-SAME:  npu.reads = {{\[}}["p", "all", 262144 : i64, 262144 : i64]]
// CHECK-SAME:  npu.writes = {{\[}}["p", "rows0:43|copy"
// CHECK:       dnn.conv ins(%p_sram_14, %w_sram : memref<1x1x43x256xf32>
// CHECK:       "dnn.memcpy"
// CHECK-SAME:  npu.writes = {{\[}}["p", "rows41:86|copy"
// The second convolution reads the same rows: the same copy.
// CHECK:       dnn.conv ins(%p_sram_14, %v_sram : memref<1x1x43x256xf32>
func.func @sliced(%x: tensor<1x1x512x512xf32>) -> (tensor<1x2x256x256xf32>, tensor<1x2x256x256xf32>) {
  %p = dnn.max_pool ins(%x : tensor<1x1x512x512xf32>) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x1x256x256xf32>
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %a = dnn.conv ins(%p, %w : tensor<1x1x256x256xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x256x256xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %b = dnn.conv ins(%p, %v : tensor<1x1x256x256xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x256x256xf32>
  func.return %a, %b : tensor<1x2x256x256xf32>, tensor<1x2x256x256xf32>
}

// Negative: the same with the pool's output returned too. It goes to DRAM
// anyway (a graph output): its bands stream out, and the convolutions load
// their bands of rows back.
// CHECK-LABEL: func.func @sliced_returned
// CHECK-NOT:   dnn.memcpy
// CHECK:       %p_out_1 = dnn.dma_start ins(%p_sram :
// CHECK-SAME:  npu.piece = {{\[}}"p", "tile0.0/13x1"
// CHECK-NOT:   dnn.memcpy
// CHECK:       %p_in = dnn.dma_start ins(%p_out
// CHECK-SAME:  npu.piece = {{\[}}"p", "rows0:43"
// CHECK-NOT:   dnn.memcpy
// CHECK:       dnn.conv ins(%p_sram_13, %w_sram
// CHECK-NOT:   dnn.memcpy
// CHECK:       func.return
func.func @sliced_returned(%x: tensor<1x1x512x512xf32>) -> (tensor<1x2x256x256xf32>, tensor<1x2x256x256xf32>, tensor<1x1x256x256xf32>) {
  %p = dnn.max_pool ins(%x : tensor<1x1x512x512xf32>) {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : tensor<1x1x256x256xf32>
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %a = dnn.conv ins(%p, %w : tensor<1x1x256x256xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x256x256xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %b = dnn.conv ins(%p, %v : tensor<1x1x256x256xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x256x256xf32>
  func.return %a, %b, %p : tensor<1x2x256x256xf32>, tensor<1x2x256x256xf32>, tensor<1x1x256x256xf32>
}

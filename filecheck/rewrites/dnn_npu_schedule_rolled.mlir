// RUN: pyocc-opt %s -p "dnn-npu-schedule{sram=32KiB}" | filecheck %s

// A chain cascade runs its ops band by band of rows, and the rows a 3x3
// reader needs from its producer overlap the band before's by its halo.
// Computed again, that halo costs the producer's MACs and its input's rows
// once more per band. Rolled (`_chains`' `rolled`), the producer computes
// each row once: its new rows only, into their own buffer; the reader reads
// a copy of its rows made right before it, SRAM to SRAM, out of the
// producer's band before and this band (two strided `dnn.memcpy`, one
// compute for the simulator).

// A 1x1 convolution (32 to 16 channels) feeds a 3x3 one (16 to 8), 32 rows
// of 16. At 32 KiB no chain computing halos again saves enough; rolled, the
// chain runs in 13 bands: 11,224 cycles and 88,576 DRAM bytes, where the
// chain computing its halos again (counted tight) ran 18,472 and 137,728.
// CHECK-LABEL: func.func @rolled
// CHECK:       dnn.conv ins(%x_sram, %wa_sram
// CHECK-SAME:  npu.writes = {{\[}}["a", "rows0:3"
// CHECK-SAME:  npu.macs = 24576
// The second band computes rows 3 and 4 only (2 of 32 rows: 16,384 MACs).
// CHECK:       dnn.conv ins(%x_sram_1, %wa_sram
// CHECK-SAME:  npu.writes = {{\[}}["a", "rows3:5"
// CHECK-SAME:  npu.macs = 16384
// Its reader's rows 1..4: rows 1 and 2 out of the band before, 3 and 4 out of this one.
// CHECK:       "dnn.memcpy"
// CHECK-SAME:  size = 128 : i64, count = 16 : i64, source_stride = 192 : i64, target_stride = 256 : i64
// CHECK-SAME:  npu.reads = {{\[}}["a", "rows0:3"
// CHECK-SAME:  npu.writes = {{\[}}["a", "rows1:5|copy"
// CHECK:       "dnn.memcpy"
// CHECK-SAME:  size = 128 : i64, count = 16 : i64, source_stride = 128 : i64, target_stride = 256 : i64
// CHECK-SAME:  npu.reads = {{\[}}["a", "rows3:5"
// CHECK-SAME:  npu.writes = {{\[}}["a", "rows1:5|copy"
// CHECK:       dnn.conv ins(%a_sram_2, %wy_sram : memref<1x16x4x16xf32>
// CHECK-SAME:  npu.reads = {{\[}}["a", "rows1:5|copy"
func.func @rolled(%x: tensor<1x32x32x16xf32>) -> tensor<1x8x32x16xf32> {
  %wa = "dnn.weight"() <{value = dense<1.0> : tensor<16x32x1x1xf32>}> : () -> tensor<16x32x1x1xf32>
  %a = dnn.conv ins(%x, %wa : tensor<1x32x32x16xf32>, tensor<16x32x1x1xf32>) : tensor<1x16x32x16xf32>
  %wy = "dnn.weight"() <{value = dense<1.0> : tensor<8x16x3x3xf32>}> : () -> tensor<8x16x3x3xf32>
  %y = dnn.conv ins(%a, %wy : tensor<1x16x32x16xf32>, tensor<8x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x8x32x16xf32>
  func.return %y : tensor<1x8x32x16xf32>
}

// Negative: the same with the 1x1 convolution's output returned too. It
// goes to DRAM anyway (a graph output), so no chain keeps it in SRAM: it
// streams out by tiles and nothing is copied.
// CHECK-LABEL: func.func @rolled_returned
// CHECK-NOT:   dnn.memcpy
// CHECK:       npu.writes = {{\[}}["a", "tile0.0/32x1"
// CHECK-NOT:   dnn.memcpy
// CHECK:       func.return
func.func @rolled_returned(%x: tensor<1x32x32x16xf32>) -> (tensor<1x8x32x16xf32>, tensor<1x16x32x16xf32>) {
  %wa = "dnn.weight"() <{value = dense<1.0> : tensor<16x32x1x1xf32>}> : () -> tensor<16x32x1x1xf32>
  %a = dnn.conv ins(%x, %wa : tensor<1x32x32x16xf32>, tensor<16x32x1x1xf32>) : tensor<1x16x32x16xf32>
  %wy = "dnn.weight"() <{value = dense<1.0> : tensor<8x16x3x3xf32>}> : () -> tensor<8x16x3x3xf32>
  %y = dnn.conv ins(%a, %wy : tensor<1x16x32x16xf32>, tensor<8x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x8x32x16xf32>
  func.return %y, %a : tensor<1x8x32x16xf32>, tensor<1x16x32x16xf32>
}

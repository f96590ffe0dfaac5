// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=96KiB}" | filecheck %s

// A bottleneck in one rolled chain (`_chains`' `rolled`): a 1x1
// convolution (64 to 16 channels), a 3x3 (16 to 16) and a 1x1 (16 to 64)
// that adds its input %x back, 32 rows of 16. The first 1x1 reads each row
// of %x once, band by band; the last reads its rows of %x one row behind,
// for the 3x3's halo between them. Those rows lie in two bands of %x that
// the first 1x1 loaded: they are copied out of both in SRAM (two strided
// `dnn.memcpy` into one buffer, as a rolled reader's rows of its producer
// are), not loaded again. %x crosses the DRAM port once.
// CHECK-LABEL: func.func @residual
// CHECK-NOT:   npu.piece = ["x", "rows2:4"
// CHECK:       npu.piece = ["x", "rows0:3"
// CHECK:       dnn.conv ins(%x_sram, %wa_sram
// CHECK:       npu.piece = ["x", "rows3:5"
// The second band's residual, rows 2 and 3: row 2 out of the band before, row 3 out of this one.
// CHECK:       "dnn.memcpy"{{.*}}size = 64 : i64, count = 64 : i64, source_stride = 192 : i64, target_stride = 128 : i64
// CHECK-SAME:  npu.reads = {{\[}}["x", "rows0:3"
// CHECK-SAME:  npu.writes = {{\[}}["x", "rows2:4|copy"
// CHECK-NEXT:  dnn.subview
// CHECK-NEXT:  dnn.subview
// CHECK-NEXT:  "dnn.memcpy"
// CHECK-SAME:  size = 64 : i64, count = 64 : i64, source_stride = 128 : i64, target_stride = 128 : i64
// CHECK-SAME:  npu.reads = {{\[}}["x", "rows3:5"
// CHECK-SAME:  npu.writes = {{\[}}["x", "rows2:4|copy"
// CHECK:       dnn.conv ins(%b_sram{{[_0-9]*}}, %wc_sram, residual %x_sram{{[_0-9]*}}
// CHECK-SAME:  ["x", "rows2:4|copy"
// CHECK-NOT:   npu.piece = ["x", "rows2:4"
// CHECK:       func.return
func.func @residual(%x: tensor<1x64x32x16xf32>) -> tensor<1x64x32x16xf32> {
  %wa = "dnn.weight"() <{value = dense<1.0> : tensor<16x64x1x1xf32>}> : () -> tensor<16x64x1x1xf32>
  %a = dnn.conv ins(%x, %wa : tensor<1x64x32x16xf32>, tensor<16x64x1x1xf32>) {activation = "relu"} : tensor<1x16x32x16xf32>
  %wb = "dnn.weight"() <{value = dense<1.0> : tensor<16x16x3x3xf32>}> : () -> tensor<16x16x3x3xf32>
  %b = dnn.conv ins(%a, %wb : tensor<1x16x32x16xf32>, tensor<16x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x16x32x16xf32>
  %wc = "dnn.weight"() <{value = dense<1.0> : tensor<64x16x1x1xf32>}> : () -> tensor<64x16x1x1xf32>
  %y = dnn.conv ins(%b, %wc, residual %x : tensor<1x16x32x16xf32>, tensor<64x16x1x1xf32>, tensor<1x64x32x16xf32>) : tensor<1x64x32x16xf32>
  func.return %y : tensor<1x64x32x16xf32>
}

// -----

// Negative: the residual is another tensor (%r), which no op of the chain
// loaded before: each band of the last 1x1 loads its rows of %r, and
// nothing of %r is copied.
// CHECK-LABEL: func.func @other
// CHECK-NOT:   ["r", "rows{{[0-9]+}}:{{[0-9]+}}|copy"
// CHECK:       npu.piece = ["r", "rows0:2"
// CHECK:       npu.piece = ["r", "rows2:4"
// CHECK-NOT:   ["r", "rows{{[0-9]+}}:{{[0-9]+}}|copy"
// CHECK:       func.return
func.func @other(%x: tensor<1x64x32x16xf32>, %r: tensor<1x64x32x16xf32>) -> tensor<1x64x32x16xf32> {
  %wa = "dnn.weight"() <{value = dense<1.0> : tensor<16x64x1x1xf32>}> : () -> tensor<16x64x1x1xf32>
  %a = dnn.conv ins(%x, %wa : tensor<1x64x32x16xf32>, tensor<16x64x1x1xf32>) {activation = "relu"} : tensor<1x16x32x16xf32>
  %wb = "dnn.weight"() <{value = dense<1.0> : tensor<16x16x3x3xf32>}> : () -> tensor<16x16x3x3xf32>
  %b = dnn.conv ins(%a, %wb : tensor<1x16x32x16xf32>, tensor<16x16x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x16x32x16xf32>
  %wc = "dnn.weight"() <{value = dense<1.0> : tensor<64x16x1x1xf32>}> : () -> tensor<64x16x1x1xf32>
  %y = dnn.conv ins(%b, %wc, residual %r : tensor<1x16x32x16xf32>, tensor<64x16x1x1xf32>, tensor<1x64x32x16xf32>) : tensor<1x64x32x16xf32>
  func.return %y : tensor<1x64x32x16xf32>
}

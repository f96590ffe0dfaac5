// RUN: pyocc-opt %s -p convert-dnn-to-llvm -t llvm | filecheck %s

// Exported to LLVM, the patches of a tiled conv, which differ only in
// their rows (input rows, the padding at the image's top or bottom edge,
// the planned scratch), share one function that reads those at run time:
// three patches of a 3x3 conv (sites 0-2) all call f_site_0_sizes, each
// through a wrapper of its own that appends its sizes (input rows, output
// rows, padding above, block rows, block channels) to the buffer pointers.
// A conv alone with its shape (site 3) keeps its own function, and so do
// two convs alike but for their planned scratch (sites 4 and 5): no rows
// to share, so each keeps the function specialised to its shape. (The
// patches' activation is tanh: with relu or none, these shallow convs
// would run register tiles on a host without AVX-512, and a patch whose own
// function does keeps it, conv.register_tiles.)

func.func @f(%x5: memref<1x2x5x8xf32> {onnx.name = "x5"}, %x6: memref<1x2x6x8xf32> {onnx.name = "x6"},
             %w: memref<3x2x3x3xf32> {onnx.name = "w"}, %w1: memref<3x2x1x1xf32> {onnx.name = "w1"},
             %w4: memref<4x2x3x3xf32> {onnx.name = "w4"},
             %ws: memref<2304xi8> {onnx.name = "ws"}, %ws2: memref<1152xi8> {onnx.name = "ws2"},
             %ws3: memref<576xi8> {onnx.name = "ws3"},
             %y0: memref<1x3x4x8xf32> {onnx.name = "y0", dnn.output}, %y1: memref<1x3x4x8xf32> {onnx.name = "y1", dnn.output},
             %y2: memref<1x3x4x8xf32> {onnx.name = "y2", dnn.output}, %y3: memref<1x3x6x8xf32> {onnx.name = "y3", dnn.output},
             %y4: memref<1x4x6x8xf32> {onnx.name = "y4", dnn.output}, %y5: memref<1x4x6x8xf32> {onnx.name = "y5", dnn.output}) {
  dnn.conv ins(%x5, %w : memref<1x2x5x8xf32>, memref<3x2x3x3xf32>) outs(%y0, workspace %ws : memref<1x3x4x8xf32>, memref<2304xi8>) {pads = array<i64: 1, 1, 0, 1>, activation = "tanh"}
  dnn.conv ins(%x6, %w : memref<1x2x6x8xf32>, memref<3x2x3x3xf32>) outs(%y1, workspace %ws : memref<1x3x4x8xf32>, memref<2304xi8>) {pads = array<i64: 0, 1, 0, 1>, activation = "tanh"}
  dnn.conv ins(%x5, %w : memref<1x2x5x8xf32>, memref<3x2x3x3xf32>) outs(%y2, workspace %ws2 : memref<1x3x4x8xf32>, memref<1152xi8>) {pads = array<i64: 0, 1, 1, 1>, activation = "tanh"}
  dnn.conv ins(%x6, %w1 : memref<1x2x6x8xf32>, memref<3x2x1x1xf32>) outs(%y3 : memref<1x3x6x8xf32>)
  dnn.conv ins(%x6, %w4 : memref<1x2x6x8xf32>, memref<4x2x3x3xf32>) outs(%y4, workspace %ws2 : memref<1x4x6x8xf32>, memref<1152xi8>) {pads = array<i64: 1, 1, 1, 1>}
  dnn.conv ins(%x6, %w4 : memref<1x2x6x8xf32>, memref<4x2x3x3xf32>) outs(%y5, workspace %ws3 : memref<1x4x6x8xf32>, memref<576xi8>) {pads = array<i64: 1, 1, 1, 1>}
  func.return
}

// CHECK:      define i32 @"f_run"(
// CHECK:        call ccc void @"f_site_0"(ptr %[[SLOTS:.*]])
// CHECK:        call ccc void @"f_site_1"(ptr %[[SLOTS]])
// CHECK:        call ccc void @"f_site_2"(ptr %[[SLOTS]])
// CHECK:        call ccc void @"f_site_3"(ptr %[[SLOTS]])
// CHECK:        call ccc void @"f_site_4"(ptr %[[SLOTS]])
// CHECK:        call ccc void @"f_site_5"(ptr %[[SLOTS]])

// 6 buffer pointers (2 inputs, 2 absent ones, the output, the workspace), then 5 sizes:
// 5 input rows, 4 output rows, 1 padding row above, blocks of 4 rows of both channels
// CHECK-LABEL: define internal void @"f_site_0"(ptr %{{.*}}) noinline
// CHECK:        alloca ptr, i64 11
// CHECK:        store ptr inttoptr (i64 5 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 4 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 1 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 4 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 2 to ptr)
// CHECK:        call void @"f_site_0_sizes"(
// CHECK-NEXT:   ret void

// 6 input rows, none padded; then the bottom patch, with half the scratch: one channel at a time
// CHECK-LABEL: define internal void @"f_site_1"(ptr %{{.*}}) noinline
// CHECK:        store ptr inttoptr (i64 6 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 4 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 0 to ptr)
// CHECK:        call void @"f_site_0_sizes"(
// CHECK-LABEL: define internal void @"f_site_2"(ptr %{{.*}}) noinline
// CHECK:        store ptr inttoptr (i64 5 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 4 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 0 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 4 to ptr)
// CHECK-NEXT:   getelementptr
// CHECK-NEXT:   store ptr inttoptr (i64 1 to ptr)
// CHECK:        call void @"f_site_0_sizes"(

// the others: functions of their own, no wrapper
// CHECK-LABEL: define internal void @"f_site_3"(ptr %{{.*}}) noinline
// CHECK-NOT:    _sizes
// CHECK:        ret void
// CHECK-LABEL: define internal void @"f_site_4"(ptr %{{.*}}) noinline
// CHECK-NOT:    _sizes
// CHECK:        ret void
// CHECK-LABEL: define internal void @"f_site_5"(ptr %{{.*}}) noinline
// CHECK-NOT:    _sizes
// CHECK:        ret void

// the shared function: its rows from the buffer table
// CHECK-LABEL: define internal void @"f_site_0_sizes"(ptr %{{.*}}) noinline
// CHECK:        ptrtoint ptr %{{.*}} to i64
// CHECK:        call void @"scipy_cblas_sgemm"(
// CHECK-NOT:  define internal void @"f_site_{{[1-5]}}_sizes"

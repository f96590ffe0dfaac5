// RUN: pyocc-opt %s -p convert-dnn-to-llvm -t llvm | filecheck %s

// Exported to LLVM, sites whose native kernel reads some sizes at run time
// and that differ only in those share one function: two group-1 1x1
// preact_convs with 4 and 6 input channels and different planned scratch
// (DenseNet's case) both call f_site_0_sizes, each through a wrapper of its
// own that appends its sizes (channels, block rows, block channels) to the
// buffer pointers. A grouped preact_conv runs direct loops, which take no
// sizes at run time: it keeps a function of its own, with no wrapper.

func.func @f(%x: memref<1x4x8x8xf32> {onnx.name = "x"}, %x6: memref<1x6x8x8xf32> {onnx.name = "x6"},
             %s: memref<4xf32> {onnx.name = "s"}, %s6: memref<6xf32> {onnx.name = "s6"},
             %w: memref<5x4x1x1xf32> {onnx.name = "w"}, %w6: memref<5x6x1x1xf32> {onnx.name = "w6"},
             %wg: memref<6x2x1x1xf32> {onnx.name = "wg"},
             %ws: memref<1024xi8> {onnx.name = "ws"}, %ws2: memref<512xi8> {onnx.name = "ws2"},
             %y: memref<1x5x8x8xf32> {onnx.name = "y", dnn.output}, %y6: memref<1x5x8x8xf32> {onnx.name = "y6", dnn.output},
             %g: memref<1x6x8x8xf32> {onnx.name = "g", dnn.output}) {
  dnn.preact_conv ins(%x, %s, %s, %w : memref<1x4x8x8xf32>, memref<4xf32>, memref<4xf32>, memref<5x4x1x1xf32>) outs(%y, workspace %ws : memref<1x5x8x8xf32>, memref<1024xi8>) {pre_activation = "relu"}
  dnn.preact_conv ins(%x6, %s6, %s6, %w6 : memref<1x6x8x8xf32>, memref<6xf32>, memref<6xf32>, memref<5x6x1x1xf32>) outs(%y6, workspace %ws2 : memref<1x5x8x8xf32>, memref<512xi8>) {pre_activation = "relu"}
  dnn.preact_conv ins(%x6, %s6, %s6, %wg : memref<1x6x8x8xf32>, memref<6xf32>, memref<6xf32>, memref<6x2x1x1xf32>) outs(%g : memref<1x6x8x8xf32>) {pre_activation = "relu", group = 3}
  func.return
}

// CHECK:      define i32 @"f_run"(
// CHECK:        call ccc void @"f_site_0"(ptr %[[SLOTS:.*]])
// CHECK:        call ccc void @"f_site_1"(ptr %[[SLOTS]])
// CHECK:        call ccc void @"f_site_2"(ptr %[[SLOTS]])

// 8 buffer pointers (4 inputs, 2 absent ones, the output, the workspace), then 3 sizes
// CHECK-LABEL: define internal void @"f_site_0"(ptr %{{.*}}) noinline
// CHECK:        alloca ptr, i64 11
// CHECK:        store ptr inttoptr (i64 4 to ptr)
// CHECK:        call void @"f_site_0_sizes"(
// CHECK-NEXT:   ret void

// CHECK-LABEL: define internal void @"f_site_1"(ptr %{{.*}}) noinline
// CHECK:        alloca ptr, i64 11
// CHECK:        store ptr inttoptr (i64 6 to ptr)
// CHECK:        call void @"f_site_0_sizes"(
// CHECK-NEXT:   ret void

// the grouped one: its own direct loops
// CHECK-LABEL: define internal void @"f_site_2"(ptr %{{.*}}) noinline
// CHECK-NOT:    _sizes
// CHECK:        ret void

// CHECK-LABEL: define internal void @"f_site_0_sizes"(ptr %{{.*}}) noinline
// CHECK:        ptrtoint ptr %{{.*}} to i64
// CHECK:        call void @"scipy_cblas_sgemm"(
// CHECK-NOT:  define internal void @"f_site_1_sizes"
// CHECK-NOT:  define internal void @"f_site_2_sizes"

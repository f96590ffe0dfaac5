// RUN: pyocc-opt %s -p convert-dnn-to-llvm -t llvm | filecheck %s
// RUN: pyocc-opt %s -p "convert-dnn-to-llvm{run_part_ops=2}" -t llvm | filecheck %s --check-prefix=PARTS

// Exported to LLVM, a site whose kernel has a native emitter calls a
// function generated for it (f_site_0: relu on 1x4x8x8 f32); a site without
// one (pow on i64 has no native kernel) calls the numpy kernel through the
// dispatcher and the callback. The table marks which is which. A site alike
// in all but its number (the second relu) calls the first one's function.

func.func @f(%x: memref<1x4x8x8xf32> {onnx.name = "x"}, %a: memref<3xi64> {onnx.name = "a"},
             %y: memref<1x4x8x8xf32> {onnx.name = "y", dnn.output}, %z: memref<3xi64> {onnx.name = "z", dnn.output}) {
  dnn.unary ins(%x : memref<1x4x8x8xf32>) outs(%y : memref<1x4x8x8xf32>) {fn = "relu"}
  dnn.binary ins(%a, %a : memref<3xi64>, memref<3xi64>) outs(%z : memref<3xi64>) {fn = "pow"}
  dnn.unary ins(%y : memref<1x4x8x8xf32>) outs(%y : memref<1x4x8x8xf32>) {fn = "relu"}
  dnn.unary ins(%y : memref<1x4x8x8xf32>) outs(%y : memref<1x4x8x8xf32>) {fn = "sigmoid"}
  func.return
}

// CHECK:      @"f_meta_json" = internal constant {{.*}}\22kernel\22:\22unary\22{{.*}}\22native\22:true{{.*}}\22kernel\22:\22binary\22{{.*}}\22native\22:false{{.*}}\22numpy_sites\22:1
// CHECK:      define internal void @"f_dispatch"(i64 %{{.*}}, ptr %{{.*}})
// CHECK:      define i32 @"f_run"(
// CHECK:        call ccc void @"f_site_0"(ptr %[[SLOTS:.*]])
// CHECK-NOT:    @"f_site_1"
// CHECK:        call ccc void @"f_dispatch"(i64 1, ptr %[[SLOTS]])
// CHECK:        call ccc void @"f_site_0"(ptr %[[SLOTS]])
// CHECK-NOT:    @"f_site_2"
// CHECK:        call ccc void @"f_site_3"(ptr %[[SLOTS]])
// CHECK:      define internal void @"f_site_0"(ptr %{{.*}}) noinline
// CHECK:        fcmp
// CHECK:        select
// CHECK:        ret void
// CHECK-NOT:  define {{.*}} @"f_site_2"
// CHECK:      define internal void @"f_site_3"(ptr %{{.*}}) noinline

// A run split into parts of two sites (run_part_ops=2): the parts call the
// native functions as the whole run does; the run calls the parts.
// PARTS:      define void @"f_run_part0"(
// PARTS:        call ccc void @"f_site_0"(ptr %[[S0:.*]])
// PARTS:        call ccc void @"f_dispatch"(i64 1, ptr %[[S0]])
// PARTS:      define void @"f_run_part1"(
// PARTS:        call ccc void @"f_site_0"(ptr %[[S1:.*]])
// PARTS:        call ccc void @"f_site_3"(ptr %[[S1]])
// PARTS:      define i32 @"f_run"(
// PARTS-NOT:    @"f_site_
// PARTS:        call ccc void @"f_run_part0"
// PARTS-NEXT:   call ccc void @"f_run_part1"

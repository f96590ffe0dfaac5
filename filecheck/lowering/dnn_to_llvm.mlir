// RUN: pyocc-opt %s --split-input-file --verify-diagnostics -p convert-dnn-to-llvm | filecheck %s
// RUN: not pyocc-opt %s --split-input-file -p "convert-dnn-to-llvm{target=tpu}" 2>&1 | filecheck %s --check-prefix=TARGET

// A lazy conv + relu: one pyocc_alloc/pyocc_free pair (the module's allocator,
// declared here, defined on malloc and free when exported) with its accounting, one
// kernel call per compute op through the dispatcher, weights as offsets into
// the constant pool (the splat bias lands at the next 64-byte boundary).
// The run is a straight line of calls, never optimised nor inlined into
// (`no_inline, optimize_none`): the kernels carry the compute.

func.func @conv_relu(%x: memref<1x3x8x8xf32> {onnx.name = "x"}, %y: memref<1x4x8x8xf32> {onnx.name = "y", dnn.output}) {
  %w = "dnn.weight"() <{value = dense_resource<w> : tensor<4x3x3x3xf32>}> : () -> memref<4x3x3x3xf32>
  %b = "dnn.weight"() <{splat = dense<0.02> : tensor<1xf32>}> : () -> memref<4xf32>
  %t = dnn.malloc {size = 1024 : i64, alignment = 64 : i64} : memref<1x4x8x8xf32>
  dnn.conv ins(%x, %w, bias %b : memref<1x3x8x8xf32>, memref<4x3x3x3xf32>, memref<4xf32>) outs(%t : memref<1x4x8x8xf32>) {pads = array<i64: 1, 1, 1, 1>}
  %v = "dnn.view"(%t) : (memref<1x4x8x8xf32>) -> memref<256xf32>
  dnn.unary ins(%t : memref<1x4x8x8xf32>) outs(%y : memref<1x4x8x8xf32>) {fn = "relu"}
  dnn.dealloc %t {size = 1024 : i64} : memref<1x4x8x8xf32>
  func.return
}

// CHECK:      llvm.mlir.global internal @conv_relu_kernel(0 : i64)
// CHECK:      llvm.mlir.global internal constant @conv_relu_meta_json("{{.*}}\22kernel\22:\22conv\22{{.*}}\22kwargs\22:{\22pads\22:[1,1,1,1],\22group\22:1}{{.*}}\22kernel\22:\22unary\22{{.*}}\22memory\22:{\22allocations\22:1,\22peak_bytes\22:1024}}\00")
// CHECK:      llvm.func @conv_relu_init(%{{.*}}: !llvm.ptr)
// CHECK:      llvm.func @conv_relu_destroy()
// CHECK:      llvm.func internal @conv_relu_dispatch(%[[SITE:.*]]: i64, %[[BUFS:.*]]: !llvm.ptr)
// CHECK:        %[[FN:.*]] = llvm.inttoptr
// CHECK-NEXT:   llvm.call %[[FN]](%[[SITE]], %[[BUFS]]) : !llvm.ptr, (i64, !llvm.ptr) -> ()
// CHECK:      llvm.func @conv_relu_meta() -> !llvm.ptr
// CHECK:      llvm.func @conv_relu_run(%[[IN:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[WTS:.*]]: !llvm.ptr, %[[STATE:.*]]: !llvm.ptr) -> i32 attributes {no_inline, optimize_none}
// CHECK:        %[[SLOTS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK:        %[[X:.*]] = llvm.load %[[IN]] : !llvm.ptr -> !llvm.ptr
// CHECK:        %[[Y:.*]] = llvm.load %[[OUT]] : !llvm.ptr -> !llvm.ptr
// CHECK:        %[[B:.*]] = llvm.getelementptr inbounds %[[WTS]][448] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK:        %[[T:.*]] = llvm.call @pyocc_alloc(%{{.*}}, %{{.*}}) : (i64, i64) -> !llvm.ptr
// CHECK:        llvm.cond_br %{{.*}}, ^[[OOM:.*]], ^[[OK:.*]]
// CHECK:      ^[[OK]]:
// CHECK:        llvm.store %[[X]], %[[SLOTS]]
// CHECK:        llvm.store %[[WTS]], %{{.*}}
// CHECK:        llvm.store %[[B]], %{{.*}}
// CHECK:        %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK:        llvm.store %[[NULL]], %{{.*}}
// CHECK:        llvm.store %[[T]], %{{.*}}
// CHECK:        llvm.call @conv_relu_dispatch(%{{.*}}, %[[SLOTS]]) : (i64, !llvm.ptr) -> ()
// CHECK:        llvm.store %[[T]], %[[SLOTS]]
// CHECK:        llvm.store %[[Y]], %{{.*}}
// CHECK:        llvm.call @conv_relu_dispatch(%{{.*}}, %[[SLOTS]]) : (i64, !llvm.ptr) -> ()
// CHECK:        llvm.call @pyocc_free(%[[T]]) : (!llvm.ptr) -> ()
// CHECK:        llvm.mlir.constant(-1024) : i64
// CHECK:        llvm.return %{{.*}} : i32
// CHECK:      ^[[OOM]]:
// CHECK-NEXT:   %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT:   llvm.return %[[ONE]] : i32
// CHECK:      llvm.func @pyocc_alloc(i64, i64) -> !llvm.ptr
// CHECK-NEXT: llvm.func @pyocc_free(!llvm.ptr)
// CHECK-NEXT: llvm.func @memcpy(!llvm.ptr, !llvm.ptr, i64) -> !llvm.ptr
// CHECK:      llvm.func @pyocc_functions() -> !llvm.ptr

// TARGET: convert-dnn-to-llvm: unknown target 'tpu' (expected one of host, cuda)

// -----

// Pool mode: one allocation; each buffer is the pool plus its offset.

func.func @pool(%x: memref<16xf32> {onnx.name = "x"}, %y: memref<16xf32> {onnx.name = "y", dnn.output}) {
  %p = dnn.pool_init {size = 128 : i64} : memref<128xi8>
  %a = dnn.mem_offset %p {offset = 0 : i64, size = 64 : i64} : memref<128xi8> -> memref<16xf32>
  %b = dnn.mem_offset %p {offset = 64 : i64, size = 64 : i64} : memref<128xi8> -> memref<16xf32>
  dnn.unary ins(%x : memref<16xf32>) outs(%a : memref<16xf32>) {fn = "relu"}
  dnn.unary ins(%a : memref<16xf32>) outs(%b : memref<16xf32>) {fn = "exp"}
  "dnn.memcpy"(%b, %y) <{kind = "host_to_host", size = 64 : i64}> : (memref<16xf32>, memref<16xf32>) -> ()
  dnn.pool_release %p : memref<128xi8>
  func.return
}

// CHECK-LABEL: llvm.func @pool_run(
// CHECK:         %[[P:.*]] = llvm.call @pyocc_alloc
// CHECK-NOT:     @pyocc_alloc
// CHECK:         %[[B:.*]] = llvm.getelementptr inbounds %[[P]][64] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK:         llvm.call @memcpy(%{{.*}}, %[[B]], %{{.*}})
// CHECK:         llvm.call @pyocc_free(%[[P]])
// CHECK-NOT:     @pyocc_strided_copy

// -----

// A strided copy (a band of rows of an NCHW tensor, from dnn-dma-to-memcpy):
// one call of the module's pyocc_strided_copy(target, source, size, count,
// target stride, source stride), defined once, internal and never inlined: a
// loop of `count` memcpys of `size` bytes, each k * stride into its side.
// The run makes each constant (and each address) once, at its first use:
// the second copy reuses the first one's.
// (The pool test above is the negative twin: a plain copy is one memcpy and
// the module defines no strided copy.)

func.func @strided(%x: memref<1x2x4x3xf32> {onnx.name = "x"}, %y: memref<1x2x2x3xf32> {onnx.name = "y", dnn.output}) {
  %0 = dnn.subview %x {offset = 12 : i64} : memref<1x2x4x3xf32> -> memref<84xi8>
  "dnn.memcpy"(%0, %y) <{kind = "host_to_host", size = 24 : i64, count = 2 : i64, source_stride = 48 : i64, target_stride = 24 : i64}> : (memref<84xi8>, memref<1x2x2x3xf32>) -> ()
  "dnn.memcpy"(%y, %0) <{kind = "host_to_host", size = 24 : i64, count = 2 : i64, source_stride = 24 : i64, target_stride = 48 : i64}> : (memref<1x2x2x3xf32>, memref<84xi8>) -> ()
  func.return
}

// CHECK-LABEL: llvm.func @strided_run(
// CHECK-SAME:      attributes {no_inline, optimize_none}
// CHECK:         %[[XARG:.*]] = llvm.load
// CHECK-NEXT:    %[[Y:.*]] = llvm.load
// CHECK-NEXT:    %[[X:.*]] = llvm.getelementptr inbounds %[[XARG]][12] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK-NEXT:    %[[SIZE:.*]] = llvm.mlir.constant(24) : i64
// CHECK-NEXT:    %[[COUNT:.*]] = llvm.mlir.constant(2) : i64
// CHECK-NEXT:    %[[SS:.*]] = llvm.mlir.constant(48) : i64
// CHECK-NEXT:    llvm.call @pyocc_strided_copy(%[[Y]], %[[X]], %[[SIZE]], %[[COUNT]], %[[SIZE]], %[[SS]]) : (!llvm.ptr, !llvm.ptr, i64, i64, i64, i64) -> ()
// CHECK-NEXT:    llvm.call @pyocc_strided_copy(%[[X]], %[[Y]], %[[SIZE]], %[[COUNT]], %[[SS]], %[[SIZE]])
// CHECK-NOT:   ^bb
// CHECK:         llvm.return
// CHECK:       llvm.func @memcpy(
// CHECK-NEXT:  llvm.func internal @pyocc_strided_copy(%[[T:.*]]: !llvm.ptr, %[[S:.*]]: !llvm.ptr, %[[N:.*]]: i64, %[[C:.*]]: i64, %[[TSTRIDE:.*]]: i64, %[[SSTRIDE:.*]]: i64) attributes {no_inline} {
// CHECK-NEXT:    %[[ZERO:.*]] = llvm.mlir.constant(0) : i64
// CHECK-NEXT:    llvm.br ^[[HEAD:.*]](%[[ZERO]] : i64)
// CHECK-NEXT:  ^[[HEAD]](%[[K:.*]]: i64):
// CHECK-NEXT:    %[[LESS:.*]] = llvm.icmp "slt" %[[K]], %[[C]] : i64
// CHECK-NEXT:    llvm.cond_br %[[LESS]], ^[[BODY:.*]], ^[[EXIT:.*]]
// CHECK-NEXT:  ^[[BODY]]:
// CHECK-NEXT:    %[[TO:.*]] = llvm.mul %[[K]], %[[TSTRIDE]] : i64
// CHECK-NEXT:    %[[TK:.*]] = llvm.getelementptr %[[T]][%[[TO]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT:    %[[SO:.*]] = llvm.mul %[[K]], %[[SSTRIDE]] : i64
// CHECK-NEXT:    %[[SK:.*]] = llvm.getelementptr %[[S]][%[[SO]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT:    llvm.call @memcpy(%[[TK]], %[[SK]], %[[N]])
// CHECK-NEXT:    %[[ONE:.*]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:    %[[NEXT:.*]] = llvm.add %[[K]], %[[ONE]] : i64
// CHECK-NEXT:    llvm.br ^[[HEAD]](%[[NEXT]] : i64)
// CHECK-NEXT:  ^[[EXIT]]:
// CHECK-NEXT:    llvm.return
// CHECK-NOT:   @pyocc_strided_copy

// -----

// Negative twin: an op without a host lowering stops the pass and is named.

func.func @unknown_op(%x: memref<4xf32> {onnx.name = "x"}, %y: memref<4xf32> {onnx.name = "y", dnn.output}) {
  "dnn.memcpy"(%x, %y) <{kind = "host_to_device", size = 16 : i64}> : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}

// CHECK: convert-dnn-to-llvm: cannot lower dnn.memcpy: kind 'host_to_device' needs a device

// RUN: pyocc-opt %s -p "dnn-cuda-scratch{workspace=4096}" | filecheck %s
// RUN: pyocc-opt %s -p "dnn-cuda-scratch{workspace=0 mode=eager}" | filecheck %s --check-prefix=EAGER
// RUN: not pyocc-opt %s -p "dnn-cuda-scratch{workspace=-1}" 2>&1 | filecheck %s --check-prefix=BAD

// Lazy (and pool) mode: a convolution gets a cuDNN workspace of the bound,
// allocated right before it and freed right after; a preact_conv gets its
// pre-activated input (768 bytes, a multiple of 256) and the workspace after it in
// one buffer. The binary op needs no scratch and is left alone.
// The second preact_conv is x's last reader: it pre-activates x in place and
// gets only cuDNN's workspace.
// Eager mode with no workspace allowed (negative case for the convolution):
// the convolution gets none (implicit GEMM), nor does the in-place
// preact_conv; the first preact_conv still needs its pre-activated input, in
// one buffer allocated at entry and freed at the end.

func.func @convs(%x: memref<1x3x8x8xf32> {onnx.name = "x"}, %y: memref<1x4x8x8xf32> {onnx.name = "y", dnn.output}) {
  %xs = dnn.malloc {size = 768 : i64} : memref<1x3x8x8xf32>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 768 : i64}> : (memref<1x3x8x8xf32>, memref<1x3x8x8xf32>) -> ()
  %w = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<4x3x3x3xf32>
  %s = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<3xf32>
  %t = dnn.malloc {size = 1024 : i64} : memref<1x4x8x8xf32>
  dnn.conv ins(%xs, %w : memref<1x3x8x8xf32>, memref<4x3x3x3xf32>) outs(%t : memref<1x4x8x8xf32>) {pads = array<i64: 1, 1, 1, 1>}
  %u = dnn.malloc {size = 1024 : i64} : memref<1x4x8x8xf32>
  dnn.preact_conv ins(%xs, %s, %s, %w : memref<1x3x8x8xf32>, memref<3xf32>, memref<3xf32>, memref<4x3x3x3xf32>) outs(%u : memref<1x4x8x8xf32>) {pads = array<i64: 1, 1, 1, 1>, pre_activation = "relu"}
  dnn.preact_conv ins(%xs, %s, %s, %w, residual %u : memref<1x3x8x8xf32>, memref<3xf32>, memref<3xf32>, memref<4x3x3x3xf32>, memref<1x4x8x8xf32>) outs(%u : memref<1x4x8x8xf32>) {pads = array<i64: 1, 1, 1, 1>, pre_activation = "relu"}
  dnn.dealloc %xs {size = 768 : i64} : memref<1x3x8x8xf32>
  dnn.binary ins(%t, %u : memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) outs(%t : memref<1x4x8x8xf32>) {fn = "add"}
  dnn.dealloc %u {size = 1024 : i64} : memref<1x4x8x8xf32>
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 1024 : i64}> : (memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) -> ()
  dnn.dealloc %t {size = 1024 : i64} : memref<1x4x8x8xf32>
  func.return
}

// CHECK-LABEL: func.func @convs
// CHECK:         %[[T:.*]] = dnn.malloc {size = 1024 : i64} : memref<1x4x8x8xf32>
// CHECK-NEXT:    %[[WS:.*]] = dnn.malloc {size = 4096 : i64} : memref<4096xi8>
// CHECK-NEXT:    dnn.conv ins(%[[XS:.*]], %[[W:.*]] : {{.*}}) outs(%[[T]], workspace %[[WS]] : memref<1x4x8x8xf32>, memref<4096xi8>)
// CHECK-NEXT:    dnn.dealloc %[[WS]] {size = 4096 : i64} : memref<4096xi8>
// CHECK-NEXT:    %[[U:.*]] = dnn.malloc {size = 1024 : i64} : memref<1x4x8x8xf32>
// CHECK-NEXT:    %[[PRE:.*]] = dnn.malloc {size = 4864 : i64} : memref<4864xi8>
// CHECK-NEXT:    dnn.preact_conv ins(%[[XS]], %{{.*}}, %{{.*}}, %[[W]] : {{.*}}) outs(%[[U]], workspace %[[PRE]] : memref<1x4x8x8xf32>, memref<4864xi8>)
// CHECK-NEXT:    dnn.dealloc %[[PRE]] {size = 4864 : i64} : memref<4864xi8>
// CHECK-NEXT:    %[[WS2:.*]] = dnn.malloc {size = 4096 : i64} : memref<4096xi8>
// CHECK-NEXT:    dnn.preact_conv ins(%[[XS]], %{{.*}}, %{{.*}}, %[[W]], residual %[[U]] : {{.*}}) outs(%[[U]], workspace %[[WS2]] : memref<1x4x8x8xf32>, memref<4096xi8>)
// CHECK-NEXT:    dnn.dealloc %[[WS2]] {size = 4096 : i64} : memref<4096xi8>
// CHECK-NOT:     dnn.malloc
// CHECK:         dnn.binary ins(%[[T]], %[[U]] : {{.*}}) outs(%[[T]] :
// CHECK-NOT:     dnn.malloc
// CHECK:         func.return

// EAGER-LABEL: func.func @convs
// EAGER-NEXT:    %[[PRE:.*]] = dnn.malloc {size = 768 : i64} : memref<768xi8>
// EAGER-NOT:     memref<768xi8>
// EAGER:         dnn.conv ins({{.*}}) outs(%{{[a-z0-9_]+}} : memref<1x4x8x8xf32>)
// EAGER:         dnn.preact_conv ins({{.*}}) outs(%{{[a-z0-9_]+}}, workspace %[[PRE]] :
// EAGER-NEXT:    dnn.preact_conv ins({{.*}}) outs(%{{[a-z0-9_]+}} : memref<1x4x8x8xf32>)
// EAGER:         dnn.dealloc %[[PRE]] {size = 768 : i64} : memref<768xi8>
// EAGER-NEXT:    func.return

// BAD: dnn-cuda-scratch: workspace must be >= 0 bytes, got -1

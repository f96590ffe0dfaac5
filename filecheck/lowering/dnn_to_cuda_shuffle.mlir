// RUN: pyocc-opt %s --split-input-file --verify-diagnostics -p "convert-dnn-to-llvm{target=cuda}" 2>&1 | filecheck %s

// A conv that stores its channels shuffled (dnn-fuse folds a channel
// shuffle into it for target=host only) has no cuDNN lowering: one line
// says so, naming the op.
// CHECK: cannot lower dnn.conv{{.*}}a channel shuffle folded into the convolution runs on target=host only (dnn-fuse folds it only there)
func.func @shuffled(%x: memref<1x4x2x2xf32> {onnx.name = "x"}, %y: memref<1x4x2x2xf32> {onnx.name = "y", dnn.output}) {
  %p = dnn.pool_init {size = 128 : i64} : memref<128xi8>
  %xs = dnn.mem_offset %p {offset = 0 : i64, size = 64 : i64} : memref<128xi8> -> memref<1x4x2x2xf32>
  %t = dnn.mem_offset %p {offset = 64 : i64, size = 64 : i64} : memref<128xi8> -> memref<1x4x2x2xf32>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 64 : i64}> : (memref<1x4x2x2xf32>, memref<1x4x2x2xf32>) -> ()
  %w = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<4x2x1x1xf32>
  dnn.conv ins(%xs, %w : memref<1x4x2x2xf32>, memref<4x2x1x1xf32>) outs(%t : memref<1x4x2x2xf32>) {group = 2 : i64, shuffle = 2 : i64}
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 64 : i64}> : (memref<1x4x2x2xf32>, memref<1x4x2x2xf32>) -> ()
  dnn.pool_release %p : memref<128xi8>
  func.return
}

// -----

// Negative: the same conv storing its channels in order lowers to cuDNN.
// CHECK-NOT: cannot lower
// CHECK: cudnnConvolutionForward (dnn.conv #0)
func.func @in_order(%x: memref<1x4x2x2xf32> {onnx.name = "x"}, %y: memref<1x4x2x2xf32> {onnx.name = "y", dnn.output}) {
  %p = dnn.pool_init {size = 128 : i64} : memref<128xi8>
  %xs = dnn.mem_offset %p {offset = 0 : i64, size = 64 : i64} : memref<128xi8> -> memref<1x4x2x2xf32>
  %t = dnn.mem_offset %p {offset = 64 : i64, size = 64 : i64} : memref<128xi8> -> memref<1x4x2x2xf32>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 64 : i64}> : (memref<1x4x2x2xf32>, memref<1x4x2x2xf32>) -> ()
  %w = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<4x2x1x1xf32>
  dnn.conv ins(%xs, %w : memref<1x4x2x2xf32>, memref<4x2x1x1xf32>) outs(%t : memref<1x4x2x2xf32>) {group = 2 : i64}
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 64 : i64}> : (memref<1x4x2x2xf32>, memref<1x4x2x2xf32>) -> ()
  dnn.pool_release %p : memref<128xi8>
  func.return
}

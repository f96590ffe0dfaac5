// RUN: pyocc-opt %s --split-input-file -p dnn-fuse | filecheck %s
// RUN: pyocc-opt %s --split-input-file -p 'dnn-fuse{target=cuda}' | filecheck %s --check-prefix=CUDA

// ShuffleNet's channel shuffle after a grouped 1x1 conv: Reshape to (N, 2,
// 2, H, W), Transpose(0, 2, 1, 3, 4), Reshape back. The conv stores its
// channels shuffled as it writes them (shuffle = 2: channel a*2 + b at
// b*2 + a), so no transpose runs and no shuffled copy is stored. The folded
// conv runs on the host only: for target=cuda the shuffle stays a transpose.
// CHECK-LABEL: func.func @conv_channel_shuffle_folded
// CHECK: %[[Y:.*]] = dnn.conv ins(%x, %w : {{.*}}) {group = 2 : i64, activation = "relu", shuffle = 2 : i64} : tensor<1x4x2x2xf32>
// CHECK-NOT: dnn.transpose
// CHECK: func.return %[[Y]]
// CUDA-LABEL: func.func @conv_channel_shuffle_folded
// CUDA: dnn.conv
// CUDA-NOT: shuffle
// CUDA: dnn.transpose
func.func @conv_channel_shuffle_folded(%x: tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]], [[2.0]]], [[[3.0]], [[4.0]]], [[[5.0]], [[6.0]]], [[[7.0]], [[8.0]]]]> : tensor<4x2x1x1xf32>}> : () -> tensor<4x2x1x1xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x4x2x2xf32>, tensor<4x2x1x1xf32>) {group = 2 : i64} : tensor<1x4x2x2xf32>
  %r = dnn.unary ins(%c : tensor<1x4x2x2xf32>) {fn = "relu"} : tensor<1x4x2x2xf32>
  %s = "dnn.view"(%r) : (tensor<1x4x2x2xf32>) -> tensor<1x2x2x2x2xf32>
  %t = dnn.transpose ins(%s : tensor<1x2x2x2x2xf32>) {perm = array<i64: 0, 2, 1, 3, 4>} : tensor<1x2x2x2x2xf32>
  %y = "dnn.view"(%t) : (tensor<1x2x2x2x2xf32>) -> tensor<1x4x2x2xf32>
  func.return %y : tensor<1x4x2x2xf32>
}

// -----

// Negative: a transpose of other axes (the rows and columns) is no channel
// shuffle, and a shuffle of a conv whose result is also read elsewhere must
// leave that result in order.
// CHECK-LABEL: func.func @conv_channel_shuffle_not_fused
// CHECK-NOT: shuffle
// CHECK: dnn.transpose{{.*}}perm = array<i64: 0, 1, 2, 4, 3>
// CHECK: %[[C:.*]] = dnn.conv
// CHECK: "dnn.view"(%[[C]])
// CHECK: dnn.transpose{{.*}}perm = array<i64: 0, 2, 1, 3, 4>
// CHECK: func.return {{.*}}, %[[C]]
func.func @conv_channel_shuffle_not_fused(%x: tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]], [[2.0]]], [[[3.0]], [[4.0]]], [[[5.0]], [[6.0]]], [[[7.0]], [[8.0]]]]> : tensor<4x2x1x1xf32>}> : () -> tensor<4x2x1x1xf32>
  %c1 = dnn.conv ins(%x, %w : tensor<1x4x2x2xf32>, tensor<4x2x1x1xf32>) {group = 2 : i64} : tensor<1x4x2x2xf32>
  %s1 = "dnn.view"(%c1) : (tensor<1x4x2x2xf32>) -> tensor<1x2x2x2x2xf32>
  %t1 = dnn.transpose ins(%s1 : tensor<1x2x2x2x2xf32>) {perm = array<i64: 0, 1, 2, 4, 3>} : tensor<1x2x2x2x2xf32>
  %y1 = "dnn.view"(%t1) : (tensor<1x2x2x2x2xf32>) -> tensor<1x4x2x2xf32>
  %c2 = dnn.conv ins(%x, %w : tensor<1x4x2x2xf32>, tensor<4x2x1x1xf32>) {group = 2 : i64} : tensor<1x4x2x2xf32>
  %s2 = "dnn.view"(%c2) : (tensor<1x4x2x2xf32>) -> tensor<1x2x2x2x2xf32>
  %t2 = dnn.transpose ins(%s2 : tensor<1x2x2x2x2xf32>) {perm = array<i64: 0, 2, 1, 3, 4>} : tensor<1x2x2x2x2xf32>
  %y2 = "dnn.view"(%t2) : (tensor<1x2x2x2x2xf32>) -> tensor<1x4x2x2xf32>
  func.return %y1, %y2, %c2 : tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>
}

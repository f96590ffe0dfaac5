// RUN: pyocc-opt %s --split-input-file -p dnn-fuse | filecheck %s

// A folded BatchNormalization (channel_affine) goes into the conv's weights:
// w' = w * s = [2, 6], b' = b * s + t = [1*2 + 0.5, 1*3 + 1] = [2.5, 4].
// CHECK-LABEL: func.func @conv_affine_folded
// CHECK-DAG: %[[W:.*]] = "dnn.weight"() <{value = dense<[{{\[\[\[}}2.000000e+00]]], {{\[\[\[}}6.000000e+00]]]]> : tensor<2x1x1x1xf32>}>
// CHECK-DAG: %[[B:.*]] = "dnn.weight"() <{value = dense<[2.500000e+00, 4.000000e+00]> : tensor<2xf32>}>
// CHECK: %[[Y:.*]] = dnn.conv ins(%x, %[[W]], bias %[[B]] : {{.*}})
// CHECK-NOT: dnn.channel_affine
// CHECK: func.return %[[Y]]
func.func @conv_affine_folded(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %b = "dnn.weight"() <{value = dense<[1.0, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %s = "dnn.weight"() <{value = dense<[2.0, 3.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %t = "dnn.weight"() <{value = dense<[0.5, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %c = dnn.conv ins(%x, %w, bias %b : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) : tensor<1x2x2x2xf32>
  %y = dnn.channel_affine ins(%c, %s, %t : tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) : tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// Negative: the conv's result has another reader, so it must still exist.
// CHECK-LABEL: func.func @conv_affine_not_fused
// CHECK: %[[C:.*]] = dnn.conv
// CHECK: dnn.channel_affine ins(%[[C]]
// CHECK: dnn.binary ins(%[[C]]
func.func @conv_affine_not_fused(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %s = "dnn.weight"() <{value = dense<[2.0, 3.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %t = "dnn.weight"() <{value = dense<[0.5, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %a = dnn.channel_affine ins(%c, %s, %t : tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) : tensor<1x2x2x2xf32>
  %y = dnn.binary ins(%c, %a : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {fn = "sub"} : tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// The per-channel Mul/Add chain old exporters write after a conv folds too:
// w' = w * [3, 4] = [3, 8], b' = 0 * [3, 4] + [1, 2] = [1, 2]; then relu fuses.
// CHECK-LABEL: func.func @conv_mul_add_relu_folded
// CHECK-DAG: %[[W:.*]] = "dnn.weight"() <{value = dense<[{{\[\[\[}}3.000000e+00]]], {{\[\[\[}}8.000000e+00]]]]>
// CHECK-DAG: %[[B:.*]] = "dnn.weight"() <{value = dense<[1.000000e+00, 2.000000e+00]>
// CHECK: %[[Y:.*]] = dnn.conv ins(%x, %[[W]], bias %[[B]] : {{.*}}) {activation = "relu"
// CHECK-NEXT: func.return %[[Y]]
func.func @conv_mul_add_relu_folded(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %m = "dnn.weight"() <{value = dense<[[[3.0]], [[4.0]]]> : tensor<2x1x1xf32>}> : () -> tensor<2x1x1xf32>
  %k = "dnn.weight"() <{value = dense<[[[1.0]], [[2.0]]]> : tensor<2x1x1xf32>}> : () -> tensor<2x1x1xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %p = dnn.binary ins(%m, %c : tensor<2x1x1xf32>, tensor<1x2x2x2xf32>) {fn = "mul"} : tensor<1x2x2x2xf32>
  %q = dnn.binary ins(%p, %k : tensor<1x2x2x2xf32>, tensor<2x1x1xf32>) {fn = "add"} : tensor<1x2x2x2xf32>
  %y = dnn.unary ins(%q : tensor<1x2x2x2xf32>) {fn = "relu"} : tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// Negative: a constant that varies along a spatial axis is not per channel,
// and Sub is no fusable activation.
// CHECK-LABEL: func.func @conv_mul_not_fused
// CHECK: %[[C:.*]] = dnn.conv ins(%x, %{{.*}} : {{.*}})
// CHECK: dnn.binary ins(%[[C]], %{{.*}} : {{.*}}) {fn = "mul"
func.func @conv_mul_not_fused(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %m = "dnn.weight"() <{value = dense<[[3.0, 4.0]]> : tensor<1x2xf32>}> : () -> tensor<1x2xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %y = dnn.binary ins(%c, %m : tensor<1x2x2x2xf32>, tensor<1x2xf32>) {fn = "mul"} : tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// Conv + activation, each with its parameters: Clip(0, 6) (Relu6), LeakyRelu.
// CHECK-LABEL: func.func @conv_activations_fused
// CHECK: dnn.conv ins(%x, %{{.*}} : {{.*}}) {activation = "clip", alpha = 0.000000e+00 : f32, beta = 6.000000e+00 : f32
// CHECK: dnn.conv ins(%x, %{{.*}} : {{.*}}) {activation = "leaky_relu", alpha = 2.000000e-01 : f32
// CHECK: dnn.conv ins(%x, %{{.*}} : {{.*}}) {activation = "hard_swish"
// CHECK-NOT: dnn.unary
func.func @conv_activations_fused(%x: tensor<1x1x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %c1 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %y1 = dnn.unary ins(%c1 : tensor<1x2x2x2xf32>) {fn = "clip", alpha = 0.0 : f32, beta = 6.0 : f32} : tensor<1x2x2x2xf32>
  %c2 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %y2 = dnn.unary ins(%c2 : tensor<1x2x2x2xf32>) {fn = "leaky_relu", alpha = 0.2 : f32} : tensor<1x2x2x2xf32>
  %c3 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %y3 = dnn.unary ins(%c3 : tensor<1x2x2x2xf32>) {fn = "hard_swish"} : tensor<1x2x2x2xf32>
  func.return %y1, %y2, %y3 : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
}

// -----

// Negative: exp is no activation; a conv that already has one takes no
// second; a conv whose result is a graph output keeps it.
// CHECK-LABEL: func.func @conv_activation_not_fused
// CHECK: %[[C1:.*]] = dnn.conv
// CHECK: dnn.unary ins(%[[C1]] : {{.*}}) {fn = "exp"
// CHECK: %[[C2:.*]] = dnn.conv{{.*}}activation = "relu"
// CHECK: dnn.unary ins(%[[C2]] : {{.*}}) {fn = "sigmoid"
// CHECK: %[[C3:.*]] = dnn.conv
// CHECK: dnn.unary ins(%[[C3]] : {{.*}}) {fn = "relu"
// CHECK: func.return {{.*}}, %[[C3]]
func.func @conv_activation_not_fused(%x: tensor<1x1x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %c1 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %y1 = dnn.unary ins(%c1 : tensor<1x2x2x2xf32>) {fn = "exp"} : tensor<1x2x2x2xf32>
  %c2 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) {activation = "relu"} : tensor<1x2x2x2xf32>
  %y2 = dnn.unary ins(%c2 : tensor<1x2x2x2xf32>) {fn = "sigmoid"} : tensor<1x2x2x2xf32>
  %c3 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %y3 = dnn.unary ins(%c3 : tensor<1x2x2x2xf32>) {fn = "relu"} : tensor<1x2x2x2xf32>
  func.return %y1, %y2, %y3, %c3 : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
}

// -----

// Conv + residual Add + activation: one conv (ResNet's block ending).
// CHECK-LABEL: func.func @conv_residual_relu_fused
// CHECK: %[[Y:.*]] = dnn.conv ins(%x, %{{.*}}, residual %r : {{.*}}) {activation = "relu"
// CHECK-NEXT: func.return %[[Y]]
func.func @conv_residual_relu_fused(%x: tensor<1x1x2x2xf32>, %r: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %s = dnn.binary ins(%r, %c : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {fn = "add"} : tensor<1x2x2x2xf32>
  %y = dnn.unary ins(%s : tensor<1x2x2x2xf32>) {fn = "relu"} : tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// Negative: a residual that broadcasts is not the output's shape; a conv
// with an activation cannot take a residual after it.
// CHECK-LABEL: func.func @conv_residual_not_fused
// CHECK: %[[C1:.*]] = dnn.conv
// CHECK: dnn.binary ins(%[[C1]], %r : {{.*}}) {fn = "add"
// CHECK: %[[C2:.*]] = dnn.conv{{.*}}activation = "relu"
// CHECK: dnn.binary ins(%[[C2]], %q : {{.*}}) {fn = "add"
func.func @conv_residual_not_fused(%x: tensor<1x1x2x2xf32>, %r: tensor<1x1x2x2xf32>, %q: tensor<1x2x2x2xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %w = "dnn.weight"() <{value = dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %c1 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  %y1 = dnn.binary ins(%c1, %r : tensor<1x2x2x2xf32>, tensor<1x1x2x2xf32>) {fn = "add"} : tensor<1x2x2x2xf32>
  %c2 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) {activation = "relu"} : tensor<1x2x2x2xf32>
  %y2 = dnn.binary ins(%c2, %q : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {fn = "add"} : tensor<1x2x2x2xf32>
  func.return %y1, %y2 : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
}

// -----

// MatMul + Add(bias) becomes Gemm, and the activation after it fuses.
// CHECK-LABEL: func.func @matmul_add_relu_fused
// CHECK: %[[Y:.*]] = dnn.gemm ins(%a, %b, c %c : {{.*}}) {activation = "relu"
// CHECK-NEXT: func.return %[[Y]]
func.func @matmul_add_relu_fused(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<4xf32>) -> tensor<2x4xf32> {
  %m = dnn.matmul ins(%a, %b : tensor<2x3xf32>, tensor<3x4xf32>) : tensor<2x4xf32>
  %s = dnn.binary ins(%m, %c : tensor<2x4xf32>, tensor<4xf32>) {fn = "add"} : tensor<2x4xf32>
  %y = dnn.unary ins(%s : tensor<2x4xf32>) {fn = "relu"} : tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// -----

// Negative: a product read twice stays; an Add that grows the product by
// broadcasting is no bias.
// CHECK-LABEL: func.func @matmul_add_not_fused
// CHECK: %[[M:.*]] = dnn.matmul
// CHECK: dnn.binary ins(%[[M]], %c : {{.*}}) {fn = "add"
// CHECK: dnn.matmul
// CHECK: dnn.binary{{.*}}fn = "add"
// CHECK-NOT: dnn.gemm
func.func @matmul_add_not_fused(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<4xf32>, %p: tensor<1x3xf32>, %q: tensor<5x1xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<5x4xf32>) {
  %m = dnn.matmul ins(%a, %b : tensor<2x3xf32>, tensor<3x4xf32>) : tensor<2x4xf32>
  %y = dnn.binary ins(%m, %c : tensor<2x4xf32>, tensor<4xf32>) {fn = "add"} : tensor<2x4xf32>
  %n = dnn.matmul ins(%p, %b : tensor<1x3xf32>, tensor<3x4xf32>) : tensor<1x4xf32>
  %z = dnn.binary ins(%n, %q : tensor<1x4xf32>, tensor<5x1xf32>) {fn = "add"} : tensor<5x4xf32>
  func.return %y, %m, %z : tensor<2x4xf32>, tensor<2x4xf32>, tensor<5x4xf32>
}

// -----

// Gemm + activation (AlexNet's fully connected layers).
// CHECK-LABEL: func.func @gemm_sigmoid_fused
// CHECK: dnn.gemm ins(%a, %b, c %c : {{.*}}) {trans_b = 1 : i64, activation = "sigmoid"
func.func @gemm_sigmoid_fused(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>, %c: tensor<4xf32>) -> tensor<2x4xf32> {
  %m = dnn.gemm ins(%a, %b, c %c : tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) {trans_b = 1 : i64} : tensor<2x4xf32>
  %y = dnn.unary ins(%m : tensor<2x4xf32>) {fn = "sigmoid"} : tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// -----

// Negative: the gemm result is read twice.
// CHECK-LABEL: func.func @gemm_sigmoid_not_fused
// CHECK: %[[G:.*]] = dnn.gemm ins(%a, %b, c %c : {{.*}})
// CHECK: dnn.unary ins(%[[G]] : {{.*}}) {fn = "sigmoid"
func.func @gemm_sigmoid_not_fused(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<4xf32>) -> tensor<2x4xf32> {
  %m = dnn.gemm ins(%a, %b, c %c : tensor<2x3xf32>, tensor<3x4xf32>, tensor<4xf32>) : tensor<2x4xf32>
  %s = dnn.unary ins(%m : tensor<2x4xf32>) {fn = "sigmoid"} : tensor<2x4xf32>
  %y = dnn.binary ins(%s, %m : tensor<2x4xf32>, tensor<2x4xf32>) {fn = "mul"} : tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// -----

// A pre-activation chain (BN, scale, shift, ReLU) is one elementwise op,
// s' = s * m = [2, 6], t' = t * m + k = [0 + 1, 3 + 1] = [1, 4].
// CHECK-LABEL: func.func @affine_chain_fused
// CHECK-DAG: %[[S:.*]] = "dnn.weight"() <{value = dense<[2.000000e+00, 6.000000e+00]>
// CHECK-DAG: %[[T:.*]] = "dnn.weight"() <{value = dense<[1.000000e+00, 4.000000e+00]>
// CHECK: %[[Y:.*]] = dnn.channel_affine ins(%x, %[[S]], %[[T]] : {{.*}}) {activation = "relu"
// CHECK-NEXT: func.return %[[Y]]
func.func @affine_chain_fused(%x: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %s = "dnn.weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %t = "dnn.weight"() <{value = dense<[0.0, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %m = "dnn.weight"() <{value = dense<[[[2.0]], [[3.0]]]> : tensor<2x1x1xf32>}> : () -> tensor<2x1x1xf32>
  %k = "dnn.weight"() <{value = dense<1.0> : tensor<2x1x1xf32>}> : () -> tensor<2x1x1xf32>
  %a = dnn.channel_affine ins(%x, %s, %t : tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) : tensor<1x2x2x2xf32>
  %p = dnn.binary ins(%a, %m : tensor<1x2x2x2xf32>, tensor<2x1x1xf32>) {fn = "mul"} : tensor<1x2x2x2xf32>
  %q = dnn.binary ins(%p, %k : tensor<1x2x2x2xf32>, tensor<2x1x1xf32>) {fn = "add"} : tensor<1x2x2x2xf32>
  %y = dnn.unary ins(%q : tensor<1x2x2x2xf32>) {fn = "relu"} : tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// Negative: a Mul by a graph input is no constant scale.
// CHECK-LABEL: func.func @affine_chain_not_fused
// CHECK: %[[A:.*]] = dnn.channel_affine ins(%x
// CHECK: dnn.binary ins(%[[A]], %m : {{.*}}) {fn = "mul"
func.func @affine_chain_not_fused(%x: tensor<1x2x2x2xf32>, %m: tensor<2x1x1xf32>) -> tensor<1x2x2x2xf32> {
  %s = "dnn.weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %t = "dnn.weight"() <{value = dense<[0.0, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %a = dnn.channel_affine ins(%x, %s, %t : tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) : tensor<1x2x2x2xf32>
  %y = dnn.binary ins(%a, %m : tensor<1x2x2x2xf32>, tensor<2x1x1xf32>) {fn = "mul"} : tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// DenseNet's pre-activation (BN + ReLU before a conv) moves into the conv.
// CHECK-LABEL: func.func @preact_conv_fused
// CHECK: %[[Y:.*]] = dnn.preact_conv ins(%x, %{{.*}}, %{{.*}}, %{{.*}} : {{.*}}) {{\{.*}}pre_activation = "relu"
// CHECK-NEXT: func.return %[[Y]]
func.func @preact_conv_fused(%x: tensor<1x2x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %s = "dnn.weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %t = "dnn.weight"() <{value = dense<[0.0, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %w = "dnn.weight"() <{value = dense<[[[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]]]> : tensor<1x2x2x2xf32>}> : () -> tensor<1x2x2x2xf32>
  %a = dnn.channel_affine ins(%x, %s, %t : tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) : tensor<1x2x2x2xf32>
  %r = dnn.unary ins(%a : tensor<1x2x2x2xf32>) {fn = "relu"} : tensor<1x2x2x2xf32>
  %y = dnn.conv ins(%r, %w : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {pads = array<i64: 1, 1, 0, 0>} : tensor<1x1x2x2xf32>
  func.return %y : tensor<1x1x2x2xf32>
}

// -----

// Negative: a sigmoid pre-activation has no place in the conv kernel (only
// relu does), and a pre-activation read twice must stay a tensor.
// CHECK-LABEL: func.func @preact_conv_not_fused
// CHECK: %[[A:.*]] = dnn.channel_affine ins(%x, {{.*}}activation = "sigmoid"
// CHECK: dnn.conv ins(%[[A]]
// CHECK: %[[B:.*]] = dnn.channel_affine ins(%x, {{.*}}activation = "relu"
// CHECK: dnn.conv ins(%[[B]]
// CHECK: dnn.conv ins(%[[B]]
// CHECK-NOT: dnn.preact_conv
func.func @preact_conv_not_fused(%x: tensor<1x2x2x2xf32>) -> (tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>) {
  %s = "dnn.weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %t = "dnn.weight"() <{value = dense<[0.0, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %w = "dnn.weight"() <{value = dense<[[[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]]]> : tensor<1x2x2x2xf32>}> : () -> tensor<1x2x2x2xf32>
  %a = dnn.channel_affine ins(%x, %s, %t : tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) {activation = "sigmoid"} : tensor<1x2x2x2xf32>
  %y1 = dnn.conv ins(%a, %w : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) : tensor<1x1x1x1xf32>
  %b = dnn.channel_affine ins(%x, %s, %t : tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) {activation = "relu"} : tensor<1x2x2x2xf32>
  %y2 = dnn.conv ins(%b, %w : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) : tensor<1x1x1x1xf32>
  %y3 = dnn.conv ins(%b, %w : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) : tensor<1x1x1x1xf32>
  func.return %y1, %y2, %y3 : tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>, tensor<1x1x1x1xf32>
}

// -----

// GELU written out with Erf, as exporters do, becomes one gelu.
// CHECK-LABEL: func.func @gelu_erf_fused
// CHECK: %[[Y:.*]] = dnn.unary ins(%x : {{.*}}) {fn = "gelu"} : tensor<2x8xf32>
// CHECK-NEXT: func.return %[[Y]]
func.func @gelu_erf_fused(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = "dnn.weight"() <{value = dense<1.4142135> : tensor<f32>}> : () -> tensor<f32>
  %one = "dnn.weight"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
  %half = "dnn.weight"() <{value = dense<0.5> : tensor<f32>}> : () -> tensor<f32>
  %d = dnn.binary ins(%x, %sqrt2 : tensor<2x8xf32>, tensor<f32>) {fn = "div"} : tensor<2x8xf32>
  %e = dnn.unary ins(%d : tensor<2x8xf32>) {fn = "erf"} : tensor<2x8xf32>
  %p = dnn.binary ins(%e, %one : tensor<2x8xf32>, tensor<f32>) {fn = "add"} : tensor<2x8xf32>
  %g = dnn.binary ins(%x, %p : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "mul"} : tensor<2x8xf32>
  %y = dnn.binary ins(%g, %half : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// -----

// Negative: 0.6 instead of 0.5 is not GELU.
// CHECK-LABEL: func.func @gelu_erf_not_fused
// CHECK: dnn.unary{{.*}}fn = "erf"
// CHECK-NOT: "gelu"
func.func @gelu_erf_not_fused(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = "dnn.weight"() <{value = dense<1.4142135> : tensor<f32>}> : () -> tensor<f32>
  %one = "dnn.weight"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
  %half = "dnn.weight"() <{value = dense<0.6> : tensor<f32>}> : () -> tensor<f32>
  %d = dnn.binary ins(%x, %sqrt2 : tensor<2x8xf32>, tensor<f32>) {fn = "div"} : tensor<2x8xf32>
  %e = dnn.unary ins(%d : tensor<2x8xf32>) {fn = "erf"} : tensor<2x8xf32>
  %p = dnn.binary ins(%e, %one : tensor<2x8xf32>, tensor<f32>) {fn = "add"} : tensor<2x8xf32>
  %g = dnn.binary ins(%x, %p : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "mul"} : tensor<2x8xf32>
  %y = dnn.binary ins(%g, %half : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// -----

// LayerNormalization from its decomposed form (mean, centre, variance,
// sqrt, divide, scale, shift): one layer_norm over the last axis.
// CHECK-LABEL: func.func @layer_norm_fused
// (axis = -1 and epsilon = 1e-5 are the defaults, which are not printed)
// CHECK: %[[Y:.*]] = dnn.layer_norm ins(%x, %{{.*}}, bias %{{.*}} : {{.*}}) : tensor<2x4xf32>
// CHECK-NEXT: func.return %[[Y]]
func.func @layer_norm_fused(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = "dnn.weight"() <{value = dense<2.0> : tensor<f32>}> : () -> tensor<f32>
  %eps = "dnn.weight"() <{value = dense<1.0e-5> : tensor<f32>}> : () -> tensor<f32>
  %scale = "dnn.weight"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %bias = "dnn.weight"() <{value = dense<[0.0, 1.0, 0.0, 1.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %mean = dnn.reduce ins(%x : tensor<2x4xf32>) {fn = "mean", axes = array<i64: -1>, keepdims = 1 : i64} : tensor<2x1xf32>
  %d = dnn.binary ins(%x, %mean : tensor<2x4xf32>, tensor<2x1xf32>) {fn = "sub"} : tensor<2x4xf32>
  %sq = dnn.binary ins(%d, %two : tensor<2x4xf32>, tensor<f32>) {fn = "pow"} : tensor<2x4xf32>
  %var = dnn.reduce ins(%sq : tensor<2x4xf32>) {fn = "mean", axes = array<i64: -1>, keepdims = 1 : i64} : tensor<2x1xf32>
  %ve = dnn.binary ins(%var, %eps : tensor<2x1xf32>, tensor<f32>) {fn = "add"} : tensor<2x1xf32>
  %std = dnn.unary ins(%ve : tensor<2x1xf32>) {fn = "sqrt"} : tensor<2x1xf32>
  %n = dnn.binary ins(%d, %std : tensor<2x4xf32>, tensor<2x1xf32>) {fn = "div"} : tensor<2x4xf32>
  %m = dnn.binary ins(%n, %scale : tensor<2x4xf32>, tensor<4xf32>) {fn = "mul"} : tensor<2x4xf32>
  %y = dnn.binary ins(%m, %bias : tensor<2x4xf32>, tensor<4xf32>) {fn = "add"} : tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// -----

// Negative: statistics over the first axis are no layer norm over the last.
// CHECK-LABEL: func.func @layer_norm_not_fused
// CHECK-NOT: dnn.layer_norm
// CHECK: dnn.reduce
// CHECK-NOT: dnn.layer_norm
func.func @layer_norm_not_fused(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %two = "dnn.weight"() <{value = dense<2.0> : tensor<f32>}> : () -> tensor<f32>
  %eps = "dnn.weight"() <{value = dense<1.0e-5> : tensor<f32>}> : () -> tensor<f32>
  %scale = "dnn.weight"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %bias = "dnn.weight"() <{value = dense<[0.0, 1.0, 0.0, 1.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %mean = dnn.reduce ins(%x : tensor<2x4xf32>) {fn = "mean", axes = array<i64: 0>, keepdims = 1 : i64} : tensor<1x4xf32>
  %d = dnn.binary ins(%x, %mean : tensor<2x4xf32>, tensor<1x4xf32>) {fn = "sub"} : tensor<2x4xf32>
  %sq = dnn.binary ins(%d, %two : tensor<2x4xf32>, tensor<f32>) {fn = "pow"} : tensor<2x4xf32>
  %var = dnn.reduce ins(%sq : tensor<2x4xf32>) {fn = "mean", axes = array<i64: 0>, keepdims = 1 : i64} : tensor<1x4xf32>
  %ve = dnn.binary ins(%var, %eps : tensor<1x4xf32>, tensor<f32>) {fn = "add"} : tensor<1x4xf32>
  %std = dnn.unary ins(%ve : tensor<1x4xf32>) {fn = "sqrt"} : tensor<1x4xf32>
  %n = dnn.binary ins(%d, %std : tensor<2x4xf32>, tensor<1x4xf32>) {fn = "div"} : tensor<2x4xf32>
  %m = dnn.binary ins(%n, %scale : tensor<2x4xf32>, tensor<4xf32>) {fn = "mul"} : tensor<2x4xf32>
  %y = dnn.binary ins(%m, %bias : tensor<2x4xf32>, tensor<4xf32>) {fn = "add"} : tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// -----

// Attention scores: softmax(QK^T / sqrt(d) + mask) is one kernel.
// CHECK-LABEL: func.func @attention_softmax_fused
// CHECK: %[[Y:.*]] = dnn.attention_softmax ins(%q, %k, mask %mask : {{.*}}) {scale = 5.000000e-01 : f32
// CHECK-NEXT: func.return %[[Y]]
func.func @attention_softmax_fused(%q: tensor<2x3x4xf32>, %k: tensor<2x4x3xf32>, %mask: tensor<1x3x3xf32>) -> tensor<2x3x3xf32> {
  %c = "dnn.weight"() <{value = dense<2.0> : tensor<f32>}> : () -> tensor<f32>
  %s = dnn.matmul ins(%q, %k : tensor<2x3x4xf32>, tensor<2x4x3xf32>) : tensor<2x3x3xf32>
  %d = dnn.binary ins(%s, %c : tensor<2x3x3xf32>, tensor<f32>) {fn = "div"} : tensor<2x3x3xf32>
  %m = dnn.binary ins(%mask, %d : tensor<1x3x3xf32>, tensor<2x3x3xf32>) {fn = "add"} : tensor<2x3x3xf32>
  %y = dnn.softmax ins(%m : tensor<2x3x3xf32>) {axis = -1 : i64} : tensor<2x3x3xf32>
  func.return %y : tensor<2x3x3xf32>
}

// -----

// Negative: a softmax over another axis than the scores' last, and a
// constant divided by the scores (not a scale).
// CHECK-LABEL: func.func @attention_softmax_not_fused
// CHECK-NOT: dnn.attention_softmax
// CHECK: dnn.softmax
// CHECK: dnn.softmax
// CHECK-NOT: dnn.attention_softmax
func.func @attention_softmax_not_fused(%q: tensor<2x3x4xf32>, %k: tensor<2x4x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3x3xf32>) {
  %c = "dnn.weight"() <{value = dense<2.0> : tensor<f32>}> : () -> tensor<f32>
  %s = dnn.matmul ins(%q, %k : tensor<2x3x4xf32>, tensor<2x4x3xf32>) : tensor<2x3x3xf32>
  %d = dnn.binary ins(%s, %c : tensor<2x3x3xf32>, tensor<f32>) {fn = "mul"} : tensor<2x3x3xf32>
  %y = dnn.softmax ins(%d : tensor<2x3x3xf32>) {axis = 1 : i64} : tensor<2x3x3xf32>
  %t = dnn.matmul ins(%q, %k : tensor<2x3x4xf32>, tensor<2x4x3xf32>) : tensor<2x3x3xf32>
  %e = dnn.binary ins(%c, %t : tensor<f32>, tensor<2x3x3xf32>) {fn = "div"} : tensor<2x3x3xf32>
  %z = dnn.softmax ins(%e : tensor<2x3x3xf32>) {axis = -1 : i64} : tensor<2x3x3xf32>
  func.return %y, %z : tensor<2x3x3xf32>, tensor<2x3x3xf32>
}

// -----

// GELU's tanh approximation, as GPT-2 exports write it, becomes one gelu.
// CHECK-LABEL: func.func @gelu_tanh_fused
// CHECK: %[[Y:.*]] = dnn.unary ins(%x : {{.*}}) {fn = "gelu", approximate = "tanh"
// CHECK-NEXT: func.return %[[Y]]
func.func @gelu_tanh_fused(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = "dnn.weight"() <{value = dense<0.5> : tensor<f32>}> : () -> tensor<f32>
  %three = "dnn.weight"() <{value = dense<3.0> : tensor<f32>}> : () -> tensor<f32>
  %c = "dnn.weight"() <{value = dense<0.044715> : tensor<f32>}> : () -> tensor<f32>
  %k = "dnn.weight"() <{value = dense<0.7978846> : tensor<f32>}> : () -> tensor<f32>
  %one = "dnn.weight"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
  %h = dnn.binary ins(%x, %half : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  %p = dnn.binary ins(%x, %three : tensor<2x8xf32>, tensor<f32>) {fn = "pow"} : tensor<2x8xf32>
  %q = dnn.binary ins(%p, %c : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  %r = dnn.binary ins(%x, %q : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "add"} : tensor<2x8xf32>
  %s = dnn.binary ins(%r, %k : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  %t = dnn.unary ins(%s : tensor<2x8xf32>) {fn = "tanh"} : tensor<2x8xf32>
  %u = dnn.binary ins(%t, %one : tensor<2x8xf32>, tensor<f32>) {fn = "add"} : tensor<2x8xf32>
  %y = dnn.binary ins(%h, %u : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "mul"} : tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// -----

// Negative: the inner tanh value is also a graph output, so it must stay
// (the tanh only joins the Mul before it, as its fused activation).
// CHECK-LABEL: func.func @gelu_tanh_not_fused
// CHECK: %[[T:.*]] = dnn.binary ins({{.*}}) {fn = "mul", activation = "tanh"
// CHECK-NOT: "gelu"
// CHECK: func.return %{{.*}}, %[[T]]
func.func @gelu_tanh_not_fused(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %half = "dnn.weight"() <{value = dense<0.5> : tensor<f32>}> : () -> tensor<f32>
  %three = "dnn.weight"() <{value = dense<3.0> : tensor<f32>}> : () -> tensor<f32>
  %c = "dnn.weight"() <{value = dense<0.044715> : tensor<f32>}> : () -> tensor<f32>
  %k = "dnn.weight"() <{value = dense<0.7978846> : tensor<f32>}> : () -> tensor<f32>
  %one = "dnn.weight"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
  %h = dnn.binary ins(%x, %half : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  %p = dnn.binary ins(%x, %three : tensor<2x8xf32>, tensor<f32>) {fn = "pow"} : tensor<2x8xf32>
  %q = dnn.binary ins(%p, %c : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  %r = dnn.binary ins(%x, %q : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "add"} : tensor<2x8xf32>
  %s = dnn.binary ins(%r, %k : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  %t = dnn.unary ins(%s : tensor<2x8xf32>) {fn = "tanh"} : tensor<2x8xf32>
  %u = dnn.binary ins(%t, %one : tensor<2x8xf32>, tensor<f32>) {fn = "add"} : tensor<2x8xf32>
  %y = dnn.binary ins(%h, %u : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "mul"} : tensor<2x8xf32>
  func.return %y, %t : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// A batch of token rows times a weight matrix plus a bias: one Gemm on the
// rows seen as a matrix (views cost nothing).
// CHECK-LABEL: func.func @rows_matmul_add_fused
// CHECK: %[[A:.*]] = "dnn.view"(%x) : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[G:.*]] = dnn.gemm ins(%[[A]], %w, c %b : {{.*}}) : tensor<6x5xf32>
// CHECK: %[[Y:.*]] = "dnn.view"(%[[G]]) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: func.return %[[Y]]
func.func @rows_matmul_add_fused(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %m = dnn.matmul ins(%x, %w : tensor<2x3x4xf32>, tensor<4x5xf32>) : tensor<2x3x5xf32>
  %y = dnn.binary ins(%m, %b : tensor<2x3x5xf32>, tensor<5xf32>) {fn = "add"} : tensor<2x3x5xf32>
  func.return %y : tensor<2x3x5xf32>
}

// -----

// Negative: a bias that varies per token is no Gemm bias; a batched weight
// (attention's QK^T) is no matrix.
// CHECK-LABEL: func.func @rows_matmul_add_not_fused
// CHECK-NOT: dnn.gemm
func.func @rows_matmul_add_not_fused(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<3x5xf32>, %v: tensor<2x4x5xf32>, %c: tensor<5xf32>) -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>) {
  %m = dnn.matmul ins(%x, %w : tensor<2x3x4xf32>, tensor<4x5xf32>) : tensor<2x3x5xf32>
  %y = dnn.binary ins(%m, %b : tensor<2x3x5xf32>, tensor<3x5xf32>) {fn = "add"} : tensor<2x3x5xf32>
  %n = dnn.matmul ins(%x, %v : tensor<2x3x4xf32>, tensor<2x4x5xf32>) : tensor<2x3x5xf32>
  %z = dnn.binary ins(%n, %c : tensor<2x3x5xf32>, tensor<5xf32>) {fn = "add"} : tensor<2x3x5xf32>
  func.return %y, %z : tensor<2x3x5xf32>, tensor<2x3x5xf32>
}

// -----

// An elementwise op and the activation after it are one kernel.
// CHECK-LABEL: func.func @binary_activation_fused
// CHECK: %[[Y:.*]] = dnn.binary ins(%a, %b : {{.*}}) {fn = "add", activation = "relu"
// CHECK-NEXT: func.return %[[Y]]
func.func @binary_activation_fused(%a: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %s = dnn.binary ins(%a, %b : tensor<2x8xf32>, tensor<8xf32>) {fn = "add"} : tensor<2x8xf32>
  %y = dnn.unary ins(%s : tensor<2x8xf32>) {fn = "relu"} : tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// -----

// Negative: pow takes no fused activation; a sum read twice stays.
// CHECK-LABEL: func.func @binary_activation_not_fused
// CHECK: %[[P:.*]] = dnn.binary ins(%a, %a : {{.*}}) {fn = "pow"
// CHECK: dnn.unary ins(%[[P]] : {{.*}}) {fn = "relu"
// CHECK: %[[S:.*]] = dnn.binary ins(%a, %a : {{.*}}) {fn = "add"
// CHECK: dnn.unary ins(%[[S]] : {{.*}}) {fn = "tanh"
func.func @binary_activation_not_fused(%a: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %p = dnn.binary ins(%a, %a : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "pow"} : tensor<2x8xf32>
  %y = dnn.unary ins(%p : tensor<2x8xf32>) {fn = "relu"} : tensor<2x8xf32>
  %s = dnn.binary ins(%a, %a : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "add"} : tensor<2x8xf32>
  %z = dnn.unary ins(%s : tensor<2x8xf32>) {fn = "tanh"} : tensor<2x8xf32>
  func.return %y, %z, %s : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Negative: the pre-activation is both the conv's input and its residual;
// the fused conv would still need it, so nothing changes.
// CHECK-LABEL: func.func @preact_conv_residual_not_fused
// CHECK: %[[B:.*]] = dnn.channel_affine
// CHECK: dnn.conv ins(%[[B]], %w, residual %[[B]] : {{.*}})
func.func @preact_conv_residual_not_fused(%x: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %s = "dnn.weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %t = "dnn.weight"() <{value = dense<[0.0, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %w = "dnn.weight"() <{value = dense<[[[[1.0]], [[2.0]]], [[[3.0]], [[4.0]]]]> : tensor<2x2x1x1xf32>}> : () -> tensor<2x2x1x1xf32>
  %b = dnn.channel_affine ins(%x, %s, %t : tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>) : tensor<1x2x2x2xf32>
  %y = dnn.conv ins(%b, %w, residual %b : tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>, tensor<1x2x2x2xf32>) : tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

// -----

// A gemm without a bias (an ONNX Gemm with no C) followed by an Add of a
// vector over its rows: the vector becomes the gemm's bias, beta 1.
// CHECK-LABEL: func.func @gemm_bias_fused
// CHECK: %[[Y:.*]] = dnn.gemm ins(%a, %b, c %c : tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) {trans_b = 1 : i64} : tensor<2x4xf32>
// CHECK-NEXT: func.return %[[Y]]
func.func @gemm_bias_fused(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>, %c: tensor<4xf32>) -> tensor<2x4xf32> {
  %m = dnn.gemm ins(%a, %b : tensor<2x3xf32>, tensor<4x3xf32>) {trans_b = 1 : i64} : tensor<2x4xf32>
  %y = dnn.binary ins(%m, %c : tensor<2x4xf32>, tensor<4xf32>) {fn = "add"} : tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}

// -----

// Negative: a gemm with a fused activation adds after it (relu(ab) + c is
// no bias), and an Add that grows the product by broadcasting is no bias.
// CHECK-LABEL: func.func @gemm_bias_not_fused
// CHECK: %[[G:.*]] = dnn.gemm ins(%a, %b : {{.*}}) {trans_b = 1 : i64, activation = "relu"}
// CHECK-NEXT: dnn.binary ins(%[[G]], %c : {{.*}}) {fn = "add"}
// CHECK: %[[H:.*]] = dnn.gemm ins(%p, %b : {{.*}}) {trans_b = 1 : i64} :
// CHECK-NEXT: dnn.binary ins(%[[H]], %q : {{.*}}) {fn = "add"}
func.func @gemm_bias_not_fused(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>, %c: tensor<4xf32>, %p: tensor<1x3xf32>, %q: tensor<5x1xf32>) -> (tensor<2x4xf32>, tensor<5x4xf32>) {
  %m = dnn.gemm ins(%a, %b : tensor<2x3xf32>, tensor<4x3xf32>) {trans_b = 1 : i64, activation = "relu"} : tensor<2x4xf32>
  %y = dnn.binary ins(%m, %c : tensor<2x4xf32>, tensor<4xf32>) {fn = "add"} : tensor<2x4xf32>
  %n = dnn.gemm ins(%p, %b : tensor<1x3xf32>, tensor<4x3xf32>) {trans_b = 1 : i64} : tensor<1x4xf32>
  %z = dnn.binary ins(%n, %q : tensor<1x4xf32>, tensor<5x1xf32>) {fn = "add"} : tensor<5x4xf32>
  func.return %y, %z : tensor<2x4xf32>, tensor<5x4xf32>
}

// -----

// GELU with the half on the gate, x * ((erf(x / sqrt 2) + 1) * 0.5), as
// some exporters write it: one gelu too.
// CHECK-LABEL: func.func @gelu_erf_halved_gate_fused
// CHECK: %[[Y:.*]] = dnn.unary ins(%x : tensor<2x8xf32>) {fn = "gelu"} : tensor<2x8xf32>
// CHECK-NEXT: func.return %[[Y]]
func.func @gelu_erf_halved_gate_fused(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sqrt2 = "dnn.weight"() <{value = dense<1.41421354> : tensor<f32>}> : () -> tensor<f32>
  %one = "dnn.weight"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %half = "dnn.weight"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %d = dnn.binary ins(%x, %sqrt2 : tensor<2x8xf32>, tensor<f32>) {fn = "div"} : tensor<2x8xf32>
  %e = dnn.unary ins(%d : tensor<2x8xf32>) {fn = "erf"} : tensor<2x8xf32>
  %p = dnn.binary ins(%e, %one : tensor<2x8xf32>, tensor<f32>) {fn = "add"} : tensor<2x8xf32>
  %h = dnn.binary ins(%p, %half : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  %y = dnn.binary ins(%x, %h : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "mul"} : tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// -----

// Negative: the gate is read a second time (the halved gate must be private
// to the match), so nothing fuses.
// CHECK-LABEL: func.func @gelu_erf_halved_gate_not_fused
// CHECK: dnn.unary ins(%d : {{.*}}) {fn = "erf"}
// CHECK-NOT: "gelu"
func.func @gelu_erf_halved_gate_not_fused(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %sqrt2 = "dnn.weight"() <{value = dense<1.41421354> : tensor<f32>}> : () -> tensor<f32>
  %one = "dnn.weight"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
  %half = "dnn.weight"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %d = dnn.binary ins(%x, %sqrt2 : tensor<2x8xf32>, tensor<f32>) {fn = "div"} : tensor<2x8xf32>
  %e = dnn.unary ins(%d : tensor<2x8xf32>) {fn = "erf"} : tensor<2x8xf32>
  %p = dnn.binary ins(%e, %one : tensor<2x8xf32>, tensor<f32>) {fn = "add"} : tensor<2x8xf32>
  %h = dnn.binary ins(%p, %half : tensor<2x8xf32>, tensor<f32>) {fn = "mul"} : tensor<2x8xf32>
  %y = dnn.binary ins(%x, %h : tensor<2x8xf32>, tensor<2x8xf32>) {fn = "mul"} : tensor<2x8xf32>
  func.return %y, %h : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Attention scores without a mask: softmax(QK^T * 0.5) is one kernel.
// CHECK-LABEL: func.func @attention_softmax_unmasked_fused
// CHECK: %[[Y:.*]] = dnn.attention_softmax ins(%q, %k : {{.*}}) {scale = 5.000000e-01 : f32}
// CHECK-NEXT: func.return %[[Y]]
func.func @attention_softmax_unmasked_fused(%q: tensor<2x3x4xf32>, %k: tensor<2x4x3xf32>) -> tensor<2x3x3xf32> {
  %c = "dnn.weight"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
  %s = dnn.matmul ins(%q, %k : tensor<2x3x4xf32>, tensor<2x4x3xf32>) : tensor<2x3x3xf32>
  %d = dnn.binary ins(%s, %c : tensor<2x3x3xf32>, tensor<f32>) {fn = "mul"} : tensor<2x3x3xf32>
  %y = dnn.softmax ins(%d : tensor<2x3x3xf32>) : tensor<2x3x3xf32>
  func.return %y : tensor<2x3x3xf32>
}

// -----

// Negative: a scale per column of the scores is not one number.
// CHECK-LABEL: func.func @attention_softmax_unmasked_not_fused
// CHECK-NOT: dnn.attention_softmax
// CHECK: dnn.softmax ins(%d
// CHECK-NOT: dnn.attention_softmax
func.func @attention_softmax_unmasked_not_fused(%q: tensor<2x3x4xf32>, %k: tensor<2x4x3xf32>) -> tensor<2x3x3xf32> {
  %c = "dnn.weight"() <{value = dense<[5.000000e-01, 1.000000e+00, 2.000000e+00]> : tensor<3xf32>}> : () -> tensor<3xf32>
  %s = dnn.matmul ins(%q, %k : tensor<2x3x4xf32>, tensor<2x4x3xf32>) : tensor<2x3x3xf32>
  %d = dnn.binary ins(%s, %c : tensor<2x3x3xf32>, tensor<3xf32>) {fn = "mul"} : tensor<2x3x3xf32>
  %y = dnn.softmax ins(%d : tensor<2x3x3xf32>) : tensor<2x3x3xf32>
  func.return %y : tensor<2x3x3xf32>
}

// RUN: pyocc-opt %s --split-input-file -p convert-onnx-to-dnn | filecheck %s

// CHECK-LABEL: func.func @conv_relu
func.func @conv_relu(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w = "onnx.ConstantOfShape"() <{value = dense<0.5> : tensor<1xf32>}> : () -> tensor<4x3x3x3xf32>
  // CHECK: %[[W:.*]] = "dnn.weight"() <{splat = dense<5.000000e-01> : tensor<1xf32>}> : () -> tensor<4x3x3x3xf32>
  // CHECK: %[[C:.*]] = dnn.conv ins(%x, %[[W]] : {{.*}}) {{\{.*}}pads = array<i64: 1, 1, 1, 1>
  %c = "onnx.Conv"(%x, %w) <{auto_pad = "SAME_UPPER"}> : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: dnn.unary ins(%[[C]] : {{.*}}) {fn = "relu"
  %r = "onnx.Relu"(%c) : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %r : tensor<1x4x8x8xf32>
}

// -----

// Sum of three is a chain of two binary adds; Reshape is a view.
// CHECK-LABEL: func.func @sum_and_view
func.func @sum_and_view(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %c: tensor<2x3xf32>) -> tensor<6xf32> {
  // CHECK: %[[S1:.*]] = dnn.binary ins(%a, %b : {{.*}}) {fn = "add"
  // CHECK-NEXT: %[[S2:.*]] = dnn.binary ins(%[[S1]], %c : {{.*}}) {fn = "add"
  %s = "onnx.Sum"(%a, %b, %c) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: "dnn.view"(%[[S2]]) : (tensor<2x3xf32>) -> tensor<6xf32>
  %v = "onnx.Reshape"(%s) <{shape = array<i64: 6>}> : (tensor<2x3xf32>) -> tensor<6xf32>
  func.return %v : tensor<6xf32>
}

// -----

// BatchNormalization with constant statistics folds into a channel_affine.
// CHECK-LABEL: func.func @batchnorm
func.func @batchnorm(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %s = "onnx.Constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %b = "onnx.Constant"() <{value = dense<[0.0, 1.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %m = "onnx.Constant"() <{value = dense<[0.5, 0.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  %v = "onnx.Constant"() <{value = dense<[3.0, 0.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
  // CHECK-NOT: dnn.batch_norm
  // CHECK: dnn.channel_affine ins(%x,
  %y = "onnx.BatchNormalization"(%x, %s, %b, %m, %v) <{epsilon = 1.0 : f32}> : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}

// -----

// Negative: statistics computed at run time are not folded.
// CHECK-LABEL: func.func @batchnorm_not_folded
func.func @batchnorm_not_folded(%x: tensor<1x2x4x4xf32>, %s: tensor<2xf32>) -> tensor<1x2x4x4xf32> {
  // CHECK-NOT: dnn.channel_affine
  // CHECK: dnn.batch_norm ins(%x, %s,
  %y = "onnx.BatchNormalization"(%x, %s, %s, %s, %s) : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}

// -----

// ConvTranspose sized by auto_pad: total padding 2*(3-1) + 3 - 6 = 1,
// SAME_UPPER puts the smaller half (0) first, SAME_LOWER the larger.
// CHECK-LABEL: func.func @conv_transpose_auto_pad
func.func @conv_transpose_auto_pad(%x: tensor<1x1x3x3xf32>, %w: tensor<1x2x3x3xf32>) -> (tensor<1x2x6x6xf32>, tensor<1x2x6x6xf32>) {
  // CHECK: dnn.conv_transpose ins(%x, %w : {{.*}}) {{\{.*}}pads = array<i64: 0, 0, 1, 1>
  %u = "onnx.ConvTranspose"(%x, %w) <{auto_pad = "SAME_UPPER", strides = array<i64: 2, 2>}> : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  // CHECK: dnn.conv_transpose ins(%x, %w : {{.*}}) {{\{.*}}pads = array<i64: 1, 1, 0, 0>
  %l = "onnx.ConvTranspose"(%x, %w) <{auto_pad = "SAME_LOWER", strides = array<i64: 2, 2>}> : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  func.return %u, %l : tensor<1x2x6x6xf32>, tensor<1x2x6x6xf32>
}

// -----

// With output_shape alone (no pads), nothing is cropped at the start, and
// given pads are kept as they are.
// CHECK-LABEL: func.func @conv_transpose_output_shape
func.func @conv_transpose_output_shape(%x: tensor<1x1x3x3xf32>, %w: tensor<1x2x3x3xf32>) -> (tensor<1x2x10x8xf32>, tensor<1x2x7x3xf32>) {
  // CHECK: dnn.conv_transpose ins(%x, %w : {{.*}}) {{\{.*}}pads = array<i64: 0, 0, 0, 0>
  %o = "onnx.ConvTranspose"(%x, %w) <{output_shape = array<i64: 10, 8>, strides = array<i64: 3, 2>}> : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x10x8xf32>
  // CHECK: dnn.conv_transpose ins(%x, %w : {{.*}}) {{\{.*}}pads = array<i64: 0, 1, 0, 1>
  %p = "onnx.ConvTranspose"(%x, %w) <{pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 2, 1>}> : (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x7x3xf32>
  func.return %o, %p : tensor<1x2x10x8xf32>, tensor<1x2x7x3xf32>
}
// -----

// IsNaN is a unary predicate (a bool result); IsInf picks its fn from the
// detect flags, and with neither flag set it is a constant false.
// CHECK-LABEL: func.func @isnan_isinf
func.func @isnan_isinf(%x: tensor<2x3xf32>) -> (tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>) {
  // CHECK: dnn.unary ins(%x : tensor<2x3xf32>) {fn = "isnan"} : tensor<2x3xi1>
  %n = "onnx.IsNaN"(%x) : (tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: dnn.unary ins(%x : tensor<2x3xf32>) {fn = "isinf"} : tensor<2x3xi1>
  %i = "onnx.IsInf"(%x) : (tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: dnn.unary ins(%x : tensor<2x3xf32>) {fn = "isposinf"} : tensor<2x3xi1>
  %p = "onnx.IsInf"(%x) <{detect_negative = 0 : i64}> : (tensor<2x3xf32>) -> tensor<2x3xi1>
  // CHECK: "dnn.weight"() <{splat = dense<false> : tensor<1xi1>}> : () -> tensor<2x3xi1>
  %f = "onnx.IsInf"(%x) <{detect_negative = 0 : i64, detect_positive = 0 : i64}> : (tensor<2x3xf32>) -> tensor<2x3xi1>
  func.return %n, %i, %p, %f : tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>, tensor<2x3xi1>
}

// -----

// Negative: IsInf with neither flag reads nothing at run time.
// CHECK-LABEL: func.func @isinf_detects_nothing
func.func @isinf_detects_nothing(%x: tensor<4xf32>) -> tensor<4xi1> {
  // CHECK-NOT: dnn.unary
  // CHECK: "dnn.weight"
  // CHECK-NOT: dnn.unary
  %f = "onnx.IsInf"(%x) <{detect_negative = 0 : i64, detect_positive = 0 : i64}> : (tensor<4xf32>) -> tensor<4xi1>
  func.return %f : tensor<4xi1>
}

// -----

// A batched matrix product is one dnn.matmul, no transpose.
// CHECK-LABEL: func.func @einsum_batch_matmul
func.func @einsum_batch_matmul(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  // CHECK-NOT: dnn.transpose
  // CHECK: dnn.matmul ins(%a, %b : tensor<2x3x4xf32>, tensor<2x4x5xf32>) : tensor<2x3x5xf32>
  // CHECK-NOT: dnn.transpose
  %y = "onnx.Einsum"(%a, %b) <{equation = "bij,bjk->bik"}> : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  func.return %y : tensor<2x3x5xf32>
}

// -----

// Attention scores with the key transposed by the equation (BERT's
// "bhid,bhjd->bhij"): the right operand is transposed, then a matmul.
// CHECK-LABEL: func.func @einsum_scores
func.func @einsum_scores(%q: tensor<1x2x3x4xf32>, %k: tensor<1x2x5x4xf32>) -> tensor<1x2x3x5xf32> {
  // CHECK: %[[KT:.*]] = dnn.transpose ins(%k : {{.*}}) {perm = array<i64: 0, 1, 3, 2>}
  // CHECK: dnn.matmul ins(%q, %[[KT]] :
  %y = "onnx.Einsum"(%q, %k) <{equation = "bhid,bhjd->bhij"}> : (tensor<1x2x3x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x2x3x5xf32>
  func.return %y : tensor<1x2x3x5xf32>
}

// -----

// A label only one operand has, absent from the output, is summed first;
// a repeated label is a diagonal (a gather of the flattened pair).
// CHECK-LABEL: func.func @einsum_sum_and_diagonal
func.func @einsum_sum_and_diagonal(%a: tensor<3x4xf32>, %s: tensor<3x3xf32>) -> (tensor<4xf32>, tensor<3xf32>) {
  // CHECK: dnn.reduce ins(%a : tensor<3x4xf32>) {fn = "sum", axes = array<i64: 0>, keepdims = 0 : i64} : tensor<4xf32>
  %c = "onnx.Einsum"(%a) <{equation = "ij->j"}> : (tensor<3x4xf32>) -> tensor<4xf32>
  // CHECK: %[[FLAT:.*]] = "dnn.view"(%s) : (tensor<3x3xf32>) -> tensor<9xf32>
  // CHECK: dnn.gather ins(%[[FLAT]], %{{.*}} : tensor<9xf32>, tensor<3xi64>) : tensor<3xf32>
  %d = "onnx.Einsum"(%s) <{equation = "ii->i"}> : (tensor<3x3xf32>) -> tensor<3xf32>
  func.return %c, %d : tensor<4xf32>, tensor<3xf32>
}

// -----

// Negative: an einsum that changes nothing is a copy, no product.
// CHECK-LABEL: func.func @einsum_identity
func.func @einsum_identity(%a: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // CHECK-NOT: dnn.matmul
  // CHECK: dnn.copy ins(%a :
  // CHECK-NOT: dnn.matmul
  %y = "onnx.Einsum"(%a) <{equation = "ij->ij"}> : (tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}

// -----

// TopK has two results (values, indices); CumSum, ScatterND, ArgMin and
// the new reductions map one to one.
// CHECK-LABEL: func.func @top_k_cum_sum_scatter
func.func @top_k_cum_sum_scatter(%x: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3xi64>, tensor<3xf32>) {
  // CHECK: dnn.top_k ins(%x : tensor<3x4xf32>) : tensor<3x2xf32>, tensor<3x2xi64>
  %v, %k = "onnx.TopK"(%x) <{K = 2 : i64}> : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
  // CHECK: dnn.cum_sum ins(%x : tensor<3x4xf32>) {axis = 1 : i64, exclusive = 1 : i64}
  %c = "onnx.CumSum"(%x) <{axis = 1 : i64, exclusive = 1 : i64}> : (tensor<3x4xf32>) -> tensor<3x4xf32>
  // CHECK: dnn.scatter_nd ins(%x, %i, %u : {{.*}}) {reduction = "add"}
  %s = "onnx.ScatterND"(%x, %i, %u) <{reduction = "add"}> : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  // CHECK: dnn.arg_min ins(%x : tensor<3x4xf32>) {axis = 1 : i64, keepdims = 0 : i64}
  %a = "onnx.ArgMin"(%x) <{axis = 1 : i64, keepdims = 0 : i64}> : (tensor<3x4xf32>) -> tensor<3xi64>
  // CHECK: dnn.reduce ins(%x : tensor<3x4xf32>) {fn = "l2"
  %r = "onnx.ReduceL2"(%x) <{axes = array<i64: 1>, keepdims = 0 : i64}> : (tensor<3x4xf32>) -> tensor<3xf32>
  func.return %v, %k, %c, %s, %a, %r : tensor<3x2xf32>, tensor<3x2xi64>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3xi64>, tensor<3xf32>
}

// -----

// Trilu is a where over a constant triangle mask; Selu's gamma is the
// unary kernel's beta.
// CHECK-LABEL: func.func @trilu_selu
func.func @trilu_selu(%x: tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3x3xf32>) {
  // CHECK: %[[MASK:.*]] = "dnn.weight"() <{value = dense<{{\[\[}}true, true, true], [false, true, true], [false, false, true]]> : tensor<3x3xi1>}>
  // CHECK: dnn.where ins(%[[MASK]], %x, %{{.*}} :
  %t = "onnx.Trilu"(%x) : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  // CHECK: dnn.unary ins(%x : tensor<2x3x3xf32>) {fn = "selu", alpha = 2.000000e+00 : f32, beta = 3.000000e+00 : f32}
  %s = "onnx.Selu"(%x) <{alpha = 2.0 : f32, gamma = 3.0 : f32}> : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  func.return %t, %s : tensor<2x3x3xf32>, tensor<2x3x3xf32>
}

// -----

// DepthToSpace is a view, a transpose and a view (no kernel of its own);
// InstanceNormalization is a layer_norm over the spatial axes, then a
// per-channel affine.
// CHECK-LABEL: func.func @depth_to_space_instance_norm
func.func @depth_to_space_instance_norm(%x: tensor<1x8x3x4xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<1x2x6x8xf32>, tensor<1x8x3x4xf32>) {
  // CHECK: %[[SIX:.*]] = "dnn.view"(%x) : (tensor<1x8x3x4xf32>) -> tensor<1x2x2x2x3x4xf32>
  // CHECK: %[[T:.*]] = dnn.transpose ins(%[[SIX]] : {{.*}}) {perm = array<i64: 0, 3, 4, 1, 5, 2>}
  // CHECK: "dnn.view"(%[[T]]) : (tensor<1x2x3x2x4x2xf32>) -> tensor<1x2x6x8xf32>
  %d = "onnx.DepthToSpace"(%x) <{blocksize = 2 : i64}> : (tensor<1x8x3x4xf32>) -> tensor<1x2x6x8xf32>
  // CHECK: %[[N:.*]] = dnn.layer_norm ins(%x, %{{.*}} : {{.*}}) {axis = 2 : i64
  // CHECK: dnn.channel_affine ins(%[[N]], %s, %b :
  %n = "onnx.InstanceNormalization"(%x, %s, %b) : (tensor<1x8x3x4xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x8x3x4xf32>
  func.return %d, %n : tensor<1x2x6x8xf32>, tensor<1x8x3x4xf32>
}

// -----

// Negative: blocksize 1 moves nothing, yet stays a (trivial) transpose
// between views, never a layer_norm or a copy kernel of its own.
// CHECK-LABEL: func.func @space_to_depth_block_one
func.func @space_to_depth_block_one(%x: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  // CHECK-NOT: dnn.layer_norm
  // CHECK-NOT: dnn.copy
  // CHECK: dnn.transpose
  // CHECK-NOT: dnn.copy
  %y = "onnx.SpaceToDepth"(%x) <{blocksize = 1 : i64}> : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  func.return %y : tensor<1x2x3x4xf32>
}

// -----

// ScatterElements maps one to one, keeping its axis and reduction.
// CHECK-LABEL: func.func @scatter_elements
func.func @scatter_elements(%x: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<3x4xf32> {
  // CHECK: dnn.scatter_elements ins(%x, %i, %u : {{.*}}) {axis = 1 : i64, reduction = "max"}
  %y = "onnx.ScatterElements"(%x, %i, %u) <{axis = 1 : i64, reduction = "max"}> : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}

// RUN: pyocc-opt %s | pyocc-opt | filecheck %s
// RUN: pyocc-opt %s --print-op-generic | pyocc-opt | filecheck %s
// RUN: pyocc-opt %s > %t.once.mlir && pyocc-opt %t.once.mlir > %t.twice.mlir && diff %t.once.mlir %t.twice.mlir
// Every dnn compute op in both forms, in the custom syntax: `ins(...)` holds
// the kernel inputs (an optional one after its name, variadic ones bare when
// they are the only input), `outs(...)` the destinations and the workspace,
// then the properties that differ from their defaults and, on tensors, the
// result types. The text must survive print -> parse -> print, and the
// generic form must parse to the same ops.

// CHECK-LABEL: func.func @tensor_form
func.func @tensor_form(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %b: tensor<4xf32>, %r: tensor<1x4x8x8xf32>, %s: tensor<4xf32>, %m: tensor<8x8xf32>, %v: tensor<8xf32>, %c: tensor<1x4x8x8xi1>, %i: tensor<2xi64>, %mi: tensor<8x8xi64>, %nd: tensor<3x2xi64>) {
// CHECK-NEXT: %conv = dnn.conv ins(%x, %w, bias %b, residual %r : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>, tensor<1x4x8x8xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x4x8x8xf32>
  %conv = dnn.conv ins(%x, %w, bias %b, residual %r : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>, tensor<1x4x8x8xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %preact = dnn.preact_conv ins(%x, %s, %s, %w, residual %r : tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x4x3x3xf32>, tensor<1x4x8x8xf32>) {pre_activation = "relu", pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x8x8xf32>
  %preact = dnn.preact_conv ins(%x, %s, %s, %w, residual %r : tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x4x3x3xf32>, tensor<1x4x8x8xf32>) {pre_activation = "relu", pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %up = dnn.conv_transpose ins(%x, %w, bias %b : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>) {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>} : tensor<1x4x16x16xf32>
  %up = dnn.conv_transpose ins(%x, %w, bias %b : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>) {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>} : tensor<1x4x16x16xf32>
// CHECK-NEXT: %maxp = dnn.max_pool ins(%x : tensor<1x4x8x8xf32>) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64} : tensor<1x4x4x4xf32>
  %maxp = dnn.max_pool ins(%x : tensor<1x4x8x8xf32>) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64} : tensor<1x4x4x4xf32>
// CHECK-NEXT: %avgp = dnn.average_pool ins(%x : tensor<1x4x8x8xf32>) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, count_include_pad = 1 : i64} : tensor<1x4x4x4xf32>
  %avgp = dnn.average_pool ins(%x : tensor<1x4x8x8xf32>) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, count_include_pad = 1 : i64} : tensor<1x4x4x4xf32>
// CHECK-NEXT: %gap = dnn.global_average_pool ins(%x : tensor<1x4x8x8xf32>) : tensor<1x4x1x1xf32>
  %gap = dnn.global_average_pool ins(%x : tensor<1x4x8x8xf32>) : tensor<1x4x1x1xf32>
// CHECK-NEXT: %gmp = dnn.global_max_pool ins(%x : tensor<1x4x8x8xf32>) : tensor<1x4x1x1xf32>
  %gmp = dnn.global_max_pool ins(%x : tensor<1x4x8x8xf32>) : tensor<1x4x1x1xf32>
// CHECK-NEXT: %gemm = dnn.gemm ins(%m, %m, c %v : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>) {alpha = 5.000000e-01 : f32, trans_b = 1 : i64, activation = "relu"} : tensor<8x8xf32>
  %gemm = dnn.gemm ins(%m, %m, c %v : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>) {alpha = 5.000000e-01 : f32, trans_b = 1 : i64, activation = "relu"} : tensor<8x8xf32>
// CHECK-NEXT: %mm = dnn.matmul ins(%m, %m : tensor<8x8xf32>, tensor<8x8xf32>) : tensor<8x8xf32>
  %mm = dnn.matmul ins(%m, %m : tensor<8x8xf32>, tensor<8x8xf32>) : tensor<8x8xf32>
// CHECK-NEXT: %gelu = dnn.unary ins(%x : tensor<1x4x8x8xf32>) {fn = "gelu", approximate = "tanh"} : tensor<1x4x8x8xf32>
  %gelu = dnn.unary ins(%x : tensor<1x4x8x8xf32>) {fn = "gelu", approximate = "tanh"} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %add = dnn.binary ins(%x, %r : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) {fn = "add", activation = "relu"} : tensor<1x4x8x8xf32>
  %add = dnn.binary ins(%x, %r : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) {fn = "add", activation = "relu"} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %sum = dnn.variadic ins(%x, %r, %x : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) {fn = "sum"} : tensor<1x4x8x8xf32>
  %sum = dnn.variadic ins(%x, %r, %x : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) {fn = "sum"} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %sel = dnn.where ins(%c, %x, %r : tensor<1x4x8x8xi1>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) : tensor<1x4x8x8xf32>
  %sel = dnn.where ins(%c, %x, %r : tensor<1x4x8x8xi1>, tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) : tensor<1x4x8x8xf32>
// CHECK-NEXT: %half = dnn.cast ins(%x : tensor<1x4x8x8xf32>) : tensor<1x4x8x8xf16>
  %half = dnn.cast ins(%x : tensor<1x4x8x8xf32>) : tensor<1x4x8x8xf16>
// CHECK-NEXT: %copy = dnn.copy ins(%x : tensor<1x4x8x8xf32>) : tensor<1x4x8x8xf32>
  %copy = dnn.copy ins(%x : tensor<1x4x8x8xf32>) : tensor<1x4x8x8xf32>
// CHECK-NEXT: %aff = dnn.channel_affine ins(%x, %s, %s : tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>) {activation = "relu"} : tensor<1x4x8x8xf32>
  %aff = dnn.channel_affine ins(%x, %s, %s : tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>) {activation = "relu"} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %bn = dnn.batch_norm ins(%x, %s, %s, %s, %s : tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {epsilon = 1.000000e-03 : f32} : tensor<1x4x8x8xf32>
  %bn = dnn.batch_norm ins(%x, %s, %s, %s, %s : tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {epsilon = 1.000000e-03 : f32} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %sm = dnn.softmax ins(%x : tensor<1x4x8x8xf32>) {axis = 1 : i64} : tensor<1x4x8x8xf32>
  %sm = dnn.softmax ins(%x : tensor<1x4x8x8xf32>) {axis = 1 : i64} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %att = dnn.attention_softmax ins(%m, %m, mask %m : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {scale = 1.250000e-01 : f32} : tensor<8x8xf32>
  %att = dnn.attention_softmax ins(%m, %m, mask %m : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {scale = 1.250000e-01 : f32} : tensor<8x8xf32>
// CHECK-NEXT: %lsm = dnn.log_softmax ins(%x : tensor<1x4x8x8xf32>) {axis = 1 : i64} : tensor<1x4x8x8xf32>
  %lsm = dnn.log_softmax ins(%x : tensor<1x4x8x8xf32>) {axis = 1 : i64} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %ln = dnn.layer_norm ins(%m, %v, bias %v : tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>) {epsilon = 1.000000e-03 : f32} : tensor<8x8xf32>
  %ln = dnn.layer_norm ins(%m, %v, bias %v : tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>) {epsilon = 1.000000e-03 : f32} : tensor<8x8xf32>
// CHECK-NEXT: %lrn = dnn.lrn ins(%x : tensor<1x4x8x8xf32>) {size = 3 : i64, alpha = 2.000000e-04 : f32} : tensor<1x4x8x8xf32>
  %lrn = dnn.lrn ins(%x : tensor<1x4x8x8xf32>) {size = 3 : i64, alpha = 2.000000e-04 : f32} : tensor<1x4x8x8xf32>
// CHECK-NEXT: %mean = dnn.reduce ins(%x : tensor<1x4x8x8xf32>) {fn = "mean", axes = array<i64: 2, 3>, keepdims = 0 : i64} : tensor<1x4xf32>
  %mean = dnn.reduce ins(%x : tensor<1x4x8x8xf32>) {fn = "mean", axes = array<i64: 2, 3>, keepdims = 0 : i64} : tensor<1x4xf32>
// CHECK-NEXT: %am = dnn.arg_max ins(%x : tensor<1x4x8x8xf32>) {axis = 1 : i64, keepdims = 0 : i64} : tensor<1x8x8xi64>
  %am = dnn.arg_max ins(%x : tensor<1x4x8x8xf32>) {axis = 1 : i64, keepdims = 0 : i64} : tensor<1x8x8xi64>
// CHECK-NEXT: %cat = dnn.concat ins(%x, %r : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) {axis = 1 : i64} : tensor<1x8x8x8xf32>
  %cat = dnn.concat ins(%x, %r : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) {axis = 1 : i64} : tensor<1x8x8x8xf32>
// CHECK-NEXT: %sl = dnn.slice ins(%x : tensor<1x4x8x8xf32>) {starts = array<i64: 0>, ends = array<i64: 2>, axes = array<i64: 1>} : tensor<1x2x8x8xf32>
  %sl = dnn.slice ins(%x : tensor<1x4x8x8xf32>) {starts = array<i64: 0>, ends = array<i64: 2>, axes = array<i64: 1>} : tensor<1x2x8x8xf32>
// CHECK-NEXT: %tr = dnn.transpose ins(%x : tensor<1x4x8x8xf32>) {perm = array<i64: 0, 2, 3, 1>} : tensor<1x8x8x4xf32>
  %tr = dnn.transpose ins(%x : tensor<1x4x8x8xf32>) {perm = array<i64: 0, 2, 3, 1>} : tensor<1x8x8x4xf32>
// CHECK-NEXT: %ga = dnn.gather ins(%x, %i : tensor<1x4x8x8xf32>, tensor<2xi64>) {axis = 1 : i64} : tensor<1x2x8x8xf32>
  %ga = dnn.gather ins(%x, %i : tensor<1x4x8x8xf32>, tensor<2xi64>) {axis = 1 : i64} : tensor<1x2x8x8xf32>
// CHECK-NEXT: %gae = dnn.gather_elements ins(%m, %mi : tensor<8x8xf32>, tensor<8x8xi64>) {axis = 1 : i64} : tensor<8x8xf32>
  %gae = dnn.gather_elements ins(%m, %mi : tensor<8x8xf32>, tensor<8x8xi64>) {axis = 1 : i64} : tensor<8x8xf32>
// CHECK-NEXT: %gnd = dnn.gather_nd ins(%m, %nd : tensor<8x8xf32>, tensor<3x2xi64>) : tensor<3xf32>
  %gnd = dnn.gather_nd ins(%m, %nd : tensor<8x8xf32>, tensor<3x2xi64>) : tensor<3xf32>
// CHECK-NEXT: %ex = dnn.expand ins(%v : tensor<8xf32>) : tensor<2x8xf32>
  %ex = dnn.expand ins(%v : tensor<8xf32>) : tensor<2x8xf32>
// CHECK-NEXT: %ti = dnn.tile ins(%m : tensor<8x8xf32>) {repeats = array<i64: 2, 1>} : tensor<16x8xf32>
  %ti = dnn.tile ins(%m : tensor<8x8xf32>) {repeats = array<i64: 2, 1>} : tensor<16x8xf32>
// CHECK-NEXT: %pad = dnn.pad ins(%m : tensor<8x8xf32>) {pads = array<i64: 0, 1, 0, 1>, mode = "reflect"} : tensor<8x10xf32>
  %pad = dnn.pad ins(%m : tensor<8x8xf32>) {pads = array<i64: 0, 1, 0, 1>, mode = "reflect"} : tensor<8x10xf32>
// CHECK-NEXT: %rs = dnn.resize ins(%x : tensor<1x4x8x8xf32>) {mode = "linear", coordinate_transformation_mode = "asymmetric"} : tensor<1x4x16x16xf32>
  %rs = dnn.resize ins(%x : tensor<1x4x8x8xf32>) {mode = "linear", coordinate_transformation_mode = "asymmetric"} : tensor<1x4x16x16xf32>
// CHECK-NEXT: %rg = dnn.range {start = 0.000000e+00 : f32, delta = 1.000000e+00 : f32} : tensor<8xf32>
  %rg = dnn.range {start = 0.000000e+00 : f32, delta = 1.000000e+00 : f32} : tensor<8xf32>
// CHECK-NEXT: %lo, %hi = dnn.split ins(%x : tensor<1x4x8x8xf32>) {axis = 1 : i64} : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>
  %lo, %hi = dnn.split ins(%x : tensor<1x4x8x8xf32>) {axis = 1 : i64} : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>
  func.return
}

// CHECK-LABEL: func.func @buffer_form
func.func @buffer_form(%x: memref<1x4x8x8xf32>, %w: memref<4x4x3x3xf32>, %b: memref<4xf32>, %r: memref<1x4x8x8xf32>, %s: memref<4xf32>, %m: memref<8x8xf32>, %v: memref<8xf32>, %c: memref<1x4x8x8xi1>, %i: memref<2xi64>, %mi: memref<8x8xi64>, %nd: memref<3x2xi64>, %conv: memref<1x4x8x8xf32>, %preact: memref<1x4x8x8xf32>, %up: memref<1x4x16x16xf32>, %maxp: memref<1x4x4x4xf32>, %avgp: memref<1x4x4x4xf32>, %gap: memref<1x4x1x1xf32>, %gmp: memref<1x4x1x1xf32>, %gemm: memref<8x8xf32>, %mm: memref<8x8xf32>, %gelu: memref<1x4x8x8xf32>, %add: memref<1x4x8x8xf32>, %sum: memref<1x4x8x8xf32>, %sel: memref<1x4x8x8xf32>, %half: memref<1x4x8x8xf16>, %copy: memref<1x4x8x8xf32>, %aff: memref<1x4x8x8xf32>, %bn: memref<1x4x8x8xf32>, %sm: memref<1x4x8x8xf32>, %att: memref<8x8xf32>, %lsm: memref<1x4x8x8xf32>, %ln: memref<8x8xf32>, %lrn: memref<1x4x8x8xf32>, %mean: memref<1x4xf32>, %am: memref<1x8x8xi64>, %cat: memref<1x8x8x8xf32>, %sl: memref<1x2x8x8xf32>, %tr: memref<1x8x8x4xf32>, %ga: memref<1x2x8x8xf32>, %gae: memref<8x8xf32>, %gnd: memref<3xf32>, %ex: memref<2x8xf32>, %ti: memref<16x8xf32>, %pad: memref<8x10xf32>, %rs: memref<1x4x16x16xf32>, %rg: memref<8xf32>, %lo: memref<1x2x8x8xf32>, %hi: memref<1x2x8x8xf32>, %ws: memref<256xi8>) {
// CHECK-NEXT: dnn.conv ins(%x, %w, bias %b, residual %r : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<4xf32>, memref<1x4x8x8xf32>) outs(%conv, workspace %ws : memref<1x4x8x8xf32>, memref<256xi8>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"}
  dnn.conv ins(%x, %w, bias %b, residual %r : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<4xf32>, memref<1x4x8x8xf32>) outs(%conv, workspace %ws : memref<1x4x8x8xf32>, memref<256xi8>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"}
// CHECK-NEXT: dnn.preact_conv ins(%x, %s, %s, %w, residual %r : memref<1x4x8x8xf32>, memref<4xf32>, memref<4xf32>, memref<4x4x3x3xf32>, memref<1x4x8x8xf32>) outs(%preact : memref<1x4x8x8xf32>) {pre_activation = "relu", pads = array<i64: 1, 1, 1, 1>}
  dnn.preact_conv ins(%x, %s, %s, %w, residual %r : memref<1x4x8x8xf32>, memref<4xf32>, memref<4xf32>, memref<4x4x3x3xf32>, memref<1x4x8x8xf32>) outs(%preact : memref<1x4x8x8xf32>) {pre_activation = "relu", pads = array<i64: 1, 1, 1, 1>}
// CHECK-NEXT: dnn.conv_transpose ins(%x, %w, bias %b : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<4xf32>) outs(%up : memref<1x4x16x16xf32>) {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>}
  dnn.conv_transpose ins(%x, %w, bias %b : memref<1x4x8x8xf32>, memref<4x4x3x3xf32>, memref<4xf32>) outs(%up : memref<1x4x16x16xf32>) {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>}
// CHECK-NEXT: dnn.max_pool ins(%x : memref<1x4x8x8xf32>) outs(%maxp : memref<1x4x4x4xf32>) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64}
  dnn.max_pool ins(%x : memref<1x4x8x8xf32>) outs(%maxp : memref<1x4x4x4xf32>) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64}
// CHECK-NEXT: dnn.average_pool ins(%x : memref<1x4x8x8xf32>) outs(%avgp : memref<1x4x4x4xf32>) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, count_include_pad = 1 : i64}
  dnn.average_pool ins(%x : memref<1x4x8x8xf32>) outs(%avgp : memref<1x4x4x4xf32>) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, count_include_pad = 1 : i64}
// CHECK-NEXT: dnn.global_average_pool ins(%x : memref<1x4x8x8xf32>) outs(%gap : memref<1x4x1x1xf32>)
  dnn.global_average_pool ins(%x : memref<1x4x8x8xf32>) outs(%gap : memref<1x4x1x1xf32>)
// CHECK-NEXT: dnn.global_max_pool ins(%x : memref<1x4x8x8xf32>) outs(%gmp : memref<1x4x1x1xf32>)
  dnn.global_max_pool ins(%x : memref<1x4x8x8xf32>) outs(%gmp : memref<1x4x1x1xf32>)
// CHECK-NEXT: dnn.gemm ins(%m, %m, c %v : memref<8x8xf32>, memref<8x8xf32>, memref<8xf32>) outs(%gemm : memref<8x8xf32>) {alpha = 5.000000e-01 : f32, trans_b = 1 : i64, activation = "relu"}
  dnn.gemm ins(%m, %m, c %v : memref<8x8xf32>, memref<8x8xf32>, memref<8xf32>) outs(%gemm : memref<8x8xf32>) {alpha = 5.000000e-01 : f32, trans_b = 1 : i64, activation = "relu"}
// CHECK-NEXT: dnn.matmul ins(%m, %m : memref<8x8xf32>, memref<8x8xf32>) outs(%mm : memref<8x8xf32>)
  dnn.matmul ins(%m, %m : memref<8x8xf32>, memref<8x8xf32>) outs(%mm : memref<8x8xf32>)
// CHECK-NEXT: dnn.unary ins(%x : memref<1x4x8x8xf32>) outs(%gelu : memref<1x4x8x8xf32>) {fn = "gelu", approximate = "tanh"}
  dnn.unary ins(%x : memref<1x4x8x8xf32>) outs(%gelu : memref<1x4x8x8xf32>) {fn = "gelu", approximate = "tanh"}
// CHECK-NEXT: dnn.binary ins(%x, %r : memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) outs(%add : memref<1x4x8x8xf32>) {fn = "add", activation = "relu"}
  dnn.binary ins(%x, %r : memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) outs(%add : memref<1x4x8x8xf32>) {fn = "add", activation = "relu"}
// CHECK-NEXT: dnn.variadic ins(%x, %r, %x : memref<1x4x8x8xf32>, memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) outs(%sum : memref<1x4x8x8xf32>) {fn = "sum"}
  dnn.variadic ins(%x, %r, %x : memref<1x4x8x8xf32>, memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) outs(%sum : memref<1x4x8x8xf32>) {fn = "sum"}
// CHECK-NEXT: dnn.where ins(%c, %x, %r : memref<1x4x8x8xi1>, memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) outs(%sel : memref<1x4x8x8xf32>)
  dnn.where ins(%c, %x, %r : memref<1x4x8x8xi1>, memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) outs(%sel : memref<1x4x8x8xf32>)
// CHECK-NEXT: dnn.cast ins(%x : memref<1x4x8x8xf32>) outs(%half : memref<1x4x8x8xf16>)
  dnn.cast ins(%x : memref<1x4x8x8xf32>) outs(%half : memref<1x4x8x8xf16>)
// CHECK-NEXT: dnn.copy ins(%x : memref<1x4x8x8xf32>) outs(%copy : memref<1x4x8x8xf32>)
  dnn.copy ins(%x : memref<1x4x8x8xf32>) outs(%copy : memref<1x4x8x8xf32>)
// CHECK-NEXT: dnn.channel_affine ins(%x, %s, %s : memref<1x4x8x8xf32>, memref<4xf32>, memref<4xf32>) outs(%aff : memref<1x4x8x8xf32>) {activation = "relu"}
  dnn.channel_affine ins(%x, %s, %s : memref<1x4x8x8xf32>, memref<4xf32>, memref<4xf32>) outs(%aff : memref<1x4x8x8xf32>) {activation = "relu"}
// CHECK-NEXT: dnn.batch_norm ins(%x, %s, %s, %s, %s : memref<1x4x8x8xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>) outs(%bn : memref<1x4x8x8xf32>) {epsilon = 1.000000e-03 : f32}
  dnn.batch_norm ins(%x, %s, %s, %s, %s : memref<1x4x8x8xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>) outs(%bn : memref<1x4x8x8xf32>) {epsilon = 1.000000e-03 : f32}
// CHECK-NEXT: dnn.softmax ins(%x : memref<1x4x8x8xf32>) outs(%sm : memref<1x4x8x8xf32>) {axis = 1 : i64}
  dnn.softmax ins(%x : memref<1x4x8x8xf32>) outs(%sm : memref<1x4x8x8xf32>) {axis = 1 : i64}
// CHECK-NEXT: dnn.attention_softmax ins(%m, %m, mask %m : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>) outs(%att : memref<8x8xf32>) {scale = 1.250000e-01 : f32}
  dnn.attention_softmax ins(%m, %m, mask %m : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>) outs(%att : memref<8x8xf32>) {scale = 1.250000e-01 : f32}
// CHECK-NEXT: dnn.log_softmax ins(%x : memref<1x4x8x8xf32>) outs(%lsm : memref<1x4x8x8xf32>) {axis = 1 : i64}
  dnn.log_softmax ins(%x : memref<1x4x8x8xf32>) outs(%lsm : memref<1x4x8x8xf32>) {axis = 1 : i64}
// CHECK-NEXT: dnn.layer_norm ins(%m, %v, bias %v : memref<8x8xf32>, memref<8xf32>, memref<8xf32>) outs(%ln : memref<8x8xf32>) {epsilon = 1.000000e-03 : f32}
  dnn.layer_norm ins(%m, %v, bias %v : memref<8x8xf32>, memref<8xf32>, memref<8xf32>) outs(%ln : memref<8x8xf32>) {epsilon = 1.000000e-03 : f32}
// CHECK-NEXT: dnn.lrn ins(%x : memref<1x4x8x8xf32>) outs(%lrn : memref<1x4x8x8xf32>) {size = 3 : i64, alpha = 2.000000e-04 : f32}
  dnn.lrn ins(%x : memref<1x4x8x8xf32>) outs(%lrn : memref<1x4x8x8xf32>) {size = 3 : i64, alpha = 2.000000e-04 : f32}
// CHECK-NEXT: dnn.reduce ins(%x : memref<1x4x8x8xf32>) outs(%mean : memref<1x4xf32>) {fn = "mean", axes = array<i64: 2, 3>, keepdims = 0 : i64}
  dnn.reduce ins(%x : memref<1x4x8x8xf32>) outs(%mean : memref<1x4xf32>) {fn = "mean", axes = array<i64: 2, 3>, keepdims = 0 : i64}
// CHECK-NEXT: dnn.arg_max ins(%x : memref<1x4x8x8xf32>) outs(%am : memref<1x8x8xi64>) {axis = 1 : i64, keepdims = 0 : i64}
  dnn.arg_max ins(%x : memref<1x4x8x8xf32>) outs(%am : memref<1x8x8xi64>) {axis = 1 : i64, keepdims = 0 : i64}
// CHECK-NEXT: dnn.concat ins(%x, %r : memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) outs(%cat : memref<1x8x8x8xf32>) {axis = 1 : i64}
  dnn.concat ins(%x, %r : memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) outs(%cat : memref<1x8x8x8xf32>) {axis = 1 : i64}
// CHECK-NEXT: dnn.slice ins(%x : memref<1x4x8x8xf32>) outs(%sl : memref<1x2x8x8xf32>) {starts = array<i64: 0>, ends = array<i64: 2>, axes = array<i64: 1>}
  dnn.slice ins(%x : memref<1x4x8x8xf32>) outs(%sl : memref<1x2x8x8xf32>) {starts = array<i64: 0>, ends = array<i64: 2>, axes = array<i64: 1>}
// CHECK-NEXT: dnn.transpose ins(%x : memref<1x4x8x8xf32>) outs(%tr : memref<1x8x8x4xf32>) {perm = array<i64: 0, 2, 3, 1>}
  dnn.transpose ins(%x : memref<1x4x8x8xf32>) outs(%tr : memref<1x8x8x4xf32>) {perm = array<i64: 0, 2, 3, 1>}
// CHECK-NEXT: dnn.gather ins(%x, %i : memref<1x4x8x8xf32>, memref<2xi64>) outs(%ga : memref<1x2x8x8xf32>) {axis = 1 : i64}
  dnn.gather ins(%x, %i : memref<1x4x8x8xf32>, memref<2xi64>) outs(%ga : memref<1x2x8x8xf32>) {axis = 1 : i64}
// CHECK-NEXT: dnn.gather_elements ins(%m, %mi : memref<8x8xf32>, memref<8x8xi64>) outs(%gae : memref<8x8xf32>) {axis = 1 : i64}
  dnn.gather_elements ins(%m, %mi : memref<8x8xf32>, memref<8x8xi64>) outs(%gae : memref<8x8xf32>) {axis = 1 : i64}
// CHECK-NEXT: dnn.gather_nd ins(%m, %nd : memref<8x8xf32>, memref<3x2xi64>) outs(%gnd : memref<3xf32>)
  dnn.gather_nd ins(%m, %nd : memref<8x8xf32>, memref<3x2xi64>) outs(%gnd : memref<3xf32>)
// CHECK-NEXT: dnn.expand ins(%v : memref<8xf32>) outs(%ex : memref<2x8xf32>)
  dnn.expand ins(%v : memref<8xf32>) outs(%ex : memref<2x8xf32>)
// CHECK-NEXT: dnn.tile ins(%m : memref<8x8xf32>) outs(%ti : memref<16x8xf32>) {repeats = array<i64: 2, 1>}
  dnn.tile ins(%m : memref<8x8xf32>) outs(%ti : memref<16x8xf32>) {repeats = array<i64: 2, 1>}
// CHECK-NEXT: dnn.pad ins(%m : memref<8x8xf32>) outs(%pad : memref<8x10xf32>) {pads = array<i64: 0, 1, 0, 1>, mode = "reflect"}
  dnn.pad ins(%m : memref<8x8xf32>) outs(%pad : memref<8x10xf32>) {pads = array<i64: 0, 1, 0, 1>, mode = "reflect"}
// CHECK-NEXT: dnn.resize ins(%x : memref<1x4x8x8xf32>) outs(%rs : memref<1x4x16x16xf32>) {mode = "linear", coordinate_transformation_mode = "asymmetric"}
  dnn.resize ins(%x : memref<1x4x8x8xf32>) outs(%rs : memref<1x4x16x16xf32>) {mode = "linear", coordinate_transformation_mode = "asymmetric"}
// CHECK-NEXT: dnn.range outs(%rg : memref<8xf32>) {start = 0.000000e+00 : f32, delta = 1.000000e+00 : f32}
  dnn.range outs(%rg : memref<8xf32>) {start = 0.000000e+00 : f32, delta = 1.000000e+00 : f32}
// CHECK-NEXT: dnn.split ins(%x : memref<1x4x8x8xf32>) outs(%lo, %hi : memref<1x2x8x8xf32>, memref<1x2x8x8xf32>) {axis = 1 : i64}
  dnn.split ins(%x : memref<1x4x8x8xf32>) outs(%lo, %hi : memref<1x2x8x8xf32>, memref<1x2x8x8xf32>) {axis = 1 : i64}
// CHECK-NEXT: dnn.sanitize outs(%x : memref<1x4x8x8xf32>) {action = "check", guard = 64 : i64, writer = "dnn.conv", buffer = "x"}
  dnn.sanitize outs(%x : memref<1x4x8x8xf32>) {action = "check", guard = 64 : i64, writer = "dnn.conv", buffer = "x"}
  func.return
}

// A property at its kernel's default is filled in when the op is created and
// left out when it is printed; any other value is printed.
// CHECK-LABEL: func.func @defaults_elided
func.func @defaults_elided(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %m: tensor<8x8xf32>) {
  // CHECK-NEXT: %c1 = dnn.conv ins(%x, %w : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) : tensor<1x4x6x6xf32>
  %c1 = dnn.conv ins(%x, %w : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) {group = 1 : i64} : tensor<1x4x6x6xf32>
  // CHECK-NEXT: %c2 = dnn.conv ins(%x, %w : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) {group = 2 : i64} : tensor<1x4x6x6xf32>
  %c2 = dnn.conv ins(%x, %w : tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) {group = 2 : i64} : tensor<1x4x6x6xf32>
  // CHECK-NEXT: %g = dnn.gemm ins(%m, %m : tensor<8x8xf32>, tensor<8x8xf32>) {trans_a = 1 : i64} : tensor<8x8xf32>
  %g = dnn.gemm ins(%m, %m : tensor<8x8xf32>, tensor<8x8xf32>) {alpha = 1.0 : f32, beta = 1.0 : f32, trans_a = 1 : i64, trans_b = 0 : i64} : tensor<8x8xf32>
  // CHECK-NEXT: %ln = dnn.layer_norm ins(%m, %m : tensor<8x8xf32>, tensor<8x8xf32>) : tensor<8x8xf32>
  %ln = dnn.layer_norm ins(%m, %m : tensor<8x8xf32>, tensor<8x8xf32>) {axis = -1 : i64, epsilon = 1.0e-05 : f32} : tensor<8x8xf32>
  func.return
}

// A symbolic plan's memory ops: the pool's size, each buffer's offset and
// its dynamic dimensions are SSA indices (computed from the symbols).
// CHECK-LABEL: func.func @symbolic_memory
func.func @symbolic_memory(%sequence: index, %size: index, %offset: index) {
  // CHECK-NEXT: %pool = dnn.symbolic_pool %size : memref<?xi8>
  %pool = dnn.symbolic_pool %size : memref<?xi8>
  // CHECK-NEXT: %q = dnn.symbolic_view %pool[%offset] (%sequence) : memref<?xi8> -> memref<1x?x8xf32>
  %q = dnn.symbolic_view %pool[%offset] (%sequence) : memref<?xi8> -> memref<1x?x8xf32>
  // CHECK-NEXT: %s = dnn.symbolic_view %pool[%offset] (%sequence, %sequence) : memref<?xi8> -> memref<1x?x?xf32>
  %s = dnn.symbolic_view %pool[%offset] (%sequence, %sequence) : memref<?xi8> -> memref<1x?x?xf32>
  // CHECK-NEXT: %w = dnn.symbolic_view %pool[%offset] () : memref<?xi8> -> memref<4xf32>
  %w = dnn.symbolic_view %pool[%offset] () : memref<?xi8> -> memref<4xf32>
  // CHECK-NEXT: dnn.pool_release %pool : memref<?xi8>
  dnn.pool_release %pool : memref<?xi8>
  func.return
}

// RUN: pyocc-opt %s --split-input-file --parsing-diagnostics | filecheck %s
// The compute ops' custom syntax (ins(...) outs(...)) refuses malformed text
// with a message naming the op and what is wrong.

func.func @unknown_named_operand(%x: tensor<1x1x2x2xf32>, %w: tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32> {
  %0 = dnn.conv ins(%x, %w, bais %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
// CHECK: dnn.conv: ins(...) has no optional operand 'bais' (expected one of ['bias', 'residual'])

// -----

func.func @missing_operand(%x: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %0 = dnn.conv ins(%x : tensor<1x1x2x2xf32>) : tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
// CHECK: dnn.conv: ins(...) lacks the operands ['w']

// -----

func.func @too_many_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = dnn.unary ins(%x, %x : tensor<4xf32>, tensor<4xf32>) {fn = "relu"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: dnn.unary: too many operands in ins(...); it takes ['x'] and the named []

// -----

func.func @types_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = dnn.binary ins(%x, %x : tensor<4xf32>) {fn = "add"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: dnn.binary: ins(...) has 2 operands and 1 types; give one type per operand

// -----

func.func @list_for_single(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = dnn.unary ins([%x] : tensor<4xf32>) {fn = "relu"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: dnn.unary: operand 'x' in ins(...) is a single value, not a list

// -----

func.func @named_twice(%x: tensor<1x1x2x2xf32>, %w: tensor<2x1x1x1xf32>, %b: tensor<2xf32>) -> tensor<1x2x2x2xf32> {
  %0 = dnn.conv ins(%x, %w, bias %b, bias %b : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>, tensor<2xf32>) : tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
// CHECK: dnn.conv: ins(...) names 'bias' twice

// -----

func.func @no_ins(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = dnn.unary {fn = "relu"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: Expected 'ins' (dnn.unary lists its inputs as ins(values : types))

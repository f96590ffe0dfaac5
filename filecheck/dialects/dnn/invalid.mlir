// RUN: pyocc-opt %s --split-input-file --verify-diagnostics | filecheck %s
// One case per verifier message of pyocc/dialects/dnn/ops.py: each names the
// op and the rule it enforces. (The traits' own checks, Targets,
// WritesInPlace and AliasesOperand, are about op definitions, not IR:
// tests/dialects/test_dnn_op_facts.py.) Parse errors: syntax_invalid.mlir.

func.func @both_forms(%x: tensor<4xf32>, %o: memref<4xf32>) -> tensor<4xf32> {
  %0 = "dnn.unary"(%x, %o) <{fn = "relu", operandSegmentSizes = array<i32: 1, 1>}> : (tensor<4xf32>, memref<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: dnn.unary: an op has either results (tensor form) or destination buffers (buffer form), exactly one of the two

// -----

func.func @neither_form(%x: memref<4xf32>) {
  dnn.unary ins(%x : memref<4xf32>) {fn = "relu"}
  func.return
}
// CHECK: dnn.unary: an op has either results (tensor form) or destination buffers (buffer form), exactly one of the two

// -----

func.func @buffer_in_tensor_form(%x: memref<4xf32>) -> tensor<4xf32> {
  %0 = dnn.unary ins(%x : memref<4xf32>) {fn = "relu"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: dnn.unary: in tensor form every input must be a tensor, got memref<4xf32>

// -----

func.func @tensor_in_buffer_form(%x: tensor<4xf32>, %o: memref<4xf32>) {
  dnn.unary ins(%x : tensor<4xf32>) outs(%o : memref<4xf32>) {fn = "relu"}
  func.return
}
// CHECK: dnn.unary: in buffer form every input must be a memref, got tensor<4xf32>

// -----

func.func @conv_activation(%x: tensor<1x1x2x2xf32>, %w: tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32> {
  %0 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) {activation = "exp"} : tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
// CHECK: dnn.conv: activation 'exp' cannot be fused; expected one of ['clip', 'hard_sigmoid', 'hard_swish', 'leaky_relu', 'relu', 'sigmoid', 'tanh']

// -----

func.func @conv_residual(%x: tensor<1x1x2x2xf32>, %w: tensor<2x1x1x1xf32>, %r: tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %0 = dnn.conv ins(%x, %w, residual %r : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>, tensor<1x1x2x2xf32>) : tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
// CHECK: dnn.conv: the residual tensor<1x1x2x2xf32> must have the output's shape [1, 2, 2, 2]

// -----

func.func @conv_bias(%x: tensor<1x1x2x2xf32>, %w: tensor<2x1x1x1xf32>, %b: tensor<3xf32>) -> tensor<1x2x2x2xf32> {
  %0 = dnn.conv ins(%x, %w, bias %b : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>, tensor<3xf32>) : tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
// CHECK: dnn.conv: the bias tensor<3xf32> must hold one value per output channel

// -----

func.func @conv_shuffle(%x: tensor<1x1x2x2xf32>, %w: tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32> {
  %0 = dnn.conv ins(%x, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) {shuffle = 3 : i64} : tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
// CHECK: dnn.conv: shuffle 3 needs output channels divisible by it (2) and no residual

// -----

func.func @preact_scale(%x: tensor<1x2x2x2xf32>, %s: tensor<3xf32>, %w: tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32> {
  %0 = dnn.preact_conv ins(%x, %s, %s, %w : tensor<1x2x2x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x2x1x1xf32>) : tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
// CHECK: dnn.preact_conv: pre_scale and pre_shift must be vectors of the input's 2 channels, got tensor<3xf32>

// -----

func.func @preact_activation(%x: tensor<1x2x2x2xf32>, %s: tensor<2xf32>, %w: tensor<2x2x1x1xf32>) -> tensor<1x2x2x2xf32> {
  %0 = dnn.preact_conv ins(%x, %s, %s, %w : tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x2x1x1xf32>) {pre_activation = "tanh"} : tensor<1x2x2x2xf32>
  func.return %0 : tensor<1x2x2x2xf32>
}
// CHECK: dnn.preact_conv: pre_activation must be relu or absent, got 'tanh'

// -----

func.func @gemm_activation(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %0 = dnn.gemm ins(%a, %a : tensor<2x2xf32>, tensor<2x2xf32>) {activation = "softmax"} : tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}
// CHECK: dnn.gemm: activation 'softmax' cannot be fused; expected one of

// -----

func.func @binary_activation(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = dnn.binary ins(%a, %a : tensor<4xf32>, tensor<4xf32>) {fn = "add", activation = "exp"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: dnn.binary: activation 'exp' cannot be fused; expected one of

// -----

func.func @binary_activation_after_comparison(%a: tensor<4xf32>) -> tensor<4xi1> {
  %0 = dnn.binary ins(%a, %a : tensor<4xf32>, tensor<4xf32>) {fn = "less", activation = "relu"} : tensor<4xi1>
  func.return %0 : tensor<4xi1>
}
// CHECK: dnn.binary: only ['add', 'div', 'max', 'min', 'mul', 'sub'] take a fused activation, not 'less'

// -----

func.func @sanitize_action(%b: memref<4xf32>) {
  dnn.sanitize outs(%b : memref<4xf32>) {action = "scrub", guard = 0 : i64}
  func.return
}
// CHECK: dnn.sanitize: action must be 'poison' or 'check', got 'scrub'

// -----

func.func @weight_value_and_splat() -> tensor<2xf32> {
  %0 = "dnn.weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>, splat = dense<0.0> : tensor<f32>}> : () -> tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
// CHECK: dnn.weight: give exactly one of `value` and `splat`

// -----

func.func @weight_shape() -> tensor<3xf32> {
  %0 = "dnn.weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK: dnn.weight: value shape differs from the result shape

// -----

func.func @view_kinds(%x: tensor<4xf32>) -> memref<4xf32> {
  %0 = "dnn.view"(%x) : (tensor<4xf32>) -> memref<4xf32>
  func.return %0 : memref<4xf32>
}
// CHECK: dnn.view: operand and result must both be tensors or both memrefs

// -----

func.func @view_bytes(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  %0 = "dnn.view"(%x) : (tensor<4xf32>) -> tensor<2x4xf32>
  func.return %0 : tensor<2x4xf32>
}
// CHECK: dnn.view: a view keeps the byte size (16 != 32)

// -----

func.func @subview_outside(%x: memref<4xf32>) -> memref<2xf32> {
  %0 = dnn.subview %x {offset = 12 : i64} : memref<4xf32> -> memref<2xf32>
  func.return %0 : memref<2xf32>
}
// CHECK: dnn.subview: bytes [12, 20) fall outside the 16-byte source

// -----

func.func @malloc_size() -> memref<4xf32> {
  %0 = dnn.malloc {size = 8 : i64} : memref<4xf32>
  func.return %0 : memref<4xf32>
}
// CHECK: dnn.malloc: size 8 is smaller than the 16 bytes of memref<4xf32>

// -----

func.func @malloc_alignment() -> memref<4xf32> {
  %0 = dnn.malloc {size = 16 : i64, alignment = 0 : i64} : memref<4xf32>
  func.return %0 : memref<4xf32>
}
// CHECK: dnn.malloc: alignment must be positive

// -----

func.func @malloc_min_size() -> memref<4xf32> {
  %0 = dnn.malloc {size = 16 : i64, min_size = 32 : i64} : memref<4xf32>
  func.return %0 : memref<4xf32>
}
// CHECK: dnn.malloc: min_size 32 must be within 1..size (16)

// -----

func.func @memcpy_kind(%a: memref<4xf32>, %b: memref<4xf32>) {
  "dnn.memcpy"(%a, %b) <{kind = "sideways", size = 16 : i64}> : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}
// CHECK: dnn.memcpy: unknown kind 'sideways'

// -----

func.func @memcpy_sizes(%a: memref<4xf32>, %b: memref<2xf32>) {
  "dnn.memcpy"(%a, %b) <{kind = "host_to_host", size = 16 : i64}> : (memref<4xf32>, memref<2xf32>) -> ()
  func.return
}
// CHECK: dnn.memcpy: source and target sizes differ

// -----

func.func @pool_shape() {
  %0 = dnn.pool_init {size = 64 : i64} : memref<32xi8>
  dnn.pool_release %0 : memref<32xi8>
  func.return
}
// CHECK: dnn.pool_init: the pool must be a memref<SIZExi8> of `size` bytes

// -----

func.func @symbolic_pool_static(%size: index) {
  %0 = dnn.symbolic_pool %size : memref<64xi8>
  dnn.pool_release %0 : memref<64xi8>
  func.return
}
// CHECK: dnn.symbolic_pool: the pool must be a memref<?xi8>, not memref<64xi8>

// -----

func.func @symbolic_view_static_pool(%p: memref<64xi8>, %offset: index, %s: index) -> memref<?x8xf32> {
  %0 = dnn.symbolic_view %p[%offset] (%s) : memref<64xi8> -> memref<?x8xf32>
  func.return %0 : memref<?x8xf32>
}
// CHECK: dnn.symbolic_view: the pool must be a memref<?xi8>, not memref<64xi8>

// -----

func.func @symbolic_view_dims(%p: memref<?xi8>, %offset: index, %s: index) -> memref<?x?xf32> {
  %0 = dnn.symbolic_view %p[%offset] (%s) : memref<?xi8> -> memref<?x?xf32>
  func.return %0 : memref<?x?xf32>
}
// CHECK: dnn.symbolic_view: memref<?x?xf32> has 2 dynamic dimensions but 1 dims are given

// -----

func.func @mem_offset_negative(%p: memref<64xi8>) -> memref<4xf32> {
  %0 = dnn.mem_offset %p {offset = -16 : i64, size = 16 : i64} : memref<64xi8> -> memref<4xf32>
  func.return %0 : memref<4xf32>
}
// CHECK: dnn.mem_offset: offset -16 is negative

// -----

func.func @mem_offset_outside(%p: memref<64xi8>) -> memref<4xf32> {
  %0 = dnn.mem_offset %p {offset = 56 : i64, size = 16 : i64} : memref<64xi8> -> memref<4xf32>
  func.return %0 : memref<4xf32>
}
// CHECK: dnn.mem_offset: bytes [56, 72) fall outside the 64-byte pool

// -----

func.func @mem_offset_size(%p: memref<64xi8>) -> memref<4xf32> {
  %0 = dnn.mem_offset %p {offset = 0 : i64, size = 8 : i64} : memref<64xi8> -> memref<4xf32>
  func.return %0 : memref<4xf32>
}
// CHECK: dnn.mem_offset: size 8 is smaller than the 16 bytes of memref<4xf32>

// -----

func.func @element_size() -> memref<4xindex> {
  %0 = dnn.malloc {size = 32 : i64} : memref<4xindex>
  func.return %0 : memref<4xindex>
}
// CHECK: element type index has no known size

// -----

func.func @insert_slice_axis(%d: tensor<1x2x8xf32>, %x: tensor<1x2x4xf32>) -> tensor<1x2x8xf32> {
  %0 = dnn.insert_slice ins(%d, %x : tensor<1x2x8xf32>, tensor<1x2x4xf32>) {axis = 3 : i64, offset = 0 : i64} : tensor<1x2x8xf32>
  func.return %0 : tensor<1x2x8xf32>
}
// CHECK: dnn.insert_slice: axis 3 must name a dim of both tensor<1x2x8xf32> and tensor<1x2x4xf32>

// -----

func.func @insert_slice_other_dims(%d: tensor<1x2x8xf32>, %x: tensor<1x3x4xf32>) -> tensor<1x2x8xf32> {
  %0 = dnn.insert_slice ins(%d, %x : tensor<1x2x8xf32>, tensor<1x3x4xf32>) {axis = 2 : i64, offset = 0 : i64} : tensor<1x2x8xf32>
  func.return %0 : tensor<1x2x8xf32>
}
// CHECK: dnn.insert_slice: tensor<1x3x4xf32> must match tensor<1x2x8xf32> except along axis 2

// -----

func.func @insert_slice_rows(%d: tensor<1x2x8xf32>, %x: tensor<1x2x4xf32>) -> tensor<1x2x8xf32> {
  %0 = dnn.insert_slice ins(%d, %x : tensor<1x2x8xf32>, tensor<1x2x4xf32>) {axis = 2 : i64, offset = 6 : i64} : tensor<1x2x8xf32>
  func.return %0 : tensor<1x2x8xf32>
}
// CHECK: dnn.insert_slice: rows [6, 10) fall outside the 8 rows of axis 2

// -----

func.func @memcpy_chunks_overrun(%a: memref<1x2x4x3xf32>, %b: memref<1x2x2x3xf32>) {
  "dnn.memcpy"(%a, %b) <{kind = "host_to_host", size = 24 : i64, count = 2 : i64, source_stride = 48 : i64, target_stride = 48 : i64}> : (memref<1x2x4x3xf32>, memref<1x2x2x3xf32>) -> ()
  func.return
}
// CHECK: dnn.memcpy: 2 chunks of 24 bytes, 48 bytes apart, do not fit the 48-byte target without overlap

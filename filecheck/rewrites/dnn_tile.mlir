// RUN: pyocc-opt %s --split-input-file -p "dnn-tile{region=3 patches=2}" | filecheck %s
// RUN: pyocc-opt %s --split-input-file -p "dnn-tile{region=3 patches=4}" | filecheck %s --check-prefix=P4
// RUN: pyocc-opt %s --split-input-file -p "dnn-tile{region=3 patches=2},dnn-insert-memory-ops{mode=lazy},dnn-coalesce" | filecheck %s --check-prefix=BUF
// RUN: pyocc-opt %s --split-input-file -p "dnn-tile{region=5 patches=2}" | filecheck %s --check-prefix=BR
// RUN: pyocc-opt %s --split-input-file -p "dnn-tile{region=5 patches=2 halo=cache}" | filecheck %s --check-prefix=CACHE
// RUN: not pyocc-opt %s -p "dnn-tile{halo=keep}" 2>&1 | filecheck %s --check-prefix=HALO
// RUN: not pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops,dnn-tile" 2>&1 | filecheck %s --check-prefix=FORM

// conv(3x3, pad 1) -> relu -> max_pool(2x2, stride 2) on 8 rows, in 2
// patches of 2 output rows: patch 0 needs pool rows [0, 4), conv rows
// [0, 4), input rows [0, 5) (one halo row below, the top pad kept); patch 1
// needs input rows [3, 8) (one halo row above, the bottom pad kept).
// CHECK-LABEL: func.func @stem
// CHECK:      %[[X0:.*]] = dnn.slice ins(%x : {{.*}}) {starts = array<i64: 0>, ends = array<i64: 5>, axes = array<i64: 2>}
// CHECK-NEXT: %[[C0:.*]] = dnn.conv ins(%[[X0]], %w : {{.*}}) {pads = array<i64: 1, 1, 0, 1>} : tensor<1x2x4x8xf32>
// CHECK-NEXT: %[[R0:.*]] = dnn.unary ins(%[[C0]]
// CHECK-NEXT: %[[P0:.*]] = dnn.max_pool ins(%[[R0]] {{.*}} : tensor<1x2x2x4xf32>
// CHECK-NEXT: %[[E:.*]] = dnn.empty : tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[I0:.*]] = dnn.insert_slice ins(%[[E]], %[[P0]] : {{.*}}) {axis = 2 : i64, offset = 0 : i64}
// CHECK-NEXT: %[[X1:.*]] = dnn.slice ins(%x : {{.*}}) {starts = array<i64: 3>, ends = array<i64: 8>, axes = array<i64: 2>}
// CHECK-NEXT: %[[C1:.*]] = dnn.conv ins(%[[X1]], %w : {{.*}}) {pads = array<i64: 0, 1, 1, 1>}
// CHECK-NEXT: %[[R1:.*]] = dnn.unary ins(%[[C1]]
// CHECK-NEXT: %[[P1:.*]] = dnn.max_pool ins(%[[R1]]
// CHECK-NEXT: %[[Y:.*]] = dnn.insert_slice ins(%[[I0]], %[[P1]] : {{.*}}) {axis = 2 : i64, offset = 2 : i64}
// CHECK-NEXT: func.return %[[Y]]
// Four patches of one output row: the middle ones have no pads at all.
// P4-LABEL: func.func @stem
// P4:      dnn.slice ins(%x : {{.*}}) {starts = array<i64: 0>, ends = array<i64: 3>
// P4-NEXT: dnn.conv ins({{.*}}) {pads = array<i64: 1, 1, 0, 1>}
// P4:      dnn.slice ins(%x : {{.*}}) {starts = array<i64: 1>, ends = array<i64: 5>
// P4-NEXT: dnn.conv ins({{.*}}) {pads = array<i64: 0, 1, 0, 1>}
// P4:      dnn.insert_slice ins({{.*}}) {axis = 2 : i64, offset = 1 : i64}
// P4:      dnn.slice ins(%x : {{.*}}) {starts = array<i64: 3>, ends = array<i64: 7>
// P4-NEXT: dnn.conv ins({{.*}}) {pads = array<i64: 0, 1, 0, 1>}
// P4:      dnn.slice ins(%x : {{.*}}) {starts = array<i64: 5>, ends = array<i64: 8>
// P4-NEXT: dnn.conv ins({{.*}}) {pads = array<i64: 0, 1, 1, 1>}
// P4:      dnn.insert_slice ins({{.*}}) {axis = 2 : i64, offset = 3 : i64}
// P4-NEXT: func.return
// In buffer form every insert_slice writes over its dest: the region output
// is one buffer (here the graph output's, after the last copy into it).
// BUF-LABEL: func.func @stem
// BUF:      %[[D:.*]] = dnn.malloc {size = 128 : i64} : memref<1x2x4x4xf32>
// BUF-NEXT: dnn.empty outs(%[[D]] :
// BUF-NEXT: dnn.insert_slice ins(%[[D]], %{{.*}} : {{.*}}) outs(%[[D]] :
// BUF:      dnn.insert_slice ins(%[[D]], %{{.*}} : {{.*}}) outs(%p_out :
// BUF-NOT:  dnn.malloc {size = 128
// BUF:      func.return
// FORM: dnn-tile needs tensor-form dnn, which convert-onnx-to-dnn produces, but @stem is in buffer-form dnn (dnn.malloc/dnn.dealloc); run dnn-tile before dnn-insert-memory-ops
func.func @stem(%x: tensor<1x1x8x8xf32>) -> tensor<1x2x4x4xf32> {
  %w = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x1x8x8xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %r = dnn.unary ins(%c : tensor<1x2x8x8xf32>) {fn = "relu"} : tensor<1x2x8x8xf32>
  %p = dnn.max_pool ins(%r : tensor<1x2x8x8xf32>) {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<1x2x4x4xf32>
  func.return %p : tensor<1x2x4x4xf32>
}

// -----

// Negative: a softmax (not row-local) ends the chain after the conv, so a
// region of 3 ops does not exist: nothing is tiled.
// CHECK-LABEL: func.func @stem_not_spatial
// CHECK-NOT: dnn.slice
// CHECK-NOT: dnn.insert_slice
// CHECK: func.return
func.func @stem_not_spatial(%x: tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %w = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x1x8x8xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %s = dnn.softmax ins(%c : tensor<1x2x8x8xf32>) {axis = 1 : i64} : tensor<1x2x8x8xf32>
  %r = dnn.unary ins(%s : tensor<1x2x8x8xf32>) {fn = "relu"} : tensor<1x2x8x8xf32>
  func.return %r : tensor<1x2x8x8xf32>
}

// -----

// Negative: the conv's result has a second user (a residual add, the
// fourth op), so the first three ops are no region: nothing is tiled.
// CHECK-LABEL: func.func @stem_second_user
// CHECK-NOT: dnn.slice
// CHECK-NOT: dnn.insert_slice
// CHECK: func.return
func.func @stem_second_user(%x: tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32> {
  %w = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x1x8x8xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %r = dnn.unary ins(%c : tensor<1x2x8x8xf32>) {fn = "relu"} : tensor<1x2x8x8xf32>
  %t = dnn.unary ins(%r : tensor<1x2x8x8xf32>) {fn = "tanh"} : tensor<1x2x8x8xf32>
  %a = dnn.binary ins(%t, %c : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) {fn = "add"} : tensor<1x2x8x8xf32>
  func.return %a : tensor<1x2x8x8xf32>
}

// -----

// A branching region: the conv's result feeds a pool, a residual add and a
// concat; one input, one output. Each patch computes every branch, the
// conv over the union of the rows its readers need (the pool's halo row),
// and the add and the concat read one shared slice of the rows they need.
// BR-LABEL: func.func @stem_branch
// BR:      %[[X0:.*]] = dnn.slice ins(%x : {{.*}}) {starts = array<i64: 0>, ends = array<i64: 6>, axes = array<i64: 2>}
// BR-NEXT: %[[C0:.*]] = dnn.conv ins(%[[X0]], %w : {{.*}}) {pads = array<i64: 1, 1, 0, 1>} : tensor<1x2x5x8xf32>
// BR-NEXT: %[[R0:.*]] = dnn.max_pool ins(%[[C0]] : {{.*}}) {{.*}}pads = array<i64: 1, 0, 0, 0>} : tensor<1x2x4x8xf32>
// BR-NEXT: %[[S0:.*]] = dnn.slice ins(%[[C0]] : {{.*}}) {starts = array<i64: 0>, ends = array<i64: 4>, axes = array<i64: 2>}
// BR-NEXT: %[[A0:.*]] = dnn.binary ins(%[[R0]], %[[S0]] : {{.*}}) {fn = "add"}
// BR-NEXT: %[[K0:.*]] = dnn.concat ins(%[[A0]], %[[S0]] : {{.*}}) {axis = 1 : i64} : tensor<1x4x4x8xf32>
// BR-NEXT: %[[P0:.*]] = dnn.max_pool ins(%[[K0]] : {{.*}} : tensor<1x4x2x8xf32>
// BR-NEXT: %[[E:.*]] = dnn.empty : tensor<1x4x4x8xf32>
// BR-NEXT: %[[I0:.*]] = dnn.insert_slice ins(%[[E]], %[[P0]] : {{.*}}) {axis = 2 : i64, offset = 0 : i64}
// BR-NEXT: %[[X1:.*]] = dnn.slice ins(%x : {{.*}}) {starts = array<i64: 2>, ends = array<i64: 8>, axes = array<i64: 2>}
// BR-NEXT: %[[C1:.*]] = dnn.conv ins(%[[X1]], %w : {{.*}}) {pads = array<i64: 0, 1, 1, 1>} : tensor<1x2x5x8xf32>
// BR:      dnn.slice ins(%[[C1]] : {{.*}}) {starts = array<i64: 1>, ends = array<i64: 5>, axes = array<i64: 2>}
// BR-NOT:  dnn.slice
// BR:      dnn.insert_slice {{.*}} {axis = 2 : i64, offset = 2 : i64}
// BR-NEXT: func.return
// Halos cached: patch 1 computes only the conv rows no patch did, [5, 8),
// from input rows [4, 8), and joins them to the cached rows [3, 5) that
// patch 0 left for the pool's halo; nothing is computed twice.
// CACHE-LABEL: func.func @stem_branch
// CACHE:      %[[C0:.*]] = dnn.conv ins({{.*}}) {pads = array<i64: 1, 1, 0, 1>} : tensor<1x2x5x8xf32>
// CACHE-NEXT: %[[K:.*]] = dnn.slice ins(%[[C0]] : {{.*}}) {starts = array<i64: 3>, ends = array<i64: 5>, axes = array<i64: 2>}
// CACHE:      dnn.slice ins(%x : {{.*}}) {starts = array<i64: 4>, ends = array<i64: 8>, axes = array<i64: 2>}
// CACHE-NEXT: %[[C1:.*]] = dnn.conv ins({{.*}}) {pads = array<i64: 0, 1, 1, 1>} : tensor<1x2x3x8xf32>
// CACHE-NEXT: %[[J:.*]] = dnn.concat ins(%[[K]], %[[C1]] : {{.*}}) {axis = 2 : i64} : tensor<1x2x5x8xf32>
// CACHE-NEXT: dnn.max_pool ins(%[[J]] : {{.*}}) {{.*}}pads = array<i64: 0, 0, 1, 0>} : tensor<1x2x4x8xf32>
// CACHE-NOT:  dnn.conv
// CACHE:      func.return
// HALO: dnn-tile: halo must be recompute or cache, got 'keep'
// Negative: three ops are no region: the conv's result is still read by the
// concat after them (two values would leave it).
// CHECK-LABEL: func.func @stem_branch
// CHECK-NOT: dnn.slice
// CHECK-NOT: dnn.insert_slice
// CHECK: func.return
func.func @stem_branch(%x: tensor<1x1x8x8xf32>) -> tensor<1x4x4x8xf32> {
  %w = "dnn.weight"() <{splat = dense<1.000000e+00> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %c = dnn.conv ins(%x, %w : tensor<1x1x8x8xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x8x8xf32>
  %r = dnn.max_pool ins(%c : tensor<1x2x8x8xf32>) {kernel_shape = array<i64: 3, 1>, pads = array<i64: 1, 0, 1, 0>} : tensor<1x2x8x8xf32>
  %a = dnn.binary ins(%r, %c : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) {fn = "add"} : tensor<1x2x8x8xf32>
  %k = dnn.concat ins(%a, %c : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) {axis = 1 : i64} : tensor<1x4x8x8xf32>
  %p = dnn.max_pool ins(%k : tensor<1x4x8x8xf32>) {kernel_shape = array<i64: 2, 1>, strides = array<i64: 2, 1>} : tensor<1x4x4x8xf32>
  func.return %p : tensor<1x4x4x8xf32>
}

// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy scratch=true},dnn-memory-pool" | filecheck %s
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy scratch=true},dnn-memory-pool{fit_scratch=false}" | filecheck %s --check-prefix=FULL
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy scratch=true},dnn-memory-pool{threads=2}" | filecheck %s --check-prefix=THREADS
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops{mode=lazy scratch=true},dnn-memory-pool{threads=2 fit_scratch=false}" | filecheck %s --check-prefix=WHOLE

// dnn-memory-pool sizes a kernel's scratch (a malloc with min_size) to the
// pool's slack at its op. The pool's peak (6144 bytes: %a, %b and %s) is at
// the add; at the convolution only %s and %c (3072 bytes) are live, so its
// im2col block (18432 bytes wanted, one row 1152) takes 3072 free bytes
// (two rows and a half) and the pool does not grow.
// CHECK-LABEL: func.func @scratch_in_the_slack
// CHECK: %mempool = dnn.pool_init {size = 6144 : i64} : memref<6144xi8>
// CHECK: %c_scratch = dnn.mem_offset %mempool {offset = {{[0-9]+}} : i64, size = 3072 : i64} : memref<6144xi8> -> memref<3072xi8>
// CHECK-NEXT: dnn.conv ins(%s, %w : {{.*}}) outs(%c, workspace %c_scratch : memref<1x1x16x16xf32>, memref<3072xi8>)
// Negative: fit_scratch=false plans the whole block, and the pool grows.
// FULL-LABEL: func.func @scratch_in_the_slack
// FULL: %mempool = dnn.pool_init {size = 21504 : i64}
// FULL: %c_scratch = dnn.mem_offset %mempool {offset = {{[0-9]+}} : i64, size = 18432 : i64}
// On two threads (threads=2): the fitted 3072 bytes are a block of 5 rows
// of one channel, 16 x 80 x 9 multiply-adds, far too few to split, in 4
// blocks: the convolution gets one copy per thread (the op says how many),
// placed again where it fits (not in the 3072 free bytes: the pool grows).
// THREADS-LABEL: func.func @scratch_in_the_slack
// THREADS: %mempool = dnn.pool_init {size = 12288 : i64}
// THREADS: %c_scratch = dnn.mem_offset %mempool {offset = 6144 : i64, size = 6144 : i64}
// THREADS-NEXT: dnn.conv {{.*}} outs(%c, workspace %c_scratch : memref<1x1x16x16xf32>, memref<6144xi8>) {pads = array<i64: 1, 1, 1, 1>, scratch_copies = 2 : i64}
// Negative: whole blocks (fit_scratch=false) hold the image: one block, no copies.
// WHOLE-LABEL: func.func @scratch_in_the_slack
// WHOLE: %mempool = dnn.pool_init {size = 21504 : i64}
// WHOLE-NOT: scratch_copies
// WHOLE: dnn.conv {{.*}} outs(%c, workspace %c_scratch : memref<1x1x16x16xf32>, memref<18432xi8>) {pads = array<i64: 1, 1, 1, 1>}
// CHECK-NOT: scratch_copies
func.func @scratch_in_the_slack(%x: tensor<1x2x16x16xf32>, %w: tensor<1x2x3x3xf32>) -> tensor<1x1x16x16xf32> {
  %a = dnn.unary ins(%x : tensor<1x2x16x16xf32>) {fn = "exp"} : tensor<1x2x16x16xf32>
  %b = dnn.unary ins(%a : tensor<1x2x16x16xf32>) {fn = "exp"} : tensor<1x2x16x16xf32>
  %s = dnn.binary ins(%a, %b : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) {fn = "add"} : tensor<1x2x16x16xf32>
  %c = dnn.conv ins(%s, %w : tensor<1x2x16x16xf32>, tensor<1x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x1x16x16xf32>
  %r = dnn.unary ins(%c : tensor<1x1x16x16xf32>) {fn = "relu"} : tensor<1x1x16x16xf32>
  func.return %r : tensor<1x1x16x16xf32>
}

// -----

// No slack: the convolution is the peak (its input is the graph's), so its
// scratch is one output row's columns (2*9*16*4 = 1152 bytes) above the
// 1024 bytes of %c: the pool grows by the least block the kernel can run.
// CHECK-LABEL: func.func @scratch_at_the_peak
// CHECK: %mempool = dnn.pool_init {size = 2176 : i64}
// CHECK: %c_scratch = dnn.mem_offset %mempool {offset = 1024 : i64, size = 1152 : i64} : memref<2176xi8> -> memref<1152xi8>
// FULL-LABEL: func.func @scratch_at_the_peak
// FULL: %mempool = dnn.pool_init {size = 19456 : i64}
// Two threads: two rows' block a copy, each copy above %c.
// THREADS-LABEL: func.func @scratch_at_the_peak
// THREADS: %mempool = dnn.pool_init {size = 3328 : i64}
// THREADS: %c_scratch = dnn.mem_offset %mempool {offset = 1024 : i64, size = 2304 : i64}
// THREADS-NEXT: dnn.conv {{.*}} {pads = array<i64: 1, 1, 1, 1>, scratch_copies = 2 : i64}
// CHECK-NOT: scratch_copies
func.func @scratch_at_the_peak(%x: tensor<1x2x16x16xf32>, %w: tensor<1x2x3x3xf32>) -> tensor<1x1x16x16xf32> {
  %c = dnn.conv ins(%x, %w : tensor<1x2x16x16xf32>, tensor<1x2x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x1x16x16xf32>
  %r = dnn.unary ins(%c : tensor<1x1x16x16xf32>) {fn = "relu"} : tensor<1x1x16x16xf32>
  func.return %r : tensor<1x1x16x16xf32>
}

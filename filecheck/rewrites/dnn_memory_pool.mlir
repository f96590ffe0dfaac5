// RUN: pyocc-opt %s -p "dnn-insert-memory-ops{mode=lazy},dnn-memory-pool{alignment=64}" | filecheck %s
// RUN: not pyocc-opt %s -p "dnn-insert-memory-ops,dnn-memory-pool{planner=magic}" 2>&1 | filecheck %s --check-prefix=BAD

// A chain of three: the first and third buffers are never live together, so
// they share offset 0 and the pool holds two buffers, not three.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT: %[[P:.*]] = dnn.pool_init {size = 8192 : i64} : memref<8192xi8>
// CHECK-NEXT: %[[A:.*]] = dnn.mem_offset %[[P]] {offset = [[OA:[0-9]+]] : i64, size = 4096 : i64}
// CHECK: %[[B:.*]] = dnn.mem_offset %[[P]] {offset = [[OB:[0-9]+]] : i64, size = 4096 : i64}
// CHECK: %[[C:.*]] = dnn.mem_offset %[[P]] {offset = [[OA]] : i64, size = 4096 : i64}
// CHECK-NOT: dnn.malloc
// CHECK-NOT: dnn.dealloc
// CHECK: dnn.pool_release %[[P]]
// CHECK-NEXT: func.return
// BAD: dnn-memory-pool: unknown planner 'magic'
func.func @chain(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "relu"} : tensor<1024xf32>
  %b = dnn.unary ins(%a : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %c = dnn.unary ins(%b : tensor<1024xf32>) {fn = "tanh"} : tensor<1024xf32>
  %d = dnn.unary ins(%c : tensor<1024xf32>) {fn = "neg"} : tensor<1024xf32>
  func.return %d : tensor<1024xf32>
}

// Boolean masks are aligned to their one-byte elements, not to the pool's
// 64: the two live with %a pack right above it; %k (%m and %n alive) at the
// next 16 bytes, and %f, a 16-byte float, at 16, where %m and %n were.
// CHECK-LABEL: func.func @masks_pack
// CHECK-NEXT: %[[P:.*]] = dnn.pool_init {size = 36 : i64}
// CHECK-NEXT: %a = dnn.mem_offset %[[P]] {offset = 0 : i64, size = 16 : i64}
// CHECK: %m = dnn.mem_offset %[[P]] {offset = 16 : i64, size = 4 : i64} : memref<36xi8> -> memref<4xi1>
// CHECK: %n = dnn.mem_offset %[[P]] {offset = 20 : i64, size = 4 : i64} : memref<36xi8> -> memref<4xi1>
// CHECK: %k = dnn.mem_offset %[[P]] {offset = 32 : i64, size = 4 : i64} : memref<36xi8> -> memref<4xi1>
// CHECK: %f = dnn.mem_offset %[[P]] {offset = 16 : i64, size = 16 : i64} : memref<36xi8> -> memref<4xf32>
func.func @masks_pack(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %a = dnn.unary ins(%x : tensor<4xf32>) {fn = "relu"} : tensor<4xf32>
  %m = dnn.binary ins(%a, %y : tensor<4xf32>, tensor<4xf32>) {fn = "less"} : tensor<4xi1>
  %n = dnn.binary ins(%y, %a : tensor<4xf32>, tensor<4xf32>) {fn = "less"} : tensor<4xi1>
  %k = dnn.binary ins(%m, %n : tensor<4xi1>, tensor<4xi1>) {fn = "and"} : tensor<4xi1>
  %f = dnn.cast ins(%k : tensor<4xi1>) : tensor<4xf32>
  %g = dnn.binary ins(%a, %f : tensor<4xf32>, tensor<4xf32>) {fn = "add"} : tensor<4xf32>
  func.return %g : tensor<4xf32>
}

// A float smaller than the pool's alignment gets the next power of two of
// its size (a 16-byte block inside one 64-byte line): four live 16-byte
// floats fill one line.
// CHECK-LABEL: func.func @small_floats_pack
// CHECK-NEXT: %[[P:.*]] = dnn.pool_init {size = 64 : i64}
// CHECK-NEXT: %a = dnn.mem_offset %[[P]] {offset = 0 : i64, size = 16 : i64}
// CHECK: %m = dnn.mem_offset %[[P]] {offset = 16 : i64, size = 16 : i64}
// CHECK: %n = dnn.mem_offset %[[P]] {offset = 32 : i64, size = 16 : i64}
// CHECK: %k = dnn.mem_offset %[[P]] {offset = 48 : i64, size = 16 : i64}
func.func @small_floats_pack(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %a = dnn.unary ins(%x : tensor<4xf32>) {fn = "relu"} : tensor<4xf32>
  %m = dnn.binary ins(%a, %y : tensor<4xf32>, tensor<4xf32>) {fn = "min"} : tensor<4xf32>
  %n = dnn.binary ins(%y, %a : tensor<4xf32>, tensor<4xf32>) {fn = "max"} : tensor<4xf32>
  %k = dnn.binary ins(%m, %n : tensor<4xf32>, tensor<4xf32>) {fn = "mul"} : tensor<4xf32>
  %f = dnn.unary ins(%k : tensor<4xf32>) {fn = "neg"} : tensor<4xf32>
  %g = dnn.binary ins(%a, %f : tensor<4xf32>, tensor<4xf32>) {fn = "add"} : tensor<4xf32>
  func.return %g : tensor<4xf32>
}

// Negative: the same program on floats of a line (64 bytes) keeps every
// buffer on a 64-byte line.
// CHECK-LABEL: func.func @floats_keep_alignment
// CHECK-NEXT: %[[P:.*]] = dnn.pool_init {size = 256 : i64}
// CHECK-NEXT: %a = dnn.mem_offset %[[P]] {offset = 0 : i64, size = 64 : i64}
// CHECK: %m = dnn.mem_offset %[[P]] {offset = 64 : i64, size = 64 : i64}
// CHECK: %n = dnn.mem_offset %[[P]] {offset = 128 : i64, size = 64 : i64}
// CHECK: %k = dnn.mem_offset %[[P]] {offset = 192 : i64, size = 64 : i64}
func.func @floats_keep_alignment(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> {
  %a = dnn.unary ins(%x : tensor<16xf32>) {fn = "relu"} : tensor<16xf32>
  %m = dnn.binary ins(%a, %y : tensor<16xf32>, tensor<16xf32>) {fn = "min"} : tensor<16xf32>
  %n = dnn.binary ins(%y, %a : tensor<16xf32>, tensor<16xf32>) {fn = "max"} : tensor<16xf32>
  %k = dnn.binary ins(%m, %n : tensor<16xf32>, tensor<16xf32>) {fn = "mul"} : tensor<16xf32>
  %f = dnn.unary ins(%k : tensor<16xf32>) {fn = "neg"} : tensor<16xf32>
  %g = dnn.binary ins(%a, %f : tensor<16xf32>, tensor<16xf32>) {fn = "add"} : tensor<16xf32>
  func.return %g : tensor<16xf32>
}

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

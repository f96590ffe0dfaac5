// Every pass leaves a function declaration (no body) alone and still
// rewrites the function beside it.
// RUN: pyocc-opt %s -p "dnn-fuse,dnn-reorder,dnn-print-liveness,dnn-insert-memory-ops,dnn-coalesce,dnn-sanitize,dnn-memory-pool,dnn-verify-lifetimes" | filecheck %s

// CHECK: func.func private @external(memref<4xf32>)
// CHECK-LABEL: func.func @f
// CHECK: dnn.pool_init
func.func private @external(memref<4xf32>)

func.func @f(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %b = dnn.unary ins(%a : tensor<1024xf32>) {fn = "neg"} : tensor<1024xf32>
  func.return %b : tensor<1024xf32>
}

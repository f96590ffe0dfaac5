// RUN: not pyocc-opt %s -p dnn-verify-lifetimes 2>&1 | filecheck %s

// Freeing a buffer twice is caught too.
// CHECK: dnn.dealloc frees it again after its dnn.dealloc: buffer %b is dead there
func.func @double_free(%x: memref<4xf32>) {
  %b = dnn.malloc {size = 16 : i64} : memref<4xf32>
  dnn.dealloc %b {size = 16 : i64} : memref<4xf32>
  dnn.dealloc %b {size = 16 : i64} : memref<4xf32>
  func.return
}

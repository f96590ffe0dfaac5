// RUN: not pyocc-opt %s -p dnn-verify-lifetimes 2>&1 | filecheck %s

// A write into a band (dnn.subview) after its buffer's dealloc: the band
// shares the buffer's lifetime, like a view.
// CHECK: dnn.unary uses it after its dnn.dealloc: buffer %o is dead there
func.func @band_after_free(%x: memref<2xf32>, %y: memref<4xf32> {dnn.output}) {
  %o = dnn.malloc {size = 16 : i64} : memref<4xf32>
  %b = dnn.subview %o {offset = 8 : i64} : memref<4xf32> -> memref<2xf32>
  "dnn.unary"(%o, %y) <{fn = "neg", operandSegmentSizes = array<i32: 1, 1>}> : (memref<4xf32>, memref<4xf32>) -> ()
  dnn.dealloc %o {size = 16 : i64} : memref<4xf32>
  "dnn.unary"(%x, %b) <{fn = "relu", operandSegmentSizes = array<i32: 1, 1>}> : (memref<2xf32>, memref<2xf32>) -> ()
  func.return
}

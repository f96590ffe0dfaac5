// RUN: not pyocc-opt %s -p dnn-verify-lifetimes 2>&1 | filecheck %s

// A write into a band (dnn.subview) after its buffer's dealloc: the band
// shares the buffer's lifetime, like a view.
// CHECK: dnn.unary uses it after its dnn.dealloc: buffer %o is dead there
func.func @band_after_free(%x: memref<2xf32>, %y: memref<4xf32> {dnn.output}) {
  %o = dnn.malloc {size = 16 : i64} : memref<4xf32>
  %b = dnn.subview %o {offset = 8 : i64} : memref<4xf32> -> memref<2xf32>
  dnn.unary ins(%o : memref<4xf32>) outs(%y : memref<4xf32>) {fn = "neg"}
  dnn.dealloc %o {size = 16 : i64} : memref<4xf32>
  dnn.unary ins(%x : memref<2xf32>) outs(%b : memref<2xf32>) {fn = "relu"}
  func.return
}

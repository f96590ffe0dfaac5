// RUN: not pyocc-opt %s --split-input-file -p dnn-verify-lifetimes 2>&1 | filecheck %s

// A buffer read through a view before its dealloc: fine, printed unchanged.
// CHECK-LABEL: func.func @ok
// CHECK: dnn.dealloc %a
func.func @ok(%x: memref<4xf32>, %y: memref<2x2xf32> {dnn.output}) {
  %a = dnn.malloc {size = 16 : i64} : memref<4xf32>
  dnn.unary ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {fn = "relu"}
  %v = "dnn.view"(%a) : (memref<4xf32>) -> memref<2x2xf32>
  dnn.unary ins(%v : memref<2x2xf32>) outs(%y : memref<2x2xf32>) {fn = "neg"}
  dnn.dealloc %a {size = 16 : i64} : memref<4xf32>
  func.return
}

// -----

// A read through a view after the dealloc: the buffer is dead there.
// CHECK: dnn.unary uses it after its dnn.dealloc: buffer %a is dead there
func.func @use_after_free(%x: memref<4xf32>, %y: memref<2x2xf32> {dnn.output}) {
  %a = dnn.malloc {size = 16 : i64} : memref<4xf32>
  dnn.unary ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {fn = "relu"}
  %v = "dnn.view"(%a) : (memref<4xf32>) -> memref<2x2xf32>
  dnn.dealloc %a {size = 16 : i64} : memref<4xf32>
  dnn.unary ins(%v : memref<2x2xf32>) outs(%y : memref<2x2xf32>) {fn = "neg"}
  func.return
}


// RUN: not pyocc-opt %s -p canonicalize 2>&1 | filecheck %s --check-prefix=VERIFY
// RUN: pyocc-opt %s -p canonicalize --disable-verify | filecheck %s --check-prefix=OFF

// pyocc-opt checks buffer lifetimes after every pass, not only the op
// verifiers (--disable-verify turns both off).
// OFF: func.func @use_after_free
// VERIFY: dnn.unary uses it after its dnn.dealloc: buffer %a is dead there
func.func @use_after_free(%x: memref<4xf32>, %y: memref<4xf32> {dnn.output}) {
  %a = dnn.malloc {size = 16 : i64} : memref<4xf32>
  dnn.unary ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {fn = "relu"}
  dnn.dealloc %a {size = 16 : i64} : memref<4xf32>
  dnn.unary ins(%a : memref<4xf32>) outs(%y : memref<4xf32>) {fn = "neg"}
  func.return
}

// RUN: not pyocc-opt %s -p convert-dnn-to-llvm --split-input-file 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=BAD < %t.err

// Two named pools (SRAM, DRAM) on the host: each dnn.pool_init is its own
// aligned allocation, released at the end; the JSON table lists both pools,
// and the run makes two allocator calls with a peak of both pools together.

func.func @two_pools(%x: memref<1024xf32>, %y: memref<1024xf32> {dnn.output}) {
  %sram = dnn.pool_init {size = 4096 : i64, pool_name = "sram"} : memref<4096xi8>
  %dram = dnn.pool_init {size = 4096 : i64, pool_name = "dram"} : memref<4096xi8>
  %a = dnn.mem_offset %sram {offset = 0 : i64, size = 4096 : i64} : memref<4096xi8> -> memref<1024xf32>
  dnn.unary ins(%x : memref<1024xf32>) outs(%a : memref<1024xf32>) {fn = "relu"}
  %b = dnn.mem_offset %dram {offset = 0 : i64, size = 4096 : i64} : memref<4096xi8> -> memref<1024xf32>
  dnn.unary ins(%a : memref<1024xf32>) outs(%b : memref<1024xf32>) {fn = "exp"}
  dnn.unary ins(%b : memref<1024xf32>) outs(%y : memref<1024xf32>) {fn = "neg"}
  dnn.pool_release %dram : memref<4096xi8>
  dnn.pool_release %sram : memref<4096xi8>
  func.return
}

// CHECK: @two_pools_meta_json("{{.*}}\22pools\22:[{\22name\22:\22sram\22,\22size\22:4096,\22alignment\22:64},{\22name\22:\22dram\22,\22size\22:4096,\22alignment\22:64}],\22memory\22:{\22allocations\22:2,\22peak_bytes\22:8192}}\00")
// CHECK-LABEL: llvm.func @two_pools_run
// CHECK: %[[S:.*]] = llvm.call @pyocc_alloc
// CHECK: %[[D:.*]] = llvm.call @pyocc_alloc
// CHECK-NOT: llvm.call @pyocc_alloc
// CHECK: llvm.call @pyocc_free(%[[D]])
// CHECK: llvm.call @pyocc_free(%[[S]])

// -----

// A view on a pool that this function never initialised cannot be lowered.
func.func @foreign_pool(%pool: memref<4096xi8>, %y: memref<1024xf32> {dnn.output}) {
  %a = dnn.mem_offset %pool {offset = 0 : i64, size = 4096 : i64} : memref<4096xi8> -> memref<1024xf32>
  dnn.unary ins(%a : memref<1024xf32>) outs(%y : memref<1024xf32>) {fn = "relu"}
  dnn.pool_release %pool : memref<4096xi8>
  func.return
}
// BAD: convert-dnn-to-llvm: cannot lower dnn.pool_release: its operand was not allocated by dnn.malloc / dnn.pool_init in this function

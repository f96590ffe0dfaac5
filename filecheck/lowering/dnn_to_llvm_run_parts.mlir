// RUN: pyocc-opt %s -p "convert-dnn-to-llvm{run_part_ops=2}" | filecheck %s --check-prefix=SPLIT
// RUN: pyocc-opt %s -p "convert-dnn-to-llvm{run_part_ops=3}" | filecheck %s --check-prefix=WHOLE
// RUN: pyocc-opt %s -p "convert-dnn-to-llvm{run_part_ops=0}" | filecheck %s --check-prefix=WHOLE
// RUN: not pyocc-opt %s -p "convert-dnn-to-llvm{run_part_ops=-1}" 2>&1 | filecheck %s --check-prefix=BAD

// Three compute ops and copies on a pool. With run_part_ops=2 the run is
// split: it keeps the allocations, their NULL checks and frees, and stores
// each address in an array of its allocations; it calls two parts in order
// (two ops, then one), each `noinline optnone`. A part rebuilds every
// address from what crosses (the inputs, outputs and weights arrays, and
// the allocations array): the pool's second buffer at byte 4096 of the
// loaded pool pointer, the output by its slot. The view after the malloc
// is lowered in the run, from the run's own pool pointer.

func.func @three_steps(%x: memref<1024xf32>, %y: memref<1024xf32> {dnn.output}) {
  %pool = dnn.pool_init {size = 8192 : i64} : memref<8192xi8>
  %a = dnn.mem_offset %pool {offset = 0 : i64, size = 4096 : i64} : memref<8192xi8> -> memref<1024xf32>
  dnn.unary ins(%x : memref<1024xf32>) outs(%a : memref<1024xf32>) {fn = "relu"}
  %b = dnn.mem_offset %pool {offset = 4096 : i64, size = 4096 : i64} : memref<8192xi8> -> memref<1024xf32>
  "dnn.memcpy"(%a, %b) <{kind = "host_to_host", size = 4096 : i64}> : (memref<1024xf32>, memref<1024xf32>) -> ()
  %t = dnn.malloc {size = 64, alignment = 64 : i64} : memref<16xf32>
  %bv = "dnn.view"(%b) : (memref<1024xf32>) -> memref<1x1024xf32>
  dnn.unary ins(%bv : memref<1x1024xf32>) outs(%y : memref<1024xf32>) {fn = "neg"}
  dnn.dealloc %t {size = 64 : i64} : memref<16xf32>
  dnn.pool_release %pool : memref<8192xi8>
  func.return
}

// SPLIT:       llvm.func internal @three_steps_run_part0(%[[IN:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[ALLOCS:.*]]: !llvm.ptr) attributes {no_inline, optimize_none}
// SPLIT:         %[[X:.*]] = llvm.load %[[IN]] : !llvm.ptr -> !llvm.ptr
// SPLIT:         %[[POOL:.*]] = llvm.load %[[ALLOCS]] : !llvm.ptr -> !llvm.ptr
// SPLIT:         llvm.call @three_steps_dispatch
// SPLIT:         %[[B:.*]] = llvm.getelementptr inbounds %[[POOL]][4096] : (!llvm.ptr) -> !llvm.ptr, i8
// SPLIT:         llvm.call @memcpy(%[[B]], %[[POOL]], %{{.*}})
// SPLIT-NOT:     llvm.call
// SPLIT:         llvm.return
// SPLIT-NEXT:  }
// SPLIT:       llvm.func internal @three_steps_run_part1(%{{.*}}: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[ALLOCS1:.*]]: !llvm.ptr) attributes {no_inline, optimize_none}
// SPLIT:         %[[POOL1:.*]] = llvm.load %[[ALLOCS1]] : !llvm.ptr -> !llvm.ptr
// SPLIT:         %[[B1:.*]] = llvm.getelementptr inbounds %[[POOL1]][4096] : (!llvm.ptr) -> !llvm.ptr, i8
// SPLIT:         llvm.store %[[B1]]
// SPLIT:         %[[Y:.*]] = llvm.load %[[OUT]] : !llvm.ptr -> !llvm.ptr
// SPLIT:         llvm.store %[[Y]]
// SPLIT:         llvm.call @three_steps_dispatch
// SPLIT-NEXT:    llvm.return
// SPLIT-NEXT:  }
// SPLIT:       llvm.func @three_steps_run(%[[RIN:.*]]: !llvm.ptr, %[[ROUT:.*]]: !llvm.ptr, %[[RW:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32 attributes {no_inline, optimize_none}
// SPLIT:         %[[P:.*]] = llvm.call @pyocc_alloc
// SPLIT:         llvm.cond_br
// SPLIT:         llvm.store %[[P]], %[[ARRAY:.*]] : !llvm.ptr, !llvm.ptr
// SPLIT-NOT:     llvm.call @three_steps_dispatch
// SPLIT:         llvm.call @three_steps_run_part0(%[[RIN]], %[[ROUT]], %[[RW]], %[[ARRAY]])
// SPLIT:         %[[T:.*]] = llvm.call @pyocc_alloc
// SPLIT:         llvm.store %[[T]], %{{.*}} : !llvm.ptr, !llvm.ptr
// SPLIT:         llvm.getelementptr inbounds %[[P]][4096]
// SPLIT-NEXT:    llvm.call @three_steps_run_part1(%[[RIN]], %[[ROUT]], %[[RW]], %[[ARRAY]])
// SPLIT-NEXT:    llvm.call @pyocc_free(%[[T]])
// SPLIT:         llvm.call @pyocc_free(%[[P]])

// Three ops and run_part_ops=3 (or 0, never split): one run, no parts.
// WHOLE-NOT:   run_part
// WHOLE:       llvm.func @three_steps_run
// WHOLE:         llvm.call @three_steps_dispatch
// WHOLE:         llvm.call @memcpy
// WHOLE:         llvm.call @three_steps_dispatch
// WHOLE-NOT:   run_part

// BAD: convert-dnn-to-llvm: run_part_ops must be >= 0, got -1

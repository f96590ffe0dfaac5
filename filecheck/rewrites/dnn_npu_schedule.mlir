// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=64KiB}" | filecheck %s
// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=24KiB}" --verify-diagnostics | filecheck %s --check-prefix=SPILL
// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=64KiB},dnn-dma-to-memcpy" | filecheck %s --check-prefix=HOST
// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=16KiB}" --verify-diagnostics | filecheck %s --check-prefix=BLOCKS
// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=32KiB}" --verify-diagnostics | filecheck %s --check-prefix=SRAM32
// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=32KiB cascades=true}" --verify-diagnostics | filecheck %s --check-prefix=CASCADE
// RUN: pyocc-opt %s --split-input-file -p "dnn-insert-memory-ops,dnn-npu-schedule" --verify-diagnostics | filecheck %s --check-prefix=FORM
// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=10KiB}" --verify-diagnostics | filecheck %s --check-prefix=CHAINCAT
// RUN: pyocc-opt %s --split-input-file -p "dnn-npu-schedule{sram=48KiB}" --verify-diagnostics | filecheck %s --check-prefix=NOPREFETCH

// The schedule as IR: every SRAM buffer a mem_offset of the "sram" pool at the
// scheduler's offset; the weight and the input are loaded (the weight first:
// the larger one), both waited on before the gemm that reads them; the output
// computed in SRAM and stored to the destination argument. The relu's output
// reuses the bytes of the weight, dead after the gemm.
// CHECK-LABEL: func.func @gemm_relu
// CHECK-SAME:  (%x: memref<1x64xf32>, %y_out: memref<1x64xf32> {dnn.output})
// CHECK:      %[[SRAM:.*]] = dnn.pool_init {size = 65536 : i64, pool_name = "sram"}
// CHECK-NEXT: %w_sram = dnn.mem_offset %[[SRAM]] {{{.*}}offset = 0 : i64, size = 16384 : i64}
// CHECK-NEXT: %w_in = dnn.dma_start ins(%w : memref<64x64xf32>) outs(%w_sram : memref<64x64xf32>) {npu.piece = ["w", "all", 16384 : i64, 16384 : i64], direction = "dram_to_sram"
// CHECK-NEXT: %x_sram = dnn.mem_offset %[[SRAM]] {{{.*}}offset = 16384 : i64, size = 256 : i64}
// CHECK-NEXT: %x_in = dnn.dma_start ins(%x : memref<1x64xf32>) outs(%x_sram
// CHECK-NEXT: %h_sram = dnn.mem_offset %[[SRAM]] {{{.*}}offset = 16640 : i64
// CHECK-NEXT: dnn.dma_wait %x_in
// CHECK-NEXT: dnn.dma_wait %w_in
// CHECK-NEXT: dnn.gemm ins(%x_sram, %w_sram : memref<1x64xf32>, memref<64x64xf32>) outs(%h_sram : memref<1x64xf32>)
// CHECK-NEXT: %y_sram = dnn.mem_offset %[[SRAM]] {{{.*}}offset = 0 : i64, size = 256 : i64}
// CHECK-NEXT: dnn.unary ins(%h_sram : memref<1x64xf32>) outs(%y_sram : memref<1x64xf32>) {fn = "relu"
// CHECK-NEXT: %[[T:.*]] = dnn.dma_start ins(%y_sram : memref<1x64xf32>) outs(%y_out : memref<1x64xf32>) {{{.*}}direction = "sram_to_dram"
// CHECK-NEXT: dnn.dma_wait %[[T]]
// CHECK-NEXT: dnn.pool_release %[[SRAM]]
// CHECK-NEXT: func.return
// On the host each transfer is a copy between the two arenas.
// HOST-LABEL: func.func @gemm_relu
// HOST-NOT:   dnn.dma_
// HOST:       "dnn.memcpy"(%w, %w_sram) <{kind = "host_to_host", size = 16384 : i64}>
// HOST:       "dnn.memcpy"(%y_sram, %y_out) <{kind = "host_to_host", size = 256 : i64}>
// A weight too large for half of 16 KiB streams in blocks of output
// channels (rows of the transposed B): each block a subview of the weight in
// DRAM loaded into its own SRAM buffer, placed from the top of the SRAM
// (block 0 at 16384 - 2816 = 13568), the next block's load started before
// the gemm of this one (double buffering) and waited on only after it; each
// gemm writes its columns, a subview of the output's SRAM buffer.
// BLOCKS-LABEL: func.func @gemm_relu
// BLOCKS:      %w_sram = dnn.mem_offset %{{.*}} {npu.buffer = "b1:w:block0/6", offset = 13568 : i64, size = 2816 : i64} : memref<16384xi8> -> memref<11x64xf32>
// BLOCKS-NEXT: %[[B0:.*]] = dnn.subview %w {offset = 0 : i64} : memref<64x64xf32> -> memref<11x64xf32>
// BLOCKS-NEXT: %w_in = dnn.dma_start ins(%[[B0]] : memref<11x64xf32>) outs(%w_sram : memref<11x64xf32>) {npu.piece = ["w", "block0/6", 2816 : i64, 16384 : i64]
// BLOCKS:      dnn.dma_wait %w_in
// BLOCKS:      %[[B1:.*]] = dnn.subview %w {offset = 2816 : i64} : memref<64x64xf32> -> memref<11x64xf32>
// BLOCKS-NEXT: %w_in_1 = dnn.dma_start ins(%[[B1]] : memref<11x64xf32>) outs(%w_sram_1
// BLOCKS:      %[[H0:.*]] = dnn.subview %h_sram {offset = 0 : i64} : memref<1x64xf32> -> memref<1x11xf32>
// BLOCKS-NEXT: dnn.gemm ins(%x_sram, %w_sram : memref<1x64xf32>, memref<11x64xf32>) outs(%[[H0]] : memref<1x11xf32>) {trans_b = 1 : i64
// BLOCKS-NEXT: dnn.dma_wait %w_in_1
// BLOCKS:      %[[H1:.*]] = dnn.subview %h_sram {offset = 44 : i64} : memref<1x64xf32> -> memref<1x11xf32>
// BLOCKS-NEXT: dnn.gemm ins(%x_sram, %w_sram_1 : memref<1x64xf32>, memref<11x64xf32>) outs(%[[H1]] : memref<1x11xf32>)
// BLOCKS:      dnn.unary ins(%h_sram : memref<1x64xf32>) outs(%y_sram : memref<1x64xf32>) {fn = "relu"
// SMALL: dnn-npu-schedule: scratchpad: op 'h' does not fit in 1024 bytes of SRAM even tiled; give a larger --scratchpad
// FORM: dnn-npu-schedule needs tensor-form dnn
func.func @gemm_relu(%x: tensor<1x64xf32>) -> tensor<1x64xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x64xf32>}> : () -> tensor<64x64xf32>
  %h = dnn.gemm ins(%x, %w : tensor<1x64xf32>, tensor<64x64xf32>) {trans_b = 1 : i64} : tensor<1x64xf32>
  %y = dnn.unary ins(%h : tensor<1x64xf32>) {fn = "relu"} : tensor<1x64xf32>
  func.return %y : tensor<1x64xf32>
}

// -----

// Six live tensors in a 24 KiB SRAM: %a, used last, is written back to the
// "dram" pool (Belady: the furthest next use) and loaded again early, its
// wait right before the add that reads it.
// SPILL-LABEL: func.func @spill
// SPILL:      %[[SRAM:.*]] = dnn.pool_init {size = 24576 : i64, pool_name = "sram"}
// SPILL-NEXT: %[[DRAM:.*]] = dnn.pool_init {size = 4096 : i64, pool_name = "dram"}
// SPILL:      dnn.unary ins(%e_sram : memref<1024xf32>) outs(%f_sram
// SPILL-NEXT: %a_dram = dnn.mem_offset %[[DRAM]] {offset = 0 : i64, size = 4096 : i64}
// SPILL-NEXT: %a_out = dnn.dma_start ins(%a_sram : memref<1024xf32>) outs(%a_dram : memref<1024xf32>) {{{.*}}direction = "sram_to_dram"
// SPILL-NEXT: dnn.dma_wait %a_out
// SPILL:      %a_in = dnn.dma_start ins(%{{.*}} : memref<1024xf32>) outs(%[[A:.*]] : memref<1024xf32>) {{{.*}}direction = "dram_to_sram"
// SPILL-NEXT: dnn.binary ins(%g_sram, %d_sram
// SPILL:      dnn.dma_wait %a_in
// SPILL-NEXT: dnn.binary ins(%j_sram, %[[A]] : memref<1024xf32>, memref<1024xf32>)
// Negative: at 64 KiB everything fits; nothing goes back to DRAM but the output.
// CHECK-LABEL: func.func @spill
// CHECK-NOT:   pool_name = "dram"
// CHECK-NOT:   "sram_to_dram"
// CHECK:       %y_sram
// CHECK:       direction = "sram_to_dram"
// CHECK-NOT:   direction = "sram_to_dram"
// CHECK:       func.return
func.func @spill(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %a = dnn.unary ins(%x : tensor<1024xf32>) {fn = "relu"} : tensor<1024xf32>
  %b = dnn.unary ins(%a : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %c = dnn.unary ins(%b : tensor<1024xf32>) {fn = "tanh"} : tensor<1024xf32>
  %d = dnn.unary ins(%c : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %e = dnn.unary ins(%d : tensor<1024xf32>) {fn = "tanh"} : tensor<1024xf32>
  %f = dnn.unary ins(%e : tensor<1024xf32>) {fn = "exp"} : tensor<1024xf32>
  %g = dnn.binary ins(%f, %e : tensor<1024xf32>, tensor<1024xf32>) {fn = "add"} : tensor<1024xf32>
  %h = dnn.binary ins(%g, %d : tensor<1024xf32>, tensor<1024xf32>) {fn = "add"} : tensor<1024xf32>
  %i = dnn.binary ins(%h, %c : tensor<1024xf32>, tensor<1024xf32>) {fn = "add"} : tensor<1024xf32>
  %j = dnn.binary ins(%i, %b : tensor<1024xf32>, tensor<1024xf32>) {fn = "add"} : tensor<1024xf32>
  %y = dnn.binary ins(%j, %a : tensor<1024xf32>, tensor<1024xf32>) {fn = "add"} : tensor<1024xf32>
  func.return %y : tensor<1024xf32>
}

// -----

// Negative: a gemm that does not transpose B cannot be split by output
// channels (its `channel_split` is None), so it must fit whole.
// BLOCKS: dnn-npu-schedule: scratchpad: op 'h' does not fit in 16384 bytes of SRAM even tiled; give a larger --scratchpad
func.func @gemm_not_split(%x: tensor<1x64xf32>) -> tensor<1x64xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x64xf32>}> : () -> tensor<64x64xf32>
  %h = dnn.gemm ins(%x, %w : tensor<1x64xf32>, tensor<64x64xf32>) : tensor<1x64xf32>
  %y = dnn.unary ins(%h : tensor<1x64xf32>) {fn = "relu"} : tensor<1x64xf32>
  func.return %y : tensor<1x64xf32>
}

// -----

// A convolution whose input and output do not fit runs in 2 bands of
// output rows (and 3 blocks of output channels, of 2, 1 and 1). Each band
// loads its input rows with the halo as a strided transfer (`rows`):
// [0, 17), [15, 32); the top pad is kept on the first band only, the
// bottom pad on the last; each tile (its rows of one channel block) is
// written back to its rows of the output's channel block. The channel
// blocks are outer: both bands stay in SRAM and every block reads them
// (each weight block loaded once, not once per band).
// SRAM32-LABEL: func.func @conv_rows
// SRAM32:      dnn.dma_start ins(%x : memref<1x4x32x32xf32>) outs(%x_sram : memref<1x4x17x32xf32>) {{.*}}direction = "dram_to_sram", size = 8704 : i64, rows = array<i64: 0, 17>}
// SRAM32:      dnn.dma_start ins(%x : memref<1x4x32x32xf32>) outs(%x_sram_1 : memref<1x4x17x32xf32>) {{.*}}rows = array<i64: 15, 32>}
// SRAM32:      dnn.conv ins(%x_sram, %w_sram : memref<1x4x17x32xf32>, memref<2x4x3x3xf32>) outs(%y_sram : memref<1x2x16x32xf32>) {pads = array<i64: 1, 1, 0, 1>
// SRAM32-NEXT: %[[Y0:.*]] = dnn.subview %y_out {offset = 0 : i64} : memref<1x4x32x32xf32> -> memref<1x2x32x32xf32>
// SRAM32-NEXT: dnn.dma_start ins(%y_sram : memref<1x2x16x32xf32>) outs(%[[Y0]] : memref<1x2x32x32xf32>) {{.*}}direction = "sram_to_dram", size = 4096 : i64, rows = array<i64: 0, 16>}
// SRAM32:      dnn.conv ins(%x_sram_1, %w_sram : memref<1x4x17x32xf32>, memref<2x4x3x3xf32>) outs({{.*}} : memref<1x2x16x32xf32>) {pads = array<i64: 0, 1, 1, 1>
// SRAM32:      rows = array<i64: 16, 32>
// SRAM32:      dnn.conv ins(%x_sram, %w_sram_1 : memref<1x4x17x32xf32>, memref<1x4x3x3xf32>) outs({{.*}} : memref<1x1x16x32xf32>) {pads = array<i64: 1, 1, 0, 1>
// Negative: with cascades the scheduler runs the convolution as a cascade of
// one op, whose bands the IR does not run yet: one line.
// CASCADE: dnn-npu-schedule: the schedule runs op 'y' on 'band0/6' (a cascade's band); the IR runs whole tensors, output-channel blocks and row bands so far: schedule without cascades or give a larger --scratchpad
func.func @conv_rows(%x: tensor<1x4x32x32xf32>) -> tensor<1x4x32x32xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %y = dnn.conv ins(%x, %w : tensor<1x4x32x32xf32>, tensor<4x4x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x32xf32>
  func.return %y : tensor<1x4x32x32xf32>
}

// -----

// A convolution with a fused bias and residual whose filters exceed half of
// 32 KiB: each block of 5 output channels loads its filters and bias entries
// (subviews of the weights) and reads and writes its channels of the
// residual and of the output, subviews of their whole SRAM buffers; the
// input is read whole by every block.
// SRAM32-LABEL: func.func @conv_blocks
// SRAM32:      %w_sram = dnn.mem_offset %{{.*}} {npu.buffer = "b2:w:block0/13", {{.*}}} : memref<32768xi8> -> memref<5x16x3x3xf32>
// SRAM32-NEXT: %[[W0:.*]] = dnn.subview %w {offset = 0 : i64} : memref<64x16x3x3xf32> -> memref<5x16x3x3xf32>
// SRAM32:      %b_sram = dnn.mem_offset %{{.*}} -> memref<5xf32>
// SRAM32-NEXT: %[[B0:.*]] = dnn.subview %b {offset = 0 : i64} : memref<64xf32> -> memref<5xf32>
// SRAM32:      %[[R0:.*]] = dnn.subview %r_sram {offset = 0 : i64} : memref<1x64x4x4xf32> -> memref<1x5x4x4xf32>
// SRAM32-NEXT: %[[Y0:.*]] = dnn.subview %y_sram {offset = 0 : i64} : memref<1x64x4x4xf32> -> memref<1x5x4x4xf32>
// SRAM32-NEXT: dnn.conv ins(%x_sram, %w_sram, bias %b_sram, residual %[[R0]] : memref<1x16x4x4xf32>, memref<5x16x3x3xf32>, memref<5xf32>, memref<1x5x4x4xf32>) outs(%[[Y0]] : memref<1x5x4x4xf32>)
// SRAM32:      %[[R1:.*]] = dnn.subview %r_sram {offset = 320 : i64} : memref<1x64x4x4xf32> -> memref<1x5x4x4xf32>
// SRAM32-NEXT: %[[Y1:.*]] = dnn.subview %y_sram {offset = 320 : i64}
// SRAM32-NEXT: dnn.conv ins(%x_sram, %w_sram_1, bias %b_sram_1, residual %[[R1]]
// SRAM32:      direction = "sram_to_dram"
func.func @conv_blocks(%x: tensor<1x16x4x4xf32>, %r: tensor<1x64x4x4xf32>) -> tensor<1x64x4x4xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<64x16x3x3xf32>}> : () -> tensor<64x16x3x3xf32>
  %b = "dnn.weight"() <{value = dense<1.0> : tensor<64xf32>}> : () -> tensor<64xf32>
  %y = dnn.conv ins(%x, %w, bias %b, residual %r : tensor<1x16x4x4xf32>, tensor<64x16x3x3xf32>, tensor<64xf32>, tensor<1x64x4x4xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x64x4x4xf32>
  func.return %y : tensor<1x64x4x4xf32>
}

// -----

// Two convolutions whose inner tensor %a (16 KiB) is above a quarter of
// 32 KiB: without cascades it would go out to DRAM and back. As a chain
// cascade, band by band: the first convolution computes the rows of %a that
// the second one's band reads (its halo computed again by the next band) in
// an SRAM buffer that the second convolution reads whole; %a never reaches
// DRAM; only the input bands come in and the output bands go out.
// SRAM32-LABEL: func.func @conv_chain
// SRAM32-NOT:  %a_out
// SRAM32:      dnn.dma_start ins(%x : memref<1x4x32x32xf32>) outs(%[[X0:.*]] : memref<1x4x[[XR0:[0-9]+]]x32xf32>) {{.*}}rows = array<i64: 0, [[XR0]]>}
// SRAM32:      dnn.conv ins(%[[X0]], %w_sram : memref<1x4x[[XR0]]x32xf32>, memref<4x4x3x3xf32>) outs(%[[A0:.*]] : memref<1x4x[[AR0:[0-9]+]]x32xf32>) {pads = array<i64: 1, 1, 0, 1>
// SRAM32:      dnn.conv ins(%[[A0]], %v_sram : memref<1x4x[[AR0]]x32xf32>, memref<4x4x3x3xf32>) outs(%[[Y0:.*]] : memref<1x4x[[YR0:[0-9]+]]x32xf32>) {pads = array<i64: 1, 1, 0, 1>
// SRAM32:      dnn.dma_start ins(%[[Y0]] : memref<1x4x[[YR0]]x32xf32>) outs(%y_out : memref<1x4x32x32xf32>) {{.*}}direction = "sram_to_dram", {{.*}}rows = array<i64: 0, [[YR0]]>}
// SRAM32:      dnn.conv ins(%{{.*}}, %w_sram : memref<1x4x{{[0-9]+}}x32xf32>, memref<4x4x3x3xf32>) outs(%[[A1:.*]] : memref<1x4x{{[0-9]+}}x32xf32>) {pads = array<i64: 0, 1, {{[01]}}, 1>
// SRAM32:      dnn.conv ins(%[[A1]], %v_sram
// SRAM32-NOT:  %a_out
// SRAM32:      func.return
// Negative: at 64 KiB the three tensors fit whole; nothing is cut into bands.
// CHECK-LABEL: func.func @conv_chain
// CHECK-NOT:   rows = array
// CHECK:       func.return
func.func @conv_chain(%x: tensor<1x4x32x32xf32>) -> tensor<1x4x32x32xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x4x32x32xf32>, tensor<4x4x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x32xf32>
  %y = dnn.conv ins(%a, %v : tensor<1x4x32x32xf32>, tensor<4x4x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x32xf32>
  func.return %y : tensor<1x4x32x32xf32>
}

// -----

// A residual unit as one chain: %x is read by rows twice per band, by %a
// and by %y (its residual). Rolled, %a computes each row once, so each band
// of %x is loaded once (rows 0..3, then 4..7), and %y reads its rows one row
// behind %a's (for %b's halo between them). Its first band's rows are
// copied out of %x's first band, SRAM to SRAM, by a strided dnn.memcpy (a
// chunk per channel, `npu.op` the reader: the simulator runs it as a
// compute) into the buffer %y reads; its second band's rows, 3..6, out of
// two bands of %x, the one before and this one (two dnn.memcpy into one
// buffer) instead of loaded again.
// SRAM32-LABEL: func.func @residual_chain
// SRAM32:       dnn.dma_start ins(%x : memref<1x4x32x32xf32>) outs(%[[XB:.*]] : memref<1x4x4x32xf32>) {{.*}}rows = array<i64: 0, 4>}
// SRAM32:       dnn.dma_start ins(%x : memref<1x4x32x32xf32>) outs(%[[XC:.*]] : memref<1x4x4x32xf32>) {{.*}}rows = array<i64: 4, 8>}
// SRAM32:       dnn.conv ins(%[[XB]], %w_sram
// SRAM32:       %[[R:.*]] = dnn.mem_offset {{.*}}npu.buffer = "b{{[0-9]+}}:x:rows0:3|copy"{{.*}} -> memref<1x4x3x32xf32>
// SRAM32-NEXT:  %[[S:.*]] = dnn.subview %[[XB]] {offset = 0 : i64} : memref<1x4x4x32xf32> -> memref<2048xi8>
// SRAM32-NEXT:  "dnn.memcpy"(%[[S]], %[[R]]) <{kind = "host_to_host", size = 384 : i64, count = 4 : i64, source_stride = 512 : i64, target_stride = 384 : i64}> {npu.reads = {{\[}}["x", "rows0:4", 2048 : i64, 16384 : i64]], npu.writes = {{\[}}["x", "rows0:3|copy", 1536 : i64, 16384 : i64]], npu.op = "y"}
// SRAM32:       dnn.conv ins(%{{.*}}, %u_sram, residual %[[R]] : memref<1x4x3x32xf32>, memref<4x4x1x1xf32>, memref<1x4x3x32xf32>)
// SRAM32:       %[[R2:.*]] = dnn.mem_offset {{.*}}npu.buffer = "b{{[0-9]+}}:x:rows3:7|copy"
// SRAM32:       "dnn.memcpy"{{.*}}npu.reads = {{\[}}["x", "rows0:4"{{.*}}npu.writes = {{\[}}["x", "rows3:7|copy"
// SRAM32:       "dnn.memcpy"{{.*}}npu.reads = {{\[}}["x", "rows4:8"{{.*}}npu.writes = {{\[}}["x", "rows3:7|copy"
// SRAM32-NOT:   rows = array<i64: 3, 7>
// SRAM32:       dnn.conv ins(%{{.*}}, %u_sram, residual %[[R2]] : memref<1x4x4x32xf32>, memref<4x4x1x1xf32>, memref<1x4x4x32xf32>)
// Negative: at 64 KiB every tensor fits whole: no band, no copy.
// CHECK-LABEL: func.func @residual_chain
// CHECK-NOT:   dnn.memcpy
// CHECK:       func.return
func.func @residual_chain(%x: tensor<1x4x32x32xf32>) -> tensor<1x4x32x32xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<4x4x1x1xf32>}> : () -> tensor<4x4x1x1xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %u = "dnn.weight"() <{value = dense<1.0> : tensor<4x4x1x1xf32>}> : () -> tensor<4x4x1x1xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x4x32x32xf32>, tensor<4x4x1x1xf32>) : tensor<1x4x32x32xf32>
  %b = dnn.conv ins(%a, %v : tensor<1x4x32x32xf32>, tensor<4x4x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x32xf32>
  %y = dnn.conv ins(%b, %u, residual %x : tensor<1x4x32x32xf32>, tensor<4x4x1x1xf32>, tensor<1x4x32x32xf32>) {activation = "relu"} : tensor<1x4x32x32xf32>
  func.return %y : tensor<1x4x32x32xf32>
}

// -----

// Negative: %a is also read whole by a global pool (which does not run on
// bands), so it leaves the pair and is no inner band: each convolution is
// tiled on its own, %a goes out to DRAM as row tiles and comes back.
// SRAM32-LABEL: func.func @conv_no_chain
// SRAM32:      dnn.dma_start ins(%a_sram : memref<{{[0-9x]+}}xf32>) {{.*}}direction = "sram_to_dram"
// SRAM32:      dnn.conv ins(%{{.*}}, %v_sram
// SRAM32:      func.return
func.func @conv_no_chain(%x: tensor<1x4x32x32xf32>) -> (tensor<1x4x32x32xf32>, tensor<1x4x1x1xf32>) {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %v = "dnn.weight"() <{value = dense<1.0> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x4x32x32xf32>, tensor<4x4x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x32xf32>
  %y = dnn.conv ins(%a, %v : tensor<1x4x32x32xf32>, tensor<4x4x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x4x32x32xf32>
  %g = dnn.global_average_pool ins(%a : tensor<1x4x32x32xf32>) : tensor<1x4x1x1xf32>
  func.return %y, %g : tensor<1x4x32x32xf32>, tensor<1x4x1x1xf32>
}

// -----

// A concat in place: %a and %b are written straight into their channel
// slices of %c's SRAM buffer (it fits beside them: assembled in SRAM), and
// the concat itself is gone (it would copy 1 KiB for nothing).
// CHECK-LABEL: func.func @concat_in_place
// CHECK:       %c_sram = dnn.mem_offset %{{.*}} {npu.buffer = "b{{[0-9]+}}:c:all", {{.*}}size = 2048 : i64} : memref<65536xi8> -> memref<1x4x8x16xf32>
// CHECK:       %[[A:.*]] = dnn.subview %c_sram {offset = 0 : i64} : memref<1x4x8x16xf32> -> memref<1x2x8x16xf32>
// CHECK-NEXT:  dnn.conv ins(%x_sram, %w_sram : {{.*}}) outs(%[[A]] : memref<1x2x8x16xf32>) {{{.*}}npu.writes = {{\[}}["c", "ch0:2/4", 1024 : i64, 2048 : i64]]
// CHECK:       %[[B:.*]] = dnn.subview %c_sram {offset = 1024 : i64} : memref<1x4x8x16xf32> -> memref<1x2x8x16xf32>
// CHECK-NEXT:  dnn.conv ins(%x_sram, %v_sram : {{.*}}) outs(%[[B]] : memref<1x2x8x16xf32>) {{{.*}}npu.writes = {{\[}}["c", "ch2:4/4", 1024 : i64, 2048 : i64]]
// CHECK-NOT:   dnn.concat
// CHECK:       dnn.conv ins(%c_sram, %u_sram
// CHECK:       func.return
// When %c does not fit beside them (3 KiB, chains off so that each op runs
// whole), each input has its own buffer, stored to its channel slice of
// %c's DRAM home; %c is then loaded whole.
// JOIN-LABEL:  func.func @concat_in_place
// JOIN:        %[[S0:.*]] = dnn.subview %c_dram {offset = 0 : i64} : memref<1x4x8x16xf32> -> memref<1x2x8x16xf32>
// JOIN-NEXT:   dnn.dma_start ins(%a_sram : memref<1x2x8x16xf32>) outs(%[[S0]] : memref<1x2x8x16xf32>) {npu.piece = ["c", "ch0:2/4", 1024 : i64, 2048 : i64], direction = "sram_to_dram"
// JOIN:        %[[S1:.*]] = dnn.subview %c_dram_1 {offset = 1024 : i64} : memref<1x4x8x16xf32> -> memref<1x2x8x16xf32>
// JOIN-NEXT:   dnn.dma_start ins(%b_sram : memref<1x2x8x16xf32>) outs(%[[S1]] : memref<1x2x8x16xf32>) {npu.piece = ["c", "ch2:4/4", 1024 : i64, 2048 : i64], direction = "sram_to_dram"
// JOIN-NOT:    dnn.concat
// JOIN:        dnn.dma_start ins(%c_dram_2 : memref<1x4x8x16xf32>) outs(%c_sram : memref<1x4x8x16xf32>) {npu.piece = ["c", "all", 2048 : i64, 2048 : i64], direction = "dram_to_sram"
// JOIN:        dnn.conv ins(%c_sram, %u_sram
func.func @concat_in_place(%x: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %v = "dnn.weight"() <{value = dense<2.0> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %u = "dnn.weight"() <{value = dense<1.0> : tensor<1x4x1x1xf32>}> : () -> tensor<1x4x1x1xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x1x8x16xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x8x16xf32>
  %b = dnn.conv ins(%x, %v : tensor<1x1x8x16xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x8x16xf32>
  %c = dnn.concat ins(%a, %b : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) {axis = 1 : i64} : tensor<1x4x8x16xf32>
  %y = dnn.conv ins(%c, %u : tensor<1x4x8x16xf32>, tensor<1x4x1x1xf32>) : tensor<1x1x8x16xf32>
  func.return %y : tensor<1x1x8x16xf32>
}

// -----

// Negative: a concat of a graph input (%x is in DRAM, written by no op)
// is not in place: the concat runs, copying both into %c.
// CHECK-LABEL: func.func @concat_of_an_input
// CHECK:       dnn.concat ins(%x_sram, %a_sram : memref<1x1x8x16xf32>, memref<1x2x8x16xf32>) outs(%c_sram : memref<1x3x8x16xf32>)
// JOIN-LABEL:  func.func @concat_of_an_input
// JOIN:        dnn.concat ins(
func.func @concat_of_an_input(%x: tensor<1x1x8x16xf32>) -> tensor<1x1x8x16xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %u = "dnn.weight"() <{value = dense<1.0> : tensor<1x3x1x1xf32>}> : () -> tensor<1x3x1x1xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x1x8x16xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x8x16xf32>
  %c = dnn.concat ins(%x, %a : tensor<1x1x8x16xf32>, tensor<1x2x8x16xf32>) {axis = 1 : i64} : tensor<1x3x8x16xf32>
  %y = dnn.conv ins(%c, %u : tensor<1x3x8x16xf32>, tensor<1x3x1x1xf32>) : tensor<1x1x8x16xf32>
  func.return %y : tensor<1x1x8x16xf32>
}

// -----

// A concat inside a chain cascade runs in place too: band by band, each
// convolution writes its channels of the concat's band of rows (a subview
// of that band's SRAM buffer, of every channel), which the last
// convolution reads whole; there is no dnn.concat. (At 8 KiB: at 10 KiB,
// where the chain's footprint counted tight gives bands of 8 rows too, the
// schedule copying the concat simulates faster and is the one kept; at
// 8 KiB the wide chains' count, the most bytes live at once, takes bands
// of 10 and 11 rows.)
// CHAIN8-LABEL: func.func @concat_in_a_chain
// CHAIN8:       %c_sram = dnn.mem_offset %{{.*}} {npu.buffer = "b{{[0-9]+}}:c:rows0:[[R:[0-9]+]]", {{.*}}} : memref<8192xi8> -> memref<1x4x[[R]]x16xf32>
// CHAIN8:       %[[A:.*]] = dnn.subview %c_sram {offset = 0 : i64} : memref<1x4x[[R]]x16xf32> -> memref<1x2x[[R]]x16xf32>
// CHAIN8-NEXT:  dnn.conv ins(%x_sram, %w_sram : {{.*}}) outs(%[[A]] : memref<1x2x[[R]]x16xf32>) {{{.*}}npu.writes = {{\[}}["c", "ch0:2/4|rows0:[[R]]", {{[0-9]+}} : i64, 8192 : i64]]
// CHAIN8:       %[[B:.*]] = dnn.subview %c_sram {offset = {{[0-9]+}} : i64} : memref<1x4x[[R]]x16xf32> -> memref<1x2x[[R]]x16xf32>
// CHAIN8-NEXT:  dnn.conv ins(%{{.*}}, %v_sram : {{.*}}) outs(%[[B]] : memref<1x2x[[R]]x16xf32>) {{{.*}}npu.writes = {{\[}}["c", "ch2:4/4|rows0:[[R]]", {{[0-9]+}} : i64, 8192 : i64]]
// CHAIN8:       dnn.conv ins(%c_sram, %u_sram : memref<1x4x[[R]]x16xf32>, {{.*}}npu.reads = {{\[}}["c", "rows0:[[R]]", {{[0-9]+}} : i64, 8192 : i64]
// CHAIN8-NOT:   dnn.concat
// CHAIN8:       func.return
func.func @concat_in_a_chain(%x: tensor<1x1x32x16xf32>) -> tensor<1x1x32x16xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %v = "dnn.weight"() <{value = dense<2.0> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %u = "dnn.weight"() <{value = dense<1.0> : tensor<1x4x1x1xf32>}> : () -> tensor<1x4x1x1xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x1x32x16xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x32x16xf32>
  %b = dnn.conv ins(%x, %v : tensor<1x1x32x16xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x32x16xf32>
  %c = dnn.concat ins(%a, %b : tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32>) {axis = 1 : i64} : tensor<1x4x32x16xf32>
  %y = dnn.conv ins(%c, %u : tensor<1x4x32x16xf32>, tensor<1x4x1x1xf32>) : tensor<1x1x32x16xf32>
  func.return %y : tensor<1x1x32x16xf32>
}

// -----

// Negative: a concat that ends its chain (its bands go out to the graph
// output) copies its inputs' bands into its own.
// CHAINCAT-LABEL: func.func @concat_ends_a_chain
// CHAINCAT:       dnn.concat ins(%a_sram, %b_sram : memref<1x2x[[R:[0-9]+]]x16xf32>, memref<1x2x[[R]]x16xf32>) outs(%c_sram : memref<1x4x[[R]]x16xf32>)
func.func @concat_ends_a_chain(%x: tensor<1x1x32x16xf32>) -> tensor<1x4x32x16xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<2x1x1x1xf32>}> : () -> tensor<2x1x1x1xf32>
  %v = "dnn.weight"() <{value = dense<2.0> : tensor<2x1x3x3xf32>}> : () -> tensor<2x1x3x3xf32>
  %a = dnn.conv ins(%x, %w : tensor<1x1x32x16xf32>, tensor<2x1x1x1xf32>) : tensor<1x2x32x16xf32>
  %b = dnn.conv ins(%x, %v : tensor<1x1x32x16xf32>, tensor<2x1x3x3xf32>) {pads = array<i64: 1, 1, 1, 1>} : tensor<1x2x32x16xf32>
  %c = dnn.concat ins(%a, %b : tensor<1x2x32x16xf32>, tensor<1x2x32x16xf32>) {axis = 1 : i64} : tensor<1x4x32x16xf32>
  func.return %c : tensor<1x4x32x16xf32>
}

// -----

// Prefetch: at 64 KiB, w2 (40 KiB, above the half of the SRAM one prefetch may
// fill, but the first piece ahead) fits beside the first gemm's operands, so
// its load starts before that gemm and is waited on only after it: the DRAM
// port moves w2 while the first gemm computes.
// CHECK-LABEL: func.func @prefetch_a_large_weight
// CHECK:       dnn.dma_wait %w1_in
// CHECK-NEXT:  %w2_sram = dnn.mem_offset
// CHECK-NEXT:  %w2_in = dnn.dma_start ins(%w2 : memref<64x160xf32>) outs(%w2_sram : memref<64x160xf32>)
// CHECK-NEXT:  dnn.gemm ins(%x_sram, %w1_sram : memref<1x64xf32>, memref<64x64xf32>)
// CHECK-NEXT:  %y_sram = dnn.mem_offset
// CHECK-NEXT:  dnn.dma_wait %w2_in
// CHECK-NEXT:  dnn.gemm ins(%h_sram, %w2_sram : memref<1x64xf32>, memref<64x160xf32>)
// Negative: at 48 KiB w2 does not fit beside the first gemm's 16.5 KiB of
// operands, which that gemm reads (none may be evicted): w2's load starts
// only after the first gemm, and the second waits for it.
// NOPREFETCH-LABEL: func.func @prefetch_a_large_weight
// NOPREFETCH-NOT:   dnn.dma_start ins(%w2
// NOPREFETCH:       dnn.gemm ins(%x_sram, %w1_sram : memref<1x64xf32>, memref<64x64xf32>)
// NOPREFETCH:       %w2_in = dnn.dma_start ins(%w2 : memref<64x160xf32>)
// NOPREFETCH:       dnn.dma_wait %w2_in
// NOPREFETCH-NEXT:  dnn.gemm ins(%h_sram{{.*}}, %w2_sram : memref<1x64xf32>, memref<64x160xf32>)
func.func @prefetch_a_large_weight(%x: tensor<1x64xf32>) -> tensor<1x160xf32> {
  %w1 = "dnn.weight"() <{value = dense<1.0> : tensor<64x64xf32>}> : () -> tensor<64x64xf32>
  %w2 = "dnn.weight"() <{value = dense<1.0> : tensor<64x160xf32>}> : () -> tensor<64x160xf32>
  %h = dnn.gemm ins(%x, %w1 : tensor<1x64xf32>, tensor<64x64xf32>) : tensor<1x64xf32>
  %y = dnn.gemm ins(%h, %w2 : tensor<1x64xf32>, tensor<64x160xf32>) : tensor<1x160xf32>
  func.return %y : tensor<1x160xf32>
}

// -----

// An op without weights whose input does not fit (a global pool of 16 KiB
// at 10 KiB) runs in blocks of channels: each block loads its channels of
// the input (a subview of it in DRAM) and writes the same channels of the
// output (a subview of its SRAM buffer). Negative (CHECK, 64 KiB): the
// pool fits and runs whole.
// CHAINCAT-LABEL: func.func @global_pool
// CHAINCAT:       %x_sram = dnn.mem_offset %{{.*}} {npu.buffer = "b1:x:block0/9", {{.*}}} : memref<10240xi8> -> memref<1x2x16x16xf32>
// CHAINCAT-NEXT:  %[[X0:.*]] = dnn.subview %x {offset = 0 : i64} : memref<1x16x16x16xf32> -> memref<1x2x16x16xf32>
// CHAINCAT-NEXT:  %x_in = dnn.dma_start ins(%[[X0]] : memref<1x2x16x16xf32>) outs(%x_sram : memref<1x2x16x16xf32>)
// CHAINCAT:       %[[Y0:.*]] = dnn.subview %y_sram {offset = 0 : i64} : memref<1x16x1x1xf32> -> memref<1x2x1x1xf32>
// CHAINCAT-NEXT:  dnn.global_average_pool ins(%x_sram : memref<1x2x16x16xf32>) outs(%[[Y0]] : memref<1x2x1x1xf32>) {npu.reads = {{\[}}["x", "block0/9", 2048 : i64, 16384 : i64]], npu.writes = {{\[}}["y", "tile0.0/1x9", 8 : i64, 64 : i64]]
// CHAINCAT:       %[[Y1:.*]] = dnn.subview %y_sram {offset = 8 : i64} : memref<1x16x1x1xf32> -> memref<1x2x1x1xf32>
// CHAINCAT-NEXT:  dnn.global_average_pool ins(%x_sram_1 : memref<1x2x16x16xf32>) outs(%[[Y1]] : memref<1x2x1x1xf32>)
// CHECK-LABEL:    func.func @global_pool
// CHECK:          dnn.global_average_pool ins(%x_sram : memref<1x16x16x16xf32>) outs(%y_sram : memref<1x16x1x1xf32>) {npu.reads = {{\[}}["x", "all", 16384 : i64, 16384 : i64]]
// CHECK-NOT:      dnn.global_average_pool
func.func @global_pool(%x: tensor<1x16x16x16xf32>) -> tensor<1x16x1x1xf32> {
  %y = dnn.global_average_pool ins(%x : tensor<1x16x16x16xf32>) : tensor<1x16x1x1xf32>
  func.return %y : tensor<1x16x1x1xf32>
}

// -----

// A convolution whose every tile needs all 32 input channels (its filters
// and input, 2 KiB each, at 1 KiB) sums its output over blocks of input
// channels: each block loads its channels of the input (a subview) and of
// the filters (a strided copy: the filters seen with their input channels
// as rows); the first block adds the bias, each later one the partial sums
// of the blocks before it (as the residual), and only the last applies the
// ReLU and writes the tile itself. Negative (CHECK, 64 KiB): it fits and
// runs whole, once.
// SMALL-LABEL: func.func @input_channel_blocks
// SMALL:       %w_sram = dnn.mem_offset %{{.*}} {npu.buffer = "b1:w:in0:2/32", {{.*}}} : memref<1024xi8> -> memref<2x2x9xf32>
// SMALL-NEXT:  %[[W:.*]] = "dnn.view"(%w) : (memref<2x32x3x3xf32>) -> memref<2x32x9xf32>
// SMALL-NEXT:  %w_in = dnn.dma_start ins(%[[W]] : memref<2x32x9xf32>) outs(%w_sram : memref<2x2x9xf32>) {npu.piece = ["w", "in0:2/32", 144 : i64, 2304 : i64], {{.*}}rows = array<i64: 0, 2>}
// SMALL:       %[[X:.*]] = dnn.subview %x {offset = 0 : i64} : memref<1x32x4x4xf32> -> memref<1x2x4x4xf32>
// SMALL-NEXT:  %x_in = dnn.dma_start ins(%[[X]] : memref<1x2x4x4xf32>) outs(%x_sram : memref<1x2x4x4xf32>) {npu.piece = ["x", "in0:2/32", 128 : i64, 2048 : i64]
// SMALL:       %[[W0:.*]] = "dnn.view"(%w_sram) : (memref<2x2x9xf32>) -> memref<2x2x3x3xf32>
// SMALL-NEXT:  dnn.conv ins(%x_sram, %[[W0]], bias %b_sram : memref<1x2x4x4xf32>, memref<2x2x3x3xf32>, memref<2xf32>) outs(%y_sram : memref<1x2x4x4xf32>) {pads = array<i64: 1, 1, 1, 1>, npu.reads = {{.*}}, npu.writes = {{\[}}["y", "acc0/28|tile0.0/1x1", 128 : i64, 128 : i64]]
// SMALL:       dnn.conv ins(%x_sram_1, %{{.*}}, residual %y_sram : {{.*}}) outs(%y_sram_1 : memref<1x2x4x4xf32>) {pads = array<i64: 1, 1, 1, 1>, npu.reads = {{.*}}["y", "acc0/28|tile0.0/1x1", 128 : i64, 128 : i64]], npu.writes = {{\[}}["y", "acc1/28|tile0.0/1x1"
// SMALL:       dnn.conv ins({{.*}}, residual %{{.*}} : {{.*}}) outs(%{{.*}} : memref<1x2x4x4xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu", npu.reads = {{.*}}["y", "acc26/28|tile0.0/1x1", {{.*}}npu.writes = {{\[}}["y", "tile0.0/1x1", 128 : i64, 128 : i64]]
// SMALL-NOT:   dnn.conv
// SMALL:       func.return
// CHECK-LABEL: func.func @input_channel_blocks
// CHECK:       dnn.conv ins(%x_sram, %w_sram, bias %b_sram : memref<1x32x4x4xf32>, memref<2x32x3x3xf32>, memref<2xf32>) outs(%y_sram : memref<1x2x4x4xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu", npu.reads = {{\[}}["x", "all"
// CHECK-NOT:   dnn.conv
// CHECK:       func.return
func.func @input_channel_blocks(%x: tensor<1x32x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = "dnn.weight"() <{value = dense<1.0> : tensor<2x32x3x3xf32>}> : () -> tensor<2x32x3x3xf32>
  %b = "dnn.weight"() <{value = dense<0.5> : tensor<2xf32>}> : () -> tensor<2xf32>
  %y = dnn.conv ins(%x, %w, bias %b : tensor<1x32x4x4xf32>, tensor<2x32x3x3xf32>, tensor<2xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"} : tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}

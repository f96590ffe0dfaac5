// RUN: pyocc-opt %s --split-input-file --verify-diagnostics -p "convert-dnn-to-llvm{target=cuda}" | filecheck %s
// RUN: pyocc-opt %s --split-input-file --verify-diagnostics -p "convert-dnn-to-llvm{target=cuda pool_allocation=run}" | filecheck %s --check-prefix=OCCAMY
// RUN: pyocc-opt %s --split-input-file --verify-diagnostics -p "convert-dnn-to-llvm{target=cuda pool_allocation=sometimes}" 2>&1 | filecheck %s --check-prefix=BADOPT
// RUN: pyocc-opt %s --split-input-file --verify-diagnostics -p "convert-dnn-to-llvm{target=cuda conv_search=timed}" | filecheck %s --check-prefix=TIMED
// RUN: pyocc-opt %s --split-input-file --verify-diagnostics -p "convert-dnn-to-llvm{target=cuda conv_search=fastest}" 2>&1 | filecheck %s --check-prefix=BADSEARCH

// Pool mode, Occamy's Conv+ReLU fusion: init creates the handles and the
// descriptors once, allocates the planned pool (pool_allocation=init, the
// default), picks the algorithm and uploads the weights; run makes no
// cudaMalloc and no cudaFree: it reads the pool's address from a global,
// copies the input in, calls cudnnConvolutionBiasActivationForward on pool
// offsets and copies out; destroy frees the pool. Every call's status is
// checked: a failure returns the call's number.
// With pool_allocation=run (Occamy's way, OCCAMY) run allocates and frees
// the pool itself and init and destroy do not.

// BADOPT: pool-allocation must be init or run, got 'sometimes'

// With conv_search=timed (TIMED) init ranks the algorithms by running them
// (cudnnFindConvolutionForwardAlgorithm) instead of by cuDNN's heuristics.

// BADSEARCH: conv-search must be ranked or timed, got 'fastest'

func.func @conv_relu(%x: memref<1x3x8x8xf32> {onnx.name = "x"}, %y: memref<1x4x8x8xf32> {onnx.name = "y", dnn.output}) {
  %p = dnn.pool_init {size = 2048 : i64} : memref<2048xi8>
  %xs = dnn.mem_offset %p {offset = 0 : i64, size = 768 : i64} : memref<2048xi8> -> memref<1x3x8x8xf32>
  %t = dnn.mem_offset %p {offset = 1024 : i64, size = 1024 : i64} : memref<2048xi8> -> memref<1x4x8x8xf32>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 768 : i64}> : (memref<1x3x8x8xf32>, memref<1x3x8x8xf32>) -> ()
  %w = "dnn.weight"() <{value = dense_resource<w> : tensor<4x3x3x3xf32>}> : () -> memref<4x3x3x3xf32>
  %b = "dnn.weight"() <{splat = dense<0.02> : tensor<1xf32>}> : () -> memref<4xf32>
  dnn.conv ins(%xs, %w, bias %b : memref<1x3x8x8xf32>, memref<4x3x3x3xf32>, memref<4xf32>) outs(%t : memref<1x4x8x8xf32>) {pads = array<i64: 1, 1, 1, 1>, activation = "relu"}
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 1024 : i64}> : (memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) -> ()
  dnn.pool_release %p : memref<2048xi8>
  func.return
}

// CHECK:       llvm.mlir.global internal @conv_relu_stream(0 : i64)
// CHECK:       llvm.mlir.global internal @conv_relu_pool0(0 : i64)
// CHECK:       llvm.mlir.global internal constant @conv_relu_ints{{[0-9]+}}(dense<1> : tensor<2xi32>)
// CHECK:       llvm.mlir.global internal constant @conv_relu_meta_json("{{.*}}\22target\22:\22cuda\22{{.*}}cudnnConvolutionBiasActivationForward (dnn.conv #0){{.*}}\22memory\22:{\22allocations\22:0,\22peak_bytes\22:0},\22init_memory\22:{\22allocations\22:1,\22bytes\22:2048}{{.*}}")
// CHECK-LABEL: llvm.func @conv_relu_init(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32
// CHECK:         llvm.call @cudaStreamCreate
// CHECK:         llvm.call @cudnnCreate(
// CHECK:         llvm.call @cudnnSetStream
// CHECK:         %[[POOLSLOT:.*]] = llvm.mlir.addressof @conv_relu_pool0 : !llvm.ptr
// CHECK:         %[[SIZE:.*]] = llvm.mlir.constant(2048) : i64
// CHECK-NEXT:    llvm.call @cudaMalloc(%[[POOLSLOT]], %[[SIZE]])
// CHECK:         llvm.call @cudnnSetConvolutionNdDescriptor
// CHECK:         llvm.call @cudnnSetConvolutionGroupCount
// CHECK:         llvm.call @cudnnSetFilterNdDescriptor
// CHECK:         llvm.call @cudnnGetConvolutionForwardAlgorithm_v7
// CHECK:         llvm.select
// CHECK:         llvm.store %{{.*}}, %{{.*}} : i32, !llvm.ptr
// CHECK:         llvm.call @cudaMalloc
// CHECK:         llvm.call @cudaMemcpy(
// CHECK:       llvm.func @conv_relu_run(%[[IN:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr, %[[STATE:.*]]: !llvm.ptr) -> i32
// CHECK-NOT:     @cudaMalloc
// CHECK:         %[[X:.*]] = llvm.load %[[IN]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[Y:.*]] = llvm.load %[[OUT]] : !llvm.ptr -> !llvm.ptr
// CHECK-NOT:     @cudaMalloc
// CHECK:         %[[RUNSLOT:.*]] = llvm.mlir.addressof @conv_relu_pool0 : !llvm.ptr
// CHECK-NEXT:    %[[POOL:.*]] = llvm.load %[[RUNSLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[T:.*]] = llvm.getelementptr inbounds %[[POOL]][1024] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK:         llvm.call @cudaMemcpyAsync(%[[POOL]], %[[X]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK:         %[[S1:.*]] = llvm.call @cudnnConvolutionBiasActivationForward(%{{.*}}, %{{.*}}, %{{.*}}, %[[POOL]], {{.*}}, %[[T]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[T]])
// CHECK:         %[[N1:.*]] = llvm.mlir.constant({{[0-9]+}} : i32) : i32
// CHECK:         llvm.icmp "ne" %[[S1]]
// CHECK-NEXT:    llvm.cond_br %{{.*}}, ^[[FAIL:.*]](%[[N1]], %[[S1]] : i32, i32), ^{{.*}}
// CHECK-NOT:     @cudaMalloc
// CHECK-NOT:     @cudaFree
// CHECK:         llvm.call @cudaMemcpyAsync(%[[Y]], %[[T]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT:     @cudaMalloc
// CHECK-NOT:     @cudaFree
// CHECK:         llvm.call @cudaStreamSynchronize
// CHECK:       ^[[FAIL]](%[[CALL:.*]]: i32, %[[STATUS:.*]]: i32):
// CHECK-NEXT:    %[[WIDE:.*]] = llvm.sext %[[STATUS]] : i32 to i64
// CHECK-NEXT:    %[[SLOT4:.*]] = llvm.getelementptr inbounds %[[STATE]][4] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    llvm.store %[[WIDE]], %[[SLOT4]]
// CHECK-NEXT:    llvm.return %[[CALL]] : i32
// CHECK-LABEL: llvm.func @conv_relu_destroy
// CHECK:         %[[FREESLOT:.*]] = llvm.mlir.addressof @conv_relu_pool0 : !llvm.ptr
// CHECK-NEXT:    %[[FREEPOOL:.*]] = llvm.load %[[FREESLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:    llvm.call @cudaFree(%[[FREEPOOL]])
// CHECK:         llvm.call @cudnnDestroyConvolutionDescriptor
// CHECK:         llvm.call @cudnnDestroy(
// CHECK:         llvm.call @cudaStreamDestroy
// Only the library functions the code calls are declared: no cuBLAS here.
// CHECK:       llvm.func @cudaMalloc(!llvm.ptr, i64) -> i32
// CHECK:       llvm.func @cudnnConvolutionBiasActivationForward(
// CHECK-NOT:   llvm.func @cublas
// CHECK-NOT:   llvm.func @cudnnPoolingForward
// CHECK:       llvm.mlir.global internal constant @pyocc_functions_json

// TIMED-LABEL:   llvm.func @conv_relu_init
// TIMED-NOT:     @cudnnGetConvolutionForwardAlgorithm_v7
// TIMED:         llvm.call @cudnnFindConvolutionForwardAlgorithm
// TIMED-NOT:     @cudnnGetConvolutionForwardAlgorithm_v7
// TIMED-LABEL:   llvm.func @conv_relu_run

// OCCAMY-NOT:    @conv_relu_pool0
// OCCAMY:        llvm.mlir.global internal constant @conv_relu_meta_json("{{.*}}\22memory\22:{\22allocations\22:1,\22peak_bytes\22:2048},\22init_memory\22:{\22allocations\22:0,\22bytes\22:0}{{.*}}")
// OCCAMY-LABEL:  llvm.func @conv_relu_init
// OCCAMY-NOT:    @cudaMalloc
// OCCAMY:        llvm.call @cudnnGetConvolutionForwardAlgorithm_v7
// OCCAMY:        llvm.call @cudaMalloc
// OCCAMY:        llvm.call @cudaMalloc
// OCCAMY-NOT:    @cudaMalloc
// OCCAMY-LABEL:  llvm.func @conv_relu_run(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) -> i32
// OCCAMY:        %[[SLOT:.*]] = llvm.alloca
// OCCAMY:        %[[S0:.*]] = llvm.call @cudaMalloc(%[[SLOT]], %{{.*}}) : (!llvm.ptr, i64) -> i32
// OCCAMY:        %[[POOL:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> !llvm.ptr
// OCCAMY:        llvm.call @cudnnConvolutionBiasActivationForward
// OCCAMY:        llvm.call @cudaFree(%[[POOL]])
// OCCAMY:        llvm.call @cudaStreamSynchronize
// OCCAMY-LABEL:  llvm.func @conv_relu_destroy
// OCCAMY-NOT:    llvm.func
// OCCAMY:        llvm.call @cudaFree
// OCCAMY:        llvm.call @cudaFree
// OCCAMY-NOT:    @cudaFree
// OCCAMY:        llvm.func @cudaMalloc(!llvm.ptr, i64) -> i32

// -----

// Lazy mode: one cudaMalloc per buffer, each freed right after its last use;
// a conv without activation is convolution + bias add; a row-major gemm is
// the column-major product with the operands swapped (b first).

func.func @lazy_gemm(%x: memref<2x8xf32> {onnx.name = "x"}, %y: memref<2x4xf32> {onnx.name = "y", dnn.output}) {
  %xs = dnn.malloc {size = 64 : i64, alignment = 64 : i64} : memref<2x8xf32>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 64 : i64}> : (memref<2x8xf32>, memref<2x8xf32>) -> ()
  %w = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<4x8xf32>
  %t = dnn.malloc {size = 32 : i64, alignment = 64 : i64} : memref<2x4xf32>
  dnn.gemm ins(%xs, %w : memref<2x8xf32>, memref<4x8xf32>) outs(%t : memref<2x4xf32>) {trans_b = 1 : i64}
  dnn.dealloc %xs {size = 64 : i64} : memref<2x8xf32>
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 32 : i64}> : (memref<2x4xf32>, memref<2x4xf32>) -> ()
  dnn.dealloc %t {size = 32 : i64} : memref<2x4xf32>
  func.return
}

// CHECK-LABEL: llvm.func @lazy_gemm_init
// CHECK:         llvm.call @cublasCreate_v2
// CHECK:         llvm.call @cublasSetStream_v2
// CHECK:         llvm.call @cublasSetMathMode
// CHECK-LABEL: llvm.func @lazy_gemm_run
// CHECK:         llvm.call @cudaMalloc
// CHECK:         %[[XS:.*]] = llvm.load
// CHECK:         llvm.call @cudaMemcpyAsync(%[[XS]]
// CHECK:         %[[WB:.*]] = llvm.mlir.addressof @lazy_gemm_weights : !llvm.ptr
// CHECK-NEXT:    %[[W:.*]] = llvm.load %[[WB]] : !llvm.ptr -> !llvm.ptr
// CHECK:         llvm.call @cudaMalloc
// CHECK:         %[[T:.*]] = llvm.load
// CHECK:         %[[OPT:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK:         %[[OPN:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK:         %[[N:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK:         %[[M:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK:         %[[K:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK:         llvm.call @cublasSgemm_v2(%{{.*}}, %[[OPT]], %[[OPN]], %[[N]], %[[M]], %[[K]], %{{.*}}, %[[W]], %{{.*}}, %[[XS]], %{{.*}}, %{{.*}}, %[[T]], %{{.*}})
// CHECK:         llvm.call @cudaFree(%[[XS]])
// CHECK:         llvm.call @cudaMemcpyAsync(%{{.*}}, %[[T]]
// CHECK:         llvm.call @cudaFree(%[[T]])
// CHECK-NOT:     @cudaMalloc
// CHECK:         llvm.return
// CHECK:       llvm.func @cublasSgemm_v2(!llvm.ptr, i32, i32, i32, i32, i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i32) -> i32
// CHECK-NOT:   llvm.func @cudnnConvolutionBiasActivationForward
// CHECK:       llvm.mlir.global internal constant @pyocc_functions_json

// -----

// Negative twin: 8-bit integers (kernels take float32, int32, int64 and bool).

func.func @int8_add(%x: memref<4xi8> {onnx.name = "x"}, %y: memref<4xi8> {onnx.name = "y", dnn.output}) {
  %xs = dnn.malloc {size = 4 : i64, alignment = 64 : i64} : memref<4xi8>
  %t = dnn.malloc {size = 4 : i64, alignment = 64 : i64} : memref<4xi8>
  dnn.binary ins(%xs, %xs : memref<4xi8>, memref<4xi8>) outs(%t : memref<4xi8>) {fn = "add"}
  func.return
}

// CHECK: convert-dnn-to-llvm: cannot lower dnn.binary: target=cuda computes float32 tensors only; this op has memref<4xi8>

// -----

// Negative twin: a kernel reading a graph argument (host memory) directly.

func.func @host_pointer(%x: memref<4xf32> {onnx.name = "x"}, %y: memref<4xf32> {onnx.name = "y", dnn.output}) {
  dnn.unary ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) {fn = "relu"}
  func.return
}

// CHECK: convert-dnn-to-llvm: cannot lower dnn.unary: it reads or writes a graph argument, which is host memory on target=cuda

// -----

// Negative twin: a float op that neither cuDNN nor cuBLAS provides.

func.func @no_library(%x: memref<4x4xf32> {onnx.name = "x"}, %y: memref<4x6xf32> {onnx.name = "y", dnn.output}) {
  %xs = dnn.malloc {size = 64 : i64, alignment = 64 : i64} : memref<4x4xf32>
  %t = dnn.malloc {size = 96 : i64, alignment = 64 : i64} : memref<4x6xf32>
  dnn.pad ins(%xs : memref<4x4xf32>) outs(%t : memref<4x6xf32>) {pads = array<i64: 0, 1, 0, 1>}
  func.return
}

// CHECK: convert-dnn-to-llvm: cannot lower dnn.pad: no cuDNN, cuBLAS or copy lowering exists for this op on target=cuda yet (use target=host)

// -----

// What cuDNN lacks (here a broadcast division, then erf in place) runs as a kernel pyocc writes: init loads its PTX and
// looks the kernel up, run launches it on the stream.

func.func @divide(%x: memref<2x8xf32> {onnx.name = "x"}, %y: memref<2x8xf32> {onnx.name = "y", dnn.output}) {
  %xs = dnn.malloc {size = 64 : i64, alignment = 64 : i64} : memref<2x8xf32>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 64 : i64}> : (memref<2x8xf32>, memref<2x8xf32>) -> ()
  %d = "dnn.weight"() <{splat = dense<4.0> : tensor<1xf32>}> : () -> memref<8xf32>
  %t = dnn.malloc {size = 64 : i64, alignment = 64 : i64} : memref<2x8xf32>
  dnn.binary ins(%xs, %d : memref<2x8xf32>, memref<8xf32>) outs(%t : memref<2x8xf32>) {fn = "div"}
  dnn.unary ins(%t : memref<2x8xf32>) outs(%t : memref<2x8xf32>) {fn = "erf"}
  dnn.dealloc %xs {size = 64 : i64} : memref<2x8xf32>
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 64 : i64}> : (memref<2x8xf32>, memref<2x8xf32>) -> ()
  dnn.dealloc %t {size = 64 : i64} : memref<2x8xf32>
  func.return
}

// CHECK:       llvm.mlir.global internal constant @divide_ptx("{{.*}}.entry divide_k0({{.*}}.entry divide_k1({{.*}}")
// CHECK:       llvm.mlir.global internal constant @divide_meta_json("{{.*}}\22kernels\22:[{\22name\22:\22divide_k0\22,\22grid\22:1,\22block\22:256,\22pointer_bytes\22:[64,64,32]},{\22name\22:\22divide_k1\22{{.*}}")
// CHECK-LABEL: llvm.func @divide_init
// CHECK:         llvm.call @cuModuleLoadData
// CHECK:         llvm.call @cuModuleGetFunction
// CHECK:         llvm.call @cuModuleGetFunction
// CHECK-LABEL: llvm.func @divide_run
// CHECK:         %[[K0:.*]] = llvm.mlir.addressof @divide_kernel0
// CHECK-NEXT:    %[[F0:.*]] = llvm.load %[[K0]] : !llvm.ptr -> !llvm.ptr
// CHECK:         llvm.call @cuLaunchKernel(%[[F0]],
// CHECK:         %[[K1:.*]] = llvm.mlir.addressof @divide_kernel1
// CHECK:         llvm.call @cuLaunchKernel(
// CHECK-LABEL: llvm.func @divide_destroy
// CHECK:         llvm.call @cuModuleUnload

// -----

// ConvTranspose is cuDNN's backward data: x is dy, the output is dx (its 1x3x10x10 shape carries
// output_padding), w keeps its layout as the filter; init ranks the backward-data algorithms,
// run calls cudnnConvolutionBackwardData with beta 0, then adds the bias.

func.func @deconv(%x: memref<1x4x5x5xf32> {onnx.name = "x"}, %y: memref<1x3x10x10xf32> {onnx.name = "y", dnn.output}) {
  %p = dnn.pool_init {size = 2048 : i64} : memref<2048xi8>
  %xs = dnn.mem_offset %p {offset = 0 : i64, size = 400 : i64} : memref<2048xi8> -> memref<1x4x5x5xf32>
  %t = dnn.mem_offset %p {offset = 512 : i64, size = 1200 : i64} : memref<2048xi8> -> memref<1x3x10x10xf32>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 400 : i64}> : (memref<1x4x5x5xf32>, memref<1x4x5x5xf32>) -> ()
  %w = "dnn.weight"() <{splat = dense<0.1> : tensor<1xf32>}> : () -> memref<4x3x3x3xf32>
  %b = "dnn.weight"() <{splat = dense<0.02> : tensor<1xf32>}> : () -> memref<3xf32>
  dnn.conv_transpose ins(%xs, %w, bias %b : memref<1x4x5x5xf32>, memref<4x3x3x3xf32>, memref<3xf32>) outs(%t : memref<1x3x10x10xf32>) {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>}
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 1200 : i64}> : (memref<1x3x10x10xf32>, memref<1x3x10x10xf32>) -> ()
  dnn.pool_release %p : memref<2048xi8>
  func.return
}

// CHECK:       llvm.mlir.global internal constant @deconv_ints{{[0-9]+}}(dense<[1, 3, 10, 10]> : tensor<4xi32>)
// CHECK:       llvm.mlir.global internal constant @deconv_meta_json("{{.*}}cudnnConvolutionBackwardData (dnn.conv_transpose #0){{.*}}cudnnAddTensor (dnn.conv_transpose #0){{.*}}")
// CHECK-LABEL: llvm.func @deconv_init
// CHECK:         llvm.call @cudnnSetConvolutionNdDescriptor
// CHECK:         llvm.call @cudnnGetConvolutionBackwardDataAlgorithm_v7(
// CHECK:         llvm.call @cudaMalloc
// CHECK-LABEL: llvm.func @deconv_run
// CHECK:         %[[ALGO:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i32
// CHECK:         llvm.call @cudnnConvolutionBackwardData(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ALGO]],
// CHECK:         llvm.call @cudnnAddTensor(
// CHECK-LABEL: llvm.func @deconv_destroy
// CHECK:         llvm.call @cudaFree

// -----

// Negative twin: pads [0, 0] + [2, 2] crop only the end, which cuDNN's both-ends padding cannot express.

func.func @deconv_asymmetric(%x: memref<1x4x5x5xf32> {onnx.name = "x"}, %y: memref<1x3x5x5xf32> {onnx.name = "y", dnn.output}) {
  %xs = dnn.malloc {size = 400 : i64, alignment = 64 : i64} : memref<1x4x5x5xf32>
  %t = dnn.malloc {size = 300 : i64, alignment = 64 : i64} : memref<1x3x5x5xf32>
  %w = "dnn.weight"() <{splat = dense<0.1> : tensor<1xf32>}> : () -> memref<4x3x3x3xf32>
  dnn.conv_transpose ins(%xs, %w : memref<1x4x5x5xf32>, memref<4x3x3x3xf32>) outs(%t : memref<1x3x5x5xf32>) {pads = array<i64: 0, 0, 2, 2>}
  func.return
}

// CHECK: convert-dnn-to-llvm: cannot lower dnn.conv_transpose: pads [0, 0, 2, 2] with output size [5, 5]: cuDNN cannot pad the two ends differently here (the leading pads at both give a convolution from [5, 5] to [3, 3], not [5, 5]); use target=host

// -----

// A bilinear 2x Resize is two gemms by interpolation matrices stored with the weights: the width pass writes
// the workspace (init allocates at least its 4x4x8 floats), the height pass reads it, sharing Ah (stride 0).

func.func @upsample(%x: memref<2x3x4x4xf32> {onnx.name = "x"}, %y: memref<2x3x8x8xf32> {onnx.name = "y", dnn.output}) {
  %xs = dnn.malloc {size = 384 : i64, alignment = 64 : i64} : memref<2x3x4x4xf32>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 384 : i64}> : (memref<2x3x4x4xf32>, memref<2x3x4x4xf32>) -> ()
  %t = dnn.malloc {size = 1536 : i64, alignment = 64 : i64} : memref<2x3x8x8xf32>
  dnn.resize ins(%xs : memref<2x3x4x4xf32>) outs(%t : memref<2x3x8x8xf32>) {mode = "linear", scales = array<f32: 1.0, 1.0, 2.0, 2.0>}
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 1536 : i64}> : (memref<2x3x8x8xf32>, memref<2x3x8x8xf32>) -> ()
  func.return
}

// CHECK:       llvm.mlir.global internal constant @upsample_meta_json("{{.*}}cublasSgemm_v2 (dnn.resize #0)\22,\22cublasSgemmStridedBatched (dnn.resize #0){{.*}}\22workspace_limit\22:768{{.*}}")
// CHECK-LABEL: llvm.func @upsample_init
// CHECK:         llvm.call @cublasCreate_v2
// CHECK:         %[[NEEDED:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
// CHECK-NEXT:    %[[FLOOR:.*]] = llvm.mlir.constant(768) : i64
// CHECK-NEXT:    %[[BELOW:.*]] = llvm.icmp "ult" %[[NEEDED]], %[[FLOOR]] : i64
// CHECK-NEXT:    %[[SIZE:.*]] = llvm.select %[[BELOW]], %[[FLOOR]], %[[NEEDED]] : i1, i64
// CHECK:         llvm.call @cudaMalloc(%{{.*}}, %[[SIZE]])
// CHECK-LABEL: llvm.func @upsample_run
// CHECK:         %[[WSP:.*]] = llvm.mlir.addressof @upsample_workspace : !llvm.ptr
// CHECK-NEXT:    %[[WS:.*]] = llvm.load %[[WSP]] : !llvm.ptr -> !llvm.ptr
// CHECK:         llvm.call @cublasSgemm_v2(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[WS]], %{{[0-9]+}}) :
// CHECK:         llvm.call @cublasSgemmStridedBatched(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[WS]],

// -----

// Negative twin: resizing the channel axis has no cuBLAS lowering.

func.func @resize_channels(%x: memref<1x2x3x3xf32> {onnx.name = "x"}, %y: memref<1x4x3x3xf32> {onnx.name = "y", dnn.output}) {
  %xs = dnn.malloc {size = 72 : i64, alignment = 64 : i64} : memref<1x2x3x3xf32>
  %t = dnn.malloc {size = 144 : i64, alignment = 64 : i64} : memref<1x4x3x3xf32>
  dnn.resize ins(%xs : memref<1x2x3x3xf32>) outs(%t : memref<1x4x3x3xf32>) {mode = "nearest", scales = array<f32: 1.0, 2.0, 1.0, 1.0>}
  func.return
}

// CHECK: convert-dnn-to-llvm: cannot lower dnn.resize: it resizes axis 1, which has no cuBLAS lowering (the last two axes have; use target=host)

// -----

// DenseNet's pre-activation convolution with its planned scratch buffer
// (dnn-cuda-scratch), x read after it (so not pre-activated in place): the
// generated kernel writes relu(x * s[c] + t[c]) to the
// scratch buffer's start (pool + 2048), cudnnConvolutionForward reads it there
// and gets the rest as its workspace (pool + 2048 + 768, 4096 bytes; the
// algorithm init chooses fits those 4096). No workspace of init's own.

func.func @preact(%x: memref<1x3x8x8xf32> {onnx.name = "x"}, %y: memref<1x4x8x8xf32> {onnx.name = "y", dnn.output}) {
  %p = dnn.pool_init {size = 8192 : i64} : memref<8192xi8>
  %xs = dnn.mem_offset %p {offset = 0 : i64, size = 768 : i64} : memref<8192xi8> -> memref<1x3x8x8xf32>
  %t = dnn.mem_offset %p {offset = 1024 : i64, size = 1024 : i64} : memref<8192xi8> -> memref<1x4x8x8xf32>
  %ws = dnn.mem_offset %p {offset = 2048 : i64, size = 4864 : i64} : memref<8192xi8> -> memref<4864xi8>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 768 : i64}> : (memref<1x3x8x8xf32>, memref<1x3x8x8xf32>) -> ()
  %w = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<4x3x3x3xf32>
  %s = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<3xf32>
  dnn.preact_conv ins(%xs, %s, %s, %w : memref<1x3x8x8xf32>, memref<3xf32>, memref<3xf32>, memref<4x3x3x3xf32>) outs(%t, workspace %ws : memref<1x4x8x8xf32>, memref<4864xi8>) {pads = array<i64: 1, 1, 1, 1>, pre_activation = "relu"}
  %r = dnn.mem_offset %p {offset = 7168 : i64, size = 768 : i64} : memref<8192xi8> -> memref<1x3x8x8xf32>
  dnn.unary ins(%xs : memref<1x3x8x8xf32>) outs(%r : memref<1x3x8x8xf32>) {fn = "relu"}
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 1024 : i64}> : (memref<1x4x8x8xf32>, memref<1x4x8x8xf32>) -> ()
  dnn.pool_release %p : memref<8192xi8>
  func.return
}

// CHECK:       @preact_meta_json("{{.*}}cuLaunchKernel (dnn.preact_conv #0){{.*}}cudnnConvolutionForward (dnn.preact_conv #0){{.*}}\22workspace_limit\22:0{{.*}}\22pointer_bytes\22:[768,768,12,12]{{.*}}")
// CHECK-LABEL: llvm.func @preact_init
// CHECK-NOT:     (workspace)
// CHECK:         llvm.call @cudnnGetConvolutionForwardAlgorithm_v7
// CHECK:         %[[LIMIT:.*]] = llvm.mlir.constant(4096) : i64
// CHECK-NEXT:    llvm.icmp "ule" %{{.*}}, %[[LIMIT]] : i64
// CHECK-LABEL: llvm.func @preact_run
// CHECK:         %[[SLOT:.*]] = llvm.mlir.addressof @preact_pool0 : !llvm.ptr
// CHECK-NEXT:    %[[POOL:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[SCRATCH:.*]] = llvm.getelementptr inbounds %[[POOL]][2048] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK:         llvm.store %[[SCRATCH]], %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK:         llvm.call @cuLaunchKernel
// CHECK:         %[[WS:.*]] = llvm.getelementptr inbounds %[[SCRATCH]][768] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK-NEXT:    %[[WSBYTES:.*]] = llvm.mlir.constant(4096) : i64
// CHECK:         llvm.call @cudnnConvolutionForward(%{{.*}}, %{{.*}}, %{{.*}}, %[[SCRATCH]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[WS]], %[[WSBYTES]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-LABEL: llvm.func @preact_destroy
// CHECK-NOT:     (workspace)

// -----

// A pointwise (1x1) preact_conv whose input is read after it, on 200
// channels: pre-activated and multiplied by blocks of 64 channels through
// the block-sized scratch buffer. The first block, then the two full blocks
// after it as one loop (block k at channel 64 k), then the last 8 channels.

func.func @blocks(%x: memref<1x200x2x2xf32> {onnx.name = "x"}, %y: memref<1x4x2x2xf32> {onnx.name = "y", dnn.output}) {
  %p = dnn.pool_init {size = 8320 : i64} : memref<8320xi8>
  %xs = dnn.mem_offset %p {offset = 0 : i64, size = 3200 : i64} : memref<8320xi8> -> memref<1x200x2x2xf32>
  %t = dnn.mem_offset %p {offset = 3200 : i64, size = 64 : i64} : memref<8320xi8> -> memref<1x4x2x2xf32>
  %ws = dnn.mem_offset %p {offset = 4096 : i64, size = 1024 : i64} : memref<8320xi8> -> memref<1024xi8>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 3200 : i64}> : (memref<1x200x2x2xf32>, memref<1x200x2x2xf32>) -> ()
  %w = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<4x200x1x1xf32>
  %s = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<200xf32>
  dnn.preact_conv ins(%xs, %s, %s, %w : memref<1x200x2x2xf32>, memref<200xf32>, memref<200xf32>, memref<4x200x1x1xf32>) outs(%t, workspace %ws : memref<1x4x2x2xf32>, memref<1024xi8>) {pre_activation = "relu"}
  %r = dnn.mem_offset %p {offset = 5120 : i64, size = 3200 : i64} : memref<8320xi8> -> memref<1x200x2x2xf32>
  dnn.unary ins(%xs : memref<1x200x2x2xf32>) outs(%r : memref<1x200x2x2xf32>) {fn = "relu"}
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 64 : i64}> : (memref<1x4x2x2xf32>, memref<1x4x2x2xf32>) -> ()
  dnn.pool_release %p : memref<8320xi8>
  func.return
}

// CHECK-LABEL: llvm.func @blocks_run
// CHECK:         llvm.call @cuLaunchKernel
// CHECK:         llvm.call @cublasSgemm_v2
// CHECK:         %[[BEGIN:.*]] = llvm.mlir.constant(1) : i64
// CHECK-NEXT:    llvm.br ^[[HEAD:.*]](%[[BEGIN]] : i64)
// CHECK-NEXT:  ^[[HEAD]](%[[K:.*]]: i64):
// CHECK-NEXT:    %[[END:.*]] = llvm.mlir.constant(3) : i64
// CHECK-NEXT:    %[[MORE:.*]] = llvm.icmp "slt" %[[K]], %[[END]] : i64
// CHECK-NEXT:    llvm.cond_br %[[MORE]], ^[[BODY:.*]], ^[[EXIT:.*]]
// CHECK-NEXT:  ^[[BODY]]:
// CHECK-NEXT:    %[[BLOCK:.*]] = llvm.mlir.constant(64) : i64
// CHECK-NEXT:    %[[START:.*]] = llvm.mul %[[K]], %[[BLOCK]] : i64
// CHECK-NEXT:    %[[CHANNEL_BYTES:.*]] = llvm.mlir.constant(16) : i64
// CHECK-NEXT:    %[[X_OFFSET:.*]] = llvm.mul %[[START]], %[[CHANNEL_BYTES]] : i64
// CHECK-NEXT:    llvm.getelementptr %{{.*}}[%[[X_OFFSET]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK:         llvm.call @cuLaunchKernel
// CHECK:         llvm.call @cublasSgemm_v2
// CHECK:         %[[NEXT:.*]] = llvm.add %[[K]], %{{.*}} : i64
// CHECK-NEXT:    llvm.br ^[[HEAD]](%[[NEXT]] : i64)
// CHECK-NEXT:  ^[[EXIT]]:
// CHECK-NEXT:    llvm.getelementptr inbounds %{{.*}}[3072] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK:         llvm.call @cuLaunchKernel
// CHECK:         llvm.call @cublasSgemm_v2
// CHECK-NOT:     llvm.call @cuLaunchKernel
// CHECK-NOT:     llvm.call @cublasSgemm_v2
// CHECK-LABEL: llvm.func @blocks_destroy

// -----

// Negative twin: on 80 channels (64 + 16) no full block follows the first:
// two blocks, no loop.

func.func @two_blocks(%x: memref<1x80x2x2xf32> {onnx.name = "x"}, %y: memref<1x4x2x2xf32> {onnx.name = "y", dnn.output}) {
  %p = dnn.pool_init {size = 4352 : i64} : memref<4352xi8>
  %xs = dnn.mem_offset %p {offset = 0 : i64, size = 1280 : i64} : memref<4352xi8> -> memref<1x80x2x2xf32>
  %t = dnn.mem_offset %p {offset = 1280 : i64, size = 64 : i64} : memref<4352xi8> -> memref<1x4x2x2xf32>
  %ws = dnn.mem_offset %p {offset = 2048 : i64, size = 1024 : i64} : memref<4352xi8> -> memref<1024xi8>
  "dnn.memcpy"(%x, %xs) <{kind = "host_to_device", size = 1280 : i64}> : (memref<1x80x2x2xf32>, memref<1x80x2x2xf32>) -> ()
  %w = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<4x80x1x1xf32>
  %s = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<80xf32>
  dnn.preact_conv ins(%xs, %s, %s, %w : memref<1x80x2x2xf32>, memref<80xf32>, memref<80xf32>, memref<4x80x1x1xf32>) outs(%t, workspace %ws : memref<1x4x2x2xf32>, memref<1024xi8>) {pre_activation = "relu"}
  %r = dnn.mem_offset %p {offset = 3072 : i64, size = 1280 : i64} : memref<4352xi8> -> memref<1x80x2x2xf32>
  dnn.unary ins(%xs : memref<1x80x2x2xf32>) outs(%r : memref<1x80x2x2xf32>) {fn = "relu"}
  "dnn.memcpy"(%t, %y) <{kind = "device_to_host", size = 64 : i64}> : (memref<1x4x2x2xf32>, memref<1x4x2x2xf32>) -> ()
  dnn.pool_release %p : memref<4352xi8>
  func.return
}

// CHECK-LABEL: llvm.func @two_blocks_run
// CHECK-NOT:     llvm.icmp "slt"
// CHECK:         llvm.call @cuLaunchKernel
// CHECK-NOT:     llvm.icmp "slt"
// CHECK:         llvm.call @cublasSgemm_v2
// CHECK-NOT:     llvm.icmp "slt"
// CHECK:         llvm.getelementptr inbounds %{{.*}}[1024] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK-NOT:     llvm.icmp "slt"
// CHECK:         llvm.call @cuLaunchKernel
// CHECK-NOT:     llvm.icmp "slt"
// CHECK:         llvm.call @cublasSgemm_v2
// CHECK-NOT:     llvm.icmp "slt"
// CHECK-LABEL: llvm.func @two_blocks_destroy

// -----

// Negative twin: without its scratch buffer a preact_conv whose input is read
// after it does not lower on cuda.

func.func @preact_unplanned(%x: memref<1x3x8x8xf32> {onnx.name = "x"}, %y: memref<1x4x8x8xf32> {onnx.name = "y", dnn.output}) {
  %xs = dnn.malloc {size = 768 : i64, alignment = 64 : i64} : memref<1x3x8x8xf32>
  %t = dnn.malloc {size = 1024 : i64, alignment = 64 : i64} : memref<1x4x8x8xf32>
  %w = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<4x3x3x3xf32>
  %s = "dnn.weight"() <{splat = dense<0.5> : tensor<1xf32>}> : () -> memref<3xf32>
  dnn.preact_conv ins(%xs, %s, %s, %w : memref<1x3x8x8xf32>, memref<3xf32>, memref<3xf32>, memref<4x3x3x3xf32>) outs(%t : memref<1x4x8x8xf32>) {pads = array<i64: 1, 1, 1, 1>, pre_activation = "relu"}
  %r = dnn.malloc {size = 768 : i64, alignment = 64 : i64} : memref<1x3x8x8xf32>
  dnn.unary ins(%xs : memref<1x3x8x8xf32>) outs(%r : memref<1x3x8x8xf32>) {fn = "relu"}
  func.return
}

// CHECK: convert-dnn-to-llvm: cannot lower dnn.preact_conv: its pre-activated input needs a scratch buffer on target=cuda; run dnn-cuda-scratch first

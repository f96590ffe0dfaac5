"""The stand-in's CUDA runtime (memory, copies, streams) and driver API
(the generated kernels' modules and launches, run as their host twins).
"""

from __future__ import annotations

import ctypes

from pyocc.testing.fake_cuda.core import (
    _TWIN,
    CU_FUNCTION,
    CU_MODULE,
    MEMCPY_DEFAULT,
    STREAM,
    _invalid,
    _unsupported,
    ContractViolation,
    FakeCudaBase,
)


class CudaRuntime(FakeCudaBase):
    """cudaMalloc, cudaMemcpy*, streams; cuModule*, cuLaunchKernel."""

    # -- CUDA runtime ----------------------------------------------------------------

    def _cudaMalloc(self, devPtr: int, size: int) -> None:
        self._memory.require_host(devPtr, "devPtr")
        if size < 0:
            raise ContractViolation("alloc", f"size {size} (negative as size_t: {size % 2**64} B)")
        if size == 0:  # success, and a NULL pointer
            self._write_pointer(devPtr, 0, "devPtr")
            return
        try:
            address = self._memory.allocate(size)
        except MemoryError:
            raise ContractViolation("alloc", f"cannot allocate {size} B") from None
        self._write_pointer(devPtr, address, "devPtr")

    def _cudaFree(self, devPtr: int) -> None:
        if devPtr:
            self._memory.free(devPtr)

    def _memcpy_sides(self, dst: int, src: int, kind: int) -> tuple[bool, bool]:
        """(dst is device, src is device) as the copy kind says."""
        if kind == MEMCPY_DEFAULT:
            return self._memory.is_device(dst), self._memory.is_device(src)
        sides = {0: (False, False), 1: (True, False), 2: (False, True), 3: (True, True)}
        if kind not in sides:
            raise _invalid(f"kind {kind} is not a cudaMemcpyKind")
        return sides[kind]

    def _check_copy_side(self, address: int, nbytes: int, on_device: bool, what: str) -> None:
        if on_device:
            self._memory.require(address, nbytes, what)
        else:
            self._memory.require_host(address, what)

    def _copy(self, dst: int, src: int, count: int, kind: int, stream: int = 0) -> None:
        self._check_stream(stream)
        if count < 0:
            raise _invalid(f"count {count} is negative")
        dst_device, src_device = self._memcpy_sides(dst, src, kind)
        if count == 0:
            return
        self._check_copy_side(dst, count, dst_device, "dst")
        self._check_copy_side(src, count, src_device, "src")
        if dst_device and src_device and dst < src + count and src < dst + count and dst != src:
            raise _invalid(f"dst [{dst:#x}, +{count} B) and src [{src:#x}, +{count} B) overlap")
        ctypes.memmove(dst, src, count)

    def _cudaMemcpy(self, dst: int, src: int, count: int, kind: int) -> None:
        self._copy(dst, src, count, kind)

    def _cudaMemcpyAsync(self, dst: int, src: int, count: int, kind: int, stream: int) -> None:
        self._copy(dst, src, count, kind, stream)

    def _cudaMemcpy2DAsync(
        self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int, stream: int
    ) -> None:
        self._check_stream(stream)
        if min(dpitch, spitch, width, height) < 0:
            raise _invalid("a negative pitch, width or height")
        if width > dpitch or width > spitch:
            raise _invalid(f"width {width} exceeds dpitch {dpitch} or spitch {spitch} (cudaErrorInvalidPitchValue)")
        dst_device, src_device = self._memcpy_sides(dst, src, kind)
        if width == 0 or height == 0:
            return
        self._check_copy_side(dst, (height - 1) * dpitch + width, dst_device, "dst")
        self._check_copy_side(src, (height - 1) * spitch + width, src_device, "src")
        for row in range(height):
            ctypes.memmove(dst + row * dpitch, src + row * spitch, width)

    def _cudaStreamCreate(self, stream: int) -> None:
        self._create(stream, STREAM, params=True)

    def _cudaStreamSynchronize(self, stream: int) -> None:
        self._check_stream(stream)

    def _cudaStreamDestroy(self, stream: int) -> None:
        self._objects.destroy(stream, STREAM, "stream")

    # -- the driver API: pyocc's generated kernels ------------------------------------------
    # PTX cannot run on the CPU; each kernel's host twin (the same expression code
    # compiled for the host, pyocc.lowering.cuda_kernels) runs in its place, once
    # the runtime has registered it.

    def register_host_kernels(self, kernels: dict[str, tuple[int, list[int]]]) -> None:
        """Kernel name -> (address of its host twin, bytes each pointer argument
        spans), so that cuLaunchKernel can run and check it."""
        self._host_kernels.update(kernels)

    def _cuModuleLoadData(self, module: int, image: int) -> None:
        self._memory.require_host(image, "image")
        ptx = ctypes.string_at(image).decode()
        if ".entry" not in ptx:
            raise _invalid("the image holds no PTX kernel (.entry)")
        self._create(module, CU_MODULE, ptx)

    def _cuModuleGetFunction(self, hfunc: int, hmod: int, name: int) -> None:
        ptx = self._objects.get(hmod, CU_MODULE, "hmod").params
        kernel = ctypes.string_at(name).decode()
        if f".entry {kernel}(" not in ptx:
            raise ContractViolation("invalid", f"the module has no kernel {kernel!r} (CUDA_ERROR_NOT_FOUND)")
        self._write_pointer(hfunc, self._objects.create(CU_FUNCTION, (hmod, kernel)), "the output pointer")

    def _cuModuleUnload(self, hmod: int) -> None:
        self._objects.destroy(hmod, CU_MODULE, "hmod")
        for obj in self._objects.live():  # a module's functions go with it
            if obj.kind == CU_FUNCTION and obj.params[0] == hmod:
                obj.destroyed = True

    def _cuLaunchKernel(self, f: int, gridDimX: int, gridDimY: int, gridDimZ: int, blockDimX: int,
                        blockDimY: int, blockDimZ: int, sharedMemBytes: int, hStream: int, kernelParams: int,
                        extra: int) -> None:
        hmod, name = self._objects.get(f, CU_FUNCTION, "f").params
        self._objects.get(hmod, CU_MODULE, "the function's module")
        self._check_stream(hStream, "hStream")
        if name not in self._host_kernels:
            raise _unsupported(f"kernel {name!r} has no host twin registered (register_host_kernels)")
        if extra or not kernelParams:
            raise _invalid("pass the arguments in kernelParams, and extra as NULL")
        if not 1 <= blockDimX * blockDimY * blockDimZ <= 1024:
            raise _invalid(f"a block of {blockDimX * blockDimY * blockDimZ} threads (1 to 1024 allowed)")
        twin, pointer_bytes = self._host_kernels[name]
        for index, nbytes in enumerate(pointer_bytes):
            argument = ctypes.c_void_p.from_address(kernelParams + 8 * index).value or 0
            pointer = ctypes.c_void_p.from_address(argument).value or 0
            self._memory.require(pointer, nbytes, f"{name} argument {index}")
        threads = gridDimX * gridDimY * gridDimZ * blockDimX * blockDimY * blockDimZ
        _TWIN(twin)(kernelParams, 0, threads)

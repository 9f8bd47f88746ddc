"""CLBlast as this project loads it: pyclblast (the BLAS routines), and a
ctypes binding of what pyclblast does not wrap (declared in clblast_c.h):
CLBlastSim2col, CLBlastSconvgemm, and xGEMM with a temporary buffer of the
caller's (CLBlastSgemmWithTempBuffer, sized by CLBlastSGemmTempBufferSize),
which an engine allocates once instead of CLBlast allocating it per call.

Buffers and the queue are passed as the pyopencl objects' `int_ptr`
handles.  Every call's status is checked; a failure raises ClblastError
naming the status (e.g. CLBlastInvalidDimension) and the routine.  The
calls only enqueue work on the queue; they return nothing (time them with
markers around the call on an in-order profiling queue).
"""
from __future__ import annotations

import atexit
import ctypes

from nets.errors import UserError

try:
    import pyclblast
except ImportError as exc:   # the backends then report themselves unavailable with this reason
    pyclblast = None
    PYCLBLAST_ERROR = str(exc)
else:
    PYCLBLAST_ERROR = None


LIBRARY_NAMES = ("libclblast.so.1", "libclblast.so")   # Debian's libclblast1 first

# CLBlastKernelMode (clblast_c.h): the nets' convolution is a cross-correlation
CROSS_CORRELATION = 151

# CLBlastStatusCode (clblast_c.h), value -> (name, meaning)
STATUS = {
    0: ("CLBlastSuccess", "success"),
    -3: ("CLBlastOpenCLCompilerNotAvailable", "CL_COMPILER_NOT_AVAILABLE"),
    -4: ("CLBlastTempBufferAllocFailure", "CL_MEM_OBJECT_ALLOCATION_FAILURE"),
    -5: ("CLBlastOpenCLOutOfResources", "CL_OUT_OF_RESOURCES"),
    -6: ("CLBlastOpenCLOutOfHostMemory", "CL_OUT_OF_HOST_MEMORY"),
    -11: ("CLBlastOpenCLBuildProgramFailure", "CL_BUILD_PROGRAM_FAILURE: OpenCL compilation error"),
    -30: ("CLBlastInvalidValue", "CL_INVALID_VALUE"),
    -36: ("CLBlastInvalidCommandQueue", "CL_INVALID_COMMAND_QUEUE"),
    -38: ("CLBlastInvalidMemObject", "CL_INVALID_MEM_OBJECT"),
    -42: ("CLBlastInvalidBinary", "CL_INVALID_BINARY"),
    -43: ("CLBlastInvalidBuildOptions", "CL_INVALID_BUILD_OPTIONS"),
    -44: ("CLBlastInvalidProgram", "CL_INVALID_PROGRAM"),
    -45: ("CLBlastInvalidProgramExecutable", "CL_INVALID_PROGRAM_EXECUTABLE"),
    -46: ("CLBlastInvalidKernelName", "CL_INVALID_KERNEL_NAME"),
    -47: ("CLBlastInvalidKernelDefinition", "CL_INVALID_KERNEL_DEFINITION"),
    -48: ("CLBlastInvalidKernel", "CL_INVALID_KERNEL"),
    -49: ("CLBlastInvalidArgIndex", "CL_INVALID_ARG_INDEX"),
    -50: ("CLBlastInvalidArgValue", "CL_INVALID_ARG_VALUE"),
    -51: ("CLBlastInvalidArgSize", "CL_INVALID_ARG_SIZE"),
    -52: ("CLBlastInvalidKernelArgs", "CL_INVALID_KERNEL_ARGS"),
    -53: ("CLBlastInvalidLocalNumDimensions", "CL_INVALID_WORK_DIMENSION: too many thread dimensions"),
    -54: ("CLBlastInvalidLocalThreadsTotal", "CL_INVALID_WORK_GROUP_SIZE: too many threads in total"),
    -55: ("CLBlastInvalidLocalThreadsDim", "CL_INVALID_WORK_ITEM_SIZE: too many threads in one dimension"),
    -56: ("CLBlastInvalidGlobalOffset", "CL_INVALID_GLOBAL_OFFSET"),
    -57: ("CLBlastInvalidEventWaitList", "CL_INVALID_EVENT_WAIT_LIST"),
    -58: ("CLBlastInvalidEvent", "CL_INVALID_EVENT"),
    -59: ("CLBlastInvalidOperation", "CL_INVALID_OPERATION"),
    -61: ("CLBlastInvalidBufferSize", "CL_INVALID_BUFFER_SIZE"),
    -63: ("CLBlastInvalidGlobalWorkSize", "CL_INVALID_GLOBAL_WORK_SIZE"),
    -1024: ("CLBlastNotImplemented", "routine or functionality not implemented yet"),
    -1022: ("CLBlastInvalidMatrixA", "matrix A is not a valid OpenCL buffer"),
    -1021: ("CLBlastInvalidMatrixB", "matrix B is not a valid OpenCL buffer"),
    -1020: ("CLBlastInvalidMatrixC", "matrix C is not a valid OpenCL buffer"),
    -1019: ("CLBlastInvalidVectorX", "vector X is not a valid OpenCL buffer"),
    -1018: ("CLBlastInvalidVectorY", "vector Y is not a valid OpenCL buffer"),
    -1017: ("CLBlastInvalidDimension", "dimensions M, N and K have to be larger than zero"),
    -1016: ("CLBlastInvalidLeadDimA", "LD of A is smaller than the matrix's first dimension"),
    -1015: ("CLBlastInvalidLeadDimB", "LD of B is smaller than the matrix's first dimension"),
    -1014: ("CLBlastInvalidLeadDimC", "LD of C is smaller than the matrix's first dimension"),
    -1013: ("CLBlastInvalidIncrementX", "increment of vector X cannot be zero"),
    -1012: ("CLBlastInvalidIncrementY", "increment of vector Y cannot be zero"),
    -1011: ("CLBlastInsufficientMemoryA", "matrix A's OpenCL buffer is too small"),
    -1010: ("CLBlastInsufficientMemoryB", "matrix B's OpenCL buffer is too small"),
    -1009: ("CLBlastInsufficientMemoryC", "matrix C's OpenCL buffer is too small"),
    -1008: ("CLBlastInsufficientMemoryX", "vector X's OpenCL buffer is too small"),
    -1007: ("CLBlastInsufficientMemoryY", "vector Y's OpenCL buffer is too small"),
    -2050: ("CLBlastInsufficientMemoryTemp", "temporary buffer provided to GEMM routine is too small"),
    -2049: ("CLBlastInvalidBatchCount", "the batch count needs to be positive"),
    -2048: ("CLBlastInvalidOverrideKernel", "trying to override parameters for an invalid kernel"),
    -2047: ("CLBlastMissingOverrideParameter", "missing override parameter(s) for the target kernel"),
    -2046: ("CLBlastInvalidLocalMemUsage", "not enough local memory available on this device"),
    -2045: ("CLBlastNoHalfPrecision", "half precision (16-bits) not supported by the device"),
    -2044: ("CLBlastNoDoublePrecision", "double precision (64-bits) not supported by the device"),
    -2043: ("CLBlastInvalidVectorScalar", "the unit-sized vector is not a valid OpenCL buffer"),
    -2042: ("CLBlastInsufficientMemoryScalar", "the unit-sized vector's OpenCL buffer is too small"),
    -2041: ("CLBlastDatabaseError", "entry for the device was not found in the database"),
    -2040: ("CLBlastUnknownError", "a catch-all error code representing an unspecified error"),
    -2039: ("CLBlastUnexpectedError", "a catch-all error code representing an unexpected exception"),
}


class ClblastError(RuntimeError):
    """A CLBlast routine returned a status other than CLBlastSuccess."""

    def __init__(self, routine: str, status: int):
        self.routine = routine
        self.status = status
        self.status_name, meaning = STATUS.get(status, (f"unknown CLBlast status {status}", "not in clblast_c.h"))
        super().__init__(f"CLBlast {routine} failed: {self.status_name} ({status}): {meaning}")


class LibraryMissing(OSError):
    """libclblast could not be loaded; the message says what to install."""


_size = ctypes.c_size_t
_mem = ctypes.c_void_p
# channels, height, width, kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w
_GEOMETRY = [_size] * 11
_QUEUE_EVENT = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]

_lib = None


def load_library():
    """The loaded libclblast (once per process), or LibraryMissing."""
    global _lib
    if _lib is not None:
        return _lib
    errors = []
    for name in LIBRARY_NAMES:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError as exc:
            errors.append(str(exc))
    else:
        raise LibraryMissing(f"libclblast could not be loaded ({'; '.join(errors)}); "
                             f"install Debian's libclblast-dev (or libclblast1)")
    for fn, extra in (("CLBlastSim2col", []), ("CLBlastSconvgemm", [_size, _size])):
        if not hasattr(lib, fn):
            raise LibraryMissing(f"libclblast has no {fn}: CLBlast 1.5 or later is needed")
        f = getattr(lib, fn)
        buffers = [_mem, _size, _mem, _size] + ([_mem, _size] if fn == "CLBlastSconvgemm" else [])
        f.argtypes = [ctypes.c_int] + _GEOMETRY + extra + buffers + _QUEUE_EVENT
        f.restype = ctypes.c_int
    gemm_args = ([ctypes.c_int] * 3 + [_size] * 3 + [ctypes.c_float, _mem, _size, _size, _mem, _size, _size,
                                                      ctypes.c_float, _mem, _size, _size] + _QUEUE_EVENT)
    if hasattr(lib, "CLBlastSgemm"):
        lib.CLBlastSgemm.argtypes = gemm_args
        lib.CLBlastSgemm.restype = ctypes.c_int
    if hasattr(lib, "CLBlastSgemmWithTempBuffer"):
        lib.CLBlastSgemmWithTempBuffer.argtypes = gemm_args + [_mem]
        lib.CLBlastSgemmWithTempBuffer.restype = ctypes.c_int
        lib.CLBlastSGemmTempBufferSize.argtypes = ([ctypes.c_int] * 3 + [_size] * 9
                                                   + [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_size)])
        lib.CLBlastSGemmTempBufferSize.restype = ctypes.c_int
    if hasattr(lib, "CLBlastShad"):
        lib.CLBlastShad.argtypes = ([_size, ctypes.c_float, _mem, _size, _size, _mem, _size, _size, ctypes.c_float,
                                     _mem, _size, _size] + _QUEUE_EVENT)
        lib.CLBlastShad.restype = ctypes.c_int
    if hasattr(lib, "CLBlastClearCache"):
        # CLBlast keeps its compiled programs in a C++ static cache; released by
        # the static destructors at exit, after the OpenCL runtime may be gone,
        # they crashed Oclgrind ("corrupted double-linked list").  Release them
        # while Python is still shutting down instead.
        lib.CLBlastClearCache.restype = ctypes.c_int
        atexit.register(lib.CLBlastClearCache)
    _lib = lib
    return lib


class BufferTooSmall(ValueError):
    """A buffer cannot hold what a routine would read or write there.
    CLBlast 1.5 does not check im2col's buffers: on a CPU device an
    overrun corrupts host memory, so the sizes are checked here first."""


def output_size(size: int, kernel: int, pad: int, stride: int, dilation: int = 1) -> int:
    """im2col's output length along one axis, as CLBlast computes it."""
    span = (kernel - 1) * dilation + 1
    if size + 2 * pad < span:
        raise ValueError(f"window {span} is larger than the padded input {size + 2 * pad}")
    return (size + 2 * pad - span) // stride + 1


def _check_fits(routine: str, what: str, buf, offset: int, floats: int) -> None:
    have = buf.size // 4
    if offset + floats > have:
        raise BufferTooSmall(f"CLBlast {routine}: the {what} buffer holds {have} floats, "
                             f"but offset {offset} + {floats} floats are needed")


def _call(routine: str, fn, args, queue, event: bool = False):
    # No event is asked for (NULL) unless `event`: steps are timed with markers
    # around the call, as an event covers only the routine's last kernel.
    queue_handle = ctypes.c_void_p(queue.int_ptr)
    handle = ctypes.c_void_p()
    status = fn(*args, ctypes.byref(queue_handle), ctypes.byref(handle) if event else None)
    if status != 0:
        raise ClblastError(routine, status)
    if not event:
        return None
    import pyopencl as cl
    return cl.Event.from_int_ptr(handle.value, retain=False)   # ours to release: CLBlast made it for us


def im2col(queue, channels, height, width, kernel, pad, stride, im, im_offset, col, col_offset,
           mode=CROSS_CORRELATION, dilation=(1, 1)) -> None:
    """xIM2COL of one image of `channels` channels (offsets in floats).

    Writes a row-major (channels*kh*kw, oh*ow) matrix: row (c, fy, fx) holds
    tap (fy, fx) of channel c for every output pixel; padding reads zero.
    """
    lib = load_library()
    patches = (output_size(height, kernel[0], pad[0], stride[0], dilation[0])
               * output_size(width, kernel[1], pad[1], stride[1], dilation[1]))
    _check_fits("xIM2COL", "image", im, im_offset, channels * height * width)
    _check_fits("xIM2COL", "column", col, col_offset, channels * kernel[0] * kernel[1] * patches)
    args = [mode, channels, height, width, kernel[0], kernel[1], pad[0], pad[1], stride[0], stride[1],
            dilation[0], dilation[1], im.int_ptr, im_offset, col.int_ptr, col_offset]
    _call("xIM2COL", lib.CLBlastSim2col, args, queue)


def convgemm(queue, channels, height, width, kernel, pad, stride, num_kernels, batch,
             im, im_offset, weight, weight_offset, out, out_offset, mode=CROSS_CORRELATION, dilation=(1, 1)) -> None:
    """xCONVGEMM: NCHW input, KCHW weights -> NKHW output, overwritten (no beta, no bias)."""
    lib = load_library()
    patches = (output_size(height, kernel[0], pad[0], stride[0], dilation[0])
               * output_size(width, kernel[1], pad[1], stride[1], dilation[1]))
    _check_fits("xCONVGEMM", "image", im, im_offset, batch * channels * height * width)
    _check_fits("xCONVGEMM", "kernel", weight, weight_offset, num_kernels * channels * kernel[0] * kernel[1])
    _check_fits("xCONVGEMM", "result", out, out_offset, batch * num_kernels * patches)
    args = [mode, channels, height, width, kernel[0], kernel[1], pad[0], pad[1], stride[0], stride[1], dilation[0],
            dilation[1], num_kernels, batch, im.int_ptr, im_offset, weight.int_ptr, weight_offset, out.int_ptr,
            out_offset]
    _call("xCONVGEMM", lib.CLBlastSconvgemm, args, queue)


# CLBlastLayout and CLBlastTranspose (clblast_c.h)
_COL_MAJOR, _NO, _YES = 102, 111, 112


def gemm_as_tuned(queue, m, n, k, a, b, c, event: bool = False):
    """xGEMM in the layout the Xgemm kernel computes in (column major, A as
    is, B transposed; pyclblast offers row major only): C (m x n) = A (m x k)
    times B^T, B stored (n x k).  With sizes that are multiples of the tile,
    the routine runs the kernel alone, as CLBlast's tuner times it; with
    `event`, that kernel's event (else None)."""
    lib = load_library()
    _check_fits("xGEMM", "A", a, 0, m * k)
    _check_fits("xGEMM", "B", b, 0, n * k)
    _check_fits("xGEMM", "C", c, 0, m * n)
    args = [_COL_MAJOR, _NO, _YES, m, n, k, 1.0, a.int_ptr, 0, m, b.int_ptr, 0, n, 0.0, c.int_ptr, 0, m]
    return _call("xGEMM", lib.CLBlastSgemm, args, queue, event)


_ROW_MAJOR = 101


def gemm_temp_bytes(queue, m, n, k, a_ld, b_ld, c_ld) -> int:
    """The bytes of temporary buffer CLBlast's xGEMM wants for this row-major, untransposed call (as the backends
    make it through pyclblast.gemm), with the parameters in force now; 0 where it needs none."""
    lib = load_library()
    queue_handle = ctypes.c_void_p(queue.int_ptr)
    size = _size()
    status = lib.CLBlastSGemmTempBufferSize(_ROW_MAJOR, _NO, _NO, m, n, k, 0, a_ld, 0, b_ld, 0, c_ld,
                                            ctypes.byref(queue_handle), ctypes.byref(size))
    if status != 0:
        raise ClblastError("xGEMM temp-buffer size", status)
    return 4 * size.value   # CLBlast answers in elements


def gemm_with_temp(queue, m, n, k, a, b, c, temp, a_ld, b_ld, c_ld, alpha=1.0, beta=0.0) -> None:
    """pyclblast.gemm's row-major, untransposed call, with `temp` (allocated once by the caller, at least
    gemm_temp_bytes) as CLBlast's temporary buffer instead of one it would allocate on this call."""
    lib = load_library()
    _check_fits("xGEMM", "A", a, 0, (m - 1) * a_ld + k)
    _check_fits("xGEMM", "B", b, 0, (k - 1) * b_ld + n)
    _check_fits("xGEMM", "C", c, 0, (m - 1) * c_ld + n)
    args = [_ROW_MAJOR, _NO, _NO, m, n, k, alpha, a.int_ptr, 0, a_ld, b.int_ptr, 0, b_ld, beta, c.int_ptr, 0, c_ld]
    queue_handle = ctypes.c_void_p(queue.int_ptr)
    status = lib.CLBlastSgemmWithTempBuffer(*args, ctypes.byref(queue_handle), None,
                                            ctypes.c_void_p(temp.int_ptr if temp is not None else None))
    if status != 0:
        raise ClblastError("xGEMM", status)
def had(queue, n, x, y, z) -> None:
    """xHAD: z = x .* y (elementwise, n floats from offset 0 of each buffer); pyclblast has no binding."""
    lib = load_library()
    if not hasattr(lib, "CLBlastShad"):
        raise ClblastError("xHAD", -1024)
    for what, buf in (("x", x), ("y", y), ("z", z)):
        _check_fits("xHAD", what, buf, 0, n)
    args = [n, 1.0, x.int_ptr, 0, 1, y.int_ptr, 0, 1, 0.0, z.int_ptr, 0, 1]
    _call("xHAD", lib.CLBlastShad, args, queue)


def library_file() -> str | None:
    """The file the loaded libclblast came from (its name carries the
    version, e.g. libclblast.so.1.5.3), or None where it cannot be told."""
    load_library()
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.split()[-1]
                if "libclblast" in path.rsplit("/", 1)[-1]:
                    return path
    except OSError:
        pass
    return None


def check_library() -> str | None:
    """None when pyclblast imports and libclblast loads, else why not."""
    if pyclblast is None:
        return (f"pyclblast is not installed ({PYCLBLAST_ERROR}); pip install pyclblast "
                f"(it needs Debian's libclblast-dev)")
    try:
        load_library()
    except LibraryMissing as exc:
        return str(exc)
    return None


def require_library() -> None:
    reason = check_library()
    if reason:
        raise UserError(reason)

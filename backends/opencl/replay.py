"""A forward pass recorded once as an OpenCL command buffer (cl_khr_command_buffer) and
replayed: one host call per pass instead of one per kernel, the driver holding the kernels,
their arguments and NDRanges from the recording on.

pyopencl (2026.1) wraps no command buffer, so the extension's entry points are asked of the
ICD loader pyopencl uses (clGetExtensionFunctionAddressForPlatform) and called through ctypes
with the pyopencl objects' int_ptr.  The extension is provisional: the calls here are those of
its 0.9 versions, and a device offering another version is refused, as is one offering none.

Each recorded kernel waits on the sync point of the one before, so the replay runs in the
order the pass enqueued, whatever order the driver would otherwise allow.  A kernel's
arguments are taken when it is recorded (launch.py sets them once per launch), so the buffers
the pass reads and writes must stay those of the recording: the prepared net's own do.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pyopencl as cl

from nets.errors import Unsupported

EXTENSION = "cl_khr_command_buffer"
VERSION = (0, 9)   # the extension's major.minor whose calls these are

_i32, _u32, _vp, _sz = ctypes.c_int32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t
_P = ctypes.POINTER
_SIGNATURES = {   # name -> (restype, argtypes), as in cl_ext.h for the 0.9 versions
    "clCreateCommandBufferKHR": (_vp, [_u32, _P(_vp), _vp, _P(_i32)]),
    "clCommandNDRangeKernelKHR": (_i32, [_vp, _vp, _vp, _vp, _u32, _P(_sz), _P(_sz), _P(_sz), _u32, _P(_u32),
                                         _P(_u32), _vp]),
    "clFinalizeCommandBufferKHR": (_i32, [_vp]),
    "clEnqueueCommandBufferKHR": (_i32, [_u32, _P(_vp), _vp, _u32, _vp, _P(_vp)]),
    "clReleaseCommandBufferKHR": (_i32, [_vp]),
}


def _version(device) -> tuple[int, int] | None:
    """The (major, minor) of the extension the device offers, None when it offers none."""
    for ext in getattr(device, "extensions_with_version", None) or []:
        if ext.name == EXTENSION:
            return ext.version >> 22, (ext.version >> 12) & 0x3FF
    return (0, 9) if EXTENSION in device.extensions.split() else None   # an OpenCL 1.x driver names it only


def missing(device) -> str | None:
    """None when this device can replay a recorded pass here, else one line saying what it lacks."""
    found = _version(device)
    if found is None:
        return f"{device.name.strip()} does not offer {EXTENSION} (no command buffers to record a pass in)"
    if found[:2] != VERSION:
        return (f"{device.name.strip()} offers {EXTENSION} {found[0]}.{found[1]}; this recording is written for its "
                f"{VERSION[0]}.{VERSION[1]} calls")
    return None


def _loader():
    """The OpenCL ICD loader this process has loaded (pyopencl's own, in its wheel), else the system's."""
    maps = Path("/proc/self/maps")
    if maps.exists():
        for line in maps.read_text().splitlines():
            path = line.split()[-1] if "/" in line else ""
            if Path(path).name.startswith("libOpenCL"):
                return ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
    return ctypes.CDLL("libOpenCL.so.1")


_FUNCTIONS: dict[int, dict] = {}   # platform int_ptr -> name -> ctypes function


def _functions(platform) -> dict:
    if platform.int_ptr not in _FUNCTIONS:
        lookup = _loader().clGetExtensionFunctionAddressForPlatform
        lookup.restype, lookup.argtypes = _vp, [_vp, ctypes.c_char_p]
        found = {}
        for name, (restype, argtypes) in _SIGNATURES.items():
            address = lookup(_vp(platform.int_ptr), name.encode())
            if not address:
                raise Unsupported(f"{platform.name.strip()} names {EXTENSION} but gives no {name}")
            found[name] = ctypes.CFUNCTYPE(restype, *argtypes)(address)
        _FUNCTIONS[platform.int_ptr] = found
    return _FUNCTIONS[platform.int_ptr]


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with OpenCL error {status}")


class CommandBuffer:
    """One recorded sequence of kernels on a queue: add() while recording, finalize(), then
    enqueue() as often as wanted; release() when done."""

    def __init__(self, queue):
        why = missing(queue.device)
        if why:
            raise Unsupported(why)
        self.queue = queue
        self._fn = _functions(queue.device.platform)
        self._queue = (_vp * 1)(queue.int_ptr)
        err = _i32()
        handle = self._fn["clCreateCommandBufferKHR"](1, self._queue, None, ctypes.byref(err))
        if err.value != 0 or not handle:
            raise Unsupported(f"{queue.device.name.strip()} refused a command buffer on this queue "
                              f"(clCreateCommandBufferKHR: OpenCL error {err.value})")
        self.handle = _vp(handle)
        self.kernels = 0
        self._recorded = []   # the kernel objects recorded, kept alive as long as the recording
        self._last: _u32 | None = None   # the sync point of the kernel recorded last
        self._final = False

    def add(self, kernel, global_size: tuple, local_size: tuple | None, args: tuple = ()) -> None:
        """Record `kernel` (its arguments as set now) over `global_size`, after the kernel recorded before."""
        if self._final:
            raise RuntimeError("this command buffer is finalized; nothing more can be recorded in it")
        dims = len(global_size)
        glob = (_sz * dims)(*global_size)
        loc = (_sz * dims)(*local_size) if local_size else None
        wait = (_u32 * 1)(self._last.value) if self._last is not None else None
        point = _u32()
        _check(self._fn["clCommandNDRangeKernelKHR"](self.handle, None, None, _vp(kernel.int_ptr), dims, None, glob, loc,
                                                     1 if wait else 0, wait, ctypes.byref(point), None),
               f"recording {kernel.function_name}")
        self._last = point
        self._recorded.append(kernel)
        self.kernels += 1

    def finalize(self) -> None:
        _check(self._fn["clFinalizeCommandBufferKHR"](self.handle), "clFinalizeCommandBufferKHR")
        self._final = True

    def enqueue(self):
        """Replay the recording on its queue; returns its event (a pyopencl Event)."""
        event = _vp()
        _check(self._fn["clEnqueueCommandBufferKHR"](1, self._queue, self.handle, 0, None, ctypes.byref(event)),
               "clEnqueueCommandBufferKHR")
        return cl.Event.from_int_ptr(event.value, retain=False)

    def release(self) -> None:
        if self.handle is not None:
            handle, self.handle = self.handle, None
            self._fn["clReleaseCommandBufferKHR"](handle)
            self._recorded = []

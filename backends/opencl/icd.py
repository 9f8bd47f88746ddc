"""Which driver library provides an OpenCL platform, and an environment in
which a child process's OpenCL loader lists that platform alone.

A library that takes the first platform the loader lists (tinygrad's CL
device) is put on the device a run names this way: the child's loader
reads one ICD file, ours, naming the library of that platform.

The library is found by asking each ICD library the loader names (the
files of OCL_ICD_VENDORS or /etc/OpenCL/vendors, and OCL_ICD_FILENAMES)
for its platforms through the ICD entry point clIcdGetPlatformIDsKHR, and
matching the handles: a loader hands out the drivers' own platform handles
(its dispatch is through them), so the match is exact, not by name.  Only
libraries the loader has already loaded are asked (RTLD_NOLOAD): nothing
new is loaded into this process.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

from nets.errors import Unsupported

DEFAULT_VENDORS = "/etc/OpenCL/vendors"
_ICD_GET_PLATFORMS = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p),
                                      ctypes.POINTER(ctypes.c_uint32))


@dataclass(frozen=True)
class ClTarget:
    """One OpenCL device as a child process with its own loader finds it again:
    its platform's ICD library, the platform's and the device's names, and
    which of the platform's devices of that name it is (0: the first)."""

    library: str
    platform: str
    device: str
    ordinal: int


def icd_libraries(environ=os.environ) -> list[str]:
    """The driver libraries the loader may read: OCL_ICD_FILENAMES (the Khronos loader's), then what
    OCL_ICD_VENDORS names as ocl-icd reads it (a folder of ICD files, one ICD file, or a library
    itself), else the ICD files of OPENCL_VENDOR_PATH or /etc/OpenCL/vendors."""
    found = [p for p in environ.get("OCL_ICD_FILENAMES", "").split(":") if p]
    folder = Path(environ.get("OPENCL_VENDOR_PATH") or DEFAULT_VENDORS)
    named = environ.get("OCL_ICD_VENDORS") or ""
    if not named:
        files = sorted(folder.glob("*.icd")) if folder.is_dir() else []
    elif Path(named).is_dir():
        files = sorted(Path(named).glob("*.icd"))
    elif named.endswith(".icd"):
        files = [folder / named] if "/" not in named and (folder / named).is_file() else [Path(named)]
    else:
        files = []
        found.append(named)
    for f in files:
        try:
            line = f.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if line:
            found.append(line)
    return list(dict.fromkeys(found))


def _platform_handles(library: str) -> list[int]:
    """The platform handles `library` reports, if this process has it loaded; [] otherwise."""
    try:
        lib = ctypes.CDLL(library, mode=os.RTLD_NOLOAD)
    except OSError:
        return []   # not loaded here: the loader found no platform in it
    try:
        lookup = lib.clGetExtensionFunctionAddress
    except AttributeError:
        return []
    lookup.restype, lookup.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    address = lookup(b"clIcdGetPlatformIDsKHR")
    if not address:
        return []
    get = _ICD_GET_PLATFORMS(address)
    count = ctypes.c_uint32()
    if get(0, None, ctypes.byref(count)) != 0 or count.value == 0:
        return []
    handles = (ctypes.c_void_p * count.value)()
    if get(count.value, handles, None) != 0:
        return []
    return [h for h in handles if h]


def target_of(device) -> ClTarget:
    """The ClTarget of a pyopencl device, or Unsupported saying why it cannot be found again."""
    platform = device.platform
    libraries = icd_libraries()
    library = next((lib for lib in libraries if platform.int_ptr in _platform_handles(lib)), None)
    if library is None:
        raise Unsupported(f"no ICD library that this OpenCL loader reads ({', '.join(libraries) or 'none'}) "
                          f"reports the platform {platform.name.strip()!r}, so no child process can be given it alone")
    name = device.name.strip()
    same = [d for d in platform.get_devices() if d.name.strip() == name]
    ordinal = next(i for i, d in enumerate(same) if d.int_ptr == device.int_ptr)
    return ClTarget(library, platform.name.strip(), name, ordinal)


def alone_environment(target: ClTarget, folder: Path) -> dict[str, str | None]:
    """Environment changes (None: unset) under which a child's loader lists only `target`'s platform:
    an ICD folder of one file, written into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "only.icd").write_text(target.library + "\n", encoding="utf-8")
    return {"OCL_ICD_VENDORS": str(folder), "OCL_ICD_FILENAMES": None, "PYOPENCL_CTX": None}

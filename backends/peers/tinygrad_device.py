"""tinygrad on the OpenCL device a run names.

tinygrad's CL device takes the first platform the OpenCL loader lists
(tinygrad/runtime/ops_cl.py: its GPUs, else its default device), so it
runs in a child process (backends/isolated.py) whose loader lists the
named device's platform alone (backends/opencl/icd.py), with a fresh
tinygrad cache file (CACHEDB) of its own, seeded with the search's choices
(tinygrad_beam.py).  Inside, open_device finds the device again among
tinygrad's and refuses in one line where it is not the one asked for.
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import importlib.metadata
import importlib.util
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

from nets.errors import Unsupported

from ..isolated import Worker
from ..opencl.icd import ClTarget, alone_environment, target_of


def tinygrad_version() -> str | None:
    """The installed tinygrad's version, without importing it; None where it is missing."""
    if importlib.util.find_spec("tinygrad") is None:
        return None
    try:
        return importlib.metadata.version("tinygrad")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class Child:
    """A child process for tinygrad on one OpenCL device: its Worker, and the
    folder of its ICD file and cache, removed when it stops."""

    def __init__(self, device, label: str, screen: bool = False):
        self.target: ClTarget = target_of(device)
        self.folder = Path(tempfile.mkdtemp(prefix="compare-tinygrad-"))
        env = alone_environment(self.target, self.folder / "icd")
        self.target = _alone_on_nvidia(self.target, device, env)
        # a fresh cache: nothing of another run's compiled kernels or searches, only what is seeded into it;
        # tinygrad's own cache switches stay at their defaults, so the seeded choices are read
        env.update({"CACHEDB": str(self.folder / "cache.db"), "DEV": "CL", "CACHELEVEL": None,
                    "IGNORE_BEAM_CACHE": None, "BEAM": None, "JITBEAM": None})
        self.worker = Worker(label, env=env, screen=screen)   # a backend's child is screened, a search's not: backends/screen.py
        # the folder goes with the worker, which the prepared nets hold (it may outlive this object)
        self._remove = weakref.finalize(self.worker, shutil.rmtree, self.folder, True)

    def close(self) -> None:
        self.worker.close()
        self._remove()


def _alone_on_nvidia(target: ClTarget, device, env: dict) -> ClTarget:
    """The target as the child finds it, where the child can be shown that device alone.  tinygrad names its
    device by its place in the platform ('CL', 'CL:1', ...) and that name is inside every kernel's AST, so
    the key of a search's choice: on NVIDIA's platform the child sees only its GPU (CUDA_VISIBLE_DEVICES,
    whose order NVIDIA's OpenCL follows), so the device is 'CL' on every GPU of a machine and the choices
    made on one serve all (a farm's worker per GPU, a run on any of them)."""
    index = [d.int_ptr for d in device.platform.get_devices()].index(device.int_ptr)
    if not target.platform.startswith("NVIDIA") or index == 0:
        return target   # the first device of its platform is 'CL' already
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    visible = visible or [str(i) for i in range(index + 1)]
    if index >= len(visible):
        return target
    env["CUDA_VISIBLE_DEVICES"] = visible[index]
    return dataclasses.replace(target, ordinal=0)


@dataclass(frozen=True)
class OpenedDevice:
    """In the child: tinygrad's name for the device ('CL', 'CL:1') and what the device says of itself."""

    tinygrad: str
    name: str
    platform: str
    driver: str


def _address(handle) -> int:
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


def _devices(cl, platform, kind) -> list:
    try:
        return platform.get_devices(kind)
    except cl.Error:   # DEVICE_NOT_FOUND
        return []


def open_device(target: ClTarget) -> OpenedDevice:
    """In the child: tinygrad's CL device that is `target`, checked by its OpenCL handle and name."""
    import pyopencl as cl
    from tinygrad import Device
    from tinygrad.runtime.ops_cl import CLDevice

    listed = [p.name.strip() for p in cl.get_platforms()]
    if listed != [target.platform]:
        raise Unsupported(f"tinygrad's child process was to see the OpenCL platform {target.platform!r} alone, "
                          f"but its loader lists {listed}")
    same = [d for d in cl.get_platforms()[0].get_devices() if d.name.strip() == target.device]
    if target.ordinal >= len(same):
        raise Unsupported(f"the platform {target.platform!r} lists no device {target.device!r} in tinygrad's process")
    wanted = same[target.ordinal].int_ptr
    platform = cl.get_platforms()[0]
    takes = _devices(cl, platform, cl.device_type.GPU) or _devices(cl, platform, cl.device_type.DEFAULT)
    if wanted not in [d.int_ptr for d in takes]:
        raise Unsupported(f"tinygrad's CL device takes the GPUs of a platform, else its default device: "
                          f"{target.platform!r} gives it {', '.join(d.name.strip() for d in takes) or 'none'}, "
                          f"not {target.device!r}")
    first = Device["CL"]   # lists the platform's devices as tinygrad takes them
    handles = [_address(h) for h in CLDevice.device_ids]
    if wanted not in handles:
        names = ", ".join(Device["CL" if i == 0 else f"CL:{i}"].device_name for i in range(len(handles)))
        raise Unsupported(f"tinygrad's CL device takes the GPUs of platform {target.platform!r}, else its default "
                          f"device ({names}); {target.device!r} is not among them")
    index = handles.index(wanted)
    name = "CL" if index == 0 else f"CL:{index}"
    dev = first if index == 0 else Device[name]
    if dev.device_name.strip() != target.device or _address(dev.cl_dev) != wanted:
        raise Unsupported(f"tinygrad opened {dev.device_name!r} as {name}, not {target.device!r}")
    return OpenedDevice(name, dev.device_name.strip(), target.platform, dev.driver_version.strip())

"""OpenCV on the OpenCL device a run names, and where its tuning is kept.

OpenCV picks its OpenCL device once, from OPENCV_OPENCL_DEVICE
('PLATFORM:TYPE:DEVICE', read when it first touches OpenCL), so it runs in
a child process (backends/isolated.py) whose loader lists the named
device's platform alone (backends/opencl/icd.py) and whose
OPENCV_OPENCL_DEVICE names the device by its type and its index among the
platform's devices of that type (two cards of one name differ only so).
Inside, open_device checks that OpenCV's default device is the one asked
for and refuses in one line where not.  OPENCV_DNN_OPENCL_ALLOW_ALL_DEVICES
lets its DNN run OpenCL on a device other than an Intel GPU (else it
switches the target to the CPU, with a warning).

ocl4dnn's auto-tuning keeps one file per convolution shape in the folder
OPENCV_OCL4DNN_CONFIG_PATH names: ours is a folder per device in the user's
cache (backends/cache.py), written by `compare tune --scope opencv`.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

from nets.errors import Unsupported

from .. import cache
from ..store import DeviceId
from ..isolated import Worker
from ..opencl.icd import ClTarget, alone_environment, target_of

_TYPES = (("GPU", 4), ("CPU", 2), ("ACCELERATOR", 8))   # CL_DEVICE_TYPE_* bits


def opencv_version() -> str | None:
    """The installed OpenCV's version, without importing it; None where it is missing."""
    if importlib.util.find_spec("cv2") is None:
        return None
    for dist in ("opencv-python-headless", "opencv-python", "opencv-contrib-python-headless", "opencv-contrib-python"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


@dataclass(frozen=True)
class CvTarget:
    """One OpenCL device as OpenCV in a child finds it: the platform alone (`cl`), then the device's type
    and its index among the platform's devices of that type."""

    cl: ClTarget
    kind: str
    index: int

    @property
    def selector(self) -> str:
        return f":{self.kind}:{self.index}"


def target_for(device) -> CvTarget:
    """The CvTarget of a pyopencl device, or Unsupported saying why OpenCV cannot be given it."""
    cl_target = target_of(device)
    kind = next((name for name, bit in _TYPES if device.type & bit), None)
    if kind is None:
        raise Unsupported(f"OpenCV selects a GPU, CPU or accelerator; {cl_target.device!r} is none of them")
    bit = dict(_TYPES)[kind]
    same = [d for d in device.platform.get_devices() if d.type & bit]
    index = next(i for i, d in enumerate(same) if d.int_ptr == device.int_ptr)
    return CvTarget(cl_target, kind, index)


def tuning_folder(info: dict) -> Path:
    """The folder of ocl4dnn's tuned configurations on the device `info` describes (not created here)."""
    key = re.sub(r"[^A-Za-z0-9_.-]+", "_", DeviceId.of(info).key).strip("_")
    return cache.cache_dir() / "opencv" / key


class Child:
    """A child process for OpenCV on one OpenCL device: its Worker and the folder of its ICD file and
    models, removed when it stops."""

    def __init__(self, device, label: str, extra_env: dict[str, str | None] | None = None, screen: bool = False):
        self.target: CvTarget = target_for(device)
        self.folder = Path(tempfile.mkdtemp(prefix="compare-opencv-"))
        env = alone_environment(self.target.cl, self.folder / "icd")
        env.update({"OPENCV_OPENCL_DEVICE": self.target.selector, "OPENCV_DNN_OPENCL_ALLOW_ALL_DEVICES": "1",
                    "OPENCV_OPENCL_RUNTIME": None, "OPENCV_OCL4DNN_CONFIG_PATH": None,
                    "OPENCV_DNN_BACKEND_DEFAULT": None, "OPENCV_TRACE": None, **(extra_env or {})})
        self.worker = Worker(label, env=env, screen=screen)   # a backend's child is screened, a search's not: backends/screen.py
        self._remove = weakref.finalize(self.worker, shutil.rmtree, self.folder, True)

    def close(self) -> None:
        self.worker.close()
        self._remove()


@dataclass(frozen=True)
class OpenedDevice:
    """In the child: what OpenCV's default OpenCL device says of itself."""

    name: str
    platform: str
    driver: str
    opencl: str


def open_device(target: CvTarget) -> OpenedDevice:
    """In the child: OpenCV's default OpenCL device, checked to be `target` by its platform and name."""
    import cv2
    import pyopencl as cl
    listed = [p.name.strip() for p in cl.get_platforms()]
    if listed != [target.cl.platform]:
        raise Unsupported(f"OpenCV's child process was to see the OpenCL platform {target.cl.platform!r} alone, "
                          f"but its loader lists {listed}")
    if not cv2.ocl.haveOpenCL():
        raise Unsupported("OpenCV finds no OpenCL runtime in its process")
    cv2.ocl.setUseOpenCL(True)
    if not cv2.ocl.useOpenCL():
        raise Unsupported(f"OpenCV would not use OpenCL on {target.cl.device!r} (OPENCV_OPENCL_DEVICE="
                          f"{target.selector!r} selected no device)")
    dev = cv2.ocl.Device.getDefault()
    name = (dev.name() or "").strip()
    if name != target.cl.device:
        raise Unsupported(f"OpenCV opened {name or 'no device'!r} for OPENCV_OPENCL_DEVICE={target.selector!r}, "
                          f"not {target.cl.device!r}")
    return OpenedDevice(name, target.cl.platform, (dev.driverVersion() or "").strip(),
                        (dev.OpenCLVersion() or "").strip())

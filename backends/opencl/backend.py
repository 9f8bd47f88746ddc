"""The base of every backend that runs on an OpenCL device.  It is given
the device's Runtime, resolved once by whoever creates it (backends.get,
the runner; in a child process, backends/isolated.py from the device's
index), and says where it runs.  A backend adds its name, summary and
prepare(); the library versions it depends on, if any, in versions()."""
from __future__ import annotations

import pyopencl as cl

from ..base import Backend
from ..options import RunOptions
from .runtime import Runtime


class OpenCLBackend(Backend):
    uses_opencl = True

    def __init__(self, runtime: Runtime, options: RunOptions | None = None):
        super().__init__(options)
        self.runtime = runtime

    def versions(self) -> dict[str, str]:
        """Libraries beside pyopencl and the driver that this backend's results depend on."""
        return {}

    def info(self) -> dict:
        rt = self.runtime
        return {"device": rt.info["name"], "kind": "opencl", "platform": rt.info["platform"],
                "versions": {"pyopencl": cl.VERSION_TEXT, "driver": rt.info["driver"], **self.versions()}}

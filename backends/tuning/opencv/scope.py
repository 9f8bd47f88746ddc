"""The `opencv` scope of `compare tune`: OpenCV DNN's own auto-tuning of its
OpenCL convolutions (ocl4dnn) for the nets' layers on this device, its
files kept in the device's tuning folder (`opencv/<device>/`, its summary
written under the folder's lock) for the `opencv` backend's `opencl-tuned`
mode; search.py does the work, a net's pass at a time in a child on the
device."""
from __future__ import annotations

from nets.errors import UserError


def check(request, place) -> None:
    from ... import unavailable_reason
    why = unavailable_reason("opencv")
    if why:
        raise UserError(f"--scope opencv: OpenCV's DNN is UNAVAILABLE here ({why}); pip install '.[opencv]' "
                        f"(make setup installs it)")
    from ...peers.opencv_device import tuning_folder
    request.harness.check_writable(str(tuning_folder(request.runtime().info) / "compare-opencv.json"),
                                   "OpenCV's tuning folder")


def run(request, budget, place) -> list[str]:
    from . import search
    return search.tune(request.runtime(), request.nets, request.batch, budget, request.progress)


def show(request, place) -> str:
    from ... import unavailable_reason
    if unavailable_reason("opencv"):
        return "" if request.scopes is None else f"opencv: UNAVAILABLE here ({unavailable_reason('opencv')})"
    from ...peers.opencv_device import tuning_folder
    from . import search
    if request.scopes is None and not tuning_folder(request.runtime().info).is_dir():
        return ""   # nothing tuned here, and not asked for
    return "\n".join(search.show(request.runtime(), request.nets, request.batch))

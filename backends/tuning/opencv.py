"""The `opencv` scope of `compare tune`: OpenCV DNN's own auto-tuning of its
OpenCL convolutions (ocl4dnn) for the nets' layers on this device, its
files kept in the device's tuning folder for the `opencv` backend's
`opencl-tuned` mode (backends/peers/opencv_tune.py does the work)."""
from __future__ import annotations

from nets.errors import UserError


def _module():
    try:
        from ..peers import opencv_tune
    except ImportError as exc:
        raise UserError(f"--scope opencv: OpenCV's DNN is UNAVAILABLE here ({exc}): pip install '.[opencv]' "
                        f"(make setup installs it)") from None
    return opencv_tune


def check(request) -> None:
    _module().check(request.runtime())


def run(request, budget) -> list[str]:
    return _module().tune(request.runtime(), request.nets, request.batch, budget.seconds, request.progress)


def show(request) -> str:
    try:
        module = _module()
    except UserError as exc:
        return "" if request.scopes is None else str(exc)
    return module.show(request.runtime(), request.nets, request.batch)

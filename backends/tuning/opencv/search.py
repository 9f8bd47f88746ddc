"""OpenCV's own auto-tuning of its OpenCL convolutions (ocl4dnn), as a
scope of `compare tune`.

ocl4dnn tunes a convolution when OPENCV_OCL4DNN_CONFIG_PATH names an
existing folder that holds no configuration for it yet: on its first pass
it times its candidate kernels and writes the best to a file named after
the convolution's shape (vendor, compute units, kernel, channels, groups,
strides, dilations, input size rounded up to 16 and at most 256, padding,
batch, outputs...).  Its search
is its own: where the device lacks Intel's subgroups, its candidates are
its basic kernel alone ("fallback to basic kernel" in its log), and the
tuning records that one.

tune() runs each net's pass once in a child on the device with the
device's folder (backends/peers/opencv_device.tuning_folder) and
auto-tuning on; each
convolution's file is written as soon as it is tuned, so a budget that
stops the child mid-pass keeps what was done, and the next call goes on.
A run's `opencl-tuned` mode reads the folder with auto-tuning off
(OPENCV_OCL4DNN_DISABLE_AUTO_TUNING): nothing is tuned at run time.  The
depth it reports is how many of the pass's convolutions have a file, found
by their shape in the file names; what each net's tuning said of its
candidates is kept beside them (compare-opencv.json).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nets import Net
from nets.errors import PassTimeout, Unsupported, UserError

from ... import store
from ...peers.opencv_tuning import Tuning, net_key, tuning_line
from ..budget import Budget

BASIC = "fallback to basic kernel"


def tune_pass(target, net: Net, batch: int, folder: str, log: str) -> int:
    """In a child with auto-tuning on: one pass of `net` (seeded weights: the tuning reads only shapes),
    which tunes every convolution without a configuration; OpenCV's log into `log`.  How many
    convolutions fell back to the basic kernel (had no other candidate)."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import numpy as np

    from nets.weights import init_weights

    from ...peers import opencv_onnx
    from ...peers.opencv_device import open_device
    from ...peers.opencv_read import read_net
    open_device(target)
    import cv2
    path = Path(folder) / "tune.onnx"
    path.write_bytes(opencv_onnx.net_model(net, init_weights(net, 0), batch))
    cvnet = read_net(cv2, str(path))
    cvnet.setInput(np.zeros((batch,) + tuple(net.input_shape), np.float32))
    cvnet.forward()
    cv2.ocl.finish()
    return Path(log).read_text(errors="replace").count(BASIC)


def _device(rt_or_device):
    """The pyopencl device and its info dict, from a runtime or a device."""
    if hasattr(rt_or_device, "device") and hasattr(rt_or_device, "info"):
        return rt_or_device.device, rt_or_device.info
    from ...opencl.runtime import device_info
    return rt_or_device, device_info(rt_or_device)


def tune(rt_or_device, nets, batch: int | None, budget: Budget, progress) -> list[str]:
    """ocl4dnn's auto-tuning of every convolution of `nets` (Net objects or built-in names) at `batch`
    (None: each net's default) on the device, within `budget`; `progress(text)` is told what
    runs.  Summary lines, one per net and one for the folder."""
    import nets as builtin

    from ...peers.opencv_device import Child, opencv_version, tuning_folder
    if opencv_version() is None:
        raise UserError("--scope opencv needs OpenCV: pip install 'clblast-compare[opencv]'")
    device, info = _device(rt_or_device)
    tuning = Tuning(tuning_folder(info))
    store.make_folder(tuning.folder)
    lines = []
    for net in nets:
        net = builtin.get_net(net) if isinstance(net, str) else net
        b = batch or net.fixed_batch or net.default_batch
        before = tuning.depth(net, b)
        if before is None:
            lines.append(f"opencv: {net.name} at batch {b} has no convolution to tune")
            continue
        record = tuning.summary().get(net_key(net, b)) or {}
        if before[0] == before[1] or (record.get("complete") and record.get("tuned") == before[0]):
            lines.append(f"opencv: {net.name} at batch {b}: all of its {before[1]} convolutions that ocl4dnn tunes "
                         f"are tuned already ({before[0]})")
            continue
        left = budget.left()
        if budget.expired():
            lines.append(f"opencv: {net.name} at batch {b}: not started, the budget is spent "
                         f"({before[0]} of {before[1]} tuned)")
            continue
        progress(f"opencv: auto-tuning {net.name} at batch {b} ({before[1] - before[0]} convolutions to tune)")
        try:
            child = Child(device, "opencv tuning", {**tuning.environment(read_only=False), "OPENCV_LOG_LEVEL": "INFO"})
        except Unsupported as exc:
            raise UserError(f"--scope opencv: {exc}") from None
        log = Path(tempfile.mkdtemp(prefix="log-", dir=child.folder)) / "opencv.log"
        cut, basic = "", None
        t0 = budget.clock()
        try:
            basic = child.worker.request("func", __name__, "tune_pass", (child.target, net, b, str(child.folder),
                                                                        str(log)), timeout_s=max(left, 1.0))
        except PassTimeout:
            cut = ", cut short by the budget"
        except Unsupported as exc:
            raise UserError(f"--scope opencv: {exc}") from None
        finally:
            child.close()
        took = budget.clock() - t0
        after = tuning.depth(net, b)
        if basic is not None:
            # a whole pass tuned every convolution ocl4dnn tunes: the others (its depthwise path) it never will
            tuning.note(net, b, {"convolutions": after[1], "tuned": after[0], "basic_only": basic, "complete": True,
                                 "opencv": opencv_version()})
        never = (f"; the other {after[1] - after[0]} are not ocl4dnn's to tune (its whole pass tuned none of them)"
                 if basic is not None and after[0] < after[1] else "")
        lines.append(f"opencv: {net.name} at batch {b}: {after[0]} of {after[1]} convolutions tuned "
                     f"({after[0] - before[0]} now, {took:.0f} s{cut}){never}"
                     + (f"; its candidates were the basic kernel alone for {basic}" if basic else ""))
    lines.append(f"opencv: ocl4dnn's configurations in {tuning.folder} ({len(tuning.files())} files)")
    return lines


def show(rt_or_device, nets, batch: int | None) -> list[str]:
    """What is tuned for `nets` on the device, one line per net (for `compare tune --show`)."""
    import nets as builtin

    from ...peers.opencv_device import tuning_folder
    _, info = _device(rt_or_device)
    tuning = Tuning(tuning_folder(info))
    lines = []
    for net in nets:
        net = builtin.get_net(net) if isinstance(net, str) else net
        b = batch or net.fixed_batch or net.default_batch
        lines.append(f"opencv: {net.name} at batch {b}: {tuning_line(tuning, net, b, True)}")
    return lines

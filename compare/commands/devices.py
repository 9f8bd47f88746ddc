"""`compare devices`: the OpenCL platforms and devices, and which one a selection (or none) picks."""
from __future__ import annotations

from ..terminal import table as fit_table


def cmd_devices(args) -> int:
    from backends.opencl.runtime import all_devices, device_info, select_device
    chosen = select_device(args.device)
    found = []
    for index, _plat, dev in all_devices():
        info = device_info(dev)
        found.append({"index": index, "default": dev.int_ptr == chosen.int_ptr, **info})
    if args.json:
        from ..machine import emit
        emit("devices", {"devices": found})
        return 0
    # the driver's version and the work-group limit are in --json: here the columns a choice rests on
    rows = [["*" if d["default"] else "", d["index"], d["name"], d["platform"], d["type"],
             " ".join(d["opencl"].split()[:2]), d["compute_units"], f"{d['global_mem_bytes'] / 2**20:.0f}",
             f"{d['max_alloc_bytes'] / 2**20:.0f}"] for d in found]
    print(fit_table(rows, ["", "index", "device", "platform", "type", "OpenCL", "CUs", "memory MiB",
                           "max alloc MiB"]))
    print("\n* the device used by default (choose another with --device INDEX|NAME or PYOPENCL_CTX)")
    return 0

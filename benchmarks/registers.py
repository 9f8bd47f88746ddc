"""What NVIDIA's compiler gave each kernel a net's backend builds: registers a work-item, bytes spilled,
and the work-group the built kernel accepts, from ptxas's report (cl_nv_compiler_options' -cl-nv-verbose).
A kernel whose registers hold it below the work-group it asks for (`fused`'s LeNet-5 kernel: 256
work-items) shows here; so does one that spills.

    .venv/bin/python benchmarks/registers.py [--net lenet] [--batch 100] [--backends fused,vectorised-tiled]

Elsewhere (no cl_nv_compiler_options) it says so and stops: the report is NVIDIA's.
"""
from __future__ import annotations

import argparse
import re
import sys

import pyopencl as cl
from tabulate import tabulate

import backends
from backends.opencl.runtime import get_runtime
from backends.opencl.registers import EXTENSION
from nets import get_net
from nets.weights import init_weights


def _report(log: str) -> dict[str, dict]:
    """ptxas's lines, per kernel: {'kernel': {'registers': N, 'spill': 'S/L'}}."""
    out, name = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'|Function properties for (\S+)", line)
        if m:
            name = m.group(1) or m.group(2)
            out.setdefault(name, {})
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            out[name]["registers"] = int(m.group(1))
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name:
            out[name]["spill"] = f"{m.group(1)}/{m.group(2)}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--net", default="lenet")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--backends", default="fused,vectorised-tiled")
    args = ap.parse_args(argv)
    rt = get_runtime()
    if EXTENSION not in rt.device.extensions.split():
        print(f"{rt.info['name']} has no {EXTENSION}: no register report to read")
        return 0
    rows = []
    rt.extra_options = ("-cl-nv-verbose",)   # ptxas's report, in each program's build log
    net = get_net(args.net)
    weights = init_weights(net, 1)
    for name in args.backends.split(","):
        rt._programs.clear()   # built again, with the report
        rt._kernels.clear()
        backends.get(name).prepare(net, weights, args.batch).close()
        rows.append((f"== {name}", "", "", "", ""))
        for (_, opts), prog in rt._programs.items():
            rows += _row(rt, prog, opts)
    rt.extra_options = ()
    print(f"{rt.info['name']} (driver {rt.info['driver']}): {args.net} batch {args.batch}")
    print(tabulate(rows, headers=["kernel", "cap", "registers", "spill stores/loads (B)", "work-group limit"]))
    print(_largest_group(rt))
    return 0


def _row(rt, prog, opts: tuple) -> list[tuple]:
    """The report's lines for each kernel of program `prog` (built with `opts`)."""
    kernels = {k.function_name: k for k in prog.all_kernels()}
    caps = " ".join(o for o in opts if "maxrregcount" in o) or "-"
    return [(name, caps, info.get("registers"), info.get("spill", "0/0"),
             kernels[name].get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, rt.device)
             if name in kernels else "")
            for name, info in _report(prog.get_build_info(rt.device, cl.program_build_info.LOG)).items()]


def _largest_group(rt) -> str:
    """Whether the device runs the empty kernel in a work-group of its MAX_WORK_GROUP_SIZE, whatever the
    kernel's own WORK_GROUP_SIZE says."""
    kernel = rt.kernel("empty.cl", "empty")
    said = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, rt.device)
    most = int(rt.info["max_work_group_size"])
    buf = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, 4)
    kernel.set_args(buf)
    try:
        cl.enqueue_nd_range_kernel(rt.queue, kernel, (most,), (most,)).wait()
        ran = "ran"
    except cl.Error as exc:
        ran = f"refused ({str(exc).splitlines()[0]})"
    return f"the empty kernel: WORK_GROUP_SIZE {said}; a work-group of {most} (the device's most): {ran}"


if __name__ == "__main__":
    sys.exit(main())

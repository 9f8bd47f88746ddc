"""Does the device run kernels from two in-order queues at the same time?  A batch-1 pass leaves
most of a large GPU idle in its small layers (ResNet-18's 1x1 projections run 32-128 work-groups on
an H200's 132 compute units); a branch on a second queue could fill it, if the driver overlaps them.

Kernel `busy` (kernels/busy.cl) holds --groups work-groups of 256 work-items for a while.  Timed in
turn, --rounds times, each the host time from the first enqueue to the last finish:
  one      one kernel on queue 1;
  serial   two kernels on queue 1, one after the other;
  two      one kernel on queue 1 and one on queue 2, both flushed, then both finished;
  waits    three kernels, the second on queue 2 waiting for the first's event, the third on queue 1
           waiting for the second's (a branch and its join), against `serial3` (the three on queue 1).
Printed: medians in microseconds, serial/two (2x: the two kernels ran side by side; 1x: one after the
other) with its 95% interval, and the host cost of an enqueue that waits on another queue's event.

    .venv/bin/python benchmarks/two_queues.py [--groups 16] [--iters 20000] [--rounds 200]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pyopencl as cl

from backends.opencl.runtime import get_runtime
from compare.speedup import Speedup
from kernels import kernel_source

LOCAL = 256


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=16, help="work-groups of each kernel")
    ap.add_argument("--iters", type=int, default=20000, help="multiply-adds a work-item")
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args(argv)
    rt = get_runtime()
    q1, q2 = (cl.CommandQueue(rt.context) for _ in range(2))
    kernel = cl.Kernel(cl.Program(rt.context, kernel_source("busy.cl")).build(), "busy")
    y = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, LOCAL * args.groups * 4)
    kernel.set_args(y, np.float32(0.999), np.int32(args.iters))
    size = (LOCAL * args.groups,), (LOCAL,)

    def launch(queue, wait=None):
        return cl.enqueue_nd_range_kernel(queue, kernel, *size, wait_for=wait)

    def one():
        launch(q1)
        q1.finish()

    def serial():
        launch(q1)
        launch(q1)
        q1.finish()

    def two():
        launch(q1)
        launch(q2)
        q1.flush()
        q2.flush()
        q1.finish()
        q2.finish()

    def serial3():
        for _ in range(3):
            launch(q1)
        q1.finish()

    def waits():
        first = launch(q1)
        q1.flush()
        second = launch(q2, [first])
        q2.flush()
        launch(q1, [second])
        q1.finish()

    forms = {"one": one, "serial": serial, "two": two, "serial3": serial3, "waits": waits}
    us = {name: [] for name in forms}
    enqueue_us = {"plain": [], "waiting": []}
    for form in forms.values():   # untimed: builds, first launches
        form()
    for _ in range(args.rounds):
        for name, form in forms.items():
            start = time.perf_counter()
            form()
            us[name].append((time.perf_counter() - start) * 1e6)
        ev = launch(q1)   # the host cost of one enqueue, without and with a wait on the other queue
        start = time.perf_counter()
        launch(q1)
        enqueue_us["plain"].append((time.perf_counter() - start) * 1e6)
        start = time.perf_counter()
        launch(q2, [ev])
        enqueue_us["waiting"].append((time.perf_counter() - start) * 1e6)
        q1.finish()
        q2.finish()
    print(f"{rt.info['name']} ({rt.info['platform']}, driver {rt.info['driver']}): {args.groups} work-groups of "
          f"{LOCAL}, {args.iters} multiply-adds a work-item, median of {args.rounds} rounds (us)")
    for name, values in us.items():
        print(f"  {name:8s} {statistics.median(values):10.1f}")
    print(f"serial / two: {Speedup.of(us['serial'], us['two']).bounds()} (2x: side by side; 1x: one after the other)")
    print(f"serial3 / waits: {Speedup.of(us['serial3'], us['waits']).bounds()}")
    print("host cost of an enqueue (us): "
          + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in enqueue_us.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

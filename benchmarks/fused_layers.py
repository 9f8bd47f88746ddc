"""Where `fused`'s one kernel spends its time: the kernel of the net's first k layers, for each k, timed on
the device (its profiling events), so the step from k-1 to k is layer k's share inside the whole-net
kernel (its activations in local memory, as in the pass; the last layer of each prefix writes global
memory instead).  Each prefix's output is checked against the float64 oracle first.

    .venv/bin/python benchmarks/fused_layers.py [--net lenet] [--batch 100] [--repeats 200]

Printed per k: the prefix's median kernel time (us) and the step from the prefix before it.
"""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np
import pyopencl as cl
from tabulate import tabulate

import backends
from backends.opencl.runtime import get_runtime
from compare import oracle
from compare.checking import compare_arrays
from nets import Net, get_net
from nets.errors import Unsupported
from nets.weights import init_weights, make_input


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--net", default="lenet")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args(argv)
    rt = get_runtime()
    net = get_net(args.net)
    weights = init_weights(net, 1)
    x = make_input(net, args.batch, 2)
    refs = oracle.forward(net, weights, x)
    backend = backends.get("fused")
    rows, before = [], 0.0
    for k in range(1, len(net.layers) + 1):
        prefix = Net(f"{net.name}[:{k}]", net.input_shape, net.layers[:k])
        try:
            prepared = backend.prepare(prefix, weights, args.batch)
        except Unsupported as exc:
            print(f"first {k} layers: UNSUPPORTED ({str(exc).splitlines()[0]})")
            return 0
        try:
            if not compare_arrays(prepared.forward(x), refs[k - 1]).passed:
                print(f"first {k} layers: fails the check against the float64 oracle", file=sys.stderr)
                return 1
            launch, args_ = prepared.whole, (prepared.activations[0], prepared.activations[-1], *prepared.whole_args)
            kernel = launch.bound(args_)
            us = []
            for _ in range(args.repeats):   # on the profiling queue, one at a time: the kernel's own time
                event = cl.enqueue_nd_range_kernel(rt.queue, kernel, launch.global_, launch.local)
                event.wait()
                us.append((event.profile.end - event.profile.start) / 1e3)
            median = statistics.median(us)
            rows.append((k, net.layers[k - 1].name, net.layers[k - 1].kind, f"{median:.1f}", f"{median - before:+.1f}",
                         prepared.config["work_group"].split(" work-items")[0]))
            before = median
        finally:
            prepared.close()
    print(f"{net.name} batch {args.batch}, `fused`, on {rt.info['name']}: the kernel of the first k layers, median "
          f"of {args.repeats} (device time, us)")
    print(tabulate(rows, headers=["k", "layer k", "kind", "kernel us", "step", "work-items (build)"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

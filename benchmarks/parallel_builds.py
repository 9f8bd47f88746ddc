"""Do a prepare's kernel builds go faster side by side?  The first answer on a bare machine compiles every
program a backend's prepare needs, one after another (backends/opencl/runtime.py `program`); this measures
what building the same programs from threads would give on the device.

    .venv/bin/python benchmarks/parallel_builds.py [--net vgg16] [--backend vectorised-tiled] [--threads 1,4,8]
        [--device D]

The backend prepares the net once in this process (its programs recorded as it builds them); then every
recorded program is built again per thread count, each source with a fresh trailing comment so no driver
or library cache answers.  Printed: the prepare's own wall time and its builds' share, then per thread
count the wall time of all builds and the speedup against one thread."""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pyopencl as cl

import backends
from backends.opencl.runtime import Runtime, build_options
from nets import get_net
from nets.weights import init_weights


def record(net_name: str, backend_name: str, device: str | None):
    """(source, options) of every program the backend's prepare built, the prepare's seconds and theirs."""
    built, spent = [], [0.0]
    original = Runtime.program

    def program(self, source, defines=None, options=(), label="kernel"):
        opts = build_options(defines, options)
        fresh = (source, opts) not in built
        t0 = time.perf_counter()
        prog = original(self, source, defines, options, label)
        if fresh:
            built.append((source, opts))
            spent[0] += time.perf_counter() - t0
        return prog

    Runtime.program = program
    try:
        net = get_net(net_name)
        backend = backends.get(backend_name, device)
        t0 = time.perf_counter()
        prepared = backend.prepare(net, init_weights(net), 1)
        took = time.perf_counter() - t0
        prepared.close()
    finally:
        Runtime.program = original
    return backend.runtime.context, built, took, spent[0]


def build_all(context, programs, threads: int, tag: str) -> float:
    def one(item):
        source, opts = item
        cl.Program(context, f"{source}\n// {tag}\n").build(options=list(opts))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, programs))
    return time.perf_counter() - t0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", default="vgg16")
    parser.add_argument("--backend", default="vectorised-tiled")
    parser.add_argument("--threads", default="1,4,8")
    parser.add_argument("--device")
    args = parser.parse_args(argv)
    counts = [int(t) for t in args.threads.split(",")]
    context, programs, took, builds = record(args.net, args.backend, args.device)
    device = context.devices[0].name.strip()
    print(f"{args.backend} prepared {args.net} on {device} in {took:.1f} s: {len(programs)} programs built in "
          f"{builds:.1f} s ({100 * builds / took:.0f}%)")
    one = None
    for n in counts:
        wall = build_all(context, programs, n, f"rebuilt {time.time_ns()} by {n} threads")
        one = one or wall
        print(f"  {n:2d} threads: {wall:6.2f} s, {one / wall:4.2f}x of {counts[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a register cap on every kernel of a backend does to its pass: the backend prepared once per cap
(NVIDIA's -cl-nv-maxrregcount added to every build while it prepares, so the choices it measures at
prepare are made under the cap too), each prepared pass checked against the float64 oracle, then timed
as `compare run` times a pass's compute, the caps in turn, --rounds rounds of --passes passes.

ptxas picks a kernel's registers itself; a cap above what it picks can change its pick (benchmarks/
registers.py: `fused`'s LeNet-5 kernel, 32 registers as built, 110 with a cap of 248, and 0.035 ms
against 0.043 a pass).  Whether that holds for the GEMM and conv kernels is what this measures.

    .venv/bin/python benchmarks/register_caps.py [--net vgg16] [--batch 1] [--backend vectorised-tiled]
        [--caps 0,248,168,128] [--rounds 20] [--passes 10]

Cap 0: as built today.  Printed: each cap's median pass (ms) and its ratio to cap 0 with the 95% interval
(above 1x: the cap is faster).  Elsewhere (no cl_nv_compiler_options) it says so and stops.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from tabulate import tabulate

import backends
from backends.opencl.runtime import get_runtime
from backends.opencl.registers import EXTENSION
from compare import oracle
from compare.checking import compare_arrays
from compare.speedup import Speedup
from nets import get_net
from nets.weights import init_weights, make_input


def prepared_under(cap: int, backend, net, weights, batch):
    """`backend` prepared with every kernel it builds capped at `cap` registers (0: no cap), through the
    runtime's extra build options (for a backend that sets no cap of its own: `fused` does)."""
    rt = backend.runtime
    rt.extra_options = (f"-cl-nv-maxrregcount={cap}",) if cap else ()
    try:
        return backend.prepare(net, weights, batch)
    finally:
        rt.extra_options = ()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--net", default="vgg16")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--backend", default="vectorised-tiled")
    ap.add_argument("--caps", default="0,248,168,128")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--passes", type=int, default=10)
    args = ap.parse_args(argv)
    rt = get_runtime()
    if EXTENSION not in rt.device.extensions.split():
        print(f"{rt.info['name']} has no {EXTENSION}: no register cap to set")
        return 0
    net = get_net(args.net)
    weights = init_weights(net, 1)
    x = make_input(net, args.batch, 2)
    ref = oracle.forward(net, weights, x)[-1]
    backend = backends.get(args.backend)
    caps = [int(c) for c in args.caps.split(",")]
    nets, times = {}, {cap: [] for cap in caps}
    try:
        for cap in caps:
            t0 = time.perf_counter()
            nets[cap] = prepared_under(cap, backend, net, weights, args.batch)
            if not compare_arrays(nets[cap].forward(x), ref).passed:
                print(f"cap {cap}: fails the check against the float64 oracle", file=sys.stderr)
                return 1
            print(f"cap {cap}: prepared and checked in {time.perf_counter() - t0:.1f} s", flush=True)
        for _ in range(args.rounds):
            for cap, prepared in nets.items():
                prepared.timed_pass(x)   # untimed: the first after the others'
                times[cap].append(statistics.fmean(prepared.timed_pass(x)[0]["compute"]
                                                   for _ in range(args.passes)))
    finally:
        for prepared in nets.values():
            prepared.close()
    base = times[caps[0]]
    rows = [(cap or "as built", f"{statistics.median(t):.3f}", Speedup.of(base, t).bounds())
            for cap, t in times.items()]
    print(f"{args.net} batch {args.batch}, {args.backend}, on {rt.info['name']} (driver {rt.info['driver']}): "
          f"compute per pass, median of {args.rounds} rounds of the mean of {args.passes} passes")
    print(tabulate(rows, headers=["register cap", "ms", f"vs {caps[0] or 'as built'} (above 1x: faster)"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

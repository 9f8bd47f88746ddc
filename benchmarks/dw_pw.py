"""The depthwise -> 1x1 fold (backends/handwritten/dw_pw.py) against the two
kernels it replaces, on this device: the same net prepared with
fold_depthwise "always" and "never" (or the two --forms named), both checked
against the float64 oracle, then timed in turn (one pass of each,
alternating, so drift hits both alike).

    .venv/bin/python benchmarks/dw_pw.py [--net mobilenet-v2] [--backend vectorised] [--batch 1] [--repeats 10]
                                         [--forms always,measured]

Printed: the forward pass's device time (the sum of every step's profiling
event, each layer synced alone as in `compare run`) and its host wall time,
medians with the runs' range; the whole pass's compute time as `compare run`
takes it (every layer enqueued, one sync), median, and the ratio of the
second form's to the first's with its 95% interval; then, for "always"
against "never", per depthwise layer that folds, the
device time of the depthwise, its 1x1 and the 1x1's folded add (if any) in
each form, median and fastest pass, and their ratios (two kernels / folded:
above 1, the fold wins).  Where other work shares the device (a CPU), the
fastest passes are the steadier comparison.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from tabulate import tabulate

from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from backends.opencl.runtime import get_runtime
from backends.handwritten.dw_pw import FOLDS
from compare import oracle
from compare.checking import compare_arrays
from compare.speedup import Speedup
from nets import get_net
from nets.weights import init_weights, make_input

NETS = {"vectorised": VectorisedNet, "vectorised-tiled": TiledNet}


def _cells(ms: dict) -> list[str]:
    """Median and fastest of each form, and their ratios."""
    out = []
    for stat in (statistics.median, min):
        a, b = ms[("folded", stat)], ms[("two kernels", stat)]
        out += [f"{a:.3f}", f"{b:.3f}", f"{b / a:.2f}" if a else "-"]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--net", default="mobilenet-v2")
    p.add_argument("--backend", default="vectorised", choices=list(NETS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--forms", default="always,never", help=f"two of {', '.join(FOLDS)}, comma-separated")
    args = p.parse_args(argv)
    chosen = args.forms.split(",")
    if len(chosen) != 2 or len(set(chosen)) != 2 or any(c not in FOLDS for c in chosen):
        p.error(f"--forms takes two of {', '.join(FOLDS)}, not {args.forms!r}")
    rt = get_runtime()
    net = get_net(args.net)
    weights, x = init_weights(net, 0), make_input(net, args.batch, 0)
    want = oracle.forward(net, weights, x)[-1]
    pairs = chosen == ["always", "never"]   # the per-pair table compares exactly these
    names = {"always": "folded", "never": "two kernels", "measured": "measured"}
    forms = {names[c]: c for c in chosen}
    prepared = {name: NETS[args.backend](rt, net, weights, args.batch, fold_depthwise=on) for name, on in forms.items()}
    try:
        for name, pn in prepared.items():
            check = compare_arrays(pn.forward(x), want)
            print(f"{args.backend} {name}: {'PASS' if check.passed else 'FAIL'} rel L2 {check.rel_l2:.1e}")
            if not check.passed:
                return 1
        for name, pn in prepared.items():
            print(f"{rt.info['name']}, {name}: {len(pn.config['depthwise_fused'])} depthwise layers folded, "
                  f"{len(pn.config.get('depthwise_not_fused', {}))} not")
        device = {name: [] for name in forms}
        wall = {name: [] for name in forms}
        compute = {name: [] for name in forms}
        layers = {name: {} for name in forms}
        for _ in range(args.repeats):
            for name, pn in prepared.items():
                compute[name].append(pn.timed_pass(x)[0]["compute"])
                t0 = time.perf_counter()
                timings = pn.run_timed()
                wall[name].append((time.perf_counter() - t0) * 1e3)
                device[name].append(sum(t.kernel_ms or 0.0 for t in timings))
                for t in timings:
                    layers[name].setdefault(t.name, []).append(t.kernel_ms or 0.0)
        rows = [[name, f"{statistics.median(device[name]):.3f}",
                 f"{min(device[name]):.3f}-{max(device[name]):.3f}", f"{statistics.median(wall[name]):.2f}",
                 f"{statistics.median(compute[name]):.3f}"]
                for name in forms]
        print(tabulate(rows, ["form", "device ms (median)", "range", "wall ms (median)", "pass compute ms (median)"]))
        first, second = forms
        print(f"pass compute, {second} / {first}: {Speedup.of(compute[second], compute[first]).text()}"
              f" (above 1: {first} is faster)")
        if not pairs:
            return 0
        folded = prepared["folded"].config["depthwise_fused"]
        adds = prepared["folded"].config["residual_adds_fused"]
        rows, total = [], {(name, stat): 0.0 for name in forms for stat in (statistics.median, min)}
        for dw, text in folded.items():
            pw = text.split("'")[0].split()[-1]
            group = [dw, pw] + [add for add, where in adds.items() if where.startswith(f"into {pw}'s ")]
            ms = {}
            for name in forms:
                passes = [sum(values) for values in zip(*(layers[name][n] for n in group))]
                for stat in (statistics.median, min):
                    ms[(name, stat)] = stat(passes)
                    total[(name, stat)] += ms[(name, stat)]
            rows.append([" + ".join(group)] + _cells(ms))
        rows.append(["all of them"] + _cells(total))
        print(tabulate(rows, ["layers", "folded ms", "two kernels ms", "two kernels / folded",
                              "fastest: folded", "two kernels", "ratio"]))
    finally:
        for pn in prepared.values():
            pn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Winograd whose tile products are a batched GEMM (issue 46, item 1) against
the direct tiles and the one-kernel Winograd, per VGG-16 conv layer, in one run.

    .venv/bin/python benchmarks/winograd_gemm.py [--size 224] [--repeats 10] [--device 0:0]
        [--gpu-plans] [--peak-gflops G] [--json out.json]

Each conv layer of VGG-16 (batch 1; --size scales the 224 input, and every
map with it, for a slow device) is a one-layer net of `vectorised-tiled`,
prepared once per form:
- direct: the tiled implicit GEMM (winograd="never"), its tiles as
  `compare tune` measured them where it ran on this device, as the backend;
- local: the one-kernel Winograd, tile products summed in local memory
  ("F2", "F4", and on a GPU each one's second plan, "F2:1", "F4:1");
- gemm: transforms + batched GEMM + transform ("F2-gemm", "F4-gemm" and,
  on a GPU, the other GEMM tiles, ":1" to ":3");
- measured: the backend as it runs (winograd="measured"), whose choice
  at prepare and its candidates' times there are printed as recorded.
Every form's output is checked against the float64 oracle (compare/oracle.py).
Then rounds in turn (every form once a round, `--repeats` rounds); a
form's time is the median over the rounds of its layer's device time (the
sum of its kernels' profiling events; the net's layout conversions at the
edges left out).  Share of peak = the direct convolution's FLOPs (2 x
outputs x C x 9) over that time and the device's peak (compare/peak.py:
measured, cached, or --peak-gflops): the "effective" rate, which Winograd
can take past what its own arithmetic does.

--gpu-plans: on a CPU, plan as for a GPU (every candidate), to check them.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys

import numpy as np
from tabulate import tabulate

from backends.handwritten import vectorised
from backends.handwritten.tiled import TiledNet
from backends.handwritten.tiles_tuned import TunedTiles
from backends.opencl.runtime import get_runtime
from compare import oracle
from compare.checking import compare_arrays
from compare.peak import peak_for_run
from nets import Net, get_net
from nets.weights import init_weights, make_input

LOCAL = ("F2", "F2:1", "F4", "F4:1")
GEMM = tuple(f"F{m}-gemm{w}" for m in (2, 4) for w in ("", ":1", ":2", ":3"))


def one_layer(net: Net, index: int, size: int) -> Net:
    """Layer `index` alone, its input scaled by size / 224."""
    c, h, w = net.in_shape(index)
    scale = size / net.input_shape[1]
    layer = dataclasses.replace(net.layers[index], inputs=())
    return Net(f"{net.name}:{layer.name}", (c, max(1, round(h * scale)), max(1, round(w * scale))), (layer,))


def edge_steps(prepared) -> set[str]:
    """The steps of the net's layout conversions, which are not the layer's work."""
    return {op.convert.step for op in (prepared.ops[0], prepared.ops[-1]) if getattr(op, "convert", None)}


def layer_ms(prepared) -> float:
    (timing,) = prepared.run_timed()
    skip = edge_steps(prepared)
    if timing.kernel_ms is None:   # no device times on this driver: the host clock
        return timing.wall_ms
    return sum(s.ms for s in timing.steps if s.name not in skip)


def bare(op):
    """The layer's op inside the net's edge wrappers."""
    while hasattr(op, "op"):
        op = op.op
    return op


def prepare_forms(rt, one: Net, weights, name: str, tuned) -> dict:
    """{form name: prepared net}, each distinct form once; the direct tiles as `compare tune` left
    them for this device (`tuned`), as the backend runs them."""
    forms = {"direct": TiledNet(rt, one, weights, 1, tuned=tuned, winograd="never", pointwise="never")}
    for mode in LOCAL + GEMM:
        prepared = TiledNet(rt, one, weights, 1, tuned=tuned, winograd=mode, pointwise="never")
        record = prepared.config["winograd"][name]
        chosen = record["chosen"]
        if mode in LOCAL:   # a plan of the one-kernel form: its label tells the GPU's two apart
            chosen = f"{chosen} {bare(prepared.ops[0]).plan.label}"
        if chosen in forms or record["chosen"] == "direct":   # ":1" where the device has fewer plans
            prepared.close()
            continue
        forms[chosen] = prepared
    return forms


def kind(form: str) -> str:
    return "direct" if form == "direct" else "gemm" if "GEMM" in form else "local"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=224, help="input side (224: VGG-16's own)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--device")
    p.add_argument("--layers", help="comma-separated conv layers (default: all 13)")
    p.add_argument("--gpu-plans", action="store_true")
    p.add_argument("--peak-gflops", type=float)
    p.add_argument("--json", help="also write every time here")
    args = p.parse_args(argv)
    rt = get_runtime(args.device)
    if args.gpu_plans:
        vectorised.device_class = lambda info: "gpu"
    peak = peak_for_run(rt, args.peak_gflops)
    tuned = TunedTiles.for_device(rt.info)
    net = get_net("vgg16")
    wanted = set(args.layers.split(",")) if args.layers else None
    print(f"{rt.info['name']} ({rt.info['platform']}, {rt.info['compute_units']} compute units); VGG-16 batch 1 at "
          f"{args.size}x{args.size}; device time per layer, median of {args.repeats} rounds; peak "
          f"{peak['gflops']:.0f} GFLOP/s ({peak['source']}); % of peak at the direct conv's FLOPs", flush=True)
    rows, out = [], {}
    for index, layer in enumerate(net.layers):
        if layer.kind != "conv" or (wanted and layer.name not in wanted):
            continue
        one = one_layer(net, index, args.size)
        weights = init_weights(one, 0)
        x = make_input(one, 1, 0)
        ref = oracle.forward(one, weights, x)[-1]
        gflop = one.flops(1) / 1e9
        forms = prepare_forms(rt, one, weights, layer.name, tuned)
        measured = TiledNet(rt, one, weights, 1, tuned=tuned, pointwise="never")
        try:
            errors = {f: compare_arrays(pr.forward(x), ref) for f, pr in forms.items()}
            times = {f: [] for f in forms}
            for pr in forms.values():
                pr.load_input(x)
                layer_ms(pr)   # untimed
            for _ in range(args.repeats):
                for f, pr in forms.items():
                    times[f].append(layer_ms(pr))
            record = measured.config.get("winograd", {}).get(layer.name, {})
        finally:
            for pr in list(forms.values()) + [measured]:
                pr.close()
        ms = {f: statistics.median(t) for f, t in times.items()}

        def pct(t: float) -> float:
            return 100 * gflop / (t * 1e-3) / peak["gflops"]
        best = {k: min((f for f in ms if kind(f) == k), key=ms.get, default=None) for k in ("direct", "local", "gemm")}
        winner = min(ms, key=ms.get)
        failed = [f for f, r in errors.items() if not r.passed]
        print(f"\n{layer.name} ({one.input_shape[0]}x{one.input_shape[1]}x{one.input_shape[2]} -> "
              f"{layer.out_channels}, {gflop:.3f} GFLOP): " + ", ".join(
                  f"{f} {ms[f]:.4f} ms {pct(ms[f]):.1f}% (rel L2 {errors[f].rel_l2:.1e})"
                  for f in sorted(ms, key=ms.get)), flush=True)
        print(f"  chosen at prepare: {record.get('chosen', 'direct')}; its times there (ms): {record.get('ms', {})}")
        cells = [layer.name, f"{gflop:.3f}"]
        for k in ("direct", "local", "gemm"):
            f = best[k]
            cells += ["-", "-"] if f is None else [f"{ms[f]:.4f}", f"{pct(ms[f]):.1f}"]
        g, loc, d = (ms.get(best[k]) if best[k] else None for k in ("gemm", "local", "direct"))
        cells += [f"{d / g:.2f}x" if g and d else "-", f"{loc / g:.2f}x" if g and loc else "-",
                  winner, record.get("chosen", "direct"), "all PASS" if not failed else f"FAIL: {failed}"]
        rows.append(cells)
        out[layer.name] = {"gflop": gflop, "ms": ms, "percent_of_peak": {f: pct(t) for f, t in ms.items()},
                           "rel_l2": {f: r.rel_l2 for f, r in errors.items()}, "winner": winner,
                           "measured_choice": record}
    print()
    print(tabulate(rows, headers=["layer", "GFLOP", "direct ms", "%", "local ms", "%", "GEMM ms", "%",
                                  "direct/GEMM", "local/GEMM", "fastest here", "chosen at prepare", "checks"],
                   disable_numparse=True))
    print("\n%: share of the device's fp32 peak at the direct convolution's FLOPs; local/GEMM: the fastest "
          "one-kernel Winograd's time over the fastest GEMM form's (above 1x: the GEMM form is faster)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": rt.info["name"], "size": args.size, "repeats": args.repeats, "peak": peak,
                       "layers": out}, fh, indent=1)
    return 0 if all(r[-1] == "all PASS" for r in rows) else 1


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())

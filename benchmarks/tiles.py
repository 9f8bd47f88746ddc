"""Every tile and split of `vectorised-tiled` on every conv layer of VGG-16
(batch 1) and LeNet-5 (batch 100), on this device: the measurements behind
the rule in backends/handwritten/tiled_plan.py.

    .venv/bin/python benchmarks/tiles.py [--repeats 10] [--device 0:0] [--nets vgg16,lenet]

Per layer, a one-layer net with that layer's shapes is prepared once per
(tile, split) and checked against the float64 oracle (tiles wider than the
layer's channels, and splits past four work-groups per compute unit, are
left out); then the kernels'
device time (OpenCL profiling events, split sums with their adding kernel)
is the median of the repeats.  Printed per layer: GFLOP/s of every
candidate, the fastest, and the rule's choice with its ratio to the fastest.
"""
from __future__ import annotations

import argparse
import statistics
import sys

from tabulate import tabulate

from backends.opencl.runtime import get_runtime
from backends.handwritten.tiled import TiledNet
from backends.handwritten.layout import round_up
from backends.handwritten.tiled_plan import TILES, plan_conv
from compare import oracle
from compare.checking import compare_arrays
from nets.weights import init_weights, make_input
from nets import Net, get_net

SPLITS = (1, 2, 4, 8, 16)


def one_layer(net, index):
    layer = net.layers[index]
    return Net(f"{net.name}:{layer.name}", net.in_shape(index), (layer,))


def time_plan(rt, net, weights, batch, x, ref, repeats, tiles=TILES, ksplit=None):
    """(median ms, plan description, check passed) of one layer under one plan."""
    # the tile under test alone: no Winograd, no 1x1 kernel, no CPU vector-width kernel in its place
    prepared = TiledNet(rt, net, weights, batch, tiles, ksplit, winograd="never", pointwise="never", cpu_conv="never")
    try:
        passed = compare_arrays(prepared.forward(x), ref).passed
        prepared.load_input(x)
        prepared.run_timed()
        ms = statistics.median(prepared.run_timed()[0].kernel_ms for _ in range(repeats))
        return ms, prepared.config["layers"][net.layers[0].name], passed
    finally:
        prepared.close()


def sweep(rt, net_name, batch, repeats):
    full = get_net(net_name)
    batch = batch or full.default_batch
    rows = []
    for index, layer in enumerate(full.layers):
        if layer.kind != "conv":
            continue
        net = one_layer(full, index)
        weights = init_weights(net, 0)
        x = make_input(net, batch, 0)
        ref = oracle.forward(net, weights, x)[-1]
        gflop = net.flops(batch) / 1e9
        results = {}
        src = (batch,) + tuple(net.in_shape(0))
        for tile in TILES:
            if tile.tn > round_up(layer.out_channels, 4):
                continue   # wider than the layer: idle work-items only
            whole = plan_conv(batch * net.output_shape[1] * net.output_shape[2], round_up(layer.out_channels, 4),
                              round_up(src[1], 4), layer.kernel[0] * layer.kernel[1], rt.info["compute_units"],
                              True, 1024, (1024, 1024, 64), (tile,), 1)
            for split in SPLITS:
                if split > 1 and whole.groups * split > 4 * rt.info["compute_units"]:
                    break   # enough work-groups already: a split only adds the adding kernel
                try:
                    ms, plan, passed = time_plan(rt, net, weights, batch, x, ref, repeats, (tile,), split)
                except Exception as exc:  # noqa: BLE001 - a plan the device refuses is a row, not the end
                    print(f"{layer.name} {tile} split {split}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    continue
                results[(str(tile), split)] = (ms, passed)
        chosen_ms, chosen, _ = time_plan(rt, net, weights, batch, x, ref, repeats)
        best = min(results, key=lambda k: results[k][0])
        failed = [k for k, (_, ok) in results.items() if not ok]
        rows.append([layer.name, f"{gflop:.2f}", f"{best[0]} /{best[1]}", f"{results[best][0]:.3f}",
                     f"{gflop / results[best][0] * 1e3:.0f}", f"{chosen['tile']} /{chosen['split']}",
                     f"{chosen_ms:.3f}", f"{chosen_ms / results[best][0]:.2f}x",
                     "all PASS" if not failed else f"FAIL: {failed}"])
        detail = sorted(results.items(), key=lambda kv: kv[1][0])
        print(f"\n{net_name} {layer.name}: " + ", ".join(f"{t} /{s} {gflop / ms * 1e3:.0f}"
                                                      for (t, s), (ms, _) in detail) + " GFLOP/s", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--device")
    p.add_argument("--nets", default="vgg16,lenet")
    args = p.parse_args(argv)
    rt = get_runtime(args.device)
    print(f"{rt.info['name']} ({rt.info['platform']}, {rt.info['compute_units']} compute units); "
          f"kernel time, median of {args.repeats}")
    for name in args.nets.split(","):
        rows = sweep(rt, name, None, args.repeats)
        print()
        print(tabulate(rows, headers=[f"{name} layer", "GFLOP", "fastest tile /split", "ms", "GFLOP/s",
                                      "rule's choice", "ms", "vs fastest", "checks"], disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

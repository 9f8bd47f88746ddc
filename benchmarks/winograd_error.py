"""Winograd's error against the float64 oracle (compare/oracle.py), per tile
size, on every 3x3 stride-1 convolution the nets pose and on random ones.

Each net is prepared with every such conv forced to F(2x2,3x3), then to
F(4x4,3x3) (backends/handwritten/winograd.py, winograd="F2"/"F4"), and with
none (the direct kernel, for scale); each of those layers is fed the
oracle's input to it (the net's own activations on its seeded input) and
its output compared with the oracle's, as `compare check` compares layers;
the whole net's output is compared too.  Then RANDOM single convolutions
at shapes the nets do not have (channels 1-96 in and out, 3-33 pixels a
side, asymmetric padding 0-2, batch 1-3, every activation), on fresh
standard-normal inputs.  Printed: each layer's relative L2 error per form,
and the worst per tile size against the float32 tolerance (1e-4).

    .venv/bin/python benchmarks/winograd_error.py [--nets vgg16,resnet18,mobilenet-v2] [--random 40]
        [--backend vectorised] [--gpu-plans]

--gpu-plans: plan the kernels as for a GPU (both candidate plans, the
positions split or not: "F2:1"/"F4:1"), whatever the device; the sums run
in another order there.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from tabulate import tabulate

from backends.handwritten import vectorised
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from backends.handwritten.winograd_math import applies
from backends.opencl.runtime import get_runtime
from compare import oracle
from compare.checking import TOLERANCE, compare_arrays
from nets import ACTIVATIONS, Conv, Net, get_net
from nets.weights import init_weights, make_input

NETS = {"vectorised": VectorisedNet, "vectorised-tiled": TiledNet}


def winograd_layers(net: Net) -> list[int]:
    return [i for i, layer in enumerate(net.layers) if applies(layer, net.in_shape(i)[0])]


def layer_errors(cls, rt, net: Net, weights, x, ref, forms) -> tuple[dict, dict]:
    """{form: {layer: rel L2}} for the Winograd layers fed the oracle's inputs, and {form: end-to-end rel L2}."""
    per_layer, end = {}, {}
    for form in forms:
        prepared = cls(rt, net, weights, x.shape[0], winograd=form)
        try:
            end[form] = compare_arrays(prepared.forward(x), ref[-1]).rel_l2
            per_layer[form] = {}
            for i in winograd_layers(net):
                src = net.sources(i)[0]
                inp = x if src < 0 else ref[src].astype(np.float32)
                per_layer[form][net.layers[i].name] = compare_arrays(prepared.run_layer(i, inp), ref[i]).rel_l2
        finally:
            prepared.close()
    return per_layer, end


def random_conv(rng) -> tuple[Net, int]:
    c, k = int(rng.integers(1, 97)), int(rng.integers(1, 97))
    h, w = int(rng.integers(3, 34)), int(rng.integers(3, 34))
    pad = tuple(int(p) for p in rng.integers(0, 3, 4))
    layer = Conv("conv", str(rng.choice(ACTIVATIONS)), out_channels=k, kernel=(3, 3), pad=pad)
    return Net(f"random {c}x{h}x{w}->{k} pad {pad}", (c, h, w), (layer,)), int(rng.integers(1, 4))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nets", default="vgg16,resnet18,mobilenet-v2")
    p.add_argument("--random", type=int, default=40, help="random single convolutions (0: none)")
    p.add_argument("--backend", default="vectorised", choices=list(NETS))
    p.add_argument("--gpu-plans", action="store_true")
    args = p.parse_args(argv)
    if args.gpu_plans:
        vectorised.device_class = lambda info: "gpu"
    forms = ["never", "F2", "F4"] + (["F2:1", "F4:1"] if args.gpu_plans else [])
    rt = get_runtime()
    cls = NETS[args.backend]
    worst = {f: (0.0, "") for f in forms}
    rows, ends = [], []

    def note(form, where, err):
        rows_err = worst[form]
        if err > rows_err[0]:
            worst[form] = (err, where)

    for name in filter(None, args.nets.split(",")):
        net = get_net(name)
        if not winograd_layers(net):
            print(f"{name}: no 3x3 stride-1 convolution (its 3x3s are depthwise or stride 2): nothing to run")
            continue
        weights, x = init_weights(net, 0), make_input(net, net.default_batch, 0)
        ref = oracle.forward(net, weights, x)
        per_layer, end = layer_errors(cls, rt, net, weights, x, ref, forms)
        for layer in per_layer[forms[0]]:
            rows.append([f"{name}:{layer}"] + [f"{per_layer[f][layer]:.2e}" for f in forms])
            for f in forms:
                note(f, f"{name}:{layer}", per_layer[f][layer])
        ends.append([f"{name} end to end"] + [f"{end[f]:.2e}" for f in forms])
        print(f"{name}: {len(per_layer[forms[0]])} layers done", flush=True)
    rng = np.random.default_rng(39)
    for _ in range(args.random):
        net, batch = random_conv(rng)
        weights = init_weights(net, int(rng.integers(0, 2 ** 16)))
        x = rng.standard_normal((batch,) + net.input_shape).astype(np.float32)
        ref = oracle.forward(net, weights, x)
        per_layer, _ = layer_errors(cls, rt, net, weights, x, ref, forms)
        rows.append([f"{net.name} batch {batch}"] + [f"{per_layer[f]['conv']:.2e}" for f in forms])
        for f in forms:
            note(f, f"{net.name} batch {batch}", per_layer[f]["conv"])
    labels = {"never": "direct", "F2": "F(2x2,3x3)", "F4": "F(4x4,3x3)", "F2:1": "F(2x2) GPU plan 2",
              "F4:1": "F(4x4) GPU plan 2"}
    print(f"\n{args.backend} on {rt.info['name']}: relative L2 against the float64 oracle, each layer on the "
          f"oracle's input")
    print(tabulate(rows + ends, ["layer"] + [labels[f] for f in forms]))
    tol = TOLERANCE["float32"]
    print(f"\nworst per form (float32 tolerance {tol:.0e}):")
    for f in forms:
        err, where = worst[f]
        print(f"  {labels[f]}: {err:.2e} at {where} ({'within' if err <= tol else 'ABOVE'} the tolerance, "
              f"{tol / err if err else float('inf'):.0f}x below it)")
    return 0 if all(worst[f][0] <= tol for f in forms) else 1


if __name__ == "__main__":
    sys.exit(main())

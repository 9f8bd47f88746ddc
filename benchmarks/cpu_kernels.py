"""Issue 46, item 4: the kernels shaped for the CPU's vector units
(backends/handwritten/cpu_conv.py) against the same backends without them
and against the CPU frameworks, per net in one interleaved run each
(`compare run --interleave`: every backend checked against the float64
oracle, the timed passes taken in turn, so the load of a shared machine
falls on all alike).

The hand-written backends run as they are, as `<name>-novector`, the same
backend with cpu_conv "never" (the kernels before this item), and as
`<name>-nofold`, cpu_conv's kernels without its fold of a depthwise conv
into the 1x1 after it (cpu_fold.py; the code before that fold).  These
names exist only in this process; --backends picks which run.

Per net this prints each backend's pass, then per kind of layer (the
report's categories: conv 3x3, conv 1x1, depthwise 3x3, dense, pooling...)
each backend's time (the sum of those layers' wall times, each layer synced
alone, median over the passes) and our best against PyTorch, TensorFlow and
its -novector self, with 95% intervals; above 1x ours is faster.  A
framework's per-layer wall times include its dispatch per call (PyTorch's
eager mode most), which its whole pass does not pay the same way, so the
pass ratio is the one to quote; the kinds say where the time goes.

    .venv/bin/python benchmarks/cpu_kernels.py [--nets lenet:100,resnet18,mobilenet-v2]
        [--backends vectorised,vectorised-tiled,vectorised-novector,...] [--repeats 5] [--warmup 2]
        [--out results/cpu-kernels]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate

import backends
from backends.handwritten.tiled import TiledBackend, TiledNet
from backends.handwritten.tiles_tuned import TunedTiles
from backends.handwritten.vectorised import VectorisedBackend, VectorisedNet
from compare import analysis as an
from compare.cli import main as compare_main
from compare.report.kinds import _folded, group_values, groups
from compare.results import load_results
from compare.speedup import Speedup

OURS = ("vectorised", "vectorised-tiled")
PEERS = ("torch", "tensorflow")
NOVECTOR = "-novector"
NOFOLD = "-nofold"
BEFORE = (NOVECTOR, NOFOLD)   # our backends' earlier selves, each held against our best


class VectorisedNoVector(VectorisedBackend):
    name = "vectorised" + NOVECTOR
    summary = "vectorised without the kernels shaped for the vector width (cpu_conv 'never'): before issue 46 item 4"

    def prepare(self, net, weights, batch, mode=None):
        return VectorisedNet(self.runtime, net, weights, batch, cpu_conv="never")


class TiledNoVector(TiledBackend):
    name = "vectorised-tiled" + NOVECTOR
    summary = ("vectorised-tiled without the kernels shaped for the vector width (cpu_conv 'never'): "
               "before issue 46 item 4")

    def prepare(self, net, weights, batch, mode=None):
        return TiledNet(self.runtime, net, weights, batch, tuned=TunedTiles.for_device(self.runtime.info),
                        cpu_conv="never")


class NoFold:
    """A net that never offers cpu_fold.py's vector fold (cpu_conv's kernels otherwise as they are)."""

    def offer_vector_fold(self, ops, pair):
        return None


class VectorisedNoFoldNet(NoFold, VectorisedNet):
    pass


class TiledNoFoldNet(NoFold, TiledNet):
    pass


class VectorisedNoFold(VectorisedBackend):
    name = "vectorised" + NOFOLD
    summary = "vectorised without the vector fold of a depthwise conv into the 1x1 after it (cpu_fold.py)"
    net_class = VectorisedNoFoldNet


class TiledNoFold(TiledBackend):
    name = "vectorised-tiled" + NOFOLD
    summary = "vectorised-tiled without the vector fold of a depthwise conv into the 1x1 after it (cpu_fold.py)"

    def make_net(self, net, weights, batch):
        return TiledNoFoldNet(self.runtime, net, weights, batch, tuned=TunedTiles.for_device(self.runtime.info))


def register() -> None:
    module = VectorisedNoVector.__module__
    for cls in (VectorisedNoVector, TiledNoVector, VectorisedNoFold, TiledNoFold):
        backends.REGISTRY[cls.name] = (module, cls.__name__)


def ratio(theirs: list[float], ours: list[float]) -> str:
    s = Speedup.of(theirs, ours)
    if s is None:
        return "-"
    text = s.bounds()
    return text if s.clear else f"{text} level"


def per_kind(path: Path) -> str:
    res = load_results(path)
    ok = an.trusted(res)
    by = {b.name: b for b in ok}
    rows = [[b.label, f"{an.compute_ms(b):.3f}"] for b in ok]
    out = [f"{res.net.name} batch {res.net.batch} on {res.device.name}: pass compute (median of "
           f"{res.settings.repeats} interleaved runs, ms)", tabulate(rows, ["backend (mode)", "ms"])]
    mine = [b for b in ok if b.name in OURS]
    if not mine:
        return "\n".join(out + ["no hand-written backend passed"])
    best = min(mine, key=an.compute_ms)
    olds = [by[best.name + b] for b in BEFORE if best.name + b in by]
    passes = []
    for other in [by.get(p) for p in PEERS] + olds:
        if other is not None:
            passes.append(f"{best.label} against {other.label}: "
                          f"{ratio(other.timing.end_to_end.compute.values, best.timing.end_to_end.compute.values)}")
    out += ["", "whole pass, our best (above 1x: ours faster):", *passes, ""]
    heads = ["kind", "layers", "MFLOP"] + [b.label for b in ok] + [f"ours vs {p}" for p in PEERS if p in by] + \
        [f"ours vs {o.name[len(best.name):]}" for o in olds]
    rows = []
    for cat, layers in groups(res).items():
        row = [cat, len(layers), f"{sum(res.net.layers[i].flops for i in layers) / 1e6:.1f}"]
        for b in ok:
            where, own = _folded(b, res, layers)
            v = group_values(b, layers)
            row.append(f"{np.median(v):.3f}" + (f" ({where})" if where and not own else "") if v else "-")
        ours = group_values(best, layers)
        where, own = _folded(best, res, layers)
        for p in [p for p in PEERS if p in by] + [o.name for o in olds]:
            # a kind ours folded away has no time of its own to hold against theirs
            row.append(f"folded {where}" if where and not own else ratio(group_values(by[p], layers), ours))
        rows.append(row)
    out += [f"per kind of layer: the sum of its layers' wall times (each synced alone), median ms; our best "
            f"is {best.label}; '(before)'/'(after)': folded into the layers before/after them", tabulate(rows, heads)]
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nets", default="lenet:100,resnet18,mobilenet-v2", help="comma-separated, each net[:batch]")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--backends", default=",".join([*OURS, *(n + NOVECTOR for n in OURS), *PEERS]),
                   help=f"comma-separated: {', '.join(OURS)}, each with {' or '.join(BEFORE)}, and {', '.join(PEERS)}")
    p.add_argument("--out", default="results/cpu-kernels")
    args = p.parse_args(argv)
    register()
    names = [n for n in args.backends.split(",") if n]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    code = 0
    for spec in filter(None, args.nets.split(",")):
        net, _, batch = spec.partition(":")
        cmd = ["run", "--net", net, "--backends", ",".join(names), "--repeats", str(args.repeats),
               "--warmup", str(args.warmup), "--interleave", "--out", str(out / f"{net}.json")]
        if batch:
            cmd += ["--batch", batch]
        print(f"== compare {' '.join(cmd)}", flush=True)
        code = max(code, compare_main(cmd))
        text = per_kind(out / f"{net}.json")
        print(text, flush=True)
        (out / f"{net}-kinds.txt").write_text(text + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())

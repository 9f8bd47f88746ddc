"""A net's head as one kernel (backends/handwritten/head_fused.py: the global
average pool and the dense layer that alone reads it) against the two
kernels, per net in one interleaved `compare run` (every backend prepared,
checked against the float64 oracle, its timed passes taken in turn with the
others').

Each hand-written backend runs three ways: as it is (`fuse_head` "measured":
fused where that measured faster at prepare), and as `<name>-head-always`
(fused wherever it can be) and `<name>-head-never` (the pool's kernel, then
the dense's chosen form).  These names exist only in this process.

    .venv/bin/python benchmarks/head_fusion.py [--nets resnet18,mobilenet-v2] [--batch B]
        [--backends vectorised,vectorised-tiled] [--repeats 10] [--warmup 2] [--out results/head]
        [--device D]

On a GPU (the default device where one is present), one command:
`benchmarks/head_fusion.py --repeats 10 --out results/head-gpu` (add `--device NVIDIA` to
pick it by name, `--batch 64` for a larger batch).

Printed per net, after `compare run`'s own tables: per backend, the whole
pass (compute, median) of each form in its fastest mode and the ratios
never / always and never / measured with their 95% intervals (above 1: the
fusion is faster; a winner named only where the interval excludes 1x), then
the head's time (the pool's layer and the dense's, each synced alone as
`compare run` times layers, wall) in each form, medians and ratios, and what
the measured form chose; the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from tabulate import tabulate

import backends
from backends.handwritten.head_fused import fusable
from backends.handwritten.tiled import TiledBackend, TiledNet
from backends.handwritten.tiles_tuned import TunedTiles
from backends.handwritten.vectorised import VectorisedBackend, VectorisedNet
from compare.cli import main as compare_main
from compare.intervals import clear, ratio_interval
from compare.results import load_results
from nets import get_net

FORMS = ("always", "never")


def _variant(base, fuse: str):
    """`base` (a hand-written backend class) with fuse_head=`fuse`, named <name>-head-<fuse>."""
    tiled = issubclass(base, TiledBackend)

    def make_net(self, net, weights, batch):
        if tiled:
            return TiledNet(self.runtime, net, weights, batch, tuned=TunedTiles.for_device(self.runtime.info),
                            fuse_head=fuse)
        return VectorisedNet(self.runtime, net, weights, batch, fuse_head=fuse)
    return type(f"{base.__name__}Head{fuse.title()}", (base,), {
        "name": f"{base.name}-head-{fuse}", "make_net": make_net, "__module__": __name__,
        "summary": f"{base.name} with fuse_head={fuse!r} (benchmarks/head_fusion.py)"})


VARIANTS = {cls.name: cls for base in (VectorisedBackend, TiledBackend) for cls in
            (_variant(base, fuse) for fuse in FORMS)}
globals().update({cls.__name__: cls for cls in VARIANTS.values()})


def register() -> None:
    for name, cls in VARIANTS.items():
        backends.REGISTRY[name] = (__name__, cls.__name__)


def ratio_text(num: list[float], den: list[float]) -> str:
    """median(num) / median(den), with its interval and a verdict."""
    r = statistics.median(num) / statistics.median(den)
    ci = ratio_interval(num, den)
    if ci is None:
        return f"{r:.2f}x"
    return f"{r:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}]" + ("" if clear(ci) else ", no clear difference")


def head_values(b, pool: int, dense: int) -> list[float]:
    """Per repeat, the pool's layer time plus the dense's (wall, each synced alone)."""
    layers = b.timing.layers
    return [a + c for a, c in zip(layers[pool].wall.values, layers[dense].wall.values)]


def summary(path: Path, names: list[str]) -> str:
    res = load_results(path)
    net = get_net(res.net.name)
    heads = [(p, i) for i in range(len(net.layers)) for p in [fusable(net, i)[0]] if p is not None]
    out = []
    for name in names:
        forms = {"measured": res.backend(name), **{f: res.backend(f"{name}-head-{f}") for f in FORMS}}
        bad = [f"{k}: {b.status if b else 'absent'}" for k, b in forms.items()
               if b is None or not b.ok or not b.timing or (b.check is not None and b.check.status != "PASS")]
        if bad:
            out.append(f"{name}: no ratios ({'; '.join(bad)})")
            continue
        compute = {k: b.timing.end_to_end.compute.values for k, b in forms.items()}
        rows = [[k, b.mode or "-", f"{statistics.median(compute[k]):.4f}", b.check.status if b.check else "-",
                 ", ".join((b.config or {}).get("head_fused", {})) or "-"] for k, b in forms.items()]
        out += [f"\n{name} on {res.device.name}, {res.net.name} batch {res.net.batch}: whole pass (compute, median "
                f"of {res.settings.repeats} interleaved runs)",
                tabulate(rows, ["fuse_head", "mode", "ms", "check", "pools fused"]),
                f"pass, never / always: {ratio_text(compute['never'], compute['always'])}; never / measured: "
                f"{ratio_text(compute['never'], compute['measured'])} (above 1x: the fusion faster)"]
        for mode in sorted({m.name for m in forms["never"].modes}):
            per = {k: next((m.compute.values for m in b.modes if m.name == mode and m.compute), None)
                   for k, b in forms.items()}
            if all(per.values()):
                out.append(f"  in mode {mode} alone: never / always {ratio_text(per['never'], per['always'])}; "
                           f"never / measured {ratio_text(per['never'], per['measured'])}")
        rows = []
        records = (forms["measured"].config or {}).get("head", {})
        for p, i in heads:
            pool, dense = net.layers[p].name, net.layers[i].name
            v = {k: head_values(b, p, i) for k, b in forms.items()}
            record = records.get(pool) or {}
            rows.append([f"{pool} + {dense}"]
                        + [f"{statistics.median(v[k]):.4f}" for k in ("never", "always", "measured")]
                        + [ratio_text(v["never"], v["always"]), ratio_text(v["never"], v["measured"]),
                           record.get("chosen", "-"),
                           ", ".join(f"{k} {t:.4f}" for k, t in (record.get("ms") or {}).items()) or "-"])
        out += ["the head (the pool's and the dense's layer wall times, each synced alone; ms, medians)",
                tabulate(rows, ["layers", "never", "always", "measured", "never / always", "never / measured",
                                "measured chose", "its prepare-time ms"])]
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nets", default="resnet18,mobilenet-v2")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--backends", default="vectorised,vectorised-tiled")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", default="results/head")
    p.add_argument("--device", default=None, help="as compare run's (default: the first GPU, else PoCL)")
    args = p.parse_args(argv)
    register()
    names = [n for n in args.backends.split(",") if n]
    unknown = [n for n in names if f"{n}-head-never" not in VARIANTS]
    if unknown:
        p.error(f"--backends: {', '.join(unknown)} has no fuse_head; take vectorised or vectorised-tiled")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    every = names + [f"{n}-head-{f}" for n in names for f in FORMS]
    code = 0
    for net in [n for n in args.nets.split(",") if n]:
        stem = f"{net}-b{args.batch}" if args.batch else net
        cmd = ["run", "--net", net, "--backends", ",".join(every), "--repeats", str(args.repeats),
               "--warmup", str(args.warmup), "--interleave", "--out", str(out / f"{stem}.json")]
        if args.batch:
            cmd += ["--batch", str(args.batch)]
        if args.device:
            cmd += ["--device", args.device]
        before = os.getloadavg()
        print(f"== compare {' '.join(cmd)}\nload average before: {' '.join(f'{v:.2f}' for v in before)}", flush=True)
        code = compare_main(cmd) or code
        after = os.getloadavg()
        text = summary(out / f"{stem}.json", names)
        text += f"\n\nload average before: {' '.join(f'{v:.2f}' for v in before)}; after: " \
                f"{' '.join(f'{v:.2f}' for v in after)} (1, 5, 15 min)"
        print(text, flush=True)
        (out / f"{stem}-summary.txt").write_text(text + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())

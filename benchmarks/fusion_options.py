"""What the fusion benchmarks share (head_fusion.py, layernorm_fusion.py): a
hand-written backend's fusion option set three ways in one interleaved
`compare run` (as it is, "measured"; `<name>-<tag>-always`; `<name>-<tag>-never`,
names that exist only in the benchmark's process), then the whole pass and
each fused site's two layers compared across the three, every ratio with its
95% interval from compare.speedup."""
from __future__ import annotations

import argparse
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tabulate import tabulate

import backends
from backends.handwritten.tiled import TiledBackend, TiledNet
from backends.handwritten.tiles_tuned import TunedTiles
from backends.handwritten.vectorised import VectorisedBackend, VectorisedNet
from compare.cli import main as compare_main
from compare.results import load_results
from compare.speedup import Speedup
from nets import get_net

FORMS = ("always", "never")


@dataclass(frozen=True)
class Fusion:
    """One fusion option of the hand-written backends and how its results name what it did."""

    option: str                    # the net's keyword: "fuse_head"
    tag: str                       # the variants' names: vectorised-<tag>-always
    fusable: Callable              # (net, i) -> (the first layer's index or None, why)
    fused_key: str                 # the config entry listing the fused sites: "head_fused"
    record_key: str                # the config entry of the measured choices, by first layer: "head"
    sites: str                     # the per-site table's title


def variants(fusion: Fusion, module: str) -> dict[str, type]:
    """Every hand-written backend class with `fusion.option` forced, by name; the classes say they live in
    `module`, whose globals must hold them (the registry imports them from there)."""
    def variant(base, fuse: str):
        tiled = issubclass(base, TiledBackend)

        def make_net(self, net, weights, batch):
            if tiled:
                return TiledNet(self.runtime, net, weights, batch, tuned=TunedTiles.for_device(self.runtime.info),
                                **{fusion.option: fuse})
            return VectorisedNet(self.runtime, net, weights, batch, **{fusion.option: fuse})
        return type(f"{base.__name__}{fusion.tag.title()}{fuse.title()}", (base,), {
            "name": f"{base.name}-{fusion.tag}-{fuse}", "make_net": make_net, "__module__": module,
            "summary": f"{base.name} with {fusion.option}={fuse!r} (benchmarks/)"})
    return {cls.name: cls for base in (VectorisedBackend, TiledBackend) for cls in
            (variant(base, fuse) for fuse in FORMS)}


def ratio(num: list[float], den: list[float]) -> str:
    """median(num) / median(den), its interval and what the interval allows."""
    s = Speedup.of(num, den)
    return s.text() if s else "-"


def summary(path: Path, names: list[str], fusion: Fusion) -> str:
    res = load_results(path)
    net = get_net(res.net.name)
    sites = [(f, i) for i in range(len(net.layers)) for f in [fusion.fusable(net, i)[0]] if f is not None]
    out = []
    for name in names:
        forms = {"measured": res.backend(name), **{f: res.backend(f"{name}-{fusion.tag}-{f}") for f in FORMS}}
        bad = [f"{k}: {b.status if b else 'absent'}" for k, b in forms.items()
               if b is None or not b.ok or not b.timing or (b.check is not None and b.check.status != "PASS")]
        if bad:
            out.append(f"{name}: no ratios ({'; '.join(bad)})")
            continue
        compute = {k: b.timing.end_to_end.compute.values for k, b in forms.items()}
        rows = [[k, b.mode or "-", f"{statistics.median(compute[k]):.4f}", b.check.status if b.check else "-",
                 ", ".join((b.config or {}).get(fusion.fused_key, {})) or "-"] for k, b in forms.items()]
        out += [f"\n{name} on {res.device.name}, {res.net.name} batch {res.net.batch}: whole pass (compute, median "
                f"of {res.settings.repeats} interleaved runs)",
                tabulate(rows, [fusion.option, "mode", "ms", "check", "fused"]),
                f"pass, never / always: {ratio(compute['never'], compute['always'])}; never / measured: "
                f"{ratio(compute['never'], compute['measured'])} (above 1x: the fusion faster)"]
        for mode in sorted({m.name for m in forms["never"].modes}):
            per = {k: next((m.compute.values for m in b.modes if m.name == mode and m.compute), None)
                   for k, b in forms.items()}
            if all(per.values()):
                out.append(f"  in mode {mode} alone: never / always {ratio(per['never'], per['always'])}; "
                           f"never / measured {ratio(per['never'], per['measured'])}")
        rows = []
        records = (forms["measured"].config or {}).get(fusion.record_key, {})
        for f, i in sites:
            first, second = net.layers[f].name, net.layers[i].name
            # per repeat, the two layers' wall times (each synced alone, as compare run times layers) added
            v = {k: [a + c for a, c in zip(b.timing.layers[f].wall.values, b.timing.layers[i].wall.values)]
                 for k, b in forms.items()}
            record = records.get(first) or {}
            rows.append([f"{first} + {second}"]
                        + [f"{statistics.median(v[k]):.4f}" for k in ("never", "always", "measured")]
                        + [ratio(v["never"], v["always"]), ratio(v["never"], v["measured"]),
                           record.get("chosen", "-"),
                           ", ".join(f"{k} {t:.4f}" for k, t in (record.get("ms") or {}).items()) or "-"])
        out += [fusion.sites,
                tabulate(rows, ["layers", "never", "always", "measured", "never / always", "never / measured",
                                "measured chose", "its prepare-time ms"])]
    return "\n".join(out)


def main(argv, fusion: Fusion, doc: str, nets: str, repeats: int, out: str) -> int:
    """The benchmark's command line: each net in one interleaved run of the backends and their variants."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--nets", "--net", default=nets)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--backends", default="vectorised,vectorised-tiled")
    p.add_argument("--repeats", type=int, default=repeats)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", default=out)
    p.add_argument("--device", default=None, help="as compare run's (default: the first GPU, else PoCL)")
    args = p.parse_args(argv)
    names = [n for n in args.backends.split(",") if n]
    unknown = [n for n in names if f"{n}-{fusion.tag}-never" not in backends.REGISTRY]
    if unknown:
        p.error(f"--backends: {', '.join(unknown)} has no {fusion.option}; take vectorised or vectorised-tiled")
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    every = names + [f"{n}-{fusion.tag}-{f}" for n in names for f in FORMS]
    code = 0
    for net in [n for n in args.nets.split(",") if n]:
        stem = f"{net}-b{args.batch}" if args.batch else net
        cmd = ["run", "--net", net, "--backends", ",".join(every), "--repeats", str(args.repeats),
               "--warmup", str(args.warmup), "--interleave", "--out", str(folder / f"{stem}.json")]
        cmd += ["--batch", str(args.batch)] if args.batch else []
        cmd += ["--device", args.device] if args.device else []
        before = os.getloadavg()
        print(f"== compare {' '.join(cmd)}\nload average before: {' '.join(f'{v:.2f}' for v in before)}", flush=True)
        code = compare_main(cmd) or code
        if not (folder / f"{stem}.json").exists():   # refused before it ran: compare said why
            continue
        after = os.getloadavg()
        text = summary(folder / f"{stem}.json", names, fusion)
        text += f"\n\nload average before: {' '.join(f'{v:.2f}' for v in before)}; after: " \
                f"{' '.join(f'{v:.2f}' for v in after)} (1, 5, 15 min)"
        print(text, flush=True)
        (folder / f"{stem}-summary.txt").write_text(text + "\n")
    return code

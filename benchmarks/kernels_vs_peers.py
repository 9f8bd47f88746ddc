"""Our best hand-written backend against PyTorch at its best and CLBlast at
its best, per net, in one interleaved run each (`compare run --interleave`:
every backend prepared, checked against the float64 oracle, and its timed
passes taken in turn with the others'), and the kernels of issue 39
(Winograd, block kernels, split sums chosen by measuring) against the
direct kernels they replace, in the same run.

For that, the hand-written backends run twice: as they are, and as
`<name>-direct`, the same backend with the direct kernels only (winograd
"never", fuse_blocks "never", vectorised-tiled's split sums as planned: the
backends before issue 39).  These two names exist only in this process.

Per net, `compare run` prints its tables and writes OUT/<net>.json (and
.txt); then this prints:
- each backend's pass (compute, median) and its check;
- our best (the fastest hand-written backend that passed, not a -direct
  one) against PyTorch at its best (its fastest mode, named) and against
  CLBlast at its best (the fastest CLBlast backend, in its fastest mode),
  and each hand-written backend against its -direct self: ratios of
  medians with 95% bootstrap intervals (compare/intervals.py), a winner
  named only where the interval excludes 1x;
- kernels per pass (launches, the conversions at the net's edges included);
- per layer of our best: its time, GFLOP/s and share of its roofline
  (compare/report/roofline.py: the roof at the layer's arithmetic intensity, from
  the peak and bandwidth `compare peak` measured), and what ran it
  (Winograd, a block kernel, a split sum...).

    .venv/bin/python benchmarks/kernels_vs_peers.py [--nets lenet:100,vgg16,resnet18,mobilenet-v2,vit-tiny]
        [--backends vectorised,vectorised-tiled,fused,torch,clblast-best] [--repeats 10] [--warmup 3]
        [--out results/kernels] [--budget-s 0] [--no-direct]

--budget-s: stop before a net once this many seconds have passed (0: no
limit), saying which nets were left: for a device lent for a fixed time.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from tabulate import tabulate

import backends
from backends.handwritten.tiled import TiledBackend, TiledNet
from backends.handwritten.tiles_tuned import TunedTiles
from backends.handwritten.vectorised import VectorisedBackend, VectorisedNet
from compare import analysis as an
from compare.report import roofline
from compare.cli import main as compare_main
from compare.speedup import Speedup
from compare.results import load_results
from nets import NETS

HANDWRITTEN = ("baseline", "vectorised", "vectorised-tiled", "fused", "morton")
DIRECT = "-direct"
DIRECT_FORMS = dict(winograd="never", fuse_blocks="never", cpu_conv="never")


class VectorisedDirect(VectorisedBackend):
    name = "vectorised" + DIRECT
    summary = "vectorised with its direct kernels only (no Winograd, no block kernels): as before issue 39"

    def prepare(self, net, weights, batch, mode=None):
        return VectorisedNet(self.runtime, net, weights, batch, **DIRECT_FORMS)


class TiledDirect(TiledBackend):
    name = "vectorised-tiled" + DIRECT
    summary = ("vectorised-tiled with its direct kernels only (no Winograd, no block kernels, split sums as "
               "planned): as before issue 39")

    def prepare(self, net, weights, batch, mode=None):
        return TiledNet(self.runtime, net, weights, batch, tuned=TunedTiles.for_device(self.runtime.info),
                        split_sums="planned", **DIRECT_FORMS)


def register_direct_forms() -> None:
    """The -direct backends, by name, for this process's `compare run`."""
    module = VectorisedDirect.__module__
    backends.REGISTRY[VectorisedDirect.name] = (module, "VectorisedDirect")
    backends.REGISTRY[TiledDirect.name] = (module, "TiledDirect")


def ratio_text(num, den) -> str:
    """median(num) / median(den) of two backends' pass samples, with its interval (compare.speedup)."""
    s = Speedup.of(num.timing.end_to_end.compute.values, den.timing.end_to_end.compute.values)
    return s.text() if s else "-"


def kernels_per_pass(b) -> str:
    """What one pass enqueues as the backend counted it ('1' for fused's whole net, '9 + 5 calls'); a side
    that counts nothing (torch's CUDA graph): '-' (its per-layer steps are not its pass's kernels)."""
    return b.launches.text() if b.launches else "-"


def what_ran(b, name: str) -> str:
    """How backend `b` ran layer `name`: its step names, and the Winograd choice where there was one."""
    cfg = b.config or {}
    folded = an.folded(b).get(name)
    if folded:
        return f"folded: {folded[1]}"
    steps = [s.name for s in next(t for t in b.timing.layers if t.name == name).steps]
    text = " + ".join(steps)
    win = (cfg.get("winograd") or {}).get(name)
    if win and win.get("ms"):
        times = ", ".join(f"{k} {v:.3g}" for k, v in win["ms"].items())
        text += f" (chosen of: {times} ms)"
    split = (cfg.get("split_sums") or {}).get(name)
    if split:
        text += f" (split: {split['chosen']})"
    return text


def summary(path: Path) -> str:
    res = load_results(path)
    ok = [b for b in an.timed(res) if b.check is None or b.check.status == "PASS"]
    rows = [[b.label, f"{an.compute_ms(b):.3f}", b.check.status if b.check else "-", kernels_per_pass(b)]
            for b in an.timed(res)]
    out = [f"{res.net.name} batch {res.net.batch} on {res.device.name}: pass compute, median of "
           f"{res.settings.repeats} interleaved runs",
           tabulate(rows, ["backend (mode)", "ms", "check", "kernels per pass"])]
    ours = [b for b in ok if b.name in HANDWRITTEN]
    best = min(ours, key=an.compute_ms, default=None)
    torch = next((b for b in ok if b.name == "torch"), None)
    clblast = min((b for b in ok if b.name.startswith("clblast")), key=an.compute_ms, default=None)
    lines = []
    if best is not None:
        for peer, what in ((torch, "PyTorch at its best"), (clblast, "CLBlast at its best")):
            if peer is not None:
                lines.append(f"our best, {best.label} {an.compute_ms(best):.3f} ms, against {what}, {peer.label} "
                             f"{an.compute_ms(peer):.3f} ms: {ratio_text(peer, best)} (above 1x: ours faster)")
    for b in ok:
        old = res.backend(b.name + DIRECT)
        if old is not None and an.compute_ms(old) is not None:
            lines.append(f"{b.name} ({kernels_per_pass(b)} kernels) against {old.name} ({kernels_per_pass(old)}): "
                         f"{ratio_text(old, b)} (above 1x: issue 39's kernels faster)")
    out += ["", *lines]
    line = roofline.of(res)
    if best is not None:
        rows = []
        if line is None:
            out.append(f"\nno roofline: {roofline.missing(res)}")
        roofs = {r.name: r for r in line.layers} if line else {}
        for i, layer in enumerate(res.net.layers):
            r = roofs.get(layer.name)
            pct = r.percent(best.name) if r else None
            ms = an.layer_ms(best, i)
            rows.append([layer.name, layer.kind, f"{ms:.3f}" if ms is not None else "-",
                         f"{an.gflops(layer.flops, ms):.1f}" if ms and layer.flops else "-",
                         f"{r.roof_gflops:.0f}" if r else "-", f"{pct:.1f}%" if pct is not None else "-",
                         what_ran(best, layer.name)])
        out += [f"\nper layer of our best ({best.label}; each layer synced alone, wall time), against its roofline"
                + (f" (peak {line.peak_gflops:.0f} GFLOP/s, {line.bandwidth_gbs:.0f} GB/s)" if line else "")
                + "; a layer's FLOPs are those of its direct convolution, so Winograd, which multiplies less, can "
                  "pass 100%",
                tabulate(rows, ["layer", "kind", "ms", "GFLOP/s", "roof GFLOP/s", "of roof", "ran as"])]
    return "\n".join(out)


def _refused(name: str, net: str) -> bool:
    """A backend that refuses a built-in net before any work (its row would only say UNSUPPORTED)."""
    return net in NETS and backends.backend_class(name).unsupported(NETS[net]) is not None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nets", default="lenet:100,vgg16,resnet18,mobilenet-v2,vit-tiny",
                   help="comma-separated, each net[:batch]")
    p.add_argument("--backends", default="vectorised,vectorised-tiled,fused,torch,clblast-best")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out", default="results/kernels")
    p.add_argument("--budget-s", type=float, default=0.0)
    p.add_argument("--direct", action=argparse.BooleanOptionalAction, default=True,
                   help="also each hand-written backend with its direct kernels only (--no-direct: ours against the "
                        "peers alone, sooner)")
    args = p.parse_args(argv)
    register_direct_forms()
    names = [n for n in args.backends.split(",") if n]
    names += [n + DIRECT for n in names if args.direct and n + DIRECT in backends.REGISTRY]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start, code, left = time.monotonic(), 0, []
    for spec in filter(None, args.nets.split(",")):
        net, _, batch = spec.partition(":")
        if args.budget_s and time.monotonic() - start > args.budget_s:
            left.append(spec)
            continue
        here = [n for n in names if not _refused(n, net)]   # fused lacks most nets' layers
        cmd = ["run", "--net", net, "--backends", ",".join(here), "--repeats", str(args.repeats),
               "--warmup", str(args.warmup), "--interleave", "--out", str(out / f"{net}.json")]
        if batch:
            cmd += ["--batch", batch]
        print(f"== compare {' '.join(cmd)}", flush=True)
        with open(out / f"{net}.txt", "w") as log:
            saved = sys.stdout
            sys.stdout = Tee(saved, log)
            try:
                code = max(code, compare_main(cmd))
            finally:
                sys.stdout = saved
        text = summary(out / f"{net}.json")
        print(text, flush=True)
        (out / f"{net}-summary.txt").write_text(text + "\n")
    if left:
        print(f"\nbudget of {args.budget_s:.0f} s spent: not run: {', '.join(left)}")
    print(f"\nelapsed {time.monotonic() - start:.0f} s; results in {out}{os.sep}")
    return code


class Tee:
    """Writes to two streams (compare run's tables to the terminal and to OUT/<net>.txt)."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)

    def flush(self):
        for s in self.streams:
            s.flush()

    def isatty(self) -> bool:
        return False   # a file is among its streams: the tables are laid out for a file, not the terminal


if __name__ == "__main__":
    sys.exit(main())

"""PNG plots: of one results file (per-layer times, speedups, utilisation),
of a batch sweep (time per image, speedup against batch) and rooflines."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .. import analysis as an  # noqa: E402


def _grouped_bars(ax, labels, series: dict[str, list], log: bool):
    n = max(len(series), 1)
    width = 0.8 / n
    x = np.arange(len(labels))
    for k, (name, values) in enumerate(series.items()):
        vals = [v if v else np.nan for v in values]
        ax.bar(x + (k - (n - 1) / 2) * width, vals, width, label=name)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _title(res, what: str) -> str:
    return f"{res.net.name} batch {res.net.batch} on {res.device.name}: {what}"


def layer_times(res, path) -> bool:
    timed = an.trusted(res)   # a plot shows no output that failed its check, or was not checked
    if not timed:
        return False
    labels = [layer.name for layer in res.net.layers]
    series = {b.name: [an.layer_ms(b, i) for i in range(len(labels))] for b in timed}
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(labels) + 3), 4))
    _grouped_bars(ax, labels, series, log=True)
    ax.set_ylabel("median wall time per layer (ms, log)")
    ax.set_title(_title(res, "time per layer"), fontsize=10)
    _save(fig, path)
    return True


def speedups(res, path, baselines=an.DEFAULT_BASELINES) -> bool:
    """Only backends whose output passed the check: nothing else has a ratio."""
    tokens = an.baselines(res, baselines)
    trusted = an.trusted(res)
    if not tokens or not trusted:
        return False
    labels = [b.label for b in trusted]
    series = {f"vs {an.reference_label(res, t)}": [s.value if (s := an.speedup(an.reference(res, t), b)) else None
                                                 for b in trusted] for t in tokens}
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(labels) + 2), 3.5))
    _grouped_bars(ax, labels, series, log=True)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylabel("end-to-end speedup (log)")
    ax.set_title(_title(res, "speedup of each backend"), fontsize=10)
    _save(fig, path)
    return True


def utilisation(res, path) -> bool:
    u = an.utilisation(res)
    if u is None:
        return False
    labels = [layer.name for layer in res.net.layers]
    series = {name: [row[k] for row in u.layers] for k, name in enumerate(u.backends)}
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(labels) + 3), 4))
    _grouped_bars(ax, labels, series, log=False)
    ax.set_ylabel(f"% of peak ({u.peak_gflops:.0f} GFLOP/s)")
    ax.set_title(_title(res, "device utilisation per layer"), fontsize=10)
    _save(fig, path)
    return True


# -- sweeps and rooflines: log-log, from figures computed elsewhere ------------------

def _plain_y(ax, suffix: str = "") -> None:
    """Log-scale y ticks as plain numbers (0.6x, 2x), not powers of ten; the
    minor ones labelled only where the axis spans little more than a decade."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    fmt = FuncFormatter(lambda v, _: f"{v:g}{suffix}")
    low, high = ax.get_ylim()
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_formatter(fmt if high / low < 20 else NullFormatter())
    ax.tick_params(axis="y", which="minor", labelsize=7)


def _batch_axis(ax, batches) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches)
    ax.set_xticklabels([str(b) for b in batches])
    ax.minorticks_off()
    ax.set_xlabel("batch (images per forward pass, log)")


def per_image(series: dict[str, list[tuple[int, float]]], path, title: str) -> bool:
    """Time per image against batch, one line per backend (compare/report/sweeps.py per_image_series)."""
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name, points in series.items():
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", label=name)
    _batch_axis(ax, sorted({b for pts in series.values() for b, _ in pts}))
    ax.set_yscale("log")
    _plain_y(ax)
    ax.set_ylabel("end-to-end compute per image (ms, log)")
    ax.set_title(title, fontsize=10)
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)
    return True


def speedup_vs_batch(batches: list[int], speedups: list, path, title: str) -> bool:
    """The best hand-written backend's speedup (compare/speedup.py) over CLBlast at its best against
    batch, with its 95% interval as error bars; 1x drawn."""
    points = [(b, s.value, s.interval) for b, s in zip(batches, speedups) if s]
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(6.5, 4))
    xs = [b for b, _, _ in points]
    ys = [s for _, s, _ in points]
    lows = [s - ci[0] if ci else 0.0 for _, s, ci in points]
    highs = [ci[1] - s if ci else 0.0 for _, s, ci in points]
    ax.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=3)
    ax.axhline(1.0, color="k", lw=0.8)
    _batch_axis(ax, xs)
    ax.set_yscale("log")
    _plain_y(ax, "x")
    ax.set_ylabel("speedup over CLBlast at its best (log)\nabove 1x the hand-written backend is faster")
    ax.set_title(title, fontsize=10)
    ax.grid(which="both", alpha=0.3)
    _save(fig, path)
    return True


MARKERS = "os^Dv<>PX*ph"


def roofline(lines, path, title: str) -> bool:
    """Every layer of every backend as a point (intensity, achieved GFLOP/s)
    under min(peak, intensity x bandwidth); `lines` are compare/report/roofline.py
    Rooflines of one net and device (a colour per backend, a marker per batch)."""
    points = [(rl, layer) for rl in lines for layer in rl.layers if layer.achieved]
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(7, 5))
    names = list(dict.fromkeys(name for _, layer in points for name in layer.achieved))
    batches = sorted({rl.batch for rl in lines})
    colours = {name: f"C{k % 10}" for k, name in enumerate(names)}
    for rl, layer in points:
        for name, g in layer.achieved.items():
            ax.scatter(layer.intensity, g, color=colours[name], s=24,
                       marker=MARKERS[batches.index(rl.batch) % len(MARKERS)])
    largest = max(lines, key=lambda rl: rl.batch)
    for layer in largest.layers:   # names once, at the largest batch, beside its best point
        if layer.achieved:
            ax.annotate(layer.name, (layer.intensity, max(layer.achieved.values())), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
    ais = [layer.intensity for _, layer in points]
    for peak, bw in dict.fromkeys((rl.peak_gflops, rl.bandwidth_gbs) for rl in lines):
        x = np.geomspace(min(min(ais), peak / bw) / 2, max(max(ais), peak / bw) * 2, 200)
        ax.plot(x, np.minimum(peak, x * bw), color="k", lw=1.2)
        ax.annotate(f"{peak:.0f} GFLOP/s, {bw:.0f} GB/s", (x[-1], peak), ha="right", va="bottom", fontsize=8)
    for name in names:
        ax.scatter([], [], color=colours[name], label=name)
    if len(batches) > 1:
        for k, b in enumerate(batches):
            ax.scatter([], [], color="grey", marker=MARKERS[k % len(MARKERS)], label=f"batch {b}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of input, weights and output, log)")
    ax.set_ylabel("achieved GFLOP/s per layer (log)")
    ax.set_title(title, fontsize=10)
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    _save(fig, path)
    return True


FAMILY_COLOURS = {"hand-written": "C0", "compiler": "C2", "engine": "C3", "peer": "C1"}


def summary(groups: list[tuple[str, list]], path, title: str) -> bool:
    """The report's one figure: per net and device (a group), each side's fastest backend (compare/report/
    answer.py Contender) as a bar of its speedup over CLBlast at its best, with its 95% interval; 1x drawn,
    log scale.  A bar without an interval (fewer than 5 repeats a side) has no whiskers.  Each bar's backend is named
    under it, and the group under the names, so that no name crosses a bar or its whiskers."""
    groups = [(label, bars) for label, bars in groups if bars]
    if not groups:
        return False
    width = 0.8 / max(len(bars) for _, bars in groups)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) + 2), 5.5))
    seen, top, low = set(), 1.0, 1.0
    ticks, names = [], []
    for g, (label, bars) in enumerate(groups):
        for k, c in enumerate(bars):
            x = g + (k - (len(bars) - 1) / 2) * width
            s = c.speedup
            err = [[s.value - s.interval[0]], [s.interval[1] - s.value]] if s.interval else None
            ax.bar(x, s.value, width * 0.9, color=FAMILY_COLOURS.get(c.family, "C7"),
                   label=None if c.family in seen else c.family)
            if err:
                ax.errorbar(x, s.value, yerr=err, color="k", capsize=3, lw=1)
            ticks.append(x)
            names.append(c.backend.label)
            seen.add(c.family)
            top = max(top, (s.interval[1] if s.interval else s.value))
            low = min(low, (s.interval[0] if s.interval else s.value))
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylim(min(low, 1.0) / 1.3, top * 1.3)
    ax.set_xticks(ticks)
    ax.set_xticklabels(names, rotation=90, fontsize=7)
    below = 7 * 0.52 * max(len(n) for n in names) + 8   # points: under the longest name
    for g, (label, _) in enumerate(groups):
        ax.annotate(label, xy=(g, 0), xycoords=("data", "axes fraction"), xytext=(0, -below),
                    textcoords="offset points", ha="center", va="top", fontsize=8)
    ax.set_yscale("log")
    _plain_y(ax, "x")
    ax.set_ylabel("speedup over CLBlast at its best (log)\nabove 1x faster than CLBlast")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)
    return True

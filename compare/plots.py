"""PNG plots of one results file: per-layer times, speedups, utilisation."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from . import analysis as an  # noqa: E402


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
    timed = an.timed(res)
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
    tokens = an.baselines(res, baselines)
    timed = an.timed(res)
    if not tokens or not timed:
        return False
    labels = [b.label for b in timed]
    series = {f"vs {an.reference_label(res, t)}": [an.ratio(an.compute_ms(an.reference(res, t)), an.compute_ms(b))
                                                 for b in timed] for t in tokens}
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

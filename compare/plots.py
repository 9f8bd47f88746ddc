"""PNG plots of one results file: per-layer times, speedups, utilisation."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .report_tables import by_name, layer_ms, on_device, timed  # noqa: E402
from .tables import compute_ms, gflops  # noqa: E402


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


def layer_times(res: dict, path) -> bool:
    backends = timed(res)
    if not backends:
        return False
    labels = [layer["name"] for layer in res["net"]["layers"]]
    series = {b["name"]: [layer_ms(b, i) for i in range(len(labels))] for b in backends}
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(labels) + 3), 4))
    _grouped_bars(ax, labels, series, log=True)
    ax.set_ylabel("median wall time per layer (ms, log)")
    ax.set_title(f"{res['net']['name']} batch {res['net']['batch']} on {res['device']['name']}", fontsize=10)
    _save(fig, path)
    return True


def speedups(res: dict, path) -> bool:
    names = by_name(res)
    refs = [r for r in ("clblast", "numpy") if r in names and compute_ms(names[r])]
    backends = timed(res)
    if not refs or not backends:
        return False
    labels = [b["name"] for b in backends]
    series = {f"vs {r}": [compute_ms(names[r]) / compute_ms(b) for b in backends] for r in refs}
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(labels) + 2), 3.5))
    _grouped_bars(ax, labels, series, log=True)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylabel("end-to-end speedup (log)")
    ax.set_title(f"{res['net']['name']}: speedup of each backend", fontsize=10)
    _save(fig, path)
    return True


def utilisation(res: dict, path) -> bool:
    peak = (res.get("peak") or {}).get("gflops")
    backends = [b for b in timed(res) if on_device(res, b)]
    if not peak or not backends:
        return False
    labels = [layer["name"] for layer in res["net"]["layers"]]
    series = {}
    for b in backends:
        vals = []
        for i, layer in enumerate(res["net"]["layers"]):
            g = gflops(layer["flops"], layer_ms(b, i))
            vals.append(100 * g / peak if g else None)
        series[b["name"]] = vals
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(labels) + 3), 4))
    _grouped_bars(ax, labels, series, log=False)
    ax.set_ylabel(f"% of peak ({peak:.0f} GFLOP/s)")
    ax.set_title(f"{res['net']['name']}: device utilisation per layer", fontsize=10)
    _save(fig, path)
    return True

"""The tables of a report, each as (headers, rows) of strings, built from
results only (the figures come from compare/analysis.py).  Shapes follow the
study's tables: 7.4 (times and speedups), 5.3 (steps), 6.2 (wall / kernel /
overhead), 7.3 (useful time); and the roofline's share per layer."""
from __future__ import annotations

from .. import analysis as an
from . import kinds, roofline
from ..modes import times
from .published import FIGURES, SOURCE
from ..results import BackendResult, RunResult
from ..tables import DASH, HOW, fmt_err, fmt_ms, fmt_pct, fmt_ratio, fmt_speedup, reason_line, speedup_cell, worst_layer

Table = tuple[list[str], list[list[str]]]


def label_with_trust(res: RunResult, b: BackendResult) -> str:
    """A backend's label, with why it is in no ratio where it is not (check FAIL, unchecked)."""
    why = an.untrusted_why(res, b)
    return f"{b.label} ({why})" if why else b.label


def times_table(res: RunResult, published: bool = False) -> Table:
    """Per-layer median wall time of every backend (ms), like table 7.4."""
    timed = an.timed(res)
    pub = FIGURES.get(res.net.name, {}) if published else {}
    headers = ["layer", "MFLOP"] + [label_with_trust(res, b) for b in timed] + [f"{name} ({SOURCE})" for name in pub]
    rows = []
    for i, layer in enumerate(res.net.layers):
        rows.append([layer.name, f"{layer.flops / 1e6:.1f}"] + [fmt_ms(an.layer_ms(b, i)) for b in timed]
                    + [fmt_ms(pub[name].get(layer.name)) for name in pub])
    rows.append(["sum of layers", f"{res.net.flops / 1e6:.1f}"] + [fmt_ms(an.layers_ms(b)) for b in timed]
                + [fmt_ms(sum(pub[name].get(layer.name, 0.0) for layer in res.net.layers)) for name in pub])
    rows.append(["end to end (compute)", ""] + [fmt_ms(an.compute_ms(b)) for b in timed] + ["" for _ in pub])
    return headers, rows


def spread_table(res: RunResult) -> Table | None:
    """Each timed backend's end-to-end compute as a distribution: median (p50), p90, p99, the extremes, and
    the spread (interquartile range over the median)."""
    rows = []
    for b in an.timed(res):
        c = b.timing.end_to_end.compute
        rows.append([label_with_trust(res, b), fmt_ms(c.median), fmt_ms(c.p90), fmt_ms(c.p99), fmt_ms(c.min),
                     fmt_ms(c.max), fmt_pct(None if c.spread is None else 100 * c.spread), str(c.n)])
    return (["backend", "p50", "p90", "p99", "min", "max", "spread %", "repeats"], rows) if rows else None


def speedup_table(res: RunResult, token: str) -> Table | None:
    """Each backend's speedup over the reference `token` stands for, per layer
    (its time / the backend's) and end to end, with 95% intervals; only backends whose output passed."""
    s = an.speedups(res, token)
    if s is None:
        return None
    base = an.reference(res, token)
    folds = [{**an.folded(base), **an.folded(b)} for b in an.trusted(res) if b.name != base.name]
    rows = [[layer.name] + [f"folded into the layer {folds[k][layer.name][0]}" if layer.name in folds[k]
                            else fmt_speedup(r) for k, r in enumerate(s.layers[i])]
            for i, layer in enumerate(res.net.layers)]
    rows.append(["sum of layers"] + [fmt_ratio(r) for r in s.sum_of_layers])
    rows.append(["end to end (compute)"] + [fmt_speedup(r) for r in s.end_to_end])
    rows.append(["end to end (with transfers)"] + [fmt_speedup(r) for r in s.with_transfers])
    rows.append(["geometric mean of layers"] + [fmt_ratio(r) for r in s.geomean])
    return ["layer"] + s.backends, rows


def kind_table(t: kinds.KindTable) -> Table:
    """Per backend, its time on each kind of layer (summed over those layers) and
    its speedup over CLBlast at its best there, with the 95% interval."""
    headers = ["backend"] + [f"{cat} ({n} layer{'s' if n > 1 else ''}, {mf:.0f} MFLOP)"
                             for cat, n, mf in zip(t.categories, t.layer_counts, t.mflops)]
    rows = [[label] + [f"folded into the layers {c.folded}" if c.folded and c.timed is None else
                       DASH if c.ms is None else
                       f"{fmt_ms(c.ms)} ms" + ("" if c.speedup is None else f", {fmt_speedup(c.speedup)}")
                       + (f" on the {c.timed} not folded into the layers {c.folded or 'beside'} them"
                          if c.timed is not None else "")
                       for c in row]
            for label, row in zip(t.backends, t.cells)]
    rows.append(["CLBlast at its best here"] + [ref or DASH for ref in t.references])
    return headers, rows


def utilisation_table(res: RunResult) -> Table | None:
    """Achieved GFLOP/s as a share of the device's peak, per layer and end to end."""
    u = an.utilisation(res)
    if u is None:
        return None
    rows = [[layer.name, f"{layer.flops / 1e9:.3f}"] + [fmt_pct(p) for p in u.layers[i]]
            for i, layer in enumerate(res.net.layers)]
    rows.append(["end to end (compute)", f"{res.net.flops / 1e9:.3f}"] + [fmt_pct(p) for p in u.end_to_end])
    return ["layer", "GFLOP"] + [f"{name} %" for name in u.backends], rows


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}" if whole else DASH


def wall_kernel_table(res: RunResult, b: BackendResult) -> Table | None:
    """Table 6.2's split: wall time, kernel time and their difference, the overhead."""
    layers = b.timing.layers
    if any(t.kernel is None for t in layers):
        return None
    rows = [[t.name, fmt_ms(t.wall), fmt_ms(t.kernel), fmt_ms(t.overhead), _pct(t.overhead.median, t.wall.median)]
            for t in layers]
    wall, kern, over = (sum(getattr(t, k).median for t in layers) for k in ("wall", "kernel", "overhead"))
    rows.append(["total", fmt_ms(wall), fmt_ms(kern), fmt_ms(over), _pct(over, wall)])
    return ["layer", "wall ms", "device ms", "overhead ms", "overhead %"], rows


def steps_table(res: RunResult, b: BackendResult) -> Table | None:
    """Table 5.3's breakdown: each layer's named steps and their device times."""
    layers = b.timing.layers
    if all(len(t.steps) <= 1 for t in layers):
        return None
    rows = []
    for t in layers:
        total = sum(s.ms.median for s in t.steps)
        for j, s in enumerate(t.steps):
            rows.append([t.name if j == 0 else "", s.name, fmt_ms(s.ms), HOW.get(s.how, s.how),
                         fmt_ms(total) if j == 0 else ""])
    return ["layer", "step", "ms", "measured as", "layer total ms"], rows


def useful_time_table(res: RunResult, b: BackendResult) -> Table | None:
    """Table 7.3: time in matrix products vs the infrastructure around them."""
    rows = []
    sums = [0.0, 0.0]
    for t in b.timing.layers:
        gemm = sum(s.ms.median for s in t.steps if an.is_gemm_step(s.name))
        other = sum(s.ms.median for s in t.steps if not an.is_gemm_step(s.name))
        if not gemm or not other:
            continue
        sums[0] += gemm
        sums[1] += other
        rows.append([t.name, fmt_ms(gemm), fmt_ms(other), fmt_ms(gemm + other), f"{_pct(gemm, gemm + other)}%"])
    if not rows:
        return None
    g, o = sums
    rows.append(["total", fmt_ms(g), fmt_ms(o), fmt_ms(g + o), f"{_pct(g, g + o)}%"])
    return ["layer", "GEMM ms", "infrastructure ms", "total ms", "useful time"], rows


def _mib(nbytes: int | None) -> str:
    return DASH if nbytes is None else f"{nbytes / 2**20:.1f}"


def launches_cell(b: BackendResult) -> str:
    """What one pass of `b` enqueues (backends/base.py Launches.text), or a dash where it is not known."""
    return DASH if b.launches is None else b.launches.text()


def transfers_table(res: RunResult) -> Table:
    headers = ["backend", "upload ms", "compute ms", "download ms", "end to end ms", "first run ms", "prepare ms",
               "memory MiB", "launches/pass"]
    rows = []
    for b in an.timed(res):
        e2e = b.timing.end_to_end
        rows.append([b.label, fmt_ms(e2e.upload), fmt_ms(e2e.compute), fmt_ms(e2e.download), fmt_ms(e2e.total),
                     fmt_ms(b.first_run_ms), fmt_ms(b.prepare_ms), _mib(b.memory_bytes), launches_cell(b)])
    return headers, rows


def correctness_table(res: RunResult) -> Table:
    headers = ["backend", "status", "check", "rel L2", "max abs", "worst layer (rel L2)", "top-1 agreement", "note"]
    rows = []
    for b in res.backends:
        if not b.ok or not b.check:
            rows.append([b.name, b.status, DASH, DASH, DASH, DASH, DASH, reason_line(b)])
            continue
        end = b.check.end_to_end
        worst = worst_layer(b)
        rows.append([b.name, b.status, b.check.status, fmt_err(end.rel_l2), fmt_err(end.max_abs),
                     f"{worst.name} {fmt_err(worst.rel_l2)}" if worst else DASH,
                     DASH if end.top1 is None else f"{100 * end.top1:.0f}%", end.note or ""])
    return headers, rows


def environment_table(res: RunResult) -> Table:
    dev, host = res.device, res.host
    rows = [["device", dev.name],
            ["platform", f"{dev.platform or DASH} {dev.platform_version or ''}".strip()],
            ["driver", dev.driver or DASH],
            ["OpenCL", dev.opencl or DASH],
            ["compute units", str(dev.compute_units) if dev.compute_units is not None else DASH],
            ["host", f"{host.cpu or DASH}, {host.cpus or DASH} CPUs, {host.os or ''}"],
            ["python", host.python or DASH],
            ["command", f"`{res.command}`"],
            ["date", res.created],
            ["tool", f"{res.tool.name} {res.tool.version}"],
            ["repeats", f"{res.settings.repeats} timed after {res.settings.warmup} warm-up"]]
    for key, src in res.sources.items():
        text = f"seed {src.seed}" if src.kind == "seed" else f"file {src.path}"
        rows.append([key, text + (f" (sha256 {src.sha256_16}...)" if src.sha256_16 else "")])
    if res.peak:
        bw = f", {res.peak.bandwidth_gbs:.1f} GB/s" if res.peak.bandwidth_gbs else ""
        rows.append(["peak", f"{res.peak.gflops:.1f} GFLOP/s{bw} ({res.peak.source})"])
    for b in res.backends:
        versions = b.info.get("versions") or {}
        if versions:
            rows.append([f"{b.name} versions", ", ".join(f"{k} {v}" for k, v in versions.items())])
        if b.config.get("clblast_parameters"):
            rows.append([f"{b.name} parameters", b.config["clblast_parameters"]])
    return ["", ""], rows


def tuning_progress_table(b: BackendResult) -> Table | None:
    """Per problem: how far CLBlast's default search went, the best found after 10%, 25%, 50% and 100% of
    it (where reached), and the verified choice against the database's time."""
    progress = b.config.get("clblast_tuning_progress")
    if not isinstance(progress, list) or not progress:
        return None
    marks = (0.1, 0.25, 0.5, 1.0)
    rows = []
    for p in progress:
        default = p.get("default") or 0
        row = [p["problem"], f"{p['tried']}/{default}" if default else "not searched"]
        for mark in marks:
            reached = [ms for n, ms in p["curve"] if n <= mark * default]
            row.append(f"{reached[-1]:.4f}" if reached and p["tried"] >= mark * default else DASH)
        v = p.get("verified")
        row.append(f"{v['choice']}: {v['ms']:.4f} (database {v['database_ms']:.4f})"
                   if v and v.get("ms") is not None and v.get("database_ms") is not None else DASH)
        rows.append(row)
    return ["problem", "tried/default"] + [f"best at {int(m * 100)}%" for m in marks] + ["verified"], rows


# the hand-written backends' forms measured at prepare (backends/handwritten: winograd.py, pointwise.py,
# split_choice.py), each a config key of layer -> {"chosen": form, "ms": {form: ms}}
FORM_CHOICES = ("winograd", "pointwise", "split_sums")


def choices_table(res: RunResult, b: BackendResult) -> Table | None:
    """What a backend that chooses per layer (clblast-best; the hand-written ones' measured forms)
    chose, and every candidate's time at prepare (ms; 'refused' where the device would not run it),
    with its share of the device's fp32 peak where the run has one: the layer's FLOPs as the direct
    convolution counts them (a Winograd form's "effective" rate) over that time."""
    peak = res.peak.gflops if res.peak else None
    flops = {layer.name: layer.flops for layer in res.net.layers}

    def cell(layer: str, name: str, ms) -> str:
        if isinstance(ms, str):
            return f"{name} {ms}"
        pct = an.percent_of_peak(flops[layer], ms, peak) if peak and flops.get(layer) else None
        return f"{name} {fmt_ms(ms)}" + (f" ({pct:.1f}%)" if pct is not None else "")
    candidates = b.config.get("candidates_ms")
    rows = []
    if isinstance(candidates, dict):
        for layer, timed in candidates.items():
            chosen = str(b.config.get("layers", {}).get(layer, ""))
            rows.append([layer, chosen.split(":", 1)[0], ", ".join(cell(layer, name, ms) for name, ms in timed.items())])
    for key in FORM_CHOICES:
        for layer, record in (b.config.get(key) or {}).items():
            if isinstance(record, dict) and isinstance(record.get("ms"), dict):
                rows.append([layer, record.get("chosen", ""),
                             ", ".join(cell(layer, name, ms) for name, ms in record["ms"].items())])
    if not rows:
        return None
    share = "; in brackets % of fp32 peak at the layer's direct FLOPs" if peak else ""
    return ["layer", "chosen", f"candidates (ms at prepare{share})"], rows


def device_label(res: RunResult) -> str:
    return f"{res.device.name} ({res.created[:10]})"


def cross_device_table(group: list[RunResult], token: str = an.DEFAULT_BASELINES[0]) -> Table:
    """One column per results file (device and date): each backend's end-to-end
    compute time and its speedup over the reference `token` stands for there."""
    names = list(dict.fromkeys(b.name for r in group for b in r.backends))
    rows = []
    for name in names:
        row = [name]
        for r in group:
            b = r.backend(name)
            ms = an.compute_ms(b)
            ref = an.reference(r, token)
            if ms is None:
                row.append(DASH)
            elif an.untrusted_why(r, b) or ref is None or name == ref.name:
                row.append(f"{fmt_ms(ms)}" + (f" ({an.untrusted_why(r, b)})" if an.untrusted_why(r, b) else ""))
            else:
                row.append(f"{fmt_ms(ms)} ({fmt_speedup(an.speedup(ref, b))})")
        rows.append(row)
    return ["backend"] + [device_label(r) for r in group], rows


def roofline_table(lines: list[roofline.Roofline]) -> Table | None:
    """Each layer at each batch: its intensity, the roof there, and the share
    of that roof each backend reached (compare/report/roofline.py)."""
    rows_in = [(rl, layer) for rl in sorted(lines, key=lambda rl: rl.batch) for layer in rl.layers]
    if not rows_in:
        return None
    # layer by layer, each at every batch: how a larger batch moves it along the roof
    order = list(dict.fromkeys(layer.name for _, layer in rows_in))
    rows_in.sort(key=lambda pair: order.index(pair[1].name))
    names = list(dict.fromkeys(name for rl in lines for name in rl.backends))
    rows = [[layer.name, str(layer.batch), f"{layer.intensity:.2f}", f"{layer.roof_gflops:.1f}"]
            + [fmt_pct(layer.percent(name)) for name in names] for _, layer in rows_in]
    return ["layer", "batch", "FLOP/byte", "roof GFLOP/s"] + [f"{name} %" for name in names], rows


def headline_table(results: list[RunResult]) -> Table | None:
    """The report's first table (and headline.md, for a README): per results
    file, each backend's end-to-end compute time and its speedup over CLBlast
    at its best in that file, with the 95% interval; a winner only where it
    excludes 1x; the status where a backend did not run, and no ratio where its
    output failed the check or was not checked."""
    runs = [r for r in results if times(r.mode) and an.timed(r)]
    if not runs:
        return None
    names = list(dict.fromkeys(b.name for r in runs for b in r.backends))
    several = len({r.device.name for r in runs}) > 1
    headers = ["backend"]
    for r in runs:
        ref = an.reference(r, an.BEST_CLBLAST)
        where = f"{r.net.name} batch {r.net.batch}" + (f" on {r.device.name}" if several else "")
        against = (f"vs CLBlast at its best ({ref.label})" if ref is not None else
                   "vs CLBlast at its best (none passed)" if an.trusted(r) else "vs CLBlast (unchecked run: no ratio)")
        headers += [f"{where} ms", against + (f" on {r.device.name}" if several else "")]
    rows = []
    for name in names:
        labels = [r.backend(name).label for r in runs if r.backend(name) is not None]
        same = len(set(labels)) <= 1   # else the mode used differs by net: each time says its own
        row = [labels[-1] if same and labels else name]
        for r in runs:
            b, ref = r.backend(name), an.reference(r, an.BEST_CLBLAST)
            ms = an.compute_ms(b)
            if ms is None:
                row += [b.status if b is not None else DASH, DASH]
                continue
            shown = fmt_ms(ms) if same else f"{fmt_ms(ms)} {b.label[len(name):].strip()}".strip()
            row += [shown, speedup_cell(r, b, ref, an.speedup(ref, b)) if ref is not None or an.untrusted_why(r, b)
                    else DASH]
        rows.append(row)
    return headers, rows

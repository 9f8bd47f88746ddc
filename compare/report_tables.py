"""The tables of a report, each as (headers, rows) of strings, built from a
results file only.  Shapes follow the seed's tables: 7.4 (times and
speedups), 5.3 (steps), 6.2 (wall / kernel / overhead), 7.3 (useful time)."""
from __future__ import annotations

from .published import FIGURES, SOURCE
from .stats import geomean
from .tables import DASH, compute_ms, fmt_err, fmt_ms, fmt_ratio, gflops, layers_ms, median, reason_line

Table = tuple[list[str], list[list[str]]]


def timed(res: dict) -> list[dict]:
    """Backends with timings, in the file's order."""
    return [b for b in res["backends"] if b["status"] == "OK" and b.get("timing")]


def by_name(res: dict) -> dict[str, dict]:
    return {b["name"]: b for b in res["backends"]}


def layer_ms(entry: dict, i: int) -> float | None:
    return median(entry["timing"]["layers"][i]["wall"])


def _ratio(num, den):
    return num / den if num and den else None


def is_gemm_step(name: str) -> bool:
    """Steps that do the matrix products (CLBlast's routines, Morton GEMM, GEMV kernels)."""
    low = name.lower()
    return "gemm" in low or "gemv" in low


def on_device(res: dict, entry: dict) -> bool:
    """Does `entry` run on the device whose peak the file holds?  OpenCL
    backends do; a peer does when it names that device (PyTorch on the same
    GPU), or is a CPU peer and the OpenCL device is the CPU (PoCL)."""
    if entry.get("uses_opencl"):
        return True
    info = entry.get("info") or {}
    if info.get("device") and info["device"] == res["device"].get("name"):
        return True
    kind = info.get("kind", "")
    dev_type = str(res["device"].get("type", "")).upper()
    return bool(kind) and kind.upper() in dev_type


def times_table(res: dict, published: bool = False) -> Table:
    """Per-layer median wall time of every backend (ms), like table 7.4."""
    backends = timed(res)
    pub = FIGURES.get(res["net"]["name"], {}) if published else {}
    headers = ["layer", "MFLOP"] + [b["name"] for b in backends] + [f"{name} ({SOURCE})" for name in pub]
    rows = []
    for i, layer in enumerate(res["net"]["layers"]):
        rows.append([layer["name"], f"{layer['flops'] / 1e6:.1f}"]
                    + [fmt_ms(layer_ms(b, i)) for b in backends]
                    + [fmt_ms(pub[name].get(layer["name"])) for name in pub])
    rows.append(["sum of layers", f"{res['net']['flops'] / 1e6:.1f}"] + [fmt_ms(layers_ms(b)) for b in backends]
                + [fmt_ms(sum(pub[name].get(layer["name"], 0.0) for layer in res["net"]["layers"]))
                   for name in pub])
    rows.append(["end to end (compute)", ""] + [fmt_ms(compute_ms(b)) for b in backends] + ["" for _ in pub])
    return headers, rows


def speedup_table(res: dict, ref: str) -> Table | None:
    """Each backend's speedup over `ref` per layer (ref time / backend time)."""
    base = by_name(res).get(ref)
    if not base or base["status"] != "OK" or not base.get("timing"):
        return None
    others = [b for b in timed(res) if b["name"] != ref]
    if not others:
        return None
    headers = ["layer"] + [b["name"] for b in others]
    rows = []
    per_backend = {b["name"]: [] for b in others}
    for i, layer in enumerate(res["net"]["layers"]):
        row = [layer["name"]]
        for b in others:
            r = _ratio(layer_ms(base, i), layer_ms(b, i))
            per_backend[b["name"]].append(r)
            row.append(fmt_ratio(r))
        rows.append(row)
    rows.append(["sum of layers"] + [fmt_ratio(_ratio(layers_ms(base), layers_ms(b))) for b in others])
    rows.append(["end to end (compute)"] + [fmt_ratio(_ratio(compute_ms(base), compute_ms(b))) for b in others])
    rows.append(["geometric mean of layers"] + [fmt_ratio(geomean(per_backend[b["name"]])) for b in others])
    return headers, rows


def utilisation_table(res: dict) -> Table | None:
    """Achieved GFLOP/s as a share of the device's peak, per layer and end to end."""
    peak = (res.get("peak") or {}).get("gflops")
    backends = [b for b in timed(res) if on_device(res, b)]
    if not peak or not backends:
        return None
    headers = ["layer", "GFLOP"] + [f"{b['name']} %" for b in backends]
    rows = []

    def pct(flops, ms):
        g = gflops(flops, ms)
        return DASH if g is None else f"{100 * g / peak:.1f}"

    for i, layer in enumerate(res["net"]["layers"]):
        rows.append([layer["name"], f"{layer['flops'] / 1e9:.3f}"] + [pct(layer["flops"], layer_ms(b, i)) for b in backends])
    rows.append(["end to end (compute)", f"{res['net']['flops'] / 1e9:.3f}"]
                + [pct(res["net"]["flops"], compute_ms(b)) for b in backends])
    return headers, rows


def wall_kernel_table(res: dict, entry: dict) -> Table | None:
    """Table 6.2's split: wall time, kernel time and their difference, the overhead."""
    layers = entry["timing"]["layers"]
    if any(t["kernel"] is None for t in layers):
        return None
    headers = ["layer", "wall ms", "kernel ms", "overhead ms", "overhead %"]
    rows = []
    for t in layers:
        wall, kern, over = median(t["wall"]), median(t["kernel"]), median(t["overhead"])
        rows.append([t["name"], fmt_ms(wall), fmt_ms(kern), fmt_ms(over), f"{100 * over / wall:.0f}" if wall else DASH])
    wall = sum(median(t["wall"]) for t in layers)
    kern = sum(median(t["kernel"]) for t in layers)
    over = sum(median(t["overhead"]) for t in layers)
    rows.append(["total", fmt_ms(wall), fmt_ms(kern), fmt_ms(over), f"{100 * over / wall:.0f}" if wall else DASH])
    return headers, rows


def steps_table(res: dict, entry: dict) -> Table | None:
    """Table 5.3's breakdown: each layer's named steps and their device times."""
    layers = entry["timing"]["layers"]
    if all(len(t["steps"]) <= 1 for t in layers):
        return None
    headers = ["layer", "step", "ms", "how", "layer total ms"]
    rows = []
    for t in layers:
        total = sum(median(s["ms"]) for s in t["steps"])
        for j, s in enumerate(t["steps"]):
            rows.append([t["name"] if j == 0 else "", s["name"], fmt_ms(s["ms"]), s["how"],
                         fmt_ms(total) if j == 0 else ""])
    return headers, rows


def useful_time_table(res: dict, entry: dict) -> Table | None:
    """Table 7.3: time in matrix products vs the infrastructure around them."""
    rows = []
    sums = [0.0, 0.0]
    for t in entry["timing"]["layers"]:
        gemm = sum(median(s["ms"]) for s in t["steps"] if is_gemm_step(s["name"]))
        other = sum(median(s["ms"]) for s in t["steps"] if not is_gemm_step(s["name"]))
        if not gemm or not other:
            continue
        sums[0] += gemm
        sums[1] += other
        rows.append([t["name"], fmt_ms(gemm), fmt_ms(other), fmt_ms(gemm + other), f"{100 * gemm / (gemm + other):.0f}%"])
    if not rows:
        return None
    g, o = sums
    rows.append(["total", fmt_ms(g), fmt_ms(o), fmt_ms(g + o), f"{100 * g / (g + o):.0f}%"])
    return ["layer", "GEMM ms", "infrastructure ms", "total ms", "useful time"], rows


def transfers_table(res: dict) -> Table:
    headers = ["backend", "upload ms", "compute ms", "download ms", "end to end ms", "first run ms", "prepare ms"]
    rows = []
    for b in timed(res):
        e2e = b["timing"]["end_to_end"]
        rows.append([b["name"], fmt_ms(e2e["upload"]), fmt_ms(e2e["compute"]), fmt_ms(e2e["download"]),
                     fmt_ms(e2e["total"]), fmt_ms(b.get("first_run_ms")), fmt_ms(b.get("prepare_ms"))])
    return headers, rows


def correctness_table(res: dict) -> Table:
    headers = ["backend", "status", "check", "rel L2", "max abs", "worst layer (rel L2)", "top-1 agreement", "note"]
    rows = []
    for b in res["backends"]:
        check = b.get("check")
        if b["status"] != "OK" or not check:
            rows.append([b["name"], b["status"], DASH, DASH, DASH, DASH, DASH, reason_line(b)])
            continue
        end = check["end_to_end"]
        layers = [r for r in check["layers"] if r.get("rel_l2") is not None]
        worst = max(layers, key=lambda r: r["rel_l2"], default=None)
        top1 = end.get("top1")
        rows.append([b["name"], b["status"], check["status"], fmt_err(end.get("rel_l2")), fmt_err(end.get("max_abs")),
                     f"{worst['name']} {fmt_err(worst['rel_l2'])}" if worst else DASH,
                     DASH if top1 is None else f"{100 * top1:.0f}%", end.get("note", "")])
    return headers, rows


def environment_table(res: dict) -> Table:
    dev = res["device"]
    rows = [["device", dev.get("name", DASH)],
            ["platform", f"{dev.get('platform', DASH)} {dev.get('platform_version', '')}".strip()],
            ["driver", dev.get("driver", DASH)],
            ["OpenCL", dev.get("opencl", DASH)],
            ["compute units", str(dev.get("compute_units", DASH))],
            ["host", f"{res['host'].get('cpu', DASH)}, {res['host'].get('cpus', DASH)} CPUs, {res['host'].get('os', '')}"],
            ["python", res["host"].get("python", DASH)],
            ["command", f"`{res['command']}`"],
            ["date", res["created"]],
            ["tool", f"{res['tool']['name']} {res['tool']['version']}"],
            ["repeats", f"{res['settings']['repeats']} timed after {res['settings']['warmup']} warm-up"]]
    for key, src in (res.get("sources") or {}).items():
        rows.append([key, _source_text(src)])
    peak = res.get("peak")
    if peak:
        bw = f", {peak['bandwidth_gbs']:.1f} GB/s" if peak.get("bandwidth_gbs") else ""
        rows.append(["peak", f"{peak['gflops']:.1f} GFLOP/s{bw} ({peak['source']})"])
    for b in res["backends"]:
        versions = (b.get("info") or {}).get("versions") or {}
        if versions:
            rows.append([f"{b['name']} versions", ", ".join(f"{k} {v}" for k, v in versions.items())])
    return ["", ""], rows


def _source_text(src: dict) -> str:
    text = f"seed {src.get('seed')}" if src.get("kind") == "seed" else f"file {src.get('path')}"
    return text + (f" (sha256 {src['sha256_16']}...)" if src.get("sha256_16") else "")


def device_label(res: dict) -> str:
    return f"{res['device'].get('name', '?')} ({res['created'][:10]})"


def cross_device_table(group: list[dict]) -> Table:
    """One column per results file (device and date): each backend's end-to-end
    compute time and its speedup over clblast on that device."""
    labels = [device_label(r) for r in group]
    names = list(dict.fromkeys(b["name"] for r in group for b in r["backends"]))
    rows = []
    for name in names:
        row = [name]
        for r in group:
            entry = by_name(r).get(name)
            ms = compute_ms(entry) if entry else None
            base = by_name(r).get("clblast")
            speed = _ratio(compute_ms(base), ms) if base and name != "clblast" else None
            row.append(DASH if ms is None else (f"{fmt_ms(ms)} ({fmt_ratio(speed)})" if speed else fmt_ms(ms)))
        rows.append(row)
    return ["backend"] + labels, rows

"""Plain-text tables of one results file, printed by `compare run` and `compare check`."""
from __future__ import annotations

from tabulate import tabulate

DASH = "—"


def fmt_ms(stats_or_ms, digits: int = 3) -> str:
    if stats_or_ms is None:
        return DASH
    ms = stats_or_ms["median"] if isinstance(stats_or_ms, dict) else stats_or_ms
    if ms is None:
        return DASH
    return f"{ms:.{digits}f}" if ms < 1000 else f"{ms:.1f}"


def fmt_ratio(x) -> str:
    return DASH if x is None else f"{x:.2f}x"


def fmt_err(x) -> str:
    return DASH if x is None else f"{x:.1e}"


def gflops(flops: int, ms: float | None) -> float | None:
    if not ms:
        return None
    return flops / (ms * 1e-3) / 1e9


def median(stats) -> float | None:
    return stats["median"] if stats else None


def compute_ms(entry: dict) -> float | None:
    """A backend's headline time: the end-to-end forward pass without per-layer
    syncs and without host<->device transfers."""
    timing = entry.get("timing") if entry.get("status") == "OK" else None
    return median(timing["end_to_end"]["compute"]) if timing else None


def layers_ms(entry: dict) -> float | None:
    timing = entry.get("timing") if entry.get("status") == "OK" else None
    return sum(median(layer["wall"]) for layer in timing["layers"]) if timing else None


def _steps_text(steps) -> str:
    return " + ".join(f"{s['name']} {fmt_ms(s['ms'])}" for s in steps) if len(steps) > 1 else ""


def layer_table(results: dict, entry: dict) -> str:
    """Per-layer times of one backend: wall, kernel, overhead, GFLOP/s, steps."""
    net_layers = results["net"]["layers"]
    rows = []
    for spec, t in zip(net_layers, entry["timing"]["layers"]):
        rows.append([spec["name"], spec["kind"], f"{spec['flops'] / 1e6:.1f}", fmt_ms(t["wall"]),
                     fmt_ms(t["kernel"]), fmt_ms(t["overhead"]),
                     _num(gflops(spec["flops"], median(t["wall"]))), _steps_text(t["steps"])])
    e2e = entry["timing"]["end_to_end"]
    total_flops = results["net"]["flops"]
    rows.append(["sum of layers", "", f"{total_flops / 1e6:.1f}", fmt_ms(layers_ms(entry)), "", "",
                 _num(gflops(total_flops, layers_ms(entry))), ""])
    rows.append(["end to end", "", "", fmt_ms(e2e["total"]), "", "", _num(gflops(total_flops, median(e2e["compute"]))),
                 f"upload {fmt_ms(e2e['upload'])} + compute {fmt_ms(e2e['compute'])} + download {fmt_ms(e2e['download'])}"])
    headers = ["layer", "kind", "MFLOP", "wall ms", "kernel ms", "overhead ms", "GFLOP/s", "steps (median ms)"]
    return tabulate(rows, headers=headers, disable_numparse=True)


def reason_line(entry: dict) -> str:
    """The first line of why a backend did not run (empty when it did)."""
    reason = entry.get("reason") or ""
    return reason.splitlines()[0] if reason else ""


def _num(x) -> str:
    return DASH if x is None else f"{x:.2f}"


def summary_table(results: dict) -> str:
    """One row per backend: status, check, headline time, speedups."""
    by_name = {b["name"]: b for b in results["backends"]}
    refs = {ref: compute_ms(by_name[ref]) for ref in ("clblast", "numpy") if ref in by_name}
    rows = []
    for b in results["backends"]:
        ms = compute_ms(b)
        check = b.get("check")
        rows.append([
            b["name"], b["status"], check["status"] if check else DASH,
            fmt_ms(ms), fmt_ms(layers_ms(b)), _num(gflops(results["net"]["flops"], ms)),
            *[fmt_ratio(refs[r] / ms if ms and refs[r] else None) for r in refs],
            reason_line(b),
        ])
    headers = ["backend", "status", "check", "compute ms", "sum of layers ms", "GFLOP/s",
               *[f"vs {r}" for r in refs], "note"]
    return tabulate(rows, headers=headers, disable_numparse=True)


def check_table(results: dict) -> str:
    """Correctness per backend: end-to-end error, worst layer, top-1 agreement."""
    rows = []
    for b in results["backends"]:
        check = b.get("check")
        if b["status"] != "OK" or not check:
            rows.append([b["name"], b["status"], DASH, DASH, DASH, DASH, reason_line(b)])
            continue
        end = check["end_to_end"]
        worst = max(check["layers"], key=lambda r: r["rel_l2"] if r["rel_l2"] is not None else float("inf"),
                    default=None)
        worst_text = f"{worst['name']} {fmt_err(worst['rel_l2'])}" if worst else DASH
        top1 = end.get("top1")
        rows.append([b["name"], check["status"], fmt_err(end["rel_l2"]), fmt_err(end["max_abs"]), worst_text,
                     DASH if top1 is None else f"{top1 * 100:.0f}%", end.get("note", "")])
    headers = ["backend", "check", "rel L2", "max abs", "worst layer (rel L2)", "top-1 agree", "note"]
    return tabulate(rows, headers=headers, disable_numparse=True)

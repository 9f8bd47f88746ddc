"""Every figure derived from results, computed once here: times, GFLOP/s,
speedups with their geometric means, and utilisation.  The terminal
tables, the Markdown/HTML report and the plots all read them from here.

A speedup of backend B over reference R is R's time / B's time: above 1x, B
is faster; beside it, the 95% bootstrap interval of that ratio from the raw
samples (compare/intervals.py), and a winner only where it excludes 1x.  The
references are a setting (`compare report --baseline`); `best-clblast` is
whichever CLBlast backend was fastest end to end in that file (CLBlast at
its best), so the headline ratio is never taken against a weak CLBlast.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from nets.errors import UserError

from .intervals import ratio_interval
from .results import BackendResult, RunResult

BEST_CLBLAST = "best-clblast"
DEFAULT_BASELINES = (BEST_CLBLAST, "clblast", "numpy")


def compute_ms(b: BackendResult | None) -> float | None:
    """A backend's headline time: the whole forward pass without per-layer
    syncs and without host<->device transfers (median)."""
    return b.timing.end_to_end.compute.median if b is not None and b.ok and b.timing else None


def layer_ms(b: BackendResult, i: int) -> float | None:
    return b.timing.layers[i].wall.median if b.ok and b.timing else None


def layers_ms(b: BackendResult | None) -> float | None:
    if b is None or not b.ok or not b.timing:
        return None
    return sum(t.wall.median for t in b.timing.layers)


def gflops(flops: int, ms: float | None) -> float | None:
    return flops / (ms * 1e-3) / 1e9 if ms else None


# a backend's config key naming the layers whose work it folded into another layer's kernel -> the side
# of them that layer is on: the residual adds into the conv before, the depthwise convs into the 1x1 after,
# the expands into the block kernel before (backends/handwritten/blocks.py)
FOLDS = {"residual_adds_fused": "before", "depthwise_fused": "after", "blocks_fused": "before"}


def folded(b: BackendResult) -> dict[str, tuple[str, str]]:
    """Layer name -> (where its work went: "before" or "after", the backend's own words, e.g.
    "into conv3_1b's epilogue (adds conv3_1a)") for each layer the backend folded into another's
    kernel.  Such a layer's time is ~0 and its work counted in the other's: no speedup of its own."""
    config = b.config or {}
    return {name: (where, text) for key, where in FOLDS.items() for name, text in (config.get(key) or {}).items()}


def ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num and den else None


def geomean(values) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals)))


def timed(res: RunResult) -> list[BackendResult]:
    """Backends with timings, in the file's order."""
    return [b for b in res.backends if b.ok and b.timing]


def on_device(res: RunResult, b: BackendResult) -> bool:
    """Does `b` run on the device whose peak the file holds?  OpenCL backends
    do; a peer does when it names that device (PyTorch on the same GPU), or
    is a CPU peer and the OpenCL device is the CPU (PoCL)."""
    if b.uses_opencl:
        return True
    device = b.info.get("device")
    if device and device == res.device.name:
        return True
    kind = str(b.info.get("kind") or "")
    return bool(kind) and kind.upper() in str(res.device.type or "").upper()


def parse_baselines(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--baseline needs at least one backend name, e.g. --baseline clblast,numpy")
    return list(dict.fromkeys(names))


def reference(res: RunResult, token: str) -> BackendResult | None:
    """The backend a baseline token stands for in `res`, when it has timings."""
    if token == BEST_CLBLAST:
        return min((b for b in timed(res) if b.name.startswith("clblast")), key=compute_ms, default=None)
    b = res.backend(token)
    return b if compute_ms(b) is not None else None


def reference_label(res: RunResult, token: str) -> str:
    b = reference(res, token)
    if token == BEST_CLBLAST and b is not None:
        return f"CLBlast at its best ({b.label})"
    return token


def baselines(res: RunResult, names=DEFAULT_BASELINES) -> list[str]:
    """The tokens among `names` that stand for a timed backend of `res`, each backend once."""
    out, seen = [], set()
    for token in names:
        b = reference(res, token)
        if b is not None and b.name not in seen:
            seen.add(b.name)
            out.append(token)
    return out


Interval = tuple[float, float] | None


@dataclass
class Speedups:
    """Every other timed backend's speedup over the reference a token stands for."""

    token: str
    reference: str                            # the backend it stood for
    label: str
    backends: list[str]
    layers: list[list[float | None]]          # [layer][backend]
    layer_intervals: list[list[Interval]]
    sum_of_layers: list[float | None]
    end_to_end: list[float | None]            # compute, no per-layer syncs
    end_to_end_intervals: list[Interval]
    with_transfers: list[float | None]        # upload + compute + download
    with_transfers_intervals: list[Interval]
    geomean: list[float | None]               # of the per-layer speedups


def _values(samples) -> list[float]:
    return samples.values if samples is not None else []


def speedups(res: RunResult, token: str) -> Speedups | None:
    base = reference(res, token)
    if base is None:
        return None
    others = [b for b in timed(res) if b.name != base.name]
    if not others:
        return None
    n = len(res.net.layers)
    # a layer that either side folded into another has no speedup of its own (nor a place in the geomean)
    skip = [set(folded(base)) | set(folded(b)) for b in others]
    names = [layer.name for layer in res.net.layers]
    per_layer = [[None if names[i] in skip[k] else ratio(layer_ms(base, i), layer_ms(b, i))
                  for k, b in enumerate(others)] for i in range(n)]
    layer_ci = [[None if names[i] in skip[k] else
                 ratio_interval(_values(base.timing.layers[i].wall), _values(b.timing.layers[i].wall))
                 for k, b in enumerate(others)] for i in range(n)]
    e2e, e2e_b = base.timing.end_to_end, [b.timing.end_to_end for b in others]
    return Speedups(
        token=token, reference=base.name, label=reference_label(res, token), backends=[b.label for b in others],
        layers=per_layer, layer_intervals=layer_ci,
        sum_of_layers=[ratio(layers_ms(base), layers_ms(b)) for b in others],
        end_to_end=[ratio(compute_ms(base), compute_ms(b)) for b in others],
        end_to_end_intervals=[ratio_interval(_values(e2e.compute), _values(t.compute)) for t in e2e_b],
        with_transfers=[ratio(e2e.total.median, t.total.median) for t in e2e_b],
        with_transfers_intervals=[ratio_interval(_values(e2e.total), _values(t.total)) for t in e2e_b],
        geomean=[geomean([row[k] for row in per_layer]) for k in range(len(others))])


@dataclass
class Utilisation:
    """Achieved GFLOP/s as % of the device's peak, for the backends on it."""

    peak_gflops: float
    backends: list[str]
    layers: list[list[float | None]]        # [layer][backend]
    end_to_end: list[float | None]


def percent_of_peak(flops: int, ms: float | None, peak: float) -> float | None:
    g = gflops(flops, ms)
    return None if g is None else 100 * g / peak


def utilisation(res: RunResult) -> Utilisation | None:
    peak = res.peak.gflops if res.peak else None
    on = [b for b in timed(res) if on_device(res, b)]
    if not peak or not on:
        return None
    return Utilisation(
        peak_gflops=peak, backends=[b.name for b in on],
        layers=[[None if layer.name in folded(b) else percent_of_peak(layer.flops, layer_ms(b, i), peak) for b in on]
                for i, layer in enumerate(res.net.layers)],
        end_to_end=[percent_of_peak(res.net.flops, compute_ms(b), peak) for b in on])


def is_gemm_step(name: str) -> bool:
    """Steps that do the matrix products (CLBlast's routines, Morton GEMM, GEMV kernels)."""
    low = name.lower()
    return "gemm" in low or "gemv" in low

"""Every figure derived from results, computed once here: times, GFLOP/s,
speedups with their geometric means, and utilisation.  The terminal
tables, the Markdown/HTML report and the plots all read them from here.

A speedup (compare/speedup.py: the ratio, its 95% bootstrap interval and
its verdict) is taken only between backends whose output passed the check
against the float64 oracle (`trusted`): a backend that failed it, or ran
unchecked (--mode performance), shows its time and status and no ratio.
The references are a setting (`compare report --baseline`); `best-clblast`
is whichever CLBlast backend that passed was fastest end to end in that
file (CLBlast at its best), so the headline ratio is never taken against a
weak CLBlast.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from nets.errors import UserError

from .intervals import SUBSAMPLE, subsampled
from .modes import checks
from .results import BackendResult, RunResult
from .speedup import Speedup, of_samples

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
# the expands into the block kernel before (backends/handwritten/blocks.py), the layernorms into the 1x1 after
# (backends/handwritten/layernorm_fused.py), a head's global average pool into the dense after (head_fused.py),
# a max pool into the Winograd conv before (pool_fold.py)
FOLDS = {"residual_adds_fused": "before", "depthwise_fused": "after", "blocks_fused": "before",
         "layernorm_fused": "after", "head_fused": "after", "pools_fused": "before"}


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
    """Backends with timings, in the file's order (whether or not their output passed)."""
    return [b for b in res.backends if b.ok and b.timing]


def trusted(res: RunResult) -> list[BackendResult]:
    """Timed backends whose output passed the check against the oracle: the only ones a ratio may use."""
    return [b for b in timed(res) if b.passed]


def untrusted_why(res: RunResult, b: BackendResult) -> str | None:
    """Why a timed backend is in no ratio (its check failed, or the run checked nothing), or None."""
    if not b.ok or not b.timing or b.passed:
        return None
    if not checks(res.mode) or b.check is None:
        return "unchecked"
    return "check FAIL"


def unchecked_note(res: RunResult) -> str | None:
    """What every table made from a file without checks says."""
    if checks(res.mode):
        return None
    return (f"This run ({res.command or '--mode performance'}) did not check outputs against the float64 oracle: "
            f"its times are shown, and no ratio is taken from them.")


def subsample_note(res: RunResult) -> str | None:
    """What the report says where a backend's intervals come from a subsample (compare/intervals.py)."""
    big = [b.label for b in timed(res)
           if any(subsampled(len(s.values)) for s in (b.timing.end_to_end.compute, b.timing.end_to_end.total,
                                                      *(t.wall for t in b.timing.layers)) if s is not None)]
    if not big:
        return None
    return (f"{', '.join(big)} kept more than {SUBSAMPLE:,} timings of one quantity: the 95% intervals of "
            f"{'its' if len(big) == 1 else 'their'} ratios are bootstrapped from a seeded subsample of "
            f"{SUBSAMPLE:,} of them (the medians themselves from every timing).")


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


def baseline_names(text: str) -> list[str]:
    """--baseline's names, each once (at least one)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--baseline needs at least one backend name, e.g. --baseline clblast,numpy")
    return list(dict.fromkeys(names))


def parse_baselines(text: str, known=None) -> list[str]:
    """--baseline's names, each once; each must be `best-clblast` or in `known` (default: the backends
    there are), so a misspelt name is refused before any work rather than silently giving no ratio."""
    names = baseline_names(text)
    if known is None:
        import backends
        known = backends.names()
    choices = [BEST_CLBLAST] + sorted(set(known) - {BEST_CLBLAST})
    for n in names:
        if n not in choices:
            raise UserError(f"--baseline names {n!r}, which is no backend: choose from {', '.join(choices)}")
    return names


def reference(res: RunResult, token: str) -> BackendResult | None:
    """The backend a baseline token stands for in `res`, when it was timed and passed the check."""
    if token == BEST_CLBLAST:
        return min((b for b in trusted(res) if b.family == "clblast"), key=compute_ms, default=None)
    b = res.backend(token)
    return b if b is not None and b in trusted(res) else None


def speedup(ref: BackendResult | None, b: BackendResult | None) -> Speedup | None:
    """b's end-to-end speedup over ref (compute, no per-layer syncs), when both were timed and passed."""
    if ref is None or b is None or not ref.passed or not b.passed or not ref.timing or not b.timing:
        return None
    return of_samples(ref.timing.end_to_end.compute, b.timing.end_to_end.compute)


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


@dataclass
class Speedups:
    """Every other trusted backend's speedup over the reference a token stands for."""

    token: str
    reference: str                            # the backend it stood for
    label: str
    backends: list[str]
    layers: list[list[Speedup | None]]        # [layer][backend]
    sum_of_layers: list[float | None]
    end_to_end: list[Speedup | None]          # compute, no per-layer syncs
    with_transfers: list[Speedup | None]      # upload + compute + download
    geomean: list[float | None]               # of the per-layer speedups


def speedups(res: RunResult, token: str) -> Speedups | None:
    base = reference(res, token)
    if base is None:
        return None
    others = [b for b in trusted(res) if b.name != base.name]
    if not others:
        return None
    n = len(res.net.layers)
    # a layer that either side folded into another has no speedup of its own (nor a place in the geomean)
    skip = [set(folded(base)) | set(folded(b)) for b in others]
    names = [layer.name for layer in res.net.layers]
    per_layer = [[None if names[i] in skip[k] else of_samples(base.timing.layers[i].wall, b.timing.layers[i].wall)
                  for k, b in enumerate(others)] for i in range(n)]
    e2e = base.timing.end_to_end
    return Speedups(
        token=token, reference=base.name, label=reference_label(res, token), backends=[b.label for b in others],
        layers=per_layer,
        sum_of_layers=[ratio(layers_ms(base), layers_ms(b)) for b in others],
        end_to_end=[speedup(base, b) for b in others],
        with_transfers=[of_samples(e2e.total, b.timing.end_to_end.total) for b in others],
        geomean=[geomean([row[k].value if row[k] else None for row in per_layer]) for k in range(len(others))])


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
    on = [b for b in trusted(res) if on_device(res, b)]
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

"""The figures and tables of a batch sweep (compare/sweep.py), from its
results files only: time per image against batch for every backend, and at
each batch the best hand-written backend against CLBlast at its best, with
the 95% interval of that speedup and the batch, if any, from which CLBlast
is the faster.  A winner is named only where the interval excludes 1x."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import analysis as an
from ..results import BackendResult, RunResult
from ..speedup import MIN_SAMPLES, NO_CLEAR_WINNER, TOO_NOISY, Speedup, Verdict
from ..sweep import does_not_fit
from ..tables import DASH, fmt_speedup

Table = tuple[list[str], list[list[str]]]

# what a batch's comparison found
HAND, CLBLAST, UNCLEAR, NO_INTERVAL, MISSING = "hand-written", "clblast", "unclear", "no interval", "missing"
NOISY = "noisy"   # the interval spans 1x and is too wide to read (compare/speedup.py NOISY_SPAN)


def is_hand_written(b: BackendResult) -> bool:
    return b.family == "hand-written"


def is_clblast(b: BackendResult) -> bool:
    return b.family == "clblast"   # as analysis.reference picks CLBlast at its best


def per_image_ms(res: RunResult, b: BackendResult | None) -> float | None:
    """End-to-end compute median over the batch."""
    ms = an.compute_ms(b)
    return ms / res.net.batch if ms else None


def fmt_per_image(ms: float | None) -> str:
    """Four significant digits: times per image span microseconds to seconds."""
    if ms is None:
        return DASH
    digits = max(0, 3 - math.floor(math.log10(ms))) if ms > 0 else 3
    return f"{ms:.{digits}f}"


@dataclass
class BatchComparison:
    """The best hand-written backend against CLBlast at its best, at one batch (both passed the check)."""

    batch: int
    hand: BackendResult | None
    clblast: BackendResult | None
    speedup: Speedup | None = None           # CLBlast's time over the hand-written one's: above 1x it is faster
    verdict: str = MISSING
    why: str = ""                            # what is missing, where the verdict is MISSING


def _absent(res: RunResult, which, what: str) -> str:
    misfits = [b.name for b in res.backends if which(b) and does_not_fit(b)]
    if misfits:
        return f"{', '.join(misfits)} {'does' if len(misfits) == 1 else 'do'} not fit"
    failed = [b.name for b in an.timed(res) if which(b) and an.untrusted_why(res, b)]
    if failed:
        return f"{', '.join(failed)}: {an.untrusted_why(res, res.backend(failed[0]))}"
    return f"no {what} backend was timed"


def compare_batch(res: RunResult) -> BatchComparison:
    hand = min((b for b in an.trusted(res) if is_hand_written(b)), key=an.compute_ms, default=None)
    clb = an.reference(res, an.BEST_CLBLAST)
    c = BatchComparison(res.net.batch, hand, clb)
    if hand is None or clb is None:
        c.why = " and ".join(_absent(res, which, what) for found, which, what in
                          ((hand, is_hand_written, "hand-written"), (clb, is_clblast, "CLBlast")) if found is None)
        return c
    c.speedup = an.speedup(clb, hand)
    c.verdict = {Verdict.FEW: NO_INTERVAL, Verdict.LEVEL: NOISY if c.speedup.noisy else UNCLEAR,
                 Verdict.FASTER: HAND, Verdict.SLOWER: CLBLAST}[c.speedup.verdict]
    return c


def comparisons(runs: list[RunResult]) -> list[BatchComparison]:
    return [compare_batch(res) for res in sorted(runs, key=lambda r: r.net.batch)]


def batches_text(values: list[int]) -> str:
    """'batch 4', or 'batches 1, 2 and 4'."""
    if len(values) == 1:
        return f"batch {values[0]}"
    return f"batches {', '.join(map(str, values[:-1]))} and {values[-1]}"


PHRASES = {HAND: "the best hand-written backend is faster at {}",
           CLBLAST: "CLBlast at its best is faster at {}",
           UNCLEAR: NO_CLEAR_WINNER + " at {}",
           NOISY: TOO_NOISY + " at {}",
           NO_INTERVAL: TOO_NOISY + " at {} (fewer than " + str(MIN_SAMPLES) + " timed repeats)"}


def _phrases(comps: list[BatchComparison]) -> list[str]:
    """The verdicts of `comps` grouped, in the order they first come."""
    groups: dict[str, list[int]] = {}
    for c in comps:
        groups.setdefault(c.verdict, []).append(c.batch)
    return [PHRASES[v].format(batches_text(bs)) for v, bs in groups.items()]


def crossover(comps: list[BatchComparison]) -> str:
    """In words: the batch from which CLBlast at its best is faster (and stays
    so, each interval excluding 1x), or that there is none up to the largest."""
    judged = [c for c in comps if c.verdict != MISSING]
    whys: dict[str, list[int]] = {}
    for c in comps:
        if c.verdict == MISSING:
            whys.setdefault(c.why, []).append(c.batch)
    missing = "".join(f"; not compared at {batches_text(bs)}: {why}" for why, bs in whys.items())
    if not judged:
        return f"no comparison: at no batch were both a hand-written and a CLBlast backend timed{missing}."
    start = len(judged)
    while start > 0 and judged[start - 1].verdict == CLBLAST:
        start -= 1
    if start < len(judged):
        text = f"CLBlast at its best is faster from batch {judged[start].batch} on (interval excludes 1x)"
        before = _phrases(judged[:start])
        if before:
            text += "; before that, " + "; ".join(before)
    elif all(c.verdict == HAND for c in judged):
        text = (f"no crossover up to batch {judged[-1].batch}: the best hand-written backend stays faster "
                f"(every interval excludes 1x)")
    else:
        text = f"no crossover up to batch {judged[-1].batch}: " + "; ".join(_phrases(judged))
    return text + missing + "."


# -- tables ----------------------------------------------------------------------

def backend_names(runs: list[RunResult]) -> list[str]:
    """Every backend that ran, failed or was refused at some batch, in order of first appearance."""
    return list(dict.fromkeys(b.name for r in runs for b in r.backends if b.status != "UNAVAILABLE"))


def _cell(res: RunResult, b: BackendResult | None) -> str:
    if b is None or b.status == "UNAVAILABLE":
        return DASH
    if does_not_fit(b):
        return "does not fit"
    if b.status != "OK":
        return b.status.lower()
    why = an.untrusted_why(res, b)
    return fmt_per_image(per_image_ms(res, b)) + (f" ({why})" if why else "")


def per_image_table(runs: list[RunResult]) -> Table:
    """Time per image (ms) at each batch, one column per backend."""
    names = backend_names(runs)
    rows = [[str(res.net.batch)] + [_cell(res, res.backend(n)) for n in names]
            for res in sorted(runs, key=lambda r: r.net.batch)]
    return ["batch"] + names, rows


def per_image_series(runs: list[RunResult]) -> dict[str, list[tuple[int, float]]]:
    """Per backend, (batch, ms per image) where it was timed: the plot's lines."""
    series: dict[str, list[tuple[int, float]]] = {}
    for res in sorted(runs, key=lambda r: r.net.batch):
        for b in an.trusted(res):
            series.setdefault(b.name, []).append((res.net.batch, per_image_ms(res, b)))
    return series


def _winner(c: BatchComparison) -> str:
    return {HAND: c.hand.label if c.hand else "", CLBLAST: c.clblast.label if c.clblast else "",
            UNCLEAR: NO_CLEAR_WINNER, NOISY: TOO_NOISY,
            NO_INTERVAL: f"{TOO_NOISY} (fewer than {MIN_SAMPLES} repeats)"}.get(c.verdict,
                                                                                                      c.why)


def speedup_table(runs: list[RunResult]) -> Table:
    """At each batch: the best hand-written backend, CLBlast at its best, the
    speedup of the first over the second with its 95% interval, and which is faster."""
    rows = []
    for res, c in zip(sorted(runs, key=lambda r: r.net.batch), comparisons(runs)):
        rows.append([str(c.batch), c.hand.label if c.hand else DASH, fmt_per_image(per_image_ms(res, c.hand)),
                     c.clblast.label if c.clblast else DASH, fmt_per_image(per_image_ms(res, c.clblast)),
                     fmt_speedup(c.speedup), _winner(c)])
    return ["batch", "best hand-written", "its ms/image", "CLBlast at its best", "its ms/image",
            "speedup (95% interval)", "faster"], rows


def notes(runs: list[RunResult]) -> list[str]:
    """What the tables do not say at a glance: failed checks, batches that did
    not fit, backends that failed otherwise."""
    checks, misfit, failed = [], {}, []
    for res in sorted(runs, key=lambda r: r.net.batch):
        for b in res.backends:
            if b.ok and b.check and b.check.status != "PASS":
                checks.append(f"{b.name} at batch {res.net.batch}")
            elif does_not_fit(b):
                misfit.setdefault(b.name, []).append(res.net.batch)
            elif b.status == "FAILED":
                failed.append(f"{b.name} at batch {res.net.batch} ({(b.reason or '').splitlines()[0]})"
                              if b.reason else f"{b.name} at batch {res.net.batch}")
    checked = [b for r in runs for b in r.backends if b.ok and b.check]
    out = []
    if checked and not checks:
        out.append("Every output checked matched the float64 oracle (PASS) at every batch.")
    if checks:
        out.append(f"Outputs that failed the check against the float64 oracle: {', '.join(checks)}.")
    for name, batches in misfit.items():
        out.append(f"{name} does not fit the device at {batches_text(batches)}: a buffer exceeds its "
                   f"MAX_MEM_ALLOC_SIZE.")
    if failed:
        out.append(f"Failed: {'; '.join(failed)}.")
    return out

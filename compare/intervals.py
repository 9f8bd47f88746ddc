"""How sure a speedup is: a 95% bootstrap interval of the ratio of two
medians, from the raw samples the results keep.

Each backend's samples are resampled with replacement (independently: the
repeats of two backends are not paired), the ratio of the two medians is
taken each time, and the 2.5th and 97.5th percentiles of those ratios bound
the interval.  The resampling is seeded, so a report renders the same
interval every time.  A winner is named only where the interval excludes 1x.

A comparison has one interval whichever way round it is stated: the
bootstrap is drawn for the ratio of the slower side over the faster (at or
above 1x), and the other way round is its exact inverse, (1/high, 1/low),
not a second bootstrap with other draws.
"""
from __future__ import annotations

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20181  # any fixed number: the same file always renders the same interval
# Bounded memory and time, whatever a file holds: the resamples are drawn a chunk of rows at a time (numpy's
# generator gives the same draws in chunks as at once, so intervals are as before), at most CHUNK draws held;
# a side of more than SUBSAMPLE samples is bootstrapped from a seeded subsample of SUBSAMPLE of them (a million
# samples would take 2000 medians of a million each: minutes), which the report says.
CHUNK = 2**21
SUBSAMPLE = 5000


def subsampled(n: int) -> bool:
    """Whether a side of `n` samples is bootstrapped from a subsample of SUBSAMPLE of them."""
    return n > SUBSAMPLE


def _subsample(values) -> np.ndarray:
    xs = np.asarray(values, np.float64)
    if not subsampled(len(xs)):
        return xs
    return xs[np.sort(np.random.default_rng(SEED).choice(len(xs), SUBSAMPLE, replace=False))]


def _medians(xs: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """The medians of `resamples` resamples of `xs` with replacement, drawn CHUNK values at a time."""
    rows = max(1, CHUNK // len(xs))
    out = np.empty(resamples)
    for start in range(0, resamples, rows):
        stop = min(start + rows, resamples)
        out[start:stop] = np.median(xs[rng.integers(0, len(xs), (stop - start, len(xs)))], axis=1)
    return out


def ratio_interval(num_values, den_values, resamples: int = RESAMPLES,
                   confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """(low, high) of median(num) / median(den), or None without raw samples
    (a version-1 file), with fewer than 2 of them on either side, or where a
    sample is 0 ms (a resample's median may then be 0: no ratio to bound).
    ratio_interval(b, a) is exactly (1/high, 1/low) of ratio_interval(a, b)."""
    if len(num_values) < 2 or len(den_values) < 2:
        return None
    if min(num_values) <= 0 or min(den_values) <= 0:
        return None
    if not _drawn_this_way(num_values, den_values):
        low, high = _bootstrap(den_values, num_values, resamples, confidence)
        return 1 / high, 1 / low
    return _bootstrap(num_values, den_values, resamples, confidence)


def _drawn_this_way(num_values, den_values) -> bool:
    """Is num/den the orientation the bootstrap is drawn in: the larger median over the smaller (ties by
    the values themselves, so that exactly one of the two orientations is)?"""
    num, den = float(np.median(num_values)), float(np.median(den_values))
    if num != den:
        return num > den
    return [float(v) for v in num_values] >= [float(v) for v in den_values]


def _bootstrap(num_values, den_values, resamples: int, confidence: float) -> tuple[float, float]:
    rng = np.random.default_rng(SEED)
    num = _medians(_subsample(num_values), rng, resamples)   # all of num's draws first, then den's: as ever
    den = _medians(_subsample(den_values), rng, resamples)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(num / den, [tail, 100 - tail])
    return float(low), float(high)


def clear(interval: tuple[float, float] | None) -> bool | None:
    """True when the interval excludes 1x (one side is faster), False when it
    spans it, None when there is no interval."""
    if interval is None:
        return None
    low, high = interval
    return not (low <= 1.0 <= high)

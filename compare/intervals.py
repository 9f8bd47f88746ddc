"""How sure a speedup is: a 95% bootstrap interval of the ratio of two
medians, from the raw samples the results keep.

Each backend's samples are resampled with replacement (independently: the
repeats of two backends are not paired), the ratio of the two medians is
taken each time, and the 2.5th and 97.5th percentiles of those ratios bound
the interval.  The resampling is seeded, so a report renders the same
interval every time.  A winner is named only where the interval excludes 1x.
"""
from __future__ import annotations

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20181  # any fixed number: the same file always renders the same interval


def _medians(values, draws: np.ndarray) -> np.ndarray:
    xs = np.asarray(values, np.float64)
    return np.median(xs[draws], axis=1)


def ratio_interval(num_values, den_values, resamples: int = RESAMPLES,
                   confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """(low, high) of median(num) / median(den), or None without raw samples
    (a version-1 file) or with fewer than 2 of them on either side."""
    if len(num_values) < 2 or len(den_values) < 2:
        return None
    rng = np.random.default_rng(SEED)
    num = _medians(num_values, rng.integers(0, len(num_values), (resamples, len(num_values))))
    den = _medians(den_values, rng.integers(0, len(den_values), (resamples, len(den_values))))
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

"""Summaries of repeated timings: the median and the spread, never one sample."""
from __future__ import annotations

import math

import numpy as np


def summarize(samples_ms) -> dict | None:
    """median, min, max, quartiles and IQR of a list of times in ms."""
    xs = np.asarray([s for s in samples_ms if s is not None], dtype=np.float64)
    if xs.size == 0:
        return None
    q1, med, q3 = np.percentile(xs, [25, 50, 75])
    return {"median": float(med), "min": float(xs.min()), "max": float(xs.max()),
            "q1": float(q1), "q3": float(q3), "iqr": float(q3 - q1), "n": int(xs.size)}


def geomean(values) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals)))

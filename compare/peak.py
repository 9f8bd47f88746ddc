"""The peak a run's utilisation is stated against: the user's figure, the
one `compare peak` cached for this device, or measured now
(backends/opencl/peak.py) and cached."""
from __future__ import annotations

import sys

from backends import cache

from . import device_cache
from .keep import Kept

KIND = "peak"


def cache_path():
    return cache.path(KIND)


def store(info: dict, peak: dict) -> Kept:
    return device_cache.store(KIND, info, peak, "the peak cache")


def peak_for_run(rt, override_gflops: float | None = None, progress=lambda s: None) -> dict:
    """The peak a run reports utilisation against, with where it came from."""
    if override_gflops is not None:
        return {"gflops": float(override_gflops), "bandwidth_gbs": None,
                "source": "given by the user (--peak-gflops)"}
    cached = cache.entry(KIND, rt.info)
    if cached:
        return {**cached, "source": f"measured by `compare peak` on this device, {cached['measured']}"}
    from backends.opencl.peak import CAP_S, measure_peak
    print(f"measuring the peak of {rt.info['name']} (at most {CAP_S:.0f} s; `compare peak` caches it)",
          file=sys.stderr)
    peak = measure_peak(rt, progress)
    kept = store(rt.info, peak)
    if kept.problem:   # this run has its figure; only the next runs miss it
        print(f"warning: {kept.problem}", file=sys.stderr)
    return {**peak, "source": "measured at the start of this run (mad chains, large copy)"}

"""The peak a run's utilisation is stated against: the user's figure, the
one `compare peak` cached for this device, or measured now
(backends/opencl/peak.py) and cached."""
from __future__ import annotations

import sys

from backends import cache

from . import device_cache
from .keep import Kept

KIND = "peak"
SCHEMA = "clblast-compare/peak"
VERSION = 1   # an entry of another version (or none: written before versions) is measured again


def cache_path():
    return cache.path(KIND)


def store(info: dict, peak: dict) -> Kept:
    return device_cache.store(KIND, info, {**peak, "schema": SCHEMA, "version": VERSION}, "the peak cache")


def cached(info: dict) -> dict | None:
    """This device's cached peak, if it is of this version and holds what a run needs."""
    entry = cache.entry(KIND, info)
    if not isinstance(entry, dict) or entry.get("schema") != SCHEMA or entry.get("version") != VERSION:
        return None
    return entry if isinstance(entry.get("gflops"), (int, float)) and "measured" in entry else None


def peak_for_run(rt, override_gflops: float | None = None, progress=lambda s: None) -> dict:
    """The peak a run reports utilisation against, with where it came from."""
    if override_gflops is not None:
        return {"gflops": float(override_gflops), "bandwidth_gbs": None,
                "source": "given by the user (--peak-gflops)"}
    found = cached(rt.info)
    if found:   # the entry's schema and version say what the file holds; a run's peak has neither
        peak = {k: v for k, v in found.items() if k not in ("schema", "version")}
        return {**peak, "source": f"measured by `compare peak` on this device, {found['measured']}"}
    from backends.opencl.peak import CAP_S, measure_peak
    print(f"measuring the peak of {rt.info['name']} (at most {CAP_S:.0f} s; `compare peak` caches it)",
          file=sys.stderr)
    peak = measure_peak(rt, progress)
    kept = store(rt.info, peak)
    if kept.problem:   # this run has its figure; only the next runs miss it
        print(f"warning: {kept.problem}", file=sys.stderr)
    return {**peak, "source": "measured at the start of this run (mad chains, large copy)"}

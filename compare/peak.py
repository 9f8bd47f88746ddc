"""The device's peak, measured on the device: multiply-add throughput
(float4 and float8 mad chains over enough work-items to fill it) and memory
bandwidth (a large copy).  Figures are cached per device, so `compare run`
can state utilisation without measuring again; `--peak-gflops` overrides.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

import numpy as np
import pyopencl as cl

from .files import write_text_atomic

ITERS = 1024       # mad iterations per work item (8 accumulators each)
ACCUMULATORS = 8
TARGET_MS = 100.0  # grow the launch until one run takes at least this long


def cache_path() -> Path:
    base = os.environ.get("COMPARE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clblast-compare")
    return Path(base) / "peak.json"


def device_key(info: dict) -> str:
    return f"{info['platform']} | {info['name']} | {info['driver']}"


def _event_ms(ev) -> float:
    return (ev.profile.end - ev.profile.start) * 1e-6


def _best_ms(launch, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        ev = launch()
        ev.wait()
        times.append(_event_ms(ev))
    return min(times)


def measure_flops(rt, width: int, progress=lambda s: None) -> float:
    """GFLOP/s of float`width` mad chains; the launch grows until it is long enough to time."""
    kernel = rt.kernel("peak_flops.cl", "mad_chain", {"VEC": f"float{width}", "ITERS": ITERS})
    out = rt.alloc(4 * 1024, "peak scratch", poison=False)
    local = rt.fit_local_size((min(256, rt.info["max_work_group_size"]),), kernel)[0]
    items = max(rt.info["compute_units"], 1) * local * 4
    flops_per_item = ITERS * ACCUMULATORS * width * 2

    def launch():
        return kernel(rt.queue, (items,), (local,), out, np.float32(0.5))

    launch().wait()  # first launch compiles and warms up
    while True:
        progress(f"peak: float{width} mad chains over {items} work-items")
        ms = _best_ms(launch, 1)
        if ms >= TARGET_MS or items >= 2 ** 28:
            break
        items *= 2 if ms > TARGET_MS / 8 else 8
    ms = _best_ms(launch, 3)
    return items * flops_per_item / (ms * 1e-3) / 1e9


def measure_bandwidth(rt, progress=lambda s: None) -> dict:
    """GB/s of a float4 copy kernel and of the driver's buffer copy (bytes read + written)."""
    nbytes = min(rt.info["max_alloc_bytes"] // 2, rt.info["global_mem_bytes"] // 8, 256 * 2 ** 20)
    nbytes -= nbytes % 16
    src = rt.alloc(nbytes, "bandwidth source", poison=False)
    dst = rt.alloc(nbytes, "bandwidth destination", poison=False)
    kernel = rt.kernel("peak_bandwidth.cl", "copy4")
    progress(f"peak: copying {nbytes / 2**20:.0f} MiB")
    copy_kernel = _best_ms(lambda: kernel(rt.queue, (nbytes // 16,), None, src, dst), 5)
    copy_driver = _best_ms(lambda: cl.enqueue_copy(rt.queue, dst, src, byte_count=nbytes), 5)
    return {"copy_kernel_gbs": 2 * nbytes / (copy_kernel * 1e-3) / 1e9,
            "enqueue_copy_gbs": 2 * nbytes / (copy_driver * 1e-3) / 1e9}


def measure_peak(rt, progress=lambda s: None) -> dict:
    per_width = {f"float{w}_gflops": measure_flops(rt, w, progress) for w in (4, 8)}
    bandwidth = measure_bandwidth(rt, progress)
    return {
        "gflops": max(per_width.values()),
        "bandwidth_gbs": max(bandwidth.values()),
        "details": {**per_width, **bandwidth},
        "device": rt.info["name"],
        "measured": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def load_cache() -> dict:
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}   # no cache or a damaged one: measure again


def store(info: dict, peak: dict) -> None:
    data = load_cache()
    data[device_key(info)] = peak
    write_text_atomic(cache_path(), json.dumps(data, indent=1) + "\n")


def peak_for_run(rt, override_gflops: float | None = None, progress=lambda s: None) -> dict:
    """The peak a run reports utilisation against, with where it came from."""
    if override_gflops is not None:
        return {"gflops": float(override_gflops), "bandwidth_gbs": None,
                "source": "given by the user (--peak-gflops)"}
    cached = load_cache().get(device_key(rt.info))
    if cached:
        return {**cached, "source": f"measured by `compare peak` on this device, {cached['measured']}"}
    peak = measure_peak(rt, progress)
    store(rt.info, peak)
    return {**peak, "source": "measured at the start of this run (mad chains, large copy)"}

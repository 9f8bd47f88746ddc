"""The device's peak, measured on the device: multiply-add throughput
(float4 and float8 mad chains over enough work-items to fill it) and memory
bandwidth (a large copy).  compare/peak.py caches the figures per device.
"""
from __future__ import annotations

import datetime as _dt

import numpy as np
import pyopencl as cl

from .net import event_ms
from .workgroups import limits, shrink

ITERS = 1024       # mad iterations per work item (8 accumulators each)
ACCUMULATORS = 8
TARGET_MS = 100.0  # grow the launch until one run takes at least this long


def _best_ms(launch, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        ev = launch()
        ev.wait()
        times.append(event_ms(ev))
    return min(times)


def measure_flops(rt, width: int, progress=lambda s: None) -> float:
    """GFLOP/s of float`width` mad chains; the launch grows until it is long enough to time."""
    kernel = rt.kernel("peak_flops.cl", "mad_chain", {"VEC": f"float{width}", "ITERS": ITERS})
    out = rt.alloc(4 * 1024, "peak scratch", poison=False)
    local = shrink((256,), limits(rt, kernel))[0]
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

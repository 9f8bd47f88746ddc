"""The device's peak, measured on the device: multiply-add throughput
(float4 and float8 mad chains over enough work-items to fill it) and memory
bandwidth (a large copy).  compare/peak.py caches the figures per device.

Every step is bounded: the launch grows until one run takes TARGET_MS, but
never past the time cap of the whole measurement (CAP_S); a peak measured
at the cap says so, since a launch that short may not fill the device.  On
a driver without profiling times (Mesa's rusticl) the host clock times it.
"""
from __future__ import annotations

import datetime as _dt
import time

import numpy as np
import pyopencl as cl

from .net import event_ms
from .workgroups import limits, shrink

ITERS = 1024       # mad iterations per work item (8 accumulators each)
ACCUMULATORS = 8
TARGET_MS = 100.0  # grow the launch until one run takes at least this long
CAP_S = 30.0       # the whole measurement, all steps
clock = time.monotonic   # what the cap is counted on (a test keeps a clock of its own)


def _best_ms(rt, launch, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ev = launch()
        ev.wait()
        times.append(event_ms(ev) if rt.profiling_ok else (time.perf_counter() - t0) * 1e3)
    return min(times)


def measure_flops(rt, width: int, progress=lambda s: None, deadline: float | None = None) -> tuple[float, bool]:
    """GFLOP/s of float`width` mad chains, and whether the time cap stopped
    the launch from growing to TARGET_MS."""
    kernel = rt.kernel("peak_flops.cl", "mad_chain", {"VEC": f"float{width}", "ITERS": ITERS})
    out = rt.alloc(4 * 1024, "peak scratch", poison=False)
    local = shrink((256,), limits(rt, kernel))[0]
    items = max(rt.info["compute_units"], 1) * local * 4
    flops_per_item = ITERS * ACCUMULATORS * width * 2

    def launch():
        return kernel(rt.queue, (items,), (local,), out, np.float32(0.5))

    deadline = deadline or clock() + CAP_S
    launch().wait()  # first launch compiles and warms up
    capped = False
    while True:
        progress(f"peak: float{width} mad chains over {items} work-items")   # the time left: the display's
        ms = _best_ms(rt, launch, 1)
        if ms >= TARGET_MS or items >= 2 ** 28:
            break
        grow = 2 if ms > TARGET_MS / 8 else 8
        if clock() + 4 * grow * ms / 1e3 > deadline:   # the next size and its 3 repeats would pass the cap
            capped = True
            break
        items *= grow
    ms = _best_ms(rt, launch, 3)
    return items * flops_per_item / (ms * 1e-3) / 1e9, capped


def measure_bandwidth(rt, progress=lambda s: None) -> dict:
    """GB/s of a float4 copy kernel and of the driver's buffer copy (bytes read + written)."""
    nbytes = min(rt.info["max_alloc_bytes"] // 2, rt.info["global_mem_bytes"] // 8, 256 * 2 ** 20)
    nbytes -= nbytes % 16
    src = rt.alloc(nbytes, "bandwidth source", poison=False)
    dst = rt.alloc(nbytes, "bandwidth destination", poison=False)
    kernel = rt.kernel("peak_bandwidth.cl", "copy4")
    progress(f"peak: copying {nbytes / 2**20:.0f} MiB")
    copy_kernel = _best_ms(rt, lambda: kernel(rt.queue, (nbytes // 16,), None, src, dst), 5)
    copy_driver = _best_ms(rt, lambda: cl.enqueue_copy(rt.queue, dst, src, byte_count=nbytes), 5)
    return {"copy_kernel_gbs": 2 * nbytes / (copy_kernel * 1e-3) / 1e9,
            "enqueue_copy_gbs": 2 * nbytes / (copy_driver * 1e-3) / 1e9}


def measure_peak(rt, progress=lambda s: None, cap_s: float = CAP_S) -> dict:
    """The peak within `cap_s` seconds: each mad width gets 40% of it, the copy the rest."""
    start = clock()
    per_width, capped = {}, False
    for k, w in enumerate((4, 8)):
        gflops, hit = measure_flops(rt, w, progress, start + cap_s * 0.4 * (k + 1))
        per_width[f"float{w}_gflops"] = gflops
        capped |= hit
    bandwidth = measure_bandwidth(rt, progress)
    return {
        "gflops": max(per_width.values()),
        "bandwidth_gbs": max(bandwidth.values()),
        "details": {**per_width, **bandwidth, "timer": "profiling events" if rt.profiling_ok else "host clock",
                    "seconds": round(clock() - start, 1),
                    "capped": (f"the {cap_s:.0f} s cap stopped the launches short of {TARGET_MS:.0f} ms: "
                               f"the peak may be higher") if capped else None},
        "device": rt.info["name"],
        "measured": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }

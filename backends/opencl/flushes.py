"""When a pass flushes its queue, chosen at prepare by measuring.

An OpenCL driver may hold the commands enqueued on a queue and hand them to the device only when it
is flushed or finished.  A pass of many small kernels then runs its enqueues first and its kernels
after, rather than the two side by side (on the H200, vit-tiny's pass took 0.236 ms for 0.157 ms of
kernels).  A flush early in the pass starts the device while the host still enqueues the rest; each
flush costs a call into the driver.  So each way below is timed on the pass as `compare run` times
it (enqueue, finish), in rounds in turn, and the fastest median kept (none: the pass as before).
"""
from __future__ import annotations

import statistics
import time

ROUNDS = 15    # passes of each way at most, one a round, the ways in turn
MIN_ROUNDS = 3  # ... and at least
CAP_S = 0.5    # seconds in all after which no new round starts (a pass of VGG-16 on PoCL takes 0.15 s)


def _every(step: int):
    return lambda n: frozenset(range(0, n - 1, step))   # indices of the launches a flush follows; none after the last


# name -> the indices of the launches a flush follows, for a pass of n launches
WAYS = {
    "never": lambda n: frozenset(),
    "after the first launch": lambda n: frozenset({0}) if n > 1 else frozenset(),
    "every 4 launches": _every(4),
    "after every launch": _every(1),
}


def fastest(medians: dict[str, float]) -> str:
    """The way whose median pass is least; 'never' where none is faster (it costs no call)."""
    best = min(medians, key=medians.get)
    return best if medians[best] < medians["never"] else "never"


def choose(flat, quiet) -> tuple[str, dict[str, float]]:
    """The way `flat` (a passlist.LaunchList) flushes from now on, and each way's median pass in ms; `quiet`:
    a Recorder that keeps nothing (net.py), as run() passes."""
    ways = {name: way(flat.kernels) for name, way in WAYS.items()}
    medians = timed_ways(flat, quiet, {name: (lambda f=f: setattr(flat, "flushes", f)) for name, f in ways.items()})
    chosen = fastest(medians)
    flat.flushes = ways[chosen]
    return chosen, medians


def timed_ways(flat, quiet, ways: dict) -> dict[str, float]:
    """Each way's median pass in ms: `ways` maps a name to a function that sets `flat` up that way; the passes
    are timed as `compare run` times one (enqueue, finish), one pass of each way a round, in turn, after one
    untimed pass each.  `flat` is left as the last way set it."""
    rt = flat.rt
    times: dict[str, list[float]] = {name: [] for name in ways}
    for set_up in ways.values():   # untimed: the first pass of each way
        set_up()
        flat.enqueue(quiet)
        rt.finish()
    began = time.perf_counter()
    for rnd in range(ROUNDS):
        if rnd >= MIN_ROUNDS and time.perf_counter() - began > CAP_S:
            break
        for name, set_up in ways.items():
            set_up()
            t0 = time.perf_counter()
            flat.enqueue(quiet)
            rt.finish()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}

"""How quiet the host was, and how many timed passes a backend gets.

The host's load and the CPU's frequency governor are recorded with every run (compare/results.py Host):
a run on a busy host says so in one line, and its answer calls no side faster where an interval spans 1x.
Repeats are calibrated as pyperf and hyperfine do: a backend gets at least the floor (`--repeats`'s
default) and more until its timed passes add up to a minimum time, up to a cap that keeps results files
small; a `--repeats` given is honoured exactly."""
from __future__ import annotations

import math
import os
from pathlib import Path

from backends.host import SLOW_PROCESS, plain_python_ms

DEFAULT_REPEATS = 10   # the floor when none is given
MIN_TIME_S = 0.5       # end-to-end time a backend's timed passes add up to, when calibrated
MAX_REPEATS = 50       # calibrated samples at most: every one is kept per layer
BUSY = 0.5             # load average per core above which the host is called busy
GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


def calibrated(pass_ms: float, floor: int, min_time_s: float | None, cap: int = MAX_REPEATS) -> int:
    """The timed passes a backend whose untimed pass took `pass_ms` gets: `floor` exactly without a
    minimum time, else enough to add up to `min_time_s`, between `floor` and `cap`."""
    if min_time_s is None or pass_ms <= 0:
        return floor
    return max(floor, min(cap, math.ceil(min_time_s * 1e3 / pass_ms)))


def fitting_cap(fits, floor: int, cap: int = MAX_REPEATS) -> int:
    """The most calibrated passes up to `cap` that `fits(k)` (raising UserError when k passes would not fit
    the results file or the host's memory) allows; `floor` when no more do."""
    from nets.errors import UserError
    try:
        fits(cap)
        return cap
    except UserError:
        return floor


def host_state() -> dict:
    """The host's load average over the last minute and the CPU frequency governor, where they can be read,
    and how fast this process runs a fixed piece of plain Python (backends/host.py)."""
    try:
        load = round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        load = None
    try:
        governor = GOVERNOR.read_text(encoding="utf-8").strip() or None
    except OSError:
        governor = None
    return {"load_1m": load, "governor": governor, "plain_python_ms": round(plain_python_ms(), 2)}


def busy(host) -> str | None:
    """'load 3.10 on 2 cores' where the host was busy as the run started, else None."""
    load, cpus = getattr(host, "load_1m", None), getattr(host, "cpus", None)
    if load is None or not cpus or load <= BUSY * cpus:
        return None
    return f"load {load:.2f} on {cpus} core{'s' if cpus > 1 else ''}"


def busy_line(host) -> str | None:
    """The one line a run on a busy host says, or None."""
    said = busy(host)
    if said is None:
        return None
    return (f"Busy host ({said} as the run started): where an interval spans 1x the ratio is too noisy to call; "
            f"run again on a quiet host for an answer.")


def slow_processes_line(res, limit: int = 160) -> str | None:
    """The one line a run says where a process of the run, the runner's own (ours, PyTorch) or a backend's
    child, ran the fixed piece of plain Python SLOW_PROCESS times slower or more than the fastest process of
    the run: its times may be its process's, not its work's (reports/nvidia-h200/NOTES.md, 2026-11-29);
    under `limit` characters (the sides named where they fit, else counted); None where none did or the
    runner's figure is missing."""
    mine = getattr(res.host, "plain_python_ms", None)
    if not mine:
        return None
    figures = [("the runner's own", mine)] + [
        (f"`{b.name}`", ms) for b in res.backends if b.status == "OK"
        for ms in [(b.config or {}).get("plain_python_ms")] if isinstance(ms, (int, float)) and ms > 0]
    fastest = min(ms for _, ms in figures)
    slow = [f"{who} {ms / fastest:.2f}x" for who, ms in figures if ms >= SLOW_PROCESS * fastest]
    if not slow:
        return None
    tail = (f" at plain Python than the run's fastest ({fastest:.1f} ms): "
            f"{'its times' if len(slow) == 1 else 'their times'} may be the draw's.")
    head = "Slow process" if len(slow) == 1 else "Slow processes"
    # named where that fits, else counted with the runner's still named (ours and PyTorch run there)
    said = [f"{head}: {', '.join(slow)} slower"]
    if mine >= SLOW_PROCESS * fastest and len(slow) > 1:   # the runner's is first among them
        said.append(f"{head}: {slow[0]} and {len(slow) - 1} more, {SLOW_PROCESS:g}x or more slower")
    said.append(f"{head}: {len(slow)} of {len(figures)}, {SLOW_PROCESS:g}x or more slower")
    return next((line + tail for line in said if len(line + tail) < limit), said[-1] + tail)

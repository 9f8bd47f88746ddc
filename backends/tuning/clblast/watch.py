"""Whether a search child is hung rather than busy.  On PoCL a kernel that
writes out of bounds writes into the host's heap: the child then aborts,
or deadlocks inside malloc and sleeps for good.  A child busy compiling or
timing uses the processor; one that stays silent and idle this long is
stopped, instead of waiting out children.QUIET_S."""
from __future__ import annotations

import os

IDLE_S = 30.0   # silent and no processor time used this long: hung
READ_EVERY_S = 1.0   # the search asks after every line a child writes: /proc is read at most this often


def cpu_seconds(pid: int) -> float | None:
    """User + system processor time of process `pid`, or None where it cannot be read (not Linux, gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()   # the name in parentheses may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (with the pid, it names one process: a pid is
    used again once its process is gone); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


class Watch:
    """When the processor time of one process last grew."""

    def __init__(self, pid: int, now: float):
        self.pid, self.cpu, self.since, self.read_at = pid, cpu_seconds(pid) or 0.0, now, now

    def idle_for(self, now: float) -> float | None:
        """Seconds since its processor time last grew (as of the last read); None where it cannot be read."""
        if now - self.read_at >= READ_EVERY_S:
            self.read_at = now
            cpu = cpu_seconds(self.pid)
            if cpu is None:
                return None
            if cpu > self.cpu:
                self.cpu, self.since = cpu, now
        return now - self.since

    def hung(self, now: float, last_said: float) -> bool:
        """Silent since `last_said` and without processor time, both for longer than IDLE_S."""
        idle = self.idle_for(now)
        return idle is not None and min(now - last_said, idle) > IDLE_S

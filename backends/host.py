"""The host CPU's name, for the backends that run on it (numpy, the CPU peers)."""
from __future__ import annotations

import platform


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


SLOW_PROCESS = 1.2   # a process whose figure is this many times the fastest's drew slow (backends/screen.py)


def plain_python_ms(rounds: int = 15) -> float:
    """A fixed piece of plain Python timed in this process (ms, the median of `rounds`).  On the H200's virtual
    machine a fresh process ran the same host-bound pass 1.3-1.5x slower about one time in four
    (reports/nvidia-h200/NOTES.md): held against the runner's own figure, a child's says whether its process
    drew slow at everything, not at its work alone."""
    import statistics
    import time

    def work():
        counts: dict[int, int] = {}
        for i in range(200_000):
            counts[i % 1000] = counts.get(i % 1000, 0) + i
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        work()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)

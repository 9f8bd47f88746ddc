"""A backend's child screened by its draw as it starts.

On the H200's guest a fresh process draws its speed as it starts: in the
2026-11-29 calls about half ran a fixed piece of plain Python 1.6-1.9x
slower, and every pass of tinygrad with it (reports/nvidia-h200/NOTES.md).
A child is cheap to start and dear to prepare, so a screened child
(`Worker(screen=True)`) times that piece as it starts, the figure every
prepared net reports anyway, and a child SLOW_PROCESS times slower than the
fastest process this run has seen is stopped and started again, TRIES
processes at most; the last one serves whatever it drew.  Every side's
children are screened by this one rule, tinygrad's own recipe's in its
benchmark too, and the figures of those stopped go into the results."""
from __future__ import annotations

from .host import SLOW_PROCESS, plain_python_ms

TRIES = 3                  # processes started for one child at most
KEY = "screened_out_ms"    # in a prepared net's config: the figures of the processes stopped as slow
_seen: list[float] = []    # the figures of this run's processes: the runner's own first, then every child's


def start_run(runner_ms: float) -> None:
    """A run begins: its processes are held against the runner's own figure and each other's from now on."""
    _seen[:] = [runner_ms]


def note(ms: float) -> None:
    _seen.append(ms)


def fastest() -> float:
    """The fastest figure this run has seen; outside a run (a benchmark), this process's own, timed once."""
    if not _seen:
        note(round(plain_python_ms(), 2))
    return min(_seen)


def slow(ms: float) -> bool:
    return ms >= SLOW_PROCESS * fastest()

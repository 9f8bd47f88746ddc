"""Where a run's time went, stage by stage, each stamped in seconds since its process started: the first
answer's minute on a bare GPU (issue 53) taken apart into the process's start and imports, the float64
reference, the peak, each backend made ready, the timed rounds.  The stamps go into the results
(RunResult.stages); `scripts/first-answer-gpu.sh` prints them."""
from __future__ import annotations

import time

import psutil

from .results import Stage


class StageClock:
    def __init__(self):
        try:
            self._started = psutil.Process().create_time()   # the process's start, on the wall clock
        except psutil.Error:
            self._started = time.time()   # unknown: stamped from now
        self.stages: list[Stage] = []

    def mark(self, name: str) -> None:
        self.stages.append(Stage(name, round(time.time() - self._started, 3)))

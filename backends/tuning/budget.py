"""The time of one `compare tune`, handed to each scope as its share: a
deadline the scope asks (`left`, `expired`) and splits further
(`share`), every part on the same clock, which a test can replace so that
nothing need sleep.  What a scope does with its share is its own affair
(CLBlast's phases: clblast/phases.py).

The clock may also be one of work done (Steps): each scope says `worked()`
after each unit it finishes (a configuration tried by CLBlast's search, a
tile candidate tried), so a budget of N is N units at any speed."""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable

# the tests' hook: set, `compare tune --budget-s N` counts N units of work (Steps) instead of seconds
STEPS_ENV = "COMPARE_TUNE_BUDGET_IN_STEPS"


class Steps:
    """A clock that reads the units of work done so far, not the time."""

    def __init__(self):
        self.done = 0.0

    def __call__(self) -> float:
        return self.done

    def step(self, n: float = 1) -> None:
        self.done += n


def default_clock() -> Callable[[], float]:
    return Steps() if os.environ.get(STEPS_ENV) else time.monotonic


@dataclass
class Budget:
    seconds: float
    clock: Callable[[], float] = time.monotonic
    start: float = field(default=None)

    def __post_init__(self):
        if self.start is None:
            self.start = self.clock()

    @property
    def end(self) -> float:
        return self.start + self.seconds

    def left(self, until: float | None = None) -> float:
        """Seconds from now to `until` (the end by default), never below 0."""
        return max((self.end if until is None else until) - self.clock(), 0.0)

    def expired(self) -> bool:
        return self.clock() >= self.end

    def spent(self) -> float:
        """Seconds since the start."""
        return self.clock() - self.start

    def worked(self, n: float = 1) -> None:
        """`n` units of work done: a clock of Steps moves on; the wall clock moves by itself."""
        if isinstance(self.clock, Steps):
            self.clock.step(n)

    def wall_s(self, until: float | None = None) -> float:
        """How long a wait on the wall clock (a child's timeout, a connection) may last to stay within `until`:
        the time left; on a clock of Steps no limit while work is left (the work ends it, and the waits'
        own hang guards still apply), none once it is spent."""
        left = self.left(until)
        return math.inf if isinstance(self.clock, Steps) and left > 0 else left

    def share(self, seconds: float) -> "Budget":
        """A part of `seconds` from now, on the same clock."""
        return Budget(seconds, self.clock)

    def shares(self, weights: dict[str, float]) -> dict[str, float]:
        """The seconds of each part when the whole is shared by weight (our tiles take little: a tenth beside
        CLBlast's search); each part's share starts when the part begins."""
        total = sum(weights.values())
        return {name: self.seconds * w / total for name, w in weights.items()}

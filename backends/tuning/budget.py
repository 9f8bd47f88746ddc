"""The time of one `compare tune`, handed out as deadlines (time.monotonic()
values), phase by phase: every share and factor of the split is here.

Of a scope's time, VERIFY_SHARE is kept for what follows the search; of the
search's part, a little first times CLBlast's database on each problem
not timed yet (so the search goes costliest first); the search then runs
to its deadline.  What the search leaves (all of it where it finishes
early) goes to the verification, then to the check of the sets in force
from the start, then to the choice of one set per kernel for each net.
Several scopes (CLBlast's, our tiles, ...) share the whole by weight.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

VERIFY_SHARE = 0.2   # of a scope's time, kept for the verification and what follows it
COSTS_SHARE = 0.1    # of the search's time at most, to time each problem with CLBlast's database ...
COSTS_CAP_S = 60.0   # ... and at most this long
VERIFY_PART = 0.7    # of what is left after the search: re-timing the best found against the database
FRESH_PART = 0.5     # of what is left after that: the sets checked in force from the start; the rest: the nets


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

    def shares(self, weights: dict[str, float]) -> dict[str, float]:
        """The seconds of each part when the whole is shared by weight (our tiles take little: a tenth beside
        CLBlast's search); each part's Budget starts when the part begins."""
        total = sum(weights.values())
        return {name: self.seconds * w / total for name, w in weights.items()}

    # the phases of CLBlast's tuning, in their order
    def search_end(self) -> float:
        return self.start + self.seconds * (1 - VERIFY_SHARE)

    def costs(self) -> float:
        return self.clock() + min(self.seconds * (1 - VERIFY_SHARE) * COSTS_SHARE, COSTS_CAP_S)

    def verify(self) -> float:
        return self.clock() + self.left() * VERIFY_PART

    def fresh(self) -> float:
        return self.clock() + self.left() * FRESH_PART

    def nets(self) -> float:
        return self.end

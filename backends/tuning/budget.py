"""The time of one `compare tune`, handed to each scope as its share: a
deadline the scope asks (`left`, `expired`) and splits further
(`share`), every part on the same clock, which a test can replace so that
nothing need sleep.  What a scope does with its share is its own affair
(CLBlast's phases: clblast/phases.py)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable


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

    def share(self, seconds: float) -> "Budget":
        """A part of `seconds` from now, on the same clock."""
        return Budget(seconds, self.clock)

    def shares(self, weights: dict[str, float]) -> dict[str, float]:
        """The seconds of each part when the whole is shared by weight (our tiles take little: a tenth beside
        CLBlast's search); each part's share starts when the part begins."""
        total = sum(weights.values())
        return {name: self.seconds * w / total for name, w in weights.items()}

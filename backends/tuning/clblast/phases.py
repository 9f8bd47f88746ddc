"""CLBlast's share of a tune, phase by phase: every part and factor of its
split is here, each phase's deadline a time on the share's clock.

Of the share, VERIFY_SHARE is kept for what follows the search; of the
search's part, a little first times CLBlast's database on each problem
not timed yet (so the search goes costliest first); the search then runs
to its deadline.  What the search leaves (all of it where it finishes
early) goes to the verification, then to the check of the sets in force
from the start, then to the choice of one set per kernel for each net.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..budget import Budget

VERIFY_SHARE = 0.2   # of the share, kept for the verification and what follows it
COSTS_SHARE = 0.1    # of the search's time at most, to time each problem with CLBlast's database ...
COSTS_CAP_S = 60.0   # ... and at most this long
VERIFY_PART = 0.7    # of what is left after the search: re-timing the best found against the database
FRESH_PART = 0.5     # of what is left after that: the sets checked in force from the start; the rest: the nets


@dataclass(frozen=True)
class Phases:
    budget: Budget

    # in their order
    def costs(self) -> float:
        b = self.budget
        return b.clock() + min(b.seconds * (1 - VERIFY_SHARE) * COSTS_SHARE, COSTS_CAP_S)

    def search_end(self) -> float:
        return self.budget.start + self.budget.seconds * (1 - VERIFY_SHARE)

    def verify(self) -> float:
        return self.budget.clock() + self.budget.left() * VERIFY_PART

    def fresh(self) -> float:
        return self.budget.clock() + self.budget.left() * FRESH_PART

    def nets(self) -> float:
        return self.budget.end

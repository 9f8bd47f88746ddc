"""How fast a long search goes and what is left of it: configurations per
second in all and per place (this machine, or each of a farm's workers),
what is left of CLBlast's default search per net, and the time that takes
at the current rate; and what its children's starts cost (a configuration
that breaks the device's queue ends its child, and the next one starts
afresh), which is where a slow stretch of the search can go."""
from __future__ import annotations

import time
from typing import Callable


def span(seconds: float | None) -> str:
    """Seconds as a person reads them: '45 s', '12 min', '3.4 h', '2.1 days'."""
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


class Rate:
    """Configurations timed since `start`, per place."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.start = clock()
        self.done: dict[str, int] = {}
        self.ready_s: list[float] = []   # each child's start until it was ready for its first configuration
        self.lost = 0                    # children ended by a configuration that broke the device's queue

    def child_ready(self, seconds: float) -> None:
        self.ready_s.append(seconds)

    def child_lost(self) -> None:
        self.lost += 1

    def add(self, place: str, n: int = 1) -> None:
        self.done[place] = self.done.get(place, 0) + n

    def per_second(self, place: str | None = None) -> float:
        took = max(self.clock() - self.start, 1e-9)
        return (sum(self.done.values()) if place is None else self.done.get(place, 0)) / took

    def eta(self, left: int, place: str | None = None) -> float | None:
        """Seconds to time `left` more configurations at the rate so far (None before any)."""
        rate = self.per_second(place)
        return left / rate if rate > 0 else (0.0 if left == 0 else None)

    def summary(self, left: dict[str, int]) -> list[str]:
        """The lines said at the end of a run: per place and in all, then per net."""
        took = self.clock() - self.start
        total = sum(self.done.values())
        out = [f"this search: {total:,} configurations in {span(took)}, {self.per_second():.2f} per second"]
        if len(self.done) > 1:
            out += [f"  {p}: {n:,}, {self.per_second(p):.2f} per second" for p, n in sorted(self.done.items())]
        if self.ready_s:
            starts = sorted(self.ready_s)
            out.append(f"  {len(starts):,} children started, each ready after {starts[len(starts) // 2]:.1f} s "
                       f"(median; the longest {starts[-1]:.1f} s, {sum(starts):.0f} s in all); {self.lost:,} ended "
                       f"by a configuration that broke the device's queue")
        for net, n in left.items():
            alone = (", ".join(f"{_short(p)} alone {span(self.eta(n, p))}" for p in sorted(self.done))
                     if len(self.done) > 1 else "")
            out.append(f"{net}: {n:,} configurations of CLBlast's default search left, "
                       f"{span(self.eta(n))} at this rate" + (f" ({alone})" if alone else ""))
        return out


def _short(place: str) -> str:
    """A worker's address without its scheme ('tcp://10.0.0.5:40123' -> '10.0.0.5:40123')."""
    return place.split("://", 1)[-1]

"""A speedup, how sure it is, and how it reads: made here and nowhere else.

A speedup of B over a reference R is R's median time over B's: above 1x, B
is faster.  Beside it, the 95% bootstrap interval of that ratio from the raw
samples (compare/intervals.py), and the verdict the interval allows: a side
is named faster only where the interval excludes 1x.  With fewer than
MIN_SAMPLES timed repeats on either side there is no interval, and the
verdict says so rather than printing bounds that look firmer than a handful
of samples allow.  The answer, the tables, the kinds, the sweeps and the
plots all take their ratios from here.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .intervals import ratio_interval

MIN_SAMPLES = 5


class Verdict(StrEnum):
    FASTER = "faster"
    SLOWER = "slower"
    LEVEL = "no clear difference"
    FEW = "too few samples"


@dataclass(frozen=True)
class Speedup:
    value: float                                  # the reference's median time / this one's
    interval: tuple[float, float] | None = None   # 95%, of the same ratio; None: too few samples

    @classmethod
    def of(cls, reference: list[float], values: list[float], reference_ms: float | None = None,
           ms: float | None = None) -> Speedup | None:
        """From the raw samples (ms) of the reference and of this side; the medians given where the samples
        are not kept (a version-1 file).  None where either side has no time."""
        import numpy as np
        ref_ms = float(np.median(reference)) if len(reference) else reference_ms
        own_ms = float(np.median(values)) if len(values) else ms
        if not ref_ms or not own_ms:
            return None
        enough = len(reference) >= MIN_SAMPLES and len(values) >= MIN_SAMPLES
        return cls(ref_ms / own_ms, ratio_interval(reference, values) if enough else None)

    @property
    def verdict(self) -> Verdict:
        if self.interval is None:
            return Verdict.FEW
        low, high = self.interval
        if low > 1.0:
            return Verdict.FASTER
        if high < 1.0:
            return Verdict.SLOWER
        return Verdict.LEVEL

    @property
    def clear(self) -> bool:
        """One side is faster: the interval excludes 1x."""
        return self.verdict in (Verdict.FASTER, Verdict.SLOWER)

    def inverse(self) -> Speedup:
        """The same comparison seen from the other side."""
        iv = None if self.interval is None else (1 / self.interval[1], 1 / self.interval[0])
        return Speedup(1 / self.value, iv)

    def bounds(self) -> str:
        """'2.82x [2.46, 3.59]', or '2.82x' without an interval."""
        iv = "" if self.interval is None else f" [{self.interval[0]:.2f}, {self.interval[1]:.2f}]"
        return f"{self.value:.2f}x{iv}"

    def text(self) -> str:
        """The figure for a table cell: its bounds, and what they do not allow."""
        if self.verdict is Verdict.LEVEL:
            return f"{self.bounds()} no clear difference"
        if self.verdict is Verdict.FEW:
            return f"{self.bounds()} (too few samples for an interval)"
        return self.bounds()

    def short(self) -> str:
        """The figure for a narrow cell (the README's tables): its bounds, 'no winner' where they span 1x."""
        if self.verdict is Verdict.LEVEL:
            return f"{self.bounds()} no winner"
        if self.verdict is Verdict.FEW:
            return f"{self.bounds()} (few repeats)"
        return self.bounds()

    def sentence(self, this: str, reference: str, this_later: str | None = None) -> str:
        """`this` against `reference` in words, the faster side named first (`this_later`: how `this` reads
        when it comes second, e.g. without the capital that opens a sentence)."""
        if self.verdict is Verdict.FASTER:
            return f"{this} is {self.bounds()} faster than {reference}"
        if self.verdict is Verdict.SLOWER:
            return f"{reference} is {self.inverse().bounds()} faster than {this_later or this}"
        if self.verdict is Verdict.LEVEL:
            return f"{this} runs at {self.bounds()} the speed of {reference}: no winner"
        return f"{this} runs at {self.bounds()} the speed of {reference} (few repeats: no winner)"

    def versus(self, whom: str) -> str:
        """This side against `whom` in a few words: '2.13x [2.04, 2.32] slower than hand-written'."""
        if self.verdict is Verdict.FASTER:
            return f"{self.bounds()} faster than {whom}"
        if self.verdict is Verdict.SLOWER:
            return f"{self.inverse().bounds()} slower than {whom}"
        if self.verdict is Verdict.LEVEL:
            return f"level with {whom} at {self.bounds()}"
        return f"{self.bounds()} the speed of {whom} (too few repeats)"


def of_samples(reference, samples) -> Speedup | None:
    """Between two Samples (compare/results.py), either possibly None."""
    if reference is None or samples is None:
        return None
    return Speedup.of(reference.values, samples.values, reference.median, samples.median)

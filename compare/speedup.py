"""A speedup, how sure it is, and how it reads: made here and nowhere else.

A speedup of B over a reference R is R's median time over B's: above 1x, B
is faster.  Beside it, the 95% bootstrap interval of that ratio from the raw
samples (compare/intervals.py), and the verdict the interval allows: a side
is named faster only where the interval excludes 1x.  With fewer than
MIN_SAMPLES timed repeats on either side there is no interval, and the
verdict says so rather than printing bounds that look firmer than a handful
of samples allow.  The answer, the tables, the kinds, the sweeps and the
plots all take their ratios from here, and their words (docs/glossary.md):
a ratio reads "N.NNx faster" (or, from the other side, "N.NNx slower"),
never below 1x; an interval that spans 1x, or none, reads "no clear winner".
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .intervals import ratio_interval

MIN_SAMPLES = 5
# an interval that spans 1x and whose bounds are further apart than this factor says nothing about the ratio:
# the noise is larger than any difference it could show (a 50x gap with such an interval is no tie)
NOISY_SPAN = 2.0
# the one phrase for an interval that spans 1x (or no interval), and the one for an interval too wide to read
NO_CLEAR_WINNER = "no clear winner"
TOO_NOISY = "too noisy to call"
# how a caption says it (docs/glossary.md)
SPANS_1X = (f"'{NO_CLEAR_WINNER}' where it spans 1x, '{TOO_NOISY}' where it also spans more than "
            f"{NOISY_SPAN:g}x or a side has fewer than {MIN_SAMPLES} repeats")


def figure(ratio: float) -> str:
    """A ratio as the answer prints it: two decimals, whole from 100x on (313x, not 313.24x: three figures,
    as below 10x)."""
    return f"{ratio:.0f}" if ratio >= 100 else f"{ratio:.2f}"


class Verdict(StrEnum):
    FASTER = "faster"
    SLOWER = "slower"
    LEVEL = NO_CLEAR_WINNER
    FEW = f"{TOO_NOISY} (fewer than {MIN_SAMPLES} repeats)"


@dataclass(frozen=True)
class Speedup:
    value: float                                  # the reference's median time / this one's
    interval: tuple[float, float] | None = None   # 95%, of the same ratio; None: fewer than MIN_SAMPLES a side

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

    @property
    def noisy(self) -> bool:
        """No side can be named and the run cannot say whether they are level either: no interval, or one
        that spans 1x and is wider than NOISY_SPAN."""
        if self.interval is None:
            return True
        low, high = self.interval
        return not self.clear and high > NOISY_SPAN * low

    def inverse(self) -> Speedup:
        """The same comparison seen from the other side."""
        iv = None if self.interval is None else (1 / self.interval[1], 1 / self.interval[0])
        return Speedup(1 / self.value, iv)

    def bounds(self) -> str:
        """'2.82x [2.46, 3.59]', or '2.82x' without an interval."""
        iv = "" if self.interval is None else f" [{figure(self.interval[0])}, {figure(self.interval[1])}]"
        return f"{figure(self.value)}x{iv}"

    def words(self) -> str:
        """What the interval allows, in the glossary's words: 'faster', 'slower', 'no clear winner' (it spans
        1x), or 'too noisy to call' (it spans 1x and is too wide to read, or there is none)."""
        if self.clear or self.verdict is Verdict.FEW:
            return str(self.verdict)
        return TOO_NOISY if self.noisy else NO_CLEAR_WINNER

    def text(self) -> str:
        """The figure for a table cell: its bounds, and what they do not allow where they span 1x."""
        return self.bounds() if self.clear else f"{self.bounds()} {self.words()}"

    def short(self) -> str:
        """The figure for a narrow cell (the README's tables): the same words as a table cell."""
        return self.text()

    def plain(self) -> str:
        """The ratio in words without its interval, for a narrow cell: '1.33x faster', '2.02x slower',
        '0.95x no clear winner' (this side against the reference)."""
        if self.verdict is Verdict.FASTER:
            return f"{figure(self.value)}x faster"
        if self.verdict is Verdict.SLOWER:
            return f"{figure(1 / self.value)}x slower"
        return f"{figure(self.value)}x {self.words()}"

    def sentence(self, this: str, reference: str, this_later: str | None = None) -> str:
        """`this` against `reference` in words, the faster side named first (`this_later`: how `this` reads
        when it comes second, e.g. without the capital that opens a sentence)."""
        if self.verdict is Verdict.FASTER:
            return f"{this} is {self.bounds()} faster than {reference}"
        if self.verdict is Verdict.SLOWER:
            return f"{reference} is {self.inverse().bounds()} faster than {this_later or this}"
        return f"{this} against {reference}: {self.text()}"

    def versus(self, whom: str) -> str:
        """This side against `whom` in a few words: '2.13x [2.04, 2.32] slower than hand-written'."""
        if self.verdict is Verdict.FASTER:
            return f"{self.bounds()} faster than {whom}"
        if self.verdict is Verdict.SLOWER:
            return f"{self.inverse().bounds()} slower than {whom}"
        return f"against {whom} {self.text()}"


def of_samples(reference, samples) -> Speedup | None:
    """Between two Samples (compare/results.py), either possibly None."""
    if reference is None or samples is None:
        return None
    return Speedup.of(reference.values, samples.values, reference.median, samples.median)

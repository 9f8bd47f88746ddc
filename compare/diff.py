"""Each backend's change between two runs of one net (`compare diff A.json B.json`: compare/commands/diff.py),
as pyperf's compare_to gives it: the ratio of A's median to B's with its 95% interval, and whether the
change is real (the interval excludes 1x) or not ('no clear change'; 'too noisy to call' where the
interval is too wide to read).  The ratio and its interval are made where every other is (compare/speedup.py)."""
from __future__ import annotations

from dataclasses import dataclass

from nets.errors import UserError

from . import analysis as an
from .results import RunResult, load_results
from .speedup import Speedup, Verdict, figure, of_samples

NO_CLEAR_CHANGE = "no clear change"


@dataclass
class Change:
    backend: str
    a_ms: float | None
    b_ms: float | None
    ratio: float | None           # A's median over B's: above 1x, B is faster
    low: float | None
    high: float | None
    change: str                   # 'N.NNx faster', 'N.NNx slower', 'no clear change', 'too noisy to call', ...


def change_words(s: Speedup | None) -> str:
    """The change from A to B in the glossary's words."""
    if s is None:
        return "not timed in both"
    if s.verdict is Verdict.FASTER:
        return f"{figure(s.value)}x faster"
    if s.verdict is Verdict.SLOWER:
        return f"{figure(1 / s.value)}x slower"
    return s.words() if s.noisy else NO_CLEAR_CHANGE


def changes(a: RunResult, b: RunResult) -> list[Change]:
    """A row per backend timed in either run, in A's order then B's."""
    names = list(dict.fromkeys([x.name for x in an.timed(a)] + [x.name for x in an.timed(b)]))
    out = []
    for name in names:
        old, new = a.backend(name), b.backend(name)
        timed = old in an.timed(a) and new in an.timed(b)
        s = of_samples(old.timing.end_to_end.compute, new.timing.end_to_end.compute) if timed else None
        low, high = s.interval if s and s.interval else (None, None)
        out.append(Change(name, an.compute_ms(old), an.compute_ms(new), s.value if s else None, low, high,
                          change_words(s) if timed else f"timed only in {'A' if old in an.timed(a) else 'B'}"))
    return out


def load_pair(path_a: str, path_b: str) -> tuple[RunResult, RunResult]:
    a, b = load_results(path_a), load_results(path_b)
    if (a.net.name, a.net.batch) != (b.net.name, b.net.batch):
        raise UserError(f"{path_a} is {a.net.name} batch {a.net.batch} and {path_b} is {b.net.name} batch "
                        f"{b.net.batch}: give two runs of one net at one batch")
    return a, b


def notes(a: RunResult, b: RunResult) -> list[str]:
    """What makes the two runs less comparable, a line each."""
    out = []
    if a.device.name != b.device.name:
        out.append(f"The runs are on two devices ({a.device.name}; {b.device.name}): the change is the device's too.")
    if a.mode != b.mode:
        out.append(f"The runs were made in two modes ({a.mode}; {b.mode}).")
    return out

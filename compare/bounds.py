"""The numeric options' types: each a finite number within a stated range,
refused by argparse in one line otherwise (`--budget-s inf` would run
unbounded, `nan` compares false with every bound, 1e308 seconds is no
budget anyone means)."""
from __future__ import annotations

import argparse
import math

DAY_S = 86_400.0


def _words(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def number(low: float, high: float, unit: str = "", whole: bool = False):
    """An argparse type: a finite number (`whole`: a whole number) from `low` to `high`, both included."""
    kind = "a whole number" if whole else "a finite number"
    of = f" of {unit}" if unit else ""
    said = f"must be {kind}{of} from {_words(low)} to {_words(high)}"

    def parse(text: str):
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{said}, not {text!r}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{said}, not {text.strip()}")
        return value
    parse.__name__ = "whole number" if whole else "number"   # argparse names the type in its own errors
    return parse


# the ranges, one place: a pass, a tuning, a measurement
TIMEOUT_S = number(0.001, 7 * DAY_S, "seconds")
BUDGET_S = number(1.0, 30 * DAY_S, "seconds")
CAP_S = number(1.0, DAY_S, "seconds")
MIN_TIME_S = number(0.0, DAY_S, "seconds")
PEAK_GFLOPS = number(0.001, 1e9, "GFLOP/s")
REPEATS = number(1, 10**18, whole=True)          # the results file's caps say the largest that fits (hostmem.py)
WARMUP = number(0, 10**18, whole=True)           # past MAX_WARMUP refused with its reason (hostmem.py)
BATCH = number(1, 2**31 - 1, whole=True)         # the host's memory says the largest that fits
JOBS = number(1, 1024, whole=True)
DRAWS = number(1, 20, whole=True)
BEAM_WIDTH = number(1, 1024, whole=True)

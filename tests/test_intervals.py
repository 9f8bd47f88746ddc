"""Bootstrap intervals of a ratio of medians, on samples whose answer is known."""
import numpy as np

from compare.intervals import clear, ratio_interval
from compare.tables import fmt_speedup


def test_a_clear_twofold_speedup_has_an_interval_around_2_that_excludes_1():
    rng = np.random.default_rng(1)
    slow = list(10.0 + rng.normal(0, 0.2, 30))
    fast = list(5.0 + rng.normal(0, 0.1, 30))
    low, high = ratio_interval(slow, fast)
    assert 1.9 < low < 2.0 < high < 2.1
    assert clear((low, high)) is True
    assert fmt_speedup(2.0, (low, high)) == f"2.00x [{low:.2f}, {high:.2f}]"


def test_overlapping_samples_span_1x_and_say_so():
    rng = np.random.default_rng(2)
    a = list(10.0 + rng.normal(0, 1.0, 12))
    b = list(10.0 + rng.normal(0, 1.0, 12))
    interval = ratio_interval(a, b)
    assert interval[0] < 1.0 < interval[1]
    assert clear(interval) is False
    assert fmt_speedup(1.01, interval).endswith("no clear difference")


def test_the_interval_is_reproducible_and_needs_raw_samples():
    a, b = [3.0, 3.2, 2.9, 3.1], [1.0, 1.1, 0.9, 1.05]
    assert ratio_interval(a, b) == ratio_interval(a, b)   # seeded: a report renders the same every time
    assert ratio_interval([], b) is None and ratio_interval([3.0], b) is None   # version-1 files keep no samples
    assert clear(None) is None and fmt_speedup(2.0, None) == "2.00x"


def test_a_wider_spread_gives_a_wider_interval():
    rng = np.random.default_rng(3)
    base = rng.normal(0, 1, 20)
    narrow = ratio_interval(list(10 + 0.1 * base), list(5 + 0.05 * base))
    wide = ratio_interval(list(10 + 1.0 * base), list(5 + 0.5 * base))
    assert (wide[1] - wide[0]) > 3 * (narrow[1] - narrow[0])

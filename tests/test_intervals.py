"""Bootstrap intervals of a ratio of medians, on samples whose answer is known."""
import numpy as np

from compare.intervals import clear, ratio_interval
from compare.speedup import MIN_SAMPLES, Speedup, Verdict
from compare.tables import fmt_speedup


def test_a_clear_twofold_speedup_has_an_interval_around_2_that_excludes_1():
    rng = np.random.default_rng(1)
    slow = list(10.0 + rng.normal(0, 0.2, 30))
    fast = list(5.0 + rng.normal(0, 0.1, 30))
    low, high = ratio_interval(slow, fast)
    assert 1.9 < low < 2.0 < high < 2.1
    assert clear((low, high)) is True
    s = Speedup.of(slow, fast)
    assert s.interval == (low, high) and s.verdict is Verdict.FASTER
    assert fmt_speedup(s) == f"{s.value:.2f}x [{low:.2f}, {high:.2f}]"
    assert s.inverse().verdict is Verdict.SLOWER and s.inverse().interval == (1 / high, 1 / low)


def test_overlapping_samples_span_1x_and_say_so():
    rng = np.random.default_rng(2)
    a = list(10.0 + rng.normal(0, 1.0, 12))
    b = list(10.0 + rng.normal(0, 1.0, 12))
    interval = ratio_interval(a, b)
    assert interval[0] < 1.0 < interval[1]
    assert clear(interval) is False
    s = Speedup.of(a, b)
    assert s.verdict is Verdict.LEVEL and fmt_speedup(s).endswith("no clear winner")
    assert s.sentence("x", "y").endswith(" no clear winner") and "faster" not in s.sentence("x", "y")


def test_the_interval_is_reproducible_and_needs_raw_samples():
    a, b = [3.0, 3.2, 2.9, 3.1], [1.0, 1.1, 0.9, 1.05]
    assert ratio_interval(a, b) == ratio_interval(a, b)   # seeded: a report renders the same every time
    assert ratio_interval([], b) is None and ratio_interval([3.0], b) is None   # version-1 files keep no samples
    assert clear(None) is None


def test_fewer_than_five_samples_a_side_give_no_interval():
    a, b = [3.0, 3.2, 2.9, 3.1], [1.0, 1.1, 0.9, 1.05]
    assert MIN_SAMPLES == 5
    s = Speedup.of(a, b)
    assert s.interval is None and s.verdict is Verdict.FEW and not s.clear
    assert fmt_speedup(s) == f"{s.value:.2f}x too noisy to call (fewer than 5 repeats)"
    assert Speedup.of(a + [3.0], b + [1.0]).interval is not None


def test_a_wider_spread_gives_a_wider_interval():
    rng = np.random.default_rng(3)
    base = rng.normal(0, 1, 20)
    narrow = ratio_interval(list(10 + 0.1 * base), list(5 + 0.05 * base))
    wide = ratio_interval(list(10 + 1.0 * base), list(5 + 0.5 * base))
    assert (wide[1] - wide[0]) > 3 * (narrow[1] - narrow[0])


def test_one_comparison_has_one_interval_whichever_way_round():
    rng = np.random.default_rng(4)
    a = list(5.1 + rng.normal(0, 0.6, 9))
    b = list(6.0 + rng.normal(0, 0.9, 11))
    ab, ba = Speedup.of(a, b), Speedup.of(b, a)
    assert ba.interval == ab.inverse().interval and ab.interval == ba.inverse().interval
    assert abs(ab.value * ba.value - 1) < 1e-12
    same = [2.0, 2.1, 1.9, 2.0, 2.2]   # equal medians: still one orientation drawn
    other = [2.0, 1.8, 2.3, 2.0, 2.0]
    assert ratio_interval(same, other) == tuple(1 / x for x in reversed(ratio_interval(other, same)))


def test_a_time_of_zero_gives_no_interval_either_way_round():
    # a hand-edited or spoilt file may hold 0 ms: a resample's median of 0 has no ratio (found by the fuzz test)
    zeros, twos = [0.0, 0.0, 3.0, 3.0, 3.0], [2.5] * 5
    assert ratio_interval(zeros, twos) is None and ratio_interval(twos, zeros) is None
    assert ratio_interval([1.0, 1.1, 0.9, 1.0, 1.2], twos) is not None


def test_a_wide_interval_across_1x_is_too_noisy_to_call_never_level():
    """A fifty-fold gap whose interval spans 1x (a busy host) names no winner and no tie."""
    fast = [1.0, 1.1, 0.9, 1.05, 60.0, 0.95]
    slow = [50.0, 52.0, 1.0, 49.0, 51.0, 1.2]
    s = Speedup.of(slow, fast)
    assert s.interval[0] < 1.0 < s.interval[1] and s.noisy
    assert fmt_speedup(s).endswith("too noisy to call") and "no clear winner" not in fmt_speedup(s)
    assert "faster" not in s.sentence("x", "y") and "slower" not in s.versus("y")

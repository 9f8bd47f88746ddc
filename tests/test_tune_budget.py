"""The time of a tuning handed out as deadlines by one Budget, and the
progress of a long search: its rate, per place and in all, and what is left."""
import pytest

from backends.tuning.budget import COSTS_CAP_S, Budget
from backends.tuning.clblast.rate import Rate, span


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_budget_hands_out_each_phases_deadline_from_what_is_left():
    clock = Clock()
    b = Budget(500.0, clock)
    assert b.end == 600.0 and b.search_end() == 500.0           # a fifth kept for the verification and after
    assert b.costs() == pytest.approx(140.0)                    # a tenth of the search's part
    assert Budget(10_000.0, clock).costs() == 100.0 + COSTS_CAP_S   # ... at most a minute
    clock.now = 300.0                                           # the search finished early: its time goes on
    assert b.verify() == pytest.approx(300.0 + 300 * 0.7)
    clock.now = 520.0
    assert b.fresh() == pytest.approx(520.0 + 80 * 0.5) and b.nets() == 600.0
    clock.now = 2000.0
    assert b.left() == 0.0 and b.left(b.verify()) == 0.0       # past the end: nothing, never less
    assert b.shares({"clblast": 9, "tiles": 1}) == {"clblast": 450.0, "tiles": 50.0}


def test_the_rate_of_a_search_per_place_and_what_is_left_per_net():
    clock = Clock()
    rate = Rate(clock)
    clock.now += 10
    rate.add("tcp://10.0.0.5:4000", 15)
    rate.add("tcp://10.0.0.6:4000", 5)
    assert rate.per_second() == 2.0 and rate.per_second("tcp://10.0.0.6:4000") == 0.5
    assert rate.eta(7200) == 3600 and rate.eta(100, "tcp://10.0.0.5:4000") == pytest.approx(100 / 1.5)
    lines = rate.summary({"lenet batch 100": 7200})
    assert lines[0] == "this search: 20 configurations in 10 s, 2.00 per second"
    assert lines[-1] == ("lenet batch 100: 7,200 configurations of CLBlast's default search left, 60 min at this "
                         "rate (10.0.0.5:4000 alone 80 min, 10.0.0.6:4000 alone 4.0 h)")
    assert Rate(clock).eta(5) is None and span(3 * 86400) == "3.0 days" and span(600) == "10 min"
    assert not any("children" in line for line in lines)   # no child said it was ready: no line of them


def test_the_summary_says_what_the_childrens_starts_cost_and_how_many_a_configuration_ended():
    rate = Rate(Clock())
    for seconds in (2.0, 9.5, 3.0):
        rate.child_ready(seconds)
    rate.child_lost()
    rate.child_lost()
    assert rate.summary({})[1] == ("  3 children started, each ready after 3.0 s (median; the longest 9.5 s, "
                                   "14 s in all); 2 ended by a configuration that broke the device's queue")

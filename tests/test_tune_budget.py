"""The time of a tuning handed out as shares of one Budget, CLBlast's as
deadlines phase by phase, and the progress of a long search: its rate, per
place and in all, and what is left."""
import math
import time

import pytest

from backends.tuning.budget import STEPS_ENV, Budget, Steps, default_clock
from backends.tuning.clblast.phases import COSTS_CAP_S, Phases
from backends.tuning.clblast.rate import Rate, span


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_clblasts_phases_take_each_deadline_from_what_is_left_of_its_share():
    clock = Clock()
    b = Budget(500.0, clock)
    p = Phases(b)
    assert b.end == 600.0 and p.search_end() == 500.0           # a fifth kept for the verification and after
    assert p.costs() == pytest.approx(140.0)                    # a tenth of the search's part
    assert Phases(Budget(10_000.0, clock)).costs() == 100.0 + COSTS_CAP_S   # ... at most a minute
    clock.now = 300.0                                           # the search finished early: its time goes on
    assert p.verify() == pytest.approx(300.0 + 300 * 0.7)
    clock.now = 520.0
    assert p.fresh() == pytest.approx(520.0 + 80 * 0.5) and p.nets() == 600.0
    clock.now = 2000.0
    assert b.left() == 0.0 and b.left(p.verify()) == 0.0       # past the end: nothing, never less
    assert b.shares({"clblast": 9, "tiles": 1}) == {"clblast": 450.0, "tiles": 50.0}


def test_a_share_is_a_deadline_on_the_wholes_clock():
    clock = Clock()
    whole = Budget(100.0, clock)
    clock.now = 130.0
    part = whole.share(20.0)
    assert part.clock is clock and part.start == 130.0 and part.end == 150.0
    assert not part.expired() and part.left() == 20.0 and part.spent() == 0.0
    clock.now = 149.0
    assert not part.expired() and part.left() == pytest.approx(1.0) and part.spent() == pytest.approx(19.0)
    clock.now = 150.0
    assert part.expired() and part.left() == 0.0
    assert whole.left() == 50.0 and not whole.expired()   # the whole runs on: its shares are apart


def test_a_budget_on_a_clock_of_steps_counts_the_work_and_sets_no_wall_clock_limit_while_work_is_left(monkeypatch):
    """The tests' hook: a budget counted in units of work (a configuration or a candidate tried), at any speed."""
    steps = Steps()
    whole = Budget(4, steps)
    part = whole.share(whole.left() / 2)
    part.worked()
    assert not part.expired() and whole.left() == 3.0 and part.wall_s() == math.inf
    part.worked()
    assert part.expired() and part.wall_s() == 0.0 and whole.wall_s() == math.inf   # the whole has work left
    whole.worked(2)
    assert whole.expired() and whole.wall_s() == 0.0
    wall = Budget(10.0, Clock())   # on any other clock work moves nothing, and a wait may last the time left
    wall.worked(5)
    assert wall.left() == 10.0 == wall.wall_s()
    monkeypatch.delenv(STEPS_ENV, raising=False)
    assert default_clock() is time.monotonic
    monkeypatch.setenv(STEPS_ENV, "1")
    assert isinstance(default_clock(), Steps) and default_clock() is not default_clock()   # each tune its own


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


def test_the_driver_hands_each_scope_its_share_of_one_budget_on_one_clock_and_the_place(monkeypatch):
    """No scope keeps a clock of its own or asks where it runs: the driver shares the budget by weight, each
    share starting when its scope does, and hands every scope the one place."""
    import sys
    import types

    from backends import tuning
    from backends.tuning import scopes as registry
    from nets import LENET

    clock, seen = Clock(), []

    def scope(name: str, took: float) -> types.ModuleType:
        module = types.ModuleType(f"fake_scope_{name}")
        module.check = lambda request, place: seen.append(("check", name, place.on_farm))

        def run(request, budget, place):
            seen.append(("run", name, budget.seconds, budget.start, budget.clock is clock, place.on_farm))
            clock.now += took   # a scope that overruns takes nothing from the next one's share
            return [f"{name} ran"]
        module.run = run
        monkeypatch.setitem(sys.modules, module.__name__, module)
        return registry.Scope(name, module.__name__, {"a": 9.0, "b": 1.0}[name], False, "")

    monkeypatch.setattr(registry, "SCOPES", {s.name: s for s in (scope("a", 950.0), scope("b", 5.0))})
    request = tuning.Request([LENET], ["a", "b"], 1000.0, _rt=types.SimpleNamespace(info={"name": "dev"}))
    summary = tuning.tune(request, clock)
    assert seen == [("check", "a", False), ("check", "b", False),
                    ("run", "a", 900.0, 100.0, True, False), ("run", "b", 100.0, 1050.0, True, False)]
    assert summary.lines[:2] == ["a ran", "b ran"] and summary.lines[2].startswith("on dev, budget 1000 s")


def test_scopes_run_in_the_registrys_order_whatever_order_they_are_asked_in():
    from backends.tuning import driver
    from backends.tuning.request import Request
    # forms uses the tiles: asked first, it still runs after them
    assert driver.resolve(Request(nets=[], scopes=["forms", "opencv", "tiles"])) == ["tiles", "forms", "opencv"]

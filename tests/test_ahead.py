"""Prepares started ahead (backends/isolated.py prepare_ahead, compare/ahead.py): a
backend whose modes each prepare in a child of their own has every mode's child compile at once, while the
runner computes the oracle and prepares the backends of its own process; nothing is timed until every such
prepare has answered.  The test doubles (tests/run_checks.py AheadInProcess, AheadCompanion) log when each
prepare starts and ends and when each pass begins, on the host's one monotonic clock."""
import os
import signal
import threading

import numpy as np
import psutil
import pytest

import backends
from backends import isolated
from compare import ahead, runner
from nets import LENET
from nets.weights import init_weights, make_input
from run_checks import AheadBackend, ahead_events, ahead_wait_for_starts


@pytest.fixture
def log(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPARE_TEST_AHEAD_LOG", str(tmp_path / "ahead.txt"))
    monkeypatch.setitem(backends.REGISTRY, "ahead", ("run_checks", "AheadBackend"))
    monkeypatch.setitem(backends.REGISTRY, "companion", ("run_checks", "AheadCompanion"))
    return tmp_path / "ahead.txt"


@pytest.fixture
def graces(monkeypatch):
    """The children that had to be given their grace to end (a stop that waits it out, nets/ready.py)."""
    said = []
    monkeypatch.setattr(isolated, "reached", said.append)
    return said


def _plan(names, mode="both", repeats=3, draws=1):
    return runner.Plan(net=LENET, batch=2, weights=init_weights(LENET, 0), x=make_input(LENET, 2, 0),
                       backends=names, mode=mode, repeats=repeats, warmup=1, peak_gflops=1.0, draws=draws)


def _spans() -> dict[str, tuple[float, float, int]]:
    """Each prepare's (start, end, pid), by mode (or 'companion'); a prepare logged twice fails here."""
    starts, ends = {}, {}
    for word, name, t, pid in ahead_events():
        if word in ("start", "end"):
            got = starts if word == "start" else ends
            assert name not in got, f"{name} was prepared twice"
            got[name] = (t, pid)
    return {name: (t, ends[name][0] if name in ends else None, pid) for name, (t, pid) in starts.items()}


def _passes() -> list[tuple[str, float]]:
    return [(name, t) for word, name, t, _ in ahead_events() if word == "pass"]


def _ours() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_the_modes_prepare_side_by_side_while_the_runner_works_and_nothing_is_timed_meanwhile(log, monkeypatch):
    monkeypatch.setenv("COMPARE_TEST_COMPANION_WAITS", "first,second")
    result, _ = runner.execute(_plan(["ahead", "companion"]))
    assert [b.name for b in result.backends] == ["ahead", "companion"]   # the plan's order, opened otherwise
    ahead, companion = result.backends
    assert ahead.status == "OK" and ahead.check.status == "PASS", ahead.reason
    assert companion.status == "OK" and companion.check.status == "PASS", companion.reason
    assert [m.status for m in ahead.modes] == ["OK", "OK"] and all(m.compute.n == 3 for m in ahead.modes)
    marks = [s.name for s in result.stages]   # where the tail after the prepares goes (compare/stages.py)
    assert marks.index("ahead: 2 modes measured") < marks.index(f"{ahead.label} checked") < marks.index("ahead ready (OK)")
    spans = _spans()   # each mode prepared once, each in a child of its own
    (s1, e1, pid1), (s2, e2, pid2), (sc, ec, _) = spans["first"], spans["second"], spans["companion"]
    assert set(spans) == {"first", "second", "companion"} and pid1 != pid2
    assert max(s1, s2) < min(e1, e2), "the two modes were not prepared side by side"
    assert sc < min(e1, e2) and max(s1, s2) < ec, "the runner's own backend was not prepared while they compiled"
    # no pass of any backend (the first, the warm-ups, the timed ones) before every prepare had ended
    passes = _passes()
    assert passes and min(t for _, t in passes) > max(e1, e2, ec)
    assert {name for name, _ in passes} == {"first", "second", "companion"}
    # its prepare time is the chosen mode's own (from its child's start), not the near-zero wait for its answer
    start, end, _ = spans[ahead.mode]
    assert ahead.prepare_ms >= (end - start) * 1e3


def test_one_backend_alone_is_the_run_as_before_with_its_modes_ahead(log):
    result, _ = runner.execute(_plan(["ahead"], mode="performance"))
    entry, = result.backends
    assert entry.status == "OK" and [m.status for m in entry.modes] == ["OK", "OK"], entry.reason
    spans = _spans()
    assert set(spans) == {"first", "second"} and max(s for s, _, _ in spans.values()) < min(
        e for _, e, _ in spans.values())
    assert min(t for _, t in _passes()) > max(e for _, e, _ in spans.values())


def test_a_prepare_ahead_that_fails_is_its_modes_failure_and_the_other_mode_runs(log, monkeypatch):
    monkeypatch.setenv("COMPARE_TEST_AHEAD_FAIL", "second")
    result, _ = runner.execute(_plan(["ahead"]))
    entry, = result.backends
    assert entry.status == "OK" and entry.mode == "first" and entry.check.status == "PASS", entry.reason
    first, second = entry.modes
    assert first.status == "OK"
    assert second.status == "FAILED" and "RuntimeError: second: failed for the test" in second.reason
    assert {name for name, _ in _passes()} == {"first"}


def test_a_backend_in_children_is_made_beside_the_runners_own_not_after_them(log, monkeypatch):
    """The runner asks each backend its modes before anything runs; one in children answers from a thread, so
    its child starts while the runner makes its own (PyTorch's import): the companion, made first, waits for
    the child to be made and meets it."""
    monkeypatch.setenv("COMPARE_TEST_COMPANION_MEETS", "1")
    result, _ = runner.execute(_plan(["companion", "ahead"]))
    assert [b.status for b in result.backends] == ["OK", "OK"], [b.reason for b in result.backends]
    said = [n for w, n, *_ in ahead_events() if w == "companion"]
    assert said[0] == "met", said   # as the runner first asked its modes (it may ask again when it opens it)


def test_a_mode_with_a_floor_is_not_started_ahead(log, monkeypatch):
    monkeypatch.setenv("COMPARE_TEST_AHEAD_MODES", "first,second,hopeless")
    result, _ = runner.execute(_plan(["ahead"]))
    entry, = result.backends
    assert entry.status == "OK", entry.reason
    assert [(m.name, m.status) for m in entry.modes] == [("first", "OK"), ("second", "OK"), ("hopeless", "SKIPPED")]
    assert set(_spans()) == {"first", "second"}   # never prepared, in the background either
    # its floor measured once, while the others compiled ahead (a floor may take seconds on a bare machine)
    floors = [t for word, name, t, _ in ahead_events() if (word, name) == ("floor", "hopeless")]
    first_end = _spans()["first"][1]
    assert len(floors) == 1 and floors[0] < first_end


def test_close_stops_the_children_of_prepares_never_taken(log, monkeypatch, graces):
    monkeypatch.setenv("COMPARE_TEST_AHEAD_S", "600")   # still compiling when closed
    backend = AheadBackend()
    try:
        assert backend.prepare_ahead(LENET, init_weights(LENET, 0), 2, ["first", "second"]) == ["first", "second"]
        ahead_wait_for_starts(["first", "second"])
        pids = {pid for _, _, pid in _spans().values()}
        assert len(pids) == 2 and pids <= _ours()
    finally:
        backend.close()
    assert not pids & _ours(), "a child preparing ahead outlived its backend's close"
    assert "grace" not in graces, "a child compiling was given its grace instead of being stopped"


def test_an_interrupt_while_they_compile_stops_the_children(log, monkeypatch, graces):
    """A Ctrl-C that lands once the children compile (during the oracle, or as the runner waits for them)."""
    monkeypatch.setenv("COMPARE_TEST_AHEAD_S", "600")
    main = threading.get_ident()

    def ctrl_c():
        ahead_wait_for_starts(["first", "second"])
        signal.pthread_kill(main, signal.SIGINT)   # to the main thread, as a terminal's Ctrl-C reaches it
    thread = threading.Thread(target=ctrl_c)
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.execute(_plan(["ahead", "companion"]))
    finally:
        thread.join()
    pids = {pid for _, _, pid in _spans().values() if pid != os.getpid()}
    assert len(pids) == 2 and not pids & _ours(), "a child preparing ahead outlived the interrupt"
    assert "grace" not in graces


def test_an_interrupt_during_the_oracle_stops_the_children(log, monkeypatch, graces):
    monkeypatch.setenv("COMPARE_TEST_AHEAD_S", "600")

    def interrupted(*args):
        ahead_wait_for_starts(["first", "second"])
        raise KeyboardInterrupt
    monkeypatch.setattr(runner.oracle, "forward", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.execute(_plan(["ahead"]))
    pids = {pid for _, _, pid in _spans().values()}
    assert len(pids) == 2 and not pids & _ours(), "a child preparing ahead outlived the interrupt"
    assert "grace" not in graces


def test_a_prepare_asked_for_another_batch_is_made_anew(log):
    backend = AheadBackend()
    weights = init_weights(LENET, 0)
    try:
        backend.prepare_ahead(LENET, weights, 2, ["first", "second"])
        other = backend.prepare(LENET, weights, 3, mode="first")   # not the one started ahead: its own
        other.close()
        backend.prepare(LENET, weights, 2, mode="first").close()   # the one started ahead
    finally:
        backend.close()
    assert [n for w, n, _, _ in ahead_events() if w == "start"].count("first") == 2


def test_the_runner_goes_on_while_a_child_slow_to_start_is_sent_its_weights(log, monkeypatch, tmp_path):
    # weights far larger than a socket's buffer: a send waits until the child reads them, and this child
    # reads only once the test lets it start, so a prepare_ahead that sent in the caller's thread would
    # return only after the child's 20 s wait, its backend made
    monkeypatch.setenv("COMPARE_TEST_AHEAD_HOLD", str(tmp_path / "go"))
    weights = {**init_weights(LENET, 0), "ballast": np.zeros(16 * 2 ** 20, np.float32)}
    backend = AheadBackend()
    try:
        assert backend.prepare_ahead(LENET, weights, 2, ["first", "second"]) == ["first", "second"]
        assert not [e for e in ahead_events() if e[:2] == ("made", "backend")], "prepare_ahead waited for its children"
        (tmp_path / "go").touch()
        backend.prepare(LENET, weights, 2, mode="first").close()
    finally:
        backend.close()
    assert "first" in {n for w, n, _, _ in ahead_events() if w == "end"}   # sent whole once the child started


def test_the_runner_goes_on_while_its_children_are_screened(log, monkeypatch):
    # a screened child's first request waits for its start's figure, and a slow one is started again
    # (seconds each): on the H200 the runner waited 16 s for that when it sent `new` to each child in turn
    waited_in = []
    screened = isolated.Worker._settle

    def settle(worker):
        waited_in.append(threading.current_thread())
        screened(worker)
    monkeypatch.setattr(isolated.Worker, "_settle", settle)
    backend = AheadBackend()
    try:
        assert backend.prepare_ahead(LENET, init_weights(LENET, 0), 2, ["first", "second"]) == ["first", "second"]
        assert threading.current_thread() not in waited_in, "prepare_ahead waited for a child's screening"
        backend.prepare(LENET, init_weights(LENET, 0), 2, mode="first").close()
    finally:
        backend.close()
    assert {"first", "second"} <= {n for w, n, _, _ in ahead_events() if w == "start"}


def test_with_draws_every_drawn_process_of_each_mode_is_started_ahead(log, monkeypatch):
    monkeypatch.setattr(ahead.os, "cpu_count", lambda: 8)   # four may compile at once
    result, _ = runner.execute(_plan(["ahead"], draws=2))
    entry, = result.backends
    assert entry.status == "OK" and entry.check.status == "PASS", entry.reason
    events = ahead_events()
    starts = [(name, t, pid) for word, name, t, pid in events if word == "start"]
    ends = [t for word, _, t, _ in events if word == "end"]
    # two modes, two processes each, all four compiling at once, none prepared again after
    assert sorted(name for name, _, _ in starts) == ["first", "first", "second", "second"]
    assert len({pid for _, _, pid in starts}) == 4
    assert max(t for _, t, _ in starts) < min(ends), "the draws were not started with the first processes"
    assert min(t for _, t in _passes()) > max(ends)


def test_at_most_half_the_hosts_cores_compile_ahead_first_processes_first(log, monkeypatch):
    monkeypatch.setattr(ahead.os, "cpu_count", lambda: 6)   # three at once: two first processes, one draw
    result, _ = runner.execute(_plan(["ahead"], draws=3))
    entry, = result.backends
    assert entry.status == "OK" and entry.check.status == "PASS", entry.reason
    starts = sorted(t for word, _, t, _ in ahead_events() if word == "start")
    ends = sorted(t for word, _, t, _ in ahead_events() if word == "end")
    assert len(starts) == 6 and starts[2] < ends[0] < starts[3]   # three ahead, the other draws in turn

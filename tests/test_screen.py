"""A backend's child screened by its draw as it starts (backends/screen.py): a child slower at the fixed piece
of plain Python than the run's fastest process is stopped and started again, a few times at most, and what
was stopped is said."""
import psutil
import pytest

from backends import screen
from backends.isolated import Worker
from compare.draws import screened_line
from compare.results import BackendResult
from nets import LENET
from nets.weights import init_weights
from run_checks import NumpyInAChild


@pytest.fixture
def run_seen():
    yield
    screen._seen.clear()


def test_a_child_no_slower_than_the_runs_fastest_is_kept_as_it_started(run_seen):
    screen.start_run(1e9)   # every process is fast against this runner
    worker = Worker("screened", screen=True)
    try:
        first = worker.call("os", "getpid")
        assert worker.screened_out == [] and worker.call("os", "getpid") == first
        assert 0 < worker.plain_python_ms() < 1e9 and screen.fastest() == worker.plain_python_ms()
    finally:
        worker.close()


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE}


def test_a_child_slower_than_the_runs_fastest_is_started_again_a_few_times_at_most(run_seen):
    screen.start_run(1e-6)   # no process is as fast as this: each is slow, and the last serves anyway
    before = _children()
    worker = Worker("screened", screen=True)
    try:
        pid = worker.call("os", "getpid")
        assert len(worker.screened_out) == screen.TRIES - 1 and all(ms > 0 for ms in worker.screened_out)
        assert worker.plain_python_ms() > 0 and pid == worker._proc.pid
        assert _children() - before == {pid}   # the processes stopped as slow are gone
    finally:
        worker.close()


def test_an_unscreened_child_is_never_started_again(run_seen):
    screen.start_run(1e-6)
    worker = Worker("not screened")
    try:
        worker.call("os", "getpid")
        assert worker.screened_out == []
    finally:
        worker.close()


def test_a_prepared_net_says_what_its_screening_stopped_and_the_answer_says_it(run_seen):
    screen.start_run(1e-6)
    backend = NumpyInAChild()
    try:
        prepared = backend.prepare(LENET, init_weights(LENET, seed=0), 1)
        stopped = prepared.config[screen.KEY]
        assert len(stopped) == screen.TRIES - 1
        prepared.close()
    finally:
        backend.close()
    res = type("Res", (), {"backends": [BackendResult(name="tinygrad", status="OK", config={screen.KEY: stopped})]})
    line = screened_line(res)
    assert line.startswith(f"Processes screened: {len(stopped)} children of `tinygrad` drew slow")
    assert "started again" in line


def test_the_screened_line_is_short_and_absent_where_nothing_was_stopped():
    many = [BackendResult(name=f"side-with-a-long-name-{i}", status="OK", config={screen.KEY: [40.0 + i]})
            for i in range(8)]
    res = type("Res", (), {"backends": many})
    line = screened_line(res, 120)
    assert len(line) < 120 and "8 children of 8 sides" in line and "40.0-47.0 ms" in line
    none = type("Res", (), {"backends": [BackendResult(name="x", status="OK", config={})]})
    assert screened_line(none) is None

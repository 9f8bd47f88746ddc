"""The runner's own process drawn (`compare run --draws N`): a runner slower at plain Python than fresh
processes hands the run to a fresh one, at most N processes in all, and the results keep each figure."""
import json
import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace as NS

import pytest

from compare import runner_draw
from compare.draws import drawn_line
from compare.results import Host

RUN = ["run", "--net", "lenet", "--backends", "numpy", "--repeats", "2", "--warmup", "1", "--draws", "2"]


@pytest.fixture
def drawn_state(monkeypatch):
    monkeypatch.delenv(runner_draw.ENV, raising=False)
    monkeypatch.setattr(runner_draw, "_drawn", [])


def test_a_runner_as_fast_as_fresh_processes_runs_the_run_itself(drawn_state, monkeypatch):
    monkeypatch.setattr(runner_draw, "plain_python_ms", lambda: 21.0)
    monkeypatch.setattr(runner_draw, "fresh_ms", lambda: 20.0)
    assert runner_draw.redraw(RUN, 3) is None
    assert runner_draw.drawn() == [21.0]


def test_the_last_draw_runs_whatever_it_drew(drawn_state, monkeypatch):
    monkeypatch.setenv(runner_draw.ENV, "44.2,43.9")
    monkeypatch.setattr(runner_draw, "plain_python_ms", lambda: 45.0)
    monkeypatch.setattr(runner_draw, "fresh_ms", lambda: pytest.fail("the last draw times no fresh process"))
    assert runner_draw.redraw(RUN, 3) is None
    assert runner_draw.drawn() == [44.2, 43.9, 45.0]


def test_fresh_processes_time_the_same_piece_of_plain_python():
    assert runner_draw.fresh_ms() > 0


def test_a_slow_runner_hands_the_run_to_a_fresh_process_and_the_results_keep_both_figures(
        drawn_state, monkeypatch, tmp_path):
    monkeypatch.setattr(runner_draw, "plain_python_ms", lambda: 50.0)   # this process drew slow
    monkeypatch.setattr(runner_draw, "fresh_ms", lambda: 20.0)
    out = tmp_path / "run.json"
    assert runner_draw.redraw(RUN + ["--out", str(out)], 2) == 0
    assert runner_draw.drawn() is None   # this process ran nothing
    host = json.loads(out.read_text())["host"]
    first, second = host["runner_draws"]
    assert first == 50.0 and 0 < second and host["plain_python_ms"] > 0


def test_a_signal_to_the_waiting_runner_reaches_the_fresh_process_once(tmp_path):
    """`timeout`'s TERM, or ^C, lands on the process the user started; the run itself stops, nothing written."""
    out = tmp_path / "run.json"
    script = textwrap.dedent(f"""
        import sys
        from compare import runner_draw
        runner_draw.plain_python_ms = lambda: 50.0
        runner_draw.fresh_ms = lambda: 20.0
        sys.exit(runner_draw.redraw(["run", "--net", "vgg16", "--backends", "numpy", "--repeats", "50",
                                     "--draws", "2", "--out", {str(out)!r}], 2))
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, cwd=runner_draw._ROOT)
    for line in parent.stdout:   # the fresh process has started its run
        if "checks and times" in line:
            break
    parent.send_signal(signal.SIGTERM)
    rest = parent.stdout.read()
    assert parent.wait(timeout=120) == 128 + signal.SIGTERM, rest
    assert "interrupted (SIGTERM)" in rest and not out.exists(), rest


def test_the_answer_says_how_the_runner_was_drawn():
    def result(draws, children=()):
        return NS(host=Host(runner_draws=draws), backends=list(children))
    assert drawn_line(result(None)) is None and drawn_line(result([24.1])) is None
    assert drawn_line(result([44.2, 24.1])) == ("Processes drawn: the runner's own process drawn 2 times "
                                                 "(plain Python 44.2 then 24.1 ms).")

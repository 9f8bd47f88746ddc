"""An end-to-end sample is the mean of a few passes back to back (compare/timing.py), the same rule for
every side, each pass's output checked; a backend in a child process makes them in one request."""
import numpy as np
import pytest

from compare.timing import BLOCK_MAX, BLOCK_MS, TimedOutputDiffers, Trial, passes_per_sample
from nets import LENET
from nets.weights import init_weights, make_input
from run_checks import NumpyInAChild


@pytest.mark.parametrize("pass_ms, want", [
    (0.01, BLOCK_MAX), (BLOCK_MS / 4, 4), (BLOCK_MS / 4 + 0.01, 4), (BLOCK_MS / 3.5, 4),
    (BLOCK_MS, 1), (200.0, 1), (0.0, 1), (float("nan"), 1)])
def test_a_sample_takes_as_many_passes_as_add_up_to_the_block_at_most_the_cap(pass_ms, want):
    assert passes_per_sample(pass_ms) == want


class _Counted:
    """A prepared net whose passes take 1, 2, 3... ms by its own clock, its output right unless told."""

    def __init__(self, wrong_at: int | None = None):
        self.calls, self.wrong_at, self.config = 0, wrong_at, {}
        self.net = type("NoLayers", (), {"layers": ()})()   # timed end to end only

    def timed_pass(self, x):
        self.calls += 1
        y = np.ones(3, np.float32) * (2 if self.calls == self.wrong_at else 1)
        ms = float(self.calls)
        return {"upload": 0.0, "compute": ms, "download": 0.0, "total": ms}, y

    def timed_passes(self, x, n):
        return [self.timed_pass(x) for _ in range(n)]


def test_a_sample_is_the_mean_of_its_passes_and_says_how_many():
    trial = Trial("counted", _Counted(), np.zeros(1, np.float32), np.ones(3, np.float32), True, per_sample=3)
    trial.end_to_end(0)
    trial.end_to_end(1)
    assert trial.phases["compute"] == [2.0, 5.0]   # (1+2+3)/3, (4+5+6)/3
    assert trial.result().passes_per_sample == 3


def test_every_pass_of_a_sample_is_checked_and_the_wrong_one_named():
    trial = Trial("counted", _Counted(wrong_at=5), np.zeros(1, np.float32), np.ones(3, np.float32), True,
                  per_sample=3)
    trial.end_to_end(0)
    with pytest.raises(TimedOutputDiffers, match=r"timed pass 2 \(end to end, pass 2 of 3\)"):
        trial.end_to_end(1)


def test_a_child_makes_a_samples_passes_in_one_request(monkeypatch):
    backend = NumpyInAChild()
    try:
        prepared = backend.prepare(LENET, init_weights(LENET, seed=0), 2)
        x = make_input(LENET, 2, seed=1)
        sent = []
        real = prepared._worker.request
        monkeypatch.setattr(prepared._worker, "request", lambda *a, **k: sent.append(a) or real(*a, **k))
        got = prepared.timed_passes(x, 4)
        assert len(sent) == 1 and len(got) == 4
        want = prepared.forward(x)
        assert all(np.array_equal(y, want) and phases["compute"] > 0 for phases, y in got)
        prepared.close()
    finally:
        backend.close()


def test_a_report_says_how_many_passes_a_sample_averaged(tmp_path):
    from compare.report import render_report
    from compare.results import write_results
    from results_factory import small_results
    res = small_results()
    path = tmp_path / "r.json"
    write_results(path, res)
    render_report([res], [str(path)], str(tmp_path / "plain"))
    assert not any("passes back to back" in p.read_text() for p in (tmp_path / "plain").glob("net-*.md"))
    for b in res.backends:
        if b.timing is not None:
            b.timing.passes_per_sample = 4
    res.backends[0].timing.passes_per_sample = 1
    render_report([res], [str(path)], str(tmp_path / "blocked"))
    page = " ".join(p.read_text() for p in (tmp_path / "blocked").glob("net-*.md"))
    assert f"each end-to-end run the mean of 1-4 passes back to back (as many as add up to {BLOCK_MS:g} ms)" in page

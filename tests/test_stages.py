"""Where a run's time went (compare/stages.py): each stage stamped in seconds since the process started, in
the order the run met them, kept in the results file."""
import threading

import pytest

from backends.reference.numpy_backend import NumpyBackend
from compare import runner
from compare.results import load_results, write_results
from nets import Dense, Net
from nets.weights import init_weights, make_input

from conftest import backend_or_skip


def test_a_runs_stages_are_stamped_in_order_from_its_process_start_and_kept(monkeypatch, tmp_path):
    monkeypatch.setattr(runner.backends, "backend_class", lambda name: NumpyBackend)
    monkeypatch.setattr(runner.backends, "unavailable_reason", lambda name: None)
    net = Net("t", (1, 1, 8), (Dense("d", "relu", out_features=8),))
    plan = runner.Plan(net=net, batch=2, weights=init_weights(net, 0), x=make_input(net, 2, 0),
                       backends=["a", "b"], mode="both", repeats=3, warmup=1, interleave=True)
    result, _ = runner.execute(plan)
    names = [s.name for s in result.stages]
    assert names[0].startswith("run started")
    assert names[1:] == ["the OpenCL device opened", "backends made, their modes asked", "prepares ahead started",
                         "float64 reference computed", "peak known", "a prepared", "a checked", "a ready (OK)",
                         "b prepared", "b checked", "b ready (OK)", "timed: a, b",
                         "every backend timed and closed"]
    at = [s.at_s for s in result.stages]
    assert at[0] > 0 and at == sorted(at)   # this process started before the run
    path = tmp_path / "run.json"
    write_results(path, result)
    assert load_results(path).stages == result.stages


def test_on_a_device_apart_from_the_host_the_reference_is_computed_beside_the_peak(monkeypatch):
    # the float64 reference runs on the host's cores and the peak on the device's clock: on a GPU neither waits
    # for the other (on a CPU device they would share the cores, and run one after the other as the test above)
    backend_or_skip("vectorised")   # an OpenCL backend: the run opens the device and asks its peak
    monkeypatch.setattr(runner, "apart_from_host", lambda runtime: True)
    started = {"reference": threading.Event(), "peak": threading.Event()}
    met = {}
    forward = runner.oracle.forward

    def reference(*args):
        started["reference"].set()
        met["the reference met the peak"] = started["peak"].wait(30)
        return forward(*args)

    def peak(runtime, given, progress):
        started["peak"].set()
        met["the peak met the reference"] = started["reference"].wait(30)
        return {"gflops": 1.0, "source": "a test's"}
    monkeypatch.setattr(runner.oracle, "forward", reference)
    monkeypatch.setattr(runner, "peak_for_run", peak)
    net = Net("t", (1, 1, 8), (Dense("d", "relu", out_features=8),))
    plan = runner.Plan(net=net, batch=2, weights=init_weights(net, 0), x=make_input(net, 2, 0),
                       backends=["vectorised"], mode="both", repeats=3, warmup=1)
    result, outputs = runner.execute(plan)
    assert met == {"the reference met the peak": True, "the peak met the reference": True}
    assert result.backends[0].check.status == "PASS" and outputs.reference is not None   # checked against it
    assert "float64 reference computed" in [s.name for s in result.stages]


def test_a_reference_that_fails_beside_the_peak_fails_the_run_where_it_is_needed(monkeypatch):
    monkeypatch.setattr(runner.backends, "backend_class", lambda name: NumpyBackend)
    monkeypatch.setattr(runner.backends, "unavailable_reason", lambda name: None)
    monkeypatch.setattr(runner, "apart_from_host", lambda runtime: True)
    monkeypatch.setattr(runner, "peak_for_run", lambda runtime, given, progress: {"gflops": 1.0, "source": "a test's"})

    def broken(*args):
        raise MemoryError("no room for the float64 reference")
    monkeypatch.setattr(runner.oracle, "forward", broken)
    net = Net("t", (1, 1, 8), (Dense("d", "relu", out_features=8),))
    plan = runner.Plan(net=net, batch=2, weights=init_weights(net, 0), x=make_input(net, 2, 0),
                       backends=["a"], mode="both", repeats=3, warmup=1)
    with pytest.raises(MemoryError, match="no room for the float64 reference"):
        runner.execute(plan)

"""Where a run's time went (compare/stages.py): each stage stamped in seconds since the process started, in
the order the run met them, kept in the results file."""
from backends.reference.numpy_backend import NumpyBackend
from compare import runner
from compare.results import load_results, write_results
from nets import Dense, Net
from nets.weights import init_weights, make_input


def test_a_runs_stages_are_stamped_in_order_from_its_process_start_and_kept(monkeypatch, tmp_path):
    monkeypatch.setattr(runner.backends, "backend_class", lambda name: NumpyBackend)
    monkeypatch.setattr(runner.backends, "unavailable_reason", lambda name: None)
    net = Net("t", (1, 1, 8), (Dense("d", "relu", out_features=8),))
    plan = runner.Plan(net=net, batch=2, weights=init_weights(net, 0), x=make_input(net, 2, 0),
                       backends=["a", "b"], mode="performance", repeats=3, warmup=1, interleave=True)
    result, _ = runner.execute(plan)
    names = [s.name for s in result.stages]
    assert names[0].startswith("run started")
    assert names[1:] == ["the OpenCL device opened", "backends made, their modes asked", "prepares ahead started",
                         "float64 reference computed", "peak known", "a prepared", "a ready (OK)", "b prepared",
                         "b ready (OK)", "timed: a, b",
                         "every backend timed and closed"]
    at = [s.at_s for s in result.stages]
    assert at[0] > 0 and at == sorted(at)   # this process started before the run
    path = tmp_path / "run.json"
    write_results(path, result)
    assert load_results(path).stages == result.stages

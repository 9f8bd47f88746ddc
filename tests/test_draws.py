"""`compare run --draws N`: a side that runs in processes of its own is
prepared in N fresh ones and the one with the fastest passes runs the timed
passes; the runner's own process is drawn once; what each draw gave is kept
and said (compare/draws.py)."""
import itertools

import pytest

import backends
from compare import runner
from compare.draws import DRAW_PASSES, KEY, ProcessDraws, drawn_line
from nets import LENET
from nets.weights import init_weights, make_input


def _run(tmp_path, monkeypatch, names, draws: int, delays: str = "0.2,0.0,0.1"):
    monkeypatch.setenv("COMPARE_TEST_DRAW_DIR", str(tmp_path))
    monkeypatch.setenv("COMPARE_TEST_DRAW_DELAYS", delays)
    monkeypatch.setitem(backends.REGISTRY, "drawn", ("run_checks", "DrawnBackend"))
    plan = runner.Plan(net=LENET, batch=2, weights=init_weights(LENET, 0), x=make_input(LENET, 2, 0),
                       backends=names, mode="both", repeats=3, warmup=1, peak_gflops=1.0, draws=draws)
    result, _ = runner.execute(plan)
    return result


def _passes(tmp_path) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in line.split()) for line in (tmp_path / "draws.txt").read_text().splitlines()]


def test_the_fastest_of_the_processes_drawn_runs_the_timed_passes(tmp_path, monkeypatch):
    result = _run(tmp_path, monkeypatch, ["drawn", "numpy"], 3)
    drawn, numpy = result.backends
    assert drawn.status == "OK" and drawn.check.status == "PASS", drawn.reason
    got = ProcessDraws.from_config(drawn.config)
    assert got.draws == 3 and len(got.pass_ms) == 3 and got.kept == 2 and not got.failed
    assert got.pass_ms[1] < got.pass_ms[2] < got.pass_ms[0]   # each process's own speed, as drawn
    passes = _passes(tmp_path)
    last = passes[-3:]   # the timed passes: all in the second process
    assert {index for index, _ in last} == {1} and len({pid for _, pid in last}) == 1
    assert {index for index, _ in passes} == {0, 1, 2}   # three processes each prepared and passed
    # every process ready first, then held against the others sample by sample (a few passes back to back,
    # compare/timing.py), in turn: a slow phase of the host falls on all alike
    runs, turns = [index for index, _ in itertools.groupby(index for index, _ in passes)], [0, 1, 2] * DRAW_PASSES
    assert any(runs[k:k + len(turns)] == turns for k in range(len(runs))), runs
    assert KEY not in numpy.config   # in the runner's process: drawn once
    line = drawn_line(result)
    assert line == "Processes drawn: `drawn` the fastest of 3 processes; the runner's own process was drawn once."
    assert drawn_line(result, limit=60) == ("Processes drawn: 1 side in child processes, each the fastest of 3 "
                                            "processes; the runner's own process was drawn once.")
    assert result.settings.draws == 3


def test_one_draw_is_the_run_as_before(tmp_path, monkeypatch):
    result = _run(tmp_path, monkeypatch, ["drawn"], 1)
    entry, = result.backends
    assert entry.status == "OK" and KEY not in entry.config and drawn_line(result) is None
    assert {index for index, _ in _passes(tmp_path)} == {0}


def test_a_draw_that_fails_is_said_and_the_others_stand(tmp_path, monkeypatch):
    # the third process cannot start its backend: an unparsable delay
    result = _run(tmp_path, monkeypatch, ["drawn"], 3, delays="0.1,0.0,x")
    entry, = result.backends
    assert entry.status == "OK", entry.reason
    got = ProcessDraws.from_config(entry.config)
    assert len(got.pass_ms) == 2 and got.kept == 2 and len(got.failed) == 1
    assert got.failed[0].startswith("process 3:") and "1 failed to start" in got.words()


@pytest.mark.parametrize("bad", ["0", "21", "2.5", "x"])
def test_draws_outside_its_range_are_refused_in_one_line(bad, capsys):
    from compare.cli import main
    with pytest.raises(SystemExit):
        main(["run", "--net", "lenet", "--backends", "numpy", "--draws", bad])
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "--draws" in err[-1] and "from 1 to 20" in err[-1]


@pytest.mark.parametrize("name", backends.names())
def test_a_backend_can_be_drawn_again_exactly_where_it_runs_in_child_processes(name):
    from backends.isolated import IsolatedBackend
    cls = backends.backend_class(name)
    assert cls.redrawable == issubclass(cls, IsolatedBackend)
    if not cls.redrawable:
        with pytest.raises(NotImplementedError, match="runs in the runner's process"):
            cls.prepare_fresh(cls.__new__(cls), LENET, {}, 1)


def test_opencv_drawn_twice_keeps_one_child_and_closes_the_other():
    """OpenCV keeps a child per mode: a fresh draw is a child of its own, closed with its net."""
    from conftest import backend_or_skip
    backend = backend_or_skip("opencv")
    weights, x = init_weights(LENET, 0), make_input(LENET, 2, 0)
    kept = backend.prepare(LENET, weights, 2)
    fresh = backend.prepare_fresh(LENET, weights, 2)
    try:
        assert fresh._worker is not kept._worker and fresh._owns_worker and not kept._owns_worker
        assert (fresh.forward(x) == kept.forward(x)).all()
    finally:
        fresh.close()
        kept.close()   # its child is the backend's own (shared with other tests): it stays
    assert not fresh._worker._stop.alive   # the fresh draw's child stopped with its net


def test_with_several_draws_the_layer_wise_check_runs_in_a_drawn_process_not_kept(tmp_path, monkeypatch):
    result = _run(tmp_path, monkeypatch, ["drawn"], 3)
    entry, = result.backends
    assert entry.status == "OK" and entry.check.status == "PASS" and len(entry.check.layers) == len(LENET.layers)
    timed = {pid for _, pid in _passes(tmp_path)[-3:]}
    layers = [tuple(int(v) for v in line.split()) for line in (tmp_path / "draws.txt.layers").read_text().splitlines()]
    checked = {(index, pid) for index, pid, _ in layers}
    assert len(checked) == 1 and not {pid for _, pid in checked} & timed   # one other process, a drawn one
    assert {index for index, _ in checked} <= {0, 2} and len(list(tmp_path.glob("process*"))) == 3   # none more
    assert "another process of the same backend and mode" in entry.config["checked"]


def test_with_one_draw_the_check_runs_in_the_timed_process(tmp_path, monkeypatch):
    result = _run(tmp_path, monkeypatch, ["drawn"], 1)
    entry, = result.backends
    assert entry.check.status == "PASS" and "checked" not in entry.config
    layers = (tmp_path / "draws.txt.layers").read_text().splitlines()
    assert {int(line.split()[1]) for line in layers} == {pid for _, pid in _passes(tmp_path)}

"""The child process that keeps TensorFlow away from PoCL: calls, errors and
a dying child cross back as clear exceptions, and a prepared net behind the
proxy gives exactly what it gives in-process."""
import itertools
import os
import threading

import numpy as np
import pytest

from backends.isolated import IsolatedBackend, Worker, call_isolated
from backends.reference.numpy_backend import NumpyNet
from nets.errors import UserError
from nets.weights import init_weights, make_input
from nets import LENET
from run_checks import NumpyInAChild


class Unpicklable(Exception):
    def __init__(self):
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def raise_unpicklable():   # called in the child, which imports this module
    raise Unpicklable()


def test_a_call_runs_in_another_process():
    assert call_isolated("test", "os", "getpid") != os.getpid()


def test_our_errors_cross_as_themselves_and_others_as_runtime_errors():
    worker = Worker("test")
    try:
        with pytest.raises(UserError, match="unknown net 'nosuch'"):
            worker.call("nets", "get_net", "nosuch")
        with pytest.raises(ModuleNotFoundError, match="no_such_module"):
            worker.call("no_such_module", "f")
        with pytest.raises(RuntimeError, match="^Unpicklable: holds a lock$"):
            worker.call("test_isolated", "raise_unpicklable")
        with pytest.raises(RuntimeError, match="cannot be sent back"):
            worker.call("threading", "Lock")
        assert worker.call("math", "sqrt", 4.0) == 2.0   # still serving after errors
    finally:
        worker.close()


def test_a_child_that_dies_is_reported_with_its_exit_code():
    worker = Worker("doomed")
    with pytest.raises(RuntimeError, match=r"the doomed process died \(exit code 3\)"):
        worker.call("os", "_exit", 3)
    with pytest.raises(RuntimeError, match="already stopped|died"):
        worker.call("math", "sqrt", 4.0)
    worker.close()


def test_a_prepared_net_behind_the_proxy_matches_in_process():
    weights = init_weights(LENET, 1)
    x = make_input(LENET, 3, 1)
    backend = NumpyInAChild()
    prepared = backend.prepare(LENET, weights, 3)
    try:
        want = NumpyNet(LENET, weights, 3).forward(x)
        np.testing.assert_array_equal(prepared.forward(x), want)
        phases, y = prepared.timed_pass(x)
        assert set(phases) == {"upload", "compute", "download", "total"}
        assert prepared.config["plain_python_ms"] > 0   # the child's process timed (compare/noise.py)
        np.testing.assert_array_equal(y, want)
        timings = prepared.run_timed()
        assert [t.name for t in timings] == [layer.name for layer in LENET.layers]
        np.testing.assert_array_equal(prepared.fetch_output(), want)
        with pytest.raises(UserError, match="input has shape"):
            prepared.run_layer(0, x[:, :, :5])
    finally:
        prepared.close()
    with pytest.raises(UserError, match="closed"):
        prepared.forward(x)
    backend.close()


def test_an_exchange_cut_short_stops_the_child_rather_than_waiting_on_it_forever():
    # Ctrl-C between sending a request and reading its answer leaves the socket out of step:
    # a later request (a close in a finally) would wait on the child forever
    worker = Worker("test child")
    proc = worker._proc

    def interrupted():
        raise KeyboardInterrupt
    worker._conn.recv = interrupted
    with pytest.raises(KeyboardInterrupt):
        worker.call("os", "getpid")
    assert proc.wait(timeout=10) is not None
    with pytest.raises(RuntimeError, match="already stopped"):
        worker.call("os", "getpid")


def test_a_backend_in_a_child_gets_the_run_options_and_the_device_of_the_parent():
    import backends
    from backends import RunOptions
    from backends.opencl.runtime import device_index, get_runtime

    class Echo(IsolatedBackend):
        name = "echo"
        uses_opencl = True
        inner = "run_checks:EchoInProcess"
    runtime = get_runtime()
    options = RunOptions(clblast_params="database", timeout_s=5.0)
    backend = backends.create(Echo, runtime, options)
    try:
        seen = backend.info()
    finally:
        backend.close()
    assert seen == {"options": options, "device": device_index(runtime.device)}   # typed, across the pickle


def test_run_options_take_one_vocabulary_and_a_positive_timeout():
    from backends import RunOptions
    from backends.options import CLBLAST_PARAMS
    from backends.clblast.tuned import MODES
    assert set(CLBLAST_PARAMS) <= set(MODES)   # the option's words are the modes' words
    with pytest.raises(ValueError, match="clblast_params is one of tuned, database, not 'default'"):
        RunOptions(clblast_params="default")
    with pytest.raises(ValueError, match="timeout_s is a positive number"):
        RunOptions(timeout_s=0)


def _run_modal(tmp_path, monkeypatch, mode: str, repeats: int):
    """One run of the two-mode test double (run_checks.ModalBackend) on LeNet-5: its entry, and the
    (mode, pid) of every pass it ran, in order."""
    import backends
    from compare import runner
    from nets import LENET
    from nets.weights import init_weights, make_input
    log = tmp_path / "passes.txt"
    monkeypatch.setenv("COMPARE_TEST_PASS_LOG", str(log))
    monkeypatch.setitem(backends.REGISTRY, "modal", ("run_checks", "ModalBackend"))
    plan = runner.Plan(net=LENET, batch=2, weights=init_weights(LENET, 0), x=make_input(LENET, 2, 0),
                       backends=["modal"], mode=mode, repeats=repeats, warmup=1, peak_gflops=1.0)
    result, _ = runner.execute(plan)
    entry, = result.backends
    return entry, [tuple(line.split()) for line in log.read_text().splitlines()] if log.exists() else []


def test_modes_are_timed_in_turn_each_in_a_child_of_its_own(tmp_path, monkeypatch):
    # the modes of one backend, like its rivals under --interleave, so drift between them (and between
    # their processes) hits every mode alike; a mode that changes its process for good has one of its own
    entry, passes = _run_modal(tmp_path, monkeypatch, "performance", 3)
    assert entry.status == "OK", entry.reason
    assert [m.name for m in entry.modes] == ["first", "second"] and all(m.compute.n == 3 for m in entry.modes)
    pids = {mode: {pid for m, pid in passes if m == mode} for mode in ("first", "second")}
    assert len(pids["first"]) >= 1 and not pids["first"] & pids["second"]   # never the same child
    # after both were ready (a pass each): an untimed pass and a timed sample (passes back to back) of one,
    # then of the other, three times; then the faster's timed samples go on
    runs = [(mode, len(list(group))) for mode, group in itertools.groupby(m for m, _ in passes[2:])]
    assert [mode for mode, _ in runs[:6]] == ["first", "second"] * 3 and all(n >= 2 for _, n in runs[:6])


def test_the_chosen_mode_is_checked_and_timed_as_made_when_the_modes_were_measured(tmp_path, monkeypatch):
    # a prepare on PoCL can take a minute: each mode is made once, the fastest kept open for the check
    prepares = tmp_path / "prepares.txt"
    monkeypatch.setenv("COMPARE_TEST_PREPARE_LOG", str(prepares))
    entry, passes = _run_modal(tmp_path, monkeypatch, "both", 2)
    assert entry.status == "OK" and entry.check.status == "PASS", entry.reason
    assert sorted(prepares.read_text().split()) == ["first", "second"]
    chosen = {pid for mode, pid in passes if mode == entry.mode}
    assert len(chosen) == 1   # the child the mode was measured in is the one checked and timed


def test_a_mode_left_alone_is_not_timed_against_nothing(tmp_path, monkeypatch):
    # the other refused (a CLBlast tuned mode that would change no call): nothing to choose, so no mode passes
    monkeypatch.setenv("COMPARE_TEST_REFUSED_MODE", "first")
    entry, _ = _run_modal(tmp_path, monkeypatch, "performance", 3)
    assert entry.status == "OK" and entry.mode == "second", entry.reason
    first, second = entry.modes
    assert first.status == "UNSUPPORTED" and "refused for the test" in first.reason
    assert second.status == "OK" and second.compute is None
    assert entry.timing.end_to_end.compute.n == 3   # the backend itself is timed as ever


PLAIN = (str, int, float, bool, type(None))


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return type(value) in PLAIN   # exactly: a subclass (torch's TorchVersion) is unpickled through its library


def test_a_backends_info_is_plain_data_so_the_runner_imports_no_library_to_read_it(backend):
    """The runner reads each child's info; one value of a library's own type (torch's version string) had it
    import torch to unpickle it, seconds of the first VGG-16 answer (the H200 notes' step 48)."""
    info = backend.info()
    assert _plain(info), info


def test_weights_go_to_a_child_as_files_written_once_and_come_back_equal():
    """A request names the weights' folder (the first VGG-16 answer pickled half a gigabyte per child); every
    child reads the same arrays back, and the arrays here are read-only once written (a change would not
    reach the files)."""
    import pickle
    from backends.shipped import shipped
    rng = np.random.default_rng(3)
    weights = {"conv.weight": rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
               "conv.bias": rng.standard_normal(8), "steps": np.arange(5)}
    first, second = shipped(weights), shipped(weights)
    assert first.folder == second.folder and os.path.isdir(first.folder)
    sent = pickle.dumps(first)
    assert len(sent) < 1000
    back = pickle.loads(sent)
    assert type(back) is dict and list(back) == list(weights)
    for name, value in weights.items():
        assert back[name].dtype == value.dtype and np.array_equal(back[name], value)
    with pytest.raises(ValueError, match="read-only"):
        weights["conv.bias"][0] = 1.0
    assert shipped({"not an array": 1.0}) == {"not an array": 1.0}   # goes as it is


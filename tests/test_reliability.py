"""Outputs are checked, not trusted: buffers start as NaN, so an element a
kernel never writes fails the run before any timing; so does an all-zero output."""
import re

import numpy as np
import pytest

from backends import RunOptions
from backends.base import Backend
from backends.opencl.backend import OpenCLBackend
from backends.opencl.net import LayerOp, OpenCLNet
from backends.opencl.runtime import get_runtime
from compare import runner
from nets.weights import init_weights, make_input
from nets import Dense, Net

NET = Net("t", (1, 1, 8), (Dense("d", "none", out_features=8),))

# Copies x to y but leaves the last SKIP elements alone (a classic edge bug).
SOURCE = "__kernel void copy(__global const float *x, __global float *y) " \
         "{ int i = get_global_id(0); if (i < N - SKIP) y[i] = x[i] * SCALE; }"


class _Op(LayerOp):
    def __init__(self, net, skip, scale):
        super().__init__(NET.layers[0], 0)
        self.net, self.n = net, 8
        self.x = net.alloc(4 * self.n, "x")
        self.y = net.alloc(4 * self.n, "y")
        self.kernel = net.rt.program(SOURCE, {"N": self.n, "SKIP": skip, "SCALE": f"{scale}f"}).copy

    def enqueue(self, rec):
        rec.kernel("copy", self.kernel(self.net.rt.queue, (self.n,), None, self.x, self.y))

    def write_input(self, x):
        self.net.rt.write(self.x, x.reshape(-1))

    def read_output(self):
        return self.net.rt.read(self.y, (1, self.n))


class _Net(OpenCLNet):
    def __init__(self, skip, scale):
        super().__init__(get_runtime(), NET, 1)
        self.ops = [_Op(self, skip, scale)]
        self.finish_prepare()


def _backend(skip, scale):
    class Faulty(OpenCLBackend):
        name = "faulty"
        summary = "a test double"

        def prepare(self, net, weights, batch, mode=None):
            return _Net(skip, scale)
    return Faulty


@pytest.mark.parametrize("skip, scale, problem", [(1, 1.0, "produced NaN/Inf"), (0, 0.0, "produced an all-zero output")])
def test_unwritten_or_zero_outputs_fail_before_timing(monkeypatch, skip, scale, problem):
    monkeypatch.setattr(runner.backends, "backend_class", lambda name: _backend(skip, scale))
    monkeypatch.setattr(runner.backends, "unavailable_reason", lambda name: None)
    plan = runner.Plan(net=NET, batch=1, weights=init_weights(NET, 0), x=make_input(NET, 1, 0) + 1,
                       backends=["faulty"], mode="performance", repeats=1, warmup=1, peak_gflops=1.0)
    result, outputs = runner.execute(plan)
    entry, = result.backends
    assert entry.status == "FAILED"
    assert problem in entry.reason
    assert entry.timing is None and not outputs.backends


# -- every timed output is checked -----------------------------------------------------

class _Drifting:
    """A numpy net whose output changes after `good` passes: right when
    checked, otherwise in its timed passes."""

    def __init__(self, net, weights, batch, good, change, log):
        from backends.reference.numpy_backend import NumpyNet
        self.inner = NumpyNet(net, weights, batch)
        self.net, self.batch, self.config, self.memory_bytes = net, batch, {}, 0
        self.good, self.change, self.log, self.passes = good, change, log, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def fetch_output(self):
        self.passes += 1
        y = self.inner.fetch_output()
        return self.change(y) if self.passes > self.good else y

    def timed_pass(self, x):
        self.log.append(self.net.name)
        phases, _ = self.inner.timed_pass(x)
        return phases, self.fetch_output()

    def timed_passes(self, x, n):
        return [self.timed_pass(x) for _ in range(n)]


def _drifting_backend(good, change, deterministic=True, log=None):
    class Drifting(Backend):
        name = "drifting"
        summary = "a test double"

        def info(self):
            return {}

        def prepare(self, net, weights, batch, mode=None):
            return _Drifting(net, weights, batch, good, change, log if log is not None else [])
    Drifting.deterministic = deterministic
    return Drifting


def _plan(names, **kw):
    net = Net("t", (1, 1, 8), (Dense("d", "relu", out_features=8),))
    settings = {"mode": "performance", "repeats": 3, "warmup": 1, **kw}
    return runner.Plan(net=net, batch=2, weights=init_weights(net, 0), x=make_input(net, 2, 0),
                       backends=names, **settings)


# a sample is several passes back to back (compare/timing.py): the reason names the sample and its pass
NAMED = r"timed pass \d+ \(end to end, pass \d+ of \d+\) gave another output"


@pytest.mark.parametrize("deterministic, change, fails", [
    (True, lambda y: np.nextafter(y, np.inf, dtype=np.float32), NAMED),
    (False, lambda y: y * np.float32(1 + 1e-6), None),        # within the tolerance of a nondeterministic backend
    (False, lambda y: y * 0 + 1, NAMED),
])
def test_a_timed_output_that_differs_from_the_checked_one_fails_the_backend(monkeypatch, deterministic, change, fails):
    cls = _drifting_backend(good=1, change=change, deterministic=deterministic)   # timed pass 1 is right
    monkeypatch.setattr(runner.backends, "backend_class", lambda name: cls)
    monkeypatch.setattr(runner.backends, "unavailable_reason", lambda name: None)
    result, outputs = runner.execute(_plan(["drifting"]))
    entry, = result.backends
    if fails:
        assert entry.status == "FAILED" and re.search(fails, entry.reason) and entry.timing is None
        assert not outputs.backends
    else:
        assert entry.status == "OK" and entry.timing.end_to_end.compute.n == 3


def test_interleave_runs_the_timed_passes_round_robin(monkeypatch):
    log = []   # the name of the net of each end-to-end pass, in order

    def backend_named(name):
        class Tagged(Backend):
            summary = "a test double"

            def info(self):
                return {}

            def prepare(self, net, weights, batch, mode=None):
                return _Drifting(Net(name, net.input_shape, net.layers), weights, batch, 10 ** 6, None, log)
        return Tagged
    monkeypatch.setattr(runner.backends, "backend_class", backend_named)
    monkeypatch.setattr(runner.backends, "unavailable_reason", lambda name: None)
    # interleaved, each timed sample (a few passes back to back) follows an untimed pass of the same backend
    for interleave in (True, False):
        log.clear()
        result, _ = runner.execute(_plan(["a", "b"], interleave=interleave))
        assert [b.status for b in result.backends] == ["OK", "OK"] and result.settings.interleave == interleave
        k = [b.timing.passes_per_sample for b in result.backends]   # from each one's warm-up (tests/test_timing.py)
        want = (["a"] * (1 + k[0]) + ["b"] * (1 + k[1])) * 3 if interleave else ["a"] * 3 * k[0] + ["b"] * 3 * k[1]
        assert log == want


# -- every pass is bounded: --timeout-s --------------------------------------------------

def test_a_pass_over_the_timeout_fails_the_backend_and_the_others_run(monkeypatch):
    import time

    from backends.reference.numpy_backend import NumpyBackend, NumpyNet

    class Slow(NumpyNet):
        def run(self):
            time.sleep(0.4)
            super().run()

    class SlowBackend(NumpyBackend):
        def prepare(self, net, weights, batch, mode=None):
            return Slow(net, weights, batch)
    monkeypatch.setattr(runner.backends, "backend_class", lambda name: SlowBackend if name == "slow" else NumpyBackend)
    monkeypatch.setattr(runner.backends, "unavailable_reason", lambda name: None)
    result, _ = runner.execute(_plan(["slow", "numpy"], options=RunOptions(timeout_s=0.2), warmup=2))
    slow, fine = result.backends
    assert slow.status == "FAILED" and "the first pass took" in slow.reason and "--timeout-s 0.2" in slow.reason
    assert fine.status == "OK"


def test_a_backend_in_a_child_that_hangs_is_stopped_at_the_timeout(monkeypatch):
    import time

    from backends.isolated import IsolatedBackend
    from backends.reference.numpy_backend import NumpyBackend

    class Hangs(IsolatedBackend):
        name = "sleepy"
        summary = "a test double"
        inner = "run_checks:SleepyInProcess"
    monkeypatch.setattr(runner.backends, "backend_class", lambda name: Hangs if name == "sleepy" else NumpyBackend)
    monkeypatch.setattr(runner.backends, "unavailable_reason", lambda name: None)
    plan = _plan(["sleepy", "numpy"], options=RunOptions(timeout_s=2))
    t0 = time.monotonic()
    result, _ = runner.execute(plan)
    hung, fine = result.backends
    assert hung.status == "FAILED" and "gave no answer in --timeout-s 2 s" in hung.reason, hung.reason
    assert fine.status == "OK"
    # a hang guard, not a budget: the sleeper sleeps an hour, and a loaded machine's child start is its own
    assert time.monotonic() - t0 < 600


class _LayerwiseApart:
    """A prepared net whose layer-by-layer pass gives the checked output but for the last bits."""

    def __init__(self, checked, apart: bool):
        self.config = {"layers_compiled_apart": apart}
        self.checked = checked

    def load_input(self, x):
        pass

    def run_timed(self):
        return []

    def fetch_output(self):
        return np.nextafter(self.checked, np.inf, dtype=np.float32)


@pytest.mark.parametrize("apart", [False, True])
def test_a_layer_by_layer_pass_compiled_apart_is_held_to_the_tolerance_not_the_bits(apart):
    """TensorFlow's XLA compiles each layer alone for that pass (issue 45: vit-tiny's attention), so its
    last bits may differ from the whole pass's: it must still be within the tolerance, not bit-identical."""
    from compare.timing import TimedOutputDiffers, Trial
    checked = np.linspace(1, 2, 8, dtype=np.float32).reshape(2, 4)
    trial = Trial("xla", _LayerwiseApart(checked, apart), np.zeros((2, 1), np.float32), checked, deterministic=True)
    if apart:
        trial.layers(0)
    else:
        with pytest.raises(TimedOutputDiffers, match="bit-identical"):
            trial.layers(0)

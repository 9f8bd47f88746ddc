"""Outputs are checked, not trusted: buffers start as NaN, so an element a
kernel never writes fails the run before any timing; so does an all-zero output."""
import pytest

from backends.base import Backend
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
    class Faulty(Backend):
        name = "faulty"
        summary = "a test double"
        uses_opencl = True

        def info(self):
            return {}

        def prepare(self, net, weights, batch, mode=None):
            return _Net(skip, scale)
    return Faulty


@pytest.mark.parametrize("skip, scale, problem", [(1, 1.0, "produced NaN/Inf"), (0, 0.0, "produced an all-zero output")])
def test_unwritten_or_zero_outputs_fail_before_timing(monkeypatch, skip, scale, problem):
    monkeypatch.setattr(runner.backends, "backend_class", lambda name: _backend(skip, scale))
    monkeypatch.setattr(runner.backends, "unavailable_reason", lambda name: None)
    plan = runner.Plan(net=NET, batch=1, weights=init_weights(NET, 0), x=make_input(NET, 1, 0) + 1,
                       backends=["faulty"], mode="performance", repeats=1, warmup=1)
    entry, output = runner.run_backend("faulty", plan, None, lambda s: None, None)
    assert entry.status == "FAILED"
    assert problem in entry.reason
    assert entry.timing is None and output is None

"""A pass's branches on a second queue (backends/handwritten/branches.py): which ops may go there, and that
a pass enqueued with them computes what the oracle does, on every hand-written backend of layers."""
import numpy as np
import pytest

from backends.handwritten import branches
from backends.opencl import passlist
from backends.opencl.net import Recorder
from compare import oracle
from compare.checking import compare_arrays
from conftest import backend_or_skip
from nets import Add, Conv, Net
from nets.resnet18 import RESNET18
from nets.weights import init_weights

HAND_WRITTEN = ["baseline", "vectorised", "vectorised-tiled"]


def block(channels: int = 8, size: int = 9) -> Net:
    """A ResNet block that halves the map: its projection first, so that the add folds into `b` and the
    projection may run beside `a`."""
    return Net("block", (4, size, size), (
        Conv("stem", "relu", out_channels=channels, kernel=(3, 3), pad=(1, 1)),
        Conv("proj", "none", inputs=("stem",), out_channels=2 * channels, kernel=(1, 1), stride=(2, 2)),
        Conv("a", "relu", inputs=("stem",), out_channels=2 * channels, kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
        Conv("b", "none", out_channels=2 * channels, kernel=(3, 3), pad=(1, 1)),
        Add("add", "relu", inputs=("b", "proj")),
        Conv("head", "none", out_channels=3, kernel=(1, 1)),
    ))


def chain() -> Net:
    return Net("chain", (4, 8, 8), tuple(Conv(f"c{i}", "relu", out_channels=8, kernel=(3, 3), pad=(1, 1))
                                         for i in range(4)))


def planned(prepared):
    with prepared.rt.unprofiled():
        return branches.plan(prepared, Recorder(prepared.rt.queue, enabled=False))


@pytest.mark.parametrize("name", HAND_WRITTEN)
@pytest.mark.parametrize("size, batch", [(9, 1), (12, 2)])
def test_a_branch_on_the_second_queue_computes_what_the_oracle_does(name, size, batch):
    backend = backend_or_skip(name)
    net = block(size=size)
    weights = init_weights(net, size)
    prepared = backend.prepare(net, weights, batch)
    try:
        found = planned(prepared)
        assert len(found) == 1   # the projection, beside `a`, joined by `b`
        branch = found[0]
        assert branch.first <= branch.last < branch.join
        prepared.flat.branches = found
        for seed in range(3):   # fresh inputs each pass: a join that did not wait would read the last pass's
            x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
            assert compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1]).passed
        assert "queue" in prepared.config["pass"]   # what prepare measured and kept is said
    finally:
        prepared.close()


@pytest.mark.parametrize("name", HAND_WRITTEN)
def test_a_chain_has_no_branch(name):
    net = chain()
    prepared = backend_or_skip(name).prepare(net, init_weights(net, 1), 1)
    try:
        assert planned(prepared) == ()
        assert prepared.flat.branches == ()
    finally:
        prepared.close()


def test_resnet18_puts_each_projection_before_the_block_it_shortcuts():
    names = [layer.name for layer in RESNET18.layers]
    for stage in (3, 4, 5):
        proj, a, b = (names.index(f"conv{stage}_1{s}") for s in ("_proj", "a", "b"))
        assert proj < a < b


class _Queue:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def flush(self):
        self.log.append(("flush", self.name))


def test_a_branch_waits_for_the_launch_before_it_and_its_join_waits_for_it(monkeypatch):
    """The enqueues themselves, on fake queues: which queue each launch goes to and what it waits for."""
    log = []
    main, side = _Queue("main", log), _Queue("side", log)
    rt = type("Rt", (), {"queue": main, "side_queue": lambda self: side, "kernel_launches": 0})()

    def enqueue(queue, kernel, global_size, local_size, wait_for=None):
        event = f"e{kernel.n}"
        log.append((queue.name, event, tuple(wait_for or ())))
        return event

    monkeypatch.setattr(passlist.cl, "enqueue_nd_range_kernel", enqueue)
    flat = passlist.LaunchList(rt)
    for n in range(6):
        flat.add(type("K", (), {"function_name": f"k{n}", "n": n})(), (1,), None)
    flat.branches = (passlist.Branch(first=1, last=2, join=4),)
    flat.enqueue(Recorder(None, enabled=False))
    assert log == [("main", "e0", ()), ("flush", "main"),
                   ("side", "e1", ("e0",)), ("side", "e2", ()), ("flush", "side"),
                   ("main", "e3", ()), ("main", "e4", ("e2",)), ("main", "e5", ())]
    assert rt.kernel_launches == 6

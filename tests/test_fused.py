"""`fused`'s own parts: the local memory a net needs worked out by hand, the
refusal where it does not fit, and what its timings say they are.  The
layer and net suites check it against the oracle with every other backend."""
import numpy as np
import pytest

from backends.handwritten.fused_source import local_floats, net_source
from backends.opencl.runtime import get_runtime
from compare import oracle
from compare.checking import compare_arrays
from nets.errors import Unsupported
from conftest import backend_or_skip
from nets import LENET, VGG16, Conv, Dense, MaxPool, Net
from nets.weights import init_weights, make_input


def test_lenet_needs_two_local_buffers_of_one_image():
    # layer i writes buffer (i + 1) % 2: c1 4704 and c3 1600 and f5 120 floats in one,
    # s2 1176 and s4 400 in the other; the input comes from global memory, f6 goes there
    assert local_floats(LENET) == (1176, 4704)
    n0, n1 = local_floats(VGG16)
    assert n1 == 64 * 224 * 224   # conv1_1's output alone: 12.25 MiB
    source, names = net_source(LENET)
    assert source.count("barrier(CLK_LOCAL_MEM_FENCE)") == len(LENET.layers) - 1
    assert names == ["c1.weight", "c1.bias", "s2.coeff", "s2.bias", "c3.weight", "c3.bias", "s4.coeff", "s4.bias", "f5.weight",
                     "f5.bias", "f6.weight", "f6.bias"]


def test_a_device_with_too_little_local_memory_refuses_it(monkeypatch):
    backend = backend_or_skip("fused")
    monkeypatch.setitem(get_runtime().info, "local_mem_bytes", 16 * 1024)
    with pytest.raises(Unsupported, match=r"one image of lenet needs 23\.0 KiB of local memory for its "
                                          r"activations, more than the 16\.0 KiB of"):
        backend.prepare(LENET, init_weights(LENET, 0), 2)


def test_one_kernel_end_to_end_and_each_layer_alone_per_layer():
    backend = backend_or_skip("fused")
    net = Net("t", (2, 9, 7), (Conv("a", "sigmoid", out_channels=3, kernel=(3, 3), stride=(2, 1), pad=(1, 2)),
                               MaxPool("b", kernel=(3, 3), stride=(1, 2)), Dense("c", "relu", out_features=5)))
    weights = init_weights(net, 4)
    x = make_input(net, 3, 4)
    prepared = backend.prepare(net, weights, 3)
    try:
        assert "one fused kernel" in prepared.config["per_layer"]
        assert compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1]).passed
        prepared.load_input(x)
        timings = prepared.run_timed()
        assert [s.name for t in timings for s in t.steps] == ["conv+sigmoid alone", "maxpool alone",
                                                              "dense+relu alone"]
        assert np.array_equal(prepared.fetch_output(), prepared.forward(x))   # both paths: the same numbers
    finally:
        prepared.close()

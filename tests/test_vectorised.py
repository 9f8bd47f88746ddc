"""`vectorised`'s own parts: the NHWC filter and dense-weight reorderings on
hand-made cases, the work-group rule under fake device limits, and on the
device the edges: channels not a multiple of 4 (their padding must stay
zero), global sizes that are not a multiple of the work-group, stride 2,
batch 1 and > 1, the padding hand-off, and the Mali/GPU code paths (dot per
float4, the local-memory GEMV) forced on whatever device runs the tests.
The generic suites cover the common cases and both nets."""
import numpy as np
import pytest

import backends
from compare import oracle
from compare.checking import compare_arrays
from nets.weights import init_weights
from nets import Conv, Dense, MaxPool, Net, Subsample

from backends.handwritten import vectorised
from backends.handwritten.layout import Layout
from backends.handwritten.workgroups import CONV_SHAPES, DENSE_SHAPES, GEMV_SHAPES, choose_gemv
from backends.opencl.workgroups import Limits, choose_local, device_class, fits, rounded_global, waste
from backends.handwritten.vectorised import dense_rows, nhwc_filters
from conftest import backend_or_skip



def fresh(net, batch, seed):
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    return weights, x, oracle.forward(net, weights, x)


# -- reorderings, worked by hand ------------------------------------------------

def test_nhwc_filters_by_hand():
    # K=2 filters, C=3 channels, 1x2 window; value = 100k + 10c + x
    w = np.array([[[[100 * k + 10 * c + fx for fx in range(2)]] for c in range(3)] for k in range(2)], np.float32)
    out = nhwc_filters(w, c_stored=4, k_stored=4)
    assert out.shape == (4, 1, 2, 4)
    np.testing.assert_array_equal(out[1, 0, 1], [101, 111, 121, 0])   # filter 1, tap x=1: channels in a row
    np.testing.assert_array_equal(out[0, 0, 0], [0, 10, 20, 0])
    assert not out[2:].any()                                             # padded filters are zero


def test_dense_rows_follow_the_nhwc_buffer():
    # input (C=2, H=1, W=2), canonical flatten index = c*2 + w; one output whose weight is that index + 1
    w = (np.arange(4, dtype=np.float32) + 1).reshape(4, 1)
    rows = dense_rows(w, c=2, h=1, w=2, c_stored=4)
    # buffer order (h, w, c4): (w0: c0 c1 pad pad) (w1: c0 c1 pad pad)
    np.testing.assert_array_equal(rows, [[1, 3, 0, 0, 2, 4, 0, 0]])
    # and the dot with a packed input is the canonical x @ w
    x = np.array([5, 6, 7, 8], np.float32)            # c0w0 c0w1 c1w0 c1w1
    packed = Layout(1, 2, 1, 2, order="nhwc", c_stored=4).pack(x.reshape(1, 2, 1, 2)).ravel()
    assert rows @ packed == pytest.approx(x @ w[:, 0])


# -- the work-group rule ---------------------------------------------------------

FAKE_LIMITS = [Limits(1, (1, 1, 1)), Limits(8, (1, 2, 4)), Limits(16, (16, 16, 16)),
               Limits(64, (64, 64, 1)), Limits(256, (256, 256, 256)), Limits(1024, (1024, 1024, 64))]
GRIDS = [(224, 224, 16), (14, 14, 128), (2800, 28, 2), (1, 1, 1), (7, 3, 5)]


@pytest.mark.parametrize("limits", FAKE_LIMITS, ids=str)
@pytest.mark.parametrize("device", sorted(CONV_SHAPES))
def test_work_group_never_exceeds_the_limits(device, limits):
    for grid in GRIDS:
        local = choose_local(grid, CONV_SHAPES[device], limits)
        assert fits(local, limits), (grid, local)
        glob = rounded_global(grid, local)
        assert all(g % l == 0 and g >= n for g, l, n in zip(glob, local, grid))
    dense = choose_local((1000, 100), DENSE_SHAPES[device], Limits(limits.max_group, limits.max_items[:2]))
    assert np.prod(dense) <= limits.max_group
    lanes, rows = choose_gemv(device, Limits(limits.max_group, limits.max_items[:2]))
    assert lanes * rows <= limits.max_group and lanes & (lanes - 1) == 0


def test_work_group_rule_picks_per_layer():
    roomy = Limits(1024, (1024, 1024, 1024))
    assert choose_local((224, 224, 16), CONV_SHAPES["cpu"], roomy) == (1, 4, 4)    # the study's shape
    assert choose_local((14, 14, 128), CONV_SHAPES["cpu"], roomy) == (2, 2, 4)     # 14 columns: not 16
    assert waste((2800, 28, 2), choose_local((2800, 28, 2), CONV_SHAPES["cpu"], roomy)) == 0   # LeNet C1
    assert np.prod(choose_local((224, 224, 16), CONV_SHAPES["gpu"], roomy)) >= 64
    # a device that takes only 8 work-items per group still gets a seed shape shrunk to fit
    assert choose_local((224, 224, 16), CONV_SHAPES["mali"], Limits(8, (8, 8, 8))) == (1, 2, 4)
    assert choose_gemv("gpu", Limits(32, (32, 32))) == (32, 1)
    assert GEMV_SHAPES["cpu"][0] == 1


def test_device_class():
    assert device_class({"vendor": "ARM", "name": "Mali-T628", "type": "GPU"}) == "mali"
    assert device_class({"vendor": "NVIDIA Corporation", "name": "NVIDIA H100", "type": "GPU"}) == "gpu"
    assert device_class({"vendor": "AuthenticAMD", "name": "pthread-haswell", "type": "CPU"}) == "cpu"


# -- on the device --------------------------------------------------------------

@pytest.fixture
def vectorised_here():
    backend_or_skip("vectorised")   # a failure under `make test` when it cannot run


needs_device = pytest.mark.usefixtures("vectorised_here")

EDGES = {
    # channels 3 -> 4 in, 6 -> 8 out (sigmoid: the tail must be masked to 0, not 0.5); 9 columns: not a multiple of 4
    "conv-c3-k6-sigmoid": (Net("t", (3, 7, 9), (Conv("a", "sigmoid", out_channels=6, kernel=(3, 3), pad=(1, 1)),
                                                 Conv("b", "none", out_channels=5, kernel=(3, 3)))), 2),
    "conv-stride2-odd": (Net("t", (5, 13, 11), (Conv("a", "relu", out_channels=7, kernel=(3, 3), stride=(2, 2),
                                                     pad=(1, 1)),)), 1),
    "conv-c1-5x5-batch": (Net("t", (1, 12, 12), (Conv("a", "sigmoid", out_channels=6, kernel=(5, 5)),
                                                 Subsample("b", "sigmoid"))), 5),
    "pool-odd-then-pad": (Net("t", (6, 9, 11), (MaxPool("a", "sigmoid"), Conv("b", "relu", out_channels=9,
                                                                              kernel=(3, 3), pad=(2, 1)))), 3),
    "subsample-c7": (Net("t", (7, 8, 6), (Subsample("a", "sigmoid", kernel=(3, 2), stride=(2, 2)),)), 2),
    "conv-pool-conv-dense": (Net("t", (5, 10, 10), (
        Conv("a", "relu", out_channels=6, kernel=(3, 3)),
        MaxPool("b"),
        Conv("c", "relu", out_channels=10, kernel=(3, 3), pad=(1, 1)),
        Dense("d", "sigmoid", out_features=9),
        Dense("e", "none", out_features=5))), 1),
    "dense-batched-odd": (Net("t", (3, 2, 3), (Dense("a", "relu", out_features=13), Dense("b", out_features=6))), 7),
}


def check_net(backend, net, batch, seed, **forms):
    """The net's layers and pass against the oracle, its buffers' padding zero; `forms`: the net's own
    arguments (cpu_conv="never"...), which the backend's prepare does not take."""
    weights, x, ref = fresh(net, batch, seed)
    prepared = (vectorised.VectorisedNet(backend.runtime, net, weights, batch, **forms) if forms
                else backend.prepare(net, weights, batch))
    try:
        for i, got in enumerate(prepared.layer_outputs(x)):
            result = compare_arrays(got, ref[i])
            assert result.passed, f"{net.layers[i].name}: {result}"
        assert compare_arrays(prepared.forward(x), ref[-1]).passed
        for i, (lay, buf) in enumerate(zip(prepared.layouts, prepared.activations)):
            raw = prepared.rt.read(buf, lay.stored_shape)
            inside = np.zeros(lay.stored_shape, bool)
            inside[:, lay.pad_h:lay.pad_h + lay.h, lay.pad_w:lay.pad_w + lay.w, :lay.c] = True
            assert np.all(raw[~inside] == 0), f"padding of buffer {i} is not zero"
        return prepared.config
    finally:
        prepared.close()


@needs_device
@pytest.mark.parametrize("case", list(EDGES))
def test_edges_match_the_oracle(case):
    net, batch = EDGES[case]
    check_net(backends.get("vectorised"), net, batch, 20 + list(EDGES).index(case))


@needs_device
def test_edge_work_items_are_guarded():
    """9 columns and 2 channel groups under (1, 4, 4)-like shapes: the NDRange
    is rounded up, so some work-items fall outside the output.  The float4 conv's: on a CPU a vector
    kernel (cpu_conv.py) measured faster would take its place."""
    net, batch = EDGES["conv-c3-k6-sigmoid"]
    config = check_net(backends.get("vectorised"), net, batch, 1, cpu_conv="never")
    layer = config["layers"]["a"]
    assert any(g > n for g, n in zip(layer["global"], (batch * 7, 9, 2)))
    assert all(g % l == 0 for g, l in zip(layer["global"], layer["local"]))


@needs_device
@pytest.mark.parametrize("device", ["gpu", "mali"])
def test_other_device_paths(device, monkeypatch):
    """The GPU shapes and 64-lane GEMV, and Mali's dot-per-float4, on this device."""
    monkeypatch.setattr(vectorised, "device_class", lambda info: device)
    backend = backends.get("vectorised")
    # and a GPU's preferred vector width, so the CPU's vector kernels (cpu_conv.py) are not offered
    monkeypatch.setitem(backend.runtime.info, "preferred_vector_width_float", 1)
    net, _ = EDGES["conv-pool-conv-dense"]
    config = check_net(backend, net, 1, 7)
    assert config["device_class"] == device
    assert config["layers"]["d"]["local"] == list(choose_gemv(device, Limits(10**6, (10**6, 10**6))))
    check_net(backend, *EDGES["conv-c3-k6-sigmoid"], 8)

"""`baseline`'s own parts: the padded layouts, the padding hand-off between
layers (each buffer padded for its consumer, border zeroed once and never
written), kernels built once at prepare, and edge shapes against the
float64 oracle.  The generic suites cover the common cases and both nets."""
import numpy as np
import pytest

from compare import oracle
from compare.checking import compare_arrays
from nets.weights import init_weights
from nets import Conv, Dense, MaxPool, Net, Subsample

from backends.handwritten.layout import Layout, consumer_pad, net_layouts
from conftest import backend_or_skip

@pytest.fixture
def backend():
    return backend_or_skip("baseline")   # a failure under `make test` when it cannot run


def fresh(net, batch, seed):
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    return weights, x, oracle.forward(net, weights, x)


def border_mask(layout: Layout) -> np.ndarray:
    """True on the stored elements that are padding (border or extra channels)."""
    mask = np.ones(layout.stored_shape, bool)
    ph, pw = layout.pad_h, layout.pad_w
    if layout.order == "nchw":
        mask[:, :layout.c, ph:ph + layout.h, pw:pw + layout.w] = False
    else:
        mask[:, ph:ph + layout.h, pw:pw + layout.w, :layout.c] = False
    return mask


# -- layouts (host side) -------------------------------------------------------

@pytest.mark.parametrize("order,c_stored", [("nchw", 3), ("nhwc", 3), ("nhwc", 4)])
def test_layout_pack_unpack_round_trip(order, c_stored):
    lay = Layout(2, 3, 5, 4, pad_h=2, pad_w=1, order=order, c_stored=c_stored)
    x = np.random.default_rng(0).standard_normal(lay.canonical_shape).astype(np.float32)
    stored = lay.pack(x)
    assert stored.shape == lay.stored_shape
    assert np.all(stored[border_mask(lay)] == 0)
    np.testing.assert_array_equal(lay.unpack(stored), x)


def test_layout_template_is_zero_border_nan_interior():
    lay = Layout(1, 2, 3, 3, pad_h=1, pad_w=2)
    t = lay.template()
    assert np.all(t[border_mask(lay)] == 0)
    assert np.all(np.isnan(t[~border_mask(lay)]))


def test_each_buffer_is_padded_for_its_consumer():
    net = Net("t", (2, 9, 9), (
        Conv("a", "relu", out_channels=3, kernel=(3, 3), pad=(2, 1)),
        MaxPool("b"),
        Conv("c", "relu", out_channels=4, kernel=(3, 3), pad=(1, 1)),
        Dense("d", out_features=2)))
    lays = net_layouts(net, 1, "nchw")
    assert [(lay.pad_h, lay.pad_w) for lay in lays] == [(2, 1), (0, 0), (1, 1), (0, 0), (0, 0)]
    assert lays[-1].flat and lays[-1].canonical_shape == (1, 2)
    assert consumer_pad(net.layers[0]) == (2, 1) and consumer_pad(None) == (0, 0)


# -- on the device -------------------------------------------------------------

HANDOFF = Net("handoff", (3, 11, 9), (
    Conv("conv", "relu", out_channels=5, kernel=(3, 3), pad=(1, 1)),       # writes into pool's unpadded input
    MaxPool("pool"),                                                          # writes into a buffer padded for c2
    Conv("c2", "sigmoid", out_channels=4, kernel=(3, 3), stride=(2, 2), pad=(2, 1)),  # asymmetric pad, stride 2
    Conv("c3", "none", out_channels=3, kernel=(1, 1), pad=(1, 1)),           # pad into a 1x1 conv
    Subsample("sub", "relu"),
    Dense("fc", "sigmoid", out_features=5)))


@pytest.mark.parametrize("batch", [1, 3])
def test_padding_hand_off_keeps_border_zero(backend, batch):
    weights, x, ref = fresh(HANDOFF, batch, 11)
    prepared = backend.prepare(HANDOFF, weights, batch)
    try:
        rt = prepared.rt
        for lay, buf in zip(prepared.layouts, prepared.activations):   # before any run
            raw = rt.read(buf, lay.stored_shape)
            assert np.all(raw[border_mask(lay)] == 0)
        y = prepared.forward(x)
        assert compare_arrays(y, ref[-1]).passed
        for i, (lay, buf) in enumerate(zip(prepared.layouts[1:], prepared.activations[1:])):
            raw = rt.read(buf, lay.stored_shape)
            assert np.all(raw[border_mask(lay)] == 0), f"a kernel wrote the border of {HANDOFF.layers[i].name}'s output"
            assert compare_arrays(lay.unpack(raw), ref[i]).passed, HANDOFF.layers[i].name
    finally:
        prepared.close()


EDGES = {
    "odd-stride2": (Net("t", (5, 13, 7), (Conv("a", "relu", out_channels=7, kernel=(3, 3), stride=(2, 2)),)), 3),
    "stride2-rect": (Net("t", (2, 10, 15), (Conv("a", "sigmoid", out_channels=3, kernel=(2, 4), stride=(2, 3),
                                                   pad=(1, 2)),)), 2),
    "subsample-3x3-stride3": (Net("t", (3, 10, 11), (Subsample("a", "sigmoid", kernel=(3, 3), stride=(3, 3)),)), 2),
    "maxpool-stride1": (Net("t", (2, 5, 6), (MaxPool("a", "relu", kernel=(2, 2), stride=(1, 1)),)), 1),
    "dense-chain-odd": (Net("t", (1, 1, 13), (Dense("a", "relu", out_features=7), Dense("b", out_features=3))), 4),
}


@pytest.mark.parametrize("case", list(EDGES))
def test_edge_shapes_match_the_oracle(backend, case):
    net, batch = EDGES[case]
    weights, x, ref = fresh(net, batch, 3 + list(EDGES).index(case))
    prepared = backend.prepare(net, weights, batch)
    try:
        for i, got in enumerate(prepared.layer_outputs(x)):
            result = compare_arrays(got, ref[i])
            assert result.passed, f"{case} {net.layers[i].name}: {result}"
    finally:
        prepared.close()


def test_kernels_are_built_once_at_prepare(backend, monkeypatch):
    net = HANDOFF
    weights, x, ref = fresh(net, 2, 5)
    prepared = backend.prepare(net, weights, 2)
    try:
        def no_build(*args, **kwargs):
            raise AssertionError("a kernel was built during a forward pass")
        monkeypatch.setattr(prepared.rt, "kernel", no_build)
        monkeypatch.setattr(prepared.rt, "program", no_build)
        for _ in range(2):
            assert compare_arrays(prepared.forward(x), ref[-1]).passed
        assert set(prepared.config["layers"]) == {layer.name for layer in net.layers}
        assert prepared.config["layers"]["conv"]["global"] == [11, 9, 5]   # (rows, columns, channels)
    finally:
        prepared.close()

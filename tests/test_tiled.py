"""`vectorised-tiled`'s own parts: the filter reordering by hand, the tile
and split rule on VGG-16's and LeNet-5's layers and under small device
limits, and on the device the GPU plans (split sums, every tile) forced on
whatever device runs the tests, at shapes that are not the nets': partial
tiles at every edge, channels not a multiple of 4, stride 2, a sigmoid
whose padding channels must stay zero.  The generic suites cover the
common cases and both nets."""
import numpy as np
import pytest

import backends
from backends.handwritten import tiled
from backends.handwritten.layout import round_up
from backends.handwritten.tiled_plan import MIN_SLICES, TILES, Tile, plan_conv, slice_length
from compare import oracle
from compare.checking import compare_arrays
from nets.weights import init_weights
from nets import LENET, VGG16, Conv, MaxPool, Net

from conftest import backend_or_skip

H200 = dict(compute_units=132, gpu=True, max_group=1024, max_items=(1024, 1024, 64))


def test_tiled_filters_by_hand():
    # K=2 filters, C=3 channels, 1x2 window; value = 100k + 10c + x
    w = np.array([[[[100 * k + 10 * c + fx for fx in range(2)]] for c in range(3)] for k in range(2)], np.float32)
    out = tiled.tiled_filters(w, c_stored=4, k_stored=8)
    assert out.shape == (1, 2, 4, 8)                                  # (FH, FW, C, K): row r = (fy, fx, c)
    np.testing.assert_array_equal(out[0, 1, 2], [21, 121, 0, 0, 0, 0, 0, 0])
    assert not out[:, :, 3].any()                                     # padded input channel


def layer_plan(net, name, batch, **device):
    i = net.layer_index(name)
    layer, (c, _, _), (k, h, w) = net.layers[i], net.in_shape(i), net.out_shape(i)
    return plan_conv(batch * h * w, round_up(k, 4), round_up(c, 4), layer.kernel[0] * layer.kernel[1], **device)


@pytest.mark.parametrize("name, tile, split", [
    ("conv1_2", "128x64", 1),       # plenty of pixels: no split
    ("conv2_2", "128x128", 4),
    ("conv4_2", "128x128", 4),      # 28 tiles on 132 compute units: split in 4
    ("conv5_1", "128x128", 16),     # 8 tiles: split in 16
])
def test_vgg16_plans_on_an_h200(name, tile, split):
    plan = layer_plan(VGG16, name, 1, **H200)
    assert (f"{plan.tile.tm}x{plan.tile.tn}", plan.ksplit) == (tile, split)


def test_lenet_plans_fit_its_narrow_channels():
    c1 = layer_plan(LENET, "c1", 100, **H200)      # 6 channels -> 8
    assert (c1.tile.tn, c1.kp, c1.ksplit) == (8, 8, 1)
    c3 = layer_plan(LENET, "c3", 100, **H200)      # 16 channels: no 8x8 block fits
    assert c3.tile.tn <= 16 and c3.kp == 16


def test_a_cpu_takes_the_largest_tile_and_never_splits():
    for name in ("conv1_1", "conv3_2", "conv5_3"):
        plan = layer_plan(VGG16, name, 1, compute_units=2, gpu=False, max_group=4096, max_items=(4096,) * 3)
        assert plan.ksplit == 1 and plan.tile == TILES[0 if name != "conv1_1" else 1]


@pytest.mark.parametrize("max_group, max_items", [(64, (64, 64, 64)), (128, (16, 16, 16)), (256, (256, 256, 1))])
def test_plans_respect_the_work_group_limits(max_group, max_items):
    for net, batch in ((VGG16, 1), (LENET, 100)):
        for layer in net.layers:
            if layer.kind == "conv":
                plan = layer_plan(net, layer.name, batch, compute_units=80, gpu=True, max_group=max_group,
                                  max_items=max_items)
                tx, ty = plan.tile.local
                assert tx * ty <= max_group and tx <= max_items[0] and ty <= max_items[1]


def test_splits_keep_enough_of_the_sum_and_cover_it():
    for net, batch in ((VGG16, 1), (LENET, 100)):
        for i, layer in enumerate(net.layers):
            if layer.kind != "conv":
                continue
            plan = layer_plan(net, layer.name, batch, **H200)
            c_in = round_up(net.in_shape(i)[0], 4)
            slices = layer.kernel[0] * layer.kernel[1] * c_in // plan.tk
            assert plan.ksplit == 1 or slices // plan.ksplit >= MIN_SLICES
            assert plan.kp % plan.tile.tn == 0 and plan.kp >= round_up(net.out_shape(i)[0], 4)
            gx, gy, gz = plan.global_size
            assert (gx // plan.tile.local[0]) * (gy // plan.tile.local[1]) * gz == plan.groups


def test_slice_length_divides_the_channels():
    assert [slice_length(c) for c in (4, 8, 12, 16, 20, 64)] == [4, 8, 4, 16, 4, 16]
    with pytest.raises(ValueError):
        slice_length(6)


# -- on the device: every tile and split, forced ------------------------------------

EDGE_NET = Net("edges", (5, 13, 11), (
    Conv("a", "sigmoid", out_channels=7, kernel=(3, 3), pad=(1, 1)),    # 7 channels: a zero tail under sigmoid
    Conv("b", "relu", out_channels=18, kernel=(3, 2), stride=(2, 1)),   # stride 2, rectangular window
    MaxPool("c"),
    Conv("d", "none", out_channels=9, kernel=(1, 1)),
))


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised-tiled").runtime


@pytest.mark.parametrize("tile", TILES, ids=str)
@pytest.mark.parametrize("split", [1, 2, 3, 16])
def test_every_tile_and_split_matches_the_oracle(runtime, tile, split):
    batch = 2
    weights = init_weights(EDGE_NET, 7)
    x = np.random.default_rng(7).standard_normal((batch,) + EDGE_NET.input_shape).astype(np.float32)
    ref = oracle.forward(EDGE_NET, weights, x)
    prepared = tiled.TiledNet(runtime, EDGE_NET, weights, batch, tiles=(tile,), ksplit=split,
                               winograd="never", pointwise="never")
    try:
        result = compare_arrays(prepared.forward(x), ref[-1])
        assert result.passed, result
        assert all(prepared.config["layers"][n]["split"] == split for n in ("a", "b", "d"))
        # each layer alone, on the oracle's input: the padding it writes for the next layer included
        for i in range(len(EDGE_NET.layers)):
            inp = x if i == 0 else ref[i - 1].astype(np.float32)
            assert compare_arrays(prepared.run_layer(i, inp), ref[i]).passed, EDGE_NET.layers[i].name
    finally:
        prepared.close()


def test_gpu_plans_on_this_device_name_their_steps(runtime, monkeypatch):
    # plan as for a GPU with many compute units, so that small layers split their sums
    monkeypatch.setattr(tiled, "plan_conv", lambda p, c, ci, t, _cu, _gpu, *rest: plan_conv(p, c, ci, t, 10_000,
                                                                                            True, *rest))
    # and the split measured faster than one kernel (split_choice.py), the tiled conv rather than Winograd
    from backends.handwritten import split_choice
    monkeypatch.setattr(split_choice, "fastest_ms", lambda rt, forms: {f: float(f == "one kernel") for f in forms})
    net = Net("t", (12, 9, 9), (Conv("a", "relu", out_channels=20, kernel=(3, 3), pad=(1, 1)),))
    weights = init_weights(net, 3)
    x = np.random.default_rng(3).standard_normal((1,) + net.input_shape).astype(np.float32)
    prepared = tiled.TiledNet(runtime, net, weights, 1, winograd="never", pointwise="never", cpu_conv="never")
    try:
        assert prepared.config["layers"]["a"]["split"] > 1
        assert compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1]).passed
        prepared.load_input(x)
        steps = [s.name for s in prepared.run_timed()[0].steps]
        # the one layer is first and last: the conversions of the net's input and output are its steps too
        assert steps == ["input NCHW->NHWC+border", "tiled conv",
                         f"add {prepared.config['layers']['a']['split']} parts+relu", "output NHWC->NCHW"]
    finally:
        prepared.close()


@pytest.mark.parametrize("bad", [(64, 8, 4, 6), (64, 8, 6, 4), (60, 8, 8, 4), (64, 4, 4, 8)])
def test_a_tile_the_kernel_cannot_run_is_refused(bad):
    with pytest.raises(ValueError, match="tile"):
        Tile(*bad)


def test_a_device_whose_local_memory_holds_no_tile_makes_it_unsupported(monkeypatch):
    # seen as UNSUPPORTED with the reason in the results, never a crash, and the others still run
    from backends.opencl.runtime import get_runtime
    from compare import runner
    backend_or_skip("vectorised-tiled")
    rt = get_runtime()
    monkeypatch.setitem(rt.info, "local_mem_bytes", 1024)
    net = Net("t", (4, 6, 6), (Conv("a", "relu", out_channels=4, kernel=(3, 3)),))
    weights = init_weights(net, 0)
    x = np.random.default_rng(0).standard_normal((1,) + net.input_shape).astype(np.float32)
    plan = runner.Plan(net=net, batch=1, weights=weights, x=x, backends=["vectorised-tiled", "vectorised"],
                       mode="correctness", repeats=1, warmup=1)
    result, outputs = runner.execute(plan)
    tiled, vectorised = result.backends
    assert tiled.status == "UNSUPPORTED" and "1024 bytes of local memory" in tiled.reason
    assert vectorised.status == "OK" and vectorised.check.status == "PASS"
    assert runner.exit_code(result) == 0 and list(outputs.backends) == ["vectorised"]


def test_the_tile_search_keeps_only_candidates_its_checker_passes():
    from backends.tuning.budget import Budget
    from backends.tuning.tiles import search as tiles_search
    from nets.errors import UserError
    rt = backend_or_skip("vectorised-tiled").runtime
    (key, one, batch), _ = tiles_search.conv_layers(LENET, 2)
    seen = []

    def rejecting(net, weights, x):
        seen.append(net.name)
        return lambda out: False

    with pytest.raises(UserError, match="no tile of vectorised-tiled ran lenet:c1"):
        tiles_search.search(rt, one, batch, Budget(0.5), rejecting)
    assert seen == ["lenet:c1"]   # the checker is made once per layer, not per candidate

    def against_the_oracle(net, weights, x):
        ref = oracle.forward(net, weights, x)[-1]
        return lambda out: compare_arrays(out, ref).passed

    got = tiles_search.search(rt, one, batch, Budget(0.5), against_the_oracle)
    assert got["layer"] == "lenet:c1" and got["timed"] >= 1 and got["ms"] > 0

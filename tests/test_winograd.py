"""Winograd F(2x2,3x3) and F(4x4,3x3) (backends/handwritten/winograd*.py,
kernels/winograd.cl; the GEMM forms' own tests: test_winograd_gemm.py): the matrices against direct correlation, the filter
transform's layout, the work-group rule under device limits, and on the
device every form and plan (a CPU's, and a GPU's two: every position in one
work-item or split over several, the sum in chunks) at random shapes the
nets do not have, against the float64 oracle: channels not a multiple of 4,
sizes the tile does not divide, asymmetric padding, batches, every
activation, a residual add in the epilogue; then the measured choice and
its record, and a form refused for its error."""
import numpy as np
import pytest

from backends.handwritten import vectorised, winograd
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from backends.handwritten.winograd_math import MATRICES, conv3x3, filter_transform
from backends.handwritten.winograd_plan import local_bytes, plan_winograd
from compare import oracle
from compare.checking import check_prepared
from nets import ZOO_ACTIVATIONS, Add, Conv, GlobalAvgPool, Net
from nets.weights import init_weights

from conftest import assert_borders_zero, backend_or_skip


def correlate(x, w):
    k, _, fh, fw = w.shape
    oh, ow = x.shape[1] - fh + 1, x.shape[2] - fw + 1
    out = np.zeros((k, oh, ow))
    for i in range(fh):
        for j in range(fw):
            out += np.einsum("kc,chw->khw", w[:, :, i, j], x[:, i:i + oh, j:j + ow])
    return out


@pytest.mark.parametrize("m", sorted(MATRICES))
def test_the_matrices_compute_the_correlation(m):
    rng = np.random.default_rng(m)
    for c, h, w, k in ((1, 3, 3, 1), (3, 7, 10, 2), (5, 12, 5, 4)):   # sizes m divides and does not
        x, wt = rng.standard_normal((c, h, w)), rng.standard_normal((k, c, 3, 3))
        np.testing.assert_allclose(conv3x3(x, wt, m), correlate(x, wt), rtol=1e-10, atol=1e-10)


def test_the_filter_transform_is_g_g_gt_per_position_zero_where_padded():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    u = filter_transform(w, 2, c_stored=4, k_stored=8)
    _, g, _ = MATRICES[2]
    assert u.shape == (16, 4, 8) and u.dtype == np.float32
    np.testing.assert_allclose(u[:, 2, 4].reshape(4, 4), g @ w[4, 2].astype(np.float64) @ g.T, rtol=1e-6)
    assert not u[:, 3].any() and not u[:, :, 5:].any()


LIMITS = [(1024, (1024, 1024, 64), 48 * 1024, 132), (256, (256, 256, 256), 32 * 1024, 16),
          (64, (64, 64, 64), 16 * 1024, 4), (4096, (4096, 4096, 4096), 1 << 20, 2)]


@pytest.mark.parametrize("max_group, items, local, units", LIMITS)
@pytest.mark.parametrize("gpu", [True, False])
def test_plans_fit_the_device_and_cover_the_layer(gpu, max_group, items, local, units):
    for m in (2, 4):
        for batch, h, w, c, k in ((1, 56, 56, 64, 64), (1, 7, 7, 512, 512), (3, 13, 11, 8, 12), (1, 224, 224, 64, 64)):
            plans = plan_winograd(m, batch, h, w, c, k, gpu, units, max_group, items, local)
            assert 1 <= len(plans) <= (2 if gpu else 1)
            for p in plans:
                assert p.threads <= max_group and all(a <= b for a, b in zip(p.local, items))
                assert p.local_bytes <= local and p.local_bytes == local_bytes(m, p.tc, p.tt, p.kg * p.kw * (p.pg > 1))
                assert c % p.tc == 0 and p.kp % (p.kg * p.kw) == 0 and p.kp >= k and (m + 2) ** 2 % p.pg == 0
                assert all(g % l == 0 for g, l in zip(p.global_size, p.local))
                assert p.global_size[1] // p.tg * p.tt >= p.tiles        # every tile has a work-group
            if not gpu and (m + 2) ** 2 * c * plans[0].tt * 4 <= local // 2:
                assert plans[0].tc == c                                   # a CPU sums in one chunk where it fits


def fresh(net, batch, seed):
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    return weights, x, oracle.forward(net, weights, x)


def random_net(seed: int) -> tuple[Net, int]:
    """Two 3x3 stride-1 convs at a random shape, the second's output added to the first's (its epilogue)."""
    rng = np.random.default_rng(seed)
    c, k = int(rng.integers(1, 24)), int(rng.integers(1, 24))
    h, w = int(rng.integers(3, 15)), int(rng.integers(3, 15))
    act = [str(a) for a in rng.choice(ZOO_ACTIVATIONS, 3)]
    pad = tuple(int(p) for p in rng.integers(0, 3, 4))
    # b keeps a's size: padding 1 on every side
    net = Net(f"random{seed}", (c, h, w), (
        Conv("a", act[0], out_channels=k, kernel=(3, 3), pad=pad),
        Conv("b", "none", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        Add("add", act[1], inputs=("b", "a")),
        GlobalAvgPool("gap", act[2])))
    return net, int(rng.integers(1, 4))


def check(prepared, net, weights, x, ref):
    result = check_prepared(prepared, x, ref)
    assert result.status == "PASS", (result.end_to_end, [(r.name, r.rel_l2) for r in result.layers if not r.passed])
    assert_borders_zero(prepared)


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised").runtime


@pytest.fixture
def as_gpu(monkeypatch, runtime):
    """Plans as on a GPU of 16 compute units, whatever the device."""
    monkeypatch.setattr(vectorised, "device_class", lambda info: "gpu")
    monkeypatch.setitem(runtime.info, "compute_units", 16)


@pytest.mark.parametrize("form, seed", [("F2", 0), ("F4", 1)])
def test_each_form_matches_the_oracle_at_random_shapes(runtime, form, seed):
    net, batch = random_net(seed)
    weights, x, ref = fresh(net, batch, seed)
    prepared = (VectorisedNet if seed % 2 else TiledNet)(runtime, net, weights, batch, winograd=form)
    try:
        check(prepared, net, weights, x, ref)
        assert prepared.config["layers"]["a"]["kernel"].startswith(f"winograd F({form[1]}x{form[1]},3x3)")
        assert prepared.config["residual_adds_fused"] == {"add": "into b's epilogue (adds a)"}
    finally:
        prepared.close()


@pytest.mark.parametrize("form", ["F2", "F4:1"])
def test_the_gpu_plans_match_the_oracle(runtime, as_gpu, form):
    """Both GPU plans, the sum in chunks (24 input channels: chunks of 8) and, with ":1", each
    tile's positions over several work-items meeting in local memory."""
    net = Net("t", (24, 9, 7), (
        Conv("a", "relu6", out_channels=13, kernel=(3, 3), pad=(1, 2, 0, 1)),
        Conv("b", "none", out_channels=13, kernel=(3, 3), pad=(1, 1)),
        Add("add", "sigmoid", inputs=("b", "a")),
        GlobalAvgPool("gap")))
    weights, x, ref = fresh(net, 2, 5)
    prepared = VectorisedNet(runtime, net, weights, 2, winograd=form, pointwise="never")
    try:
        check(prepared, net, weights, x, ref)
        plan = prepared.config["layers"]["a"]["winograd"]
        assert plan["chunk"] == 8 and (plan["positions_split"] > 1) == form.endswith(":1")
    finally:
        prepared.close()


def test_measured_choice_records_every_form(runtime):
    net, batch = random_net(1)   # the shapes of a test above: some kernels already built
    weights, x, ref = fresh(net, batch, 7)
    prepared = VectorisedNet(runtime, net, weights, batch, cpu_conv="never")   # Winograd against direct alone
    try:
        check(prepared, net, weights, x, ref)
        for name in ("a", "b"):
            record = prepared.config["winograd"][name]
            gemm = {f for f in record["ms"] if " GEMM " in f}   # winograd_gemm.py's: one a tile size on a CPU
            assert set(record["ms"]) - gemm == {"direct", "F(2x2,3x3)", "F(4x4,3x3)"}
            assert sorted(f[:10] for f in gemm) == ["F(2x2,3x3)", "F(4x4,3x3)"]
            # the least time, kept rounded to 0.1 us: two forms that round alike tie, either may be chosen
            assert record["ms"][record["chosen"]] == min(record["ms"].values()), record
            assert all(0 < e < winograd.MAX_REL_L2 for e in record["rel_l2_against_direct"].values())
            step = prepared.config["layers"][name]["kernel"]
            assert step.startswith("winograd " + record["chosen"]) or record["chosen"] == "direct"
    finally:
        prepared.close()


def test_a_form_above_the_error_bound_is_refused(runtime, monkeypatch):
    monkeypatch.setattr(winograd, "MAX_REL_L2", 0.0)
    net = Net("t", (6, 8, 8), (Conv("a", "relu", out_channels=5, kernel=(3, 3), pad=(1, 1)),))
    weights, x, ref = fresh(net, 1, 3)
    prepared = VectorisedNet(runtime, net, weights, 1)
    try:
        record = prepared.config["winograd"]["a"]
        assert record["chosen"] == "direct" and set(record["ms"]) == {"direct"}
        refused = set(record["refused"])
        assert {"F(2x2,3x3)", "F(4x4,3x3)"} <= refused and "above 0e+00" in record["refused"]["F(4x4,3x3)"]
        assert sorted(f[:10] for f in refused - {"F(2x2,3x3)", "F(4x4,3x3)"}) == ["F(2x2,3x3)", "F(4x4,3x3)"]
        check(prepared, net, weights, x, ref)
    finally:
        prepared.close()


def test_only_3x3_stride_1_dense_convs_are_candidates(runtime):
    net = Net("t", (4, 9, 9), (
        Conv("s2", "relu", out_channels=4, kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
        Conv("dw", "relu", out_channels=4, kernel=(3, 3), pad=(1, 1), groups=4),
        Conv("k5", "relu", out_channels=4, kernel=(5, 5), pad=(2, 2))))
    prepared = VectorisedNet(runtime, net, init_weights(net, 0), 1, winograd="F2")
    try:
        assert "winograd" not in prepared.config
    finally:
        prepared.close()


def test_an_unknown_mode_is_refused(runtime):
    net = Net("t", (1, 4, 4), (Conv("a", out_channels=1, kernel=(3, 3)),))
    with pytest.raises(ValueError, match="winograd 'F3'"):
        VectorisedNet(runtime, net, init_weights(net, 0), 1, winograd="F3")


def test_a_3x3_writing_into_a_concatenation_or_dilated_keeps_the_direct_kernel(runtime):
    """Forced Winograd still leaves a conv whose output is a slice of a concatenation's buffer (its
    kernels take no channel pitch) and a dilated one (not F(m, 3x3)) to the direct kernel."""
    from nets import Concat
    net = Net("wino-concat", (5, 8, 9), (
        Conv("a", "relu", out_channels=8, kernel=(3, 3), pad=(1, 1)),   # a multiple of 4: written in place
        Conv("b", "none", out_channels=3, kernel=(3, 3), pad=(2, 2), dilation=(2, 2), inputs=("input",)),
        Concat("join", inputs=("a", "b")),
        Conv("c", "none", out_channels=4, kernel=(3, 3), pad=(1, 1)),
        GlobalAvgPool("gap")))
    weights, x, ref = fresh(net, 2, 11)
    prepared = VectorisedNet(runtime, net, weights, 2, winograd="F2", pointwise="never")
    try:
        check(prepared, net, weights, x, ref)
        kernels = {name: prepared.config["layers"][name]["kernel"] for name in ("a", "b", "c")}
        assert kernels["c"].startswith("winograd") and not kernels["a"].startswith("winograd"), kernels
        assert not kernels["b"].startswith("winograd"), kernels
    finally:
        prepared.close()

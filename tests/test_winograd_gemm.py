"""Winograd whose tile products are one batched GEMM (backends/handwritten/
winograd_gemm.py, kernels/winograd_transforms.cl, kernels/winograd_gemm.cl):
the GEMM's tile rule under device limits, then on the device F(2x2) and
F(4x4), as planned here and as on a GPU (every GEMM tile candidate, the
sum in several local-memory slices), at fresh random shapes against the
float64 oracle: odd map sizes, channels not a multiple of 4 nor of the
GEMM's tile, bias, relu, a residual add in the output transform; a layer
whose scratch would pass the device's largest buffer keeps its direct
kernel and says why; the shared scratch is freed where no layer keeps it."""
from dataclasses import replace

import numpy as np
import pytest

from backends.handwritten import vectorised, winograd_gemm
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from backends.handwritten.winograd_gemm import (CPU_TILES, GPU_CANDIDATES, GPU_TILES, MIN_PART_DEPTH, SPLIT_BELOW,
                                                SPLIT_PARTS, SPLIT_TILES, plan_gemm, waste)
from backends.handwritten.tiled_plan import local_bytes
from compare import oracle
from compare.checking import check_prepared
from nets import Add, Conv, GlobalAvgPool, Net
from nets.weights import init_weights

from conftest import assert_borders_zero, backend_or_skip

LIMITS = [(1024, (1024, 1024, 64), 48 * 1024, 132), (256, (256, 256, 256), 32 * 1024, 16),
          (64, (64, 64, 64), 16 * 1024, 4), (32, (32, 32, 32), 8 * 1024, 2)]
SHAPES = ((1, 224, 224, 4, 64), (1, 14, 14, 512, 512), (3, 13, 11, 8, 12), (1, 1, 1, 4, 4), (2, 7, 9, 20, 36))


@pytest.mark.parametrize("max_group, items, local, units", LIMITS)
@pytest.mark.parametrize("gpu", [True, False])
def test_gemm_tiles_fit_the_device_and_cover_the_layer(gpu, max_group, items, local, units):
    for m in (2, 4):
        for batch, h, w, c, k in SHAPES:
            found = plan_gemm(m, batch, h, w, c, k, gpu, units, max_group, items, local)
            plans = [p for p in found if p.parts == 1]
            assert 1 <= len(plans) <= (GPU_CANDIDATES if gpu else 1) and len(set(found)) == len(found)
            rows = batch * -(-h // m) * -(-w // m)
            # on a GPU the first SPLIT_TILES plans again, the sum cut in parts, where they give few work-groups
            split = [p for p in found if p.parts > 1]
            assert split == [replace(p, parts=n) for p in plans[:SPLIT_TILES] for n in SPLIT_PARTS
                             if gpu and p.groups < SPLIT_BELOW * units and c % (n * p.tk) == 0
                             and c // n >= MIN_PART_DEPTH]
            for p in split:
                assert p.global_size[2] == p.e * p.parts and p.groups == replace(p, parts=1).groups * p.parts
            for p in plans:
                t = p.tile
                assert t in (GPU_TILES if gpu else CPU_TILES) and p.staged == gpu
                assert t.threads <= max_group and t.local[0] <= items[0] and t.local[1] <= items[1]
                assert not gpu or local_bytes(t, p.tk) <= local
                assert c % p.tk == 0 and (p.rows, p.cols, p.depth, p.e) == (rows, k, c, (m + 2) ** 2)
                gx, gy, ge = p.global_size
                assert gx % t.local[0] == 0 and gy % t.local[1] == 0 and ge == p.e
                assert gx // t.local[0] * t.tn >= k and gy // t.local[1] * t.tm >= rows   # every output has a group
            # the least padded tile where none pads at most MAX_WASTE
            usable = [p.tile for p in plans]
            if all(waste(t, rows, k) > winograd_gemm.MAX_WASTE for t in usable):
                assert len(plans) == 1


def test_a_gpu_prefers_tiles_that_give_every_compute_unit_work():
    # VGG-16's conv5 as F(4x4) at batch 1: 16 tiles, 512 channels; an H100's 132 compute units
    plans = plan_gemm(4, 1, 14, 14, 512, 512, True, 132, 1024, (1024, 1024, 64), 48 * 1024)
    assert all(p.groups >= 132 and waste(p.tile, 16, 512) <= winograd_gemm.MAX_WASTE for p in plans)
    # 256-384 work-groups, under SPLIT_BELOW a compute unit: the first two again with the sum in 2 and 4 parts
    assert [(p.tile.tm, p.parts) for p in plans] == [(16, 1), (8, 1), (4, 1), (16, 2), (16, 4), (8, 2), (8, 4)]


def fresh(net, batch, seed):
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    return weights, x, oracle.forward(net, weights, x)


def residual_net(seed: int) -> tuple[Net, int]:
    """Two 3x3 stride-1 pad-1 convs at a random odd shape, relu then none, the second's output added
    to the first's in its epilogue; channels not a multiple of 4."""
    rng = np.random.default_rng(seed)
    c, k = int(rng.integers(1, 12)) * 2 + 1, int(rng.integers(1, 12)) * 2 + 1
    h, w = int(rng.integers(2, 8)) * 2 + 1, int(rng.integers(2, 8)) * 2 + 1
    net = Net(f"gemm{seed}", (c, h, w), (
        Conv("a", "relu", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "none", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        Add("add", "relu", inputs=("b", "a")),
        GlobalAvgPool("gap")))
    return net, int(rng.integers(1, 3))


def check(prepared, x, ref):
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


def assert_gemm(prepared, m: int):
    for name in ("a", "b"):
        kernel = prepared.config["layers"][name]["kernel"]
        assert kernel.startswith(f"winograd F({m}x{m},3x3) GEMM"), kernel
        assert prepared.config["winograd"][name]["chosen"] in kernel
    assert prepared.config["residual_adds_fused"] == {"add": "into b's epilogue (adds a)"}
    steps = [s.name for s in prepared.run_timed()[1].steps]
    assert steps == [f"winograd F({m}x{m},3x3) input transform", f"winograd F({m}x{m},3x3) batched GEMM",
                     f"winograd F({m}x{m},3x3) output transform+add+relu"], steps


@pytest.mark.parametrize("form, seed", [("F2-gemm", 0), ("F4-gemm", 1)])
def test_each_gemm_form_matches_the_oracle_at_random_shapes(runtime, form, seed):
    net, batch = residual_net(seed)
    weights, x, ref = fresh(net, batch, seed)
    prepared = (VectorisedNet if seed % 2 else TiledNet)(runtime, net, weights, batch, winograd=form)
    try:
        check(prepared, x, ref)
        assert_gemm(prepared, int(form[1]))
    finally:
        prepared.close()


@pytest.mark.parametrize("form, tile", [("F2-gemm:1", "32x64 (4x8)"), ("F2-gemm:2", "64x32 (8x4)"),
                                        ("F4-gemm", "8x64 (4x4)")])
def test_the_gpu_gemm_tiles_match_the_oracle(runtime, as_gpu, form, tile):
    """The staged GEMM (local memory; 20 and 64 input channels: five slices of 4 and four of 16,
    each next one fetched during the last one's products) with several of the GPU's tiles, the layer's 60 (F(2x2)) or 18
    (F(4x4)) tiles and 61 channels not multiples of them."""
    net = Net("t", (20, 11, 9), (
        Conv("a", "relu", out_channels=61, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "none", out_channels=61, kernel=(3, 3), pad=(1, 1)),
        Add("add", "relu", inputs=("b", "a")),
        GlobalAvgPool("gap")))
    weights, x, ref = fresh(net, 2, 5)
    prepared = VectorisedNet(runtime, net, weights, 2, winograd=form, pointwise="never")
    try:
        check(prepared, x, ref)
        assert_gemm(prepared, int(form[1]))
        assert prepared.config["winograd"]["a"]["chosen"] == f"F({form[1]}x{form[1]},3x3) GEMM {tile}"
        assert [prepared.config["layers"][n]["winograd"]["slice"] for n in "ab"] == [4, 16]   # 5 and 4 slices
    finally:
        prepared.close()


def test_a_layer_whose_scratch_passes_the_largest_buffer_keeps_its_direct_kernel(runtime, monkeypatch):
    monkeypatch.setattr(winograd_gemm, "fits_scratch", lambda net, i, m: False)
    net = Net("t", (5, 7, 7), (Conv("a", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)),))
    weights, x, ref = fresh(net, 1, 2)
    prepared = VectorisedNet(runtime, net, weights, 1, winograd="F2-gemm")
    try:
        record = prepared.config["winograd"]["a"]
        assert record["chosen"] == "direct" and "MAX_MEM_ALLOC_SIZE" in record["refused"]["F(2x2,3x3) GEMM"]
        assert prepared._winograd_scratch is None
        check(prepared, x, ref)
    finally:
        prepared.close()


def test_the_scratch_is_kept_only_where_a_layer_runs_a_gemm_form(runtime):
    net, batch = residual_net(1)   # the shapes of a test above: its kernels already built
    weights, x, ref = fresh(net, batch, 3)
    for mode in ("F4-gemm", "F4"):
        prepared = VectorisedNet(runtime, net, weights, batch, winograd=mode)
        try:
            held = getattr(prepared, "_winograd_scratch", None)
            assert (held is not None) == (mode == "F4-gemm")
            if held is not None:   # sized for the net's largest such layer and tile
                sizes = [winograd_gemm.scratch_bytes(prepared, i, m) for i in (0, 1) for m in (2, 4)]
                assert (held[0].size, held[1].size) == (max(v for v, _ in sizes), max(mm for _, mm in sizes))
            check(prepared, x, ref)
        finally:
            prepared.close()


@pytest.mark.parametrize("form, vw, seed", [("F2-gemm:1", 16, 0), ("F4-gemm:1", 16, 1), ("F4-gemm:1", 8, 2)])
def test_the_cpu_vector_gemm_matches_the_oracle(runtime, monkeypatch, form, vw, seed):
    """A CPU's vector form of the GEMM (kernels/winograd_gemm.cl wg_gemm_vec: VW-wide vectors, its filters
    reordered in blocks of columns), on random inputs of a net whose tiles are no multiple of its rows a
    work-item (the last block reads the last row again) and whose output channels are two vectors' worth
    or more, with the residual add in the output transform."""
    monkeypatch.setattr(vectorised, "device_class", lambda info: "cpu")   # planned as on a CPU, whatever the device
    monkeypatch.setitem(runtime.info, "preferred_vector_width_float", vw)
    rng = np.random.default_rng(seed)
    c_out = 2 * vw * int(rng.integers(1, 3))
    net = Net("v", (int(rng.integers(3, 13)), int(rng.integers(5, 12)), int(rng.integers(5, 12))), (
        Conv("a", "relu", out_channels=c_out, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "none", out_channels=c_out, kernel=(3, 3), pad=(1, 1)),
        Add("add", "relu", inputs=("b", "a")),
        GlobalAvgPool("gap")))
    weights, x, ref = fresh(net, 2, seed)
    prepared = VectorisedNet(runtime, net, weights, 2, winograd=form, pointwise="never")
    try:
        check(prepared, x, ref)
        assert_gemm(prepared, int(form[1]))
        assert prepared.config["winograd"]["a"]["chosen"] == f"F({form[1]}x{form[1]},3x3) GEMM {vw}x2 4 rows"
    finally:
        prepared.close()

"""A 2x2 max pool done by the Winograd GEMM output transform of the conv before it (backends/handwritten/
pool_fold.py, kernels/winograd_transforms.cl POOL), and that GEMM's sum cut in parts (winograd_gemm.py
SPLIT_PARTS), on each hand-written backend that has them, at fresh random shapes against the float64 oracle:
odd conv outputs (the pool drops the last row or column), channels not a multiple of 4, the conv's
activation not monotonic (hardswish: it must come before the max), the pool's output keeping the next conv's
zero border; measured, turned off, and pools it cannot do."""
import numpy as np
import pytest

from backends.handwritten import vectorised, winograd_gemm
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from compare import oracle
from compare.checking import check_prepared
from nets import Add, Conv, GlobalAvgPool, MaxPool, Net
from nets.weights import init_weights

from conftest import assert_borders_zero, backend_or_skip

NETS = {"vectorised": VectorisedNet, "vectorised-tiled": TiledNet}


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised").runtime


def fresh(net, batch, seed):
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    return weights, x, oracle.forward(net, weights, x)


def check(prepared, x, ref):
    result = check_prepared(prepared, x, ref)
    assert result.status == "PASS", (result.end_to_end, [(r.name, r.rel_l2) for r in result.layers if not r.passed])
    assert_borders_zero(prepared)


def all_steps(prepared) -> list[str]:
    """The names of the kernels a timed pass ran, in order."""
    return [s.name for layer in prepared.run_timed() for s in layer.steps]


def pooled_net(seed: int) -> tuple[Net, int]:
    """conv (relu) -> conv (hardswish) -> 2x2 pool -> conv (relu) -> 2x2 pool (relu) -> global average pool,
    at a random odd shape with channels not a multiple of 4."""
    rng = np.random.default_rng(seed)
    c, k = int(rng.integers(1, 6)) * 2 + 1, int(rng.integers(1, 6)) * 2 + 1
    h, w = int(rng.integers(4, 9)) * 2 + 1, int(rng.integers(4, 9)) * 2 + 1
    return Net(f"pooled{seed}", (c, h, w), (
        Conv("first", "relu", out_channels=c, kernel=(3, 3), pad=(1, 1)),
        Conv("a", "hardswish", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        MaxPool("pa"),
        Conv("b", "relu", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        MaxPool("pb", "relu"),
        GlobalAvgPool("gap"))), int(rng.integers(1, 3))


@pytest.mark.parametrize("backend", sorted(NETS))
@pytest.mark.parametrize("form, seed", [("F2-gemm", 0), ("F4-gemm", 1), ("F4-gemm", 2)])
def test_a_pool_folded_into_the_output_transform_matches_the_oracle(runtime, backend, form, seed):
    net, batch = pooled_net(seed)
    weights, x, ref = fresh(net, batch, seed)
    prepared = NETS[backend](runtime, net, weights, batch, winograd=form, fold_pools="always")
    try:
        check(prepared, x, ref)
        assert set(prepared.config["pools_fused"]) == {"pa", "pb"}, prepared.config.get("pools_not_fused")
        steps = all_steps(prepared)
        m = form[1]
        assert steps.count(f"winograd F({m}x{m},3x3) output transform+hardswish+maxpool") == 1, steps
        assert steps.count(f"winograd F({m}x{m},3x3) output transform+relu+maxpool+relu") == 1, steps
        assert all(s.startswith("winograd") for s in steps if "maxpool" in s), steps
        assert all(r["rel_l2_against_own_kernels"] <= 1e-6 for r in prepared.config["pool_folds"].values())
    finally:
        prepared.close()


@pytest.mark.parametrize("backend", sorted(NETS))
def test_a_fold_is_measured_and_runs_in_the_convs_place(runtime, backend):
    """Measured against the two kernels, the faster kept; folded, the conv's op runs both (a pass's times
    put them in its row, the pool's empty, as for a residual add's fold); a pool at the net's edges (its
    op converts the output) is not a candidate."""
    net = Net("measured", (6, 13, 10), (
        Conv("a", "relu", out_channels=7, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "relu", out_channels=7, kernel=(3, 3), pad=(1, 1)),
        MaxPool("p"),
        Conv("c", "relu", out_channels=5, kernel=(3, 3), pad=(1, 1)),
        MaxPool("last")))
    weights, x, ref = fresh(net, 2, 7)
    prepared = NETS[backend](runtime, net, weights, 2, winograd="F4-gemm")
    try:
        check(prepared, x, ref)
        record = prepared.config["pool_folds"]["p"]
        assert set(record["ms"]) == {"folded", "own kernels"}
        fused = "p" in prepared.config["pools_fused"]
        assert fused == (record["ms"]["folded"] <= record["ms"]["own kernels"]), record
        assert "last" not in prepared.config["pool_folds"] and "last" not in prepared.config["pools_fused"]
        if fused:
            timed = {t.name: [s.name for s in t.steps] for t in prepared.run_timed()}
            assert timed["p"] == [] and timed["b"][-1] == "winograd F(4x4,3x3) output transform+relu+maxpool"
    finally:
        prepared.close()


@pytest.mark.parametrize("backend", sorted(NETS))
def test_a_pool_is_kept_where_turned_off_or_where_it_cannot_be_folded(runtime, backend):
    net = Net("kept", (5, 12, 12), (
        Conv("a", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)),
        MaxPool("p3", kernel=(3, 3), stride=(2, 2)),   # windows span tiles: not foldable
        Conv("b", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)),
        MaxPool("p2"),
        GlobalAvgPool("gap")))
    weights, x, ref = fresh(net, 1, 3)
    for mode in ("never", "always"):
        prepared = NETS[backend](runtime, net, weights, 1, winograd="F2-gemm", fold_pools=mode)
        try:
            check(prepared, x, ref)
            assert set(prepared.config["pools_fused"]) == (set() if mode == "never" else {"p2"})
            assert "p3" not in prepared.config.get("pools_not_fused", {})   # never a candidate
            steps = all_steps(prepared)
            pools = [s for s in steps if "maxpool" in s and not s.startswith("winograd")]   # a pool's own kernel
            assert len(pools) == (2 if mode == "never" else 1), steps
        finally:
            prepared.close()


def test_a_split_sum_matches_the_oracle(runtime, monkeypatch):
    """The GEMM's sum over 256 input channels cut in 2 and 4 parts (planned as on a GPU of 64 compute units,
    whose few work-groups call for it), a residual add and a pool in the output transforms that add the
    parts up."""
    monkeypatch.setattr(vectorised, "device_class", lambda info: "gpu")
    monkeypatch.setitem(runtime.info, "compute_units", 64)
    net = Net("split", (256, 9, 7), (
        Conv("a", "relu", out_channels=256, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "none", out_channels=256, kernel=(3, 3), pad=(1, 1)),
        Add("add", "relu", inputs=("b", "a")),
        Conv("c", "relu", out_channels=13, kernel=(3, 3), pad=(1, 1)),
        MaxPool("p"),
        GlobalAvgPool("gap")))
    weights, x, ref = fresh(net, 1, 11)
    probe = VectorisedNet(runtime, net, weights, 1, winograd="F2-gemm", fold_pools="never")
    try:
        found = winograd_gemm.plans(probe, 0, 2)
    finally:
        probe.close()
    split = [i for i, p in enumerate(found) if p.parts > 1]
    assert sorted({found[i].parts for i in split}) == [2, 4]
    for i in split[:2]:
        prepared = VectorisedNet(runtime, net, weights, 1, winograd=f"F2-gemm:{i}", fold_pools="always")
        try:
            check(prepared, x, ref)
            for name in "ab":
                assert prepared.config["winograd"][name]["chosen"] == found[i].form
                assert prepared.config["layers"][name]["winograd"]["sum_parts"] == found[i].parts
            assert prepared.config["residual_adds_fused"] == {"add": "into b's epilogue (adds a)"}
            assert set(prepared.config["pools_fused"]) == {"p"}
        finally:
            prepared.close()

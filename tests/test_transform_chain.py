"""A Winograd GEMM output transform that does the next conv's input transform too (backends/handwritten/
transform_chain.py, kernels/winograd_chain.cl), on each hand-written backend that has it, at fresh random
shapes against the float64 oracle: images of several blocks and of a part block, channels not a multiple of 4,
a conv both fed and feeding, a receiver whose output transform does a pool or an add, the GEMM's sum in parts;
which pairs are candidates; a wrong chained kernel refused; on a CPU not offered unless forced."""
import numpy as np
import pytest

from backends.handwritten import transform_chain
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from backends.opencl.workgroups import limits
from nets import Add, Conv, GlobalAvgPool, MaxPool, Net

from conftest import backend_or_skip
from test_pool_fold import all_steps, check, fresh

NETS = {"vectorised": VectorisedNet, "vectorised-tiled": TiledNet}
NEXT = "+next input transform"


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised").runtime


def chain_net(seed: int) -> tuple[Net, int]:
    """first -> a -> b -> c -> 2x2 pool -> gap, 3x3 convs padded by one, at a random shape with channels not a
    multiple of 4: a feeds b, b feeds c (b both), c's output transform does the pool."""
    rng = np.random.default_rng(seed)
    c, k = int(rng.integers(1, 4)) * 2 + 1, int(rng.integers(2, 5)) * 2 + 1
    h, w = int(rng.integers(5, 16)) * 2 + 1, int(rng.integers(5, 16)) * 2
    return Net(f"chain{seed}", (c, h, w), (
        Conv("first", "relu", out_channels=c, kernel=(3, 3), pad=(1, 1)),
        Conv("a", "relu", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "hardswish", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        Conv("c", "relu", out_channels=k, kernel=(3, 3), pad=(1, 1)),
        MaxPool("p"),
        GlobalAvgPool("gap"))), int(rng.integers(1, 3))


@pytest.mark.parametrize("backend", sorted(NETS))
@pytest.mark.parametrize("form, seed, blocks", [("F4-gemm", 0, None), ("F4-gemm", 1, ((2, 1),)),
                                                ("F2-gemm", 2, ((3, 2), (3, 1))), ("F4-gemm", 3, ((1, 1),))])
def test_chained_transforms_match_the_oracle(runtime, backend, form, seed, blocks, monkeypatch):
    """`blocks`: the block shapes offered (None: the module's); small ones put the ring inside the image."""
    if blocks:
        monkeypatch.setattr(transform_chain, "BLOCKS", blocks)
    net, batch = chain_net(seed)
    weights, x, ref = fresh(net, batch, seed)
    prepared = NETS[backend](runtime, net, weights, batch, winograd=form, chain_transforms="always",
                             fold_pools="always")
    try:
        check(prepared, x, ref)
        assert set(prepared.config["transforms_chained"]) == {"a", "b"}, prepared.config.get("transforms_not_chained")
        assert all(v <= transform_chain.MAX_REL_L2 for r in prepared.config["transform_chains"].values()
                   for v in r["rel_l2_against_own_kernels"].values())
        timed = {t.name: [s.name for s in t.steps] for t in prepared.run_timed()}
        m = form[1]
        assert timed["a"][-1] == f"winograd F({m}x{m},3x3) output transform+relu{NEXT}", timed
        assert timed["b"] == [f"winograd F({m}x{m},3x3) batched GEMM",
                              f"winograd F({m}x{m},3x3) output transform+hardswish{NEXT}"], timed
        assert timed["c"] == [f"winograd F({m}x{m},3x3) batched GEMM",
                              f"winograd F({m}x{m},3x3) output transform+relu+maxpool"], timed
        # first's and a's; b's and c's done by the chains
        assert sum(s.endswith("input transform") and NEXT not in s for s in all_steps(prepared)) == 2
    finally:
        prepared.close()


@pytest.mark.parametrize("backend", sorted(NETS))
def test_a_receiver_with_an_add_and_a_sum_in_parts(runtime, backend, monkeypatch):
    """The second conv's output transform does a residual add; the first's GEMM sums in 2 parts, added up by
    the chained kernel (parts of 16 channels allowed, as tests/oclgrind_net.py's SPLIT_POOL)."""
    from backends.handwritten import vectorised, winograd_gemm
    monkeypatch.setattr(winograd_gemm, "MIN_PART_DEPTH", 16)
    monkeypatch.setattr(vectorised, "device_class", lambda _: "gpu")
    monkeypatch.setitem(runtime.info, "compute_units", 16)   # few work-groups a compute unit: parts offered
    net = Net("chain-add", (5, 11, 9), (
        Conv("first", "relu", out_channels=32, kernel=(1, 1)),
        Conv("a", "relu", out_channels=6, kernel=(3, 3), pad=(1, 1)),
        Conv("b", "none", out_channels=32, kernel=(3, 3), pad=(1, 1)),
        Add("add", "relu", inputs=("b", "first")),
        GlobalAvgPool("gap")))
    weights, x, ref = fresh(net, 1, 5)
    lim, info = limits(runtime), runtime.info
    plans = winograd_gemm.plan_gemm(4, 1, 11, 9, 32, 8, True, int(info["compute_units"]), lim.max_group,
                                    lim.max_items, int(info["local_mem_bytes"]))
    split = next(i for i, p in enumerate(plans) if p.parts == 2)   # a's first plan in 2 parts
    prepared = NETS[backend](runtime, net, weights, 1, winograd=f"F4-gemm:{split}", chain_transforms="always")
    try:
        check(prepared, x, ref)
        assert set(prepared.config["transforms_chained"]) == {"a"}, prepared.config.get("transforms_not_chained")
        assert prepared.config["layers"]["a"]["winograd"]["sum_parts"] == 2, prepared.config["layers"]["a"]
        steps = all_steps(prepared)
        assert "winograd F(4x4,3x3) output transform+add+relu" in steps, steps
    finally:
        prepared.close()


def test_which_pairs_are_candidates():
    conv = lambda name, **kw: Conv(name, "relu", out_channels=4, kernel=(3, 3), **{"pad": (1, 1), **kw})
    net = Net("pairs", (4, 12, 12), (
        conv("first"), conv("a"), conv("b"),             # a -> b: a candidate
        conv("c", pad=(1, 0, 1, 2)),                      # b -> c: c not padded by one all round
        conv("d"), MaxPool("p"), conv("e"),                # a pool between
        conv("f", stride=(2, 2)),                          # e -> f: stride 2
        conv("g"), conv("h"),                              # g -> h: g read by h and by the add
        Add("add", "none", inputs=("h", "g")),
        conv("i"), conv("last")))                          # add -> i: no conv; i -> last: the net's edge
    names = [layer.name for layer in net.layers]
    found = {names[i]: names[j] for i in range(len(names)) if (j := transform_chain.chainable(net, i)) is not None}
    assert found == {"a": "b", "c": "d", "f": "g"}, found
    assert transform_chain.chainable(net, 0) is None   # the net's first layer: its op converts the input


@pytest.mark.parametrize("backend", sorted(NETS))
def test_a_chained_kernel_that_differs_is_refused(runtime, backend, monkeypatch):
    """A chained form must give the two kernels' output: one built with the wrong activation is refused, and
    the pair keeps its own kernels (and the net its oracle's output)."""
    real = transform_chain.chain_launch

    def wrong(net, op, block):
        saved = net.window_defines
        net.window_defines = lambda *a: {**saved(*a), "ACT": 0}   # no relu
        try:
            return real(net, op, block)
        finally:
            del net.window_defines
    monkeypatch.setattr(transform_chain, "chain_launch", wrong)
    net, batch = chain_net(4)
    weights, x, ref = fresh(net, batch, 4)
    prepared = NETS[backend](runtime, net, weights, batch, winograd="F4-gemm", chain_transforms="always")
    try:
        check(prepared, x, ref)
        assert "transforms_chained" not in prepared.config
        assert set(prepared.config["transforms_not_chained"]) == {"a", "b"}
        assert "differed" in prepared.config["transforms_not_chained"]["a"]
        assert not any(NEXT in s for s in all_steps(prepared))
    finally:
        prepared.close()


@pytest.mark.parametrize("backend", sorted(NETS))
def test_measured_on_a_gpu_the_faster_is_kept(runtime, backend, monkeypatch):
    """As planned on a GPU: each block shape and the two kernels timed, the chain kept only where its fastest
    shape measured faster (this device's times decide, whichever way)."""
    from backends.handwritten import vectorised
    monkeypatch.setattr(vectorised, "device_class", lambda _: "gpu")
    net, batch = chain_net(6)
    weights, x, ref = fresh(net, batch, 6)
    prepared = NETS[backend](runtime, net, weights, batch, winograd="F4-gemm")
    try:
        check(prepared, x, ref)
        for first in ("a", "b"):
            record = prepared.config["transform_chains"][first]
            shapes = set(record["rel_l2_against_own_kernels"])
            assert 1 <= len(shapes) <= transform_chain.CANDIDATES and set(record["ms"]) == shapes | {"own kernels"}
            fastest = min(record["ms"][k] for k in shapes)
            chained = first in prepared.config.get("transforms_chained", {})
            if fastest != record["ms"]["own kernels"]:   # rounded alike: either way may have been faster
                assert chained == (fastest < record["ms"]["own kernels"]), record
            assert chained != (first in prepared.config.get("transforms_not_chained", {}))
    finally:
        prepared.close()


@pytest.mark.parametrize("mode", ["measured", "never"])
def test_on_a_cpu_not_offered_unless_forced(runtime, mode):
    """On a CPU the launches are not the cost ("measured" offers it on a GPU); "never" keeps the two kernels."""
    net, batch = chain_net(5)
    weights, x, ref = fresh(net, batch, 5)
    prepared = TiledNet(runtime, net, weights, batch, winograd="F4-gemm", chain_transforms=mode)
    try:
        check(prepared, x, ref)
        assert not any(k.startswith("transform") for k in prepared.config), prepared.config.keys()
    finally:
        prepared.close()

"""A layernorm folded into the 1x1 conv that alone reads it (backends/handwritten/
layernorm_fused.py, kernels/pointwise.cl LNORM), in `vectorised` and
`vectorised-tiled`: forced on, at random shapes (token counts, channel counts
not a multiple of 4, batches, every activation, tokens with a large mean, the
pair at the net's edges and inside it) against the float64 oracle; vit-tiny
checked with it forced and measured; the measured choice both ways; refusal
where the error passes the bound; and where it must not fuse."""
import numpy as np
import pytest

from backends.handwritten import fold_choice, layernorm_fused, vectorised
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from compare import oracle
from compare.checking import check_prepared, compare_arrays
from nets import VIT_TINY, ZOO_ACTIVATIONS, Add, Conv, LayerNorm, Net
from nets.weights import init_weights

from conftest import backend_or_skip

BACKENDS = [VectorisedNet, TiledNet]
ACTS = ZOO_ACTIVATIONS + ("gelu", "gelu_tanh")


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised").runtime


# (channels, tokens, 1x1 outputs): every channel count mod 4, one token and a ViT's 17
EDGE_SHAPES = {0: (5, 17, 7), 1: (6, 3, 12), 2: (7, 1, 5), 7: (16, 9, 20)}


def edge_net(seed: int) -> tuple[Net, int]:
    """The layernorm the net's first layer and the 1x1 its last (their ops convert the layouts)."""
    rng = np.random.default_rng(seed)
    c, t, k = EDGE_SHAPES[seed]
    return Net(f"ln-edge{seed}", (c, t, 1), (
        LayerNorm("ln", eps=float(rng.choice([1e-6, 1e-5]))),
        Conv("proj", str(rng.choice(ACTS)), out_channels=k, kernel=(1, 1)))), int(rng.integers(1, 4))


def inner_net(seed: int) -> tuple[Net, int]:
    """A pre-norm block inside a net: the add reads the block's input, the layernorm only the 1x1; a
    padded 3x3 conv reading the block's input too, so the layernorm reads it through a zero border."""
    rng = np.random.default_rng(seed)
    c, h, w, k = (int(v) for v in rng.integers((2, 1, 1, 1), (20, 6, 6, 40)))
    return Net(f"ln-inner{seed}", (c, h, w), (
        Conv("embed", out_channels=c, kernel=(1, 1)),
        LayerNorm("ln"),
        Conv("fc1", str(rng.choice(ACTS)), out_channels=k, kernel=(1, 1)),
        Conv("fc2", out_channels=c, kernel=(1, 1)),
        Add("add", inputs=("fc2", "embed")),
        Conv("side", "relu", out_channels=c, kernel=(3, 3), pad=(1, 1), inputs=("embed",)),
        Add("add2", inputs=("add", "side")),
        Conv("head", out_channels=3, kernel=(1, 1)))), int(rng.integers(1, 3))


def large_mean_input(net: Net, batch: int, seed: int) -> np.ndarray:
    """Tokens whose mean lies far from 0 against their spread (each token its own)."""
    c, h, w = net.input_shape
    rng = np.random.default_rng(seed)
    offsets = rng.uniform(-50, 50, (batch, 1, h, w))
    return (offsets + rng.standard_normal((batch, c, h, w))).astype(np.float32)


def pass_steps(prepared) -> list[str]:
    """The step each op of a forward pass names (an edge's op: the op inside)."""
    ops = [getattr(op, "op", op) for op in prepared.pass_ops()]
    return [op.step for op in ops if hasattr(op, "step")]


def forward_checked(prepared, net, weights, x):
    try:
        end = compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1])
        assert end.passed, (end.rel_l2, end.note)
        return prepared.config
    finally:
        prepared.close()


@pytest.mark.parametrize("backend_class, gpu", [(VectorisedNet, False), (TiledNet, False), (TiledNet, True)])
@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_the_fused_pair_at_the_nets_edges_matches_the_oracle(runtime, monkeypatch, backend_class, gpu, seed):
    """On the device, as planned here and as on a GPU (float4 blocks, its block counts)."""
    if gpu:
        monkeypatch.setattr(vectorised, "device_class", lambda info: "gpu")
    net, batch = edge_net(seed)
    weights = init_weights(net, seed)
    x = large_mean_input(net, batch, seed)
    config = forward_checked(backend_class(runtime, net, weights, batch, fuse_layernorm="always"), net, weights, x)
    assert set(config["layernorm_fused"]) == {"ln"}, config.get("layernorm_not_fused")
    record = config["layernorm"]["ln"]
    assert record["chosen"].startswith("fused") and record["into"] == "proj"
    assert record["rel_l2_against_float64"][record["chosen"]] <= layernorm_fused.MAX_REL_L2


@pytest.mark.parametrize("backend_class", BACKENDS)
@pytest.mark.parametrize("seed", [3, 4])
def test_the_fused_pair_inside_a_net_matches_the_oracle(runtime, backend_class, seed):
    net, batch = inner_net(seed)
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    prepared = backend_class(runtime, net, weights, batch, fuse_layernorm="always")
    config = forward_checked(prepared, net, weights, x)
    assert set(config["layernorm_fused"]) == {"ln"}
    assert config["residual_adds_fused"]["add"] == "into fc2's epilogue (adds embed)"
    assert "border 1" in config["layers"]["embed"]["output"]


@pytest.mark.parametrize("backend_name", ["vectorised", "vectorised-tiled"])
@pytest.mark.parametrize("mode", ["always", "measured"])
def test_vit_tiny_checks_pass_with_the_fusion(runtime, backend_name, mode):
    """Every layer on its own and the pass end to end against the oracle; forced, all four layernorms
    that feed a 1x1 fold, the final one (read by the class-token gather) stays a kernel."""
    net, batch = VIT_TINY, 2
    weights = init_weights(net, 5)
    x = np.random.default_rng(5).standard_normal((batch,) + net.input_shape).astype(np.float32)
    cls = {"vectorised": VectorisedNet, "vectorised-tiled": TiledNet}[backend_name]
    prepared = cls(runtime, net, weights, batch, fuse_layernorm=mode)
    try:
        result = check_prepared(prepared, x, oracle.forward(net, weights, x))
        assert result.status == "PASS", (result.end_to_end, [(r.name, r.rel_l2) for r in result.layers if not r.passed])
        config, steps = prepared.config, pass_steps(prepared)
    finally:
        prepared.close()
    pairs = {f"encoder_{b}_ln_{n}" for b in (0, 1) for n in (1, 2)}
    assert set(config["layernorm"]) == pairs and "ln" not in config["layernorm"]
    fused_steps = [s for s in steps if s.startswith("layernorm+pointwise 1x1")]
    assert len(fused_steps) == len(config["layernorm_fused"])
    if mode == "always":
        assert set(config["layernorm_fused"]) == pairs
        assert sorted(fused_steps) == ["layernorm+pointwise 1x1"] * 2 + ["layernorm+pointwise 1x1+gelu"] * 2
    else:
        for name, record in config["layernorm"].items():
            # the least time, kept rounded to 0.1 us: two forms that round alike tie, either may be chosen
            assert record["ms"][record["chosen"]] == min(record["ms"].values()), record
            assert (name in config["layernorm_fused"]) == record["chosen"].startswith("fused")


@pytest.mark.parametrize("fused_wins", [True, False])
def test_measured_keeps_the_faster(runtime, monkeypatch, fused_wins):
    monkeypatch.setattr(fold_choice, "fastest_ms", lambda rt, forms: {
        f: float(f.startswith("fused") != fused_wins) + len(f) * 1e-3 for f in forms})
    net, batch = inner_net(6)
    weights = init_weights(net, 6)
    x = np.random.default_rng(6).standard_normal((batch,) + net.input_shape).astype(np.float32)
    prepared = VectorisedNet(runtime, net, weights, batch)
    steps = pass_steps(prepared)
    config = forward_checked(prepared, net, weights, x)
    record = config["layernorm"]["ln"]
    assert record["chosen"] == ("fused" if fused_wins else "own kernels")
    assert ("ln" in config["layernorm_fused"]) == fused_wins
    assert any(s.startswith("layernorm+pointwise 1x1") for s in steps) == fused_wins
    if not fused_wins:
        assert "measured faster so" in config["layernorm_not_fused"]["ln"]


def test_a_fused_form_above_the_bound_is_refused_even_when_forced(runtime, monkeypatch):
    monkeypatch.setattr(layernorm_fused, "MAX_REL_L2", 0.0)   # every float32 form has some error
    net, batch = edge_net(7)
    weights = init_weights(net, 7)
    x = large_mean_input(net, batch, 7)
    config = forward_checked(VectorisedNet(runtime, net, weights, batch, fuse_layernorm="always"), net, weights, x)
    assert config["layernorm_fused"] == {} and config["layernorm"]["ln"]["chosen"] == "own kernels"
    assert "every fused form refused" in config["layernorm_not_fused"]["ln"]
    assert all("above" in why for why in config["layernorm"]["ln"]["refused"].values())


def test_never_and_where_it_must_not_fuse(runtime):
    """Turned off; a layernorm whose output two layers read (it must be written); one with an activation."""
    net = Net("ln-shared", (6, 5, 1), (
        LayerNorm("shared"),
        Conv("a", out_channels=4, kernel=(1, 1)),
        Conv("b", out_channels=4, kernel=(1, 1), inputs=("shared",)),
        Add("sum", inputs=("a", "b")),
        LayerNorm("act", activation="relu"),
        Conv("c", out_channels=3, kernel=(1, 1))))
    weights = init_weights(net, 8)
    x = np.random.default_rng(8).standard_normal((2,) + net.input_shape).astype(np.float32)
    config = forward_checked(VectorisedNet(runtime, net, weights, 2, fuse_layernorm="always"), net, weights, x)
    assert config["layernorm_fused"] == {}
    assert "read by a, b" in config["layernorm_not_fused"]["shared"]
    assert "activation (relu)" in config["layernorm_not_fused"]["act"]
    net, batch = edge_net(0)
    weights = init_weights(net, 0)
    config = forward_checked(TiledNet(runtime, net, weights, batch, fuse_layernorm="never"), net, weights,
                             large_mean_input(net, batch, 0))
    assert config["layernorm_fused"] == {} and "turned off" in config["layernorm_not_fused"]["ln"]
    with pytest.raises(ValueError, match="fuse_layernorm"):
        VectorisedNet(runtime, net, weights, batch, fuse_layernorm="sometimes")


def test_the_check_input_catches_the_one_pass_variance():
    """On the prepare check's tokens, float32 E[x^2] - mean^2 misses the float64 layernorm by more than
    the bound (so a form computing it so would be refused), the two-pass form does not."""
    x = layernorm_fused.check_input((2, 32, 17, 1))
    ref = x.astype(np.float64)
    ref = (ref - ref.mean(1, keepdims=True)) / np.sqrt(ref.var(1, keepdims=True) + 1e-6)

    def rel(got):
        return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    mean = x.mean(1, keepdims=True, dtype=np.float32)
    one_pass = (x * x).mean(1, keepdims=True, dtype=np.float32) - mean * mean
    two_pass = ((x - mean) ** 2).mean(1, keepdims=True, dtype=np.float32)
    assert rel((x - mean) / np.sqrt(np.maximum(one_pass, 0) + np.float32(1e-6))) > layernorm_fused.MAX_REL_L2
    assert rel((x - mean) / np.sqrt(two_pass + np.float32(1e-6))) < layernorm_fused.MAX_REL_L2

"""A net's head, the global average pool and the dense layer that alone reads it, as one kernel
(backends/handwritten/head_fused.py; kernels/cpu_conv.cl head_vec, kernels/vectorised.cl head),
in `vectorised` and `vectorised-tiled`: forced on at several shapes (channels not a multiple of 4,
batch 1 and more, 1x1 and 7x7 maps, the pool's input read through a border, the pool the net's first
layer, the dense not its last, with and without bias and activations) against the float64 oracle,
in the vector form planned here and the float4 form as on a CPU and a GPU; the measured choice both
ways; refusal where the pooled vector does not fit local memory or the error passes the bound; and
where it must not fuse."""
import numpy as np
import pytest

from backends.handwritten import fold_choice, head_fused, vectorised
from backends.handwritten.cpu_conv import MIN_WIDTH
from backends.handwritten.vectors import vector_width
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from compare import oracle
from backends.opencl.launch import step_name
from compare.checking import check_prepared
from nets import Conv, Dense, GlobalAvgPool, Net
from nets.weights import init_weights

from conftest import backend_or_skip

BACKENDS = [VectorisedNet, TiledNet]


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised").runtime


def head_net(case: int) -> tuple[Net, int, bool]:
    """(net, batch, zero bias) of each case."""
    if case == 0:   # a 7x7 map read through a border (a padded depthwise conv reads it too), 6 channels, batch 3
        return Net("head7", (6, 7, 7), (
            Conv("side", "tanh", out_channels=6, kernel=(3, 3), pad=(1, 1), groups=6),
            GlobalAvgPool("gap", inputs=("input",)),
            Dense("fc", "sigmoid", out_features=11))), 3, False
    if case == 1:   # the pool the net's first layer over a 1x1 map, no bias nor activation, batch 1
        return Net("head1", (9, 1, 1), (
            GlobalAvgPool("gap"),
            Dense("fc", out_features=13))), 1, True
    # the pool's own activation, the dense not the last layer, 13 channels over 3x5, batch 5 (an image
    # group past the batch)
    return Net("head-inner", (13, 3, 5), (
        GlobalAvgPool("gap", "relu"),
        Dense("fc", "relu6", out_features=18),
        Dense("out", out_features=3))), 5, False


def weights_of(net: Net, seed: int, zero_bias: bool) -> dict:
    weights = init_weights(net, seed)
    if zero_bias:
        weights = {k: (np.zeros_like(v) if k.endswith("bias") else v) for k, v in weights.items()}
    return weights


def checked(prepared, net, weights, x) -> tuple[dict, list[str]]:
    """Every layer alone and the pass end to end against the oracle; the prepared net's config and its
    pass's steps."""
    try:
        result = check_prepared(prepared, x, oracle.forward(net, weights, x))
        assert result.status == "PASS", (result.end_to_end, [(r.name, r.rel_l2) for r in result.layers if not r.passed])
        steps = [getattr(op, "op", op).step for op in prepared.pass_ops() if hasattr(getattr(op, "op", op), "step")]
        return prepared.config, steps
    finally:
        prepared.close()


def options(runtime, form: str = "vector") -> dict:
    """The other layers' forms forced, so that little else is built (PoCL compiles slowly): the vector
    kernels of the device's width, 8 at least (the head's vector form with them), or none (its float4 form)."""
    # forced, as tests/test_cpu_conv.py forces its variants: the vector form runs on any device
    cpu_conv = f"{max(vector_width(runtime.info), MIN_WIDTH)},1,4" if form == "vector" else "never"
    return {"winograd": "never", "pointwise": "never", "cpu_conv": cpu_conv}


def case_input(net: Net, batch: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)


@pytest.mark.parametrize("backend_class", BACKENDS)
# the vector form (the one PoCL takes) at every case, the float4 forms at some (PoCL compiles slowly)
@pytest.mark.parametrize("case, form", [(0, "vector"), (1, "vector"), (2, "vector"), (0, "float4 gpu"),
                                        (1, "float4 cpu")])
def test_the_fused_head_matches_the_oracle(runtime, monkeypatch, backend_class, case, form):
    """Each form forced: the vector kernel of the device's width (as cpu_conv's vector kernels), the
    float4 kernel (cpu_conv "never") one row a work-item as on a CPU, and 32 lanes a row as on a GPU."""
    if form == "float4 gpu":
        monkeypatch.setattr(vectorised, "device_class", lambda info: "gpu")
    net, batch, zero_bias = head_net(case)
    weights = weights_of(net, case, zero_bias)
    prepared = backend_class(runtime, net, weights, batch, fuse_head="always", **options(runtime, form))
    config, steps = checked(prepared, net, weights, case_input(net, batch, case))
    assert set(config["head_fused"]) == {"gap"}, config.get("head_not_fused")
    record = config["head"]["gap"]
    kind = "vector" if form == "vector" else "float4"
    assert record["into"] == "fc" and kind in record["chosen"], record
    assert record["rel_l2_against_float64"][record["chosen"]] <= head_fused.MAX_REL_L2
    layers = {l.name: l for l in net.layers}
    what = f"{step_name('global avgpool', layers['gap'].activation)}+{step_name('dense', layers['fc'].activation)}"
    assert [s for s in steps if s.startswith("global avgpool")] == [f"{what} ({record['chosen'][len('fused '):]})"]
    if form != "vector":   # a row a work-item as on a CPU (16 rows a group), 32 lanes a row as on a GPU (8 rows)
        threads = 256 if form == "float4 gpu" else 16
        assert f": {threads} work-items a group" in config["head_fused"]["gap"], config["head_fused"]


@pytest.mark.parametrize("fused_wins", [True, False])
def test_measured_keeps_the_faster(runtime, monkeypatch, fused_wins):
    monkeypatch.setattr(fold_choice, "fastest_ms", lambda rt, forms: {
        f: float(f.startswith("fused") != fused_wins) + len(f) * 1e-3 for f in forms})
    net, batch, _ = head_net(2)
    weights = weights_of(net, 4, False)
    config, steps = checked(VectorisedNet(runtime, net, weights, batch, **options(runtime)), net, weights,
                            case_input(net, batch, 4))
    record = config["head"]["gap"]
    assert record["chosen"].startswith("fused") == fused_wins and "own kernels" in record["ms"]
    assert ("gap" in config["head_fused"]) == fused_wins
    assert any(s.startswith("global avgpool") and "+dense" in s for s in steps) == fused_wins
    if not fused_wins:
        assert "measured faster so" in config["head_not_fused"]["gap"]


def test_a_pooled_vector_past_local_memory_keeps_two_kernels(runtime, monkeypatch):
    """The pooled vector of 9 channels (3 float4s, 48 B an image) on a device of 32 B of local memory."""
    monkeypatch.setitem(runtime.info, "local_mem_bytes", 32)
    net, batch, zero_bias = head_net(1)
    weights = weights_of(net, 5, zero_bias)
    prepared = TiledNet(runtime, net, weights, batch, fuse_head="always", **options(runtime))
    config, steps = checked(prepared, net, weights, case_input(net, batch, 5))
    assert config["head_fused"] == {} and "head" not in config
    assert "the device has 32 B" in config["head_not_fused"]["gap"]
    assert not any(s.startswith("global avgpool+") for s in steps)


def test_a_fused_form_above_the_bound_is_refused_even_when_forced(runtime, monkeypatch):
    monkeypatch.setattr(head_fused, "MAX_REL_L2", 0.0)   # every float32 form has some error
    net, batch, _ = head_net(2)
    weights = weights_of(net, 6, False)
    config, _ = checked(VectorisedNet(runtime, net, weights, batch, fuse_head="always", **options(runtime)), net,
                        weights, case_input(net, batch, 6))
    assert config["head_fused"] == {} and config["head"]["gap"]["chosen"] == "own kernels"
    assert "every fused form refused" in config["head_not_fused"]["gap"]


def test_never_and_where_it_must_not_fuse(runtime):
    """Turned off; a pool that two dense layers read (it must be written); a bad option."""
    net = Net("head-shared", (5, 2, 3), (
        GlobalAvgPool("gap"),
        Dense("a", out_features=4),
        Dense("b", out_features=4, inputs=("gap",))))
    weights = weights_of(net, 7, False)
    config, _ = checked(VectorisedNet(runtime, net, weights, 2, fuse_head="always", **options(runtime)), net, weights,
                        case_input(net, 2, 7))
    assert config["head_fused"] == {} and "read by a, b" in config["head_not_fused"]["gap"]
    net, batch, zero_bias = head_net(1)
    weights = weights_of(net, 8, zero_bias)
    config, _ = checked(TiledNet(runtime, net, weights, batch, fuse_head="never", **options(runtime)), net, weights,
                        case_input(net, batch, 8))
    assert config["head_fused"] == {} and "turned off" in config["head_not_fused"]["gap"]
    with pytest.raises(ValueError, match="fuse_head"):
        VectorisedNet(runtime, net, weights, batch, fuse_head="sometimes")

"""1x1 stride-1 convs as the register-blocked GEMM (backends/handwritten/
pointwise.py, kernels/pointwise.cl): on the device, as planned here and as on
a GPU, at random shapes (channels and pixels not a multiple of its blocks,
batches, every activation, a residual add in its epilogue, a depthwise
folded into it) against the float64 oracle; the measured choice both ways."""
import numpy as np
import pytest

from backends.handwritten import pointwise, vectorised
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from compare import oracle
from compare.checking import check_prepared
from nets import ZOO_ACTIVATIONS, Add, Conv, GlobalAvgPool, Net
from nets.weights import init_weights

from conftest import backend_or_skip


def random_net(seed: int) -> tuple[Net, int]:
    rng = np.random.default_rng(seed)
    acts = [str(a) for a in rng.choice(ZOO_ACTIVATIONS, 4)]
    c, k, h, w = (int(v) for v in rng.integers((1, 1, 2, 2), (30, 30, 10, 10)))
    return Net(f"pointwise{seed}", (c, h, w), (
        Conv("a", acts[0], out_channels=k, kernel=(1, 1)),
        Conv("b", "none", out_channels=k, kernel=(1, 1)),
        Add("add", acts[1], inputs=("b", "a")),
        Conv("dw", acts[2], out_channels=k, kernel=(3, 3), pad=(1, 1), groups=k),
        Conv("c", acts[3], out_channels=int(rng.integers(1, 30)), kernel=(1, 1)),
        GlobalAvgPool("gap"))), int(rng.integers(1, 4))


def run(prepared, net, weights, x):
    try:
        result = check_prepared(prepared, x, oracle.forward(net, weights, x))
        assert result.status == "PASS", (result.end_to_end, [(r.name, r.rel_l2) for r in result.layers if not r.passed])
        return prepared.config
    finally:
        prepared.close()


@pytest.fixture(scope="module")
def runtime():
    return backend_or_skip("vectorised").runtime


@pytest.mark.parametrize("seed, gpu", [(0, False), (1, True)])
def test_the_blocked_1x1_matches_the_oracle(runtime, monkeypatch, seed, gpu):
    if gpu:
        monkeypatch.setattr(vectorised, "device_class", lambda info: "gpu")
    net, batch = random_net(seed)
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    # the depthwise folded into c (dw_pw), c's weights then uploaded in vectorised's order
    config = run((TiledNet if gpu else VectorisedNet)(runtime, net, weights, batch, pointwise="always",
                                                      fold_depthwise="always"), net, weights, x)
    assert config["layers"]["a"]["kernel"].startswith("pointwise 1x1")
    assert config["residual_adds_fused"] == {"add": "into b's epilogue (adds a)"} and "dw" in config["depthwise_fused"]


@pytest.mark.parametrize("blocked_wins", [True, False])
def test_measured_keeps_the_faster(runtime, monkeypatch, blocked_wins):
    monkeypatch.setattr(pointwise, "fastest_ms",
                        lambda rt, forms: {f: float((f == "pointwise") != blocked_wins) for f in forms})
    net, batch = random_net(0)
    weights = init_weights(net, 2)
    x = np.random.default_rng(2).standard_normal((batch,) + net.input_shape).astype(np.float32)
    config = run(VectorisedNet(runtime, net, weights, batch, fold_depthwise="never", cpu_conv="never"), net, weights, x)
    assert {r["chosen"] for r in config["pointwise"].values()} == {"pointwise" if blocked_wins else "direct"}
    assert set(config["pointwise"]) == {"a", "b", "c"}
    assert config["layers"]["c"]["kernel"].startswith("pointwise 1x1" if blocked_wins else "conv")


@pytest.mark.parametrize("backend_class", [VectorisedNet, TiledNet])
def test_a_1x1_writing_into_a_concatenation_keeps_the_kernel_that_takes_its_pitch(runtime, backend_class):
    """The blocked 1x1's kernel writes whole pixels; one whose output is a slice of a concatenation's
    buffer stays on the conv kernel (which takes the pitch and offset), forced or not."""
    from nets import Concat
    net = Net("pw-concat", (6, 5, 7), (
        Conv("a", "relu", out_channels=8, kernel=(1, 1)),   # a multiple of 4: written in place
        Conv("b", "silu", out_channels=9, kernel=(1, 1), inputs=("input",)),
        Concat("join", inputs=("a", "b")),
        Conv("c", "none", out_channels=4, kernel=(1, 1))))
    weights = init_weights(net, 3)
    x = np.random.default_rng(3).standard_normal((2,) + net.input_shape).astype(np.float32)
    config = run(backend_class(runtime, net, weights, 2, pointwise="always"), net, weights, x)
    assert config["layers"]["c"]["kernel"].startswith("pointwise 1x1")
    assert not config["layers"]["a"]["kernel"].startswith("pointwise")

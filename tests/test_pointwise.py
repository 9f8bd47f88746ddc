"""1x1 stride-1 convs as the register-blocked GEMM (backends/handwritten/
pointwise.py, kernels/pointwise.cl): on the device, as planned here and as on
a GPU, at random shapes (channels and pixels not a multiple of its blocks,
batches, every activation, a residual add in its epilogue, a depthwise
folded into it, its output or its add's a slice of a concatenation's buffer)
against the float64 oracle; the measured choice both ways."""
import numpy as np
import pytest

from backends.handwritten import pointwise, vectorised, winograd_math
from backends.handwritten.tiled import TiledNet
from backends.handwritten.vectorised import VectorisedNet
from compare import oracle
from compare.checking import check_prepared, compare_arrays
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
def test_a_1x1_writing_into_a_concatenation_writes_at_its_pitch(runtime, backend_class):
    """A blocked 1x1 whose output is a slice of a concatenation's buffer writes its channels there, at
    the buffer's pitch and its slice's offset (YS, YO), the other inputs' channels untouched."""
    from nets import Concat
    net = Net("pw-concat", (6, 5, 7), (
        Conv("a", "relu", out_channels=8, kernel=(1, 1)),   # a multiple of 4: written in place
        Conv("b", "silu", out_channels=9, kernel=(1, 1), inputs=("input",)),
        Concat("join", inputs=("a", "b")),
        Conv("c", "none", out_channels=4, kernel=(1, 1))))
    weights = init_weights(net, 3)
    x = np.random.default_rng(3).standard_normal((2,) + net.input_shape).astype(np.float32)
    config = run(backend_class(runtime, net, weights, 2, pointwise="always"), net, weights, x)
    assert all(config["layers"][n]["kernel"].startswith("pointwise 1x1") for n in "abc")
    assert "channels 0..7 of a concatenation's pixels" in str(config["layers"]["a"]["output"])



def nasnet_cell(seed: int, b_kernel: int = 1) -> tuple[Net, int]:
    """NASNet's pattern at random shapes: a conv `b` (1x1, or 3x3 for Winograd) that alone feeds an add,
    whose output only a concatenation reads, so the add is folded into b's epilogue and writes straight
    into its slice of the concatenation's buffer (NASNetMobile gave NaN so on vectorised)."""
    from nets import Concat
    rng = np.random.default_rng(seed)
    acts = [str(a) for a in rng.choice(ZOO_ACTIVATIONS, 3)]
    c, h, w = (int(v) for v in rng.integers((1, 2, 2), (20, 9, 9)))
    k = 4 * int(rng.integers(1, 6))
    first = bool(rng.integers(2))   # the add's slice first (offset 0), or last after a multiple of 4 channels
    pad = (b_kernel // 2, b_kernel // 2)
    return Net(f"nasnet-cell{seed}", (c, h, w), (
        Conv("side", acts[0], out_channels=int(rng.integers(1, 20)) if first else 4 * int(rng.integers(1, 4)),
             kernel=(3, 3), pad=(1, 1)),
        Conv("a", acts[1], out_channels=k, kernel=(1, 1), inputs=("input",)),
        Conv("b", "none", out_channels=k, kernel=(b_kernel, b_kernel), pad=pad, inputs=("input",)),
        Add("add", acts[2], inputs=("a", "b")),
        Concat("join", inputs=("add", "side") if first else ("side", "add")),
        Conv("out", "none", out_channels=int(rng.integers(1, 9)), kernel=(1, 1)))), int(rng.integers(1, 3))


def _runs_the_cell(name: str) -> bool:
    import backends
    from nets import LayerKind
    return {LayerKind.CONV, LayerKind.ADD, LayerKind.CONCAT} <= backends.backend_class(name).supported_kinds


CELL_BACKENDS = [n for n in __import__("backends").names() if _runs_the_cell(n)]


@pytest.mark.parametrize("name, seed", [(n, s) for n in CELL_BACKENDS
                                        for s in ((0, 1, 2) if n.startswith("vectorised") else (0,))])
def test_a_1x1_with_an_add_folded_writes_into_the_concatenations_slice(name, seed, monkeypatch):
    """Where the blocked 1x1 is chosen (forced here: measured, it wins on some devices), the add folded
    into its epilogue writes the add's slice of the concatenation's buffer at that buffer's pitch; every
    backend that runs the cell, end to end against the oracle."""
    monkeypatch.setattr(pointwise, "fastest_ms", lambda rt, forms: {f: float(f != "pointwise") for f in forms})
    net, batch = nasnet_cell(seed)
    weights = init_weights(net, seed)
    x = np.random.default_rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    prepared = backend_or_skip(name).prepare(net, weights, batch)
    try:
        end = compare_arrays(prepared.forward(x), oracle.forward(net, weights, x)[-1])
        assert end.passed, (name, end.rel_l2, end.note)
        if name.startswith("vectorised"):
            assert prepared.config["pointwise"]["b"]["chosen"] == "pointwise"
            assert "add" in prepared.config["residual_adds_fused"]
    finally:
        prepared.close()


@pytest.mark.parametrize("backend_class", [VectorisedNet, TiledNet])
@pytest.mark.parametrize("form", ["F2", "F2-gemm"])
def test_a_winograd_conv_leaves_an_add_writing_a_concatenations_slice_its_own_kernel(runtime, backend_class, form):
    """Winograd's output kernels (the one-kernel form's and the GEMM form's) take no channel pitch: the add
    after a Winograd conv, its output a slice of a concatenation's buffer, is not folded into it, and the
    net still matches the oracle."""
    net, batch = nasnet_cell(3, b_kernel=3)
    weights = init_weights(net, 3)
    x = np.random.default_rng(3).standard_normal((batch,) + net.input_shape).astype(np.float32)
    config = run(backend_class(runtime, net, weights, batch, winograd=form), net, weights, x)
    assert config["winograd"]["b"]["chosen"].startswith(winograd_math.name(2))
    assert ("GEMM" in config["winograd"]["b"]["chosen"]) == form.endswith("gemm")
    assert "add" not in config["residual_adds_fused"]

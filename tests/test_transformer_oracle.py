"""The transformer's layers (issue 45) in the float64 oracle, worked out by hand,
their FLOP counts, and the numpy backend against the oracle on random shapes."""
from __future__ import annotations

import math

import numpy as np
import pytest

from backends.reference.numpy_backend import NumpyNet
from compare import oracle
from nets import Attention, Conv, Crop, Dense, LayerNorm, Net, SpaceToDepth, TakeToken, Tokens
from nets.weights import init_weights


def test_layernorm_by_hand():
    x = np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1)
    y = oracle.layernorm(x, scale=[1.0, 2.0, 1.0], bias=[0.0, 0.0, 5.0], eps=0.0)
    # mean 2, variance (1 + 0 + 1) / 3, so (x - 2) / sqrt(2/3) = -1.2247, 0, 1.2247
    assert y.ravel() == pytest.approx([-math.sqrt(1.5), 0.0, 5.0 + math.sqrt(1.5)], abs=1e-12)


def test_gelu_by_hand():
    # Phi(1) = 0.8413447460685429, Phi(-1) = 1 - Phi(1)
    x = np.array([0.0, 1.0, -1.0])
    assert oracle.activate(x, "gelu") == pytest.approx([0.0, 0.8413447460685429, -0.15865525393145707], abs=1e-12)
    # tanh form at 1: 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.8411919906082768
    assert oracle.activate(np.array([1.0]), "gelu_tanh")[0] == pytest.approx(0.8411919906082768, abs=1e-12)


def test_tokens_by_hand():
    x = np.arange(8.0).reshape(1, 2, 2, 2)     # channel 0: 0 1 / 2 3, channel 1: 4 5 / 6 7
    y = oracle.tokens(x, cls=[10.0, 20.0], pos=np.full((2, 5), 0.5))
    assert y.shape == (1, 2, 5, 1)
    assert y[0, 0, :, 0].tolist() == [10.5, 0.5, 1.5, 2.5, 3.5]
    assert y[0, 1, :, 0].tolist() == [20.5, 4.5, 5.5, 6.5, 7.5]
    assert oracle.take_token(y, 0).ravel().tolist() == [10.5, 20.5]


def _qkv(q, k, v):
    """One head of one channel: (1, 3, T, 1) from three lists of T values."""
    return np.array([q, k, v], np.float64).reshape(1, 3, -1, 1)


def test_attention_by_hand():
    # scores of token 0: ln 3 * 1 and ln 3 * 0, so softmax 3/4, 1/4; token 1's query is 0: 1/2, 1/2
    y = oracle.attention(_qkv([math.log(3), 0.0], [1.0, 0.0], [4.0, 8.0]), heads=1)
    assert y.ravel() == pytest.approx([0.75 * 4 + 0.25 * 8, 6.0], abs=1e-12)
    # scale 2 doubles the scores: 9/10, 1/10; a bias of ln 3 on (0, 1) makes them 9 : 3
    y = oracle.attention(_qkv([math.log(3), 0.0], [1.0, 0.0], [4.0, 8.0]), heads=1, scale=2.0)
    assert y[0, 0, 0, 0] == pytest.approx(0.9 * 4 + 0.1 * 8, abs=1e-12)
    bias = np.array([[[0.0, math.log(3)], [0.0, 0.0]]])
    y = oracle.attention(_qkv([math.log(3), 0.0], [1.0, 0.0], [4.0, 8.0]), heads=1, window=(2, 1), bias=bias)
    assert y[0, 0, 0, 0] == pytest.approx(0.5 * 4 + 0.5 * 8, abs=1e-12)


def test_attention_heads_are_apart():
    # two heads of one channel each: head 0 attends by its scores, head 1 (queries 0) evenly
    x = np.array([[math.log(3), 0.0], [0.0, 0.0],     # q: head 0, head 1
                  [1.0, 0.0], [5.0, 5.0],             # k
                  [4.0, 8.0], [1.0, 3.0]])            # v
    y = oracle.attention(x.reshape(1, 6, 2, 1), heads=2)
    assert y[0, :, 0, 0] == pytest.approx([5.0, 2.0], abs=1e-12)


def test_cosine_attention_by_hand():
    # one head of two channels, two tokens: query 0 is (3, 4), normalised (0.6, 0.8); the keys (5, 0) and
    # (0, 2) normalise to (1, 0) and (0, 1); a head scale of 5 ln 3 makes the scores 3 ln 3 and 4 ln 3,
    # so softmax 1/4, 3/4.  Query 1 is zero: its norm is held at COSINE_EPS, scores 0, weights 1/2, 1/2
    x = np.array([[3.0, 0.0], [4.0, 0.0],       # q: channel 0, channel 1; token 0, token 1
                  [5.0, 0.0], [0.0, 2.0],       # k
                  [4.0, 8.0], [1.0, 3.0]]).reshape(1, 6, 2, 1)   # v
    scale = np.array([5 * math.log(3)])
    y = oracle.attention(x, heads=1, cosine_scale=scale)
    assert y[0, :, :, 0].T.ravel() == pytest.approx([0.25 * 4 + 0.75 * 8, 0.25 * 1 + 0.75 * 3, 6.0, 2.0], abs=1e-12)
    # the norms divide out: queries and keys of any length give the same output
    x2 = x.copy()
    x2[0, :4] *= 7.0
    assert oracle.attention(x2, heads=1, cosine_scale=scale) == pytest.approx(y, abs=1e-12)
    # a layer whose cosine_scale is that, through layer_forward
    layer = Attention("a", heads=1, cosine=True)
    assert oracle.layer_forward(layer, x, {"a.cosine_scale": scale}) == pytest.approx(y, abs=1e-12)


def test_shifted_windows_by_hand():
    # rows 0..3, windows of 2 rows, shift 1: rolled rows are 1 2 | 3 0; rows 3 and 0 came from either side
    # of the roll's seam, so each attends only to itself; rows 1 and 2 (queries 0) average their values
    x = _qkv([0.0] * 4, [0.0] * 4, [1.0, 2.0, 4.0, 8.0])
    y = oracle.attention(x, heads=1, window=(2, 1), shift=(1, 0))
    assert y.ravel() == pytest.approx([1.0, 3.0, 3.0, 8.0], abs=1e-12)
    unshifted = oracle.attention(x, heads=1, window=(2, 1))
    assert unshifted.ravel() == pytest.approx([1.5, 1.5, 6.0, 6.0], abs=1e-12)


def test_grid_windows_by_hand():
    # queries 0: each token gets its window's mean value; a 2x2 grid on a 4x4 map puts (0, 0), (0, 2),
    # (2, 0), (2, 2) together, where 2x2 windows put (0, 0), (0, 1), (1, 0), (1, 1)
    v = np.arange(16.0).reshape(4, 4)
    x = np.zeros((1, 3, 4, 4))
    x[0, 2] = v
    grid = oracle.attention(x, heads=1, window=(2, 2), grid=True)
    assert grid[0, 0, 0, 0] == pytest.approx((0 + 2 + 8 + 10) / 4)
    assert grid[0, 0, 3, 1] == pytest.approx((5 + 7 + 13 + 15) / 4)
    win = oracle.attention(x, heads=1, window=(2, 2))
    assert win[0, 0, 0, 0] == pytest.approx((0 + 1 + 4 + 5) / 4)


def test_space_to_depth_and_crop_by_hand():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    y = oracle.space_to_depth(x, (2, 2), ((0, 0), (1, 0), (0, 1), (1, 1)))
    assert y[0, :, 0, 0].tolist() == [0.0, 4.0, 1.0, 5.0]     # Swin: x[0::2, 0::2], x[1::2, 0::2], ...
    assert y[0, :, 1, 1].tolist() == [10.0, 14.0, 11.0, 15.0]
    assert oracle.crop(x, (1, 0, 0, 2))[0, 0].tolist() == [[4.0, 5.0], [8.0, 9.0], [12.0, 13.0]]


def test_flops_by_hand():
    # ViT-like: 4 channels, 2 heads, one window of 5 tokens: 2 products of 2*25*4, then per head
    # 25 scalings and 3 * 25 for the softmax
    assert Attention("a", heads=2).flops((12, 5, 1)) == 2 * 2 * 25 * 4 + 2 * (25 + 75)
    # Swin-like: 2x2 windows of a 4x4 map (4 windows), shifted: the mask's add too
    assert Attention("a", heads=1, window=(2, 2), shift=(1, 1)).flops((6, 4, 4)) == 4 * (4 * 16 * 2 + 16 * 5)
    # cosine attention: six more per element of the queries and keys (the norms' square, sum, division)
    assert Attention("a", heads=1, window=(2, 2), cosine=True).flops((6, 4, 4)) == 4 * (4 * 16 * 2 + 16 * 4 + 6 * 4 * 2)
    assert LayerNorm("n").flops((3, 2, 2)) == 7 * 12
    assert Tokens("t").flops((4, 2, 2)) == 4 * 5
    assert Tokens("t", position=False).flops((4, 2, 2)) == 0
    assert SpaceToDepth("s").flops((4, 2, 2)) == Crop("c", crop=(1, 1, 0, 0)).flops((1, 3, 3)) == 0


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="do not tile"):
        Net("n", (6, 5, 4), (Attention("a", heads=1, window=(2, 2)),))
    with pytest.raises(ValueError, match="heads each"):
        Net("n", (6, 4, 4), (Attention("a", heads=4),))
    with pytest.raises(ValueError, match="only of"):
        Attention("a", heads=1, shift=(1, 1))
    with pytest.raises(ValueError, match="leaves nothing"):
        Net("n", (1, 3, 3), (Crop("c", crop=(2, 0, 1, 0)),))
    with pytest.raises(ValueError, match="scale is per head"):
        Attention("a", heads=1, cosine=True, scale=0.5)
    with pytest.raises(ValueError, match="each offset"):
        SpaceToDepth("s", order=((0, 0), (0, 0), (1, 0), (1, 1)))


def _transformer_nets():
    """Small nets of every new kind, the windows' variants among them."""
    vit = Net("vit", (3, 4, 4), (
        Conv("patch", out_channels=8, kernel=(2, 2), stride=(2, 2)),
        Tokens("tok"), LayerNorm("ln1"),
        Conv("qkv", out_channels=24, kernel=(1, 1)), Attention("attn", heads=2),
        Conv("proj", out_channels=8, kernel=(1, 1)),
        Conv("fc1", "gelu", inputs=("proj",), out_channels=16, kernel=(1, 1)),
        Conv("fc2", "gelu_tanh", out_channels=8, kernel=(1, 1)),
        TakeToken("cls"), Dense("head", out_features=5)))
    swin = Net("swin", (3, 8, 8), (
        Conv("patch", out_channels=4, kernel=(2, 2), stride=(2, 2)), LayerNorm("ln0", eps=1e-6),
        Conv("qkv", out_channels=12, kernel=(1, 1)),
        Attention("attn", heads=2, window=(2, 2), shift=(1, 1), position_bias=True),
        Conv("qkv2", out_channels=12, kernel=(1, 1)),
        Attention("grid", heads=1, window=(2, 2), grid=True, position_bias=True),
        SpaceToDepth("merge"), Crop("crop", crop=(1, 0, 0, 1))))
    swin_v2 = Net("swin-v2", (3, 8, 8), (
        Conv("patch", out_channels=8, kernel=(2, 2), stride=(2, 2)),
        Conv("qkv", out_channels=24, kernel=(1, 1)),
        Attention("attn", heads=2, window=(2, 2), shift=(1, 1), position_bias=True, cosine=True),
        LayerNorm("post"),
        Conv("qkv2", out_channels=24, kernel=(1, 1)), Attention("whole", heads=4, cosine=True)))
    return [vit, swin, swin_v2]


@pytest.mark.parametrize("net", _transformer_nets(), ids=lambda n: n.name)
@pytest.mark.parametrize("batch", [1, 3])
def test_numpy_backend_matches_oracle(net, batch):
    weights = init_weights(net, seed=batch)
    x = np.random.default_rng(batch).standard_normal((batch,) + net.input_shape).astype(np.float32)
    want = oracle.forward(net, weights, x)
    got = NumpyNet(net, weights, batch).layer_outputs(x)
    for layer, a, b in zip(net.layers, got, want):
        assert a.dtype == np.float32, layer.name
        err = np.linalg.norm(a.reshape(batch, -1) - b.reshape(batch, -1)) / np.linalg.norm(b)
        assert err < 1e-5, f"{layer.name}: relative L2 error {err:.2e}"

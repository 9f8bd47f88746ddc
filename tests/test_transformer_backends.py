"""Issue 45: the transformer's layers on every backend, layer by layer and end
to end against the float64 oracle, on two small nets that hold every new kind
between them (vit-tiny, built in: tokens, whole-map attention, gelu, the class
token; a Swin- and MaxViT-like net: shifted windows with a position bias, a
grid, Swin v2's cosine attention, patch merging, a crop).  A backend that lacks a kind says so in one line
naming it."""
import numpy as np
import pytest

import backends
from compare import oracle
from nets import VIT_TINY, Attention, Conv, Crop, LayerNorm, Net, SpaceToDepth
from nets.weights import init_weights

from conftest import backend_or_skip

SWIN_LIKE = Net("swin-like", (3, 8, 8), (
    Conv("patch", out_channels=8, kernel=(2, 2), stride=(2, 2)), LayerNorm("ln0", eps=1e-6),
    Conv("qkv", out_channels=24, kernel=(1, 1)),
    Attention("shifted", heads=2, window=(2, 2), shift=(1, 1), position_bias=True),
    Conv("qkv2", "gelu_tanh", out_channels=24, kernel=(1, 1)),
    Attention("grid", heads=2, window=(2, 2), grid=True, position_bias=True),
    # Swin v2's: cosine attention in shifted windows with a position bias, then its post-norm; and over the
    # whole map (its last stage, one window)
    Conv("qkv3", out_channels=24, kernel=(1, 1)),
    Attention("cosine", heads=2, window=(2, 2), shift=(1, 1), position_bias=True, cosine=True), LayerNorm("post"),
    Conv("qkv4", out_channels=24, kernel=(1, 1)), Attention("cosine-whole", heads=2, cosine=True),
    SpaceToDepth("merge"), Crop("crop", crop=(1, 0, 0, 1))))

NETS = {"vit-tiny": VIT_TINY, "swin-like": SWIN_LIKE}

# the backends that lack the transformer's kinds and refuse these nets (tests/test_onnx_transformer.py too); every
# other one must run them.  What the refusal names first: the first layer of a kind the backend lacks
REFUSE = {"vit-tiny": ("baseline", "morton"), "swin-like": ("baseline", "fused", "morton", "opencv")}
FIRST_REFUSED = {("vit-tiny", None): "layer tokens is a tokens layer", ("swin-like", None): "layer ln0 is a layernorm layer",
                 ("swin-like", "fused"): "layer cosine (attention) uses cosine attention",
                 ("swin-like", "opencv"): "layer cosine (attention) uses cosine attention"}


@pytest.mark.parametrize("net_name", list(NETS))
@pytest.mark.parametrize("name", backends.names())
def test_transformer_layers_on_every_backend(name, net_name):
    net, batch = NETS[net_name], 2
    why = backends.backend_class(name).unsupported(net)
    if name in REFUSE[net_name]:   # refused in one line that names the layer and its kind
        assert why is not None, f"{name} was expected to refuse {net_name}"
        first = FIRST_REFUSED.get((net_name, name)) or FIRST_REFUSED[(net_name, None)]
        assert "\n" not in why and why.startswith(first) and f"which {name} cannot run yet" in why, why
        return
    assert why is None, why
    backend = backend_or_skip(name)
    weights = init_weights(net, seed=3)
    x = np.random.default_rng(3).standard_normal((batch,) + net.input_shape).astype(np.float32)
    want = oracle.forward(net, weights, x)
    prepared = backend.prepare(net, weights, batch)
    try:
        for layer, got, ref in zip(net.layers, prepared.layer_outputs(x), want):
            err = np.linalg.norm(got.reshape(batch, -1) - ref.reshape(batch, -1)) / np.linalg.norm(ref)
            assert err < 1e-4, f"{name} {layer.name}: relative L2 error {err:.2e}"
        out = prepared.forward(x)
        assert np.linalg.norm(out.reshape(batch, -1) - want[-1].reshape(batch, -1)) / np.linalg.norm(want[-1]) < 1e-4
    finally:
        prepared.close()

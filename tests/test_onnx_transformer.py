"""Issue 45's ONNX part: small models in the shape of torchvision's vit_b_16,
swin_t, swin_v2_t and convnext_tiny (tests/onnx_transformer_models.py), exported by
PyTorch, imported (nets/onnx_transformer.py), and run by the float64 oracle
and the backends that take the transformer's kinds against PyTorch's own
output; the others refuse in one line naming the kind."""
import numpy as np
import pytest

import backends
from compare import oracle
from compare.models import load_net
from nets import LayerKind
from nets.errors import Unsupported, UserError
from nets.onnx_import import load_onnx

from conftest import module_or_skip

module_or_skip("torch", "torch")
module_or_skip("onnx", "onnx")

from onnx_transformer_models import MODELS, export  # noqa: E402
from test_transformer_backends import REFUSE  # noqa: E402


def _imported(name: str, tmp_path, batch: int = 2, seed: int = 0):
    shape = MODELS[name][1]
    x = np.random.default_rng(seed).random((batch,) + shape, dtype=np.float32)
    framework = export(name, str(tmp_path / f"{name}.onnx"), x, seed=seed)
    net, weights = load_onnx(tmp_path / f"{name}.onnx")
    return net, weights, x, framework


KINDS = {"vit": {LayerKind.TOKENS, LayerKind.ATTENTION, LayerKind.LAYERNORM, LayerKind.TAKE_TOKEN},
         "swin": {LayerKind.ATTENTION, LayerKind.LAYERNORM, LayerKind.SPACE_TO_DEPTH},
         "convnext": {LayerKind.LAYERNORM},
         "maxvit": {LayerKind.ATTENTION, LayerKind.LAYERNORM, LayerKind.MUL, LayerKind.AVGPOOL},
         "swin_v2": {LayerKind.ATTENTION, LayerKind.LAYERNORM, LayerKind.SPACE_TO_DEPTH}}


@pytest.mark.parametrize("name", list(MODELS))
def test_imported_model_matches_pytorch(name, tmp_path):
    net, weights, x, framework = _imported(name, tmp_path)
    assert KINDS[name] <= {layer.kind for layer in net.layers}
    assert net.fixed_batch is None            # the batch stays free
    got = oracle.forward(net, weights, x)[-1].reshape(framework.shape)
    assert np.linalg.norm(got - framework) / np.linalg.norm(framework) < 1e-5


def test_swin_windows_and_shift_are_found(tmp_path):
    net, weights, _, _ = _imported("swin", tmp_path)
    attention = [layer for layer in net.layers if layer.kind == LayerKind.ATTENTION]
    # blocks of window 4 on an 8x8 map: unshifted, then shifted by 2; after merging the 4x4 map is one window
    assert [(a.window, a.shift, a.position_bias) for a in attention] == [((4, 4), (0, 0), True),
                                                                          ((4, 4), (2, 2), True),
                                                                          ((0, 0), (0, 0), True)]
    assert all(a.heads == 2 for a in attention)


def test_swin_v2_cosine_attention_is_found(tmp_path):
    """Swin v2's cosine attention: its windows and shift as v1's, each head's scale exp(min(logit_scale,
    log 100)) and its position bias 16 sigmoid(MLP(table)) worked out at import from the model's own."""
    import math
    import torch
    net, weights, _, _ = _imported("swin_v2", tmp_path)
    attention = [layer for layer in net.layers if layer.kind == LayerKind.ATTENTION]
    assert [(a.window, a.shift, a.heads, a.cosine, a.position_bias) for a in attention] == [
        ((4, 4), (0, 0), 2, True, True), ((4, 4), (2, 2), 2, True, True), ((0, 0), (0, 0), 4, True, True)]
    from onnx_transformer_models import SwinV2Block
    torch.manual_seed(0)
    block = SwinV2Block(8, 2, 4, 0)
    want = np.minimum(np.exp(block.logit_scale.detach().numpy().reshape(-1)), 100.0)
    assert weights[f"{attention[0].name}.cosine_scale"] == pytest.approx(want, rel=1e-5)
    assert want.max() == pytest.approx(100.0) and want.min() == pytest.approx(5.0)
    bias = weights[f"{attention[0].name}.bias"]
    assert bias.shape == (2, 16, 16) and 0 < bias.min() and bias.max() < 16
    assert not math.isclose(float(bias.min()), float(bias.max()))


def test_cosine_attention_over_a_whole_map_and_a_wrong_axis(tmp_path):
    """Cosine attention over every token (one window), its scale per head; queries and keys normalised across
    the tokens instead of each head's channels is not cosine attention: refused in one line, not run wrong."""
    x = np.random.default_rng(1).random((2, 3, 8, 8), dtype=np.float32)
    framework = export("cosine_tokens", str(tmp_path / "ok.onnx"), x)
    net, weights = load_onnx(tmp_path / "ok.onnx")
    (attention,) = [layer for layer in net.layers if layer.kind == LayerKind.ATTENTION]
    assert attention.cosine and attention.window == (0, 0) and not attention.position_bias
    assert weights[f"{attention.name}.cosine_scale"] == pytest.approx([4.0, 12.0], rel=1e-5)
    got = oracle.forward(net, weights, x)[-1].reshape(framework.shape)
    assert np.linalg.norm(got - framework) / np.linalg.norm(framework) < 1e-5
    export("cosine_across_tokens", str(tmp_path / "wrong.onnx"), x)
    with pytest.raises(UserError, match="another axis") as err:
        load_onnx(tmp_path / "wrong.onnx")
    assert "\n" not in str(err.value)


def test_maxvit_window_and_grid_are_found(tmp_path):
    net, _, _, _ = _imported("maxvit", tmp_path)
    attention = [layer for layer in net.layers if layer.kind == LayerKind.ATTENTION]
    assert [(a.window, a.grid, a.position_bias) for a in attention] == [((2, 2), False, True), ((2, 2), True, True)]


def test_gelu_and_biases_fold_into_the_linear(tmp_path):
    net, _, _, _ = _imported("vit", tmp_path)
    assert not [layer for layer in net.layers if layer.kind == LayerKind.CHANNELS]
    assert sum(layer.activation == "gelu" for layer in net.layers) == 2


@pytest.mark.parametrize("name", list(MODELS))
def test_backends_run_or_refuse(name, tmp_path):
    _, _, x, framework = _imported(name, tmp_path)
    net, weights = load_net(str(tmp_path / f"{name}.onnx"))   # batch norms folded, as `compare` loads it
    if name == "vit":   # `opencv` runs the user's file as given, and OpenCV cannot run this export
        with pytest.raises(Unsupported, match="^OpenCV could not run the user's ONNX file vit.onnx as given") as no:
            backends.get("opencv").prepare(net, weights, len(x))
        assert "\n" not in str(no.value)
    for backend in ("numpy", "torch") + (("opencv",) if name == "convnext" else ()):
        prepared = backends.get(backend).prepare(net, weights, len(x))
        got = prepared.forward(x).reshape(framework.shape)
        assert np.linalg.norm(got - framework) / np.linalg.norm(framework) < 1e-5, backend
    for backend in backends.names():
        why = backends.backend_class(backend).unsupported(net)
        if backend in REFUSE["vit-tiny"]:   # those that lack the transformer's kinds
            assert why is not None and "\n" not in why and f"which {backend} cannot run yet" in why, (backend, why)
        elif backend == "fused":   # a plain ViT in one kernel; else one line saying what it lacks
            assert why is None or ("\n" not in why and ("cannot run yet" in why or "fused has no code" in why)), why
        elif backend == "opencv":   # ViT's layers written as ONNX, and ConvNeXt's; not windows, merges or cosines
            assert (why is None) == (name in ("vit", "convnext")), why
            assert why is None or ("\n" not in why and "which opencv cannot run yet" in why), why
        else:
            assert why is None, (backend, why)


def test_windows_that_need_padding_are_refused(tmp_path):
    """Swin pads a map its windows do not tile; we refuse in one line, saying what to do."""
    x = np.random.default_rng(0).random((1, 3, 20, 20), dtype=np.float32)   # a 10x10 map, windows of 4
    export("swin", str(tmp_path / "swin.onnx"), x)
    with pytest.raises(UserError, match="windows tile") as err:
        load_onnx(tmp_path / "swin.onnx")
    assert "\n" not in str(err.value)

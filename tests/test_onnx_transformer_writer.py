"""ViT's layers written as ONNX (backends/peers/onnx_transformer_writer.py): ViT-shaped nets at several
sizes, written and run by OpenCV's DNN on the CPU, against the float64 oracle on fresh random inputs; a
windowed attention refused in one line."""
import numpy as np
import pytest

from compare import oracle
from nets import Add, Attention, Conv, Dense, LayerNorm, Net, TakeToken, Tokens
from nets.errors import Unsupported
from nets.weights import init_weights

from conftest import module_or_skip

module_or_skip("onnx", "opencv")
cv2 = module_or_skip("cv2", "opencv")

from backends.peers.opencv_onnx import net_model  # noqa: E402


def vit(dim: int, heads: int, patch: int, side: int, act: str, class_token: bool, position: bool) -> Net:
    layers = [Conv("patches", out_channels=dim, kernel=(patch, patch), stride=(patch, patch)),
              Tokens("tokens", class_token=class_token, position=position),
              LayerNorm("ln_1", eps=1e-6),
              Conv("in_proj", out_channels=3 * dim, kernel=(1, 1)),
              Attention("attention", heads=heads),
              Conv("out_proj", out_channels=dim, kernel=(1, 1)),
              Add("add", inputs=("out_proj", "tokens")),
              Conv("mlp", act, out_channels=2 * dim, kernel=(1, 1)),
              TakeToken("first", index=0),
              Dense("head", out_features=5)]
    return Net("vit-like", (3, side, side), layers=tuple(layers))


@pytest.mark.parametrize("dim,heads,patch,side,act,class_token,position,batch", [
    (32, 2, 8, 32, "gelu", True, True, 1),
    (24, 3, 4, 20, "gelu_tanh", True, False, 3),
    (16, 1, 5, 15, "gelu", False, True, 2),
])
def test_a_vit_written_as_onnx_runs_in_opencv_as_the_oracle_does(dim, heads, patch, side, act, class_token,
                                                                   position, batch):
    net = vit(dim, heads, patch, side, act, class_token, position)
    rng = np.random.default_rng([dim, heads, side, batch])
    weights = init_weights(net, int(rng.integers(1 << 30)))
    x = rng.standard_normal((batch,) + net.input_shape).astype(np.float32)
    reader = cv2.dnn.readNetFromONNX(np.frombuffer(net_model(net, weights, batch), np.uint8))
    reader.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    reader.setInput(x)
    got = reader.forward().reshape(batch, -1)
    want = oracle.forward(net, weights, x)[-1].reshape(batch, -1)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-5


def test_a_windowed_attention_is_refused_in_one_line():
    layers = (Conv("in_proj", out_channels=12, kernel=(1, 1)), Attention("windows", heads=2, window=(2, 2)))
    net = Net("windowed", (4, 4, 4), layers=layers)
    with pytest.raises(Unsupported, match=r"^layer windows \(attention\) attends within windows or with a position "
                                          r"bias, which has no ONNX writer \(only a whole map's attention"):
        net_model(net, init_weights(net, 0), 1)

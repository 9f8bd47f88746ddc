"""The peers (torch, tensorflow) run the graph nets, ResNet-18 and
MobileNet-v2, from the same graph and weights in every mode they list here,
against the float64 oracle on fresh random inputs: end to end, each layer
on the oracle's inputs, the per-layer timed pass and every layer's output.

Each net at its own size (batch 1, 224x224) and smaller at odd sizes and
batch 2, where TensorFlow's 'same' padding matches ours at stride 2 and
other padding paths run; and the layers the graphs brought, one at a time."""
import dataclasses

import numpy as np
import pytest

from compare import oracle
from compare.checking import compare_arrays
from nets import MOBILENET_V2, RESNET18, Add, Conv, Feature, GlobalAvgPool, LayerKind, MaxPool, Net
from nets.weights import init_weights

from conftest import backend_or_skip, rng
from peer_graph_checks import check_every_mode

PEERS = ["torch", "tensorflow"]


@pytest.fixture(params=PEERS)
def peer(request):
    return backend_or_skip(request.param)


def _resized(net: Net, c_h_w: tuple) -> Net:
    return dataclasses.replace(net, input_shape=c_h_w)


@pytest.mark.parametrize("net, batch, seed", [
    (RESNET18, 1, 11), (MOBILENET_V2, 1, 12),
    (_resized(RESNET18, (3, 45, 37)), 2, 13), (_resized(MOBILENET_V2, (3, 33, 50)), 2, 14),
], ids=["resnet18", "mobilenet-v2", "resnet18-45x37", "mobilenet-v2-33x50"])
def test_graph_nets_match_the_oracle_in_every_mode(peer, net, batch, seed):
    weights = init_weights(net, seed)
    x = rng(seed).standard_normal((batch,) + net.input_shape).astype(np.float32)
    assert check_every_mode(peer, net, weights, x)


def test_the_peers_declare_the_graph_kinds_and_features(peer):
    assert {LayerKind.ADD, LayerKind.GLOBAL_AVGPOOL} <= peer.supported_kinds
    assert peer.supported_features == frozenset(Feature)
    assert peer.unsupported(RESNET18) is None and peer.unsupported(MOBILENET_V2) is None


# each new kind or option alone, with an input size that makes TensorFlow pad explicitly
SMALL = {
    "asymmetric-pad": Conv("c", "tanh", out_channels=4, kernel=(3, 2), stride=(2, 1), pad=(2, 0, 1, 1)),
    "grouped": Conv("c", "relu6", out_channels=6, kernel=(3, 3), pad=(1, 1), groups=2),
    "depthwise-x2": Conv("c", "relu", out_channels=8, kernel=(3, 3), stride=(2, 2), pad=(1, 1), groups=4),
    "maxpool-pad": MaxPool("c", "none", kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
    "maxpool-wide-pad": MaxPool("c", "tanh", kernel=(2, 3), stride=(1, 2), pad=(1, 2, 0, 1)),
    "add-relu": Add("c", "relu", inputs=("input", "input")),
    "global-avgpool": GlobalAvgPool("c", "tanh"),
}


@pytest.mark.parametrize("which", list(SMALL))
def test_each_new_layer_alone_matches_the_oracle(peer, which):
    net = Net(which, (4, 8, 7), (SMALL[which],))
    weights = init_weights(net, 5)
    # all negative: a max-pool that let its padding win would give 0, not the window's largest
    x = -np.abs(rng(5).standard_normal((3,) + net.input_shape)).astype(np.float32) - 0.1
    assert check_every_mode(peer, net, weights, x)
    if which.startswith("maxpool"):
        assert np.all(oracle.forward(net, weights, x)[-1] < 0)   # the test's premise


def test_an_add_alone_takes_the_list_of_its_inputs(peer):
    net = Net("a", (2, 3, 4), (Conv("c", out_channels=2, pad=(1, 1)), Add("sum", "relu6", inputs=("c", "input"))))
    prepared = peer.prepare(net, init_weights(net, 6), 2)
    a, b = (rng(s).standard_normal((2, 2, 3, 4)).astype(np.float32) * 4 for s in (7, 8))
    try:
        got = prepared.run_layer(1, [a, b])
    finally:
        prepared.close()
    assert compare_arrays(got, np.clip(a.astype(np.float64) + b, 0, 6)).passed

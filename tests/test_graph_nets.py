"""The built-in graph nets (ResNet-18, MobileNet-v2) against their papers'
tables and counts worked out by hand; the new layer kinds and options; and
every backend that does not declare them saying UNSUPPORTED, naming the
layer kind (the peers run them: tests/test_peer_graphs.py)."""
import re

import numpy as np
import pytest

import backends
from backends.reference.numpy_backend import NumpyNet
from compare import oracle
from compare.checking import compare_arrays
from compare.cli import main
from nets.errors import Unsupported
from conftest import backend_or_skip, joined_rows
from nets import (LENET, MOBILENET_V2, RESNET18, VGG16, Add, AvgPool, Channels, Concat, Conv, Dense, Feature,
                  GlobalAvgPool, LayerKind, MaxPool, Mul, Net, Softmax, get_net)
from nets.weights import init_weights, make_input


def _shapes(net):
    return {layer.name: net.out_shape(i) for i, layer in enumerate(net.layers)}


def test_resnet18_follows_table_1():
    shapes = _shapes(RESNET18)
    # output sizes of table 1: conv1 112, conv2_x 56, conv3_x 28, conv4_x 14, conv5_x 7
    assert shapes["conv1"] == (64, 112, 112) and shapes["conv2_pool"] == (64, 56, 56)
    assert shapes["conv2_2"] == (64, 56, 56) and shapes["conv3_2"] == (128, 28, 28)
    assert shapes["conv4_2"] == (256, 14, 14) and shapes["conv5_2"] == (512, 7, 7)
    assert shapes["avgpool"] == (512, 1, 1) and shapes["fc"] == (1000,)
    # 17 convolutions and the fc are the 18 layers; 3 projections; 8 adds
    kinds = [layer.kind for layer in RESNET18.layers]
    assert kinds.count("conv") == 17 + 3 and kinds.count("add") == 8 and kinds.count(LayerKind.DENSE) == 1
    assert RESNET18.layers[RESNET18.layer_index("conv3_1")].inputs == ("conv3_1b", "conv3_1_proj")
    assert RESNET18.layers[RESNET18.layer_index("conv2_1")].inputs == ("conv2_1b", "conv2_pool")


def test_resnet18_parameters_and_flops():
    # torchvision's 11,689,512 counts two batch-norm parameters per channel; folded, a conv has one
    # bias per channel instead: 64 + 4*64 + (4*128 + 128) + (4*256 + 256) + (4*512 + 512) = 4,800 channels
    assert RESNET18.params() == 11_689_512 - 4_800
    conv1 = RESNET18.layers[0].flops(RESNET18.in_shape(0))
    assert conv1 == 2 * 64 * 3 * 7 * 7 * 112 * 112
    add = RESNET18.layer_index("conv2_1")
    assert RESNET18.layers[add].flops(RESNET18.in_shape(add)) == 64 * 56 * 56      # one add per element
    assert 3.6e9 < RESNET18.flops() < 3.7e9                                        # "1.8 x 10^9" multiply-adds


def test_mobilenet_v2_follows_table_2():
    shapes = _shapes(MOBILENET_V2)
    assert shapes["conv2d_1"] == (32, 112, 112)
    # each row's last block: output channels c at the table's sizes
    assert shapes["bottleneck1_1_project"] == (16, 112, 112)
    assert shapes["bottleneck2_2_add"] == (24, 56, 56)
    assert shapes["bottleneck3_3_add"] == (32, 28, 28)
    assert shapes["bottleneck4_4_add"] == (64, 14, 14)
    assert shapes["bottleneck5_3_add"] == (96, 14, 14)
    assert shapes["bottleneck6_3_add"] == (160, 7, 7)
    assert shapes["bottleneck7_1_project"] == (320, 7, 7)
    assert shapes["conv2d_2"] == (1280, 7, 7) and shapes["avgpool"] == (1280, 1, 1) and shapes["conv2d_3"] == (1000,)
    dw = MOBILENET_V2.layers[MOBILENET_V2.layer_index("bottleneck2_1_depthwise")]
    assert dw.groups == dw.out_channels == 96 and dw.stride == (2, 2) and dw.activation == "relu6"
    assert sum(layer.kind == "add" for layer in MOBILENET_V2.layers) == 10   # 1 + 2 + 3 + 2 + 2 of rows 2-6


def test_mobilenet_v2_parameters_and_flops():
    # torchvision's 3,504,872 less one parameter per batch-normalised channel (17,056 of them)
    assert MOBILENET_V2.params() == 3_504_872 - 17_056
    i = MOBILENET_V2.layer_index("bottleneck2_1_depthwise")
    # depthwise: each of 96 kernels reads 1 channel, 3x3, at 56x56
    assert MOBILENET_V2.layers[i].flops(MOBILENET_V2.in_shape(i)) == 2 * 96 * 1 * 9 * 56 * 56
    assert 0.59e9 < MOBILENET_V2.flops() < 0.61e9                                 # "300M" multiply-adds


def test_compare_nets_lists_them(capsys):
    assert main(["nets"]) == 0
    names = [row.split()[0] for row in joined_rows(capsys.readouterr().out.splitlines()[2:])]
    assert names == ["lenet", "vgg16", "resnet18", "mobilenet-v2", "vit-tiny"]
    assert get_net("mobilenet-v2") is MOBILENET_V2


@pytest.mark.parametrize("name", ["resnet18", "mobilenet-v2"])
def test_compare_check_passes_layer_by_layer_and_end_to_end(name, capsys):
    assert main(["check", "--net", name, "--backends", "numpy"]) == 0, capsys.readouterr().err


def test_new_kinds_and_options_by_hand():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    # asymmetric padding: one row on top, none at the bottom, a column on the right
    conv = Conv("c", out_channels=1, kernel=(2, 2), pad=(1, 0, 0, 1))
    assert conv.padding == (1, 0, 0, 1) and conv.out_shape((1, 4, 4)) == (1, 4, 4)
    assert Conv("s", pad=(2, 1, 2, 1)).pad == (2, 1)        # symmetric: kept as (rows, cols)
    y = oracle.conv(x, np.ones((1, 1, 2, 2)), [0.0], pad=conv.pad)
    # the top-left window holds the padding row and x[0, 0:2]; the bottom-right x[2:4, 3] and the padding column
    assert y[0, 0, 0, 0] == 0 + 1 and y[0, 0, 3, 3] == 11 + 15
    # max-pool padding never wins, even over negative values
    assert oracle.maxpool(-x - 1, kernel=(3, 3), stride=(2, 2), pad=(1, 1))[0, 0, 0, 0] == -1
    # grouped: two groups of one channel each, each kernel sees only its own channel
    two = np.concatenate([x, 10 * x], axis=1)
    y = oracle.conv(two, np.ones((2, 1, 1, 1)), [0, 0], groups=2)
    np.testing.assert_array_equal(y, two)
    assert oracle.activate(np.array([-1.0, 3.0, 7.0]), "relu6").tolist() == [0, 3, 6]
    assert oracle.global_avgpool(x).reshape(-1).tolist() == [7.5]


def test_graph_specs_are_checked():
    with pytest.raises(ValueError, match="names the two or more layers"):
        Add("a", inputs=("x",))
    with pytest.raises(ValueError, match="neither 'input' nor a layer before it"):
        Net("n", (1, 4, 4), (Conv("c", pad=(1, 1)), Add("a", inputs=("c", "later")), Conv("later", pad=(1, 1))))
    with pytest.raises(ValueError, match="adds inputs of different shapes"):
        Net("n", (1, 4, 4), (Conv("c", out_channels=2, pad=(1, 1)), Add("a", inputs=("c", "input"))))
    with pytest.raises(ValueError, match="do not split into 3 groups"):
        Net("n", (4, 4, 4), (Conv("c", out_channels=3, groups=3),))
    with pytest.raises(ValueError, match="windows of padding alone"):
        MaxPool("m", kernel=(2, 2), pad=(2, 2))


def test_the_zoo_kinds_check_their_inputs_and_count_their_flops():
    net = Net("z", (4, 6, 6), (Conv("a", out_channels=2, pad=(1, 1)), Concat("cat", inputs=("input", "a")),
                               GlobalAvgPool("pool"), Mul("gate", "hardsigmoid", inputs=("cat", "pool")),
                               Channels("half", order=(5, 4, 3)), AvgPool("avg", kernel=(3, 3), stride=(2, 2),
                                                                            pad=(1, 1), ceil_mode=True),
                               Dense("fc", out_features=3), Softmax("p")))
    assert [net.out_shape(i) for i in (1, 3, 4, 5, 7)] == [(6, 6, 6), (6, 6, 6), (3, 6, 6), (3, 4, 4), (3,)]
    assert net.layer_features(3) == {Feature.GRAPH, Feature.GATE, Feature.HARDSIGMOID}
    # concat and channel selections move data only; a multiply one per element; an average pool its window
    # and a division; a softmax three per element
    assert [net.layers[i].flops(net.in_shape(i)) for i in (1, 3, 4, 5, 7)] == [0, 6 * 36, 0, 3 * 16 * 10, 9]
    with pytest.raises(ValueError, match=r"cat \(concat\) joins inputs of different heights and widths"):
        Net("n", (1, 4, 4), (MaxPool("m"), Concat("cat", inputs=("input", "m"))))
    with pytest.raises(ValueError, match=r"the second must be the first's, or \(1, 1, 1\)"):
        Net("n", (1, 4, 4), (MaxPool("m"), Mul("mul", inputs=("input", "m"))))
    with pytest.raises(ValueError, match="order names channel 3 of an input of 1"):
        Net("n", (1, 4, 4), (Channels("c", order=(0, 3)),))
    with pytest.raises(ValueError, match="carries no activation"):
        Softmax("s", "relu")
    assert Conv("d", dilation=(2, 2)).features() == {Feature.DILATION}


def test_the_features_a_layer_uses():
    net = Net("n", (4, 6, 6), (Conv("c", "relu6", out_channels=4, pad=(1, 0, 0, 1), groups=2),
                               MaxPool("m", kernel=(3, 3), pad=(1, 1)),
                               Conv("d", "tanh", inputs=("c",), out_channels=4, kernel=(1, 1)),
                               GlobalAvgPool("g"), Dense("f", out_features=3)))
    assert net.layer_features(0) == {Feature.GROUPS, Feature.ASYMMETRIC_PAD, Feature.RELU6}
    assert net.layer_features(1) == {Feature.POOL_PAD}
    assert net.layer_features(2) == {Feature.GRAPH, Feature.TANH}
    assert not net.is_chain and LENET.is_chain and VGG16.is_chain
    assert not any(LENET.layer_features(i) or VGG16.layer_features(i) for i in range(6))


def _runs_adds(name: str) -> bool:
    try:
        return LayerKind.ADD in backends.backend_class(name).supported_kinds
    except ImportError:   # its library is missing: listed, and backend_or_skip says why
        return False


@pytest.mark.parametrize("name", [n for n in backends.names() if not _runs_adds(n)])
def test_every_backend_without_adds_refuses_a_graph_naming_the_kind(name):
    # the one check in backends/base.py, before any work: no device time is spent
    backend = backend_or_skip(name)
    net = Net("g", (2, 5, 5), (Conv("c", out_channels=2, pad=(1, 1)), Add("sum", inputs=("c", "input"))))
    with pytest.raises(Unsupported, match=f"layer sum is a add layer, which {name} cannot run yet"):
        backend.prepare(net, init_weights(net), 1)
    with pytest.raises(Unsupported, match=r"layer c \(conv\) uses grouped convolution"):
        backend.prepare(Net("d", (2, 5, 5), (Conv("c", out_channels=2, groups=2),)), {}, 1)


@pytest.mark.parametrize("name, net, reasons", [
    ("fused", RESNET18, [r"conv2_pool \(maxpool\) uses max-pool padding", r"activations in local memory, here 3,920 KiB"]),
    ("fused", MOBILENET_V2, [r"uses grouped convolution", r"activations in local memory, here 6,664 KiB"]),
    ("morton", RESNET18, ["its two shared buffers hold no residual branch"]),
    ("morton", MOBILENET_V2, ["Morton-ordered GEMM has no grouped form", "no residual branch"]),
])
def test_fused_and_morton_refuse_the_new_nets_with_their_designs_reasons(name, net, reasons):
    # beyond the kinds not written yet, what in the design stands in the way (one line, no device time)
    backend = backend_or_skip(name)
    with pytest.raises(Unsupported) as refused:
        backend.prepare(net, {}, 1)
    text = str(refused.value)
    assert "\n" not in text and all(re.search(r, text) for r in reasons), text


def test_the_reference_keeps_only_what_is_still_read():
    weights, x = init_weights(RESNET18), make_input(RESNET18, 1)
    prepared = NumpyNet(RESNET18, weights, 1)
    outs = prepared.layer_outputs(x)
    assert len(outs) == len(RESNET18.layers) and all(o is not None for o in outs)
    assert compare_arrays(prepared.forward(x), oracle.forward(RESNET18, weights, x)[-1]).passed


def test_tuning_a_graph_net_searches_its_clblast_problems_and_the_tiles_of_its_dense_convs(capsys):
    # the CLBlast backends run ResNet-18: its problems are shown (none searched in the suite's empty cache)
    assert main(["tune", "--net", "resnet18", "--show"]) == 0
    out = capsys.readouterr().out
    assert "gemv 512x49" in out and "gemm 128x784x64" in out   # the average pool's GEMV, a 1x1 stride-2 conv
    # our tiles: each distinct conv with groups 1, alone as a net of its own (it reads that net's input);
    # a depthwise one runs vectorised's kernel, with no tile to search
    from backends.tuning.tiles.search import conv_layers
    from nets import MOBILENET_V2, RESNET18
    found = conv_layers(RESNET18, 1)
    assert len(found) == len({key for key, _, _ in found}) < sum(1 for l in RESNET18.layers if l.kind == "conv")
    for key, one, batch in found:
        assert one.layers[0].inputs == () and one.sources(0) and batch == 1
    assert "n1 in64x56x56 k128 w1x1 s2x2 p0x0" in {key for key, _, _ in found}     # conv3_1's projection
    assert all(one.layers[0].groups == 1 for _, one, _ in conv_layers(MOBILENET_V2, 1))
import numpy as np
import pytest

from nets.errors import UserError
from nets.layouts import chw_rows_to_hwc, hwc_rows_to_chw
from nets import LENET, VGG16, Conv, Dense, MaxPool, Net, Subsample, get_net


def test_lenet_shapes_follow_table_5_1():
    # (layer, output C, H, W) from the study's tables 5.1 and 5.2
    expected = {"c1": (6, 28, 28), "s2": (6, 14, 14), "c3": (16, 10, 10), "s4": (16, 5, 5),
                "f5": (120,), "f6": (84,)}
    assert {layer.name: LENET.out_shape(i) for i, layer in enumerate(LENET.layers)} == expected
    assert LENET.default_batch == 100
    assert all(layer.activation == "sigmoid" for layer in LENET.layers)


def test_lenet_parameters_counted_by_hand():
    # c1 6*25+6, s2 2*6, c3 16*6*25+16, s4 2*16, f5 400*120+120, f6 120*84+84
    assert LENET.params() == 156 + 12 + 2416 + 32 + 48120 + 10164


def test_vgg16_has_the_published_parameter_count():
    assert VGG16.params() == 138_357_544


def test_vgg16_conv_flops_at_batch_1():
    conv = sum(layer.flops(VGG16.in_shape(i)) for i, layer in enumerate(VGG16.layers) if layer.kind == "conv")
    # multiply-adds K*C*9*H*W per layer, worked out by hand
    macs = (64 * 3 * 9 * 224 * 224                      # conv1_1
            + 6 * (64 * 64 * 9 * 224 * 224)             # conv1_2, 2_2, 3_2, 3_3, 4_2, 4_3 have the same count
            + 3 * (128 * 64 * 9 * 112 * 112)            # conv2_1, 3_1, 4_1 likewise
            + 3 * (512 * 512 * 9 * 14 * 14))            # conv5_x
    assert macs == 15_346_630_656
    assert conv == 2 * macs                             # "about 30.7 GFLOP"
    assert VGG16.flops(batch=3) == 3 * VGG16.flops(batch=1)


def test_vgg16_shapes_follow_table_5_4():
    shapes = {layer.name: VGG16.out_shape(i) for i, layer in enumerate(VGG16.layers)}
    assert shapes["conv1_2"] == (64, 224, 224)
    assert shapes["mp1"] == (64, 112, 112)
    assert shapes["conv3_3"] == (256, 56, 56)
    assert shapes["mp5"] == (512, 7, 7)
    assert VGG16.param_shapes()["fc1.weight"] == (25088, 4096)
    assert shapes["fc3"] == (1000,)
    assert [layer.name for layer in VGG16.layers if layer.kind == "maxpool"] == ["mp1", "mp2", "mp3", "mp4", "mp5"]
    assert VGG16.layers[-1].activation == "none"


def test_layer_shapes_with_stride_and_padding():
    conv = Conv("c", out_channels=4, kernel=(5, 3), stride=(2, 3), pad=(2, 1))
    # (11 + 4 - 5) // 2 + 1 = 6, (13 + 2 - 3) // 3 + 1 = 5
    assert conv.out_shape((3, 11, 13)) == (4, 6, 5)
    assert conv.flops((3, 11, 13)) == 2 * 4 * 3 * 15 * 6 * 5
    assert MaxPool("m", kernel=(3, 3), stride=(2, 2)).out_shape((2, 9, 8)) == (2, 4, 3)
    assert Subsample("s").param_shapes((7, 4, 4)) == {"coeff": (7,), "bias": (7,)}
    assert Dense("d", out_features=3).param_shapes((2, 3, 4)) == {"weight": (24, 3), "bias": (3,)}


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="activation"):
        Conv("c", "softmax")
    with pytest.raises(ValueError, match="larger than the padded input"):
        Net("n", (1, 4, 4), (Conv("c", out_channels=1, kernel=(5, 5)),))
    with pytest.raises(ValueError, match="unique"):
        Net("n", (1, 8, 8), (MaxPool("a"), MaxPool("a")))
    with pytest.raises(ValueError, match="follows a dense layer"):
        Net("n", (1, 8, 8), (Dense("d", out_features=4), MaxPool("m")))


def test_get_net_names_the_choices():
    assert get_net("vgg16") is VGG16
    with pytest.raises(UserError, match="unknown net 'alexnet': choose one of lenet, vgg16"):
        get_net("alexnet")


def test_dense_row_permutation_matches_the_flatten_orders():
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)   # N, C, H, W
    w = np.random.default_rng(2).standard_normal((3 * 4 * 5, 7)).astype(np.float32)  # rows in C,H,W order
    ours = x.reshape(2, -1) @ w
    nhwc_order = x.transpose(0, 2, 3, 1).reshape(2, -1) @ chw_rows_to_hwc(w, (3, 4, 5))
    np.testing.assert_allclose(nhwc_order, ours, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(hwc_rows_to_chw(chw_rows_to_hwc(w, (3, 4, 5)), (3, 4, 5)), w)

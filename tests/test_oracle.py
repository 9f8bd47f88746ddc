"""The oracle against cases worked out by hand (the numbers are in the comments)."""
import numpy as np
from numpy.testing import assert_allclose

from compare import oracle
from nets import Conv, Dense, MaxPool, Net, Subsample

X16 = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)   # rows 0-3, 4-7, 8-11, 12-15
DIAG = np.eye(3).reshape(1, 1, 3, 3)


def test_conv_3x3_diagonal_filter():
    # out[i,j] = x[i,j] + x[i+1,j+1] + x[i+2,j+2] + 0.5
    y = oracle.conv(X16, DIAG, [0.5])
    assert_allclose(y, [[[[0 + 5 + 10 + .5, 1 + 6 + 11 + .5], [4 + 9 + 14 + .5, 5 + 10 + 15 + .5]]]])


def test_conv_3x3_with_padding():
    y = oracle.conv(X16, DIAG, [0.5], pad=(1, 1))
    assert y.shape == (1, 1, 4, 4)
    assert y[0, 0, 0, 0] == 0 + 5 + 0.5        # the tap above-left is padding
    assert y[0, 0, 3, 3] == 10 + 15 + 0.5      # the tap below-right is padding
    assert y[0, 0, 1, 2] == 1 + 6 + 11 + 0.5   # an inner point sees no padding


def test_conv_sums_over_channels_and_keeps_kernels_apart():
    x = np.concatenate([X16, np.ones_like(X16)], axis=1)      # channel 1 is all ones
    w = np.zeros((2, 2, 3, 3))
    w[0, 0] = np.eye(3)        # kernel 0 reads only channel 0's diagonal
    w[1, 1] = 1.0              # kernel 1 sums channel 1's 3x3 window: 9
    y = oracle.conv(x, w, [0.5, -1.0])
    assert_allclose(y[0, 0], [[15.5, 18.5], [27.5, 30.5]])
    assert_allclose(y[0, 1], [[8, 8], [8, 8]])


def test_conv_stride_2():
    x = np.arange(25, dtype=np.float64).reshape(1, 1, 5, 5)
    y = oracle.conv(x, np.ones((1, 1, 3, 3)), [0], stride=(2, 2))
    # window sums: rows 0-2 x cols 0-2 = 54, cols 2-4 = 72; rows 2-4: 144, 162
    assert_allclose(y, [[[[54, 72], [144, 162]]]])


def test_subsampling_2x2():
    # window means 2.5, 4.5, 10.5, 12.5; times 2 plus 1
    y = oracle.subsample(X16, coeff=[2.0], bias=[1.0])
    assert_allclose(y, [[[[6, 10], [22, 26]]]])


def test_maxpool_2x2_and_overlapping_3x3():
    x = np.array([[1, 3, 2, 0], [4, -1, 5, 6], [7, 8, -3, 2], [0, 9, 1, 1]], np.float64).reshape(1, 1, 4, 4)
    assert_allclose(oracle.maxpool(x), [[[[4, 6], [9, 2]]]])
    assert_allclose(oracle.maxpool(x, kernel=(3, 3), stride=(1, 1)), [[[[8, 8], [9, 9]]]])


def test_dense_flattens_c_h_w():
    x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 2, 1, 2)   # flattened: 1, 2, 3, 4
    w = np.array([[1, 0], [0, 1], [1, 1], [0, 0]], np.float64)
    assert_allclose(oracle.dense(x, w, [0.5, -0.5]), [[1 + 3 + .5, 2 + 3 - .5]])


def test_activations():
    assert_allclose(oracle.activate(np.array([-1.0, 2.0]), "relu"), [0, 2])
    assert_allclose(oracle.activate(np.array([0.0, np.log(3)]), "sigmoid"), [0.5, 0.75])
    assert_allclose(oracle.activate(np.array([-1.0]), "none"), [-1])


def test_forward_chains_layers_and_applies_activations():
    net = Net("tiny", (1, 4, 4), (Conv("c", "relu", out_channels=1, kernel=(3, 3)),
                                  MaxPool("m", kernel=(2, 2), stride=(2, 2)),
                                  Subsample("s", "none", kernel=(1, 1), stride=(1, 1)),
                                  Dense("d", "sigmoid", out_features=1)))
    w = {"c.weight": -DIAG, "c.bias": np.array([20.0]),       # 20 minus diagonal sums 15, 18, 27, 30
         "s.coeff": np.array([2.0]), "s.bias": np.array([0.0]),
         "d.weight": np.array([[1.0]]), "d.bias": np.array([-9.0])}
    outs = oracle.forward(net, w, X16)
    assert_allclose(outs[0], [[[[20 - 15, 20 - 18], [0, 0]]]])   # ReLU clips -7, -10
    assert_allclose(outs[1], [[[[5]]]])
    assert_allclose(outs[2], [[[[10]]]])
    assert_allclose(outs[3], [[1 / (1 + np.exp(-1))]])

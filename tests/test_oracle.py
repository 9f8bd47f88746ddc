"""The oracle against cases worked out by hand (the numbers are in the comments)."""
import numpy as np
from numpy.testing import assert_allclose

from compare import oracle
from nets import AvgPool, Channels, Concat, Conv, Dense, MaxPool, Mul, Net, Softmax, Subsample

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


def test_dilated_conv_spaces_its_taps():
    # a 2x2 filter of ones, dilation 2: each output sums x[i, j], x[i, j+2], x[i+2, j], x[i+2, j+2]
    y = oracle.conv(X16, np.ones((1, 1, 2, 2)), [0.0], dilation=(2, 2))
    assert_allclose(y, [[[[0 + 2 + 8 + 10, 1 + 3 + 9 + 11], [4 + 6 + 12 + 14, 5 + 7 + 13 + 15]]]])
    assert Conv("d", kernel=(3, 3), dilation=(2, 1)).out_shape((1, 9, 9)) == (1, 5, 7)


def test_padded_average_pool_counts_the_padding_or_not():
    # 3x3 windows, stride 2, one row and column of padding around the 4x4 input
    with_pad = oracle.avgpool(X16, (3, 3), (2, 2), pad=(1, 1), count_include_pad=True)
    without = oracle.avgpool(X16, (3, 3), (2, 2), pad=(1, 1), count_include_pad=False)
    # window (0, 0) holds x[0:2, 0:2] = 0 + 1 + 4 + 5 and five padding zeros; (0, 1) x[0:2, 1:4] = 24
    assert_allclose(with_pad[0, 0, 0], [10 / 9, 24 / 9])
    assert_allclose(without[0, 0, 0], [10 / 4, 24 / 6])
    # window (1, 1) is all input: 5+6+7+9+10+11+13+14+15 = 90, nine elements either way
    assert with_pad[0, 0, 1, 1] == without[0, 0, 1, 1] == 10


def test_ceil_mode_average_pool_never_counts_the_overhang():
    x = np.arange(25, dtype=np.float64).reshape(1, 1, 5, 5)
    y = oracle.avgpool(x, (2, 2), (2, 2), ceil_mode=True)
    assert y.shape == (1, 1, 3, 3)                           # floor mode: 2x2
    assert y[0, 0, 0, 2] == (4 + 9) / 2 and y[0, 0, 2, 0] == (20 + 21) / 2 and y[0, 0, 2, 2] == 24
    # with padding 1 on the 4x4 input: window (2, 2) covers input row/column 3, the padding's 4, the overhang's 5
    z = oracle.avgpool(X16, (3, 3), (2, 2), pad=(1, 1), ceil_mode=True, count_include_pad=True)
    assert z.shape == (1, 1, 3, 3) and z[0, 0, 2, 2] == 15 / 4    # x[3, 3] over 2 x 2 counted (PyTorch's rule)
    assert oracle.avgpool(X16, (3, 3), (2, 2), pad=(1, 1), ceil_mode=True, count_include_pad=False)[0, 0, 2, 2] == 15


def test_the_spec_divisors_and_shapes_agree_with_the_hand_counts():
    pool = AvgPool("p", kernel=(3, 3), stride=(2, 2), pad=(1, 1), ceil_mode=True, count_include_pad=True)
    assert pool.out_shape((1, 4, 4)) == (1, 3, 3) and pool.overhang((1, 4, 4)) == (1, 1)
    # windows start at rows -1, 1, 3: counted rows -1..1, 1..3, and 3..4 (5 is past the padding)
    assert_allclose(pool.divisors((1, 4, 4)), [[9, 9, 6], [9, 9, 6], [6, 6, 4]])
    # without the padding: rows 0..1, 1..3, 3 alone
    exclude = AvgPool("e", kernel=(3, 3), stride=(2, 2), pad=(1, 1), ceil_mode=True, count_include_pad=False)
    assert_allclose(exclude.divisors((1, 4, 4)), [[4, 6, 2], [6, 9, 3], [2, 3, 1]])
    # the last window would start in the padding after the input: ceil mode drops it
    assert AvgPool("q", kernel=(2, 2), stride=(2, 2), pad=(1, 1), ceil_mode=True).out_shape((1, 4, 4)) == (1, 3, 3)


def test_concat_multiply_channels_and_softmax():
    a, b = X16[:, :, :2, :2], 10 * X16[:, :, :2, :2]          # [[0, 1], [4, 5]] and ten times it
    assert_allclose(oracle.concat([a, b])[0, :, 1, 1], [5, 50])
    gate = np.array([2.0, -1.0]).reshape(1, 2, 1, 1)
    assert_allclose(oracle.multiply(oracle.concat([a, b]), gate)[0, :, 0, 1], [2, -10])
    three = oracle.concat([a, b, a + 1])
    assert_allclose(oracle.channels(three, (2, 0))[0, :, 1, 0], [5, 4])
    # softmax of (0, log 3): e^0 / (1 + 3), 3 / 4
    assert_allclose(oracle.softmax(np.array([[0.0, np.log(3)]]).reshape(1, 2, 1, 1)), [[0.25, 0.75]])


def test_the_newer_activations():
    # hardsigmoid = relu6(x + 3) / 6; hardswish = x * that; silu = x * sigmoid(x)
    assert_allclose(oracle.activate(np.array([-4.0, -3.0, 0.0, 1.5, 3.0, 9.0]), "hardsigmoid"),
                    [0, 0, 0.5, 0.75, 1, 1])
    assert_allclose(oracle.activate(np.array([-4.0, 1.0, 4.0]), "hardswish"), [0, 4 / 6, 4])
    assert_allclose(oracle.activate(np.array([0.0, np.log(3)]), "silu"), [0, 0.75 * np.log(3)])


def test_forward_feeds_each_new_layer_its_inputs():
    net = Net("g", (1, 4, 4), (Channels("keep", order=(0, 0)),                 # the input twice
                               Mul("sq", inputs=("keep", "keep")),             # squared, elementwise
                               Concat("both", inputs=("input", "sq")),
                               AvgPool("avg", kernel=(4, 4), stride=(1, 1)),   # the mean of each channel
                               Softmax("p")))
    outs = oracle.forward(net, {}, X16)
    assert outs[2].shape == (1, 3, 4, 4)
    means = [7.5, np.mean(np.arange(16) ** 2), np.mean(np.arange(16) ** 2)]
    assert_allclose(outs[3].reshape(-1), means)
    assert_allclose(outs[4], [np.exp(means) / np.exp(means).sum()])

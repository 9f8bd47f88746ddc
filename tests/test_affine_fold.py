"""A batch norm that cannot fold into the convolution before it becomes the
per-channel affine map it is (a depthwise 1x1 convolution), and such a map
folds into the convolution after it where that is exact (nets/affine.py):
the outputs through the float64 oracle stay the same either way."""
import numpy as np
import pytest

from compare import oracle
from nets import BatchNorm, Concat, Conv, LayerKind, Net
from nets.affine import fold_channel_affines
from nets.batchnorm import fold_batchnorm
from nets.weights import init_weights


def _affine_then_conv(pad, groups):
    return Net("a", (4, 6, 6), (Conv("affine", out_channels=4, kernel=(1, 1), groups=4),
                                Conv("c", "relu", out_channels=6, kernel=(3, 3), pad=pad, groups=groups)))


@pytest.mark.parametrize("pad, groups, zero_shift, folds", [
    ((0, 0), 1, False, True), ((0, 0), 2, False, True), ((1, 1), 1, True, True),
    ((1, 1), 1, False, False),    # the padding would read zeros of x, not of x * a + b
])
def test_an_affine_map_folds_into_the_conv_after_it_where_exact(pad, groups, zero_shift, folds):
    net = _affine_then_conv(pad, groups)
    weights = init_weights(net, 3)
    if zero_shift:
        weights["affine.bias"][:] = 0
    x = np.random.default_rng(1).standard_normal((2, 4, 6, 6)).astype(np.float32)
    folded, folded_weights = fold_channel_affines(net, weights)
    assert len(folded.layers) == (1 if folds else 2)
    assert folded.layers[-1].inputs == () and "affine.weight" in weights   # the caller's dict is untouched
    np.testing.assert_allclose(oracle.forward(folded, folded_weights, x)[-1], oracle.forward(net, weights, x)[-1],
                               rtol=1e-5, atol=1e-5)


def test_a_batch_norm_after_a_concat_becomes_a_depthwise_1x1_conv():
    net = Net("d", (3, 5, 5), (Conv("c", out_channels=2, pad=(1, 1)), Concat("cat", inputs=("input", "c")),
                               BatchNorm("bn", "relu"), Conv("after", out_channels=4, kernel=(1, 1))))
    weights = init_weights(net, 2)
    x = np.random.default_rng(2).standard_normal((1, 3, 5, 5)).astype(np.float32)
    folded, folded_weights = fold_batchnorm(net, weights)
    bn = folded.layers[folded.layer_index("bn")]
    assert bn.kind == LayerKind.CONV and bn.groups == bn.out_channels == 5 and bn.activation == "relu"
    np.testing.assert_allclose(oracle.forward(folded, folded_weights, x)[-1], oracle.forward(net, weights, x)[-1],
                               rtol=1e-5, atol=1e-5)
    # its relu keeps it from folding into the conv after it
    assert fold_channel_affines(folded, folded_weights)[0] == folded

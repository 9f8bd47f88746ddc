import numpy as np
import pytest

from nets.errors import UserError
from nets.weights import init_weights, load_weights, make_input, save_weights
from nets import LENET, VGG16


def test_weights_are_deterministic_and_complete():
    a, b = init_weights(LENET, seed=3), init_weights(LENET, seed=3)
    assert set(a) == set(LENET.param_shapes())
    for key in a:
        assert a[key].dtype == np.float32 and a[key].shape == LENET.param_shapes()[key]
        np.testing.assert_array_equal(a[key], b[key])
    c = init_weights(LENET, seed=4)
    assert not np.array_equal(a["c1.weight"], c["c1.weight"])


def test_vgg_weights_keep_activations_in_range():
    # He-scaled weights: the logits of a [0,1) image stay neither tiny nor huge
    from compare import oracle
    w = init_weights(VGG16, 0)
    out = oracle.forward(VGG16, w, make_input(VGG16, 1, 0))
    for layer, y in zip(VGG16.layers, out):
        rms = float(np.sqrt(np.mean(y ** 2)))
        assert 0.05 < rms < 50, (layer.name, rms)


def test_round_trip(tmp_path):
    w = init_weights(LENET, 1)
    path = tmp_path / "w.npz"
    save_weights(path, w)
    back = load_weights(path, LENET)
    for key in w:
        np.testing.assert_array_equal(back[key], w[key])


def _save_raw(path, arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize("change, message", [
    (lambda w: w.pop("f5.bias"), r"lacks array 'f5.bias' of shape \(120,\)"),
    (lambda w: w.__setitem__("f7.weight", np.zeros(3, np.float32)), "has array 'f7.weight', which net lenet does not use"),
    (lambda w: w.__setitem__("c1.weight", np.zeros((6, 1, 3, 3), np.float32)), r"'c1.weight' .* has shape \(6, 1, 3, 3\), net lenet needs \(6, 1, 5, 5\)"),
    (lambda w: w["s2.coeff"].__setitem__(0, np.nan), "'s2.coeff' .* holds NaN or Inf"),
    (lambda w: w.__setitem__("s2.bias", np.zeros(6, np.int32)), "'s2.bias' .* has dtype int32"),
])
def test_bad_weights_files_are_refused_naming_the_array(tmp_path, change, message):
    w = init_weights(LENET, 0)
    change(w)
    path = tmp_path / "bad.npz"
    _save_raw(path, w)
    with pytest.raises(UserError, match=message):
        load_weights(path, LENET)


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_weights(tmp_path / "nope.npz", LENET)
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04 this is not a zip")
    with pytest.raises(UserError, match="not a readable .npz"):
        load_weights(corrupt, LENET)


def test_input_is_seeded_images():
    x = make_input(LENET, 4, seed=2)
    assert x.shape == (4, 1, 32, 32) and x.dtype == np.float32
    assert 0 <= x.min() and x.max() < 1
    np.testing.assert_array_equal(x, make_input(LENET, 4, seed=2))

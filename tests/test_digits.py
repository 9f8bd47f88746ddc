"""Real data: the digits' scaling and split, the committed trained weights,
the accuracy bookkeeping, and a 1-epoch smoke run of the training script
whose converted weights must reproduce Keras's own outputs."""

import numpy as np
import pytest

from backends.isolated import call_isolated
from backends.reference.numpy_backend import NumpyNet
from compare import digits
from compare.checking import compare_arrays
from nets.errors import UserError
from compare.results import BackendDigits, RunResult, decode
from compare.runner import Outputs
from nets.weights import load_weights, validate_weights
from nets import LENET, VGG16

from conftest import backend_or_skip
from results_factory import small_results_dict


@pytest.fixture(scope="module")
def data():
    return digits.split()


def test_images_are_8x8_digits_as_3x3_blocks_in_a_32x32_field():
    from sklearn.datasets import load_digits
    x, y = digits.load_digits_32()
    raw = load_digits()
    assert x.shape == (1797, 1, 32, 32) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
    i = 123
    for r, c in [(0, 0), (3, 5), (7, 7)]:
        block = x[i, 0, 4 + 3 * r:7 + 3 * r, 4 + 3 * c:7 + 3 * c]
        assert np.all(block == np.float32(raw.images[i, r, c] / 16))
    border = np.ones((32, 32), bool)
    border[4:28, 4:28] = False
    assert not np.any(x[:, 0][:, border])
    np.testing.assert_array_equal(y, raw.target)


def test_the_split_is_fixed_disjoint_and_covers_everything(data):
    x_train, y_train, x_test, y_test = data
    assert len(x_train) == 1437 and len(x_test) == digits.HELD_OUT == 360
    again = digits.split()
    np.testing.assert_array_equal(again[2], x_test)
    np.testing.assert_array_equal(again[3], y_test)
    # no held-out image is a training image (the dataset itself has no duplicates among these)
    train_rows = {row.tobytes() for row in x_train.reshape(len(x_train), -1)}
    assert not any(row.tobytes() in train_rows for row in x_test.reshape(len(x_test), -1))
    assert set(np.unique(y_test)) == set(range(10))


def test_the_committed_weights_classify_the_held_out_digits(data):
    weights = load_weights(digits.TRAINED_WEIGHTS, LENET)
    _, _, x_test, y_test = data
    out = NumpyNet(LENET, weights, len(x_test)).forward(x_test)
    assert np.mean(digits.predictions(out) == y_test) >= 0.97


def test_predictions_read_the_first_ten_outputs():
    out = np.zeros((2, 84), np.float32)
    out[0, 3] = 0.9
    out[1, 7] = 0.8
    out[:, 50] = 1.0     # beyond the class units: ignored
    np.testing.assert_array_equal(digits.predictions(out), [3, 7])


def test_held_out_input_refuses_other_nets_and_too_large_batches():
    with pytest.raises(UserError, match="1x32x32 images"):
        digits.held_out_input(VGG16, None)
    with pytest.raises(UserError, match="--batch 400 is more than the 360 held-out digits"):
        digits.held_out_input(LENET, 400)
    x, source = digits.held_out_input(LENET, 50)
    assert x.shape == (50, 1, 32, 32) and source["kind"] == "digits"


def _results(outputs: dict, batch: int, ref):
    d = small_results_dict()
    d["net"]["batch"] = batch
    d["backends"] = ([{"name": n, "status": "OK"} for n in outputs]
                     + [{"name": "morton", "status": "UNAVAILABLE", "reason": "not here"}])
    return decode(RunResult, d), Outputs(ref, dict(outputs))


def test_accuracy_counts_predictions_that_differ_from_numpy(data):
    y_test = data[3][:20]
    good = np.eye(84, dtype=np.float32)[y_test]
    off = good.copy()
    off[4] = np.eye(84, dtype=np.float32)[(y_test[4] + 1) % 10]     # one image predicted differently
    results, outputs = _results({"numpy": good, "other": off}, 20, good.astype(np.float64))
    digits.add_accuracy(results, outputs)
    numpy_entry, other, missing = results.backends
    assert numpy_entry.digits == BackendDigits(1.0, 0)
    assert other.digits == BackendDigits(0.95, 1)
    assert missing.digits is None
    assert results.digits.oracle_accuracy == 1.0 and results.digits.compared_with == "numpy"
    assert digits.disagreements(results) == ["other"]
    table = digits.accuracy_table(results)
    assert "top-1 accuracy on 20 held-out digits" in table
    assert "predictions differing from numpy" in table and "95.00%" in table and "not here" in table


def test_without_numpy_the_oracle_is_the_comparison(data):
    y_test = data[3][:10]
    good = np.eye(84, dtype=np.float32)[y_test]
    results, outputs = _results({"other": good}, 10, good.astype(np.float64))
    digits.add_accuracy(results, outputs)
    assert results.digits.compared_with == "oracle" and results.backends[0].digits.differ == 0


def test_training_script_smoke_and_its_weight_conversion(data):
    backend_or_skip("tensorflow")   # the script trains with Keras, in a child process (tests/keras_models.py)
    weights, keras_out = call_isolated("digits training", "keras_models", "train_digits_smoke")
    validate_weights(weights, LENET, "smoke")
    x_test = data[2]
    ours = NumpyNet(LENET, weights, len(x_test)).forward(x_test)
    result = compare_arrays(ours, keras_out.astype(np.float64))   # converted layouts give Keras's own outputs
    assert result.passed, result

"""Keras models in: a Sequential model built here, saved as .keras and .h5,
imported, and run by our numpy backend must give Keras's own outputs;
unsupported layers are refused with the layer named.

Keras runs in a child process (tests/keras_models.py through
backends.isolated): TensorFlow must not load beside PoCL in this one."""
import json
import sys

import numpy as np
import pytest

from backends.isolated import Worker
from backends.reference.numpy_backend import NumpyNet
from compare.checking import compare_arrays
from compare.cli import main
from compare.models import load_net
from nets.errors import UserError

from conftest import backend_or_skip


@pytest.fixture(scope="module")
def keras_child():
    backend_or_skip("tensorflow")   # Keras comes with the tensorflow extra
    worker = Worker("keras test models")
    yield worker
    worker.close()


@pytest.fixture(scope="module")
def saved(keras_child, tmp_path_factory):
    x = np.random.default_rng(0).random((3, 3, 20, 18), dtype=np.float32)
    paths, keras_out = keras_child.call("keras_models", "save", "small_model",
                                        str(tmp_path_factory.mktemp("keras")), x)
    return paths, x, keras_out


@pytest.mark.parametrize("suffix", ["keras", "h5"])
def test_a_saved_model_round_trips(saved, suffix):
    paths, x, keras_out = saved
    net, weights = load_net(paths[suffix])
    assert net.name == "small-model" and net.input_shape == (3, 20, 18)
    assert [layer.kind for layer in net.layers] == ["conv", "conv", "maxpool", "conv", "conv", "subsample",
                                                     "dense", "dense"]
    assert [layer.activation for layer in net.layers] == ["relu", "relu", "none", "sigmoid", "none", "sigmoid",
                                                           "relu", "sigmoid"]
    assert net.layers[0].name == "conv_a" and net.layers[3].pad == (1, 1) and net.layers[3].stride == (1, 2)
    assert "Dropout" in net.description
    result = compare_arrays(NumpyNet(net, weights, len(x)).forward(x), keras_out.astype(np.float64))
    assert result.passed, result


def test_the_import_leaves_tensorflow_out_of_this_process(saved):
    load_net(saved[0]["keras"])
    assert "tensorflow" not in sys.modules and "keras" not in sys.modules


def test_tensorflow_backend_runs_an_imported_model(saved):
    paths, x, keras_out = saved
    net, weights = load_net(paths["keras"])
    prepared = backend_or_skip("tensorflow").prepare(net, weights, len(x))
    try:
        assert compare_arrays(prepared.forward(x), keras_out.astype(np.float64)).passed
    finally:
        prepared.close()


def test_compare_run_takes_a_model_file(saved, tmp_path, capsys):
    paths = saved[0]
    out = tmp_path / "r.json"
    code = main(["run", "--net", paths["h5"], "--backends", "numpy", "--batch", "2", "--repeats", "1",
                 "--warmup", "1", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    assert data["net"]["name"] == "small-model"
    weights = data["sources"]["weights"]
    assert (weights["kind"], weights["path"], weights["seed"]) == ("file", paths["h5"], None)
    assert len(weights["sha256_16"]) == 16
    assert data["backends"][0]["check"]["status"] == "PASS"


def test_same_padding_at_stride_2_matches_keras_where_it_is_symmetric(keras_child, tmp_path):
    x = np.random.default_rng(1).standard_normal((2, 2, 9, 7)).astype(np.float32)
    paths, keras_out = keras_child.call("keras_models", "save", "stride2_same_model", str(tmp_path), x, ("keras",))
    net, weights = load_net(paths["keras"])
    assert net.layers[0].pad == (1, 1) and net.output_shape == (3, 5, 4)
    got = NumpyNet(net, weights, 2).forward(x)
    assert compare_arrays(got, keras_out.astype(np.float64)).passed


@pytest.mark.parametrize("case, words", [
    ("zero-padding", ["ends in a ZeroPadding2D", "before the convolution or pooling it belongs to"]),
    ("selu", ["layer s (Activation)", "activation 'selu' is not supported"]),
    ("cropping-channels-first", ["layer crop (Cropping2D)", "data_format 'channels_first' is not supported"]),
    ("softmax-on-pixels", ["layer pixelwise (Dense)", "a softmax on each pixel's channels is not supported"]),
    ("relu5", ["layer relu5 (ReLU)", "plain ReLU or ReLU6"]),
    ("activation-first", ["an activation before any other layer"]),
    ("leaky-relu", ["layer leaky (LeakyReLU)", "not supported"]),
    ("flatten-last", ["a Flatten must be followed by a Dense layer"]),
    ("flatten-twice", ["layer again (Flatten)", "follows a Flatten or Dense"]),
    ("flat-input", ["is not a fixed (H, W, C) image"]),
    ("shared-layer", ["layer twice_used is used 2 times"]),
    ("dense-branch-activation", ["layer act (Activation)", "also read by another layer", "not an image"]),
])
def test_unsupported_models_are_refused_by_name(keras_child, case, words):
    message = keras_child.call("keras_models", "refusal", case)
    assert message, f"{case} was imported, not refused"
    for word in words:
        assert word in message, message


def test_a_functional_model_with_skips_and_batch_norms_matches_keras(keras_child, tmp_path):
    x = np.random.default_rng(3).standard_normal((2, 3, 12, 12)).astype(np.float32)
    paths, keras_out = keras_child.call("keras_models", "save", "functional_model", str(tmp_path), x, ("keras",))
    net, weights = load_net(paths["keras"])
    kinds = [layer.kind for layer in net.layers]
    assert "batchnorm" not in kinds and kinds.count("add") == 1 and "global_avgpool" in kinds   # folded on load
    dw = net.layers[[layer.name for layer in net.layers].index("dw")]
    assert dw.groups == 8 and dw.pad == (0, 0, 1, 1) and dw.activation == "relu6"
    assert net.layers[[layer.name for layer in net.layers].index("skip")].activation == "relu"
    got = NumpyNet(net, weights, 2).forward(x)
    assert compare_arrays(got, keras_out.astype(np.float64)).passed


def test_the_zoo_layers_match_keras(keras_child, tmp_path):
    # issue 36: ZeroPadding2D, Rescaling, Normalization, Concatenate, Multiply by a gate, swish, hard_swish,
    # SeparableConv2D, 'same' average pooling, a dilated depthwise conv, softmax
    x = (np.random.default_rng(4).random((2, 3, 16, 16)) * 255).astype(np.float32)
    paths, keras_out = keras_child.call("keras_models", "save", "zoo_model", str(tmp_path), x, ("keras",))
    net, weights = load_net(paths["keras"])
    kinds = [layer.kind for layer in net.layers]
    assert {"concat", "mul", "avgpool", "softmax"} <= set(kinds) and kinds[-1] == "softmax"
    layer = {layer.name: layer for layer in net.layers}
    assert layer["stem"].pad == (0, 0, 1, 1) and layer["stem"].activation == "silu"   # the ZeroPadding2D's zeros
    assert layer["d"].pad == (1, 1) and layer["b"].activation == "hardswish" and layer["expand"].activation == \
        "hardsigmoid"
    assert layer["dilated"].dilation == (2, 2) and not layer["c"].count_include_pad
    # Rescaling then Normalization: one affine map (the second took the first); its shift keeps it out of the
    # padded stem
    affine = [layer for layer in net.layers if layer.kind == "conv" and layer.kernel == (1, 1) and layer.groups == 3]
    assert len(affine) == 1 and net.layers[0] is affine[0]
    got = NumpyNet(net, weights, 2).forward(x)
    assert compare_arrays(got, keras_out.astype(np.float64)).passed


def test_an_activation_on_a_tensor_read_elsewhere_is_a_layer_of_its_own(keras_child):
    # ResNet-v2's and NASNet's: the activation's input also feeds another branch
    for case in ("branch-activation", "second-activation"):
        assert keras_child.call("keras_models", "refusal", case) == "", case


def test_a_refusal_crosses_the_process_boundary_as_a_user_error(keras_child, tmp_path):
    with pytest.raises(UserError, match="not found"):
        keras_child.call("nets.keras_import", "load_keras", str(tmp_path / "none.keras"))


def test_file_errors_are_one_line(tmp_path, capsys):
    assert main(["check", "--net", str(tmp_path / "none.keras"), "--backends", "numpy"]) == 2
    assert capsys.readouterr().err == f"error: Keras model file {tmp_path / 'none.keras'} not found\n"
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not a model")
    assert main(["check", "--net", str(bad), "--backends", "numpy"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: Keras model file {bad} is not a valid model file: not an HDF5 file (a .h5 model is one); " \
                  f"save the model again\n"


def _cut_short(path, write):
    """A model file written by `write`, then cut to half its length, as an interrupted copy leaves it."""
    write(path)
    whole = path.read_bytes()
    path.write_bytes(whole[:len(whole) // 2])


def _zip_like_keras(path):   # a .keras file is a zip of the config and the weights (an .h5 inside)
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3"}))
        z.writestr("config.json", json.dumps({"class_name": "Sequential", "config": {"layers": []}}))
        z.writestr("model.weights.h5", np.random.default_rng(0).bytes(20000))


def _hdf5(path):
    backend_or_skip("tensorflow")   # h5py comes with Keras, in the tensorflow extra: `make test` has it
    import h5py
    with h5py.File(path, "w") as f:
        f["weights"] = np.random.default_rng(0).random((50, 50))


@pytest.mark.parametrize("name, write, why", [
    ("cut.keras", _zip_like_keras, "truncated, or not a zip archive (a .keras file is one)"),
    ("cut.h5", _hdf5, "a truncated HDF5 file"),
])
def test_a_model_file_cut_short_is_called_invalid_not_missing(tmp_path, capsys, name, write, why):
    path = tmp_path / name
    _cut_short(path, write)
    assert main(["check", "--net", str(path), "--backends", "numpy"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: Keras model file {path} is not a valid model file: {why}; save the model again\n"

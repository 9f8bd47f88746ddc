"""ONNX models in: small ResNet- and MobileNet-shaped models built in PyTorch,
exported with torch.onnx.export, imported, and run by our reference, must
give PyTorch's own outputs; operators and attributes we lack are refused in
one line naming the node (exit 2).  The batch norms are exported as such and
folded on import, so these also check the fold against PyTorch's unfolded model."""
import json

import numpy as np
import pytest

from conftest import module_or_skip

module_or_skip("onnx", "test")
module_or_skip("torch", "torch-cpu")

import onnx_models   # noqa: E402 - needs torch, checked above

from backends.reference.numpy_backend import NumpyNet   # noqa: E402
from compare import oracle   # noqa: E402
from compare.checking import compare_arrays   # noqa: E402
from compare.cli import main   # noqa: E402
from nets.errors import UserError   # noqa: E402
from compare.models import load_net   # noqa: E402
from nets import LayerKind   # noqa: E402
from nets.onnx_import import load_onnx   # noqa: E402

STYLES = ["resnet-style", "mobilenet-style"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx")
    x = np.random.default_rng(0).random((2, 3, 32, 32), dtype=np.float32)
    out = {}
    for name in STYLES + ["dilated", "leaky", "fixed-batch", "sigmoid-beside"] + onnx_models.ZOO_BLOCKS:
        path = folder / f"{name}.onnx"
        out[name] = (str(path), onnx_models.export(name, str(path), x))
    return out, x


@pytest.mark.parametrize("name", STYLES)
def test_the_reference_gives_pytorchs_output(exported, name):
    models, x = exported
    path, torch_out = models[name]
    net, weights = load_net(path)
    assert net.output_shape == (10,)
    assert LayerKind.BATCHNORM not in {layer.kind for layer in net.layers}    # every one folded
    assert LayerKind.ADD in {layer.kind for layer in net.layers}
    result = compare_arrays(NumpyNet(net, weights, len(x)).forward(x), torch_out.astype(np.float64))
    assert result.passed, result


@pytest.mark.parametrize("name", onnx_models.ZOO_BLOCKS + ["dilated"])
def test_the_zoo_blocks_give_pytorchs_output(exported, name):
    # SqueezeNet's fire module, DenseNet's dense block, ShuffleNet-v2's units, an Inception block,
    # MobileNet-v3's and EfficientNet's blocks, a dilated conv: imported, folded, run by the reference
    models, x = exported
    path, torch_out = models[name]
    net, weights = load_net(path)
    assert LayerKind.BATCHNORM not in {layer.kind for layer in net.layers}
    result = compare_arrays(NumpyNet(net, weights, len(x)).forward(x), torch_out.astype(np.float64))
    assert result.passed, result


def test_the_zoo_blocks_import_as_the_kinds_they_are(exported):
    def kinds(name):
        net, _ = load_net(exported[0][name][0])
        return [layer.kind for layer in net.layers], net
    fire, _ = kinds("fire")
    assert fire.count(LayerKind.CONCAT) == 1 and fire[0] == LayerKind.MAXPOOL
    # a shuffle before a 1x1 conv is folded into its weights; the half that goes on unconvolved is selected
    shuffle, net = kinds("shuffle-unit")
    assert shuffle.count(LayerKind.CHANNELS) == 2 and net.layers[-1].kind == LayerKind.CHANNELS
    inception, net = kinds("inception")
    pools = [layer for layer in net.layers if layer.kind == LayerKind.AVGPOOL]
    assert [p.count_include_pad for p in pools] == [True, False] and pools[1].ceil_mode
    # the ceil-mode max-pool as padding at the bottom and right: 3x3 windows, stride 2, on 32: 16, not floor's 15
    assert net.out_shape(0) == (3, 16, 16) and net.layers[0].padding == (0, 0, 1, 1)
    # 3x3/2, padding 1, on 16: ceil's 9 windows, the last running one past the padding
    assert net.layers[-1].kind == LayerKind.AVGPOOL and net.output_shape == (22, 9, 9)
    v3, net = kinds("mobilenet-v3-block")
    assert {layer.activation for layer in net.layers} >= {"hardswish", "hardsigmoid"} and LayerKind.MUL in v3
    mb, net = kinds("mbconv")
    assert "silu" in {layer.activation for layer in net.layers} and LayerKind.MUL in mb
    dense, net = kinds("dense-block")
    # each pre-activation batch norm reads a concatenation: a depthwise 1x1 conv, its ReLU kept
    assert any(layer.kind == LayerKind.CONV and layer.groups == layer.out_channels > 1 and layer.kernel == (1, 1)
               and layer.activation == "relu" for layer in net.layers)


def test_a_reshape_that_fixes_the_batch_runs_at_that_batch_only(exported, capsys, tmp_path):
    # issue 35: a Reshape to (1, features) ran at --batch 2 as if it were a flatten
    path = exported[0]["fixed-batch"][0]
    net, _ = load_net(path)
    assert net.fixed_batch == 1 and net.default_batch == 1
    assert main(["check", "--net", path, "--batch", "2", "--backends", "numpy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runs at batch 1 only" in err and "--batch 1" in err, err
    np.save(tmp_path / "x.npy", exported[1])   # an input file of two images: refused the same
    assert main(["check", "--net", path, "--input", str(tmp_path / "x.npy"), "--backends", "numpy"]) == 2
    assert "runs at batch 1 only" in capsys.readouterr().err
    assert main(["check", "--net", path, "--batch", "1", "--backends", "numpy"]) == 0


@pytest.mark.parametrize("name", STYLES)
def test_the_unfolded_model_matches_too(exported, name):
    # the file as read, batch norms and all, through the float64 oracle: what the fold must preserve
    models, x = exported
    path, torch_out = models[name]
    raw, weights = load_onnx(path)
    assert sum(layer.kind == LayerKind.BATCHNORM for layer in raw.layers) >= 3
    assert compare_arrays(oracle.forward(raw, weights, x)[-1], torch_out.astype(np.float64)).passed


def test_the_mobilenet_style_model_keeps_its_groups_and_activations(exported):
    net, _ = load_net(exported[0]["mobilenet-style"][0])
    convs = [layer for layer in net.layers if layer.kind == LayerKind.CONV]
    assert any(c.groups == 4 for c in convs) and any(c.groups == c.out_channels > 1 for c in convs)
    assert {layer.activation for layer in net.layers} >= {"relu6", "tanh", "sigmoid", "none"}


@pytest.mark.parametrize("name", STYLES)
def test_compare_run_takes_an_onnx_file(exported, tmp_path, capsys, name):
    models, x = exported
    path, torch_out = models[name]
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "r.json"
    code = main(["run", "--net", path, "--backends", "numpy", "--input", str(tmp_path / "x.npy"), "--repeats", "1",
                 "--warmup", "1", "--out", str(out), "--save-outputs", str(tmp_path / "outs")])
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    assert data["net"]["name"] == name
    assert (data["sources"]["weights"]["kind"], data["sources"]["weights"]["path"]) == ("file", path)
    assert data["backends"][0]["check"]["status"] == "PASS"
    ours = np.load(tmp_path / "outs" / "numpy.npy")
    assert compare_arrays(ours, torch_out.astype(np.float64)).passed


def test_a_backend_lacking_a_layer_says_unsupported(exported, tmp_path, capsys):
    # fused has no padded max pool, nor a global average pool
    code = main(["check", "--net", exported[0]["resnet-style"][0], "--backends", "numpy,fused"])
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("fused"))
    assert "UNSUPPORTED" in line, out


@pytest.mark.parametrize("name, words", [
    ("leaky", ["node /act/LeakyRelu (LeakyRelu)", "operator LeakyRelu is not supported"]),
    # the sigmoid is fine; what we lack is an activation on a flattened tensor that is read elsewhere too
    ("sigmoid-beside", ["(Add)", "the sigmoid of a flattened tensor whose layer is also read elsewhere"]),
])
def test_what_we_lack_is_refused_in_one_line(exported, capsys, name, words):
    path = exported[0][name][0]
    assert main(["run", "--net", path, "--backends", "numpy"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err, err


def test_file_errors_are_one_line(tmp_path, capsys):
    assert main(["check", "--net", str(tmp_path / "none.onnx"), "--backends", "numpy"]) == 2
    assert capsys.readouterr().err == f"error: ONNX model file {tmp_path / 'none.onnx'} not found\n"
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07not a model at all")
    with pytest.raises(UserError, match="cannot be read"):
        load_onnx(bad)
    # issue 35: an empty file parses as an empty model, which "has 0 inputs"
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    assert main(["check", "--net", str(empty), "--backends", "numpy"]) == 2
    assert capsys.readouterr().err == f"error: ONNX model file {empty} is empty; export the model again\n"
    graphless = tmp_path / "graphless.onnx"
    graphless.write_bytes(b"\x08\x07")   # a valid protobuf: ir_version 7 and nothing else
    with pytest.raises(UserError, match="is not an ONNX model"):
        load_onnx(graphless)

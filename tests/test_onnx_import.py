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
    for name in STYLES + ["dilated", "leaky"]:
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


def test_a_backend_without_graphs_says_unsupported(exported, tmp_path, capsys):
    code = main(["check", "--net", exported[0]["resnet-style"][0], "--backends", "numpy,fused"])
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("fused"))
    assert "UNSUPPORTED" in line, out


@pytest.mark.parametrize("name, words", [
    ("leaky", ["node /act/LeakyRelu (LeakyRelu)", "operator LeakyRelu is not supported"]),
    ("dilated", ["node /conv/Conv (Conv)", "dilations (2, 2) are not supported"]),
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

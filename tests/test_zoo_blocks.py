"""Issue 36's "done when", in the suite's time: every block of the classification
zoo (SqueezeNet's fire module, DenseNet's dense block, ShuffleNet-v2's units,
an Inception block with ceil-mode and padded pooling, MobileNet-v3's block
with hardswish and its hardsigmoid gate, EfficientNet's MBConv with SiLU and
its gate), built small in PyTorch in one model (tests/onnx_models.py
ZooChain) and exported to ONNX, through `compare check --backends all`:
every backend this issue covers PASSes layer by layer and end to end
against the float64 oracle, and its output matches PyTorch's; the backends
that do not run the new kinds say UNSUPPORTED naming what they lack.  The
Keras model of the zoo's Keras layers is checked against Keras in
tests/test_keras_import.py; scripts/zoo_blocks.py runs each block alone, and
that Keras model, through every backend (docs/zoo-blocks.txt: all PASS)."""
import re

import numpy as np
import pytest

import backends
from compare.cli import main

from conftest import joined_rows, module_or_skip

COVERED = ("numpy", "clblast", "clblast-convgemm", "clblast-best", "vectorised", "vectorised-tiled", "tensorflow",
           "torch", "tinygrad")
REFUSING = ("baseline", "fused", "morton")
# refused by the library itself: OpenCV's classic engine cannot run the channel shuffle of the user's file
# (its Permute of the 5-D reshape fails), in the message OpenCV gives
LIBRARY_REFUSES = ("opencv",)


def _statuses(out: str) -> dict[str, str]:
    """The check table's row of each backend, its wrapped cells joined, a mode's label in brackets dropped
    (its words and all: "(opencl, partly on the CPU)")."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("---"))   # under the check table's header
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return {row.split()[0]: re.sub(r" \(.*?\)", "", row, count=1) for row in joined_rows(lines[start + 1:end])}


def _check_all(path: str, x: np.ndarray, framework: np.ndarray, tmp_path, capsys) -> None:
    """`compare check --backends all` of model `path` on `x`: each backend PASSes and matches `framework`,
    or refuses."""
    np.save(tmp_path / "x.npy", x)
    code = main(["check", "--net", path, "--backends", "all", "--input", str(tmp_path / "x.npy"),
                 "--save-outputs", str(tmp_path / "outs")])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = _statuses(out)
    for name in backends.names():
        if backends.unavailable_reason(name):
            continue
        assert name in rows, (name, out)
        if name in LIBRARY_REFUSES:
            assert "UNSUPPORTED" in rows[name], rows[name]
        elif name in REFUSING:
            assert "UNSUPPORTED" in rows[name] and "cannot run yet" in rows[name], rows[name]
        else:
            assert name in COVERED and "PASS" in rows[name].split()[1:3], rows[name]   # after a mode in brackets
            got = np.load(tmp_path / "outs" / f"{name}.npy").astype(np.float64)
            rel = np.linalg.norm(got - framework) / np.linalg.norm(framework)
            assert rel < 1e-4, (name, rel)


@pytest.mark.long
def test_every_zoo_block_exported_from_pytorch_passes_on_every_backend(tmp_path, capsys):
    module_or_skip("onnx", "test")
    module_or_skip("torch", "torch-cpu")
    import onnx_models
    x = np.random.default_rng(0).random((2, 3, 16, 16), dtype=np.float32)
    framework = onnx_models.export("zoo-chain", str(tmp_path / "zoo-chain.onnx"), x).astype(np.float64)
    _check_all(str(tmp_path / "zoo-chain.onnx"), x, framework, tmp_path, capsys)


@pytest.mark.parametrize("name", REFUSING)
def test_the_backends_without_the_zoo_kinds_name_the_kind(name):
    from conftest import backend_or_skip
    from nets import Concat, Conv, Net
    backend = backend_or_skip(name)
    net = Net("z", (4, 6, 6), (Conv("a", out_channels=4, kernel=(1, 1)), Concat("join", inputs=("input", "a"))))
    why = backend.unsupported(net)
    assert why is not None and "layer join is a concat layer, which" in why and "\n" not in why

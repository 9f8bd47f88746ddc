"""The command line: exit codes, one-line errors, files written."""
import json

import numpy as np
import pytest

from compare.cli import main
from compare.results import SCHEMA, VERSION
from nets.weights import init_weights, save_weights
from nets import LENET


def call(argv) -> int:
    """main(), with argparse's own exits turned into return codes."""
    try:
        return main(list(argv))
    except SystemExit as exc:
        return exc.code


def run(capsys, *argv):
    code = call(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {err!r}"
    assert "Traceback" not in err
    return lines[0]


def test_run_numpy_writes_versioned_results(capsys, tmp_path):
    out = tmp_path / "r.json"
    code, text, _ = run(capsys, "run", "--net", "lenet", "--backends", "numpy", "--batch", "4",
                        "--repeats", "2", "--warmup", "1", "--out", str(out))
    assert code == 0
    assert "GFLOP/s" in text and "c1" in text and "PASS" in text
    data = json.loads(out.read_text())
    assert data["schema"] == SCHEMA and data["schema_version"] == VERSION
    assert data["net"]["batch"] == 4 and [layer["name"] for layer in data["net"]["layers"]] == ["c1", "s2", "c3", "s4", "f5", "f6"]
    (numpy,) = data["backends"]
    assert numpy["status"] == "OK" and numpy["check"]["status"] == "PASS"
    assert len(numpy["timing"]["layers"]) == 6 and numpy["timing"]["layers"][0]["wall"]["n"] == 2
    assert data["command"].startswith("compare run --net lenet")


def test_check_numpy_passes(capsys):
    code, text, _ = run(capsys, "check", "--net", "lenet", "--backends", "numpy", "--batch", "3")
    assert code == 0 and "PASS" in text


@pytest.mark.parametrize("argv, message", [
    (["run", "--net", "nosuchnet", "--backends", "numpy"], "unknown net 'nosuchnet': choose one of lenet, vgg16"),
    (["run", "--net", "lenet", "--backends", "nosuch"], "unknown backend 'nosuch': choose from numpy, clblast"),
    (["check", "--net", "lenet", "--backends", "numpy", "--weights", "missing.npz"], "weights file missing.npz not found"),
    (["run", "--net", "lenet", "--backends", "numpy", "--batch", "0"], "--batch must be a whole number from 1 to "),
    (["run", "--net", "lenet", "--backends", "numpy", "--batch", "-3"], "--batch must be a whole number from 1 to 2,147,483,647, not -3"),
    (["run", "--net", "lenet", "--backends", "numpy", "--repeats", "x"], "--repeats must be a whole number from 1"),
    (["report", "nothere.json"], "results file nothere.json not found"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in one_line(err)
    assert not list(tmp_path.glob("results/*")), "no results file after an error"


def test_weights_command_and_reload(capsys, tmp_path):
    path = tmp_path / "w.npz"
    code, text, _ = run(capsys, "weights", "--net", "lenet", "--out", str(path), "--seed", "5")
    assert code == 0 and "60,900 parameters" in text
    code, _, _ = run(capsys, "check", "--net", "lenet", "--backends", "numpy", "--batch", "2", "--weights", str(path))
    assert code == 0


def test_input_and_save_outputs_allow_independent_recomputation(capsys, tmp_path):
    from compare import oracle
    x = np.random.default_rng(0).random((3, 1, 32, 32), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    wpath = tmp_path / "w.npz"
    weights = init_weights(LENET, 9)
    save_weights(wpath, weights)
    code, _, _ = run(capsys, "check", "--net", "lenet", "--backends", "numpy", "--input", str(tmp_path / "x.npy"),
                     "--weights", str(wpath), "--save-outputs", str(tmp_path / "outs"))
    assert code == 0
    saved_x = np.load(tmp_path / "outs" / "input.npy")
    np.testing.assert_array_equal(saved_x, x)
    mine = oracle.forward(LENET, dict(np.load(wpath)), saved_x)[-1]
    np.testing.assert_allclose(np.load(tmp_path / "outs" / "numpy.npy"), mine, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "outs" / "reference.npy"), mine)


@pytest.mark.parametrize("array, message", [
    (np.zeros((2, 1, 32, 32), np.float64), "has dtype float64; save it as float32"),
    (np.zeros((2, 3, 32, 32), np.float32), r"has shape (2, 3, 32, 32); lenet takes (N, 1, 32, 32)"),
    (np.zeros((1, 32, 32), np.float32), "has shape (1, 32, 32)"),
])
def test_bad_input_files(capsys, tmp_path, array, message):
    np.save(tmp_path / "x.npy", array)
    code, _, err = run(capsys, "check", "--net", "lenet", "--backends", "numpy", "--input", str(tmp_path / "x.npy"))
    assert code == 2 and message in one_line(err)


def test_input_batch_must_match(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 1, 32, 32), np.float32))
    code, _, err = run(capsys, "check", "--net", "lenet", "--backends", "numpy", "--batch", "3",
                       "--input", str(tmp_path / "x.npy"))
    assert code == 2 and "holds 2 images but --batch is 3" in one_line(err)


def test_listings(capsys):
    assert run(capsys, "nets")[0] == 0
    code, text, _ = run(capsys, "backends")
    assert code == 0 and "numpy" in text and "available" in text


def test_report_renders_a_run(capsys, tmp_path):
    out = tmp_path / "r.json"
    assert run(capsys, "run", "--net", "lenet", "--backends", "numpy", "--batch", "2", "--repeats", "2",
               "--out", str(out))[0] == 0
    code, text, _ = run(capsys, "report", str(out), "--out", str(tmp_path / "rep"), "--baseline", "numpy")
    assert code == 0
    assert "](net-lenet-b2-" in (tmp_path / "rep" / "report.md").read_text()   # the index links the page
    md = next((tmp_path / "rep").glob("net-lenet-b2-*.md")).read_text()
    data = json.loads(out.read_text())
    # the per-layer table shows each layer's median wall time from the file, to 3 decimals
    for layer in data["backends"][0]["timing"]["layers"]:
        row = next(line for line in md.splitlines() if line.startswith(f"| {layer['name']} "))
        assert f"{layer['wall']['median']:.3f}" in row, (row, layer["wall"])
    assert "Speedup over numpy" not in md      # no other backend to compare
    assert {p.name for p in (tmp_path / "rep").iterdir()} >= {"report.md", "report.html"}


def test_a_backend_that_cannot_import_is_listed_unavailable(capsys, tmp_path, monkeypatch):
    import backends
    monkeypatch.setitem(backends.REGISTRY, "ghost", ("backends.no_such_module", "Ghost"))
    out = tmp_path / "r.json"
    code, text, _ = run(capsys, "run", "--net", "lenet", "--backends", "numpy,ghost", "--batch", "2",
                        "--repeats", "1", "--out", str(out))
    assert code == 0
    ghost = json.loads(out.read_text())["backends"][1]
    assert ghost["status"] == "UNAVAILABLE"
    assert ghost["reason"] == "cannot import: No module named 'backends.no_such_module'"
    assert "UNAVAILABLE" in text


# -- `check --data digits` (compare/digits.py) ------------------------------

def test_check_on_the_held_out_digits_prints_accuracy(capsys, tmp_path):
    out = tmp_path / "r.json"
    code, text, _ = run(capsys, "check", "--net", "lenet", "--backends", "numpy", "--data", "digits",
                        "--batch", "60", "--out", str(out))
    assert code == 0
    assert "top-1 accuracy on 60 held-out digits" in text and "predictions differing from numpy" in text
    data = json.loads(out.read_text())
    assert data["sources"]["weights"]["path"].endswith("lenet-digits.npz")   # the trained weights by default
    assert data["sources"]["input"]["kind"] == "digits" and data["backends"][0]["digits"]["differ"] == 0
    assert data["digits"]["images"] == 60 and data["backends"][0]["digits"]["accuracy"] >= 0.9


def test_check_on_digits_fails_when_a_backend_predicts_differently(capsys, monkeypatch):
    from compare import digits
    monkeypatch.setattr(digits, "disagreements", lambda results: ["numpy"])
    code, _, err = run(capsys, "check", "--net", "lenet", "--backends", "numpy", "--data", "digits", "--batch", "10")
    assert code == 1 and "numpy predicted differently" in one_line(err)


@pytest.mark.parametrize("extra, message", [
    (["--net", "vgg16"], "--data digits feeds 1x32x32 images and reads 10 class scores; net vgg16 takes 3x224x224"),
    (["--net", "lenet", "--input", "x.npy"], "--input and --data are alternatives: give one"),
    (["--net", "lenet", "--data", "mnist"], "argument --data: invalid choice: 'mnist'"),
])
def test_check_on_digits_bad_options(capsys, extra, message):
    code, _, err = run(capsys, "check", "--backends", "numpy", "--data", "digits", *extra)
    assert code == 2 and message in one_line(err)

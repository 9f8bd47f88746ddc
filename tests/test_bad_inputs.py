"""Bad inputs a user can meet, each one line on stderr, exit 2, and no file
left behind: unwritable outputs (refused before any work; a device or a pipe
is never replaced by a file), results files
that are malformed, of a wrong type, missing keys or from a future version,
and weights files in float64 (accepted: converted to float32)."""
import json
import os
import stat

import numpy as np
import pytest

from compare.cli import main
from nets import LENET
from nets.weights import init_weights, load_weights, save_weights
from results_factory import small_results_dict


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("argv, message", [
    (["run", "--net", "lenet", "--backends", "numpy", "--out", "{dir}"], "--out {dir} is a folder; give a file name"),
    (["check", "--net", "lenet", "--backends", "numpy", "--out", "{file}/r.json"], "cannot be written: {file} is not a folder"),
    (["report", "{json}", "--out", "{file}"], "--out {file} is a file; give a folder"),
    (["run", "--net", "lenet", "--backends", "numpy", "--save-outputs", "{file}"], "--save-outputs {file} is a file"),
    (["weights", "--net", "lenet", "--out", "{dir}"], "--out {dir} is a folder"),
])
def test_outputs_of_the_wrong_kind_are_refused_before_any_work(tmp_path, capsys, argv, message):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "r.json").write_text(json.dumps(small_results_dict()))
    names = {"dir": str(tmp_path), "file": str(tmp_path / "a-file"), "json": str(tmp_path / "r.json")}
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([a.format(**names) for a in argv]) == 2
    assert message.format(**names) in _one_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def _special(tmp_path, what):
    """A named pipe made in tmp_path, or a link there to the null device (making a device node needs root;
    the link leads --out to the device itself, which is what a user's `--out /dev/null` does)."""
    path = tmp_path / what
    if what == "pipe":
        os.mkfifo(path)
    else:
        os.symlink(os.devnull, path)
    return path


@pytest.mark.parametrize("what, words", [("pipe", "a named pipe"), ("device", "a character device")])
@pytest.mark.parametrize("command", [["run", "--net", "lenet", "--backends", "numpy", "--repeats", "1"],
                                     ["check", "--net", "lenet", "--backends", "numpy"],
                                     ["weights", "--net", "lenet"]])
def test_an_out_that_is_a_device_or_a_pipe_is_refused_and_left_alone(tmp_path, capsys, what, words, command):
    path = _special(tmp_path, what)
    before = os.stat(path)
    assert main(command + ["--out", str(path)]) == 2
    assert _one_line(capsys) == (f"error: --out {path} is {words}, not a regular file: refused, since writing "
                                 f"there would replace it; give a file name there")
    after = os.stat(path)
    assert stat.S_ISFIFO(after.st_mode) if what == "pipe" else stat.S_ISCHR(after.st_mode)
    assert (after.st_ino, after.st_mode, after.st_rdev) == (before.st_ino, before.st_mode, before.st_rdev)
    assert sorted(p.name for p in tmp_path.iterdir()) == [what]


def test_a_file_staged_for_a_path_that_became_a_pipe_is_not_renamed_over_it(tmp_path):
    from backends.atomic import atomic_path
    path = tmp_path / "out.json"
    with pytest.raises(OSError, match="a named pipe is there, not a regular file"):
        with atomic_path(path) as tmp:
            os.mkfifo(path)   # after the checks at the start, before the rename at the end
            open(tmp, "w").write("{}")
    assert stat.S_ISFIFO(os.stat(path).st_mode) and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


@pytest.mark.parametrize("spoil, message", [
    (lambda d: d["backends"][1]["timing"]["layers"][0]["wall"].update(median="3 ms"),
     "backends[1].timing.layers[0].wall.median: expected a number, got '3 ms'"),
    (lambda d: d["backends"][2].update(check=[1, 2]), "backends[2].check: expected an object, got [1, 2]"),
    (lambda d: d.pop("device"), "device: is missing"),
    (lambda d: d["backends"][0]["timing"]["end_to_end"].pop("compute"), "backends[0].timing.end_to_end.compute: is missing"),
    (lambda d: d.update(schema_version=7), "schema version 7; this compare reads versions 1 to 3: update clblast-compare"),
    (lambda d: d["net"]["layers"][0].update(flops=True), "net.layers[0].flops: expected a whole number, got true"),
])
def test_a_bad_results_file_is_one_line_and_no_report(tmp_path, capsys, spoil, message):
    d = small_results_dict()
    spoil(d)
    (tmp_path / "bad.json").write_text(json.dumps(d))
    assert main(["report", str(tmp_path / "bad.json"), "--out", str(tmp_path / "rep")]) == 2
    assert message in _one_line(capsys)
    assert not (tmp_path / "rep").exists()


def test_weights_in_float64_are_accepted_as_float32(tmp_path):
    weights = {k: v.astype(np.float64) for k, v in init_weights(LENET, 3).items()}
    save_weights(tmp_path / "w64.npz", weights)
    with np.load(tmp_path / "w64.npz") as raw:
        assert raw["c1.weight"].dtype == np.float32   # save_weights writes float32 ...
    np.savez(tmp_path / "w64.npz", **weights)         # ... so write float64 by hand
    loaded = load_weights(tmp_path / "w64.npz", LENET)
    assert all(v.dtype == np.float32 for v in loaded.values())
    np.testing.assert_array_equal(loaded["c1.weight"], weights["c1.weight"].astype(np.float32))


@pytest.mark.parametrize("argv, message", [
    (["run", "--net", "lenet", "--backends", "numpy", "--seed", "-5"],
     "--seed must be a whole number, 0 or more, not -5"),
    (["check", "--net", "lenet", "--backends", "numpy", "--seed", "-5"],
     "--seed must be a whole number, 0 or more, not -5"),
    (["weights", "--net", "lenet", "--out", "{dir}/w.npz", "--seed", "-5"],
     "--seed must be a whole number, 0 or more, not -5"),
    (["check", "--net", "{dir}", "--backends", "numpy"],
     "--net {dir} is a folder; give a model file (.keras, .h5 or .onnx) or a built-in net"),
    (["check", "--net", "{dir}/model.onnx", "--backends", "numpy"],
     "--net {dir}/model.onnx is a folder; give a model file"),
    (["check", "--net", "lenet", "--backends", "numpy", "--input", "{dir}/digit.png"],
     "input file {dir}/digit.png is not a .npy array (it does not start with numpy's .npy header); save the input"),
    (["report", "{dir}/r.json", "{dir}/./r.json", "--out", "{dir}/rep"],
     "{dir}/./r.json is given twice (also as {dir}/r.json): give each results file or sweep once"),
])
def test_what_a_new_user_tried_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    (tmp_path / "model.onnx").mkdir()
    (tmp_path / "digit.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (tmp_path / "r.json").write_text(json.dumps(small_results_dict()))
    try:
        code = main([a.format(dir=tmp_path) for a in argv])
    except SystemExit as exc:   # argparse's own refusals exit from inside it
        code = exc.code
    assert code == 2
    assert message.format(dir=tmp_path) in _one_line(capsys)
    assert not (tmp_path / "rep").exists() and not (tmp_path / "w.npz").exists()


def test_a_report_over_two_devices_names_the_device_in_each_headline_column(tmp_path):
    from compare.report.tables import headline_table
    from compare.results import RunResult, decode
    runs = [decode(RunResult, small_results_dict(device)) for device in ("GPU one", "GPU two")]
    headers, _ = headline_table(runs)
    assert len(set(headers)) == len(headers)
    assert "tiny batch 1 on GPU one ms" in headers and "tiny batch 1 on GPU two ms" in headers

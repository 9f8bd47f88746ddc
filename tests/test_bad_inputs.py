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
    path = tmp_path / what
    if what == "pipe":
        os.mkfifo(path)
    else:   # the null device's numbers, made here: only root may
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root")
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
    (lambda d: d.update(schema_version=7), "schema version 7; this compare reads versions 1 to 2: update clblast-compare"),
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

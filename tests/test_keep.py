"""No run's work is lost to a write that fails at the end: a target that
cannot be written is found before any work where it can be (a full disk);
one that fails later (the disk fills while the run goes on) gets the files
kept in another folder, and one line on stderr names it, exit 2.

The small disk is a real one: a tmpfs of 16 MiB mounted for the test (as
root), else, for a user, a folder made read-only while the command runs."""
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from compare import report, sweep
from compare.commands import execute, weights
from compare.cli import main
from compare.results import load_results
from nets import LENET
from nets.weights import init_weights, load_weights
from conftest import REQUIRE_ALL

QUICK = ["--backends", "numpy", "--repeats", "1", "--warmup", "1", "--batch", "2"]


class SmallDisk:
    """A folder whose file system can be made to refuse writes: fill() fills the
    tmpfs (ENOSPC) or takes the write permission away (EACCES)."""

    def __init__(self, path: Path, tmpfs: bool):
        self.path, self.tmpfs = path, tmpfs
        self.why = "No space left on device" if tmpfs else "Permission denied"

    def fill(self) -> None:
        if not self.tmpfs:
            for folder in [self.path, *(p for p in self.path.rglob("*") if p.is_dir())]:
                folder.chmod(0o555)
            return
        with open(self.path / "filler", "wb") as f:
            try:
                while True:
                    f.write(bytes(2**16))
                    f.flush()
            except OSError:
                pass

    def names(self) -> list[str]:
        return sorted(p.name for p in self.path.iterdir() if p.name != "filler")


@pytest.fixture
def disk(tmp_path, monkeypatch):
    path = tmp_path / "disk"
    path.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(path)],
                                                   capture_output=True).returncode == 0
    if not mounted:
        path.chmod(0o555)
        stops = not os.access(path, os.W_OK)
        path.chmod(0o755)
        if not stops:   # root where mount is refused (a container without the capability)
            why = "no tmpfs can be mounted here, and a read-only folder does not stop this user (root)"
            if REQUIRE_ALL:
                pytest.fail(f"`make test` must exercise a full disk: {why}")
            pytest.skip(why)
    fallback = tmp_path / "tmp"
    fallback.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fallback))   # where the kept copies go first
    monkeypatch.chdir(tmp_path)
    try:
        yield SmallDisk(path, mounted)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=True)
        else:
            for folder in [path, *(p for p in path.rglob("*") if p.is_dir())]:
                folder.chmod(0o755)


def _lines(capsys) -> tuple[str, list[str]]:
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return out, err.strip().splitlines()


def _kept(line: str, after: str) -> Path:
    """The path a message names after `after`, up to ' instead'."""
    return Path(line.split(after, 1)[1].split(" instead", 1)[0])


def _fill_at(disk, monkeypatch, module, name, call=1, after=True):
    """`module.name` wrapped so that the disk fills at its `call`-th call: after it returns, or before it runs."""
    real, calls = getattr(module, name), []

    def wrapped(*args, **kw):
        calls.append(1)
        now = len(calls) == call
        if now and not after:
            disk.fill()
        result = real(*args, **kw)
        if now and after:
            disk.fill()
        return result
    monkeypatch.setattr(module, name, wrapped)


def test_a_run_whose_disk_fills_keeps_its_results_elsewhere_and_says_where(disk, monkeypatch, capsys):
    _fill_at(disk, monkeypatch, execute, "execute")   # the disk fills while the backends run
    out = disk.path / "r.json"
    assert main(["run", "--net", "lenet", *QUICK, "--out", str(out)]) == 2
    stdout, err = _lines(capsys)
    assert "numpy" in stdout and "results written" not in stdout   # the tables were printed all the same
    assert len(err) == 1 and err[0].startswith(f"error: cannot write --out {out} ({disk.why}): results kept in ")
    kept = _kept(err[0], "results kept in ")
    assert kept.name == "r.json" and kept.parent.parent == Path(tempfile.gettempdir())
    res = load_results(kept)
    assert res.net.batch == 2 and res.backends[0].status == "OK"
    assert disk.names() == []   # no staging file left behind


def test_outputs_that_cannot_be_saved_are_kept_whole_and_the_results_still_written(disk, monkeypatch, capsys,
                                                                                     tmp_path):
    _fill_at(disk, monkeypatch, execute, "execute")
    saved, out = disk.path / "outputs", tmp_path / "r.json"
    assert main(["run", "--net", "lenet", *QUICK, "--save-outputs", str(saved), "--out", str(out)]) == 2
    stdout, err = _lines(capsys)
    assert len(err) == 1 and err[0].startswith(
        f"error: cannot write --save-outputs {saved} ({disk.why}, at input.npy): outputs kept whole in ")
    kept = _kept(err[0], "outputs kept whole in ")
    assert sorted(p.name for p in kept.iterdir()) == ["input.npy", "numpy.npy", "reference.npy"]
    assert np.load(kept / "input.npy").shape == (2, 1, 32, 32)
    assert f"results written to {out}" in stdout and load_results(out).backends[0].status == "OK"


def test_a_full_disk_is_refused_before_any_work(disk, monkeypatch, capsys):
    disk.fill()
    monkeypatch.setattr(execute, "execute", lambda *a, **k: pytest.fail("the run started"))
    out = disk.path / "r.json"
    assert main(["run", "--net", "lenet", *QUICK, "--out", str(out)]) == 2
    _, err = _lines(capsys)
    if disk.tmpfs:
        assert err == [f"error: --out {out} cannot be written: No space left on device in {disk.path} "
                       f"(a staging file of 1.0 MiB was tried before any work)"]
    else:
        assert err == [f"error: --out {out} cannot be written: {disk.path} is not a folder this user may write to"]
    assert disk.names() == []


def test_a_sweep_whose_disk_fills_is_kept_whole_in_one_folder(disk, monkeypatch, capsys):
    _fill_at(disk, monkeypatch, sweep, "execute", call=2, after=False)   # batch 1 was written, batch 2 not yet
    out = disk.path / "sw"
    argv = ["sweep", "--net", "lenet", "--backends", "numpy", "--repeats", "1", "--warmup", "1", "--batch", "1,2"]
    assert main(argv + ["--out", str(out)]) == 2
    _, err = _lines(capsys)
    assert len(err) == 1 and err[0].startswith(
        f"error: cannot write into --out {out} ({disk.why}, at lenet-batch2.json): sweep kept whole in ")
    kept = _kept(err[0], "sweep kept whole in ")
    assert err[0].endswith(f" instead (`compare report {str(kept).rstrip(os.sep)}` renders it; what was written "
                           f"into {out} before stays there too)")
    loaded = sweep.load_sweep(kept)
    assert [r.net.batch for r in loaded.results] == [1, 2]
    assert sorted(p.name for p in out.iterdir()) == ["lenet-batch1.json"]


def test_weights_that_cannot_be_written_are_kept(disk, monkeypatch, capsys):
    _fill_at(disk, monkeypatch, weights, "init_weights")
    out = disk.path / "w.npz"
    assert main(["weights", "--net", "lenet", "--out", str(out)]) == 2
    _, err = _lines(capsys)
    assert len(err) == 1 and err[0].startswith(f"error: cannot write --out {out} ({disk.why}): weights kept in ")
    kept = load_weights(_kept(err[0], "weights kept in "), LENET)
    np.testing.assert_array_equal(kept["c1.weight"], init_weights(LENET, 0)["c1.weight"])
    assert disk.names() == []


def test_a_report_that_cannot_be_written_says_so_in_one_line(disk, monkeypatch, capsys, tmp_path):
    from results_factory import small_results
    from compare.results import write_results
    write_results(tmp_path / "r.json", small_results())
    _fill_at(disk, monkeypatch, report, "render_report", after=False)
    out = disk.path / "rep"
    assert main(["report", str(tmp_path / "r.json"), "--out", str(out)]) == 2
    _, err = _lines(capsys)
    assert err == [f"error: cannot write the report into --out {out} ({disk.why}): nothing of it was written "
                   f"there; free some room and run `compare report` again"]
    assert disk.names() == []   # not even the folder it made


def test_a_cache_that_cannot_be_written_is_kept_with_where_to_copy_it(disk, monkeypatch):
    from backends import cache
    from compare import device_cache
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(disk.path / "cache"))
    disk.fill()
    info = {"platform": "p", "name": "d", "driver": "1"}
    kept = device_cache.store("peak", info, {"gflops": 1.0}, "the peak cache")
    assert kept.path.parent.parent == Path(tempfile.gettempdir())
    assert kept.problem == (f"cannot write the peak cache {cache.path('peak')} ({disk.why}): the new cache file "
                            f"kept in {kept.path} instead; copy it to {cache.path('peak')} to use it")
    assert "p | d | 1" in kept.path.read_text()


# -- the keeper alone: a fallback that fails too, and none that takes the files --------------

def test_the_next_fallback_takes_the_whole_set_and_none_says_so(tmp_path, monkeypatch):
    from compare import keep
    asked = tmp_path / "file-not-folder"
    asked.write_text("x")   # files "in" it cannot be written: not a folder
    good = tmp_path / "good"
    good.mkdir()
    monkeypatch.setattr(keep, "fallback_bases", lambda: [tmp_path / "missing", good])
    keeper = keep.Keeper(asked)
    assert keeper.write_text("a.json", "1") == next(good.iterdir()) / "a.json"
    keeper.write_text("b.json", "2")
    assert sorted(p.name for p in keeper.folder.iterdir()) == ["a.json", "b.json"]
    assert keeper.problem("into --out", "sweep").startswith(f"cannot write into --out {asked} (Not a directory, "
                                                            f"at a.json): sweep kept whole in {good}")
    monkeypatch.setattr(keep, "fallback_bases", lambda: [tmp_path / "missing", tmp_path / "gone"])
    kept = keep.keep_file(asked / "r.json", keep.text_writer("{}"), "--out", "results")
    assert kept.path is None
    assert kept.problem == (f"cannot write --out {asked / 'r.json'} (Not a directory), nor keep the results anywhere "
                            f"else ({tmp_path / 'missing'}: No such file or directory; {tmp_path / 'gone'}: No such "
                            f"file or directory)")

"""Results files: written atomically, versioned, refused when malformed."""
import json

import pytest

from compare import runner
from compare.cli import main
from compare.errors import UserError
from compare.files import atomic_path
from compare.results import load_results, write_results
from results_factory import small_results


def test_round_trip(tmp_path):
    path = tmp_path / "r.json"
    write_results(path, small_results())
    assert load_results(path)["backends"][1]["name"] == "clblast"


def test_nan_is_written_as_null(tmp_path):
    res = small_results()
    res["backends"][0]["check"]["end_to_end"]["rel_l2"] = float("nan")
    write_results(tmp_path / "r.json", res)
    assert json.loads((tmp_path / "r.json").read_text())["backends"][0]["check"]["end_to_end"]["rel_l2"] is None


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    ('{"schema": "something/else"}', "is not a clblast-compare results file"),
    ('{"schema": "clblast-compare/results", "schema_version": 99}', "has results schema version 99; this compare reads version 1"),
    ('{"schema": "clblast-compare/results", "schema_version": 1, "net": {"name": "x", "layers": []}, "device": {}, '
     '"backends": [{"name": "a", "status": "WEIRD"}]}', "backend entry 0 lacks a name or a status"),
    ('{"schema": "clblast-compare/results", "schema_version": 1, "device": {}}', "'net' with 'name' and 'layers' is missing"),
])
def test_malformed_files_are_refused(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        load_results(path)


def test_report_refuses_other_versions_in_one_line(tmp_path, capsys):
    path = tmp_path / "old.json"
    res = small_results()
    res["schema_version"] = 0
    path.write_text(json.dumps(res))
    assert main(["report", str(path), "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "schema version 0" in err[0]
    assert not (tmp_path / "rep" / "report.md").exists()


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(path) as tmp:
            with open(tmp, "w") as f:
                f.write("half of the new")
            raise KeyboardInterrupt
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_ctrl_c_during_a_run_leaves_no_partial_results(tmp_path, capsys, monkeypatch):
    earlier = tmp_path / "earlier.json"
    write_results(earlier, small_results())
    before = earlier.read_text()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(runner, "run_backend", interrupted)
    out = tmp_path / "new.json"
    code = main(["run", "--net", "lenet", "--backends", "numpy", "--batch", "2", "--out", str(out)])
    assert code == 130
    assert "no results file was written" in capsys.readouterr().err
    assert not out.exists() and earlier.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier.json"]


def test_a_crashing_backend_is_recorded_and_the_others_still_run(tmp_path, capsys, monkeypatch):
    # make the numpy backend crash inside prepare, as a broken backend would
    import backends.numpy_backend as nb

    def broken_prepare(self, net, weights, batch):
        raise RuntimeError("kernel exploded")
    monkeypatch.setattr(nb.NumpyBackend, "prepare", broken_prepare)
    out = tmp_path / "r.json"
    code = main(["run", "--net", "lenet", "--backends", "numpy", "--batch", "2", "--repeats", "1", "--out", str(out)])
    assert code == 1
    data = json.loads(out.read_text())
    assert data["backends"][0]["status"] == "FAILED"
    assert data["backends"][0]["reason"] == "RuntimeError: kernel exploded"
    assert "error: backend numpy failed: RuntimeError: kernel exploded" in capsys.readouterr().err

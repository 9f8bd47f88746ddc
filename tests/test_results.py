"""Results files: written atomically, versioned, refused when malformed."""
import json

import pytest

from compare import runner
from compare.cli import main
from nets.errors import UserError
from backends.atomic import atomic_path
from compare.results import load_results, write_results
from results_factory import small_results, small_results_dict


def test_round_trip(tmp_path):
    path = tmp_path / "r.json"
    write_results(path, small_results())
    loaded = load_results(path)
    assert loaded == small_results()
    assert loaded.backends[1].timing.layers[0].wall.values == [4.0] * 5   # raw samples kept


def test_a_gzipped_results_file_loads_and_reports_as_the_plain_one(tmp_path, capsys):
    """Old experiments are kept as .json.gz (the checkout travels to the GPU machine under 64 MiB)."""
    import gzip
    plain = tmp_path / "r.json"
    write_results(plain, small_results())
    packed = tmp_path / "r.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_results(packed) == load_results(plain)
    assert main(["report", str(packed), "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "report.md").is_file()


@pytest.mark.parametrize("content, message", [
    (lambda text: gzip_bytes(text)[:40], "is not a whole gzip file"),                  # cut short
    (lambda text: b"\x1f\x8b" + b"\x00" * 30, "is not a whole gzip file"),           # a spoilt header
    (lambda text: gzip_bytes(" " * 8192 + text), "decompresses past 4.0 KiB"),         # more than the limit
])
def test_a_bad_gzipped_results_file_is_refused_in_one_line(tmp_path, capsys, monkeypatch, content, message):
    from compare import results
    monkeypatch.setattr(results, "MAX_FILE_BYTES", 4096)
    packed = tmp_path / "r.json.gz"
    packed.write_bytes(content(json.dumps(small_results_dict())))
    assert main(["report", str(packed), "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0], err
    assert not (tmp_path / "rep").exists()


def gzip_bytes(text: str) -> bytes:
    import gzip
    return gzip.compress(text.encode())


def test_nan_is_written_as_null(tmp_path):
    res = small_results()
    res.backends[0].check.end_to_end.rel_l2 = float("nan")
    write_results(tmp_path / "r.json", res)
    assert json.loads((tmp_path / "r.json").read_text())["backends"][0]["check"]["end_to_end"]["rel_l2"] is None
    assert load_results(tmp_path / "r.json").backends[0].check.end_to_end.rel_l2 is None


def _spoil(change):
    d = small_results_dict()
    change(d)
    return json.dumps(d)


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    ('{"schema": "something/else"}', "is not a clblast-compare results file"),
    ('{"schema": "clblast-compare/results", "schema_version": 99}',
     "has results schema version 99; this compare reads versions 1 to 3: update clblast-compare to read it"),
    (_spoil(lambda d: d["backends"][1]["timing"]["layers"][0]["wall"].update(median="fast")),
     r"backends\[1\]\.timing\.layers\[0\]\.wall\.median: expected a number, got 'fast'"),
    (_spoil(lambda d: d["net"].pop("layers")), r"net\.layers: is missing"),
    (_spoil(lambda d: d.update(backends={})), "backends: expected a list, got {}"),
    (_spoil(lambda d: d["backends"][0].update(status="WEIRD")),
     r"backends\[0\]\.status: must be one of OK, FAILED, UNAVAILABLE, UNSUPPORTED, not 'WEIRD'"),
    (_spoil(lambda d: d["backends"][0]["check"].update(status=True)), r"backends\[0\]\.check\.status: expected a string"),
    (_spoil(lambda d: d["net"].update(batch=1.5)), r"net\.batch: expected a whole number, got 1\.5"),
    (_spoil(lambda d: d["backends"][2]["timing"]["end_to_end"]["compute"].update(n=4)),
     "n is 4 but 5 values are kept"),
])
def test_malformed_files_are_refused_naming_the_field(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        load_results(path)


def test_version_1_files_are_migrated_on_load(tmp_path):
    d = small_results_dict()
    d["schema_version"] = 1

    def drop_values(obj):
        if isinstance(obj, dict):
            obj.pop("values", None)
            for v in obj.values():
                drop_values(v)
        elif isinstance(obj, list):
            for v in obj:
                drop_values(v)
    drop_values(d)
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(d))
    res = load_results(path)
    assert res.schema_version == 3
    assert res.backends[1].timing.layers[0].wall.median == 4.0 and res.backends[1].timing.layers[0].wall.values == []
    assert [b.family for b in res.backends] == ["reference", "clblast", "hand-written", "peer"]


def test_version_2_files_get_each_backends_family_by_its_name(tmp_path):
    d = small_results_dict()
    d["schema_version"] = 2
    for b in d["backends"]:
        b.pop("family", None)
    d["backends"].append(dict(d["backends"][2], name="someone-elses"))
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(d))
    assert [b.family for b in load_results(path).backends] == ["reference", "clblast", "hand-written", "peer", ""]


@pytest.mark.parametrize("spoil, message", [
    (lambda d: d.update(schema_version=0), "schema version 0"),
    (lambda d: d["backends"][1]["timing"]["end_to_end"]["compute"].update(median="5 ms"),
     "backends[1].timing.end_to_end.compute.median: expected a number, got '5 ms'"),
])
def test_report_refuses_a_bad_file_in_one_line_and_writes_nothing(tmp_path, capsys, spoil, message):
    path = tmp_path / "bad.json"
    path.write_text(_spoil(spoil))
    assert main(["report", str(path), "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "rep").exists()


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
    monkeypatch.setattr(runner.Session, "run", interrupted)
    out = tmp_path / "new.json"
    code = main(["run", "--net", "lenet", "--backends", "numpy", "--batch", "2", "--out", str(out)])
    assert code == 130
    assert capsys.readouterr().err.startswith("interrupted (SIGINT): stopped")
    assert not out.exists() and earlier.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier.json"]


def test_a_crashing_backend_is_recorded_and_the_others_still_run(tmp_path, capsys, monkeypatch):
    # make the numpy backend crash inside prepare, as a broken backend would
    import backends.reference.numpy_backend as nb

    def broken_prepare(self, net, weights, batch, mode=None):
        raise RuntimeError("kernel exploded")
    monkeypatch.setattr(nb.NumpyBackend, "prepare", broken_prepare)
    out = tmp_path / "r.json"
    code = main(["run", "--net", "lenet", "--backends", "numpy", "--batch", "2", "--repeats", "1", "--out", str(out)])
    assert code == 1
    data = json.loads(out.read_text())
    assert data["backends"][0]["status"] == "FAILED"
    assert data["backends"][0]["reason"] == "RuntimeError: kernel exploded"
    assert "error: backend numpy failed: RuntimeError: kernel exploded" in capsys.readouterr().err


def test_every_timing_keeps_its_tail_and_spread(tmp_path):
    import numpy as np
    from compare.report import tables as rt
    from compare.results import Samples
    values = [1.0, 1.1, 0.9, 1.3, 5.0, 1.05, 0.95, 1.2, 1.0, 1.15]
    s = Samples.of(values)
    assert (s.p90, s.p99) == tuple(float(p) for p in np.percentile(values, [90, 99]))
    assert s.spread == s.iqr / s.median
    d = small_results_dict()   # written before the tail was kept: filled in from the values on load
    compute = d["backends"][2]["timing"]["end_to_end"]["compute"]
    compute.update({"values": values, **{k: getattr(s, k) for k in ("median", "min", "max", "q1", "q3", "iqr")}},
                   n=len(values))
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    loaded = load_results(path).backend("vectorised").timing.end_to_end.compute
    assert (loaded.p90, loaded.p99) == (s.p90, s.p99)
    write_results(path, load_results(path))
    assert json.loads(path.read_text())["backends"][2]["timing"]["end_to_end"]["compute"]["p99"] == s.p99
    compute["p99"] = 1.0   # a kept tail that its values do not give
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match=r"compute.p99: is 1.0, but the values kept give"):
        load_results(path)
    headers, rows = rt.spread_table(small_results())
    assert headers == ["backend", "p50", "p90", "p99", "min", "max", "spread %", "repeats"]
    assert rows[2] == ["vectorised", "1.250", "1.250", "1.250", "1.250", "1.250", "0.0", "5"]

"""The answer never rests on a wrong output: a backend's mode is a candidate
only if its output passes the check against the float64 oracle, the fastest
passing mode is used, and a backend that failed the check (or ran unchecked)
is in no ratio, the answer included.  Run through `compare run` itself."""
import json

import pytest

import backends
from compare.cli import main

DOUBLES = {"two-faced": "FastWrongMode", "all-wrong": "EveryModeWrong", "layer-liar": "LayerLiar",
           "clblast-double": "SlowClblastDouble", "floored": "FlooredMode", "jolted": "JoltedWarmUp",
           "low-floor": "LowFloor"}


@pytest.fixture
def doubles(monkeypatch):
    for name, cls in DOUBLES.items():
        monkeypatch.setitem(backends.REGISTRY, name, ("run_checks", cls))


def _run(tmp_path, names, *extra):
    out = tmp_path / "r.json"
    code = main(["run", "--net", "lenet", "--batch", "2", "--backends", ",".join(names), "--repeats", "5",
                 "--warmup", "1", "--peak-gflops", "1", "--out", str(out), *extra])
    return code, json.loads(out.read_text())


def _entry(results, name):
    return next(b for b in results["backends"] if b["name"] == name)


def test_the_fastest_mode_is_used_only_if_its_output_passes(tmp_path, doubles, capsys):
    code, res = _run(tmp_path, ["clblast-double", "two-faced"])
    b = _entry(res, "two-faced")
    assert code == 0 and b["mode"] == "slow-right" and b["check"]["status"] == "PASS"
    wrong = next(m for m in b["modes"] if m["name"] == "fast-wrong")
    assert wrong["status"] == "FAILED" and wrong["compute"] is None
    assert "relative L2 1.00e-02, above the tolerance 0.0001" in wrong["reason"]
    out = capsys.readouterr().out
    said = out[out.index("The answer:"):].splitlines()   # (a busy host's warning may come first)
    assert next(line for line in said if line.startswith("- Hand-written")).startswith(
        "- Hand-written `two-faced (slow-right)`")


def test_a_floor_is_held_against_the_fastest_warm_up_pass_not_the_last(tmp_path, doubles):
    code, res = _run(tmp_path, ["jolted"], "--warmup", "3")   # the last of `--warmup 1` above wins
    b = _entry(res, "jolted")
    hopeless = next(m for m in b["modes"] if m["name"] == "hopeless")
    assert code == 0 and b["mode"] == "quick" and hopeless["status"] == "SKIPPED"


def test_a_mode_with_a_floor_under_the_others_passes_is_prepared_and_says_why(tmp_path, doubles):
    code, res = _run(tmp_path, ["low-floor"])
    switching = next(m for m in _entry(res, "low-floor")["modes"] if m["name"] == "switching")
    assert code == 0 and switching["status"] == "OK" and switching["compute"] is not None
    assert switching["reason"].startswith("prepared: its floor 0.000 ms is under the fastest warm-up pass of "
                                          "low-floor (quick)")


def test_a_mode_wrong_on_a_layer_alone_is_refused_by_the_full_check(tmp_path, doubles):
    code, res = _run(tmp_path, ["layer-liar"])
    b = _entry(res, "layer-liar")
    assert code == 0 and b["mode"] == "honest" and b["check"]["status"] == "PASS"
    liar = next(m for m in b["modes"] if m["name"] == "liar")
    assert liar["status"] == "FAILED" and "layer c1: relative L2 1.00e-02" in liar["reason"]


def test_a_backend_wrong_in_every_mode_fails_and_reaches_no_ratio(tmp_path, doubles, capsys):
    code, res = _run(tmp_path, ["clblast-double", "all-wrong", "two-faced"])
    b = _entry(res, "all-wrong")
    assert code == 1 and b["status"] == "FAILED" and "no mode passed" in b["reason"]
    out = capsys.readouterr().out
    answer = out[out.index("The answer:"):]
    hand = next(line for line in answer.splitlines() if line.startswith("- Hand-written"))
    assert "all-wrong" not in hand and "`all-wrong` (FAILED" in answer.splitlines()[-1]
    summary = out[out.index("backend "):out.index("The answer:")]
    row = next(line for line in summary.splitlines() if line.startswith("all-wrong"))
    assert "x [" not in row


def test_an_unchecked_run_names_no_winner(tmp_path, doubles, capsys):
    code, res = _run(tmp_path, ["clblast-double", "two-faced"], "--mode", "performance")
    assert code == 0 and _entry(res, "two-faced")["mode"] == "fast-wrong"   # nothing to check it by: said below
    out = capsys.readouterr().out
    said = " ".join(out[out.index("The answer:"):].split())
    assert "- No ratio: this run did not check outputs" in said


def test_a_mode_that_cannot_win_is_not_prepared_and_says_why(tmp_path, doubles):
    code, res = _run(tmp_path, ["floored"])
    b = _entry(res, "floored")
    assert code == 0 and b["mode"] == "quick"
    hopeless = next(m for m in b["modes"] if m["name"] == "hopeless")
    assert hopeless["status"] == "SKIPPED" and hopeless["compute"] is None
    assert hopeless["reason"].startswith("not timed: it cannot win, as its passes take at least 1000.000 ms "
                                         "(a thousand switches of a millisecond), more than the fastest warm-up pass of "
                                         "floored (quick)")

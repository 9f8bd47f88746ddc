"""What the commands print: every line within a 100-column terminal, `check` ending with its count,
--json as one JSON document on stdout (docs/files.md), `--out -` as the results on stdout, --quiet."""
import json
import re
from pathlib import Path

import pytest

from compare.cli import main
from compare.analysis import compute_ms, trusted
from compare.results import SCHEMA, load_results
from compare.terminal import WIDTH, table

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = [str(ROOT / "reports" / device / f"{net}.json") for device in ("nvidia-h100", "pocl")
             for net in ("lenet", "vgg16", "resnet18", "mobilenet-v2")]


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


@pytest.mark.parametrize("argv", [["nets"], ["backends"], ["devices"], ["answer", *COMMITTED],
                                  ["answer", "--table", *COMMITTED]])
def test_listings_and_the_answer_fit_a_100_column_terminal(capsys, argv):
    code, out, _ = run(capsys, *argv)
    assert code == 0 and out.strip()
    assert widest(out) <= WIDTH, max(out.splitlines(), key=len)


def test_run_and_check_fit_and_check_ends_with_its_count(capsys, tmp_path):
    code, out, _ = run(capsys, "run", "--net", "lenet", "--backends", "numpy,vectorised", "--batch", "2",
                       "--repeats", "5", "--warmup", "1", "--peak-gflops", "10", "--out", str(tmp_path / "r.json"))
    assert code == 0 and "The answer:" in out and widest(out) <= WIDTH, max(out.splitlines(), key=len)
    code, out, _ = run(capsys, "check", "--net", "lenet", "--backends", "numpy,vectorised", "--batch", "2")
    assert code == 0 and widest(out) <= WIDTH
    assert out.rstrip().splitlines()[-1] == "2 of 2 passed"


def test_a_table_wider_than_the_terminal_wraps_its_widest_columns_and_keeps_intervals_whole():
    rows = [["vectorised", "2.72x [2.24, 3.37]", "a long note " * 12], ["numpy", "1.00x (reference)", "short"]]
    text = table(rows, ["backend", "speedup", "note"])
    assert widest(text) <= WIDTH and "2.72x [2.24, 3.37]" in text and len(text.splitlines()) > 4


def test_a_table_fits_the_terminals_width_and_100_columns_where_there_is_none(monkeypatch):
    import os
    import sys

    import compare.terminal as terminal
    rows = [["vectorised", "2.72x [2.24, 3.37]", "a long note " * 12], ["numpy", "1.00x (reference)", "short"]]
    assert terminal.width() == WIDTH   # the tests' output goes to no terminal

    class Tty:
        def isatty(self):
            return True
    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.setattr(terminal.shutil, "get_terminal_size", lambda fallback: os.terminal_size((60, 24)))
    text = table(rows, ["backend", "speedup", "note"])
    assert 50 < widest(text) <= 60 and "2.72x [2.24, 3.37]" in text


@pytest.mark.parametrize("command, key", [("nets", "nets"), ("backends", "backends"), ("devices", "devices")])
def test_json_listings_are_one_document_on_stdout(capsys, command, key):
    code, out, _ = run(capsys, command, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == f"clblast-compare/{command}" and doc["schema_version"] == 1
    assert doc[key] and all(isinstance(item, dict) for item in doc[key])
    if command == "devices":
        assert sum(d["default"] for d in doc["devices"]) == 1
    if command == "backends":
        numpy = next(b for b in doc["backends"] if b["name"] == "numpy")
        assert numpy["status"] == "available" and numpy["family"] == "reference" and numpy["reason"] is None


def test_answer_json_holds_each_comparison_once_and_its_inverse_exactly(capsys):
    code, out, _ = run(capsys, "answer", "--json", *COMMITTED)
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "clblast-compare/answer" and len(doc["files"]) == len(COMMITTED)
    lenet = doc["files"][4]   # PoCL's LeNet-5: the compiler's line
    # the hand-written side named is the fastest checked one in the file, whichever that is now
    res = load_results(COMMITTED[4])
    fastest = min((b for b in trusted(res) if b.family == "hand-written"), key=compute_ms)
    assert lenet["device"].startswith("pthread") and lenet["hand_written"]["backend"] == fastest.name
    assert lenet["clblast"]["depth"] == "database" and lenet["hand_written_over_clblast"]["verdict"] == "faster"
    compiler = next(a for a in lenet["alternatives"] if a["side"] == "compiler")
    assert compiler["fastest"]["depth"].startswith("searched ")
    ratio = compiler["hand_written_over_it"]
    said = next(s for s in lenet["sentences"] if s.startswith("Compiler"))
    # the sentence states the compiler against hand-written: the same interval, inverted when the compiler
    # is faster, as it stands when it is slower
    if ratio["value"] < 1:
        assert f"{1 / ratio['value']:.2f}x [{1 / ratio['high']:.2f}, {1 / ratio['low']:.2f}] faster" in said
    else:
        assert f"{ratio['value']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}] slower" in said


def test_check_json_counts_and_out_dash_puts_the_results_on_stdout(capsys):
    code, out, err = run(capsys, "check", "--net", "lenet", "--backends", "numpy", "--batch", "2", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "clblast-compare/check" and (doc["passed"], doc["checked"]) == (1, 1)
    assert doc["backends"][0]["check"] == "PASS" and "1 of 1 passed" in err
    code, out, err = run(capsys, "run", "--net", "lenet", "--backends", "numpy", "--batch", "2", "--repeats", "2",
                         "--warmup", "1", "--peak-gflops", "10", "--out", "-")
    results = json.loads(out)
    assert code == 0 and results["schema"] == SCHEMA and "GFLOP/s" in err
    assert not Path("-").exists()


def test_quiet_says_only_the_answer(capsys, tmp_path):
    code, out, err = run(capsys, "run", "--net", "lenet", "--backends", "numpy,vectorised", "--batch", "2",
                         "--repeats", "5", "--warmup", "1", "--peak-gflops", "10", "--quiet",
                         "--out", str(tmp_path / "r.json"))
    assert code == 0 and out.splitlines()[0] == "The answer:" and "GFLOP/s" not in out and err == ""
    code, out, _ = run(capsys, "check", "--net", "lenet", "--backends", "numpy", "--batch", "2", "--quiet")
    assert code == 0 and out == "1 of 1 passed\n"


def test_progress_names_the_backend_of_all_the_repeat_and_counts_the_runs_steps(capsys, monkeypatch, tmp_path):
    from compare.commands import execute
    said, steps = [], {"expected": 0.0, "done": []}

    class Recorder:
        def __init__(self, *args, **kwargs):
            pass

        def update(self, text):
            said.append(text)

        def expect(self, n):
            steps["expected"] += n

        def advance(self, n=1):
            steps["done"].append((len(said), n))

        def done(self):
            pass
    monkeypatch.setattr(execute, "Progress", Recorder)
    code, _, _ = run(capsys, "run", "--net", "lenet", "--backends", "numpy,vectorised", "--batch", "2",
                     "--repeats", "5", "--warmup", "1", "--peak-gflops", "10", "--out", str(tmp_path / "r.json"))
    assert code == 0
    assert any(t.startswith("backend 1 of 2: numpy: end to end, repeat 1/5") for t in said)
    # vectorised has modes (plain, replay): its label names the one in use
    assert any(re.match(r"backend 2 of 2: vectorised \((plain|replay)\): end to end, repeat 3/5$", t) for t in said)
    # the time left is the display's, for the whole run: one step a backend, all done by the end, part of
    # the first before the second backend starts
    assert steps["expected"] == 2 and sum(n for _, n in steps["done"]) == pytest.approx(2)
    second = next(i for i, t in enumerate(said) if t.startswith("backend 2 of 2"))
    assert sum(n for at, n in steps["done"] if at <= second) == pytest.approx(1)


@pytest.mark.parametrize("argv, code", [
    (["answer", "--json", "no-such-file.json"], 2),
    (["diff", "--json", "no-such-file.json", "other.json"], 2),
    (["report", "--json", "no-such-file.json"], 2),
    (["run", "--json", "--net", "no-such-net", "--backends", "numpy"], 2),
    (["check", "--json", "--net", "lenet", "--backends", "no-such-backend"], 2),
    (["answer", "--json", "--no-such-option", "x.json"], 2),
])
def test_json_on_failure_is_one_document_with_the_error_and_the_exit_code(capsys, argv, code):
    got, out, err = run(capsys, *argv)
    doc = json.loads(out)
    assert got == code and doc["schema"] == "clblast-compare/error" and doc["exit"] == code
    assert err.strip().splitlines()[-1] == f"error: {doc['error']}" and "\n" not in doc["error"]


def test_report_and_weights_take_json(capsys, tmp_path):
    code, out, err = run(capsys, "report", "--json", COMMITTED[4], "--out", str(tmp_path / "r"))
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "clblast-compare/report" and doc["problems"] == []
    assert doc["pages"] > 0 and doc["answers"][0]["net"] == "lenet" and "pages and" in err
    code, out, _ = run(capsys, "weights", "--json", "--net", "lenet", "--out", str(tmp_path / "w.npz"))
    doc = json.loads(out)
    assert code == 0 and doc["arrays"] > 0 and Path(doc["out"]).exists()


def test_diff_of_a_run_against_itself_says_no_clear_change(capsys):
    code, out, _ = run(capsys, "diff", COMMITTED[4], COMMITTED[4])
    assert code == 0 and "no clear change" in out and "faster" not in out and widest(out) <= WIDTH
    code, out, _ = run(capsys, "diff", "--json", COMMITTED[4], COMMITTED[4])
    doc = json.loads(out)
    assert code == 0 and doc["backends"] and all(r["change"] == "no clear change" for r in doc["backends"])
    assert all(r["low"] <= 1.0 <= r["high"] for r in doc["backends"])


def test_diff_names_a_real_change_and_refuses_two_nets(capsys):
    h200, h100 = (str(ROOT / "reports" / d / "lenet.json") for d in ("nvidia-h200", "nvidia-h100"))
    code, out, _ = run(capsys, "diff", "--json", h200, h100)
    rows = {r["backend"]: r for r in json.loads(out)["backends"]}
    # the two cards' runs differ for real on some backends, whichever way the committed runs go
    changed = [r for r in rows.values() if r.get("low") is not None and (r["low"] > 1.0 or r["high"] < 1.0)]
    assert code == 0 and changed
    for r in changed:
        word = "faster" if r["low"] > 1.0 else "slower"
        assert r["change"] == f"{max(r['ratio'], 1 / r['ratio']):.2f}x {word}", r
    assert rows["tinygrad"]["change"] == "timed only in A"
    code, _, err = run(capsys, "diff", COMMITTED[4], COMMITTED[5])
    assert code == 2 and "two runs of one net" in err


def test_check_announces_one_mode_a_backend_as_its_table_has_a_row_each(capsys):
    code, out, _ = run(capsys, "check", "--net", "lenet", "--backends", "numpy,vectorised", "--batch", "2")
    assert code == 0 and "modes in all" not in out
    assert "checks 2 backends on lenet batch 2, each in the first of its modes that passes" in " ".join(out.split())

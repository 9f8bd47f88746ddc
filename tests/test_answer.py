"""The report's answer in words: the fastest backend, its ratio to CLBlast at
its best with the interval, and the tuning behind CLBlast's figure; and
the table of each problem's tuning progress."""
import json

import pytest

from compare.report import answer
from compare.report import tables as rt
from compare.report import render_report
from compare.results import RunResult, decode
from results_factory import backend, layer, small_results_dict, stats


def _samples(values):
    import numpy as np
    q1, median, q3 = (float(np.percentile(values, q)) for q in (25, 50, 75))
    return {"median": median, "min": min(values), "max": max(values), "q1": q1, "q3": q3, "iqr": q3 - q1,
            "n": len(values), "values": values}


def _results(mutate=lambda d: None) -> RunResult:
    d = small_results_dict()
    mutate(d)
    return decode(RunResult, json.loads(json.dumps(d)))


def test_the_study_question_comes_first_with_its_ratio_and_interval():
    res = _results()
    said = answer.lines(res)
    assert answer.heading(res) == "Test GPU, tiny batch 1:"
    assert said[0] == ("Hand-written `vectorised` (1.250 ms) is 4.00x [4.00, 4.00] faster than CLBlast at its best, "
                       "`clblast` (5.000 ms, database).")
    # the depth in full is on the net's page, not in the sentence
    assert answer.depth_rows(res)[1] == [["clblast", "clblast", "database",
                                          "CLBlast's database parameters (no verified tuning for this device)"]]


def test_no_clear_winner_where_the_interval_spans_one():
    def level(d):
        d["backends"] = [b for b in d["backends"] if b["name"] in ("clblast", "vectorised")]
        d["backends"][0]["timing"]["end_to_end"]["compute"] = _samples([0.9, 1.0, 1.3, 0.95, 1.1])
        d["backends"][1]["timing"]["end_to_end"]["compute"] = _samples([0.8, 0.98, 1.2, 1.05, 0.9])
    said = answer.sentence(_results(level))
    assert said.endswith("against CLBlast at its best, `clblast` (1.000 ms, database): 1.02x [0.83, 1.38] no clear winner.")
    assert "faster" not in said


def test_too_few_samples_give_no_interval_and_no_winner():
    def few(d):
        for b in d["backends"][1:3]:
            b["timing"]["end_to_end"]["compute"] = stats(b["timing"]["end_to_end"]["compute"]["median"], n=3)
    said = answer.sentence(_results(few))
    assert said.endswith("(5.000 ms, database): 4.00x too noisy to call (fewer than 5 repeats).") and "[" not in said


def test_clblast_ahead_is_said_with_the_depth_behind_it():
    def tuned(d):
        d["backends"] = [b for b in d["backends"] if b["name"] in ("clblast", "vectorised")]
        d["backends"][0]["timing"]["end_to_end"]["compute"] = stats(0.5)
        d["backends"][0]["config"] = {"clblast_parameters": "tuned by `compare tune` (...)",
                                      "clblast_tuning_depth": "100% of CLBlast's default search"}
    said = answer.sentence(_results(tuned))
    assert said == ("CLBlast at its best, `clblast` (0.500 ms, tuned 100%) is 2.50x [2.50, 2.50] faster than "
                    "hand-written `vectorised` (1.250 ms).")


def test_a_backend_that_failed_the_oracle_is_in_no_ratio_however_fast():
    def cheat(d):   # a hand-written backend 457x faster than CLBlast, with a wrong output
        wrong = backend("fused", [layer("a", 0.01), layer("b", 0.01)], 0.0109, check_rel=3e-2)
        d["backends"].append(wrong)
    res = _results(cheat)
    said = answer.lines(res)
    assert said[0].startswith("Hand-written `vectorised` (1.250 ms)")
    assert said[-1] == "In no ratio: `fused` (check FAIL)."
    assert not any("fused" in line for line in said[:-1])
    from compare import analysis as an
    assert an.reference(res, "fused") is None and "fused" not in an.speedups(res, an.BEST_CLBLAST).backends
    assert "fused" not in an.utilisation(res).backends
    headers, rows = rt.headline_table([res])
    assert rows[-1] == ["fused", "0.011", "— (check FAIL)"]


def test_a_file_without_checks_gives_no_ratio_and_says_so():
    def unchecked(d):
        d["mode"] = "performance"
        for b in d["backends"]:
            b.pop("check", None)
    res = _results(unchecked)
    assert answer.lines(res) == ["No ratio: this run did not check outputs against the float64 oracle "
                                 "(--mode performance); run it with --mode both."]
    from compare.tables import summary_table
    table = summary_table(res)
    assert "did not check outputs against the float64 oracle" in table and "vs " not in table


def test_the_compiler_and_the_fastest_peer_are_held_against_both():
    def peers(d):
        d["backends"][3] = backend("torch", [layer("a", 0.5), layer("b", 0.5)], 1.0, uses_opencl=False)
        tiny = backend("tinygrad", [layer("a", 1.0), layer("b", 1.0)], 2.5)
        tiny["config"] = {"search_depth": "BEAM=2 on 3 of 3 kernels"}
        d["backends"].append(tiny)
    res = _results(peers)
    said = answer.lines(res)
    assert said[1] == ("Compiler `tinygrad` (2.500 ms, searched 3/3): 2.00x [2.00, 2.00] slower than hand-written, "
                       "2.00x [2.00, 2.00] faster than CLBlast.")
    assert said[2] == ("Fastest peer `torch` (1.000 ms): 1.25x [1.25, 1.25] faster than hand-written, 5.00x [5.00, 5.00] "
                       "faster than CLBlast.")
    assert ["tinygrad", "compiler", "searched 3/3", "BEAM=2 on 3 of 3 kernels"] in answer.depth_rows(res)[1]


def test_the_database_mode_winning_is_said_so():
    def database(d):
        d["backends"][1]["mode"] = "database"
        d["backends"][1]["config"] = {"clblast_parameters": "CLBlast database default",
                                      "clblast_tuning_depth": "54% of CLBlast's default search"}
    res = _results(database)
    assert "(`clblast-best`" not in answer.sentence(res) and "`clblast` (5.000 ms, database)" in answer.sentence(res)
    assert answer.depth_text(res.backend("clblast")).startswith(
        "CLBlast's database parameters, faster here than its tuned ones (tuned to 54%")


def test_the_tuning_progress_table_and_the_report_opening_with_the_answer(tmp_path):
    def progress(d):
        d["backends"][1]["config"] = {"clblast_tuning_progress": [
            {"problem": "gemm 8x8x8", "tried": 50, "default": 100, "curve": [[1, 0.5], [20, 0.3], [45, 0.2]],
             "verified": {"choice": "xgemm V=1 #44", "ms": 0.25, "database_ms": 0.4}},
            {"problem": "gemv 8x8", "tried": 0, "default": None, "curve": [], "verified": None}]}
    res = _results(progress)
    headers, rows = rt.tuning_progress_table(res.backend("clblast"))
    assert headers[2:6] == ["best at 10%", "best at 25%", "best at 50%", "best at 100%"]
    assert rows[0] == ["gemm 8x8x8", "50/100", "0.5000", "0.3000", "0.2000", "—",
                       "xgemm V=1 #44: 0.2500 (database 0.4000)"]
    assert rows[1][:2] == ["gemv 8x8", "not searched"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(small_results_dict()))
    from compare.results import load_results
    render_report([load_results(path)], [str(path)], str(tmp_path / "out"))
    md = (tmp_path / "out" / "report.md").read_text()
    assert md.index("## The answer") < md.index("## Headline") and "- Hand-written `vectorised` (1.250 ms)" in md


def test_sets_chosen_at_another_batch_are_named_as_such():
    def borrowed(d, mode):
        d["backends"][1]["mode"] = mode
        d["backends"][1]["config"] = {
            "clblast_parameters": "tuned by `compare tune` at tiny batch 1: ..." if mode == "tuned" else
            "CLBlast database default", "clblast_tuned_at": "tiny batch 1",
            "clblast_tuning_depth": "not tuned: none of its 3 problems searched yet"}
    tuned = answer.depth_text(_results(lambda d: borrowed(d, "tuned")).backend("clblast"))
    assert ("CLBlast with the sets chosen at tiny batch 1; this batch's own problems: not tuned: none of its 3 "
            "problems searched yet") in tuned
    database = answer.depth_text(_results(lambda d: borrowed(d, "database")).backend("clblast"))
    assert "CLBlast's database parameters, faster here than its tuned ones (the sets chosen at tiny batch 1;" \
        in database


def test_a_tuned_mode_that_failed_is_not_called_slower():
    def failed(d):
        d["backends"][1]["mode"] = "database"
        d["backends"][1]["config"] = {"clblast_parameters": "CLBlast database default",
                                      "clblast_tuning_depth": "100% of CLBlast's default search"}
        d["backends"][1]["modes"] = [
            {"name": "tuned", "status": "FAILED", "reason": "RuntimeError: produced NaN/Inf in its output"},
            {"name": "database", "status": "OK", "compute": d["backends"][1]["timing"]["end_to_end"]["compute"]}]
    said = answer.depth_text(_results(failed).backend("clblast"))
    assert "CLBlast's database parameters, its tuned mode failed the run's checks (tuned to 100%" in said
    assert "faster here" not in said


def _with_engine(d, ms=3.0, depth="auto-tuned: 2 of 4 convolutions searched"):
    """The library engine on the same device (OpenCV's DNN): a backend of family "engine"."""
    engine = backend("opencv", [layer("a", ms / 2), layer("b", ms / 2)], ms)
    engine["config"] = {"search_depth": depth}
    d["backends"].append(engine)


def test_the_engine_gets_a_line_of_its_own_after_the_study_and_before_the_peer():
    def both(d):
        tiny = backend("tinygrad", [layer("a", 1.0), layer("b", 1.0)], 2.5)
        tiny["config"] = {"tinygrad_search": "untuned: BEAM=0, tinygrad's heuristics"}
        d["backends"] += [tiny, backend("torch", [layer("a", 0.5), layer("b", 0.5)], 1.0, uses_opencl=False)]
        _with_engine(d)
    res = _results(both)
    said = answer.lines(res)
    assert [line.split(" ", 1)[0] for line in said] == ["Hand-written", "Compiler", "Engine", "Fastest"]
    assert said[1].startswith("Compiler `tinygrad` (2.500 ms, untuned): ")
    assert said[2] == ("Engine `opencv` (3.000 ms, searched 2/4): 2.40x [2.40, 2.40] slower than hand-written, "
                       "1.67x [1.67, 1.67] faster than CLBlast.")
    assert [c.family for c in answer.contenders(res)] == ["hand-written", "compiler", "engine", "peer"]
    ((device, headers, rows),) = answer.answer_tables([res])
    assert headers == ["net", "hand-written", "CLBlast at its best", "speedup", "compiler", "engine", "fastest peer"]
    assert rows[0][5] == "`opencv` 3.000 ms, searched 2/4: 2.40x [2.40, 2.40]"   # hand-written over it
    assert ["opencv", "engine", "searched 2/4", "auto-tuned: 2 of 4 convolutions searched"] in answer.depth_rows(res)[1]


def test_the_tables_are_one_per_device_and_drop_the_sides_no_file_of_it_has():
    other = _results()
    other.device.name = "Other GPU"
    with_engine = _results(_with_engine)
    tables = answer.answer_tables([_results(), with_engine, other])
    assert [(device, len(rows)) for device, _, rows in tables] == [("Test GPU", 2), ("Other GPU", 1)]
    assert tables[0][1][-1] == "engine" and tables[1][1] == ["net", "hand-written", "CLBlast at its best", "speedup"]
    assert tables[0][2][0][-1] == "—"   # the file without the engine


def test_every_sentence_of_the_committed_answers_is_short():
    from pathlib import Path
    from compare.results import load_results
    root = Path(__file__).resolve().parent.parent / "reports"
    files = [p for p in sorted(root.glob("*/*.json")) + sorted(root.glob("*/compiler/*.json"))
             if json.loads(p.read_text()).get("schema") == "clblast-compare/results"]
    results = [load_results(p) for p in files]
    said = [line for r in results for line in answer.lines(r)]
    assert len(said) > 10
    assert max(len(line) for line in said) < answer.SENTENCE_MAX
    for _, headers, rows in answer.answer_tables(results):
        assert len(headers) <= 7 and all(len(r) == len(headers) for r in rows)


def test_the_engine_shows_through_the_commands_and_the_report_once_its_results_exist(tmp_path, capsys):
    from compare.cli import main
    from compare.results import load_results
    path = tmp_path / "engine.json"
    d = small_results_dict()
    _with_engine(d, ms=0.625)   # faster than the hand-written backend
    path.write_text(json.dumps(d))
    assert main(["answer", str(path)]) == 0
    out = capsys.readouterr().out
    assert "- Engine `opencv` (0.625 ms, searched 2/4): 2.00x [2.00, 2.00] faster than hand-written," in out
    assert main(["answer", "--markdown", str(path)]) == 0
    table = capsys.readouterr().out
    assert "| engine " in table and "`opencv` 0.625 ms, searched 2/4: 0.50x [0.50, 0.50]" in table
    assert main(["answer", "--json", str(path)]) == 0
    (engine,) = json.loads(capsys.readouterr().out)["files"][0]["alternatives"]
    assert engine["side"] == "engine" and engine["fastest"]["depth"] == "searched 2/4"
    assert engine["hand_written_over_it"]["value"] == 0.5 and engine["it_over_clblast"]["verdict"] == "faster"
    render_report([load_results(path)], [str(path)], str(tmp_path / "out"))
    md = (tmp_path / "out" / "report.md").read_text()
    assert "- Engine `opencv` (0.625 ms, searched 2/4)" in md
    page = (tmp_path / "out" / "net-tiny-b1-test-gpu.md").read_text()
    assert "| opencv " in page and "auto-tuned: 2 of 4 convolutions searched" in page


_UNTUNED_RAN = ("opencl: ocl4dnn's configurations by its heuristics; tuned mode: 3 of 7 convolutions of the pass "
                "auto-tuned on this device (...)")


@pytest.mark.parametrize("mode, depth, tuned_ran, label", [
    ("opencl-tuned", "opencl-tuned: 3 of 7 convolutions of the pass auto-tuned on this device; none tuned at run "
                     "time (ocl4dnn's configurations in /somewhere, by `compare tune --scope opencv`)", True,
     "tuned 3/7"),
    ("opencl", _UNTUNED_RAN, False, "untuned"),
    # the tuned mode passed and measured no faster: the depth it reached is still said
    ("opencl", _UNTUNED_RAN, True, "tuned 3/7 no gain"),
    # a tuning that tuned all it could: what is not ocl4dnn's to tune is not left undone
    ("opencl-tuned", "opencl-tuned: 3 of 7 convolutions of the pass auto-tuned on this device (the other 4 are not "
                     "ocl4dnn's to tune: a whole pass of its tuning tuned none of them); none tuned at run time", True,
     "tuned 3/3 tunable"),
    # and where that tuning measured no faster (the H200's MobileNet-v2, step 51): "tunable" still, not "in part"
    ("opencl", "opencl: ocl4dnn's configurations by its heuristics; tuned mode: 3 of 7 convolutions of the pass "
               "auto-tuned on this device (the other 4 are not ocl4dnn's to tune: a whole pass of its tuning tuned "
               "none of them)", True, "tuned 3/3 tunable no gain"),
    ("opencl-tuned", "opencl-tuned: 2 of 7 convolutions of the pass auto-tuned on this device (the other 4 are not "
                     "ocl4dnn's to tune: a whole pass of its tuning tuned none of them); none tuned at run time", True,
     "tuned 2/7"),
])
def test_the_engines_depth_is_the_mode_that_ran_and_its_caveat_stays(mode, depth, tuned_ran, label):
    def engine(d):
        _with_engine(d, depth=depth)
        d["backends"][-1]["mode"] = mode
        other = "opencl" if mode == "opencl-tuned" else "opencl-tuned"
        d["backends"][-1]["modes"] = [{"name": mode, "status": "OK"},
                                      {"name": other, "status": "OK" if tuned_ran else "FAILED", "reason": None if tuned_ran else "wrong"}]
        d["backends"][-1]["config"]["mode_label"] = f"{mode}, partly on the CPU"
    res = _results(engine)
    said = next(line for line in answer.lines(res) if line.startswith("Engine"))
    assert said.startswith(f"Engine `opencv` (3.000 ms, {label}, partly on the CPU): ")
    assert "/somewhere" not in said and len(said) < answer.SENTENCE_MAX


def test_a_transformer_answer_says_who_wins_attention_and_the_projections():
    def transformer(d):
        d["net"]["layers"] = [{"name": "a", "kind": "attention", "flops": 2_000_000},
                              {"name": "b", "kind": "conv", "category": "conv 1x1", "flops": 1_000_000}]
    res = _results(transformer)
    said = answer.lines(res)
    # vectorised: attention 1.0 ms against clblast's 4.0, the 1x1 1.0 against 2.0 (results_factory)
    assert said[1] == ("On attention (1 layer): hand-written `vectorised` is 4.00x [4.00, 4.00] faster than CLBlast "
                       "at its best (`clblast`).")
    assert said[2] == ("On the projections and MLP (1 layer): hand-written `vectorised` is 2.00x [2.00, 2.00] faster "
                       "than CLBlast at its best (`clblast`).")
    assert answer.work_lines(_results()) == []   # a net without attention: the study's line alone


def test_where_clblast_wins_a_kind_of_work_the_line_says_so():
    def transformer(d):
        d["net"]["layers"] = [{"name": "a", "kind": "attention", "flops": 2_000_000},
                              {"name": "b", "kind": "conv", "category": "conv 1x1", "flops": 1_000_000}]
        d["backends"][2]["timing"]["layers"][1] = layer("b", 4.0)   # vectorised twice clblast's time on the 1x1
    said = answer.lines(_results(transformer))
    assert said[2] == ("On the projections and MLP (1 layer): CLBlast at its best (`clblast`) is 2.00x [2.00, 2.00] "
                       "faster than hand-written `vectorised`.")


def test_a_busy_host_says_so_in_one_line_and_names_no_winner_where_the_interval_spans_one():
    """A fifty-fold gap with an interval across 1x, on a host whose load was four times its cores."""
    def busy(d):
        d["host"].update({"load_1m": 8.0, "cpus": 2, "governor": "powersave"})
        d["backends"] = [b for b in d["backends"] if b["name"] in ("clblast", "vectorised")]
        d["backends"][0]["timing"]["end_to_end"]["compute"] = _samples([1.0, 60.0, 1.2, 55.0, 1.1])
        d["backends"][1]["timing"]["end_to_end"]["compute"] = _samples([50.0, 1.0, 52.0, 1.3, 49.0])
    res = _results(busy)
    said = answer.lines(res)
    assert said[0].startswith("Busy host (load 8.00 on 2 cores as the run started)")
    assert said[1].endswith("too noisy to call.") and "faster" not in said[1] and "level" not in said[1]
    assert res.host.governor == "powersave"


def test_a_quiet_host_and_an_old_file_without_the_load_say_nothing_of_noise():
    assert not any(line.startswith("Busy host") for line in answer.lines(_results()))
    quiet = _results(lambda d: d["host"].update({"load_1m": 0.3, "cpus": 2}))
    assert not any(line.startswith("Busy host") for line in answer.lines(quiet))


def test_one_vocabulary_the_old_dialects_are_nowhere_in_what_the_code_says():
    """docs/glossary.md's words only: the phrases it replaced appear in no string the terminal or the report
    is made from."""
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    old = ("no winner", "no clear difference", "too few samples", "level with", "the speed of", "few repeats")
    sources = [p for p in (root / "compare").rglob("*.py")]
    found = [(p.name, phrase) for p in sources for phrase in old if phrase in p.read_text(encoding="utf-8")]
    assert found == []
    glossary = (root / "docs" / "glossary.md").read_text(encoding="utf-8")
    from compare.speedup import NO_CLEAR_WINNER, TOO_NOISY
    from compare.diff import NO_CLEAR_CHANGE
    assert all(f"**{w}**" in glossary for w in (NO_CLEAR_WINNER, TOO_NOISY, NO_CLEAR_CHANGE, "N.NNx faster"))

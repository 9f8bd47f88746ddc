"""The report's answer in words: the fastest backend, its ratio to CLBlast at
its best with the interval, and the tuning behind CLBlast's figure; and
the table of each problem's tuning progress."""
import json

from compare import answer
from compare import report_tables as rt
from compare.report import render_report
from compare.results import RunResult, decode
from results_factory import small_results_dict, stats


def _samples(values):
    import numpy as np
    q1, median, q3 = (float(np.percentile(values, q)) for q in (25, 50, 75))
    return {"median": median, "min": min(values), "max": max(values), "q1": q1, "q3": q3, "iqr": q3 - q1,
            "n": len(values), "values": values}


def _results(mutate=lambda d: None) -> RunResult:
    d = small_results_dict()
    mutate(d)
    return decode(RunResult, json.loads(json.dumps(d)))


def test_a_hand_written_winner_is_named_with_its_ratio_and_interval():
    said = answer.sentence(_results())
    assert said == ("On Test GPU, tiny batch 1: `vectorised` is the fastest backend (1.250 ms), 4.00x [4.00, 4.00] "
                    "faster than CLBlast at its best (`clblast`, 5.000 ms, CLBlast's database parameters "
                    "(no verified tuning for this device)).")


def test_no_clear_difference_where_the_interval_spans_one():
    def level(d):
        d["backends"] = [b for b in d["backends"] if b["name"] in ("clblast", "vectorised")]
        d["backends"][0]["timing"]["end_to_end"]["compute"] = _samples([0.9, 1.0, 1.3])
        d["backends"][1]["timing"]["end_to_end"]["compute"] = _samples([0.8, 0.98, 1.2])
    said = answer.sentence(_results(level))
    assert "no clear difference against CLBlast at its best" in said


def test_clblast_fastest_and_the_depth_behind_it():
    def tuned(d):
        d["backends"] = [b for b in d["backends"] if b["name"] in ("clblast", "vectorised")]
        d["backends"][0]["timing"]["end_to_end"]["compute"] = stats(0.5)
        d["backends"][0]["config"] = {"clblast_parameters": "tuned by `compare tune` (...)",
                                      "clblast_tuning_depth": "100% of CLBlast's default search"}
    said = answer.sentence(_results(tuned))
    assert said.startswith("On Test GPU, tiny batch 1: CLBlast at its best (`clblast`, 0.500 ms, CLBlast tuned to "
                           "100% of CLBlast's default search) is the fastest backend; the next, `vectorised`, "
                           "takes 2.50x [2.50, 2.50] its time")


def test_the_database_mode_winning_is_said_so():
    def database(d):
        d["backends"][1]["mode"] = "database"
        d["backends"][1]["config"] = {"clblast_parameters": "CLBlast database default",
                                      "clblast_tuning_depth": "54% of CLBlast's default search"}
    assert "CLBlast's database parameters, faster here than its tuned ones (tuned to 54%" in \
        answer.sentence(_results(database))


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
    assert md.index("## The answer") < md.index("## Headline") and "`vectorised` is the fastest backend" in md


def test_sets_chosen_at_another_batch_are_named_as_such():
    def borrowed(d, mode):
        d["backends"][1]["mode"] = mode
        d["backends"][1]["config"] = {
            "clblast_parameters": "tuned by `compare tune` at tiny batch 1: ..." if mode == "tuned" else
            "CLBlast database default", "clblast_tuned_at": "tiny batch 1",
            "clblast_tuning_depth": "not tuned: none of its 3 problems searched yet"}
    tuned = answer.sentence(_results(lambda d: borrowed(d, "tuned")))
    assert ("CLBlast with the sets chosen at tiny batch 1; this batch's own problems: not tuned: none of its 3 "
            "problems searched yet") in tuned
    database = answer.sentence(_results(lambda d: borrowed(d, "database")))
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
    said = answer.sentence(_results(failed))
    assert "CLBlast's database parameters, its tuned mode failed the run's checks (tuned to 100%" in said
    assert "faster here" not in said

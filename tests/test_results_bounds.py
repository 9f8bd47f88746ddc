"""Results that flood (issue 56): a results file is read under a size and a
sample cap, each said in one line, and the bootstrap interval takes bounded
memory, so `compare report` on a million samples of one backend stays within
a few hundred MB; the intervals of ordinary files do not change."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from compare import intervals, results
from compare.cli import main
from compare.intervals import ratio_interval
from compare.results import Samples
from results_factory import small_results_dict

ROOT = Path(__file__).resolve().parent.parent


def _with_samples(n: int, seed: int = 0) -> dict:
    """The small results file, its 'vectorised' backend's compute timed `n` times."""
    d = small_results_dict()
    values = 1.25 + np.random.default_rng(seed).normal(0, 0.05, n)
    d["backends"][2]["timing"]["end_to_end"]["compute"] = dataclasses.asdict(Samples.of(list(values)))
    return d


def test_the_bootstrap_drawn_in_chunks_gives_the_same_interval_as_drawn_at_once(monkeypatch):
    rng = np.random.default_rng(5)
    cases = [(list(10 + rng.normal(0, 1, n)), list(5 + rng.normal(0, 1, m))) for n, m in ((5, 7), (40, 33), (900, 1200))]
    at_once = [ratio_interval(a, b) for a, b in cases]
    monkeypatch.setattr(intervals, "CHUNK", 1)   # one resample at a time
    assert [ratio_interval(a, b) for a, b in cases] == at_once


def test_a_million_samples_are_bootstrapped_in_bounded_memory_from_a_seeded_subsample():
    rng = np.random.default_rng(6)
    big, small = list(10 + rng.normal(0, 1, 1_000_000)), list(5 + rng.normal(0, 1, 20))
    tracemalloc.start()
    try:
        got = ratio_interval(big, small)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 120 * 2**20, f"{peak / 2**20:.0f} MiB"   # at once it was (2000, 10**6) int64: 14.9 GiB
    assert got[0] < 2.0 < got[1] and got == ratio_interval(big, small)   # seeded: the same every time
    assert intervals.subsampled(len(big)) and not intervals.subsampled(intervals.SUBSAMPLE)


def test_report_on_a_million_samples_stays_within_a_few_hundred_mb_and_says_it_subsampled(tmp_path):
    path = tmp_path / "million.json"
    path.write_text(json.dumps(_with_samples(1_000_000)))
    # the report run in a child that says its own peak resident memory (KiB) on its last line: VmHWM, its
    # memory's own high-water mark (ru_maxrss would carry the forking pytest worker's, kept across exec)
    code = ("import re, sys, runpy\nsys.argv = ['compare', 'report', sys.argv[1], '--out', sys.argv[2]]\n"
            "try:\n    runpy.run_module('compare', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
            "print(re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "rep")], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    peak_kib = int(proc.stderr.strip().splitlines()[-1])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert peak_kib < 500 * 1024, f"{peak_kib / 1024:.0f} MiB"
    page = next((tmp_path / "rep").glob("net-*.md")).read_text()
    assert "vectorised kept more than 5,000 timings of one quantity" in page
    assert "seeded subsample of 5,000" in page


def test_an_ordinary_file_says_nothing_of_a_subsample(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(small_results_dict()))
    assert main(["report", str(tmp_path / "r.json"), "--out", str(tmp_path / "rep"), "--quiet"]) == 0
    assert "subsample" not in next((tmp_path / "rep").glob("net-*.md")).read_text()


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_a_file_of_more_samples_than_the_cap_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(results, "MAX_SAMPLES", 1000)
    (tmp_path / "r.json").write_text(json.dumps(_with_samples(1200)))
    assert main(["report", str(tmp_path / "r.json"), "--out", str(tmp_path / "rep")]) == 2
    line = _one_line(capsys)
    kept = 1200 + results._samples(small_results_dict()) - 5   # the compute's 5 timings replaced by 1,200
    assert f"results file {tmp_path / 'r.json'} keeps {kept:,} timings, more than the 1,000 timings" in line, line
    assert "fewer --repeats" in line and not (tmp_path / "rep").exists()


def test_a_file_of_millions_of_tiny_values_is_refused_before_it_is_parsed(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(results, "MAX_SAMPLES", 1000)
    d = small_results_dict()
    d["host"]["junk"] = [0] * 5000   # no timings, but values enough to fill the memory at scale
    (tmp_path / "r.json").write_text(json.dumps(d))
    monkeypatch.setattr(results.json, "loads", lambda *a, **k: pytest.fail("parsed"))
    assert main(["answer", str(tmp_path / "r.json")]) == 2
    assert "holds over 2,000 values, more than the 1,000 timings" in _one_line(capsys)


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(results, "MAX_FILE_BYTES", 4096)
    (tmp_path / "r.json").write_text(json.dumps(_with_samples(400)))
    assert main(["report", str(tmp_path / "r.json"), "--out", str(tmp_path / "rep")]) == 2
    assert str(tmp_path / "r.json") in _one_line(capsys)


def test_run_refuses_repeats_whose_timings_would_pass_the_sample_cap(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("compare.commands.plan.MAX_SAMPLES", 1000)
    assert main(["run", "--net", "lenet", "--backends", "numpy", "--repeats", "200",
                 "--out", str(tmp_path / "r.json")]) == 2
    line = _one_line(capsys)
    assert "more than a results file of at most 1,000 timings (what `compare report` reads) holds" in line, line
    assert line.endswith(f"--repeats {1000 // int(line.split(' keeps ')[1].split()[0].replace(',', ''))} fits"), line

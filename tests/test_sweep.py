"""Batch sweeps: the time-per-image and speedup tables of small hand-made
results checked exactly, the crossover in words, batches that do not fit,
the sweep file (written, read back, refused when malformed), an interrupted
sweep, and one real sweep on this machine rendered by `compare report`."""
import json
from dataclasses import asdict

import pytest

from compare import runner
from compare import sweep as sw
from compare.report import sweeps as sr
from compare.cli import main
from compare.results import RunResult, Samples, decode, load_results, write_results
from conftest import backend_or_skip
from results_factory import FAMILY, backend, layer, small_results_dict
from test_report import _markdown_table

PNG = b"\x89PNG\r\n\x1a\n"
MISFIT = ("im2col buffer of a needs 9.0 MiB in one buffer, more than Test GPU allows (MAX_MEM_ALLOC_SIZE 4.0 MiB); "
          "try a smaller --batch or another device")


def timed(name, *compute_ms, summary=None):
    """A backend whose end-to-end compute samples are `compute_ms`."""
    b = backend(name, [layer("a", 1.0), layer("b", 1.0)], 1.0)
    b["timing"]["end_to_end"]["compute"] = asdict(Samples.of(compute_ms))
    if summary:
        b["summary"] = summary
    return b


def misfit(name):
    return {"name": name, "summary": f"the {name} backend", "family": FAMILY[name], "uses_opencl": True, "status": "FAILED",
            "error_kind": "user", "reason": MISFIT}


def run_at(batch, *backends) -> RunResult:
    d = small_results_dict()
    d["net"]["batch"] = batch
    d["backends"] = list(backends) + [{"name": "torch", "status": "UNAVAILABLE", "reason": "not installed"}]
    return decode(RunResult, d)


def five(ms):
    """Five samples of one value: each interval is one point, and there are enough for one."""
    return (ms,) * 5


def three_batches():
    return [run_at(1, timed("numpy", *five(2.5)), timed("clblast", *five(5.0)), timed("vectorised", *five(1.25))),
            run_at(4, timed("numpy", *five(6.0)), timed("clblast", *five(8.0)), misfit("vectorised")),
            run_at(16, timed("numpy", *five(20.0)), timed("clblast", *five(16.0)), timed("vectorised", *five(40.0)))]


def test_time_per_image_table():
    headers, rows = sr.per_image_table(three_batches())
    assert headers == ["batch", "numpy", "clblast", "vectorised"]   # torch: unavailable at every batch, left out
    assert rows == [["1", "2.500", "5.000", "1.250"],                 # compute ms / batch
                    ["4", "1.500", "2.000", "does not fit"],          # 6 / 4, 8 / 4
                    ["16", "1.250", "1.000", "2.500"]]                # 20 / 16, 16 / 16, 40 / 16


def test_speedup_table_and_crossover():
    runs = three_batches()
    headers, rows = sr.speedup_table(runs)
    assert headers == ["batch", "best hand-written", "its ms/image", "CLBlast at its best", "its ms/image",
                       "speedup (95% interval)", "faster"]
    # every sample is the same, so each interval is one point: 5 / 1.25 = 4x, 16 / 40 = 0.4x
    assert rows == [["1", "vectorised", "1.250", "clblast", "5.000", "4.00x [4.00, 4.00]", "vectorised"],
                    ["4", "—", "—", "clblast", "2.000", "—", "vectorised does not fit"],
                    ["16", "vectorised", "2.500", "clblast", "1.000", "0.40x [0.40, 0.40]", "clblast"]]
    assert sr.crossover(sr.comparisons(runs)) == (
        "CLBlast at its best is faster from batch 16 on (interval excludes 1x); before that, the best hand-written "
        "backend is faster at batch 1; not compared at batch 4: vectorised does not fit.")


def test_the_best_of_each_side_is_taken():
    res = run_at(2, timed("clblast", *five(6.0)), timed("clblast-convgemm", *five(3.0)),
                 timed("vectorised", *five(2.0)), timed("fused", *five(1.5)),
                 timed("numpy", *five(0.5)))   # faster still, but neither hand-written nor CLBlast
    (row,) = sr.speedup_table([res])[1]
    assert row == ["2", "fused", "0.7500", "clblast-convgemm", "1.500", "2.00x [2.00, 2.00]", "fused"]


HAND = (timed("clblast", *five(4.0)), timed("vectorised", *five(1.0)))                   # 4x: hand-written faster
SPREAD = (timed("clblast", 2.0, 2.5, 3.0, 3.5, 4.0), timed("vectorised", 2.5, 2.7, 3.0, 3.2, 3.5))   # 1x, spans it
CLBLAST = (timed("clblast", *five(1.0)), timed("vectorised", *five(2.0)))                # 0.5x: CLBlast faster


@pytest.mark.parametrize("batches, sentence", [
    ([(1, HAND), (2, HAND), (4, SPREAD), (8, CLBLAST)],
     "CLBlast at its best is faster from batch 8 on (interval excludes 1x); before that, the best hand-written "
     "backend is faster at batches 1 and 2; too noisy to call at batch 4."),
    ([(1, HAND), (2, HAND), (4, HAND), (8, HAND)],
     "no crossover up to batch 8: the best hand-written backend stays faster (every interval excludes 1x)."),
    ([(1, HAND), (2, SPREAD)],
     "no crossover up to batch 2: the best hand-written backend is faster at batch 1; too noisy to call at batch 2."),
])
def test_crossover_in_words(batches, sentence):
    comps = sr.comparisons([run_at(b, *pair) for b, pair in batches])
    assert sr.crossover(comps) == sentence
    spread = [c for c in comps if c.verdict == sr.UNCLEAR]
    for c in spread:   # a winner is named only where the interval excludes 1x
        assert c.speedup.value == 1.0 and c.speedup.interval[0] < 1.0 < c.speedup.interval[1]


def test_too_few_repeats_name_no_winner_at_any_batch():
    few = [run_at(b, timed("clblast", 4.0, 4.0, 4.0), timed("vectorised", 1.0, 1.0, 1.0)) for b in (1, 2)]
    assert sr.crossover(sr.comparisons(few)) == ("no crossover up to batch 2: too noisy to call at batches 1 and 2 "
                                                 "(fewer than 5 timed repeats).")


def test_a_batch_that_does_not_fit_is_an_answer_not_an_error():
    runs = three_batches()
    assert runner.exit_code(runs[1]) == 2      # `compare run` at that batch: refused
    assert sw.exit_code(runs) == 0             # in a sweep: one of its findings
    assert "vectorised does not fit the device at batch 4: a buffer exceeds its MAX_MEM_ALLOC_SIZE." in sr.notes(runs)


def test_batches():
    assert sw.default_batches("lenet") == [1, 2, 4, 8, 16, 32, 64]
    assert sw.default_batches("vgg16") == [1, 2, 4, 8, 16]
    assert sw.default_batches("my-model") == [1, 2, 4, 8]
    assert sw.parse_batches("8, 1,2,2") == [1, 2, 8]


# -- the sweep file -----------------------------------------------------------------

def write_sweep_folder(folder, runs) -> str:
    entries = []
    for res in runs:
        name = sw.results_name(res.net.name, res.net.batch)
        write_results(folder / name, res)
        entries.append(sw.SweepRun(res.net.batch, name))
    path = folder / sw.SWEEP_FILE
    sw.write_sweep(path, sw.Sweep(net="tiny", device="Test GPU", created="2026-11-01T10:00:00+00:00",
                                  command="compare sweep --net tiny", batches=entries))
    return str(path)


def test_report_of_a_sweep_file(tmp_path):
    path = write_sweep_folder(tmp_path, three_batches())
    loaded = sw.load_sweep(tmp_path)   # the folder names its sweep file
    assert [r.net.batch for r in loaded.results] == [1, 4, 16] and loaded.path == path
    assert main(["report", path, "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "sweep-tiny-test-gpu.md").read_text()
    assert _markdown_table(md, "## Time per image (ms)")["4"] == ["1.500", "2.000", "does not fit"]
    assert _markdown_table(md, "## The best hand-written backend")["16"][4:] == ["0.40x [0.40, 0.40]", "clblast"]
    assert "Where CLBlast catches up: CLBlast at its best is faster from batch 16 on" in md
    assert "](sweep-tiny-test-gpu.md): where CLBlast catches up" in (tmp_path / "rep" / "report.md").read_text()
    for name in ("sweep-tiny-test-gpu-per-image.png", "sweep-tiny-test-gpu-speedup.png"):
        assert (tmp_path / "rep" / name).read_bytes()[:8] == PNG


@pytest.mark.parametrize("spoil, message", [
    (lambda d: d.update(batches="x"), "is malformed: batches: expected a list, got 'x'"),
    (lambda d: d.pop("net"), "is malformed: net: is missing"),
    (lambda d: d["batches"][0].update(batch=0), "is malformed: batches[0].batch: must be a positive whole number"),
    (lambda d: d["batches"][1].update(batch=1), "is malformed: batches[1].batch: batch 1 is listed twice"),
    (lambda d: d.update(schema_version=2), "has sweep schema version 2; this compare reads version 1: update"),
    (lambda d: d["batches"][0].update(results="gone.json"), "names results file gone.json (batch 1), which is not in"),
    (lambda d: d["batches"][1].update(batch=2), "tiny-batch4.json holds tiny batch 4, not tiny batch 2"),
])
def test_a_malformed_sweep_file_is_one_line_and_exit_2(tmp_path, capsys, spoil, message):
    path = write_sweep_folder(tmp_path, three_batches())
    data = json.loads(open(path).read())
    spoil(data)
    open(path, "w").write(json.dumps(data))
    assert main(["report", path, "--out", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "rep").exists()


def test_a_cut_short_sweep_file_and_a_folder_without_one(tmp_path, capsys):
    path = write_sweep_folder(tmp_path, three_batches())
    text = open(path).read()   # read before the file is opened for writing, which empties it
    open(path, "w").write(text[:40])
    assert main(["report", path, "--out", str(tmp_path / "rep")]) == 2
    assert f"sweep file {path} is not valid JSON" in capsys.readouterr().err
    open(path, "w").close()
    assert main(["report", path, "--out", str(tmp_path / "rep")]) == 2
    assert f"sweep file {path} is empty; give a sweep file that `compare sweep` wrote" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "rep")]) == 2
    assert "holds neither a sweep.json nor a sweep's results files" in capsys.readouterr().err


def test_a_stopped_sweep_reports_the_batches_that_finished(tmp_path):
    # a sweep cut short leaves its finished batches' results files and no sweep file (compare/sweep.py)
    path = write_sweep_folder(tmp_path, three_batches())
    (tmp_path / sw.SWEEP_FILE).unlink()
    (tmp_path / sw.results_name("tiny", 16)).unlink()
    loaded = sw.load_sweep(tmp_path)
    assert [r.net.batch for r in loaded.results] == [1, 4]
    assert [(b.batch, b.results) for b in loaded.sweep.batches] == [(1, "tiny-batch1.json"), (4, "tiny-batch4.json")]
    assert "stopped: no sweep.json; batches 1, 4 finished" in loaded.sweep.command
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "sweep-tiny-test-gpu.md").read_text()
    assert _markdown_table(md, "## Time per image (ms)")["4"] == ["1.500", "2.000", "does not fit"]
    assert path not in md


@pytest.mark.parametrize("batch, message", [("1,x", "--batch takes positive integers separated by commas"),
                                            ("0,2", "--batch must be a positive integer, not 0")])
def test_bad_batches_are_one_line_and_exit_2(tmp_path, capsys, batch, message):
    assert main(["sweep", "--net", "lenet", "--backends", "numpy", "--batch", batch, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "s").exists()


def test_an_interrupted_sweep_keeps_finished_batches_and_writes_no_sweep_file(tmp_path, capsys, monkeypatch):
    calls = []

    def execute(plan, progress):
        calls.append(plan.batch)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return runner.execute(plan, progress)
    monkeypatch.setattr(sw, "execute", execute)
    code = main(["sweep", "--net", "lenet", "--backends", "numpy", "--batch", "1,2", "--repeats", "1",
                 "--peak-gflops", "1", "--out", str(tmp_path / "s")])
    assert code == 130
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["lenet-batch1.json"]
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2].startswith("sweep stopped after batch 1") and err[-1].startswith("interrupted (SIGINT)")


def test_a_sweeps_time_left_is_for_every_batch_from_the_start(tmp_path, capsys, monkeypatch):
    from compare.commands import sweep as sweep_command
    expected, done = [], []

    class Recorder:
        def __init__(self, *args, **kwargs):
            pass

        def update(self, text):
            pass

        def expect(self, n):
            expected.append((len(done), n))

        def advance(self, n=1):
            done.append(n)

        def done(self):
            pass
    monkeypatch.setattr(sweep_command, "Progress", Recorder)
    assert main(["sweep", "--net", "lenet", "--backends", "numpy", "--batch", "1,2", "--repeats", "1",
                 "--peak-gflops", "1", "--out", str(tmp_path / "s")]) == 0, capsys.readouterr().err
    assert expected == [(0, 2)] and sum(done) == pytest.approx(2)   # both batches' steps, told before the first


# -- one real sweep ------------------------------------------------------------------

def test_a_real_sweep_on_this_machine_and_its_report(tmp_path, capsys, monkeypatch):
    backend_or_skip("morton")
    from backends.opencl.runtime import get_runtime
    # morton's largest buffer at batch 1 is f5's weights (192,000 bytes); at batch 3 c1's padded
    # im2col is larger: under this limit batch 3 does not fit (a backend in this process: the
    # limit is this process's)
    monkeypatch.setitem(get_runtime().info, "max_alloc_bytes", 200_000)
    # a peak with a bandwidth, so the roofline is drawn whatever this machine has cached
    monkeypatch.setattr(runner, "peak_for_run", lambda rt, override=None, progress=None: {
        "gflops": 50.0, "bandwidth_gbs": 10.0, "source": "given by the test"})
    out = tmp_path / "s"
    code = main(["sweep", "--net", "lenet", "--batch", "1,3", "--backends", "numpy,morton", "--repeats", "2",
                 "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert sorted(p.name for p in out.iterdir()) == ["lenet-batch1.json", "lenet-batch3.json", "sweep.json"]
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["schema"] == "clblast-compare/sweep" and sweep["schema_version"] == 1
    assert sweep["net"] == "lenet" and [(b["batch"], b["results"]) for b in sweep["batches"]] == [
        (1, "lenet-batch1.json"), (3, "lenet-batch3.json")]
    one, three = load_results(out / "lenet-batch1.json"), load_results(out / "lenet-batch3.json")
    assert one.sources["weights"] == three.sources["weights"]                              # same weights
    assert (one.sources["input"].seed, three.sources["input"].seed) == (1, 3)             # fresh input: seed + batch
    assert [b.check.status for b in one.backends] == ["PASS", "PASS"] and three.backends[0].check.status == "PASS"
    assert sw.does_not_fit(three.backend("morton"))

    assert main(["report", str(out / "sweep.json"), "--out", str(tmp_path / "rep")]) == 0
    page = next(p for p in (tmp_path / "rep").iterdir() if p.name.startswith("sweep-lenet-") and p.suffix == ".md")
    md = page.read_text() + (tmp_path / "rep" / "rooflines.md").read_text()
    per_image = _markdown_table(md, "## Time per image (ms)")
    assert per_image["1"] == [sr.fmt_per_image(b.timing.end_to_end.compute.median / 1) for b in one.backends]
    assert per_image["3"] == [sr.fmt_per_image(three.backends[0].timing.end_to_end.compute.median / 3), "does not fit"]
    c1 = one.net.layers[0]   # 1x32x32 in, 6x28x28 out, 156 parameters, float32
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines() if line.startswith("| c1 ")]
    assert rows[0][:3] == ["c1", "1", f"{c1.flops / (4 * (32 * 32 + 156 + 6 * 28 * 28)):.2f}"]
    pngs = [p for p in (tmp_path / "rep").iterdir() if p.suffix == ".png"]
    assert {p.name.split("-")[0] for p in pngs} == {"sweep", "roofline"}   # no speedup plot: no CLBlast backend
    assert all(p.read_bytes()[:8] == PNG for p in pngs)

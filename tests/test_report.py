"""Report tables rendered from a hand-made results file, compared exactly."""
import json

from compare.report import tables as rt

PAGE = "net-tiny-b1-test-gpu"   # the page of small_results()
from compare.report import render_report
from compare.results import RunResult, Samples, decode
from compare.results import load_results, write_results
from compare import analysis as an
from results_factory import small_results, small_results_dict, stats


def test_times_table():
    headers, rows = rt.times_table(small_results())
    assert headers == ["layer", "MFLOP", "numpy", "clblast", "vectorised"]
    assert rows == [["a", "2.0", "2.000", "4.000", "1.000"],
                    ["b", "1.0", "0.500", "2.000", "1.000"],
                    ["sum of layers", "3.0", "2.500", "6.000", "2.000"],
                    ["end to end (compute)", "", "2.500", "5.000", "1.250"]]


def test_speedup_over_clblast_with_geometric_mean():
    headers, rows = rt.speedup_table(small_results(), "clblast")
    assert headers == ["layer", "numpy", "vectorised"]
    # every sample of the hand-made file is the same, so each interval is one point
    assert rows == [["a", "2.00x [2.00, 2.00]", "4.00x [4.00, 4.00]"],
                    ["b", "4.00x [4.00, 4.00]", "2.00x [2.00, 2.00]"],
                    ["sum of layers", "2.40x", "3.00x"],
                    ["end to end (compute)", "2.00x [2.00, 2.00]", "4.00x [4.00, 4.00]"],
                    ["end to end (with transfers)", "1.83x [1.83, 1.83]", "3.14x [3.14, 3.14]"],
                    ["geometric mean of layers", "2.83x", "2.83x"]]


def test_best_clblast_is_the_fastest_clblast_backend_of_the_file():
    d = small_results_dict()
    faster = json.loads(json.dumps(d["backends"][1]))
    faster["name"] = "clblast-best"
    faster["timing"]["end_to_end"]["compute"] = stats(2.5)
    d["backends"].insert(2, faster)
    res = decode(RunResult, d)
    assert an.reference(res, an.BEST_CLBLAST).name == "clblast-best"
    assert an.reference_label(res, an.BEST_CLBLAST) == "CLBlast at its best (clblast-best)"
    assert an.baselines(res) == [an.BEST_CLBLAST, "clblast", "numpy"]
    headers, rows = rt.speedup_table(res, an.BEST_CLBLAST)
    assert headers == ["layer", "numpy", "clblast", "vectorised"]
    assert rows[3] == ["end to end (compute)", "1.00x [1.00, 1.00] no clear winner", "0.50x [0.50, 0.50]",
                       "2.00x [2.00, 2.00]"]
    # where the study's recipe is the fastest, the two tokens are one backend: one column
    d["backends"].pop(2)
    assert an.baselines(decode(RunResult, d)) == [an.BEST_CLBLAST, "numpy"]


def test_speedup_table_needs_its_reference():
    res = small_results()
    res.backends = [b for b in res.backends if b.name != "clblast"]
    assert rt.speedup_table(res, "clblast") is None


def test_utilisation_against_the_peak():
    headers, rows = rt.utilisation_table(small_results())
    # device type CPU: numpy (kind cpu) runs on it too; 2 MFLOP in 4 ms = 0.5 GFLOP/s = 5% of 10
    assert headers == ["layer", "GFLOP", "numpy %", "clblast %", "vectorised %"]
    assert rows == [["a", "0.002", "10.0", "5.0", "20.0"],
                    ["b", "0.001", "20.0", "5.0", "10.0"],
                    ["end to end (compute)", "0.003", "12.0", "6.0", "24.0"]]


def test_the_forms_chosen_at_prepare_with_their_share_of_the_peak():
    """Each candidate's share of the fp32 peak at the layer's direct FLOPs (a Winograd form's
    effective rate): 2 MFLOP in 0.4 ms = 5 GFLOP/s = 50% of 10; no share without a peak."""
    d = small_results_dict()
    d["backends"][2]["config"] = {"winograd": {"a": {
        "chosen": "F(2x2,3x3) GEMM 64x64 (8x8)",
        "ms": {"direct": 0.4, "F(2x2,3x3)": 0.8, "F(2x2,3x3) GEMM 64x64 (8x8)": 0.2}}}}
    res = decode(RunResult, d)
    headers, rows = rt.choices_table(res, res.backend("vectorised"))
    assert headers == ["layer", "chosen", "candidates (ms at prepare; in brackets % of fp32 peak at the "
                                          "layer's direct FLOPs)"]
    assert rows == [["a", "F(2x2,3x3) GEMM 64x64 (8x8)",
                     "direct 0.400 (50.0%), F(2x2,3x3) 0.800 (25.0%), F(2x2,3x3) GEMM 64x64 (8x8) 0.200 (100.0%)"]]
    res.peak = None
    headers, rows = rt.choices_table(res, res.backend("vectorised"))
    assert headers[-1] == "candidates (ms at prepare)" and rows[0][-1].startswith("direct 0.400, F(2x2,3x3) 0.800,")


def test_cpu_peers_are_left_out_of_a_gpu_utilisation():
    res = small_results()
    res.device.type = "GPU"
    headers, _ = rt.utilisation_table(res)
    assert headers == ["layer", "GFLOP", "clblast %", "vectorised %"]


def test_a_gpu_peer_on_the_same_device_is_in_the_utilisation():
    d = small_results_dict()
    d["device"]["type"] = "GPU"
    d["backends"][3] = {**d["backends"][2], "name": "torch", "uses_opencl": False,
                        "info": {"kind": "cuda", "device": d["device"]["name"]}}
    res = decode(RunResult, d)
    headers, rows = rt.utilisation_table(res)
    assert headers == ["layer", "GFLOP", "clblast %", "vectorised %", "torch %"]
    assert rows[-1][-1] == rows[-1][-2]   # the same timings as vectorised's


def test_step_tables_like_the_seed():
    res = small_results()
    clblast = res.backends[1]
    assert rt.wall_kernel_table(res, clblast) == (
        ["layer", "wall ms", "device ms", "overhead ms", "overhead %"],
        [["a", "4.000", "3.000", "1.000", "25"], ["b", "2.000", "1.000", "1.000", "50"],
         ["total", "6.000", "4.000", "2.000", "33"]])
    span = "routine span (includes host gaps between its kernels)"
    assert rt.steps_table(res, clblast)[1] == [
        ["a", "xCOPY", "0.500", span, "3.000"], ["", "xIM2COL", "1.000", span, ""],
        ["", "xGEMM", "1.500", span, ""],
        ["b", "xCOPY", "0.250", span, "1.000"], ["", "xGEMV", "0.750", span, ""]]
    assert rt.useful_time_table(res, clblast)[1] == [
        ["a", "1.500", "1.500", "3.000", "50%"], ["b", "0.750", "0.250", "1.000", "75%"],
        ["total", "2.250", "1.750", "4.000", "56%"]]
    # one step per layer: no breakdown to show
    assert rt.steps_table(res, res.backends[2]) is None
    assert rt.wall_kernel_table(res, res.backends[0]) is None


def test_correctness_table_shows_unavailable_backends_with_reason():
    res = small_results()
    res.backends[2].check.status = "FAIL"
    headers, rows = rt.correctness_table(res)
    assert rows[1] == ["clblast", "OK", "PASS", "1.0e-07", "2.0e-06", "b 1.0e-07", "100%", ""]
    assert rows[2][2] == "FAIL"
    assert rows[3] == ["torch", "UNAVAILABLE", "—", "—", "—", "—", "—", "PyTorch is not installed"]


def test_published_mali_column_is_labelled():
    d = small_results_dict()
    d["net"]["name"] = "lenet"
    d["net"]["layers"] = [{"name": "c1", "kind": "conv", "flops": 1}, {"name": "s2", "kind": "subsample", "flops": 1}]
    res = decode(RunResult, d)
    headers, rows = rt.times_table(res, published=True)
    assert headers[-2:] == ["clblast (Rovder 2018, Mali-T628, published)", "baseline (Rovder 2018, Mali-T628, published)"]
    assert rows[0][-2:] == ["721.140", "34.810"]
    assert rows[2][-2:] == ["1300.9", "52.110"]   # 721.14 + 579.78: the sum covers only the layers in this file


def test_cross_device_table_has_a_column_per_file():
    a, b = small_results("GPU one"), small_results("GPU two", "2026-11-02T00:00:00+00:00")
    b.backends[2].timing.end_to_end.compute = decode(Samples, stats(2.5))
    headers, rows = rt.cross_device_table([a, b])
    assert headers == ["backend", "GPU one (2026-11-01)", "GPU two (2026-11-02)"]
    assert rows[1] == ["clblast", "5.000", "5.000"]
    assert rows[2] == ["vectorised", "1.250 (4.00x [4.00, 4.00])", "2.500 (2.00x [2.00, 2.00])"]
    assert rows[3] == ["torch", "—", "—"]


def _markdown_table(md: str, heading: str) -> dict[str, list[str]]:
    """The first table after `heading` in a Markdown report, as row name -> cells."""
    lines = md[md.index(heading):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def test_rendered_tables_hold_the_figures_of_the_json(tmp_path):
    # the report is read back from a results file, and its speedups and times
    # are checked against the medians in that file, worked out here by hand
    d = small_results_dict()
    d["backends"][2]["timing"]["layers"][0]["wall"] = stats(0.8)
    d["backends"][2]["timing"]["end_to_end"]["compute"] = stats(1.6)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    render_report([load_results(path)], [str(path)], str(tmp_path / "out"), baselines=["clblast"])
    md = (tmp_path / "out" / f"{PAGE}.md").read_text()
    speed = _markdown_table(md, "## Speedup over clblast")
    clb = d["backends"][1]["timing"]
    assert speed["a"][1].startswith(f"{clb['layers'][0]['wall']['median'] / 0.8:.2f}x")      # 4.0 / 0.8 = 5.00x
    assert speed["end to end (compute)"][1].startswith(f"{clb['end_to_end']['compute']['median'] / 1.6:.2f}x ")
    assert speed["geometric mean of layers"][1] == f"{(4.0 / 0.8 * 2.0 / 1.0) ** 0.5:.2f}x"
    times = _markdown_table(md, "## Per-layer times (ms)")
    assert times["a"] == ["2.0", "2.000", "4.000", "0.800"]
    assert "Speedup over numpy" not in md   # only the baselines asked for
    assert "3.0" in _markdown_table(md, "## Transfers and one-off costs")["vectorised"]   # memory MiB


def test_a_results_file_round_trips_through_the_typed_model(tmp_path):
    path = tmp_path / "r.json"
    write_results(path, small_results())
    assert load_results(path) == small_results()


def test_render_writes_an_index_and_a_page_per_file_in_markdown_and_html_with_plots(tmp_path):
    res = small_results()
    path = tmp_path / "r.json"
    write_results(path, res)
    written = render_report([res, small_results("Other GPU")], [str(path), str(path)], str(tmp_path / "out"))
    index = (tmp_path / "out" / "report.md").read_text()
    assert index.index("## The answer") < index.index("summary.png") < index.index("## Headline")
    assert f"]({PAGE}.md)" in index and "](net-tiny-b1-other-gpu.md)" in index and "tiny across devices" in index
    assert "the vectorised backend" in index and index.count("the vectorised backend") == 1   # summaries once
    md = (tmp_path / "out" / f"{PAGE}.md").read_text()
    html = (tmp_path / "out" / f"{PAGE}.html").read_text()
    for heading in ("Per-layer times (ms)", "Speedup over CLBlast at its best (clblast)", "Speedup over numpy",
                    "Device utilisation",
                    "Correctness against the float64 oracle", "table 5.3", "table 6.2", "table 7.3"):
        assert heading in md, heading
    assert "<table>" in html and "Speedup over CLBlast at its best" in html
    assert f'href="{PAGE}.html"' in (tmp_path / "out" / "report.html").read_text()
    pngs = [p for p in written if p.endswith(".png")]
    assert len(pngs) == 7   # the summary; times, speedups, utilisation for each of the two files
    for png in pngs:
        with open(png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_headline_holds_each_file_against_its_fastest_clblast(tmp_path):
    # two files: in the second, clblast-best is the fastest CLBlast backend and is the reference there
    first = small_results_dict()
    second = small_results_dict()
    best = json.loads(json.dumps(second["backends"][1]))
    best["name"] = "clblast-best"
    best["timing"]["end_to_end"]["compute"] = stats(2.5)
    second["backends"].insert(2, best)
    second["net"]["name"], second["net"]["batch"] = "other", 8
    paths = []
    for i, d in enumerate((first, second)):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(d))
    render_report([load_results(p) for p in paths], [str(p) for p in paths], str(tmp_path / "out"))
    alone = (tmp_path / "out" / "headline.md").read_text()
    rows = _markdown_table(alone, "| backend")
    header = alone.splitlines()[alone.splitlines().index(next(l for l in alone.splitlines() if l.startswith("|")))]
    assert "tiny batch 1 ms" in header and "vs CLBlast at its best (clblast)" in header
    assert "other batch 8 ms" in header and "vs CLBlast at its best (clblast-best)" in header
    assert rows["clblast"] == ["5.000", "1.00x (reference)", "5.000", "0.50x [0.50, 0.50]"]
    assert rows["vectorised"] == ["1.250", "4.00x [4.00, 4.00]", "1.250", "2.00x [2.00, 2.00]"]
    assert rows["clblast-best"] == ["—", "—", "2.500", "1.00x (reference)"]   # not in the first file
    assert rows["torch"] == ["UNAVAILABLE", "—", "UNAVAILABLE", "—"]
    assert _markdown_table((tmp_path / "out" / "report.md").read_text(), "## Headline") == rows


def test_modes_table_gives_the_used_modes_speedup_over_each_other_mode_with_its_interval():
    from compare.tables import modes_rows
    d = small_results_dict()
    clb = d["backends"][1]
    tuned = Samples.of([3.9, 4.0, 4.0, 4.1, 4.05]).__dict__
    database = Samples.of([4.9, 5.0, 5.0, 5.1, 5.05]).__dict__
    clb["mode"] = "tuned"
    clb["modes"] = [{"name": "tuned", "status": "OK", "rel_l2": 1e-7, "compute": tuned},
                    {"name": "database", "status": "OK", "rel_l2": 1e-7, "compute": database},
                    {"name": "broken", "status": "FAILED", "reason": "no"}]
    headers, rows = modes_rows(decode(RunResult, d))
    col = headers.index("used mode's speedup over it")
    by_mode = {r[1]: r[col] for r in rows}
    assert by_mode["tuned"] == "—" and by_mode["broken"] == "—"
    low, high = (float(x) for x in by_mode["database"].split("[")[1].rstrip("]").split(","))
    assert by_mode["database"].startswith("1.25x") and 1.0 < low <= 1.25 <= high


def test_the_headline_says_each_nets_mode_where_a_backend_used_different_ones(tmp_path):
    first, second = small_results_dict(), small_results_dict()
    first["backends"][1]["mode"], second["backends"][1]["mode"] = "database", "tuned"
    second["net"]["name"] = "other"
    paths = []
    for i, d in enumerate((first, second)):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(d))
    render_report([load_results(p) for p in paths], [str(p) for p in paths], str(tmp_path / "out"))
    rows = _markdown_table((tmp_path / "out" / "headline.md").read_text(), "| backend")
    assert rows["clblast"] == ["5.000 (database)", "1.00x (reference)", "5.000 (tuned)", "1.00x (reference)"]
    assert rows["vectorised"][0] == "1.250"   # one label for both: no mode repeated

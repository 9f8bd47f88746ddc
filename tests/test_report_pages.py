"""Every page of a report, rendered here and committed: each image a PNG that is there, each link to a file of
the report there, and the HTML written by a Markdown renderer (no `**` or backticks left in its text)."""
import importlib.util
from pathlib import Path

import pytest

from compare.report import render_report
from compare.report.pagecheck import check_folder, check_page
from compare.results import write_results
from results_factory import small_results

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted(p.parent for p in (ROOT / "reports").rglob("report.html"))


def test_a_fresh_report_passes_the_page_check(tmp_path):
    res, other = small_results(), small_results("Other GPU")
    path = tmp_path / "r.json"
    write_results(path, res)
    render_report([res, other], [str(path), str(path)], str(tmp_path / "out"))
    pages, images, problems = check_folder(tmp_path / "out")
    assert problems == [] and pages >= 6 and images >= 4
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<strong>Test GPU, tiny batch 1:</strong>" in html and "<code>vectorised</code>" in html
    assert "<li>Hand-written" in html and '<img src="summary.png"' in html


@pytest.mark.parametrize("folder", COMMITTED, ids=[str(f.relative_to(ROOT)) for f in COMMITTED])
def test_the_committed_reports_pass_the_page_check(folder):
    pages, images, problems = check_folder(folder)
    assert problems == [] and pages and images


def test_the_check_finds_a_missing_image_a_dead_link_and_markdown_left_in_html(tmp_path):
    (tmp_path / "fine.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 8)
    (tmp_path / "fake.png").write_text("not an image")
    page = tmp_path / "p.html"
    page.write_text("<p><img src='fine.png'><img src='gone.png'><img src='fake.png'> <a href='nowhere.html'>x</a> "
                    "<a href='https://example.org/'>out</a> **CLBlast wins** <code>`kept`</code></p>")
    images, links, problems = check_page(page)
    assert (images, links) == (3, 2)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "Markdown left in its text: **C", "image gone.png, which is not there", "image fake.png is not a PNG file",
        "link to nowhere.html, which is not there"]


def test_the_browser_check_says_in_one_line_what_it_lacks(capsys, tmp_path):
    spec = importlib.util.spec_from_file_location("check_report_html", ROOT / "scripts" / "check_report_html.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    res = small_results()
    render_report([res], [str(tmp_path / "r.json")], str(tmp_path / "out"))
    missing = script.lacking()
    if missing:   # this machine has no browser: the plain check still runs, and one line says what is lacking
        assert script.main([str(tmp_path / "out")]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith("ok ") and out[-1] == f"browser check not run: this machine lacks {missing}"
    else:
        assert script.main([str(tmp_path / "out")]) == 0

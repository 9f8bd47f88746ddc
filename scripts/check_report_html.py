"""Checks rendered reports: first without a browser (every page, every image a PNG that is there, every link
to a file of the report there, no Markdown left unrendered: compare/report/pagecheck.py, which `compare report`
and the test suite run too), then, where a headless Chromium and selenium are installed, loads every page in
it and says whether it loaded without errors in the browser's console and every image was drawn.
Exit 1 when a page fails; where the browser is lacking, one line says what, after the check without it.

    .venv/bin/python scripts/check_report_html.py reports/nvidia-h100 [reports/pocl ...]

The browser's part needs Debian's chromium and chromium-driver and the selenium package.
"""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compare.report.pagecheck import check_folder  # noqa: E402

CHECK = """
const images = Array.from(document.images);
const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
return [images.length, broken];
"""
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def lacking() -> str | None:
    """What the browser's check needs and this machine lacks, in a few words; None when nothing."""
    missing = [what for what, there in (("the selenium package", importlib.util.find_spec("selenium")),
                                        (f"chromium ({CHROMIUM})", Path(CHROMIUM).is_file() or shutil.which("chromium")),
                                        (f"chromium-driver ({DRIVER})", Path(DRIVER).is_file()))
               if not there]
    return ", ".join(missing) or None


def in_browser(folders: list[Path]) -> list[str]:
    from selenium import webdriver
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=webdriver.ChromeService(DRIVER), options=options)
    problems = []
    try:
        for folder in folders:
            for page in sorted(folder.glob("*.html")):
                driver.get(page.resolve().as_uri())
                n_images, broken = driver.execute_script(CHECK)
                errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
                print(f"{'ok  ' if not broken and not errors else 'FAIL'} {page} in the browser ({n_images} images)")
                problems += [f"{page}: image {b} was not drawn" for b in broken]
                problems += [f"{page}: console: {e}" for e in errors]
    finally:
        driver.quit()
    return problems


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv]
    problems = []
    for folder in folders:
        if not folder.is_dir():
            print(f"error: {folder} is not a folder of a rendered report", file=sys.stderr)
            return 2
        pages, images, found = check_folder(folder)
        print(f"{'ok  ' if not found else 'FAIL'} {folder}: {pages} pages, {images} images, without a browser")
        problems += found
    missing = lacking()
    if missing:
        print(f"browser check not run: this machine lacks {missing}")
    else:
        problems += in_browser(folders)
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["report"]))

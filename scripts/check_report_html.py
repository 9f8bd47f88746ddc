"""Loads every page of a rendered report in a headless Chromium and says, per page, whether it loaded
without errors in the browser's console and every image and link to another page of the report resolved.
Exit 1 when any page fails.

    .venv/bin/python scripts/check_report_html.py reports/nvidia-h100 [reports/pocl ...]

Needs Debian's chromium and chromium-driver and the selenium package (`pip install selenium`): a check for
whoever re-renders the committed reports, not part of the test suite.
"""
from __future__ import annotations

import sys
from pathlib import Path

CHECK = """
const images = Array.from(document.images);
const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
const pages = Array.from(document.querySelectorAll('a[href$=".html"]')).map(a => a.getAttribute('href'));
return [images.length, broken, pages];
"""


def check(folder: Path, driver) -> list[str]:
    problems = []
    for page in sorted(folder.glob("*.html")):
        driver.get(page.resolve().as_uri())
        n_images, broken, links = driver.execute_script(CHECK)
        errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        missing = [link for link in links if not (folder / link).is_file()]
        ok = not broken and not errors and not missing
        print(f"{'ok  ' if ok else 'FAIL'} {page} ({n_images} images, {len(links)} links to pages)")
        problems += [f"{page}: image {b} did not load" for b in broken]
        problems += [f"{page}: console: {e}" for e in errors]
        problems += [f"{page}: link to {m}, which is not there" for m in missing]
    return problems


def main(argv: list[str]) -> int:
    from selenium import webdriver
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=webdriver.ChromeService("/usr/bin/chromedriver"), options=options)
    try:
        problems = [p for folder in argv for p in check(Path(folder), driver)]
    finally:
        driver.quit()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["report"]))

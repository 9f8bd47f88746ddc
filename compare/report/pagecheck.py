"""The check of a rendered report that needs no browser: every page (HTML
and Markdown) read, every image it shows a PNG file that is there, every
link to a file of the report there, and no Markdown left unrendered in an
HTML page's text (`**`, backticks).  `compare report` runs it on what it
wrote; scripts/check_report_html.py adds a headless browser's look where
one is installed."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

PNG = b"\x89PNG\r\n\x1a\n"
MD_LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)\)")
# Markdown that a renderer should have turned into markup: bold, or a code span
LEFT_OVER = re.compile(r"\*\*\S|`[^`\s][^`]*`")


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.text: list[str] = []
        self._verbatim = 0   # inside <code> or <pre>: Markdown's characters are meant there

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src") or "")
        elif tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        elif tag in ("code", "pre"):
            self._verbatim += 1

    def handle_endtag(self, tag):
        if tag in ("code", "pre") and self._verbatim:
            self._verbatim -= 1

    def handle_data(self, data):
        if not self._verbatim:
            self.text.append(data)


def _local(target: str) -> str | None:
    """The file a link or image names inside the report, or None for a link elsewhere (a web address, an
    anchor on the same page)."""
    parsed = urlparse(target)
    if parsed.scheme or parsed.netloc or not parsed.path:
        return None
    return unquote(parsed.path)


def _target(page: Path, target: str, image: bool) -> str | None:
    """What is wrong with one image or link of `page`, or None."""
    path = _local(target)
    if path is None:
        return None if not image else f"image {target} is not a file of the report"
    found = (page.parent / path)
    if not found.is_file():
        return f"{'image' if image else 'link to'} {target}, which is not there"
    if image and found.suffix.lower() == ".png":
        with open(found, "rb") as f:
            if f.read(8) != PNG:
                return f"image {target} is not a PNG file"
    return None


def check_page(page: Path) -> tuple[int, int, list[str]]:
    """(images, links, problems) of one page."""
    text = page.read_text(encoding="utf-8")
    if page.suffix == ".html":
        parsed = _Page()
        parsed.feed(text)
        images, links = parsed.images, parsed.links
        left = sorted({m.group(0)[:30] for m in LEFT_OVER.finditer(" ".join(parsed.text))})
        problems = [f"Markdown left in its text: {', '.join(left[:3])}"] if left else []
    else:
        found = MD_LINK.findall(text)
        images = [t for bang, t in found if bang]
        links = [t for bang, t in found if not bang]
        problems = []
    problems += [p for t in images if (p := _target(page, t, True))]
    problems += [p for t in links if (p := _target(page, t, False))]
    return len(images), len(links), [f"{page}: {p}" for p in problems]


def check_folder(folder: str | Path) -> tuple[int, int, list[str]]:
    """(pages, images, problems) of every page of a rendered report: each HTML page and the Markdown page
    beside it (notes written by hand in the folder are not the report's)."""
    html_pages = sorted(Path(folder).glob("*.html"))
    pages = html_pages + [p.with_suffix(".md") for p in html_pages if p.with_suffix(".md").is_file()]
    images, problems = 0, []
    for page in pages:
        n_images, _, found = check_page(page)
        images += n_images
        problems += found
    return len(pages), images, problems

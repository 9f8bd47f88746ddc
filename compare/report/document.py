"""A report page as a list of blocks, rendered to Markdown, and to HTML from
that Markdown by markdown-it-py (CommonMark with tables), so what the
Markdown says in bold or as code reads so in the browser too.  A link names
another page by its stem: `.md` in Markdown, `.html` in HTML, so each
format's pages link to each other."""
from __future__ import annotations

import html

from tabulate import tabulate

STYLE = ("body{font-family:sans-serif;max-width:72em;margin:auto;padding:0 1em}table{border-collapse:collapse;"
         "margin:0.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
         "td:first-child,th:first-child{text-align:left}img{max-width:100%}code{font-size:90%}")


def _cell(value) -> str:
    """A table cell's text as Markdown keeps it in its cell: a '|' escaped, a line break a space."""
    return str(value).replace("|", "\\|").replace("\n", " ")


class Document:
    def __init__(self, title: str):
        self.title = title
        self.blocks: list[tuple] = []

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("heading", level, text))

    def para(self, text: str) -> None:
        self.blocks.append(("para", text))

    def table(self, table, caption: str | None = None) -> None:
        """`table` is (headers, rows) or None (then nothing is added)."""
        if table is not None:
            self.blocks.append(("table", table[0], table[1], caption))

    def bullets(self, items: list[str]) -> None:
        if items:
            self.blocks.append(("bullets", items))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))

    def image(self, filename: str, alt: str) -> None:
        self.blocks.append(("image", filename, alt))

    def links(self, items: list[tuple[str, str, str]]) -> None:
        """A list of (text, page stem, what is there) links to other pages of the report."""
        if items:
            self.blocks.append(("links", items))

    def to_markdown(self, pages: str = ".md") -> str:
        """The page in Markdown; links to other pages of the report end in `pages`."""
        out = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "heading":
                out += ["#" * block[1] + " " + block[2], ""]
            elif kind == "para":
                out += [block[1], ""]
            elif kind == "bullets":
                out += [f"- {item}" for item in block[1]] + [""]
            elif kind == "table":
                _, headers, rows, caption = block
                out += [tabulate([[_cell(c) for c in r] for r in rows], headers=[_cell(h) for h in headers],
                                 tablefmt="github", disable_numparse=True), ""]
                if caption:
                    out += [f"*{caption}*", ""]
            elif kind == "code":
                fence = "````" if "```" in block[1] else "```"
                out += [fence, block[1], fence, ""]
            elif kind == "image":
                out += [f"![{block[2]}]({block[1]})", ""]
            elif kind == "links":
                out += [f"- [{text}]({stem}{pages})" + (f": {what}" if what else "") for text, stem, what in block[1]]
                out += [""]
        return "\n".join(out)

    def to_html(self) -> str:
        """The same page in HTML: its Markdown rendered by markdown-it-py, links to the other HTML pages."""
        from markdown_it import MarkdownIt
        body = MarkdownIt("commonmark", {"html": False}).enable("table").render(self.to_markdown(".html"))
        return "\n".join(["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
                          f"<title>{html.escape(self.title)}</title>", f"<style>{STYLE}</style>", "</head><body>",
                          body, "</body></html>"]) + "\n"
